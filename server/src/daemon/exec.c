// SPDX-License-Identifier: MIT
// exec.c: serial queues drained by a growing set of executor threads. A queue with jobs and no
// running job sits in the ready list; an executor takes the first ready queue, runs one job of
// it, and puts the queue back at the end if it has more, so busy environments take turns.
//
// How many threads: executors are started on demand so that one more than the runnable queues
// is idle or starting, up to max_threads (the daemon passes its environment limit), and then
// stay, parked while idle. So an environment never waits for another's long job (a fixed set
// of N executors would queue the (N+1)th busy environment behind the others) nor for a thread
// to be created (the spare is started off that path: measured, a new thread on a busy machine
// took 5 to 15 ms to run its first job), no thread is created or joined per environment or per
// request (a thread per environment would be, for each one), and memory stays bounded: one
// stack per environment busy at the same time as the others plus the spare, never more than
// the limit. CPU is shared by the worker pool, not by these threads: an executor mostly runs
// its own chunks of pool work or waits for them.
//
// Short jobs inline: a state update or step whose predecessors in its queue were all short
// runs on the loop thread when nothing else is in flight (exec_run_inline): two thread
// hand-offs (the executor's wake-up, the loop's) were most of an IMU step's round trip.
//
// The mutex guards the ready list, every queue's todo and running, the finished list, the
// counters and the stop flag; it is the only lock here and is never held while a job runs.
//
// Completions wake the loop through an eventfd watched by a uv_poll handle, written only when
// the loop has not been told yet. Not uv_async_send: in libuv 1.44 (Debian 12) the loop,
// woken by the eventfd write inside uv_async_send, busy-waits (pause loop, then sched_yield)
// until the sending thread has returned from that write and marked the send complete; on a
// loaded machine the sender is often descheduled right there, and the loop spun on every step
// (7 % of the daemon's CPU in the UpdateState + Step round trip benchmark).
#include "daemon/exec.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <uv.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/mem.h"

// recent_ns of a new queue, and of one whose environment was changed (exec.h).
#define EXEC_RECENT_START_NS 1000000u

struct exec {
  uv_loop_t* loop;
  uv_poll_t poll;            // watches wake_fd: wakes the loop when jobs finish
  int wake_fd;               // eventfd, -1 when none
  int notified;              // wake_fd written since the loop last took the finished list
  int poll_open;             // poll initialised and not yet closed
  uv_mutex_t mutex;
  uv_cond_t cond;            // signalled when a queue becomes ready or stop is set
  list_t ready;              // runnable queues, in turn order
  unsigned nready;           // queues in ready
  list_t finished;           // jobs run, awaiting done
  list_t completing;         // finished jobs being completed (loop thread only)
  uv_thread_t* threads;      // (max_threads)
  unsigned max_threads;
  unsigned nthreads;         // executors started or being started
  unsigned idle;             // executors waiting for a ready queue
  unsigned starting;         // executors created that have not yet looked for work
  unsigned pending;          // submitted and not yet done (loop thread only)
  int stop;
};


void exec_queue_init(exec_queue_t* q) {
  list_init(&q->todo);
  q->node.prev = q->node.next = &q->node;
  q->running = 0;
  q->recent_ns = EXEC_RECENT_START_NS;
  q->short_span = 0.0;
}


// Learn from a candidate's run time (or forget, after any other change). Thread: mutex held
// or loop with nothing in flight.
static void learn(exec_queue_t* q, const exec_job_t* j, uint64_t took) {
  if (j->inline_candidate) {
    q->recent_ns = took > q->recent_ns / 2 ? took : q->recent_ns / 2;
    if (took <= EXEC_INLINE_NS && j->span > q->short_span) {
      q->short_span = j->span;
    } else if (took > EXEC_INLINE_NS && j->span > 0.0 && j->span <= 2.0 * q->short_span) {
      q->short_span = j->span / 2.0;
    }
  } else if (!j->brief) {
    q->recent_ns = EXEC_RECENT_START_NS;
    q->short_span = 0.0;
  }
}


// Thread: an executor, mutex not held.
static void wake_loop(exec_t* x) {
  uint64_t one = 1;
  while (write(x->wake_fd, &one, sizeof(one)) < 0 && errno == EINTR) {
  }
  // EAGAIN: the counter is saturated, the loop is woken anyway
}


