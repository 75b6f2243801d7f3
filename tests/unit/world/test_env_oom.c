// SPDX-License-Identifier: MIT
// test_env_oom.c: out-of-memory injection into every mutating call of the Sensor Environment
// (libuv test-loop-oom.c, Lua ltests.c allocfailnext): for n = 1, 2, ... the nth allocation of
// the call fails, until the call succeeds. Every failing attempt must return ERR_NOMEM with a
// message, leave the environment unchanged (counts, settings, materials, what rays see), leak
// nothing (mem_live_count returns to its value before the environment once it is destroyed),
// and leave the environment usable: the same call, repeated without failures, must then give
// exactly the result of a clean run. Each call runs on the standard scene and on a "full" one
// whose tables and arrays are at capacity, so that the growth paths fail too. Embree allocates
// on its own, outside base/mem.h; only our allocations are injected. White-box: the snapshot
// reads the settings from env_impl.h, since env.h does not expose gravity or the seed.
#include "world/env.h"

#include <math.h>
#include <string.h>

#include "base/mem.h"
#include "check.h"
#include "env_fixture.h"
#include "world/env_impl.h"

// More attempts than any call here allocates; reaching it means the call never succeeds.
#define OOM_MAX_ATTEMPTS 64

//---------------- Fixtures

// The standard scene of test_env.c (env_fixture.h) with geometry 1 named "cube", geometry 7 a
// cube mesh with every other triangle of material 6, and joint 20 named "wheel".
static int populate(env_t* e) {
  mesh_bytes_t cube, mesh7;
  make_cube(&cube, 1, 0, 0);
  cube.d.name = "cube";
  make_cube(&mesh7, 7, 0, 6);
  return populate_standard(e, &cube.d, &mesh7.d, "wheel");
}


// Fill every table and array up to its capacity, so that the next insert has to grow it:
// 16 geometries (table slots and the scene's geometry array), 8 materials and media besides
// the defaults, 8 bodies (and the moved-body list), 64 objects (scene instances), 4 objects on
// body 10 (its object list), 8 joints (and the moved-joint list), 2 dipoles. Everything added
// stays clear of the probe rays.
static int prefill(env_t* e) {
  err_msg_t msg;
  for (uint32_t id = 200; id < 213; id++) {
    prim_desc_t p = {.id = id, .kind = SCENE_PRIM_BOX, .size = {0.1, 0.2, 0.3}, .name = "box"};
    ASSERT_OK(env_create_primitive(e, &p, &msg));
  }
  surface_material_t m = material_default_lambertian();
  ambient_material_t a = ambient_default_air();
  for (uint32_t id = 30; id < 38; id++) {
    m.reflectance = 0.01 * id;
    a.attenuation = 0.001 * id;
    if (id < 36) {
      ASSERT_OK(env_set_material(e, id, &m, "m", &msg));
    }
    if (id < 37) {
      ASSERT_OK(env_set_medium(e, id, &a, &msg));
    }
  }
  for (uint32_t id = 40; id < 46; id++) {
    body_desc_t b = {.id = id, .pose = pose_at(-50, (double)id, 0), .name = "b"};
    ASSERT_OK(env_create_body(e, &b, &msg));
  }
  for (uint32_t id = 104; id < 164; id++) {
    object_desc_t o = object(id, 2, 0, pose_at(100 + (double)id, 100, 0));
    if (id < 107) {
      o = object(id, 2, 10, pose_at(0, -20 - (double)id, 0));
    }
    o.name = "o";
    ASSERT_OK(env_create_object(e, &o, &msg));
  }
  for (uint32_t id = 50; id < 57; id++) {
    joint_desc_t j = {.id = id, .type = JOINT_TYPE_PRISMATIC, .position = 0.1 * id};
    ASSERT_OK(env_create_joint(e, &j, &msg));
  }
  env_dipole_t dip[2] = {{.moment = {0, 0, 1}, .position = {0, 0, 0}, .body_id = 11},
                         {.moment = {1, 0, 0}, .position = {1, 2, 3}, .body_id = 0}};
  env_settings_t s = {.replace_dipoles = 1, .dipoles = dip, .ndipole = 2};
  ASSERT_OK(env_set_settings(e, &s, &msg));

  env_info_t info;
  env_get_info(e, &info);
  ASSERT_EQ(info.geometries, 16);
  ASSERT_EQ(info.materials, 9);
  ASSERT_EQ(info.media, 9);
  ASSERT_EQ(info.bodies, 8);
  ASSERT_EQ(info.objects, 64);
  ASSERT_EQ(info.joints, 8);
  return 0;
}


