// SPDX-License-Identifier: MIT
// test_client_scene.c: describing the Sensor Environment through the C client, against the
// real sensimd. What was sent is checked where it shows: rays meet meshes and primitives at
// their analytic distances, an IMU reads the gravity and the magnetic field (a dipole's, from
// its formula) that were set; every function's refusals name the argument (client) or the
// field (daemon).
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"


// One ray's hit.
static sensim_status_t cast(sensim_client_t* cli, double ox, double oy, double oz, double dx,
                            double dy, double dz, sensim_hit_t* hit) {
  double o[3] = {ox, oy, oz}, d[3] = {dx, dy, dz};
  sensim_raycast_t r;
  sensim_raycast_init(&r);
  r.nrays = 1;
  r.origins = o;
  r.directions = d;
  return sensim_raycast(cli, &r, hit, NULL);
}


TEST(scene_mesh_is_traced_where_it_was_sent) {
  td_daemon_t d;
  ASSERT_OK(td_start(&d, NULL));
  sensim_client_t* cli = td_connect(&d, "mesh");
  ASSERT_TRUE(cli != NULL);

  // a 2 x 2 square in the plane x = 3, two triangles
  float v[4][3] = {{3, -1, -1}, {3, 1, -1}, {3, 1, 1}, {3, -1, 1}};
  uint32_t idx[2][3] = {{0, 1, 2}, {0, 2, 3}};
  uint32_t mats[2] = {0, 0};
  sensim_mesh_t m;
  sensim_mesh_init(&m);
  m.id = 1;
  m.vertices = &v[0][0];
  m.nvertices = 4;
  m.indices = &idx[0][0];
  m.ntriangles = 2;
  m.material_ids = mats;
  m.name = "square";
  ASSERT_OK_ST(cli, sensim_create_mesh(cli, &m));
  sensim_object_t obj;
  sensim_object_init(&obj);
  obj.id = 5;
  obj.geometry_id = 1;
  obj.label = 42;
  ASSERT_OK_ST(cli, sensim_create_object(cli, &obj));
  sensim_hit_t hit;
  ASSERT_OK_ST(cli, cast(cli, 0, 0.5, -0.25, 1, 0, 0, &hit));
  ASSERT_NEAR(hit.distance, 3.0, 1e-6);
  ASSERT_EQ(hit.object_id, 5);
  ASSERT_EQ(hit.label, 42);
  ASSERT_NEAR(hit.normal[0], -1.0, 1e-6);
  ASSERT_OK_ST(cli, cast(cli, 0, 1.5, 0, 1, 0, 0, &hit));  // beside it
  ASSERT_TRUE(isinf(hit.distance) && hit.object_id == 0);

  // refusals: the client's (arguments), then the daemon's (values)
  ASSERT_STATUS(cli, sensim_create_mesh(cli, NULL), SENSIM_INVALID_ARGUMENT, "mesh: NULL");
  sensim_mesh_t bad = m;
  bad.vertices = NULL;
  ASSERT_STATUS(cli, sensim_create_mesh(cli, &bad), SENSIM_INVALID_ARGUMENT, "mesh.vertices");
  bad = m;
  bad.indices = NULL;
  ASSERT_STATUS(cli, sensim_create_mesh(cli, &bad), SENSIM_INVALID_ARGUMENT, "mesh.indices");
  bad = m;
  bad.struct_size = 8;
  ASSERT_STATUS(cli, sensim_create_mesh(cli, &bad), SENSIM_INVALID_ARGUMENT,
                "mesh.struct_size");
  char name[300];
  memset(name, 'n', sizeof(name) - 1);
  name[sizeof(name) - 1] = '\0';
  bad = m;
  bad.id = 2;
  bad.name = name;
  ASSERT_STATUS(cli, sensim_create_mesh(cli, &bad), SENSIM_INVALID_ARGUMENT, "mesh.name");
  ASSERT_STATUS(cli, sensim_create_mesh(cli, &m), SENSIM_ALREADY_EXISTS, NULL);
  idx[1][2] = 9;
  bad = m;
  bad.id = 2;
  ASSERT_STATUS(cli, sensim_create_mesh(cli, &bad), SENSIM_INVALID_ARGUMENT, "indices");
  // arrays no frame can hold (over 4 GiB: a frame's length is a u32) are a request too large,
  // refused before a byte of them is read or sent, and the connection goes on: it was
  // SENSIM_EPROTO, which says the connection is closed. The same for a state.
  bad = m;
  bad.id = 2;
  bad.nvertices = UINT32_MAX;
  ASSERT_STATUS(cli, sensim_create_mesh(cli, &bad), SENSIM_RESOURCE_EXHAUSTED, "4 GiB");
  sensim_state_t state;
  sensim_state_init(&state);
  uint32_t joint = 1;
  double position = 0.0;
  state.njoints = UINT32_MAX;
  state.joint_ids = &joint;
  state.joint_positions = &position;
  ASSERT_STATUS(cli, sensim_update_state(cli, &state), SENSIM_RESOURCE_EXHAUSTED, "4 GiB");
  ASSERT_OK_ST(cli, sensim_ping(cli, NULL, 0, NULL));
  ASSERT_EQ(sensim_create_mesh(NULL, &m), SENSIM_INVALID_ARGUMENT);
  sensim_client_close(cli);
  ASSERT_EQ(td_stop(&d), 0);
  return 0;
}


