// SPDX-License-Identifier: MIT
// pool.c: fixed pthread worker pool shared by many submitters. Each pool_parallel_for call is a
// task on the caller's stack; while it has unclaimed chunks it sits in the pool's active list,
// where workers take one chunk at a time from the task after the one they served last
// (round-robin), and its caller runs its own chunks too. A call returns only when no worker is
// still inside one of its chunks, so a task never outlives its stack frame.
#include "base/pool.h"

#include <pthread.h>
#include <stdbool.h>

#include "base/list.h"
#include "base/mem.h"

// One pool_parallel_for call in flight.
typedef struct task {
  list_node_t node;        // in pool.active while next < nchunk
  pool_fn_t fn;
  void* ctx;
  size_t n;
  size_t grain;
  size_t nchunk;
  size_t next;             // first unclaimed chunk
  unsigned running;        // chunks being run by workers (not the caller)
} task_t;

struct pool {
  unsigned nthreads;       // workers + the caller
  pthread_t* workers;      // (nthreads - 1)

  // lock guards everything below and every task's next, running and node; it is the only
  // lock of the pool and is never held while a chunk runs.
  pthread_mutex_t lock;
  pthread_cond_t wake;     // a task was added, or stopping
  pthread_cond_t done;     // a task's last worker chunk finished (broadcast: callers check)
  list_t active;           // tasks with unclaimed chunks, oldest first
  list_node_t* cursor;     // the task a worker serves next (&active.head: the first)
  bool stopping;
};


static void chunk_range(const task_t* t, size_t c, size_t* begin, size_t* end) {
  *begin = c * t->grain;
  *end = t->n - *begin < t->grain ? t->n : *begin + t->grain;
}


// Claim the next chunk of t; a task whose last chunk is claimed leaves the active list (and the
// cursor moves past it). Thread: lock held.
static size_t claim(pool_t* p, task_t* t) {
  size_t c = t->next++;
  if (t->next == t->nchunk) {
    if (p->cursor == &t->node) {
      p->cursor = t->node.next;
    }
    list_remove(&t->node);
  }
  return c;
}


// The task to serve next, round-robin over the active list. Thread: lock held, list not empty.
static task_t* next_task(pool_t* p) {
  list_node_t* n = p->cursor;
  if (n == &p->active.head) {
    n = n->next;
  }
  p->cursor = n->next;
  return container_of(n, task_t, node);
}


static void* worker_main(void* arg) {
  pool_t* p = arg;
  pthread_setname_np(pthread_self(), POOL_THREAD_NAME);  // in top -H, perf, /proc/*/task/*/comm

  // Workers keep the default floating-point mode, like the calling threads that run chunks
  // too: the same work must give the same bits on any thread. Embree's flush-to-zero mode is
  // set by scene_trace around each call.
  pthread_mutex_lock(&p->lock);
  for (;;) {
    // wait for work or the end
    while (!p->stopping && list_is_empty(&p->active)) {
      pthread_cond_wait(&p->wake, &p->lock);
    }
    if (p->stopping) {
      break;
    }

    // one chunk of the next task in turn
    task_t* t = next_task(p);
    size_t c = claim(p, t);
    t->running++;
    pthread_mutex_unlock(&p->lock);
    size_t begin, end;
    chunk_range(t, c, &begin, &end);
    t->fn(t->ctx, begin, end);
    pthread_mutex_lock(&p->lock);
    if (--t->running == 0 && t->next == t->nchunk) {
      pthread_cond_broadcast(&p->done);
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
  list_init(&p->active);
  p->cursor = &p->active.head;
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
  task_t t = {.fn = fn, .ctx = ctx, .n = n, .grain = grain};
  t.nchunk = n / grain + (n % grain != 0);

  // serial: no pool, one thread, or a single chunk
  if (nthreads == 1 || t.nchunk == 1) {
    for (size_t c = 0; c < t.nchunk; c++) {
      size_t begin, end;
      chunk_range(&t, c, &begin, &end);
      fn(ctx, begin, end);
    }
    return;
  }

  // publish the task; the workers share themselves among every active task
  pthread_mutex_lock(&p->lock);
  list_push_back(&p->active, &t.node);
  pthread_cond_broadcast(&p->wake);

  // take part in our own task only, so that its latency does not depend on the others
  while (t.next < t.nchunk) {
    size_t c = claim(p, &t);
    pthread_mutex_unlock(&p->lock);
    size_t begin, end;
    chunk_range(&t, c, &begin, &end);
    fn(ctx, begin, end);
    pthread_mutex_lock(&p->lock);
  }

  // every chunk is claimed: wait for the workers still inside one of ours
  while (t.running > 0) {
    pthread_cond_wait(&p->done, &p->lock);
  }
  pthread_mutex_unlock(&p->lock);
}
