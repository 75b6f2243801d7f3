// SPDX-License-Identifier: MIT
// bench_lidar.c: the whole lidar pipeline against raw Embree on the very same rays, in this
// process, on one thread.
//
// The reference scene: a terrain mesh (>= 100k triangles), 150 boxes and 100 spheres as
// triangle meshes (so both sides trace the same triangles), 100 of them on moving bodies
// (instance motion blur over each step). It is built once through the core API (an environment
// per configuration) and once directly with Embree as the core sets it up (the static objects'
// triangles in world coordinates in one bottom-level scene, one instance per moving object
// with two time steps; the device's best ISA; coherent packets). The rays are a revolution of
// each lidar pattern (VLP-16 at 10 Hz, Ouster OS1-128 2048 x 10) from the same static sensor
// pose, with the same ray times inside the step: raw
// rtcIntersect1, rtcIntersect8 and rtcIntersect16 (consecutive rays in firing order, and 16 in
// the lidar's tiles of 2 channels x 8 columns, packed each pass or laid out as packets once)
// trace them, on a device of the same ISA as the
// core's (SENSIM_EMBREE_CONFIG, else the CPU's best), and the lidar (Lambertian, depth 1,
// distance noise on; then two-layer materials and depth 3) steps one revolution per
// repetition. Repetitions are interleaved; medians are printed as
//   BENCH <name> <value> <unit>
// On one worker every part is timed by the process's CPU time (the machine's other load does
// not count), with more by the wall clock. lidar_over_best_raw is the throughput ratio (rays
// per second of the lidar over rays per second of raw Embree) against the fastest raw
// configuration, printed with what still differs (the lidar skips the rays above the horizon
// of its step, which the scene proves to miss; raw Embree traces them all: the share is
// printed); lidar_over_raw16 and the others against one configuration each.
// os1_128_realtime_factor is simulated seconds per CPU second; update_commit_over_scan is the
// cost of a state update and commit of 100 moving instances over the cost of the OS1-128
// revolution.
#include <embree3/rtcore.h>
#include <math.h>
#include <pmmintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xmmintrin.h>

#include "base/pool.h"
#include "bench_util.h"
#include "lidar/lidar.h"
#include "lidar/sweep.h"
#include "world/env.h"

#define NBOX 150
#define NSPHERE 100
#define NMOVING 100
#define NOBJ (1 + NBOX + NSPHERE)
#define TERRAIN_SIDE 160.0      // m
#define PERIOD 0.1              // s, one revolution (10 Hz) = one step

typedef struct options {
  int quick;
  unsigned grid;                // terrain cells per side
  unsigned repeats;
  unsigned threads;             // worker pool of the lidar environments (raw Embree: 1)
  unsigned profile;             // > 0: only step the OS1-128 lidar this many revolutions
} options_t;

static const char* const g_usage =
    "Usage: bench_lidar [OPTIONS]\n"
    "The lidar pipeline (VLP-16, OS1-128 2048x10) against raw Embree rtcIntersect1 and\n"
    "rtcIntersect16 on the same rays and scene, one thread, interleaved repetitions.\n"
    "\n"
    "  --quick        small terrain, 5 repetitions (a few seconds)\n"
    "  --grid N       terrain cells per side (default 230: 105,800 triangles)\n"
    "  --repeats N    timed repetitions, >= 5 (default 7)\n"
    "  --threads N    the lidars' worker pool (default 1; the raw references stay on one)\n"
    "  --profile N    step the OS1-128 lidar alone N revolutions, print no figures (for perf)\n"
    "  --hash         with --profile: hashes of the clouds of several configurations\n"
    "  --update       with --profile: the state update and commit alone (no lidar)\n"
    "  --raw          with --profile: the raw reference alone (rtcIntersect16 on the OS1-128's\n"
    "                 rays in the lidar's tiles), to compare instruction counts\n"
    "  --scene        with --profile: scene_trace alone on the same rays and tiles\n"
    "  --rows         with --raw or --scene: rtcIntersect8 / scene_trace in rows of 8 in firing\n"
    "                 order instead (scene_trace_rows8_over_raw8's two sides)\n";

//---------------- Scene description

typedef struct mesh {
  float* v;
  uint32_t nv;
  uint32_t* idx;
  uint32_t nt;
} mesh_t;

typedef struct object {
  unsigned geom;                // 0 terrain, 1 box, 2 sphere
  double pos[3];
  double scale[3];
  double vel[3];                // m/s; zero for static objects
  uint32_t body;                // 0 = static
} object_t;

typedef struct world {
  mesh_t mesh[3];
  object_t obj[NOBJ];
} world_t;


static double rnd(uint64_t* s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(*s >> 11) * 0x1.0p-53;
}


static void make_box(mesh_t* m) {
  static const float v[8][3] = {{-.5f, -.5f, -.5f}, {.5f, -.5f, -.5f}, {.5f, .5f, -.5f},
                                {-.5f, .5f, -.5f},  {-.5f, -.5f, .5f}, {.5f, -.5f, .5f},
                                {.5f, .5f, .5f},    {-.5f, .5f, .5f}};
  static const uint32_t t[12][3] = {{0, 2, 1}, {0, 3, 2}, {4, 5, 6}, {4, 6, 7},
                                    {0, 1, 5}, {0, 5, 4}, {1, 2, 6}, {1, 6, 5},
                                    {2, 3, 7}, {2, 7, 6}, {3, 0, 4}, {3, 4, 7}};
  m->nv = 8;
  m->nt = 12;
  m->v = bench_xmalloc(sizeof v);
  m->idx = bench_xmalloc(sizeof t);
  memcpy(m->v, v, sizeof v);
  memcpy(m->idx, t, sizeof t);
}


// Unit sphere, stacks x 2 stacks quads (poles included as degenerate quads' triangles).
static void make_sphere(mesh_t* m, unsigned stacks) {
  unsigned slices = 2 * stacks;
  m->nv = (stacks + 1) * slices;
  m->nt = 2 * stacks * slices;
  m->v = bench_xmalloc(3 * sizeof(float) * m->nv);
  m->idx = bench_xmalloc(3 * sizeof(uint32_t) * m->nt);
  float* v = m->v;
  for (unsigned i = 0; i <= stacks; i++) {
    double th = M_PI * i / stacks;
    for (unsigned j = 0; j < slices; j++) {
      double ph = 2.0 * M_PI * j / slices;
      *v++ = (float)(sin(th) * cos(ph));
      *v++ = (float)(sin(th) * sin(ph));
      *v++ = (float)cos(th);
    }
  }
  uint32_t* t = m->idx;
  for (unsigned i = 0; i < stacks; i++) {
    for (unsigned j = 0; j < slices; j++) {
      uint32_t a = i * slices + j, b = i * slices + (j + 1) % slices;
      uint32_t c = b + slices, d = a + slices;
      *t++ = a, *t++ = d, *t++ = c;
      *t++ = a, *t++ = c, *t++ = b;
    }
  }
}


