// SPDX-License-Identifier: MIT
// geom.c: geometries of the Embree backend, each its own bottom-level scene built once: a
// triangle mesh (with its parts' bounds for horizons), or an analytic primitive as a user
// geometry whose callbacks solve the hit in double (prim.c).
#include <embree3/rtcore.h>
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "base/mem.h"
#include "scene/embree.h"

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


bool geom_valid(const scene_t* s, int h) {
  return h >= 0 && h < s->ngeom && s->geoms[h]->rtc;
}


void scene_remove_geometry(scene_t* s, int geometry) {
  if (!geom_valid(s, geometry)) {
    return;
  }
  rtcReleaseScene(s->geoms[geometry]->rtc);
  geom_release_slot(s, geometry);
}

