// SPDX-License-Identifier: MIT
// bench_util.h: small helpers shared by the benchmark programs: a monotonic clock, order
// statistics of samples, and thousands separators for printing counts.
#ifndef SENSIM_BENCH_UTIL_H_
#define SENSIM_BENCH_UTIL_H_

#include <stddef.h>
#include <stdint.h>

// Seconds on the monotonic clock.
double bench_now(void);

// The p-th percentile (p in [0, 100], nearest rank) of n samples; v is sorted in place.
// n = 0 gives NAN.
double bench_percentile(double* v, size_t n, double p);

// Median of n samples (v is sorted in place).
double bench_median(double* v, size_t n);

// Format u with thousands separators into dest (at least 32 bytes); returns dest.
const char* bench_count(uint64_t u, char dest[32]);

#endif  // SENSIM_BENCH_UTIL_H_
