// SPDX-License-Identifier: MIT
// test_pool.c: the worker pool runs every index exactly once, in chunks of the requested
// grain, with output independent of the thread count, for several callers at once (nested
// too) without a small call waiting for a large one, and joins its workers on destroy.
#include "base/pool.h"

#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "base/mem.h"
#include "check.h"

typedef struct count_ctx {
  atomic_int* hits;      // (n) times each index ran
  size_t grain;          // expected chunk size (0: any)
  size_t n;
  atomic_int bad_chunk;  // chunks of the wrong shape
} count_ctx_t;


static void count_fn(void* ctx, size_t begin, size_t end) {
  count_ctx_t* c = ctx;
  if (begin >= end || end > c->n ||
      (c->grain && (begin % c->grain != 0 || (end - begin != c->grain && end != c->n)))) {
    atomic_fetch_add(&c->bad_chunk, 1);
  }
  for (size_t i = begin; i < end; i++) {
    atomic_fetch_add(&c->hits[i], 1);
  }
}


TEST(pool_runs_every_index_exactly_once) {
  static const unsigned threads[] = {1, 2, 3, 4, 8};
  static const size_t sizes[] = {0, 1, 2, 7, 64, 1000, 4097};
  static const size_t grains[] = {0, 1, 3, 64, 5000};
  for (size_t ti = 0; ti < sizeof threads / sizeof *threads; ti++) {
    pool_t* p = pool_create(threads[ti]);
    ASSERT_TRUE(p != NULL);
    ASSERT_EQ(pool_threads(p), threads[ti]);
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
      for (size_t gi = 0; gi < sizeof grains / sizeof *grains; gi++) {
        size_t n = sizes[si];
        count_ctx_t c = {.grain = grains[gi], .n = n};
        atomic_init(&c.bad_chunk, 0);
        c.hits = calloc(n ? n : 1, sizeof *c.hits);
        ASSERT_TRUE(c.hits != NULL);

        // several rounds on the same pool: a worker must never run a stale job
        for (int round = 0; round < 3; round++) {
          pool_parallel_for(p, n, grains[gi], count_fn, &c);
        }
        for (size_t i = 0; i < n; i++) {
          if (atomic_load(&c.hits[i]) != 3) {
            free(c.hits);
            CHECK_FAIL("threads %u n %zu grain %zu: index %zu ran %d times in 3 rounds",
                       threads[ti], n, grains[gi], i, atomic_load(&c.hits[i]));
          }
        }
        free(c.hits);
        ASSERT_EQ(atomic_load(&c.bad_chunk), 0);
      }
    }
    pool_destroy(p);
  }
  return 0;
}


TEST(pool_null_runs_serially) {
  count_ctx_t c = {.grain = 10, .n = 95};
  atomic_init(&c.bad_chunk, 0);
  atomic_int hits[95];
  for (int i = 0; i < 95; i++) {
    atomic_init(&hits[i], 0);
  }
  c.hits = hits;
  pool_parallel_for(NULL, 95, 10, count_fn, &c);
  for (int i = 0; i < 95; i++) {
    ASSERT_EQ(atomic_load(&hits[i]), 1);
  }
  ASSERT_EQ(atomic_load(&c.bad_chunk), 0);
  ASSERT_EQ(pool_threads(NULL), 1);
  return 0;
}


// A deterministic per-index computation with enough floating-point work that a race or a
// misplaced write would show.
static void square_fn(void* ctx, size_t begin, size_t end) {
  double* out = ctx;
  for (size_t i = begin; i < end; i++) {
    double x = (double)i * 0.001;
    double acc = 0.0;
    for (int k = 1; k <= 50; k++) {
      acc += sin(x * k) / k;
    }
    out[i] = acc;
  }
}


TEST(pool_output_is_independent_of_thread_count) {
  enum { N = 100000 };
  double* ref = calloc(N, sizeof *ref);
  double* out = calloc(N, sizeof *out);
  ASSERT_TRUE(ref && out);
  pool_parallel_for(NULL, N, 0, square_fn, ref);
  static const unsigned threads[] = {1, 2, 4};
  for (size_t ti = 0; ti < 3; ti++) {
    pool_t* p = pool_create(threads[ti]);
    ASSERT_TRUE(p != NULL);
    for (size_t grain = 0; grain <= 1000; grain += 333) {
      for (size_t i = 0; i < N; i++) {
        out[i] = -1.0;
      }
      pool_parallel_for(p, N, grain, square_fn, out);
      if (memcmp(out, ref, N * sizeof *out) != 0) {
        free(ref);
        free(out);
        pool_destroy(p);
        CHECK_FAIL("output differs with %u threads, grain %zu", threads[ti], grain);
      }
    }
    pool_destroy(p);
  }
  free(ref);
  free(out);
  return 0;
}


