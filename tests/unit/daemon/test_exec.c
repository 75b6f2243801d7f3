// SPDX-License-Identifier: MIT
// test_jobs.c: the environment thread: FIFO order, which thread runs and completes a job,
// cancellation on stop, and that every job and handle is released.
#include "daemon/exec.h"

#include <sched.h>
#include <stdio.h>
#include <sys/types.h>
#include <unistd.h>
#include <uv.h>

#include "base/mem.h"
#include "check.h"

#define NJOBS 1000

// libuv allocates through mem_* as in the daemon, so that mem_live_count covers its memory.
__attribute__((constructor)) static void use_mem_allocator(void) {
  uv_replace_allocator(mem_alloc, mem_realloc, mem_calloc, mem_free);
}

typedef struct fixture fixture_t;

typedef struct test_job {
  exec_job_t base;
  fixture_t* f;
  int seq;                       // submission order, from 0
  int ran;                       // set by run (environment thread)
  int block;                     // run signals `started` then waits for `go`
} test_job_t;

struct fixture {
  uv_loop_t loop;
  exec_t* q;
  uv_thread_t loop_thread;
  pid_t loop_tid;
  uv_sem_t started;
  uv_sem_t go;
  uv_sem_t stopping;             // the loop thread is about to call exec_stop

  // written by run (environment thread only); read on the loop thread after done
  int run_count;
  int run_order[NJOBS];          // seq of the nth job run
  int run_wrong_thread;          // run was called on the loop thread
  int run_other_env_thread;      // run was called on more than one thread
  uv_thread_t env_thread;

  // written by done (loop thread)
  int done_count;
  int done_seq[2 * NJOBS];       // seq of the nth job done
  int done_cancelled[2 * NJOBS];
  int done_ran[2 * NJOBS];
  int done_wrong_thread;
  int ndone_per_job[NJOBS + 1];

  int submitted;
  int stop_after_done;           // done of this seq calls exec_stop (-1: never)
  int submit_more_after_done;    // done of this seq submits the rest (-1: never)
  int total;                     // jobs to submit in all
};


static void job_run(exec_job_t* j) {
  test_job_t* t = (test_job_t*)j;
  fixture_t* f = t->f;
  uv_thread_t self = uv_thread_self();
  if (uv_thread_equal(&self, &f->loop_thread)) {
    f->run_wrong_thread = 1;
  }
  if (f->run_count == 0) {
    f->env_thread = self;
  } else if (!uv_thread_equal(&self, &f->env_thread)) {
    f->run_other_env_thread = 1;
  }
  if (t->block) {
    uv_sem_post(&f->started);
    uv_sem_wait(&f->go);
  }
  t->ran = 1;
  f->run_order[f->run_count++] = t->seq;
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
  t->block = block;
  t->base.run = job_run;
  t->base.done = job_done;
  exec_submit(f->q, &t->base);
}


static int fixture_init(fixture_t* f, int total) {
  memset(f, 0, sizeof(*f));
  f->loop_thread = uv_thread_self();
  f->loop_tid = gettid();
  f->stop_after_done = -1;
  f->submit_more_after_done = -1;
  f->total = total;
  ASSERT_OK(uv_sem_init(&f->started, 0));
  ASSERT_OK(uv_sem_init(&f->go, 0));
  ASSERT_OK(uv_sem_init(&f->stopping, 0));
  ASSERT_OK(uv_loop_init(&f->loop));
  f->q = exec_create(&f->loop);
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


// Every job done exactly once, on the loop thread; run only on the one environment thread.
static int check_threads_and_counts(const fixture_t* f) {
  ASSERT_EQ(f->done_wrong_thread, 0);
  ASSERT_EQ(f->run_wrong_thread, 0);
  ASSERT_EQ(f->run_other_env_thread, 0);
  ASSERT_EQ(f->done_count, f->total);
  for (int i = 0; i < f->total; i++) {
    if (f->ndone_per_job[i] != 1) {
      CHECK_FAIL("job %d done %d times", i, f->ndone_per_job[i]);
    }
  }
  return 0;
}


TEST(jobs_fifo_thousand_jobs_done_on_loop_thread) {
  int64_t base = mem_live_count();
  static fixture_t f;
  if (fixture_init(&f, NJOBS)) {
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
  ASSERT_EQ(f.run_count, NJOBS);
  for (int i = 0; i < NJOBS; i++) {
    ASSERT_EQ(f.run_order[i], i);
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
TEST(jobs_stop_cancels_queued_jobs) {
  int64_t base = mem_live_count();
  static fixture_t f;
  if (fixture_init(&f, NJOBS)) {
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
  ASSERT_EQ(f.run_count, 1);     // only the job that was running
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
TEST(jobs_stop_from_done_keeps_order) {
  int64_t base = mem_live_count();
  static fixture_t f;
  const int n = 10;
  if (fixture_init(&f, n)) {
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
  int nran = f.run_count;
  ASSERT_TRUE(nran >= 4);
  for (int i = 0; i < n; i++) {
    ASSERT_EQ(f.done_seq[i], i);
    ASSERT_EQ(f.done_cancelled[i], i >= nran);
    ASSERT_EQ(f.done_ran[i], i < nran);
  }
  ASSERT_EQ(mem_live_count(), base);
  return 0;
}


TEST(jobs_stop_idle_closes_cleanly) {
  int64_t base = mem_live_count();
  static fixture_t f;
  if (fixture_init(&f, 0)) {
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
