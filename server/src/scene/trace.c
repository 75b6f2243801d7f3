// SPDX-License-Identifier: MIT
// trace.c: tracing in the Embree backend: rays in rows or in packets of columns, in packets of
// 8 or 16 (packet.h, simd.c), and the passes that take rays on past the objects a filter hides.
#include <immintrin.h>
#include <math.h>
#include <pmmintrin.h>
#include <stdatomic.h>
#include <string.h>
#include <xmmintrin.h>

#include "scene/packet.h"

// The rays in packets of `width`, the last one partial. Always inlined, so that each caller's
// constant width specialises the packet code.
__attribute__((always_inline)) static inline void rows_packets(
    const scene_t* s, const scene_ray_t* rays, scene_hit_t* hits, size_t n, unsigned width) {
  // Embree wants flush-to-zero and denormals-are-zero in tracing threads; set them for this
  // call only, so the caller's own double arithmetic keeps its rounding mode afterwards.
  unsigned csr = _mm_getcsr();
  _MM_SET_FLUSH_ZERO_MODE(_MM_FLUSH_ZERO_ON);
  _MM_SET_DENORMALS_ZERO_MODE(_MM_DENORMALS_ZERO_ON);
  size_t bad = 0;
  const bool simd = simd_level() >= SIMD_AVX2;
  for (size_t i = 0; i < n; i += width) {
    unsigned m = (unsigned)(n - i < width ? n - i : width);
    if (n - i >= 2 * (size_t)width) {
      // the next packet's rays and hits, fetched while this one is traced (as trace_columns)
      for (size_t b = 0; b < width * sizeof *rays; b += 64) {
        _mm_prefetch((const char*)(rays + i + width) + b, _MM_HINT_T0);
      }
      for (size_t b = 0; b < width * sizeof *hits; b += 64) {
        _mm_prefetch((const char*)(hits + i + width) + b, _MM_HINT_T0);
      }
    }
    if (m == width && simd &&
        (width == WIDE ? simd_packet16(s, rays + i, hits + i)
                       : simd_packet8(s, rays + i, hits + i))) {
      continue;
    }
    bad += trace_packet(s, rays + i, hits + i, m, width);
  }
  _mm_setcsr(csr);

  // Tracing threads share the scene read-only; its ray counters are the fields they write.
  atomic_fetch_add(&((scene_t*)s)->rays_traced, n - bad);
}


void trace_rows(const scene_t* s, const scene_ray_t* rays, scene_hit_t* hits, size_t n,
                unsigned width, const scene_filter_t* f) {
  if (width == WIDE) {
    rows_packets(s, rays, hits, n, WIDE);
  } else {
    rows_packets(s, rays, hits, n, LANES);
  }
  if (f && f->nexclude != 0) {
    filter_hits(s, rays, NULL, 0, hits, n, f);
  }
}


