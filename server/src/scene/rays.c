// SPDX-License-Identifier: MIT
// rays.c: rays as a request carries them (arrays of doubles, directions of any length, absolute
// times) traced in one pass per 8-ray packet: check and convert, trace, write the hits.
#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <pmmintrin.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <xmmintrin.h>

#include "scene/packet.h"

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
  // comparisons are false for NaN; the origin's bound also excludes infinities, and a length
  // whose inverse overflows (or 0, whatever min_direction says) would make a non-finite
  // direction
  const double* o = in->origins + 3 * i;
  const double* d = in->directions + 3 * i;
  double mc = rays_max_coord(in);
  bool ok = fabs(o[0]) <= mc && fabs(o[1]) <= mc && fabs(o[2]) <= mc && fabs(d[0]) <= DBL_MAX &&
            fabs(d[1]) <= DBL_MAX && fabs(d[2]) <= DBL_MAX && !isnan(in->tmax);
  double len = ok ? xform_norm3(d) : 0.0;
  double inv = 1.0 / len;
  if (!ok || !(len >= in->min_direction) || !(inv <= DBL_MAX)) {
    return false;
  }
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
  (void)trace_packet(s, r, out, n, LANES);   // every ray valid: scene_ray_from took it
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


// rays_trace in two passes, as trace_rows with a filter: rays built in the caller's mode, then
// traced. hits[k] is ray begin + k's.
static size_t trace_apart(const scene_t* s, const scene_rays_t* in, size_t begin, size_t end,
                          scene_hit_t* hits, const scene_filter_t* f) {
  scene_ray_t r[FILTER_BATCH];
  for (size_t i = begin; i < end; i += FILTER_BATCH) {
    size_t n = end - i < FILTER_BATCH ? end - i : FILTER_BATCH;
    for (size_t k = 0; k < n; k++) {
      if (!scene_ray_from(in, i + k, &r[k])) {
        return i + k;
      }
    }
    trace_rows(s, r, hits + (i - begin), n, LANES, NULL);
    for (size_t k = 0; in->records && k < n; k++) {
      hits[i - begin + k].primitive = 0;
    }
  }
  if (f && f->nexclude != 0) {
    filter_hits(s, NULL, in, begin, hits, end - begin, f);
  }
  return end;
}


// Rays [begin, end) of `in`, their hits into hits[0, end - begin). Returns end, or the index of
// a ray scene_ray_from refuses.
static size_t trace_range(const scene_t* s, const scene_rays_t* in, size_t begin, size_t end,
                          scene_hit_t* hits, const scene_filter_t* f) {
  // The rays are converted under the tracing MXCSR, where trace_apart builds them in the
  // caller's mode: the same bits, since a subnormal direction component or quotient becomes
  // a zero float either way and a direction's length ignores it, but times and steps near
  // 1e-300 s could part (t - t0 flushed to zero): those rays take the two passes.
  if (!times_plain(in, begin, end)) {
    return trace_apart(s, in, begin, end, hits, f);
  }
  if (isnan(in->tmax)) {
    return begin;   // as scene_ray_from refuses every ray (the packets' tfar below assume it)
  }

  // what every lane of a full packet shares (trace_packet's values, converted as it does)
  double t = ray_time(in, begin);
  bool on = in->tmax > 0.0;
  const bool simd = simd_level() >= SIMD_AVX2;

  // flush-to-zero and denormals-are-zero for this call, as trace_rows
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
      const char* h = (const char*)(hits + (i - begin) + LANES);
      for (unsigned b = 0; b < 3 * LANES * sizeof(double); b += 64) {
        _mm_prefetch(o + b, _MM_HINT_T0);
        _mm_prefetch(d + b, _MM_HINT_T0);
      }
      for (unsigned b = 0; b < LANES * sizeof(scene_hit_t); b += 64) {
        _mm_prefetch(h + b, _MM_HINT_T0);
      }
    }
    if (simd && n == LANES) {
      const unsigned W = LANES;
      _Alignas(64) packet_t pk;
      _Alignas(64) int valid[WIDE];
      _Alignas(32) double dir[3][LANES];
      if (simd_pack(in, i, time, tfar, on, &pk, valid, dir)) {
        packet_intersect(s, &pk, valid, W, W, on ? simd_coherent(&pk) : -1);
        simd_hits(s, &pk, dir, in->records, hits + (i - begin));
        done = i + LANES;
        continue;
      }
    }
    bad = scalar_packet(s, in, i, n, hits + (i - begin));
    done = bad == SIZE_MAX ? i + n : i;
  }
  _mm_setcsr(csr);
  atomic_fetch_add(&((scene_t*)s)->rays_traced, done - begin);
  if (bad != SIZE_MAX) {
    return bad;
  }

  // past the excluded objects, in the caller's floating-point mode as trace_rows
  if (f && f->nexclude != 0) {
    filter_hits(s, NULL, in, begin, hits, end - begin, f);
  }
  return end;
}


size_t rays_trace(const scene_t* s, const scene_rays_t* in, size_t first, size_t n,
                  scene_hit_t* hits, const scene_filter_t* f) {
  return trace_range(s, in, first, first + n, hits, f) - first;
}
