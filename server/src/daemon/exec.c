// SPDX-License-Identifier: MIT
// exec.c: a FIFO drained by one thread. The mutex guards the two lists (todo, finished) and
// the stop flag; it is the only lock of the daemon and is never held while a job runs.
#include "daemon/exec.h"

#include <uv.h>

#include "base/mem.h"

struct exec {
  uv_loop_t* loop;
  uv_async_t async;          // wakes the loop when jobs finish
  uv_thread_t thread;
  uv_mutex_t mutex;          // guards todo, finished, stop
  uv_cond_t cond;            // signalled when todo grows or stop is set
  list_t todo;
  list_t finished;
  list_t ready;              // finished jobs awaiting done (loop thread only)
  unsigned pending;          // submitted and not yet done (loop thread only)
  int stop;
  int started;
};


static void thread_main(void* arg) {
  exec_t* q = arg;
  for (;;) {
    uv_mutex_lock(&q->mutex);
    while (list_is_empty(&q->todo) && !q->stop) {
      uv_cond_wait(&q->cond, &q->mutex);
    }
    if (q->stop) {
      uv_mutex_unlock(&q->mutex);
      return;
    }
    list_node_t* n = list_front(&q->todo);
    list_remove(n);
    uv_mutex_unlock(&q->mutex);

    exec_job_t* j = container_of(n, exec_job_t, node);
    j->run(j);

    uv_mutex_lock(&q->mutex);
    list_push_back(&q->finished, &j->node);
    uv_mutex_unlock(&q->mutex);
    uv_async_send(&q->async);
  }
}


static void drain_finished(exec_t* q, int cancelled) {
  // uv_async_send coalesces: take everything that is ready. The ready list lives in q so that
  // a done() that calls exec_stop (which drains again) keeps completions in submission order.
  uv_mutex_lock(&q->mutex);
  while (!list_is_empty(&q->finished)) {
    list_node_t* n = list_front(&q->finished);
    list_remove(n);
    list_push_back(&q->ready, n);
  }
  uv_mutex_unlock(&q->mutex);
  while (!list_is_empty(&q->ready)) {
    list_node_t* n = list_front(&q->ready);
    list_remove(n);
    q->pending--;
    exec_job_t* j = container_of(n, exec_job_t, node);
    j->done(j, cancelled);
  }
}


static void on_async(uv_async_t* a) {
  drain_finished(a->data, 0);
}


exec_t* exec_create(uv_loop_t* loop) {
  exec_t* q = mem_calloc(1, sizeof(*q));
  if (!q) {
    return NULL;
  }
  q->loop = loop;
  list_init(&q->todo);
  list_init(&q->finished);
  list_init(&q->ready);
  if (uv_mutex_init(&q->mutex) != 0) {
    mem_free(q);
    return NULL;
  }
  if (uv_cond_init(&q->cond) != 0) {
    uv_mutex_destroy(&q->mutex);
    mem_free(q);
    return NULL;
  }
  uv_async_init(loop, &q->async, on_async);
  q->async.data = q;
  if (uv_thread_create(&q->thread, thread_main, q) != 0) {
    q->stop = 1;
    uv_close((uv_handle_t*)&q->async, NULL);
    return q;  // exec_stop/destroy still work; submissions are cancelled
  }
  q->started = 1;
  return q;
}


void exec_submit(exec_t* q, exec_job_t* j) {
  q->pending++;
  uv_mutex_lock(&q->mutex);
  int stopped = q->stop;
  if (!stopped) {
    list_push_back(&q->todo, &j->node);
    uv_cond_signal(&q->cond);
  }
  uv_mutex_unlock(&q->mutex);
  if (stopped) {
    q->pending--;
    j->done(j, 1);
  }
}


unsigned exec_pending(const exec_t* q) {
  return q->pending;
}


void exec_stop(exec_t* q) {
  uv_mutex_lock(&q->mutex);
  q->stop = 1;
  uv_cond_signal(&q->cond);
  uv_mutex_unlock(&q->mutex);
  if (q->started) {
    uv_thread_join(&q->thread);
    q->started = 0;
  }

  // finished jobs complete normally; the never-run ones are cancelled
  drain_finished(q, 0);
  while (!list_is_empty(&q->todo)) {
    list_node_t* n = list_front(&q->todo);
    list_remove(n);
    q->pending--;
    exec_job_t* j = container_of(n, exec_job_t, node);
    j->done(j, 1);
  }
  if (!uv_is_closing((uv_handle_t*)&q->async)) {
    uv_close((uv_handle_t*)&q->async, NULL);
  }
}


void exec_destroy(exec_t* q) {
  if (!q) {
    return;
  }
  uv_cond_destroy(&q->cond);
  uv_mutex_destroy(&q->mutex);
  mem_free(q);
}
