// SPDX-License-Identifier: MIT
// bench_raycast.c: env_raycast throughput against raw Embree on the same scene in this process.
//
// The scene (a terrain mesh, a field of bumpy blobs instanced several times, and analytic
// boxes, spheres and cylinders) is built twice from one description: through the core API
// (env_create_mesh / env_create_primitive / env_create_object) and directly with Embree
// (one bottom-level scene per geometry, one instance per object, user geometries with their own
// exact intersectors for the primitives). A spinning lidar pattern (channels x columns, several
// scans from different origins, column-major like a real sensor fires) is traced with
// env_raycast through the daemon's worker pool, and with raw rtcIntersect1 and rtcIntersect16
// (tiles of 4 channels x 4 azimuths) distributed by the same pool at the same thread count.
// Every configuration runs once untimed; those results are cross-checked (hit distance and
// object of every ray), then the timed repeats are interleaved and their medians printed with
// the paired ratios sensim / raw. Exit status 1 when the cross-check fails.
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
#define TILE_GRAIN 64        // 16-ray tiles per pool work item
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
  int ablate;          // also time raw single rays with each of scene.c's choices alone
} options_t;

static const char* const g_usage =
    "Usage: bench_raycast [OPTIONS]\n"
    "Rays per second of env_raycast (worker pool at 1 and 2 threads) against raw Embree\n"
    "(rtcIntersect1 and rtcIntersect16 tiles) on the same scene, in the same process.\n"
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
    "  --ablate          also time raw rtcIntersect1 (1 thread) with each of scene.c's Embree\n"
    "                    choices alone: robust, quaternion, two time steps, low-quality top\n";


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
    // only robust traversal (scene.c's choice) reliably hits, which the reference lacks
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
// one time step, matrix transforms). RAW_SCENE_C: scene.c's configuration, to tell the cost of
// those choices from the adapter's own; the single flags are for --ablate.
enum {
  RAW_ROBUST = 1,      // RTC_SCENE_FLAG_ROBUST on the bottom and top levels
  RAW_QUAT = 2,        // quaternion-decomposition instance transforms (one time step)
  RAW_MOTION = 4,      // two time steps (same pose twice), rays at time 1; implies RAW_QUAT
  RAW_LOW_TOP = 8,     // dynamic, low-quality top level
  RAW_SCENE_C = RAW_ROBUST | RAW_QUAT | RAW_MOTION | RAW_LOW_TOP,
};

