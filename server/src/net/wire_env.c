// SPDX-License-Identifier: MIT
// wire_env.c: translation of environment requests (scene, materials, media, settings,
// bodies, objects, joints, state, step, raycast) from protobuf-c messages into core calls, and
// of their results into replies. Runs on an executor, one request of an environment at a time.
#include <math.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "base/mem.h"
#include "net/wire_pb.h"
#include "net/wire_sensor.h"

// The bytes form of bulk arrays is little-endian and read in place (proto/README.md).
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "wire_env.c reads little-endian bulk arrays in place: add byte swapping for this host"
#endif

// Outcome of one request: a code, its detail, and (on success) an optional reply body.
typedef struct outcome {
  int code;
  err_msg_t msg;
  Sensim__V1__Envelope reply;
} outcome_t;


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
      wire_vec3_or(m->box->half_extents, 0, 0, 0, d.size);
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
    case SENSIM__V1__CREATE_PRIMITIVE__SHAPE_ELLIPSOID:
      d.kind = SCENE_PRIM_ELLIPSOID;
      if (!m->ellipsoid->radii) {
        return err_set(&o->msg, ERR_INVAL, "ellipsoid.radii is not set");
      }
      wire_vec3_or(m->ellipsoid->radii, 0, 0, 0, d.size);
      break;
    case SENSIM__V1__CREATE_PRIMITIVE__SHAPE_RECTANGLE: {
      const Sensim__V1__Rectangle* r = m->rectangle;
      d.kind = SCENE_PRIM_RECTANGLE;
      d.size[0] = r->has_half_size_x ? r->half_size_x : 0.0;  // 0 = unbounded
      d.size[1] = r->has_half_size_y ? r->half_size_y : 0.0;
      d.size[2] = r->has_one_sided && r->one_sided ? 1.0 : 0.0;
      break;
    }
    case SENSIM__V1__CREATE_PRIMITIVE__SHAPE_HEIGHT_FIELD: {
      const Sensim__V1__HeightField* h = m->height_field;
      hfield_desc_t hd = {.id = d.id, .name = d.name};
      hd.rows = h->has_rows ? h->rows : 0;
      hd.columns = h->has_columns ? h->columns : 0;
      hd.heights = h->has_heights ? h->heights.data : NULL;
      hd.heights_len = h->has_heights ? h->heights.len : 0;
      hd.half_x = h->has_half_size_x ? h->half_size_x : 0.0;
      hd.half_y = h->has_half_size_y ? h->half_size_y : 0.0;
      hd.base_depth = h->has_base_depth ? h->base_depth : 0.0;
      return env_create_height_field(e, &hd, &o->msg);
    }
    default:
      return err_set(&o->msg, ERR_INVAL, "shape is not set (box, sphere, cylinder, capsule, "
                                         "plane, ellipsoid, rectangle or height_field)");
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
    wire_vec3_or(m->gravity, 0, 0, 0, s.gravity);
  }
  if (m->magnetic_field) {
    s.has_magnetic_field = 1;
    wire_vec3_or(m->magnetic_field, 0, 0, 0, s.magnetic_field);
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
        wire_vec3_or(d->moment, 0, 0, 0, dipoles[i].moment);
        wire_vec3_or(d->position, 0, 0, 0, dipoles[i].position);
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
  d.pose = wire_pose_from(m->pose);
  wire_vec3_or(m->linear_velocity, 0, 0, 0, d.linear_velocity);
  wire_vec3_or(m->angular_velocity, 0, 0, 0, d.angular_velocity);
  wire_vec3_or(m->center_of_mass, 0, 0, 0, d.center_of_mass);
  d.name = str_or_null(m->name);
  return env_create_body(e, &d, &o->msg);
}


