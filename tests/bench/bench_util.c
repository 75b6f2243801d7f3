// SPDX-License-Identifier: MIT
// bench_util.c: clock, percentiles, number formatting, errors, options, a sensimd child and
// loopback sockets, and terrain for the benchmark programs.
#include "bench_util.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>


double bench_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}


static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}


double bench_percentile(double* v, size_t n, double p) {
  if (n == 0) {
    return NAN;
  }
  qsort(v, n, sizeof *v, cmp_double);
  double rank = ceil(p / 100.0 * (double)n);
  size_t k = rank < 1.0 ? 0 : (size_t)rank - 1;
  return v[k < n ? k : n - 1];
}


double bench_median(double* v, size_t n) {
  if (n == 0) {
    return NAN;
  }
  qsort(v, n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}


double bench_median_ratio(const double* a, const double* b, size_t n) {
  double* r = bench_xmalloc(sizeof(double) * n);
  for (size_t i = 0; i < n; i++) {
    r[i] = a[i] / b[i];
  }
  double m = bench_median(r, n);
  free(r);
  return m;
}


const char* bench_count(uint64_t u, char dest[32]) {
  char digits[24];
  int n = snprintf(digits, sizeof digits, "%llu", (unsigned long long)u);
  int out = 0;
  for (int i = 0; i < n; i++) {
    if (i > 0 && (n - i) % 3 == 0) {
      dest[out++] = ',';
    }
    dest[out++] = digits[i];
  }
  dest[out] = '\0';
  return dest;
}

//---------------- Errors

static const char* g_prog = "bench";
static void (*g_on_die)(void);


void bench_init(const char* prog, void (*on_die)(void)) {
  g_prog = prog;
  g_on_die = on_die;
}


void bench_die(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s: ", g_prog);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  if (g_on_die) {
    g_on_die();
  }
  exit(1);
}


void* bench_xmalloc(size_t n) {
  void* p = malloc(n ? n : 1);
  if (!p) {
    bench_die("out of memory (%zu bytes)", n);
  }
  return p;
}

//---------------- Options

#define BENCH_MAX_OPTS 32


bool bench_has_arg(int argc, char** argv, const char* arg) {
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], arg) == 0) {
      return true;
    }
  }
  return false;
}


static void set_option(const bench_opt_t* o, const char* arg) {
  switch (o->kind) {
    case BENCH_OPT_FLAG:
      if (o->dst) {
        *(int*)o->dst = 1;
      }
      break;
    case BENCH_OPT_COUNT: {
      char* end = NULL;
      unsigned long v = strtoul(arg, &end, 10);
      if (!end || *end || arg[0] == '-' || v < o->lo || v > o->hi) {
        fprintf(stderr, "%s: --%s '%s' must be an integer in [%u, %u]\n", g_prog, o->name, arg,
                o->lo, o->hi);
        exit(2);
      }
      *(unsigned*)o->dst = (unsigned)v;
      break;
    }
    case BENCH_OPT_POSITIVE: {
      char* end = NULL;
      double v = strtod(arg, &end);
      if (!end || *end || !(v > 0.0) || !isfinite(v)) {
        fprintf(stderr, "%s: --%s '%s' must be a positive number\n", g_prog, o->name, arg);
        exit(2);
      }
      *(double*)o->dst = v;
      break;
    }
    case BENCH_OPT_STRING:
      *(const char**)o->dst = arg;
      break;
  }
}


int bench_parse_options(int argc, char** argv, const bench_opt_t* opts, size_t n,
                        const char* usage) {
  if (n >= BENCH_MAX_OPTS) {
    fprintf(stderr, "%s: too many options\n", g_prog);
    abort();
  }
  struct option lopts[BENCH_MAX_OPTS + 1];
  for (size_t i = 0; i < n; i++) {
    lopts[i] = (struct option){opts[i].name,
                               opts[i].kind == BENCH_OPT_FLAG ? no_argument : required_argument,
                               NULL, 1 + (int)i};
  }
  const int help = 1 + (int)n;
  lopts[n] = (struct option){"help", no_argument, NULL, help};
  lopts[n + 1] = (struct option){NULL, 0, NULL, 0};
  int c;
  while ((c = getopt_long(argc, argv, "", lopts, NULL)) != -1) {
    if (c == help) {
      fputs(usage, stdout);
      exit(0);
    }
    if (c < 1 || c > (int)n) {
      fputs(usage, stderr);
      exit(2);
    }
    set_option(&opts[c - 1], optarg);
  }
  return optind;
}

