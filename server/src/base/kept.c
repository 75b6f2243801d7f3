// SPDX-License-Identifier: MIT
// kept.c: per-thread objects on a pthread key (its destructor frees them when a thread ends).
#include "base/kept.h"

static pthread_mutex_t g_key_lock = PTHREAD_MUTEX_INITIALIZER;


void* kept_get(kept_t* k) {
  int state = atomic_load_explicit(&k->state, memory_order_acquire);
  if (state == 0) {
    pthread_mutex_lock(&g_key_lock);
    state = atomic_load_explicit(&k->state, memory_order_relaxed);
    if (state == 0) {
      state = pthread_key_create(&k->key, k->drop) == 0 ? 1 : -1;
      atomic_store_explicit(&k->state, state, memory_order_release);
    }
    pthread_mutex_unlock(&g_key_lock);
  }
  if (state < 0) {
    return NULL;
  }
  void* obj = pthread_getspecific(k->key);
  if (!obj) {
    obj = k->make();
    if (obj && pthread_setspecific(k->key, obj) != 0) {
      k->drop(obj);
      obj = NULL;
    }
  }
  return obj;
}