static int make_env(scene_device_t* dev, int full, env_t** out) {
  err_msg_t msg;
  env_t* e = env_create("oom", NULL, dev, NULL, &msg);
  if (!e) {
    CHECK_FAIL("env_create: %s", msg.text);
  }
  *out = e;
  ASSERT_OK(populate(e));
  if (full) {
    ASSERT_OK(prefill(e));
  }
  return 0;
}

//---------------- Snapshots: what "unchanged" means

#define NPROBE ENV_PROBES_MAX

static const uint32_t kMaterials[] = {0, 5, 6, 30, 40};
static const uint32_t kMedia[] = {0, 3, 31, 41};
static const uint32_t kBodies[] = {10, 11, 12, 40};
#define NMAT (sizeof(kMaterials) / sizeof(kMaterials[0]))
#define NMED (sizeof(kMedia) / sizeof(kMedia[0]))
#define NBODY (sizeof(kBodies) / sizeof(kBodies[0]))

typedef struct snap {
  env_snap_t env;                // counts, time, probe rays, magnetic field
  double gravity[3];
  uint32_t ndipole;
  uint64_t seed;
  int freeze_objects;
  int has_mat[NMAT];
  surface_material_t mat[NMAT];
  int has_med[NMED];
  ambient_material_t med[NMED];
  int has_body[NBODY];
  pose_t body[NBODY];            // at s = 0
  uint32_t body_objects[NBODY];
} snap_t;


// Take a snapshot; never under failure injection. Every probe ray of env_fixture.h: the last
// one sees what the calls below add at (0, 0, 4).
static int take(env_t* e, snap_t* s) {
  memset(s, 0, sizeof(*s));
  ASSERT_OK(env_snap_take(e, NPROBE, &s->env));
  memcpy(s->gravity, e->gravity, sizeof(s->gravity));
  s->ndipole = e->ndipole;
  s->seed = e->seed;
  s->freeze_objects = e->freeze_objects;
  for (size_t i = 0; i < NMAT; i++) {
    const env_material_t* m = env_find_material(e, kMaterials[i]);
    if ((s->has_mat[i] = m != NULL)) {
      s->mat[i] = m->m;
    }
  }
  for (size_t i = 0; i < NMED; i++) {
    const ambient_material_t* a = env_get_medium(e, kMedia[i]);
    if ((s->has_med[i] = a != NULL)) {
      s->med[i] = *a;
    }
  }
  for (size_t i = 0; i < NBODY; i++) {
    s->has_body[i] = env_body_pose(e, kBodies[i], 0.0, &s->body[i]) == 0;
    const env_body_t* b = table_get(&e->bodies, kBodies[i]);
    s->body_objects[i] = b ? b->nobject : 0;
  }
  return 0;
}


static int same(const snap_t* a, const snap_t* b) {
  if (env_snap_same(&a->env, &b->env)) {
    return 1;
  }
  for (int i = 0; i < 3; i++) {
    ASSERT_TRUE(a->env.field[i] == b->env.field[i]);
    ASSERT_TRUE(a->gravity[i] == b->gravity[i]);
  }
  ASSERT_EQ(a->ndipole, b->ndipole);
  ASSERT_EQ(a->seed, b->seed);
  ASSERT_EQ(a->freeze_objects, b->freeze_objects);
  for (size_t i = 0; i < NMAT; i++) {
    ASSERT_EQ(a->has_mat[i], b->has_mat[i]);
    const surface_material_t* p = &a->mat[i];
    const surface_material_t* q = &b->mat[i];
    ASSERT_TRUE(p->kind == q->kind && p->reflectance == q->reflectance && p->n_re == q->n_re &&
                p->n_im == q->n_im && p->sigma_b == q->sigma_b && p->sigma_on == q->sigma_on);
  }
  for (size_t i = 0; i < NMED; i++) {
    ASSERT_EQ(a->has_med[i], b->has_med[i]);
    const ambient_material_t* p = &a->med[i];
    const ambient_material_t* q = &b->med[i];
    ASSERT_TRUE(p->attenuation == q->attenuation && p->refractive_index == q->refractive_index &&
                p->gamma_shape == q->gamma_shape && p->gamma_scale == q->gamma_scale &&
                p->return_scaling == q->return_scaling && p->backscatter == q->backscatter);
  }
  for (size_t i = 0; i < NBODY; i++) {
    ASSERT_EQ(a->has_body[i], b->has_body[i]);
    ASSERT_MEM_EQ(a->body[i].p, b->body[i].p, sizeof(a->body[i].p));
    ASSERT_MEM_EQ(a->body[i].q, b->body[i].q, sizeof(a->body[i].q));
    ASSERT_EQ(a->body_objects[i], b->body_objects[i]);
  }
  return 0;
}

