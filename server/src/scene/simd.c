// SPDX-License-Identifier: MIT
// simd.c: the AVX2 packet kernels of the Embree backend: a packet's rays converted, tested and
// its hits written four lanes per instruction, giving the bits of the scalar kernels (packet.h)
// on the same rays. Compiled for AVX2 function by function (SIMD_AVX2_FN); trace.c and rays.c
// call them where simd_level() has AVX2 (base/simd.h). The horizon test has an AVX-512 form
// too (SIMD_AVX512_FN), eight lanes per instruction, for the CPUs that have it.
#include <float.h>
#include <immintrin.h>
#include <stddef.h>

#include "scene/packet.h"

// Four 3-vectors p[0..12) (x y z each) as the columns x, y, z.
SIMD_AVX2_FN static inline void simd_columns(const double* p, __m256d* x, __m256d* y,
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


// Four times ti clamped as trace_packet clamps them, t > 0 ? (t < 1 ? t : 1) : 0 (NaN gives 0),
// as floats.
__attribute__((always_inline)) SIMD_AVX2_FN static inline __m128 simd_clamp_times(__m256d ti) {
  const __m256d one = _mm256_set1_pd(1.0), zero = _mm256_setzero_pd();
  __m256d c = _mm256_blendv_pd(one, ti, _mm256_cmp_pd(ti, one, _CMP_LT_OQ));
  c = _mm256_blendv_pd(zero, c, _mm256_cmp_pd(ti, zero, _CMP_GT_OQ));
  return _mm256_cvtpd_ps(c);
}


__attribute__((always_inline)) SIMD_AVX2_FN static inline void simd_fixed_fields(
    packet_t* pk, unsigned off, int* valid, const unsigned W);


// Assemble the full packet of rays i0 .. i0 + LANES - 1 of `in` as trace_packet does from
// scene_ray_from's rays, their unit directions (double) into dir. False, with pk partly
// written, when a ray is refused or its direction's squared length is outside xform_norm3's
// plain range: the scalar path then takes the packet. time: every ray's (float) when the
// request has no time per ray. Each field's eight lanes go in one store once both fours are
// made (Embree's 8-wide kernels load them whole: a load over two stores still in the store
// buffer waits for both to reach the cache).
SIMD_AVX2_FN bool simd_pack(const scene_rays_t* in, size_t i0, float time, float tfar, bool on,
                            packet_t* pk, int* valid, double dir[3][LANES]) {
  const unsigned W = LANES;
  const __m256d sign = _mm256_set1_pd(-0.0), one = _mm256_set1_pd(1.0);
  const __m256d mc = _mm256_set1_pd(rays_max_coord(in)), big = _mm256_set1_pd(DBL_MAX);
  const __m256d lo = _mm256_set1_pd(1e-290), hi = _mm256_set1_pd(1e290);
  const __m256d dmin = _mm256_set1_pd(in->min_direction);
  bool per_ray = in->times && in->dt > 0.0 && in->time_per_ray;
  __m128 fl[7][2];   // origin x y z, direction x y z, time; each as two fours
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
    const __m256d c[6] = {ox, oy, oz, dx, dy, dz};
    for (unsigned a = 0; a < 6; a++) {
      fl[a][h / 4] = _mm256_cvtpd_ps(c[a]);
    }
    if (per_ray) {
      // ray_time, then trace_packet's clamp (times are finite: never NaN here)
      __m256d s = _mm256_div_pd(_mm256_sub_pd(_mm256_loadu_pd(in->times + i0 + h),
                                              _mm256_set1_pd(in->t0)),
                                _mm256_set1_pd(in->dt));
      s = _mm256_max_pd(_mm256_min_pd(s, one), _mm256_setzero_pd());
      fl[6][h / 4] = _mm256_cvtpd_ps(s);
    } else {
      fl[6][h / 4] = _mm_set1_ps(time);
    }
  }
  static const unsigned field[7] = {F_ORG_X, F_ORG_Y, F_ORG_Z, F_DIR_X, F_DIR_Y, F_DIR_Z, F_TIME};
  for (unsigned a = 0; a < 7; a++) {
    _mm256_store_ps(pk->f + LANE(field[a], 0), _mm256_set_m128(fl[a][1], fl[a][0]));
  }
  _mm256_store_ps(pk->f + LANE(F_TFAR, 0), _mm256_set1_ps(tfar));
  simd_fixed_fields(pk, on ? 0u : 0xFFu, valid, W);
  return true;
}


