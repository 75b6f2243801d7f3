// SPDX-License-Identifier: MIT
// decode_cloud.c: decode a PointCloud's data with sensim_point_cloud_decode.
//   sensim_decode_cloud ENCODING COUNT POINT_STEP IN OUT
// ENCODING is 0 (raw), 1 (zstd) or 2 (quantized zstd); IN holds the PointCloud.data bytes,
// OUT receives COUNT * POINT_STEP decoded bytes. Exit status 0 on success, 1 when the data
// cannot be read, decoded or written, 2 for bad arguments.
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <sensim/sensim.h>


static unsigned char* read_all(const char* path, size_t* len) {
  FILE* f = fopen(path, "rb");
  if (!f) {
    return NULL;
  }
  size_t cap = 1 << 16, n = 0;
  unsigned char* buf = malloc(cap);
  while (buf) {
    n += fread(buf + n, 1, cap - n, f);
    if (n < cap) {
      break;
    }
    unsigned char* grown = realloc(buf, cap *= 2);
    if (!grown) {
      free(buf);
      buf = NULL;
    }
    buf = grown;
  }
  if (buf && ferror(f)) {   // a directory opens, then fails to read
    free(buf);
    buf = NULL;
  }
  fclose(f);
  *len = n;
  return buf;
}


// A decimal integer in [0, max], the whole argument.
static bool whole_number(const char* s, unsigned long long max, unsigned long long* out) {
  char* end = NULL;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (!isdigit((unsigned char)s[0]) || *end || errno || v > max) {
    return false;
  }
  *out = v;
  return true;
}


int main(int argc, char** argv) {
  unsigned long long encoding = 0, count = 0, step = 0;
  if (argc != 6) {
    fprintf(stderr, "usage: sensim_decode_cloud ENCODING COUNT POINT_STEP IN OUT\n");
    return 2;
  }
  if (!whole_number(argv[1], 2, &encoding) || !whole_number(argv[2], UINT32_MAX, &count) ||
      !whole_number(argv[3], UINT32_MAX, &step) || (step && count > SIZE_MAX / step)) {
    fprintf(stderr, "sensim_decode_cloud: ENCODING is 0, 1 or 2; COUNT and POINT_STEP are "
                    "integers in [0, 4294967295] (got %s %s %s)\n", argv[1], argv[2], argv[3]);
    return 2;
  }
  size_t len;
  unsigned char* in = read_all(argv[4], &len);
  size_t out_len = (size_t)(count * step);
  unsigned char* out = in ? malloc(out_len ? out_len : 1) : NULL;
  int status = 0;
  if (!in) {
    fprintf(stderr, "sensim_decode_cloud: cannot read %s\n", argv[4]);
    status = 1;
  } else if (!out) {
    fprintf(stderr, "sensim_decode_cloud: no memory for %zu decoded bytes\n", out_len);
    status = 1;
  } else {
    sensim_status_t st = sensim_point_cloud_decode((sensim_encoding_t)encoding, in, len,
                                                   (uint32_t)count, (uint32_t)step, out,
                                                   out_len);
    if (st != SENSIM_OK) {
      fprintf(stderr, "sensim_decode_cloud: %s\n", sensim_status_name(st));
      status = 1;
    } else {
      FILE* f = fopen(argv[5], "wb");
      int written = f && fwrite(out, 1, out_len, f) == out_len;
      if ((f && fclose(f) != 0) || !written) {
        fprintf(stderr, "sensim_decode_cloud: cannot write %s\n", argv[5]);
        status = 1;
      }
    }
  }
  free(in);
  free(out);
  return status;
}
