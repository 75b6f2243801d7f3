// SPDX-License-Identifier: MIT
// buf.h: a growable byte buffer (storage provided by the caller, contents on the heap).
#ifndef SENSIM_BASE_BUF_H_
#define SENSIM_BASE_BUF_H_

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

typedef struct buf {
  uint8_t* data;   // nullable while cap == 0
  size_t len;      // bytes in use
  size_t cap;      // bytes allocated
} buf_t;

void buf_init(buf_t* b);
void buf_close(buf_t* b);

// Make room for at least `extra` more bytes; ERR_NOMEM on failure (contents unchanged).
int buf_reserve(buf_t* b, size_t extra) CHECKRET;

// Append n bytes; ERR_NOMEM on failure.
int buf_append(buf_t* b, const void* data, size_t n) CHECKRET;

// Drop the first n bytes (n <= len), moving the rest to the front.
void buf_consume(buf_t* b, size_t n);

#endif  // SENSIM_BASE_BUF_H_
