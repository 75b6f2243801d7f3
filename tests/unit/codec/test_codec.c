// SPDX-License-Identifier: MIT
// test_codec.c: every encoding round-trips: RAW and ZSTD bit for bit, QUANTIZED_ZSTD within
// the error it states (checked here against the original points, the distance computed
// independently), that error within the precision, point order kept, other fields and misses
// bit for bit; empty and one-point clouds; bad parameters and damaged bytes are refused, among
// them bodies whose overflow lists do not match their planes (docs/streams.md).
#include "codec/codec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "base/simd.h"
#include "check.h"
#include "codec/compress.h"

// A point like the lidar's xyzi layout plus a ring: x y z intensity (float32) ring (uint16),
// 2 padding bytes.
#define STEP 20u

typedef struct scan {
  uint8_t* data;
  uint32_t n;
} scan_t;


static void put_point(uint8_t* p, float x, float y, float z, float intensity, uint16_t ring) {
  memset(p, 0, STEP);
  memcpy(p, &x, 4);
  memcpy(p + 4, &y, 4);
  memcpy(p + 8, &z, 4);
  memcpy(p + 12, &intensity, 4);
  memcpy(p + 16, &ring, 2);
}


// An organised spinning scan (channels per column, column-major) of a sensor 1.5 m above a
// ground plane inside a cylinder wall of radius 30 m, with a deterministic pseudo-random range
// jitter; every 97th point a NaN miss, every 101st a zero miss, one infinite coordinate.
static scan_t make_scan(uint32_t channels, uint32_t columns, int misses) {
  scan_t s = {.n = channels * columns};
  s.data = mem_alloc((size_t)s.n * STEP);
  uint32_t seed = 12345u;
  for (uint32_t j = 0; j < columns; j++) {
    double az = M_PI - 2.0 * M_PI * j / columns;
    for (uint32_t c = 0; c < channels; c++) {
      uint32_t i = j * channels + c;
      double el = (-22.5 + 45.0 * c / (channels - 1)) * M_PI / 180.0;
      double r = 30.0 / cos(el);
      if (el < 0 && -1.5 / sin(el) < r) {
        r = -1.5 / sin(el);
      }
      seed = seed * 1664525u + 1013904223u;
      r += ((double)(seed >> 8) / 16777216.0 - 0.5) * 0.02;
      float x = (float)(r * cos(el) * cos(az)), y = (float)(r * cos(el) * sin(az)),
            z = (float)(r * sin(el));
      float inten = (float)(0.5 + 0.01 * c);
      if (misses && i % 97 == 5) {
        x = y = z = NAN;
        inten = 0.0f;
      } else if (misses && i % 101 == 7) {
        x = y = z = 0.0f;
      } else if (misses && i == 333) {
        x = INFINITY;
      }
      put_point(s.data + (size_t)i * STEP, x, y, z, inten, (uint16_t)c);
    }
  }
  return s;
}


static codec_cloud_t cloud_of(const scan_t* s) {
  return (codec_cloud_t){.data = s->data, .count = s->n, .point_step = STEP,
                         .xyz_offset = {0, 4, 8}};
}


// Encode and decode; returns the decoded copy (mem_free it), NULL on failure.
static uint8_t* round_trip(const codec_params_t* p, const codec_cloud_t* c, size_t* len,
                           double* max_error) {
  uint8_t* enc = mem_alloc(codec_max_size(p, c) + 1);
  uint8_t* dec = mem_alloc((size_t)c->count * c->point_step + 1);
  err_msg_t msg;
  if (codec_encode(p, c, enc, codec_max_size(p, c), len, max_error, &msg) != 0 ||
      codec_decode(p->encoding, enc, *len, c->count, c->point_step, dec, &msg) != 0) {
    fprintf(stderr, "round trip: %s\n", msg.text);
    mem_free(enc);
    mem_free(dec);
    return NULL;
  }
  mem_free(enc);
  return dec;
}


