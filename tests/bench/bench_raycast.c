// SPDX-License-Identifier: MIT
// bench_raycast.c: env_raycast throughput against raw Embree on the same scene in this process.
//
// The scene (a terrain mesh, a field of bumpy blobs instanced several times, and analytic
// boxes, spheres and cylinders) is built twice from one description: through the core API
// (env_create_mesh / env_create_primitive / env_create_object) and directly with Embree, the
// reference built as the backend builds its own (the static meshes' triangles in world
// coordinates in one robust bottom-level scene under one identity instance, one robust
// bottom-level scene per primitive and a static instance of it per object with one time step of
// matrix transform, a robust low-quality dynamic top level, user geometries with their own exact
// intersectors for the primitives) on a device at the CPU's best ISA (printed). A spinning lidar pattern (channels x columns, several
// scans from different origins, column-major like a real sensor fires) is traced through the
// daemon's worker pool at 1 and 2 threads: with env_raycast in firing order and shuffled, and
// with raw Embree on the same rays in the same order: rtcIntersect8 and rtcIntersect16 on the
// same consecutive packets that the backend forms, rtcIntersect16 on tiles of 4 channels x 4
// azimuths (for information), rtcIntersect1 on the shuffled rays. The first round is untimed
// and cross-checked field by field (distance, normal, object, label); every ray where sensim
// and the reference differ is settled by a float64 brute force over every triangle and
// primitive, and a difference the brute force does not explain fails the run. The timed rounds
// are interleaved; medians, p99 and the paired ratios sensim / raw are printed, with BENCH lines
// (one thread). Exit status 1 when the cross-check fails.
#include <embree3/rtcore.h>
#include <math.h>
#include <pmmintrin.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xmmintrin.h>

#include "base/pool.h"
#include "bench_util.h"
#include "scene/scene.h"
#include "world/env.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "mesh bytes are handed over as the host's floats: little-endian hosts only"
#endif

#define MAX_GEOMS 64
#define MAX_OBJECTS 64
#define MAX_FIELDS 16
#define TERRAIN_SIZE 200.0   // m, side of the square terrain
#define SENSOR_HEIGHT 2.0    // m above the terrain
#define NTHREAD_CONFIGS 2    // the pool at 1 and 2 threads
#define RAY_GRAIN 1024       // rays per pool work item, as env_raycast uses
#define MISMATCH_LIMIT 1e-4  // largest tolerated fraction of rays that disagree

//---------------- Options

typedef struct options {
  int quick;
  unsigned grid;       // terrain cells per side (2 triangles per cell)
  unsigned blobs;      // blobs in the field mesh
  unsigned blob_res;   // stacks per blob; slices = 2 * stacks
  unsigned fields;     // instances of the blob field
  unsigned channels;   // lidar channels (elevations)
  unsigned columns;    // lidar columns (azimuths) per revolution
  unsigned scans;      // revolutions, each from its own origin
  unsigned repeats;    // timed repeats per configuration
  double max_range;    // m
  int ablate;          // also time raw single rays with each of the backend's choices alone
} options_t;

static const char* const g_usage =
    "Usage: bench_raycast [OPTIONS]\n"
    "Rays per second of env_raycast (worker pool at 1 and 2 threads) against raw Embree on\n"
    "the same scene and rays (rtcIntersect8/16 on the same packets, rtcIntersect1 on\n"
    "shuffled rays), in the same process, with a field-by-field cross-check.\n"
    "\n"
    "  --quick           small scene and batch (a few seconds)\n"
    "  --grid N          terrain cells per side (default 362: 262k triangles)\n"
    "  --blobs N         blobs in the instanced field mesh (default 32)\n"
    "  --blob-res N      stacks per blob, slices = 2N (default 24: 2304 triangles per blob)\n"
    "  --fields N        instances of the blob field (default 5, at most 16)\n"
    "  --channels N      lidar channels (default 128)\n"
    "  --columns N       lidar columns per revolution (default 2048)\n"
    "  --scans N         revolutions, each from its own origin (default 4)\n"
    "  --repeats N       timed repeats per configuration, >= 5 (default 7)\n"
    "  --max-range M     ray length in m (default 120)\n"
    "  --ablate          also time raw rtcIntersect1 (1 thread) with each of the backend's\n"
    "                    Embree choices alone: robust, quaternion, two time steps, low-quality\n"
    "                    top\n";


static void options_default(options_t* o, int quick) {
  o->quick = quick;
  o->grid = quick ? 120 : 362;
  o->blobs = quick ? 12 : 32;
  o->blob_res = quick ? 16 : 24;
  o->fields = quick ? 3 : 5;
  o->channels = quick ? 64 : 128;
  o->columns = quick ? 512 : 2048;
  o->scans = quick ? 1 : 4;
  o->repeats = quick ? 5 : 7;
  o->max_range = 120.0;
  o->ablate = 0;
}


static void parse_options(int argc, char** argv, options_t* o) {
  // --quick sets the defaults that the other options then override, wherever it appears
  options_default(o, bench_has_arg(argc, argv, "--quick"));
  const bench_opt_t opts[] = {
      {"quick", BENCH_OPT_FLAG, NULL, 0, 0},
      {"grid", BENCH_OPT_COUNT, &o->grid, 1, 2000},
      {"blobs", BENCH_OPT_COUNT, &o->blobs, 1, 100000},
      {"blob-res", BENCH_OPT_COUNT, &o->blob_res, 2, 512},
      {"fields", BENCH_OPT_COUNT, &o->fields, 0, MAX_FIELDS},
      {"channels", BENCH_OPT_COUNT, &o->channels, 1, 1024},
      {"columns", BENCH_OPT_COUNT, &o->columns, 1, 65536},
      {"scans", BENCH_OPT_COUNT, &o->scans, 1, 64},
      {"repeats", BENCH_OPT_COUNT, &o->repeats, 5, 1000},
      {"max-range", BENCH_OPT_POSITIVE, &o->max_range, 0, 0},
      {"ablate", BENCH_OPT_FLAG, &o->ablate, 0, 0},
  };
  int first = bench_parse_options(argc, argv, opts, sizeof opts / sizeof opts[0], g_usage);
  if (first < argc) {
    fprintf(stderr, "bench_raycast: unexpected argument '%s'\n%s", argv[first], g_usage);
    exit(2);
  }
  uint64_t nray = (uint64_t)o->channels * o->columns * o->scans;
  if (nray > (1u << 26)) {
    fprintf(stderr, "bench_raycast: %llu rays is too many (at most 2^26)\n",
            (unsigned long long)nray);
    exit(2);
  }
}

//---------------- Scene description

typedef struct mesh {
  float* v;          // 3 per vertex
  uint32_t nv;
  uint32_t* idx;     // 3 per triangle
  uint32_t nt;
} mesh_t;

typedef struct geom_def {
  uint32_t id;
  const mesh_t* mesh;         // NULL: analytic primitive
  scene_prim_kind_t kind;     // primitives: SCENE_PRIM_BOX, _SPHERE or _CYLINDER
  double size[3];
} geom_def_t;

typedef struct object_def {
  uint32_t id;
  unsigned geom;              // index into world_t.geoms
  pose_t pose;
  double scale[3];
} object_def_t;

typedef struct world {
  mesh_t terrain;
  mesh_t field;
  geom_def_t geoms[MAX_GEOMS];
  unsigned ngeom;
  object_def_t objects[MAX_OBJECTS];
  unsigned nobject;
  uint64_t instanced_triangles;
  unsigned nprim;
} world_t;


// Deterministic uniform numbers in [0, 1).
static double rnd(uint64_t* s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(*s >> 11) * 0x1.0p-53;
}


// Height field over the square of side TERRAIN_SIZE centred on the origin.
static void make_terrain(mesh_t* m, unsigned g) {
  m->nv = (g + 1) * (g + 1);
  m->nt = 2 * g * g;
  m->v = bench_xmalloc(3 * sizeof(float) * m->nv);
  m->idx = bench_xmalloc(3 * sizeof(uint32_t) * m->nt);
  bench_terrain(g, TERRAIN_SIZE, m->v, m->idx);
}


