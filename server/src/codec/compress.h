// SPDX-License-Identifier: MIT
// compress.h: the zstd adapter, the only file of the project that includes <zstd.h>. Whole
// buffers in, whole buffers out.
//
// Thread: any (each thread compresses with a context of its own, kept until it ends).
#ifndef SENSIM_CODEC_COMPRESS_H_
#define SENSIM_CODEC_COMPRESS_H_

#include <stddef.h>

#include "base/err.h"

// Largest compressed size of n bytes.
size_t compress_bound(size_t n);

// Compress src (n bytes) at level (1..19; <= 0 means 1) into dst (cap bytes); *out_len the
// size written. ERR_LIMIT when cap is too small, ERR_NOMEM.
int compress_zstd(int level, const void* src, size_t n, void* dst, size_t cap,
                  size_t* out_len) CHECKRET;

// The decompressed size of the zstd frame at src, which its header must state and which must
// be at most `max`. ERR_PROTO (msg names what) otherwise.
int decompressed_size(const void* src, size_t len, size_t max, size_t* size,
                      err_msg_t* msg) CHECKRET;

// Decompress one zstd frame of exactly `n` decompressed bytes. ERR_PROTO (msg names what)
// when src is not such a frame.
int decompress_zstd(const void* src, size_t len, void* dst, size_t n, err_msg_t* msg) CHECKRET;

#endif  // SENSIM_CODEC_COMPRESS_H_