typedef struct raw_scene {
  RTCScene top;
  RTCScene blas[MAX_GEOMS];
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
  for (unsigned i = 0; i < w->nobject; i++) {
    const object_def_t* o = &w->objects[i];
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
  rtcCommitScene(r->top);
  raw_check(dev, "top-level build");
}


static void raw_release(raw_scene_t* r, const world_t* w) {
  rtcReleaseScene(r->top);
  for (unsigned i = 0; i < w->ngeom; i++) {
    rtcReleaseScene(r->blas[i]);
  }
}

//---------------- Tracing

// Output of one configuration: distance (INFINITY on a miss) and object index per ray.
typedef struct result {
  float* dist;
  uint32_t* obj;     // index into world_t.objects, UINT32_MAX on a miss
} result_t;

typedef struct raw_job {
  const raw_scene_t* scene;
  const rays_t* rays;
  result_t* out;
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
static void raw_store(result_t* out, size_t i, unsigned geom_id, float tfar, unsigned inst_id) {
  bool hit = geom_id != RTC_INVALID_GEOMETRY_ID;
  out->dist[i] = hit ? tfar : INFINITY;
  out->obj[i] = hit ? inst_id : UINT32_MAX;
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
    rh.ray.tnear = 0.0f;
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
    raw_store(job->out, i, rh.hit.geomID, rh.ray.tfar, rh.hit.instID[0]);
  }
  _mm_setcsr(csr);
}


// pool_fn_t: 16-ray tiles [begin, end) of 4 channels x 4 azimuths with rtcIntersect16.
static void raw_packet_chunk(void* ctx, size_t begin, size_t end) {
  const raw_job_t* job = ctx;
  const rays_t* r = job->rays;
  struct RTCIntersectContext c;
  unsigned csr = raw_chunk_begin(&c);
  c.flags = RTC_INTERSECT_CONTEXT_FLAG_COHERENT;
  size_t cb = (r->channels + 3) / 4, ab = (r->columns + 3) / 4, per_scan = cb * ab;
  float time = job->scene->flags & RAW_MOTION ? 1.0f : 0.0f;
  for (size_t tile = begin; tile < end; tile++) {
    size_t scan = tile / per_scan, rem = tile % per_scan;
    size_t col0 = 4 * (rem / cb), ch0 = 4 * (rem % cb);
    _Alignas(64) int valid[16];
    _Alignas(64) struct RTCRayHit16 rh;
    size_t idx[16];
    size_t first = (scan * r->columns + col0) * r->channels + ch0;
    for (unsigned k = 0; k < 16; k++) {
      size_t ch = ch0 + (k & 3), col = col0 + (k >> 2);
      bool ok = ch < r->channels && col < r->columns;
      size_t i = ok ? (scan * r->columns + col) * r->channels + ch : first;
      idx[k] = i;
      valid[k] = ok ? -1 : 0;
      rh.ray.org_x[k] = r->org[3 * i + 0];
      rh.ray.org_y[k] = r->org[3 * i + 1];
      rh.ray.org_z[k] = r->org[3 * i + 2];
      rh.ray.tnear[k] = 0.0f;
      rh.ray.dir_x[k] = r->dir[3 * i + 0];
      rh.ray.dir_y[k] = r->dir[3 * i + 1];
      rh.ray.dir_z[k] = r->dir[3 * i + 2];
      rh.ray.time[k] = time;
      rh.ray.tfar[k] = r->max_range;
      rh.ray.mask[k] = 0xFFFFFFFFu;
      rh.ray.id[k] = k;
      rh.ray.flags[k] = 0;
      rh.hit.geomID[k] = RTC_INVALID_GEOMETRY_ID;
      rh.hit.instID[0][k] = RTC_INVALID_GEOMETRY_ID;
    }
    rtcIntersect16(valid, job->scene->top, &c, &rh);
    for (unsigned k = 0; k < 16; k++) {
      if (!valid[k]) {
        continue;
      }
      raw_store(job->out, idx[k], rh.hit.geomID[k], rh.ray.tfar[k], rh.hit.instID[0][k]);
    }
  }
  _mm_setcsr(csr);
}


static size_t ntiles(const rays_t* r) {
  return (size_t)r->scans * ((r->channels + 3) / 4) * ((r->columns + 3) / 4);
}


static double time_raw(pool_t* pool, const raw_scene_t* s, const rays_t* r, result_t* out,
                       bool packets) {
  raw_job_t job = {.scene = s, .rays = r, .out = out};
  double t0 = bench_now();
  if (packets) {
    pool_parallel_for(pool, ntiles(r), TILE_GRAIN, raw_packet_chunk, &job);
  } else {
    pool_parallel_for(pool, r->n, RAY_GRAIN, raw_single_chunk, &job);
  }
  return bench_now() - t0;
}


static double time_sensim(env_t* e, const rays_t* r, scene_hit_t* hits) {
  env_raycast_t rc = {
      .nray = (uint32_t)r->n,
      .origins = r->org_d,
      .directions = r->dir_d,
      .max_range = r->max_range,
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

//---------------- Cross-check

typedef struct check {
  uint64_t hits_sensim;
  uint64_t hits_raw;
  uint64_t mismatches;     // hit/miss differs, distance beyond tolerance, or other object
  uint64_t object_diffs;   // same distance, other object (coincident surfaces)
  double max_diff;         // m, over rays that agree
  size_t first_bad;        // index of the first mismatch, SIZE_MAX if none
} check_t;


// Same float ray, same float triangles: distances agree to float rounding of the instance
// transform (1e-5 relative, 1e-4 m absolute is generous).
static void cross_check(const world_t* w, const rays_t* r, const scene_hit_t* hits,
                        const result_t* raw, check_t* c) {
  memset(c, 0, sizeof *c);
  c->first_bad = SIZE_MAX;
  for (size_t i = 0; i < r->n; i++) {
    bool hs = isfinite(hits[i].distance), hr = isfinite(raw->dist[i]);
    c->hits_sensim += hs;
    c->hits_raw += hr;
    bool bad = hs != hr;
    if (hs && hr) {
      double diff = fabs(hits[i].distance - raw->dist[i]);
      uint32_t oid = raw->obj[i] < w->nobject ? w->objects[raw->obj[i]].id : 0;
      if (diff > 1e-4 + 1e-5 * hits[i].distance) {
        bad = true;
      } else {
        c->max_diff = fmax(c->max_diff, diff);
        c->object_diffs += oid != hits[i].object_id;
      }
    }
    if (bad) {
      c->mismatches++;
      if (c->first_bad == SIZE_MAX) {
        c->first_bad = i;
      }
    }
  }
}


static bool report_check(const char* name, const rays_t* r, const scene_hit_t* hits,
                         const result_t* raw, const check_t* c) {
  char a[32], b[32], n[32];
  double frac = (double)c->mismatches / (double)r->n;
  bool ok = frac <= MISMATCH_LIMIT && c->hits_sensim > 0;
  printf("check sensim vs %-13s %s rays, hits %s / %s, max |d diff| %.2g m, mismatches %llu "
         "(%.4f%%), other object at equal distance %llu: %s\n",
         name, bench_count(r->n, n), bench_count(c->hits_sensim, a), bench_count(c->hits_raw, b),
         c->max_diff, (unsigned long long)c->mismatches, 100.0 * frac,
         (unsigned long long)c->object_diffs, ok ? "PASS" : "FAIL");
  if (c->first_bad != SIZE_MAX) {
    size_t i = c->first_bad;
    printf("  first mismatch: ray %zu dir (%.6f %.6f %.6f): sensim %.6f m object %u, raw %.6f m "
           "object index %d\n",
           i, r->dir_d[3 * i], r->dir_d[3 * i + 1], r->dir_d[3 * i + 2], hits[i].distance,
           hits[i].object_id, (double)raw->dist[i], (int)raw->obj[i]);
  }
  return ok;
}

//---------------- Main

enum { CFG_SENSIM, CFG_RAW_SINGLE, CFG_RAW_PACKET, CFG_RAW_SENSIM_CFG, NCFG };

static const char* const g_cfg_names[NCFG] = {"sensim", "raw-single", "raw-packet16",
                                              "raw-single-scfg"};


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
  r->obj = bench_xmalloc(n * sizeof *r->obj);
}


static void result_free(result_t* r) {
  free(r->dist);
  free(r->obj);
}

// Median of the rates (Mrays/s) of nrep runs of nray rays that took secs[rep] seconds each.
static double median_mrays(size_t nray, const double* secs, unsigned nrep) {
  double* v = bench_xmalloc(sizeof(double) * nrep);
  for (unsigned rep = 0; rep < nrep; rep++) {
    v[rep] = (double)nray / secs[rep] * 1e-6;
  }
  double m = bench_median(v, nrep);
  free(v);
  return m;
}

// --ablate: raw rtcIntersect1 on one thread with each of scene.c's choices alone; Mrays/s
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
      {RAW_SCENE_C, "all (scene.c)"},
  };
  enum { NVAR = sizeof kVariants / sizeof kVariants[0] };
  raw_scene_t* sc = bench_xmalloc(NVAR * sizeof *sc);
  result_t out;
  result_alloc(&out, r->n);
  double* secs = bench_xmalloc(sizeof(double) * NVAR * nrep);
  for (unsigned v = 0; v < NVAR; v++) {
    raw_build(&sc[v], dev, w, kVariants[v].flags);
    time_raw(pool, &sc[v], r, &out, false);
  }
  for (unsigned rep = 0; rep < nrep; rep++) {
    for (unsigned v = 0; v < NVAR; v++) {
      secs[v * nrep + rep] = time_raw(pool, &sc[v], r, &out, false);
    }
  }
  printf("\nablation, raw rtcIntersect1, 1 thread:\n%-24s %10s %12s\n", "variant", "Mrays/s",
         "vs reference");
  for (unsigned v = 0; v < NVAR; v++) {
    const double* sv = secs + v * nrep;
    printf("%-24s %10.2f %12.3f\n", kVariants[v].name, median_mrays(r->n, sv, nrep),
           bench_median_ratio(secs, sv, nrep));
    raw_release(&sc[v], w);
  }
  free(secs);
  result_free(&out);
  free(sc);
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
  rays_t rays;
  make_rays(&rays, &opt);
  char s1[32], s2[32], s3[32], s4[32];
  printf("bench_raycast%s: scene %s instanced triangles (terrain %s, blob field %s x %u), "
         "%u analytic primitives, %u objects\n",
         opt.quick ? " --quick" : "", bench_count(w->instanced_triangles, s1),
         bench_count(w->terrain.nt, s2), bench_count(w->field.nt, s3), opt.fields, w->nprim,
         w->nobject);
  printf("rays: %u channels x %u columns x %u scans = %s per batch, max range %.0f m; "
         "%u repeats, interleaved, medians\n",
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

  // raw Embree: the reference and scene.c's configuration
  RTCDevice rdev = rtcNewDevice("max_isa=avx2");
  if (!rdev) {
    bench_die("rtcNewDevice failed (%d)", (int)rtcGetDeviceError(NULL));
  }
  raw_scene_t* raw = bench_xmalloc(sizeof *raw);
  raw_scene_t* raw_scfg = bench_xmalloc(sizeof *raw_scfg);
  raw_build(raw, rdev, w, 0);
  raw_build(raw_scfg, rdev, w, RAW_SCENE_C);

  scene_hit_t* hits = bench_xmalloc(rays.n * sizeof *hits);
  result_t res[NCFG];
  for (int k = 1; k < NCFG; k++) {
    result_alloc(&res[k], rays.n);
  }

  // warm-up (also commits the environments' scenes) and cross-check
  for (unsigned t = 0; t < NTHREAD_CONFIGS; t++) {
    time_sensim(envs[t], &rays, hits);
    time_raw(pools[t], raw, &rays, &res[CFG_RAW_SINGLE], false);
    time_raw(pools[t], raw, &rays, &res[CFG_RAW_PACKET], true);
    time_raw(pools[t], raw_scfg, &rays, &res[CFG_RAW_SENSIM_CFG], false);
  }
  printf("setup %.1f s\n", bench_now() - t0);
  bool ok = true;
  for (int k = 1; k < NCFG; k++) {
    check_t c;
    cross_check(w, &rays, hits, &res[k], &c);
    ok &= report_check(g_cfg_names[k], &rays, hits, &res[k], &c);
  }

  // timed repeats, interleaved so that drift of the machine hits every configuration alike
  unsigned nrep = opt.repeats;
  double* secs = bench_xmalloc(sizeof(double) * NTHREAD_CONFIGS * NCFG * nrep);
#define SECS(t, k, rep) secs[((t) * NCFG + (k)) * nrep + (rep)]
  for (unsigned rep = 0; rep < nrep; rep++) {
    for (unsigned t = 0; t < NTHREAD_CONFIGS; t++) {
      SECS(t, CFG_SENSIM, rep) = time_sensim(envs[t], &rays, hits);
      SECS(t, CFG_RAW_SINGLE, rep) = time_raw(pools[t], raw, &rays, &res[CFG_RAW_SINGLE], false);
      SECS(t, CFG_RAW_PACKET, rep) = time_raw(pools[t], raw, &rays, &res[CFG_RAW_PACKET], true);
      SECS(t, CFG_RAW_SENSIM_CFG, rep) =
          time_raw(pools[t], raw_scfg, &rays, &res[CFG_RAW_SENSIM_CFG], false);
    }
  }

  // Mrays/s medians, and paired per-repeat ratios sensim / raw (their medians)
  printf("\n%-7s %12s %12s %12s %16s %14s %14s %14s\n", "threads", "sensim", "raw-single",
         "raw-packet16", "raw-single-scfg", "sensim/single", "sensim/packet", "sensim/scfg");
  double mr[NTHREAD_CONFIGS][NCFG];
  for (unsigned t = 0; t < NTHREAD_CONFIGS; t++) {
    for (int k = 0; k < NCFG; k++) {
      mr[t][k] = median_mrays(rays.n, &SECS(t, k, 0), nrep);
    }
    double ratio[NCFG];
    for (int k = 1; k < NCFG; k++) {
      ratio[k] = bench_median_ratio(&SECS(t, k, 0), &SECS(t, CFG_SENSIM, 0), nrep);
    }
    printf("%-7u %12.2f %12.2f %12.2f %16.2f %14.3f %14.3f %14.3f\n", t + 1, mr[t][0], mr[t][1],
           mr[t][2], mr[t][3], ratio[1], ratio[2], ratio[3]);
  }
  printf("(Mrays/s, median of %u; ratios = median of paired per-repeat ratios, < 1: sensim "
         "slower)\n",
         nrep);
  printf("2-thread scaling: sensim %.2fx, raw-single %.2fx, raw-packet16 %.2fx, "
         "raw-single-scfg %.2fx\n",
         mr[1][0] / mr[0][0], mr[1][1] / mr[0][1], mr[1][2] / mr[0][2], mr[1][3] / mr[0][3]);
  printf("raw-single-scfg: raw rtcIntersect1 on a scene built like scene.c (robust, two-step "
         "quaternion instances, low-quality dynamic top)\n");
#undef SECS
  if (opt.ablate) {
    ablate(rdev, w, &rays, pools[0], nrep);
  }
  printf("cross-check: %s\n", ok ? "PASS" : "FAIL");

  // teardown
  free(secs);
  for (int k = 1; k < NCFG; k++) {
    result_free(&res[k]);
  }
  free(hits);
  raw_release(raw, w);
  raw_release(raw_scfg, w);
  free(raw);
  free(raw_scfg);
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
  free(rays.org_d);
  free(rays.dir_d);
  free(rays.org);
  free(rays.dir);
  return ok ? 0 : 1;
}