// Bumpy UV spheres scattered over a 36 m square, partly sunk below z = 0.
static void make_field(mesh_t* m, unsigned nblob, unsigned stacks) {
  unsigned slices = 2 * stacks;
  uint32_t vper = (stacks + 1) * slices, tper = 2 * stacks * slices;
  m->nv = nblob * vper;
  m->nt = nblob * tper;
  m->v = bench_xmalloc(3 * sizeof(float) * m->nv);
  m->idx = bench_xmalloc(3 * sizeof(uint32_t) * m->nt);
  uint64_t seed = 12345;
  float* v = m->v;
  uint32_t* t = m->idx;
  for (unsigned b = 0; b < nblob; b++) {
    double cx = -18.0 + 36.0 * rnd(&seed), cy = -18.0 + 36.0 * rnd(&seed);
    double r = 0.6 + 1.4 * rnd(&seed), cz = 0.5 * r;
    uint32_t base = b * vper;
    for (unsigned i = 0; i <= stacks; i++) {
      double th = M_PI * i / stacks;
      for (unsigned j = 0; j < slices; j++) {
        double ph = 2.0 * M_PI * j / slices;
        double rad = r * (1.0 + 0.08 * sin(5.0 * th) * sin(4.0 * ph));
        *v++ = (float)(cx + rad * sin(th) * cos(ph));
        *v++ = (float)(cy + rad * sin(th) * sin(ph));
        *v++ = (float)(cz + rad * cos(th));
      }
    }
    for (unsigned i = 0; i < stacks; i++) {
      for (unsigned j = 0; j < slices; j++) {
        uint32_t a = base + i * slices + j, bb = base + i * slices + (j + 1) % slices;
        uint32_t c = bb + slices, d = a + slices;
        *t++ = a, *t++ = d, *t++ = c;
        *t++ = a, *t++ = c, *t++ = bb;
      }
    }
  }
}


static pose_t pose_yaw(double x, double y, double z, double yaw) {
  pose_t p = {.p = {x, y, z}, .q = {cos(0.5 * yaw), 0.0, 0.0, sin(0.5 * yaw)}};
  return p;
}


static unsigned add_geom(world_t* w, const mesh_t* m, scene_prim_kind_t kind, double s0,
                         double s1, double s2) {
  geom_def_t* g = &w->geoms[w->ngeom];
  g->id = 1 + w->ngeom;
  g->mesh = m;
  g->kind = kind;
  g->size[0] = s0;
  g->size[1] = s1;
  g->size[2] = s2;
  return w->ngeom++;
}


static void add_object(world_t* w, unsigned geom, pose_t pose, double sx, double sy, double sz) {
  object_def_t* o = &w->objects[w->nobject];
  o->id = 100 + w->nobject;
  o->geom = geom;
  o->pose = pose;
  o->scale[0] = sx;
  o->scale[1] = sy;
  o->scale[2] = sz;
  w->nobject++;
  const mesh_t* m = w->geoms[geom].mesh;
  if (m) {
    w->instanced_triangles += m->nt;
  } else {
    w->nprim++;
  }
}


static void make_world(world_t* w, const options_t* o) {
  memset(w, 0, sizeof *w);
  make_terrain(&w->terrain, o->grid);
  make_field(&w->field, o->blobs, o->blob_res);
  unsigned gt = add_geom(w, &w->terrain, 0, 0, 0, 0);
  unsigned gf = add_geom(w, &w->field, 0, 0, 0, 0);
  add_object(w, gt, pose_yaw(0, 0, 0, 0), 1, 1, 1);

  // blob fields on a ring around the sensor path; one of them scaled non-uniformly
  for (unsigned k = 0; k < o->fields; k++) {
    double a = 2.0 * M_PI * k / (o->fields ? o->fields : 1) + 0.25;
    double x = 30.0 * cos(a), y = 30.0 * sin(a);
    double s = k == 1 ? 1.25 : 1.0;
    add_object(w, gf, pose_yaw(x, y, bench_terrain_height(x, y) - 0.3, 0.7 * k + 0.1), s, s,
               k == 1 ? 0.9 : 1.0);
  }

  // poles, cars and balls around the path: one geometry each (sizes differ)
  for (unsigned k = 0; k < 6; k++) {
    double a = 1.05 * k + 0.2, r = 9.0 + 3.0 * k;
    double x = r * cos(a), y = r * sin(a);
    unsigned g = add_geom(w, NULL, SCENE_PRIM_CYLINDER, 0.12 + 0.02 * k, 3.0, 0);
    add_object(w, g, pose_yaw(x, y, bench_terrain_height(x, y) + 3.0, 0), 1, 1, 1);
  }
  for (unsigned k = 0; k < 4; k++) {
    double a = 1.6 * k + 0.9, r = 12.0 + 2.5 * k;
    double x = r * cos(a), y = r * sin(a);
    unsigned g = add_geom(w, NULL, SCENE_PRIM_BOX, 2.2, 0.9 + 0.05 * k, 0.75);
    add_object(w, g, pose_yaw(x, y, bench_terrain_height(x, y) + 0.75, 0.8 * k + 0.3), 1, 1, 1);
  }
  for (unsigned k = 0; k < 3; k++) {
    double a = 2.1 * k + 2.4, r = 7.0 + 4.0 * k, rad = 0.6 + 0.2 * k;
    double x = r * cos(a), y = r * sin(a);
    unsigned g = add_geom(w, NULL, SCENE_PRIM_SPHERE, rad, 0, 0);
    add_object(w, g, pose_yaw(x, y, bench_terrain_height(x, y) + rad, 0), 1, 1, 1);
  }
}

//---------------- Rays

typedef struct rays {
  unsigned channels, columns, scans;
  size_t n;
  double* org_d;     // 3 per ray, as env_raycast takes them
  double* dir_d;     // 3 per ray, unit
  float* org;        // 3 per ray, as raw Embree code would keep them
  float* dir;
  float max_range;
} rays_t;


// Ray i = (scan * columns + column) * channels + channel: a spinning sensor fires every channel
// of a column at once. Elevations span -22.5..+22.5 degrees (an OS1-128-like fan).
static void make_rays(rays_t* r, const options_t* o) {
  r->channels = o->channels;
  r->columns = o->columns;
  r->scans = o->scans;
  r->n = (size_t)o->channels * o->columns * o->scans;
  r->org_d = bench_xmalloc(3 * sizeof(double) * r->n);
  r->dir_d = bench_xmalloc(3 * sizeof(double) * r->n);
  r->org = bench_xmalloc(3 * sizeof(float) * r->n);
  r->dir = bench_xmalloc(3 * sizeof(float) * r->n);
  r->max_range = (float)o->max_range;
  const double el_span = 45.0 * M_PI / 180.0;
  size_t i = 0;
  for (unsigned s = 0; s < o->scans; s++) {
    // off the terrain's grid lines: a ray running exactly along shared edges is the case that
    // only robust traversal (the backend's choice) reliably hits, which the reference lacks
    double ox = 0.37 + 4.0 * s, oy = 0.21 + 1.5 * s;
    double oz = bench_terrain_height(ox, oy) + SENSOR_HEIGHT;
    for (unsigned col = 0; col < o->columns; col++) {
      double az = 2.0 * M_PI * col / o->columns;
      for (unsigned ch = 0; ch < o->channels; ch++, i++) {
        double el = o->channels > 1 ? -0.5 * el_span + el_span * ch / (o->channels - 1) : 0.0;
        double d[3] = {cos(el) * cos(az), cos(el) * sin(az), sin(el)};
        double len = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
        double org[3] = {ox, oy, oz};
        for (int k = 0; k < 3; k++) {
          r->org_d[3 * i + k] = org[k];
          r->dir_d[3 * i + k] = d[k] / len;
          r->org[3 * i + k] = (float)org[k];
          r->dir[3 * i + k] = (float)(d[k] / len);
        }
      }
    }
  }
}

//---------------- Raw Embree: primitives as user geometries with their own intersectors

typedef struct ref_prim {
  scene_prim_kind_t kind;
  double size[3];
} ref_prim_t;


// Narrow [*t0, *t1] to the slab lo <= o + t d <= hi; false when it becomes empty.
static bool clip_slab(double o, double d, double lo, double hi, double* t0, double* t1) {
  if (d == 0.0) {
    return o >= lo && o <= hi;
  }
  double a = (lo - o) / d, b = (hi - o) / d;
  if (a > b) {
    double tmp = a;
    a = b;
    b = tmp;
  }
  *t0 = fmax(*t0, a);
  *t1 = fmin(*t1, b);
  return *t0 <= *t1;
}


// Narrow [*t0, *t1] to the roots' interval of a t^2 + 2 b t + c <= 0 (a > 0, or a = 0 with
// the inside given by c <= 0).
static bool clip_quadric(double a, double b, double c, double* t0, double* t1) {
  if (a == 0.0) {
    return c <= 0.0;
  }
  double disc = b * b - a * c;
  if (disc < 0.0) {
    return false;
  }
  double sq = sqrt(disc);
  *t0 = fmax(*t0, (-b - sq) / a);
  *t1 = fmin(*t1, (-b + sq) / a);
  return *t0 <= *t1;
}


