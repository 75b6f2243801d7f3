// SPDX-License-Identifier: MIT
// wire_env.c: translation of environment requests (scene, materials, media, settings,
// bodies, objects, joints, state, step, raycast) from protobuf-c messages into core calls, and
// of their results into replies. Runs on the environment thread.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/mem.h"
#include "net/wire_pb.h"

// Outcome of one request: a code, its detail, and (on success) an optional reply body.
typedef struct outcome {
  int code;
  err_msg_t msg;
  Sensim__V1__Envelope reply;
} outcome_t;


static void vec3_or(const Sensim__V1__Vec3* v, double dx, double dy, double dz, double dest[3]) {
  if (!v) {
    dest[0] = dx;
    dest[1] = dy;
    dest[2] = dz;
    return;
  }
  dest[0] = v->has_x ? v->x : 0.0;
  dest[1] = v->has_y ? v->y : 0.0;
  dest[2] = v->has_z ? v->z : 0.0;
}


// Pose from the wire: absent position = origin, absent orientation = identity. The core
// validates the quaternion (finite, non-zero norm).
static pose_t pose_from(const Sensim__V1__Pose* p) {
  pose_t out = xform_identity();
  if (!p) {
    return out;
  }
  vec3_or(p->position, 0, 0, 0, out.p);
  if (p->orientation) {
    const Sensim__V1__Quat* q = p->orientation;
    out.q[0] = q->has_w ? q->w : 0.0;
    out.q[1] = q->has_x ? q->x : 0.0;
    out.q[2] = q->has_y ? q->y : 0.0;
    out.q[3] = q->has_z ? q->z : 0.0;
  }
  return out;
}


static const char* str_or_null(const char* s) {
  return s && s[0] ? s : NULL;
}


static int do_create_mesh(const Sensim__V1__CreateMesh* m, env_t* e, outcome_t* o) {
  mesh_desc_t d = {0};
  d.id = m->has_id ? m->id : 0;
  d.vertices = m->has_vertices ? m->vertices.data : NULL;
  d.vertices_len = m->has_vertices ? m->vertices.len : 0;
  d.indices = m->has_indices ? m->indices.data : NULL;
  d.indices_len = m->has_indices ? m->indices.len : 0;
  d.material_ids = m->has_material_ids ? m->material_ids.data : NULL;
  d.material_ids_len = m->has_material_ids ? m->material_ids.len : 0;
  d.name = str_or_null(m->name);
  return env_create_mesh(e, &d, &o->msg);
}


static int do_create_primitive(const Sensim__V1__CreatePrimitive* m, env_t* e, outcome_t* o) {
  prim_desc_t d = {0};
  d.id = m->has_id ? m->id : 0;
  d.name = str_or_null(m->name);
  switch (m->shape_case) {
    case SENSIM__V1__CREATE_PRIMITIVE__SHAPE_BOX:
      d.kind = SCENE_PRIM_BOX;
      if (!m->box->half_extents) {
        return err_set(&o->msg, ERR_INVAL, "box.half_extents is not set");
      }
      vec3_or(m->box->half_extents, 0, 0, 0, d.size);
      break;
    case SENSIM__V1__CREATE_PRIMITIVE__SHAPE_SPHERE:
      d.kind = SCENE_PRIM_SPHERE;
      d.size[0] = m->sphere->has_radius ? m->sphere->radius : 0.0;
      break;
    case SENSIM__V1__CREATE_PRIMITIVE__SHAPE_CYLINDER:
      d.kind = SCENE_PRIM_CYLINDER;
      d.size[0] = m->cylinder->has_radius ? m->cylinder->radius : 0.0;
      d.size[1] = m->cylinder->has_half_length ? m->cylinder->half_length : 0.0;
      break;
    case SENSIM__V1__CREATE_PRIMITIVE__SHAPE_CAPSULE:
      d.kind = SCENE_PRIM_CAPSULE;
      d.size[0] = m->capsule->has_radius ? m->capsule->radius : 0.0;
      d.size[1] = m->capsule->has_half_length ? m->capsule->half_length : 0.0;
      break;
    case SENSIM__V1__CREATE_PRIMITIVE__SHAPE_PLANE:
      d.kind = SCENE_PRIM_PLANE;
      d.size[0] = m->plane->has_half_size ? m->plane->half_size : 0.0;  // 0 = unbounded
      break;
    default:
      return err_set(&o->msg, ERR_INVAL, "shape is not set (box, sphere, cylinder, capsule or "
                                         "plane)");
  }
  return env_create_primitive(e, &d, &o->msg);
}


