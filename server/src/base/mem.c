// SPDX-License-Identifier: MIT
// mem.c: malloc wrappers with a live-allocation counter and failure injection.
#include "base/mem.h"

#include <malloc.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static atomic_llong g_live;
static atomic_llong g_fail_countdown;


static int should_fail(void) {
  long long n = atomic_load(&g_fail_countdown);
  if (n <= 0) {
    return 0;
  }
  return atomic_fetch_sub(&g_fail_countdown, 1) == 1;
}


void* mem_alloc(size_t size) {
  if (should_fail()) {
    return NULL;
  }
  void* p = malloc(size ? size : 1);
  if (p) {
    atomic_fetch_add(&g_live, 1);
  }
  return p;
}


void* mem_calloc(size_t count, size_t size) {
  if (should_fail()) {
    return NULL;
  }
  void* p = calloc(count ? count : 1, size ? size : 1);
  if (p) {
    atomic_fetch_add(&g_live, 1);
  }
  return p;
}


void* mem_realloc(void* ptr, size_t size) {
  if (!ptr) {
    return mem_alloc(size);
  }
  if (should_fail()) {
    return NULL;
  }
  return realloc(ptr, size ? size : 1);
}


void mem_free(void* ptr) {
  if (ptr) {
    atomic_fetch_sub(&g_live, 1);
    free(ptr);
  }
}


char* mem_strdup(const char* s) {
  if (!s) {
    return NULL;
  }
  size_t n = strlen(s) + 1;
  char* d = mem_alloc(n);
  if (d) {
    memcpy(d, s, n);
  }
  return d;
}


size_t mem_footprint(const void* p) {
  // glibc puts one size word before each block; the usable size already includes the
  // rounding up to its 16-byte granule and minimum chunk
  return p ? malloc_usable_size((void*)p) + sizeof(size_t) : 0;
}


size_t mem_footprint_of(size_t n) {
  // glibc's chunk: the bytes and one size word, rounded up to its 16-byte granule, at least
  // its 32-byte minimum (what mem_footprint measures for such a block)
  size_t chunk = (n + sizeof(size_t) + 15u) & ~(size_t)15u;
  return chunk < 32u ? 32u : chunk;
}


void mem_trim(void) {
  malloc_trim(0);
}


int64_t mem_live_count(void) {
  return atomic_load(&g_live);
}


void mem_fail_after(int64_t nth) {
  atomic_store(&g_fail_countdown, nth);
}
