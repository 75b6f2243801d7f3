// SPDX-License-Identifier: MIT
// codec.c: the encodings' entry points; the quantized one is in qzstd.c.
#include "codec/codec.h"

#include <math.h>
#include <string.h>

#include "codec/compress.h"
#include "codec/qzstd.h"


codec_cloud_t codec_cloud_of(const sensor_cloud_t* c) {
  codec_cloud_t out = {.data = c->data, .count = c->count, .point_step = c->point_step,
                       .xyz_offset = {-1, -1, -1}, .stride = c->stride, .azimuth = c->azimuth};
  static const char* const kNames[3] = {"x", "y", "z"};
  int64_t off[3] = {-1, -1, -1};
  for (uint32_t i = 0; i < c->nfield; i++) {
    for (int k = 0; k < 3; k++) {
      if (strcmp(c->fields[i].name, kNames[k]) == 0 && c->fields[i].datatype == SENSOR_FLOAT32 &&
          c->fields[i].count == 1 && c->fields[i].offset + 4u <= c->point_step) {
        off[k] = c->fields[i].offset;
      }
    }
  }
  if (off[0] >= 0 && off[1] >= 0 && off[2] >= 0) {
    memcpy(out.xyz_offset, off, sizeof(off));
  }
  return out;
}


size_t codec_max_size(const codec_params_t* p, const codec_cloud_t* c) {
  size_t raw = (size_t)c->count * c->point_step;
  switch (p->encoding) {
    case CODEC_ZSTD:
      return compress_bound(raw);
    case CODEC_QZSTD:
      return qzstd_max_size(c);
    default:
      return raw;
  }
}


int codec_encode(const codec_params_t* p, const codec_cloud_t* c, uint8_t* out, size_t cap,
                 size_t* out_len, double* max_error, err_msg_t* msg) {
  size_t raw = (size_t)c->count * c->point_step;
  *max_error = 0.0;
  if (p->level < 0 || p->level > 19) {
    return err_set(msg, ERR_INVAL, "level = %d must be in [1, 19] (0: 1)", p->level);
  }
  switch (p->encoding) {
    case CODEC_RAW:
      if (cap < raw) {
        return err_set(msg, ERR_LIMIT, "%zu bytes do not fit %zu", raw, cap);
      }
      if (raw) {
        memcpy(out, c->data, raw);
      }
      *out_len = raw;
      return 0;
    case CODEC_ZSTD: {
      int rc = compress_zstd(p->level, c->data, raw, out, cap, out_len);
      return rc ? err_set(msg, rc, "zstd compression failed (%s)", err_str(rc)) : 0;
    }
    case CODEC_QZSTD:
      return qzstd_encode(p, c, out, cap, out_len, max_error, msg);
  }
  return err_set(msg, ERR_INVAL, "encoding = %d is unknown", (int)p->encoding);
}


int codec_decode(codec_encoding_t enc, const uint8_t* in, size_t len, uint32_t count,
                 uint32_t point_step, uint8_t* out, err_msg_t* msg) {
  size_t raw = (size_t)count * point_step;
  switch (enc) {
    case CODEC_RAW:
      if (len != raw) {
        return err_set(msg, ERR_PROTO, "data has %zu bytes, expected count * point_step = %zu",
                       len, raw);
      }
      if (raw) {
        memcpy(out, in, raw);
      }
      return 0;
    case CODEC_ZSTD:
      return decompress_zstd(in, len, out, raw, msg);
    case CODEC_QZSTD:
      return qzstd_decode(in, len, count, point_step, out, msg);
  }
  return err_set(msg, ERR_PROTO, "encoding = %d is unknown", (int)enc);
}


const char* codec_name(int enc) {
  switch (enc) {
    case CODEC_RAW:
      return "raw";
    case CODEC_ZSTD:
      return "zstd";
    case CODEC_QZSTD:
      return "quantized_zstd";
  }
  return "unknown";
}