TEST(codec_raw_and_zstd_are_exact) {
  scan_t s = make_scan(16, 64, 1);
  codec_cloud_t c = cloud_of(&s);
  for (int e = CODEC_RAW; e <= CODEC_ZSTD; e++) {
    codec_params_t p = {.encoding = (codec_encoding_t)e, .level = 3};
    size_t len;
    double err;
    uint8_t* dec = round_trip(&p, &c, &len, &err);
    ASSERT_TRUE(dec != NULL);
    ASSERT_MEM_EQ(dec, s.data, (size_t)s.n * STEP);
    ASSERT_TRUE(err == 0.0);
    if (e == CODEC_ZSTD) {
      ASSERT_TRUE(len < (size_t)s.n * STEP);
    }
    mem_free(dec);
  }
  mem_free(s.data);
  return 0;
}


TEST(codec_quantized_within_stated_error_and_precision) {
  static const double kPrecisions[] = {0.001, 0.01, 0.0001};
  for (int misses = 0; misses <= 1; misses++) {
    for (size_t k = 0; k < sizeof(kPrecisions) / sizeof(kPrecisions[0]); k++) {
      scan_t s = make_scan(64, 256, misses);
      codec_cloud_t c = cloud_of(&s);
      codec_params_t p = {.encoding = CODEC_QZSTD, .precision = kPrecisions[k]};
      size_t len;
      double stated;
      uint8_t* dec = round_trip(&p, &c, &len, &stated);
      ASSERT_TRUE(dec != NULL);
      ASSERT_TRUE(stated <= kPrecisions[k]);
      ASSERT_TRUE(stated > 0.0);
      double worst = 0.0;
      for (uint32_t i = 0; i < s.n; i++) {
        const uint8_t* a = s.data + (size_t)i * STEP;
        const uint8_t* b = dec + (size_t)i * STEP;
        float pa[3], pb[3];
        memcpy(pa, a, 12);
        memcpy(pb, b, 12);

        // other fields bit for bit, in the same order
        ASSERT_MEM_EQ(a + 12, b + 12, STEP - 12);
        if (!isfinite(pa[0]) || !isfinite(pa[1]) || !isfinite(pa[2]) ||
            (pa[0] == 0 && pa[1] == 0 && pa[2] == 0)) {
          ASSERT_MEM_EQ(a, b, 12);  // misses exactly
          continue;
        }
        double d = hypot(hypot((double)pa[0] - pb[0], (double)pa[1] - pb[1]),
                         (double)pa[2] - pb[2]);
        worst = d > worst ? d : worst;
      }
      ASSERT_TRUE(worst <= stated * (1 + 1e-12));
      ASSERT_NEAR(worst, stated, stated * 1e-9);

      // compresses far below the raw float32 positions plus the other bytes
      ASSERT_TRUE(len < (size_t)s.n * STEP / 3);
      mem_free(dec);
      mem_free(s.data);
    }
  }
  return 0;
}


TEST(codec_quantized_detects_the_stride) {
  scan_t s = make_scan(64, 256, 0);
  codec_cloud_t c = cloud_of(&s);
  codec_params_t p = {.encoding = CODEC_QZSTD, .precision = 0.001};
  size_t len_auto, len_64, len_1;
  double err;
  uint8_t* enc = mem_alloc(codec_max_size(&p, &c));
  err_msg_t msg;
  ASSERT_OK(codec_encode(&p, &c, enc, codec_max_size(&p, &c), &len_auto, &err, &msg));
  uint32_t stride;
  memcpy(&stride, enc + 12, 4);
  ASSERT_EQ(stride, 64u);
  p.stride = 64;
  ASSERT_OK(codec_encode(&p, &c, enc, codec_max_size(&p, &c), &len_64, &err, &msg));
  p.stride = 1;
  ASSERT_OK(codec_encode(&p, &c, enc, codec_max_size(&p, &c), &len_1, &err, &msg));
  ASSERT_EQ(len_auto, len_64);
  ASSERT_TRUE(len_64 < len_1);
  mem_free(enc);
  mem_free(s.data);
  return 0;
}


