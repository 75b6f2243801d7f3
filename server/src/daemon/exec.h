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

#include <stdint.h>

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
  int brief;                 // a job that does next to nothing (GetInfo waiting its turn):
                             // never starts an executor
  // A job exec_run_inline may run (a state update, a step): its run time feeds the queue's
  // recent_ns. Any other job but a brief one (one that changes the environment: a sensor
  // created, ...) resets recent_ns to 1 ms, so that the next candidates go to the executors
  // until they have shown again that they are short.
  int inline_candidate;
  // The candidate's span of simulated work (a step's interval, s; 0 for a state update). The
  // cost of a step grows with its interval (a lidar fires for the whole interval): a candidate
  // runs inline only if its span is at most twice the longest span recently seen to be short.
  double span;
  // When run started (clock_now_ns), set before run is called: a job timing itself from its
  // start (a request's deadline) reads it instead of the clock. Thread: the one running it.
  uint64_t started_ns;
};

// A serial queue, embedded in what it serves (an environment's registry entry). It must stay
// valid until the done of its last submitted job has been called. Fields private to exec.c.
struct exec_queue {
  list_node_t node;          // in the executors' ready list while runnable
  list_t todo;               // submitted jobs not yet run
  int running;               // an executor is running one of its jobs
  uint64_t recent_ns;        // decaying maximum of its inline candidates' run times
  double short_span;         // longest span of a recent candidate that ran in EXEC_INLINE_NS
};

// A candidate is short when it ran in at most this. A build may raise it (-DEXEC_INLINE_NS=...)
// to keep the inline path under an instrumenting profiler that slows every job down.
#ifndef EXEC_INLINE_NS
#define EXEC_INLINE_NS 50000u
#endif

// The name of every executor thread (/proc/PID/task/TID/comm).
#define EXEC_THREAD_NAME "sensim-exec"

void exec_queue_init(exec_queue_t* q);

// Start the executors: one now, more on demand so that one is spare (idle) beside the
// runnable queues, at most max_threads (>= 1) in all. Returns NULL on failure.
exec_t* exec_create(struct uv_loop_s* loop, unsigned max_threads);

// Queue a job on q, after every job submitted to q before. Unless the job is brief, an
// executor is started when fewer than one more than the waiting queues are idle or starting.
// Thread: loop.
void exec_submit(exec_t* x, exec_queue_t* q, exec_job_t* j);

// Run j on the calling thread at once (run, then done) when nothing at all is in flight (no
// job queued, running or awaiting its done, in any queue), j is an inline candidate and q's
// recent candidates were all short (recent_ns <= EXEC_INLINE_NS, and its span within twice
// short_span; a new or changed environment starts
// at 1 ms, so its next candidates go to the executors):
// a short request then costs no hand-off to an executor and back. Returns 1 when j ran (and
// is freed by its done), 0 when it did not (nothing changed: submit it). Thread: loop.
int exec_run_inline(exec_t* x, exec_queue_t* q, exec_job_t* j);

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