static void executor_main(void* arg) {
  exec_t* x = arg;
  pthread_setname_np(pthread_self(), EXEC_THREAD_NAME);
  uv_mutex_lock(&x->mutex);
  x->starting--;
  for (;;) {
    // wait for a runnable queue or the end
    while (!x->stop && list_is_empty(&x->ready)) {
      x->idle++;
      uv_cond_wait(&x->cond, &x->mutex);
      x->idle--;
    }
    if (x->stop) {
      break;
    }

    // one job of the first ready queue
    exec_queue_t* q = container_of(list_front(&x->ready), exec_queue_t, node);
    list_remove(&q->node);
    x->nready--;
    q->running = 1;
    list_node_t* n = list_front(&q->todo);
    list_remove(n);
    uv_mutex_unlock(&x->mutex);
    exec_job_t* j = container_of(n, exec_job_t, node);
    j->started_ns = clock_now_ns();
    j->run(j);
    uint64_t took = clock_now_ns() - j->started_ns;

    // The queue goes back in turn before the job is handed over: once the job is in the
    // finished list its done may free the queue's owner, so q is not touched after that.
    uv_mutex_lock(&x->mutex);
    learn(q, j, took);
    q->running = 0;
    if (!list_is_empty(&q->todo)) {
      list_push_back(&x->ready, &q->node);
      x->nready++;
    }
    list_push_back(&x->finished, &j->node);
    if (!x->notified) {
      x->notified = 1;
      uv_mutex_unlock(&x->mutex);
      wake_loop(x);
      uv_mutex_lock(&x->mutex);
    }
  }
  uv_mutex_unlock(&x->mutex);
}


static void drain_finished(exec_t* x) {
  // One wake covers every job finished until now: take them all (a job finished after this
  // writes the eventfd again). The completing list lives in x so that a done() that calls
  // exec_stop (which drains again) keeps completions in order.
  uv_mutex_lock(&x->mutex);
  x->notified = 0;
  while (!list_is_empty(&x->finished)) {
    list_node_t* n = list_front(&x->finished);
    list_remove(n);
    list_push_back(&x->completing, n);
  }
  uv_mutex_unlock(&x->mutex);
  while (!list_is_empty(&x->completing)) {
    list_node_t* n = list_front(&x->completing);
    list_remove(n);
    x->pending--;
    exec_job_t* j = container_of(n, exec_job_t, node);
    j->done(j, 0);
  }
}


static void on_wake(uv_poll_t* h, int status, int events) {
  (void)status;
  (void)events;
  exec_t* x = h->data;
  uint64_t n;
  while (read(x->wake_fd, &n, sizeof(n)) < 0 && errno == EINTR) {
  }
  drain_finished(x);
}


// Start the executor of the last slot reserved (nthreads and starting counted under the
// mutex); a failure gives the slot back. Thread: loop, mutex not held.
static int start_executor(exec_t* x) {
  if (uv_thread_create(&x->threads[x->nthreads - 1], executor_main, x) != 0) {
    uv_mutex_lock(&x->mutex);
    x->nthreads--;
    x->starting--;
    uv_mutex_unlock(&x->mutex);
    return -1;
  }
  return 0;
}


exec_t* exec_create(uv_loop_t* loop, unsigned max_threads) {
  exec_t* x = mem_calloc(1, sizeof(*x));
  if (!x) {
    return NULL;
  }
  x->max_threads = max_threads ? max_threads : 1;
  x->threads = mem_calloc(x->max_threads, sizeof(*x->threads));
  if (!x->threads) {
    mem_free(x);
    return NULL;
  }
  x->loop = loop;
  list_init(&x->ready);
  list_init(&x->finished);
  list_init(&x->completing);
  if (uv_mutex_init(&x->mutex) != 0) {
    mem_free(x->threads);
    mem_free(x);
    return NULL;
  }
  if (uv_cond_init(&x->cond) != 0) {
    uv_mutex_destroy(&x->mutex);
    mem_free(x->threads);
    mem_free(x);
    return NULL;
  }
  x->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (x->wake_fd < 0 || uv_poll_init(loop, &x->poll, x->wake_fd) != 0) {
    exec_destroy(x);   // nothing started: the fd, the lock and the memory
    return NULL;
  }
  x->poll.data = x;
  x->poll_open = 1;
  uv_poll_start(&x->poll, UV_READABLE, on_wake);
  x->nthreads = 1;
  x->starting = 1;
  if (start_executor(x) != 0) {
    x->stop = 1;
    x->poll_open = 0;
    uv_close((uv_handle_t*)&x->poll, NULL);
    return x;  // exec_stop/destroy still work; submissions are cancelled
  }
  return x;
}