TEST(scene_primitives_have_their_analytic_sizes) {
  td_daemon_t d;
  ASSERT_OK(td_start(&d, NULL));
  sensim_client_t* cli = td_connect(&d, "primitives");
  ASSERT_TRUE(cli != NULL);

  // each shape at its own place along y, every 100 m
  struct {
    sensim_shape_t shape;
    double hx, hy, hz, r, hl, hs;
    double expect_x, expect_z;  // distance of a ray from 10 m along -x, and from 10 m down -z
  } k[] = {
      {SENSIM_SHAPE_BOX, 1, 2, 3, 0, 0, 0, 9, 7},
      {SENSIM_SHAPE_SPHERE, 0, 0, 0, 1.5, 0, 0, 8.5, 8.5},
      {SENSIM_SHAPE_CYLINDER, 0, 0, 0, 1, 2, 0, 9, 8},
      {SENSIM_SHAPE_CAPSULE, 0, 0, 0, 1, 2, 0, 9, 7},
      {SENSIM_SHAPE_PLANE, 0, 0, 0, 0, 0, 5, INFINITY, 10},
  };
  for (uint32_t i = 0; i < 5; i++) {
    sensim_primitive_t p;
    sensim_primitive_init(&p);
    p.id = i + 1;
    p.shape = k[i].shape;
    p.half_extents[0] = k[i].hx;
    p.half_extents[1] = k[i].hy;
    p.half_extents[2] = k[i].hz;
    p.radius = k[i].r;
    p.half_length = k[i].hl;
    p.half_size = k[i].hs;
    ASSERT_OK_ST(cli, sensim_create_primitive(cli, &p));
    sensim_object_t obj;
    sensim_object_init(&obj);
    obj.id = i + 1;
    obj.geometry_id = i + 1;
    obj.local_pose.position[1] = 100.0 * i;
    ASSERT_OK_ST(cli, sensim_create_object(cli, &obj));
  }
  for (uint32_t i = 0; i < 5; i++) {
    sensim_hit_t hx, hz;
    ASSERT_OK_ST(cli, cast(cli, 10, 100.0 * i, 0, -1, 0, 0, &hx));
    ASSERT_OK_ST(cli, cast(cli, 0, 100.0 * i, 10, 0, 0, -1, &hz));
    if (isinf(k[i].expect_x)) {
      ASSERT_TRUE(isinf(hx.distance));
    } else {
      ASSERT_NEAR(hx.distance, k[i].expect_x, 1e-5);
      ASSERT_EQ(hx.object_id, i + 1);
    }
    ASSERT_NEAR(hz.distance, k[i].expect_z, 1e-5);
    ASSERT_NEAR(hz.normal[2], 1.0, 1e-5);
  }

  sensim_primitive_t p;
  sensim_primitive_init(&p);
  p.id = 9;
  p.shape = (sensim_shape_t)9;
  ASSERT_STATUS(cli, sensim_create_primitive(cli, &p), SENSIM_INVALID_ARGUMENT, "prim.shape");
  p.shape = SENSIM_SHAPE_SPHERE;
  p.radius = 0.0;
  ASSERT_STATUS(cli, sensim_create_primitive(cli, &p), SENSIM_INVALID_ARGUMENT, "radius");
  ASSERT_STATUS(cli, sensim_create_primitive(cli, NULL), SENSIM_INVALID_ARGUMENT, "prim: NULL");
  p.radius = 1.0;
  p.id = 1;
  ASSERT_STATUS(cli, sensim_create_primitive(cli, &p), SENSIM_ALREADY_EXISTS, NULL);
  sensim_client_close(cli);
  ASSERT_EQ(td_stop(&d), 0);
  return 0;
}


