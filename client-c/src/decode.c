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


// The column prediction: 2 h[i-s] - h[i-2s], h[i-s], or 0.
static uint32_t column(const uint32_t* h, uint32_t i, uint32_t s) {
  if (i >= 2 * s) {
    return 2u * h[i - s] - h[i - 2 * s];
  }
  return i >= s ? h[i - s] : 0u;
}


static uint32_t column_at(const uint8_t* p, uint32_t i, uint32_t s, size_t step) {
  if (i >= 2 * s) {
    return 2u * rd32(p + (size_t)(i - s) * step) - rd32(p + (size_t)(i - 2 * s) * step);
  }
  return i >= s ? rd32(p + (size_t)(i - s) * step) : 0u;
}


static uint32_t plane_code(const uint8_t* planes, size_t n, uint32_t i) {
  return (uint32_t)planes[i] | (uint32_t)planes[n + i] << 8 | (uint32_t)planes[2 * n + i] << 16 |
         (uint32_t)planes[3 * n + i] << 24;
}


static sensim_status_t decode_quantized(const uint8_t* in, size_t len, uint32_t n,
                                        uint32_t step, uint8_t* out) {
  if (len < HEADER_BYTES || memcmp(in, "SQZ1", 4) != 0 || rd32(in + 4) != n ||
      rd32(in + 8) != step) {
    return SENSIM_EPROTO;
  }
  uint32_t s = rd32(in + 12), nexc = rd32(in + 28);
  uint32_t xyz[3] = {rd32(in + 16), rd32(in + 20), rd32(in + 24)};
  double range_step = rd64f(in + 32), angle_step = rd64f(in + 40);
  int has_pos = xyz[0] != NO_POSITIONS;
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

  // the body
  size_t body_len = (size_t)n * step + 12u * (size_t)nexc;
  uint8_t* body = malloc(body_len ? body_len : 1);
  uint32_t* h = has_pos ? malloc(3u * (size_t)n * sizeof(uint32_t) + 1) : NULL;
  if (!body || (has_pos && !h)) {
    free(body);
    free(h);
    return SENSIM_ENOMEM;
  }
  size_t got = ZSTD_decompress(body, body_len, in + HEADER_BYTES, len - HEADER_BYTES);
  sensim_status_t st = ZSTD_isError(got) || got != body_len ? SENSIM_EPROTO : SENSIM_OK;

  // positions
  size_t at = 0;
  if (st == SENSIM_OK && has_pos) {
    uint32_t* hr = h;
    uint32_t* ha = h + n;
    uint32_t* he = h + 2u * (size_t)n;
    const uint8_t* exc = body + (size_t)n * step;
    uint32_t used = 0;
    for (uint32_t i = 0; i < n && st == SENSIM_OK; i++) {
      uint32_t cr = plane_code(body, n, i), ca = plane_code(body + 4u * (size_t)n, n, i),
               ce = plane_code(body + 8u * (size_t)n, n, i);
      uint32_t pr = column(hr, i, s), pa = column(ha, i, s), pe = column(he, i, s);
      uint8_t* pt = out + (size_t)i * step;
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
        } else if (ca == 2 && used < nexc) {
          for (int k = 0; k < 3; k++) {
            bits[k] = rd32(exc + 12u * (size_t)used + 4u * (unsigned)k);
          }
          used++;
        } else if (ca != 0) {
          st = SENSIM_EPROTO;
        }
      }
      for (int k = 0; k < 3; k++) {
        wr32(pt + xyz[k], bits[k]);
      }
    }
    if (used != nexc) {
      st = SENSIM_EPROTO;
    }
    at = 12u * (size_t)n;
  }

  // the other bytes: words (4 in a row from a multiple of 4), then single bytes
  if (st == SENSIM_OK) {
    uint32_t single[4096];
    uint32_t nsingle = 0;
    for (uint32_t b = 0; b < step;) {
      int pos = 0;
      for (int k = 0; has_pos && k < 3; k++) {
        pos |= b >= xyz[k] && b < xyz[k] + 4;
      }
      if (pos) {
        b++;
        continue;
      }
      int word = b % 4 == 0 && b + 3 < step;
      for (uint32_t k = 1; word && k < 4; k++) {
        for (int m = 0; has_pos && m < 3; m++) {
          word &= !(b + k >= xyz[m] && b + k < xyz[m] + 4);
        }
      }
      if (word) {
        uint8_t* base = out + b;
        const uint8_t* planes = body + at;
        uint32_t prev_col = 0;
        for (uint32_t i = 0; i < n; i++) {
          uint32_t col = column_at(base, i, s, step);
          uint32_t pred = i ? col + (rd32(base + (size_t)(i - 1) * step) - prev_col) : col;
          prev_col = col;
          wr32(base + (size_t)i * step, pred + unzigzag(plane_code(planes, n, i)));
        }
        at += 4u * (size_t)n;
        b += 4;
      } else if (nsingle < sizeof(single) / sizeof(single[0])) {
        single[nsingle++] = b++;
      } else {
        st = SENSIM_EPROTO;
        break;
      }
    }
    for (uint32_t j = 0; st == SENSIM_OK && j < nsingle; j++) {
      const uint8_t* plane = body + at + (size_t)j * n;
      for (uint32_t i = 0; i < n; i++) {
        uint8_t back = i >= s ? out[(size_t)(i - s) * step + single[j]] : 0;
        out[(size_t)i * step + single[j]] = (uint8_t)(plane[i] + back);
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
  size_t raw = (size_t)count * point_step;
  if (out_cap < raw || (raw && (!out || !data))) {
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
