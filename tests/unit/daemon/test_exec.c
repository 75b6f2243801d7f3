// SPDX-License-Identifier: MIT
// test_exec.c: the executors: FIFO order within a queue, queues in parallel, which thread runs
// and completes a job, the bound on executor threads, cancellation on stop, and that every
// job and handle is released.
#include "daemon/exec.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/types.h>
#include <unistd.h>
#include <uv.h>

#include "base/mem.h"
#include "check.h"

#define NJOBS 1000
#define NQUEUE 8

// libuv allocates through mem_* as in the daemon, so that mem_live_count covers its memory.
__attribute__((constructor)) static void use_mem_allocator(void) {
  uv_replace_allocator(mem_alloc, mem_realloc, mem_calloc, mem_free);
}

typedef struct fixture fixture_t;

typedef struct test_job {
  exec_job_t base;
  fixture_t* f;
  int seq;                       // submission order, from 0
  int queue;                     // index in fixture.queues
  int ran;                       // set by run (an executor)
  int block;                     // run signals `started` then waits for `go`
} test_job_t;

struct fixture {
  uv_loop_t loop;
  exec_t* q;
  exec_queue_t queues[NQUEUE];
  uv_thread_t loop_thread;
  pid_t loop_tid;
  uv_sem_t started;
  uv_sem_t go;
  uv_sem_t stopping;             // the loop thread is about to call exec_stop

  // written by run (one executor at a time per queue); read on the loop thread after done
  atomic_int run_count;
  int queue_runs[NQUEUE];        // jobs run so far, per queue
  int run_order[NQUEUE][NJOBS];  // seq of the nth job run on each queue
  atomic_int running[NQUEUE];    // jobs of the queue running now
  atomic_int run_overlap;        // two jobs of one queue ran at once
  atomic_int run_wrong_thread;   // run was called on the loop thread

  // written by done (loop thread)
  int done_count;
  int done_seq[2 * NJOBS];       // seq of the nth job done
  int done_cancelled[2 * NJOBS];
  int done_ran[2 * NJOBS];
  int done_wrong_thread;
  int ndone_per_job[NJOBS + 1];

  int submitted;
  int next_queue;                // queue of the next job submitted (round-robin over nqueue)
  int nqueue;                    // queues in use, 1 unless a test sets more
  int brief;                     // submit jobs marked brief
  int stop_after_done;           // done of this seq calls exec_stop (-1: never)
  int submit_more_after_done;    // done of this seq submits the rest (-1: never)
  int total;                     // jobs to submit in all
};


static void job_run(exec_job_t* j) {
  test_job_t* t = (test_job_t*)j;
  fixture_t* f = t->f;
  uv_thread_t self = uv_thread_self();
  if (uv_thread_equal(&self, &f->loop_thread)) {
    atomic_store(&f->run_wrong_thread, 1);
  }
  if (atomic_fetch_add(&f->running[t->queue], 1) != 0) {
    atomic_store(&f->run_overlap, 1);
  }
  if (t->block) {
    uv_sem_post(&f->started);
    uv_sem_wait(&f->go);
  }
  t->ran = 1;
  f->run_order[t->queue][f->queue_runs[t->queue]++] = t->seq;
  atomic_fetch_add(&f->run_count, 1);
  atomic_fetch_sub(&f->running[t->queue], 1);
}


static void submit_one(fixture_t* f, int block);


static void job_done(exec_job_t* j, int cancelled) {
  test_job_t* t = (test_job_t*)j;
  fixture_t* f = t->f;
  uv_thread_t self = uv_thread_self();
  if (!uv_thread_equal(&self, &f->loop_thread)) {
    f->done_wrong_thread = 1;
  }
  int seq = t->seq;
  f->done_seq[f->done_count] = seq;
  f->done_cancelled[f->done_count] = cancelled;
  f->done_ran[f->done_count] = t->ran;
  f->done_count++;
  f->ndone_per_job[seq]++;
  mem_free(t);

  if (seq == f->submit_more_after_done) {
    while (f->submitted < f->total) {
      submit_one(f, 0);
    }
  }
  if (seq == f->stop_after_done) {
    uv_sem_post(&f->go);         // release a blocked job, if any, so that stop can join
    exec_stop(f->q);
  }
}


static void submit_one(fixture_t* f, int block) {
  test_job_t* t = mem_calloc(1, sizeof(*t));
  t->f = f;
  t->seq = f->submitted++;
  t->queue = f->next_queue;
  f->next_queue = (f->next_queue + 1) % f->nqueue;
  t->block = block;
  t->base.run = job_run;
  t->base.done = job_done;
  t->base.brief = f->brief;
  exec_submit(f->q, &f->queues[t->queue], &t->base);
}


