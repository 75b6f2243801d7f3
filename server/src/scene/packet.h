// SPDX-License-Identifier: MIT
// packet.h: the packet kernels of the Embree backend, shared by trace.c, rays.c and simd.c: a
// packet in Embree's RTCRayHit8/16 layout, its coherence test and intersection, and its hits.
// The kernels are always inlined, so that each caller's constant packet width specialises them.
#ifndef SENSIM_SCENE_PACKET_H_
#define SENSIM_SCENE_PACKET_H_

#include <embree3/rtcore.h>
#include <float.h>
#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#include "base/simd.h"
#include "scene/embree.h"

// Rays per Embree packet. 8: on bench_raycast's lidar-ordered rays, 8-ray packets beat 16-ray
// ones on AVX-512 (the 16 consecutive rays of a column span twice the angle) and 4-ray ones
// everywhere; Embree runs 8-wide packets natively from AVX on. Packets are fixed index ranges
// of the caller's array, so which rays share a packet never depends on the thread that traces
// them.
// Packet widths: the groups of SCENE_ROWS (8, or 16 for coherent tiles) and SCENE_COLUMNS (16).
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


// The rotation of a moving instance at one lane's time, kept for the next lanes of the packet:
// a lidar's rays of one firing share their time, and the slerp is most of the cost of a hit on
// a turning object. The same inputs give the same bits, so a kept rotation is the one
// xform_slerp would give again.
typedef struct hit_rot {
  const inst_t* in;   // NULL: none kept
  uint32_t time;      // the lane's time, its float's bits
  double q[4];
} hit_rot_t;


// The world normal (not unit, either side) of lane k of an intersected packet of W lanes that
// hit instance `in`; rot: the rotation kept from the packet's earlier lanes.
static inline void hit_normal(const inst_t* in, const packet_t* pk, unsigned W, unsigned k,
                              hit_rot_t* rot, double n[3]) {
  // Embree reports the instanced hit's normal in object space; the inverse transpose of
  // R(q(s)) S is R(q(s)) S^-1 (the shift moves points, not normals): a fixed matrix for a
  // static instance, and (16-wide packets only, so that groups of 8 keep their roundings) for
  // one that moves without turning
  double ng[3] = {pk->f[LANE(F_NG_X, k)], pk->f[LANE(F_NG_Y, k)], pk->f[LANE(F_NG_Z, k)]};
  if (in->flat) {
    memcpy(n, ng, sizeof ng);   // the flat scene is in world coordinates
  } else if (in->moving && (W != WIDE || in->turning)) {
    double nobj[3] = {ng[0] / in->scale[0], ng[1] / in->scale[1], ng[2] / in->scale[2]};
    uint32_t time = pk->u[LANE(F_TIME, k)];
    if (rot->in != in || rot->time != time) {
      xform_slerp(in->q0, in->q1, pk->f[LANE(F_TIME, k)], rot->q);
      rot->in = in;
      rot->time = time;
    }
    xform_quat_rotate(rot->q, nobj, n);
  } else {
    const double* m = in->nmat;
    n[0] = m[0] * ng[0] + m[1] * ng[1] + m[2] * ng[2];
    n[1] = m[3] * ng[0] + m[4] * ng[1] + m[5] * ng[2];
    n[2] = m[6] * ng[0] + m[7] * ng[1] + m[8] * ng[2];
  }
}


