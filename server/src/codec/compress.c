// SPDX-License-Identifier: MIT
// compress.c: zstd one-shot compression with the calling thread's context, made on its first
// compression and freed when the thread ends: no context outlives the thread that made it, and
// its memory is not mapped again for each frame.
#include "codec/compress.h"

#include <pthread.h>
#include <zstd.h>
#include <zstd_errors.h>

static pthread_key_t g_cctx_key;
static pthread_once_t g_cctx_once = PTHREAD_ONCE_INIT;
static int g_cctx_ok;


static void cctx_free(void* c) {
  ZSTD_freeCCtx(c);
}


static void cctx_key_make(void) {
  g_cctx_ok = pthread_key_create(&g_cctx_key, cctx_free) == 0;
}


// The calling thread's context; NULL when it cannot be made (then a context per call).
static ZSTD_CCtx* thread_cctx(void) {
  if (pthread_once(&g_cctx_once, cctx_key_make) != 0 || !g_cctx_ok) {
    return NULL;
  }
  ZSTD_CCtx* c = pthread_getspecific(g_cctx_key);
  if (!c) {
    c = ZSTD_createCCtx();
    if (c && pthread_setspecific(g_cctx_key, c) != 0) {
      ZSTD_freeCCtx(c);
      c = NULL;
    }
  }
  return c;
}


size_t compress_bound(size_t n) {
  return ZSTD_compressBound(n);
}


int compress_zstd(int level, const void* src, size_t n, void* dst, size_t cap,
                  size_t* out_len) {
  ZSTD_CCtx* c = thread_cctx();
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
