// SPDX-License-Identifier: MIT
// simd.c: the level of the core's SIMD kernels (simd.h): the processor's, read once, lowered by
// SENSIM_SIMD and by tests.
#include "base/simd.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static const char* const g_names[SIMD_LEVEL_COUNT] = {"baseline", "avx2", "avx512"};

// -1 until read: the processor's level, and that lowered by SENSIM_SIMD (simd_allowed_level;
// not derivable from the others, as simd_set_max may bound the running level below it). The
// running level, the lower of it and simd_set_max's bound, is not kept but computed at each
// call (two relaxed loads), so no copy has to be kept in step.
static atomic_int g_cpu = -1;
static atomic_int g_ceiling = -1;
// simd_set_max's bound.
static atomic_int g_max = SIMD_LEVEL_COUNT;


static simd_level_t detect(void) {
#if SIMD_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx2") &&
      __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi2")) {
    return SIMD_AVX512;
  }
  if (__builtin_cpu_supports("avx2")) {
    return SIMD_AVX2;
  }
#endif
  return SIMD_BASELINE;
}


// The level SENSIM_SIMD names, SIMD_LEVEL_COUNT when it is unset, -1 when it names none.
static int env_level(void) {
  const char* v = getenv(SIMD_LEVEL_ENV);
  if (v == NULL) {
    return SIMD_LEVEL_COUNT;
  }
  for (int i = 0; i < SIMD_LEVEL_COUNT; i++) {
    if (strcmp(v, g_names[i]) == 0) {
      return i;
    }
  }
  return -1;
}


simd_level_t simd_cpu_level(void) {
  int cpu = atomic_load_explicit(&g_cpu, memory_order_relaxed);
  if (cpu < 0) {
    cpu = (int)detect();
    atomic_store_explicit(&g_cpu, cpu, memory_order_relaxed);
  }
  return (simd_level_t)cpu;
}


// The first read of the ceiling. Out of line, so that simd_level, called for every kernel, stays
// a few instructions without saving the registers this call needs.
__attribute__((noinline, cold)) static int ceiling_first(void) {
  int c = (int)simd_cpu_level();
  int e = env_level();
  c = e >= 0 && e < c ? e : c;
  atomic_store_explicit(&g_ceiling, c, memory_order_relaxed);
  return c;
}


// The CPU's level lowered by SENSIM_SIMD (a bad value lowers nothing).
static inline int ceiling(void) {
  int c = atomic_load_explicit(&g_ceiling, memory_order_relaxed);
  return c >= 0 ? c : ceiling_first();
}


simd_level_t simd_allowed_level(void) {
  return (simd_level_t)ceiling();
}


simd_level_t simd_level(void) {
  int c = ceiling(), m = atomic_load_explicit(&g_max, memory_order_relaxed);
  return (simd_level_t)(m < c ? m : c);
}


simd_level_t simd_set_max(simd_level_t max) {
  int m = (int)max < 0 || (int)max > SIMD_LEVEL_COUNT ? SIMD_LEVEL_COUNT : (int)max;
  return (simd_level_t)atomic_exchange(&g_max, m);
}


const char* simd_level_name(simd_level_t level) {
  return level >= 0 && level < SIMD_LEVEL_COUNT ? g_names[level] : "unknown";
}


int simd_check_env(err_msg_t* msg) {
  if (env_level() >= 0) {
    return 0;
  }
  return err_set(msg, ERR_INVAL, "%s = \"%.64s\" is not baseline, avx2 or avx512", SIMD_LEVEL_ENV,
                 getenv(SIMD_LEVEL_ENV));
}