static void make_world(world_t* w, const options_t* o) {
  memset(w, 0, sizeof *w);
  mesh_t* t = &w->mesh[0];
  t->nv = (o->grid + 1) * (o->grid + 1);
  t->nt = 2 * o->grid * o->grid;
  t->v = bench_xmalloc(3 * sizeof(float) * t->nv);
  t->idx = bench_xmalloc(3 * sizeof(uint32_t) * t->nt);
  bench_terrain(o->grid, TERRAIN_SIDE, t->v, t->idx);
  make_box(&w->mesh[1]);
  make_sphere(&w->mesh[2], 12);

  // the terrain, then boxes and spheres scattered 4 to 40 m around the sensor; every other
  // one of the first 2 NMOVING objects moves at a few m/s
  uint64_t seed = 4242;
  w->obj[0] = (object_t){.geom = 0, .scale = {1, 1, 1}};
  uint32_t body = 0;
  unsigned moving = 0;
  for (unsigned i = 1; i < NOBJ; i++) {
    object_t* ob = &w->obj[i];
    double a = 2.0 * M_PI * rnd(&seed), r = 4.0 + 36.0 * rnd(&seed);
    double x = r * cos(a), y = r * sin(a);
    ob->geom = i <= NBOX ? 1 : 2;
    if (ob->geom == 1) {
      ob->scale[0] = 0.5 + 3.0 * rnd(&seed);
      ob->scale[1] = 0.5 + 3.0 * rnd(&seed);
      ob->scale[2] = 0.5 + 2.0 * rnd(&seed);
    } else {
      ob->scale[0] = ob->scale[1] = ob->scale[2] = 0.3 + 1.2 * rnd(&seed);
    }
    ob->pos[0] = x;
    ob->pos[1] = y;
    ob->pos[2] = bench_terrain_height(x, y) + 0.4 * ob->scale[2];
    if (moving < NMOVING && (i % 2 == 0 || NOBJ - i <= NMOVING - moving)) {
      ob->body = ++body;
      ob->vel[0] = -3.0 + 6.0 * rnd(&seed);
      ob->vel[1] = -3.0 + 6.0 * rnd(&seed);
      moving++;
    }
  }
}


// World position of object i at time t.
static void obj_at(const object_t* o, double t, double p[3]) {
  for (int k = 0; k < 3; k++) {
    p[k] = o->pos[k] + o->vel[k] * t;
  }
}

//---------------- The environments

static pool_t* g_pool;          // the lidar environments' workers (NULL: the caller alone)

