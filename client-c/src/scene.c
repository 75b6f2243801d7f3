// SPDX-License-Identifier: MIT
// scene.c: the Sensor Environment's description: meshes (sent from the caller's arrays),
// primitives, materials, media, environment settings, bodies, objects, joints and removal.
// Each description is checked for what the client can see (NULL arrays, enum values, name
// lengths); the daemon checks the values and names the field it refuses.
#include <math.h>
#include <string.h>

#include "internal.h"


sensim_status_t sensim_set_name(sensim_client_t* cli, char* dst, size_t cap, bool* has,
                                const char* name, const char* what) {
  if (name == NULL) {
    return SENSIM_OK;
  }
  if (!sensim_copy_str(dst, cap, name)) {
    return sensim_cli_fail(cli, SENSIM_INVALID_ARGUMENT, "%s: %zu bytes, at most %zu", what,
                           strlen(name), cap - 1);
  }
  *has = true;
  return SENSIM_OK;
}


void sensim_wire_vec3(sensim_v1_Vec3* v, const double a[3]) {
  v->has_x = v->has_y = v->has_z = true;
  v->x = a[0];
  v->y = a[1];
  v->z = a[2];
}


void sensim_wire_pose(sensim_v1_Pose* p, const sensim_pose_t* pose) {
  p->has_position = p->has_orientation = true;
  sensim_wire_vec3(&p->position, pose->position);
  p->orientation.has_x = p->orientation.has_y = p->orientation.has_z = p->orientation.has_w = true;
  p->orientation.x = pose->orientation[0];
  p->orientation.y = pose->orientation[1];
  p->orientation.z = pose->orientation[2];
  p->orientation.w = pose->orientation[3];
}


//---------------- Meshes and primitives

void sensim_mesh_init_sized(sensim_mesh_t* mesh, size_t size) {
  SENSIM_INIT_SIZED(sensim_mesh_t, mesh, size, (void)0);
}


sensim_status_t sensim_create_mesh(sensim_client_t* cli, const sensim_mesh_t* mesh) {
  if (!cli) {
    return SENSIM_INVALID_ARGUMENT;
  }
  sensim_mesh_t m;
  sensim_mesh_init(&m);
  sensim_status_t st = sensim_sized_copy(cli, &m, sizeof(m), mesh, "mesh", "sensim_mesh_init");
  if (st != SENSIM_OK ||
      (st = sensim_need(cli, m.vertices, m.nvertices, "mesh.vertices", "nvertices")) !=
          SENSIM_OK ||
      (st = sensim_need(cli, m.indices, m.ntriangles, "mesh.indices", "ntriangles")) !=
          SENSIM_OK) {
    return st;
  }
  sensim_v1_CreateMesh* w =
      &sensim_begin(cli, sensim_v1_Envelope_create_mesh_tag)->body.create_mesh;
  w->has_id = true;
  w->id = m.id;
  if ((st = sensim_set_name(cli, w->name, sizeof(w->name), &w->has_name, m.name, "mesh.name")) !=
      SENSIM_OK) {
    return st;
  }
  sensim_span_t v, i, mat;
  sensim_wire_set_span(&w->vertices, &v, m.vertices, 12 * (size_t)m.nvertices);
  sensim_wire_set_span(&w->indices, &i, m.indices, 12 * (size_t)m.ntriangles);
  sensim_wire_set_span(&w->material_ids, &mat, m.material_ids, 4 * (size_t)m.ntriangles);
  return sensim_call_status(cli);
}


void sensim_primitive_init_sized(sensim_primitive_t* prim, size_t size) {
  SENSIM_INIT_SIZED(sensim_primitive_t, prim, size, {
    d_.shape = SENSIM_SHAPE_BOX;
    d_.half_extents[0] = d_.half_extents[1] = d_.half_extents[2] = 0.5;
    d_.radius = 0.5;
    d_.half_length = 0.5;
    d_.radii[0] = d_.radii[1] = d_.radii[2] = 0.5;
  });
}