// Arithmetic in the denormal range: flush-to-zero on some threads would change the bits.
static void denormal_fn(void* ctx, size_t begin, size_t end) {
  double* out = ctx;
  for (size_t i = begin; i < end; i++) {
    volatile double tiny = 1e-310 * (double)(i % 97 + 1);
    out[i] = tiny * 0.5 + tiny / 3.0;
  }
}


TEST(pool_denormal_arithmetic_is_the_same_on_every_thread) {
  enum { N = 20000 };
  double* ref = calloc(N, sizeof *ref);
  double* out = calloc(N, sizeof *out);
  ASSERT_TRUE(ref && out);
  pool_parallel_for(NULL, N, 0, denormal_fn, ref);
  ASSERT_TRUE(ref[N - 1] != 0.0);  // denormals survive in the caller's default mode
  pool_t* p = pool_create(4);
  ASSERT_TRUE(p != NULL);
  pool_parallel_for(p, N, 64, denormal_fn, out);
  int same = memcmp(out, ref, N * sizeof *out) == 0;
  pool_destroy(p);
  free(ref);
  free(out);
  ASSERT_TRUE(same);
  return 0;
}


//---------------- several callers

typedef struct caller {
  pool_t* p;
  unsigned seed;
  int rounds;
  int failures;          // rounds whose output was wrong
} caller_t;


typedef struct fill_ctx {
  uint32_t* out;         // (n) out[i] = i * key
  uint32_t key;
} fill_ctx_t;


static void fill_fn(void* ctx, size_t begin, size_t end) {
  fill_ctx_t* f = ctx;
  for (size_t i = begin; i < end; i++) {
    f->out[i] = (uint32_t)i * f->key;
  }
}


// Calls of varied sizes and grains from one thread; each checks its own output.
static void* caller_main(void* arg) {
  caller_t* c = arg;
  unsigned x = c->seed;
  for (int r = 0; r < c->rounds; r++) {
    x = x * 1103515245u + 12345u;
    size_t n = 1 + (x >> 8) % 20000;
    size_t grain = (x >> 4) % 4 == 0 ? 0 : 1 + (x >> 12) % 700;
    uint32_t* out = calloc(n, sizeof *out);
    if (!out) {
      c->failures++;
      continue;
    }
    fill_ctx_t f = {out, c->seed * 2654435761u + (uint32_t)r};
    pool_parallel_for(c->p, n, grain, fill_fn, &f);
    for (size_t i = 0; i < n; i++) {
      if (out[i] != (uint32_t)i * f.key) {
        c->failures++;
        break;
      }
    }
    free(out);
  }
  return NULL;
}


TEST(pool_serves_several_callers_at_once) {
  enum { NCALLER = 6 };
  static const unsigned threads[] = {1, 2, 4};
  for (size_t ti = 0; ti < 3; ti++) {
    pool_t* p = pool_create(threads[ti]);
    ASSERT_TRUE(p != NULL);
    caller_t c[NCALLER];
    pthread_t th[NCALLER];
    for (int i = 0; i < NCALLER; i++) {
      c[i] = (caller_t){.p = p, .seed = 17u + (unsigned)i * 101u, .rounds = 60};
      ASSERT_EQ(pthread_create(&th[i], NULL, caller_main, &c[i]), 0);
    }
    for (int i = 0; i < NCALLER; i++) {
      pthread_join(th[i], NULL);
    }
    pool_destroy(p);
    for (int i = 0; i < NCALLER; i++) {
      ASSERT_EQ(c[i].failures, 0);
    }
  }
  return 0;
}


typedef struct nest_ctx {
  pool_t* p;
  uint32_t* out;         // (rows x 64)
} nest_ctx_t;


static void nest_row_fn(void* ctx, size_t begin, size_t end) {
  nest_ctx_t* nc = ctx;
  for (size_t row = begin; row < end; row++) {
    fill_ctx_t f = {nc->out + row * 64, (uint32_t)row + 1};
    pool_parallel_for(nc->p, 64, 4, fill_fn, &f);
  }
}


// A chunk may itself call the pool (a sensor that traces rays): no deadlock, every cell once.
TEST(pool_nested_calls_complete) {
  enum { ROWS = 200 };
  pool_t* p = pool_create(3);
  ASSERT_TRUE(p != NULL);
  uint32_t* out = calloc(ROWS * 64, sizeof *out);
  ASSERT_TRUE(out != NULL);
  nest_ctx_t nc = {p, out};
  pool_parallel_for(p, ROWS, 1, nest_row_fn, &nc);
  pool_destroy(p);
  int bad = 0;
  for (size_t row = 0; row < ROWS; row++) {
    for (size_t i = 0; i < 64; i++) {
      bad += out[row * 64 + i] != (uint32_t)i * ((uint32_t)row + 1);
    }
  }
  free(out);
  ASSERT_EQ(bad, 0);
  return 0;
}


static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}


