// SPDX-License-Identifier: MIT
// kept.h: an object each thread makes on first use and keeps until it ends (a compression
// context, work buffers), so that a hot path does not allocate (and fault in) it again on every
// call. Declare one kept_t per kind of object, statically, with KEPT_INIT.
//
// Thread: any; kept_get hands each thread its own object.
#ifndef SENSIM_BASE_KEPT_H_
#define SENSIM_BASE_KEPT_H_

#include <pthread.h>
#include <stdatomic.h>

typedef struct kept {
  void* (*make)(void);         // a new object, NULL when it cannot be made
  void (*drop)(void* obj);     // frees an object made by make (at thread end)
  atomic_int state;            // private: 0 key not made, 1 key made, -1 key failed
  pthread_key_t key;           // private
} kept_t;

#define KEPT_INIT(make_fn, drop_fn) {.make = (make_fn), .drop = (drop_fn)}

// The calling thread's object, made on its first call; NULL when it cannot be made or kept
// (the caller then makes its own for the call).
void* kept_get(kept_t* k);

#endif  // SENSIM_BASE_KEPT_H_