sensim_status_t sensim_create_primitive(sensim_client_t* cli, const sensim_primitive_t* prim) {
  if (!cli) {
    return SENSIM_INVALID_ARGUMENT;
  }
  sensim_primitive_t p;
  sensim_primitive_init(&p);
  sensim_status_t st = sensim_sized_copy(cli, &p, sizeof(p), prim, "prim",
                                         "sensim_primitive_init");
  if (st != SENSIM_OK) {
    return st;
  }
  if (p.shape == SENSIM_SHAPE_HEIGHT_FIELD &&
      (st = sensim_need(cli, p.heights, (uint64_t)p.rows * p.columns, "prim.heights",
                        "rows x columns")) != SENSIM_OK) {
    return st;
  }
  sensim_span_t heights;              // the height field's samples, sent from p.heights
  sensim_v1_CreatePrimitive* w =
      &sensim_begin(cli, sensim_v1_Envelope_create_primitive_tag)->body.create_primitive;
  w->has_id = true;
  w->id = p.id;
  switch (p.shape) {
    case SENSIM_SHAPE_BOX:
      w->which_shape = sensim_v1_CreatePrimitive_box_tag;
      w->shape.box.has_half_extents = true;
      sensim_wire_vec3(&w->shape.box.half_extents, p.half_extents);
      break;
    case SENSIM_SHAPE_SPHERE:
      w->which_shape = sensim_v1_CreatePrimitive_sphere_tag;
      w->shape.sphere.has_radius = true;
      w->shape.sphere.radius = p.radius;
      break;
    case SENSIM_SHAPE_CYLINDER:
      w->which_shape = sensim_v1_CreatePrimitive_cylinder_tag;
      w->shape.cylinder.has_radius = w->shape.cylinder.has_half_length = true;
      w->shape.cylinder.radius = p.radius;
      w->shape.cylinder.half_length = p.half_length;
      break;
    case SENSIM_SHAPE_CAPSULE:
      w->which_shape = sensim_v1_CreatePrimitive_capsule_tag;
      w->shape.capsule.has_radius = w->shape.capsule.has_half_length = true;
      w->shape.capsule.radius = p.radius;
      w->shape.capsule.half_length = p.half_length;
      break;
    case SENSIM_SHAPE_PLANE:
      w->which_shape = sensim_v1_CreatePrimitive_plane_tag;
      w->shape.plane.has_half_size = true;
      w->shape.plane.half_size = p.half_size;
      break;
    case SENSIM_SHAPE_ELLIPSOID:
      w->which_shape = sensim_v1_CreatePrimitive_ellipsoid_tag;
      w->shape.ellipsoid.has_radii = true;
      sensim_wire_vec3(&w->shape.ellipsoid.radii, p.radii);
      break;
    case SENSIM_SHAPE_RECTANGLE:
      w->which_shape = sensim_v1_CreatePrimitive_rectangle_tag;
      w->shape.rectangle.has_half_size_x = w->shape.rectangle.has_half_size_y = true;
      w->shape.rectangle.half_size_x = p.half_size_x;
      w->shape.rectangle.half_size_y = p.half_size_y;
      w->shape.rectangle.has_one_sided = true;
      w->shape.rectangle.one_sided = p.one_sided;
      break;
    case SENSIM_SHAPE_HEIGHT_FIELD: {
      sensim_v1_HeightField* h = &w->shape.height_field;
      size_t n = (size_t)p.rows * p.columns;
      w->which_shape = sensim_v1_CreatePrimitive_height_field_tag;
      h->has_rows = h->has_columns = h->has_half_size_x = h->has_half_size_y = true;
      h->has_base_depth = true;
      h->rows = p.rows;
      h->columns = p.columns;
      h->half_size_x = p.half_size_x;
      h->half_size_y = p.half_size_y;
      h->base_depth = p.base_depth;
      sensim_wire_set_span(&h->heights, &heights, p.heights, 4 * n);
      break;
    }
    default:
      return sensim_cli_fail(cli, SENSIM_INVALID_ARGUMENT, "prim.shape = %d is not a "
                             "sensim_shape_t (BOX 1 .. HEIGHT_FIELD 8)", (int)p.shape);
  }
  if ((st = sensim_set_name(cli, w->name, sizeof(w->name), &w->has_name, p.name, "prim.name")) !=
      SENSIM_OK) {
    return st;
  }
  return sensim_call_status(cli);
}

//---------------- Materials and media

void sensim_material_init_sized(sensim_material_t* mat, size_t size) {
  SENSIM_INIT_SIZED(sensim_material_t, mat, size, {
    d_.model = SENSIM_MATERIAL_LAMBERTIAN;
    d_.reflectance = 0.8;
    d_.refractive_index = 1.4517;
    d_.specular_roughness = 0.3;
    d_.diffuse_reflectance = 0.8;
    d_.diffuse_roughness = 0.3;
  });
}