TEST(scene_materials_and_media) {
  td_daemon_t d;
  ASSERT_OK(td_start(&d, NULL));
  sensim_client_t* cli = td_connect(&d, "materials");
  ASSERT_TRUE(cli != NULL);
  sensim_material_t m;
  sensim_material_init(&m);
  m.id = 1;
  m.reflectance = 0.2;
  m.name = "asphalt";
  ASSERT_OK_ST(cli, sensim_set_material(cli, &m));
  m.id = 2;
  m.model = SENSIM_MATERIAL_TWO_LAYER;
  m.refractive_index = 1.5;
  ASSERT_OK_ST(cli, sensim_set_material(cli, &m));
  const sensim_info_t* info;
  ASSERT_OK_ST(cli, sensim_get_info(cli, &info));
  ASSERT_EQ(info->environments[0].materials, 3);  // the built-in default and two

  m.model = (sensim_material_model_t)0;
  ASSERT_STATUS(cli, sensim_set_material(cli, &m), SENSIM_INVALID_ARGUMENT, "mat.model");
  m.model = SENSIM_MATERIAL_LAMBERTIAN;
  m.reflectance = 1.5;
  ASSERT_STATUS(cli, sensim_set_material(cli, &m), SENSIM_INVALID_ARGUMENT, "reflectance");
  m.model = SENSIM_MATERIAL_TWO_LAYER;
  m.specular_roughness = -1;
  ASSERT_STATUS(cli, sensim_set_material(cli, &m), SENSIM_INVALID_ARGUMENT,
                "specular_roughness");
  ASSERT_STATUS(cli, sensim_set_material(cli, NULL), SENSIM_INVALID_ARGUMENT, "mat: NULL");

  // media: the environment's and one an object can fill, each preset
  sensim_ambient_t a;
  sensim_ambient_init(&a);
  ASSERT_OK_ST(cli, sensim_set_ambient(cli, &a));
  sensim_medium_kind_t kinds[4] = {SENSIM_MEDIUM_CLEAR_AIR, SENSIM_MEDIUM_FOG, SENSIM_MEDIUM_RAIN,
                                   SENSIM_MEDIUM_SNOW};
  for (int i = 0; i < 4; i++) {
    a.id = (uint32_t)i + 1;
    a.kind = kinds[i];
    ASSERT_OK_ST(cli, sensim_set_ambient(cli, &a));
  }
  a.kind = (sensim_medium_kind_t)6;
  ASSERT_STATUS(cli, sensim_set_ambient(cli, &a), SENSIM_INVALID_ARGUMENT, "amb.kind");
  a.kind = SENSIM_MEDIUM_FOG;
  a.visibility = -1;
  ASSERT_STATUS(cli, sensim_set_ambient(cli, &a), SENSIM_INVALID_ARGUMENT, "visibility");
  a.kind = SENSIM_MEDIUM_CUSTOM;
  a.refractive_index = 0.5;
  ASSERT_STATUS(cli, sensim_set_ambient(cli, &a), SENSIM_INVALID_ARGUMENT, "refractive_index");
  ASSERT_STATUS(cli, sensim_set_ambient(cli, NULL), SENSIM_INVALID_ARGUMENT, "amb: NULL");
  sensim_client_close(cli);
  ASSERT_EQ(td_stop(&d), 0);
  return 0;
}