// The clock of every timed part: the process's CPU time on one worker (this machine's load
// does not count: the lidar and the raw references run on this thread, Embree's commits of the
// moving instances on TBB's are counted too), wall time with more workers.
static double now(void) {
  if (g_pool) {
    return bench_now();
  }
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct lidar_env {
  scene_device_t* dev;
  env_t* e;
  double t;                     // time of the last step
  int vehicle;                  // the lidar rides body SENSOR_BODY, moving at VEHICLE_SPEED
} lidar_env_t;

#define SENSOR_BODY 1000
#define VEHICLE_SPEED 10.0      // m/s along x


static void check(int rc, const err_msg_t* msg, const char* what) {
  if (rc < 0) {
    bench_die("%s: %s", what, msg->text);
  }
}


static void state_at(lidar_env_t* le, const world_t* w, double t) {
  uint32_t ids[NMOVING + 1];
  double poses[7 * (NMOVING + 1)];
  unsigned n = 0;
  if (le->vehicle) {
    ids[n] = SENSOR_BODY;
    double* q = &poses[7 * n];
    q[0] = VEHICLE_SPEED * t, q[1] = 0, q[2] = 0, q[3] = 0, q[4] = 0, q[5] = 0, q[6] = 1;
    n++;
  }
  for (unsigned i = 0; i < NOBJ; i++) {
    if (!w->obj[i].body) {
      continue;
    }
    double p[3];
    obj_at(&w->obj[i], t, p);
    ids[n] = w->obj[i].body;
    double* q = &poses[7 * n];
    q[0] = p[0], q[1] = p[1], q[2] = p[2], q[3] = 0, q[4] = 0, q[5] = 0, q[6] = 1;
    n++;
  }
  env_state_update_t u = {.time = t, .nbody = n, .body_ids = ids, .body_poses = poses};
  err_msg_t msg = {0};
  check(env_update_state(le->e, &u, &msg), &msg, "env_update_state");
}


// kind: 0 none, 1 VLP-16, 2 OS1-128; two_layer: two-layer material 0 and depth 3 (2: also
// fog, dual returns, the Ouster point layout; 3: those three at depth 1, Lambertian); vehicle:
// the lidar on a body moving at VEHICLE_SPEED (each ray from its own pose).
static void env_open(lidar_env_t* le, const world_t* w, int kind, int two_layer, int vehicle,
                     const pose_t* sensor) {
  err_msg_t msg = {0};
  le->vehicle = vehicle;
  le->dev = scene_device_create(&msg);
  if (!le->dev) {
    bench_die("scene_device_create: %s", msg.text);
  }
  env_limits_t lim = env_default_limits();
  le->e = env_create("bench", &lim, le->dev, g_pool, &msg);
  if (!le->e) {
    bench_die("env_create: %s", msg.text);
  }
  for (unsigned g = 0; g < 3; g++) {
    const mesh_t* m = &w->mesh[g];
    mesh_desc_t d = {.id = g + 1, .vertices = (const uint8_t*)m->v,
                     .vertices_len = 12 * (size_t)m->nv, .indices = (const uint8_t*)m->idx,
                     .indices_len = 12 * (size_t)m->nt};
    check(env_create_mesh(le->e, &d, &msg), &msg, "env_create_mesh");
  }
  if (two_layer == 1 || two_layer == 2) {
    surface_material_t m = material_default_two_layer();
    check(env_set_material(le->e, 0, &m, NULL, &msg), &msg, "env_set_material");
  }
  if (two_layer >= 2) {
    ambient_material_t fog;
    check(ambient_fog(150.0, &fog, &msg), &msg, "ambient_fog");
    check(env_set_medium(le->e, 0, &fog, &msg), &msg, "env_set_medium");
  }
  for (unsigned i = 0; i < NOBJ; i++) {
    const object_t* o = &w->obj[i];
    pose_t local = xform_identity();
    if (o->body) {
      body_desc_t b = {.id = o->body, .pose = xform_identity()};
      memcpy(b.pose.p, o->pos, sizeof o->pos);
      check(env_create_body(le->e, &b, &msg), &msg, "env_create_body");
    } else {
      memcpy(local.p, o->pos, sizeof o->pos);
    }
    object_desc_t d = {.id = i + 1, .geometry_id = o->geom + 1, .body_id = o->body,
                       .local_pose = local, .scale = {o->scale[0], o->scale[1], o->scale[2]}};
    check(env_create_object(le->e, &d, &msg), &msg, "env_create_object");
  }
  if (kind) {
    lidar_desc_t d;
    memset(&d, 0, sizeof d);
    d.returns.range_min = 0.1;
    d.returns.range_max = 120.0;
    d.returns.depth = two_layer == 1 || two_layer == 2 ? 3 : 1;
    d.returns.distance_noise.stddev_base = 0.01;
    if (two_layer >= 2) {
      d.returns.mode = LIDAR_RETURN_DUAL;
      d.layout = LIDAR_LAYOUT_OUSTER;
    }
    if (kind == 1) {
      lidar_vlp16_desc_t v = {.frequency = 10.0};
      check(lidar_pattern_vlp16_init(&d.pattern, &v, "vlp16", &msg), &msg, "vlp16");
    } else {
      lidar_ouster_desc_t o = {.channels = 128, .columns = 2048, .frequency = 10.0,
                               .elevation_max = NAN, .elevation_min = NAN};
      check(lidar_pattern_ouster_init(&d.pattern, &o, "ouster", &msg), &msg, "ouster");
    }
    sensor_desc_t s = {.id = 1, .mount = *sensor};
    if (vehicle) {
      body_desc_t b = {.id = SENSOR_BODY, .pose = xform_identity()};
      check(env_create_body(le->e, &b, &msg), &msg, "env_create_body");
      s.body_id = SENSOR_BODY;
    }
    check(lidar_create(&d, &s.sensor, &msg), &msg, "lidar_create");
    check(env_create_sensor(le->e, &s, &msg), &msg, "env_create_sensor");
  }

  // the first revolution, untimed
  state_at(le, w, 0.0);
  state_at(le, w, PERIOD);
  check(env_step(le->e, PERIOD, &msg), &msg, "env_step");
  le->t = PERIOD;
}


// Update the state and step one revolution further; returns the seconds env_step took (with
// `with_update`, the update too).
static double env_rev(lidar_env_t* le, const world_t* w, int with_update, uint64_t* points) {
  err_msg_t msg = {0};
  double t = le->t + PERIOD;
  double t0 = now();
  state_at(le, w, t);
  double t1 = now();
  check(env_step(le->e, t, &msg), &msg, "env_step");
  double t2 = now();
  le->t = t;
  const sensor_out_t* out = env_outputs(le->e);
  if (points) {
    *points = 0;
    for (uint32_t i = 0; i < out->n; i++) {
      *points += out->rec[i].u.cloud.count;
    }
  }
  return with_update ? t2 - t0 : t2 - t1;
}


// FNV-1a of the step's clouds, folded into h.
static uint64_t clouds_hash(lidar_env_t* le, uint64_t h) {
  const sensor_out_t* out = env_outputs(le->e);
  for (uint32_t i = 0; i < out->n; i++) {
    const sensor_cloud_t* c = &out->rec[i].u.cloud;
    const uint8_t* d = c->data;
    for (size_t k = 0; k < (size_t)c->count * c->point_step; k++) {
      h = (h ^ d[k]) * 0x100000001b3ull;
    }
  }
  return h;
}


static void env_close(lidar_env_t* le) {
  env_destroy(le->e);
  scene_device_destroy(le->dev);
}

//---------------- Raw Embree

typedef struct raw {
  RTCDevice dev;
  RTCScene blas[3];
  RTCScene flat;                // the static objects' triangles in world coordinates
  RTCScene top;
} raw_t;


static void raw_check(RTCDevice dev, const char* what) {
  if (rtcGetDeviceError(dev) != RTC_ERROR_NONE) {
    bench_die("embree error in %s", what);
  }
}


// Column-major 3x4 of translation p and per-axis scale s.
static void xfm(const double p[3], const double s[3], float m[12]) {
  memset(m, 0, 12 * sizeof(float));
  m[0] = (float)s[0];
  m[4] = (float)s[1];
  m[8] = (float)s[2];
  m[9] = (float)p[0];
  m[10] = (float)p[1];
  m[11] = (float)p[2];
}


// The scene of the step (t0, t1] as the core sets it up (scene/): the static objects' triangles
// in world coordinates (the vertices transformed in double) in one bottom-level scene under one
// identity instance, the moving objects one instance each with their poses at both ends (they
// move without turning: two matrices). like_core: the core's flags too, robust traversal on
// both levels and a dynamic low-quality top level; else Embree's defaults (printed for
// information).
static void raw_build(raw_t* r, const world_t* w, double t0, double t1, int like_core) {
  const char* config = getenv(SCENE_DEVICE_CONFIG_ENV);   // the ISA the core's device takes
  r->dev = rtcNewDevice(config && config[0] ? config : NULL);
  if (!r->dev) {
    bench_die("rtcNewDevice failed");
  }
  for (unsigned g = 0; g < 3; g++) {
    const mesh_t* m = &w->mesh[g];
    RTCGeometry geo = rtcNewGeometry(r->dev, RTC_GEOMETRY_TYPE_TRIANGLE);
    float* vb = rtcSetNewGeometryBuffer(geo, RTC_BUFFER_TYPE_VERTEX, 0, RTC_FORMAT_FLOAT3,
                                        3 * sizeof(float), m->nv);
    uint32_t* ib = rtcSetNewGeometryBuffer(geo, RTC_BUFFER_TYPE_INDEX, 0, RTC_FORMAT_UINT3,
                                           3 * sizeof(uint32_t), m->nt);
    memcpy(vb, m->v, 3 * sizeof(float) * m->nv);
    memcpy(ib, m->idx, 3 * sizeof(uint32_t) * m->nt);
    rtcCommitGeometry(geo);
    r->blas[g] = rtcNewScene(r->dev);
    if (like_core) {
      rtcSetSceneFlags(r->blas[g], RTC_SCENE_FLAG_ROBUST);
    }
    rtcAttachGeometry(r->blas[g], geo);
    rtcReleaseGeometry(geo);
    rtcCommitScene(r->blas[g]);
  }
  r->top = rtcNewScene(r->dev);
  r->flat = rtcNewScene(r->dev);
  if (like_core) {
    rtcSetSceneFlags(r->top, RTC_SCENE_FLAG_DYNAMIC | RTC_SCENE_FLAG_ROBUST);
    rtcSetSceneBuildQuality(r->top, RTC_BUILD_QUALITY_LOW);
    rtcSetSceneFlags(r->flat, RTC_SCENE_FLAG_ROBUST);
  }
  for (unsigned i = 0; i < NOBJ; i++) {
    const object_t* o = &w->obj[i];
    if (!o->body) {
      const mesh_t* m = &w->mesh[o->geom];
      RTCGeometry g = rtcNewGeometry(r->dev, RTC_GEOMETRY_TYPE_TRIANGLE);
      float* vb = rtcSetNewGeometryBuffer(g, RTC_BUFFER_TYPE_VERTEX, 0, RTC_FORMAT_FLOAT3,
                                          3 * sizeof(float), m->nv);
      uint32_t* ib = rtcSetNewGeometryBuffer(g, RTC_BUFFER_TYPE_INDEX, 0, RTC_FORMAT_UINT3,
                                             3 * sizeof(uint32_t), m->nt);
      for (unsigned v = 0; v < 3 * m->nv; v++) {
        vb[v] = (float)((double)m->v[v] * o->scale[v % 3] + o->pos[v % 3]);
      }
      memcpy(ib, m->idx, 3 * sizeof(uint32_t) * m->nt);
      rtcCommitGeometry(g);
      rtcAttachGeometry(r->flat, g);
      rtcReleaseGeometry(g);
      continue;
    }
    RTCGeometry g = rtcNewGeometry(r->dev, RTC_GEOMETRY_TYPE_INSTANCE);
    rtcSetGeometryInstancedScene(g, r->blas[o->geom]);
    float m[12];
    if (o->body) {
      double p[3];
      rtcSetGeometryTimeStepCount(g, 2);
      obj_at(o, t0, p);
      xfm(p, o->scale, m);
      rtcSetGeometryTransform(g, 0, RTC_FORMAT_FLOAT3X4_COLUMN_MAJOR, m);
      obj_at(o, t1, p);
      xfm(p, o->scale, m);
      rtcSetGeometryTransform(g, 1, RTC_FORMAT_FLOAT3X4_COLUMN_MAJOR, m);
    } else {
      xfm(o->pos, o->scale, m);
      rtcSetGeometryTransform(g, 0, RTC_FORMAT_FLOAT3X4_COLUMN_MAJOR, m);
    }
    rtcCommitGeometry(g);
    rtcAttachGeometry(r->top, g);
    rtcReleaseGeometry(g);
  }
  rtcCommitScene(r->flat);
  static const double origin[3] = {0, 0, 0}, unit[3] = {1, 1, 1};
  float m[12];
  xfm(origin, unit, m);
  RTCGeometry g = rtcNewGeometry(r->dev, RTC_GEOMETRY_TYPE_INSTANCE);
  rtcSetGeometryInstancedScene(g, r->flat);
  rtcSetGeometryTransform(g, 0, RTC_FORMAT_FLOAT3X4_COLUMN_MAJOR, m);
  rtcCommitGeometry(g);
  rtcAttachGeometry(r->top, g);
  rtcReleaseGeometry(g);
  rtcCommitScene(r->top);
  raw_check(r->dev, "raw scene");
}


static void raw_close(raw_t* r) {
  rtcReleaseScene(r->top);
  rtcReleaseScene(r->flat);
  for (unsigned g = 0; g < 3; g++) {
    rtcReleaseScene(r->blas[g]);
  }
  rtcReleaseDevice(r->dev);
}


typedef struct rayset {
  size_t n;
  float* org;                   // 3 per ray
  float* dir;
  float* time;                  // fraction of the step
} rayset_t;


// The rays of one revolution of `p` fired in (t0, t1] (t_s = 0) from the static pose.
static void rays_of(const lidar_pattern_t* p, const pose_t* sensor, double t0, double t1,
                    rayset_t* out) {
  lidar_cursor_t c = lidar_sweep_seek(p, 0.0, t0);
  while (lidar_sweep_fired(p, 0.0, c, t0)) {
    c++;
  }
  lidar_cursor_t end = c;
  while (lidar_sweep_fired(p, 0.0, end, t1)) {
    end++;
  }
  out->n = end - c;
  out->org = bench_xmalloc(3 * sizeof(float) * out->n);
  out->dir = bench_xmalloc(3 * sizeof(float) * out->n);
  out->time = bench_xmalloc(sizeof(float) * out->n);
  lidar_sweep_pose_t ps;
  lidar_sweep_pose(NULL, sensor, 0.0, &ps);
  for (size_t i = 0; i < out->n; i++) {
    lidar_pattern_ray_t r;
    lidar_sweep_ray(p, c + i, &r);
    scene_ray_t w;
    lidar_sweep_world_ray(&ps, r.origin, r.dir, &w);
    for (int k = 0; k < 3; k++) {
      out->org[3 * i + k] = (float)w.origin[k];
      out->dir[3 * i + k] = (float)w.dir[k];
    }
    out->time[i] = (float)((r.time - t0) / (t1 - t0));
  }
}


// The lidar's tiles (lidar.c): 2 rays (channels) of 8 consecutive groups (columns).
#define TILE_COLUMNS 8u
#define TILE_CHANNELS 2u

// The set reordered as the lidar traces a pattern of k rays per firing group (k a multiple of
// TILE_CHANNELS): tiles of TILE_CHANNELS rays of TILE_COLUMNS consecutive groups, so that each
// 16-ray packet holds neighbours.
static void tiles_of(const rayset_t* in, uint32_t k, rayset_t* out) {
  out->n = in->n;
  out->org = bench_xmalloc(3 * sizeof(float) * in->n);
  out->dir = bench_xmalloc(3 * sizeof(float) * in->n);
  out->time = bench_xmalloc(sizeof(float) * in->n);
  size_t pos = 0, ng = (in->n + k - 1) / k;
  for (size_t gb = 0; gb < ng; gb += TILE_COLUMNS) {
    for (size_t kb = 0; kb < k; kb += TILE_CHANNELS) {
      for (size_t g = gb; g < gb + TILE_COLUMNS && g < ng; g++) {
        for (size_t j = kb; j < kb + TILE_CHANNELS; j++) {
          size_t i = g * k + j;
          if (i < in->n) {
            memcpy(&out->org[3 * pos], &in->org[3 * i], 3 * sizeof(float));
            memcpy(&out->dir[3 * pos], &in->dir[3 * i], 3 * sizeof(float));
            out->time[pos++] = in->time[i];
          }
        }
      }
    }
  }
}


// rtcIntersect1 over the set; returns the hits.
static size_t raw_trace1(const raw_t* r, const rayset_t* s) {
  struct RTCIntersectContext ctx;
  rtcInitIntersectContext(&ctx);
  size_t hits = 0;
  for (size_t i = 0; i < s->n; i++) {
    struct RTCRayHit rh;
    rh.ray.org_x = s->org[3 * i];
    rh.ray.org_y = s->org[3 * i + 1];
    rh.ray.org_z = s->org[3 * i + 2];
    rh.ray.dir_x = s->dir[3 * i];
    rh.ray.dir_y = s->dir[3 * i + 1];
    rh.ray.dir_z = s->dir[3 * i + 2];
    rh.ray.tnear = SCENE_RAY_TNEAR;
    rh.ray.tfar = 120.0f;
    rh.ray.time = s->time[i];
    rh.ray.mask = 0xFFFFFFFFu;
    rh.ray.flags = 0;
    rh.hit.geomID = RTC_INVALID_GEOMETRY_ID;
    rh.hit.instID[0] = RTC_INVALID_GEOMETRY_ID;
    rtcIntersect1(r->top, &ctx, &rh);
    hits += rh.hit.geomID != RTC_INVALID_GEOMETRY_ID;
  }
  return hits;
}


// raw_trace8, raw_trace16: rtcIntersect8 / rtcIntersect16 over packets of W consecutive rays
// (coherent); return the hits. The last packet's lanes past the end repeat its first ray,
// inactive.
#define RAW_TRACE_PACKETS(W)                                                 \
  static size_t raw_trace##W(const raw_t* r, const rayset_t* s) {            \
    struct RTCIntersectContext ctx;                                          \
    rtcInitIntersectContext(&ctx);                                           \
    ctx.flags = RTC_INTERSECT_CONTEXT_FLAG_COHERENT;                         \
    size_t hits = 0;                                                         \
    for (size_t base = 0; base < s->n; base += W) {                          \
      _Alignas(4 * W) int valid[W];                                          \
      _Alignas(4 * W) struct RTCRayHit##W rh;                                \
      for (unsigned k = 0; k < W; k++) {                                     \
        size_t i = base + k < s->n ? base + k : base;                        \
        valid[k] = base + k < s->n ? -1 : 0;                                 \
        rh.ray.org_x[k] = s->org[3 * i];                                     \
        rh.ray.org_y[k] = s->org[3 * i + 1];                                 \
        rh.ray.org_z[k] = s->org[3 * i + 2];                                 \
        rh.ray.dir_x[k] = s->dir[3 * i];                                     \
        rh.ray.dir_y[k] = s->dir[3 * i + 1];                                 \
        rh.ray.dir_z[k] = s->dir[3 * i + 2];                                 \
        rh.ray.tnear[k] = SCENE_RAY_TNEAR;                                   \
        rh.ray.tfar[k] = 120.0f;                                             \
        rh.ray.time[k] = s->time[i];                                         \
        rh.ray.mask[k] = 0xFFFFFFFFu;                                        \
        rh.ray.flags[k] = 0;                                                 \
        rh.ray.id[k] = k;                                                    \
        rh.hit.geomID[k] = RTC_INVALID_GEOMETRY_ID;                          \
        rh.hit.instID[0][k] = RTC_INVALID_GEOMETRY_ID;                       \
      }                                                                      \
      rtcIntersect##W(valid, r->top, &ctx, &rh);                             \
      for (unsigned k = 0; k < W; k++) {                                     \
        hits += valid[k] && rh.hit.geomID[k] != RTC_INVALID_GEOMETRY_ID;     \
      }                                                                      \
    }                                                                        \
    return hits;                                                             \
  }

