// SPDX-License-Identifier: MIT
// test_kept.c: kept_get gives each thread one object of its own, the same on every call, and
// frees it when the thread ends.
#include "base/kept.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "check.h"

static atomic_int g_made, g_dropped;


static void* make(void) {
  atomic_fetch_add(&g_made, 1);
  return malloc(16);
}


static void drop(void* p) {
  atomic_fetch_add(&g_dropped, 1);
  free(p);
}


static kept_t g_kept = KEPT_INIT(make, drop);


// A thread's first and second objects, into its slot.
typedef struct got {
  void* first;
  void* second;
} got_t;


static void* worker(void* arg) {
  got_t* g = arg;
  g->first = kept_get(&g_kept);
  g->second = kept_get(&g_kept);
  return NULL;
}


TEST(kept_one_object_per_thread_freed_at_its_end) {
  enum { N = 4 };
  pthread_t th[N];
  got_t got[N];
  for (int i = 0; i < N; i++) {
    ASSERT_EQ(pthread_create(&th[i], NULL, worker, &got[i]), 0);
  }
  for (int i = 0; i < N; i++) {
    ASSERT_EQ(pthread_join(th[i], NULL), 0);
  }
  for (int i = 0; i < N; i++) {
    ASSERT_TRUE(got[i].first != NULL);
    ASSERT_TRUE(got[i].first == got[i].second);  // kept between calls
  }
  ASSERT_EQ(atomic_load(&g_made), N);
  ASSERT_EQ(atomic_load(&g_dropped), N);         // each freed as its thread ended

  // this thread's own object: made once, still held
  void* mine = kept_get(&g_kept);
  ASSERT_TRUE(mine != NULL && kept_get(&g_kept) == mine);
  ASSERT_EQ(atomic_load(&g_made), N + 1);
  ASSERT_EQ(atomic_load(&g_dropped), N);
  return 0;
}