bool filter_excludes(const scene_filter_t* f, uint32_t object_id) {
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
static bool packet_full(const scene_packet_t* pk, unsigned m, bool simd) {
  return m == WIDE && simd && simd_cols_on(pk);
}


// A packet of columns (m lanes) as trace_rows traces the same rays in rows of 16: its hits
// into h.
static void columns_as_rows(const scene_t* s, const scene_packet_t* pk, unsigned m,
                            scene_packet_hits_t* h, const scene_filter_t* f) {
  scene_ray_t rays[WIDE];
  scene_hit_t hits[WIDE];
  packet_rows(pk, NULL, m, rays, NULL);
  trace_rows(s, rays, hits, m, WIDE, f);
  hits_columns(hits, m, h);
}


// The next packet's rays and hits fetched while this one is traced: a caller's packets stream
// through memory (1 KiB of rays and 448 bytes of hits each) and Embree's traversal between
// them keeps the hardware prefetchers behind, so that each packet's first loads and stores
// would wait for memory.
static inline void columns_prefetch(const scene_packet_t* in, const scene_packet_hits_t* out) {
  for (size_t b = 0; b < sizeof *in; b += 64) {
    _mm_prefetch((const char*)in + b, _MM_HINT_T0);
  }
  for (size_t b = 0; b < sizeof *out; b += 64) {
    _mm_prefetch((const char*)out + b, _MM_HINT_T0);
  }
}


// Rays in packets of columns (SCENE_COLUMNS): the full packets on the AVX2 path, their lanes
// above the horizon hz (nullable) untraced; the others as trace_rows traces them in rows of 16.
static void trace_columns(const scene_t* s, const scene_packet_t* in, size_t n,
                          scene_packet_hits_t* out, const scene_filter_t* f,
                          const scene_horizon_t* hz) {
  // the full packets, in rows_packets' floating-point environment set once for all of them;
  // their lanes above the horizon are off (all of them: no trace at all, nor a conversion). A
  // packet with an invalid ray (input no caller should make) is traced in rows at once, as the
  // partial ones below, in the caller's floating-point environment (none of its rays culled).
  size_t traced = 0, culled = 0, apart = 0;
  const bool simd = simd_level() >= SIMD_AVX2;   // once: both passes must agree
  const bool wide = simd_level() >= SIMD_AVX512;
  unsigned csr = _mm_getcsr();
  _MM_SET_FLUSH_ZERO_MODE(_MM_FLUSH_ZERO_ON);
  _MM_SET_DENORMALS_ZERO_MODE(_MM_DENORMALS_ZERO_ON);
  for (size_t i = 0; i < n; i += WIDE) {
    unsigned m = (unsigned)(n - i < WIDE ? n - i : WIDE);
    if (n - i > WIDE) {
      columns_prefetch(&in[i / WIDE + 1], &out[i / WIDE + 1]);
    }
    if (!packet_full(&in[i / WIDE], m, simd)) {
      continue;
    }
    unsigned off = !hz ? 0u
                   : wide ? simd_packet_above_avx512(hz, &in[i / WIDE])
                          : simd_packet_above(hz, &in[i / WIDE]);
    if (off == 0xFFFFu) {
      simd_misses(&out[i / WIDE]);
      culled += WIDE;
      continue;
    }
    // counted only when some lanes are off (a few packets at the horizon's edge): without the
    // popcnt instruction in this file's baseline ISA the count is a libgcc call
    unsigned noff = off ? (unsigned)__builtin_popcount(off) : 0u;
    _Alignas(64) packet_t pk;
    _Alignas(64) int valid[WIDE];   // the AVX-512 packing's valid lanes (simd_cols_trace)
    unsigned bad = wide ? simd_cols_pack_avx512(&in[i / WIDE], &pk, off, valid)
                        : simd_cols_pack(&in[i / WIDE], &pk);
    if (__builtin_expect(bad != 0, 0)) {
      _mm_setcsr(csr);
      columns_as_rows(s, &in[i / WIDE], m, &out[i / WIDE], f);
      _MM_SET_FLUSH_ZERO_MODE(_MM_FLUSH_ZERO_ON);
      _MM_SET_DENORMALS_ZERO_MODE(_MM_DENORMALS_ZERO_ON);
      apart += m;
      continue;
    }
    simd_cols_trace(s, &pk, &in[i / WIDE], off, wide ? valid : NULL, &out[i / WIDE]);
    traced += m - noff;
    culled += noff;
  }
  _mm_setcsr(csr);
  atomic_fetch_add(&((scene_t*)s)->rays_traced, traced);
  if (culled) {
    atomic_fetch_add(&((scene_t*)s)->rays_culled, culled);
  }

  // the others as trace_rows traces them in rows of 16; then its filter pass for the full
  // packets that hit an excluded object
  const bool filtered = f && f->nexclude != 0;
  scene_ray_t rays[WIDE];
  scene_hit_t hits[WIDE];
  for (size_t i = 0; i < n && (traced + culled + apart < n || filtered); i += WIDE) {
    const scene_packet_t* pk = &in[i / WIDE];
    scene_packet_hits_t* h = &out[i / WIDE];
    unsigned m = (unsigned)(n - i < WIDE ? n - i : WIDE);
    if (!packet_full(pk, m, simd)) {
      columns_as_rows(s, pk, m, h, f);
      continue;
    }
    bool hidden = false;
    for (unsigned k = 0; filtered && k < m && !hidden; k++) {
      hidden = h->object_id[k] != 0 && filter_excludes(f, h->object_id[k]);
    }
    if (hidden) {
      packet_rows(pk, h, m, rays, hits);
      filter_hits(s, rays, NULL, 0, hits, m, f);
      hits_columns(hits, m, h);
    }
  }
}


void filter_hits(const scene_t* s, const scene_ray_t* rays, const scene_rays_t* in,
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
      if (hits[i].object_id != 0 && filter_excludes(f, hits[i].object_id)) {
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
        if (h->object_id == 0 || !filter_excludes(f, h->object_id)) {
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
      trace_rows(s, more, got, m, LANES, NULL);
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
      if (h->object_id != 0 && filter_excludes(f, h->object_id)) {
        memset(h, 0, sizeof *h);
        h->distance = INFINITY;
      }
    }
  }
}


size_t scene_trace(const scene_t* s, const scene_batch_t* b) {
  switch (b->layout) {
    case SCENE_ROWS:
      trace_rows(s, b->rays, b->hits, b->n, b->group == WIDE ? WIDE : LANES, b->filter);
      return b->n;
    case SCENE_COLUMNS:
      trace_columns(s, b->packets, b->n, b->packet_hits, b->filter, b->horizon);
      return b->n;
    case SCENE_REQUEST:
      return rays_trace(s, b->request, b->first, b->n, b->hits, b->filter);
  }
  return 0;
}