RAW_TRACE_PACKETS(8)
RAW_TRACE_PACKETS(16)


// The rays of s laid out once as rtcIntersect16 packets, each with its valid mask: the raw
// reference at its strongest, the packing left out of the timing. raw_trace16 fills each
// packet lane by lane from the ray arrays, and Embree's first wide load of a field then waits
// for the 16 narrow stores before it; here a pass only resets, whole-vector, the fields
// Embree writes (tfar and the hit's ids), as a caller tracing rays it keeps in packets would.
typedef struct packets16 {
  size_t n;                     // packets
  struct RTCRayHit16* rh;       // (n), 64-byte aligned
  int32_t (*valid)[16];         // (n)
} packets16_t;

static void packets16_of(const rayset_t* s, packets16_t* p) {
  p->n = (s->n + 15) / 16;
  p->rh = aligned_alloc(64, p->n * sizeof(*p->rh));
  p->valid = aligned_alloc(64, p->n * sizeof(*p->valid));
  if (!p->rh || !p->valid) {
    bench_die("out of memory");
  }
  memset(p->rh, 0, p->n * sizeof(*p->rh));
  for (size_t q = 0; q < p->n; q++) {
    struct RTCRay16* r = &p->rh[q].ray;
    for (unsigned k = 0; k < 16; k++) {
      size_t i = 16 * q + k < s->n ? 16 * q + k : 16 * q;
      p->valid[q][k] = 16 * q + k < s->n ? -1 : 0;
      r->org_x[k] = s->org[3 * i];
      r->org_y[k] = s->org[3 * i + 1];
      r->org_z[k] = s->org[3 * i + 2];
      r->dir_x[k] = s->dir[3 * i];
      r->dir_y[k] = s->dir[3 * i + 1];
      r->dir_z[k] = s->dir[3 * i + 2];
      r->time[k] = s->time[i];
      r->mask[k] = 0xFFFFFFFFu;
      r->id[k] = k;
    }
  }
}

