// SPDX-License-Identifier: MIT
// exec.h: the environment thread. Every operation on an environment (create, mutate, step,
// raycast, destroy) runs here, one job at a time in submission order, so that the libuv loop
// never blocks on ray tracing or BVH builds and each environment has exactly one owner
// thread. Data-parallel work inside a job fans out over the worker pool (base/pool.h).
// Completed jobs come back to the loop thread through uv_async.
#ifndef SENSIM_DAEMON_EXEC_H_
#define SENSIM_DAEMON_EXEC_H_

#include "base/list.h"

struct uv_loop_s;
typedef struct exec exec_t;
typedef struct exec_job exec_job_t;

struct exec_job {
  list_node_t node;          // private: owned by exec.c
  void (*run)(exec_job_t* j);     // Thread: environment thread
  // Thread: loop; frees the job. cancelled: run never ran.
  void (*done)(exec_job_t* j, int cancelled);
};

// Start the environment thread. Returns NULL on failure.
exec_t* exec_create(struct uv_loop_s* loop);

// Queue a job. Thread: loop.
void exec_submit(exec_t* q, exec_job_t* j);

// Jobs queued or running.
unsigned exec_pending(const exec_t* q);

// Stop: the running job finishes, queued jobs are cancelled (done with cancelled = 1), the
// thread is joined and the async handle closed. Thread: loop. Blocks for the running job.
void exec_stop(exec_t* q);

// Free after the loop has closed the handle.
void exec_destroy(exec_t* q);

#endif  // SENSIM_DAEMON_EXEC_H_