// One step of an IMU with an accelerometer and a magnetometer on body 1 at rest at the
// origin: its first record.
static sensim_status_t imu_reading(sensim_client_t* cli, double t, sensim_imu_sample_t* out) {
  uint32_t ids[1] = {1};
  sensim_pose_t pose = sensim_pose_identity();
  sensim_state_t state;
  sensim_state_init(&state);
  state.time = t;
  state.nbodies = 1;
  state.body_ids = ids;
  state.body_poses = pose.position;
  sensim_step_t step;
  sensim_step_init(&step);
  step.time = t;
  const sensim_step_result_t* r;
  sensim_status_t st = sensim_update_and_step(cli, &state, &step, &r);
  if (st == SENSIM_OK) {
    if (r->noutputs != 1 || r->outputs[0].kind != SENSIM_PAYLOAD_IMU) {
      return SENSIM_EPROTO;
    }
    *out = r->outputs[0].imu;
  }
  return st;
}


TEST(scene_environment_settings_reach_the_sensors) {
  td_daemon_t d;
  ASSERT_OK(td_start(&d, NULL));
  sensim_client_t* cli = td_connect(&d, "settings");
  ASSERT_TRUE(cli != NULL);
  sensim_body_t body;
  sensim_body_init(&body);
  body.id = 1;
  ASSERT_OK_ST(cli, sensim_create_body(cli, &body));
  sensim_sensor_t s;
  sensim_sensor_init(&s);
  s.id = 1;
  s.body_id = 1;
  sensim_imu_config_t imu;
  sensim_imu_config_init(&imu);
  imu.has_gyroscope = false;
  imu.has_magnetometer = true;
  ASSERT_OK_ST(cli, sensim_create_imu(cli, &s, &imu));

  // gravity (0, 0, -5) read at rest as +5 up; a uniform field plus a dipole of 1 A m^2 along
  // z at (1, 0, 0): at the origin mu0 / 4 pi (3 (m.r) r - m) / |r|^3 = (0, 0, -1e-7) T
  sensim_dipole_t dip = {{0, 0, 1}, {1, 0, 0}, 0};
  sensim_environment_t e;
  sensim_environment_init(&e);
  e.set_gravity = true;
  e.gravity[2] = -5.0;
  e.set_magnetic_field = true;
  e.magnetic_field[0] = 2e-5;
  e.set_dipoles = true;
  e.dipoles = &dip;
  e.ndipoles = 1;
  e.set_seed = true;
  e.seed = 7;
  e.set_freeze_objects = true;
  ASSERT_OK_ST(cli, sensim_set_environment(cli, &e));
  sensim_imu_sample_t r;
  ASSERT_OK_ST(cli, imu_reading(cli, 0.0, &r));
  ASSERT_OK_ST(cli, imu_reading(cli, 0.01, &r));
  ASSERT_TRUE(r.has_acceleration && r.has_magnetic_field && !r.has_angular_velocity);
  ASSERT_NEAR(r.acceleration[0], 0.0, 1e-9);
  ASSERT_NEAR(r.acceleration[2], 5.0, 1e-9);
  ASSERT_NEAR(r.magnetic_field[0], 2e-5, 1e-15);
  ASSERT_NEAR(r.magnetic_field[1], 0.0, 1e-15);
  ASSERT_NEAR(r.magnetic_field[2], -1e-7, 1e-15);
  ASSERT_EQ(r.nvalues, 6);
  ASSERT_NEAR(r.values[2], 5.0, 1e-9);

  // only what is marked set changes: clearing the dipoles leaves gravity as it is
  sensim_environment_init(&e);
  e.set_dipoles = true;
  ASSERT_OK_ST(cli, sensim_set_environment(cli, &e));
  ASSERT_OK_ST(cli, imu_reading(cli, 0.02, &r));
  ASSERT_NEAR(r.acceleration[2], 5.0, 1e-9);
  ASSERT_NEAR(r.magnetic_field[2], 0.0, 1e-15);

  e.ndipoles = 2;
  ASSERT_STATUS(cli, sensim_set_environment(cli, &e), SENSIM_INVALID_ARGUMENT, "env.dipoles");
  sensim_environment_init(&e);
  e.set_gravity = true;
  e.gravity[1] = NAN;
  ASSERT_STATUS(cli, sensim_set_environment(cli, &e), SENSIM_INVALID_ARGUMENT, "gravity");
  ASSERT_STATUS(cli, sensim_set_environment(cli, NULL), SENSIM_INVALID_ARGUMENT, "env: NULL");
  sensim_client_close(cli);
  ASSERT_EQ(td_stop(&d), 0);
  return 0;
}