//---------------- sensimd and loopback sockets

static pid_t g_daemon = -1;


void bench_daemon_kill(void) {
  if (g_daemon > 0) {
    kill(g_daemon, SIGKILL);
  }
}


void bench_daemon_start(bench_daemon_t* d, const char* exe, const char* const* extra,
                        int timeout_ms) {
  const char* argv[16] = {exe, "--listen", "127.0.0.1:0", "--log-level", "warn"};
  size_t na = 5;
  for (size_t i = 0; extra && extra[i]; i++) {
    if (na == sizeof argv / sizeof *argv - 1) {
      bench_die("too many arguments for %s", exe);
    }
    argv[na++] = extra[i];
  }
  argv[na] = NULL;
  int p[2];
  if (pipe(p) != 0) {
    bench_die("pipe: %s", strerror(errno));
  }
  pid_t pid = fork();
  if (pid < 0) {
    bench_die("fork: %s", strerror(errno));
  }
  if (pid == 0) {
    dup2(p[1], STDOUT_FILENO);
    close(p[0]);
    close(p[1]);
    execv(exe, (char* const*)argv);
    fprintf(stderr, "%s: cannot run %s: %s\n", g_prog, exe, strerror(errno));
    _exit(127);
  }
  close(p[1]);
  d->pid = pid;
  g_daemon = pid;
  d->out = p[0];

  // "sensimd listening on 127.0.0.1:PORT"
  char line[256];
  size_t n = 0;
  for (;;) {
    struct pollfd pf = {.fd = d->out, .events = POLLIN};
    if (poll(&pf, 1, timeout_ms) <= 0) {
      bench_die("%s printed no 'listening' line in time", exe);
    }
    ssize_t k = read(d->out, line + n, sizeof line - 1 - n);
    if (k <= 0) {
      bench_die("%s exited before listening (see its stderr above)", exe);
    }
    n += (size_t)k;
    line[n] = '\0';
    char* nl = strchr(line, '\n');
    if (nl) {
      *nl = '\0';
      break;
    }
    if (n == sizeof line - 1) {
      bench_die("unexpected output from %s: %s", exe, line);
    }
  }
  if (sscanf(line, "sensimd listening on 127.0.0.1:%d", &d->port) != 1) {
    bench_die("unexpected output from %s: '%s'", exe, line);
  }
}


int bench_daemon_stop(bench_daemon_t* d) {
  kill(d->pid, SIGTERM);
  int status = 0;
  double deadline = bench_now() + 10.0;
  while (waitpid(d->pid, &status, WNOHANG) == 0) {
    if (bench_now() > deadline) {
      kill(d->pid, SIGKILL);
      waitpid(d->pid, &status, 0);
      g_daemon = -1;
      close(d->out);
      return -1;
    }
    struct timespec ts = {0, 5000000};
    nanosleep(&ts, NULL);
  }
  g_daemon = -1;
  close(d->out);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}


void bench_set_nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}


int bench_connect_loopback(int port, int timeout_ms) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || connect(fd, (struct sockaddr*)&a, sizeof a) != 0) {
    bench_die("cannot connect to 127.0.0.1:%d: %s", port, strerror(errno));
  }
  bench_set_nodelay(fd);
  struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = timeout_ms % 1000 * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  return fd;
}


int bench_send_all(int fd, const uint8_t* p, size_t n) {
  while (n > 0) {
    ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) {
      continue;
    }
    if (k <= 0) {
      return -1;
    }
    p += k;
    n -= (size_t)k;
  }
  return 0;
}