// The largest distance between the measured points of a (n points of STEP bytes) and their
// decoded copies in b, -1 when another byte differs or a miss is not restored bit for bit.
static double worst_error(const uint8_t* a, const uint8_t* b, uint32_t n) {
  double worst = 0.0;
  for (uint32_t i = 0; i < n; i++) {
    const uint8_t* pa_ = a + (size_t)i * STEP;
    const uint8_t* pb_ = b + (size_t)i * STEP;
    float pa[3], pb[3];
    memcpy(pa, pa_, 12);
    memcpy(pb, pb_, 12);
    if (memcmp(pa_ + 12, pb_ + 12, STEP - 12) != 0) {
      return -1.0;
    }
    if (!isfinite(pa[0]) || !isfinite(pa[1]) || !isfinite(pa[2]) ||
        (pa[0] == 0 && pa[1] == 0 && pa[2] == 0)) {
      if (memcmp(pa_, pb_, 12) != 0) {
        return -1.0;
      }
      continue;
    }
    double d = hypot(hypot((double)pa[0] - pb[0], (double)pa[1] - pb[1]),
                     (double)pa[2] - pb[2]);
    worst = d > worst ? d : worst;
  }
  return worst;
}


// Clouds off the encoder's usual path: points in random directions (straight up and down
// among them) in any order, with every stride (1, a few, more than the points); an organised
// scan whose channels have their own azimuth offsets (the points of a column do not share an
// azimuth) over columns that wrap around +-pi. Every one decodes within the error it states,
// that error within the precision, the other bytes and the misses exact.
TEST(codec_quantized_unorganised_and_offset_clouds) {
  uint32_t n = 3000, seed = 777u;
  uint8_t* data = mem_alloc((size_t)n * STEP);
  for (uint32_t i = 0; i < n; i++) {
    double u[3];
    for (int k = 0; k < 3; k++) {
      seed = seed * 1664525u + 1013904223u;
      u[k] = (double)(seed >> 8) / 16777216.0;
    }
    double az = 2.0 * M_PI * u[0] - M_PI, el = asin(2.0 * u[1] - 1.0), r = 0.5 + 99.5 * u[2];
    if (i % 50 == 3) {
      el = i % 100 == 3 ? M_PI / 2 : -M_PI / 2;  // straight up or down: no azimuth
    }
    put_point(data + (size_t)i * STEP, (float)(r * cos(el) * cos(az)),
              (float)(r * cos(el) * sin(az)), (float)(r * sin(el)), (float)u[2],
              (uint16_t)i);
    if (i % 50 == 3) {
      float zero = 0.0f;
      memcpy(data + (size_t)i * STEP, &zero, 4);
      memcpy(data + (size_t)i * STEP + 4, &zero, 4);
    }
  }
  static const uint32_t kStrides[] = {0, 1, 3, 257, 5000};
  for (size_t k = 0; k < sizeof(kStrides) / sizeof(kStrides[0]); k++) {
    codec_cloud_t c = {.data = data, .count = n, .point_step = STEP, .xyz_offset = {0, 4, 8}};
    codec_params_t p = {.encoding = CODEC_QZSTD, .precision = 0.001, .stride = kStrides[k]};
    size_t len;
    double stated;
    uint8_t* dec = round_trip(&p, &c, &len, &stated);
    ASSERT_TRUE(dec != NULL);
    double worst = worst_error(data, dec, n);
    ASSERT_TRUE(worst >= 0.0);
    ASSERT_TRUE(stated > 0.0 && stated <= 0.001);
    ASSERT_NEAR(worst, stated, stated * 1e-9);
    mem_free(dec);
  }
  mem_free(data);

  // 32 channels with azimuth offsets of up to +-0.1 rad, 300 columns (wrapping at +-pi)
  uint32_t channels = 32, columns = 300;
  n = channels * columns;
  data = mem_alloc((size_t)n * STEP);
  for (uint32_t j = 0; j < columns; j++) {
    for (uint32_t ch = 0; ch < channels; ch++) {
      double az = M_PI - 2.0 * M_PI * j / columns + 0.1 * sin(1.7 * ch);
      double el = (-15.0 + 30.0 * ch / (channels - 1)) * M_PI / 180.0;
      double r = 20.0 + 0.01 * ((j * 31 + ch * 17) % 7);
      put_point(data + (size_t)(j * channels + ch) * STEP, (float)(r * cos(el) * cos(az)),
                (float)(r * cos(el) * sin(az)), (float)(r * sin(el)), 0.5f, (uint16_t)ch);
    }
  }
  codec_cloud_t c = {.data = data, .count = n, .point_step = STEP, .xyz_offset = {0, 4, 8}};
  codec_params_t p = {.encoding = CODEC_QZSTD, .precision = 0.001};
  size_t len;
  double stated;
  uint8_t* dec = round_trip(&p, &c, &len, &stated);
  ASSERT_TRUE(dec != NULL);
  double worst = worst_error(data, dec, n);
  ASSERT_TRUE(worst >= 0.0);
  ASSERT_TRUE(stated > 0.0 && stated <= 0.001);
  ASSERT_NEAR(worst, stated, stated * 1e-9);
  ASSERT_TRUE(len < (size_t)n * 4);  // well below the 12 bytes of raw positions
  mem_free(dec);
  mem_free(data);
  return 0;
}