TEST(scene_objects_ride_their_bodies) {
  td_daemon_t d;
  ASSERT_OK(td_start(&d, NULL));
  sensim_client_t* cli = td_connect(&d, "bodies");
  ASSERT_TRUE(cli != NULL);
  sensim_primitive_t p;
  sensim_primitive_init(&p);
  p.id = 1;
  p.shape = SENSIM_SHAPE_SPHERE;
  p.radius = 1.0;
  ASSERT_OK_ST(cli, sensim_create_primitive(cli, &p));

  // a body at (10, 0, 0) turned 90 degrees about z; an object 2 m along its y, scaled by a
  // half: a sphere of radius 0.5 at (8, 0, 0)
  sensim_body_t b;
  sensim_body_init(&b);
  b.id = 3;
  b.pose.position[0] = 10.0;
  b.pose.orientation[2] = sin(M_PI / 4);
  b.pose.orientation[3] = cos(M_PI / 4);
  b.name = "carrier";
  ASSERT_OK_ST(cli, sensim_create_body(cli, &b));
  sensim_object_t o;
  sensim_object_init(&o);
  o.id = 7;
  o.geometry_id = 1;
  o.body_id = 3;
  o.local_pose.position[1] = 2.0;
  o.scale[0] = o.scale[1] = o.scale[2] = 0.5;
  o.label = 11;
  o.group = 4;
  o.name = "ball";
  ASSERT_OK_ST(cli, sensim_create_object(cli, &o));
  sensim_hit_t hit;
  ASSERT_OK_ST(cli, cast(cli, 0, 0, 0, 1, 0, 0, &hit));
  ASSERT_NEAR(hit.distance, 7.5, 1e-6);
  ASSERT_EQ(hit.object_id, 7);
  ASSERT_EQ(hit.label, 11);

  // the object's group: rays that see only group 0 pass through it
  double org[3] = {0, 0, 0}, dir[3] = {1, 0, 0};
  sensim_raycast_t r;
  sensim_raycast_init(&r);
  r.nrays = 1;
  r.origins = org;
  r.directions = dir;
  r.group_mask = 1;
  ASSERT_OK_ST(cli, sensim_raycast(cli, &r, &hit, NULL));
  ASSERT_TRUE(isinf(hit.distance));
  r.group_mask = 1u << 4;
  ASSERT_OK_ST(cli, sensim_raycast(cli, &r, &hit, NULL));
  ASSERT_NEAR(hit.distance, 7.5, 1e-6);

  // joints
  sensim_joint_t j;
  sensim_joint_init(&j);
  j.id = 1;
  j.type = SENSIM_JOINT_PRISMATIC;
  j.position = 0.25;
  j.name = "slide";
  ASSERT_OK_ST(cli, sensim_create_joint(cli, &j));
  const sensim_info_t* info;
  ASSERT_OK_ST(cli, sensim_get_info(cli, &info));
  ASSERT_EQ(info->environments[0].bodies, 1);
  ASSERT_EQ(info->environments[0].objects, 1);
  ASSERT_EQ(info->environments[0].joints, 1);

  // refusals
  ASSERT_STATUS(cli, sensim_create_body(cli, &b), SENSIM_ALREADY_EXISTS, NULL);
  ASSERT_STATUS(cli, sensim_create_body(cli, NULL), SENSIM_INVALID_ARGUMENT, "body: NULL");
  b.id = 4;
  b.pose.orientation[3] = NAN;
  ASSERT_STATUS(cli, sensim_create_body(cli, &b), SENSIM_INVALID_ARGUMENT, "orientation");
  o.id = 8;
  o.geometry_id = 99;
  ASSERT_STATUS(cli, sensim_create_object(cli, &o), SENSIM_NOT_FOUND, "geometry");
  ASSERT_STATUS(cli, sensim_create_object(cli, NULL), SENSIM_INVALID_ARGUMENT, "obj: NULL");
  j.type = (sensim_joint_type_t)5;
  ASSERT_STATUS(cli, sensim_create_joint(cli, &j), SENSIM_INVALID_ARGUMENT, "joint.type");
  j.type = SENSIM_JOINT_REVOLUTE;
  ASSERT_STATUS(cli, sensim_create_joint(cli, &j), SENSIM_ALREADY_EXISTS, NULL);
  ASSERT_STATUS(cli, sensim_create_joint(cli, NULL), SENSIM_INVALID_ARGUMENT, "joint: NULL");
  sensim_client_close(cli);
  ASSERT_EQ(td_stop(&d), 0);
  return 0;
}