int bench_recv_all(int fd, uint8_t* p, size_t n) {
  while (n > 0) {
    ssize_t k = recv(fd, p, n, 0);
    if (k < 0 && errno == EINTR) {
      continue;
    }
    if (k <= 0) {
      if (k == 0) {
        errno = 0;
      }
      return -1;
    }
    p += k;
    n -= (size_t)k;
  }
  return 0;
}


void bench_write_all(int fd, const uint8_t* p, size_t n) {
  if (bench_send_all(fd, p, n)) {
    bench_die("send: %s", errno ? strerror(errno) : "closed");
  }
}


void bench_read_all(int fd, uint8_t* p, size_t n) {
  if (bench_recv_all(fd, p, n)) {
    bench_die("recv: %s", errno ? strerror(errno) : "connection closed");
  }
}


uint32_t bench_le32(const uint8_t* p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}


long bench_recv_frame(int fd, uint8_t** buf, size_t* cap) {
  uint8_t h[4];
  if (bench_recv_all(fd, h, 4)) {
    return -1;
  }
  size_t n = bench_le32(h);
  if (n > *cap) {
    free(*buf);
    *cap = n;
    *buf = bench_xmalloc(n);
  }
  return bench_recv_all(fd, *buf, n) ? -1 : (long)n;
}

//---------------- CPU time and threads

static double cpu_clock(clockid_t id) {
  struct timespec t;
  clock_gettime(id, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}


double bench_thread_cpu(void) {
  return cpu_clock(CLOCK_THREAD_CPUTIME_ID);
}


double bench_process_cpu(void) {
  return cpu_clock(CLOCK_PROCESS_CPUTIME_ID);
}


int bench_each_thread(pid_t pid, void (*fn)(pid_t tid, void* ctx), void* ctx) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
  DIR* dir = opendir(path);
  if (!dir) {
    bench_die("%s: %s", path, strerror(errno));
  }
  int n = 0;
  for (struct dirent* e; (e = readdir(dir)) != NULL;) {
    char* end;
    long tid = strtol(e->d_name, &end, 10);
    if (e->d_name[0] == '.' || *end != '\0' || tid <= 0) {
      continue;
    }
    fn((pid_t)tid, ctx);
    n++;
  }
  closedir(dir);
  return n;
}


typedef struct pid_cpu {
  pid_t pid;
  double sum;
} pid_cpu_t;


static void add_thread_cpu(pid_t tid, void* ctx) {
  pid_cpu_t* c = ctx;
  char file[96];
  snprintf(file, sizeof(file), "/proc/%d/task/%d/schedstat", (int)c->pid, (int)tid);
  FILE* f = fopen(file, "r");
  unsigned long long ns;
  if (f && fscanf(f, "%llu", &ns) == 1) {
    c->sum += 1e-9 * (double)ns;
  }
  if (f) {
    fclose(f);
  }
}


double bench_pid_cpu(pid_t pid) {
  pid_cpu_t c = {pid, 0.0};
  bench_each_thread(pid, add_thread_cpu, &c);
  return c.sum;
}

//---------------- Placement

static cpu_set_t g_mask;  // the process's mask when first asked
static int g_mask_read;


static const cpu_set_t* process_mask(void) {
  if (!g_mask_read) {
    CPU_ZERO(&g_mask);
    if (sched_getaffinity(0, sizeof(g_mask), &g_mask) != 0) {
      bench_die("sched_getaffinity: %s", strerror(errno));
    }
    g_mask_read = 1;
  }
  return &g_mask;
}


int bench_cpus(int* cpus, int max) {
  const cpu_set_t* m = process_mask();
  int n = 0;
  for (int c = 0; c < CPU_SETSIZE; c++) {
    if (CPU_ISSET(c, m)) {
      if (n < max) {
        cpus[n] = c;
      }
      n++;
    }
  }
  return n;
}