// The AVX2 and SSE2 forms of the encoder give the same bytes (and the same stated error), on
// an organised scan with every kind of miss, at every kind of stride (a point at a time below
// 8), with x, y, z in a row or not. The forms are chosen by simd_level() (base/simd.h): the
// baseline, then the best this process may run.
TEST(codec_quantized_same_bytes_with_or_without_avx2) {
  if (simd_allowed_level() < SIMD_AVX2) {
    fprintf(stderr, "# SIMD level %s: the SSE2 form compared with itself\n",
            simd_level_name(simd_allowed_level()));
  }
  static const uint32_t kStrides[] = {0, 1, 3, 7, 8, 64, 100, 5000};
  static const int64_t kLayouts[2][3] = {{0, 4, 8}, {8, 0, 4}};
  scan_t s = make_scan(64, 100, 1);
  for (size_t k = 0; k < sizeof(kStrides) / sizeof(kStrides[0]); k++) {
    for (int l = 0; l < 2; l++) {
      codec_cloud_t c = cloud_of(&s);
      memcpy(c.xyz_offset, kLayouts[l], sizeof(c.xyz_offset));
      codec_params_t p = {.encoding = CODEC_QZSTD, .precision = 0.001, .stride = kStrides[k]};
      size_t cap = codec_max_size(&p, &c), len[2];
      uint8_t* enc[2] = {mem_alloc(cap), mem_alloc(cap)};
      double err[2];
      err_msg_t msg;
      for (int base = 0; base < 2; base++) {
        simd_set_max(base ? SIMD_BASELINE : SIMD_LEVEL_COUNT);
        ASSERT_EQ(simd_level(), base ? SIMD_BASELINE : simd_allowed_level());
        ASSERT_OK(codec_encode(&p, &c, enc[base], cap, &len[base], &err[base], &msg));
      }
      simd_set_max(SIMD_LEVEL_COUNT);
      ASSERT_EQ(len[0], len[1]);
      ASSERT_MEM_EQ(enc[0], enc[1], len[0]);
      ASSERT_TRUE(err[0] == err[1]);   // doubles: ASSERT_EQ compares integers
      mem_free(enc[0]);
      mem_free(enc[1]);
    }
  }
  mem_free(s.data);
  return 0;
}