void exec_submit(exec_t* x, exec_queue_t* q, exec_job_t* j) {
  x->pending++;
  uv_mutex_lock(&x->mutex);
  int stopped = x->stop;
  int grow = 0;
  if (!stopped) {
    // a queue that is neither running nor waiting becomes ready
    int was_idle = !q->running && list_is_empty(&q->todo);
    list_push_back(&q->todo, &j->node);
    if (was_idle) {
      list_push_back(&x->ready, &q->node);
      x->nready++;
      uv_cond_signal(&x->cond);
    }

    // Checked on every job, not only when q becomes ready: q may be waiting behind brief
    // jobs that started nothing (GetInfo puts one on every queue at once).
    grow = !j->brief && x->nready + 1 > x->idle + x->starting && x->nthreads < x->max_threads;
    x->nthreads += grow;
    x->starting += grow;
  }
  uv_mutex_unlock(&x->mutex);
  if (stopped) {
    x->pending--;
    j->done(j, 1);
    return;
  }

  // Only the loop thread starts executors, so the reserved slot is still the last. A failure
  // leaves fewer executors: the ready queues still run, in turn.
  if (grow && start_executor(x) != 0) {
    LOG_WARN("cannot start another executor thread (%u running)", x->nthreads);
  }
}


int exec_run_inline(exec_t* x, exec_queue_t* q, exec_job_t* j) {
  // pending counts every job from its submission to the end of its done, so 0 means that no
  // executor holds q (or anything) and that no earlier completion is still to be delivered
  if (!j->inline_candidate || x->pending != 0 || q->recent_ns > EXEC_INLINE_NS ||
      j->span > 2.0 * q->short_span) {
    return 0;
  }
  // stop is written on the loop thread alone (exec_create, exec_stop), which this is: read
  // without the mutex (the executors read it under the mutex, but never write it)
  if (x->stop) {
    return 0;
  }
  x->pending++;
  j->started_ns = clock_now_ns();
  j->run(j);
  learn(q, j, clock_now_ns() - j->started_ns);
  x->pending--;
  j->done(j, 0);
  return 1;
}


unsigned exec_pending(const exec_t* x) {
  return x->pending;
}


unsigned exec_threads(const exec_t* x) {
  return x->nthreads;
}


void exec_stop(exec_t* x) {
  uv_mutex_lock(&x->mutex);
  x->stop = 1;
  uv_cond_broadcast(&x->cond);
  uv_mutex_unlock(&x->mutex);
  for (unsigned i = 0; i < x->nthreads; i++) {
    uv_thread_join(&x->threads[i]);
  }
  x->nthreads = 0;

  // Finished jobs complete normally; the never-run ones are cancelled, queue by queue. Every
  // queue with jobs left is in the ready list: an executor puts its queue back before it
  // leaves. The jobs leave the queue before any done runs: the last one may free the queue.
  drain_finished(x);
  while (!list_is_empty(&x->ready)) {
    exec_queue_t* q = container_of(list_front(&x->ready), exec_queue_t, node);
    list_remove(&q->node);
    x->nready--;
    list_t todo;
    list_init(&todo);
    while (!list_is_empty(&q->todo)) {
      list_node_t* n = list_front(&q->todo);
      list_remove(n);
      list_push_back(&todo, n);
    }
    while (!list_is_empty(&todo)) {
      list_node_t* n = list_front(&todo);
      list_remove(n);
      x->pending--;
      exec_job_t* j = container_of(n, exec_job_t, node);
      j->done(j, 1);
    }
  }
  if (x->poll_open) {
    x->poll_open = 0;
    uv_close((uv_handle_t*)&x->poll, NULL);
  }
}


void exec_destroy(exec_t* x) {
  if (!x) {
    return;
  }
  if (x->wake_fd >= 0) {
    close(x->wake_fd);
  }
  uv_cond_destroy(&x->cond);
  uv_mutex_destroy(&x->mutex);
  mem_free(x->threads);
  mem_free(x);
}
