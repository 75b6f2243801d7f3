// SPDX-License-Identifier: MIT
// fuzz_check.c: encode, decode twice, compare (fuzz_check.h).
#include "fuzz_check.h"

#include <math.h>
#include <string.h>

#include "fuzz.h"
#include "sensim/sensim.h"


static float rd_f32(const uint8_t* p) {
  uint32_t u = fuzz_rd32(p);
  float f;
  memcpy(&f, &u, sizeof(f));
  return f;
}


// Offsets of the position bytes of a point: 1 where byte k of a point is one of x, y, z.
static void position_bytes(const codec_cloud_t* c, uint8_t* is_pos) {
  memset(is_pos, 0, c->point_step);
  if (c->xyz_offset[0] < 0) {
    return;
  }
  for (int a = 0; a < 3; a++) {
    memset(is_pos + c->xyz_offset[a], 1, 4);
  }
}


int fuzz_decode_both(codec_encoding_t enc, const uint8_t* in, size_t len, uint32_t count,
                     uint32_t step) {
  size_t raw = (size_t)count * step;
  uint8_t* a = malloc(raw ? raw : 1);
  uint8_t* b = malloc(raw ? raw : 1);
  FUZZ_ASSERT(a && b, "out of memory for %zu bytes", raw);
  err_msg_t msg;
  msg.text[0] = '\0';
  int rc = codec_decode(enc, in, len, count, step, a, &msg);
  sensim_status_t st = sensim_point_cloud_decode((sensim_encoding_t)enc, in, len, count, step,
                                                 b, raw);
  FUZZ_ASSERT(rc == 0 || (rc == ERR_PROTO && msg.text[0] != '\0'),
              "daemon decoder: %d (%s)", rc, msg.text);
  FUZZ_ASSERT(st == SENSIM_OK || st == SENSIM_EPROTO, "client decoder: %d", (int)st);

  // the client reads everything the daemon would send it; for the quantized format, whose
  // refusals docs/streams.md spells out, both refuse the same inputs
  if (rc == 0) {
    FUZZ_ASSERT(st == SENSIM_OK, "encoding %d, %u x %u: the daemon decodes, the client "
                "refuses", (int)enc, count, step);
    FUZZ_ASSERT(memcmp(a, b, raw) == 0, "encoding %d, %u x %u: the decoders disagree",
                (int)enc, count, step);
  } else if (enc == CODEC_QZSTD || enc == CODEC_RAW) {
    FUZZ_ASSERT(st != SENSIM_OK, "encoding %d, %u x %u: the client decodes what the daemon "
                "refuses (%s)", (int)enc, count, step, msg.text);
  }
  free(a);
  free(b);
  return rc == 0;
}


void fuzz_cloud_check(const codec_cloud_t* c, codec_encoding_t enc, double precision,
                      int level) {
  codec_params_t p = {.encoding = enc, .level = level, .precision = precision, .stride = 0};
  size_t cap = codec_max_size(&p, c);
  uint8_t* out = malloc(cap ? cap : 1);
  FUZZ_ASSERT(out, "out of memory for %zu bytes", cap);
  size_t len = 0;
  double max_error = -1.0;
  err_msg_t msg;
  int rc = codec_encode(&p, c, out, cap, &len, &max_error, &msg);
  int params_ok = level >= 0 && level <= 19 &&
                  (enc != CODEC_QZSTD ||
                   (precision >= CODEC_MIN_PRECISION && precision <= CODEC_MAX_PRECISION));
  if (rc != 0) {
    FUZZ_ASSERT(!params_ok && rc == ERR_INVAL, "encoding %d of %u x %u refused: %s",
                (int)enc, c->count, c->point_step, msg.text);
    free(out);
    return;
  }
  FUZZ_ASSERT(params_ok, "encoding %d with precision %g level %d accepted", (int)enc,
              precision, level);
  FUZZ_ASSERT(len <= cap, "%zu bytes written, %zu promised at most", len, cap);

  // both decoders, byte for byte the same
  size_t raw = (size_t)c->count * c->point_step;
  uint8_t* a = malloc(raw ? raw : 1);
  uint8_t* b = malloc(raw ? raw : 1);
  uint8_t* is_pos = malloc(c->point_step ? c->point_step : 1);
  FUZZ_ASSERT(a && b && is_pos, "out of memory for %zu bytes", raw);
  rc = codec_decode(enc, out, len, c->count, c->point_step, a, &msg);
  FUZZ_ASSERT(rc == 0, "encoding %d of %u x %u does not decode: %s", (int)enc, c->count,
              c->point_step, msg.text);
  sensim_status_t st = sensim_point_cloud_decode((sensim_encoding_t)enc, out, len, c->count,
                                                 c->point_step, b, raw);
  FUZZ_ASSERT(st == SENSIM_OK, "encoding %d of %u x %u: the client refuses it (%d)", (int)enc,
              c->count, c->point_step, (int)st);
  FUZZ_ASSERT(memcmp(a, b, raw) == 0, "encoding %d of %u x %u: the decoders disagree",
              (int)enc, c->count, c->point_step);

  // lossless encodings, and the lossless part of the quantized one
  if (enc != CODEC_QZSTD || c->xyz_offset[0] < 0) {
    FUZZ_ASSERT(max_error == 0.0, "max_error %g for a lossless encoding", max_error);
    FUZZ_ASSERT(memcmp(a, c->data, raw) == 0, "encoding %d is not lossless", (int)enc);
  } else {
    position_bytes(c, is_pos);
    double r_max = 0.0, worst = 0.0;
    for (uint32_t i = 0; i < c->count; i++) {
      const uint8_t* o = c->data + (size_t)i * c->point_step;
      const uint8_t* d = a + (size_t)i * c->point_step;
      for (uint32_t k = 0; k < c->point_step; k++) {
        FUZZ_ASSERT(is_pos[k] || o[k] == d[k], "point %u byte %u changed", i, k);
      }
      double x[3], y[3];
      int finite = 1;
      for (int ax = 0; ax < 3; ax++) {
        x[ax] = rd_f32(o + c->xyz_offset[ax]);
        y[ax] = rd_f32(d + c->xyz_offset[ax]);
        finite &= isfinite(x[ax]);
      }
      if (!finite) {
        for (int ax = 0; ax < 3; ax++) {
          FUZZ_ASSERT(memcmp(o + c->xyz_offset[ax], d + c->xyz_offset[ax], 4) == 0,
                      "point %u: a non-finite position not restored bit for bit", i);
        }
        continue;
      }
      double r = sqrt(x[0] * x[0] + x[1] * x[1] + x[2] * x[2]);
      double e = sqrt((x[0] - y[0]) * (x[0] - y[0]) + (x[1] - y[1]) * (x[1] - y[1]) +
                      (x[2] - y[2]) * (x[2] - y[2]));
      r_max = r > r_max ? r : r_max;
      worst = e > worst ? e : worst;
    }
    // the encoder measures in its own arithmetic: a relative hair of slack
    FUZZ_ASSERT(worst <= max_error * (1.0 + 1e-9) + 1e-300,
                "a position moved %.17g, the encoder reported max_error %.17g", worst,
                max_error);
    FUZZ_ASSERT(max_error <= 0.62 * precision + 1.1e-7 * r_max,
                "max_error %.17g over 0.62 precision (%g) + 1.1e-7 r_max (%g)", max_error,
                precision, r_max);
  }
  free(is_pos);
  free(a);
  free(b);
  free(out);
}