//---------------- The calls under test (each must succeed on both fixtures)

typedef int (*op_fn_t)(env_t* e, err_msg_t* msg);


static int op_create_mesh(env_t* e, err_msg_t* msg) {
  mesh_bytes_t m;
  make_cube(&m, 60, 0, 5);
  m.d.name = "new mesh";
  return env_create_mesh(e, &m.d, msg);
}


static int op_create_primitive(env_t* e, err_msg_t* msg) {
  prim_desc_t p = {.id = 61, .kind = SCENE_PRIM_CAPSULE, .size = {0.2, 0.5, 0}, .name = "cap"};
  return env_create_primitive(e, &p, msg);
}


static int op_set_material_new(env_t* e, err_msg_t* msg) {
  surface_material_t m = material_default_two_layer();
  m.sigma_b = 0.05;
  return env_set_material(e, 40, &m, "new material", msg);
}


static int op_set_material_replace(env_t* e, err_msg_t* msg) {
  surface_material_t m = material_default_lambertian();
  m.reflectance = 0.55;
  return env_set_material(e, 5, &m, "renamed", msg);
}


static int op_set_medium_new(env_t* e, err_msg_t* msg) {
  ambient_material_t a;
  int rc = ambient_rain(12.0, &a, msg);
  return rc ? rc : env_set_medium(e, 41, &a, msg);
}


static int op_set_medium_replace(env_t* e, err_msg_t* msg) {
  ambient_material_t a;
  int rc = ambient_snow(3.0, &a, msg);
  return rc ? rc : env_set_medium(e, 3, &a, msg);
}


// Append two dipoles and change every other setting (freezing re-poses every object).
static int op_set_settings_append(env_t* e, err_msg_t* msg) {
  env_dipole_t dip[2] = {{.moment = {0, 2, 0}, .position = {0, 0, 0.5}, .body_id = 10},
                         {.moment = {0, 0, -1}, .position = {3, 0, 0}, .body_id = 0}};
  env_settings_t s = {.has_gravity = 1, .gravity = {0, 0, -1.62},
                      .has_magnetic_field = 1, .magnetic_field = {2e-5, 0, -4e-5},
                      .dipoles = dip, .ndipole = 2, .has_seed = 1, .seed = 99,
                      .has_freeze_objects = 1, .freeze_objects = 1};
  return env_set_settings(e, &s, msg);
}


static int op_set_settings_replace(env_t* e, err_msg_t* msg) {
  env_dipole_t dip = {.moment = {5, 0, 0}, .position = {0.3, 0.2, 1}, .body_id = 11};
  env_settings_t s = {.replace_dipoles = 1, .dipoles = &dip, .ndipole = 1};
  return env_set_settings(e, &s, msg);
}


static int op_create_body(env_t* e, err_msg_t* msg) {
  body_desc_t b = {.id = 12, .pose = pose_at(1, 2, 3), .linear_velocity = {1, 0, 0},
                   .name = "new body"};
  return env_create_body(e, &b, msg);
}


// A sphere on body 10 at (0, 0, 4) at t_cur, seen by the probes.
static int op_create_object(env_t* e, err_msg_t* msg) {
  object_desc_t o = object(300, 2, 10, pose_at(0, 0, 3));
  o.material_id = 5;
  o.medium_id = 3;
  o.name = "new object";
  return env_create_object(e, &o, msg);
}


static int op_create_object_static(env_t* e, err_msg_t* msg) {
  object_desc_t o = object(301, 7, 0, pose_at(-3, 0, 4));
  o.scale[0] = -1.0;
  return env_create_object(e, &o, msg);
}


static int op_create_joint(env_t* e, err_msg_t* msg) {
  joint_desc_t j = {.id = 21, .type = JOINT_TYPE_PRISMATIC, .position = -0.25, .name = "slide"};
  return env_create_joint(e, &j, msg);
}


