// SPDX-License-Identifier: MIT
// scene.c: the Embree 3 adapter, the only file including embree3. Each geometry is its own
// bottom-level scene, built once; each object is an instance in the top-level scene (two time
// steps while it moves), so moving an object only refits the top level and rays see it at their
// own time.
#include "scene/scene.h"

#include <embree3/rtcore.h>
#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <pmmintrin.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xmmintrin.h>

#include "base/mem.h"
#include "scene/horizon.h"
#include "scene/prim.h"

struct scene_device {
  RTCDevice rtc;
  atomic_uint_fast64_t nerror;   // errors reported through the error callback
  atomic_int_fast64_t bytes;     // bytes Embree holds, from the memory monitor
  atomic_int_fast64_t budget;    // most bytes Embree may hold; 0 = unlimited
  atomic_uint_fast64_t refused;  // allocations refused for the budget
  bool simd;                     // the CPU runs scene_trace_rays' AVX2 packet path

  // The error callback may run on any thread (TBB build threads included); this lock guards
  // last_error only and is never held while calling into Embree.
  pthread_mutex_t lock;
  char last_error[256];
};

// One bottom-level scene. Heap-allocated and never moved: prim is the Embree user pointer.
typedef struct geom {
  RTCScene rtc;      // NULL: free slot
  bool is_prim;      // analytic primitive (else triangle mesh)
  prim_t prim;       // the shape, when is_prim
  uint32_t nvertex;  // a mesh's vertices and triangles
  uint32_t ntriangle;
  horizon_box_t* parts;   // object-space bounds of its parts (clusters of nearby triangles, or
                          //   the primitive), for the horizon
  uint32_t nparts;
  horizon_box_t bounds;   // all of it
  int next_free;     // free-list link while the slot is free
} geom_t;

// One object: an instance in the top-level scene whose Embree geometry ID is its handle.
typedef struct inst {
  RTCGeometry rtc;   // NULL: free slot; a reference held by this table
  int geometry;      // handle of the instanced geometry
  int next_free;     // free-list link while the slot is free
  uint32_t object_id;
  uint32_t label;
  uint32_t body_id;  // body it is mounted on (filtered tracing), 0 = the world
  uint32_t group;    // 0..31, for sensors' group masks
  double scale[3];   // per-axis scale
  bool is_prim;      // the geometry is an analytic primitive (hits report primitive 0)
  double nmat[9];    // R(q1) S^-1, object-space normals to world (row-major): a static
                     //   instance's, and a moving one's that does not turn (q0 == q1)
  double q0[4];      // world orientation at s = 0 (on the same hemisphere as q1)
  double q1[4];      // world orientation at s = 1
  int moving;        // two time steps (motion blur); 0: one, start and end poses are equal
  int turning;       // q0 != q1
  double world[12];  // a static instance's object-to-world matrix R S | p (row-major 3 x 4);
                     //   a moving one's at the end of the step (not turning)
  double world0[12]; // a moving one's at the start of the step (not turning)
  double t0[3], t1[3];   // a turning one's origin at the start and end of the step
  double shift_len;  // and how far its object origin is from that
  bool flat;         // traced in the flat scene (its own instance disabled)
  bool flat_never;   // posed again after it was flattened: stays an instance from then on
  bool flat_root;    // this slot is the flat scene's instance, not an object
} inst_t;

struct scene {
  scene_device_t* dev;
  RTCScene top;

  geom_t** geoms;    // (cap_geom) records, NULL beyond the used prefix
  int ngeom;         // used prefix of geoms
  int cap_geom;
  int free_geom;     // head of the free list, -1: none

  inst_t* insts;     // (cap_inst)
  int ninst;         // used prefix of insts
  int cap_inst;
  int free_inst;     // head of the free list, -1: none

  // The flat scene: the triangles of the objects fixed in the world (on no body), in world
  // coordinates, in one bottom-level scene under one identity instance of the top level (slot
  // flat_slot). A ray then finds them in one hierarchy instead of entering an instance per
  // object: the terrain and buildings of a typical scene are found ~10 % faster. Each object
  // keeps its own instance, disabled while it is flat.
  RTCScene flat;          // NULL: no object is flat
  int flat_slot;          // the flat scene's instance slot, -1: none yet
  uint64_t flat_tris;     // triangles in flat
  bool flat_dirty;        // a flat object was removed: rebuild at the commit
  uint32_t flat_wait;     // commits that new static objects have waited to be flattened
  uint64_t flat_refused;  // flat_set() of the objects a build failed for (0: none): not
                          //   tried again until the set or the memory budget changes
  int64_t flat_refused_budget;

  // World bounds of the committed geometry over the step, for horizons: the static instances'
  // parts (rebuilt when a static instance changed) and the moving instances (every commit).
  horizon_box_t* still_boxes;
  size_t nstill, cap_still;
  bool still_dirty;
  horizon_box_t* moving_boxes;
  size_t nmoving, cap_moving;
  bool boxes_ok;          // false: out of memory for them (horizons then cull nothing)

  // counters: written by the owner thread, except rays_traced (any tracing thread)
  uint64_t geometry_builds;
  uint64_t instance_updates;
  uint64_t commits;
  uint64_t flat_builds;
  uint64_t flat_objects;
  atomic_uint_fast64_t rays_traced;
  atomic_uint_fast64_t rays_culled;
};


//---------------- Device

static void device_error_cb(void* user, enum RTCError code, const char* str) {
  scene_device_t* dev = user;
  atomic_fetch_add(&dev->nerror, 1);
  pthread_mutex_lock(&dev->lock);
  snprintf(dev->last_error, sizeof dev->last_error, "embree error %d: %s", (int)code,
           str ? str : "(no message)");
  pthread_mutex_unlock(&dev->lock);
}


// Embree asks before it allocates (post = false): refusing makes the operation fail with
// RTC_ERROR_OUT_OF_MEMORY, so a budget bounds what scenes can take. Releases (negative) and
// after-the-fact reports (post) are only counted.
static bool device_memory_cb(void* user, ssize_t bytes, bool post) {
  scene_device_t* dev = user;
  int_fast64_t budget = atomic_load(&dev->budget);
  int_fast64_t now = atomic_fetch_add(&dev->bytes, (int_fast64_t)bytes) + (int_fast64_t)bytes;
  if (bytes > 0 && !post && budget > 0 && now > budget) {
    atomic_fetch_sub(&dev->bytes, (int_fast64_t)bytes);
    atomic_fetch_add(&dev->refused, 1);
    return false;
  }
  return true;
}


scene_device_t* scene_device_create(err_msg_t* msg) {
  scene_device_t* dev = mem_calloc(1, sizeof *dev);
  if (!dev) {
    err_set(msg, ERR_NOMEM, "scene device: out of memory");
    return NULL;
  }
  atomic_init(&dev->nerror, 0);
  atomic_init(&dev->bytes, 0);
  atomic_init(&dev->budget, 0);
  atomic_init(&dev->refused, 0);
  if (pthread_mutex_init(&dev->lock, NULL) != 0) {
    mem_free(dev);
    err_set(msg, ERR_INTERNAL, "scene device: mutex init failed");
    return NULL;
  }

  // The best ISA the CPU has. Embree 3.13's AVX-512 occlusion packets (rtcOccluded16) were seen
  // to spin forever after other packet work in the same process; intersection packets never
  // did, and this adapter never calls rtcOccluded*: it traces with rtcIntersect8/16 only.
  dev->rtc = rtcNewDevice(NULL);
  if (!dev->rtc) {
    enum RTCError code = rtcGetDeviceError(NULL);
    pthread_mutex_destroy(&dev->lock);
    mem_free(dev);
    err_set(msg, ERR_BACKEND, "rtcNewDevice failed (embree error %d)", (int)code);
    return NULL;
  }
  rtcSetDeviceErrorFunction(dev->rtc, device_error_cb, dev);
  __builtin_cpu_init();
  dev->simd = __builtin_cpu_supports("avx2");
  rtcSetDeviceMemoryMonitorFunction(dev->rtc, device_memory_cb, dev);
  return dev;
}


void scene_device_destroy(scene_device_t* dev) {
  if (!dev) {
    return;
  }
  rtcReleaseDevice(dev->rtc);
  pthread_mutex_destroy(&dev->lock);
  mem_free(dev);
}


void scene_device_set_simd(scene_device_t* dev, bool on) {
  dev->simd = on && __builtin_cpu_supports("avx2");
}


void scene_device_set_budget(scene_device_t* dev, int64_t bytes) {
  atomic_store(&dev->budget, bytes > 0 ? bytes : 0);
}


void scene_device_counters(const scene_device_t* dev, uint64_t* out_errors, int64_t* out_bytes) {
  if (out_errors) {
    *out_errors = atomic_load(&dev->nerror);
  }
  if (out_bytes) {
    *out_bytes = atomic_load(&dev->bytes);
  }
}


void scene_device_last_error(scene_device_t* dev, err_msg_t* dest) {
  pthread_mutex_lock(&dev->lock);
  snprintf(dest->text, sizeof dest->text, "%s", dev->last_error);
  pthread_mutex_unlock(&dev->lock);
}


// ERR_BACKEND with the device's last message if Embree reported an error since `before`.
static int device_check(scene_device_t* dev, uint64_t before, const char* what, err_msg_t* msg) {
  enum RTCError code = rtcGetDeviceError(dev->rtc);
  if (code == RTC_ERROR_NONE && atomic_load(&dev->nerror) == before) {
    return 0;
  }
  if (code == RTC_ERROR_OUT_OF_MEMORY && atomic_load(&dev->refused) > 0 &&
      atomic_load(&dev->budget) > 0) {
    return err_set(msg, ERR_LIMIT, "%s: the ray-tracing memory budget (%lld bytes, "
                   "--max-scene-bytes) is exhausted", what,
                   (long long)atomic_load(&dev->budget));
  }
  err_msg_t last;
  scene_device_last_error(dev, &last);
  return err_set(msg, ERR_BACKEND, "%s: %s", what, last.text[0] ? last.text : "embree error");
}


//---------------- Scene

scene_t* scene_create(scene_device_t* dev, err_msg_t* msg) {
  scene_t* s = mem_calloc(1, sizeof *s);
  if (!s) {
    err_set(msg, ERR_NOMEM, "scene: out of memory");
    return NULL;
  }
  s->dev = dev;
  s->free_geom = -1;
  s->free_inst = -1;
  s->flat_slot = -1;
  atomic_init(&s->rays_traced, 0);
  atomic_init(&s->rays_culled, 0);

  // The top level is rebuilt every step from a few hundred instances: a fast low-quality
  // dynamic build wins; robust mode keeps rays aimed at shared edges from slipping through.
  uint64_t before = atomic_load(&dev->nerror);
  s->top = rtcNewScene(dev->rtc);
  if (s->top) {
    rtcSetSceneFlags(s->top, RTC_SCENE_FLAG_DYNAMIC | RTC_SCENE_FLAG_ROBUST);
    rtcSetSceneBuildQuality(s->top, RTC_BUILD_QUALITY_LOW);

    // commit the empty scene so that tracing before the first scene_commit is valid
    rtcCommitScene(s->top);
  }
  int rc = device_check(dev, before, "scene_create", msg);
  if (!s->top || rc) {
    if (!rc) {
      err_set(msg, ERR_BACKEND, "scene_create: rtcNewScene failed");
    }
    if (s->top) {
      rtcReleaseScene(s->top);
    }
    mem_free(s);
    return NULL;
  }
  return s;
}


void scene_destroy(scene_t* s) {
  if (!s) {
    return;
  }
  rtcReleaseScene(s->top);
  if (s->flat) {
    rtcReleaseScene(s->flat);
  }
  for (int i = 0; i < s->ninst; i++) {
    if (s->insts[i].rtc) {
      rtcReleaseGeometry(s->insts[i].rtc);
    }
  }
  for (int i = 0; i < s->ngeom; i++) {
    if (s->geoms[i]->rtc) {
      rtcReleaseScene(s->geoms[i]->rtc);
    }
    mem_free(s->geoms[i]->parts);
    mem_free(s->geoms[i]);
  }
  mem_free(s->still_boxes);
  mem_free(s->moving_boxes);
  mem_free(s->insts);
  mem_free(s->geoms);
  mem_free(s);
}


//---------------- Geometries

// A free geometry record (allocating one if needed); returns its handle or ERR_NOMEM.
static int geom_slot(scene_t* s) {
  if (s->free_geom >= 0) {
    int h = s->free_geom;
    s->free_geom = s->geoms[h]->next_free;
    return h;
  }
  if (s->ngeom == s->cap_geom) {
    int cap = s->cap_geom ? 2 * s->cap_geom : 16;
    geom_t** g = mem_realloc(s->geoms, (size_t)cap * sizeof *g);
    if (!g) {
      return ERR_NOMEM;
    }
    s->geoms = g;
    s->cap_geom = cap;
  }
  geom_t* rec = mem_calloc(1, sizeof *rec);
  if (!rec) {
    return ERR_NOMEM;
  }
  s->geoms[s->ngeom] = rec;
  return s->ngeom++;
}


static void geom_release_slot(scene_t* s, int h) {
  geom_t* g = s->geoms[h];
  g->rtc = NULL;
  mem_free(g->parts);
  g->parts = NULL;
  g->nparts = 0;
  g->next_free = s->free_geom;
  s->free_geom = h;
}