sensim_status_t sensim_set_material(sensim_client_t* cli, const sensim_material_t* mat) {
  if (!cli) {
    return SENSIM_INVALID_ARGUMENT;
  }
  sensim_material_t m;
  sensim_material_init(&m);
  sensim_status_t st = sensim_sized_copy(cli, &m, sizeof(m), mat, "mat", "sensim_material_init");
  if (st != SENSIM_OK) {
    return st;
  }
  sensim_v1_SetMaterial* w =
      &sensim_begin(cli, sensim_v1_Envelope_set_material_tag)->body.set_material;
  w->has_id = true;
  w->id = m.id;
  if (m.model == SENSIM_MATERIAL_LAMBERTIAN) {
    w->which_model = sensim_v1_SetMaterial_lambertian_tag;
    w->model.lambertian.has_reflectance = true;
    w->model.lambertian.reflectance = m.reflectance;
  } else if (m.model == SENSIM_MATERIAL_TWO_LAYER) {
    sensim_v1_TwoLayer* t = &w->model.two_layer;
    w->which_model = sensim_v1_SetMaterial_two_layer_tag;
    t->has_refractive_index = t->has_extinction_coefficient = t->has_specular_roughness = true;
    t->has_diffuse_reflectance = t->has_diffuse_roughness = true;
    t->refractive_index = m.refractive_index;
    t->extinction_coefficient = m.extinction_coefficient;
    t->specular_roughness = m.specular_roughness;
    t->diffuse_reflectance = m.diffuse_reflectance;
    t->diffuse_roughness = m.diffuse_roughness;
  } else {
    return sensim_cli_fail(cli, SENSIM_INVALID_ARGUMENT, "mat.model = %d is not a "
                           "sensim_material_model_t (LAMBERTIAN 1, TWO_LAYER 2)", (int)m.model);
  }
  if ((st = sensim_set_name(cli, w->name, sizeof(w->name), &w->has_name, m.name, "mat.name")) !=
      SENSIM_OK) {
    return st;
  }
  return sensim_call_status(cli);
}


void sensim_ambient_init_sized(sensim_ambient_t* amb, size_t size) {
  SENSIM_INIT_SIZED(sensim_ambient_t, amb, size, {
    d_.kind = SENSIM_MEDIUM_CUSTOM;
    d_.attenuation = 0.000402272;
    d_.refractive_index = 1.000273;
    d_.return_gamma_shape = 9.5;
    d_.return_gamma_scale = 0.52;
    d_.return_probability_scaling = 1.58899e-5;
    d_.atmospheric_backscatter = 0.3183098861837907;
    d_.visibility = 1000.0;
    d_.rate = 1.0;
  });
}


sensim_status_t sensim_set_ambient(sensim_client_t* cli, const sensim_ambient_t* amb) {
  if (!cli) {
    return SENSIM_INVALID_ARGUMENT;
  }
  sensim_ambient_t a;
  sensim_ambient_init(&a);
  sensim_status_t st = sensim_sized_copy(cli, &a, sizeof(a), amb, "amb", "sensim_ambient_init");
  if (st != SENSIM_OK) {
    return st;
  }
  sensim_v1_SetAmbient* w =
      &sensim_begin(cli, sensim_v1_Envelope_set_ambient_tag)->body.set_ambient;
  w->has_id = true;
  w->id = a.id;
  switch (a.kind) {
    case SENSIM_MEDIUM_CUSTOM: {
      sensim_v1_AmbientMaterial* c = &w->medium.custom;
      w->which_medium = sensim_v1_SetAmbient_custom_tag;
      c->has_attenuation = c->has_refractive_index = c->has_return_gamma_shape = true;
      c->has_return_gamma_scale = c->has_return_probability_scaling = true;
      c->has_atmospheric_backscatter = true;
      c->attenuation = a.attenuation;
      c->refractive_index = a.refractive_index;
      c->return_gamma_shape = a.return_gamma_shape;
      c->return_gamma_scale = a.return_gamma_scale;
      c->return_probability_scaling = a.return_probability_scaling;
      c->atmospheric_backscatter = a.atmospheric_backscatter;
      break;
    }
    case SENSIM_MEDIUM_CLEAR_AIR:
      w->which_medium = sensim_v1_SetAmbient_clear_air_tag;
      w->medium.clear_air.has_visibility = true;
      w->medium.clear_air.visibility = a.visibility;
      break;
    case SENSIM_MEDIUM_FOG:
      w->which_medium = sensim_v1_SetAmbient_fog_tag;
      w->medium.fog.has_visibility = true;
      w->medium.fog.visibility = a.visibility;
      break;
    case SENSIM_MEDIUM_RAIN:
      w->which_medium = sensim_v1_SetAmbient_rain_tag;
      w->medium.rain.has_rate = true;
      w->medium.rain.rate = a.rate;
      break;
    case SENSIM_MEDIUM_SNOW:
      w->which_medium = sensim_v1_SetAmbient_snow_tag;
      w->medium.snow.has_rate = true;
      w->medium.snow.rate = a.rate;
      break;
    default:
      return sensim_cli_fail(cli, SENSIM_INVALID_ARGUMENT, "amb.kind = %d is not a "
                             "sensim_medium_kind_t (CUSTOM 1 .. SNOW 5)", (int)a.kind);
  }
  return sensim_call_status(cli);
}

