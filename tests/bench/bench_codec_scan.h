// SPDX-License-Identifier: MIT
// bench_codec_scan.h: the C side of bench_codec.cc: one OS1-128 2048x10 revolution traced by
// the core, and the project's codec, behind plain declarations C++ can include.
#ifndef SENSIM_BENCH_CODEC_SCAN_H_
#define SENSIM_BENCH_CODEC_SCAN_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// A revolution of an OS1-128 (2048 columns, 10 Hz, 1 cm range noise, misses as zero points,
// xyzi layout: float32 x y z intensity, 16 bytes) in a street-like scene; malloc'ed.
uint8_t* scan_make(uint32_t* count, uint32_t* point_step);

// Encoding: 0 raw, 1 zstd, 2 quantized zstd. Returns the encoded size; *max_error the
// measured error (m). out must hold scan_max_size bytes.
size_t scan_max_size(int encoding, const uint8_t* pts, uint32_t count, uint32_t step);
size_t scan_encode(int encoding, int level, double precision, const uint8_t* pts, uint32_t count,
                   uint32_t step, uint8_t* out, double* max_error);
void scan_decode(int encoding, const uint8_t* in, size_t len, uint32_t count, uint32_t step,
                 uint8_t* out);

#ifdef __cplusplus
}
#endif

#endif  // SENSIM_BENCH_CODEC_SCAN_H_