// Wrap one Embree geometry in its own bottom-level scene, build it and store it in slot h.
static int geom_build(scene_t* s, int h, RTCGeometry g, uint64_t before, const char* what,
                      err_msg_t* msg) {
  RTCScene blas = rtcNewScene(s->dev->rtc);
  if (blas) {
    rtcSetSceneFlags(blas, RTC_SCENE_FLAG_ROBUST);
    rtcCommitGeometry(g);
    rtcAttachGeometry(blas, g);
    rtcCommitScene(blas);
  }
  rtcReleaseGeometry(g);
  int rc = device_check(s->dev, before, what, msg);
  if (!blas || rc) {
    if (blas) {
      rtcReleaseScene(blas);
    }
    geom_release_slot(s, h);
    return rc ? rc : err_set(msg, ERR_BACKEND, "%s: rtcNewScene failed", what);
  }
  s->geoms[h]->rtc = blas;
  s->geometry_builds++;
  return h;
}


// Triangles per part of a mesh (its horizon bounds).
#define PART_TRIANGLES 256u

// Reorder tri[0, n) so that its first k entries have centroid coordinates (key: 3 per triangle,
// this axis) no greater than the rest (quickselect; the middle entry as pivot).
static void part_select(const double* key, int axis, uint32_t* tri, size_t n, size_t k) {
  size_t lo = 0, hi = n - 1;
  while (lo < hi) {
    double pivot = key[3 * (size_t)tri[lo + (hi - lo) / 2] + axis];
    size_t i = lo, j = hi;
    while (i <= j) {
      while (key[3 * (size_t)tri[i] + axis] < pivot) {
        i++;
      }
      while (key[3 * (size_t)tri[j] + axis] > pivot) {
        j--;
      }
      if (i <= j) {
        uint32_t t = tri[i];
        tri[i] = tri[j];
        tri[j] = t;
        i++;
        if (j == 0) {
          break;
        }
        j--;
      }
    }
    if (k <= j) {
      hi = j;
    } else if (k >= i) {
      lo = i;
    } else {
      return;
    }
  }
}


// Split tri[0, n) in halves across the longest extent of their centroids, recursively, at
// multiples of PART_TRIANGLES: every run of PART_TRIANGLES is then a compact part.
static void part_split(const double* key, uint32_t* tri, size_t n) {
  if (n <= PART_TRIANGLES) {
    return;
  }
  double lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
  for (size_t i = 0; i < n; i++) {
    for (int a = 0; a < 3; a++) {
      double c = key[3 * (size_t)tri[i] + a];
      lo[a] = c < lo[a] ? c : lo[a];
      hi[a] = c > hi[a] ? c : hi[a];
    }
  }
  int axis = 0;
  for (int a = 1; a < 3; a++) {
    axis = hi[a] - lo[a] > hi[axis] - lo[axis] ? a : axis;
  }
  size_t half = (n / 2 + PART_TRIANGLES / 2) / PART_TRIANGLES * PART_TRIANGLES;
  half = half < PART_TRIANGLES ? PART_TRIANGLES : half;
  part_select(key, axis, tri, n, half);
  part_split(key, tri, half);
  part_split(key, tri + half, n - half);
}


// A mesh's parts: its triangles split in compact runs of PART_TRIANGLES (part_split), each
// run's bounding box; and the bounds of all. 0 or ERR_NOMEM.
static int mesh_parts(geom_t* g, const float* v, const uint32_t* idx, uint32_t nt) {
  double lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
  uint32_t np = (nt + PART_TRIANGLES - 1) / PART_TRIANGLES;
  double* key = mem_alloc(3 * (size_t)nt * sizeof *key);
  uint32_t* tri = mem_alloc((size_t)nt * sizeof *tri);
  g->parts = mem_alloc((size_t)np * sizeof *g->parts);
  if (!key || !tri || !g->parts) {
    mem_free(key);
    mem_free(tri);
    mem_free(g->parts);
    g->parts = NULL;
    return ERR_NOMEM;
  }
  for (uint32_t t = 0; t < nt; t++) {
    tri[t] = t;
    for (int a = 0; a < 3; a++) {
      double c = 0.0;
      for (int k = 0; k < 3; k++) {
        double x = v[3 * (size_t)idx[3 * (size_t)t + k] + a];
        lo[a] = x < lo[a] ? x : lo[a];
        hi[a] = x > hi[a] ? x : hi[a];
        c += x;
      }
      key[3 * (size_t)t + a] = c;   // three times the centroid: only the order matters
    }
  }
  for (int a = 0; a < 3; a++) {
    g->bounds[a] = lo[a];
    g->bounds[3 + a] = hi[a];
  }
  part_split(key, tri, nt);
  for (uint32_t p = 0; p < np; p++) {
    double* b = g->parts[p];
    for (int a = 0; a < 3; a++) {
      b[a] = INFINITY;
      b[3 + a] = -INFINITY;
    }
    for (uint32_t q = p * PART_TRIANGLES; q < nt && q < (p + 1) * PART_TRIANGLES; q++) {
      for (int k = 0; k < 3; k++) {
        const float* x = &v[3 * (size_t)idx[3 * (size_t)tri[q] + k]];
        for (int a = 0; a < 3; a++) {
          b[a] = x[a] < b[a] ? x[a] : b[a];
          b[3 + a] = x[a] > b[3 + a] ? x[a] : b[3 + a];
        }
      }
    }
  }
  g->nparts = np;
  mem_free(key);
  mem_free(tri);
  return 0;
}


int scene_add_mesh(scene_t* s, const float* vertices, uint32_t nvertex, const uint32_t* indices,
                   uint32_t ntriangle, err_msg_t* msg) {
  // cheap checks that keep Embree from reading out of bounds
  if (!vertices || nvertex == 0) {
    return err_set(msg, ERR_INVAL, "vertices: empty");
  }
  if (!indices || ntriangle == 0) {
    return err_set(msg, ERR_INVAL, "indices: empty");
  }
  for (size_t i = 0; i < 3 * (size_t)ntriangle; i++) {
    if (indices[i] >= nvertex) {
      return err_set(msg, ERR_INVAL, "indices[%zu] = %u is out of range (%u vertices)", i,
                     indices[i], nvertex);
    }
  }

  // its parts, then a slot
  geom_t parts = {0};
  int h = mesh_parts(&parts, vertices, indices, ntriangle) < 0 ? ERR_NOMEM : geom_slot(s);
  if (h < 0) {
    mem_free(parts.parts);
    return err_set(msg, h, "scene_add_mesh: out of memory");
  }
  geom_t* rec = s->geoms[h];
  rec->is_prim = false;
  rec->nvertex = nvertex;
  rec->ntriangle = ntriangle;
  rec->parts = parts.parts;
  rec->nparts = parts.nparts;
  memcpy(rec->bounds, parts.bounds, sizeof rec->bounds);

  // triangle geometry with Embree-owned copies of the buffers
  uint64_t before = atomic_load(&s->dev->nerror);
  RTCGeometry g = rtcNewGeometry(s->dev->rtc, RTC_GEOMETRY_TYPE_TRIANGLE);
  if (!g) {
    geom_release_slot(s, h);
    int rc = device_check(s->dev, before, "scene_add_mesh", msg);
    return rc ? rc : err_set(msg, ERR_BACKEND, "scene_add_mesh: rtcNewGeometry failed");
  }
  float* vb = rtcSetNewGeometryBuffer(g, RTC_BUFFER_TYPE_VERTEX, 0, RTC_FORMAT_FLOAT3,
                                      3 * sizeof(float), nvertex);
  uint32_t* ib = rtcSetNewGeometryBuffer(g, RTC_BUFFER_TYPE_INDEX, 0, RTC_FORMAT_UINT3,
                                         3 * sizeof(uint32_t), ntriangle);
  if (!vb || !ib) {
    rtcReleaseGeometry(g);
    geom_release_slot(s, h);
    int rc = device_check(s->dev, before, "scene_add_mesh", msg);
    return rc == ERR_LIMIT ? rc
                           : err_set(msg, ERR_NOMEM, "scene_add_mesh: backend buffer allocation "
                                                     "failed");
  }
  memcpy(vb, vertices, 3 * sizeof(float) * (size_t)nvertex);
  memcpy(ib, indices, 3 * sizeof(uint32_t) * (size_t)ntriangle);
  return geom_build(s, h, g, before, "scene_add_mesh", msg);
}


void scene_geometry_shape(const scene_t* s, int geometry, scene_shape_t* out) {
  memset(out, 0, sizeof(*out));
  const geom_t* g = s->geoms[geometry];
  if (g->is_prim) {
    out->prim = (int)g->prim.kind;
    memcpy(out->size, g->prim.size, sizeof(out->size));
    return;
  }
  RTCGeometry rg = rtcGetGeometry(g->rtc, 0);
  out->vertices = rtcGetGeometryBufferData(rg, RTC_BUFFER_TYPE_VERTEX, 0);
  out->indices = rtcGetGeometryBufferData(rg, RTC_BUFFER_TYPE_INDEX, 0);
}


static void prim_bounds_cb(const struct RTCBoundsFunctionArguments* args) {
  const prim_t* p = args->geometryUserPtr;
  double lo[3], hi[3];
  prim_bounds(p, lo, hi);

  // Pad outward by a relative epsilon so that float rounding of the bounds never clips an
  // exact boundary hit; the box only steers traversal, the hit itself is computed exactly.
  double pad = 1e-6 * fmax(fmax(hi[0], hi[1]), hi[2]) + 1e-12;
  args->bounds_o->lower_x = (float)(lo[0] - pad);
  args->bounds_o->lower_y = (float)(lo[1] - pad);
  args->bounds_o->lower_z = (float)(lo[2] - pad);
  args->bounds_o->upper_x = (float)(hi[0] + pad);
  args->bounds_o->upper_y = (float)(hi[1] + pad);
  args->bounds_o->upper_z = (float)(hi[2] + pad);
}


// The ray of an Embree callback (struct-of-arrays, N lanes), lane i, in double. The offsets
// are those of the C++-only RTCRayN_* / RTCHitN_* accessors of rtcore_ray.h. Under packet
// tracing Embree calls the callbacks with N = the packet width and a valid mask (one lane set
// when it traces a packet's rays one by one); they serve every valid lane.
static void prim_ray(const float* ray, unsigned N, unsigned i, double o[3], double d[3],
                     double* tnear, double* tfar) {
  o[0] = ray[0 * N + i];
  o[1] = ray[1 * N + i];
  o[2] = ray[2 * N + i];
  *tnear = ray[3 * N + i];
  d[0] = ray[4 * N + i];
  d[1] = ray[5 * N + i];
  d[2] = ray[6 * N + i];
  *tfar = ray[8 * N + i];
}