// First surface point in [tmin, tmax]: the entry, or the exit from inside. Fills the outward
// local normal.
static bool ref_prim_hit(const ref_prim_t* p, const double o[3], const double d[3], double tmin,
                         double tmax, double* out_t, double n[3]) {
  double t0 = -INFINITY, t1 = INFINITY;
  const double* s = p->size;
  bool in = true;
  switch (p->kind) {
    case SCENE_PRIM_SPHERE:
      in = clip_quadric(d[0] * d[0] + d[1] * d[1] + d[2] * d[2],
                        o[0] * d[0] + o[1] * d[1] + o[2] * d[2],
                        o[0] * o[0] + o[1] * o[1] + o[2] * o[2] - s[0] * s[0], &t0, &t1);
      break;
    case SCENE_PRIM_BOX:
      for (int k = 0; k < 3 && in; k++) {
        in = clip_slab(o[k], d[k], -s[k], s[k], &t0, &t1);
      }
      break;
    case SCENE_PRIM_CYLINDER:
      in = clip_quadric(d[0] * d[0] + d[1] * d[1], o[0] * d[0] + o[1] * d[1],
                        o[0] * o[0] + o[1] * o[1] - s[0] * s[0], &t0, &t1) &&
           clip_slab(o[2], d[2], -s[1], s[1], &t0, &t1);
      break;
    default:
      in = false;
      break;
  }
  if (!in) {
    return false;
  }
  double t = t0 >= tmin && t0 <= tmax ? t0 : (t1 >= tmin && t1 <= tmax ? t1 : NAN);
  if (isnan(t)) {
    return false;
  }
  double q[3] = {o[0] + t * d[0], o[1] + t * d[1], o[2] + t * d[2]};
  n[0] = n[1] = n[2] = 0.0;
  if (p->kind == SCENE_PRIM_SPHERE) {
    memcpy(n, q, sizeof q);
  } else if (p->kind == SCENE_PRIM_BOX) {
    int k = 0;
    for (int a = 1; a < 3; a++) {
      if (fabs(q[a]) / s[a] > fabs(q[k]) / s[k]) {
        k = a;
      }
    }
    n[k] = q[k] < 0.0 ? -1.0 : 1.0;
  } else if (fabs(q[2]) / s[1] > sqrt(q[0] * q[0] + q[1] * q[1]) / s[0]) {
    n[2] = q[2] < 0.0 ? -1.0 : 1.0;
  } else {
    n[0] = q[0];
    n[1] = q[1];
  }
  *out_t = t;
  return true;
}


static void ref_bounds_cb(const struct RTCBoundsFunctionArguments* args) {
  const ref_prim_t* p = args->geometryUserPtr;
  double h[3] = {p->size[0], p->size[0], p->size[0]};
  if (p->kind == SCENE_PRIM_BOX) {
    memcpy(h, p->size, sizeof h);
  } else if (p->kind == SCENE_PRIM_CYLINDER) {
    h[2] = p->size[1];
  }
  double pad = 1e-6 * fmax(fmax(h[0], h[1]), h[2]);
  args->bounds_o->lower_x = (float)(-h[0] - pad);
  args->bounds_o->lower_y = (float)(-h[1] - pad);
  args->bounds_o->lower_z = (float)(-h[2] - pad);
  args->bounds_o->upper_x = (float)(h[0] + pad);
  args->bounds_o->upper_y = (float)(h[1] + pad);
  args->bounds_o->upper_z = (float)(h[2] + pad);
}


// RTCRayHitN of N lanes: 12 ray fields (org xyz, tnear, dir xyz, time, tfar, mask, id, flags)
// then the hit (Ng xyz, u, v, primID, geomID, instID).
static void ref_intersect_cb(const struct RTCIntersectFunctionNArguments* args) {
  const ref_prim_t* p = args->geometryUserPtr;
  unsigned N = args->N;
  float* ray = (float*)args->rayhit;
  float* hit = ray + 12 * N;
  unsigned* hit_u = (unsigned*)hit;
  for (unsigned i = 0; i < N; i++) {
    if (!args->valid[i]) {
      continue;
    }
    double o[3] = {ray[0 * N + i], ray[1 * N + i], ray[2 * N + i]};
    double d[3] = {ray[4 * N + i], ray[5 * N + i], ray[6 * N + i]};
    double t, n[3];
    if (!ref_prim_hit(p, o, d, ray[3 * N + i], ray[8 * N + i], &t, n)) {
      continue;
    }
    ray[8 * N + i] = (float)t;
    hit[0 * N + i] = (float)n[0];
    hit[1 * N + i] = (float)n[1];
    hit[2 * N + i] = (float)n[2];
    hit[3 * N + i] = 0.0f;
    hit[4 * N + i] = 0.0f;
    hit_u[5 * N + i] = args->primID;
    hit_u[6 * N + i] = args->geomID;
    hit_u[7 * N + i] = args->context->instID[0];
  }
}

//---------------- Raw Embree: scenes

// How a raw scene is built. 0: the reference, the plain way (default flags and build quality,
// one time step, matrix transforms, one instance per object). RAW_SCENE_C: the backend's
// configuration for objects on turning bodies (quaternion motion; a static instance gets one
// matrix, one that moves without turning two), to tell the cost of those choices from the
// adapter's own; the single flags are for --ablate.
enum {
  RAW_ROBUST = 1,      // RTC_SCENE_FLAG_ROBUST on the bottom and top levels
  RAW_QUAT = 2,        // quaternion-decomposition instance transforms (one time step)
  RAW_MOTION = 4,      // two time steps (same pose twice), rays at time 1; implies RAW_QUAT
  RAW_LOW_TOP = 8,     // dynamic, low-quality top level
  RAW_FLAT = 16,       // the mesh objects' triangles in world coordinates in one bottom-level
                       //   scene under one identity instance, as the backend traces static meshes
  RAW_SCENE_C = RAW_ROBUST | RAW_QUAT | RAW_MOTION | RAW_LOW_TOP | RAW_FLAT,
};

// A hit in the flat scene: its object's index with this bit (result_t.obj).
#define FLAT_BIT 0x80000000u

typedef struct raw_scene {
  RTCScene top;
  RTCScene blas[MAX_GEOMS];
  RTCScene flat;               // RAW_FLAT
  unsigned flat_id;            // the flat scene's instance ID, RTC_INVALID_GEOMETRY_ID: none
  ref_prim_t prims[MAX_GEOMS];
  int flags;
} raw_scene_t;


static void raw_check(RTCDevice dev, const char* what) {
  enum RTCError e = rtcGetDeviceError(dev);
  if (e != RTC_ERROR_NONE) {
    bench_die("embree error %d in %s", (int)e, what);
  }
}


