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
// (byte k of every value together), then zstd.
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
#define STRIDE_SAMPLE 1024u        // points compared per candidate stride


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


static inline uint32_t predict(const uint32_t* h, uint32_t i, uint32_t s) {
  if (i >= 2 * s) {
    return 2u * h[i - s] - h[i - 2 * s];
  }
  return i >= s ? h[i - s] : 0u;
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


// The position a decoder rebuilds from the integers (the same expression in every decoder):
// range = r rs, az = a as, el = e as; x = (range cos el) cos az, y = (range cos el) sin az,
// z = range sin el, rounded to float32.
static inline void rebuild(trig_cache_t* ta, trig_cache_t* te, int32_t r, int32_t a, int32_t e,
                           double rs, double as, float out[3]) {
  double range = (double)r * rs, ca, sa, ce, se;
  trig(ta, a, as, &ca, &sa);
  trig(te, e, as, &ce, &se);
  double rc = range * ce;
  out[0] = (float)(rc * ca);
  out[1] = (float)(rc * sa);
  out[2] = (float)(range * se);
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


// The angle of (u, v) in steps. Near its prediction (the usual case in a scan) it is found
// from the small angle between the two, atan(t) = t - t^3/3 for |t| <= 1e-3 (the next term,
// below 2e-16 rad, is negligible); elsewhere from atan2.
// *c, *s: the cosine and sine of the result, looked up when it differs from the prediction.
static inline int32_t quantize_angle(trig_cache_t* t, double u, double v, uint32_t pred,
                                     double step, double inv_step, double* c, double* s) {
  int32_t p = as_i32(pred), q;
  if (p > -(int32_t)VALUE_LIMIT && p < (int32_t)VALUE_LIMIT) {
    trig(t, p, step, c, s);
    double cc = u * *c + v * *s, ss = v * *c - u * *s;
    if (cc > 0.0 && fabs(ss) <= 1e-3 * cc) {
      double d = ss / cc;
      d -= d * d * d * (1.0 / 3.0);
      q = p + round_i32(d * inv_step);
      if (q != p) {
        trig(t, q, step, c, s);
      }
      return q;
    }
  }
  q = round_i32(atan2(v, u) * inv_step);
  trig(t, q, step, c, s);
  return q;
}


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
      if (valid[i] && valid[i - s]) {
        int64_t d = (int64_t)as_i32(e[i]) - as_i32(e[i - s]);
        sum += (uint64_t)(d < 0 ? -d : d);
        cnt++;
      }
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
  size_t body_cap = (size_t)n * step + 12u * (size_t)n;
  uint8_t* body = mem_alloc(body_cap ? body_cap : 1);
  uint32_t* h = has_pos ? mem_alloc(3u * (size_t)n * sizeof(uint32_t) + 1) : NULL;
  uint8_t* valid = has_pos ? mem_alloc((size_t)n + 1) : NULL;
  uint32_t* off = mem_alloc(3u * (size_t)step * sizeof(uint32_t) + 1);
  trig_cache_t* tc = has_pos ? mem_calloc(2, sizeof(trig_cache_t)) : NULL;
  if (!body || (has_pos && (!h || !valid || !tc)) || !off) {
    mem_free(body);
    mem_free(h);
    mem_free(valid);
    mem_free(off);
    mem_free(tc);
    return err_set(msg, ERR_NOMEM, "out of memory encoding %u points", n);
  }
  double range_step = prec, angle_step = 0.0, err_max = 0.0;
  uint32_t stride = 1, nexc = 0;

  // classify the points and find the largest range
  double rmax = 0.0;
  for (uint32_t i = 0; has_pos && i < n; i++) {
    const uint8_t* pt = c->data + (size_t)i * step;
    float x = get_f32(pt + xyz[0]), y = get_f32(pt + xyz[1]), z = get_f32(pt + xyz[2]);
    valid[i] = isfinite(x) && isfinite(y) && isfinite(z) && (x != 0.0f || y != 0.0f ||
                                                           z != 0.0f);
    if (valid[i]) {
      double r = sqrt((double)x * x + (double)y * y + (double)z * z);
      rmax = r > rmax ? r : rmax;
    }
  }

  // a range beyond 2^29 steps cannot be coded: positions are then kept losslessly
  if (has_pos && rmax / range_step >= (double)(VALUE_LIMIT - 1)) {
    has_pos = 0;
    for (int k = 0; k < 3; k++) {
      xyz[k] = NO_POSITIONS;
    }
  }
  uint32_t* hr = h;
  uint32_t* ha = h ? h + n : NULL;
  uint32_t* he = h ? h + 2u * (size_t)n : NULL;
  if (has_pos) {
    angle_step = rmax > 0.0 ? prec / (2.0 * rmax) : prec;
    if (angle_step < M_PI / (double)(VALUE_LIMIT / 2)) {
      angle_step = M_PI / (double)(VALUE_LIMIT / 2);
    }

    const double inv_range = 1.0 / range_step, inv_angle = 1.0 / angle_step;

    // the stride, from the elevations of the first points
    if (p->stride) {
      stride = p->stride;
    } else {
      uint32_t m = n < STRIDE_SEARCH + STRIDE_SAMPLE ? n : STRIDE_SEARCH + STRIDE_SAMPLE;
      for (uint32_t i = 0; i < m; i++) {
        const uint8_t* pt = c->data + (size_t)i * step;
        double x = get_f32(pt + xyz[0]), y = get_f32(pt + xyz[1]), z = get_f32(pt + xyz[2]);
        he[i] = valid[i] ? (uint32_t)round_i32(atan2(z, sqrt(x * x + y * y)) * inv_angle) : 0u;
      }
      stride = detect_stride(he, valid, m);
    }
    // residuals against the prediction; a miss takes the prediction as its values
    uint8_t* planes = body;
    for (uint32_t i = 0; i < n; i++) {
      uint32_t pr = predict(hr, i, stride), pa = predict(ha, i, stride),
               pe = predict(he, i, stride);
      uint32_t cr, ca, ce;
      if (valid[i]) {
        // quantize (angles found relative to their predictions), and measure the error of
        // what a decoder rebuilds
        const uint8_t* pt = c->data + (size_t)i * step;
        double x = get_f32(pt + xyz[0]), y = get_f32(pt + xyz[1]), z = get_f32(pt + xyz[2]);
        double rxy = sqrt(x * x + y * y);
        int32_t rq = round_i32(sqrt(x * x + y * y + z * z) * inv_range);
        double ca_, sa_, ce_, se_;
        int32_t aq = quantize_angle(tc, x, y, pa, angle_step, inv_angle, &ca_, &sa_);
        int32_t eq = quantize_angle(tc + 1, rxy, z, pe, angle_step, inv_angle, &ce_, &se_);
        hr[i] = (uint32_t)rq;
        ha[i] = (uint32_t)aq;
        he[i] = (uint32_t)eq;
        float back[3];
        double range = (double)rq * range_step, rc = range * ce_;
        back[0] = (float)(rc * ca_);
        back[1] = (float)(rc * sa_);
        back[2] = (float)(range * se_);
        double dx = back[0] - x, dy = back[1] - y, dz = back[2] - z;
        double err = dx * dx + dy * dy + dz * dz;
        err_max = err > err_max ? err : err_max;
        cr = zigzag(hr[i] - pr) + 1u;
        ca = zigzag(ha[i] - pa);
        ce = zigzag(he[i] - pe);
      } else {
        const uint8_t* pt = c->data + (size_t)i * step;
        uint32_t bx = get_u32(pt + xyz[0]), by = get_u32(pt + xyz[1]), bz = get_u32(pt + xyz[2]);
        if ((bx | by | bz) == 0u) {
          ca = KIND_ZERO;
        } else if (bx == 0x7FC00000u && by == 0x7FC00000u && bz == 0x7FC00000u) {
          ca = KIND_NAN;
        } else {
          ca = KIND_RAW;
          uint8_t* ex = body + (size_t)n * step + 12u * (size_t)nexc++;
          put_u32(ex, bx);
          put_u32(ex + 4, by);
          put_u32(ex + 8, bz);
        }
        cr = 0u;
        ce = 0u;
        hr[i] = pr;
        ha[i] = pa;
        he[i] = pe;
      }
      for (int k = 0; k < 4; k++) {
        planes[(size_t)k * n + i] = (uint8_t)(cr >> (8 * k));
        planes[(size_t)(4 + k) * n + i] = (uint8_t)(ca >> (8 * k));
        planes[(size_t)(8 + k) * n + i] = (uint8_t)(ce >> (8 * k));
      }
    }
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
    uint8_t* planes = wp + 4u * (size_t)w * n;
    uint32_t prev_col = 0, col;
    for (uint32_t i = 0; i < n; i++) {
      uint32_t code = zigzag(get_u32(base + (size_t)i * step) -
                             predict_word(base, i, stride, step, prev_col, &col));
      prev_col = col;
      for (int k = 0; k < 4; k++) {
        planes[(size_t)k * n + i] = (uint8_t)(code >> (8 * k));
      }
    }
  }
  uint8_t* bp = wp + 4u * (size_t)nword * n;
  for (uint32_t i = 0; i < n; i++) {
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
  mem_free(h);
  mem_free(valid);
  mem_free(off);
  mem_free(tc);
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
  uint8_t* body = mem_alloc(body_len ? body_len : 1);
  uint32_t* h = has_pos ? mem_alloc(3u * (size_t)n * sizeof(uint32_t) + 1) : NULL;
  uint32_t* off = mem_alloc(3u * (size_t)step * sizeof(uint32_t) + 1);
  trig_cache_t* tc = has_pos ? mem_calloc(2, sizeof(trig_cache_t)) : NULL;
  if (!body || (has_pos && (!h || !tc)) || !off) {
    mem_free(body);
    mem_free(h);
    mem_free(off);
    mem_free(tc);
    return err_set(msg, ERR_NOMEM, "out of memory decoding %u points", n);
  }
  int rc = decompress_zstd(in + CODEC_QZSTD_HEADER_BYTES, len - CODEC_QZSTD_HEADER_BYTES, body,
                           body_len, msg);
  uint32_t used = 0;
  if (rc == 0 && has_pos) {
    uint32_t* hr = h;
    uint32_t* ha = h + n;
    uint32_t* he = h + 2u * (size_t)n;
    const uint8_t* planes = body;
    for (uint32_t i = 0; i < n && rc == 0; i++) {
      uint32_t cr = 0, ca = 0, ce = 0;
      for (int k = 0; k < 4; k++) {
        cr |= (uint32_t)planes[(size_t)k * n + i] << (8 * k);
        ca |= (uint32_t)planes[(size_t)(4 + k) * n + i] << (8 * k);
        ce |= (uint32_t)planes[(size_t)(8 + k) * n + i] << (8 * k);
      }
      uint32_t pr = predict(hr, i, stride), pa = predict(ha, i, stride),
               pe = predict(he, i, stride);
      uint8_t* pt = out + (size_t)i * step;
      if (cr != 0u) {
        hr[i] = pr + unzigzag(cr - 1u);
        ha[i] = pa + unzigzag(ca);
        he[i] = pe + unzigzag(ce);
        float v[3];
        rebuild(tc, tc + 1, as_i32(hr[i]), as_i32(ha[i]), as_i32(he[i]), range_step, angle_step,
                v);
        for (int k = 0; k < 3; k++) {
          memcpy(pt + xyz[k], &v[k], 4);
        }
        continue;
      }
      hr[i] = pr;
      ha[i] = pa;
      he[i] = pe;
      uint32_t bits[3] = {0, 0, 0};
      if (ca == KIND_NAN) {
        bits[0] = bits[1] = bits[2] = 0x7FC00000u;
      } else if (ca == KIND_RAW && used < nexc) {
        const uint8_t* ex = body + (size_t)n * step + 12u * (size_t)used++;
        for (int k = 0; k < 3; k++) {
          bits[k] = get_u32(ex + 4 * k);
        }
      } else if (ca != KIND_ZERO) {
        rc = err_set(msg, ERR_PROTO, "point %u: miss kind %u is not valid", i, ca);
      }
      for (int k = 0; k < 3; k++) {
        put_u32(pt + xyz[k], bits[k]);
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
      const uint8_t* planes = wp + 4u * (size_t)w * n;
      uint32_t prev_col = 0, col;
      for (uint32_t i = 0; i < n; i++) {
        uint32_t code = 0;
        for (int k = 0; k < 4; k++) {
          code |= (uint32_t)planes[(size_t)k * n + i] << (8 * k);
        }
        uint32_t pred = predict_word(base, i, stride, step, prev_col, &col);
        prev_col = col;
        put_u32(base + (size_t)i * step, pred + unzigzag(code));
      }
    }
    const uint8_t* bp = wp + 4u * (size_t)nword * n;
    for (uint32_t i = 0; i < n; i++) {
      uint8_t* pt = out + (size_t)i * step;
      const uint8_t* back = i >= stride ? pt - (size_t)stride * step : NULL;
      for (uint32_t j = 0; j < nbyte; j++) {
        pt[boff[j]] = (uint8_t)(bp[(size_t)j * n + i] + (back ? back[boff[j]] : 0u));
      }
    }
  }
  mem_free(body);
  mem_free(h);
  mem_free(off);
  mem_free(tc);
  return rc;
}