static int fixture_init(fixture_t* f, int total, unsigned max_threads) {
  memset(f, 0, sizeof(*f));
  f->loop_thread = uv_thread_self();
  f->loop_tid = gettid();
  f->stop_after_done = -1;
  f->submit_more_after_done = -1;
  f->total = total;
  f->nqueue = 1;
  for (int i = 0; i < NQUEUE; i++) {
    exec_queue_init(&f->queues[i]);
  }
  ASSERT_OK(uv_sem_init(&f->started, 0));
  ASSERT_OK(uv_sem_init(&f->go, 0));
  ASSERT_OK(uv_sem_init(&f->stopping, 0));
  ASSERT_OK(uv_loop_init(&f->loop));
  f->q = exec_create(&f->loop, max_threads);
  ASSERT_TRUE(f->q != NULL);
  return 0;
}


// Runs the loop to completion and releases everything; the loop must close cleanly.
static int fixture_finish(fixture_t* f) {
  ASSERT_OK(uv_run(&f->loop, UV_RUN_DEFAULT));
  ASSERT_OK(uv_loop_close(&f->loop));
  exec_destroy(f->q);
  uv_sem_destroy(&f->started);
  uv_sem_destroy(&f->go);
  uv_sem_destroy(&f->stopping);
  return 0;
}


// Every job done exactly once, on the loop thread; run off the loop thread, one job of a
// queue at a time.
static int check_threads_and_counts(fixture_t* f) {
  ASSERT_EQ(f->done_wrong_thread, 0);
  ASSERT_EQ(atomic_load(&f->run_wrong_thread), 0);
  ASSERT_EQ(atomic_load(&f->run_overlap), 0);
  ASSERT_EQ(f->done_count, f->total);
  for (int i = 0; i < f->total; i++) {
    if (f->ndone_per_job[i] != 1) {
      CHECK_FAIL("job %d done %d times", i, f->ndone_per_job[i]);
    }
  }
  return 0;
}


// fixture_finish, then check_threads_and_counts.
static int finish_and_check(fixture_t* f) {
  if (fixture_finish(f)) {
    return 1;
  }
  return check_threads_and_counts(f);
}


TEST(exec_fifo_thousand_jobs_done_on_loop_thread) {
  int64_t base = mem_live_count();
  static fixture_t f;
  if (fixture_init(&f, NJOBS, 4)) {
    return 1;
  }

  // half before the loop runs, the rest from a done callback while jobs are in flight
  for (int i = 0; i < NJOBS / 2; i++) {
    submit_one(&f, 0);
  }
  ASSERT_EQ(exec_pending(f.q), NJOBS / 2);
  f.submit_more_after_done = 10;
  f.stop_after_done = NJOBS - 1;
  if (fixture_finish(&f)) {
    return 1;
  }

  if (check_threads_and_counts(&f)) {
    return 1;
  }
  ASSERT_EQ(atomic_load(&f.run_count), NJOBS);
  for (int i = 0; i < NJOBS; i++) {
    ASSERT_EQ(f.run_order[0][i], i);
    ASSERT_EQ(f.done_seq[i], i);
    ASSERT_EQ(f.done_cancelled[i], 0);
    ASSERT_EQ(f.done_ran[i], 1);
  }
  ASSERT_EQ(mem_live_count(), base);
  return 0;
}


// Scheduler state of a thread of this process ('R', 'S', ...); '?' when unknown.
static char thread_state(pid_t tid) {
  char path[64], line[512];
  snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
  FILE* fp = fopen(path, "r");
  if (!fp) {
    return '?';
  }
  size_t n = fread(line, 1, sizeof(line) - 1, fp);
  fclose(fp);
  line[n] = 0;
  const char* p = strrchr(line, ')');   // "tid (comm) S ..."
  return p && p[1] == ' ' ? p[2] : '?';
}


// Helper thread: releases the running job once the loop thread sleeps inside exec_stop, i.e.
// after the stop flag is set (the loop thread does not block anywhere else on the way there:
// the mutex is free while the job runs), so that no queued job can start.
static void release_when_stopping(void* arg) {
  fixture_t* f = arg;
  uv_sem_wait(&f->stopping);
  while (thread_state(f->loop_tid) != 'S') {
    sched_yield();
  }
  uv_sem_post(&f->go);
}


