// SPDX-License-Identifier: MIT
// env_fixture.h: fixtures shared by test_env.c and test_env_oom.c: packed meshes, poses, the
// standard scene, and snapshots of what "unchanged" means (counts, time, probe rays, field).
#ifndef SENSIM_TESTS_ENV_FIXTURE_H_
#define SENSIM_TESTS_ENV_FIXTURE_H_

#include <string.h>

#include "check.h"
#include "world/env.h"

//---------------- Packed meshes

// Little-endian packing, independent of the host.
static inline void put_u32(uint8_t* p, uint32_t u) {
  p[0] = (uint8_t)u;
  p[1] = (uint8_t)(u >> 8);
  p[2] = (uint8_t)(u >> 16);
  p[3] = (uint8_t)(u >> 24);
}


static inline void put_f32(uint8_t* p, float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof(u));
  put_u32(p, u);
}


// Packed arrays of a mesh; `off` shifts the data by a byte so that it is unaligned.
typedef struct mesh_bytes {
  uint8_t vbuf[8 * 12 + 1];
  uint8_t ibuf[12 * 12 + 1];
  uint8_t mbuf[12 * 4 + 1];
  mesh_desc_t d;
} mesh_bytes_t;


// Axis-aligned cube of half side 0.5 (8 vertices, 12 triangles); mat != 0 gives every other
// triangle that material.
static inline void make_cube(mesh_bytes_t* m, uint32_t id, int off, uint32_t mat) {
  static const float v[8][3] = {{-.5f, -.5f, -.5f}, {.5f, -.5f, -.5f}, {.5f, .5f, -.5f},
                                {-.5f, .5f, -.5f},  {-.5f, -.5f, .5f}, {.5f, -.5f, .5f},
                                {.5f, .5f, .5f},    {-.5f, .5f, .5f}};
  static const uint32_t t[12][3] = {{0, 2, 1}, {0, 3, 2}, {4, 5, 6}, {4, 6, 7},
                                    {0, 1, 5}, {0, 5, 4}, {1, 2, 6}, {1, 6, 5},
                                    {2, 3, 7}, {2, 7, 6}, {3, 0, 4}, {3, 4, 7}};
  memset(m, 0, sizeof(*m));
  for (int i = 0; i < 24; i++) {
    put_f32(m->vbuf + off + 4 * i, v[i / 3][i % 3]);
  }
  for (int i = 0; i < 36; i++) {
    put_u32(m->ibuf + off + 4 * i, t[i / 3][i % 3]);
  }
  m->d.id = id;
  m->d.vertices = m->vbuf + off;
  m->d.vertices_len = 96;
  m->d.indices = m->ibuf + off;
  m->d.indices_len = 144;
  if (mat) {
    for (int i = 0; i < 12; i++) {
      put_u32(m->mbuf + off + 4 * i, i % 2 ? mat : 0);
    }
    m->d.material_ids = m->mbuf + off;
    m->d.material_ids_len = 48;
  }
}


// Square z = 0, x and y in [-1, 1] (4 vertices, 2 triangles), per-triangle materials.
static inline void make_quad(mesh_bytes_t* m, uint32_t id, uint32_t mat0, uint32_t mat1) {
  static const float v[4][3] = {{-1, -1, 0}, {1, -1, 0}, {1, 1, 0}, {-1, 1, 0}};
  static const uint32_t t[6] = {0, 1, 2, 0, 2, 3};
  memset(m, 0, sizeof(*m));
  for (int i = 0; i < 12; i++) {
    put_f32(m->vbuf + 4 * i, v[i / 3][i % 3]);
  }
  for (int i = 0; i < 6; i++) {
    put_u32(m->ibuf + 4 * i, t[i]);
  }
  put_u32(m->mbuf, mat0);
  put_u32(m->mbuf + 4, mat1);
  m->d.id = id;
  m->d.vertices = m->vbuf;
  m->d.vertices_len = 48;
  m->d.indices = m->ibuf;
  m->d.indices_len = 24;
  m->d.material_ids = m->mbuf;
  m->d.material_ids_len = 8;
}

//---------------- Poses, objects, states

static inline pose_t pose_at(double x, double y, double z) {
  pose_t p = xform_identity();
  p.p[0] = x;
  p.p[1] = y;
  p.p[2] = z;
  return p;
}


static inline object_desc_t object(uint32_t id, uint32_t geometry, uint32_t body,
                                   pose_t local) {
  object_desc_t o = {.id = id, .geometry_id = geometry, .body_id = body, .local_pose = local,
                     .scale = {1, 1, 1}, .label = id};
  return o;
}


