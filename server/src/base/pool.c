// SPDX-License-Identifier: MIT
// pool.c: fixed pthread worker pool for data-parallel loops. The caller publishes a job,
// every worker joins it, chunks are claimed from an atomic counter, and the caller waits until
// every worker has left the job, so no worker can still be inside a job that has returned.
#include "base/pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "base/mem.h"

struct pool {
  unsigned nthreads;       // workers + the caller
  pthread_t* workers;      // (nthreads - 1)

  // The job is published under lock and read by each worker once it has seen a new
  // generation; lock guards generation, stopping, active and the job fields, and is the only
  // lock of the pool.
  pthread_mutex_t lock;
  pthread_cond_t wake;     // a new generation or stopping
  pthread_cond_t done;     // active reached 0
  uint64_t generation;
  bool stopping;
  unsigned active;         // workers that have not finished the current generation

  // current job
  pool_fn_t fn;
  void* ctx;
  size_t n;
  size_t grain;
  size_t nchunk;
  atomic_size_t next_chunk;
};


// Claim chunks until none is left.
static void run_chunks(pool_t* p) {
  for (;;) {
    size_t c = atomic_fetch_add(&p->next_chunk, 1);
    if (c >= p->nchunk) {
      return;
    }
    size_t begin = c * p->grain;
    size_t end = p->n - begin < p->grain ? p->n : begin + p->grain;
    p->fn(p->ctx, begin, end);
  }
}


static void* worker_main(void* arg) {
  pool_t* p = arg;

  // Workers keep the default floating-point mode, like the calling thread that runs chunks
  // too: the same work must give the same bits on any thread. Embree's flush-to-zero mode is
  // set by scene_trace around each call.
  uint64_t seen = 0;
  pthread_mutex_lock(&p->lock);
  for (;;) {
    // wait for a new job or the end
    while (!p->stopping && p->generation == seen) {
      pthread_cond_wait(&p->wake, &p->lock);
    }
    if (p->stopping) {
      break;
    }
    seen = p->generation;
    pthread_mutex_unlock(&p->lock);

    // work
    run_chunks(p);

    // leave the job
    pthread_mutex_lock(&p->lock);
    if (--p->active == 0) {
      pthread_cond_signal(&p->done);
    }
  }
  pthread_mutex_unlock(&p->lock);
  return NULL;
}


// Stop and join the first nstarted workers.
static void pool_stop(pool_t* p, unsigned nstarted) {
  pthread_mutex_lock(&p->lock);
  p->stopping = true;
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->lock);
  for (unsigned i = 0; i < nstarted; i++) {
    pthread_join(p->workers[i], NULL);
  }
}


static void pool_free(pool_t* p) {
  pthread_cond_destroy(&p->done);
  pthread_cond_destroy(&p->wake);
  pthread_mutex_destroy(&p->lock);
  mem_free(p->workers);
  mem_free(p);
}


pool_t* pool_create(unsigned nthreads) {
  if (nthreads == 0) {
    nthreads = 1;
  }
  pool_t* p = mem_calloc(1, sizeof *p);
  if (!p) {
    return NULL;
  }
  p->nthreads = nthreads;
  atomic_init(&p->next_chunk, 0);
  if (nthreads > 1) {
    p->workers = mem_calloc(nthreads - 1, sizeof *p->workers);
    if (!p->workers) {
      mem_free(p);
      return NULL;
    }
  }
  pthread_mutex_init(&p->lock, NULL);
  pthread_cond_init(&p->wake, NULL);
  pthread_cond_init(&p->done, NULL);

  // workers
  for (unsigned i = 0; i + 1 < nthreads; i++) {
    if (pthread_create(&p->workers[i], NULL, worker_main, p) != 0) {
      pool_stop(p, i);
      pool_free(p);
      return NULL;
    }
  }
  return p;
}


void pool_destroy(pool_t* p) {
  if (!p) {
    return;
  }
  pool_stop(p, p->nthreads - 1);
  pool_free(p);
}


unsigned pool_threads(const pool_t* p) {
  return p ? p->nthreads : 1;
}


void pool_parallel_for(pool_t* p, size_t n, size_t grain, pool_fn_t fn, void* ctx) {
  if (n == 0) {
    return;
  }
  unsigned nthreads = pool_threads(p);

  // automatic grain: about 8 chunks per thread, so that uneven chunks still balance
  if (grain == 0) {
    grain = n / ((size_t)nthreads * 8);
    if (grain == 0) {
      grain = 1;
    }
  }
  size_t nchunk = n / grain + (n % grain != 0);

  // serial: no pool, one thread, or a single chunk
  if (nthreads == 1 || nchunk == 1) {
    for (size_t begin = 0; begin < n; begin += grain) {
      fn(ctx, begin, n - begin < grain ? n : begin + grain);
    }
    return;
  }

  // publish the job and wake every worker
  pthread_mutex_lock(&p->lock);
  p->fn = fn;
  p->ctx = ctx;
  p->n = n;
  p->grain = grain;
  p->nchunk = nchunk;
  atomic_store(&p->next_chunk, 0);
  p->active = nthreads - 1;
  p->generation++;
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->lock);

  // take part, then wait for every worker to leave the job
  run_chunks(p);
  pthread_mutex_lock(&p->lock);
  while (p->active > 0) {
    pthread_cond_wait(&p->done, &p->lock);
  }
  pthread_mutex_unlock(&p->lock);
}
