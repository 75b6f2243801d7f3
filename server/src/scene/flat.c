// SPDX-License-Identifier: MIT
// flat.c: the flat scene of the Embree backend: the triangles of the meshes fixed in the world,
// in world coordinates, in one bottom-level scene under one identity instance, so that a ray
// meets them in one hierarchy rather than entering an instance per object.
#include <embree3/rtcore.h>
#include <stdatomic.h>
#include <string.h>

#include "base/mem.h"
#include "scene/embree.h"

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


// At once when new static objects are many, else after FLAT_WAIT commits.
void flat_update(scene_t* s) {
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