// exec_stop while a job runs and many are queued: the running job completes normally, the
// queued ones are cancelled without running, each exactly once, in submission order.
TEST(exec_stop_cancels_queued_jobs) {
  int64_t base = mem_live_count();
  static fixture_t f;
  if (fixture_init(&f, NJOBS, 4)) {
    return 1;
  }
  submit_one(&f, 1);
  for (int i = 1; i < NJOBS; i++) {
    submit_one(&f, 0);
  }
  ASSERT_EQ(exec_pending(f.q), NJOBS);
  uv_thread_t helper;
  ASSERT_OK(uv_thread_create(&helper, release_when_stopping, &f));
  uv_sem_wait(&f.started);       // job 0 is running; the rest are queued behind it
  uv_sem_post(&f.stopping);
  exec_stop(f.q);
  ASSERT_OK(uv_thread_join(&helper));
  ASSERT_EQ(exec_pending(f.q), 0);
  ASSERT_EQ(f.done_count, NJOBS);

  // submitting after stop cancels at once
  f.total++;
  submit_one(&f, 0);
  ASSERT_EQ(f.done_count, NJOBS + 1);
  ASSERT_EQ(exec_pending(f.q), 0);
  if (fixture_finish(&f)) {
    return 1;
  }

  if (check_threads_and_counts(&f)) {
    return 1;
  }
  ASSERT_EQ(atomic_load(&f.run_count), 1);  // only the job that was running
  for (int i = 0; i < f.total; i++) {
    ASSERT_EQ(f.done_seq[i], i);
    ASSERT_EQ(f.done_cancelled[i], i > 0);
    ASSERT_EQ(f.done_ran[i], i == 0);
  }
  ASSERT_EQ(mem_live_count(), base);
  return 0;
}


// exec_stop from inside a done callback while more finished jobs wait for their done: the
// completions keep submission order across the nested drain.
TEST(exec_stop_from_done_keeps_order) {
  int64_t base = mem_live_count();
  static fixture_t f;
  const int n = 10;
  if (fixture_init(&f, n, 4)) {
    return 1;
  }
  for (int i = 0; i < 3; i++) {
    submit_one(&f, 0);
  }
  submit_one(&f, 1);             // seq 3 blocks until done(0) releases it
  for (int i = 4; i < n; i++) {
    submit_one(&f, 0);
  }
  uv_sem_wait(&f.started);       // jobs 0..2 have finished: one async wake-up delivers all
  f.stop_after_done = 0;
  if (fixture_finish(&f)) {
    return 1;
  }

  if (check_threads_and_counts(&f)) {
    return 1;
  }
  // jobs 0..3 ran (3 was running at stop); later ones may have started before the flag was
  // set. Either way the completions are in submission order: finished ones first, then the
  // cancelled ones.
  int nran = atomic_load(&f.run_count);
  ASSERT_TRUE(nran >= 4);
  for (int i = 0; i < n; i++) {
    ASSERT_EQ(f.done_seq[i], i);
    ASSERT_EQ(f.done_cancelled[i], i >= nran);
    ASSERT_EQ(f.done_ran[i], i < nran);
  }
  ASSERT_EQ(mem_live_count(), base);
  return 0;
}


TEST(exec_stop_idle_closes_cleanly) {
  int64_t base = mem_live_count();
  static fixture_t f;
  if (fixture_init(&f, 0, 4)) {
    return 1;
  }
  ASSERT_EQ(exec_pending(f.q), 0);
  exec_stop(f.q);
  exec_stop(f.q);                // idempotent
  if (fixture_finish(&f)) {
    return 1;
  }
  ASSERT_EQ(f.done_count, 0);
  ASSERT_EQ(mem_live_count(), base);
  return 0;
}


// Jobs spread over several queues, submitted interleaved: each queue runs its jobs in
// submission order, one at a time, and completes them in that order.
TEST(exec_queues_keep_their_order) {
  int64_t base = mem_live_count();
  static fixture_t f;
  if (fixture_init(&f, NJOBS, 4)) {
    return 1;
  }
  f.nqueue = NQUEUE;
  for (int i = 0; i < NJOBS; i++) {
    submit_one(&f, 0);
  }
  f.stop_after_done = -1;
  while (f.done_count < NJOBS) {
    uv_run(&f.loop, UV_RUN_ONCE);
  }
  ASSERT_TRUE(exec_threads(f.q) >= 1 && exec_threads(f.q) <= 4);
  exec_stop(f.q);
  if (finish_and_check(&f)) {
    return 1;
  }

  // job seq went to queue seq % NQUEUE
  int last_done[NQUEUE];
  for (int k = 0; k < NQUEUE; k++) {
    ASSERT_EQ(f.queue_runs[k], NJOBS / NQUEUE);
    for (int i = 0; i < NJOBS / NQUEUE; i++) {
      ASSERT_EQ(f.run_order[k][i], i * NQUEUE + k);
    }
    last_done[k] = -1;
  }
  for (int i = 0; i < NJOBS; i++) {
    int seq = f.done_seq[i];
    ASSERT_TRUE(seq > last_done[seq % NQUEUE]);
    last_done[seq % NQUEUE] = seq;
    ASSERT_EQ(f.done_cancelled[i], 0);
  }
  ASSERT_EQ(mem_live_count(), base);
  return 0;
}