static void raw_build(raw_scene_t* r, RTCDevice dev, const world_t* w, int flags) {
  memset(r, 0, sizeof *r);
  r->flags = flags;
  for (unsigned i = 0; i < w->ngeom; i++) {
    const geom_def_t* gd = &w->geoms[i];
    RTCGeometry g;
    if (gd->mesh) {
      g = rtcNewGeometry(dev, RTC_GEOMETRY_TYPE_TRIANGLE);
      float* vb = rtcSetNewGeometryBuffer(g, RTC_BUFFER_TYPE_VERTEX, 0, RTC_FORMAT_FLOAT3,
                                          3 * sizeof(float), gd->mesh->nv);
      uint32_t* ib = rtcSetNewGeometryBuffer(g, RTC_BUFFER_TYPE_INDEX, 0, RTC_FORMAT_UINT3,
                                             3 * sizeof(uint32_t), gd->mesh->nt);
      raw_check(dev, "geometry buffers");
      memcpy(vb, gd->mesh->v, 3 * sizeof(float) * gd->mesh->nv);
      memcpy(ib, gd->mesh->idx, 3 * sizeof(uint32_t) * gd->mesh->nt);
    } else {
      r->prims[i].kind = gd->kind;
      memcpy(r->prims[i].size, gd->size, sizeof gd->size);
      g = rtcNewGeometry(dev, RTC_GEOMETRY_TYPE_USER);
      rtcSetGeometryUserPrimitiveCount(g, 1);
      rtcSetGeometryUserData(g, &r->prims[i]);
      rtcSetGeometryBoundsFunction(g, ref_bounds_cb, NULL);
      rtcSetGeometryIntersectFunction(g, ref_intersect_cb);
    }
    rtcCommitGeometry(g);
    r->blas[i] = rtcNewScene(dev);
    if (flags & RAW_ROBUST) {
      rtcSetSceneFlags(r->blas[i], RTC_SCENE_FLAG_ROBUST);
    }
    rtcAttachGeometry(r->blas[i], g);
    rtcReleaseGeometry(g);
    rtcCommitScene(r->blas[i]);
    raw_check(dev, "bottom-level build");
  }

  r->top = rtcNewScene(dev);
  rtcSetSceneFlags(r->top, (flags & RAW_ROBUST ? RTC_SCENE_FLAG_ROBUST : 0) |
                               (flags & RAW_LOW_TOP ? RTC_SCENE_FLAG_DYNAMIC : 0));
  if (flags & RAW_LOW_TOP) {
    rtcSetSceneBuildQuality(r->top, RTC_BUILD_QUALITY_LOW);
  }
  r->flat_id = RTC_INVALID_GEOMETRY_ID;
  if (flags & RAW_FLAT) {
    r->flat = rtcNewScene(dev);
    if (flags & RAW_ROBUST) {
      rtcSetSceneFlags(r->flat, RTC_SCENE_FLAG_ROBUST);
    }
  }
  for (unsigned i = 0; i < w->nobject; i++) {
    const object_def_t* o = &w->objects[i];
    const mesh_t* mesh = w->geoms[o->geom].mesh;
    if ((flags & RAW_FLAT) && mesh) {
      // the backend's flat copy: R(q) S | p composed in double, each vertex rounded once
      double rm[9], m[12];
      xform_quat_to_mat(o->pose.q, rm);
      for (int k = 0; k < 9; k++) {
        m[4 * (k / 3) + k % 3] = rm[k] * o->scale[k % 3];
      }
      for (int a = 0; a < 3; a++) {
        m[4 * a + 3] = o->pose.p[a];
      }
      RTCGeometry g = rtcNewGeometry(dev, RTC_GEOMETRY_TYPE_TRIANGLE);
      float* vb = rtcSetNewGeometryBuffer(g, RTC_BUFFER_TYPE_VERTEX, 0, RTC_FORMAT_FLOAT3,
                                          3 * sizeof(float), mesh->nv);
      uint32_t* ib = rtcSetNewGeometryBuffer(g, RTC_BUFFER_TYPE_INDEX, 0, RTC_FORMAT_UINT3,
                                             3 * sizeof(uint32_t), mesh->nt);
      raw_check(dev, "flat buffers");
      for (size_t v = 0; v < mesh->nv; v++) {
        double x = mesh->v[3 * v], y = mesh->v[3 * v + 1], z = mesh->v[3 * v + 2];
        for (int a = 0; a < 3; a++) {
          vb[3 * v + a] =
              (float)(m[4 * a] * x + m[4 * a + 1] * y + m[4 * a + 2] * z + m[4 * a + 3]);
        }
      }
      memcpy(ib, mesh->idx, 3 * sizeof(uint32_t) * mesh->nt);
      rtcCommitGeometry(g);
      rtcAttachGeometryByID(r->flat, g, i);
      rtcReleaseGeometry(g);
      continue;
    }
    RTCGeometry g = rtcNewGeometry(dev, RTC_GEOMETRY_TYPE_INSTANCE);
    rtcSetGeometryInstancedScene(g, r->blas[o->geom]);
    const double* q = o->pose.q;  // (w, x, y, z), unit
    if (flags & (RAW_QUAT | RAW_MOTION)) {
      unsigned nstep = flags & RAW_MOTION ? 2 : 1;
      rtcSetGeometryTimeStepCount(g, nstep);
      for (unsigned k = 0; k < nstep; k++) {
        struct RTCQuaternionDecomposition qd;
        rtcInitQuaternionDecomposition(&qd);
        rtcQuaternionDecompositionSetScale(&qd, (float)o->scale[0], (float)o->scale[1],
                                           (float)o->scale[2]);
        rtcQuaternionDecompositionSetQuaternion(&qd, (float)q[0], (float)q[1], (float)q[2],
                                                (float)q[3]);
        rtcQuaternionDecompositionSetTranslation(&qd, (float)o->pose.p[0], (float)o->pose.p[1],
                                                 (float)o->pose.p[2]);
        rtcSetGeometryTransformQuaternion(g, k, &qd);
      }
    } else {
      // column-major 3x4: R(q) diag(scale) | p
      double qw = q[0], qx = q[1], qy = q[2], qz = q[3];
      double rm[3][3] = {
          {1 - 2 * (qy * qy + qz * qz), 2 * (qx * qy - qw * qz), 2 * (qx * qz + qw * qy)},
          {2 * (qx * qy + qw * qz), 1 - 2 * (qx * qx + qz * qz), 2 * (qy * qz - qw * qx)},
          {2 * (qx * qz - qw * qy), 2 * (qy * qz + qw * qx), 1 - 2 * (qx * qx + qy * qy)},
      };
      float m[12];
      for (int c = 0; c < 3; c++) {
        for (int row = 0; row < 3; row++) {
          m[3 * c + row] = (float)(rm[row][c] * o->scale[c]);
        }
      }
      for (int row = 0; row < 3; row++) {
        m[9 + row] = (float)o->pose.p[row];
      }
      rtcSetGeometryTransform(g, 0, RTC_FORMAT_FLOAT3X4_COLUMN_MAJOR, m);
    }
    rtcCommitGeometry(g);
    rtcAttachGeometryByID(r->top, g, i);
    rtcReleaseGeometry(g);
  }
  if (r->flat) {
    static const float id[12] = {1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0};
    rtcCommitScene(r->flat);
    RTCGeometry g = rtcNewGeometry(dev, RTC_GEOMETRY_TYPE_INSTANCE);
    rtcSetGeometryInstancedScene(g, r->flat);
    rtcSetGeometryTransform(g, 0, RTC_FORMAT_FLOAT3X4_COLUMN_MAJOR, id);
    rtcCommitGeometry(g);
    r->flat_id = w->nobject;
    rtcAttachGeometryByID(r->top, g, r->flat_id);
    rtcReleaseGeometry(g);
  }
  rtcCommitScene(r->top);
  raw_check(dev, "top-level build");
}


static void raw_release(raw_scene_t* r, const world_t* w) {
  rtcReleaseScene(r->top);
  if (r->flat) {
    rtcReleaseScene(r->flat);
  }
  for (unsigned i = 0; i < w->ngeom; i++) {
    rtcReleaseScene(r->blas[i]);
  }
}

//---------------- Tracing

// Output of one configuration, per ray: distance (INFINITY on a miss), Embree's geometric
// normal (object space of the instance hit; world space in the flat scene) and the object
// index (with FLAT_BIT for a hit in the flat scene).
typedef struct result {
  float* dist;
  float* ng;         // 3 per ray
  uint32_t* obj;     // index into world_t.objects, UINT32_MAX on a miss
} result_t;

typedef struct raw_job {
  const raw_scene_t* scene;
  const rays_t* rays;
  result_t* out;
  unsigned width;    // rays per packet: 1, 8 or 16 consecutive rays; 0: 4 x 4 tiles
} raw_job_t;


// Start of a pool chunk: flush-to-zero and denormals-are-zero on this worker, a fresh intersect
// context. Returns the MXCSR to restore at the end.
static unsigned raw_chunk_begin(struct RTCIntersectContext* c) {
  unsigned csr = _mm_getcsr();
  _MM_SET_FLUSH_ZERO_MODE(_MM_FLUSH_ZERO_ON);
  _MM_SET_DENORMALS_ZERO_MODE(_MM_DENORMALS_ZERO_ON);
  rtcInitIntersectContext(c);
  return csr;
}


// Ray i's result from Embree's hit fields.
static void raw_store(const raw_scene_t* s, result_t* out, size_t i, unsigned geom_id,
                      float tfar, unsigned inst_id, float nx, float ny, float nz) {
  bool hit = geom_id != RTC_INVALID_GEOMETRY_ID;
  out->dist[i] = hit ? tfar : INFINITY;
  out->obj[i] = !hit ? UINT32_MAX : inst_id == s->flat_id ? geom_id | FLAT_BIT : inst_id;
  out->ng[3 * i + 0] = nx;
  out->ng[3 * i + 1] = ny;
  out->ng[3 * i + 2] = nz;
}


// pool_fn_t: rays [begin, end) one at a time with rtcIntersect1.
static void raw_single_chunk(void* ctx, size_t begin, size_t end) {
  const raw_job_t* job = ctx;
  const rays_t* r = job->rays;
  struct RTCIntersectContext c;
  unsigned csr = raw_chunk_begin(&c);
  float time = job->scene->flags & RAW_MOTION ? 1.0f : 0.0f;
  for (size_t i = begin; i < end; i++) {
    struct RTCRayHit rh;
    rh.ray.org_x = r->org[3 * i + 0];
    rh.ray.org_y = r->org[3 * i + 1];
    rh.ray.org_z = r->org[3 * i + 2];
    rh.ray.tnear = SCENE_RAY_TNEAR;
    rh.ray.dir_x = r->dir[3 * i + 0];
    rh.ray.dir_y = r->dir[3 * i + 1];
    rh.ray.dir_z = r->dir[3 * i + 2];
    rh.ray.time = time;
    rh.ray.tfar = r->max_range;
    rh.ray.mask = 0xFFFFFFFFu;
    rh.ray.id = 0;
    rh.ray.flags = 0;
    rh.hit.geomID = RTC_INVALID_GEOMETRY_ID;
    rh.hit.instID[0] = RTC_INVALID_GEOMETRY_ID;
    rtcIntersect1(job->scene->top, &c, &rh);
    raw_store(job->scene, job->out, i, rh.hit.geomID, rh.ray.tfar, rh.hit.instID[0], rh.hit.Ng_x,
              rh.hit.Ng_y, rh.hit.Ng_z);
  }
  _mm_setcsr(csr);
}


