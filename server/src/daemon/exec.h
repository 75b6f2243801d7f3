// SPDX-License-Identifier: MIT
// exec.h: execution of environment work off the loop thread. Each environment owns a serial
// queue: its jobs (create, mutate, step, raycast, destroy) run one at a time in submission
// order, so an environment has one owner at a time and needs no lock, while the queues of
// different environments run in parallel on a set of executor threads. Data-parallel work
// inside a job fans out over the shared worker pool (base/pool.h), which serves several
// executors at once. Completed jobs come back to the loop thread through an eventfd, in
// completion order (which is submission order within a queue).
#ifndef SENSIM_DAEMON_EXEC_H_
#define SENSIM_DAEMON_EXEC_H_

#include "base/list.h"

struct uv_loop_s;
typedef struct exec exec_t;
typedef struct exec_job exec_job_t;
typedef struct exec_queue exec_queue_t;

struct exec_job {
  list_node_t node;          // private: owned by exec.c
  void (*run)(exec_job_t* j);  // Thread: an executor, never two jobs of one queue at once
  // Thread: loop; frees the job. cancelled: run never ran.
  void (*done)(exec_job_t* j, int cancelled);
  int brief;                 // a short job (reading counters): never starts an executor
};

// A serial queue, embedded in what it serves (an environment's registry entry). It must stay
// valid until the done of its last submitted job has been called. Fields private to exec.c.
struct exec_queue {
  list_node_t node;          // in the executors' ready list while runnable
  list_t todo;               // submitted jobs not yet run
  int running;               // an executor is running one of its jobs
};

void exec_queue_init(exec_queue_t* q);

// Start the executors: one now, more on demand so that one is spare (idle) beside the
// runnable queues, at most max_threads (>= 1) in all. Returns NULL on failure.
exec_t* exec_create(struct uv_loop_s* loop, unsigned max_threads);

// Queue a job on q, after every job submitted to q before. Unless the job is brief, an
// executor is started when fewer than one more than the waiting queues are idle or starting.
// Thread: loop.
void exec_submit(exec_t* x, exec_queue_t* q, exec_job_t* j);

// Jobs queued, running or finished and awaiting their done, over every queue. Thread: loop.
unsigned exec_pending(const exec_t* x);

// Executor threads started so far. Thread: loop.
unsigned exec_threads(const exec_t* x);

// Stop: running jobs finish, queued jobs are cancelled (done with cancelled = 1), the
// executors are joined and the wake-up handle closed; later submissions are cancelled at once.
// Idempotent. Thread: loop. Blocks for the running jobs.
void exec_stop(exec_t* x);

// Free after exec_stop, once the loop has closed the handle. Nullable: x.
void exec_destroy(exec_t* x);

#endif  // SENSIM_DAEMON_EXEC_H_