static int op_update_state(env_t* e, err_msg_t* msg) {
  uint32_t ids[2] = {11, 10};
  double poses[14], vel[12] = {0};
  wire_pose(poses, 5, 1, 0);
  wire_pose(poses + 7, 0, 0, 4);
  uint32_t jid = 20;
  double jpos = 1.5;
  env_state_update_t u = {.time = 2.0, .nbody = 2, .body_ids = ids, .body_poses = poses,
                          .body_velocities = vel, .njoint = 1, .joint_ids = &jid,
                          .joint_positions = &jpos};
  return env_update_state(e, &u, msg);
}


static int op_step(env_t* e, err_msg_t* msg) {
  return env_step(e, 1.0, msg);
}


static int op_raycast(env_t* e, err_msg_t* msg) {
  double o[3 * NPROBE], d[3 * NPROBE];
  env_probes(NPROBE, o, d);
  scene_hit_t hits[NPROBE];
  double t = 0.5;
  env_raycast_t r = {.nray = NPROBE, .origins = o, .directions = d, .ntime = 1, .times = &t};
  int rc = env_raycast(e, &r, hits, msg);
  if (rc == 0 && hits[0].object_id != 100) {
    return err_set(msg, ERR_INTERNAL, "probe 0 saw object %u", hits[0].object_id);
  }
  return rc;
}


static int op_remove_object(env_t* e, err_msg_t* msg) {
  return env_remove(e, ENV_ENTITY_OBJECT, 100, msg);
}


static int op_remove_geometry(env_t* e, err_msg_t* msg) {
  int rc = env_remove(e, ENV_ENTITY_OBJECT, 103, msg);
  return rc ? rc : env_remove(e, ENV_ENTITY_GEOMETRY, 7, msg);
}

//---------------- The injection loop


// Run `op` on a fresh fixture with the nth allocation failing, for n = 1, 2, ... until it
// succeeds. Returns 0 when every attempt behaved; *out_n is the attempt that succeeded.
static int oom_loop(const char* name, op_fn_t op, int full, int* out_n) {
  err_msg_t msg;
  scene_device_t* dev = scene_device_create(&msg);
  if (!dev) {
    CHECK_FAIL("scene_device_create: %s", msg.text);
  }
  const int64_t base = mem_live_count();

  // reference: the call without failures, and what the environment looks like after it
  snap_t ref_before, ref_after, before, after;
  env_t* e;
  ASSERT_OK(make_env(dev, full, &e));
  ASSERT_OK(take(e, &ref_before));
  int rc = op(e, &msg);
  if (rc != 0) {
    CHECK_FAIL("%s (full %d) fails without injection: %d %s", name, full, rc, msg.text);
  }
  ASSERT_OK(take(e, &ref_after));
  env_destroy(e);
  ASSERT_EQ(mem_live_count(), base);

  for (int n = 1;; n++) {
    if (n > OOM_MAX_ATTEMPTS) {
      CHECK_FAIL("%s (full %d) still fails after %d injected failures", name, full, n - 1);
    }
    ASSERT_OK(make_env(dev, full, &e));
    ASSERT_OK(take(e, &before));
    ASSERT_OK(same(&ref_before, &before));
    err_msg_t m = {{0}};
    mem_fail_after(n);
    rc = op(e, &m);
    mem_fail_after(0);

    if (rc == 0) {
      // the injected failure was never reached: the clean result
      ASSERT_OK(take(e, &after));
      if (same(&ref_after, &after)) {
        CHECK_FAIL("%s (full %d): the result differs from the clean run", name, full);
      }
      env_destroy(e);
      ASSERT_EQ(mem_live_count(), base);
      *out_n = n;
      break;
    }

    // a clean failure that changes nothing
    if (rc != ERR_NOMEM || m.text[0] == '\0') {
      CHECK_FAIL("%s (full %d), allocation %d failing: rc %d (%s), expected ERR_NOMEM with a "
                 "message", name, full, n, rc, m.text);
    }
    ASSERT_OK(take(e, &after));
    if (same(&before, &after)) {
      CHECK_FAIL("%s (full %d): environment changed by a failure of allocation %d (%s)", name,
                 full, n, m.text);
    }

    // still usable: the same call now gives the clean result
    rc = op(e, &m);
    if (rc != 0) {
      CHECK_FAIL("%s (full %d): retry after failing allocation %d: rc %d (%s)", name, full, n,
                 rc, m.text);
    }
    ASSERT_OK(take(e, &after));
    if (same(&ref_after, &after)) {
      CHECK_FAIL("%s (full %d): retry after failing allocation %d differs from the clean run",
                 name, full, n);
    }
    env_destroy(e);
    if (mem_live_count() != base) {
      CHECK_FAIL("%s (full %d): %lld allocations leaked after failing allocation %d", name, full,
                 (long long)(mem_live_count() - base), n);
    }
  }
  scene_device_destroy(dev);
  return 0;
}


