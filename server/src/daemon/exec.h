// SPDX-License-Identifier: MIT
// jobs.h: the environment thread. Every operation on an environment (create, mutate, step,
// raycast, destroy) runs here, one job at a time in submission order, so that the libuv loop
// never blocks on ray tracing or BVH builds and each environment has exactly one owner
// thread. Data-parallel work inside a job fans out over the worker pool (base/pool.h).
// Completed jobs come back to the loop thread through uv_async.
#ifndef SENSIM_NET_JOBS_H_
#define SENSIM_NET_JOBS_H_

#include "base/list.h"

struct uv_loop_s;
typedef struct jobs jobs_t;
typedef struct job job_t;

struct job {
  list_node_t node;          // private: owned by jobs.c
  void (*run)(job_t* j);     // Thread: environment thread
  void (*done)(job_t* j, int cancelled);  // Thread: loop; frees the job. cancelled: run never ran
};

// Start the environment thread. Returns NULL on failure.
jobs_t* jobs_create(struct uv_loop_s* loop);

// Queue a job. Thread: loop.
void jobs_submit(jobs_t* q, job_t* j);

// Jobs queued or running.
unsigned jobs_pending(const jobs_t* q);

// Stop: the running job finishes, queued jobs are cancelled (done with cancelled = 1), the
// thread is joined and the async handle closed. Thread: loop. Blocks for the running job.
void jobs_stop(jobs_t* q);

// Free after the loop has closed the handle.
void jobs_destroy(jobs_t* q);

#endif  // SENSIM_NET_JOBS_H_
