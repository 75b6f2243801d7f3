// SPDX-License-Identifier: MIT
// compress.c: zstd one-shot compression. A context per call: its tables cost less than a
// frame's compression, and no context outlives the thread that made it.
#include "codec/compress.h"

#include <zstd.h>
#include <zstd_errors.h>


size_t compress_bound(size_t n) {
  return ZSTD_compressBound(n);
}


int compress_zstd(int level, const void* src, size_t n, void* dst, size_t cap,
                  size_t* out_len) {
  size_t rc = ZSTD_compress(dst, cap, src, n, level > 0 ? level : 1);
  if (ZSTD_isError(rc)) {
    return ZSTD_getErrorCode(rc) == ZSTD_error_memory_allocation ? ERR_NOMEM : ERR_LIMIT;
  }
  *out_len = rc;
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