static int do_set_material(const Sensim__V1__SetMaterial* m, env_t* e, outcome_t* o) {
  surface_material_t s;
  switch (m->model_case) {
    case SENSIM__V1__SET_MATERIAL__MODEL_LAMBERTIAN:
      s = material_default_lambertian();
      s.reflectance = m->lambertian->reflectance;  // proto default 0.8 when absent
      break;
    case SENSIM__V1__SET_MATERIAL__MODEL_TWO_LAYER: {
      const Sensim__V1__TwoLayer* t = m->two_layer;
      s = material_default_two_layer();
      s.n_re = t->refractive_index;
      s.n_im = t->has_extinction_coefficient ? t->extinction_coefficient : 0.0;
      s.sigma_b = t->specular_roughness;
      s.reflectance = t->diffuse_reflectance;
      s.sigma_on = t->diffuse_roughness;
      break;
    }
    default:
      return err_set(&o->msg, ERR_INVAL, "model is not set (lambertian or two_layer)");
  }
  return env_set_material(e, m->has_id ? m->id : 0, &s, str_or_null(m->name), &o->msg);
}


static int do_set_ambient(const Sensim__V1__SetAmbient* m, env_t* e, outcome_t* o) {
  ambient_material_t a;
  int rc;
  switch (m->medium_case) {
    case SENSIM__V1__SET_AMBIENT__MEDIUM_CUSTOM: {
      const Sensim__V1__AmbientMaterial* c = m->custom;
      a.attenuation = c->attenuation;
      a.refractive_index = c->refractive_index;
      a.gamma_shape = c->return_gamma_shape;
      a.gamma_scale = c->return_gamma_scale;
      a.return_scaling = c->return_probability_scaling;
      a.backscatter = c->atmospheric_backscatter;
      rc = 0;
      break;
    }
    case SENSIM__V1__SET_AMBIENT__MEDIUM_CLEAR_AIR:
      rc = ambient_clear_air(m->clear_air->has_visibility ? m->clear_air->visibility : 0.0, &a,
                             &o->msg);
      break;
    case SENSIM__V1__SET_AMBIENT__MEDIUM_FOG:
      rc = ambient_fog(m->fog->has_visibility ? m->fog->visibility : 0.0, &a, &o->msg);
      break;
    case SENSIM__V1__SET_AMBIENT__MEDIUM_RAIN:
      rc = ambient_rain(m->rain->has_rate ? m->rain->rate : 0.0, &a, &o->msg);
      break;
    case SENSIM__V1__SET_AMBIENT__MEDIUM_SNOW:
      rc = ambient_snow(m->snow->has_rate ? m->snow->rate : 0.0, &a, &o->msg);
      break;
    default:
      return err_set(&o->msg, ERR_INVAL,
                     "medium is not set (custom, clear_air, fog, rain or snow)");
  }
  if (rc) {
    return rc;
  }
  return env_set_medium(e, m->has_id ? m->id : 0, &a, &o->msg);
}


static int do_set_environment(const Sensim__V1__SetEnvironment* m, env_t* e, outcome_t* o) {
  env_settings_t s = {0};
  if (m->gravity) {
    s.has_gravity = 1;
    vec3_or(m->gravity, 0, 0, 0, s.gravity);
  }
  if (m->magnetic_field) {
    s.has_magnetic_field = 1;
    vec3_or(m->magnetic_field, 0, 0, 0, s.magnetic_field);
  }
  env_dipole_t* dipoles = NULL;
  if (m->n_dipoles > 0 && !(m->has_replace_dipoles && m->replace_dipoles)) {
    return err_set(&o->msg, ERR_INVAL,
                   "dipoles given without replace_dipoles = true (the list is replaced whole)");
  }
  if (m->has_replace_dipoles && m->replace_dipoles) {
    s.replace_dipoles = 1;
    if (m->n_dipoles > 0) {
      dipoles = mem_calloc(m->n_dipoles, sizeof(*dipoles));
      if (!dipoles) {
        return err_set(&o->msg, ERR_NOMEM, "out of memory");
      }
      for (size_t i = 0; i < m->n_dipoles; i++) {
        const Sensim__V1__MagneticDipole* d = m->dipoles[i];
        vec3_or(d->moment, 0, 0, 0, dipoles[i].moment);
        vec3_or(d->position, 0, 0, 0, dipoles[i].position);
        dipoles[i].body_id = d->has_body_id ? d->body_id : 0;
      }
    }
    s.dipoles = dipoles;
    s.ndipole = (uint32_t)m->n_dipoles;
  }
  if (m->has_seed) {
    s.has_seed = 1;
    s.seed = m->seed;
  }
  if (m->has_freeze_objects) {
    s.has_freeze_objects = 1;
    s.freeze_objects = m->freeze_objects;
  }
  int rc = env_set_settings(e, &s, &o->msg);
  mem_free(dipoles);
  return rc;
}