// Both fixtures; `min_allocs` is the least number of allocations the call must have made on
// each (so that the loop really went through failures), -1 for "any".
static int oom_both(const char* name, op_fn_t op, int min_standard, int min_full) {
  int n_standard = 0, n_full = 0;
  ASSERT_OK(oom_loop(name, op, 0, &n_standard));
  ASSERT_OK(oom_loop(name, op, 1, &n_full));
  fprintf(stderr, "# %s: %d allocations (standard scene), %d (full tables)\n", name,
          n_standard - 1, n_full - 1);
  ASSERT_TRUE(n_standard - 1 >= min_standard);
  ASSERT_TRUE(n_full - 1 >= min_full);
  return 0;
}

//---------------- Tests


TEST(env_oom_create) {
  err_msg_t msg;
  scene_device_t* dev = scene_device_create(&msg);
  if (!dev) {
    CHECK_FAIL("scene_device_create: %s", msg.text);
  }
  const int64_t base = mem_live_count();
  int n;
  for (n = 1; n <= OOM_MAX_ATTEMPTS; n++) {
    err_msg_t m = {{0}};
    mem_fail_after(n);
    env_t* e = env_create("oom env", NULL, dev, NULL, &m);
    mem_fail_after(0);
    if (e) {
      ASSERT_STREQ(env_name(e), "oom env");
      ASSERT_OK(populate(e));
      env_destroy(e);
      ASSERT_EQ(mem_live_count(), base);
      break;
    }
    ASSERT_CONTAINS(m.text, "out of memory");
    ASSERT_EQ(mem_live_count(), base);
  }
  fprintf(stderr, "# env_create: %d allocations\n", n - 1);
  ASSERT_TRUE(n >= 4);  // env, name, scene, and success
  ASSERT_TRUE(n <= OOM_MAX_ATTEMPTS);
  scene_device_destroy(dev);
  return 0;
}


TEST(env_oom_create_mesh) {
  return oom_both("env_create_mesh", op_create_mesh, 5, 5);
}


TEST(env_oom_create_primitive) {
  return oom_both("env_create_primitive", op_create_primitive, 1, 3);
}


TEST(env_oom_set_material_new) {
  return oom_both("env_set_material (new)", op_set_material_new, 1, 3);
}


TEST(env_oom_set_material_replace) {
  return oom_both("env_set_material (replace)", op_set_material_replace, 1, 1);
}


TEST(env_oom_set_medium_new) {
  return oom_both("env_set_medium (new)", op_set_medium_new, 0, 2);
}


TEST(env_oom_set_medium_replace) {
  return oom_both("env_set_medium (replace)", op_set_medium_replace, 0, 0);
}


TEST(env_oom_set_settings_dipoles) {
  ASSERT_OK(oom_both("env_set_settings (append)", op_set_settings_append, 1, 1));
  return oom_both("env_set_settings (replace)", op_set_settings_replace, 1, 1);
}


TEST(env_oom_create_body) {
  return oom_both("env_create_body", op_create_body, 1, 4);
}


TEST(env_oom_create_object) {
  ASSERT_OK(oom_both("env_create_object (on a body)", op_create_object, 1, 5));
  return oom_both("env_create_object (static)", op_create_object_static, 0, 4);
}


TEST(env_oom_create_joint) {
  return oom_both("env_create_joint", op_create_joint, 1, 4);
}


// These allocate nothing today; the loop still checks that they succeed at once.
TEST(env_oom_update_state_step_raycast) {
  ASSERT_OK(oom_both("env_update_state", op_update_state, 0, 0));
  ASSERT_OK(oom_both("env_step", op_step, 0, 0));
  return oom_both("env_raycast", op_raycast, 0, 0);
}


TEST(env_oom_remove) {
  ASSERT_OK(oom_both("env_remove (object)", op_remove_object, 0, 0));
  return oom_both("env_remove (object, then its geometry)", op_remove_geometry, 0, 0);
}
