// SPDX-License-Identifier: MIT
// qzstd.c: positions as a range image. Each valid point becomes three integers, range
// R = round(r / range_step), azimuth A = round(atan2(y, x) / angle_step) and elevation
// E = round(atan2(z, |xy|) / angle_step), with angle_step = precision / (2 r_max) so that an
// angle's rounding moves a point by at most a quarter of the precision. Each integer is
// predicted from the same channel in the previous columns (the points `stride` and 2 `stride`
// back: 2 v1 - v2, a straight line, leaves zero for a regular pattern), and the residual is
// zigzagged; all arithmetic wraps in uint32, so decoding is exact whatever the values. A miss
// (a zero point, NaN or any non-finite coordinate) codes R = 0 and its kind in A, and takes the
// predictions as its values so the image stays smooth across it. The residual planes and the
// other bytes of the points (each less the same byte `stride` points back) are byte-shuffled
// (byte k of every value together), then zstd. Encoder and decoder keep per-channel state
// (the last two values of each channel, its last angles and their cosines and sines) and work
// a block of points at a time, so that nothing but the zstd input is the size of the cloud;
// angles are found without atan2 from near references (see qzstd_encode).
#include "codec/qzstd.h"

#include <math.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "base/mem.h"
#include "codec/compress.h"

#define NO_POSITIONS 0xFFFFFFFFu
#define KIND_ZERO 0u               // the point is (+0, +0, +0)
#define KIND_NAN 1u                // x, y, z are the quiet NaN 0x7FC00000
#define KIND_RAW 2u                // the 12 bytes follow in the exception list
#define VALUE_LIMIT (1u << 29)     // |R|, |A|, |E| below it: a residual never reaches 2^31
#define STRIDE_SEARCH 512u         // largest stride detected
#define STRIDE_SAMPLE 256u         // points compared per candidate stride
#define CODE_BLOCK 256u            // points whose codes are byte-shuffled together


static inline uint32_t zigzag(uint32_t v) {
  return (v << 1) ^ (0u - (v >> 31));
}


static inline uint32_t unzigzag(uint32_t c) {
  return (c >> 1) ^ (0u - (c & 1u));
}


static inline int32_t as_i32(uint32_t v) {
  return v < 0x80000000u ? (int32_t)v : -(int32_t)(~v) - 1;
}


// Nearest integer of |v| < 2^31, inline and without a branch (lrint is a library call under
// errno rules; a sign test mispredicts on residuals of random sign).
static inline int32_t round_i32(double v) {
#if defined(__SSE2__)
  return _mm_cvtsd_si32(_mm_set_sd(v));  // the current rounding mode: to nearest, ties even
#else
  return (int32_t)(v + copysign(0.5, v));
#endif
}


static void put_u32(uint8_t* p, uint32_t v) {
  for (int k = 0; k < 4; k++) {
    p[k] = (uint8_t)(v >> (8 * k));
  }
}


static uint32_t get_u32(const uint8_t* p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}


static void put_f64(uint8_t* p, double v) {
  uint64_t u;
  memcpy(&u, &v, 8);
  put_u32(p, (uint32_t)u);
  put_u32(p + 4, (uint32_t)(u >> 32));
}