// Body poses in wire order (px py pz qx qy qz qw), identity orientation.
static inline void wire_pose(double* dst, double x, double y, double z) {
  const double p[7] = {x, y, z, 0, 0, 0, 1};
  memcpy(dst, p, sizeof(p));
}


static inline int update_bodies(env_t* e, double t, uint32_t n, const uint32_t* ids,
                                const double* poses) {
  env_state_update_t u = {.time = t, .nbody = n, .body_ids = ids, .body_poses = poses};
  err_msg_t msg;
  int rc = env_update_state(e, &u, &msg);
  if (rc) {
    fprintf(stderr, "# env_update_state: %s\n", msg.text);
  }
  return rc;
}

//---------------- The standard scene

// Geometry 1 (`cube`, a cube mesh), sphere 2, geometry 7 (`mesh7`, which may use material 6),
// materials 5 and 6, medium 3 (fog), bodies 10 and 11, objects 100 (geometry 1 on body 10), 101
// (sphere on body 11), 102 (static geometry 1 at (0, 5, 0), scale 2, material 5, medium 3), 103
// (static geometry 7 at (5, 5, 0)), joint 20 (named joint_name). States: t = 0 (step 0 done),
// then t = 1 with body 10 raised to z = 1, so that the current interval [0, 1] is not empty.
static inline int populate_standard(env_t* e, const mesh_desc_t* cube, const mesh_desc_t* mesh7,
                                    const char* joint_name) {
  err_msg_t msg;
  surface_material_t two = material_default_two_layer();
  surface_material_t dull = material_default_lambertian();
  dull.reflectance = 0.3;
  ambient_material_t fog;
  ASSERT_OK(ambient_fog(100.0, &fog, &msg));

  ASSERT_OK(env_create_mesh(e, cube, &msg));
  prim_desc_t sphere = {.id = 2, .kind = SCENE_PRIM_SPHERE, .size = {0.5, 0, 0}};
  ASSERT_OK(env_create_primitive(e, &sphere, &msg));
  ASSERT_OK(env_set_material(e, 5, &two, "paint", &msg));
  ASSERT_OK(env_set_material(e, 6, &dull, NULL, &msg));
  ASSERT_OK(env_create_mesh(e, mesh7, &msg));
  ASSERT_OK(env_set_medium(e, 3, &fog, &msg));

  body_desc_t b10 = {.id = 10, .pose = pose_at(0, 0, 0), .name = "cart"};
  body_desc_t b11 = {.id = 11, .pose = pose_at(5, 0, 0)};
  ASSERT_OK(env_create_body(e, &b10, &msg));
  ASSERT_OK(env_create_body(e, &b11, &msg));
  object_desc_t o100 = object(100, 1, 10, xform_identity());
  object_desc_t o101 = object(101, 2, 11, xform_identity());
  object_desc_t o102 = object(102, 1, 0, pose_at(0, 5, 0));
  o102.scale[0] = o102.scale[1] = o102.scale[2] = 2.0;
  o102.material_id = 5;
  o102.medium_id = 3;
  object_desc_t o103 = object(103, 7, 0, pose_at(5, 5, 0));
  ASSERT_OK(env_create_object(e, &o100, &msg));
  ASSERT_OK(env_create_object(e, &o101, &msg));
  ASSERT_OK(env_create_object(e, &o102, &msg));
  ASSERT_OK(env_create_object(e, &o103, &msg));
  joint_desc_t j = {.id = 20, .type = JOINT_TYPE_REVOLUTE, .position = 0.5, .name = joint_name};
  ASSERT_OK(env_create_joint(e, &j, &msg));

  uint32_t ids[2] = {10, 11};
  double poses[14];
  wire_pose(poses, 0, 0, 0);
  wire_pose(poses + 7, 5, 0, 0);
  ASSERT_OK(update_bodies(e, 0.0, 2, ids, poses));
  ASSERT_OK(env_step(e, 0.0, &msg));
  wire_pose(poses, 0, 0, 1);
  ASSERT_OK(update_bodies(e, 1.0, 1, ids, poses));
  return 0;
}

//---------------- Snapshots: what "unchanged" means

#define ENV_PROBES_MAX 9