static int do_create_object(const Sensim__V1__CreateObject* m, env_t* e, outcome_t* o) {
  object_desc_t d = {0};
  d.id = m->has_id ? m->id : 0;
  d.geometry_id = m->has_geometry_id ? m->geometry_id : 0;
  d.body_id = m->has_body_id ? m->body_id : 0;
  d.local_pose = wire_pose_from(m->local_pose);
  wire_vec3_or(m->scale, 1, 1, 1, d.scale);
  d.material_id = m->has_material_id ? m->material_id : 0;
  d.label = m->has_label ? m->label : 0;
  d.medium_id = m->has_medium_id ? m->medium_id : 0;
  d.name = str_or_null(m->name);
  d.group = m->has_group ? m->group : 0;
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


//---------------- Bulk arrays: packed repeated fields or their little-endian bytes twins

// One bulk array of a request as the core wants it: count values of size bytes each.
typedef struct bulk {
  const char* name;   // the field the values came from ("origins" or "origins_bytes")
  int bytes;          // 1: the bytes form was sent
  size_t count;       // values
  const void* data;   // NULL when count is 0
  void* owned;        // aligned copy of misaligned bytes, freed by bulk_free
} bulk_t;


static void bulk_free(bulk_t* b) {
  mem_free(b->owned);
  b->owned = NULL;
}


// Take a bulk array from either form. name is the packed field's name ("origins"), twin its
// bytes field's ("origins_bytes"); record is the size of one record in bytes (24 for a ray's
// x y z) and size the size of one value. Refuses both forms at once, and a bytes field whose
// length is not a whole number of records. protobuf-c decodes bytes into allocations of their
// own, so the values are aligned; bytes that are not (another decoder) are copied.
static int bulk_take(bulk_t* b, const char* name, const char* twin, size_t n_packed,
                     const void* packed, protobuf_c_boolean has_bytes,
                     const ProtobufCBinaryData* bytes, size_t size, size_t record,
                     const char* layout, err_msg_t* msg) {
  memset(b, 0, sizeof(*b));
  b->name = name;
  b->count = n_packed;
  b->data = n_packed ? packed : NULL;
  if (!has_bytes) {
    return 0;
  }
  if (n_packed) {
    return err_set(msg, ERR_INVAL, "%s and %s are both set: send one form of the array", name,
                   twin);
  }
  b->name = twin;
  b->bytes = 1;
  if (bytes->len % record != 0) {
    return err_set(msg, ERR_INVAL, "%s has %zu bytes, not a multiple of %zu (%s)", twin,
                   bytes->len, record, layout);
  }
  b->count = bytes->len / size;
  if (!b->count) {
    return 0;
  }
  b->data = bytes->data;
  if (((uintptr_t)bytes->data) % size != 0) {
    b->owned = mem_alloc(bytes->len);
    if (!b->owned) {
      return err_set(msg, ERR_NOMEM, "out of memory for %s (%zu bytes)", twin, bytes->len);
    }
    memcpy(b->owned, bytes->data, bytes->len);
    b->data = b->owned;
  }
  return 0;
}


// The core names a bulk array by its packed field ("times[3] = nan is not finite"); a client
// that sent the bytes twin is told that field instead ("times_bytes[3] = nan ...", the index
// still counting values, not bytes). Rewrites a detail that starts with such a name.
static void bulk_rename(err_msg_t* msg, const bulk_t* b, int n) {
  static const char kTwin[] = "_bytes";
  for (int i = 0; i < n; i++) {
    if (!b[i].bytes) {
      continue;
    }
    size_t np = strlen(b[i].name) - (sizeof(kTwin) - 1);   // the packed name's length
    if (strncmp(msg->text, b[i].name, np) != 0 || !strchr("[. ", msg->text[np]) ||
        msg->text[np] == '\0') {
      continue;
    }
    char rest[sizeof(msg->text)];
    snprintf(rest, sizeof(rest), "%s", msg->text + np);
    snprintf(msg->text, sizeof(msg->text), "%s%s", b[i].name, rest);
    return;
  }
}


// "body_poses has 14 values" or "body_poses_bytes has 112 bytes".
static const char* bulk_amount(const bulk_t* b, size_t size, char* buf, size_t cap) {
  if (b->bytes) {
    snprintf(buf, cap, "%s has %zu bytes", b->name, b->count * size);
  } else {
    snprintf(buf, cap, "%s has %zu values", b->name, b->count);
  }
  return buf;
}


static int do_update_state(const Sensim__V1__UpdateState* m, env_t* e, outcome_t* o) {
  if (!m->has_time) {
    return err_set(&o->msg, ERR_INVAL, "time is not set");
  }
  enum { IDS, POSES, VELS, JIDS, JPOS, NBULK };
  bulk_t b[NBULK];
  memset(b, 0, sizeof(b));
  char amount[96];
  int rc = bulk_take(&b[IDS], "body_ids", "body_ids_bytes", m->n_body_ids, m->body_ids,
                     m->has_body_ids_bytes, &m->body_ids_bytes, 4, 4, "uint32 per body",
                     &o->msg);
  rc = rc ? rc
          : bulk_take(&b[POSES], "body_poses", "body_poses_bytes", m->n_body_poses,
                      m->body_poses, m->has_body_poses_bytes, &m->body_poses_bytes, 8, 56,
                      "float64 px py pz qx qy qz qw per body", &o->msg);
  rc = rc ? rc
          : bulk_take(&b[VELS], "body_velocities", "body_velocities_bytes",
                      m->n_body_velocities, m->body_velocities, m->has_body_velocities_bytes,
                      &m->body_velocities_bytes, 8, 48, "float64 vx vy vz wx wy wz per body",
                      &o->msg);
  rc = rc ? rc
          : bulk_take(&b[JIDS], "joint_ids", "joint_ids_bytes", m->n_joint_ids, m->joint_ids,
                      m->has_joint_ids_bytes, &m->joint_ids_bytes, 4, 4, "uint32 per joint",
                      &o->msg);
  rc = rc ? rc
          : bulk_take(&b[JPOS], "joint_positions", "joint_positions_bytes",
                      m->n_joint_positions, m->joint_positions, m->has_joint_positions_bytes,
                      &m->joint_positions_bytes, 8, 8, "float64 per joint", &o->msg);
  size_t nb = b[IDS].count;
  if (!rc && b[POSES].count != 7 * nb) {
    rc = err_set(&o->msg, ERR_INVAL, "%s, expected %d per body (%zu %s)",
                 bulk_amount(&b[POSES], 8, amount, sizeof(amount)), b[POSES].bytes ? 56 : 7,
                 nb, b[IDS].name);
  }
  if (!rc && b[VELS].count != 0 && b[VELS].count != 6 * nb) {
    rc = err_set(&o->msg, ERR_INVAL, "%s, expected 0 or %d per body (%zu %s)",
                 bulk_amount(&b[VELS], 8, amount, sizeof(amount)), b[VELS].bytes ? 48 : 6, nb,
                 b[IDS].name);
  }
  if (!rc && b[JPOS].count != b[JIDS].count) {
    rc = err_set(&o->msg, ERR_INVAL, "%s for %zu %s",
                 bulk_amount(&b[JPOS], 8, amount, sizeof(amount)), b[JIDS].count,
                 b[JIDS].name);
  }
  if (!rc && (nb > UINT32_MAX || b[JIDS].count > UINT32_MAX)) {
    rc = err_set(&o->msg, ERR_INVAL, "more than %u bodies or joints", (unsigned)UINT32_MAX);
  }
  if (!rc) {
    env_state_update_t u = {0};
    u.time = m->time;
    u.nbody = (uint32_t)nb;
    u.body_ids = b[IDS].data;
    u.body_poses = b[POSES].data;
    u.body_velocities = b[VELS].count ? b[VELS].data : NULL;
    u.njoint = (uint32_t)b[JIDS].count;
    u.joint_ids = b[JIDS].data;
    u.joint_positions = b[JPOS].data;
    rc = env_update_state(e, &u, &o->msg);
    if (rc) {
      bulk_rename(&o->msg, b, NBULK);
    }
  }
  for (int i = 0; i < NBULK; i++) {
    bulk_free(&b[i]);
  }
  return rc;
}


//---------------- Step

// The records a Step selects, as SensorData messages referring to their points.
typedef struct step_sel {
  const Sensim__V1__Step* m;
  const wire_step_limits_t* lim;
  uint64_t id;
  double time;
  uint64_t step;                // the step's index once it succeeds
  sensor_out_t picked;          // shallow copies of the selected records (no references)
  wire_outputs_t* store;        // their messages
  wire_sd_t* sd;                // (picked.n), in picked.rec's block after the records
  wire_out_plan_t plan;         // the reply of the records selected last
  int planned;
  // A step of a few records (an IMU's, a joint's) keeps its selection and their messages
  // here, on the stack, instead of in two heap blocks of several kB a step: blocks that size
  // are past malloc's per-thread caches, and finding and returning them (with the heap's
  // consolidation) cost about as much as the rest of the step's reply.
  _Alignas(max_align_t) unsigned char arena[8192];
} step_sel_t;


static void sel_clear(step_sel_t* s) {
  wire_sensor_outputs_free(s->store);
  s->store = NULL;
  s->sd = NULL;
  if ((unsigned char*)s->picked.rec != s->arena) {
    mem_free(s->picked.rec);
  }
  memset(&s->picked, 0, sizeof(s->picked));
  s->planned = 0;
}


static int wants(const Sensim__V1__Step* m, uint32_t sensor_id) {
  if (!m->has_outputs || m->outputs == SENSIM__V1__STEP_OUTPUTS__STEP_OUTPUTS_ALL) {
    return 1;
  }
  for (size_t i = 0; m->outputs == SENSIM__V1__STEP_OUTPUTS__STEP_OUTPUTS_LISTED &&
                     i < m->n_output_sensors; i++) {
    if (m->output_sensors[i] == sensor_id) {
      return 1;
    }
  }
  return 0;
}


// The selected records' messages and sizes (s->picked's records stay where recs has them).
static int select_records(step_sel_t* s, const sensor_out_t* recs, err_msg_t* msg) {
  sel_clear(s);
  uint32_t n = 0;
  for (uint32_t i = 0; i < recs->n; i++) {
    n += wants(s->m, recs->rec[i].sensor_id);
  }
  if (n == 0) {
    return 0;
  }
  // the records and their messages' sizes in one block (one allocation a step, not two)
  _Static_assert(sizeof(sensor_record_t) % _Alignof(wire_sd_t) == 0, "wire_sd_t after records");
  size_t bytes = (size_t)n * (sizeof(sensor_record_t) + sizeof(wire_sd_t));
  int in_arena = bytes <= sizeof(s->arena);
  s->picked.rec = in_arena ? (sensor_record_t*)s->arena : mem_alloc(bytes);
  if (!s->picked.rec) {
    sel_clear(s);
    return err_set(msg, ERR_NOMEM, "out of memory for %u outputs", n);
  }
  s->sd = (wire_sd_t*)(s->picked.rec + n);
  memset(s->sd, 0, (size_t)n * sizeof(wire_sd_t));
  for (uint32_t i = 0; i < recs->n; i++) {
    if (wants(s->m, recs->rec[i].sensor_id)) {
      s->picked.rec[s->picked.n++] = recs->rec[i];
    }
  }
  s->picked.cap = n;
  Sensim__V1__StepDone tmp = SENSIM__V1__STEP_DONE__INIT;
  // the messages in the arena after the selection when they fit there too
  size_t used = in_arena ? (bytes + _Alignof(max_align_t) - 1) & ~(_Alignof(max_align_t) - 1)
                         : sizeof(s->arena);
  int rc = wire_sensor_outputs_in(&s->picked, &tmp, s->arena + used,
                                  used < sizeof(s->arena) ? sizeof(s->arena) - used : 0,
                                  &s->store, msg);
  if (rc) {
    sel_clear(s);
    return rc;
  }
  for (uint32_t i = 0; i < n; i++) {
    const sensor_record_t* r = &s->picked.rec[i];
    s->sd[i] = (wire_sd_t){.sd = tmp.outputs[i],
                           .owner = r->kind == SENSOR_REC_CLOUD ? r->u.cloud.blob : NULL};
    wire_sd_measure(&s->sd[i]);
  }
  return 0;
}


// env_step_hooks_t.accept: the reply of the selected records must be one a connection can
// hold, and each record one frame: otherwise the step is refused before it is committed.
static int accept_outputs(void* ctx, const sensor_out_t* recs, err_msg_t* msg) {
  step_sel_t* s = ((void**)ctx)[1];
  int rc = select_records(s, recs, msg);
  if (rc) {
    return rc;
  }
  uint64_t bytes = wire_out_plan(s->id, s->time, s->step, s->sd, s->picked.n,
                                 s->lim->max_frame_bytes, &s->plan);
  s->planned = 1;
  if (bytes > s->lim->max_reply_bytes) {
    return err_set(msg, ERR_LIMIT, "outputs: the %u records selected take %llu bytes, more "
                   "than one reply may (%llu bytes: max_queue_bytes, max_held_bytes); select "
                   "fewer (STEP_OUTPUTS_LISTED), or none (STEP_OUTPUTS_NONE: subscribers still "
                   "get them)", s->picked.n, (unsigned long long)bytes,
                   (unsigned long long)s->lim->max_reply_bytes);
  }
  for (uint32_t i = 0; i < s->picked.n; i++) {
    uint64_t one = s->sd[i].own + s->sd[i].ref + 64;
    if (one > s->lim->max_frame_bytes) {
      return err_set(msg, ERR_LIMIT, "outputs: sensor %u's record of %llu bytes does not fit "
                     "in a frame (max_frame_bytes %u); leave it to subscribers "
                     "(STEP_OUTPUTS_LISTED without it)", s->picked.rec[i].sensor_id,
                     (unsigned long long)one, s->lim->max_frame_bytes);
    }
  }
  return 0;
}


static int step_cancelled(void* ctx) {
  const wire_request_t* req = ((void**)ctx)[0];
  int (*cancelled)(void* ctx);
  void* cancel_ctx;
  wire_get_cancel(req, &cancelled, &cancel_ctx);
  return cancelled && cancelled(cancel_ctx);
}


// Step.outputs and Step.output_sensors: known values and sensors, each id once.
static int check_selection(const Sensim__V1__Step* m, env_t* e, err_msg_t* msg) {
  int outputs = m->has_outputs ? (int)m->outputs : 0;
  if (outputs < 0 || outputs > SENSIM__V1__STEP_OUTPUTS__STEP_OUTPUTS_LISTED) {
    return err_set(msg, ERR_INVAL, "outputs = %d is unknown (ALL 0, NONE 1, LISTED 2)",
                   outputs);
  }
  if (outputs != SENSIM__V1__STEP_OUTPUTS__STEP_OUTPUTS_LISTED && m->n_output_sensors) {
    return err_set(msg, ERR_INVAL, "output_sensors has %zu ids, but outputs is not "
                   "STEP_OUTPUTS_LISTED", m->n_output_sensors);
  }
  for (size_t i = 0; i < m->n_output_sensors; i++) {
    uint32_t id = m->output_sensors[i];
    if (env_sensor_kind(e, id) == 0) {
      return err_set(msg, ERR_INVAL, "output_sensors[%zu] = %u is not a sensor of this "
                     "environment", i, id);
    }
    for (size_t k = 0; k < i; k++) {
      if (m->output_sensors[k] == id) {
        return err_set(msg, ERR_INVAL, "output_sensors[%zu] = %u is repeated", i, id);
      }
    }
  }
  return 0;
}


// The status reply of a refused step as its one frame.
static int status_frame(uint64_t id, int code, const char* text, wire_step_t* out) {
  uint8_t* payload;
  size_t len;
  Sensim__V1__Envelope bare = SENSIM__V1__ENVELOPE__INIT;
  if (wire_pack_reply(id, code, text, &bare, &payload, &len) != 0) {
    return ERR_NOMEM;
  }
  shared_buf_t* b = shared_buf_create(len);
  out->frames = mem_alloc(sizeof(*out->frames));
  if (!b || !out->frames) {
    shared_buf_release(b);
    mem_free(out->frames);
    out->frames = NULL;
    mem_free(payload);
    return ERR_NOMEM;
  }
  memcpy(shared_buf_payload(b), payload, len);
  mem_free(payload);
  out->frames[0] = b;
  out->nframes = 1;
  return 0;
}


int wire_step_execute(const wire_request_t* r, env_t* e, const wire_step_limits_t* lim,
                      wire_step_t* out) {
  memset(out, 0, sizeof(*out));
  const Sensim__V1__Step* m = wire_envelope(r)->step;
  env_time_t t0;
  env_get_time(e, &t0);
  out->start_time = t0.t_prev;
  // every field but the arena zeroed (an initializer would clear its 8 kB each step)
  step_sel_t sel;
  memset(&sel, 0, offsetof(step_sel_t, arena));
  sel.m = m;
  sel.lim = lim;
  sel.id = wire_id(r);
  sel.time = m->time;
  sel.step = t0.steps + 1;
  err_msg_t msg;
  int rc;

  // the selection is checked before anything changes; the reply's size before the commit
  if (!m->has_time) {
    rc = err_set(&msg, ERR_INVAL, "time is not set");
  } else {
    rc = check_selection(m, e, &msg);
  }
  if (rc == 0) {
    void* ctx[2] = {(void*)r, &sel};
    env_step_hooks_t hooks = {.cancelled = step_cancelled, .accept = accept_outputs,
                              .ctx = ctx};
    rc = env_step_with(e, m->time, &hooks, &msg);
  }
  env_count_change(e);   // a refused step may have moved the scene's time (world_serial)

  // the records go to the caller with their buffers; the reply refers to them
  if (rc == 0) {
    rc = env_take_outputs(e, &out->records);
    if (rc) {
      rc = err_set(&msg, ERR_NOMEM, "out of memory taking the step's records");
    }
  }
  if (rc == 0) {
    if (!sel.planned) {
      (void)wire_out_plan(sel.id, m->time, sel.step, sel.sd, sel.picked.n,
                          lim->max_frame_bytes, &sel.plan);
    }
    rc = wire_out_planned(&sel.plan, sel.sd, &out->frames, &out->nframes, &msg);
  }
  sel_clear(&sel);
  out->code = rc;
  if (rc == 0) {
    return 0;
  }
  sensor_out_free(&out->records);
  char text[sizeof(msg.text) + 64];
  snprintf(text, sizeof(text), "step: %s", msg.text);
  return status_frame(sel.id, rc, text, out);
}


void wire_step_free(wire_step_t* s) {
  for (uint32_t i = 0; i < s->nframes; i++) {
    shared_buf_release(s->frames[i]);
  }
  mem_free(s->frames);
  sensor_out_free(&s->records);
  memset(s, 0, sizeof(*s));
}


// Whether the core's hit record has the wire's record layout (RaycastResult.hits_bytes), so
// that env_raycast writes the reply's records in place.
#define HIT_IN_PLACE                                                                      \
  (sizeof(scene_hit_t) == WIRE_HIT_RECORD_BYTES && offsetof(scene_hit_t, distance) == 0 && \
   _Generic(((scene_hit_t*)0)->distance, double: 1, default: 0) &&                        \
   offsetof(scene_hit_t, normal) == 8 &&                                                  \
   _Generic(((scene_hit_t*)0)->normal[0], double: 1, default: 0) &&                       \
   offsetof(scene_hit_t, object_id) == 32 && sizeof(((scene_hit_t*)0)->object_id) == 4 && \
   offsetof(scene_hit_t, label) == 36 && sizeof(((scene_hit_t*)0)->label) == 4)


// The first 40 bytes of a hit's record (those the reply to omit_misses sends): distance,
// normal, object_id, label.
static void put_hit(const scene_hit_t* h, uint8_t* rec) {
  double distance = h->distance;
  double normal[3] = {h->normal[0], h->normal[1], h->normal[2]};
  uint32_t ids[2] = {h->object_id, h->label};
  memcpy(rec, &distance, 8);
  memcpy(rec + 8, normal, 24);
  memcpy(rec + 32, ids, 8);
}


void wire_hit_records(const scene_hit_t* hits, size_t n, uint8_t* out) {
  for (size_t i = 0; i < n; i++) {
    uint8_t* rec = out + i * WIRE_HIT_RECORD_BYTES;
    put_hit(&hits[i], rec);
    memset(rec + 40, 0, 8);
  }
}


// Raycast results live in allocations released after packing, except a reply encoded here
// (payload), which the caller takes.
typedef struct ray_result {
  Sensim__V1__RaycastResult msg;
  scene_hit_t* hits;
  uint8_t* payload;   // the whole reply of a bytes-form request, hit records inside
  size_t payload_len;
  double* distances;
  uint32_t* object_ids;
  uint32_t* labels;
  double* normals;
} ray_result_t;


static void ray_result_free(ray_result_t* r) {
  mem_free(r->hits);
  mem_free(r->payload);
  mem_free(r->distances);
  mem_free(r->object_ids);
  mem_free(r->labels);
  mem_free(r->normals);
}


//---------------- The reply of the bytes form, encoded here around the records

// Tag of a length-delimited field of number `number`.
static uint64_t len_tag(const ProtobufCMessageDescriptor* d, const char* name) {
  return (uint64_t)protobuf_c_message_descriptor_get_field_by_name(d, name)->id << 3 | 2;
}


// The bytes of a bytes-form reply before its records: the Envelope's id and status OK, then
// raycast_result = {world_serial, [hit_mask,] padding, hits_bytes}, hits_bytes of nbytes, with
// padding chosen so that the records start at a multiple of 8 from the start of the buffer
// (which malloc aligns). Protocol buffers read fields in any order, so this is the Envelope
// protobuf-c would write with those fields set.
typedef struct reply_head {
  uint8_t ok[WIRE_OK_HEAD_MAX];   // Envelope{id, status OK}
  // the fields' keys, looked up by name once per reply (the layout is tried for each padding)
  uint64_t t_result, t_serial, t_mask, t_pad, t_hits;
  size_t ok_len;
  uint64_t serial;
  size_t mask_len;                // bytes of hit_mask; sent when has_mask
  int has_mask;
  size_t nbytes;                  // of hits_bytes, and from it:
  size_t pad;                     // bytes of padding
  size_t inner;                   // raycast_result's bytes before the records
  size_t at;                      // where the records start
} reply_head_t;


static uint64_t serial_tag(void) {
  return (uint64_t)protobuf_c_message_descriptor_get_field_by_name(
             &sensim__v1__raycast_result__descriptor, "world_serial")
             ->id
         << 3;  // a varint
}


static void head_init(reply_head_t* h, uint64_t id, uint64_t serial, int has_mask,
                      size_t mask_len) {
  memset(h, 0, sizeof(*h));
  h->t_result = len_tag(&sensim__v1__envelope__descriptor, "raycast_result");
  h->t_serial = serial_tag();
  h->t_mask = len_tag(&sensim__v1__raycast_result__descriptor, "hit_mask");
  h->t_pad = len_tag(&sensim__v1__raycast_result__descriptor, "padding");
  h->t_hits = len_tag(&sensim__v1__raycast_result__descriptor, "hits_bytes");
  h->ok_len = wire_ok_head(id, h->ok);
  h->serial = serial;
  h->has_mask = has_mask;
  h->mask_len = mask_len;
}


// The layout for nbytes of records with `pad` bytes of padding; returns where the records
// start.
static size_t head_layout(reply_head_t* h, size_t nbytes, size_t pad) {
  const size_t serial_len = wire_varint_size(h->t_serial) + wire_varint_size(h->serial);
  const size_t mask_field =
      h->has_mask ? wire_varint_size(h->t_mask) + wire_varint_size(h->mask_len) + h->mask_len
                  : 0;
  h->nbytes = nbytes;
  h->pad = pad;
  h->inner = serial_len + mask_field + wire_varint_size(h->t_pad) + wire_varint_size(pad) + pad +
             wire_varint_size(h->t_hits) + wire_varint_size(nbytes);
  h->at = h->ok_len + wire_varint_size(h->t_result) + wire_varint_size(h->inner + nbytes) +
          h->inner;
  return h->at;
}


// The layout for nbytes of records, the fewest bytes of padding that start them at a multiple
// of 8. `at` only grows with nbytes (longer varints), so the records of a smaller reply start
// no later than those of a larger one.
static void head_size(reply_head_t* h, size_t nbytes) {
  for (size_t pad = 0; pad < 16 && head_layout(h, nbytes, pad) % 8 != 0; pad++) {
  }
}


// The layout for nbytes of records starting exactly at `at` (no earlier than head_size puts
// them), the padding grown by what the shorter lengths left. False when no padding does it
// (a length whose varint grows with the padding's bytes skips that `at`).
static bool head_size_at(reply_head_t* h, size_t nbytes, size_t at) {
  for (size_t pad = 0; pad < 128; pad++) {   // a padding of 1-byte length
    if (head_layout(h, nbytes, pad) == at) {
      return true;
    }
  }
  return false;
}


// Write the h->at bytes before the records into p; *mask (when has_mask) points at hit_mask's
// bytes, left to the caller.
static void head_write(const reply_head_t* h, uint8_t* p, uint8_t** mask) {
  memcpy(p, h->ok, h->ok_len);
  p += h->ok_len;
  p = wire_put_varint(p, h->t_result);
  p = wire_put_varint(p, h->inner + h->nbytes);
  p = wire_put_varint(p, h->t_serial);
  p = wire_put_varint(p, h->serial);
  if (h->has_mask) {
    p = wire_put_varint(p, h->t_mask);
    p = wire_put_varint(p, h->mask_len);
    *mask = p;
    p += h->mask_len;
  }
  p = wire_put_varint(p, h->t_pad);
  p = wire_put_varint(p, h->pad);
  memset(p, 0, h->pad);
  p += h->pad;
  p = wire_put_varint(p, h->t_hits);
  (void)wire_put_varint(p, h->nbytes);
}


// Allocate the whole reply to a bytes-form raycast (reply_head_t) with hits_bytes of nbytes;
// *records (and *mask) point into the reply, their bytes left to the caller.
static int reply_alloc(uint64_t id, size_t nbytes, uint64_t serial, ray_result_t* res,
                       uint8_t** records, uint8_t** mask, size_t mask_len, err_msg_t* msg) {
  reply_head_t h;
  head_init(&h, id, serial, mask != NULL, mask_len);
  head_size(&h, nbytes);
  res->payload_len = h.at + nbytes;
  res->payload = mem_alloc(res->payload_len);
  if (!res->payload) {
    return err_set(msg, ERR_NOMEM, "out of memory for a reply of %zu bytes", res->payload_len);
  }
  head_write(&h, res->payload, mask);
  *records = res->payload + h.at;
  return 0;
}


// Trace into the reply to a bytes-form request: the core writes its hits straight into the
// records when its hit record has the wire layout (hit_records: the reserved bytes zero).
static int trace_to_records(const wire_request_t* req, env_t* e, const env_raycast_t* r,
                            ray_result_t* res, err_msg_t* msg) {
  size_t n = r->nray;
  uint8_t* rec = NULL;
  int rc = reply_alloc(wire_id(req), n * WIRE_HIT_RECORD_BYTES, env_changes(e), res, &rec,
                       NULL, 0, msg);
  if (rc) {
    return rc;
  }
  if (HIT_IN_PLACE) {
    env_raycast_t records = *r;
    records.hit_records = 1;  // the reserved bytes (primitive, padding) written as zero
    return env_raycast(e, &records, (scene_hit_t*)(void*)rec, msg);
  }
  res->hits = mem_alloc((n ? n : 1) * sizeof(*res->hits));
  if (!res->hits) {
    return err_set(msg, ERR_NOMEM, "out of memory for %zu rays", n);
  }
  rc = env_raycast(e, r, res->hits, msg);
  if (!rc) {
    wire_hit_records(res->hits, n, rec);
  }
  return rc;
}


// Whether a hit is the miss record bit for bit (distance +inf, normal, object_id and label 0):
// what RaycastResult.hit_mask leaves out. Anything else (a -0 normal too) is sent, so that the
// client's expansion gives back the same records.
static bool is_miss(const scene_hit_t* h) {
  static const double inf = INFINITY;
  static const double zero3[3] = {0.0, 0.0, 0.0};
  return memcmp(&h->distance, &inf, sizeof(inf)) == 0 &&
         memcmp(h->normal, zero3, sizeof(zero3)) == 0 && h->object_id == 0 && h->label == 0;
}


void wire_hit_mask_records(const scene_hit_t* hits, size_t n, uint8_t* mask, uint8_t* out) {
  memset(mask, 0, (n + 7) / 8);
  for (size_t i = 0; i < n; i++) {
    if (is_miss(&hits[i])) {
      continue;
    }
    mask[i / 8] |= (uint8_t)(1u << (i % 8));
    put_hit(&hits[i], out);
    out += WIRE_HIT_MASKED_RECORD_BYTES;
  }
}


size_t wire_hit_pack_to(uint8_t* records, size_t n, uint8_t* mask, uint8_t* to) {
  // a record is five 8-byte words: the miss record is +inf, then zeros
  const uint64_t inf_bits = 0x7FF0000000000000ull;
  size_t k = 0;
  for (size_t i = 0; i < n; i += 8) {
    size_t m = n - i < 8 ? n - i : 8;
    unsigned bits = 0;
    for (size_t j = 0; j < m; j++) {
      uint64_t w[5];
      memcpy(w, records + (i + j) * WIRE_HIT_RECORD_BYTES, sizeof(w));
      if (w[0] == inf_bits && (w[1] | w[2] | w[3] | w[4]) == 0) {
        continue;
      }
      bits |= 1u << j;
      // read whole before written: the k-th record's place may overlap its own
      memcpy(to + k * WIRE_HIT_MASKED_RECORD_BYTES, w, sizeof(w));
      k++;
    }
    mask[i / 8] = (uint8_t)bits;
  }
  return k;
}


size_t wire_hit_pack(uint8_t* records, size_t n, uint8_t* mask) {
  return wire_hit_pack_to(records, n, mask, records);
}


// What the tracing threads leave of a reply to omit_misses: each batch's hits packed
// (wire_hit_pack) and moved behind those of the batches before it, their numbers and their
// bits of hit_mask. A batch is moved by the thread that packs it or, when it is packed before
// an earlier one, by the thread that moves that one: so the records are in place when the
// last batch is, rather than moved together after the tracing, on the request's thread alone
// (a part of a large raycast then waited for it, and the other tracing thread idled). A batch
// packed when all before it are moved is packed straight into place (pack_at_front).
typedef struct packing {
  uint8_t* mask;        // (nray + 7) / 8 bytes; a batch (ENV_RAYCAST_BATCH, a multiple of 8
                        // rays) writes bytes of its own
  uint32_t* counts;     // records of each batch
  uint8_t* records;     // batch b's 48-byte records traced at b * ENV_RAYCAST_BATCH records
                        // from here; the packed 40-byte ones go from here on, in batch order
  size_t nbatch;
  atomic_uchar* packed; // per batch: packed, and so its count and records are readable
  atomic_size_t front;  // the first batch not yet moved
  atomic_flag moving;   // held by the one thread that moves batches
  size_t moved;         // bytes of records moved (by the holder of `moving`)
} packing_t;

_Static_assert(ENV_RAYCAST_BATCH % 8 == 0, "batches write whole bytes of hit_mask");


// Move the packed batches from the front on, while they come in order, behind the records
// moved before them. Batch b's records go to at most 40 * 256 * (b + 1) bytes from the start,
// short of batch b + 1's traced records (48 * 256 * (b + 1)): a move never touches the
// records of a batch being traced or packed. Whoever holds `moving` moves; a thread that
// finds it taken leaves its batch to the holder, who looks at the front again after letting
// go (sequentially consistent: the batch marked packed before the holder looked again is seen).
static void move_packed(packing_t* p) {
  const size_t traced = (size_t)ENV_RAYCAST_BATCH * WIRE_HIT_RECORD_BYTES;
  for (;;) {
    if (atomic_flag_test_and_set(&p->moving)) {
      return;
    }
    size_t b = atomic_load(&p->front);
    for (; b < p->nbatch && atomic_load(&p->packed[b]); b++) {
      size_t len = (size_t)p->counts[b] * WIRE_HIT_MASKED_RECORD_BYTES;
      memmove(p->records + p->moved, p->records + b * traced, len);
      p->moved += len;
    }
    atomic_store(&p->front, b);
    atomic_flag_clear(&p->moving);
    if (b == p->nbatch || !atomic_load(&p->packed[b])) {
      return;
    }
  }
}


// Pack batch b straight behind the records moved so far when every batch before it is moved
// (the front) and no other thread is moving: its kept records are then written once, where
// they stay, rather than packed where they were traced and moved later. Returns whether it did.
// The place is at most 40 * 256 * b bytes from the start: no later than the batch's own
// traced records (48 * 256 * b), as wire_hit_pack_to needs, and what it writes ends before the
// next batch's (48 * 256 * (b + 1)).
static bool pack_at_front(packing_t* p, size_t b, uint32_t first, uint32_t n, uint8_t* hits) {
  if (atomic_flag_test_and_set(&p->moving)) {
    return false;
  }
  bool front = atomic_load(&p->front) == b;
  if (front) {
    size_t kept = wire_hit_pack_to(hits, n, p->mask + first / 8, p->records + p->moved);
    p->counts[b] = (uint32_t)kept;
    p->moved += kept * WIRE_HIT_MASKED_RECORD_BYTES;
    atomic_store(&p->packed[b], 1);
    atomic_store(&p->front, b + 1);
  }
  atomic_flag_clear(&p->moving);
  return front;
}


// env_raycast_t.traced: pack the batch while its records are in this thread's cache (straight
// into place when it is at the front, where they were traced otherwise), and move what is in
// order.
static void pack_batch(void* ctx, uint32_t first, uint32_t n, scene_hit_t* hits) {
  packing_t* p = ctx;
  size_t b = first / ENV_RAYCAST_BATCH;
  if (!pack_at_front(p, b, first, n, (uint8_t*)(void*)hits)) {
    p->counts[b] = (uint32_t)wire_hit_pack((uint8_t*)(void*)hits, n, p->mask + first / 8);
    atomic_store(&p->packed[b], 1);
  }
  move_packed(p);  // the batches after it packed meanwhile
}


// The reply to a request with omit_misses when the core's hit record is the wire's: traced
// into the reply's buffer past the longest head it can have, each batch packed and moved into
// place by the threads that traced them (packing_t); the head then written before the records
// where they are (its padding longer by what the shorter lengths left), and the buffer shrunk
// to the reply.
static int trace_packing_in_place(const wire_request_t* req, env_t* e, const env_raycast_t* r,
                                  ray_result_t* res, err_msg_t* msg) {
  size_t n = r->nray, mask_len = (n + 7) / 8;
  size_t nbatch = (n + ENV_RAYCAST_BATCH - 1) / ENV_RAYCAST_BATCH;
  reply_head_t h;
  head_init(&h, wire_id(req), env_changes(e), 1, mask_len);
  head_size(&h, n * WIRE_HIT_MASKED_RECORD_BYTES);
  const size_t traced_at = h.at;
  packing_t p = {.nbatch = nbatch, .moving = ATOMIC_FLAG_INIT};
  atomic_init(&p.front, 0);
  p.counts = mem_calloc(nbatch + 1, sizeof(uint32_t));
  p.packed = mem_calloc(nbatch + 1, sizeof(atomic_uchar));
  p.mask = mem_alloc(mask_len + 1);
  res->payload = mem_alloc(traced_at + n * WIRE_HIT_RECORD_BYTES);
  int rc = 0;
  if (!p.counts || !p.packed || !p.mask || !res->payload) {
    rc = err_set(msg, ERR_NOMEM, "out of memory for a reply to %zu rays", n);
  }
  if (!rc) {
    for (size_t b = 0; b < nbatch; b++) {
      atomic_init(&p.packed[b], 0);
    }
    p.records = res->payload + traced_at;
    env_raycast_t packed = *r;
    packed.hit_records = 1;  // the reserved bytes (primitive, padding) written as zero
    packed.traced = pack_batch;
    packed.traced_ctx = &p;
    rc = env_raycast(e, &packed, (scene_hit_t*)(void*)p.records, msg);
  }
  if (!rc) {
    move_packed(&p);  // every batch is packed now; all of them moved, as a rule, already
    size_t nbytes = p.moved;
    if (!head_size_at(&h, nbytes, traced_at)) {
      head_size(&h, nbytes);
      memmove(res->payload + h.at, p.records, nbytes);
    }
    uint8_t* mask;
    head_write(&h, res->payload, &mask);
    memcpy(mask, p.mask, mask_len);
    res->payload_len = h.at + h.nbytes;
    // a shrunk block stays where it is or moves without a copy (mremap); kept when refused
    uint8_t* shrunk = mem_realloc(res->payload, res->payload_len);
    res->payload = shrunk ? shrunk : res->payload;
  }
  mem_free(p.counts);
  mem_free(p.packed);
  mem_free(p.mask);
  return rc;
}


// The reply to a request with omit_misses: traced into the core's hits, then the hit mask and
// the hits' records alone written into the reply, sized once the hits are counted (a core
// whose hit record is not the wire's; trace_packing_in_place otherwise).
static int trace_omitting_misses(const wire_request_t* req, env_t* e, const env_raycast_t* r,
                                 ray_result_t* res, err_msg_t* msg) {
  if (HIT_IN_PLACE) {
    return trace_packing_in_place(req, e, r, res, msg);
  }
  size_t n = r->nray;
  res->hits = mem_alloc((n ? n : 1) * sizeof(*res->hits));
  if (!res->hits) {
    return err_set(msg, ERR_NOMEM, "out of memory for %zu rays", n);
  }
  int rc = env_raycast(e, r, res->hits, msg);
  if (rc) {
    return rc;
  }
  size_t nhit = 0;
  for (size_t i = 0; i < n; i++) {
    nhit += !is_miss(&res->hits[i]);
  }
  uint8_t *rec, *mask;
  rc = reply_alloc(wire_id(req), nhit * WIRE_HIT_MASKED_RECORD_BYTES, env_changes(e), res, &rec,
                   &mask, (n + 7) / 8, msg);
  if (!rc) {
    wire_hit_mask_records(res->hits, n, mask, rec);
  }
  return rc;
}


// The reply to a request in the packed form: four arrays.
static int hits_as_arrays(size_t n, ray_result_t* res, err_msg_t* msg) {
  size_t alloc_n = n ? n : 1;
  res->distances = mem_alloc(alloc_n * sizeof(double));
  res->object_ids = mem_alloc(alloc_n * sizeof(uint32_t));
  res->labels = mem_alloc(alloc_n * sizeof(uint32_t));
  res->normals = mem_alloc(alloc_n * 3 * sizeof(double));
  if (!res->distances || !res->object_ids || !res->labels || !res->normals) {
    return err_set(msg, ERR_NOMEM, "out of memory for %zu results", n);
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
  return 0;
}


static int trace(const wire_request_t* req, const Sensim__V1__Raycast* m, env_t* e,
                 const bulk_t b[3], outcome_t* o, ray_result_t* res) {
  char amount[96];
  double origin[3] = {0.0, 0.0, 0.0};
  if (m->origin && (m->n_origins || m->has_origins_bytes)) {
    return err_set(&o->msg, ERR_INVAL, "origin and %s are both set: send one origin for every "
                   "ray or one per ray", b[0].name);
  }
  if (m->origin) {
    // the rays are counted by their directions
    if (!b[1].bytes && b[1].count % 3 != 0) {
      return err_set(&o->msg, ERR_INVAL, "directions has %zu values, not a multiple of 3",
                     b[1].count);
    }
    origin[0] = m->origin->x;
    origin[1] = m->origin->y;
    origin[2] = m->origin->z;
  } else if (!b[0].bytes && b[0].count % 3 != 0) {
    return err_set(&o->msg, ERR_INVAL, "origins has %zu values, not a multiple of 3",
                   b[0].count);
  }
  size_t n = (m->origin ? b[1].count : b[0].count) / 3;
  if (b[1].count != 3 * n) {
    return err_set(&o->msg, ERR_INVAL, "%s, expected %zu (%d per ray, %zu rays in %s)",
                   bulk_amount(&b[1], 8, amount, sizeof(amount)),
                   b[1].bytes ? 24 * n : 3 * n, b[1].bytes ? 24 : 3, n, b[0].name);
  }
  if (b[2].count != 0 && b[2].count != 1 && b[2].count != n) {
    return err_set(&o->msg, ERR_INVAL, "%s, expected 0, %d or %zu (one per ray)",
                   bulk_amount(&b[2], 8, amount, sizeof(amount)), b[2].bytes ? 8 : 1,
                   b[2].bytes ? 8 * n : n);
  }
  if (m->has_max_range && (isnan(m->max_range) || m->max_range < 0)) {
    return err_set(&o->msg, ERR_INVAL, "max_range = %g must be >= 0 (0 = unlimited)",
                   m->max_range);
  }
  if (n > UINT32_MAX) {
    return err_set(&o->msg, ERR_INVAL, "%zu rays exceed %u", n, (unsigned)UINT32_MAX);
  }
  env_raycast_t r = {0};
  r.nray = (uint32_t)n;
  r.origins = m->origin ? NULL : b[0].data;
  r.origin = m->origin ? origin : NULL;
  r.directions = b[1].data;
  r.max_range = m->has_max_range ? m->max_range : 0.0;
  r.ntime = (uint32_t)b[2].count;
  r.times = b[2].data;
  if (m->n_exclude_bodies > ENV_MAX_EXCLUDED_BODIES) {
    return err_set(&o->msg, ERR_INVAL, "exclude_bodies has %zu bodies, more than %d",
                   m->n_exclude_bodies, ENV_MAX_EXCLUDED_BODIES);
  }
  r.exclude_bodies = m->exclude_bodies;
  r.nexclude_body = (uint32_t)m->n_exclude_bodies;
  r.group_mask = m->has_group_mask ? m->group_mask : 0;
  wire_get_cancel(req, &r.cancelled, &r.cancel_ctx);
  if (m->omit_misses || b[0].bytes || b[1].bytes || b[2].bytes) {
    int rc = m->omit_misses ? trace_omitting_misses(req, e, &r, res, &o->msg)
                            : trace_to_records(req, e, &r, res, &o->msg);
    if (rc) {
      mem_free(res->payload);
      res->payload = NULL;
    }
    return rc;
  }
  res->hits = mem_alloc((n ? n : 1) * sizeof(*res->hits));
  if (!res->hits) {
    return err_set(&o->msg, ERR_NOMEM, "out of memory for %zu rays", n);
  }
  int rc = env_raycast(e, &r, res->hits, &o->msg);
  if (rc) {
    return rc;
  }
  rc = hits_as_arrays(n, res, &o->msg);
  if (rc) {
    return rc;
  }
  res->msg.has_world_serial = 1;
  res->msg.world_serial = env_changes(e);
  o->reply.body_case = SENSIM__V1__ENVELOPE__BODY_RAYCAST_RESULT;
  o->reply.raycast_result = &res->msg;
  return 0;
}


static int do_raycast(const wire_request_t* req, const Sensim__V1__Raycast* m, env_t* e,
                      outcome_t* o, ray_result_t* res) {
  bulk_t b[3];
  memset(b, 0, sizeof(b));
  int rc = bulk_take(&b[0], "origins", "origins_bytes", m->n_origins, m->origins,
                     m->has_origins_bytes, &m->origins_bytes, 8, 24, "float64 x y z per ray",
                     &o->msg);
  rc = rc ? rc
          : bulk_take(&b[1], "directions", "directions_bytes", m->n_directions,
                      m->directions, m->has_directions_bytes, &m->directions_bytes, 8, 24,
                      "float64 x y z per ray", &o->msg);
  rc = rc ? rc
          : bulk_take(&b[2], "times", "times_bytes", m->n_times, m->times, m->has_times_bytes,
                      &m->times_bytes, 8, 8, "float64 per time", &o->msg);
  if (!rc) {
    rc = trace(req, m, e, b, o, res);
    if (rc) {
      bulk_rename(&o->msg, b, 3);
    }
  }
  for (int i = 0; i < 3; i++) {
    bulk_free(&b[i]);
  }
  return rc;
}


// A Step for a caller that wants its reply in one payload (tests, tools): one frame, its
// pieces copied together.
static int step_in_one_payload(const wire_request_t* r, env_t* e, uint8_t** out,
                               size_t* out_len, int* out_code) {
  wire_step_limits_t lim = {.max_frame_bytes = UINT32_MAX, .max_reply_bytes = UINT64_MAX};
  wire_step_t st;
  int rc = wire_step_execute(r, e, &lim, &st);
  *out_code = st.code;
  if (rc == 0) {
    shared_buf_t* f = st.frames[0];
    uint32_t count = shared_buf_pieces(f, 4, NULL, NULL, 0);
    const uint8_t** p = mem_alloc((count + 1) * sizeof(*p));
    size_t* n = mem_alloc((count + 1) * sizeof(*n));
    *out_len = shared_buf_len(f);
    *out = mem_alloc(*out_len ? *out_len : 1);
    rc = p && n && *out ? 0 : ERR_NOMEM;
    if (rc == 0) {
      shared_buf_pieces(f, 4, p, n, count);
      for (uint32_t k = 0, at = 0; k < count; k++) {
        memcpy(*out + at, p[k], n[k]);
        at += (uint32_t)n[k];
      }
    } else {
      mem_free(*out);
    }
    mem_free(p);
    mem_free(n);
  }
  wire_step_free(&st);
  return rc;
}


int wire_env_execute(const wire_request_t* r, env_t* e, uint8_t** out, size_t* out_len,
                     int* out_code) {
  const Sensim__V1__Envelope* env = wire_envelope(r);
  outcome_t o;
  memset(&o, 0, sizeof(o));
  sensim__v1__envelope__init(&o.reply);
  ray_result_t rays;
  memset(&rays, 0, sizeof(rays));
  sensim__v1__raycast_result__init(&rays.msg);
  wire_description_t* described = NULL;

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
      return step_in_one_payload(r, e, out, out_len, out_code);
    case SENSIM__V1__ENVELOPE__BODY_CREATE_SENSOR:
      o.code = wire_sensor_create(env->create_sensor, e, &o.msg);
      break;
    case SENSIM__V1__ENVELOPE__BODY_RAYCAST:
      o.code = do_raycast(r, env->raycast, e, &o, &rays);
      break;
    case SENSIM__V1__ENVELOPE__BODY_DESCRIBE:
      o.code = wire_describe(env->describe, e, &o.reply, &described, &o.msg);
      break;
    default:
      o.code = err_set(&o.msg, ERR_INTERNAL, "not an environment request");
      break;
  }

  // any request but a raycast may have changed the environment (RaycastResult's
  // world_serial): a step refused after its sensors ran has still moved the time line, so
  // refused ones count too (counting one too many only makes a client send its rays again)
  if (env->body_case != SENSIM__V1__ENVELOPE__BODY_RAYCAST &&
      env->body_case != SENSIM__V1__ENVELOPE__BODY_DESCRIBE) {
    env_count_change(e);
  }

  // on failure the reply is the status alone, its message prefixed with the request's name
  char text[sizeof(o.msg.text) + 64];
  int rc;
  if (o.code) {
    snprintf(text, sizeof(text), "%s: %s", wire_body_name(r), o.msg.text);
    Sensim__V1__Envelope bare = SENSIM__V1__ENVELOPE__INIT;
    rc = wire_pack_reply(wire_id(r), o.code, text, &bare, out, out_len);
  } else if (rays.payload) {
    *out = rays.payload;  // encoded around the hit records already
    *out_len = rays.payload_len;
    rays.payload = NULL;
    rc = 0;
  } else {
    rc = wire_pack_reply(wire_id(r), 0, NULL, &o.reply, out, out_len);
  }
  ray_result_free(&rays);
  wire_describe_free(described);
  *out_code = o.code;
  return rc;
}
