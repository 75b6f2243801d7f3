// SPDX-License-Identifier: MIT
// bench_util.c: clock, percentiles and number formatting for the benchmark programs.
#include "bench_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


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
