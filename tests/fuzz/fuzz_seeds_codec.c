// SPDX-License-Identifier: MIT
// fuzz_seeds_codec.c: the seed corpus of fuzz_codec, written by the build with the daemon's
// encoder: lidar-like clouds (an organised scan of 16 channels, with misses of every kind,
// without positions, with positions at odd offsets) in each encoding for the decode mode, the
// same bytes with the zstd frame decompressed for the plain decode mode, the same clouds raw
// for the encode mode, and two zip bombs (a zstd frame of 8 MiB of zeros
// declared as a cloud of 256 bytes, bare and behind a quantized header).
//
// Usage: fuzz_seeds_codec OUTDIR (writes OUTDIR/*; the header layout is fuzz_codec.c's).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/codec.h"
#include "codec/compress.h"

#define CHANNELS 16u
#define COLUMNS 6u
#define HEAD 9u

static const char* g_dir;


static void put_f32(uint8_t* p, float f) {
  memcpy(p, &f, 4);  // little-endian x86-64 and aarch64: the byte order of the format
}


static int write_seed(const char* name, const uint8_t head[HEAD], const uint8_t* body,
                      size_t len) {
  char path[4096];
  snprintf(path, sizeof(path), "%s/%s", g_dir, name);
  FILE* f = fopen(path, "wb");
  if (!f) {
    fprintf(stderr, "fuzz_seeds_codec: cannot write %s\n", path);
    return -1;
  }
  int ok = fwrite(head, 1, HEAD, f) == HEAD && fwrite(body, 1, len, f) == len;
  return fclose(f) == 0 && ok ? 0 : -1;
}


// An organised scan: CHANNELS x COLUMNS points of step bytes, x y z at off[] (or none), the
// other bytes a smooth intensity and a ring number; misses of the kind `misses` (0 none,
// 1 zero points, 2 NaN, 3 infinities and other NaNs) every 7th point.
static void scan(uint8_t* d, uint32_t step, const int off[3], int misses) {
  memset(d, 0, (size_t)CHANNELS * COLUMNS * step);
  for (uint32_t col = 0; col < COLUMNS; col++) {
    for (uint32_t ch = 0; ch < CHANNELS; ch++) {
      uint32_t i = col * CHANNELS + ch;
      uint8_t* p = d + (size_t)i * step;
      for (uint32_t k = 0; k < step; k++) {
        p[k] = (uint8_t)(ch * 3 + col / 4 + k);
      }
      double az = 2.0 * M_PI * col / COLUMNS, el = -0.25 + 0.5 * ch / CHANNELS;
      double r = 5.0 + 3.0 * sin(az * 3.0) + 0.01 * ch;
      float xyz[3] = {(float)(r * cos(el) * cos(az)), (float)(r * cos(el) * sin(az)),
                      (float)(r * sin(el))};
      if (misses && i % 7 == 3) {
        static const float kOdd[3] = {INFINITY, -INFINITY, -0.0f};
        for (int a = 0; a < 3; a++) {
          xyz[a] = misses == 1 ? 0.0f : misses == 2 ? NAN : kOdd[a];
        }
      }
      if (off[0] >= 0) {
        for (int a = 0; a < 3; a++) {
          put_f32(p + off[a], xyz[a]);
        }
      }
    }
  }
}


// The plain decode mode's seed: the same bytes with the zstd frame decompressed.
static int plain_seed(const char* name, uint8_t head[HEAD], const uint8_t* enc, size_t len) {
  size_t keep = head[0] == CODEC_QZSTD ? CODEC_QZSTD_HEADER_BYTES : 0, n;
  err_msg_t msg;
  if (decompressed_size(enc + keep, len - keep, 1u << 30, &n, &msg) != 0) {
    fprintf(stderr, "fuzz_seeds_codec: %s: %s\n", name, msg.text);
    return -1;
  }
  uint8_t* plain = malloc(keep + n);
  memcpy(plain, enc, keep);
  int rc = decompress_zstd(enc + keep, len - keep, plain + keep, n, &msg);
  char file[256];
  snprintf(file, sizeof(file), "plain_%s_%s", codec_name(head[0]), name);
  head[0] |= 8;
  rc = rc ? rc : write_seed(file, head, plain, keep + n);
  head[0] &= (uint8_t)~8u;
  free(plain);
  return rc;
}