static int do_create_body(const Sensim__V1__CreateBody* m, env_t* e, outcome_t* o) {
  body_desc_t d = {0};
  d.id = m->has_id ? m->id : 0;
  d.pose = pose_from(m->pose);
  vec3_or(m->linear_velocity, 0, 0, 0, d.linear_velocity);
  vec3_or(m->angular_velocity, 0, 0, 0, d.angular_velocity);
  vec3_or(m->center_of_mass, 0, 0, 0, d.center_of_mass);
  d.name = str_or_null(m->name);
  return env_create_body(e, &d, &o->msg);
}


static int do_create_object(const Sensim__V1__CreateObject* m, env_t* e, outcome_t* o) {
  object_desc_t d = {0};
  d.id = m->has_id ? m->id : 0;
  d.geometry_id = m->has_geometry_id ? m->geometry_id : 0;
  d.body_id = m->has_body_id ? m->body_id : 0;
  d.local_pose = pose_from(m->local_pose);
  vec3_or(m->scale, 1, 1, 1, d.scale);
  d.material_id = m->has_material_id ? m->material_id : 0;
  d.label = m->has_label ? m->label : 0;
  d.medium_id = m->has_medium_id ? m->medium_id : 0;
  d.name = str_or_null(m->name);
  return env_create_object(e, &d, &o->msg);
}


_Static_assert((int)SENSIM__V1__JOINT_TYPE__JOINT_REVOLUTE == (int)JOINT_TYPE_REVOLUTE &&
                   (int)SENSIM__V1__JOINT_TYPE__JOINT_PRISMATIC == (int)JOINT_TYPE_PRISMATIC,
               "wire and core joint types share their numbers");


static int do_create_joint(const Sensim__V1__CreateJoint* m, env_t* e, outcome_t* o) {
  joint_desc_t d = {0};
  d.id = m->has_id ? m->id : 0;
  d.type = m->has_type ? (joint_type_t)m->type : JOINT_TYPE_REVOLUTE;  // the core checks it
  d.position = m->has_position ? m->position : 0.0;
  d.name = str_or_null(m->name);
  return env_create_joint(e, &d, &o->msg);
}


static int do_remove(const Sensim__V1__Remove* m, env_t* e, outcome_t* o) {
  static const env_entity_t kinds[] = {
      [SENSIM__V1__ENTITY_KIND__ENTITY_GEOMETRY] = ENV_ENTITY_GEOMETRY,
      [SENSIM__V1__ENTITY_KIND__ENTITY_MATERIAL] = ENV_ENTITY_MATERIAL,
      [SENSIM__V1__ENTITY_KIND__ENTITY_MEDIUM] = ENV_ENTITY_MEDIUM,
      [SENSIM__V1__ENTITY_KIND__ENTITY_BODY] = ENV_ENTITY_BODY,
      [SENSIM__V1__ENTITY_KIND__ENTITY_OBJECT] = ENV_ENTITY_OBJECT,
      [SENSIM__V1__ENTITY_KIND__ENTITY_JOINT] = ENV_ENTITY_JOINT,
      [SENSIM__V1__ENTITY_KIND__ENTITY_SENSOR] = ENV_ENTITY_SENSOR,
  };
  int k = m->has_kind ? (int)m->kind : 0;
  if (k <= 0 || k >= (int)(sizeof(kinds) / sizeof(kinds[0]))) {
    return err_set(&o->msg, ERR_INVAL, "kind is not set or unknown");
  }
  return env_remove(e, kinds[k], m->has_id ? m->id : 0, &o->msg);
}