// The mask of one CPU, or the process's first mask for cpu < 0.
static cpu_set_t mask_of(int cpu) {
  cpu_set_t m;
  if (cpu < 0) {
    return *process_mask();
  }
  if (cpu >= CPU_SETSIZE) {
    bench_die("cpu %d: beyond CPU_SETSIZE", cpu);
  }
  CPU_ZERO(&m);
  CPU_SET(cpu, &m);
  return m;
}


static int g_pin_refused;   // the kernel refused a pinning once: said once, then not tried


void bench_pin_thread(pid_t tid, int cpu) {
  cpu_set_t m = mask_of(cpu);
  if (g_pin_refused || sched_setaffinity(tid, sizeof(m), &m) == 0 || errno == ESRCH) {
    return;
  }
  // a sandbox may forbid sched_setaffinity (EPERM) or offer fewer CPUs than the mask said
  // (EINVAL): the figures are then measured where the scheduler puts the threads, and the
  // output says so instead of stopping the cross-checks
  fprintf(stderr, "%s: cannot pin thread %d to cpu %d (%s): every placement below is left to "
          "the scheduler\n", g_prog, (int)tid, cpu, strerror(errno));
  printf("placements: not applied (sched_setaffinity refused: %s)\n", strerror(errno));
  g_pin_refused = 1;
}


void bench_pin_self(int cpu) {
  bench_pin_thread(0, cpu);
}


static void pin_one(pid_t tid, void* ctx) {
  bench_pin_thread(tid, *(const int*)ctx);   // a thread that ended meanwhile is skipped
}


void bench_pin_process(pid_t pid, int cpu) {
  if (bench_each_thread(pid, pin_one, &cpu) == 0) {
    bench_die("process %d has no threads to pin", (int)pid);
  }
}


const char* bench_cpu_name(int cpu, char dest[16]) {
  if (cpu < 0) {
    snprintf(dest, 16, "any cpu");
  } else {
    snprintf(dest, 16, "cpu %d", cpu);
  }
  return dest;
}


int bench_placements(bench_placement_t out[3], bool unpinned) {
  int cpus[2];
  int ncpu = bench_cpus(cpus, 2), n = 0;
  out[n++] = (bench_placement_t){"one core", "one_core", cpus[0], cpus[0]};
  if (ncpu > 1) {
    out[n++] = (bench_placement_t){"two cores", "two_cores", cpus[0], cpus[1]};
  }
  if (unpinned) {
    out[n++] = (bench_placement_t){"left to the scheduler", "unpinned", -1, -1};
  }
  return n;
}


void bench_place(const bench_placement_t* p, const pid_t* pids, int n) {
  bench_pin_self(p->self);
  for (int i = 0; i < n; i++) {
    bench_pin_process(pids[i], p->peer);
  }
}


void bench_unplace(const pid_t* pids, int n) {
  bench_pin_process(getpid(), -1);
  for (int i = 0; i < n; i++) {
    bench_pin_process(pids[i], -1);
  }
}

//---------------- Terrain

double bench_terrain_height(double x, double y) {
  return 1.5 * sin(0.05 * x) * cos(0.07 * y) + 0.4 * sin(0.31 * x + 0.2 * y) +
         0.15 * sin(1.3 * x) * sin(1.1 * y);
}


void bench_terrain(unsigned g, double side, float* v, uint32_t* idx) {
  unsigned nside = g + 1;
  double step = side / g;
  for (unsigned j = 0; j < nside; j++) {
    for (unsigned i = 0; i < nside; i++) {
      double x = -0.5 * side + step * i, y = -0.5 * side + step * j;
      float* p = v + 3 * (j * nside + i);
      p[0] = (float)x;
      p[1] = (float)y;
      p[2] = (float)bench_terrain_height(x, y);
    }
  }
  uint32_t* t = idx;
  for (unsigned j = 0; j < g; j++) {
    for (unsigned i = 0; i < g; i++) {
      uint32_t a = j * nside + i, b = a + 1, c = a + nside + 1, d = a + nside;
      *t++ = a, *t++ = b, *t++ = c;
      *t++ = a, *t++ = c, *t++ = d;
    }
  }
}
