// SPDX-License-Identifier: MIT
// buf.c: growable byte buffer; capacity doubles, so appends are amortised O(1).
#include "base/buf.h"

#include <string.h>

#include "base/mem.h"


void buf_init(buf_t* b) {
  b->data = NULL;
  b->len = 0;
  b->cap = 0;
}


void buf_close(buf_t* b) {
  mem_free(b->data);
  buf_init(b);
}


int buf_reserve(buf_t* b, size_t extra) {
  if (extra > SIZE_MAX - b->len) {
    return ERR_NOMEM;
  }
  size_t need = b->len + extra;
  if (need <= b->cap) {
    return 0;
  }
  size_t cap = b->cap ? b->cap : 256;
  while (cap < need) {
    cap = cap > SIZE_MAX / 2 ? need : cap * 2;
  }
  uint8_t* d = mem_realloc(b->data, cap);
  if (!d) {
    return ERR_NOMEM;
  }
  b->data = d;
  b->cap = cap;
  return 0;
}


int buf_append(buf_t* b, const void* data, size_t n) {
  int rc = buf_reserve(b, n);
  if (rc) {
    return rc;
  }
  if (n) {
    memcpy(b->data + b->len, data, n);
  }
  b->len += n;
  return 0;
}


void buf_consume(buf_t* b, size_t n) {
  if (n >= b->len) {
    b->len = 0;
    return;
  }
  memmove(b->data, b->data + n, b->len - n);
  b->len -= n;
}