// A packet of W <= 16 lanes in Embree's RTCRayHitW layout: 20 fields of W lanes (org xyz,
// tnear, dir xyz, time, tfar, mask, id, flags; Ng xyz, u, v, primID, geomID, instID).
enum { P_TFAR = 8, P_MASK = 9, P_NG = 12, P_GEOM = 18, P_INST = 19, P_FIELDS = 20 };
typedef union raw_packet {
  struct RTCRayHit16 rh16;
  float f[P_FIELDS * 16];
  unsigned u[P_FIELDS * 16];
} raw_packet_t;


// Trace the W rays idx[0..W) (valid[k] set for real lanes) as one packet of width W.
static void raw_trace_packet(const raw_job_t* job, struct RTCIntersectContext* c, unsigned W,
                             const size_t* idx, int* valid) {
  const rays_t* r = job->rays;
  float time = job->scene->flags & RAW_MOTION ? 1.0f : 0.0f;
  _Alignas(64) raw_packet_t pk;
  for (unsigned k = 0; k < W; k++) {
    size_t i = idx[k];
    for (int a = 0; a < 3; a++) {
      pk.f[a * W + k] = r->org[3 * i + a];
      pk.f[(4 + a) * W + k] = r->dir[3 * i + a];
    }
    pk.f[3 * W + k] = 0.0f;
    pk.f[7 * W + k] = time;
    pk.f[P_TFAR * W + k] = r->max_range;
    pk.u[P_MASK * W + k] = 0xFFFFFFFFu;
    pk.u[10 * W + k] = k;
    pk.u[11 * W + k] = 0;
    pk.u[P_GEOM * W + k] = RTC_INVALID_GEOMETRY_ID;
    pk.u[P_INST * W + k] = RTC_INVALID_GEOMETRY_ID;
  }
  if (W == 16) {
    rtcIntersect16(valid, job->scene->top, c, &pk.rh16);
  } else {
    rtcIntersect8(valid, job->scene->top, c, (struct RTCRayHit8*)pk.f);
  }
  for (unsigned k = 0; k < W; k++) {
    if (valid[k]) {
      raw_store(job->scene, job->out, idx[k], pk.u[P_GEOM * W + k], pk.f[P_TFAR * W + k],
                pk.u[P_INST * W + k], pk.f[P_NG * W + k], pk.f[(P_NG + 1) * W + k],
                pk.f[(P_NG + 2) * W + k]);
    }
  }
}


// pool_fn_t: packets [begin, end) of `width` consecutive rays, as the backend forms them.
static void raw_packet_chunk(void* ctx, size_t begin, size_t end) {
  const raw_job_t* job = ctx;
  struct RTCIntersectContext c;
  unsigned csr = raw_chunk_begin(&c);
  c.flags = RTC_INTERSECT_CONTEXT_FLAG_COHERENT;
  unsigned W = job->width;
  size_t n = job->rays->n;
  for (size_t p = begin; p < end; p++) {
    _Alignas(64) int valid[16];
    size_t idx[16];
    for (unsigned k = 0; k < W; k++) {
      size_t i = p * W + k;
      valid[k] = i < n ? -1 : 0;
      idx[k] = i < n ? i : p * W;
    }
    raw_trace_packet(job, &c, W, idx, valid);
  }
  _mm_setcsr(csr);
}


// pool_fn_t: 16-ray tiles [begin, end) of 4 channels x 4 azimuths (coherent order only).
static void raw_tile_chunk(void* ctx, size_t begin, size_t end) {
  const raw_job_t* job = ctx;
  const rays_t* r = job->rays;
  struct RTCIntersectContext c;
  unsigned csr = raw_chunk_begin(&c);
  c.flags = RTC_INTERSECT_CONTEXT_FLAG_COHERENT;
  size_t cb = (r->channels + 3) / 4, ab = (r->columns + 3) / 4, per_scan = cb * ab;
  for (size_t tile = begin; tile < end; tile++) {
    size_t scan = tile / per_scan, rem = tile % per_scan;
    size_t col0 = 4 * (rem / cb), ch0 = 4 * (rem % cb);
    _Alignas(64) int valid[16];
    size_t idx[16];
    size_t first = (scan * r->columns + col0) * r->channels + ch0;
    for (unsigned k = 0; k < 16; k++) {
      size_t ch = ch0 + (k & 3), col = col0 + (k >> 2);
      bool ok = ch < r->channels && col < r->columns;
      idx[k] = ok ? (scan * r->columns + col) * r->channels + ch : first;
      valid[k] = ok ? -1 : 0;
    }
    raw_trace_packet(job, &c, 16, idx, valid);
  }
  _mm_setcsr(csr);
}


static double time_raw(pool_t* pool, const raw_scene_t* s, const rays_t* r, result_t* out,
                       unsigned width) {
  raw_job_t job = {.scene = s, .rays = r, .out = out, .width = width};
  double t0 = bench_now();
  if (width == 0) {
    size_t ntile = (size_t)r->scans * ((r->channels + 3) / 4) * ((r->columns + 3) / 4);
    pool_parallel_for(pool, ntile, RAY_GRAIN / 16, raw_tile_chunk, &job);
  } else if (width == 1) {
    pool_parallel_for(pool, r->n, RAY_GRAIN, raw_single_chunk, &job);
  } else {
    pool_parallel_for(pool, (r->n + width - 1) / width, RAY_GRAIN / width, raw_packet_chunk,
                      &job);
  }
  return bench_now() - t0;
}


// env_raycast as the daemon runs a Raycast request in the bytes form: the request's double
// arrays in, the reply's hit records (the core's hit layout, reserved bytes zero) out.
static double time_sensim(env_t* e, const rays_t* r, scene_hit_t* hits) {
  env_raycast_t rc = {
      .nray = (uint32_t)r->n,
      .origins = r->org_d,
      .directions = r->dir_d,
      .max_range = r->max_range,
      .hit_records = 1,
  };
  err_msg_t msg;
  double t0 = bench_now();
  int rc_code = env_raycast(e, &rc, hits, &msg);
  double dt = bench_now() - t0;
  if (rc_code) {
    bench_die("env_raycast failed: %s", msg.text);
  }
  return dt;
}

//---------------- Truth: a float64 brute force

// Two answers agree on a ray: both miss, or both hit at the same distance (1e-4 m + 1e-5
// relative: float rounding of the instance transform) with the same normal (1e-4), object and
// label. Coincident surfaces (two objects at one distance) may report either object.
#define DIST_TOL(d) (1e-4 + 1e-5 * (d))
#define NORMAL_TOL 1e-4

typedef struct truth_hit {
  double dist;       // m
  unsigned obj;      // object index
  double normal[3];  // world, unit, facing against the ray
} truth_hit_t;


// Ray/triangle in double (Moller-Trumbore); edges and vertices count as inside, so a ray
// through a shared edge hits both triangles; eps > 0 widens the triangle by that much in
// barycentric coordinates.
static bool tri_hit(const double o[3], const double d[3], const float* a, const float* b,
                    const float* c, double tmax, double eps, double* t, double n[3]) {
  double e1[3], e2[3], pv[3], tv[3], qv[3];
  for (int k = 0; k < 3; k++) {
    e1[k] = (double)b[k] - a[k];
    e2[k] = (double)c[k] - a[k];
    tv[k] = o[k] - a[k];
  }
  pv[0] = d[1] * e2[2] - d[2] * e2[1];
  pv[1] = d[2] * e2[0] - d[0] * e2[2];
  pv[2] = d[0] * e2[1] - d[1] * e2[0];
  double det = e1[0] * pv[0] + e1[1] * pv[1] + e1[2] * pv[2];
  if (det == 0.0) {
    return false;
  }
  double u = (tv[0] * pv[0] + tv[1] * pv[1] + tv[2] * pv[2]) / det;
  if (u < -eps || u > 1.0 + eps) {
    return false;
  }
  qv[0] = tv[1] * e1[2] - tv[2] * e1[1];
  qv[1] = tv[2] * e1[0] - tv[0] * e1[2];
  qv[2] = tv[0] * e1[1] - tv[1] * e1[0];
  double v = (d[0] * qv[0] + d[1] * qv[1] + d[2] * qv[2]) / det;
  if (v < -eps || u + v > 1.0 + eps) {
    return false;
  }
  double tt = (e2[0] * qv[0] + e2[1] * qv[1] + e2[2] * qv[2]) / det;
  if (!(tt >= 0.0 && tt <= tmax)) {
    return false;
  }
  *t = tt;
  n[0] = e1[1] * e2[2] - e1[2] * e2[1];
  n[1] = e1[2] * e2[0] - e1[0] * e2[2];
  n[2] = e1[0] * e2[1] - e1[1] * e2[0];
  return true;
}