static void packets16_close(packets16_t* p) {
  free(p->rh);
  free(p->valid);
}

static size_t raw_trace16_prepared(const raw_t* r, const packets16_t* p) {
  struct RTCIntersectContext ctx;
  rtcInitIntersectContext(&ctx);
  ctx.flags = RTC_INTERSECT_CONTEXT_FLAG_COHERENT;
  size_t hits = 0;
  for (size_t q = 0; q < p->n; q++) {
    struct RTCRayHit16* rh = &p->rh[q];
    for (unsigned k = 0; k < 16; k++) {   // whole-vector stores (the loops vectorise)
      rh->ray.tfar[k] = 120.0f;
    }
    for (unsigned k = 0; k < 16; k++) {
      rh->hit.geomID[k] = RTC_INVALID_GEOMETRY_ID;
    }
    for (unsigned k = 0; k < 16; k++) {
      rh->hit.instID[0][k] = RTC_INVALID_GEOMETRY_ID;
    }
    rtcIntersect16(p->valid[q], r->top, &ctx, rh);
    for (unsigned k = 0; k < 16; k++) {
      hits += p->valid[q][k] && rh->hit.geomID[k] != RTC_INVALID_GEOMETRY_ID;
    }
  }
  return hits;
}

// Seconds for one pass (packets: 1, 8 or 16 rays of s; or the packets laid out in `prep`
// when it is not NULL) with the tracing threads' MXCSR as Embree wants it.
static double raw_time(const raw_t* r, const rayset_t* s, const packets16_t* prep, int packets,
                       size_t* hits) {
  unsigned csr = _mm_getcsr();
  _MM_SET_FLUSH_ZERO_MODE(_MM_FLUSH_ZERO_ON);
  _MM_SET_DENORMALS_ZERO_MODE(_MM_DENORMALS_ZERO_ON);
  double t0 = now();
  if (prep) {
    *hits = raw_trace16_prepared(r, prep);
  } else {
    *hits = packets == 16 ? raw_trace16(r, s)
                          : (packets == 8 ? raw_trace8(r, s) : raw_trace1(r, s));
  }
  double t1 = now();
  _mm_setcsr(csr);
  return t1 - t0;
}

//---------------- The core's ray-tracing adapter alone (scene_trace), for the breakdown

// The OS1-128's rays through scene_trace on the scene the core builds for the step: in the
// lidar's own layout (SCENE_COLUMNS, packets of the 8 x 2 tiles, as lidar/returns.c hands them
// over, but without a horizon: every ray traced, as raw Embree traces them), like with like
// against raw rtcIntersect16 in the same tiles; and in rows of 8 in firing order (SCENE_ROWS'
// default group) against raw rtcIntersect8 in firing order.
typedef struct adapter {
  scene_device_t* dev;
  scene_t* s;
  scene_ray_t* rays;            // the ray set in firing order, in double
  scene_hit_t* hits;
  scene_packet_t* packets;      // the ray set in tiles, in double
  scene_packet_hits_t* packet_hits;
  size_t n;
} adapter_t;


static void adapter_build(adapter_t* a, const world_t* w, double t0, double t1,
                          const rayset_t* rs, const rayset_t* tiles) {
  err_msg_t msg = {0};
  a->dev = scene_device_create(&msg);
  a->s = a->dev ? scene_create(a->dev, &msg) : NULL;
  if (!a->s) {
    bench_die("scene_create: %s", msg.text);
  }
  int g[3];
  for (unsigned k = 0; k < 3; k++) {
    g[k] = scene_add_mesh(a->s, w->mesh[k].v, w->mesh[k].nv, w->mesh[k].idx, w->mesh[k].nt, &msg);
    check(g[k], &msg, "scene_add_mesh");
  }
  for (unsigned i = 0; i < NOBJ; i++) {
    const object_t* o = &w->obj[i];
    int h = scene_add_instance(a->s, g[o->geom], o->scale, i + 1, 0, &msg);
    check(h, &msg, "scene_add_instance");
    pose_t local = xform_identity();
    if (o->body) {
      pose_t b0 = xform_identity(), b1 = xform_identity();
      obj_at(o, t0, b0.p);
      obj_at(o, t1, b1.p);
      scene_set_instance_pose(a->s, h, &local, &b0, &b1);
    } else {
      memcpy(local.p, o->pos, sizeof o->pos);
      scene_set_instance_pose(a->s, h, &local, NULL, NULL);
    }
  }
  check(scene_commit(a->s, &msg), &msg, "scene_commit");
  a->n = rs->n;
  a->rays = bench_xmalloc(a->n * sizeof *a->rays);
  a->hits = bench_xmalloc(a->n * sizeof *a->hits);
  for (size_t i = 0; i < a->n; i++) {
    for (int k = 0; k < 3; k++) {
      a->rays[i].origin[k] = rs->org[3 * i + k];
      a->rays[i].dir[k] = rs->dir[3 * i + k];
    }
    a->rays[i].tmax = 120.0;
    a->rays[i].time = rs->time[i];
  }
  size_t np = (tiles->n + SCENE_PACKET - 1) / SCENE_PACKET;
  a->packets = bench_xmalloc(np * sizeof *a->packets);
  a->packet_hits = bench_xmalloc(np * sizeof *a->packet_hits);
  memset(a->packets, 0, np * sizeof *a->packets);
  for (size_t i = 0; i < tiles->n; i++) {
    scene_packet_t* p = &a->packets[i / SCENE_PACKET];
    size_t k = i % SCENE_PACKET;
    p->ox[k] = tiles->org[3 * i];
    p->oy[k] = tiles->org[3 * i + 1];
    p->oz[k] = tiles->org[3 * i + 2];
    p->dx[k] = tiles->dir[3 * i];
    p->dy[k] = tiles->dir[3 * i + 1];
    p->dz[k] = tiles->dir[3 * i + 2];
    p->tmax[k] = 120.0;
    p->time[k] = tiles->time[i];
  }
}


