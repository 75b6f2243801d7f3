// SPDX-License-Identifier: MIT
// test_env.c: the Sensor Environment: every validation error leaves it unchanged (counts, time,
// and what rays see), mesh errors name the element, all-or-nothing state updates, the time
// line, isolation of environments, moving objects without BVH rebuilds, removal rules,
// interpolation at absolute ray times, and the dipole magnetic field.
#include "world/env.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "base/mem.h"
#include "base/pool.h"
#include "check.h"
#include "env_fixture.h"

//---------------- Fixtures

// The standard scene (env_fixture.h) with geometry 7 a quad (triangle 0 of material 6).
static int populate(env_t* e) {
  mesh_bytes_t cube, quad;
  make_cube(&cube, 1, 0, 0);
  make_quad(&quad, 7, 6, 0);
  return populate_standard(e, &cube.d, &quad.d, NULL);
}


typedef struct fixture {
  scene_device_t* dev;
  env_t* e;
} fixture_t;


// A device and an empty environment of that name.
static int setup_empty(fixture_t* f, const char* name, const env_limits_t* limits,
                       pool_t* pool) {
  err_msg_t msg;
  f->dev = scene_device_create(&msg);
  if (!f->dev) {
    CHECK_FAIL("scene_device_create: %s", msg.text);
  }
  f->e = env_create(name, limits, f->dev, pool, &msg);
  if (!f->e) {
    CHECK_FAIL("env_create: %s", msg.text);
  }
  return 0;
}


static int setup(fixture_t* f, const env_limits_t* limits) {
  ASSERT_OK(setup_empty(f, "test", limits, NULL));
  return populate(f->e);
}


static void teardown(fixture_t* f) {
  env_destroy(f->e);
  scene_device_destroy(f->dev);
}

//---------------- Snapshots: what "unchanged" means

#define NPROBE 8

// A snapshot with the 8 probe rays that see the standard scene.
static int take(env_t* e, env_snap_t* s) {
  return env_snap_take(e, NPROBE, s);
}