// A job that blocks one queue does not hold up another: the blocked job is released only by
// the done of a job of a second queue, submitted after it (a single thread would deadlock and
// the test would time out).
TEST(exec_queues_run_in_parallel) {
  int64_t base = mem_live_count();
  static fixture_t f;
  if (fixture_init(&f, 3, 4)) {
    return 1;
  }
  f.nqueue = 2;
  submit_one(&f, 1);             // seq 0, queue 0: blocks until go
  ASSERT_EQ(exec_threads(f.q), 2);  // the first executor and a spare
  uv_sem_wait(&f.started);
  submit_one(&f, 0);             // seq 1, queue 1: on the spare; another spare starts
  submit_one(&f, 0);             // seq 2, queue 0: behind the blocked job
  while (f.done_count < 1) {
    uv_run(&f.loop, UV_RUN_ONCE);
  }
  ASSERT_EQ(f.done_seq[0], 1);
  ASSERT_EQ(exec_pending(f.q), 2);
  uv_sem_post(&f.go);
  while (f.done_count < 3) {
    uv_run(&f.loop, UV_RUN_ONCE);
  }
  ASSERT_EQ(f.done_seq[1], 0);
  ASSERT_EQ(f.done_seq[2], 2);
  ASSERT_EQ(exec_threads(f.q), 3);
  exec_stop(f.q);
  if (finish_and_check(&f)) {
    return 1;
  }
  ASSERT_EQ(mem_live_count(), base);
  return 0;
}


// No more executors than max_threads, however many queues are busy: with one executor
// blocked, the other queues wait; releasing it lets them all run.
TEST(exec_threads_are_bounded) {
  int64_t base = mem_live_count();
  static fixture_t f;
  if (fixture_init(&f, NQUEUE * 4, 2)) {
    return 1;
  }
  f.nqueue = NQUEUE;
  submit_one(&f, 1);             // queue 0 blocks one executor
  uv_sem_wait(&f.started);
  for (int i = 1; i < NQUEUE * 4; i++) {
    submit_one(&f, 0);
  }
  ASSERT_EQ(exec_threads(f.q), 2);

  // every job but those of queue 0 completes on the second executor
  while (f.done_count < NQUEUE * 4 - 4) {
    uv_run(&f.loop, UV_RUN_ONCE);
  }
  ASSERT_EQ(f.queue_runs[0], 0);
  uv_sem_post(&f.go);
  while (f.done_count < NQUEUE * 4) {
    uv_run(&f.loop, UV_RUN_ONCE);
  }
  ASSERT_EQ(exec_threads(f.q), 2);
  exec_stop(f.q);
  if (finish_and_check(&f)) {
    return 1;
  }
  ASSERT_EQ(mem_live_count(), base);
  return 0;
}


// Stop with jobs queued on several queues, one running: each queue's jobs are cancelled in
// its order, each exactly once, and a done that frees its queue's owner is safe.
TEST(exec_stop_cancels_every_queue) {
  int64_t base = mem_live_count();
  static fixture_t f;
  if (fixture_init(&f, 40, 4)) {
    return 1;
  }
  f.nqueue = 4;
  submit_one(&f, 1);
  for (int i = 1; i < 40; i++) {
    submit_one(&f, 0);
  }
  uv_sem_wait(&f.started);
  uv_sem_post(&f.go);
  exec_stop(f.q);
  ASSERT_EQ(exec_pending(f.q), 0);
  if (finish_and_check(&f)) {
    return 1;
  }

  // per queue: the ones that ran, then the cancelled ones, in submission order
  int last_done[4] = {-1, -1, -1, -1};
  int seen_cancel[4] = {0, 0, 0, 0};
  for (int i = 0; i < 40; i++) {
    int seq = f.done_seq[i], k = seq % 4;
    ASSERT_TRUE(seq > last_done[k]);
    last_done[k] = seq;
    ASSERT_EQ(f.done_cancelled[i], !f.done_ran[i]);
    if (f.done_cancelled[i]) {
      seen_cancel[k] = 1;
    } else {
      ASSERT_EQ(seen_cancel[k], 0);
    }
  }
  ASSERT_EQ(mem_live_count(), base);
  return 0;
}


