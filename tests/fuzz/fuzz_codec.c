// SPDX-License-Identifier: MIT
// fuzz_codec.c: the point-cloud encodings (server/src/codec) from both ends.
//   decode: hostile bytes (corrupt headers, zstd frames that claim or hold far more than the
//     cloud, wrong sizes) through the daemon's decoder and the C client's independent one,
//     which must agree (fuzz_check.h) and never read or write out of bounds;
//   encode: hostile clouds (NaN, infinities, denormals, huge ranges, odd field offsets)
//     through the encoder, then both decoders, checked against what docs/streams.md promises.
//
// Mutations of a zstd frame seldom decompress, so that a quantized body would hardly be reached:
// in the "plain" decode mode the input holds the body decompressed, and the harness compresses
// it (the whole data for ZSTD, all but the 56-byte header for QUANTIZED_ZSTD) before decoding.
//
// Input: a 9-byte header, then the data.
//   [0]    bits 0-1 the encoding (3: one that does not exist), bit 2 encode mode, bit 3 plain
//   [1..2] u16 points (decode mode)
//   [3]    point_step
//   [4..6] byte offsets of x, y, z (encode mode; 0xFF in [4]: no positions)
//   [7]    precision 1e-6 * 10^(k % 7) m, or a value out of range for k >= 250
//   [8]    zstd level
#include <math.h>
#include <string.h>

#include "codec/compress.h"
#include "fuzz.h"
#include "fuzz_check.h"

#define HEAD 9u


// The precision an input asks for; a few values outside [1e-6, 1] test the refusal.
static double precision_of(uint8_t k) {
  static const double kBad[] = {0.0, -1e-3, 1.5, 5e-7, 1e300, INFINITY};
  if (k >= 250) {
    return kBad[(k - 250) % 6];
  }
  double p = 1e-6;
  for (int i = 0; i < k % 7; i++) {
    p *= 10.0;
  }
  return p;
}


// Whether x, y, z at these offsets are separate float32 fields inside a point.
static int offsets_ok(const int64_t off[3], uint32_t step) {
  for (int a = 0; a < 3; a++) {
    if (off[a] + 4 > (int64_t)step) {
      return 0;
    }
    for (int b = 0; b < a; b++) {
      if (off[a] < off[b] + 4 && off[b] < off[a] + 4) {
        return 0;
      }
    }
  }
  return 1;
}


int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < HEAD) {
    return 0;
  }
  codec_encoding_t enc = (codec_encoding_t)(data[0] & 3);
  uint32_t step = data[3];
  const uint8_t* body = data + HEAD;
  size_t len = size - HEAD;

  if (!(data[0] & 4)) {
    uint32_t count = (uint32_t)data[1] | (uint32_t)data[2] << 8;
    size_t keep = enc == CODEC_QZSTD ? CODEC_QZSTD_HEADER_BYTES : 0;
    if (!(data[0] & 8) || (enc != CODEC_ZSTD && enc != CODEC_QZSTD) || len < keep) {
      fuzz_decode_both(enc, body, len, count, step);
      return 0;
    }
    size_t cap = keep + compress_bound(len - keep), packed;
    uint8_t* z = malloc(cap);
    FUZZ_ASSERT(z, "out of memory");
    memcpy(z, body, keep);
    FUZZ_ASSERT(compress_zstd(1, body + keep, len - keep, z + keep, cap - keep, &packed) == 0,
                "zstd compression failed");
    fuzz_decode_both(enc, z, keep + packed, count, step);
    free(z);
    return 0;
  }

  // encode mode: the body is the cloud
  if (enc == 3 || step == 0) {
    return 0;
  }
  codec_cloud_t c = {.data = body, .count = (uint32_t)(len / step), .point_step = step,
                     .xyz_offset = {data[4], data[5], data[6]}};
  if (data[4] == 0xFF || !offsets_ok(c.xyz_offset, step)) {
    c.xyz_offset[0] = c.xyz_offset[1] = c.xyz_offset[2] = -1;
  }
  fuzz_cloud_check(&c, enc, precision_of(data[7]), data[8] % 21 == 20 ? -1 : data[8] % 20);
  return 0;
}
