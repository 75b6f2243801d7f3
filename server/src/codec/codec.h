// SPDX-License-Identifier: MIT
// codec.h: point-cloud encodings (docs/streams.md, "Encodings"). A cloud is count points of
// point_step little-endian bytes, like sensor_msgs/PointCloud2:
//   CODEC_RAW    the bytes as they are;
//   CODEC_ZSTD   one zstd frame of the bytes (lossless);
//   CODEC_QZSTD  positions (float32 x, y, z) as a range image quantized to a declared
//                precision, predicted and zigzagged; every other byte lossless; the codes
//                a byte each (the few larger ones in overflow lists), then zstd. Point
//                order is kept; misses (NaN or zero points, or any non-finite coordinate)
//                are restored bit for bit.
// The encoder decodes what it wrote and reports the largest position error it measured; it is
// never more than the precision (for ranges below 2^22 precisions; see docs/streams.md). What the
// sensor knows of its points (its scan's stride, each point's azimuth) saves the encoder
// recovering it from the positions; an azimuth is taken only where the search would find the
// same, so the bytes are those without it.
//
// Thread: any. No state between calls but work memory: each thread keeps its zstd compression
// context and the buffers of the largest cloud it encoded or decoded until it ends.
#ifndef SENSIM_CODEC_CODEC_H_
#define SENSIM_CODEC_CODEC_H_

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "sensor/sensor.h"

typedef enum codec_encoding {
  CODEC_RAW = 0,
  CODEC_ZSTD = 1,
  CODEC_QZSTD = 2,
} codec_encoding_t;

#define CODEC_DEFAULT_PRECISION 0.001   // m
#define CODEC_MIN_PRECISION 1e-6        // m
#define CODEC_MAX_PRECISION 1.0         // m
#define CODEC_QZSTD_HEADER_BYTES 56u
#define CODEC_QZSTD_MAGIC "SQZ2"

typedef struct codec_cloud {
  const uint8_t* data;          // count * point_step bytes
  uint32_t count;
  uint32_t point_step;
  int64_t xyz_offset[3];        // byte offsets of float32 x, y, z in a point; -1: no positions
  // from the sensor (0 / NULL: unknown, recovered from the positions)
  uint32_t stride;              // the point of the same channel in the previous column is
                                //   `stride` points back (a scan's channels per column)
  const float* azimuth;         // (count) rad: each point's azimuth seen from the cloud's
                                //   origin, as the sensor aimed it
} codec_cloud_t;

typedef struct codec_params {
  codec_encoding_t encoding;
  int level;                    // zstd level, 1..19 (0: 1)
  double precision;             // m, QZSTD: in [CODEC_MIN_PRECISION, CODEC_MAX_PRECISION]
  uint32_t stride;              // QZSTD: points per column of an organised scan (the value
                                // predicted from is `stride` points back); 0: the cloud's, else
                                // detected
} codec_params_t;

// The cloud of a sensor record: positions found from fields x, y, z when all three are one
// float32 each, else none; the record's stride and azimuths.
codec_cloud_t codec_cloud_of(const sensor_cloud_t* c);

// Largest encoded size of c with p.
size_t codec_max_size(const codec_params_t* p, const codec_cloud_t* c);

// Encode c into out (cap >= codec_max_size). *out_len: bytes written; *max_error: the largest
// distance between a decoded position and the original (m; 0 for lossless encodings).
// ERR_INVAL naming the parameter (precision, level), ERR_NOMEM.
int codec_encode(const codec_params_t* p, const codec_cloud_t* c, uint8_t* out, size_t cap,
                 size_t* out_len, double* max_error, err_msg_t* msg) CHECKRET;

// Decode `len` bytes of encoding enc into out (count * point_step bytes). ERR_PROTO naming what
// does not match when the bytes are not a valid encoding of such a cloud.
int codec_decode(codec_encoding_t enc, const uint8_t* in, size_t len, uint32_t count,
                 uint32_t point_step, uint8_t* out, err_msg_t* msg) CHECKRET;

// Name of an encoding ("raw", "zstd", "quantized_zstd"), "unknown" otherwise.
const char* codec_name(int enc);

#endif  // SENSIM_CODEC_CODEC_H_