// Brief jobs (GetInfo reads every environment with one) start no executor, however many
// queues they make runnable; the next ordinary job does, and every job still runs.
TEST(exec_brief_jobs_start_no_executor) {
  int64_t base = mem_live_count();
  static fixture_t f;
  if (fixture_init(&f, NQUEUE + 1, NQUEUE)) {
    return 1;
  }
  f.nqueue = NQUEUE;
  f.brief = 1;
  for (int i = 0; i < NQUEUE; i++) {
    submit_one(&f, 0);
  }
  ASSERT_EQ(exec_threads(f.q), 1);
  f.brief = 0;
  submit_one(&f, 0);             // queue 0, behind a brief job
  ASSERT_TRUE(exec_threads(f.q) >= 2);
  while (f.done_count < NQUEUE + 1) {
    uv_run(&f.loop, UV_RUN_ONCE);
  }
  exec_stop(f.q);
  if (finish_and_check(&f)) {
    return 1;
  }
  ASSERT_EQ(mem_live_count(), base);
  return 0;
}


// exec_run_inline: a short candidate runs on the calling thread only once the queue's recent
// candidates have shown to be short, never while anything is in flight, and a job that is not
// a candidate (a change to the environment) sends the next candidates to the executors again.
typedef struct inline_job {
  exec_job_t base;
  uv_thread_t* loop_thread;
  int ran_on_loop;
  int done;
} inline_job_t;

static void inline_run(exec_job_t* j) {
  inline_job_t* t = (inline_job_t*)j;
  uv_thread_t self = uv_thread_self();
  t->ran_on_loop = uv_thread_equal(&self, t->loop_thread);
}

static void inline_done(exec_job_t* j, int cancelled) {
  inline_job_t* t = (inline_job_t*)j;
  t->done = cancelled ? -1 : 1;
}

TEST(exec_run_inline_after_short_candidates) {
  uv_loop_t loop;
  ASSERT_OK(uv_loop_init(&loop));
  exec_t* x = exec_create(&loop, 2);
  ASSERT_TRUE(x != NULL);
  exec_queue_t q;
  exec_queue_init(&q);
  uv_thread_t me = uv_thread_self();
  inline_job_t j = {.base = {.run = inline_run, .done = inline_done, .inline_candidate = 1,
                             .span = 0.01},
                    .loop_thread = &me};
  // a new queue: not inline (its first candidates go to the executors)
  ASSERT_EQ(exec_run_inline(x, &q, &j.base), 0);
  ASSERT_EQ(j.done, 0);
  // candidates through the executors: 1 ms halves each time under 50 us within 6 jobs
  for (int k = 0; k < 6; k++) {
    j.done = 0;
    exec_submit(x, &q, &j.base);
    while (!j.done) {
      uv_run(&loop, UV_RUN_ONCE);
    }
    ASSERT_EQ(j.ran_on_loop, 0);
  }
  // a step over a much longer interval (more simulated work) is not inline; one up to twice
  // the longest short one is
  j.base.span = 0.05;
  ASSERT_EQ(exec_run_inline(x, &q, &j.base), 0);
  j.base.span = 0.02;
  ASSERT_EQ(exec_run_inline(x, &q, &j.base), 1);
  ASSERT_EQ(j.done, 1);
  ASSERT_EQ(j.ran_on_loop, 1);
  // not a candidate: never inline, and it resets the queue's estimate
  inline_job_t other = {.base = {.run = inline_run, .done = inline_done},
                        .loop_thread = &me};
  ASSERT_EQ(exec_run_inline(x, &q, &other.base), 0);
  exec_submit(x, &q, &other.base);
  // while a job is in flight nothing runs inline
  j.done = 0;
  ASSERT_EQ(exec_run_inline(x, &q, &j.base), 0);
  while (!other.done) {
    uv_run(&loop, UV_RUN_ONCE);
  }
  ASSERT_EQ(exec_run_inline(x, &q, &j.base), 0);
  ASSERT_EQ(j.done, 0);
  exec_stop(x);
  ASSERT_OK(uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_OK(uv_loop_close(&loop));
  exec_destroy(x);
  return 0;
}
