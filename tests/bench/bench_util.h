// SPDX-License-Identifier: MIT
// bench_util.h: small helpers shared by the benchmark programs: a monotonic clock, order
// statistics of samples, thousands separators for printing counts, fatal errors, command-line
// options, a sensimd child with loopback sockets to it, and the terrain both benchmarks trace.
#ifndef SENSIM_BENCH_UTIL_H_
#define SENSIM_BENCH_UTIL_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

// Seconds on the monotonic clock.
double bench_now(void);

// The p-th percentile (p in [0, 100], nearest rank) of n samples; v is sorted in place.
// n = 0 gives NAN.
double bench_percentile(double* v, size_t n, double p);

// Median of n samples (v is sorted in place).
double bench_median(double* v, size_t n);

// Median of the n paired ratios a[i] / b[i].
double bench_median_ratio(const double* a, const double* b, size_t n);

// Format u with thousands separators into dest (at least 32 bytes); returns dest.
const char* bench_count(uint64_t u, char dest[32]);

//---------------- Errors

// The program's name, which prefixes its messages, and a hook that bench_die runs before it
// exits (NULL: none).
void bench_init(const char* prog, void (*on_die)(void));

// Print "PROG: message" to stderr, run the hook, exit with status 1.
void bench_die(const char* fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

// malloc that never returns NULL (bench_die instead); n = 0 allocates a byte.
void* bench_xmalloc(size_t n);

//---------------- Options

typedef enum bench_opt_kind {
  BENCH_OPT_FLAG,     // no argument; sets *(int*)dst = 1 (dst NULL: accepted, ignored)
  BENCH_OPT_COUNT,    // *(unsigned*)dst, an integer in [lo, hi]
  BENCH_OPT_POSITIVE, // *(double*)dst, a finite number > 0
  BENCH_OPT_STRING,   // *(const char**)dst = the argument
} bench_opt_kind_t;

typedef struct bench_opt {
  const char* name;   // --name
  bench_opt_kind_t kind;
  void* dst;
  unsigned lo, hi;    // BENCH_OPT_COUNT
} bench_opt_t;

// True if argv holds exactly `arg` (for options that set defaults wherever they appear).
bool bench_has_arg(int argc, char** argv, const char* arg);

// getopt_long over the n options (at most 32) and --help (usage to stdout, exit 0). An unknown
// option or a missing argument prints usage to stderr, a bad value a message naming it; both
// exit with status 2. Returns the index of the first operand.
int bench_parse_options(int argc, char** argv, const bench_opt_t* opts, size_t n,
                        const char* usage);

//---------------- sensimd and loopback sockets

typedef struct bench_daemon {
  pid_t pid;
  int out;            // read end of its stdout, kept open so that it never gets SIGPIPE
  int port;
} bench_daemon_t;

// Start `exe --listen 127.0.0.1:0 --log-level warn` and then the NULL-terminated `extra`
// arguments (NULL: none) as a child, and read its port from the line "sensimd listening on
// 127.0.0.1:PORT" it prints first; bench_die when none comes within timeout_ms. One daemon at
// a time: bench_daemon_kill (a hook for bench_init) kills it.
void bench_daemon_start(bench_daemon_t* d, const char* exe, const char* const* extra,
                        int timeout_ms);

// SIGTERM and wait (SIGKILL after 10 s); returns its exit status, or -1 when it had to be killed
// or died of a signal.
int bench_daemon_stop(bench_daemon_t* d);

// SIGKILL to the running daemon, if any.
void bench_daemon_kill(void);

// A TCP connection to 127.0.0.1:port with TCP_NODELAY and send and receive timeouts of
// timeout_ms; bench_die when it cannot connect.
int bench_connect_loopback(int port, int timeout_ms);

// TCP_NODELAY on fd.
void bench_set_nodelay(int fd);

// Blocking I/O of exactly n bytes; -1 on error or end of stream.
int bench_send_all(int fd, const uint8_t* p, size_t n);
int bench_recv_all(int fd, uint8_t* p, size_t n);

// The same, bench_die on error or end of stream.
void bench_write_all(int fd, const uint8_t* p, size_t n);
void bench_read_all(int fd, uint8_t* p, size_t n);

// The 4-byte little-endian length that starts a frame.
uint32_t bench_le32(const uint8_t* p);

// Receive one frame (4-byte little-endian length, then the payload) into *buf (capacity *cap,
// grown as needed); returns the payload's length, or -1.
long bench_recv_frame(int fd, uint8_t** buf, size_t* cap);

//---------------- CPU time and threads
// CPU seconds of the calling thread, and of every thread of this process.
double bench_thread_cpu(void);
double bench_process_cpu(void);
// CPU seconds every thread of process pid has run so far (the first field of each one's
// /proc/PID/task/TID/schedstat); a thread that has ended is not counted.
double bench_pid_cpu(pid_t pid);
// fn(tid, ctx) for every thread of process pid (its /proc/PID/task entries, in the order /proc
// lists them); returns how many. bench_die when pid has no such directory.
int bench_each_thread(pid_t pid, void (*fn)(pid_t tid, void* ctx), void* ctx);

//---------------- Placement
// Loopback round trips depend on where the threads run: a wake-up on the core a thread is
// already on costs a context switch, one on another core an inter-processor interrupt (tens
// of microseconds on some virtual machines). Benchmarks that compare round trips pin both
// sides the same way with these.
// The CPUs this process was allowed when first asked (its affinity mask then), ascending, at
// most max of them into cpus; returns how many there are (possibly more than max).
int bench_cpus(int* cpus, int max);
// Pin thread tid (0: the calling thread) to `cpu` (-1: back to the mask bench_cpus read). A
// thread that has ended (ESRCH) is skipped; when the kernel refuses (a sandbox without
// sched_setaffinity), a line on stdout and stderr says that the placements are not applied,
// and no pinning is tried again.
void bench_pin_thread(pid_t tid, int cpu);
// bench_pin_thread(0, cpu).
void bench_pin_self(int cpu);
// Pin every thread of process pid (each /proc/PID/task entry) to `cpu` (-1: back to the mask
// bench_cpus read); threads it creates later inherit their creator's mask. bench_die on failure.
void bench_pin_process(pid_t pid, int cpu);
// "cpu 3" or "any cpu" for messages; returns dest (at least 16 bytes).
const char* bench_cpu_name(int cpu, char dest[16]);

// Where the two sides of a round trip run: the benchmark's thread on `self`, its peers (a
// daemon's threads, and the raw reference's echo standing in for it) on `peer`; -1: any CPU.
typedef struct bench_placement {
  const char* name;   // "one core", "two cores", "left to the scheduler"
  const char* tag;    // the same as a BENCH name's suffix: one_core, two_cores, unpinned
  int self, peer;
} bench_placement_t;

// The placements that compare loopback round trips like with like: one core (both sides on
// the first CPU of the mask: every wake-up a context switch, the ratio the CPU's), two cores
// (the benchmark on the first, its peers on the second: the shape of a deployment, paying the
// host's cross-core wake-ups on both sides; left out when the mask has one CPU) and, when
// `unpinned`, left to the scheduler. Writes up to 3 into out; returns how many.
int bench_placements(bench_placement_t out[3], bool unpinned);
// Pin the calling thread to p->self and every thread of the n processes pids to p->peer.
void bench_place(const bench_placement_t* p, const pid_t* pids, int n);
// Every thread of this process (the calling one) and of the n processes back to any CPU.
void bench_unplace(const pid_t* pids, int n);

//---------------- Terrain

// The terrain's height (m) at (x, y).
double bench_terrain_height(double x, double y);

// Height field of g x g cells (2 triangles each) over the square of the given side centred on
// the origin: v receives 3 floats for each of the (g + 1)^2 vertices, idx 3 indices for each of
// the 2 g^2 triangles.
void bench_terrain(unsigned g, double side, float* v, uint32_t* idx);

#endif  // SENSIM_BENCH_UTIL_H_