//---------------- Environment settings

void sensim_environment_init_sized(sensim_environment_t* env, size_t size) {
  SENSIM_INIT_SIZED(sensim_environment_t, env, size, (void)0);
}


typedef struct dipoles {
  const sensim_dipole_t* v;
  uint32_t n;
} dipoles_t;


static bool encode_dipoles(pb_ostream_t* s, const pb_field_t* f, void* const* arg) {
  const dipoles_t* d = *arg;
  for (uint32_t i = 0; i < d->n; i++) {
    sensim_v1_MagneticDipole m;
    memset(&m, 0, sizeof(m));
    m.has_moment = m.has_position = m.has_body_id = true;
    sensim_wire_vec3(&m.moment, d->v[i].moment);
    sensim_wire_vec3(&m.position, d->v[i].position);
    m.body_id = d->v[i].body_id;
    if (!pb_encode_tag_for_field(s, f) ||
        !pb_encode_submessage(s, sensim_v1_MagneticDipole_fields, &m)) {
      return false;
    }
  }
  return true;
}


sensim_status_t sensim_set_environment(sensim_client_t* cli, const sensim_environment_t* env) {
  if (!cli) {
    return SENSIM_INVALID_ARGUMENT;
  }
  sensim_environment_t e;
  sensim_environment_init(&e);
  sensim_status_t st = sensim_sized_copy(cli, &e, sizeof(e), env, "env",
                                         "sensim_environment_init");
  if (st != SENSIM_OK || (st = sensim_need(cli, e.dipoles, e.set_dipoles ? e.ndipoles : 0,
                                           "env.dipoles", "ndipoles")) != SENSIM_OK) {
    return st;
  }
  sensim_v1_SetEnvironment* w =
      &sensim_begin(cli, sensim_v1_Envelope_set_environment_tag)->body.set_environment;
  if (e.set_gravity) {
    w->has_gravity = true;
    sensim_wire_vec3(&w->gravity, e.gravity);
  }
  if (e.set_magnetic_field) {
    w->has_magnetic_field = true;
    sensim_wire_vec3(&w->magnetic_field, e.magnetic_field);
  }
  dipoles_t dip = {e.dipoles, e.ndipoles};
  if (e.set_dipoles) {
    w->has_replace_dipoles = w->replace_dipoles = true;
    w->dipoles.funcs.encode = encode_dipoles;
    w->dipoles.arg = &dip;
  }
  if (e.set_seed) {
    w->has_seed = true;
    w->seed = e.seed;
  }
  if (e.set_freeze_objects) {
    w->has_freeze_objects = true;
    w->freeze_objects = e.freeze_objects;
  }
  return sensim_call_status(cli);
}

//---------------- Bodies, objects, joints

void sensim_body_init_sized(sensim_body_t* body, size_t size) {
  SENSIM_INIT_SIZED(sensim_body_t, body, size, { d_.pose = sensim_pose_identity(); });
}


sensim_status_t sensim_create_body(sensim_client_t* cli, const sensim_body_t* body) {
  if (!cli) {
    return SENSIM_INVALID_ARGUMENT;
  }
  sensim_body_t b;
  sensim_body_init(&b);
  sensim_status_t st = sensim_sized_copy(cli, &b, sizeof(b), body, "body", "sensim_body_init");
  if (st != SENSIM_OK) {
    return st;
  }
  sensim_v1_CreateBody* w =
      &sensim_begin(cli, sensim_v1_Envelope_create_body_tag)->body.create_body;
  w->has_id = w->has_pose = w->has_linear_velocity = w->has_angular_velocity = true;
  w->has_center_of_mass = true;
  w->id = b.id;
  sensim_wire_pose(&w->pose, &b.pose);
  sensim_wire_vec3(&w->linear_velocity, b.linear_velocity);
  sensim_wire_vec3(&w->angular_velocity, b.angular_velocity);
  sensim_wire_vec3(&w->center_of_mass, b.center_of_mass);
  if ((st = sensim_set_name(cli, w->name, sizeof(w->name), &w->has_name, b.name, "body.name")) !=
      SENSIM_OK) {
    return st;
  }
  return sensim_call_status(cli);
}


