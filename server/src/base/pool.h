// SPDX-License-Identifier: MIT
// pool.h: the fixed pool of worker threads that runs data-parallel work (ray batches). One
// coordinating thread at a time calls pool_parallel_for and takes part in the work itself; the
// call returns when every index has run. Results are written by index, so the outcome does
// not depend on the number of threads.
#ifndef SENSIM_BASE_POOL_H_
#define SENSIM_BASE_POOL_H_

#include <stddef.h>

typedef struct pool pool_t;

// fn(ctx, begin, end) processes indices [begin, end). Thread: a worker or the caller.
typedef void (*pool_fn_t)(void* ctx, size_t begin, size_t end);

// Create a pool with nthreads - 1 workers (the caller is the nth). nthreads >= 1.
pool_t* pool_create(unsigned nthreads);
void pool_destroy(pool_t* p);

unsigned pool_threads(const pool_t* p);

// Run fn over [0, n) in chunks of `grain` indices (0 = automatic). p nullable: runs serially.
// Thread: one caller at a time.
void pool_parallel_for(pool_t* p, size_t n, size_t grain, pool_fn_t fn, void* ctx);

#endif  // SENSIM_BASE_POOL_H_