// Run `call` (which must fail with `code` and a message containing `text`) and check that the
// environment did not change.
#define ASSERT_REJECTED(e, call, want_code, want_text)                         \
  do {                                                                         \
    env_snap_t before_, after_;                                                \
    ASSERT_OK(take((e), &before_));                                            \
    int64_t live_ = mem_live_count();                                          \
    err_msg_t msg_ = {{0}};                                                    \
    err_msg_t* emsg = &msg_;                                                   \
    int rc_ = (call);                                                          \
    if (rc_ != (want_code)) {                                                  \
      CHECK_FAIL("%s: rc %d (%s), expected %d", #call, rc_, msg_.text, (want_code)); \
    }                                                                          \
    ASSERT_CONTAINS(msg_.text, (want_text));                                   \
    ASSERT_EQ(mem_live_count(), live_);                                        \
    ASSERT_OK(take((e), &after_));                                             \
    if (env_snap_same(&before_, &after_)) CHECK_FAIL("environment changed by %s", #call); \
  } while (0)

//---------------- Geometry


TEST(env_standard_scene_is_seen_by_rays) {
  fixture_t f;
  ASSERT_OK(setup(&f, NULL));
  env_snap_t s;
  ASSERT_OK(take(f.e, &s));
  ASSERT_EQ(s.info.geometries, 3);
  ASSERT_EQ(s.info.materials, 3);
  ASSERT_EQ(s.info.media, 2);
  ASSERT_EQ(s.info.bodies, 2);
  ASSERT_EQ(s.info.objects, 4);
  ASSERT_EQ(s.info.joints, 1);
  ASSERT_EQ(s.info.sensors, 0);

  // from above at t_cur: cube 100 raised to z = 1 (top at 1.5), sphere, scaled cube, quad
  ASSERT_EQ(s.at_cur[0].object_id, 100);
  ASSERT_NEAR(s.at_cur[0].distance, 8.5, 1e-5);
  ASSERT_EQ(s.at_cur[1].object_id, 101);
  ASSERT_NEAR(s.at_cur[1].distance, 9.5, 1e-5);
  ASSERT_EQ(s.at_cur[2].object_id, 102);
  ASSERT_NEAR(s.at_cur[2].distance, 9.0, 1e-5);
  ASSERT_EQ(s.at_cur[3].object_id, 103);
  ASSERT_NEAR(s.at_cur[3].distance, 10.0, 1e-5);
  ASSERT_EQ(s.at_cur[4].object_id, 102);
  ASSERT_EQ(s.at_cur[5].object_id, 103);

  // at t_prev the cube is still at z = 0: the side ray at z = 0 sees it, at z = 1 it does not
  ASSERT_NEAR(s.at_prev[0].distance, 9.5, 1e-5);
  ASSERT_EQ(s.at_prev[6].object_id, 100);
  ASSERT_NEAR(s.at_prev[6].distance, 9.5, 1e-5);
  ASSERT_EQ(s.at_prev[7].object_id, 0);
  ASSERT_EQ(s.at_cur[6].object_id, 101);
  ASSERT_EQ(s.at_cur[7].object_id, 100);

  // per-triangle material of the quad: triangle 0 -> material 6, triangle 1 -> the object's
  const surface_material_t* m = env_hit_material(f.e, 103, 0);
  ASSERT_TRUE(m && m->reflectance == 0.3);
  m = env_hit_material(f.e, 103, 1);
  ASSERT_TRUE(m && m->kind == MATERIAL_LAMBERTIAN && m->reflectance == 0.8);
  m = env_hit_material(f.e, 102, 0);
  ASSERT_TRUE(m && m->kind == MATERIAL_TWO_LAYER);
  ASSERT_TRUE(env_hit_material(f.e, 999, 0) == NULL);
  ASSERT_TRUE(env_get_medium(f.e, 3) != NULL);
  ASSERT_NEAR(env_get_medium(f.e, 0)->attenuation, 0.000402272, 0.0);
  teardown(&f);
  return 0;
}


TEST(env_mesh_errors_name_the_element_and_change_nothing) {
  env_limits_t lim = env_default_limits();
  lim.max_mesh_vertices = 8;
  lim.max_mesh_triangles = 12;
  fixture_t f;
  ASSERT_OK(setup(&f, &lim));
  env_t* e = f.e;
  mesh_bytes_t m;

  // ids
  make_cube(&m, 0, 0, 0);
  ASSERT_REJECTED(e, env_create_mesh(e, &m.d, emsg), ERR_INVAL, "id = 0 is reserved");
  make_cube(&m, 1, 0, 0);
  ASSERT_REJECTED(e, env_create_mesh(e, &m.d, emsg), ERR_EXISTS, "geometry 1 already exists");
  make_cube(&m, 2, 0, 0);
  ASSERT_REJECTED(e, env_create_mesh(e, &m.d, emsg), ERR_EXISTS, "geometry 2 already exists");

  // lengths and counts
  make_cube(&m, 9, 0, 0);
  m.d.vertices_len = 13;
  ASSERT_REJECTED(e, env_create_mesh(e, &m.d, emsg), ERR_INVAL,
                  "vertices length 13 is not a multiple of 12");
  make_cube(&m, 9, 0, 0);
  m.d.indices_len = 143;
  ASSERT_REJECTED(e, env_create_mesh(e, &m.d, emsg), ERR_INVAL,
                  "indices length 143 is not a multiple of 12");
  make_cube(&m, 9, 0, 0);
  m.d.vertices_len = 0;
  ASSERT_REJECTED(e, env_create_mesh(e, &m.d, emsg), ERR_INVAL, "vertices is empty");
  make_cube(&m, 9, 0, 0);
  m.d.indices = NULL;
  ASSERT_REJECTED(e, env_create_mesh(e, &m.d, emsg), ERR_INVAL, "indices is empty");

  // limits
  uint8_t big[9 * 12 + 1] = {0};
  make_cube(&m, 9, 0, 0);
  m.d.vertices = big;
  m.d.vertices_len = 9 * 12;
  ASSERT_REJECTED(e, env_create_mesh(e, &m.d, emsg), ERR_LIMIT, "max_mesh_vertices = 8");
  uint8_t many[13 * 12] = {0};
  make_cube(&m, 9, 0, 0);
  m.d.indices = many;
  m.d.indices_len = sizeof(many);
  ASSERT_REJECTED(e, env_create_mesh(e, &m.d, emsg), ERR_LIMIT, "max_mesh_triangles = 12");

  // values
  make_cube(&m, 9, 0, 0);
  put_f32(m.vbuf + 4 * (5 * 3 + 1), NAN);
  ASSERT_REJECTED(e, env_create_mesh(e, &m.d, emsg), ERR_INVAL, "vertices[5].y = nan is not finite");
  make_cube(&m, 9, 0, 0);
  put_f32(m.vbuf + 4 * (7 * 3 + 2), -INFINITY);
  ASSERT_REJECTED(e, env_create_mesh(e, &m.d, emsg), ERR_INVAL, "vertices[7].z = -inf");
  make_cube(&m, 9, 0, 0);
  put_u32(m.ibuf + 4 * 7, 12);
  ASSERT_REJECTED(e, env_create_mesh(e, &m.d, emsg), ERR_INVAL,
                  "indices[7] = 12 is out of range (8 vertices)");
  make_cube(&m, 9, 0, 0);
  put_u32(m.ibuf + 4 * 35, 8);
  ASSERT_REJECTED(e, env_create_mesh(e, &m.d, emsg), ERR_INVAL,
                  "indices[35] = 8 is out of range (8 vertices)");

  // per-triangle materials
  make_quad(&m, 9, 6, 5);
  m.d.material_ids_len = 5;
  ASSERT_REJECTED(e, env_create_mesh(e, &m.d, emsg), ERR_INVAL,
                  "material_ids length 5 is not a multiple of 4");
  make_quad(&m, 9, 6, 5);
  m.d.material_ids_len = 4;
  ASSERT_REJECTED(e, env_create_mesh(e, &m.d, emsg), ERR_INVAL,
                  "material_ids has 1 entries for 2 triangles");
  make_quad(&m, 9, 6, 42);
  ASSERT_REJECTED(e, env_create_mesh(e, &m.d, emsg), ERR_NOTFOUND,
                  "material_ids[1] = 42 is not a known material");

  // the same mesh, fixed and at unaligned addresses, is accepted
  make_cube(&m, 9, 1, 0);
  err_msg_t msg;
  ASSERT_OK(env_create_mesh(e, &m.d, &msg));
  env_info_t info;
  env_get_info(e, &info);
  ASSERT_EQ(info.geometries, 4);
  teardown(&f);
  return 0;
}


TEST(env_geometry_limit_and_primitive_errors) {
  env_limits_t lim = env_default_limits();
  lim.max_geometries = 3;
  fixture_t f;
  ASSERT_OK(setup(&f, &lim));
  env_t* e = f.e;
  mesh_bytes_t m;
  make_cube(&m, 9, 0, 0);
  ASSERT_REJECTED(e, env_create_mesh(e, &m.d, emsg), ERR_LIMIT, "max_geometries = 3");
  prim_desc_t p = {.id = 9, .kind = SCENE_PRIM_BOX, .size = {1, 1, 1}};
  ASSERT_REJECTED(e, env_create_primitive(e, &p, emsg), ERR_LIMIT, "max_geometries = 3");

  // with room again: sizes by kind
  err_msg_t msg;
  ASSERT_OK(env_remove(e, ENV_ENTITY_OBJECT, 103, &msg));
  ASSERT_OK(env_remove(e, ENV_ENTITY_GEOMETRY, 7, &msg));
  struct {
    prim_desc_t d;
    const char* text;
  } cases[] = {
      {{.id = 9, .kind = (scene_prim_kind_t)99, .size = {1, 1, 1}}, "kind = 99"},
      {{.id = 9, .kind = SCENE_PRIM_BOX, .size = {1, NAN, 1}}, "box.half_extents.y = nan"},
      {{.id = 9, .kind = SCENE_PRIM_BOX, .size = {1, 1, 0}}, "box.half_extents.z = 0 must be > 0"},
      {{.id = 9, .kind = SCENE_PRIM_SPHERE, .size = {0, 1, 1}}, "sphere.radius = 0 must be > 0"},
      {{.id = 9, .kind = SCENE_PRIM_CYLINDER, .size = {1, -1, 0}}, "cylinder.half_length = -1"},
      {{.id = 9, .kind = SCENE_PRIM_CAPSULE, .size = {INFINITY, 1, 0}}, "capsule.radius = inf"},
      {{.id = 9, .kind = SCENE_PRIM_PLANE, .size = {-3, 0, 0}}, "plane.half_size = -3"},
      {{.id = 0, .kind = SCENE_PRIM_SPHERE, .size = {1, 0, 0}}, "id = 0 is reserved"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    ASSERT_REJECTED(e, env_create_primitive(e, &cases[i].d, emsg), ERR_INVAL, cases[i].text);
  }
  prim_desc_t dup = {.id = 2, .kind = SCENE_PRIM_SPHERE, .size = {1, 0, 0}};
  ASSERT_REJECTED(e, env_create_primitive(e, &dup, emsg), ERR_EXISTS, "geometry 2");

  // an unbounded plane (half_size 0) is accepted; unused size entries are ignored
  prim_desc_t plane = {.id = 9, .kind = SCENE_PRIM_PLANE, .size = {0, NAN, NAN}};
  ASSERT_OK(env_create_primitive(e, &plane, &msg));
  teardown(&f);
  return 0;
}

//---------------- Materials, media, settings


TEST(env_material_and_medium_errors_change_nothing) {
  env_limits_t lim = env_default_limits();
  lim.max_materials = 3;  // 0, 5, 6
  lim.max_media = 2;      // 0, 3
  fixture_t f;
  ASSERT_OK(setup(&f, &lim));
  env_t* e = f.e;

  surface_material_t bad = material_default_two_layer();
  bad.reflectance = 1.2;
  ASSERT_REJECTED(e, env_set_material(e, 5, &bad, "x", emsg), ERR_INVAL,
                  "two_layer.diffuse_reflectance = 1.2 is outside [0, 1]");
  ASSERT_TRUE(env_hit_material(e, 102, 0)->reflectance == 0.8);
  surface_material_t ok = material_default_lambertian();
  ASSERT_REJECTED(e, env_set_material(e, 8, &ok, NULL, emsg), ERR_LIMIT, "max_materials = 3");

  ambient_material_t a = ambient_default_air();
  a.gamma_shape = 0.0;
  ASSERT_REJECTED(e, env_set_medium(e, 0, &a, emsg), ERR_INVAL,
                  "ambient.return_gamma_shape = 0 must be > 0");
  ASSERT_NEAR(env_get_medium(e, 0)->gamma_shape, 9.5, 0.0);
  a = ambient_default_air();
  ASSERT_REJECTED(e, env_set_medium(e, 4, &a, emsg), ERR_LIMIT, "max_media = 2");

  // replacing existing ones needs no room; material 0 is replaceable
  err_msg_t msg;
  ok.reflectance = 0.1;
  ASSERT_OK(env_set_material(e, 0, &ok, "ground", &msg));
  ASSERT_TRUE(env_hit_material(e, 100, 0)->reflectance == 0.1);
  ASSERT_OK(env_set_medium(e, 3, &a, &msg));
  ASSERT_NEAR(env_get_medium(e, 3)->attenuation, 0.000402272, 0.0);
  teardown(&f);
  return 0;
}


TEST(env_settings_errors_change_nothing) {
  env_limits_t lim = env_default_limits();
  lim.max_dipoles = 2;
  fixture_t f;
  ASSERT_OK(setup(&f, &lim));
  env_t* e = f.e;
  env_dipole_t d[3] = {{.moment = {0, 0, 1}}, {.moment = {1, 0, 0}, .body_id = 10},
                       {.moment = {0, 1, 0}}};

  env_settings_t s = {.has_gravity = 1, .gravity = {0, NAN, -9.8}};
  ASSERT_REJECTED(e, env_set_settings(e, &s, emsg), ERR_INVAL, "gravity.y = nan is not finite");
  s = (env_settings_t){.has_magnetic_field = 1, .magnetic_field = {INFINITY, 0, 0}};
  ASSERT_REJECTED(e, env_set_settings(e, &s, emsg), ERR_INVAL, "magnetic_field.x = inf");
  // finite but beyond ENV_MAX_VALUE: an IMU's samples would overflow to inf
  s = (env_settings_t){.has_gravity = 1, .gravity = {0, 0, -1e300}};
  ASSERT_REJECTED(e, env_set_settings(e, &s, emsg), ERR_INVAL,
                  "gravity.z = -1e+300 exceeds 1e+12 m/s^2 in magnitude");
  s = (env_settings_t){.replace_dipoles = 1, .dipoles = d, .ndipole = 3};
  ASSERT_REJECTED(e, env_set_settings(e, &s, emsg), ERR_LIMIT, "max_dipoles = 2");
  d[1].body_id = 77;
  s = (env_settings_t){.replace_dipoles = 1, .dipoles = d, .ndipole = 2, .has_magnetic_field = 1};
  ASSERT_REJECTED(e, env_set_settings(e, &s, emsg), ERR_NOTFOUND,
                  "dipoles[1].body_id = 77 is not a known body");
  d[1].body_id = 10;
  d[1].position[2] = NAN;
  ASSERT_REJECTED(e, env_set_settings(e, &s, emsg), ERR_INVAL, "dipoles[1].position.z = nan");

  // appending counts the existing dipoles
  err_msg_t msg;
  d[1].position[2] = 0.0;
  s = (env_settings_t){.replace_dipoles = 1, .dipoles = d, .ndipole = 2};
  ASSERT_OK(env_set_settings(e, &s, &msg));
  s = (env_settings_t){.dipoles = d + 2, .ndipole = 1};
  ASSERT_REJECTED(e, env_set_settings(e, &s, emsg), ERR_LIMIT, "3 dipoles exceed");
  s = (env_settings_t){.replace_dipoles = 1};
  ASSERT_OK(env_set_settings(e, &s, &msg));
  double p[3] = {0, 0, 1}, b[3];
  env_magnetic_field(e, p, b);
  ASSERT_TRUE(b[0] == 0 && b[1] == 0 && b[2] == 0);
  teardown(&f);
  return 0;
}

//---------------- Bodies, objects, joints


TEST(env_body_object_joint_errors_change_nothing) {
  env_limits_t lim = env_default_limits();
  lim.max_joints = 1;
  fixture_t f;
  ASSERT_OK(setup(&f, &lim));
  env_t* e = f.e;

  // bodies
  body_desc_t b = {.id = 0, .pose = xform_identity()};
  ASSERT_REJECTED(e, env_create_body(e, &b, emsg), ERR_INVAL, "id = 0 is reserved");
  b.id = 10;
  ASSERT_REJECTED(e, env_create_body(e, &b, emsg), ERR_EXISTS, "body 10 already exists");
  b.id = 12;
  b.pose.p[1] = NAN;
  ASSERT_REJECTED(e, env_create_body(e, &b, emsg), ERR_INVAL, "pose.position.y = nan");
  b.pose = xform_identity();
  b.pose.q[0] = 0.0;
  ASSERT_REJECTED(e, env_create_body(e, &b, emsg), ERR_INVAL, "pose.orientation has norm 0");
  b.pose.q[0] = 1e-10;
  ASSERT_REJECTED(e, env_create_body(e, &b, emsg), ERR_INVAL, "pose.orientation has norm 1e-10");
  b.pose = xform_identity();
  b.angular_velocity[2] = INFINITY;
  ASSERT_REJECTED(e, env_create_body(e, &b, emsg), ERR_INVAL, "angular_velocity.z = inf");
  b.angular_velocity[2] = 0.0;
  b.center_of_mass[0] = NAN;
  ASSERT_REJECTED(e, env_create_body(e, &b, emsg), ERR_INVAL, "center_of_mass.x = nan");

  // objects
  object_desc_t o = object(0, 1, 10, xform_identity());
  ASSERT_REJECTED(e, env_create_object(e, &o, emsg), ERR_INVAL, "id = 0 is reserved");
  o = object(100, 1, 10, xform_identity());
  ASSERT_REJECTED(e, env_create_object(e, &o, emsg), ERR_EXISTS, "object 100 already exists");
  o = object(104, 4, 10, xform_identity());
  ASSERT_REJECTED(e, env_create_object(e, &o, emsg), ERR_NOTFOUND,
                  "geometry_id = 4 is not a known geometry");
  o = object(104, 0, 10, xform_identity());
  ASSERT_REJECTED(e, env_create_object(e, &o, emsg), ERR_INVAL,
                  "geometry_id = 0 must name a geometry (> 0)");
  o = object(104, 1, 12, xform_identity());
  ASSERT_REJECTED(e, env_create_object(e, &o, emsg), ERR_NOTFOUND,
                  "body_id = 12 is not a known body");
  o = object(104, 1, 10, xform_identity());
  o.material_id = 8;
  ASSERT_REJECTED(e, env_create_object(e, &o, emsg), ERR_NOTFOUND,
                  "material_id = 8 is not a known material");
  o = object(104, 1, 10, xform_identity());
  o.medium_id = 4;
  ASSERT_REJECTED(e, env_create_object(e, &o, emsg), ERR_NOTFOUND,
                  "medium_id = 4 is not a known medium");
  o = object(104, 1, 10, xform_identity());
  o.scale[1] = 0.0;
  ASSERT_REJECTED(e, env_create_object(e, &o, emsg), ERR_INVAL, "scale.y = 0 must be non-zero");
  o.scale[1] = NAN;
  ASSERT_REJECTED(e, env_create_object(e, &o, emsg), ERR_INVAL, "scale.y = nan is not finite");
  o = object(104, 1, 10, xform_identity());
  o.local_pose.q[0] = 0.0;
  ASSERT_REJECTED(e, env_create_object(e, &o, emsg), ERR_INVAL, "local_pose.orientation");
  o = object(104, 1, 10, pose_at(0, 0, INFINITY));
  ASSERT_REJECTED(e, env_create_object(e, &o, emsg), ERR_INVAL, "local_pose.position.z = inf");

  // joints
  joint_desc_t j = {.id = 0, .type = JOINT_TYPE_PRISMATIC};
  ASSERT_REJECTED(e, env_create_joint(e, &j, emsg), ERR_INVAL, "id = 0 is reserved");
  j.id = 20;
  ASSERT_REJECTED(e, env_create_joint(e, &j, emsg), ERR_EXISTS, "joint 20 already exists");
  j.id = 21;
  ASSERT_REJECTED(e, env_create_joint(e, &j, emsg), ERR_LIMIT, "max_joints = 1");
  err_msg_t msg;
  ASSERT_OK(env_remove(e, ENV_ENTITY_JOINT, 20, &msg));
  j.type = (joint_type_t)5;
  ASSERT_REJECTED(e, env_create_joint(e, &j, emsg), ERR_INVAL, "type = 5");
  j.type = JOINT_TYPE_REVOLUTE;
  j.position = NAN;
  ASSERT_REJECTED(e, env_create_joint(e, &j, emsg), ERR_INVAL,
                  "position = nan must be finite and at most 1e+12 in magnitude");
  j.position = 1e308;
  ASSERT_REJECTED(e, env_create_joint(e, &j, emsg), ERR_INVAL, "position = 1e+308 must be");

  // a non-unit quaternion is normalised, a mirrored object is allowed
  b = (body_desc_t){.id = 12, .pose = pose_at(20, 0, 0)};
  b.pose.q[0] = 2.0;
  ASSERT_OK(env_create_body(e, &b, &msg));
  pose_t got;
  ASSERT_OK(env_body_pose(e, 12, 1.0, &got));
  ASSERT_NEAR(got.q[0], 1.0, 1e-15);
  o = object(104, 1, 12, xform_identity());
  o.scale[0] = -1.0;
  ASSERT_OK(env_create_object(e, &o, &msg));
  teardown(&f);
  return 0;
}


TEST(env_create_fails_cleanly_when_allocations_fail) {
  fixture_t f;
  ASSERT_OK(setup(&f, NULL));
  env_t* e = f.e;
  mesh_bytes_t m;
  make_quad(&m, 9, 6, 0);
  m.d.name = "quad";
  body_desc_t b = {.id = 12, .pose = pose_at(0, -5, 0), .name = "b"};
  object_desc_t o = object(104, 9, 12, xform_identity());
  o.name = "o";
  joint_desc_t j = {.id = 21, .name = "j"};
  surface_material_t mat = material_default_lambertian();
  ambient_material_t air = ambient_default_air();

  // fail the 1st, 2nd, ... allocation of each call until it succeeds
  for (int step = 0; step < 6; step++) {
    for (int64_t n = 1;; n++) {
      env_snap_t before, after;
      ASSERT_OK(take(e, &before));
      int64_t live = mem_live_count();
      err_msg_t msg;
      mem_fail_after(n);
      int rc = step == 0   ? env_create_mesh(e, &m.d, &msg)
               : step == 1 ? env_create_body(e, &b, &msg)
               : step == 2 ? env_create_object(e, &o, &msg)
               : step == 3 ? env_create_joint(e, &j, &msg)
               : step == 4 ? env_set_material(e, 8, &mat, "m", &msg)
                           : env_set_medium(e, 9, &air, &msg);
      mem_fail_after(0);
      if (rc == 0) {
        break;
      }
      ASSERT_EQ(rc, ERR_NOMEM);
      ASSERT_EQ(mem_live_count(), live);
      ASSERT_OK(take(e, &after));
      if (env_snap_same(&before, &after)) {
        CHECK_FAIL("call %d changed the environment when allocation %lld failed", step,
                   (long long)n);
      }
      ASSERT_TRUE(n < 100);
    }
  }
  env_info_t info;
  env_get_info(e, &info);
  ASSERT_EQ(info.objects, 5);
  ASSERT_EQ(info.materials, 4);
  ASSERT_EQ(info.media, 3);
  teardown(&f);
  return 0;
}

//---------------- States and time


TEST(env_update_state_is_all_or_nothing) {
  fixture_t f;
  ASSERT_OK(setup(&f, NULL));
  env_t* e = f.e;
  uint32_t ids[3] = {10, 11, 10};
  double poses[21];
  wire_pose(poses, 0, 0, 2);
  wire_pose(poses + 7, 5, 0, 3);
  wire_pose(poses + 14, 0, 0, 4);
  double vel[18] = {0};
  uint32_t jid[2] = {20, 21};
  double jpos[2] = {1.0, 2.0};
  env_state_update_t u = {.time = 2.0, .nbody = 2, .body_ids = ids, .body_poses = poses,
                          .body_velocities = vel, .njoint = 1, .joint_ids = jid,
                          .joint_positions = jpos};

  // one unknown id among good ones
  ids[1] = 99;
  ASSERT_REJECTED(e, env_update_state(e, &u, emsg), ERR_NOTFOUND,
                  "body_ids[1] = 99 is not a known body");
  ids[1] = 0;   // the world frame: not a body to move
  ASSERT_REJECTED(e, env_update_state(e, &u, emsg), ERR_INVAL,
                  "body_ids[1] = 0 is the world frame, which does not move");
  ids[1] = 11;

  // a repeated id
  u.nbody = 3;
  ASSERT_REJECTED(e, env_update_state(e, &u, emsg), ERR_INVAL, "body_ids[2] = 10 is repeated");
  u.nbody = 2;

  // non-finite numbers, a zero quaternion
  poses[9] = NAN;
  ASSERT_REJECTED(e, env_update_state(e, &u, emsg), ERR_INVAL,
                  "body_poses[9] = nan (body 11) is not finite");
  poses[9] = 3;
  poses[10] = poses[11] = poses[12] = poses[13] = 0.0;
  ASSERT_REJECTED(e, env_update_state(e, &u, emsg), ERR_INVAL,
                  "body_poses[10..13] (body 11): orientation norm 0 is below 1e-09");
  poses[13] = 1.0;
  vel[10] = INFINITY;
  ASSERT_REJECTED(e, env_update_state(e, &u, emsg), ERR_INVAL,
                  "body_velocities[10] = inf (body 11) is not finite");
  vel[10] = -2e12;
  ASSERT_REJECTED(e, env_update_state(e, &u, emsg), ERR_INVAL,
                  "body_velocities[10] = -2e+12 (body 11) exceeds 1e+12 rad/s in magnitude");
  vel[10] = 0.0;

  // joints
  u.njoint = 2;
  ASSERT_REJECTED(e, env_update_state(e, &u, emsg), ERR_NOTFOUND,
                  "joint_ids[1] = 21 is not a known joint");
  jid[1] = 0;
  ASSERT_REJECTED(e, env_update_state(e, &u, emsg), ERR_INVAL,
                  "joint_ids[1] = 0 is reserved (joint ids are > 0)");
  jid[1] = 21;
  u.njoint = 1;
  jpos[0] = NAN;
  ASSERT_REJECTED(e, env_update_state(e, &u, emsg), ERR_INVAL,
                  "joint_positions[0] = nan (joint 20) is not finite");
  jpos[0] = 1e13;
  ASSERT_REJECTED(e, env_update_state(e, &u, emsg), ERR_INVAL,
                  "joint_positions[0] = 1e+13 (joint 20) exceeds 1e+12 in magnitude");
  jpos[0] = 1.0;
  jid[1] = 20;
  u.njoint = 2;
  ASSERT_REJECTED(e, env_update_state(e, &u, emsg), ERR_INVAL, "joint_ids[1] = 20 is repeated");
  u.njoint = 1;

  // time
  u.time = 1.0;
  ASSERT_REJECTED(e, env_update_state(e, &u, emsg), ERR_STATE,
                  "time = 1 does not exceed the last state's time 1");
  u.time = NAN;
  ASSERT_REJECTED(e, env_update_state(e, &u, emsg), ERR_INVAL, "time = nan is not finite");

  // the fixed update applies whole, with a non-unit quaternion normalised
  u.time = 2.0;
  poses[13] = 3.0;
  err_msg_t msg;
  ASSERT_OK(env_update_state(e, &u, &msg));
  pose_t p;
  ASSERT_OK(env_body_pose(e, 11, 1.0, &p));
  ASSERT_NEAR(p.p[2], 3.0, 0.0);
  ASSERT_NEAR(p.q[0], 1.0, 1e-15);
  ASSERT_OK(env_body_pose(e, 10, 1.0, &p));
  ASSERT_NEAR(p.p[2], 2.0, 0.0);
  env_time_t t;
  env_get_time(e, &t);
  ASSERT_TRUE(t.t_prev == 0.0 && t.t_cur == 2.0);
  teardown(&f);
  return 0;
}


// The x of body id's position at the end of the interval (-1 when it is unknown).
static double body_x(env_t* e, uint32_t id) {
  pose_t p;
  return env_body_pose(e, id, 1.0, &p) == 0 ? p.p[0] : -1.0;
}


// An update first tries, for its i-th body, the slot the last update's i-th body had, and takes
// it only when that slot holds the id named now: bodies named in another order, removed,
// created again in the same slot, or replaced there by another body are found as by their id,
// and id 0 (which a free slot holds) stays the world frame; an environment that never had a
// body has nothing to remember.
TEST(env_update_state_remembered_slots_are_confirmed) {
  fixture_t f;
  ASSERT_OK(setup_empty(&f, "slots", NULL, NULL));
  env_t* e = f.e;
  err_msg_t msg;
  uint32_t ids[3] = {1, 2, 3};
  double poses[21];
  for (int i = 0; i < 3; i++) {
    wire_pose(poses + 7 * i, 10 + i, 0, 0);   // index i at x = 10 + i
  }
  env_state_update_t u = {.time = 3.0, .nbody = 3, .body_ids = ids, .body_poses = poses};

  // no body yet (nothing remembered), then more bodies named than exist
  ASSERT_REJECTED(e, env_update_state(e, &u, emsg), ERR_NOTFOUND,
                  "body_ids[0] = 1 is not a known body");
  body_desc_t b1 = {.id = 1, .pose = xform_identity()};
  ASSERT_OK(env_create_body(e, &b1, &msg));
  ASSERT_REJECTED(e, env_update_state(e, &u, emsg), ERR_NOTFOUND,
                  "body_ids[1] = 2 is not a known body");
  ASSERT_OK(env_remove(e, ENV_ENTITY_BODY, 1, &msg));

  for (uint32_t id = 1; id <= 3; id++) {
    body_desc_t b = {.id = id, .pose = xform_identity()};
    ASSERT_OK(env_create_body(e, &b, &msg));
  }
  ASSERT_OK(update_bodies(e, 1.0, 3, ids, poses));
  ASSERT_TRUE(body_x(e, 1) == 10 && body_x(e, 2) == 11 && body_x(e, 3) == 12);

  // reversed: no remembered slot holds its id
  ids[0] = 3;
  ids[2] = 1;
  ASSERT_OK(update_bodies(e, 2.0, 3, ids, poses));
  ASSERT_TRUE(body_x(e, 3) == 10 && body_x(e, 2) == 11 && body_x(e, 1) == 12);

  // body 2 removed: its slot, remembered for index 1, is free (it holds id 0)
  ASSERT_OK(env_remove(e, ENV_ENTITY_BODY, 2, &msg));
  ids[1] = 0;
  ASSERT_REJECTED(e, env_update_state(e, &u, emsg), ERR_INVAL,
                  "body_ids[1] = 0 is the world frame, which does not move");
  ids[1] = 2;
  ASSERT_REJECTED(e, env_update_state(e, &u, emsg), ERR_NOTFOUND,
                  "body_ids[1] = 2 is not a known body");

  // another body in that slot: body 2 is still unknown, the new one is found
  body_desc_t b7 = {.id = 7, .pose = xform_identity()};
  ASSERT_OK(env_create_body(e, &b7, &msg));
  ASSERT_REJECTED(e, env_update_state(e, &u, emsg), ERR_NOTFOUND,
                  "body_ids[1] = 2 is not a known body");
  ids[1] = 7;
  ASSERT_OK(update_bodies(e, 3.0, 3, ids, poses));
  ASSERT_TRUE(body_x(e, 3) == 10 && body_x(e, 7) == 11 && body_x(e, 1) == 12);

  // body 2 created again (in the slot body 7 leaves), then named where 7 was, and a longer
  // update whose last index had no remembered slot
  ASSERT_OK(env_remove(e, ENV_ENTITY_BODY, 7, &msg));
  body_desc_t b2 = {.id = 2, .pose = xform_identity()};
  ASSERT_OK(env_create_body(e, &b2, &msg));
  body_desc_t b9 = {.id = 9, .pose = xform_identity()};
  ASSERT_OK(env_create_body(e, &b9, &msg));
  ids[1] = 2;
  ASSERT_OK(update_bodies(e, 4.0, 3, ids, poses));
  ASSERT_TRUE(body_x(e, 3) == 10 && body_x(e, 2) == 11 && body_x(e, 1) == 12);
  uint32_t ids4[4] = {3, 2, 1, 9};
  double poses4[28];
  memcpy(poses4, poses, sizeof(poses));
  wire_pose(poses4 + 21, 13, 0, 0);
  ASSERT_OK(update_bodies(e, 5.0, 4, ids4, poses4));
  ASSERT_TRUE(body_x(e, 9) == 13 && body_x(e, 2) == 11);
  teardown(&f);
  return 0;
}


// An update's numbers pass a one-pass test, and only those it cannot vouch for go through the
// exact checks: the two must agree at every bound. Exactly ENV_MAX_COORD and ENV_MAX_VALUE are
// accepted and the next double is not, on every axis; orientations too small or too large for
// the one-pass test are decided by their norm (1e200 is fine, 5e-10 is below 1e-9); and the
// accepted ones are normalised (against hand values).
TEST(env_update_state_bounds_are_exact) {
  fixture_t f;
  ASSERT_OK(setup(&f, NULL));
  env_t* e = f.e;
  uint32_t ids[1] = {10};
  double poses[7], vel[6] = {0};
  wire_pose(poses, 0, 0, 0);
  env_time_t t;
  env_get_time(e, &t);
  env_state_update_t u = {.time = t.has_time ? t.t_cur + 1.0 : 1.0, .nbody = 1, .body_ids = ids,
                          .body_poses = poses, .body_velocities = vel};
  err_msg_t msg;
  char want[128];
  for (int k = 0; k < 3; k++) {
    poses[k] = -ENV_MAX_COORD;
    ASSERT_OK(env_update_state(e, &u, &msg));
    u.time += 1.0;
    poses[k] = nextafter(ENV_MAX_COORD, INFINITY);
    snprintf(want, sizeof(want), "body_poses[%d] = 1e+09 (body 10) exceeds 1e+09 m", k);
    ASSERT_REJECTED(e, env_update_state(e, &u, emsg), ERR_INVAL, want);
    poses[k] = 0.0;
  }
  for (int k = 0; k < 6; k++) {
    vel[k] = ENV_MAX_VALUE;
    ASSERT_OK(env_update_state(e, &u, &msg));
    u.time += 1.0;
    vel[k] = -nextafter(ENV_MAX_VALUE, INFINITY);
    snprintf(want, sizeof(want), "body_velocities[%d] = -1e+12 (body 10) exceeds 1e+12 %s", k,
             k < 3 ? "m/s" : "rad/s");
    ASSERT_REJECTED(e, env_update_state(e, &u, emsg), ERR_INVAL, want);
    vel[k] = NAN;
    snprintf(want, sizeof(want), "body_velocities[%d] = nan (body 10) is not finite", k);
    ASSERT_REJECTED(e, env_update_state(e, &u, emsg), ERR_INVAL, want);
    vel[k] = 0.0;
  }

  // orientations (wire order qx qy qz qw) and the unit quaternion each becomes (w, x, y, z)
  static const struct {
    double q[4];
    double w, z;                  // expected; x = y = 0
  } fine[] = {
      {{0, 0, 1e200, 1e200}, M_SQRT1_2, M_SQRT1_2},   // squares overflow: scaled
      {{0, 0, 0, 2e-9}, 1.0, 0.0},                    // norm 2e-9: below the one-pass test
      {{0, 0, 1e-8, 0}, 0.0, 1.0},                    // norm 1e-8: its bound
      {{0, 0, -3e144, 4e144}, 0.8, -0.6},             // squares just below 1e290
  };
  for (size_t k = 0; k < sizeof(fine) / sizeof(fine[0]); k++) {
    memcpy(poses + 3, fine[k].q, sizeof(fine[k].q));
    ASSERT_OK(env_update_state(e, &u, &msg));
    pose_t p;
    ASSERT_OK(env_body_pose(e, 10, 1.0, &p));
    ASSERT_NEAR(p.q[0], fine[k].w, 1e-15);
    ASSERT_NEAR(p.q[1], 0.0, 0.0);
    ASSERT_NEAR(p.q[2], 0.0, 0.0);
    ASSERT_NEAR(p.q[3], fine[k].z, 1e-15);
    u.time += 1.0;
  }
  static const double small[][4] = {{0, 0, 0, 5e-10}, {0, 1e-150, 0, 0}, {0, 0, 0, 0}};
  for (size_t k = 0; k < sizeof(small) / sizeof(small[0]); k++) {
    memcpy(poses + 3, small[k], sizeof(small[k]));
    ASSERT_REJECTED(e, env_update_state(e, &u, emsg), ERR_INVAL,
                    "body_poses[3..6] (body 10): orientation norm");
  }
  poses[3] = INFINITY;
  ASSERT_REJECTED(e, env_update_state(e, &u, emsg), ERR_INVAL,
                  "body_poses[3] = inf (body 10) is not finite");
  teardown(&f);
  return 0;
}


TEST(env_time_line_rules) {
  fixture_t f;
  ASSERT_OK(setup_empty(&f, "time", NULL, NULL));
  env_t* e = f.e;
  err_msg_t msg;
  env_time_t t;
  env_get_time(e, &t);
  ASSERT_EQ(t.has_time, 0);

  // stepping needs a state
  ASSERT_EQ(env_step(e, 0.0, &msg), ERR_STATE);
  ASSERT_CONTAINS(msg.text, "no state");

  // the first state may be at any finite time, and a step at it covers an empty interval
  ASSERT_OK(update_bodies(e, -5.0, 0, NULL, NULL));
  env_get_time(e, &t);
  ASSERT_TRUE(t.has_time && t.t_prev == -5.0 && t.t_cur == -5.0 && t.steps == 0);
  ASSERT_EQ(env_step(e, -4.0, &msg), ERR_STATE);
  ASSERT_CONTAINS(msg.text, "is not the time of the last state");
  ASSERT_OK(env_step(e, -5.0, &msg));
  ASSERT_EQ(env_step(e, -5.0, &msg), ERR_STATE);
  ASSERT_CONTAINS(msg.text, "does not exceed the previous step's time");

  // later states strictly increase; several states between steps keep t_prev
  ASSERT_EQ(update_bodies(e, -5.0, 0, NULL, NULL), ERR_STATE);
  ASSERT_OK(update_bodies(e, -4.0, 0, NULL, NULL));
  ASSERT_OK(update_bodies(e, -3.5, 0, NULL, NULL));
  env_get_time(e, &t);
  ASSERT_TRUE(t.t_prev == -5.0 && t.t_cur == -3.5 && t.steps == 1);
  ASSERT_EQ(env_step(e, -4.0, &msg), ERR_STATE);
  ASSERT_OK(env_step(e, -3.5, &msg));
  env_get_time(e, &t);
  ASSERT_TRUE(t.t_prev == -3.5 && t.t_cur == -3.5 && t.steps == 2);
  ASSERT_EQ(env_step(e, INFINITY, &msg), ERR_INVAL);
  teardown(&f);
  return 0;
}


TEST(env_step_and_raycast_errors_change_nothing) {
  env_limits_t lim = env_default_limits();
  lim.max_raycast_rays = NPROBE;
  fixture_t f;
  ASSERT_OK(setup(&f, &lim));
  env_t* e = f.e;
  ASSERT_REJECTED(e, env_step(e, 0.5, emsg), ERR_STATE, "time = 0.5 is not the time");
  ASSERT_REJECTED(e, env_step(e, NAN, emsg), ERR_INVAL, "time = nan is not finite");

  double o[3 * (NPROBE + 1)] = {0}, d[3 * (NPROBE + 1)];
  double times[NPROBE + 1] = {0, 0.5, 1};
  scene_hit_t hits[NPROBE + 1];
  for (int i = 0; i <= NPROBE; i++) {
    d[3 * i] = d[3 * i + 1] = 0.0;
    d[3 * i + 2] = -1.0;
    o[3 * i + 2] = 10.0;
  }
  env_raycast_t r = {.nray = NPROBE + 1, .origins = o, .directions = d};
  ASSERT_REJECTED(e, env_raycast(e, &r, hits, emsg), ERR_LIMIT, "nray = 9 exceeds the limit max_raycast_rays = 8");
  r.nray = 3;
  r.ntime = 2;
  r.times = times;
  ASSERT_REJECTED(e, env_raycast(e, &r, hits, emsg), ERR_INVAL, "ntime = 2 must be 0, 1 or nray");
  r.ntime = 3;
  d[5] = 0.0;
  ASSERT_REJECTED(e, env_raycast(e, &r, hits, emsg), ERR_INVAL, "directions[1] has length 0");
  d[5] = -1.0;
  d[6] = NAN;
  ASSERT_REJECTED(e, env_raycast(e, &r, hits, emsg), ERR_INVAL, "directions[2].x = nan");
  d[6] = 0.0;
  o[4] = -INFINITY;
  ASSERT_REJECTED(e, env_raycast(e, &r, hits, emsg), ERR_INVAL, "origins[1].y = -inf");
  o[4] = 0.0;
  times[2] = 1.0 + 1e-9;
  ASSERT_REJECTED(e, env_raycast(e, &r, hits, emsg), ERR_INVAL,
                  "times[2] = 1.000000001 is outside the interval [0, 1]");
  times[2] = -1e-9;
  ASSERT_REJECTED(e, env_raycast(e, &r, hits, emsg), ERR_INVAL, "times[2]");
  times[2] = NAN;
  ASSERT_REJECTED(e, env_raycast(e, &r, hits, emsg), ERR_INVAL, "times[2] = nan is not finite");
  times[2] = 1.0 + 1e-13;  // within the relative tolerance
  r.max_range = NAN;
  ASSERT_REJECTED(e, env_raycast(e, &r, hits, emsg), ERR_INVAL, "max_range");
  r.max_range = -1.0;  // <= 0: unlimited
  err_msg_t msg;
  ASSERT_OK(env_raycast(e, &r, hits, &msg));
  ASSERT_EQ(hits[0].object_id, 100);   // t = 0: top of the cube at 0.5, 9.5 m away
  ASSERT_NEAR(hits[0].distance, 9.5, 1e-5);
  ASSERT_EQ(hits[1].object_id, 100);   // t = 0.5: top at 1.0
  ASSERT_NEAR(hits[1].distance, 9.0, 1e-5);
  ASSERT_EQ(hits[2].object_id, 100);   // t = 1: top at 1.5
  ASSERT_NEAR(hits[2].distance, 8.5, 1e-5);

  // max_range cuts: the cube at t = 0 is 9.5 m away
  r.max_range = 9.2;
  ASSERT_OK(env_raycast(e, &r, hits, &msg));
  ASSERT_EQ(hits[0].object_id, 0);
  ASSERT_TRUE(isinf(hits[0].distance));
  ASSERT_EQ(hits[2].object_id, 100);
  teardown(&f);
  return 0;
}


// What env_raycast_t.traced saw, from the tracing threads.
typedef struct traced_log {
  scene_hit_t* out;
  const scene_hit_t* ref;        // the same rays traced without the hook
  atomic_int calls[16];          // per batch
  atomic_int rays;
  atomic_int bad;                // a batch off its place, or with hits not yet written
} traced_log_t;


static int same_hit(const scene_hit_t* a, const scene_hit_t* b) {
  return memcmp(&a->distance, &b->distance, 8) == 0 && memcmp(a->normal, b->normal, 24) == 0 &&
         a->object_id == b->object_id && a->label == b->label;
}


// env_raycast_t.traced: check the batch, count it, and rewrite its labels in place.
static void log_batch(void* ctx, uint32_t first, uint32_t n, scene_hit_t* hits) {
  traced_log_t* l = ctx;
  int ok = first % ENV_RAYCAST_BATCH == 0 && n >= 1 && n <= ENV_RAYCAST_BATCH &&
           hits == l->out + first && first / ENV_RAYCAST_BATCH < 16;
  for (uint32_t i = 0; ok && i < n; i++) {
    ok = same_hit(&hits[i], &l->ref[first + i]);
  }
  if (!ok) {
    atomic_store(&l->bad, 1);
    return;
  }
  atomic_fetch_add(&l->calls[first / ENV_RAYCAST_BATCH], 1);
  atomic_fetch_add(&l->rays, (int)n);
  for (uint32_t i = 0; i < n; i++) {
    hits[i].label = 0xABCD0000u + first + i;
  }
}


TEST(env_raycast_traced_sees_each_batch_once_with_its_hits_and_may_rewrite_them) {
  pool_t* pool = pool_create(2);
  ASSERT_TRUE(pool != NULL);
  fixture_t f;
  ASSERT_OK(setup_empty(&f, "traced", NULL, pool));
  ASSERT_OK(populate(f.e));
  err_msg_t msg;

  // 3001 rays towards the cube at the origin, some past it: 12 batches, the last of 185
  enum { N = 3001 };
  static double org[3 * N], dir[3 * N];
  static scene_hit_t ref[N], out[N];
  for (int i = 0; i < N; i++) {
    org[3 * i] = -10.0;
    org[3 * i + 1] = -2.0 + 4.0 * (i % 61) / 60.0;
    org[3 * i + 2] = -2.0 + 4.0 * (i / 61) / 49.0;
    dir[3 * i] = 1.0;
  }
  env_raycast_t r = {.nray = N, .origins = org, .directions = dir};
  ASSERT_OK(env_raycast(f.e, &r, ref, &msg));
  int nhit = 0;
  for (int i = 0; i < N; i++) {
    nhit += isfinite(ref[i].distance) != 0;
  }
  ASSERT_TRUE(nhit > N / 10 && nhit < N);

  traced_log_t log = {.out = out, .ref = ref};
  r.traced = log_batch;
  r.traced_ctx = &log;
  ASSERT_OK(env_raycast(f.e, &r, out, &msg));
  ASSERT_EQ(atomic_load(&log.bad), 0);
  ASSERT_EQ(atomic_load(&log.rays), N);
  int nbatch = (N + ENV_RAYCAST_BATCH - 1) / ENV_RAYCAST_BATCH;
  for (int b = 0; b < 16; b++) {
    ASSERT_EQ(atomic_load(&log.calls[b]), b < nbatch ? 1 : 0);
  }
  // the rewritten labels are what the call leaves; the rest are the hits
  for (int i = 0; i < N; i++) {
    scene_hit_t want = ref[i];
    want.label = 0xABCD0000u + (uint32_t)i;
    ASSERT_TRUE(same_hit(&out[i], &want));
  }
  teardown(&f);
  pool_destroy(pool);
  return 0;
}


TEST(env_constant_velocity_body_seen_at_ray_times) {
  pool_t* pool = pool_create(2);
  ASSERT_TRUE(pool != NULL);
  fixture_t f;
  ASSERT_OK(setup_empty(&f, "wall", NULL, pool));
  env_t* e = f.e;
  err_msg_t msg;

  // a wall (box, half thickness 0.1) approaching a static lidar at the origin at v = 2 m/s
  prim_desc_t box = {.id = 1, .kind = SCENE_PRIM_BOX, .size = {0.1, 5, 5}};
  ASSERT_OK(env_create_primitive(e, &box, &msg));
  body_desc_t b = {.id = 1, .pose = pose_at(10, 0, 0)};
  ASSERT_OK(env_create_body(e, &b, &msg));
  object_desc_t o = object(1, 1, 1, xform_identity());
  ASSERT_OK(env_create_object(e, &o, &msg));
  const double v = 2.0, t0 = 100.0, dt = 0.5, d0 = 10.0 - 0.1;
  uint32_t id = 1;
  double pose[7];
  wire_pose(pose, 10, 0, 0);
  ASSERT_OK(update_bodies(e, t0, 1, &id, pose));
  ASSERT_OK(env_step(e, t0, &msg));
  wire_pose(pose, 10 - v * dt, 0, 0);
  ASSERT_OK(update_bodies(e, t0 + dt, 1, &id, pose));

  // many rays (several pool chunks), each at its own absolute time
  enum { N = 3000 };
  static double org[3 * N], dir[3 * N], times[N];
  static scene_hit_t hits[N];
  for (int i = 0; i < N; i++) {
    dir[3 * i] = 1.0;
    dir[3 * i + 1] = 1e-3 * (i % 7);
    times[i] = t0 + dt * i / (N - 1);
  }
  env_raycast_t r = {.nray = N, .origins = org, .directions = dir, .ntime = N, .times = times};
  ASSERT_OK(env_raycast(e, &r, hits, &msg));
  for (int i = 0; i < N; i++) {
    double along = d0 - v * (times[i] - t0);
    double len = sqrt(1.0 + dir[3 * i + 1] * dir[3 * i + 1]);
    ASSERT_EQ(hits[i].object_id, 1);
    ASSERT_NEAR(hits[i].distance, along * len, 2e-5);
    ASSERT_NEAR(hits[i].normal[0], -1.0, 1e-6);
  }

  // freeze_objects: every ray sees the end-of-step pose
  env_settings_t s = {.has_freeze_objects = 1, .freeze_objects = 1};
  ASSERT_OK(env_set_settings(e, &s, &msg));
  double mid = t0 + dt / 2;
  r.nray = 1;
  r.ntime = 1;
  r.times = &mid;
  ASSERT_OK(env_raycast(e, &r, hits, &msg));
  ASSERT_NEAR(hits[0].distance, d0 - v * dt, 2e-5);
  s.freeze_objects = 0;
  ASSERT_OK(env_set_settings(e, &s, &msg));
  ASSERT_OK(env_raycast(e, &r, hits, &msg));
  ASSERT_NEAR(hits[0].distance, d0 - v * dt / 2, 2e-5);

  // two states between steps: the interval starts at the last step, the middle state is
  // not used
  wire_pose(pose, 0, 0, 0);  // a teleport at t0 + 2 dt, overwritten at t0 + 3 dt
  ASSERT_OK(update_bodies(e, t0 + 2 * dt, 1, &id, pose));
  wire_pose(pose, 10 - 3 * v * dt, 0, 0);
  ASSERT_OK(update_bodies(e, t0 + 3 * dt, 1, &id, pose));
  mid = t0 + 2 * dt;
  ASSERT_OK(env_raycast(e, &r, hits, &msg));
  ASSERT_NEAR(hits[0].distance, d0 - 2 * v * dt, 2e-5);

  // after stepping the interval is empty and the wall rests at its last pose
  ASSERT_OK(env_step(e, t0 + 3 * dt, &msg));
  r.ntime = 0;
  ASSERT_OK(env_raycast(e, &r, hits, &msg));
  ASSERT_NEAR(hits[0].distance, d0 - 3 * v * dt, 2e-5);
  mid = t0 + 2 * dt;
  r.ntime = 1;
  ASSERT_EQ(env_raycast(e, &r, hits, &msg), ERR_INVAL);
  teardown(&f);
  pool_destroy(pool);
  return 0;
}


TEST(env_hundred_moving_objects_update_without_rebuilding_geometry) {
  fixture_t f;
  ASSERT_OK(setup_empty(&f, "many", NULL, NULL));
  env_t* e = f.e;
  err_msg_t msg;
  mesh_bytes_t cube;
  make_cube(&cube, 1, 0, 0);
  ASSERT_OK(env_create_mesh(e, &cube.d, &msg));
  enum { N = 100 };
  uint32_t ids[N];
  double poses[7 * N];
  for (uint32_t i = 0; i < N; i++) {
    ids[i] = 1000 + i;
    body_desc_t b = {.id = ids[i], .pose = pose_at(3.0 * i, 0, 0)};
    ASSERT_OK(env_create_body(e, &b, &msg));
    object_desc_t o = object(5000 + i, 1, ids[i], xform_identity());
    ASSERT_OK(env_create_object(e, &o, &msg));
  }
  env_info_t start;
  env_get_info(e, &start);
  ASSERT_EQ(start.objects, N);

  // rays from above every cube
  double org[3 * N], dir[3 * N];
  scene_hit_t hits[N];
  for (uint32_t i = 0; i < N; i++) {
    double oi[3] = {3.0 * i, 0, 20}, di[3] = {0, 0, -1};
    memcpy(org + 3 * i, oi, sizeof(oi));
    memcpy(dir + 3 * i, di, sizeof(di));
  }
  env_raycast_t r = {.nray = N, .origins = org, .directions = dir};

  // every step raises each cube by a different amount
  uint64_t updates = start.scene.instance_updates;
  for (int k = 0; k <= 5; k++) {
    for (uint32_t i = 0; i < N; i++) {
      wire_pose(poses + 7 * i, 3.0 * i, 0, 0.01 * k * (i % 10));
    }
    ASSERT_OK(update_bodies(e, 0.1 * k, N, ids, poses));
    ASSERT_OK(env_step(e, 0.1 * k, &msg));
    ASSERT_OK(env_raycast(e, &r, hits, &msg));
    for (uint32_t i = 0; i < N; i++) {
      ASSERT_EQ(hits[i].object_id, 5000 + i);
      ASSERT_NEAR(hits[i].distance, 19.5 - 0.01 * k * (i % 10), 1e-5);
    }
    env_info_t info;
    env_get_info(e, &info);
    ASSERT_EQ(info.scene.geometry_builds, start.scene.geometry_builds);
    ASSERT_EQ(info.scene.instance_updates, updates + N);  // one write per object per step
    updates = info.scene.instance_updates;
  }
  teardown(&f);
  return 0;
}


TEST(env_environments_are_isolated) {
  fixture_t f;
  ASSERT_OK(setup_empty(&f, "a", NULL, NULL));
  err_msg_t msg;
  env_t* a = f.e;
  env_t* b = env_create("b", NULL, f.dev, NULL, &msg);
  ASSERT_TRUE(a && b);
  ASSERT_STREQ(env_name(a), "a");
  ASSERT_STREQ(env_name(b), "b");

  // the same ids in both, different places
  prim_desc_t sphere = {.id = 1, .kind = SCENE_PRIM_SPHERE, .size = {1, 0, 0}};
  ASSERT_OK(env_create_primitive(a, &sphere, &msg));
  ASSERT_OK(env_create_primitive(b, &sphere, &msg));
  object_desc_t oa = object(7, 1, 0, pose_at(10, 0, 0));
  object_desc_t ob = object(7, 1, 0, pose_at(0, 10, 0));
  ob.label = 99;
  ASSERT_OK(env_create_object(a, &oa, &msg));
  ASSERT_OK(env_create_object(b, &ob, &msg));

  double o[6] = {0}, d[6] = {1, 0, 0, 0, 1, 0};
  scene_hit_t ha[2], hb[2];
  env_raycast_t r = {.nray = 2, .origins = o, .directions = d};
  ASSERT_OK(env_raycast(a, &r, ha, &msg));
  ASSERT_OK(env_raycast(b, &r, hb, &msg));
  ASSERT_EQ(ha[0].object_id, 7);
  ASSERT_NEAR(ha[0].distance, 9.0, 1e-5);
  ASSERT_EQ(ha[1].object_id, 0);
  ASSERT_EQ(hb[0].object_id, 0);
  ASSERT_EQ(hb[1].object_id, 7);
  ASSERT_EQ(hb[1].label, 99);

  // removing from one leaves the other
  ASSERT_OK(env_remove(a, ENV_ENTITY_OBJECT, 7, &msg));
  ASSERT_OK(env_raycast(a, &r, ha, &msg));
  ASSERT_OK(env_raycast(b, &r, hb, &msg));
  ASSERT_EQ(ha[0].object_id, 0);
  ASSERT_EQ(hb[1].object_id, 7);
  env_destroy(b);
  teardown(&f);
  return 0;
}

//---------------- Removal


TEST(env_remove_refuses_referenced_entities) {
  fixture_t f;
  ASSERT_OK(setup(&f, NULL));
  env_t* e = f.e;
  env_dipole_t dip = {.moment = {0, 0, 1}, .body_id = 11};
  env_settings_t s = {.replace_dipoles = 1, .dipoles = &dip, .ndipole = 1};
  err_msg_t msg;
  ASSERT_OK(env_set_settings(e, &s, &msg));

  // referenced
  ASSERT_REJECTED(e, env_remove(e, ENV_ENTITY_GEOMETRY, 2, emsg), ERR_STATE,
                  "geometry 2 is used by object 101");
  ASSERT_REJECTED(e, env_remove(e, ENV_ENTITY_MATERIAL, 5, emsg), ERR_STATE,
                  "material 5 is used by object 102");
  ASSERT_REJECTED(e, env_remove(e, ENV_ENTITY_MATERIAL, 6, emsg), ERR_STATE,
                  "material 6 is used by geometry 7");
  ASSERT_REJECTED(e, env_remove(e, ENV_ENTITY_MEDIUM, 3, emsg), ERR_STATE,
                  "medium 3 is used by object 102");
  ASSERT_REJECTED(e, env_remove(e, ENV_ENTITY_BODY, 10, emsg), ERR_STATE,
                  "body 10 carries object 100");

  // built-in, unknown, not yet existing kinds
  ASSERT_REJECTED(e, env_remove(e, ENV_ENTITY_MATERIAL, 0, emsg), ERR_INVAL, "material 0");
  ASSERT_REJECTED(e, env_remove(e, ENV_ENTITY_MEDIUM, 0, emsg), ERR_INVAL, "medium 0");
  ASSERT_REJECTED(e, env_remove(e, ENV_ENTITY_GEOMETRY, 42, emsg), ERR_NOTFOUND,
                  "geometry 42 not found");
  // id 0: the world frame, or no entity of its kind (not a missing one)
  static const struct {
    env_entity_t kind;
    const char* text;
  } kZero[] = {{ENV_ENTITY_BODY, "body 0 is the world frame and cannot be removed"},
               {ENV_ENTITY_OBJECT, "id = 0 is reserved (object ids are > 0)"},
               {ENV_ENTITY_SENSOR, "id = 0 is reserved (sensor ids are > 0)"},
               {(env_entity_t)42, "kind = 42"}};
  for (size_t i = 0; i < sizeof(kZero) / sizeof(kZero[0]); i++) {
    ASSERT_REJECTED(e, env_remove(e, kZero[i].kind, 0, emsg), ERR_INVAL, kZero[i].text);
  }
  ASSERT_REJECTED(e, env_remove(e, ENV_ENTITY_JOINT, 21, emsg), ERR_NOTFOUND, "joint 21");
  ASSERT_REJECTED(e, env_remove(e, ENV_ENTITY_SENSOR, 1, emsg), ERR_NOTFOUND, "sensor 1");
  ASSERT_REJECTED(e, env_remove(e, (env_entity_t)42, 1, emsg), ERR_INVAL, "kind = 42");

  // in order: objects, then what they used
  ASSERT_OK(env_remove(e, ENV_ENTITY_OBJECT, 101, &msg));
  ASSERT_OK(env_remove(e, ENV_ENTITY_GEOMETRY, 2, &msg));
  ASSERT_REJECTED(e, env_remove(e, ENV_ENTITY_BODY, 11, emsg), ERR_STATE,
                  "body 11 carries magnetic dipole 0");
  s.ndipole = 0;
  ASSERT_OK(env_set_settings(e, &s, &msg));
  ASSERT_OK(env_remove(e, ENV_ENTITY_BODY, 11, &msg));
  ASSERT_OK(env_remove(e, ENV_ENTITY_OBJECT, 102, &msg));
  ASSERT_OK(env_remove(e, ENV_ENTITY_MATERIAL, 5, &msg));
  ASSERT_OK(env_remove(e, ENV_ENTITY_MEDIUM, 3, &msg));
  ASSERT_EQ(env_remove(e, ENV_ENTITY_GEOMETRY, 7, &msg), ERR_STATE);
  ASSERT_CONTAINS(msg.text, "geometry 7 is used by object 103");
  ASSERT_OK(env_remove(e, ENV_ENTITY_OBJECT, 103, &msg));
  ASSERT_OK(env_remove(e, ENV_ENTITY_GEOMETRY, 7, &msg));
  ASSERT_OK(env_remove(e, ENV_ENTITY_MATERIAL, 6, &msg));
  ASSERT_OK(env_remove(e, ENV_ENTITY_JOINT, 20, &msg));
  ASSERT_OK(env_remove(e, ENV_ENTITY_OBJECT, 100, &msg));
  ASSERT_OK(env_remove(e, ENV_ENTITY_BODY, 10, &msg));
  env_snap_t end;
  ASSERT_OK(take(e, &end));
  ASSERT_EQ(end.info.geometries, 1);
  ASSERT_EQ(end.info.materials, 1);
  ASSERT_EQ(end.info.media, 1);
  ASSERT_EQ(end.info.bodies, 0);
  ASSERT_EQ(end.info.objects, 0);
  ASSERT_EQ(end.info.joints, 0);
  for (int i = 0; i < NPROBE; i++) {
    ASSERT_EQ(end.at_cur[i].object_id, 0);
  }

  // ids are free again, and the moved body's removal did not disturb stepping
  ASSERT_OK(env_step(e, 1.0, &msg));
  body_desc_t b = {.id = 10, .pose = xform_identity()};
  ASSERT_OK(env_create_body(e, &b, &msg));
  object_desc_t o = object(100, 1, 10, xform_identity());
  ASSERT_OK(env_create_object(e, &o, &msg));
  ASSERT_OK(take(e, &end));
  ASSERT_EQ(end.at_cur[0].object_id, 100);
  teardown(&f);
  return 0;
}

//---------------- Magnetic field


TEST(env_magnetic_dipole_field_matches_the_analytic_formula) {
  fixture_t f;
  ASSERT_OK(setup(&f, NULL));
  env_t* e = f.e;
  err_msg_t msg;

  // a world dipole m = 1 A m^2 along z at the origin, plus a uniform field
  env_dipole_t d = {.moment = {0, 0, 1}};
  env_settings_t s = {.has_magnetic_field = 1, .magnetic_field = {2e-5, 0, -4e-5},
                      .replace_dipoles = 1, .dipoles = &d, .ndipole = 1};
  ASSERT_OK(env_set_settings(e, &s, &msg));

  // on the axis, r = 2: B = mu0/(4 pi) 2 m / r^3 = 1e-7 * 2 / 8
  double p[3] = {0, 0, 2}, b[3];
  env_magnetic_field(e, p, b);
  ASSERT_NEAR(b[0], 2e-5, 1e-20);
  ASSERT_NEAR(b[1], 0.0, 1e-20);
  ASSERT_NEAR(b[2], -4e-5 + 2.5e-8, 1e-20);

  // in the equatorial plane, r = 0.5: B = -mu0/(4 pi) m / r^3 = -8e-7
  double q[3] = {0.5, 0, 0};
  env_magnetic_field(e, q, b);
  ASSERT_NEAR(b[2], -4e-5 - 8e-7, 1e-19);

  // within 1e-6 m the dipole contributes nothing
  double c[3] = {0, 0, 1e-7};
  env_magnetic_field(e, c, b);
  ASSERT_NEAR(b[2], -4e-5, 0.0);

  // a dipole on body 10 (at (0, 0, 1) at t_cur): position and moment turn with the body
  double pose[7] = {1, 0, 0, 0, sin(M_PI / 4), 0, cos(M_PI / 4)};  // 90 deg about y
  uint32_t id = 10;
  ASSERT_OK(update_bodies(e, 2.0, 1, &id, pose));
  d = (env_dipole_t){.moment = {0, 0, 3}, .position = {0, 0, 1}, .body_id = 10};
  s = (env_settings_t){.has_magnetic_field = 1, .replace_dipoles = 1, .dipoles = &d,
                       .ndipole = 1};
  ASSERT_OK(env_set_settings(e, &s, &msg));
  // world position = (1, 0, 0) + R_y(90) (0, 0, 1) = (2, 0, 0); moment = (3, 0, 0)
  double x[3] = {5, 0, 0};
  env_magnetic_field(e, x, b);
  ASSERT_NEAR(b[0], 1e-7 * 2 * 3 / 27.0, 1e-20);
  ASSERT_NEAR(b[1], 0.0, 1e-20);
  ASSERT_NEAR(b[2], 0.0, 1e-20);
  teardown(&f);
  return 0;
}

//---------------- Lifecycle


TEST(env_destroy_frees_everything_and_create_survives_oom) {
  err_msg_t msg;
  scene_device_t* dev = scene_device_create(&msg);
  ASSERT_TRUE(dev != NULL);
  int64_t live = mem_live_count();
  env_t* e = env_create("full", NULL, dev, NULL, &msg);
  ASSERT_TRUE(e != NULL);
  ASSERT_OK(populate(e));
  env_destroy(e);
  env_destroy(NULL);
  ASSERT_EQ(mem_live_count(), live);

  // every failing allocation inside env_create gives NULL and leaks nothing
  for (int64_t n = 1;; n++) {
    mem_fail_after(n);
    e = env_create("oom", NULL, dev, NULL, &msg);
    mem_fail_after(0);
    if (e) {
      break;
    }
    ASSERT_EQ(mem_live_count(), live);
    ASSERT_TRUE(n < 50);
  }
  env_destroy(e);
  ASSERT_EQ(mem_live_count(), live);
  ASSERT_TRUE(env_create("nodev", NULL, NULL, NULL, &msg) == NULL);
  scene_device_destroy(dev);
  return 0;
}

//---------------- The persistent step view

#define VIEW_MAX_ID 64

// A test sensor that copies the bodies and joints of every step view it receives.
typedef struct view_probe {
  view_body_t bodies[VIEW_MAX_ID];
  uint32_t nbody;
  view_joint_t joints[VIEW_MAX_ID];
  uint32_t njoint;
} view_probe_t;

static int view_probe_step(void* self, const sensor_ctx_t* ctx, const step_view_t* v,
                           sensor_out_t* out, err_msg_t* msg) {
  (void)ctx;
  (void)out;
  view_probe_t* p = self;
  if (v->nbody > VIEW_MAX_ID || v->njoint > VIEW_MAX_ID) {
    return err_set(msg, ERR_LIMIT, "view probe: too many bodies or joints");
  }
  memcpy(p->bodies, v->bodies, v->nbody * sizeof(view_body_t));
  p->nbody = v->nbody;
  memcpy(p->joints, v->joints, v->njoint * sizeof(view_joint_t));
  p->njoint = v->njoint;
  return 0;
}

static void view_probe_destroy(void* self) { (void)self; }

static const sensor_ops_t kViewProbeOps = {
    .kind_name = "probe", .step = view_probe_step, .destroy = view_probe_destroy};

// The test's own account of what a step must see: each body's and joint's state at the last
// step (t0) and now (t1), from the descriptions and updates it sent (docs/time.md).
typedef struct view_truth {
  int live;
  body_state_t at[2];
  joint_type_t type;
  double position[2];
} view_truth_t;

// Bit for bit, field by field (not the padding).
static int same_state(const body_state_t* a, const body_state_t* b) {
  return memcmp(&a->pose, &b->pose, sizeof a->pose) == 0 &&
         memcmp(a->linear_velocity, b->linear_velocity, sizeof a->linear_velocity) == 0 &&
         memcmp(a->angular_velocity, b->angular_velocity, sizeof a->angular_velocity) == 0 &&
         a->has_velocity == b->has_velocity;
}

static uint32_t lcg(uint32_t* s) {
  *s = *s * 1664525u + 1013904223u;
  return *s >> 8;
}

// Bodies and joints created and removed in a scrambled order every fifth step of 100, moved a
// few at a time at every step: every step view lists exactly the live ones, sorted by id, with their states at both
// ends bit for bit as the test's own account has them (the view persists from step to step and
// is written only where something changed, so a missed change would show here).
TEST(step_view_follows_every_change_bit_for_bit) {
  fixture_t f;
  ASSERT_OK(setup_empty(&f, "view", NULL, NULL));
  err_msg_t msg;
  view_probe_t probe;
  memset(&probe, 0, sizeof probe);
  sensor_desc_t sd = {.id = 1, .mount = xform_identity(),
                      .sensor = {.kind = SENSOR_TEST, .ops = &kViewProbeOps, .self = &probe}};
  ASSERT_OK(env_create_sensor(f.e, &sd, &msg));
  view_truth_t body[VIEW_MAX_ID] = {{0}}, joint[VIEW_MAX_ID] = {{0}};
  uint32_t seed = 7;
  int has_time = 0;
  for (int k = 0; k < 100; k++) {
    double t = 0.1 * k;
    // every fifth step one kind of change, in turn: bodies created, bodies removed, joints
    // created, joints removed (ids scrambled: creation order is not id order); the steps
    // between change only states
    int change = k % 5 ? -1 : k == 0 ? 4 : (k / 5) % 4;
    for (int c = 0; c < 6 && change >= 0; c++) {
      uint32_t id = 1 + lcg(&seed) % (VIEW_MAX_ID - 1);
      view_truth_t* b = &body[id];
      view_truth_t* j = &joint[id];
      if ((change == 0 || change == 4) && !b->live) {
        body_desc_t d = {.id = id, .pose = xform_identity(),
                         .linear_velocity = {0.1 * id, 0, 0}, .angular_velocity = {0, 0, -1}};
        d.pose.p[1] = (double)id;
        ASSERT_OK(env_create_body(f.e, &d, &msg));
        memset(b, 0, sizeof *b);
        b->live = 1;
        for (int e = 0; e < 2; e++) {
          b->at[e].pose = d.pose;
          memcpy(b->at[e].linear_velocity, d.linear_velocity, sizeof(double[3]));
          memcpy(b->at[e].angular_velocity, d.angular_velocity, sizeof(double[3]));
          b->at[e].has_velocity = 1;
        }
      }
      if (change == 1 && b->live && c < 2) {
        ASSERT_OK(env_remove(f.e, ENV_ENTITY_BODY, id, &msg));
        b->live = 0;
      }
      if ((change == 2 || change == 4) && !j->live) {
        joint_desc_t d = {.id = id, .type = id % 2 ? JOINT_TYPE_PRISMATIC : JOINT_TYPE_REVOLUTE,
                          .position = 0.5 * id};
        ASSERT_OK(env_create_joint(f.e, &d, &msg));
        j->live = 1;
        j->type = d.type;
        j->position[0] = j->position[1] = d.position;
      }
      if (change == 3 && j->live && c < 2) {
        ASSERT_OK(env_remove(f.e, ENV_ENTITY_JOINT, id, &msg));
        j->live = 0;
      }
    }

    // a state naming some of the live ones (some steps none), with velocities every other time
    uint32_t ids[VIEW_MAX_ID], jids[VIEW_MAX_ID], n = 0, nj = 0;
    double poses[7 * VIEW_MAX_ID], vels[6 * VIEW_MAX_ID], pos[VIEW_MAX_ID];
    int with_vel = k % 2;
    for (uint32_t id = 1; id < VIEW_MAX_ID; id++) {
      if (body[id].live && lcg(&seed) % 4 == 0) {
        double* p = poses + 7 * n;
        double a = 0.01 * (double)lcg(&seed);
        double q[7] = {t, (double)id, 0.5 * t, 0, 0, sin(a), cos(a)};
        memcpy(p, q, sizeof q);
        for (int i = 0; i < 6; i++) {
          vels[6 * n + i] = 0.001 * (double)(lcg(&seed) % 1000);
        }
        body_state_t* s = &body[id].at[1];
        s->pose = (pose_t){{q[0], q[1], q[2]}, {q[6], q[3], q[4], q[5]}};
        xform_quat_unit(s->pose.q);   // as an update normalises (1 / |q| once, four products)
        if (with_vel) {
          memcpy(s->linear_velocity, vels + 6 * n, sizeof(double[3]));
          memcpy(s->angular_velocity, vels + 6 * n + 3, sizeof(double[3]));
        }
        s->has_velocity = with_vel;
        ids[n++] = id;
      }
      if (joint[id].live && lcg(&seed) % 4 == 0) {
        pos[nj] = 0.25 * (double)(lcg(&seed) % 100);
        joint[id].position[1] = pos[nj];
        jids[nj++] = id;
      }
    }
    env_state_update_t u = {.time = t, .nbody = n, .body_ids = ids, .body_poses = poses,
                            .body_velocities = with_vel ? vels : NULL, .njoint = nj,
                            .joint_ids = jids, .joint_positions = pos};
    ASSERT_OK(env_update_state(f.e, &u, &msg));
    if (!has_time) {
      // the first state is also the start of the first interval
      for (uint32_t id = 1; id < VIEW_MAX_ID; id++) {
        body[id].at[0] = body[id].at[1];
        joint[id].position[0] = joint[id].position[1];
      }
      has_time = 1;
    }
    ASSERT_OK(env_step(f.e, t, &msg));

    // exactly the live ones, sorted by id, both ends bit for bit
    uint32_t nb = 0, njl = 0;
    for (uint32_t id = 1; id < VIEW_MAX_ID; id++) {
      if (body[id].live) {
        ASSERT_TRUE(nb < probe.nbody);
        const view_body_t* vb = &probe.bodies[nb++];
        ASSERT_EQ(vb->id, id);
        for (int e = 0; e < 2; e++) {
          ASSERT_TRUE(same_state(&vb->at[e], &body[id].at[e]));
        }
      }
      if (joint[id].live) {
        ASSERT_TRUE(njl < probe.njoint);
        const view_joint_t* vj = &probe.joints[njl++];
        ASSERT_EQ(vj->id, id);
        ASSERT_EQ((int)vj->type, joint[id].type == JOINT_TYPE_PRISMATIC ? VIEW_JOINT_PRISMATIC
                                                                       : VIEW_JOINT_REVOLUTE);
        ASSERT_TRUE(vj->position[0] == joint[id].position[0]);
        ASSERT_TRUE(vj->position[1] == joint[id].position[1]);
      }
      // the step rolls the state now into the start of the next interval
      body[id].at[0] = body[id].at[1];
      joint[id].position[0] = joint[id].position[1];
    }
    ASSERT_EQ(probe.nbody, nb);
    ASSERT_EQ(probe.njoint, njl);
  }
  teardown(&f);
  return 0;
}