static double get_f64(const uint8_t* p) {
  uint64_t u = (uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32;
  double v;
  memcpy(&v, &u, 8);
  return v;
}


static inline float get_f32(const uint8_t* p) {
  float v;
  memcpy(&v, p, 4);  // little-endian host (x86-64, aarch64)
  return v;
}


// A measured point: x, y, z (their bits) finite and not all zero (+0 or -0).
static inline int measured(uint32_t bx, uint32_t by, uint32_t bz) {
  return ((bx & 0x7F800000u) != 0x7F800000u) & ((by & 0x7F800000u) != 0x7F800000u) &
         ((bz & 0x7F800000u) != 0x7F800000u) & (((bx | by | bz) & 0x7FFFFFFFu) != 0u);
}


// Cosines and sines of the angles met so far, by integer angle: a scan has few distinct
// azimuths (one per column) and elevations (one per channel), so most points find theirs.
#define TRIG_CACHE 4096u

typedef struct trig_cache {
  int32_t key[TRIG_CACHE];
  uint8_t used[TRIG_CACHE];
  double c[TRIG_CACHE];
  double s[TRIG_CACHE];
} trig_cache_t;


static inline void trig(trig_cache_t* t, int32_t k, double step, double* c, double* s) {
  uint32_t h = ((uint32_t)k * 2654435761u) >> 20;
  if (!t->used[h] || t->key[h] != k) {
    double a = (double)k * step;
    t->key[h] = k;
    t->used[h] = 1;
    t->c[h] = cos(a);
    t->s[h] = sin(a);
  }
  *c = t->c[h];
  *s = t->s[h];
}


// Byte offsets of a point that are not positions, in increasing order; returns their number.
static uint32_t rest_offsets(uint32_t step, const uint32_t xyz[3], int has_pos, uint32_t* off) {
  uint32_t n = 0;
  for (uint32_t b = 0; b < step; b++) {
    int pos = 0;
    for (int k = 0; has_pos && k < 3; k++) {
      pos |= b >= xyz[k] && b < xyz[k] + 4;
    }
    if (!pos) {
      off[n++] = b;
    }
  }
  return n;
}

// The angle of (u, v) in steps, found from a reference angle `ref` (steps) of cosine c and
// sine s, the last angle of the point's channel: the sine of the angle between the two is
// t = (v c - u s) / |(u, v)| (inv: 1 / |(u, v)|), and asin t = t + t^3/6 + 3 t^5/40 to within
// 5 t^7/112 (3.5e-11 rad at |t| <= 0.05, a few millionths of a step). Returns 0 (*q not set)
// when the point is not within 0.05 rad of the reference, when |(u, v)| is 0, or when the
// result leaves [-lim, lim] (the range atan2 gives): the caller then uses atan2.
static inline int near_angle(double u, double v, double inv, int32_t ref, double c, double s,
                             double inv_step, int32_t lim, int32_t* q) {
  double cc = u * c + v * s, t = (v * c - u * s) * inv;
  if (!(cc > 0.0 && fabs(t) <= 0.05)) {
    return 0;
  }
  double t2 = t * t;
  double d = t + t * t2 * ((1.0 / 6.0) + t2 * (3.0 / 40.0));
  int32_t r = ref + round_i32(d * inv_step);
  if (r > lim || r < -lim) {
    return 0;
  }
  *q = r;
  return 1;
}


// Byte k (k = 0..3) of codes[i] into planes[k n + i], i < m.
static void shuffle_codes(const uint32_t* codes, size_t m, uint8_t* planes, size_t n) {
  size_t i = 0;
#if defined(__SSE2__)
  const __m128i lo = _mm_set1_epi32(0xFF);
  for (; i + 16 <= m; i += 16) {
    __m128i v[4];
    for (int j = 0; j < 4; j++) {
      v[j] = _mm_loadu_si128((const __m128i*)(const void*)(codes + i + 4 * j));
    }
    for (int k = 0; k < 4; k++) {
      __m128i sh = _mm_cvtsi32_si128(8 * k);
      __m128i a = _mm_packs_epi32(_mm_and_si128(_mm_srl_epi32(v[0], sh), lo),
                                  _mm_and_si128(_mm_srl_epi32(v[1], sh), lo));
      __m128i b = _mm_packs_epi32(_mm_and_si128(_mm_srl_epi32(v[2], sh), lo),
                                  _mm_and_si128(_mm_srl_epi32(v[3], sh), lo));
      _mm_storeu_si128((__m128i*)(void*)(planes + (size_t)k * n + i), _mm_packus_epi16(a, b));
    }
  }
#endif
  for (; i < m; i++) {
    for (int k = 0; k < 4; k++) {
      planes[(size_t)k * n + i] = (uint8_t)(codes[i] >> (8 * k));
    }
  }
}


// codes[i] from byte k (k = 0..3) at planes[k n + i], i < m: the inverse of shuffle_codes.
static void unshuffle_codes(const uint8_t* planes, size_t m, uint32_t* codes, size_t n) {
  size_t i = 0;
#if defined(__SSE2__)
  for (; i + 16 <= m; i += 16) {
    __m128i b[4];
    for (int k = 0; k < 4; k++) {
      b[k] = _mm_loadu_si128((const __m128i*)(const void*)(planes + (size_t)k * n + i));
    }
    __m128i l01 = _mm_unpacklo_epi8(b[0], b[1]), h01 = _mm_unpackhi_epi8(b[0], b[1]);
    __m128i l23 = _mm_unpacklo_epi8(b[2], b[3]), h23 = _mm_unpackhi_epi8(b[2], b[3]);
    __m128i w[4] = {_mm_unpacklo_epi16(l01, l23), _mm_unpackhi_epi16(l01, l23),
                    _mm_unpacklo_epi16(h01, h23), _mm_unpackhi_epi16(h01, h23)};
    for (int j = 0; j < 4; j++) {
      _mm_storeu_si128((__m128i*)(void*)(codes + i + 4 * j), w[j]);
    }
  }
#endif
  for (; i < m; i++) {
    codes[i] = (uint32_t)planes[i] | (uint32_t)planes[n + i] << 8 |
               (uint32_t)planes[2 * n + i] << 16 | (uint32_t)planes[3 * n + i] << 24;
  }
}


// The channel state of the encoder (the points i = k mod stride): the channel's last two
// values of R, A, E (the second last equal to the last one after the channel's first point, so
// that 2 last - second last is always the prediction), and its last measured angles with their
// cosines and sines, from which the next point's angles are found.
typedef struct chan_ref {
  uint32_t h1[3], h2[3];
  int32_t a, e;
  int set;
  double ca, sa, ce, se;
} chan_ref_t;


// Split the other bytes into uint32 words (4 offsets in a row starting at a multiple of 4: a
// float32 or uint32 field) and single bytes; returns the number of words.
static uint32_t rest_words(const uint32_t* off, uint32_t nrest, uint32_t* woff, uint32_t* boff,
                           uint32_t* nbyte) {
  uint32_t nw = 0, nb = 0;
  for (uint32_t j = 0; j < nrest;) {
    if (off[j] % 4 == 0 && j + 3 < nrest && off[j + 3] == off[j] + 3) {
      woff[nw++] = off[j];
      j += 4;
    } else {
      boff[nb++] = off[j++];
    }
  }
  *nbyte = nb;
  return nw;
}


// The prediction of a word of point i from the points before it (at p, `step` bytes apart):
// the column prediction (predict) plus the previous point's miss of its own, so that a field
// smooth along both the channel and the column leaves small residuals. *col: the column
// prediction of point i, which the caller keeps as `prev_col` for point i + 1.
static inline uint32_t predict_word(const uint8_t* p, uint32_t i, uint32_t s, size_t step,
                                    uint32_t prev_col, uint32_t* col) {
  uint32_t c = 0;
  if (i >= 2 * s) {
    c = 2u * get_u32(p + (size_t)(i - s) * step) - get_u32(p + (size_t)(i - 2 * s) * step);
  } else if (i >= s) {
    c = get_u32(p + (size_t)(i - s) * step);
  }
  *col = c;
  return i ? c + (get_u32(p + (size_t)(i - 1) * step) - prev_col) : c;
}


// The stride of an organised scan: the smallest shift at which elevations repeat best.
static uint32_t detect_stride(const uint32_t* e, const uint8_t* valid, uint32_t n) {
  uint32_t smax = n / 2 < STRIDE_SEARCH ? n / 2 : STRIDE_SEARCH;
  if (smax < 2) {
    return 1;
  }
  uint32_t end = n < smax + STRIDE_SAMPLE ? n : smax + STRIDE_SAMPLE;
  double cost[STRIDE_SEARCH + 1];
  double best = INFINITY;
  for (uint32_t s = 1; s <= smax; s++) {
    uint64_t sum = 0, cnt = 0;
    for (uint32_t i = smax; i < end; i++) {
      uint32_t both = valid[i] & valid[i - s];
      int64_t d = (int64_t)as_i32(e[i]) - as_i32(e[i - s]);
      sum += both ? (uint64_t)(d < 0 ? -d : d) : 0u;
      cnt += both;
    }
    cost[s] = cnt ? (double)sum / (double)cnt : INFINITY;
    best = cost[s] < best ? cost[s] : best;
  }
  for (uint32_t s = 1; s <= smax; s++) {
    if (cost[s] <= best + 1.0) {
      return s;
    }
  }
  return 1;
}


size_t qzstd_max_size(const codec_cloud_t* c) {
  return CODEC_QZSTD_HEADER_BYTES + compress_bound((size_t)c->count * c->point_step +
                                                   12u * (size_t)c->count);
}


int qzstd_encode(const codec_params_t* p, const codec_cloud_t* c, uint8_t* out, size_t cap,
                 size_t* out_len, double* max_error, err_msg_t* msg) {
  double prec = p->precision;
  if (!(prec >= CODEC_MIN_PRECISION && prec <= CODEC_MAX_PRECISION)) {
    return err_set(msg, ERR_INVAL, "precision = %g must be in [%g, %g] m", prec,
                   CODEC_MIN_PRECISION, CODEC_MAX_PRECISION);
  }
  if (cap < qzstd_max_size(c)) {
    return err_set(msg, ERR_LIMIT, "output of %zu bytes is below the bound %zu", cap,
                   qzstd_max_size(c));
  }
  const uint32_t n = c->count, step = c->point_step;
  int has_pos = c->xyz_offset[0] >= 0 && c->xyz_offset[1] >= 0 && c->xyz_offset[2] >= 0 &&
                step >= 12;
  uint32_t xyz[3] = {NO_POSITIONS, NO_POSITIONS, NO_POSITIONS};
  if (has_pos) {
    for (int k = 0; k < 3; k++) {
      xyz[k] = (uint32_t)c->xyz_offset[k];
    }
  }
  // the detected stride is at most STRIDE_SEARCH: the channel states are allocated for it
  uint32_t nchan = p->stride ? p->stride : STRIDE_SEARCH;
  nchan = nchan < n ? nchan : (n ? n : 1);
  uint32_t nsample = n < STRIDE_SEARCH + STRIDE_SAMPLE ? n : STRIDE_SEARCH + STRIDE_SAMPLE;

  // the largest range of a measured point (0 < r^2 < infinity: the squares of float32 neither
  // underflow nor overflow in float64) and the number of misses kept raw
  double r2max = 0.0;
  uint32_t nraw = 0;
  for (uint32_t i = 0; has_pos && i < n; i++) {
    const uint8_t* pt = c->data + (size_t)i * step;
    double x = get_f32(pt + xyz[0]), y = get_f32(pt + xyz[1]), z = get_f32(pt + xyz[2]);
    double r2 = x * x + y * y + z * z;
    if (r2 > 0.0 && r2 < INFINITY) {
      r2max = r2 > r2max ? r2 : r2max;
    } else {
      uint32_t bx = get_u32(pt + xyz[0]), by = get_u32(pt + xyz[1]), bz = get_u32(pt + xyz[2]);
      nraw += (bx | by | bz) != 0u &&
              !(bx == 0x7FC00000u && by == 0x7FC00000u && bz == 0x7FC00000u);
    }
  }
  double rmax = sqrt(r2max);
  double range_step = prec;
  // a range beyond 2^29 steps cannot be coded: positions are then kept losslessly
  if (has_pos && rmax / range_step >= (double)(VALUE_LIMIT - 1)) {
    has_pos = 0;
    nraw = 0;
    for (int k = 0; k < 3; k++) {
      xyz[k] = NO_POSITIONS;
    }
  }

  size_t body_cap = (size_t)n * step + 12u * (size_t)nraw;
  uint8_t* body = mem_alloc(body_cap ? body_cap : 1);
  uint32_t* off = mem_alloc(3u * (size_t)step * sizeof(uint32_t) + 1);
  trig_cache_t* tc = has_pos ? mem_calloc(2, sizeof(trig_cache_t)) : NULL;
  chan_ref_t* chan = has_pos ? mem_calloc(nchan, sizeof(chan_ref_t)) : NULL;
  uint32_t* sample = has_pos ? mem_alloc((size_t)nsample * 5u + 1) : NULL;
  if (!body || (has_pos && (!tc || !chan || !sample)) || !off) {
    mem_free(body);
    mem_free(off);
    mem_free(tc);
    mem_free(chan);
    mem_free(sample);
    return err_set(msg, ERR_NOMEM, "out of memory encoding %u points", n);
  }
  double angle_step = 0.0, err_max = 0.0;
  uint32_t stride = 1, nexc = 0;
  uint32_t cb[3][CODE_BLOCK];  // the codes of a block of points, byte-shuffled into the planes

  if (has_pos) {
    angle_step = rmax > 0.0 ? prec / (2.0 * rmax) : prec;
    if (angle_step < M_PI / (double)(VALUE_LIMIT / 2)) {
      angle_step = M_PI / (double)(VALUE_LIMIT / 2);
    }

    const double inv_range = 1.0 / range_step, inv_angle = 1.0 / angle_step;
    const int32_t lim = round_i32(M_PI * inv_angle);

    // the stride, from the elevations of the first points
    if (p->stride) {
      stride = p->stride;
    } else {
      uint8_t* valid = (uint8_t*)(sample + nsample);
      for (uint32_t i = 0; i < nsample; i++) {
        const uint8_t* pt = c->data + (size_t)i * step;
        double x = get_f32(pt + xyz[0]), y = get_f32(pt + xyz[1]), z = get_f32(pt + xyz[2]);
        valid[i] = (uint8_t)measured(get_u32(pt + xyz[0]), get_u32(pt + xyz[1]),
                                     get_u32(pt + xyz[2]));
        sample[i] = valid[i] ? (uint32_t)round_i32(atan2(z, sqrt(x * x + y * y)) * inv_angle)
                             : 0u;
      }
      stride = detect_stride(sample, valid, nsample);
    }
    // quantize each measured point: the range by rounding, its angles from its channel's last
    // ones (atan2 for the first of a channel or a point far from it); then the residuals
    // against the prediction (a miss takes the prediction as its values) and the error of what
    // a decoder rebuilds. Blocks of points: their codes byte-shuffled into the planes.
    uint32_t k = 0;                          // channel of point i: i mod stride (below nchan)
    int32_t last_a = 0;                      // the last azimuth looked up, its cosine and sine
    double last_ca = 1.0, last_sa = 0.0;
#if defined(__SSE2__)
    __m128d err2 = _mm_setzero_pd();          // the largest squared error of the pairs
#endif
    for (uint32_t i0 = 0; i0 < n; i0 += CODE_BLOCK) {
      uint32_t m = n - i0 < CODE_BLOCK ? n - i0 : CODE_BLOCK;
      for (uint32_t j = 0; j < m; j++) {
#if defined(__SSE2__)
        // two measured points whose angles both round to the previous point's azimuth and
        // their channels' elevations (the usual case): the same arithmetic, two at a time
        if (j + 1 < m) {
          const uint8_t* p0 = c->data + (size_t)(i0 + j) * step;
          const uint8_t* p1 = p0 + step;
          uint32_t k1 = k + 1 == stride ? 0 : k + 1;
          chan_ref_t* c0 = &chan[k];
          chan_ref_t* c1 = &chan[k1];
          {
            const __m128d zero = _mm_setzero_pd(), ia = _mm_set1_pd(inv_angle),
                          lim49 = _mm_set1_pd(0.49),
                          abs = _mm_castsi128_pd(_mm_set1_epi64x(0x7FFFFFFFFFFFFFFF));
            __m128d x = _mm_set_pd(get_f32(p1 + xyz[0]), get_f32(p0 + xyz[0]));
            __m128d y = _mm_set_pd(get_f32(p1 + xyz[1]), get_f32(p0 + xyz[1]));
            __m128d z = _mm_set_pd(get_f32(p1 + xyz[2]), get_f32(p0 + xyz[2]));
            __m128d rxy2 = _mm_add_pd(_mm_mul_pd(x, x), _mm_mul_pd(y, y));
            __m128d r2 = _mm_add_pd(rxy2, _mm_mul_pd(z, z));
            __m128d rxy = _mm_sqrt_pd(rxy2), r = _mm_sqrt_pd(r2);
            __m128d lc = _mm_set1_pd(last_ca), ls = _mm_set1_pd(last_sa);
            __m128d ce = _mm_set_pd(c1->ce, c0->ce), se = _mm_set_pd(c1->se, c0->se);
            __m128d ua = _mm_add_pd(_mm_mul_pd(x, lc), _mm_mul_pd(y, ls));
            __m128d ta = _mm_sub_pd(_mm_mul_pd(y, lc), _mm_mul_pd(x, ls));
            __m128d ue = _mm_add_pd(_mm_mul_pd(rxy, ce), _mm_mul_pd(z, se));
            __m128d te = _mm_sub_pd(_mm_mul_pd(z, ce), _mm_mul_pd(rxy, se));
            // measured: 0 < r^2 < infinity (the squares of float32 neither underflow nor
            // overflow in float64); an unset channel has a zero cosine and sine: ue = 0
            __m128d ok = _mm_and_pd(_mm_cmpgt_pd(r2, zero),
                                    _mm_cmplt_pd(r2, _mm_set1_pd(INFINITY)));
            ok = _mm_and_pd(ok, _mm_and_pd(_mm_cmpgt_pd(ua, zero), _mm_cmpgt_pd(ue, zero)));
            ok = _mm_and_pd(ok, _mm_cmplt_pd(_mm_mul_pd(_mm_and_pd(ta, abs), ia),
                                             _mm_mul_pd(lim49, rxy)));
            ok = _mm_and_pd(ok, _mm_cmplt_pd(_mm_mul_pd(_mm_and_pd(te, abs), ia),
                                             _mm_mul_pd(lim49, r)));
            if (_mm_movemask_pd(ok) == 3) {
              __m128i rq = _mm_cvtpd_epi32(_mm_mul_pd(r, _mm_set1_pd(inv_range)));
              __m128d range = _mm_mul_pd(_mm_cvtepi32_pd(rq), _mm_set1_pd(range_step));
              __m128d rc = _mm_mul_pd(range, ce);
              __m128d dx = _mm_sub_pd(_mm_cvtps_pd(_mm_cvtpd_ps(_mm_mul_pd(rc, lc))), x);
              __m128d dy = _mm_sub_pd(_mm_cvtps_pd(_mm_cvtpd_ps(_mm_mul_pd(rc, ls))), y);
              __m128d dz = _mm_sub_pd(_mm_cvtps_pd(_mm_cvtpd_ps(_mm_mul_pd(range, se))), z);
              err2 = _mm_max_pd(err2, _mm_add_pd(_mm_add_pd(_mm_mul_pd(dx, dx),
                                                            _mm_mul_pd(dy, dy)),
                                                 _mm_mul_pd(dz, dz)));
              int32_t rql[2] = {_mm_cvtsi128_si32(rq), _mm_cvtsi128_si32(_mm_srli_si128(rq, 4))};
              for (uint32_t l = 0; l < 2; l++) {
                chan_ref_t* ch = l ? c1 : c0;
                uint32_t val[3] = {(uint32_t)rql[l], (uint32_t)last_a, (uint32_t)ch->e};
                int first = i0 + j + l < stride;
                for (int t = 0; t < 3; t++) {
                  uint32_t pred = 2u * ch->h1[t] - ch->h2[t];
                  cb[t][j + l] = zigzag(val[t] - pred) + (t == 0);
                  ch->h2[t] = first ? val[t] : ch->h1[t];
                  ch->h1[t] = val[t];
                }
                ch->a = last_a;
                ch->ca = last_ca;
                ch->sa = last_sa;
              }
              j++;
              k = k1 + 1 == stride ? 0 : k1 + 1;
              continue;
            }
          }
        }
#endif
        const uint32_t i = i0 + j;
        const uint8_t* pt = c->data + (size_t)i * step;
        chan_ref_t* ch = &chan[k];
        uint32_t pred[3], val[3];
        for (int t = 0; t < 3; t++) {
          pred[t] = 2u * ch->h1[t] - ch->h2[t];
        }
        uint32_t bx = get_u32(pt + xyz[0]), by = get_u32(pt + xyz[1]), bz = get_u32(pt + xyz[2]);
        if (measured(bx, by, bz)) {
          double x = get_f32(pt + xyz[0]), y = get_f32(pt + xyz[1]), z = get_f32(pt + xyz[2]);
          double rxy2 = x * x + y * y;
          double rxy = sqrt(rxy2), r = sqrt(rxy2 + z * z);
          int32_t rq = round_i32(r * inv_range), aq, eq;
          // the azimuth: the previous measured point's (the points of a column share theirs)
          // when the point rounds to it (the sine of the angle between the two below 0.49
          // steps: no division), else found from the channel's last one
          double ua = x * last_ca + y * last_sa, ta = y * last_ca - x * last_sa;
          if (ua > 0.0 && fabs(ta) * inv_angle < 0.49 * rxy) {
            aq = last_a;
          } else {
            double inv = 1.0 / rxy;
            if (!(ch->set &&
                  near_angle(x, y, inv, ch->a, ch->ca, ch->sa, inv_angle, lim, &aq))) {
              aq = round_i32(atan2(y, x) * inv_angle);
            }
            if (aq != last_a) {
              trig(tc, aq, angle_step, &last_ca, &last_sa);
              last_a = aq;
            }
          }
          ch->a = aq;
          ch->ca = last_ca;
          ch->sa = last_sa;
          // the elevation: the channel's last one when the point rounds to it, else found
          // from it
          double ue = rxy * ch->ce + z * ch->se, te = z * ch->ce - rxy * ch->se;
          if (ch->set && ue > 0.0 && fabs(te) * inv_angle < 0.49 * r) {
            eq = ch->e;
          } else {
            double inv = 1.0 / r;
            if (!(ch->set &&
                  near_angle(rxy, z, inv, ch->e, ch->ce, ch->se, inv_angle, lim, &eq))) {
              eq = round_i32(atan2(z, rxy) * inv_angle);
            }
            if (!(ch->set && eq == ch->e)) {
              trig(tc + 1, eq, angle_step, &ch->ce, &ch->se);
              ch->e = eq;
            }
          }
          ch->set = 1;
          double range = (double)rq * range_step, rc = range * ch->ce;
          float fx = (float)(rc * ch->ca), fy = (float)(rc * ch->sa), fz = (float)(range * ch->se);
          double dx = fx - x, dy = fy - y, dz = fz - z;
          double err = dx * dx + dy * dy + dz * dz;
          err_max = err > err_max ? err : err_max;
          val[0] = (uint32_t)rq;
          val[1] = (uint32_t)aq;
          val[2] = (uint32_t)eq;
          cb[0][j] = zigzag(val[0] - pred[0]) + 1u;
          cb[1][j] = zigzag(val[1] - pred[1]);
          cb[2][j] = zigzag(val[2] - pred[2]);
        } else {
          if ((bx | by | bz) == 0u) {
            cb[1][j] = KIND_ZERO;
          } else if (bx == 0x7FC00000u && by == 0x7FC00000u && bz == 0x7FC00000u) {
            cb[1][j] = KIND_NAN;
          } else {
            cb[1][j] = KIND_RAW;
            uint8_t* ex = body + (size_t)n * step + 12u * (size_t)nexc++;
            put_u32(ex, bx);
            put_u32(ex + 4, by);
            put_u32(ex + 8, bz);
          }
          cb[0][j] = 0u;
          cb[2][j] = 0u;
          for (int t = 0; t < 3; t++) {
            val[t] = pred[t];
          }
        }
        int first = i < stride;
        for (int t = 0; t < 3; t++) {
          ch->h2[t] = first ? val[t] : ch->h1[t];
          ch->h1[t] = val[t];
        }
        k = k + 1 == stride ? 0 : k + 1;
      }
      for (int t = 0; t < 3; t++) {
        shuffle_codes(cb[t], m, body + 4u * (size_t)t * n + i0, n);
      }
    }
#if defined(__SSE2__)
    double e2[2];
    _mm_storeu_pd(e2, err2);
    for (int l = 0; l < 2; l++) {
      err_max = e2[l] > err_max ? e2[l] : err_max;
    }
#endif
    err_max = sqrt(err_max);
  }

  // every other byte: words predicted like positions, zigzagged and byte-shuffled; single
  // bytes less the same byte `stride` points back (mod 256)
  if (!has_pos) {
    stride = p->stride ? p->stride : 1;
  }
  uint32_t nrest = rest_offsets(step, xyz, has_pos, off), nbyte;
  uint32_t* woff = off + step;
  uint32_t* boff = off + 2u * step;
  uint32_t nword = rest_words(off, nrest, woff, boff, &nbyte);
  uint8_t* wp = body + (has_pos ? 12u * (size_t)n : 0u);
  for (uint32_t w = 0; w < nword; w++) {
    const uint8_t* base = c->data + woff[w];
    uint32_t prev_col = 0, col;
    for (uint32_t i0 = 0; i0 < n; i0 += CODE_BLOCK) {
      uint32_t m = n - i0 < CODE_BLOCK ? n - i0 : CODE_BLOCK, j = 0;
      for (; j < m && i0 + j < 2u * (uint64_t)stride; j++) {
        uint32_t i = i0 + j;
        cb[0][j] = zigzag(get_u32(base + (size_t)i * step) -
                          predict_word(base, i, stride, step, prev_col, &col));
        prev_col = col;
      }
      // past the first two columns, without a branch: w[i] less its column prediction and
      // the previous point's miss
      const uint8_t* q = base + (size_t)(i0 + j) * step;
      const size_t back = (size_t)stride * step;
      for (; j < m; j++, q += step) {
        col = 2u * get_u32(q - back) - get_u32(q - 2 * back);
        cb[0][j] = zigzag(get_u32(q) - col - (get_u32(q - step) - prev_col));
        prev_col = col;
      }
      shuffle_codes(cb[0], m, wp + 4u * (size_t)w * n + i0, n);
    }
  }
  uint8_t* bp = wp + 4u * (size_t)nword * n;
  for (uint32_t i = 0; nbyte && i < n; i++) {
    const uint8_t* pt = c->data + (size_t)i * step;
    const uint8_t* back = i >= stride ? pt - (size_t)stride * step : NULL;
    for (uint32_t j = 0; j < nbyte; j++) {
      bp[(size_t)j * n + i] = (uint8_t)(pt[boff[j]] - (back ? back[boff[j]] : 0u));
    }
  }

  // header, then one zstd frame
  memcpy(out, CODEC_QZSTD_MAGIC, 4);
  put_u32(out + 4, n);
  put_u32(out + 8, step);
  put_u32(out + 12, stride);
  put_u32(out + 16, xyz[0]);
  put_u32(out + 20, xyz[1]);
  put_u32(out + 24, xyz[2]);
  put_u32(out + 28, nexc);
  put_f64(out + 32, has_pos ? range_step : 0.0);
  put_f64(out + 40, has_pos ? angle_step : 0.0);
  put_f64(out + 48, err_max);
  size_t zlen;
  int rc = compress_zstd(p->level, body, (size_t)n * step + 12u * (size_t)nexc,
                         out + CODEC_QZSTD_HEADER_BYTES, cap - CODEC_QZSTD_HEADER_BYTES, &zlen);
  mem_free(body);
  mem_free(off);
  mem_free(tc);
  mem_free(chan);
  mem_free(sample);
  if (rc) {
    return err_set(msg, rc, "zstd compression failed (%s)", err_str(rc));
  }
  *out_len = CODEC_QZSTD_HEADER_BYTES + zlen;
  *max_error = err_max;
  return 0;
}


int qzstd_decode(const uint8_t* in, size_t len, uint32_t count, uint32_t point_step,
                 uint8_t* out, err_msg_t* msg) {
  if (len < CODEC_QZSTD_HEADER_BYTES || memcmp(in, CODEC_QZSTD_MAGIC, 4) != 0) {
    return err_set(msg, ERR_PROTO, "data does not start with a quantized_zstd header");
  }
  const uint32_t n = get_u32(in + 4), step = get_u32(in + 8), stride = get_u32(in + 12);
  uint32_t xyz[3] = {get_u32(in + 16), get_u32(in + 20), get_u32(in + 24)};
  const uint32_t nexc = get_u32(in + 28);
  const double range_step = get_f64(in + 32), angle_step = get_f64(in + 40);
  if (n != count || step != point_step) {
    return err_set(msg, ERR_PROTO, "header says %u points of %u bytes, the message %u of %u", n,
                   step, count, point_step);
  }
  int has_pos = xyz[0] != NO_POSITIONS;
  if (has_pos) {
    for (int k = 0; k < 3; k++) {
      for (int m = 0; m < k; m++) {
        if ((xyz[k] > xyz[m] ? xyz[k] - xyz[m] : xyz[m] - xyz[k]) < 4u) {
          return err_set(msg, ERR_PROTO, "header: position offsets overlap");
        }
      }
      if (xyz[k] == NO_POSITIONS || (uint64_t)xyz[k] + 4u > step) {
        return err_set(msg, ERR_PROTO, "header: offset of %c is %u in a point of %u bytes",
                       "xyz"[k], xyz[k], step);
      }
    }
    if (!(range_step > 0.0) || !(angle_step > 0.0) || !isfinite(range_step) ||
        !isfinite(angle_step)) {
      return err_set(msg, ERR_PROTO, "header: stride, range_step or angle_step is not valid");
    }
  }
  if (stride == 0) {
    return err_set(msg, ERR_PROTO, "header: stride is 0");
  }
  if (nexc > n || (!has_pos && nexc)) {
    return err_set(msg, ERR_PROTO, "header: %u exceptions for %u points", nexc, n);
  }
  size_t body_len = (size_t)n * step + 12u * (size_t)nexc;
  uint32_t nchan = stride < n ? stride : (n ? n : 1);
  uint8_t* body = mem_alloc(body_len ? body_len : 1);
  uint32_t* off = mem_alloc(3u * (size_t)step * sizeof(uint32_t) + 1);
  trig_cache_t* tc = has_pos ? mem_calloc(2, sizeof(trig_cache_t)) : NULL;
  chan_ref_t* chan = has_pos ? mem_calloc(nchan, sizeof(chan_ref_t)) : NULL;
  if (!body || (has_pos && (!tc || !chan)) || !off) {
    mem_free(body);
    mem_free(off);
    mem_free(tc);
    mem_free(chan);
    return err_set(msg, ERR_NOMEM, "out of memory decoding %u points", n);
  }
  int rc = decompress_zstd(in + CODEC_QZSTD_HEADER_BYTES, len - CODEC_QZSTD_HEADER_BYTES, body,
                           body_len, msg);
  uint32_t used = 0;
  uint32_t cb[3][CODE_BLOCK];
  if (rc == 0 && has_pos) {
    uint32_t k = 0;                          // channel of point i: i mod stride (below nchan)
    int32_t last_a = 0;                      // the last azimuth looked up, its cosine and sine
    double last_ca = 1.0, last_sa = 0.0;
    for (uint32_t i0 = 0; i0 < n && rc == 0; i0 += CODE_BLOCK) {
      uint32_t m = n - i0 < CODE_BLOCK ? n - i0 : CODE_BLOCK;
      for (int t = 0; t < 3; t++) {
        unshuffle_codes(body + 4u * (size_t)t * n + i0, m, cb[t], n);
      }
      for (uint32_t j = 0; j < m && rc == 0; j++) {
        const uint32_t i = i0 + j;
        chan_ref_t* ch = &chan[k];
        uint32_t val[3];
        for (int t = 0; t < 3; t++) {
          val[t] = 2u * ch->h1[t] - ch->h2[t];
        }
        uint8_t* pt = out + (size_t)i * step;
        uint32_t ca = cb[1][j];
        if (cb[0][j] != 0u) {
          val[0] += unzigzag(cb[0][j] - 1u);
          val[1] += unzigzag(ca);
          val[2] += unzigzag(cb[2][j]);
          int32_t a = as_i32(val[1]), e = as_i32(val[2]);
          if (a != last_a) {
            trig(tc, a, angle_step, &last_ca, &last_sa);
            last_a = a;
          }
          if (!(ch->set && e == ch->e)) {
            trig(tc + 1, e, angle_step, &ch->ce, &ch->se);
            ch->e = e;
            ch->set = 1;
          }
          double range = (double)as_i32(val[0]) * range_step, rc_ = range * ch->ce;
          float v[3] = {(float)(rc_ * last_ca), (float)(rc_ * last_sa), (float)(range * ch->se)};
          for (int t = 0; t < 3; t++) {
            memcpy(pt + xyz[t], &v[t], 4);
          }
        } else {
          uint32_t bits[3] = {0, 0, 0};
          if (ca == KIND_NAN) {
            bits[0] = bits[1] = bits[2] = 0x7FC00000u;
          } else if (ca == KIND_RAW && used < nexc) {
            const uint8_t* ex = body + (size_t)n * step + 12u * (size_t)used++;
            for (int t = 0; t < 3; t++) {
              bits[t] = get_u32(ex + 4 * t);
            }
          } else if (ca != KIND_ZERO) {
            rc = err_set(msg, ERR_PROTO, "point %u: miss kind %u is not valid", i, ca);
          }
          for (int t = 0; t < 3; t++) {
            put_u32(pt + xyz[t], bits[t]);
          }
        }
        int first = i < stride;
        for (int t = 0; t < 3; t++) {
          ch->h2[t] = first ? val[t] : ch->h1[t];
          ch->h1[t] = val[t];
        }
        k = k + 1 == stride ? 0 : k + 1;
      }
    }
    if (rc == 0 && used != nexc) {
      rc = err_set(msg, ERR_PROTO, "%u exceptions announced, %u used", nexc, used);
    }
  }
  if (rc == 0) {
    uint32_t nrest = rest_offsets(step, xyz, has_pos, off), nbyte;
    uint32_t* woff = off + step;
    uint32_t* boff = off + 2u * step;
    uint32_t nword = rest_words(off, nrest, woff, boff, &nbyte);
    const uint8_t* wp = body + (has_pos ? 12u * (size_t)n : 0u);
    for (uint32_t w = 0; w < nword; w++) {
      uint8_t* base = out + woff[w];
      uint32_t prev_col = 0, col;
      for (uint32_t i0 = 0; i0 < n; i0 += CODE_BLOCK) {
        uint32_t m = n - i0 < CODE_BLOCK ? n - i0 : CODE_BLOCK;
        unshuffle_codes(wp + 4u * (size_t)w * n + i0, m, cb[0], n);
        uint32_t j = 0;
        for (; j < m && i0 + j < 2u * (uint64_t)stride; j++) {
          uint32_t i = i0 + j;
          uint32_t pred = predict_word(base, i, stride, step, prev_col, &col);
          prev_col = col;
          put_u32(base + (size_t)i * step, pred + unzigzag(cb[0][j]));
        }
        uint8_t* q = base + (size_t)(i0 + j) * step;
        const size_t back = (size_t)stride * step;
        for (; j < m; j++, q += step) {
          col = 2u * get_u32(q - back) - get_u32(q - 2 * back);
          put_u32(q, col + (get_u32(q - step) - prev_col) + unzigzag(cb[0][j]));
          prev_col = col;
        }
      }
    }
    const uint8_t* bp = wp + 4u * (size_t)nword * n;
    for (uint32_t i = 0; nbyte && i < n; i++) {
      uint8_t* pt = out + (size_t)i * step;
      const uint8_t* back = i >= stride ? pt - (size_t)stride * step : NULL;
      for (uint32_t j = 0; j < nbyte; j++) {
        pt[boff[j]] = (uint8_t)(bp[(size_t)j * n + i] + (back ? back[boff[j]] : 0u));
      }
    }
  }
  mem_free(body);
  mem_free(off);
  mem_free(tc);
  mem_free(chan);
  return rc;
}
