// SPDX-License-Identifier: MIT
// decode_cloud.c: decode a PointCloud's data with sensim_point_cloud_decode.
//   sensim_decode_cloud ENCODING COUNT POINT_STEP IN OUT
// ENCODING is 0 (raw), 1 (zstd) or 2 (quantized zstd); IN holds the PointCloud.data bytes,
// OUT receives COUNT * POINT_STEP decoded bytes. Exit status 0 on success.
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
  fclose(f);
  *len = n;
  return buf;
}


int main(int argc, char** argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: sensim_decode_cloud ENCODING COUNT POINT_STEP IN OUT\n");
    return 2;
  }
  int encoding = atoi(argv[1]);
  unsigned long count = strtoul(argv[2], NULL, 10), step = strtoul(argv[3], NULL, 10);
  size_t len;
  unsigned char* in = read_all(argv[4], &len);
  size_t out_len = (size_t)count * step;
  unsigned char* out = malloc(out_len ? out_len : 1);
  int status = 0;
  if (!in || !out) {
    fprintf(stderr, "sensim_decode_cloud: cannot read %s\n", argv[4]);
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
