// SPDX-License-Identifier: MIT
// decode.c: PointCloud data in every encoding (docs/streams.md, "QUANTIZED_ZSTD byte format"),
// written from the format description, independently of the daemon's encoder.
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "sensim/sensim.h"

#define HEADER_BYTES 56u
#define NO_POSITIONS 0xFFFFFFFFu


static uint32_t rd32(const uint8_t* p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}


static void wr32(uint8_t* p, uint32_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
  p[2] = (uint8_t)(v >> 16);
  p[3] = (uint8_t)(v >> 24);
}


static double rd64f(const uint8_t* p) {
  uint64_t u = (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32;
  double d;
  memcpy(&d, &u, 8);
  return d;
}


static uint32_t unzigzag(uint32_t c) {
  return (c >> 1) ^ (0u - (c & 1u));
}


static int32_t to_i32(uint32_t v) {
  return v < 0x80000000u ? (int32_t)v : -(int32_t)(~v) - 1;
}


// The column prediction: 2 h[i-s] - h[i-2s], h[i-s], or 0 (i >= 2s without computing 2s,
// which wraps for a stride of 2^31 or more).
static uint32_t column(const uint32_t* h, uint32_t i, uint32_t s) {
  if (i >= s && i - s >= s) {
    return 2u * h[i - s] - h[i - 2 * s];
  }
  return i >= s ? h[i - s] : 0u;
}


static uint32_t column_at(const uint8_t* p, uint32_t i, uint32_t s, size_t step) {
  if (i >= s && i - s >= s) {
    return 2u * rd32(p + (size_t)(i - s) * step) - rd32(p + (size_t)(i - 2 * s) * step);
  }
  return i >= s ? rd32(p + (size_t)(i - s) * step) : 0u;
}


// *r = a + b or a * b; 0 when the result does not fit in a size_t.
static int size_add(size_t a, size_t b, size_t* r) {
  if (a > SIZE_MAX - b) {
    return 0;
  }
  *r = a + b;
  return 1;
}


static int size_mul(size_t a, size_t b, size_t* r) {
  if (a != 0 && b > SIZE_MAX / a) {
    return 0;
  }
  *r = a * b;
  return 1;
}


// A run [lo, hi) of the bytes of a point that are not positions. Its words (four offsets in a
// row, the first a multiple of 4) are the `words` of them from `word0`; its other bytes are
// single bytes.
typedef struct span {
  uint32_t lo, hi;
  uint32_t word0, words;
} span_t;


// The runs between the position fields (one run without positions), in increasing order;
// returns their number. The offsets are checked: each field lies in the point, none overlap.
static int point_spans(const uint32_t xyz[3], int has_pos, uint32_t step, span_t spans[4]) {
  uint32_t cut[3] = {xyz[0], xyz[1], xyz[2]};
  int ncut = has_pos ? 3 : 0;
  for (int a = 1; a < ncut; a++) {
    for (int k = a; k > 0 && cut[k - 1] > cut[k]; k--) {
      uint32_t t = cut[k];
      cut[k] = cut[k - 1];
      cut[k - 1] = t;
    }
  }
  int count = 0;
  uint32_t lo = 0;
  for (int k = 0; k <= ncut; k++) {
    uint32_t hi = k < ncut ? cut[k] : step;
    if (hi > lo) {
      uint64_t w0 = ((uint64_t)lo + 3u) & ~(uint64_t)3u;
      span_t* sp = &spans[count++];
      sp->lo = lo;
      sp->hi = hi;
      sp->words = w0 + 4u <= hi ? (uint32_t)((hi - w0) / 4u) : 0u;
      sp->word0 = sp->words ? (uint32_t)w0 : lo;
    }
    if (k < ncut) {
      lo = cut[k] + 4u;  // cut[k] + 4 <= step: checked by the caller
    }
  }
  return count;
}


// One code stream of the body: its plane of min(code, 255) for every point, and the overflow
// list of the points whose plane byte is 255 (4 planes of m bytes: code - 255, byte-shuffled),
// read in point order from `next`.
typedef struct stream {
  const uint8_t* plane;
  const uint8_t* over;
  size_t m, next;
} stream_t;


static uint32_t over_value(const stream_t* st, size_t j) {
  const uint8_t* o = st->over;
  return (uint32_t)o[j] | (uint32_t)o[st->m + j] << 8 | (uint32_t)o[2 * st->m + j] << 16 |
         (uint32_t)o[3 * st->m + j] << 24;
}


// Stream k of a body with `nstreams` streams of n points, its overflow list at `over`.
static stream_t stream_at(const uint8_t* body, size_t nstreams, size_t n, size_t k,
                          const uint8_t* over) {
  stream_t st = {body + 4u * nstreams + k * n, over, rd32(body + 4u * k), 0};
  return st;
}


// The stream's codes, in point order (i counts up from 0 by one on each call).
static uint32_t stream_code(stream_t* st, uint32_t i) {
  uint8_t c = st->plane[i];
  return c < 255u ? c : 255u + over_value(st, st->next++);
}


// Stream k's 255 bytes are exactly m_k, and no overflow value takes its code past 2^32 - 1.
static int stream_ok(const stream_t* st, size_t n) {
  size_t full = 0;
  for (size_t i = 0; i < n; i++) {
    full += st->plane[i] == 255u;
  }
  if (full != st->m) {
    return 0;
  }
  for (size_t j = 0; j < st->m; j++) {
    if (over_value(st, j) > UINT32_MAX - 255u) {
      return 0;
    }
  }
  return 1;
}


static void decode_positions(const uint8_t* body, size_t nstreams, uint32_t n, uint32_t s,
                             uint32_t nexc, const uint32_t xyz[3], double range_step,
                             double angle_step, const uint8_t* exc, const uint8_t* over,
                             uint32_t* h, size_t step, uint8_t* out) {
  stream_t sr = stream_at(body, nstreams, n, 0, over);
  stream_t sa = stream_at(body, nstreams, n, 1, over + 4u * sr.m);
  stream_t se = stream_at(body, nstreams, n, 2, over + 4u * (sr.m + sa.m));
  uint32_t* hr = h;
  uint32_t* ha = h + n;
  uint32_t* he = h + 2u * (size_t)n;
  uint32_t used = 0;
  for (uint32_t i = 0; i < n; i++) {
    uint32_t cr = stream_code(&sr, i), ca = stream_code(&sa, i), ce = stream_code(&se, i);
    uint32_t pr = column(hr, i, s), pa = column(ha, i, s), pe = column(he, i, s);
    uint32_t bits[3] = {0, 0, 0};
    if (cr != 0) {
      hr[i] = pr + unzigzag(cr - 1);
      ha[i] = pa + unzigzag(ca);
      he[i] = pe + unzigzag(ce);
      double r = (double)to_i32(hr[i]) * range_step;
      double az = (double)to_i32(ha[i]) * angle_step, el = (double)to_i32(he[i]) * angle_step;
      double rc = r * cos(el);
      float v[3] = {(float)(rc * cos(az)), (float)(rc * sin(az)), (float)(r * sin(el))};
      memcpy(bits, v, 12);
    } else {
      hr[i] = pr;
      ha[i] = pa;
      he[i] = pe;
      if (ca == 1) {
        bits[0] = bits[1] = bits[2] = 0x7FC00000u;
      } else if (ca == 2 && used < nexc) {  // the misses were counted before decoding
        for (int k = 0; k < 3; k++) {
          bits[k] = rd32(exc + 12u * (size_t)used + 4u * (unsigned)k);
        }
        used++;
      }
    }
    for (int k = 0; k < 3; k++) {
      wr32(out + (size_t)i * step + xyz[k], bits[k]);
    }
  }
}


static void decode_word(stream_t* st, uint32_t n, uint32_t s, size_t step, uint8_t* base) {
  uint32_t prev_col = 0;
  for (uint32_t i = 0; i < n; i++) {
    uint32_t col = column_at(base, i, s, step);
    uint32_t pred = i ? col + (rd32(base + (size_t)(i - 1) * step) - prev_col) : col;
    prev_col = col;
    wr32(base + (size_t)i * step, pred + unzigzag(stream_code(st, i)));
  }
}


static sensim_status_t decode_quantized(const uint8_t* in, size_t len, uint32_t n,
                                        uint32_t step, uint8_t* out) {
  if (len < HEADER_BYTES || memcmp(in, "SQZ2", 4) != 0 || rd32(in + 4) != n ||
      rd32(in + 8) != step) {
    return SENSIM_EPROTO;
  }
  uint32_t s = rd32(in + 12), nexc = rd32(in + 28);
  uint32_t xyz[3] = {rd32(in + 16), rd32(in + 20), rd32(in + 24)};
  double range_step = rd64f(in + 32), angle_step = rd64f(in + 40);
  int has_pos = xyz[0] != NO_POSITIONS || xyz[1] != NO_POSITIONS || xyz[2] != NO_POSITIONS;
  if (s == 0 || nexc > n || (!has_pos && nexc)) {
    return SENSIM_EPROTO;
  }
  if (has_pos) {
    for (int k = 0; k < 3; k++) {
      if ((uint64_t)xyz[k] + 4 > step) {
        return SENSIM_EPROTO;
      }
      for (int m = 0; m < k; m++) {
        if (xyz[k] + 4 > xyz[m] && xyz[m] + 4 > xyz[k]) {
          return SENSIM_EPROTO;
        }
      }
    }
    if (!(range_step > 0) || !(angle_step > 0) || !isfinite(range_step) ||
        !isfinite(angle_step)) {
      return SENSIM_EPROTO;
    }
  }

  // K code streams (range, azimuth, elevation, then the words) and b single bytes
  span_t spans[4];
  int nspans = point_spans(xyz, has_pos, step, spans);
  size_t nstreams = has_pos ? 3u : 0u, nsingle = 0;
  for (int k = 0; k < nspans; k++) {
    nstreams += spans[k].words;
    nsingle += spans[k].hi - spans[k].lo - 4u * (size_t)spans[k].words;
  }

  // the body: 4K + (K + b) n + 12 e + 4 (m_0 + ... + m_(K-1)) bytes, each m_k <= n; its size
  // is read from the frame, checked against that bound before anything is allocated
  size_t head, planes, excs, fixed, overs, bound;
  if (!size_mul(nstreams, 4u, &head) || !size_add(nstreams, nsingle, &planes) ||
      !size_mul(planes, n, &planes) || !size_mul(nexc, 12u, &excs) ||
      !size_add(head, planes, &fixed) || !size_add(fixed, excs, &fixed) ||
      !size_mul(head, n, &overs) || !size_add(fixed, overs, &bound)) {
    return SENSIM_EPROTO;
  }
  const uint8_t* src = in + HEADER_BYTES;
  size_t src_len = len - HEADER_BYTES;
  if (ZSTD_findFrameCompressedSize(src, src_len) != src_len) {  // one frame, nothing after it
    return SENSIM_EPROTO;
  }
  unsigned long long size = ZSTD_getFrameContentSize(src, src_len);
  if (size == ZSTD_CONTENTSIZE_UNKNOWN || size == ZSTD_CONTENTSIZE_ERROR || size < fixed ||
      size > bound) {
    return SENSIM_EPROTO;
  }
  size_t hbytes = 0;
  if (has_pos && !size_mul(n, 3u * sizeof(uint32_t), &hbytes)) {
    return SENSIM_ENOMEM;
  }
  uint8_t* body = malloc(size ? (size_t)size : 1);
  uint32_t* h = has_pos ? malloc(hbytes + 1) : NULL;
  if (!body || (has_pos && !h)) {
    free(body);
    free(h);
    return SENSIM_ENOMEM;
  }
  size_t got = ZSTD_decompress(body, (size_t)size, src, src_len);
  sensim_status_t st = ZSTD_isError(got) || got != size ? SENSIM_EPROTO : SENSIM_OK;

  // the overflow counts: each at most n, and the body exactly as long as they say
  size_t total = 0;
  for (size_t k = 0; st == SENSIM_OK && k < nstreams; k++) {
    uint32_t m = rd32(body + 4u * k);
    st = m <= n ? SENSIM_OK : SENSIM_EPROTO;
    total += m;
  }
  if (st == SENSIM_OK && fixed + 4u * total != size) {  // <= bound: no overflow
    st = SENSIM_EPROTO;
  }
  const uint8_t* singles = body + head + nstreams * (size_t)n;
  const uint8_t* exc = singles + nsingle * (size_t)n;
  const uint8_t* over = exc + excs;
  for (size_t k = 0, at = 0; st == SENSIM_OK && k < nstreams; k++) {
    stream_t sk = stream_at(body, nstreams, n, k, over + at);
    st = stream_ok(&sk, n) ? SENSIM_OK : SENSIM_EPROTO;
    at += 4u * sk.m;
  }

  // positions: a miss (range code 0) has an azimuth code 0, 1 or 2, and the 2s are the
  // exceptions (codes below 255 are their plane bytes)
  if (st == SENSIM_OK && has_pos) {
    const uint8_t* pr = body + head;
    const uint8_t* pa = pr + n;
    uint32_t misses = 0;
    for (uint32_t i = 0; i < n && st == SENSIM_OK; i++) {
      if (pr[i] == 0) {
        st = pa[i] <= 2u ? SENSIM_OK : SENSIM_EPROTO;
        misses += pa[i] == 2u;
      }
    }
    if (misses != nexc) {
      st = SENSIM_EPROTO;
    }
  }
  if (st == SENSIM_OK && has_pos) {
    decode_positions(body, nstreams, n, s, nexc, xyz, range_step, angle_step, exc, over, h,
                     step, out);
  }

  // the words in order (streams 3.. with positions), then the single bytes in order
  if (st == SENSIM_OK) {
    size_t k = has_pos ? 3u : 0u, at = 0;
    for (size_t j = 0; j < k; j++) {
      at += 4u * (size_t)rd32(body + 4u * j);
    }
    for (int sp = 0; sp < nspans; sp++) {
      for (uint32_t w = 0; w < spans[sp].words; w++, k++) {
        stream_t sk = stream_at(body, nstreams, n, k, over + at);
        at += 4u * sk.m;
        decode_word(&sk, n, s, step, out + spans[sp].word0 + 4u * (size_t)w);
      }
    }
    size_t j = 0;
    for (int sp = 0; sp < nspans; sp++) {
      for (uint32_t b = spans[sp].lo; b < spans[sp].hi; b++) {
        if (spans[sp].words && b == spans[sp].word0) {
          b += 4u * spans[sp].words - 1u;
          continue;
        }
        const uint8_t* plane = singles + j++ * (size_t)n;
        for (uint32_t i = 0; i < n; i++) {
          uint8_t back = i >= s ? out[(size_t)(i - s) * step + b] : 0;
          out[(size_t)i * step + b] = (uint8_t)(plane[i] + back);
        }
      }
    }
  }
  free(body);
  free(h);
  return st;
}


sensim_status_t sensim_point_cloud_decode(sensim_encoding_t encoding, const void* data,
                                          size_t len, uint32_t count, uint32_t point_step,
                                          void* out, size_t out_cap) {
  uint64_t raw64 = (uint64_t)count * point_step;
  if (raw64 > SIZE_MAX || out_cap < raw64) {
    return SENSIM_INVALID_ARGUMENT;
  }
  size_t raw = (size_t)raw64;
  if (raw && (!out || !data)) {
    return SENSIM_INVALID_ARGUMENT;
  }
  switch (encoding) {
    case SENSIM_ENCODING_RAW:
      if (len != raw) {
        return SENSIM_EPROTO;
      }
      if (raw) {
        memcpy(out, data, raw);
      }
      return SENSIM_OK;
    case SENSIM_ENCODING_ZSTD: {
      size_t got = ZSTD_decompress(out, raw, data, len);
      return ZSTD_isError(got) || got != raw ? SENSIM_EPROTO : SENSIM_OK;
    }
    case SENSIM_ENCODING_QUANTIZED_ZSTD:
      if (!data || len < HEADER_BYTES) {
        return SENSIM_EPROTO;
      }
      return decode_quantized(data, len, count, point_step, out);
  }
  return SENSIM_EPROTO;
}