// Whether the directions of lanes h .. h + 7 of a packet of W lanes are within
// PACKET_COHERENT_COS of lane 0's (packet_intersect's float operations, eight lanes at once).
__attribute__((always_inline)) SIMD_AVX2_FN static inline __m256 simd_cos_ok(
    const float* f, unsigned h, const unsigned W) {
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
SIMD_AVX2_FN int simd_coherent(const packet_t* pk) {
  const unsigned W = LANES;
  const float* f = pk->f;
  __m256 ok = simd_cos_ok(f, 0, W);
  for (unsigned a = F_ORG_X; a <= F_ORG_Z; a++) {
    ok = _mm256_and_ps(ok, _mm256_cmp_ps(_mm256_load_ps(f + LANE(a, 0)),
                                         _mm256_set1_ps(f[LANE(a, 0)]), _CMP_EQ_OQ));
  }
  return _mm256_movemask_ps(ok) == 0xFF;
}


// Lanes h .. h + 3 of an intersected packet of W lanes at once, when their hits are all on one
// instance (or none), and on one whose normals hit_normal turns by a quaternion only when they
// share their time: most groups, a lidar's neighbouring rays meeting the same terrain or object
// (the rays of a firing share their time). Their world normals (not unit; 0 for a miss) into nv,
// their object IDs, labels and primitives into tail (0 for a miss), and their hit bits (as
// hit_inst finds an instance) into *hit; the same values as hit_inst, hit_normal (rot: its kept
// rotation) and simd_hits_of's lane loop (the products and sums in the same order, no
// contraction). False, with nothing written, when they are on several instances or turn at
// several times: the caller takes them lane by lane.
__attribute__((always_inline)) SIMD_AVX2_FN static inline bool simd_lanes4_one(
    const scene_t* s, const packet_t* pk, unsigned h, int records, hit_rot_t* rot,
    double nv[3][WIDE], uint32_t tail[3][4], unsigned* hit, const unsigned W) {
  const __m128i none = _mm_set1_epi32((int)RTC_INVALID_GEOMETRY_ID);
  __m128i geom = _mm_load_si128((const __m128i*)(pk->u + LANE(F_GEOM, h)));
  __m128i id = _mm_load_si128((const __m128i*)(pk->u + LANE(F_INST, h)));
  if (s->flat_slot >= 0) {
    id = _mm_blendv_epi8(id, geom, _mm_cmpeq_epi32(id, _mm_set1_epi32(s->flat_slot)));
  }
  // hit_inst's instance: a geometry, and an ID below ninst (unsigned: min(id, ninst - 1) == id)
  __m128i on = _mm_andnot_si128(_mm_cmpeq_epi32(geom, none),
                                _mm_cmpeq_epi32(_mm_min_epu32(id, _mm_set1_epi32(s->ninst - 1)), id));
  unsigned m = s->ninst > 0 ? (unsigned)_mm_movemask_ps(_mm_castsi128_ps(on)) : 0u;
  const inst_t* in = NULL;
  if (m) {
    _Alignas(16) uint32_t ids[4];
    _mm_store_si128((__m128i*)ids, id);
    uint32_t id0 = ids[__builtin_ctz(m)];
    unsigned same = (unsigned)_mm_movemask_ps(
        _mm_castsi128_ps(_mm_cmpeq_epi32(id, _mm_set1_epi32((int)id0))));
    in = &s->insts[id0];
    if ((same & m) != m) {
      return false;
    }
  }
  const bool turn = in && !in->flat && in->moving && (W != WIDE || in->turning);
  if (turn) {
    // hit_normal's rotation at the lanes' one time
    __m128i time = _mm_load_si128((const __m128i*)(pk->u + LANE(F_TIME, h)));
    unsigned k0 = h + (unsigned)__builtin_ctz(m);
    uint32_t t0 = pk->u[LANE(F_TIME, k0)];
    unsigned same = (unsigned)_mm_movemask_ps(
        _mm_castsi128_ps(_mm_cmpeq_epi32(time, _mm_set1_epi32((int)t0))));
    if ((same & m) != m) {
      return false;
    }
    if (rot->in != in || rot->time != t0) {
      xform_slerp(in->q0, in->q1, pk->f[LANE(F_TIME, k0)], rot->q);
      rot->in = in;
      rot->time = t0;
    }
  }
  __m256d mask = _mm256_castsi256_pd(_mm256_cvtepi32_epi64(
      _mm_cmpeq_epi32(_mm_and_si128(_mm_set1_epi32((int)m), _mm_setr_epi32(1, 2, 4, 8)),
                      _mm_setr_epi32(1, 2, 4, 8))));
  __m256d n0 = _mm256_setzero_pd(), n1 = n0, n2 = n0;
  if (in) {
    __m256d x = _mm256_cvtps_pd(_mm_load_ps(pk->f + LANE(F_NG_X, h)));
    __m256d y = _mm256_cvtps_pd(_mm_load_ps(pk->f + LANE(F_NG_Y, h)));
    __m256d z = _mm256_cvtps_pd(_mm_load_ps(pk->f + LANE(F_NG_Z, h)));
    if (in->flat) {
      n0 = x, n1 = y, n2 = z;
    } else if (turn) {
      // xform_quat_rotate of the object-space normals (ng / scale)
      const __m256d two = _mm256_set1_pd(2.0);
      const __m256d w = _mm256_set1_pd(rot->q[0]), ux = _mm256_set1_pd(rot->q[1]);
      const __m256d uy = _mm256_set1_pd(rot->q[2]), uz = _mm256_set1_pd(rot->q[3]);
      __m256d v0 = _mm256_div_pd(x, _mm256_set1_pd(in->scale[0]));
      __m256d v1 = _mm256_div_pd(y, _mm256_set1_pd(in->scale[1]));
      __m256d v2 = _mm256_div_pd(z, _mm256_set1_pd(in->scale[2]));
#define SIMD_CROSS(a, b, c, d) \
  _mm256_mul_pd(two, _mm256_sub_pd(_mm256_mul_pd(a, b), _mm256_mul_pd(c, d)))
      __m256d tx = SIMD_CROSS(uy, v2, uz, v1);
      __m256d ty = SIMD_CROSS(uz, v0, ux, v2);
      __m256d tz = SIMD_CROSS(ux, v1, uy, v0);
#undef SIMD_CROSS
#define SIMD_TURN(v, t, a, b, c, d)                                    \
  _mm256_add_pd(_mm256_add_pd(v, _mm256_mul_pd(w, t)),                 \
                _mm256_sub_pd(_mm256_mul_pd(a, b), _mm256_mul_pd(c, d)))
      n0 = SIMD_TURN(v0, tx, uy, tz, uz, ty);
      n1 = SIMD_TURN(v1, ty, uz, tx, ux, tz);
      n2 = SIMD_TURN(v2, tz, ux, ty, uy, tx);
#undef SIMD_TURN
    } else {
      const double* mt = in->nmat;
#define SIMD_ROW(r)                                                                            \
  _mm256_add_pd(_mm256_add_pd(_mm256_mul_pd(_mm256_set1_pd(mt[3 * (r)]), x),                  \
                              _mm256_mul_pd(_mm256_set1_pd(mt[3 * (r) + 1]), y)),              \
                _mm256_mul_pd(_mm256_set1_pd(mt[3 * (r) + 2]), z))
      n0 = SIMD_ROW(0), n1 = SIMD_ROW(1), n2 = SIMD_ROW(2);
#undef SIMD_ROW
    }
  }
  const __m256d* nl[3] = {&n0, &n1, &n2};
  for (unsigned a = 0; a < 3; a++) {
    _mm256_store_pd(nv[a] + h, _mm256_and_pd(*nl[a], mask));   // a miss lane's normal is 0
  }
  __m128i keep = _mm_and_si128(on, _mm_set1_epi32(m ? -1 : 0));   // the hit lanes
  __m128i prim = _mm_setzero_si128();
  if (in && !records && !in->is_prim) {
    prim = _mm_and_si128(_mm_load_si128((const __m128i*)(pk->u + LANE(F_PRIM, h))), keep);
  }
  _mm_storeu_si128((__m128i*)tail[0], _mm_and_si128(_mm_set1_epi32(in ? (int)in->object_id : 0),
                                                    keep));
  _mm_storeu_si128((__m128i*)tail[1], _mm_and_si128(_mm_set1_epi32(in ? (int)in->label : 0),
                                                    keep));
  _mm_storeu_si128((__m128i*)tail[2], prim);
  *hit |= m << h;
  return true;
}


// The hits of the full intersected packet pk of W lanes (unit directions dx, dy, dz) into out,
// as hit_fill writes them (records: primitive 0), or (cols not NULL) into the columns cols.
__attribute__((always_inline)) SIMD_AVX2_FN static inline void simd_hits_of(
    const scene_t* s, const packet_t* pk, const double* dx, const double* dy, const double* dz,
    int records, scene_hit_t* out, scene_packet_hits_t* cols, const unsigned W) {
  // no lane hit a geometry (rays into the sky, a third of a lidar's): the misses at once
  const __m256i none = _mm256_set1_epi32((int)RTC_INVALID_GEOMETRY_ID);
  unsigned missed = 0;
  for (unsigned h = 0; h < W; h += 8) {
    __m256i geom = _mm256_load_si256((const __m256i*)(pk->u + LANE(F_GEOM, h)));
    missed |= (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(geom, none)))
              << h;
  }
  if (missed == (1u << W) - 1u) {
    if (cols) {
      simd_misses(cols);
    } else {
      memset(out, 0, W * sizeof *out);
      for (unsigned k = 0; k < W; k++) {
        out[k].distance = INFINITY;
      }
    }
    return;
  }

  _Alignas(32) double nv[3][WIDE];
  unsigned hit = 0;
  hit_rot_t rot = {0};
  for (unsigned k = 0; k < W; k++) {
    if (k % 4 == 0) {
      uint32_t t4[3][4];
      if (simd_lanes4_one(s, pk, k, records, &rot, nv, t4, &hit, W)) {
        for (unsigned j = 0; j < 4; j++) {
          if (cols) {
            cols->object_id[k + j] = t4[0][j];
            cols->label[k + j] = t4[1][j];
            cols->primitive[k + j] = t4[2][j];
          } else {
            uint32_t tail[4] = {t4[0][j], t4[1][j], t4[2][j], 0};
            memcpy((char*)&out[k + j] + offsetof(scene_hit_t, object_id), tail, sizeof tail);
          }
        }
        k += 3;
        continue;
      }
    }
    uint32_t tail[4] = {0, 0, 0, 0};  // object_id, label, primitive, padding
    const inst_t* in = hit_inst(s, pk, W, k);
    if (in) {
      double n[3];
      hit_normal(in, pk, W, k, &rot, n);
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


SIMD_AVX2_FN void simd_misses(scene_packet_hits_t* h) {
  // written out, not a loop: the compiler turns a loop of zero stores into string stores,
  // whose start costs more than the stores
  const __m256d inf = _mm256_set1_pd(INFINITY), zero = _mm256_setzero_pd();
#define SIMD_MISS4(k)                    \
  _mm256_storeu_pd(h->distance + k, inf); \
  _mm256_storeu_pd(h->nx + k, zero);      \
  _mm256_storeu_pd(h->ny + k, zero);      \
  _mm256_storeu_pd(h->nz + k, zero)
  SIMD_MISS4(0);
  SIMD_MISS4(4);
  SIMD_MISS4(8);
  SIMD_MISS4(12);
#undef SIMD_MISS4
  const __m256i z = _mm256_setzero_si256();
  _mm256_storeu_si256((__m256i*)h->object_id, z);
  _mm256_storeu_si256((__m256i*)(h->object_id + 8), z);
  _mm256_storeu_si256((__m256i*)h->label, z);
  _mm256_storeu_si256((__m256i*)(h->label + 8), z);
  _mm256_storeu_si256((__m256i*)h->primitive, z);
  _mm256_storeu_si256((__m256i*)(h->primitive + 8), z);
}


SIMD_AVX2_FN bool simd_cols_on(const scene_packet_t* pk) {
  const __m256d zero = _mm256_setzero_pd();
  __m256d on = _mm256_cmp_pd(_mm256_loadu_pd(pk->tmax), zero, _CMP_GT_OQ);
  for (unsigned k = 4; k < WIDE; k += 4) {
    on = _mm256_and_pd(on, _mm256_cmp_pd(_mm256_loadu_pd(pk->tmax + k), zero, _CMP_GT_OQ));
  }
  return _mm256_movemask_pd(on) == 0xF;
}


SIMD_AVX2_FN void simd_hits(const scene_t* s, const packet_t* pk, const double dir[3][LANES],
                            int records, scene_hit_t* out) {
  simd_hits_of(s, pk, dir[0], dir[1], dir[2], records, out, NULL, LANES);
}


// The lanes of eight rays (origins o, directions d, as floats) that packet_lane_ok refuses, a
// bit each: the same float comparisons, eight lanes at once.
SIMD_AVX2_FN static inline unsigned simd_bad8(const __m256 o[3], const __m256 d[3]) {
  const __m256 big = _mm256_set1_ps((float)SCENE_RAY_MAX), tiny = _mm256_set1_ps(FLT_MIN);
  const __m256 fsign = _mm256_set1_ps(-0.0f);
  __m256 in = _mm256_castsi256_ps(_mm256_set1_epi32(-1)), nonzero = _mm256_setzero_ps();
  for (unsigned a = 0; a < 3; a++) {
    __m256 v = _mm256_andnot_ps(fsign, o[a]);
    in = _mm256_and_ps(in, _mm256_cmp_ps(v, big, _CMP_LE_OQ));
  }
  for (unsigned a = 0; a < 3; a++) {
    __m256 v = _mm256_andnot_ps(fsign, d[a]);
    in = _mm256_and_ps(in, _mm256_cmp_ps(v, big, _CMP_LE_OQ));
    nonzero = _mm256_or_ps(nonzero, _mm256_cmp_ps(v, tiny, _CMP_GE_OQ));
  }
  return ~(unsigned)_mm256_movemask_ps(_mm256_and_ps(in, nonzero)) & 0xFFu;
}


// The fields of a packet of W lanes that do not depend on its rays (as trace_packet sets them),
// and its valid lanes: all but those whose bit is set in off. Eight lanes a store, as Embree
// reads them back at once.
__attribute__((always_inline)) SIMD_AVX2_FN static inline void simd_fixed_fields(
    packet_t* pk, unsigned off, int* valid, const unsigned W) {
  const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  const __m256i zero = _mm256_setzero_si256(), ones = _mm256_set1_epi32(-1);
  const __m256i none = _mm256_set1_epi32((int)RTC_INVALID_GEOMETRY_ID);
  for (unsigned h = 0; h < W; h += 8) {
    __m256i o = _mm256_and_si256(_mm256_set1_epi32((int)(off >> h)), bit);
    _mm256_store_si256((__m256i*)(valid + h), _mm256_cmpeq_epi32(o, zero));
    _mm256_store_ps(pk->f + LANE(F_TNEAR, h), _mm256_set1_ps(SCENE_RAY_TNEAR));
    _mm256_store_si256((__m256i*)(pk->u + LANE(F_MASK, h)), ones);
    _mm256_store_si256((__m256i*)(pk->u + LANE(F_ID, h)),
                       _mm256_setr_epi32((int)h, (int)h + 1, (int)h + 2, (int)h + 3, (int)h + 4,
                                         (int)h + 5, (int)h + 6, (int)h + 7));
    _mm256_store_si256((__m256i*)(pk->u + LANE(F_FLAGS, h)), zero);
    _mm256_store_si256((__m256i*)(pk->u + LANE(F_GEOM, h)), none);
    _mm256_store_si256((__m256i*)(pk->u + LANE(F_INST, h)), none);
  }
}


// The rest of a full 16-wide packet whose rays are in pk (origins, directions, tfar, time):
// the constant fields (unless valid_in, the valid lanes, says they are written already),
// packet_intersect's coherence test, the intersection and the hits, into rows (out) or columns
// (cols). dx, dy, dz: the unit directions (double), WIDE each.
SIMD_AVX2_FN static void simd_finish16(const scene_t* s, packet_t* pk, const double* dx,
                                       const double* dy, const double* dz, unsigned off,
                                       const int* valid_in, scene_hit_t* out,
                                       scene_packet_hits_t* cols) {
  const unsigned W = WIDE;
  _Alignas(64) int valid_own[WIDE];
  const int* valid = valid_in;
  if (!valid_in) {
    simd_fixed_fields(pk, off, valid_own, W);
    valid = valid_own;
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


// Four rays r[0 .. 3] as columns: c[0 .. 7] their origins x y z, directions x y z, tmax and
// times.
__attribute__((always_inline)) SIMD_AVX2_FN static inline void simd_rows4(const scene_ray_t* r,
                                                                          __m256d c[8]) {
  __m256d a0 = _mm256_loadu_pd(r[0].origin), a1 = _mm256_loadu_pd(r[1].origin);
  __m256d a2 = _mm256_loadu_pd(r[2].origin), a3 = _mm256_loadu_pd(r[3].origin);
  __m256d b0 = _mm256_loadu_pd(&r[0].dir[1]), b1 = _mm256_loadu_pd(&r[1].dir[1]);
  __m256d b2 = _mm256_loadu_pd(&r[2].dir[1]), b3 = _mm256_loadu_pd(&r[3].dir[1]);
  __m256d t0 = _mm256_unpacklo_pd(a0, a1), t1 = _mm256_unpackhi_pd(a0, a1);
  __m256d t2 = _mm256_unpacklo_pd(a2, a3), t3 = _mm256_unpackhi_pd(a2, a3);
  c[0] = _mm256_permute2f128_pd(t0, t2, 0x20), c[1] = _mm256_permute2f128_pd(t1, t3, 0x20);
  c[2] = _mm256_permute2f128_pd(t0, t2, 0x31), c[3] = _mm256_permute2f128_pd(t1, t3, 0x31);
  t0 = _mm256_unpacklo_pd(b0, b1), t1 = _mm256_unpackhi_pd(b0, b1);
  t2 = _mm256_unpacklo_pd(b2, b3), t3 = _mm256_unpackhi_pd(b2, b3);
  c[4] = _mm256_permute2f128_pd(t0, t2, 0x20), c[5] = _mm256_permute2f128_pd(t1, t3, 0x20);
  c[6] = _mm256_permute2f128_pd(t0, t2, 0x31), c[7] = _mm256_permute2f128_pd(t1, t3, 0x31);
}


// The full packet of W rows r (every lane's tmax > 0) assembled into pk as trace_packet
// assembles it, their directions (double) into dir (W x, then W y, then W z). False, with pk
// partly written, when a lane is off or packet_lane_ok refuses it: trace_packet takes the packet.
// Eight rays at a time, each field stored and checked whole (as simd_cols_pack).
__attribute__((always_inline)) SIMD_AVX2_FN static inline bool simd_rows_pack(
    const scene_ray_t* r, packet_t* pk, double* dir, const unsigned W) {
  for (unsigned k = 0; k < W; k++) {
    if (!(r[k].tmax > 0.0)) {
      return false;
    }
  }
  unsigned bad = 0;
  for (unsigned h = 0; h < W; h += 8) {
    __m256d lo[8], hi[8];
    simd_rows4(r + h, lo);
    simd_rows4(r + h + 4, hi);
    __m256 v[6];
    for (unsigned a = 0; a < 6; a++) {
      v[a] = _mm256_set_m128(_mm256_cvtpd_ps(hi[a]), _mm256_cvtpd_ps(lo[a]));
      _mm256_store_ps(pk->f + LANE(a < 3 ? F_ORG_X + a : F_DIR_X + a - 3, h), v[a]);
    }
    for (unsigned a = 0; a < 3; a++) {
      _mm256_store_pd(dir + a * W + h, lo[3 + a]);
      _mm256_store_pd(dir + a * W + h + 4, hi[3 + a]);
    }
    _mm256_store_ps(pk->f + LANE(F_TFAR, h),
                    _mm256_set_m128(_mm256_cvtpd_ps(hi[6]), _mm256_cvtpd_ps(lo[6])));
    _mm256_store_ps(pk->f + LANE(F_TIME, h),
                    _mm256_set_m128(simd_clamp_times(hi[7]), simd_clamp_times(lo[7])));
    bad |= simd_bad8(v, v + 3);
  }
  return bad == 0;
}


SIMD_AVX2_FN bool simd_packet16(const scene_t* s, const scene_ray_t* r, scene_hit_t* out) {
  _Alignas(64) packet_t pk;
  _Alignas(32) double dir[3 * WIDE];
  if (!simd_rows_pack(r, &pk, dir, WIDE)) {
    return false;
  }
  simd_finish16(s, &pk, dir, dir + WIDE, dir + 2 * WIDE, 0, NULL, out, NULL);
  return true;
}


SIMD_AVX2_FN bool simd_packet8(const scene_t* s, const scene_ray_t* r, scene_hit_t* out) {
  const unsigned W = LANES;
  _Alignas(64) packet_t pk;
  _Alignas(32) double dir[3 * LANES];
  _Alignas(64) int valid[WIDE];
  if (!simd_rows_pack(r, &pk, dir, W)) {
    return false;
  }
  simd_fixed_fields(&pk, 0, valid, W);
  packet_intersect(s, &pk, valid, W, W, simd_coherent(&pk));
  simd_hits_of(s, &pk, dir, dir + W, dir + 2 * W, 0, out, NULL, W);
  return true;
}


// Eight doubles as floats, in one register.
SIMD_AVX2_FN static inline __m256 simd_cvt8(const double* p) {
  return _mm256_set_m128(_mm256_cvtpd_ps(_mm256_loadu_pd(p + 4)),
                         _mm256_cvtpd_ps(_mm256_loadu_pd(p)));
}


// Eight lanes at a time, each field stored whole and checked in registers: stored in halves,
// the fields the coherence test and the validity check read back at once (eight lanes each)
// would wait for the halves to leave the store buffer.
SIMD_AVX2_FN unsigned simd_cols_pack(const scene_packet_t* in, packet_t* pk) {
  const unsigned W = WIDE;
  unsigned bad = 0;
  for (unsigned h = 0; h < W; h += 8) {
    const double* src[6] = {in->ox + h, in->oy + h, in->oz + h, in->dx + h, in->dy + h,
                            in->dz + h};
    __m256 v[6];
    for (unsigned a = 0; a < 6; a++) {
      v[a] = simd_cvt8(src[a]);
      _mm256_store_ps(pk->f + LANE(a < 3 ? F_ORG_X + a : F_DIR_X + a - 3, h), v[a]);
    }
    _mm256_store_ps(pk->f + LANE(F_TFAR, h), simd_cvt8(in->tmax + h));
    _mm256_store_ps(pk->f + LANE(F_TIME, h),
                    _mm256_set_m128(simd_clamp_times(_mm256_loadu_pd(in->time + h + 4)),
                                    simd_clamp_times(_mm256_loadu_pd(in->time + h))));
    bad |= simd_bad8(v, v + 3) << h;
  }
  return bad;
}


SIMD_AVX2_FN void simd_cols_trace(const scene_t* s, packet_t* pk, const scene_packet_t* in,
                                  unsigned off, const int* valid, scene_packet_hits_t* out) {
  simd_finish16(s, pk, in->dx, in->dy, in->dz, off, valid, NULL, out);
}


// Sixteen doubles as floats, in one register.
SIMD_AVX512_FN static inline __m512 simd_cvt16(const double* p) {
  return _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(_mm512_loadu_pd(p))),
                            _mm512_cvtpd_ps(_mm512_loadu_pd(p + 8)), 1);
}


// simd_cols_pack's conversions, time clamp and check (simd_bad8's comparisons) sixteen lanes
// at once, and simd_fixed_fields' values.
SIMD_AVX512_FN unsigned simd_cols_pack_avx512(const scene_packet_t* in, packet_t* pk,
                                              unsigned off, int* valid) {
  const unsigned W = WIDE;
  const double* src[6] = {in->ox, in->oy, in->oz, in->dx, in->dy, in->dz};
  const __m512 big = _mm512_set1_ps((float)SCENE_RAY_MAX), tiny = _mm512_set1_ps(FLT_MIN);
  __mmask16 ok = 0xFFFF, nonzero = 0;
  for (unsigned a = 0; a < 6; a++) {
    __m512 v = simd_cvt16(src[a]);
    _mm512_store_ps(pk->f + LANE(a < 3 ? F_ORG_X + a : F_DIR_X + a - 3, 0), v);
    __m512 m = _mm512_abs_ps(v);
    ok &= _mm512_cmp_ps_mask(m, big, _CMP_LE_OQ);
    if (a >= 3) {
      nonzero |= _mm512_cmp_ps_mask(m, tiny, _CMP_GE_OQ);
    }
  }
  _mm512_store_ps(pk->f + LANE(F_TFAR, 0), simd_cvt16(in->tmax));
  const __m512d one = _mm512_set1_pd(1.0), zero = _mm512_setzero_pd();
  __m256 t2[2];
  for (unsigned h = 0; h < 2; h++) {
    __m512d ti = _mm512_loadu_pd(in->time + 8 * h);
    __m512d c = _mm512_mask_blend_pd(_mm512_cmp_pd_mask(ti, one, _CMP_LT_OQ), one, ti);
    c = _mm512_maskz_mov_pd(_mm512_cmp_pd_mask(ti, zero, _CMP_GT_OQ), c);
    t2[h] = _mm512_cvtpd_ps(c);
  }
  _mm512_store_ps(pk->f + LANE(F_TIME, 0),
                  _mm512_insertf32x8(_mm512_castps256_ps512(t2[0]), t2[1], 1));
  const __m512i zi = _mm512_setzero_si512(), ones = _mm512_set1_epi32(-1);
  const __m512i none = _mm512_set1_epi32((int)RTC_INVALID_GEOMETRY_ID);
  _mm512_store_si512(valid, _mm512_movm_epi32((__mmask16)~off));
  _mm512_store_ps(pk->f + LANE(F_TNEAR, 0), _mm512_set1_ps(SCENE_RAY_TNEAR));
  _mm512_store_si512(pk->u + LANE(F_MASK, 0), ones);
  _mm512_store_si512(pk->u + LANE(F_ID, 0),
                     _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
  _mm512_store_si512(pk->u + LANE(F_FLAGS, 0), zi);
  _mm512_store_si512(pk->u + LANE(F_GEOM, 0), none);
  _mm512_store_si512(pk->u + LANE(F_INST, 0), none);
  return ~(unsigned)(ok & nonzero) & 0xFFFFu;
}


// Lanes h .. h + 3 of a packet of columns that simd_packet_above may cull, all ones each: its
// origin in the horizon's region of origins (horizon_above's test), and its components finite
// and within SCENE_RAY_MAX, its direction not below FLT_MIN, so that an invalid ray is not
// culled but counted as invalid by the packet's own check. Both forms of the horizon test take
// it (the AVX-512 one for two fours).
__attribute__((always_inline)) SIMD_AVX2_FN static inline __m256d simd_cullable4(
    const scene_horizon_t* hz, const scene_packet_t* pk, unsigned h) {
  const __m256d sign = _mm256_set1_pd(-0.0), big = _mm256_set1_pd(SCENE_RAY_MAX);
  const __m256d r2 = _mm256_set1_pd(hz->radius * hz->radius);
  __m256d ox = _mm256_loadu_pd(pk->ox + h), oy = _mm256_loadu_pd(pk->oy + h);
  __m256d z = _mm256_loadu_pd(pk->oz + h);
  __m256d x = _mm256_sub_pd(ox, _mm256_set1_pd(hz->center[0]));
  __m256d y = _mm256_sub_pd(oy, _mm256_set1_pd(hz->center[1]));
  __m256d d2 = _mm256_add_pd(_mm256_mul_pd(x, x), _mm256_mul_pd(y, y));
  __m256d ok = _mm256_and_pd(_mm256_cmp_pd(d2, r2, _CMP_LE_OQ),
                             _mm256_cmp_pd(z, _mm256_set1_pd(hz->zlo), _CMP_GE_OQ));
  __m256d ax = _mm256_andnot_pd(sign, _mm256_loadu_pd(pk->dx + h));
  __m256d ay = _mm256_andnot_pd(sign, _mm256_loadu_pd(pk->dy + h));
  __m256d az = _mm256_andnot_pd(sign, _mm256_loadu_pd(pk->dz + h));
  const __m256d comp[6] = {_mm256_andnot_pd(sign, ox), _mm256_andnot_pd(sign, oy),
                           _mm256_andnot_pd(sign, z), ax, ay, az};
  for (unsigned c = 0; c < 6; c++) {
    ok = _mm256_and_pd(ok, _mm256_cmp_pd(comp[c], big, _CMP_LE_OQ));
  }
  __m256d dmax = _mm256_max_pd(_mm256_max_pd(ax, ay), az);   // NaN lanes are out already
  return _mm256_and_pd(ok, _mm256_cmp_pd(dmax, _mm256_set1_pd(FLT_MIN), _CMP_GE_OQ));
}


// horizon_above of each lane, four at a time: the same origin test and the same bins
// (horizon_bin's arithmetic, lane by lane) for the lanes simd_cullable4 lets through.
SIMD_AVX2_FN unsigned simd_packet_above(const scene_horizon_t* hz, const scene_packet_t* pk) {
  const __m256d sign = _mm256_set1_pd(-0.0), zero = _mm256_setzero_pd();
  const __m256d one = _mm256_set1_pd(1.0), two = _mm256_set1_pd(2.0);
  const __m256d three = _mm256_set1_pd(3.0), scale = _mm256_set1_pd(HORIZON_BINS / 4.0);
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
    __m256d inside = simd_cullable4(hz, pk, h);

    // the diamond angle: quadrant base, then ay / s or ax / s
    __m256d dx = _mm256_loadu_pd(pk->dx + h), dy = _mm256_loadu_pd(pk->dy + h);
    __m256d dz = _mm256_loadu_pd(pk->dz + h);
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
    // a bin in range whatever the direction: a NaN or infinite one converts to INT_MIN
    __m128i bin = _mm_min_epi32(_mm256_cvttpd_epi32(_mm256_mul_pd(a, scale)), top);
    bin = _mm_max_epi32(bin, _mm_setzero_si128());
    __m256d lim = _mm256_i32gather_pd(hz->sin_el, bin, 8);
    __m256d up = _mm256_cmp_pd(dz, lim, _CMP_GT_OQ);
    above |= (unsigned)_mm256_movemask_pd(_mm256_and_pd(up, inside)) << h;
  }
  return above;
}


// simd_packet_above eight lanes at a time (AVX-512): the same operations lane by lane, the
// same bins, the same lanes.
SIMD_AVX512_FN unsigned simd_packet_above_avx512(const scene_horizon_t* hz,
                                                 const scene_packet_t* pk) {
  const __m512d zero = _mm512_setzero_pd(), one = _mm512_set1_pd(1.0);
  const __m512d two = _mm512_set1_pd(2.0), three = _mm512_set1_pd(3.0);
  const __m512d scale = _mm512_set1_pd(HORIZON_BINS / 4.0), low = _mm512_set1_pd(hz->sin_low);
  const __m256i top = _mm256_set1_epi32((int)HORIZON_BINS - 1);
  if ((_mm512_cmp_pd_mask(_mm512_loadu_pd(pk->dz), low, _CMP_GT_OQ) |
       _mm512_cmp_pd_mask(_mm512_loadu_pd(pk->dz + 8), low, _CMP_GT_OQ)) == 0) {
    return 0;   // every ray at or below the lowest bin
  }
  unsigned above = 0;
  for (unsigned h = 0; h < WIDE; h += 8) {
    __mmask8 inside = (__mmask8)(_mm256_movemask_pd(simd_cullable4(hz, pk, h)) |
                                 _mm256_movemask_pd(simd_cullable4(hz, pk, h + 4)) << 4);
    if (!inside) {
      continue;   // no lane in the region of origins: no bins to look up
    }

    // the diamond angle: quadrant base, then ay / s or ax / s (as simd_packet_above)
    __m512d dx = _mm512_loadu_pd(pk->dx + h), dy = _mm512_loadu_pd(pk->dy + h);
    __m512d dz = _mm512_loadu_pd(pk->dz + h);
    __m512d ax = _mm512_abs_pd(dx), ay = _mm512_abs_pd(dy), s = _mm512_add_pd(ax, ay);
    __mmask8 xneg = _mm512_cmp_pd_mask(dx, zero, _CMP_LT_OQ);
    __mmask8 yneg = _mm512_cmp_pd_mask(dy, zero, _CMP_LT_OQ);
    __m512d base = _mm512_mask_blend_pd(yneg, _mm512_maskz_mov_pd(xneg, one),
                                        _mm512_mask_blend_pd(xneg, three, two));
    __m512d num = _mm512_mask_blend_pd((__mmask8) ~(xneg ^ yneg), ax, ay);
    __m512d a = _mm512_add_pd(base, _mm512_div_pd(num, s));
    a = _mm512_maskz_mov_pd(_mm512_cmp_pd_mask(s, zero, _CMP_GT_OQ), a);   // (0, 0): bin 0
    __m256i bin = _mm256_min_epi32(_mm512_cvttpd_epi32(_mm512_mul_pd(a, scale)), top);
    bin = _mm256_max_epi32(bin, _mm256_setzero_si256());
    __m512d lim = _mm512_i32gather_pd(bin, hz->sin_el, 8);
    above |= (unsigned)(_mm512_cmp_pd_mask(dz, lim, _CMP_GT_OQ) & inside) << h;
  }
  return above;
}