// The scan of make_scan in rows (channel by channel, a column per point), as an organised
// cloud of channels x columns lays it out.
static scan_t transposed(const scan_t* s, uint32_t channels, uint32_t columns) {
  scan_t t = {.n = s->n, .data = mem_alloc((size_t)s->n * STEP)};
  for (uint32_t j = 0; j < columns; j++) {
    for (uint32_t c = 0; c < channels; c++) {
      memcpy(t.data + ((size_t)c * columns + j) * STEP, s->data + ((size_t)j * channels + c) * STEP,
             STEP);
    }
  }
  return t;
}


TEST(codec_quantized_sensor_azimuths_and_stride_change_no_byte) {
  // the sensor's azimuth of each point (exact, within a step of the point's, or garbage, across
  // the half-turn too) and its stride give the bytes the encoder finds alone, in column and in
  // row order, at every stride and with or without AVX2; without positions too
  enum { CH = 64, COLS = 100 };
  scan_t col = make_scan(CH, COLS, 1);
  scan_t row = transposed(&col, CH, COLS);
  float* az = mem_alloc(CH * COLS * sizeof *az);
  uint32_t seed = 777u;
  for (int order = 0; order < 2; order++) {
    for (int kind = 0; kind < 3; kind++) {
      for (uint32_t i = 0; i < CH * COLS; i++) {
        uint32_t j = order == 0 ? i / CH : i % COLS;
        double a = remainder(M_PI - 2.0 * M_PI * j / COLS, 2.0 * M_PI);
        seed = seed * 1664525u + 1013904223u;
        double u = (double)(seed >> 8) / 16777216.0 - 0.5;   // in [-0.5, 0.5)
        if (kind == 1) {
          a += 2.0e-5 * u;    // up to about a step off (0.001 m / 65 m = 1.5e-5 rad)
        } else if (kind == 2) {
          a = i % 5 == 0 ? NAN : i % 5 == 1 ? 1e30 : 6.0 * u;
          if (j == 0) {
            a = -M_PI;   // column 0 looks at +pi: the same direction, across the cut
          }
        }
        az[i] = (float)a;
      }
      static const uint32_t kStrides[] = {0, 1, 7, CH, COLS, 2 * CH};
      for (size_t k = 0; k < sizeof(kStrides) / sizeof(kStrides[0]); k++) {
        for (int base = 0; base < 2; base++) {
          codec_cloud_t c = cloud_of(order == 0 ? &col : &row);
          codec_params_t p = {.encoding = CODEC_QZSTD, .precision = 0.001,
                              .stride = kStrides[k]};
          size_t cap = codec_max_size(&p, &c), len[2];
          uint8_t* enc[2] = {mem_alloc(cap), mem_alloc(cap)};
          double err[2];
          err_msg_t msg;
          simd_set_max(base ? SIMD_BASELINE : SIMD_LEVEL_COUNT);
          ASSERT_EQ(simd_level(), base ? SIMD_BASELINE : simd_allowed_level());
          ASSERT_OK(codec_encode(&p, &c, enc[0], cap, &len[0], &err[0], &msg));
          c.azimuth = az;
          if (kStrides[k]) {
            c.stride = kStrides[k];   // the sensor's stride instead of the one asked for
            p.stride = 0;
          }
          ASSERT_OK(codec_encode(&p, &c, enc[1], cap, &len[1], &err[1], &msg));
          simd_set_max(SIMD_LEVEL_COUNT);
          ASSERT_EQ(len[0], len[1]);
          ASSERT_MEM_EQ(enc[0], enc[1], len[0]);
          ASSERT_TRUE(err[0] == err[1]);   // doubles: ASSERT_EQ compares integers
          mem_free(enc[0]);
          mem_free(enc[1]);
        }
      }
    }
  }

  // a cloud without positions (every byte lossless, coded against the point `stride` back):
  // the sensor's stride is not taken either
  codec_cloud_t c = cloud_of(&col);
  c.xyz_offset[0] = c.xyz_offset[1] = c.xyz_offset[2] = -1;
  codec_params_t p = {.encoding = CODEC_QZSTD, .precision = 0.001};
  size_t cap = codec_max_size(&p, &c), len[2];
  uint8_t* enc[2] = {mem_alloc(cap), mem_alloc(cap)};
  double err[2];
  err_msg_t msg;
  ASSERT_OK(codec_encode(&p, &c, enc[0], cap, &len[0], &err[0], &msg));
  c.stride = CH;
  c.azimuth = az;
  ASSERT_OK(codec_encode(&p, &c, enc[1], cap, &len[1], &err[1], &msg));
  ASSERT_EQ(len[0], len[1]);
  ASSERT_MEM_EQ(enc[0], enc[1], len[0]);
  mem_free(enc[0]);
  mem_free(enc[1]);
  mem_free(az);
  mem_free(col.data);
  mem_free(row.data);
  return 0;
}