static int do_update_state(const Sensim__V1__UpdateState* m, env_t* e, outcome_t* o) {
  if (!m->has_time) {
    return err_set(&o->msg, ERR_INVAL, "time is not set");
  }
  size_t nb = m->n_body_ids;
  if (m->n_body_poses != 7 * nb) {
    return err_set(&o->msg, ERR_INVAL,
                   "body_poses has %zu values, expected 7 per body (%zu body_ids)",
                   m->n_body_poses, nb);
  }
  if (m->n_body_velocities != 0 && m->n_body_velocities != 6 * nb) {
    return err_set(&o->msg, ERR_INVAL,
                   "body_velocities has %zu values, expected 0 or 6 per body (%zu body_ids)",
                   m->n_body_velocities, nb);
  }
  if (m->n_joint_positions != m->n_joint_ids) {
    return err_set(&o->msg, ERR_INVAL, "joint_positions has %zu values for %zu joint_ids",
                   m->n_joint_positions, m->n_joint_ids);
  }
  env_state_update_t u = {0};
  u.time = m->time;
  u.nbody = (uint32_t)nb;
  u.body_ids = m->body_ids;
  u.body_poses = m->body_poses;
  u.body_velocities = m->n_body_velocities ? m->body_velocities : NULL;
  u.njoint = (uint32_t)m->n_joint_ids;
  u.joint_ids = m->joint_ids;
  u.joint_positions = m->joint_positions;
  return env_update_state(e, &u, &o->msg);
}


static int do_step(const Sensim__V1__Step* m, env_t* e, outcome_t* o,
                   Sensim__V1__StepDone* done) {
  if (!m->has_time) {
    return err_set(&o->msg, ERR_INVAL, "time is not set");
  }
  int rc = env_step(e, m->time, &o->msg);
  if (rc) {
    return rc;
  }
  env_time_t t;
  env_get_time(e, &t);
  done->has_time = 1;
  done->time = m->time;
  done->has_step = 1;
  done->step = t.steps;
  o->reply.body_case = SENSIM__V1__ENVELOPE__BODY_STEP_DONE;
  o->reply.step_done = done;
  return 0;
}


// Raycast results live in one allocation released after packing.
typedef struct ray_result {
  Sensim__V1__RaycastResult msg;
  scene_hit_t* hits;
  double* distances;
  uint32_t* object_ids;
  uint32_t* labels;
  double* normals;
} ray_result_t;


static void ray_result_free(ray_result_t* r) {
  mem_free(r->hits);
  mem_free(r->distances);
  mem_free(r->object_ids);
  mem_free(r->labels);
  mem_free(r->normals);
}


static int do_raycast(const wire_request_t* req, const Sensim__V1__Raycast* m, env_t* e,
                      outcome_t* o, ray_result_t* res) {
  if (m->n_origins % 3 != 0) {
    return err_set(&o->msg, ERR_INVAL, "origins has %zu values, not a multiple of 3",
                   m->n_origins);
  }
  size_t n = m->n_origins / 3;
  if (m->n_directions != 3 * n) {
    return err_set(&o->msg, ERR_INVAL, "directions has %zu values, expected %zu (3 per ray)",
                   m->n_directions, 3 * n);
  }
  if (m->n_times != 0 && m->n_times != 1 && m->n_times != n) {
    return err_set(&o->msg, ERR_INVAL, "times has %zu values, expected 0, 1 or %zu (one per ray)",
                   m->n_times, n);
  }
  if (m->has_max_range && (isnan(m->max_range) || m->max_range < 0)) {
    return err_set(&o->msg, ERR_INVAL, "max_range = %g must be >= 0 (0 = unlimited)",
                   m->max_range);
  }
  env_raycast_t r = {0};
  r.nray = (uint32_t)n;
  r.origins = m->origins;
  r.directions = m->directions;
  r.max_range = m->has_max_range ? m->max_range : 0.0;
  r.ntime = (uint32_t)m->n_times;
  r.times = m->times;
  wire_get_cancel(req, &r.cancelled, &r.cancel_ctx);
  size_t alloc_n = n ? n : 1;
  res->hits = mem_alloc(alloc_n * sizeof(*res->hits));
  if (!res->hits) {
    return err_set(&o->msg, ERR_NOMEM, "out of memory for %zu rays", n);
  }
  int rc = env_raycast(e, &r, res->hits, &o->msg);
  if (rc) {
    return rc;
  }
  res->distances = mem_alloc(alloc_n * sizeof(double));
  res->object_ids = mem_alloc(alloc_n * sizeof(uint32_t));
  res->labels = mem_alloc(alloc_n * sizeof(uint32_t));
  res->normals = mem_alloc(alloc_n * 3 * sizeof(double));
  if (!res->distances || !res->object_ids || !res->labels || !res->normals) {
    return err_set(&o->msg, ERR_NOMEM, "out of memory for %zu results", n);
  }
  for (size_t i = 0; i < n; i++) {
    res->distances[i] = res->hits[i].distance;
    res->object_ids[i] = res->hits[i].object_id;
    res->labels[i] = res->hits[i].label;
    memcpy(&res->normals[3 * i], res->hits[i].normal, 3 * sizeof(double));
  }
  res->msg.n_distances = n;
  res->msg.distances = res->distances;
  res->msg.n_object_ids = n;
  res->msg.object_ids = res->object_ids;
  res->msg.n_labels = n;
  res->msg.labels = res->labels;
  res->msg.n_normals = 3 * n;
  res->msg.normals = res->normals;
  o->reply.body_case = SENSIM__V1__ENVELOPE__BODY_RAYCAST_RESULT;
  o->reply.raycast_result = &res->msg;
  return 0;
}


