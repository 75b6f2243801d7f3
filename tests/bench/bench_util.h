// SPDX-License-Identifier: MIT
// bench_util.h: small helpers shared by the benchmark programs: a monotonic clock, order
// statistics of samples, thousands separators for printing counts, fatal errors, command-line
// options, and the terrain both benchmarks trace.
#ifndef SENSIM_BENCH_UTIL_H_
#define SENSIM_BENCH_UTIL_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

//---------------- Terrain

// The terrain's height (m) at (x, y).
double bench_terrain_height(double x, double y);

// Height field of g x g cells (2 triangles each) over the square of the given side centred on
// the origin: v receives 3 floats for each of the (g + 1)^2 vertices, idx 3 indices for each of
// the 2 g^2 triangles.
void bench_terrain(unsigned g, double side, float* v, uint32_t* idx);

#endif  // SENSIM_BENCH_UTIL_H_