static void prim_intersect_cb(const struct RTCIntersectFunctionNArguments* args) {
  const prim_t* p = args->geometryUserPtr;
  unsigned N = args->N;
  float* ray = (float*)args->rayhit;
  float* hit = ray + 12 * N;  // RTCRayHitN: 12 ray fields of N lanes, then the hit
  unsigned* hit_u = (unsigned*)hit;
  for (unsigned i = 0; i < N; i++) {
    if (!args->valid[i]) {
      continue;
    }
    double o[3], d[3], tnear, tfar, t, n[3];
    prim_ray(ray, N, i, o, d, &tnear, &tfar);
    if (!prim_intersect(p, o, d, tnear, tfar, &t, n)) {
      continue;
    }

    // rounding is monotonic, so t in [tnear, tfar] stays inside it as a float
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


static void prim_occluded_cb(const struct RTCOccludedFunctionNArguments* args) {
  const prim_t* p = args->geometryUserPtr;
  unsigned N = args->N;
  float* ray = (float*)args->ray;
  for (unsigned i = 0; i < N; i++) {
    if (!args->valid[i]) {
      continue;
    }
    double o[3], d[3], tnear, tfar, t, n[3];
    prim_ray(ray, N, i, o, d, &tnear, &tfar);
    if (prim_intersect(p, o, d, tnear, tfar, &t, n)) {
      ray[8 * N + i] = -INFINITY;
    }
  }
}


int scene_add_primitive(scene_t* s, scene_prim_kind_t kind, const double size[3],
                        err_msg_t* msg) {
  prim_t p;
  int rc = prim_init(&p, kind, size, msg);
  if (rc) {
    return rc;
  }

  // its bounds, then a slot; the record's address is the user pointer, stable for its lifetime
  horizon_box_t* part = mem_alloc(sizeof *part);
  int h = part ? geom_slot(s) : ERR_NOMEM;
  if (h < 0) {
    mem_free(part);
    return err_set(msg, h, "scene_add_primitive: out of memory");
  }
  geom_t* rec = s->geoms[h];
  rec->is_prim = true;
  rec->prim = p;
  rec->parts = part;
  prim_bounds(&p, rec->bounds, rec->bounds + 3);
  memcpy(rec->parts[0], rec->bounds, sizeof rec->bounds);
  rec->nparts = 1;

  // user geometry with one primitive
  uint64_t before = atomic_load(&s->dev->nerror);
  RTCGeometry g = rtcNewGeometry(s->dev->rtc, RTC_GEOMETRY_TYPE_USER);
  if (!g) {
    geom_release_slot(s, h);
    rc = device_check(s->dev, before, "scene_add_primitive", msg);
    return rc ? rc : err_set(msg, ERR_BACKEND, "scene_add_primitive: rtcNewGeometry failed");
  }
  rtcSetGeometryUserPrimitiveCount(g, 1);
  rtcSetGeometryUserData(g, &rec->prim);
  rtcSetGeometryBoundsFunction(g, prim_bounds_cb, NULL);
  rtcSetGeometryIntersectFunction(g, prim_intersect_cb);
  rtcSetGeometryOccludedFunction(g, prim_occluded_cb);
  return geom_build(s, h, g, before, "scene_add_primitive", msg);
}


static bool geom_valid(const scene_t* s, int h) {
  return h >= 0 && h < s->ngeom && s->geoms[h]->rtc;
}


void scene_remove_geometry(scene_t* s, int geometry) {
  if (!geom_valid(s, geometry)) {
    return;
  }
  rtcReleaseScene(s->geoms[geometry]->rtc);
  geom_release_slot(s, geometry);
}


//---------------- Instances

static bool inst_valid(const scene_t* s, int h) {
  return h >= 0 && h < s->ninst && s->insts[h].rtc && !s->insts[h].flat_root;
}


// One time step of an instance. Embree's quaternion decomposition is M = T R S with S = scale
// then shift: x -> T + R (shift + scale x); between time steps it lerps T and S and slerps R.
static void inst_step(inst_t* in, unsigned k, const double q[4], const double shift[3],
                      const double t[3]) {
  struct RTCQuaternionDecomposition qd;
  rtcInitQuaternionDecomposition(&qd);
  rtcQuaternionDecompositionSetScale(&qd, (float)in->scale[0], (float)in->scale[1],
                                     (float)in->scale[2]);
  rtcQuaternionDecompositionSetShift(&qd, (float)shift[0], (float)shift[1], (float)shift[2]);
  rtcQuaternionDecompositionSetQuaternion(&qd, (float)q[0], (float)q[1], (float)q[2],
                                          (float)q[3]);
  rtcQuaternionDecompositionSetTranslation(&qd, (float)t[0], (float)t[1], (float)t[2]);
  rtcSetGeometryTransformQuaternion(in->rtc, k, &qd);
}


// Write an instance's time steps. An object with local pose (p_l, q_l) on a body at
// (p_b(s), q_b(s)) is at x -> p_b + R(q_b) (p_l + R(q_l) scale x)
//                            = p_b + R(q_b q_l) (R(q_l)^-1 p_l + scale x):
// T = the body origin (lerped by Embree), R = q_b q_l (slerped: slerp(q_b0 q_l, q_b1 q_l, s)
// = slerp(q_b0, q_b1, s) q_l since right-multiplying by a unit quaternion keeps every angle),
// shift = R(q_l)^-1 p_l, the same at both ends. The object thus moves rigidly with its body.
// An instance that moves without turning takes two matrices instead (the same rotation; T
// lerped). A static instance has one time step (Embree keeps it out of the slower motion-blur
// hierarchy) and a matrix composed in double: Embree's float quaternion-to-matrix conversion
// moved rays by micrometres (a ray grazing a crease of a rotated mesh passed it by).
static void inst_write(inst_t* in, const pose_t* local, const pose_t* b0, const pose_t* b1,
                       int moving) {
  if (moving != in->moving) {
    rtcSetGeometryTimeStepCount(in->rtc, moving ? 2 : 1);
    in->moving = moving;
  }
  double r[9];
  xform_quat_to_mat(in->q1, r);
  for (int i = 0; i < 9; i++) {
    in->nmat[i] = r[i] / in->scale[i % 3];
  }
  in->turning = memcmp(in->q0, in->q1, sizeof in->q0) != 0;
  if (!moving) {
    pose_t w = b1 ? xform_compose(b1, local) : *local;
    float m[12];  // column-major 3x4: R S | p
    for (int i = 0; i < 9; i++) {
      in->world[4 * (i / 3) + i % 3] = r[i] * in->scale[i % 3];
      m[3 * (i % 3) + i / 3] = (float)(r[i] * in->scale[i % 3]);
    }
    for (int i = 0; i < 3; i++) {
      in->world[4 * i + 3] = w.p[i];
      m[9 + i] = (float)w.p[i];
    }
    rtcSetGeometryTransform(in->rtc, 0, RTC_FORMAT_FLOAT3X4_COLUMN_MAJOR, m);
  } else if (!in->turning) {
    // moving without turning: two matrices of one rotation (Embree bounds a linear motion at
    // once, a quaternion motion by sampling it: a top-level commit of 100 moving instances took
    // 0.8 ms as quaternions, 0.2 ms as matrices)
    float m[12];
    for (int i = 0; i < 9; i++) {
      m[3 * (i % 3) + i / 3] = (float)(r[i] * in->scale[i % 3]);
      in->world0[4 * (i / 3) + i % 3] = in->world[4 * (i / 3) + i % 3] = r[i] * in->scale[i % 3];
    }
    for (unsigned k = 0; k < 2; k++) {
      pose_t w = xform_compose(k ? b1 : b0, local);
      for (int i = 0; i < 3; i++) {
        m[9 + i] = (float)w.p[i];
        (k ? in->world : in->world0)[4 * i + 3] = w.p[i];
      }
      rtcSetGeometryTransform(in->rtc, k, RTC_FORMAT_FLOAT3X4_COLUMN_MAJOR, m);
    }
  } else {
    double ql_inv[4], shift[3];
    xform_quat_conj(local->q, ql_inv);
    xform_quat_rotate(ql_inv, local->p, shift);
    memcpy(in->t0, b0->p, sizeof in->t0);
    memcpy(in->t1, b1->p, sizeof in->t1);
    in->shift_len = xform_norm3(shift);
    inst_step(in, 0, in->q0, shift, b0->p);
    inst_step(in, 1, in->q1, shift, b1->p);
  }
  rtcCommitGeometry(in->rtc);
}


// A free instance record, zeroed (allocating one if needed); returns its handle or ERR_NOMEM.
static int inst_slot(scene_t* s) {
  int h;
  if (s->free_inst >= 0) {
    h = s->free_inst;
    s->free_inst = s->insts[h].next_free;
  } else {
    if (s->ninst == s->cap_inst) {
      int cap = s->cap_inst ? 2 * s->cap_inst : 64;
      inst_t* t = mem_realloc(s->insts, (size_t)cap * sizeof *t);
      if (!t) {
        return ERR_NOMEM;
      }
      s->insts = t;
      s->cap_inst = cap;
    }
    h = s->ninst++;
  }
  memset(&s->insts[h], 0, sizeof s->insts[h]);
  return h;
}


int scene_add_instance(scene_t* s, int geometry, const double scale[3], uint32_t object_id,
                       uint32_t label, err_msg_t* msg) {
  // arguments
  if (!geom_valid(s, geometry)) {
    return err_set(msg, ERR_NOTFOUND, "geometry = %d is not a geometry of this scene", geometry);
  }
  for (int i = 0; i < 3; i++) {
    if (!isfinite(scale[i]) || scale[i] == 0.0) {
      return err_set(msg, ERR_INVAL, "scale[%d] = %g must be finite and non-zero", i, scale[i]);
    }
  }

  // slot
  int h = inst_slot(s);
  if (h < 0) {
    return err_set(msg, h, "scene_add_instance: out of memory");
  }
  inst_t* in = &s->insts[h];
  in->geometry = geometry;
  in->object_id = object_id;
  in->label = label;
  memcpy(in->scale, scale, sizeof in->scale);
  in->is_prim = s->geoms[geometry]->is_prim;
  in->q0[0] = in->q1[0] = 1.0;

  // static instance at the identity pose; its Embree ID is the handle
  uint64_t before = atomic_load(&s->dev->nerror);
  in->rtc = rtcNewGeometry(s->dev->rtc, RTC_GEOMETRY_TYPE_INSTANCE);
  if (in->rtc) {
    pose_t id = xform_identity();
    rtcSetGeometryInstancedScene(in->rtc, s->geoms[geometry]->rtc);
    rtcSetGeometryTimeStepCount(in->rtc, 1);
    inst_write(in, &id, NULL, NULL, 0);
    rtcAttachGeometryByID(s->top, in->rtc, (unsigned)h);
    s->still_dirty = true;
  }
  int rc = device_check(s->dev, before, "scene_add_instance", msg);
  if (!in->rtc || rc) {
    if (in->rtc) {
      rtcReleaseGeometry(in->rtc);
      in->rtc = NULL;
    }
    in->next_free = s->free_inst;
    s->free_inst = h;
    return rc ? rc : err_set(msg, ERR_BACKEND, "scene_add_instance: rtcNewGeometry failed");
  }
  return h;
}


void scene_remove_instance(scene_t* s, int instance) {
  if (!inst_valid(s, instance)) {
    return;
  }
  inst_t* in = &s->insts[instance];
  rtcDetachGeometry(s->top, (unsigned)instance);
  rtcReleaseGeometry(in->rtc);
  in->rtc = NULL;
  s->flat_dirty |= in->flat;
  s->still_dirty |= !in->moving;
  in->flat = false;
  in->next_free = s->free_inst;
  s->free_inst = instance;
}


void scene_set_instance_pose(scene_t* s, int instance, const pose_t* local,
                             const pose_t* body_start, const pose_t* body_end) {
  if (!inst_valid(s, instance)) {
    return;
  }
  inst_t* in = &s->insts[instance];
  const pose_t* b0 = body_start && body_end ? body_start : NULL;
  const pose_t* b1 = b0 ? body_end : NULL;

  // world orientations (unit: products of unit quaternions), the start on the end's hemisphere
  // so that Embree's slerp takes the shortest arc, as xform_slerp does
  if (b0) {
    xform_quat_mul(b0->q, local->q, in->q0);
    xform_quat_mul(b1->q, local->q, in->q1);
  } else {
    memcpy(in->q0, local->q, sizeof in->q0);
    memcpy(in->q1, local->q, sizeof in->q1);
  }
  double c = in->q0[0] * in->q1[0] + in->q0[1] * in->q1[1] + in->q0[2] * in->q1[2] +
             in->q0[3] * in->q1[3];
  if (c < 0.0) {
    for (int i = 0; i < 4; i++) {
      in->q0[i] = -in->q0[i];
    }
  }
  int moving = b0 && (memcmp(b0->p, b1->p, sizeof b0->p) != 0 ||
                      memcmp(in->q0, in->q1, sizeof in->q0) != 0);
  double was[12];
  memcpy(was, in->world, sizeof was);
  int was_moving = in->moving;
  inst_write(in, local, b0, b1, moving);
  int posed = moving || was_moving || memcmp(was, in->world, sizeof was) != 0;
  s->still_dirty |= posed && !(moving && was_moving);   // a static instance's bounds changed
  if (in->flat && posed) {
    // posed again (the same pose again changes nothing): an instance from now on, and out of
    // the flat scene at the commit (flat_update)
    in->flat_never = true;
  }
  s->instance_updates++;
}


//---------------- The flat scene

// Most triangles the flat scene holds (its build and memory grow with them); static objects
// beyond stay instances.
#define FLAT_MAX_TRIANGLES (2u << 20)

// Backend bytes per flat triangle, for the memory budget: the hierarchy and its copies of the
// triangles (measured: about 70 with robust traversal), with margin.
#define FLAT_BYTES_PER_TRIANGLE 128

// Commits that new static objects wait to be flattened while they are fewer than a quarter of
// the flat triangles (each flattening rebuilds the whole flat scene: so a scene built piece by
// piece is rebuilt O(log n) times, and objects created one per step join in batches).
#define FLAT_WAIT 32

// Whether an instance belongs in the flat scene: a triangle mesh fixed in the world.
static bool flat_eligible(const scene_t* s, const inst_t* in) {
  return in->rtc && !in->flat_root && !in->flat_never && !in->is_prim && in->body_id == 0 &&
         !in->moving && s->geoms[in->geometry]->ntriangle <= FLAT_MAX_TRIANGLES;
}


// Object h's triangles in world coordinates (the vertices transformed in double, then rounded
// once) as geometry h of flat.
static bool flat_add(scene_t* s, RTCScene flat, int h) {
  const inst_t* in = &s->insts[h];
  const geom_t* gm = s->geoms[in->geometry];
  RTCGeometry mesh = rtcGetGeometry(gm->rtc, 0);
  const float* v = rtcGetGeometryBufferData(mesh, RTC_BUFFER_TYPE_VERTEX, 0);
  const uint32_t* idx = rtcGetGeometryBufferData(mesh, RTC_BUFFER_TYPE_INDEX, 0);
  RTCGeometry g = rtcNewGeometry(s->dev->rtc, RTC_GEOMETRY_TYPE_TRIANGLE);
  if (!g) {
    return false;
  }
  float* vb = rtcSetNewGeometryBuffer(g, RTC_BUFFER_TYPE_VERTEX, 0, RTC_FORMAT_FLOAT3,
                                      3 * sizeof(float), gm->nvertex);
  uint32_t* ib = rtcSetNewGeometryBuffer(g, RTC_BUFFER_TYPE_INDEX, 0, RTC_FORMAT_UINT3,
                                         3 * sizeof(uint32_t), gm->ntriangle);
  if (!vb || !ib) {
    rtcReleaseGeometry(g);
    return false;
  }
  const double* m = in->world;
  for (size_t i = 0; i < gm->nvertex; i++) {
    double x = v[3 * i], y = v[3 * i + 1], z = v[3 * i + 2];
    for (int a = 0; a < 3; a++) {
      vb[3 * i + a] = (float)(m[4 * a] * x + m[4 * a + 1] * y + m[4 * a + 2] * z + m[4 * a + 3]);
    }
  }
  memcpy(ib, idx, 3 * sizeof(uint32_t) * (size_t)gm->ntriangle);
  rtcCommitGeometry(g);
  rtcAttachGeometryByID(flat, g, (unsigned)h);
  rtcReleaseGeometry(g);
  return true;
}


// A signature of the objects a flat scene would hold now (eligible, in handle order, as many
// as fit); never 0.
static uint64_t flat_set(const scene_t* s) {
  uint64_t sig = 1469598103934665603ull, tris = 0;
  for (int h = 0; h < s->ninst; h++) {
    const inst_t* in = &s->insts[h];
    if (flat_eligible(s, in) && tris + s->geoms[in->geometry]->ntriangle <= FLAT_MAX_TRIANGLES) {
      tris += s->geoms[in->geometry]->ntriangle;
      sig = (sig ^ (uint64_t)h) * 1099511628211ull;
    }
  }
  return sig ? sig : 1;
}


// Every object an instance, after a flat scene that could not be built; the set is not tried
// again until it changes.
static void flat_cancel(scene_t* s) {
  for (int h = 0; h < s->ninst; h++) {
    s->insts[h].flat = false;
  }
  s->flat_refused = flat_set(s);
  s->flat_refused_budget = atomic_load(&s->dev->budget);
}


// Rebuild the flat scene from the eligible objects (in handle order, up to FLAT_MAX_TRIANGLES).
// Every object is an instance again first; if the backend fails (out of its memory budget),
// they all stay instances.
static void flat_rebuild(scene_t* s) {
  for (int h = 0; h < s->ninst; h++) {
    inst_t* in = &s->insts[h];
    if (in->flat) {
      rtcEnableGeometry(in->rtc);
      in->flat = false;
    }
  }

  // the old scene goes with its instance (which holds a reference to it) before a new one is
  // built: the two never take memory at once
  if (s->flat_slot >= 0) {
    inst_t* root = &s->insts[s->flat_slot];
    rtcDetachGeometry(s->top, (unsigned)s->flat_slot);
    rtcReleaseGeometry(root->rtc);
    root->rtc = NULL;
    root->flat_root = false;
    root->next_free = s->free_inst;
    s->free_inst = s->flat_slot;
    s->flat_slot = -1;
  }
  if (s->flat) {
    rtcReleaseScene(s->flat);
    s->flat = NULL;
  }
  s->flat_tris = 0;
  s->flat_objects = 0;
  s->flat_dirty = false;
  s->flat_wait = 0;

  // the objects; none when the backend's memory budget could not hold them
  uint64_t tris = 0, verts = 0;
  for (int h = 0; h < s->ninst; h++) {
    inst_t* in = &s->insts[h];
    const geom_t* gm = flat_eligible(s, in) ? s->geoms[in->geometry] : NULL;
    if (gm && tris + gm->ntriangle <= FLAT_MAX_TRIANGLES) {
      in->flat = true;   // for now: below, only if the whole scene is built
      tris += gm->ntriangle;
      verts += gm->nvertex;
    }
  }
  int64_t budget = atomic_load(&s->dev->budget);
  if (tris == 0 || (budget > 0 && atomic_load(&s->dev->bytes) +
                                      (int64_t)(FLAT_BYTES_PER_TRIANGLE * tris + 12 * verts) >
                                      budget)) {
    flat_cancel(s);
    return;
  }

  // the scene
  s->flat_builds++;
  uint64_t before = atomic_load(&s->dev->nerror);
  RTCScene flat = rtcNewScene(s->dev->rtc);
  bool ok = flat != NULL;
  if (ok) {
    rtcSetSceneFlags(flat, RTC_SCENE_FLAG_ROBUST);
  }
  for (int h = 0; h < s->ninst && ok; h++) {
    if (s->insts[h].flat) {
      ok = flat_add(s, flat, h);
    }
  }
  if (ok) {
    rtcCommitScene(flat);
  }

  // its instance
  if (ok && s->flat_slot < 0) {
    int h = inst_slot(s);
    RTCGeometry g = h >= 0 ? rtcNewGeometry(s->dev->rtc, RTC_GEOMETRY_TYPE_INSTANCE) : NULL;
    if (g) {
      static const float id[12] = {1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0};
      rtcSetGeometryTimeStepCount(g, 1);
      rtcSetGeometryTransform(g, 0, RTC_FORMAT_FLOAT3X4_COLUMN_MAJOR, id);
      rtcDisableGeometry(g);   // until it has a scene
      rtcAttachGeometryByID(s->top, g, (unsigned)h);
      s->insts[h].rtc = g;
      s->insts[h].flat_root = true;
      s->flat_slot = h;
    } else if (h >= 0) {
      s->insts[h].next_free = s->free_inst;
      s->free_inst = h;
    }
  }
  if (!ok || s->flat_slot < 0 || atomic_load(&s->dev->nerror) != before) {
    (void)rtcGetDeviceError(s->dev->rtc);   // the commit's own check starts afresh
    flat_cancel(s);
    if (flat) {
      rtcReleaseScene(flat);
    }
    return;
  }
  RTCGeometry root = s->insts[s->flat_slot].rtc;
  rtcSetGeometryInstancedScene(root, flat);
  rtcCommitGeometry(root);
  rtcEnableGeometry(root);
  s->flat = flat;
  s->flat_tris = tris;
  for (int h = 0; h < s->ninst; h++) {
    if (s->insts[h].flat) {
      rtcDisableGeometry(s->insts[h].rtc);
      s->flat_objects++;
    }
  }
}


// Before a commit: rebuild the flat scene when a flat object left it, or when new static
// objects have come (at once when they are many, else after FLAT_WAIT commits).
static void flat_update(scene_t* s) {
  // pending: the triangles of the eligible objects a rebuild would add (in handle order, as
  // flat_rebuild packs them: those beyond FLAT_MAX_TRIANGLES stay out and wait for nothing)
  uint64_t pending = 0, tris = 0;
  bool left = s->flat_dirty;
  for (int h = 0; h < s->ninst; h++) {
    const inst_t* in = &s->insts[h];
    bool eligible = flat_eligible(s, in);
    left |= in->flat && !eligible;
    uint32_t nt = eligible ? s->geoms[in->geometry]->ntriangle : 0;
    if (eligible && tris + nt <= FLAT_MAX_TRIANGLES) {
      tris += nt;
      pending += in->flat ? 0 : nt;
    }
  }
  if ((!left && pending == 0) ||
      (s->flat_refused && s->flat_refused == flat_set(s) &&
       s->flat_refused_budget == atomic_load(&s->dev->budget))) {
    s->flat_wait = 0;
    return;
  }
  if (!left && 4 * pending < s->flat_tris && ++s->flat_wait < FLAT_WAIT) {
    return;
  }
  s->flat_refused = 0;
  flat_rebuild(s);
}


//---------------- World bounds for horizons

// The world box of object-space box b under the row-major 3 x 4 matrix m.
static void box_transform(const double* b, const double* m, double* out) {
  for (int a = 0; a < 3; a++) {
    double c = m[4 * a + 3], e = 0.0;
    for (int j = 0; j < 3; j++) {
      c += m[4 * a + j] * 0.5 * (b[j] + b[3 + j]);
      e += fabs(m[4 * a + j]) * 0.5 * (b[3 + j] - b[j]);
    }
    out[a] = c - e;
    out[3 + a] = c + e;
  }
}


// Room for one more box in *arr; NULL when out of memory.
static double* box_push(horizon_box_t** arr, size_t* n, size_t* cap) {
  if (*n == *cap) {
    size_t c = *cap ? 2 * *cap : 256;
    horizon_box_t* t = mem_realloc(*arr, c * sizeof *t);
    if (!t) {
      return NULL;
    }
    *arr = t;
    *cap = c;
  }
  return (*arr)[(*n)++];
}


// The world box that holds a moving instance over the whole step: its box at both ends (it
// moves without turning: a box sliding along a line stays within their union), or (turning)
// its origin's path widened by the farthest any of its points can be from it.
static void moving_box(const scene_t* s, const inst_t* in, double* out) {
  const double* b = s->geoms[in->geometry]->bounds;
  if (!in->turning) {
    double e[6];
    box_transform(b, in->world0, out);
    box_transform(b, in->world, e);
    for (int a = 0; a < 3; a++) {
      out[a] = fmin(out[a], e[a]);
      out[3 + a] = fmax(out[3 + a], e[3 + a]);
    }
    return;
  }
  double r2 = 0.0;
  for (int a = 0; a < 3; a++) {
    double x = fmax(fabs(b[a]), fabs(b[3 + a])) * fabs(in->scale[a]);
    r2 += x * x;
  }
  double r = in->shift_len + sqrt(r2);
  for (int a = 0; a < 3; a++) {
    out[a] = fmin(in->t0[a], in->t1[a]) - r;
    out[3 + a] = fmax(in->t0[a], in->t1[a]) + r;
  }
}


// The world boxes of the committed instances: the static ones' parts when one changed, the
// moving ones always.
static void boxes_update(scene_t* s) {
  bool ok = true;
  if (s->still_dirty || !s->boxes_ok) {
    s->nstill = 0;
    for (int h = 0; h < s->ninst && ok; h++) {
      const inst_t* in = &s->insts[h];
      const geom_t* g = inst_valid(s, h) && !in->moving ? s->geoms[in->geometry] : NULL;
      for (uint32_t p = 0; g && p < g->nparts && ok; p++) {
        double* out = box_push(&s->still_boxes, &s->nstill, &s->cap_still);
        ok = out != NULL;
        if (ok) {
          box_transform(g->parts[p], in->world, out);
        }
      }
    }
    s->still_dirty = false;
  }
  s->nmoving = 0;
  for (int h = 0; h < s->ninst && ok; h++) {
    if (inst_valid(s, h) && s->insts[h].moving) {
      double* out = box_push(&s->moving_boxes, &s->nmoving, &s->cap_moving);
      ok = out != NULL;
      if (ok) {
        moving_box(s, &s->insts[h], out);
      }
    }
  }
  s->boxes_ok = ok;
}


size_t scene_horizon_boxes(const scene_t* s) {
  return s->nstill + s->nmoving;
}


void scene_horizon(const scene_t* s, const double lo[3], const double hi[3],
                   scene_horizon_t* out) {
  if (s->boxes_ok) {
    horizon_build((const horizon_box_t*)s->still_boxes, s->nstill,
                  (const horizon_box_t*)s->moving_boxes, s->nmoving, lo, hi, out);
    return;
  }
  horizon_build(NULL, 0, NULL, 0, lo, hi, out);
  for (unsigned i = 0; i < HORIZON_BINS; i++) {
    out->sin_el[i] = 1.0;   // nothing is culled
  }
  out->sin_low = 1.0;
}


int scene_commit(scene_t* s, err_msg_t* msg) {
  flat_update(s);
  boxes_update(s);
  uint64_t before = atomic_load(&s->dev->nerror);
  rtcCommitScene(s->top);
  s->commits++;
  return device_check(s->dev, before, "scene_commit", msg);
}


//---------------- Tracing

// Rays per Embree packet. 8: on bench_raycast's lidar-ordered rays, 8-ray packets beat 16-ray
// ones on AVX-512 (the 16 consecutive rays of a column span twice the angle) and 4-ray ones
// everywhere; Embree runs 8-wide packets natively from AVX on. Packets are fixed index ranges
// of the caller's array, so which rays share a packet never depends on the thread that traces
// them.
// Packet widths: scene_trace's (8) and scene_trace_coherent16's (16).
enum { LANES = 8, WIDE = 16 };

// A packet in Embree's RTCRayHit8 or RTCRayHit16 layout, 20 fields of W lanes each (the ray:
// org xyz, tnear, dir xyz, time, tfar, mask, id, flags; the hit: Ng xyz, u, v, primID, geomID,
// instID[0]).
enum {
  F_ORG_X, F_ORG_Y, F_ORG_Z, F_TNEAR, F_DIR_X, F_DIR_Y, F_DIR_Z, F_TIME, F_TFAR, F_MASK, F_ID,
  F_FLAGS, F_NG_X, F_NG_Y, F_NG_Z, F_U, F_V, F_PRIM, F_GEOM, F_INST, F_COUNT
};

typedef union packet {
  struct RTCRayHit8 rh;   // sizes and aligns the storage
  struct RTCRayHit16 rh16;
  float f[F_COUNT * WIDE];
  unsigned u[F_COUNT * WIDE];
} packet_t;

_Static_assert(sizeof(struct RTCRayHit8) == F_COUNT * LANES * sizeof(float), "RTCRayHit8 size");
_Static_assert(sizeof(struct RTCRayHit16) == F_COUNT * WIDE * sizeof(float), "RTCRayHit16 size");

// Index of lane k of a field in packet_t.f / packet_t.u, for a packet of W lanes.
#define LANE(field, k) ((field) * W + (k))


// The object that lane k of an intersected packet of W lanes hit (NULL: none). A hit in the flat
// scene is on the object whose handle is its geometry ID there.
static inline const inst_t* hit_inst(const scene_t* s, const packet_t* pk, unsigned W,
                                     unsigned k) {
  unsigned id = pk->u[LANE(F_INST, k)], geom = pk->u[LANE(F_GEOM, k)];
  if (geom == RTC_INVALID_GEOMETRY_ID) {
    return NULL;
  }
  if (s->flat_slot >= 0 && id == (unsigned)s->flat_slot) {
    id = geom;
  }
  return id < (unsigned)s->ninst ? &s->insts[id] : NULL;
}


// The world normal (not unit, either side) of lane k of an intersected packet of W lanes that
// hit instance `in`.
static inline void hit_normal(const inst_t* in, const packet_t* pk, unsigned W, unsigned k,
                              double n[3]) {
  // Embree reports the instanced hit's normal in object space; the inverse transpose of
  // R(q(s)) S is R(q(s)) S^-1 (the shift moves points, not normals): a fixed matrix for a
  // static instance, and (16-wide packets only, so that scene_trace keeps its roundings) for
  // one that moves without turning
  double ng[3] = {pk->f[LANE(F_NG_X, k)], pk->f[LANE(F_NG_Y, k)], pk->f[LANE(F_NG_Z, k)]};
  if (in->flat) {
    memcpy(n, ng, sizeof ng);   // the flat scene is in world coordinates
  } else if (in->moving && (W != WIDE || in->turning)) {
    double q[4];
    double nobj[3] = {ng[0] / in->scale[0], ng[1] / in->scale[1], ng[2] / in->scale[2]};
    xform_slerp(in->q0, in->q1, pk->f[LANE(F_TIME, k)], q);
    xform_quat_rotate(q, nobj, n);
  } else {
    const double* m = in->nmat;
    n[0] = m[0] * ng[0] + m[1] * ng[1] + m[2] * ng[2];
    n[1] = m[3] * ng[0] + m[4] * ng[1] + m[5] * ng[2];
    n[2] = m[6] * ng[0] + m[7] * ng[1] + m[8] * ng[2];
  }
}


// The hit of lane k of an intersected packet of W lanes into out.
static inline void hit_fill(const scene_t* s, const scene_ray_t* r, const packet_t* pk,
                            unsigned W, unsigned k, scene_hit_t* out) {
  memset(out, 0, sizeof *out);
  out->distance = INFINITY;
  const inst_t* in = hit_inst(s, pk, W, k);
  if (!in) {
    return;
  }
  double n[3];
  hit_normal(in, pk, W, k, n);
  double len = xform_norm3(n);
  double facing = n[0] * r->dir[0] + n[1] * r->dir[1] + n[2] * r->dir[2];
  double f = len > 0.0 ? (facing > 0.0 ? -1.0 : 1.0) / len : 0.0;

  // the instance keeps t in the world ray's parametrisation: with a unit direction it is the
  // distance
  out->distance = pk->f[LANE(F_TFAR, k)];
  out->normal[0] = f * n[0];
  out->normal[1] = f * n[1];
  out->normal[2] = f * n[2];
  out->object_id = in->object_id;
  out->label = in->label;
  out->primitive = in->is_prim ? 0 : pk->u[LANE(F_PRIM, k)];
}


// Cosine of the widest angle between a packet's directions and its first one for which it is
// traced as a packet (about 8 degrees: a lidar's neighbouring rays are well inside it).
#define PACKET_COHERENT_COS 0.99f

// Farthest the origins of a 16-wide packet may be from its first one (per axis, m).
#define PACKET_COHERENT_ORIGIN 0.1f


// Intersect an assembled packet of W lanes (n of them used; valid: the lanes to trace)
// against the committed top level: as one coherent packet when its valid rays are coherent
// (see trace_packet), else ray by ray. known: -1, or whether the packet is coherent when every
// lane is valid (the test below, made by the caller).
__attribute__((always_inline)) static inline void packet_intersect(
    const scene_t* s, packet_t* pk, const int* valid, unsigned n, const unsigned W, int known) {
  const float* f = pk->f;

  // coherence: the valid lanes against the first valid one
  int first = known < 0 ? -1 : 0;
  bool coherent = known != 0;
  for (unsigned k = 0; known < 0 && k < n; k++) {
    if (!valid[k]) {
      continue;
    }
    if (first < 0) {
      first = (int)k;
      continue;
    }
    unsigned j = (unsigned)first;
    float c = f[LANE(F_DIR_X, k)] * f[LANE(F_DIR_X, j)] +
              f[LANE(F_DIR_Y, k)] * f[LANE(F_DIR_Y, j)] +
              f[LANE(F_DIR_Z, k)] * f[LANE(F_DIR_Z, j)];
    if (W == WIDE) {
      // a lidar's tile: origins may move a little between its columns (a sensor on a vehicle);
      // Embree's packet frustum spans the origins
      coherent &= (c >= PACKET_COHERENT_COS) &
                  (fabsf(f[LANE(F_ORG_X, k)] - f[LANE(F_ORG_X, j)]) <= PACKET_COHERENT_ORIGIN) &
                  (fabsf(f[LANE(F_ORG_Y, k)] - f[LANE(F_ORG_Y, j)]) <= PACKET_COHERENT_ORIGIN) &
                  (fabsf(f[LANE(F_ORG_Z, k)] - f[LANE(F_ORG_Z, j)]) <= PACKET_COHERENT_ORIGIN);
    } else {
      coherent &= (c >= PACKET_COHERENT_COS) & (f[LANE(F_ORG_X, k)] == f[LANE(F_ORG_X, j)]) &
                  (f[LANE(F_ORG_Y, k)] == f[LANE(F_ORG_Y, j)]) &
                  (f[LANE(F_ORG_Z, k)] == f[LANE(F_ORG_Z, j)]);
    }
  }

  // intersect
  if (first >= 0) {
    struct RTCIntersectContext ctx;
    rtcInitIntersectContext(&ctx);
    if (coherent) {
      ctx.flags = RTC_INTERSECT_CONTEXT_FLAG_COHERENT;
      if (W == WIDE) {
        rtcIntersect16(valid, s->top, &ctx, &pk->rh16);
      } else {
        rtcIntersect8(valid, s->top, &ctx, &pk->rh);
      }
    } else {
      _Alignas(64) int one[WIDE] = {0};
      for (unsigned k = 0; k < n; k++) {
        if (valid[k]) {
          one[k] = -1;
          if (W == WIDE) {
            rtcIntersect16(one, s->top, &ctx, &pk->rh16);
          } else {
            rtcIntersect8(one, s->top, &ctx, &pk->rh);
          }
          one[k] = 0;
        }
      }
    }
  }
}


// Up to LANES rays (1 <= n <= LANES) as one packet against the committed top level. A ray with
// tmax <= 0 or NaN is a miss and takes no lane; unused lanes also get an empty interval
// [0, -inf] so that no Embree code path traces them. Rays in firing order (a lidar's) start
// from one point and point within PACKET_COHERENT_COS of the first: those are traced as a
// packet with Embree's coherent (frustum) traversal, ~15 % faster on bench_raycast. Others,
// which would diverge at once, go one by one: packet calls with one lane valid each, which
// Embree traces with its single-ray traversal and the same kernels as the lane in a full
// packet (rtcIntersect1 transforms rays into instances differently, so a ray would not get bit
// for bit the hit it gets in a packet).
// W is LANES (rtcIntersect8) or WIDE (rtcIntersect16); both give each lane the same floats.
__attribute__((always_inline)) static inline void trace_packet(
    const scene_t* s, const scene_ray_t* r, scene_hit_t* out, unsigned n, const unsigned W) {
  // rays (float); the time is clamped into the instances' [0, 1] range
  _Alignas(64) int valid[WIDE];
  _Alignas(64) packet_t pk;
  float* f = pk.f;
  unsigned* u = pk.u;
  for (unsigned k = 0; k < n; k++) {
    const scene_ray_t* rk = &r[k];
    double t = rk->time;
    bool on = rk->tmax > 0.0;
    valid[k] = on ? -1 : 0;
    f[LANE(F_ORG_X, k)] = (float)rk->origin[0];
    f[LANE(F_ORG_Y, k)] = (float)rk->origin[1];
    f[LANE(F_ORG_Z, k)] = (float)rk->origin[2];
    f[LANE(F_TNEAR, k)] = 0.0f;
    f[LANE(F_DIR_X, k)] = (float)rk->dir[0];
    f[LANE(F_DIR_Y, k)] = (float)rk->dir[1];
    f[LANE(F_DIR_Z, k)] = (float)rk->dir[2];
    f[LANE(F_TIME, k)] = (float)(t > 0.0 ? (t < 1.0 ? t : 1.0) : 0.0);
    f[LANE(F_TFAR, k)] = on ? (float)rk->tmax : -INFINITY;
    u[LANE(F_MASK, k)] = 0xFFFFFFFFu;
    u[LANE(F_ID, k)] = k;
    u[LANE(F_FLAGS, k)] = 0;
    u[LANE(F_GEOM, k)] = RTC_INVALID_GEOMETRY_ID;
    u[LANE(F_INST, k)] = RTC_INVALID_GEOMETRY_ID;
  }
  for (unsigned k = n; k < W; k++) {
    valid[k] = 0;
    for (unsigned fi = 0; fi < F_COUNT; fi++) {
      u[LANE(fi, k)] = 0;
    }
    f[LANE(F_DIR_X, k)] = 1.0f;
    f[LANE(F_TFAR, k)] = -INFINITY;
    u[LANE(F_GEOM, k)] = RTC_INVALID_GEOMETRY_ID;
    u[LANE(F_INST, k)] = RTC_INVALID_GEOMETRY_ID;
  }

  packet_intersect(s, &pk, valid, n, W, -1);

  // hits
  for (unsigned k = 0; k < n; k++) {
    hit_fill(s, &r[k], &pk, W, k, &out[k]);
  }
}


// trace_packet of a full 16-wide packet on the AVX2 path (below, with scene_trace_rays').
__attribute__((target("avx2"))) static bool simd_packet16(const scene_t* s,
                                                          const scene_ray_t* r,
                                                          scene_hit_t* out);

// A full packet in columns on the AVX2 path (below): simd_packet16 of the same rays in rows.
__attribute__((target("avx2"))) static void simd_packet_cols(const scene_t* s,
                                                             const scene_packet_t* in,
                                                             unsigned off,
                                                             scene_packet_hits_t* out);

// The rays in packets of `width`, the last one partial. Always inlined, so that each caller's
// constant width specialises the packet code.
__attribute__((always_inline)) static inline void trace_packets(
    const scene_t* s, const scene_ray_t* rays, scene_hit_t* hits, size_t n, unsigned width) {
  // Embree wants flush-to-zero and denormals-are-zero in tracing threads; set them for this
  // call only, so the caller's own double arithmetic keeps its rounding mode afterwards.
  unsigned csr = _mm_getcsr();
  _MM_SET_FLUSH_ZERO_MODE(_MM_FLUSH_ZERO_ON);
  _MM_SET_DENORMALS_ZERO_MODE(_MM_DENORMALS_ZERO_ON);
  for (size_t i = 0; i < n; i += width) {
    unsigned m = (unsigned)(n - i < width ? n - i : width);
    if (width == WIDE && m == WIDE && s->dev->simd && simd_packet16(s, rays + i, hits + i)) {
      continue;
    }
    trace_packet(s, rays + i, hits + i, m, width);
  }
  _mm_setcsr(csr);

  // Tracing threads share the scene read-only; the counter is the one field they write.
  atomic_fetch_add(&((scene_t*)s)->rays_traced, n);
}


void scene_trace(const scene_t* s, const scene_ray_t* rays, scene_hit_t* hits, size_t n) {
  trace_packets(s, rays, hits, n, LANES);
}


void scene_trace_coherent16(const scene_t* s, const scene_ray_t* rays, scene_hit_t* hits,
                            size_t n) {
  trace_packets(s, rays, hits, n, WIDE);
}


void scene_counters(const scene_t* s, scene_counters_t* out) {
  out->geometry_builds = s->geometry_builds;
  out->instance_updates = s->instance_updates;
  out->commits = s->commits;
  out->flat_builds = s->flat_builds;
  out->flat_objects = s->flat_objects;
  out->rays_traced = atomic_load(&((scene_t*)s)->rays_traced);
  out->rays_culled = atomic_load(&((scene_t*)s)->rays_culled);
  scene_device_counters(s->dev, &out->backend_errors, &out->backend_bytes);
}


//---------------- Filtered tracing

void scene_set_instance_body(scene_t* s, int instance, uint32_t body_id, uint32_t group) {
  if (inst_valid(s, instance)) {
    inst_t* in = &s->insts[instance];
    in->body_id = body_id;
    in->group = group & 31u;   // mounted on a body, a flat object leaves at the commit
  }
}


static int cmp_u32(const void* a, const void* b) {
  uint32_t x = *(const uint32_t*)a, y = *(const uint32_t*)b;
  return x < y ? -1 : x > y;
}


uint32_t scene_objects_hidden(const scene_t* s, const uint32_t* bodies, uint32_t nbody,
                              uint32_t group_mask, uint32_t* dest, uint32_t cap) {
  uint32_t n = 0;
  for (int i = 0; i < s->ninst && (nbody > 0 || group_mask != 0); i++) {
    const inst_t* in = &s->insts[i];
    if (!in->rtc || in->flat_root) {
      continue;
    }
    bool hidden = group_mask != 0 && !(group_mask & (1u << in->group));
    for (uint32_t b = 0; b < nbody && !hidden; b++) {
      hidden = in->body_id == bodies[b];
    }
    if (hidden) {
      if (n < cap) {
        dest[n] = in->object_id;
      }
      n++;
    }
  }
  qsort(dest, n < cap ? n : cap, sizeof *dest, cmp_u32);
  return n;
}


static bool excluded(const scene_filter_t* f, uint32_t object_id) {
  uint32_t lo = 0, hi = f->nexclude;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (f->exclude_objects[mid] < object_id) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo < f->nexclude && f->exclude_objects[lo] == object_id;
}


// Rays re-traced at once past excluded objects.
#define FILTER_BATCH 64
#define FILTER_PASSES 16

// The rays that hit an excluded object after a first trace, traced on (scene_trace_filtered):
// rays[i], or (rays NULL) ray first + i of `in` as scene_ray_from builds it.
static void filter_hits(const scene_t* s, const scene_ray_t* rays, const scene_rays_t* in,
                        size_t first, scene_hit_t* hits, size_t n, const scene_filter_t* f);

void scene_trace_filtered(const scene_t* s, const scene_ray_t* rays, scene_hit_t* hits, size_t n,
                          const scene_filter_t* f) {
  scene_trace(s, rays, hits, n);
  if (f && f->nexclude != 0) {
    filter_hits(s, rays, NULL, 0, hits, n, f);
  }
}


void scene_trace_filtered16(const scene_t* s, const scene_ray_t* rays, scene_hit_t* hits,
                            size_t n, const scene_filter_t* f) {
  scene_trace_coherent16(s, rays, hits, n);
  if (f && f->nexclude != 0) {
    filter_hits(s, rays, NULL, 0, hits, n, f);
  }
}


// Lanes [0, n) of a packet in columns as rows, and their hits (hits NULL: only the rays).
static void packet_rows(const scene_packet_t* in, const scene_packet_hits_t* cols, unsigned n,
                        scene_ray_t* rays, scene_hit_t* hits) {
  for (unsigned k = 0; k < n; k++) {
    rays[k] = (scene_ray_t){.origin = {in->ox[k], in->oy[k], in->oz[k]},
                            .dir = {in->dx[k], in->dy[k], in->dz[k]},
                            .tmax = in->tmax[k], .time = in->time[k]};
    if (hits) {
      hits[k] = (scene_hit_t){.distance = cols->distance[k],
                              .normal = {cols->nx[k], cols->ny[k], cols->nz[k]},
                              .object_id = cols->object_id[k], .label = cols->label[k],
                              .primitive = cols->primitive[k]};
    }
  }
}


// Hits [0, n) in rows into columns.
static void hits_columns(const scene_hit_t* hits, unsigned n, scene_packet_hits_t* out) {
  for (unsigned k = 0; k < n; k++) {
    out->distance[k] = hits[k].distance;
    out->nx[k] = hits[k].normal[0];
    out->ny[k] = hits[k].normal[1];
    out->nz[k] = hits[k].normal[2];
    out->object_id[k] = hits[k].object_id;
    out->label[k] = hits[k].label;
    out->primitive[k] = hits[k].primitive;
  }
}


// Whether packet pk of m lanes takes the AVX2 path: full, every lane on.
static bool packet_full(const scene_t* s, const scene_packet_t* pk, unsigned m) {
  bool full = m == WIDE && s->dev->simd;
  for (unsigned k = 0; full && k < m; k++) {
    full = pk->tmax[k] > 0.0;
  }
  return full;
}


// The lanes of a full packet (on the AVX2 path, below) above the horizon hz (a bit each).
__attribute__((target("avx2"))) static unsigned simd_packet_above(const scene_horizon_t* hz,
                                                                  const scene_packet_t* pk);


// A packet's hits when every lane missed (as simd_hits_of writes a miss).
static void packet_misses(scene_packet_hits_t* h) {
  for (unsigned k = 0; k < WIDE; k++) {
    h->distance[k] = INFINITY;
    h->nx[k] = h->ny[k] = h->nz[k] = 0.0;
    h->object_id[k] = h->label[k] = h->primitive[k] = 0;
  }
}


void scene_trace_packets(const scene_t* s, const scene_packet_t* in, size_t n,
                         scene_packet_hits_t* out, const scene_filter_t* f,
                         const scene_horizon_t* hz) {
  // the full packets, in trace_packets' floating-point environment set once for all of them;
  // their lanes above the horizon are off (all of them: no trace at all)
  size_t traced = 0, culled = 0;
  unsigned csr = _mm_getcsr();
  _MM_SET_FLUSH_ZERO_MODE(_MM_FLUSH_ZERO_ON);
  _MM_SET_DENORMALS_ZERO_MODE(_MM_DENORMALS_ZERO_ON);
  for (size_t i = 0; i < n; i += WIDE) {
    unsigned m = (unsigned)(n - i < WIDE ? n - i : WIDE);
    if (!packet_full(s, &in[i / WIDE], m)) {
      continue;
    }
    unsigned off = hz ? simd_packet_above(hz, &in[i / WIDE]) : 0u;
    unsigned noff = 0;
    for (unsigned b = off; b; b &= b - 1) {
      noff++;
    }
    if (noff == WIDE) {
      packet_misses(&out[i / WIDE]);
    } else {
      simd_packet_cols(s, &in[i / WIDE], off, &out[i / WIDE]);
    }
    traced += m - noff;
    culled += noff;
  }
  _mm_setcsr(csr);
  atomic_fetch_add(&((scene_t*)s)->rays_traced, traced);
  if (culled) {
    atomic_fetch_add(&((scene_t*)s)->rays_culled, culled);
  }

  // the others as scene_trace_filtered16 traces them in rows; then its second part for the
  // full packets that hit an excluded object
  const bool filtered = f && f->nexclude != 0;
  scene_ray_t rays[WIDE];
  scene_hit_t hits[WIDE];
  for (size_t i = 0; i < n && (traced + culled < n || filtered); i += WIDE) {
    const scene_packet_t* pk = &in[i / WIDE];
    scene_packet_hits_t* h = &out[i / WIDE];
    unsigned m = (unsigned)(n - i < WIDE ? n - i : WIDE);
    if (!packet_full(s, pk, m)) {
      packet_rows(pk, NULL, m, rays, NULL);
      scene_trace_filtered16(s, rays, hits, m, f);
      hits_columns(hits, m, h);
      continue;
    }
    bool hidden = false;
    for (unsigned k = 0; filtered && k < m && !hidden; k++) {
      hidden = h->object_id[k] != 0 && excluded(f, h->object_id[k]);
    }
    if (hidden) {
      packet_rows(pk, h, m, rays, hits);
      filter_hits(s, rays, NULL, 0, hits, m, f);
      hits_columns(hits, m, h);
    }
  }
}


static void filter_hits(const scene_t* s, const scene_ray_t* rays, const scene_rays_t* in,
                        size_t first, scene_hit_t* hits, size_t n, const scene_filter_t* f) {

  // each ray that hit an excluded object continues from just past the hit (a relative step
  // of 1e-6, at least 1 um), its distances measured along the original ray
  scene_ray_t more[FILTER_BATCH];
  scene_hit_t got[FILTER_BATCH];
  size_t idx[FILTER_BATCH];
  double base[FILTER_BATCH];
  for (size_t i = 0; i < n;) {
    size_t m = 0;
    for (; i < n && m < FILTER_BATCH; i++) {
      if (hits[i].object_id != 0 && excluded(f, hits[i].object_id)) {
        idx[m] = i;
        base[m] = 0.0;
        if (rays) {
          more[m] = rays[i];
        } else {
          (void)scene_ray_from(in, first + i, &more[m]);  // accepted when it was traced
        }
        m++;
      }
    }
    for (int pass = 0; pass < FILTER_PASSES && m > 0; pass++) {
      size_t keep = 0;
      for (size_t j = 0; j < m; j++) {
        scene_hit_t* h = &hits[idx[j]];
        if (h->object_id == 0 || !excluded(f, h->object_id)) {
          continue;
        }
        double step = h->distance - base[j] + fmax(1e-6, 1e-6 * h->distance);
        scene_ray_t* r = &more[keep];
        *r = more[j];
        for (int a = 0; a < 3; a++) {
          r->origin[a] += step * r->dir[a];
        }
        r->tmax -= step;
        base[keep] = base[j] + step;
        idx[keep] = idx[j];
        if (!(r->tmax > 0.0)) {
          memset(h, 0, sizeof *h);
          h->distance = INFINITY;
          continue;
        }
        keep++;
      }
      m = keep;
      if (m == 0) {
        break;
      }
      scene_trace(s, more, got, m);
      for (size_t j = 0; j < m; j++) {
        scene_hit_t* h = &hits[idx[j]];
        *h = got[j];
        if (h->object_id != 0) {
          h->distance += base[j];
        }
        if (in && in->records) {
          h->primitive = 0;
        }
      }
    }

    // still on an excluded object after every pass: a miss
    for (size_t j = 0; j < m; j++) {
      scene_hit_t* h = &hits[idx[j]];
      if (h->object_id != 0 && excluded(f, h->object_id)) {
        memset(h, 0, sizeof *h);
        h->distance = INFINITY;
      }
    }
  }
}

//---------------- Rays as a request carries them

// A ray's time s from the request's absolute time (1 without times or an empty step).
static inline double ray_time(const scene_rays_t* in, size_t i) {
  double s = 1.0;
  if (in->times && in->dt > 0.0) {
    s = (in->times[in->time_per_ray ? i : 0] - in->t0) / in->dt;
    s = s < 0.0 ? 0.0 : (s > 1.0 ? 1.0 : s);
  }
  return s;
}


bool scene_ray_from(const scene_rays_t* in, size_t i, scene_ray_t* out) {
  // comparisons are false for NaN; the origin's bound also excludes infinities
  const double* o = in->origins + 3 * i;
  const double* d = in->directions + 3 * i;
  double mc = in->max_coord;
  bool ok = fabs(o[0]) <= mc && fabs(o[1]) <= mc && fabs(o[2]) <= mc && fabs(d[0]) <= DBL_MAX &&
            fabs(d[1]) <= DBL_MAX && fabs(d[2]) <= DBL_MAX;
  double len = ok ? xform_norm3(d) : 0.0;
  if (!ok || !(len >= in->min_direction)) {
    return false;
  }
  double inv = 1.0 / len;
  for (int a = 0; a < 3; a++) {
    out->origin[a] = o[a];
    out->dir[a] = d[a] * inv;
  }
  out->tmax = in->tmax;
  out->time = ray_time(in, i);
  return true;
}


_Static_assert(sizeof(scene_hit_t) == 48 && offsetof(scene_hit_t, normal) == 8 &&
                   offsetof(scene_hit_t, object_id) == 32 && offsetof(scene_hit_t, label) == 36 &&
                   offsetof(scene_hit_t, primitive) == 40,
               "scene_hit_t: distance and normal in 32 bytes, then ids and padding in 16");


// The packet path below needs AVX2 (four doubles per instruction: a packet's square roots and
// divisions take a quarter of the scalar ones' time); a CPU without it takes the scalar path,
// which gives the same bits. Both run under the tracing MXCSR (flush-to-zero,
// denormals-are-zero), as trace_packet's conversions and hits do.
#define SIMD_TARGET __attribute__((target("avx2")))

// Four 3-vectors p[0..12) (x y z each) as the columns x, y, z.
SIMD_TARGET static inline void simd_columns(const double* p, __m256d* x, __m256d* y,
                                            __m256d* z) {
  __m256d a = _mm256_loadu_pd(p);      // x0 y0 z0 x1
  __m256d b = _mm256_loadu_pd(p + 4);  // y1 z1 x2 y2
  __m256d c = _mm256_loadu_pd(p + 8);  // z2 x3 y3 z3
  *x = _mm256_permute4x64_pd(_mm256_blend_pd(_mm256_blend_pd(a, b, 0x4), c, 0x2),
                             _MM_SHUFFLE(1, 2, 3, 0));
  *y = _mm256_permute4x64_pd(_mm256_blend_pd(_mm256_blend_pd(a, b, 0x9), c, 0x4),
                             _MM_SHUFFLE(2, 3, 0, 1));
  *z = _mm256_permute4x64_pd(_mm256_blend_pd(_mm256_blend_pd(a, b, 0x2), c, 0x9),
                             _MM_SHUFFLE(3, 0, 1, 2));
}


// Assemble the full packet of rays i0 .. i0 + LANES - 1 of `in` as trace_packet does from
// scene_ray_from's rays, their unit directions (double) into dir. False, with pk partly
// written, when a ray is refused or its direction's squared length is outside xform_norm3's
// plain range: the scalar path then takes the packet. time: every ray's (float) when the
// request has no time per ray.
SIMD_TARGET static bool simd_pack(const scene_rays_t* in, size_t i0, float time, packet_t* pk,
                                  double dir[3][LANES]) {
  const unsigned W = LANES;
  const __m256d sign = _mm256_set1_pd(-0.0), one = _mm256_set1_pd(1.0);
  const __m256d mc = _mm256_set1_pd(in->max_coord), big = _mm256_set1_pd(DBL_MAX);
  const __m256d lo = _mm256_set1_pd(1e-290), hi = _mm256_set1_pd(1e290);
  const __m256d dmin = _mm256_set1_pd(in->min_direction);
  bool per_ray = in->times && in->dt > 0.0 && in->time_per_ray;
  for (unsigned h = 0; h < W; h += 4) {
    __m256d ox, oy, oz, dx, dy, dz;
    simd_columns(in->origins + 3 * (i0 + h), &ox, &oy, &oz);
    simd_columns(in->directions + 3 * (i0 + h), &dx, &dy, &dz);
#define SIMD_LE(v, b) _mm256_cmp_pd(_mm256_andnot_pd(sign, (v)), (b), _CMP_LE_OQ)
    __m256d ok = _mm256_and_pd(_mm256_and_pd(SIMD_LE(ox, mc), SIMD_LE(oy, mc)), SIMD_LE(oz, mc));
    ok = _mm256_and_pd(ok, _mm256_and_pd(_mm256_and_pd(SIMD_LE(dx, big), SIMD_LE(dy, big)),
                                         SIMD_LE(dz, big)));
#undef SIMD_LE
    __m256d sq = _mm256_add_pd(_mm256_add_pd(_mm256_mul_pd(dx, dx), _mm256_mul_pd(dy, dy)),
                               _mm256_mul_pd(dz, dz));
    ok = _mm256_and_pd(ok, _mm256_and_pd(_mm256_cmp_pd(sq, lo, _CMP_GT_OQ),
                                         _mm256_cmp_pd(sq, hi, _CMP_LT_OQ)));
    __m256d len = _mm256_sqrt_pd(sq);
    ok = _mm256_and_pd(ok, _mm256_cmp_pd(len, dmin, _CMP_GE_OQ));
    if (_mm256_movemask_pd(ok) != 0xF) {
      return false;
    }
    __m256d inv = _mm256_div_pd(one, len);
    dx = _mm256_mul_pd(dx, inv);
    dy = _mm256_mul_pd(dy, inv);
    dz = _mm256_mul_pd(dz, inv);
    _mm256_store_pd(dir[0] + h, dx);
    _mm256_store_pd(dir[1] + h, dy);
    _mm256_store_pd(dir[2] + h, dz);
    _mm_store_ps(pk->f + LANE(F_ORG_X, h), _mm256_cvtpd_ps(ox));
    _mm_store_ps(pk->f + LANE(F_ORG_Y, h), _mm256_cvtpd_ps(oy));
    _mm_store_ps(pk->f + LANE(F_ORG_Z, h), _mm256_cvtpd_ps(oz));
    _mm_store_ps(pk->f + LANE(F_DIR_X, h), _mm256_cvtpd_ps(dx));
    _mm_store_ps(pk->f + LANE(F_DIR_Y, h), _mm256_cvtpd_ps(dy));
    _mm_store_ps(pk->f + LANE(F_DIR_Z, h), _mm256_cvtpd_ps(dz));
    if (per_ray) {
      // ray_time, then trace_packet's clamp (times are finite: never NaN here)
      __m256d s = _mm256_div_pd(_mm256_sub_pd(_mm256_loadu_pd(in->times + i0 + h),
                                              _mm256_set1_pd(in->t0)),
                                _mm256_set1_pd(in->dt));
      s = _mm256_max_pd(_mm256_min_pd(s, one), _mm256_setzero_pd());
      _mm_store_ps(pk->f + LANE(F_TIME, h), _mm256_cvtpd_ps(s));
    } else {
      _mm_store_ps(pk->f + LANE(F_TIME, h), _mm_set1_ps(time));
    }
  }
  return true;
}


// Whether the directions of lanes h .. h + 7 of a packet of W lanes are within
// PACKET_COHERENT_COS of lane 0's (packet_intersect's float operations, eight lanes at once).
__attribute__((always_inline)) SIMD_TARGET static inline __m256 simd_cos_ok(const float* f,
                                                                             unsigned h,
                                                                             const unsigned W) {
  __m256 c = _mm256_add_ps(
      _mm256_add_ps(_mm256_mul_ps(_mm256_load_ps(f + LANE(F_DIR_X, h)),
                                  _mm256_set1_ps(f[LANE(F_DIR_X, 0)])),
                    _mm256_mul_ps(_mm256_load_ps(f + LANE(F_DIR_Y, h)),
                                  _mm256_set1_ps(f[LANE(F_DIR_Y, 0)]))),
      _mm256_mul_ps(_mm256_load_ps(f + LANE(F_DIR_Z, h)), _mm256_set1_ps(f[LANE(F_DIR_Z, 0)])));
  return _mm256_cmp_ps(c, _mm256_set1_ps(PACKET_COHERENT_COS), _CMP_GE_OQ);
}


// packet_intersect's coherence test of a full packet of LANES valid lanes: every direction
// within PACKET_COHERENT_COS of the first and every origin the first's (the same float
// operations, eight lanes at once).
SIMD_TARGET static int simd_coherent(const packet_t* pk) {
  const unsigned W = LANES;
  const float* f = pk->f;
  __m256 ok = simd_cos_ok(f, 0, W);
  for (unsigned a = F_ORG_X; a <= F_ORG_Z; a++) {
    ok = _mm256_and_ps(ok, _mm256_cmp_ps(_mm256_load_ps(f + LANE(a, 0)),
                                         _mm256_set1_ps(f[LANE(a, 0)]), _CMP_EQ_OQ));
  }
  return _mm256_movemask_ps(ok) == 0xFF;
}


// The hits of the full intersected packet pk of W lanes (unit directions dx, dy, dz) into out,
// as hit_fill writes them (records: primitive 0), or (cols not NULL) into the columns cols.
__attribute__((always_inline)) SIMD_TARGET static inline void simd_hits_of(
    const scene_t* s, const packet_t* pk, const double* dx, const double* dy, const double* dz,
    int records, scene_hit_t* out, scene_packet_hits_t* cols, const unsigned W) {
  _Alignas(32) double nv[3][WIDE];
  unsigned hit = 0;
  for (unsigned k = 0; k < W; k++) {
    uint32_t tail[4] = {0, 0, 0, 0};  // object_id, label, primitive, padding
    const inst_t* in = hit_inst(s, pk, W, k);
    if (in) {
      double n[3];
      hit_normal(in, pk, W, k, n);
      nv[0][k] = n[0];
      nv[1][k] = n[1];
      nv[2][k] = n[2];
      hit |= 1u << k;
      tail[0] = in->object_id;
      tail[1] = in->label;
      tail[2] = records || in->is_prim ? 0 : pk->u[LANE(F_PRIM, k)];
    } else {
      nv[0][k] = nv[1][k] = nv[2][k] = 0.0;
    }
    if (cols) {
      cols->object_id[k] = tail[0];
      cols->label[k] = tail[1];
      cols->primitive[k] = tail[2];
    } else {
      memcpy((char*)&out[k] + offsetof(scene_hit_t, object_id), tail, sizeof tail);
    }
  }

  const __m256d sign = _mm256_set1_pd(-0.0), one = _mm256_set1_pd(1.0);
  const __m256d lo = _mm256_set1_pd(1e-290), hi = _mm256_set1_pd(1e290);
  const __m256d zero = _mm256_setzero_pd(), inf = _mm256_set1_pd(INFINITY);
  for (unsigned h = 0; h < W; h += 4) {
    __m256d n0 = _mm256_load_pd(nv[0] + h), n1 = _mm256_load_pd(nv[1] + h);
    __m256d n2 = _mm256_load_pd(nv[2] + h);
    __m128i bits = _mm_and_si128(_mm_set1_epi32((int)(hit >> h)), _mm_setr_epi32(1, 2, 4, 8));
    __m256d is_hit = _mm256_castsi256_pd(
        _mm256_cvtepi32_epi64(_mm_cmpeq_epi32(bits, _mm_setr_epi32(1, 2, 4, 8))));

    // hit_fill's length (xform_norm3), facing and factor, lane by lane the same operations
    __m256d sq = _mm256_add_pd(_mm256_add_pd(_mm256_mul_pd(n0, n0), _mm256_mul_pd(n1, n1)),
                               _mm256_mul_pd(n2, n2));
    __m256d len = _mm256_sqrt_pd(sq);
    __m256d plain = _mm256_and_pd(_mm256_cmp_pd(sq, lo, _CMP_GT_OQ),
                                  _mm256_cmp_pd(sq, hi, _CMP_LT_OQ));
    unsigned odd = (unsigned)_mm256_movemask_pd(_mm256_andnot_pd(plain, is_hit));
    if (odd) {
      _Alignas(32) double l[4];
      _mm256_store_pd(l, len);
      for (unsigned j = 0; j < 4; j++) {
        if (odd & (1u << j)) {
          double n[3] = {nv[0][h + j], nv[1][h + j], nv[2][h + j]};
          l[j] = xform_norm(n, 3);
        }
      }
      len = _mm256_load_pd(l);
    }
    __m256d facing = _mm256_add_pd(
        _mm256_add_pd(_mm256_mul_pd(n0, _mm256_loadu_pd(dx + h)),
                      _mm256_mul_pd(n1, _mm256_loadu_pd(dy + h))),
        _mm256_mul_pd(n2, _mm256_loadu_pd(dz + h)));
    __m256d f = _mm256_div_pd(one, len);  // (-1) / len is -(1 / len) exactly
    f = _mm256_blendv_pd(f, _mm256_xor_pd(f, sign), _mm256_cmp_pd(facing, zero, _CMP_GT_OQ));
    f = _mm256_and_pd(f, _mm256_cmp_pd(len, zero, _CMP_GT_OQ));
    n0 = _mm256_and_pd(_mm256_mul_pd(f, n0), is_hit);
    n1 = _mm256_and_pd(_mm256_mul_pd(f, n1), is_hit);
    n2 = _mm256_and_pd(_mm256_mul_pd(f, n2), is_hit);
    __m256d d = _mm256_blendv_pd(inf, _mm256_cvtps_pd(_mm_load_ps(pk->f + LANE(F_TFAR, h))),
                                 is_hit);

    if (cols) {
      _mm256_storeu_pd(cols->distance + h, d);
      _mm256_storeu_pd(cols->nx + h, n0);
      _mm256_storeu_pd(cols->ny + h, n1);
      _mm256_storeu_pd(cols->nz + h, n2);
      continue;
    }

    // rows distance, normal x y z of the four hits
    __m256d t0 = _mm256_unpacklo_pd(d, n0), t1 = _mm256_unpackhi_pd(d, n0);
    __m256d t2 = _mm256_unpacklo_pd(n1, n2), t3 = _mm256_unpackhi_pd(n1, n2);
    _mm256_storeu_pd(&out[h + 0].distance, _mm256_permute2f128_pd(t0, t2, 0x20));
    _mm256_storeu_pd(&out[h + 1].distance, _mm256_permute2f128_pd(t1, t3, 0x20));
    _mm256_storeu_pd(&out[h + 2].distance, _mm256_permute2f128_pd(t0, t2, 0x31));
    _mm256_storeu_pd(&out[h + 3].distance, _mm256_permute2f128_pd(t1, t3, 0x31));
  }
}


SIMD_TARGET static void simd_hits(const scene_t* s, const packet_t* pk,
                                  const double dir[3][LANES], int records, scene_hit_t* out) {
  simd_hits_of(s, pk, dir[0], dir[1], dir[2], records, out, NULL, LANES);
}


// The rest of a full 16-wide packet whose rays are in pk (origins, directions, tfar, time):
// the constant fields, packet_intersect's coherence test, the intersection and the hits, into
// rows (out) or columns (cols). dx, dy, dz: the unit directions (double), WIDE each.
SIMD_TARGET static void simd_finish16(const scene_t* s, packet_t* pk, const double* dx,
                                      const double* dy, const double* dz, unsigned off,
                                      scene_hit_t* out, scene_packet_hits_t* cols) {
  const unsigned W = WIDE;
  _Alignas(64) int valid[WIDE];
  for (unsigned k = 0; k < W; k++) {
    valid[k] = (off >> k) & 1u ? 0 : -1;
    pk->f[LANE(F_TNEAR, k)] = 0.0f;
    pk->u[LANE(F_MASK, k)] = 0xFFFFFFFFu;
    pk->u[LANE(F_ID, k)] = k;
    pk->u[LANE(F_FLAGS, k)] = 0;
    pk->u[LANE(F_GEOM, k)] = RTC_INVALID_GEOMETRY_ID;
    pk->u[LANE(F_INST, k)] = RTC_INVALID_GEOMETRY_ID;
  }

  // packet_intersect's 16-wide coherence test against lane 0 (which passes it by definition)
  const float* f = pk->f;
  const __m256 lim = _mm256_set1_ps(PACKET_COHERENT_ORIGIN);
  const __m256 fsign = _mm256_set1_ps(-0.0f);
  __m256 ok = _mm256_castsi256_ps(_mm256_setr_epi32(-1, 0, 0, 0, 0, 0, 0, 0));
  int coherent = 1;
  for (unsigned h = 0; h < W && coherent; h += 8) {
    __m256 lane = simd_cos_ok(f, h, W);
    for (unsigned a = F_ORG_X; a <= F_ORG_Z; a++) {
      __m256 d = _mm256_sub_ps(_mm256_load_ps(f + LANE(a, h)), _mm256_set1_ps(f[LANE(a, 0)]));
      lane = _mm256_and_ps(lane, _mm256_cmp_ps(_mm256_andnot_ps(fsign, d), lim, _CMP_LE_OQ));
    }
    ok = h == 0 ? _mm256_or_ps(lane, ok) : lane;   // lane 0 itself always passes
    coherent = _mm256_movemask_ps(ok) == 0xFF;
  }
  packet_intersect(s, pk, valid, W, W, coherent);
  if (cols) {
    simd_hits_of(s, pk, dx, dy, dz, 0, NULL, cols, W);
  } else {
    simd_hits_of(s, pk, dx, dy, dz, 0, out, NULL, W);
  }
}


// trace_packet of a full packet of WIDE rays whose lanes are all on (tmax > 0), four lanes per
// instruction: the same conversions, coherence test and hits (the same bits). False, with
// nothing written, when a lane is off: trace_packet takes the packet.
SIMD_TARGET static bool simd_packet16(const scene_t* s, const scene_ray_t* r, scene_hit_t* out) {
  const unsigned W = WIDE;
  for (unsigned k = 0; k < W; k++) {
    if (!(r[k].tmax > 0.0)) {
      return false;
    }
  }
  _Alignas(64) packet_t pk;
  _Alignas(32) double dir[3 * WIDE];
  const __m256d one = _mm256_set1_pd(1.0), zero = _mm256_setzero_pd();
  for (unsigned h = 0; h < W; h += 4) {
    // four rays (origin xyz, dir xyz, tmax, time) as columns
    __m256d a0 = _mm256_loadu_pd(r[h].origin), a1 = _mm256_loadu_pd(r[h + 1].origin);
    __m256d a2 = _mm256_loadu_pd(r[h + 2].origin), a3 = _mm256_loadu_pd(r[h + 3].origin);
    __m256d b0 = _mm256_loadu_pd(&r[h].dir[1]), b1 = _mm256_loadu_pd(&r[h + 1].dir[1]);
    __m256d b2 = _mm256_loadu_pd(&r[h + 2].dir[1]), b3 = _mm256_loadu_pd(&r[h + 3].dir[1]);
    __m256d t0 = _mm256_unpacklo_pd(a0, a1), t1 = _mm256_unpackhi_pd(a0, a1);
    __m256d t2 = _mm256_unpacklo_pd(a2, a3), t3 = _mm256_unpackhi_pd(a2, a3);
    __m256d ox = _mm256_permute2f128_pd(t0, t2, 0x20), oy = _mm256_permute2f128_pd(t1, t3, 0x20);
    __m256d oz = _mm256_permute2f128_pd(t0, t2, 0x31), dx = _mm256_permute2f128_pd(t1, t3, 0x31);
    t0 = _mm256_unpacklo_pd(b0, b1), t1 = _mm256_unpackhi_pd(b0, b1);
    t2 = _mm256_unpacklo_pd(b2, b3), t3 = _mm256_unpackhi_pd(b2, b3);
    __m256d dy = _mm256_permute2f128_pd(t0, t2, 0x20), dz = _mm256_permute2f128_pd(t1, t3, 0x20);
    __m256d tm = _mm256_permute2f128_pd(t0, t2, 0x31), ti = _mm256_permute2f128_pd(t1, t3, 0x31);
    _mm256_store_pd(dir + h, dx);
    _mm256_store_pd(dir + W + h, dy);
    _mm256_store_pd(dir + 2 * W + h, dz);
    _mm_store_ps(pk.f + LANE(F_ORG_X, h), _mm256_cvtpd_ps(ox));
    _mm_store_ps(pk.f + LANE(F_ORG_Y, h), _mm256_cvtpd_ps(oy));
    _mm_store_ps(pk.f + LANE(F_ORG_Z, h), _mm256_cvtpd_ps(oz));
    _mm_store_ps(pk.f + LANE(F_DIR_X, h), _mm256_cvtpd_ps(dx));
    _mm_store_ps(pk.f + LANE(F_DIR_Y, h), _mm256_cvtpd_ps(dy));
    _mm_store_ps(pk.f + LANE(F_DIR_Z, h), _mm256_cvtpd_ps(dz));
    _mm_store_ps(pk.f + LANE(F_TFAR, h), _mm256_cvtpd_ps(tm));
    // the time clamped as trace_packet does: t > 0 ? (t < 1 ? t : 1) : 0 (NaN gives 0)
    __m256d c = _mm256_blendv_pd(one, ti, _mm256_cmp_pd(ti, one, _CMP_LT_OQ));
    c = _mm256_blendv_pd(zero, c, _mm256_cmp_pd(ti, zero, _CMP_GT_OQ));
    _mm_store_ps(pk.f + LANE(F_TIME, h), _mm256_cvtpd_ps(c));
  }
  simd_finish16(s, &pk, dir, dir + W, dir + 2 * W, 0, out, NULL);
  return true;
}


// A full packet in columns (every lane's tmax > 0), as simd_packet16 traces the same rays in
// rows: the same floats, coherence test and hits.
SIMD_TARGET static void simd_packet_cols(const scene_t* s, const scene_packet_t* in,
                                         unsigned off, scene_packet_hits_t* out) {
  const unsigned W = WIDE;
  _Alignas(64) packet_t pk;
  const __m256d one = _mm256_set1_pd(1.0), zero = _mm256_setzero_pd();
  for (unsigned h = 0; h < W; h += 4) {
    _mm_store_ps(pk.f + LANE(F_ORG_X, h), _mm256_cvtpd_ps(_mm256_loadu_pd(in->ox + h)));
    _mm_store_ps(pk.f + LANE(F_ORG_Y, h), _mm256_cvtpd_ps(_mm256_loadu_pd(in->oy + h)));
    _mm_store_ps(pk.f + LANE(F_ORG_Z, h), _mm256_cvtpd_ps(_mm256_loadu_pd(in->oz + h)));
    _mm_store_ps(pk.f + LANE(F_DIR_X, h), _mm256_cvtpd_ps(_mm256_loadu_pd(in->dx + h)));
    _mm_store_ps(pk.f + LANE(F_DIR_Y, h), _mm256_cvtpd_ps(_mm256_loadu_pd(in->dy + h)));
    _mm_store_ps(pk.f + LANE(F_DIR_Z, h), _mm256_cvtpd_ps(_mm256_loadu_pd(in->dz + h)));
    _mm_store_ps(pk.f + LANE(F_TFAR, h), _mm256_cvtpd_ps(_mm256_loadu_pd(in->tmax + h)));
    __m256d ti = _mm256_loadu_pd(in->time + h);
    __m256d c = _mm256_blendv_pd(one, ti, _mm256_cmp_pd(ti, one, _CMP_LT_OQ));
    c = _mm256_blendv_pd(zero, c, _mm256_cmp_pd(ti, zero, _CMP_GT_OQ));
    _mm_store_ps(pk.f + LANE(F_TIME, h), _mm256_cvtpd_ps(c));
  }
  simd_finish16(s, &pk, in->dx, in->dy, in->dz, off, NULL, out);
}


// horizon_above of each lane, four at a time: the same origin test and the same bins
// (horizon_bin's arithmetic, lane by lane).
SIMD_TARGET static unsigned simd_packet_above(const scene_horizon_t* hz,
                                              const scene_packet_t* pk) {
  const __m256d sign = _mm256_set1_pd(-0.0), zero = _mm256_setzero_pd();
  const __m256d one = _mm256_set1_pd(1.0), two = _mm256_set1_pd(2.0);
  const __m256d three = _mm256_set1_pd(3.0), scale = _mm256_set1_pd(HORIZON_BINS / 4.0);
  const __m256d r2 = _mm256_set1_pd(hz->radius * hz->radius);
  const __m256d cx = _mm256_set1_pd(hz->center[0]), cy = _mm256_set1_pd(hz->center[1]);
  const __m256d zlo = _mm256_set1_pd(hz->zlo);
  const __m128i top = _mm_set1_epi32((int)HORIZON_BINS - 1);
  // a packet whose every ray is at or below the lowest bin: none is above (most rays below
  // the horizontal)
  const __m256d low = _mm256_set1_pd(hz->sin_low);
  __m256d any = _mm256_setzero_pd();
  for (unsigned h = 0; h < WIDE; h += 4) {
    any = _mm256_or_pd(any, _mm256_cmp_pd(_mm256_loadu_pd(pk->dz + h), low, _CMP_GT_OQ));
  }
  if (_mm256_movemask_pd(any) == 0) {
    return 0;
  }
  unsigned above = 0;
  for (unsigned h = 0; h < WIDE; h += 4) {
    __m256d x = _mm256_sub_pd(_mm256_loadu_pd(pk->ox + h), cx);
    __m256d y = _mm256_sub_pd(_mm256_loadu_pd(pk->oy + h), cy);
    __m256d z = _mm256_loadu_pd(pk->oz + h);
    __m256d d2 = _mm256_add_pd(_mm256_mul_pd(x, x), _mm256_mul_pd(y, y));
    __m256d inside = _mm256_and_pd(_mm256_cmp_pd(d2, r2, _CMP_LE_OQ),
                                   _mm256_cmp_pd(z, zlo, _CMP_GE_OQ));

    // the diamond angle: quadrant base, then ay / s or ax / s
    __m256d dx = _mm256_loadu_pd(pk->dx + h), dy = _mm256_loadu_pd(pk->dy + h);
    __m256d ax = _mm256_andnot_pd(sign, dx), ay = _mm256_andnot_pd(sign, dy);
    __m256d s = _mm256_add_pd(ax, ay);
    __m256d xneg = _mm256_cmp_pd(dx, zero, _CMP_LT_OQ);
    __m256d yneg = _mm256_cmp_pd(dy, zero, _CMP_LT_OQ);
    __m256d base = _mm256_blendv_pd(_mm256_and_pd(xneg, one),
                                    _mm256_blendv_pd(three, two, xneg), yneg);
    __m256d num = _mm256_blendv_pd(ax, ay, _mm256_xor_pd(_mm256_xor_pd(xneg, yneg),
                                                         _mm256_castsi256_pd(
                                                             _mm256_set1_epi64x(-1))));
    __m256d a = _mm256_add_pd(base, _mm256_div_pd(num, s));
    a = _mm256_and_pd(a, _mm256_cmp_pd(s, zero, _CMP_GT_OQ));   // (0, 0): bin 0
    __m128i bin = _mm_min_epi32(_mm256_cvttpd_epi32(_mm256_mul_pd(a, scale)), top);
    __m256d lim = _mm256_i32gather_pd(hz->sin_el, bin, 8);
    __m256d up = _mm256_cmp_pd(_mm256_loadu_pd(pk->dz + h), lim, _CMP_GT_OQ);
    above |= (unsigned)_mm256_movemask_pd(_mm256_and_pd(up, inside)) << h;
  }
  return above;
}


// Rays i0 .. i0 + n - 1 of `in` (1 <= n <= LANES) through scene_ray_from and trace_packet.
// Returns the index of a refused ray, or SIZE_MAX.
static size_t scalar_packet(const scene_t* s, const scene_rays_t* in, size_t i0, unsigned n,
                            scene_hit_t* out) {
  scene_ray_t r[LANES];
  for (unsigned k = 0; k < n; k++) {
    if (!scene_ray_from(in, i0 + k, &r[k])) {
      return i0 + k;
    }
  }
  trace_packet(s, r, out, n, LANES);
  for (unsigned k = 0; in->records && k < n; k++) {
    out[k].primitive = 0;
  }
  return SIZE_MAX;
}


// Whether the times of rays [begin, end), the step's start and its length are zero or far
// from the subnormal range (so that no difference or quotient of them is subnormal but one of
// 0 or a normal float).
static bool times_plain(const scene_rays_t* in, size_t begin, size_t end) {
  if (!in->times || !(in->dt > 0.0)) {
    return true;
  }
  const double tiny = 1e-280;
  bool ok = in->dt >= tiny && (in->t0 == 0.0 || fabs(in->t0) >= tiny);
  size_t first = in->time_per_ray ? begin : 0, last = in->time_per_ray ? end : 1;
  for (size_t i = first; i < last; i++) {
    double ti = in->times[i];
    ok &= (ti == 0.0) | (fabs(ti) >= tiny);
  }
  return ok;
}


// scene_trace_rays in two passes, as scene_trace_filtered: rays built in the caller's mode,
// then traced.
static size_t trace_rays_apart(const scene_t* s, const scene_rays_t* in, size_t begin,
                               size_t end, scene_hit_t* hits, const scene_filter_t* f) {
  scene_ray_t r[FILTER_BATCH];
  for (size_t i = begin; i < end; i += FILTER_BATCH) {
    size_t n = end - i < FILTER_BATCH ? end - i : FILTER_BATCH;
    for (size_t k = 0; k < n; k++) {
      if (!scene_ray_from(in, i + k, &r[k])) {
        return i + k;
      }
    }
    scene_trace(s, r, hits + i, n);
    for (size_t k = 0; in->records && k < n; k++) {
      hits[i + k].primitive = 0;
    }
  }
  if (f && f->nexclude != 0) {
    filter_hits(s, NULL, in, begin, hits + begin, end - begin, f);
  }
  return end;
}


size_t scene_trace_rays(const scene_t* s, const scene_rays_t* in, size_t begin, size_t end,
                        scene_hit_t* hits, const scene_filter_t* f) {
  // The rays are converted under the tracing MXCSR, where scene_trace_filtered builds them in
  // the caller's mode: the same bits, since a subnormal direction component or quotient becomes
  // a zero float either way and a direction's length ignores it, but times and steps near
  // 1e-300 s could part (t - t0 flushed to zero): those rays take the two passes.
  if (!times_plain(in, begin, end)) {
    return trace_rays_apart(s, in, begin, end, hits, f);
  }

  // what every lane of a full packet shares (trace_packet's values, converted as it does)
  double t = ray_time(in, begin);
  bool on = in->tmax > 0.0;

  // flush-to-zero and denormals-are-zero for this call, as trace_packets
  unsigned csr = _mm_getcsr();
  _MM_SET_FLUSH_ZERO_MODE(_MM_FLUSH_ZERO_ON);
  _MM_SET_DENORMALS_ZERO_MODE(_MM_DENORMALS_ZERO_ON);
  float time = (float)(t > 0.0 ? (t < 1.0 ? t : 1.0) : 0.0);
  float tfar = on ? (float)in->tmax : -INFINITY;
  size_t bad = SIZE_MAX, done = begin;  // done: rays of the packets traced
  for (size_t i = begin; i < end && bad == SIZE_MAX; i += LANES) {
    unsigned n = (unsigned)(end - i < LANES ? end - i : LANES);

    // the next packet's rays and hit records, fetched while this one is traced (the arrays
    // stream through memory; Embree's traversal keeps the hardware prefetchers behind)
    if (end - i >= 2 * LANES) {
      const char* o = (const char*)(in->origins + 3 * (i + LANES));
      const char* d = (const char*)(in->directions + 3 * (i + LANES));
      const char* h = (const char*)(hits + i + LANES);
      for (unsigned b = 0; b < 3 * LANES * sizeof(double); b += 64) {
        _mm_prefetch(o + b, _MM_HINT_T0);
        _mm_prefetch(d + b, _MM_HINT_T0);
      }
      for (unsigned b = 0; b < LANES * sizeof(scene_hit_t); b += 64) {
        _mm_prefetch(h + b, _MM_HINT_T0);
      }
    }
    if (s->dev->simd && n == LANES) {
      const unsigned W = LANES;
      _Alignas(64) packet_t pk;
      _Alignas(64) int valid[WIDE];
      _Alignas(32) double dir[3][LANES];
      if (simd_pack(in, i, time, &pk, dir)) {
        for (unsigned k = 0; k < W; k++) {
          valid[k] = on ? -1 : 0;
          pk.f[LANE(F_TNEAR, k)] = 0.0f;
          pk.f[LANE(F_TFAR, k)] = tfar;
          pk.u[LANE(F_MASK, k)] = 0xFFFFFFFFu;
          pk.u[LANE(F_ID, k)] = k;
          pk.u[LANE(F_FLAGS, k)] = 0;
          pk.u[LANE(F_GEOM, k)] = RTC_INVALID_GEOMETRY_ID;
          pk.u[LANE(F_INST, k)] = RTC_INVALID_GEOMETRY_ID;
        }
        packet_intersect(s, &pk, valid, W, W, on ? simd_coherent(&pk) : -1);
        simd_hits(s, &pk, dir, in->records, hits + i);
        done = i + LANES;
        continue;
      }
    }
    bad = scalar_packet(s, in, i, n, hits + i);
    done = bad == SIZE_MAX ? i + n : i;
  }
  _mm_setcsr(csr);
  atomic_fetch_add(&((scene_t*)s)->rays_traced, done - begin);
  if (bad != SIZE_MAX) {
    return bad;
  }

  // past the excluded objects, in the caller's floating-point mode as scene_trace_filtered
  if (f && f->nexclude != 0) {
    filter_hits(s, NULL, in, begin, hits + begin, end - begin, f);
  }
  return end;
}