TEST(codec_empty_and_one_point_clouds) {
  for (uint32_t n = 0; n <= 1; n++) {
    uint8_t pt[STEP];
    put_point(pt, 1.0f, -2.0f, 0.5f, 0.25f, 7);
    codec_cloud_t c = {.data = pt, .count = n, .point_step = STEP, .xyz_offset = {0, 4, 8}};
    for (int e = CODEC_RAW; e <= CODEC_QZSTD; e++) {
      codec_params_t p = {.encoding = (codec_encoding_t)e, .precision = 0.001};
      size_t len;
      double err;
      uint8_t* dec = round_trip(&p, &c, &len, &err);
      ASSERT_TRUE(dec != NULL);
      if (n == 1) {
        ASSERT_MEM_EQ(dec + 12, pt + 12, STEP - 12);
        float v[3];
        memcpy(v, dec, 12);
        ASSERT_NEAR(v[0], 1.0, 0.001);
        ASSERT_NEAR(v[1], -2.0, 0.001);
        ASSERT_NEAR(v[2], 0.5, 0.001);
      }
      mem_free(dec);
    }
  }
  return 0;
}


TEST(codec_quantized_far_points_and_no_positions_are_lossless) {
  uint8_t pts[2 * STEP];
  put_point(pts, 1e9f, 0.0f, 0.0f, 1.0f, 0);
  put_point(pts + STEP, 1.0f, 1.0f, 1.0f, 2.0f, 1);
  codec_cloud_t c = {.data = pts, .count = 2, .point_step = STEP, .xyz_offset = {0, 4, 8}};
  codec_params_t p = {.encoding = CODEC_QZSTD, .precision = 0.001};
  size_t len;
  double err;
  uint8_t* dec = round_trip(&p, &c, &len, &err);
  ASSERT_TRUE(dec != NULL);
  ASSERT_MEM_EQ(dec, pts, sizeof(pts));
  ASSERT_TRUE(err == 0.0);
  mem_free(dec);
  c.xyz_offset[0] = c.xyz_offset[1] = c.xyz_offset[2] = -1;
  dec = round_trip(&p, &c, &len, &err);
  ASSERT_TRUE(dec != NULL);
  ASSERT_MEM_EQ(dec, pts, sizeof(pts));
  mem_free(dec);
  return 0;
}


