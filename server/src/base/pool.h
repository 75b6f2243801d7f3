// SPDX-License-Identifier: MIT
// pool.h: the fixed pool of worker threads that runs data-parallel work (ray batches, sensors)
// for every environment at once. Any number of threads may call pool_parallel_for at the same
// time; each call is split into chunks, the caller runs its own chunks, and the workers serve
// the calls in flight in turn, one chunk at a time, so a small call is never queued behind a
// large one. Results are written by index, so the outcome does not depend on the number of
// threads or on what else runs.
#ifndef SENSIM_BASE_POOL_H_
#define SENSIM_BASE_POOL_H_

#include <stddef.h>

typedef struct pool pool_t;

// The name of every worker thread (/proc/PID/task/TID/comm).
#define POOL_THREAD_NAME "sensim-pool"

// fn(ctx, begin, end) processes indices [begin, end). Thread: a worker or the caller.
typedef void (*pool_fn_t)(void* ctx, size_t begin, size_t end);

// Create a pool with nthreads - 1 workers (each caller is the nth). nthreads >= 1 (0 counts as
// 1). Returns NULL on failure.
pool_t* pool_create(unsigned nthreads);

// Join the workers and free the pool. No call may be in flight. Nullable: p.
void pool_destroy(pool_t* p);

// Workers + 1; 1 for NULL.
unsigned pool_threads(const pool_t* p);

// Run fn over [0, n) in chunks of `grain` indices (0 = automatic: about 8 chunks per thread);
// returns when every index has run. The chunks depend on n, grain and pool_threads only.
// Nullable: p (runs serially on the caller).
// Thread: any, concurrently with other calls, including from inside fn (nested calls).
void pool_parallel_for(pool_t* p, size_t n, size_t grain, pool_fn_t fn, void* ctx);

#endif  // SENSIM_BASE_POOL_H_
