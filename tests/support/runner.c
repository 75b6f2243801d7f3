// SPDX-License-Identifier: MIT
// runner.c: runs every registered TEST in a forked child with a time limit and prints TAP.
// Usage: test_x [name-substring]. Environment: CHECK_TIMEOUT (seconds, default 60),
// CHECK_NOFORK=1 to run in-process (for debuggers).
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

#define CHECK_MAX_TESTS 512

static struct {
  const char* name;
  check_fn_t fn;
} g_tests[CHECK_MAX_TESTS];
static int g_ntests;


void check_register(const char* name, check_fn_t fn) {
  if (g_ntests == CHECK_MAX_TESTS) {
    fprintf(stderr, "too many tests\n");
    abort();
  }
  g_tests[g_ntests].name = name;
  g_tests[g_ntests].fn = fn;
  g_ntests++;
}


static int run_one(int i, int timeout_s, int nofork) {
  if (nofork) {
    return g_tests[i].fn();
  }
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    perror("fork");
    return 1;
  }
  if (pid == 0) {
    // a process group of its own: what it starts (a daemon, a helper) is ended with it below
    setpgid(0, 0);
    alarm((unsigned)timeout_s);
    // exit(), not _exit(): atexit handlers run, so LeakSanitizer checks every test
    exit(g_tests[i].fn() ? 1 : 0);
  }
  setpgid(pid, pid);  // as the child does: whichever runs first
  // Ended but not yet reaped (its id cannot be reused): end its group. A test killed by its
  // time limit runs no atexit handler, and a daemon it started would otherwise live on, holding
  // the test's output open (ctest then waits for it to its own timeout).
  siginfo_t info;
  while (waitid(P_PID, (id_t)pid, &info, WEXITED | WNOWAIT) < 0) {
  }
  kill(-pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
  }
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    fprintf(stderr, "# killed by signal %d%s\n", sig, sig == SIGALRM ? " (timeout)" : "");
    return 1;
  }
  return WEXITSTATUS(status) != 0;
}


int main(int argc, char** argv) {
  const char* filter = argc > 1 ? argv[1] : NULL;
  const char* t = getenv("CHECK_TIMEOUT");
  int timeout_s = t ? atoi(t) : 60;
  int nofork = getenv("CHECK_NOFORK") != NULL;
  int selected = 0;
  for (int i = 0; i < g_ntests; i++) {
    selected += !filter || strstr(g_tests[i].name, filter) != NULL;
  }
  printf("1..%d\n", selected);
  int n = 0, failed = 0;
  for (int i = 0; i < g_ntests; i++) {
    if (filter && !strstr(g_tests[i].name, filter)) {
      continue;
    }
    n++;
    int bad = run_one(i, timeout_s, nofork);
    failed += bad;
    printf("%s %d - %s\n", bad ? "not ok" : "ok", n, g_tests[i].name);
    fflush(stdout);
  }
  printf("# %d passed, %d failed\n", n - failed, failed);
  return failed ? 1 : 0;
}