typedef struct env_snap {
  env_info_t info;
  int nprobe;
  scene_hit_t at_cur[ENV_PROBES_MAX];    // rays at t_cur
  scene_hit_t at_prev[ENV_PROBES_MAX];   // rays at t_prev
  double field[3];                       // magnetic field at (0.3, 0.2, 2)
} env_snap_t;


// The first n (<= ENV_PROBES_MAX) probe rays: 8 that see every object of the standard scene,
// from above and from the side, then one from the side at z = 4.
static inline void env_probes(int n, double* o, double* d) {
  static const double xy[6][2] = {{0, 0}, {5, 0}, {0, 5}, {5, 5}, {0.8, 5.8}, {4.5, 4.5}};
  static const double side[3][6] = {
      {-10, 0, 0, 1, 0, 0}, {-10, 0, 1, 1, 0, 0}, {-10, 0, 4, 1, 0, 0}};
  for (int i = 0; i < n && i < 6; i++) {
    double oi[3] = {xy[i][0], xy[i][1], 10};
    double di[3] = {0, 0, -1};
    memcpy(o + 3 * i, oi, sizeof(oi));
    memcpy(d + 3 * i, di, sizeof(di));
  }
  for (int i = 6; i < n; i++) {
    memcpy(o + 3 * i, side[i - 6], 3 * sizeof(double));
    memcpy(d + 3 * i, side[i - 6] + 3, 3 * sizeof(double));
  }
}


// Take a snapshot with the first nprobe probe rays; never under failure injection.
static inline int env_snap_take(env_t* e, int nprobe, env_snap_t* s) {
  memset(s, 0, sizeof(*s));
  s->nprobe = nprobe;
  env_get_info(e, &s->info);
  double o[3 * ENV_PROBES_MAX], d[3 * ENV_PROBES_MAX];
  env_probes(nprobe, o, d);
  err_msg_t msg;
  env_raycast_t r = {.nray = (uint32_t)nprobe, .origins = o, .directions = d};
  ASSERT_OK(env_raycast(e, &r, s->at_cur, &msg));
  if (s->info.time.has_time) {
    r.ntime = 1;
    r.times = &s->info.time.t_prev;
    ASSERT_OK(env_raycast(e, &r, s->at_prev, &msg));
  }
  const double p[3] = {0.3, 0.2, 2};
  env_magnetic_field(e, p, s->field);

  // the probes committed pending edits (moved bodies' instances are written at the first
  // commit after an update): count the scene's work after them
  env_get_info(e, &s->info);
  return 0;
}


static inline int env_snap_same_hits(const scene_hit_t* a, const scene_hit_t* b, int n,
                                     const char* when) {
  for (int i = 0; i < n; i++) {
    if (a[i].object_id != b[i].object_id || a[i].distance != b[i].distance ||
        a[i].primitive != b[i].primitive) {
      CHECK_FAIL("probe %d at %s: object %u at %g became object %u at %g", i, when,
                 a[i].object_id, a[i].distance, b[i].object_id, b[i].distance);
    }
  }
  return 0;
}


// 0 when both snapshots are alike: counts, time, scene counters, field and probe hits.
static inline int env_snap_same(const env_snap_t* a, const env_snap_t* b) {
  const env_info_t* x = &a->info;
  const env_info_t* y = &b->info;
  ASSERT_EQ(a->nprobe, b->nprobe);
  ASSERT_EQ(x->geometries, y->geometries);
  ASSERT_EQ(x->materials, y->materials);
  ASSERT_EQ(x->media, y->media);
  ASSERT_EQ(x->bodies, y->bodies);
  ASSERT_EQ(x->objects, y->objects);
  ASSERT_EQ(x->joints, y->joints);
  ASSERT_EQ(x->sensors, y->sensors);
  ASSERT_EQ(x->time.has_time, y->time.has_time);
  ASSERT_TRUE(x->time.t_prev == y->time.t_prev);
  ASSERT_TRUE(x->time.t_cur == y->time.t_cur);
  ASSERT_EQ(x->time.steps, y->time.steps);
  ASSERT_EQ(x->scene.geometry_builds, y->scene.geometry_builds);
  ASSERT_EQ(x->scene.instance_updates, y->scene.instance_updates);
  ASSERT_MEM_EQ(a->field, b->field, sizeof(a->field));
  if (env_snap_same_hits(a->at_cur, b->at_cur, a->nprobe, "t_cur") ||
      env_snap_same_hits(a->at_prev, b->at_prev, a->nprobe, "t_prev")) {
    return 1;
  }
  return 0;
}

#endif  // SENSIM_TESTS_ENV_FIXTURE_H_