// World normal of an object-space normal: R(q) S^-1 n, unit, facing against d.
static void world_normal(const object_def_t* o, const double nobj[3], bool flat,
                         const double d[3], double out[3]) {
  double ns[3] = {nobj[0] / o->scale[0], nobj[1] / o->scale[1], nobj[2] / o->scale[2]};
  if (flat) {
    memcpy(out, nobj, sizeof ns);   // already in the world
  } else {
    xform_quat_rotate(o->pose.q, ns, out);
  }
  double len = xform_norm(out, 3);
  double facing = out[0] * d[0] + out[1] * d[1] + out[2] * d[2];
  double f = len > 0.0 ? (facing > 0.0 ? -1.0 : 1.0) / len : 0.0;
  for (int k = 0; k < 3; k++) {
    out[k] *= f;
  }
}


#define MAX_CANDIDATES 8
// Barycentric slack of the triangles that may share the first surface point: the traced ray is
// the float one, moved from the double ray by about 1e-7 of the 30-120 m involved, which at
// grazing incidence (80 degrees and more, as on a rolling terrain) slides the hit point by up to
// about 1e-4 m along the surface: 1e-3 of these 0.1 m triangles.
#define EDGE_EPS 1e-3

typedef struct truth {
  truth_hit_t hit[MAX_CANDIDATES];  // hit[0]: the nearest surface; then every other surface
                                     // within DIST_TOL of it (triangles sharing the edge or
                                     // vertex the ray passes through, coincident objects)
  int n;
} truth_t;


// The surfaces on ray i (its float origin and direction, as traced), every triangle and
// primitive of every object tried in double precision: with cutoff = INFINITY the nearest one
// (in hit[0]); with a finite cutoff every one with t in [cutoff - tol, cutoff + tol], triangles
// widened by EDGE_EPS.
static void brute_force_pass(const world_t* w, const rays_t* r, size_t i, double cutoff,
                             truth_t* out) {
  double o[3] = {r->org[3 * i], r->org[3 * i + 1], r->org[3 * i + 2]};
  double d[3] = {r->dir[3 * i], r->dir[3 * i + 1], r->dir[3 * i + 2]};
  bool nearest = isinf(cutoff);
  double tol = nearest ? 0.0 : DIST_TOL(cutoff);
  for (unsigned k = 0; k < w->nobject; k++) {
    const object_def_t* ob = &w->objects[k];
    const geom_def_t* g = &w->geoms[ob->geom];

    // the ray in the object frame: S^-1 R^T (x - p); t keeps the world parametrisation
    double qi[4], ol[3], dl[3], rel[3] = {o[0] - ob->pose.p[0], o[1] - ob->pose.p[1],
                                          o[2] - ob->pose.p[2]};
    xform_quat_conj(ob->pose.q, qi);
    xform_quat_rotate(qi, rel, ol);
    xform_quat_rotate(qi, d, dl);
    for (int a = 0; a < 3; a++) {
      ol[a] /= ob->scale[a];
      dl[a] /= ob->scale[a];
    }
    double tmax = nearest ? fmin(out->n ? out->hit[0].dist : INFINITY, r->max_range)
                          : cutoff + tol;
    double t, n[3];
    unsigned ntri = g->mesh ? g->mesh->nt : 1;
    for (uint32_t tri = 0; tri < ntri; tri++) {
      bool hit;
      if (g->mesh) {
        const uint32_t* ix = g->mesh->idx + 3 * tri;
        const float* v = g->mesh->v;
        hit = tri_hit(ol, dl, v + 3 * ix[0], v + 3 * ix[1], v + 3 * ix[2], tmax,
                      nearest ? 0.0 : EDGE_EPS, &t, n);
      } else {
        ref_prim_t p = {.kind = g->kind};
        memcpy(p.size, g->size, sizeof p.size);
        hit = ref_prim_hit(&p, ol, dl, 0.0, tmax, &t, n);
      }
      if (!hit || (!nearest && t < cutoff - tol)) {
        continue;
      }
      truth_hit_t th = {t, k, {0, 0, 0}};
      world_normal(ob, n, false, d, th.normal);
      if (nearest) {
        tmax = t;
        out->hit[0] = th;
        out->n = 1;
      } else if (out->n < MAX_CANDIDATES) {
        out->hit[out->n++] = th;
      }
    }
  }
}


static truth_t brute_force(const world_t* w, const rays_t* r, size_t i) {
  truth_t t = {.n = 0};
  brute_force_pass(w, r, i, INFINITY, &t);
  if (t.n > 0) {
    brute_force_pass(w, r, i, t.hit[0].dist, &t);
  }
  return t;
}

//---------------- Cross-check

typedef struct answer {
  double dist;
  double normal[3];
  uint32_t object_id;   // 0 on a miss
  uint32_t label;
} answer_t;


static answer_t answer_sensim(const scene_hit_t* h) {
  answer_t a = {h->distance, {h->normal[0], h->normal[1], h->normal[2]}, h->object_id,
                h->label};
  return a;
}


static answer_t answer_raw(const world_t* w, const rays_t* r, const result_t* res, size_t i) {
  answer_t a = {INFINITY, {0, 0, 0}, 0, 0};
  uint32_t k = res->obj[i] & ~FLAT_BIT;
  if (isfinite(res->dist[i]) && k < w->nobject) {
    const object_def_t* ob = &w->objects[k];
    double ng[3] = {res->ng[3 * i], res->ng[3 * i + 1], res->ng[3 * i + 2]};
    a.dist = res->dist[i];
    world_normal(ob, ng, res->obj[i] & FLAT_BIT, r->dir_d + 3 * i, a.normal);
    a.object_id = ob->id;
    a.label = 1 + ob->geom;
  }
  return a;
}


static answer_t answer_truth(const world_t* w, const truth_hit_t* t) {
  answer_t a = {t->dist, {t->normal[0], t->normal[1], t->normal[2]}, w->objects[t->obj].id,
                1 + w->objects[t->obj].geom};
  return a;
}


// 0: the answers agree; 1: same surface distance, another object (coincident surfaces);
// 2: they differ.
static int compare(const answer_t* a, const answer_t* b) {
  bool ha = isfinite(a->dist), hb = isfinite(b->dist);
  if (!ha || !hb) {
    return ha == hb ? 0 : 2;
  }
  if (fabs(a->dist - b->dist) > DIST_TOL(a->dist)) {
    return 2;
  }
  if (a->object_id != b->object_id) {
    return 1;
  }
  for (int k = 0; k < 3; k++) {
    if (fabs(a->normal[k] - b->normal[k]) > NORMAL_TOL) {
      return 2;
    }
  }
  return a->label == b->label ? 0 : 2;
}

#define MAX_ARBITRATED 4000   // mismatches settled by the brute force; the rest count as wrong

typedef struct check {
  uint64_t hits;            // sensim
  uint64_t mismatches;      // rays where sensim and the reference differ
  uint64_t coincident;      // same distance, other object
  uint64_t sensim_right;    // mismatches where the brute force agrees with sensim
  uint64_t unexplained;     // mismatches where it does not (or not arbitrated)
  size_t first_bad;         // first unexplained ray, SIZE_MAX if none
  answer_t bad_s, bad_r, bad_t;
} check_t;


// Compare every field of every ray; settle each difference with the float64 brute force.
static void cross_check(const world_t* w, const rays_t* r, const scene_hit_t* hits,
                        const result_t* raw, check_t* c) {
  memset(c, 0, sizeof *c);
  c->first_bad = SIZE_MAX;
  for (size_t i = 0; i < r->n; i++) {
    answer_t as = answer_sensim(&hits[i]), ar = answer_raw(w, r, raw, i);
    c->hits += isfinite(as.dist);
    int cmp = compare(&as, &ar);
    c->coincident += cmp == 1;
    if (cmp < 2) {
      continue;
    }
    c->mismatches++;
    bool ok = false;
    answer_t at = {INFINITY, {0, 0, 0}, 0, 0};
    if (c->mismatches <= MAX_ARBITRATED) {
      // sensim is right when it reports one of the surfaces the ray meets first (at an edge
      // shared by two triangles, either)
      truth_t t = brute_force(w, r, i);
      ok = t.n == 0 && !isfinite(as.dist);
      for (int k = 0; k < t.n && !ok; k++) {
        answer_t cand = answer_truth(w, &t.hit[k]);
        ok = compare(&as, &cand) == 0;
      }
      if (t.n > 0) {
        at = answer_truth(w, &t.hit[0]);
      }
    }
    if (ok) {
      c->sensim_right++;
    } else {
      c->unexplained++;
      if (c->first_bad == SIZE_MAX) {
        c->first_bad = i;
        c->bad_s = as;
        c->bad_r = ar;
        c->bad_t = at;
      }
    }
  }
}