// Seconds for one pass in the lidar's tiles (SCENE_COLUMNS, 512 rays a call as the lidar's
// depth-1 returns trace them); hits: the rays that hit.
static double adapter_time_tiles(adapter_t* a, size_t* hits) {
  double t0 = now();
  for (size_t i = 0; i < a->n; i += 512) {
    size_t n = a->n - i < 512 ? a->n - i : 512;
    scene_trace(a->s, &(scene_batch_t){.layout = SCENE_COLUMNS, .n = n,
                                       .packets = a->packets + i / SCENE_PACKET,
                                       .packet_hits = a->packet_hits + i / SCENE_PACKET});
  }
  double t1 = now();
  *hits = 0;
  for (size_t i = 0; i < a->n; i++) {
    *hits += a->packet_hits[i / SCENE_PACKET].object_id[i % SCENE_PACKET] != 0;
  }
  return t1 - t0;
}


// Seconds for one pass in rows of 8 in firing order; hits: the rays that hit.
static double adapter_time_rows(adapter_t* a, size_t* hits) {
  double t0 = now();
  for (size_t i = 0; i < a->n; i += 256) {
    size_t n = a->n - i < 256 ? a->n - i : 256;
    scene_trace(a->s, &(scene_batch_t){.layout = SCENE_ROWS, .n = n, .rays = a->rays + i,
                                       .hits = a->hits + i});
  }
  double t1 = now();
  *hits = 0;
  for (size_t i = 0; i < a->n; i++) {
    *hits += a->hits[i].object_id != 0;
  }
  return t1 - t0;
}


static void adapter_close(adapter_t* a) {
  free(a->rays);
  free(a->hits);
  free(a->packets);
  free(a->packet_hits);
  scene_destroy(a->s);
  scene_device_destroy(a->dev);
}

//---------------- Main

enum {
  RAW1_VLP, RAW16_VLP, RAW1_OS1, RAW8_OS1, RAW16_OS1, RAW16_PLAIN_OS1, RAW16_TILES_OS1,
  RAW16_PREP_OS1,
  ADAPTER_OS1, ADAPTER_ROWS8_OS1, LIDAR_VLP, LIDAR_OS1,
  LIDAR_OS1_2L, LIDAR_OS1_VEHICLE, UPDATE, NCFG
};