// Chunks that take wall time without CPU (a sleep), so the timings below do not depend on the
// machine's load; each records the thread that ran it.
typedef struct slow_ctx {
  long chunk_ns;
  pthread_t caller;
  atomic_int started;    // chunks begun
  atomic_int elsewhere;  // chunks run by a thread other than the caller
} slow_ctx_t;


static void slow_fn(void* ctx, size_t begin, size_t end) {
  slow_ctx_t* s = ctx;
  atomic_fetch_add(&s->started, 1);
  if (!pthread_equal(pthread_self(), s->caller)) {
    atomic_fetch_add(&s->elsewhere, 1);
  }
  for (size_t i = begin; i < end; i++) {
    struct timespec ts = {0, s->chunk_ns};
    nanosleep(&ts, NULL);
  }
}


typedef struct big_call {
  pool_t* p;
  slow_ctx_t s;
  double end_s;          // when the call returned
} big_call_t;


static void* big_main(void* arg) {
  big_call_t* b = arg;
  b->s.caller = pthread_self();
  pool_parallel_for(b->p, 400, 1, slow_fn, &b->s);
  b->end_s = now_s();
  return NULL;
}


// A small call made while a large one keeps every worker busy finishes long before the large
// one, and the workers take turns: some of the small call's chunks run on workers.
TEST(pool_small_call_is_not_queued_behind_a_large_one) {
  pool_t* p = pool_create(3);
  ASSERT_TRUE(p != NULL);

  // large: 400 chunks of 2 ms, about 270 ms on 3 threads
  big_call_t big = {.p = p, .s = {.chunk_ns = 2000000}};
  atomic_init(&big.s.started, 0);
  atomic_init(&big.s.elsewhere, 0);
  pthread_t th;
  ASSERT_EQ(pthread_create(&th, NULL, big_main, &big), 0);
  while (atomic_load(&big.s.started) < 3) {
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
  }

  // small: 20 chunks of 5 ms, 100 ms if the caller ran them alone
  slow_ctx_t small = {.chunk_ns = 5000000, .caller = pthread_self()};
  atomic_init(&small.started, 0);
  atomic_init(&small.elsewhere, 0);
  double t0 = now_s();
  pool_parallel_for(p, 20, 1, slow_fn, &small);
  double t1 = now_s();
  pthread_join(th, NULL);
  pool_destroy(p);
  // long before: in less than half the time the large call still needed (relative, so that a
  // loaded machine's late wake-ups stretch both sides alike)
  ASSERT_TRUE(t1 < big.end_s);
  ASSERT_TRUE(t1 - t0 < 0.5 * (big.end_s - t0));
  ASSERT_TRUE(atomic_load(&small.elsewhere) > 0);
  ASSERT_EQ(atomic_load(&small.started), 20);
  ASSERT_EQ(atomic_load(&big.s.started), 400);
  return 0;
}


// Threads of this process, from /proc/self/task.
static int thread_count(void) {
  DIR* d = opendir("/proc/self/task");
  if (!d) {
    return -1;
  }
  int n = 0;
  for (struct dirent* e = readdir(d); e; e = readdir(d)) {
    n += e->d_name[0] != '.';
  }
  closedir(d);
  return n;
}


// The kernel wakes pthread_join before it has reaped the thread, so a joined thread can
// linger in /proc/self/task for a moment: poll (up to 2 s) for the expected count.
static int thread_count_settles_at(int expected) {
  int n = thread_count();
  for (int i = 0; i < 2000 && n != expected; i++) {
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
    n = thread_count();
  }
  return n;
}


TEST(pool_destroy_joins_workers_and_frees) {
  // ThreadSanitizer's runtime starts a thread of its own with the first thread the process
  // creates: count from after one pool has come and gone
  int before = thread_count();
  pool_destroy(pool_create(2));
  int nthread = thread_count_settles_at(before) == before ? before
                                                          : thread_count_settles_at(before + 1);
  int64_t live = mem_live_count();
  ASSERT_TRUE(nthread >= 1);
  for (int k = 0; k < 50; k++) {
    pool_t* p = pool_create(4);
    ASSERT_TRUE(p != NULL);
    ASSERT_EQ(thread_count_settles_at(nthread + 3), nthread + 3);
    if (k % 2) {
      double out[64];
      pool_parallel_for(p, 64, 1, square_fn, out);
    }
    pool_destroy(p);
  }
  pool_destroy(NULL);
  ASSERT_EQ(thread_count_settles_at(nthread), nthread);
  ASSERT_EQ(mem_live_count(), live);
  return 0;
}


TEST(pool_create_fails_cleanly_without_memory) {
  int64_t live = mem_live_count();
  mem_fail_after(1);
  ASSERT_TRUE(pool_create(4) == NULL);
  mem_fail_after(2);
  ASSERT_TRUE(pool_create(4) == NULL);
  mem_fail_after(0);
  ASSERT_EQ(mem_live_count(), live);
  return 0;
}