int wire_env_execute(const wire_request_t* r, env_t* e, uint8_t** out, size_t* out_len,
                     int* out_code) {
  const Sensim__V1__Envelope* env = wire_envelope(r);
  outcome_t o;
  memset(&o, 0, sizeof(o));
  sensim__v1__envelope__init(&o.reply);
  Sensim__V1__StepDone done = SENSIM__V1__STEP_DONE__INIT;
  ray_result_t rays;
  memset(&rays, 0, sizeof(rays));
  sensim__v1__raycast_result__init(&rays.msg);

  switch (env->body_case) {
    case SENSIM__V1__ENVELOPE__BODY_CREATE_MESH:
      o.code = do_create_mesh(env->create_mesh, e, &o);
      break;
    case SENSIM__V1__ENVELOPE__BODY_CREATE_PRIMITIVE:
      o.code = do_create_primitive(env->create_primitive, e, &o);
      break;
    case SENSIM__V1__ENVELOPE__BODY_SET_MATERIAL:
      o.code = do_set_material(env->set_material, e, &o);
      break;
    case SENSIM__V1__ENVELOPE__BODY_SET_AMBIENT:
      o.code = do_set_ambient(env->set_ambient, e, &o);
      break;
    case SENSIM__V1__ENVELOPE__BODY_SET_ENVIRONMENT:
      o.code = do_set_environment(env->set_environment, e, &o);
      break;
    case SENSIM__V1__ENVELOPE__BODY_CREATE_BODY:
      o.code = do_create_body(env->create_body, e, &o);
      break;
    case SENSIM__V1__ENVELOPE__BODY_CREATE_OBJECT:
      o.code = do_create_object(env->create_object, e, &o);
      break;
    case SENSIM__V1__ENVELOPE__BODY_CREATE_JOINT:
      o.code = do_create_joint(env->create_joint, e, &o);
      break;
    case SENSIM__V1__ENVELOPE__BODY_REMOVE:
      o.code = do_remove(env->remove, e, &o);
      break;
    case SENSIM__V1__ENVELOPE__BODY_UPDATE_STATE:
      o.code = do_update_state(env->update_state, e, &o);
      break;
    case SENSIM__V1__ENVELOPE__BODY_STEP:
      o.code = do_step(env->step, e, &o, &done);
      break;
    case SENSIM__V1__ENVELOPE__BODY_RAYCAST:
      o.code = do_raycast(r, env->raycast, e, &o, &rays);
      break;
    default:
      o.code = err_set(&o.msg, ERR_INTERNAL, "not an environment request");
      break;
  }

  // on failure the reply is the status alone, its message prefixed with the request's name
  char text[sizeof(o.msg.text) + 64];
  int rc;
  if (o.code) {
    snprintf(text, sizeof(text), "%s: %s", wire_body_name(r), o.msg.text);
    Sensim__V1__Envelope bare = SENSIM__V1__ENVELOPE__INIT;
    rc = wire_pack_reply(wire_id(r), o.code, text, &bare, out, out_len);
  } else {
    rc = wire_pack_reply(wire_id(r), 0, NULL, &o.reply, out, out_len);
  }
  ray_result_free(&rays);
  *out_code = o.code;
  return rc;
}