int main(int argc, char** argv) {
  bench_init("bench_lidar", NULL);
  options_t o = {.quick = bench_has_arg(argc, argv, "--quick"), .threads = 1};
  o.grid = o.quick ? 100 : 230;
  o.repeats = o.quick ? 5 : 7;
  const bench_opt_t opts[] = {
      {"quick", BENCH_OPT_FLAG, NULL, 0, 0},
      {"grid", BENCH_OPT_COUNT, &o.grid, 10, 2000},
      {"repeats", BENCH_OPT_COUNT, &o.repeats, 5, 1000},
      {"threads", BENCH_OPT_COUNT, &o.threads, 1, 256},
      {"profile", BENCH_OPT_COUNT, &o.profile, 1, 100000},
      {"hash", BENCH_OPT_FLAG, NULL, 0, 0},
      {"update", BENCH_OPT_FLAG, NULL, 0, 0},
      {"raw", BENCH_OPT_FLAG, NULL, 0, 0},
      {"scene", BENCH_OPT_FLAG, NULL, 0, 0},
      {"rows", BENCH_OPT_FLAG, NULL, 0, 0},
  };
  int first = bench_parse_options(argc, argv, opts, sizeof opts / sizeof opts[0], g_usage);
  if (first < argc) {
    fprintf(stderr, "bench_lidar: unexpected argument '%s'\n%s", argv[first], g_usage);
    return 2;
  }

  if (o.threads > 1 && !(g_pool = pool_create(o.threads))) {
    bench_die("pool_create(%u) failed", o.threads);
  }
  if (o.threads > 1) {
    printf("lidar environments on %u workers (ratios then compare N workers with 1 raw)\n",
           o.threads);
  }

  // scene, sensor pose 1.8 m above the terrain
  static world_t w;
  make_world(&w, &o);
  pose_t sensor = xform_identity();
  sensor.p[0] = 0.31;
  sensor.p[1] = -0.17;
  sensor.p[2] = bench_terrain_height(0.31, -0.17) + 1.8;
  int raw_alone = bench_has_arg(argc, argv, "--raw");
  if (o.profile && (raw_alone || bench_has_arg(argc, argv, "--scene"))) {
    // --raw: the reference's tracing alone, as the timed loop runs it; --scene: scene_trace
    // alone on the same rays in the same tiles (the difference is the core's backend)
    lidar_pattern_t os1;
    err_msg_t msg = {0};
    lidar_ouster_desc_t od = {.channels = 128, .columns = 2048, .frequency = 10.0,
                              .elevation_max = NAN, .elevation_min = NAN};
    check(lidar_pattern_ouster_init(&os1, &od, "ouster", &msg), &msg, "ouster");
    rayset_t ro, rt;
    rays_of(&os1, &sensor, PERIOD, 2 * PERIOD, &ro);
    tiles_of(&ro, os1.nray, &rt);
    double sum = 0.0;
    size_t hits = 0;
    int rows = bench_has_arg(argc, argv, "--rows");
    if (raw_alone) {
      raw_t raw;
      raw_build(&raw, &w, PERIOD, 2 * PERIOD, 1);
      for (unsigned r = 0; r < o.profile; r++) {
        sum += rows ? raw_time(&raw, &ro, NULL, 8, &hits) : raw_time(&raw, &rt, NULL, 16, &hits);
      }
      raw_close(&raw);
    } else {
      adapter_t ad;
      adapter_build(&ad, &w, PERIOD, 2 * PERIOD, &ro, &rt);
      for (unsigned r = 0; r < o.profile; r++) {
        sum += rows ? adapter_time_rows(&ad, &hits) : adapter_time_tiles(&ad, &hits);
      }
      adapter_close(&ad);
    }
    printf("%s in %s: %u passes, %.3f ms each, %zu hits\n",
           raw_alone ? (rows ? "raw rtcIntersect8" : "raw rtcIntersect16") : "scene_trace",
           rows ? "rows of 8" : "tiles", o.profile, 1e3 * sum / o.profile, hits);
    rayset_t* sets[2] = {&ro, &rt};
    for (int k = 0; k < 2; k++) {
      free(sets[k]->org);
      free(sets[k]->dir);
      free(sets[k]->time);
    }
    lidar_pattern_close(&os1);
    return 0;
  }
  if (o.profile) {
    // --update: the state update and commit of the moving instances alone, no lidar
    int update = bench_has_arg(argc, argv, "--update");
    lidar_env_t le;
    env_open(&le, &w, update ? 0 : 2, 0, 0, &sensor);
    double sum = 0.0;
    struct timespec c0, c1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    for (unsigned r = 0; r < o.profile; r++) {
      sum += env_rev(&le, &w, update, NULL);
    }
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    double cpu = (double)(c1.tv_sec - c0.tv_sec) + 1e-9 * (double)(c1.tv_nsec - c0.tv_nsec);
    printf("%s: %u revolutions, %.3f ms each (%.3f ms of CPU time)\n",
           update ? "update and commit" : "OS1-128", o.profile,
           1e3 * sum / o.profile, 1e3 * cpu / o.profile);
    env_close(&le);

    // hashes of the clouds of two revolutions of each configuration: a change of the
    // pipeline's speed must not change them
    static const int cfg[][3] = {{2, 0, 0}, {1, 0, 0}, {2, 1, 0}, {2, 0, 1}, {2, 2, 0}, {1, 2, 1},
                                 {2, 3, 0}, {1, 3, 1}};
    int hash = bench_has_arg(argc, argv, "--hash");
    for (size_t c = 0; hash && c < sizeof cfg / sizeof cfg[0]; c++) {
      env_open(&le, &w, cfg[c][0], cfg[c][1], cfg[c][2], &sensor);
      uint64_t h = 0xcbf29ce484222325ull;
      for (int r = 0; r < 2; r++) {
        env_rev(&le, &w, 0, NULL);
        h = clouds_hash(&le, h);
      }
      printf("hash kind %d two_layer %d vehicle %d: %016llx\n", cfg[c][0], cfg[c][1], cfg[c][2],
             (unsigned long long)h);
      env_close(&le);
    }
    return 0;
  }
  uint64_t tris = w.mesh[0].nt + (uint64_t)NBOX * w.mesh[1].nt + (uint64_t)NSPHERE * w.mesh[2].nt;
  char b0[32], b1[32];
  printf("scene: %s triangles (terrain %s), %d boxes, %d spheres, %d moving\n",
         bench_count(tris, b0), bench_count(w.mesh[0].nt, b1), NBOX, NSPHERE, NMOVING);

  // the rays of the second revolution (0.1, 0.2], as the lidars trace them; the raw scene of
  // that step
  lidar_pattern_t vlp, os1;
  err_msg_t msg = {0};
  lidar_vlp16_desc_t vd = {.frequency = 10.0};
  lidar_ouster_desc_t od = {.channels = 128, .columns = 2048, .frequency = 10.0,
                            .elevation_max = NAN, .elevation_min = NAN};
  check(lidar_pattern_vlp16_init(&vlp, &vd, "vlp16", &msg), &msg, "vlp16");
  check(lidar_pattern_ouster_init(&os1, &od, "ouster", &msg), &msg, "ouster");
  rayset_t rv, ro, rt;
  rays_of(&vlp, &sensor, PERIOD, 2 * PERIOD, &rv);
  rays_of(&os1, &sensor, PERIOD, 2 * PERIOD, &ro);
  tiles_of(&ro, os1.nray, &rt);
  packets16_t pt;
  packets16_of(&rt, &pt);
  raw_t raw, plain;
  raw_build(&raw, &w, PERIOD, 2 * PERIOD, 1);
  raw_build(&plain, &w, PERIOD, 2 * PERIOD, 0);
  adapter_t ad;
  adapter_build(&ad, &w, PERIOD, 2 * PERIOD, &ro, &rt);
  printf("rays per revolution: VLP-16 %s, OS1-128 %s\n", bench_count(rv.n, b0),
         bench_count(ro.n, b1));

  // environments: one per configuration, so that each step times one lidar
  lidar_env_t ev, eo, e2, en, em;
  env_open(&ev, &w, 1, 0, 0, &sensor);
  env_open(&eo, &w, 2, 0, 0, &sensor);
  env_open(&e2, &w, 2, 1, 0, &sensor);
  env_open(&en, &w, 0, 0, 0, &sensor);
  env_open(&em, &w, 2, 0, 1, &sensor);

  // interleaved repetitions
  double* t[NCFG];
  for (int c = 0; c < NCFG; c++) {
    t[c] = bench_xmalloc(o.repeats * sizeof(double));
  }
  size_t hits_v = 0, hits_o = 0, h;
  uint64_t pts_v = 0, pts_o = 0, pts_2 = 0;
  for (unsigned r = 0; r < o.repeats; r++) {
    t[RAW1_VLP][r] = raw_time(&raw, &rv, NULL, 0, &hits_v);
    t[RAW16_VLP][r] = raw_time(&raw, &rv, NULL, 16, &h);
    if (h != hits_v) {
      bench_die("raw rtcIntersect16 hits %zu rays, rtcIntersect1 %zu", h, hits_v);
    }
    t[RAW1_OS1][r] = raw_time(&raw, &ro, NULL, 0, &hits_o);
    t[RAW16_OS1][r] = raw_time(&raw, &ro, NULL, 16, &h);
    if (h != hits_o) {
      bench_die("raw rtcIntersect16 hits %zu rays, rtcIntersect1 %zu", h, hits_o);
    }
    t[RAW16_TILES_OS1][r] = raw_time(&raw, &rt, NULL, 16, &h);
    if (h != hits_o) {
      bench_die("raw rtcIntersect16 (tiles) hits %zu rays, rtcIntersect1 %zu", h, hits_o);
    }
    t[RAW16_PREP_OS1][r] = raw_time(&raw, NULL, &pt, 16, &h);
    if (h != hits_o) {
      bench_die("raw rtcIntersect16 (prepared tiles) hits %zu rays, rtcIntersect1 %zu", h,
                hits_o);
    }
    t[RAW16_PLAIN_OS1][r] = raw_time(&plain, &rt, NULL, 16, &h);
    if (h != hits_o) {
      bench_die("raw rtcIntersect16 (Embree's defaults) hits %zu rays, rtcIntersect1 %zu", h,
                hits_o);
    }
    t[RAW8_OS1][r] = raw_time(&raw, &ro, NULL, 8, &h);
    if (h != hits_o) {
      bench_die("raw rtcIntersect8 hits %zu rays, rtcIntersect1 %zu", h, hits_o);
    }
    t[ADAPTER_OS1][r] = adapter_time_tiles(&ad, &h);
    if (h != hits_o) {
      bench_die("scene_trace (tiles) hits %zu rays, raw rtcIntersect1 %zu", h, hits_o);
    }
    t[ADAPTER_ROWS8_OS1][r] = adapter_time_rows(&ad, &h);
    if (h != hits_o) {
      bench_die("scene_trace (rows of 8) hits %zu rays, raw rtcIntersect1 %zu", h, hits_o);
    }
    t[LIDAR_VLP][r] = env_rev(&ev, &w, 0, &pts_v);
    t[LIDAR_OS1][r] = env_rev(&eo, &w, 0, &pts_o);
    t[LIDAR_OS1_2L][r] = env_rev(&e2, &w, 0, &pts_2);
    t[LIDAR_OS1_VEHICLE][r] = env_rev(&em, &w, 0, NULL);
    t[UPDATE][r] = env_rev(&en, &w, 1, NULL);
  }

  // cross-check: the lidar's points are the raw hits within a few per cent (the lidar steps
  // later revolutions, with its moving objects elsewhere; its range is an optical path length
  // in air, 120 m of it 119.97 m of geometry)
  if (fabs((double)pts_o - (double)hits_o) > 0.03 * (double)hits_o + 16) {
    bench_die("OS1-128: %llu points but raw Embree hits %zu rays",
              (unsigned long long)pts_o, hits_o);
  }
  printf("hits: VLP-16 raw %zu lidar %llu; OS1-128 raw %zu lidar %llu\n", hits_v,
         (unsigned long long)pts_v, hits_o, (unsigned long long)pts_o);

  // medians and ratios (rays per second of the lidar over those of raw Embree)
  double m[NCFG];
  for (int c = 0; c < NCFG; c++) {
    double* copy = bench_xmalloc(o.repeats * sizeof(double));
    memcpy(copy, t[c], o.repeats * sizeof(double));
    m[c] = bench_median(copy, o.repeats);
    free(copy);
  }
  double nv = (double)rv.n, no = (double)ro.n;
  printf("timed by %s\n", g_pool ? "wall clock" : "the process's CPU time");
  printf("rays/s (1 thread): raw1 VLP %.3g OS1 %.3g; raw16 VLP %.3g OS1 %.3g; lidar VLP %.3g "
         "OS1 %.3g, OS1 two-layer depth 3 %.3g\n",
         nv / m[RAW1_VLP], no / m[RAW1_OS1], nv / m[RAW16_VLP], no / m[RAW16_OS1],
         nv / m[LIDAR_VLP], no / m[LIDAR_OS1], no / m[LIDAR_OS1_2L]);
  printf("OS1-128 rays/s: raw8 %.3g; raw16 in the lidar's 8 x 2 tiles %.3g, from packets laid out "
         "once %.3g; the same on Embree's "
         "default scene setup (not robust, medium-quality top level: not the core's, not a "
         "candidate) %.3g; "
         "through scene_trace alone (the core's ray-tracing backend, every ray traced): in the "
         "lidar's tiles (SCENE_COLUMNS) %.3g, in rows of 8 in firing order %.3g\n",
         no / m[RAW8_OS1], no / m[RAW16_TILES_OS1], no / m[RAW16_PREP_OS1],
         no / m[RAW16_PLAIN_OS1], no / m[ADAPTER_OS1], no / m[ADAPTER_ROWS8_OS1]);
  // what still differs: the lidar does not trace the rays above the horizon of its step (the
  // scene proves them misses), raw Embree traces every ray
  env_info_t info, info_v;
  env_get_info(eo.e, &info);
  env_get_info(em.e, &info_v);
  uint64_t sent = info.scene.rays_traced + info.scene.rays_culled;
  uint64_t sent_v = info_v.scene.rays_traced + info_v.scene.rays_culled;
  printf("the OS1-128 lidar left %.1f %% of its rays untraced, above the horizon (misses: "
         "%.1f %% of the rays miss in all); on the vehicle %.1f %%\n",
         sent ? 100.0 * (double)info.scene.rays_culled / (double)sent : 0.0,
         100.0 * (1.0 - (double)hits_o / no),
         sent_v ? 100.0 * (double)info_v.scene.rays_culled / (double)sent_v : 0.0);
  // the reference of lidar_over_best_raw: the fastest raw configuration on the core's scene
  // setup (rtcIntersect1, rtcIntersect8 and rtcIntersect16 in firing order, rtcIntersect16 in
  // the lidar's tiles), and what still differs from the lidar's own tracing
  static const struct { int cfg; const char* name; } cand[] = {
      {RAW1_OS1, "rtcIntersect1"}, {RAW8_OS1, "rtcIntersect8 in firing order"},
      {RAW16_OS1, "rtcIntersect16 in firing order"},
      {RAW16_TILES_OS1, "rtcIntersect16 in the lidar's 8 x 2 tiles"},
      {RAW16_PREP_OS1, "rtcIntersect16 in the lidar's 8 x 2 tiles, packets prepared"}};
  size_t bi = 0;
  for (size_t i = 1; i < sizeof cand / sizeof cand[0]; i++) {
    bi = m[cand[i].cfg] < m[cand[bi].cfg] ? i : bi;
  }
  double best = m[cand[bi].cfg];
  char desc[256];
  scene_device_describe(ad.dev, desc, sizeof desc);
  printf("best raw configuration: %s, %.3g rays/s; both devices: %s; raw native 16-ray "
         "packets: %s\n", cand[bi].name, no / best, desc,
         rtcGetDeviceProperty(raw.dev, RTC_DEVICE_PROPERTY_NATIVE_RAY16_SUPPORTED) ? "yes" : "no");
  printf("what still differs: the lidar makes its rays (pattern, pose, noise draws) in double "
         "and each step, raw Embree traces prepared floats; it computes normals, materials, "
         "intensities, noise and packs points; it leaves rays above its step's horizon "
         "untraced; its moving objects are a revolution further on\n");
  printf("scene_trace alone in the tiles against raw rtcIntersect16 in the tiles: the same rays, "
         "scene setup, device ISA and hits; it adds the rays' conversion from double and their "
         "check, the coherence test, and the hits back in double (the instance, the world "
         "normal facing the ray)\n");
  printf("BENCH lidar_over_raw16 %.3f ratio\n", m[RAW16_OS1] / m[LIDAR_OS1]);
  printf("BENCH lidar_over_raw1 %.3f ratio\n", m[RAW1_OS1] / m[LIDAR_OS1]);
  printf("BENCH lidar_over_raw8 %.3f ratio\n", m[RAW8_OS1] / m[LIDAR_OS1]);
  printf("BENCH lidar_over_raw16_tiles %.3f ratio\n", m[RAW16_TILES_OS1] / m[LIDAR_OS1]);
  printf("BENCH lidar_over_best_raw %.3f ratio\n", best / m[LIDAR_OS1]);
  printf("BENCH lidar_vlp16_over_raw16 %.3f ratio\n", m[RAW16_VLP] / m[LIDAR_VLP]);
  printf("BENCH lidar_vlp16_over_raw1 %.3f ratio\n", m[RAW1_VLP] / m[LIDAR_VLP]);
  printf("BENCH lidar_on_vehicle_over_static %.3f ratio\n", m[LIDAR_OS1] / m[LIDAR_OS1_VEHICLE]);
  printf("BENCH lidar_two_layer_depth3_over_raw16 %.3f ratio\n", m[RAW16_OS1] / m[LIDAR_OS1_2L]);
  if (o.threads > 1) {
    printf("BENCH os1_128_realtime_factor_%u_workers %.2f sim_s_per_wall_s\n", o.threads,
           PERIOD / m[LIDAR_OS1]);
    printf("BENCH vlp16_realtime_factor_%u_workers %.2f sim_s_per_wall_s\n", o.threads,
           PERIOD / m[LIDAR_VLP]);
  } else {
    printf("BENCH os1_128_realtime_factor %.2f sim_s_per_cpu_s\n", PERIOD / m[LIDAR_OS1]);
    printf("BENCH vlp16_realtime_factor %.2f sim_s_per_cpu_s\n", PERIOD / m[LIDAR_VLP]);
  }
  printf("BENCH update_commit_over_scan %.4f ratio\n", m[UPDATE] / m[LIDAR_OS1]);
  printf("BENCH scene_trace_over_best_raw %.3f ratio\n", best / m[ADAPTER_OS1]);
  printf("BENCH scene_trace_tiles_over_raw16_tiles %.3f ratio\n",
         m[RAW16_TILES_OS1] / m[ADAPTER_OS1]);
  printf("BENCH scene_trace_rows8_over_raw8 %.3f ratio\n", m[RAW8_OS1] / m[ADAPTER_ROWS8_OS1]);
  printf("BENCH lidar_over_scene_trace %.3f ratio\n", m[ADAPTER_OS1] / m[LIDAR_OS1]);

  for (int c = 0; c < NCFG; c++) {
    free(t[c]);
  }
  env_close(&ev);
  env_close(&eo);
  env_close(&e2);
  env_close(&en);
  env_close(&em);
  raw_close(&raw);
  raw_close(&plain);
  packets16_close(&pt);
  adapter_close(&ad);
  rayset_t* sets[3] = {&rv, &ro, &rt};
  for (int k = 0; k < 3; k++) {
    free(sets[k]->org);
    free(sets[k]->dir);
    free(sets[k]->time);
  }
  lidar_pattern_close(&vlp);
  lidar_pattern_close(&os1);
  pool_destroy(g_pool);
  return 0;
}