static void print_answer(const char* who, const answer_t* a) {
  printf("    %-7s %.6f m object %u label %u normal (%.6f %.6f %.6f)\n", who, a->dist,
         a->object_id, a->label, a->normal[0], a->normal[1], a->normal[2]);
}


static bool report_check(const char* name, const rays_t* r, const check_t* c) {
  char a[32], n[32];
  bool ok = c->unexplained == 0 && c->hits > 0;
  printf("check sensim vs %-18s %s rays, %s hits: mismatches %llu, of which sensim right "
         "(float64 brute force) %llu, unexplained %llu; coincident surfaces %llu: %s\n",
         name, bench_count(r->n, n), bench_count(c->hits, a),
         (unsigned long long)c->mismatches, (unsigned long long)c->sensim_right,
         (unsigned long long)c->unexplained, (unsigned long long)c->coincident,
         ok ? "PASS" : "FAIL");
  if (c->first_bad != SIZE_MAX) {
    size_t i = c->first_bad;
    printf("  first unexplained: ray %zu dir (%.6f %.6f %.6f)\n", i, r->dir_d[3 * i],
           r->dir_d[3 * i + 1], r->dir_d[3 * i + 2]);
    print_answer("sensim", &c->bad_s);
    print_answer("raw", &c->bad_r);
    print_answer("truth", &c->bad_t);
  }
  return ok;
}

//---------------- Main

// Timed configurations: sensim and raw Embree on the same rays in the same order.
enum {
  CFG_SENSIM,        // env_raycast, firing order
  CFG_RAW8,          // rtcIntersect8 on the same 8-ray packets as the backend forms
  CFG_RAW16,         // rtcIntersect16 on 16 consecutive rays
  CFG_RAW16_TILES,   // rtcIntersect16 on tiles of 4 channels x 4 azimuths (information)
  CFG_SENSIM_SHUF,   // env_raycast, the same rays shuffled
  CFG_RAW1_SHUF,     // rtcIntersect1, shuffled
  NCFG
};

static const char* const g_cfg_names[NCFG] = {"sensim", "raw8", "raw16", "raw16-tiles",
                                              "sensim-shuf", "raw1-shuf"};
static const unsigned g_cfg_width[NCFG] = {0, 8, 16, 0, 0, 1};


static env_t* build_env(const world_t* w, scene_device_t* dev, pool_t* pool, size_t nray) {
  env_limits_t lim = env_default_limits();
  if (lim.max_raycast_rays < nray) {
    lim.max_raycast_rays = (uint32_t)nray;
  }
  err_msg_t msg;
  env_t* e = env_create("bench", &lim, dev, pool, &msg);
  if (!e) {
    bench_die("env_create: %s", msg.text);
  }
  for (unsigned i = 0; i < w->ngeom; i++) {
    const geom_def_t* g = &w->geoms[i];
    int rc;
    if (g->mesh) {
      mesh_desc_t d = {
          .id = g->id,
          .vertices = (const uint8_t*)g->mesh->v,
          .vertices_len = 3 * sizeof(float) * g->mesh->nv,
          .indices = (const uint8_t*)g->mesh->idx,
          .indices_len = 3 * sizeof(uint32_t) * g->mesh->nt,
      };
      rc = env_create_mesh(e, &d, &msg);
    } else {
      prim_desc_t d = {.id = g->id, .kind = g->kind};
      memcpy(d.size, g->size, sizeof d.size);
      rc = env_create_primitive(e, &d, &msg);
    }
    if (rc) {
      bench_die("geometry %u: %s", g->id, msg.text);
    }
  }
  for (unsigned i = 0; i < w->nobject; i++) {
    const object_def_t* o = &w->objects[i];
    object_desc_t d = {
        .id = o->id,
        .geometry_id = w->geoms[o->geom].id,
        .local_pose = o->pose,
        .label = 1 + o->geom,
    };
    memcpy(d.scale, o->scale, sizeof d.scale);
    if (env_create_object(e, &d, &msg)) {
      bench_die("object %u: %s", o->id, msg.text);
    }
  }
  return e;
}


static void result_alloc(result_t* r, size_t n) {
  r->dist = bench_xmalloc(n * sizeof *r->dist);
  r->ng = bench_xmalloc(3 * n * sizeof *r->ng);
  r->obj = bench_xmalloc(n * sizeof *r->obj);
}


static void result_free(result_t* r) {
  free(r->dist);
  free(r->ng);
  free(r->obj);
}


// Rate (Mrays/s) of nray rays at the p-th percentile of the nrep durations secs (p = 50: the
// median; p = 99: the slow tail).
static double mrays_at(size_t nray, const double* secs, unsigned nrep, double p) {
  double* v = bench_xmalloc(sizeof(double) * nrep);
  memcpy(v, secs, sizeof(double) * nrep);
  double t = bench_percentile(v, nrep, p);
  free(v);
  return (double)nray / t * 1e-6;
}


// --ablate: raw rtcIntersect1 on one thread with each of the backend's choices alone; Mrays/s
// medians and the paired ratio to the plain reference.
static void ablate(RTCDevice dev, const world_t* w, const rays_t* r, pool_t* pool,
                   unsigned nrep) {
  static const struct {
    int flags;
    const char* name;
  } kVariants[] = {
      {0, "reference (plain)"},
      {RAW_ROBUST, "+ robust"},
      {RAW_QUAT, "+ quaternion transform"},
      {RAW_QUAT | RAW_MOTION, "+ two time steps"},
      {RAW_LOW_TOP, "+ low-quality top"},
      {RAW_FLAT, "+ flat static meshes"},
      {RAW_SCENE_C, "all (scene/)"},
  };
  enum { NVAR = sizeof kVariants / sizeof kVariants[0] };
  raw_scene_t* sc = bench_xmalloc(NVAR * sizeof *sc);
  result_t out;
  result_alloc(&out, r->n);
  double* secs = bench_xmalloc(sizeof(double) * NVAR * nrep);
  for (unsigned v = 0; v < NVAR; v++) {
    raw_build(&sc[v], dev, w, kVariants[v].flags);
    time_raw(pool, &sc[v], r, &out, 1);
  }
  for (unsigned rep = 0; rep < nrep; rep++) {
    for (unsigned v = 0; v < NVAR; v++) {
      secs[v * nrep + rep] = time_raw(pool, &sc[v], r, &out, 1);
    }
  }
  printf("\nablation, raw rtcIntersect1, 1 thread:\n%-24s %10s %12s\n", "variant", "Mrays/s",
         "vs reference");
  for (unsigned v = 0; v < NVAR; v++) {
    const double* sv = secs + v * nrep;
    printf("%-24s %10.2f %12.3f\n", kVariants[v].name, mrays_at(r->n, sv, nrep, 50),
           bench_median_ratio(secs, sv, nrep));
    raw_release(&sc[v], w);
  }
  free(secs);
  result_free(&out);
  free(sc);
}


// The rays of r in a fixed pseudo-random order (Fisher-Yates with a fixed seed).
static void shuffle_rays(const rays_t* r, rays_t* out) {
  *out = *r;
  out->org_d = bench_xmalloc(3 * sizeof(double) * r->n);
  out->dir_d = bench_xmalloc(3 * sizeof(double) * r->n);
  out->org = bench_xmalloc(3 * sizeof(float) * r->n);
  out->dir = bench_xmalloc(3 * sizeof(float) * r->n);
  size_t* perm = bench_xmalloc(sizeof(size_t) * r->n);
  for (size_t i = 0; i < r->n; i++) {
    perm[i] = i;
  }
  uint64_t seed = 987654321;
  for (size_t i = r->n; i > 1; i--) {
    size_t j = (size_t)(rnd(&seed) * (double)i);
    size_t tmp = perm[i - 1];
    perm[i - 1] = perm[j];
    perm[j] = tmp;
  }
  for (size_t i = 0; i < r->n; i++) {
    size_t k = perm[i];
    memcpy(out->org_d + 3 * i, r->org_d + 3 * k, 3 * sizeof(double));
    memcpy(out->dir_d + 3 * i, r->dir_d + 3 * k, 3 * sizeof(double));
    memcpy(out->org + 3 * i, r->org + 3 * k, 3 * sizeof(float));
    memcpy(out->dir + 3 * i, r->dir + 3 * k, 3 * sizeof(float));
  }
  free(perm);
}


static void rays_free(rays_t* r) {
  free(r->org_d);
  free(r->dir_d);
  free(r->org);
  free(r->dir);
}


// The instruction set Embree runs on this CPU (its widest packet is native there).
static const char* embree_isa(RTCDevice dev) {
  if (rtcGetDeviceProperty(dev, RTC_DEVICE_PROPERTY_NATIVE_RAY16_SUPPORTED)) {
    return "AVX-512 (native 16-ray packets)";
  }
  if (rtcGetDeviceProperty(dev, RTC_DEVICE_PROPERTY_NATIVE_RAY8_SUPPORTED)) {
    return "AVX2/AVX (native 8-ray packets)";
  }
  return "SSE (native 4-ray packets)";
}


