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

// The street scene: geometry 1 a ground plane (half side 200 m), 2 a building block (box of
// half extents 6 x 4 x 5 m), 3 a pole (cylinder, radius 0.15 m, half length 3 m), 4 a car
// (box 2.2 x 0.9 x 0.7 m); object i (id i + 1) is geometry geom[i] at pos[i] (no rotation).
typedef struct scan_object {
  uint32_t geom;
  double pos[3];
} scan_object_t;

// The scene's objects (at most 128); returns their number.
uint32_t scan_objects(scan_object_t* out);

// The lidar: OS1-128, 2048 columns, 10 Hz, 1.8 m above the origin, range 0.1 to 120 m, 1 cm
// range noise, misses as zero points, xyzi.
#define SCAN_LIDAR_HEIGHT 1.8

// The scene and lidar in this process, traced on `threads` workers; scan_world_step steps one
// revolution further and returns its points (valid until the next call).
typedef struct scan_world scan_world_t;
scan_world_t* scan_world_create(unsigned threads);
const uint8_t* scan_world_step(scan_world_t* w, uint32_t* count, uint32_t* point_step);
// What the lidar says of the last revolution's points beside them, for the quantized encoder:
// the azimuth each was aimed at (count floats, valid as the points) and its channels per
// column (the stride).
const float* scan_world_azimuths(const scan_world_t* w, uint32_t* stride);
void scan_world_destroy(scan_world_t* w);

// A revolution of an OS1-128 (2048 columns, 10 Hz, 1 cm range noise, misses as zero points,
// xyzi layout: float32 x y z intensity, 16 bytes) in a street-like scene; malloc'ed.
uint8_t* scan_make(uint32_t* count, uint32_t* point_step);
// As scan_make, with the lidar's azimuths of the points (malloc'ed) and its stride.
uint8_t* scan_make_fed(uint32_t* count, uint32_t* point_step, float** azimuth, uint32_t* stride);

// Encoding: 0 raw, 1 zstd, 2 quantized zstd. Returns the encoded size; *max_error the
// measured error (m). out must hold scan_max_size bytes.
size_t scan_max_size(int encoding, const uint8_t* pts, uint32_t count, uint32_t step);
size_t scan_encode(int encoding, int level, double precision, const uint8_t* pts, uint32_t count,
                   uint32_t step, uint8_t* out, double* max_error);
// As scan_encode, given what the lidar says of the points (azimuth NULL, stride 0: nothing).
size_t scan_encode_fed(int encoding, int level, double precision, const uint8_t* pts,
                       uint32_t count, uint32_t step, const float* azimuth, uint32_t stride,
                       uint8_t* out, double* max_error);
// As scan_decode, returning non-zero instead of exiting when the bytes do not decode.
int scan_decode_checked(int encoding, const uint8_t* in, size_t len, uint32_t count,
                        uint32_t step, uint8_t* out);
void scan_decode(int encoding, const uint8_t* in, size_t len, uint32_t count, uint32_t step,
                 uint8_t* out);

#ifdef __cplusplus
}
#endif

#endif  // SENSIM_BENCH_CODEC_SCAN_H_