TEST(codec_refuses_bad_parameters_and_damaged_bytes) {
  scan_t s = make_scan(8, 32, 1);
  codec_cloud_t c = cloud_of(&s);
  err_msg_t msg;
  size_t len;
  double err;
  codec_params_t p = {.encoding = CODEC_QZSTD, .precision = 0.0};
  uint8_t* enc = mem_alloc(codec_max_size(&p, &c));
  ASSERT_EQ(codec_encode(&p, &c, enc, codec_max_size(&p, &c), &len, &err, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "precision");
  p.precision = 0.001;
  p.level = 40;
  ASSERT_EQ(codec_encode(&p, &c, enc, codec_max_size(&p, &c), &len, &err, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "level");
  p.level = 1;
  ASSERT_OK(codec_encode(&p, &c, enc, codec_max_size(&p, &c), &len, &err, &msg));
  uint8_t* dec = mem_alloc((size_t)s.n * STEP);
  ASSERT_EQ(codec_decode(CODEC_QZSTD, enc, len - 1, s.n, STEP, dec, &msg), ERR_PROTO);
  ASSERT_EQ(codec_decode(CODEC_QZSTD, enc, len, s.n + 1, STEP, dec, &msg), ERR_PROTO);
  ASSERT_EQ(codec_decode(CODEC_QZSTD, enc, 10, s.n, STEP, dec, &msg), ERR_PROTO);
  enc[16] = 200;  // x offset past the point
  ASSERT_EQ(codec_decode(CODEC_QZSTD, enc, len, s.n, STEP, dec, &msg), ERR_PROTO);
  ASSERT_EQ(codec_decode(CODEC_RAW, enc, len, s.n, STEP, dec, &msg), ERR_PROTO);
  ASSERT_EQ(codec_decode(CODEC_ZSTD, enc, len, s.n, STEP, dec, &msg), ERR_PROTO);

  // every truncation and every flipped byte is either refused or decodes to some cloud
  p.level = 1;
  ASSERT_OK(codec_encode(&p, &c, enc, codec_max_size(&p, &c), &len, &err, &msg));
  for (size_t i = 0; i < len; i += 7) {
    uint8_t keep = enc[i];
    enc[i] ^= 0x5a;
    int rc = codec_decode(CODEC_QZSTD, enc, len, s.n, STEP, dec, &msg);
    ASSERT_TRUE(rc == 0 || rc == ERR_PROTO);
    enc[i] = keep;
  }
  mem_free(dec);
  mem_free(enc);
  mem_free(s.data);
  return 0;
}


// The frame `enc` (len bytes, a quantized_zstd frame of s) with its body changed by `edit`
// (the body, its size, the room) and compressed again; returns the decoder's code and message.
static int decode_edited(const uint8_t* enc, size_t len, const scan_t* s,
                         size_t (*edit)(uint8_t* body, size_t n, size_t cap), err_msg_t* msg) {
  size_t n = 0, cap = (size_t)s->n * STEP * 3 + 64, zlen = 0;
  uint8_t* body = mem_alloc(cap);
  uint8_t* frame = mem_alloc(CODEC_QZSTD_HEADER_BYTES + compress_bound(cap));
  int rc = decompressed_size(enc + CODEC_QZSTD_HEADER_BYTES, len - CODEC_QZSTD_HEADER_BYTES,
                             cap, &n, msg);
  rc = rc ? rc : decompress_zstd(enc + CODEC_QZSTD_HEADER_BYTES,
                                 len - CODEC_QZSTD_HEADER_BYTES, body, n, msg);
  if (rc == 0) {
    n = edit(body, n, cap);
    memcpy(frame, enc, CODEC_QZSTD_HEADER_BYTES);
    rc = compress_zstd(1, body, n, frame + CODEC_QZSTD_HEADER_BYTES, compress_bound(cap), &zlen);
  }
  uint8_t* dec = mem_alloc((size_t)s->n * STEP);
  rc = rc ? -1 : codec_decode(CODEC_QZSTD, frame, CODEC_QZSTD_HEADER_BYTES + zlen, s->n, STEP,
                              dec, msg);
  mem_free(dec);
  mem_free(frame);
  mem_free(body);
  return rc;
}


static uint32_t body_u32(const uint8_t* p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}


static size_t unchanged(uint8_t* body, size_t n, size_t cap) {
  (void)body;
  (void)cap;
  return n;
}


// The range stream's overflow count one more, and four more bytes at the end (the lengths
// agree, but the plane has fewer codes of 255 than values).
static size_t one_more_value(uint8_t* body, size_t n, size_t cap) {
  uint32_t m = body_u32(body) + 1u;
  memcpy(body, &m, 4);
  memset(body + n, 0, n + 4 <= cap ? 4 : 0);
  return n + 4;
}


// The range stream's overflow count one less (the body is then 4 bytes too long for it).
static size_t one_less_value(uint8_t* body, size_t n, size_t cap) {
  (void)cap;
  uint32_t m = body_u32(body) - 1u;
  memcpy(body, &m, 4);
  return n;
}


// The last overflow value cut off, the count kept.
static size_t truncated(uint8_t* body, size_t n, size_t cap) {
  (void)body;
  (void)cap;
  return n - 1;
}


// The code streams of a point of STEP bytes: R, A, E, intensity, and ring with its padding (a
// 4-byte word); the range plane follows their table.
#define STREAMS 5u
#define RANGE_PLANE (4u * STREAMS)

// One more code of 255 in the range plane than the count says (a code below 255 made 255).
static size_t one_more_code(uint8_t* body, size_t n, size_t cap) {
  (void)cap;
  for (size_t i = RANGE_PLANE; i < n; i++) {
    if (body[i] < 255u) {
      body[i] = 255u;
      break;
    }
  }
  return n;
}


// Frames whose overflow lists do not match their planes are refused, naming the code stream;
// a frame of the former format is refused naming the format.
TEST(codec_quantized_refuses_damaged_overflow_lists) {
  scan_t s = make_scan(16, 64, 1);
  // far ranges in the first column make range codes of 255 and more
  for (uint32_t i = 0; i < 16; i++) {
    float x = 500.0f + 37.0f * (float)i;
    memcpy(s.data + (size_t)i * STEP, &x, 4);
  }
  codec_cloud_t c = cloud_of(&s);
  codec_params_t p = {.encoding = CODEC_QZSTD, .precision = 0.001, .stride = 16};
  size_t cap = codec_max_size(&p, &c), len = 0;
  uint8_t* enc = mem_alloc(cap);
  double err;
  err_msg_t msg;
  ASSERT_OK(codec_encode(&p, &c, enc, cap, &len, &err, &msg));
  ASSERT_OK(decode_edited(enc, len, &s, unchanged, &msg));

  // the body: the range stream has overflow values
  size_t n = 0;
  uint8_t* body = mem_alloc((size_t)s.n * STEP * 3);
  ASSERT_OK(decompressed_size(enc + CODEC_QZSTD_HEADER_BYTES, len - CODEC_QZSTD_HEADER_BYTES,
                              (size_t)s.n * STEP * 3, &n, &msg));
  ASSERT_OK(decompress_zstd(enc + CODEC_QZSTD_HEADER_BYTES, len - CODEC_QZSTD_HEADER_BYTES,
                            body, n, &msg));
  uint32_t m0 = body_u32(body), codes255 = 0;
  for (uint32_t i = 0; i < s.n; i++) {
    codes255 += body[RANGE_PLANE + i] == 255u;
  }
  ASSERT_TRUE(m0 >= 16u);
  ASSERT_EQ(m0, codes255);
  mem_free(body);

  ASSERT_EQ(decode_edited(enc, len, &s, one_more_value, &msg), ERR_PROTO);
  ASSERT_CONTAINS(msg.text, "code stream 0");
  ASSERT_EQ(decode_edited(enc, len, &s, one_less_value, &msg), ERR_PROTO);
  ASSERT_CONTAINS(msg.text, "overflow");
  ASSERT_EQ(decode_edited(enc, len, &s, truncated, &msg), ERR_PROTO);
  ASSERT_EQ(decode_edited(enc, len, &s, one_more_code, &msg), ERR_PROTO);
  ASSERT_CONTAINS(msg.text, "more codes of 255 than overflow values");

  enc[3] = '1';  // the magic of the former format
  uint8_t* dec = mem_alloc((size_t)s.n * STEP);
  ASSERT_EQ(codec_decode(CODEC_QZSTD, enc, len, s.n, STEP, dec, &msg), ERR_PROTO);
  ASSERT_CONTAINS(msg.text, "SQZ1");
  mem_free(dec);
  mem_free(enc);
  mem_free(s.data);
  return 0;
}