int main(int argc, char** argv) {
  bench_init("bench_raycast", NULL);
  options_t opt;
  parse_options(argc, argv, &opt);
  alarm(opt.quick ? 300 : 1800);  // watchdog: packet traversal must never hang a test run

  // scene and rays
  double t0 = bench_now();
  world_t* w = bench_xmalloc(sizeof *w);
  make_world(w, &opt);
  rays_t rays, shuf;
  make_rays(&rays, &opt);
  shuffle_rays(&rays, &shuf);
  char s1[32], s2[32], s3[32], s4[32];
  printf("bench_raycast%s: scene %s instanced triangles (terrain %s, blob field %s x %u), "
         "%u analytic primitives, %u objects\n",
         opt.quick ? " --quick" : "", bench_count(w->instanced_triangles, s1),
         bench_count(w->terrain.nt, s2), bench_count(w->field.nt, s3), opt.fields, w->nprim,
         w->nobject);
  printf("rays: %u channels x %u columns x %u scans = %s per batch, max range %.0f m, in "
         "firing order (coherent) and shuffled; %u repeats, interleaved\n",
         opt.channels, opt.columns, opt.scans, bench_count(rays.n, s4), opt.max_range,
         opt.repeats);

  // sensim: one environment per pool size, sharing the device
  err_msg_t msg;
  scene_device_t* dev = scene_device_create(&msg);
  if (!dev) {
    bench_die("scene_device_create: %s", msg.text);
  }
  pool_t* pools[NTHREAD_CONFIGS];
  env_t* envs[NTHREAD_CONFIGS];
  for (unsigned t = 0; t < NTHREAD_CONFIGS; t++) {
    pools[t] = pool_create(t + 1);
    if (!pools[t]) {
      bench_die("pool_create(%u) failed", t + 1);
    }
    envs[t] = build_env(w, dev, pools[t], rays.n);
  }

  // raw Embree at the best ISA of this CPU, its scene built as the backend builds its own: robust
  // bottom and top levels, a dynamic low-quality top, static instances with one time step of
  // matrix transform
  RTCDevice rdev = rtcNewDevice(NULL);
  if (!rdev) {
    bench_die("rtcNewDevice failed (%d)", (int)rtcGetDeviceError(NULL));
  }
  printf("Embree ISA: %s; reference scene built like the backend (robust; the static meshes' "
         "triangles in world coordinates under one instance, one-step matrix instances of the "
         "primitives, low-quality dynamic top)\n",
         embree_isa(rdev));
  raw_scene_t* raw = bench_xmalloc(sizeof *raw);
  raw_build(raw, rdev, w, RAW_ROBUST | RAW_LOW_TOP | RAW_FLAT);

  scene_hit_t* hits[2] = {bench_xmalloc(rays.n * sizeof(scene_hit_t)),
                          bench_xmalloc(rays.n * sizeof(scene_hit_t))};
  result_t res[NCFG];
  for (int k = 0; k < NCFG; k++) {
    result_alloc(&res[k], rays.n);
  }

  // one untimed run of everything (it also commits the environments' scenes), cross-checked
  unsigned nrep = opt.repeats;
  double* secs = bench_xmalloc(sizeof(double) * NTHREAD_CONFIGS * NCFG * (nrep + 1));
#define SECS(t, k, rep) secs[((t) * NCFG + (k)) * (nrep + 1) + (rep)]
  for (unsigned rep = 0; rep <= nrep; rep++) {
    for (unsigned t = 0; t < NTHREAD_CONFIGS; t++) {
      for (int k = 0; k < NCFG; k++) {
        double dt;
        if (k == CFG_SENSIM || k == CFG_SENSIM_SHUF) {
          dt = time_sensim(envs[t], k == CFG_SENSIM ? &rays : &shuf, hits[k == CFG_SENSIM_SHUF]);
        } else {
          dt = time_raw(pools[t], raw, k == CFG_RAW1_SHUF ? &shuf : &rays, &res[k],
                        g_cfg_width[k]);
        }
        SECS(t, k, rep) = dt;
      }
    }
    if (rep == 0) {
      printf("setup %.1f s\n", bench_now() - t0);
    }
  }

  // cross-check the last run: sensim against raw Embree on the same rays, every field
  bool ok = true;
  static const struct {
    int sensim, raw;
  } kPairs[] = {{CFG_SENSIM, CFG_RAW8}, {CFG_SENSIM, CFG_RAW16}, {CFG_SENSIM_SHUF, CFG_RAW1_SHUF}};
  for (size_t p = 0; p < sizeof kPairs / sizeof kPairs[0]; p++) {
    check_t c;
    const rays_t* r = kPairs[p].sensim == CFG_SENSIM ? &rays : &shuf;
    cross_check(w, r, hits[kPairs[p].sensim == CFG_SENSIM_SHUF], &res[kPairs[p].raw], &c);
    ok &= report_check(g_cfg_names[kPairs[p].raw], r, &c);
  }

  // and against a plain, non-robust scene traced with single rays: where the two traversals
  // part (rays through shared edges, mostly) the brute force says which one is right
  {
    raw_scene_t* plain = bench_xmalloc(sizeof *plain);
    raw_build(plain, rdev, w, 0);
    time_raw(pools[0], plain, &rays, &res[CFG_RAW16_TILES], 1);
    check_t c;
    cross_check(w, &rays, hits[0], &res[CFG_RAW16_TILES], &c);
    ok &= report_check("raw1-plain", &rays, &c);
    raw_release(plain, w);
    free(plain);
  }

  // Mrays/s: median and the slow tail (p99 of the durations) over the timed repeats 1..nrep
  printf("\n%-7s %-12s %14s %14s\n", "threads", "config", "median Mrays/s", "p99 Mrays/s");
  for (unsigned t = 0; t < NTHREAD_CONFIGS; t++) {
    for (int k = 0; k < NCFG; k++) {
      printf("%-7u %-12s %14.2f %14.2f\n", t + 1, g_cfg_names[k],
             mrays_at(rays.n, &SECS(t, k, 1), nrep, 50),
             mrays_at(rays.n, &SECS(t, k, 1), nrep, 99));
    }
  }

  // ratios sensim / raw: medians of the paired per-repeat ratios (> 1: sensim faster)
  printf("\nratios sensim / raw (median of paired per-repeat ratios; p99: the worst pair)\n");
  static const struct {
    const char* name;
    int sensim, raw;
  } kRatios[] = {{"raycast_over_raw8", CFG_SENSIM, CFG_RAW8},
                 {"raycast_over_raw16", CFG_SENSIM, CFG_RAW16},
                 {"raycast_over_raw16_tiles", CFG_SENSIM, CFG_RAW16_TILES},
                 {"raycast_shuffled_over_raw1", CFG_SENSIM_SHUF, CFG_RAW1_SHUF}};
  for (unsigned t = 0; t < NTHREAD_CONFIGS; t++) {
    for (size_t q = 0; q < sizeof kRatios / sizeof kRatios[0]; q++) {
      double* v = bench_xmalloc(sizeof(double) * nrep);
      for (unsigned rep = 0; rep < nrep; rep++) {
        v[rep] = SECS(t, kRatios[q].raw, rep + 1) / SECS(t, kRatios[q].sensim, rep + 1);
      }
      double med = bench_median(v, nrep), worst = bench_percentile(v, nrep, 1);
      free(v);
      if (t == 0 && q != 2) {
        printf("BENCH %s %.3f ratio\n", kRatios[q].name, med);
      }
      printf("  %u thread%s %-28s median %.3f p99 %.3f\n", t + 1, t ? "s" : " ",
             kRatios[q].name, med, worst);
    }
  }
  printf("(the BENCH lines are one thread: the per-ray cost; raw8/raw16 trace the same rays in "
         "the same consecutive packets)\n");
#undef SECS
  if (opt.ablate) {
    ablate(rdev, w, &rays, pools[0], nrep);
  }
  printf("cross-check: %s\n", ok ? "PASS" : "FAIL");

  // teardown
  free(secs);
  for (int k = 0; k < NCFG; k++) {
    result_free(&res[k]);
  }
  free(hits[0]);
  free(hits[1]);
  raw_release(raw, w);
  free(raw);
  rtcReleaseDevice(rdev);
  for (unsigned t = 0; t < NTHREAD_CONFIGS; t++) {
    env_destroy(envs[t]);
    pool_destroy(pools[t]);
  }
  scene_device_destroy(dev);
  free(w->terrain.v);
  free(w->terrain.idx);
  free(w->field.v);
  free(w->field.idx);
  free(w);
  rays_free(&rays);
  rays_free(&shuf);
  return ok ? 0 : 1;
}