static int seeds_of(const char* name, uint32_t step, const int off[3], int misses) {
  uint32_t count = CHANNELS * COLUMNS;
  size_t raw = (size_t)count * step;
  uint8_t* cloud = malloc(raw);
  scan(cloud, step, off, misses);
  codec_cloud_t c = {.data = cloud, .count = count, .point_step = step,
                     .xyz_offset = {off[0], off[1], off[2]}};
  uint8_t head[HEAD] = {0, (uint8_t)count, (uint8_t)(count >> 8), (uint8_t)step,
                        off[0] < 0 ? 0xFF : (uint8_t)off[0], (uint8_t)off[1],
                        (uint8_t)off[2], 3, 1};
  int rc = 0;
  char file[256];
  for (int enc = CODEC_RAW; enc <= CODEC_QZSTD && rc == 0; enc++) {
    codec_params_t p = {.encoding = (codec_encoding_t)enc, .level = 1, .precision = 1e-3};
    size_t cap = codec_max_size(&p, &c), len;
    uint8_t* out = malloc(cap);
    double max_error;
    err_msg_t msg;
    rc = codec_encode(&p, &c, out, cap, &len, &max_error, &msg);
    if (rc) {
      fprintf(stderr, "fuzz_seeds_codec: %s: %s\n", name, msg.text);
    } else {
      head[0] = (uint8_t)enc;
      snprintf(file, sizeof(file), "decode_%s_%s", codec_name(enc), name);
      rc = write_seed(file, head, out, len);
      if (rc == 0 && enc != CODEC_RAW) {
        rc = plain_seed(name, head, out, len);
      }
    }
    free(out);

    // the encode mode takes the cloud itself
    head[0] = (uint8_t)(4 | enc);
    head[7] = (uint8_t)(enc * 2 + 1);
    snprintf(file, sizeof(file), "encode_%s_%s", codec_name(enc), name);
    rc = rc ? rc : write_seed(file, head, cloud, raw);
  }
  free(cloud);
  return rc;
}


// A zstd frame of 8 MiB of zeros, declared as 16 points of 16 bytes; and the same behind the
// header of a quantized cloud of that size.
static int bombs(void) {
  size_t n = 8u << 20;
  uint8_t* zeros = calloc(1, n);
  size_t cap = compress_bound(n), len;
  uint8_t* z = malloc(CODEC_QZSTD_HEADER_BYTES + cap);
  int rc = compress_zstd(19, zeros, n, z + CODEC_QZSTD_HEADER_BYTES, cap, &len);
  uint8_t head[HEAD] = {CODEC_ZSTD, 16, 0, 16, 0, 4, 8, 3, 1};
  rc = rc ? rc : write_seed("decode_zstd_bomb", head, z + CODEC_QZSTD_HEADER_BYTES, len);

  // SQZ2, 16 points of 16 bytes, stride 16, x y z at 0 4 8, no exceptions, steps of 1 mm
  uint8_t* h = z;
  memset(h, 0, CODEC_QZSTD_HEADER_BYTES);
  memcpy(h, CODEC_QZSTD_MAGIC, 4);
  uint32_t fields[7] = {16, 16, 16, 0, 4, 8, 0};
  for (int k = 0; k < 7; k++) {
    for (int b = 0; b < 4; b++) {
      h[4 + 4 * k + b] = (uint8_t)(fields[k] >> (8 * b));
    }
  }
  double steps[2] = {1e-3, 1e-6};
  memcpy(h + 32, steps, sizeof(steps));
  head[0] = CODEC_QZSTD;
  rc = rc ? rc : write_seed("decode_quantized_zstd_bomb", head, z,
                            CODEC_QZSTD_HEADER_BYTES + len);
  free(z);
  free(zeros);
  return rc;
}


int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: fuzz_seeds_codec OUTDIR\n");
    return 2;
  }
  g_dir = argv[1];
  static const int kXyzi[3] = {0, 4, 8}, kOdd[3] = {9, 2, 13}, kNone[3] = {-1, -1, -1};
  int rc = seeds_of("xyzi", 16, kXyzi, 0);
  rc = rc ? rc : seeds_of("zero_misses", 16, kXyzi, 1);
  rc = rc ? rc : seeds_of("nan_misses", 16, kXyzi, 2);
  rc = rc ? rc : seeds_of("odd_misses", 16, kXyzi, 3);
  rc = rc ? rc : seeds_of("odd_offsets", 20, kOdd, 2);
  rc = rc ? rc : seeds_of("no_positions", 7, kNone, 0);
  rc = rc ? rc : bombs();
  return rc ? 1 : 0;
}