void sensim_object_init_sized(sensim_object_t* obj, size_t size) {
  SENSIM_INIT_SIZED(sensim_object_t, obj, size, {
    d_.local_pose = sensim_pose_identity();
    d_.scale[0] = d_.scale[1] = d_.scale[2] = 1.0;
  });
}


sensim_status_t sensim_create_object(sensim_client_t* cli, const sensim_object_t* obj) {
  if (!cli) {
    return SENSIM_INVALID_ARGUMENT;
  }
  sensim_object_t o;
  sensim_object_init(&o);
  sensim_status_t st = sensim_sized_copy(cli, &o, sizeof(o), obj, "obj", "sensim_object_init");
  if (st != SENSIM_OK) {
    return st;
  }
  sensim_v1_CreateObject* w =
      &sensim_begin(cli, sensim_v1_Envelope_create_object_tag)->body.create_object;
  w->has_id = w->has_geometry_id = w->has_body_id = w->has_local_pose = w->has_scale = true;
  w->has_material_id = w->has_label = w->has_medium_id = w->has_group = true;
  w->id = o.id;
  w->geometry_id = o.geometry_id;
  w->body_id = o.body_id;
  sensim_wire_pose(&w->local_pose, &o.local_pose);
  sensim_wire_vec3(&w->scale, o.scale);
  w->material_id = o.material_id;
  w->label = o.label;
  w->medium_id = o.medium_id;
  w->group = o.group;
  if ((st = sensim_set_name(cli, w->name, sizeof(w->name), &w->has_name, o.name, "obj.name")) !=
      SENSIM_OK) {
    return st;
  }
  return sensim_call_status(cli);
}


void sensim_joint_init_sized(sensim_joint_t* joint, size_t size) {
  SENSIM_INIT_SIZED(sensim_joint_t, joint, size, { d_.type = SENSIM_JOINT_REVOLUTE; });
}


sensim_status_t sensim_create_joint(sensim_client_t* cli, const sensim_joint_t* joint) {
  if (!cli) {
    return SENSIM_INVALID_ARGUMENT;
  }
  sensim_joint_t j;
  sensim_joint_init(&j);
  sensim_status_t st = sensim_sized_copy(cli, &j, sizeof(j), joint, "joint", "sensim_joint_init");
  if (st != SENSIM_OK) {
    return st;
  }
  if (j.type != SENSIM_JOINT_REVOLUTE && j.type != SENSIM_JOINT_PRISMATIC) {
    return sensim_cli_fail(cli, SENSIM_INVALID_ARGUMENT, "joint.type = %d is not "
                           "SENSIM_JOINT_REVOLUTE (0) or SENSIM_JOINT_PRISMATIC (1)", (int)j.type);
  }
  sensim_v1_CreateJoint* w =
      &sensim_begin(cli, sensim_v1_Envelope_create_joint_tag)->body.create_joint;
  w->has_id = w->has_type = w->has_position = true;
  w->id = j.id;
  w->type = (sensim_v1_JointType)j.type;
  w->position = j.position;
  if ((st = sensim_set_name(cli, w->name, sizeof(w->name), &w->has_name, j.name,
                            "joint.name")) != SENSIM_OK) {
    return st;
  }
  return sensim_call_status(cli);
}


sensim_status_t sensim_remove(sensim_client_t* cli, sensim_entity_t kind, uint32_t id) {
  if (!cli) {
    return SENSIM_INVALID_ARGUMENT;
  }
  if (kind < SENSIM_ENTITY_GEOMETRY || kind > SENSIM_ENTITY_ENVIRONMENT) {
    return sensim_cli_fail(cli, SENSIM_INVALID_ARGUMENT, "kind = %d is not a sensim_entity_t "
                           "(GEOMETRY 1 .. ENVIRONMENT 8)", (int)kind);
  }
  sensim_v1_Remove* w = &sensim_begin(cli, sensim_v1_Envelope_remove_tag)->body.remove;
  w->has_kind = w->has_id = true;
  w->kind = (sensim_v1_EntityKind)kind;
  w->id = id;
  return sensim_call_status(cli);
}