TEST(scene_remove_takes_entities_away) {
  td_daemon_t d;
  ASSERT_OK(td_start(&d, NULL));
  sensim_client_t* cli = td_connect(&d, "remove");
  ASSERT_TRUE(cli != NULL);
  ASSERT_OK_ST(cli, td_sphere(cli, 1, 1.0, 5, 0, 0, 0));
  sensim_hit_t hit;
  ASSERT_OK_ST(cli, cast(cli, 0, 0, 0, 1, 0, 0, &hit));
  ASSERT_NEAR(hit.distance, 4.0, 1e-6);

  ASSERT_STATUS(cli, sensim_remove(cli, SENSIM_ENTITY_GEOMETRY, 1), SENSIM_FAILED_PRECONDITION,
                NULL);  // still used by object 1
  ASSERT_OK_ST(cli, sensim_remove(cli, SENSIM_ENTITY_OBJECT, 1));
  ASSERT_OK_ST(cli, cast(cli, 0, 0, 0, 1, 0, 0, &hit));
  ASSERT_TRUE(isinf(hit.distance));
  ASSERT_OK_ST(cli, sensim_remove(cli, SENSIM_ENTITY_GEOMETRY, 1));
  ASSERT_STATUS(cli, sensim_remove(cli, SENSIM_ENTITY_GEOMETRY, 1), SENSIM_NOT_FOUND, NULL);
  ASSERT_STATUS(cli, sensim_remove(cli, (sensim_entity_t)0, 1), SENSIM_INVALID_ARGUMENT, "kind");
  ASSERT_STATUS(cli, sensim_remove(cli, (sensim_entity_t)9, 1), SENSIM_INVALID_ARGUMENT, "kind");
  ASSERT_EQ(sensim_remove(NULL, SENSIM_ENTITY_BODY, 1), SENSIM_INVALID_ARGUMENT);

  // the other kinds
  sensim_body_t b;
  sensim_body_init(&b);
  b.id = 2;
  ASSERT_OK_ST(cli, sensim_create_body(cli, &b));
  ASSERT_OK_ST(cli, sensim_remove(cli, SENSIM_ENTITY_BODY, 2));
  sensim_material_t m;
  sensim_material_init(&m);
  m.id = 3;
  ASSERT_OK_ST(cli, sensim_set_material(cli, &m));
  ASSERT_OK_ST(cli, sensim_remove(cli, SENSIM_ENTITY_MATERIAL, 3));
  sensim_ambient_t a;
  sensim_ambient_init(&a);
  a.id = 4;
  ASSERT_OK_ST(cli, sensim_set_ambient(cli, &a));
  ASSERT_OK_ST(cli, sensim_remove(cli, SENSIM_ENTITY_MEDIUM, 4));
  sensim_joint_t j;
  sensim_joint_init(&j);
  j.id = 5;
  ASSERT_OK_ST(cli, sensim_create_joint(cli, &j));
  ASSERT_OK_ST(cli, sensim_remove(cli, SENSIM_ENTITY_JOINT, 5));
  sensim_sensor_t s;
  sensim_sensor_init(&s);
  s.id = 6;
  sensim_cone_config_t c;
  sensim_cone_config_init(&c);
  ASSERT_OK_ST(cli, sensim_create_cone(cli, &s, &c));
  ASSERT_OK_ST(cli, sensim_remove(cli, SENSIM_ENTITY_SENSOR, 6));
  const sensim_info_t* info;
  ASSERT_OK_ST(cli, sensim_get_info(cli, &info));
  ASSERT_EQ(info->environments[0].geometries, 0);
  ASSERT_EQ(info->environments[0].bodies, 0);
  ASSERT_EQ(info->environments[0].joints, 0);
  ASSERT_EQ(info->environments[0].sensors, 0);
  sensim_client_close(cli);
  ASSERT_EQ(td_stop(&d), 0);
  return 0;
}
