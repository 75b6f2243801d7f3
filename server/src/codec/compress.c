// SPDX-License-Identifier: MIT
// compress.c: zstd one-shot compression with the calling thread's context, made on its first
// compression and freed when the thread ends: no context outlives the thread that made it, and
// its memory is not mapped again for each frame.
#include "codec/compress.h"

#include <zstd.h>
#include <zstd_errors.h>

#include "base/kept.h"


static void* cctx_make(void) {
  return ZSTD_createCCtx();
}


static void cctx_free(void* c) {
  ZSTD_freeCCtx(c);
}


// The calling thread's context (kept_get: NULL when it cannot be kept; then one per call).
static kept_t g_cctx = KEPT_INIT(cctx_make, cctx_free);


size_t compress_bound(size_t n) {
  return ZSTD_compressBound(n);
}


int compress_zstd(int level, const void* src, size_t n, void* dst, size_t cap,
                  size_t* out_len) {
  ZSTD_CCtx* c = kept_get(&g_cctx);
  size_t rc = c ? ZSTD_compressCCtx(c, dst, cap, src, n, level > 0 ? level : 1)
                : ZSTD_compress(dst, cap, src, n, level > 0 ? level : 1);
  if (ZSTD_isError(rc)) {
    return ZSTD_getErrorCode(rc) == ZSTD_error_memory_allocation ? ERR_NOMEM : ERR_LIMIT;
  }
  *out_len = rc;
  return 0;
}


int decompressed_size(const void* src, size_t len, size_t max, size_t* size, err_msg_t* msg) {
  unsigned long long got = ZSTD_getFrameContentSize(src, len);
  if (got == ZSTD_CONTENTSIZE_ERROR) {
    return err_set(msg, ERR_PROTO, "data is not a zstd frame");
  }
  if (got == ZSTD_CONTENTSIZE_UNKNOWN) {
    return err_set(msg, ERR_PROTO, "the zstd frame does not state its size");
  }
  if (got > max) {
    return err_set(msg, ERR_PROTO, "zstd frame holds %llu bytes, at most %zu expected", got,
                   max);
  }
  *size = (size_t)got;
  return 0;
}


int decompress_zstd(const void* src, size_t len, void* dst, size_t n, err_msg_t* msg) {
  unsigned long long size = ZSTD_getFrameContentSize(src, len);
  if (size == ZSTD_CONTENTSIZE_ERROR) {
    return err_set(msg, ERR_PROTO, "data is not a zstd frame");
  }
  if (size != ZSTD_CONTENTSIZE_UNKNOWN && size != n) {
    return err_set(msg, ERR_PROTO, "zstd frame holds %llu bytes, expected %zu", size, n);
  }
  size_t rc = ZSTD_decompress(dst, n, src, len);
  if (ZSTD_isError(rc)) {
    return err_set(msg, ERR_PROTO, "zstd: %s", ZSTD_getErrorName(rc));
  }
  if (rc != n) {
    return err_set(msg, ERR_PROTO, "zstd frame holds %zu bytes, expected %zu", rc, n);
  }
  return 0;
}