// The hit of lane k of an intersected packet of W lanes into out (rot: as hit_normal's).
static inline void hit_fill(const scene_t* s, const scene_ray_t* r, const packet_t* pk,
                            unsigned W, unsigned k, hit_rot_t* rot, scene_hit_t* out) {
  memset(out, 0, sizeof *out);
  out->distance = INFINITY;
  const inst_t* in = hit_inst(s, pk, W, k);
  if (!in) {
    return;
  }
  double n[3];
  hit_normal(in, pk, W, k, rot, n);
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


// Whether lane k of an assembled packet of W lanes holds a ray Embree may take (scene.h,
// "Invalid rays"): every origin and direction component finite and within SCENE_RAY_MAX, the
// direction not zero once subnormals are zero (the tracing mode). Branch-free: it runs on every
// lane of the scalar path.
static inline bool packet_lane_ok(const float* f, const unsigned W, unsigned k) {
  const float big = (float)SCENE_RAY_MAX;
  float ax = fabsf(f[LANE(F_DIR_X, k)]), ay = fabsf(f[LANE(F_DIR_Y, k)]);
  float az = fabsf(f[LANE(F_DIR_Z, k)]);
  return (fabsf(f[LANE(F_ORG_X, k)]) <= big) & (fabsf(f[LANE(F_ORG_Y, k)]) <= big) &
         (fabsf(f[LANE(F_ORG_Z, k)]) <= big) & (ax <= big) & (ay <= big) & (az <= big) &
         ((ax >= FLT_MIN) | (ay >= FLT_MIN) | (az >= FLT_MIN));
}


// Up to LANES rays (1 <= n <= LANES) as one packet against the committed top level. A ray with
// tmax <= 0 is a miss and takes no lane; so is an invalid ray (packet_lane_ok, or a NaN tmax),
// whose lane also gets an unused lane's floats: it is counted in rays_invalid, and the packet
// is traced as if it had nothing to trace. Unused lanes get an empty interval [0, -inf] so that
// no Embree code path traces them. Rays in firing order (a lidar's) start from one point and
// point within PACKET_COHERENT_COS of the first: those are traced as a packet with Embree's
// coherent (frustum) traversal, ~15 % faster on bench_raycast. Others, which would diverge at
// once, go one by one: packet calls with one lane valid each, which Embree traces with its
// single-ray traversal and the same kernels as the lane in a full packet (rtcIntersect1
// transforms rays into instances differently, so a ray would not get bit for bit the hit it
// gets in a packet).
// W is LANES (rtcIntersect8) or WIDE (rtcIntersect16); both give each lane the same floats.
// Returns the invalid rays.
__attribute__((always_inline)) static inline unsigned trace_packet(
    const scene_t* s, const scene_ray_t* r, scene_hit_t* out, unsigned n, const unsigned W) {
  // rays (float); the time is clamped into the instances' [0, 1] range
  _Alignas(64) int valid[WIDE];
  _Alignas(64) packet_t pk;
  float* f = pk.f;
  unsigned* u = pk.u;
  unsigned bad = 0;
  for (unsigned k = 0; k < n; k++) {
    const scene_ray_t* rk = &r[k];
    double t = rk->time;
    bool on = rk->tmax > 0.0;
    f[LANE(F_ORG_X, k)] = (float)rk->origin[0];
    f[LANE(F_ORG_Y, k)] = (float)rk->origin[1];
    f[LANE(F_ORG_Z, k)] = (float)rk->origin[2];
    f[LANE(F_TNEAR, k)] = SCENE_RAY_TNEAR;
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
    if (__builtin_expect(!packet_lane_ok(f, W, k) || isnan(rk->tmax), 0)) {
      on = false;
      bad++;
      f[LANE(F_ORG_X, k)] = f[LANE(F_ORG_Y, k)] = f[LANE(F_ORG_Z, k)] = 0.0f;
      f[LANE(F_DIR_X, k)] = 1.0f;
      f[LANE(F_DIR_Y, k)] = f[LANE(F_DIR_Z, k)] = 0.0f;
      f[LANE(F_TFAR, k)] = -INFINITY;
    }
    valid[k] = on ? -1 : 0;
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
  hit_rot_t rot = {0};
  for (unsigned k = 0; k < n; k++) {
    hit_fill(s, &r[k], &pk, W, k, &rot, &out[k]);
  }
  if (bad) {
    atomic_fetch_add(&((scene_t*)s)->rays_invalid, bad);
  }
  return bad;
}


//---------------- The AVX2 kernels (simd.c)

// The packet paths of simd.c need AVX2 (four doubles per instruction: a packet's square roots
// and divisions take a quarter of the scalar ones' time): the callers take them where
// simd_level() >= SIMD_AVX2 (base/simd.h), else the scalar path, which gives the same bits.
// Both run under the tracing MXCSR (flush-to-zero, denormals-are-zero), as trace_packet's
// conversions and hits do. The horizon test also has an AVX-512 form, taken where
// simd_level() >= SIMD_AVX512: the same lanes as its AVX2 form.

// trace_packet of a full 16-wide packet whose lanes are all on (tmax > 0), four lanes per
// instruction: the same conversions, coherence test and hits (the same bits). False, with
// nothing written, when a lane is off or invalid: trace_packet takes the packet.
SIMD_AVX2_FN bool simd_packet16(const scene_t* s, const scene_ray_t* r, scene_hit_t* out);

// The same for a full 8-wide packet (rtcIntersect8): trace_packet's conversions, coherence test
// and hits, the same bits.
SIMD_AVX2_FN bool simd_packet8(const scene_t* s, const scene_ray_t* r, scene_hit_t* out);

// The rays of a full packet in columns (every lane's tmax > 0) assembled into pk as
// simd_packet16 assembles the same rays in rows. Returns the invalid lanes (packet_lane_ok), a
// bit each: 0, or the packet is not to be traced on this path.
SIMD_AVX2_FN unsigned simd_cols_pack(const scene_packet_t* in, packet_t* pk);

// simd_cols_pack where simd_level() has AVX-512, the same fields and invalid lanes, with the
// fields that do not depend on the rays too and the valid lanes (all but those whose bit is set
// in off) into valid: each field of the 16 lanes in one store. Embree's AVX-512 kernels load a
// field of a 16-wide packet at once, and a load that spans two stores still in the store
// buffer cannot take its data from them: it waits for both to reach the cache.
SIMD_AVX512_FN unsigned simd_cols_pack_avx512(const scene_packet_t* in, packet_t* pk,
                                              unsigned off, int* valid);

// The packet simd_cols_pack (or simd_cols_pack_avx512, valid: its valid lanes; else NULL)
// assembled from `in`, traced as simd_packet16 traces it (the same coherence test and hits)
// into out; the lanes whose bit is set in off are not traced (misses).
SIMD_AVX2_FN void simd_cols_trace(const scene_t* s, packet_t* pk, const scene_packet_t* in,
                                  unsigned off, const int* valid, scene_packet_hits_t* out);

// A packet's hits in columns when every lane missed (as hit_fill writes a miss), four lanes a
// store.
SIMD_AVX2_FN void simd_misses(scene_packet_hits_t* h);

// Whether every lane of a packet in columns is on (tmax > 0; NaN is off).
SIMD_AVX2_FN bool simd_cols_on(const scene_packet_t* pk);

// The lanes of a full packet above the horizon hz (a bit each): horizon_above of each lane
// whose components are finite, within SCENE_RAY_MAX, and whose direction is not zero (an
// invalid ray is never culled: the packet's check counts it).
SIMD_AVX2_FN unsigned simd_packet_above(const scene_horizon_t* hz, const scene_packet_t* pk);

// The same eight lanes at a time, where simd_level() has AVX-512: the same lanes.
SIMD_AVX512_FN unsigned simd_packet_above_avx512(const scene_horizon_t* hz,
                                                 const scene_packet_t* pk);

// Assemble the full packet of rays i0 .. i0 + LANES - 1 of `in` as trace_packet does from
// scene_ray_from's rays, with the fields that do not depend on the rays (tfar: every lane's)
// and its valid lanes (every lane or, not on, none) into valid; their unit directions (double)
// into dir. False, with pk partly written, when a ray is refused or its direction's squared
// length is outside xform_norm3's plain range: the scalar path then takes the packet. time:
// every ray's (float) when the request has no time per ray.
SIMD_AVX2_FN bool simd_pack(const scene_rays_t* in, size_t i0, float time, float tfar, bool on,
                            packet_t* pk, int* valid, double dir[3][LANES]);

// packet_intersect's coherence test of a full packet of LANES valid lanes.
SIMD_AVX2_FN int simd_coherent(const packet_t* pk);

// The hits of the full intersected packet pk of LANES lanes (unit directions dir) into out, as
// hit_fill writes them (records: primitive 0).
SIMD_AVX2_FN void simd_hits(const scene_t* s, const packet_t* pk, const double dir[3][LANES],
                            int records, scene_hit_t* out);

//---------------- Rows and filters (trace.c), request arrays (rays.c)

// SCENE_ROWS: rays in packets of width (WIDE, or else LANES), the last one partial, then (f
// not NULL) the filter's passes.
void trace_rows(const scene_t* s, const scene_ray_t* rays, scene_hit_t* hits, size_t n,
                unsigned width, const scene_filter_t* f);

// The bound on a request's origin coordinates: its max_coord or SCENE_RAY_MAX, the smaller
// (SCENE_RAY_MAX for a NaN).
static inline double rays_max_coord(const scene_rays_t* in) {
  return in->max_coord < SCENE_RAY_MAX ? in->max_coord : SCENE_RAY_MAX;
}

// SCENE_REQUEST: rays [first, first + n) of `in`, their hits into hits[0, n). Returns n, or the
// batch index of the first ray scene_ray_from refuses (hits from there on are not written).
size_t rays_trace(const scene_t* s, const scene_rays_t* in, size_t first, size_t n,
                  scene_hit_t* hits, const scene_filter_t* f);

// Rays re-traced at once past excluded objects, and most passes.
#define FILTER_BATCH 64
#define FILTER_PASSES 16

// Whether object_id is one of the filter's (sorted) objects.
bool filter_excludes(const scene_filter_t* f, uint32_t object_id);

// The rays that hit an excluded object after a first trace, traced on (scene_trace's filter):
// rays[i], or (rays NULL) ray first + i of `in` as scene_ray_from builds it.
void filter_hits(const scene_t* s, const scene_ray_t* rays, const scene_rays_t* in, size_t first,
                 scene_hit_t* hits, size_t n, const scene_filter_t* f);

#endif  // SENSIM_SCENE_PACKET_H_
