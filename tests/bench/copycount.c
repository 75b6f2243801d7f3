// SPDX-License-Identifier: MIT
// copycount.c: an LD_PRELOAD library for bench_streams that counts the bytes a process copies
// in large blocks (memcpy, memmove and their checked forms, 64 KiB or more a call: point
// clouds, not fields), and writes the total to the file named by $SENSIM_COPYCOUNT_FILE when
// the process exits. It measures how often the daemon copies a cloud between the tracing and
// the socket, without changing the daemon.
#include <dlfcn.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#define BIG ((size_t)64 << 10)

typedef void* (*copy_fn)(void*, const void*, size_t);

static atomic_ullong g_bytes;
static atomic_ullong g_calls;
static copy_fn g_memcpy, g_memmove;


// Byte by byte: only while the real functions are being looked up (dlsym may copy).
static void* slow_move(void* dst, const void* src, size_t n) {
  unsigned char* d = dst;
  const unsigned char* s = src;
  if (d < s) {
    for (size_t i = 0; i < n; i++) {
      d[i] = s[i];
    }
  } else {
    for (size_t i = n; i > 0; i--) {
      d[i - 1] = s[i - 1];
    }
  }
  return dst;
}


static copy_fn real(copy_fn* slot, const char* name) {
  static _Thread_local int looking;
  if (!*slot) {
    if (looking) {
      return slow_move;
    }
    looking = 1;
    *slot = (copy_fn)dlsym(RTLD_NEXT, name);
    looking = 0;
  }
  return *slot ? *slot : slow_move;
}


static void count(size_t n) {
  if (n >= BIG) {
    atomic_fetch_add(&g_bytes, n);
    atomic_fetch_add(&g_calls, 1);
  }
}


void* memcpy(void* dst, const void* src, size_t n) {
  count(n);
  return real(&g_memcpy, "memcpy")(dst, src, n);
}


void* memmove(void* dst, const void* src, size_t n) {
  count(n);
  return real(&g_memmove, "memmove")(dst, src, n);
}


void* __memcpy_chk(void* dst, const void* src, size_t n, size_t cap) {
  (void)cap;
  return memcpy(dst, src, n);
}


void* __memmove_chk(void* dst, const void* src, size_t n, size_t cap) {
  (void)cap;
  return memmove(dst, src, n);
}


__attribute__((destructor)) static void report(void) {
  const char* path = getenv("SENSIM_COPYCOUNT_FILE");
  FILE* f = path ? fopen(path, "w") : NULL;
  if (f) {
    fprintf(f, "%llu %llu\n", (unsigned long long)atomic_load(&g_bytes),
            (unsigned long long)atomic_load(&g_calls));
    fclose(f);
  }
}
