// SPDX-License-Identifier: MIT
// test_simd.c: the level of the core's SIMD kernels (base/simd.h): the processor's (checked
// against /proc/cpuinfo's flags), lowered by SENSIM_SIMD and by simd_set_max, never raised; a
// bad SENSIM_SIMD refused naming the variable. The forms' bits are compared in the kernels'
// own tests (test_rng, test_noise, test_sweep, test_scene).
#include "base/simd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

// Whether /proc/cpuinfo lists every flag of `flags` (space-separated) for the first processor;
// -1 when it cannot be read.
static int cpu_has(const char* flags) {
  FILE* f = fopen("/proc/cpuinfo", "r");
  if (!f) {
    return -1;
  }
  static char line[16384];
  int found = -1;
  while (found < 0 && fgets(line, sizeof line, f)) {
    if (strncmp(line, "flags", 5) != 0) {
      continue;
    }
    found = 1;
    char want[256];
    snprintf(want, sizeof want, "%s", flags);
    for (char* tok = strtok(want, " "); tok; tok = strtok(NULL, " ")) {
      char padded[64];
      snprintf(padded, sizeof padded, " %s", tok);
      size_t n = strlen(padded);
      const char* at = strstr(line, padded);
      int whole = at && (at[n] == ' ' || at[n] == '\n' || at[n] == '\0');
      found &= whole;
    }
  }
  fclose(f);
  return found;
}


TEST(simd_level_is_the_processors) {
  int avx2 = cpu_has("avx2");
  int v4 = cpu_has("avx512f avx512bw avx512cd avx512dq avx512vl avx2 fma bmi2");
  if (avx2 < 0 || v4 < 0) {
    fprintf(stderr, "# no /proc/cpuinfo flags: level %s not checked\n",
            simd_level_name(simd_cpu_level()));
    return 0;
  }
#if SIMD_X86
  simd_level_t want = v4 ? SIMD_AVX512 : avx2 ? SIMD_AVX2 : SIMD_BASELINE;
#else
  simd_level_t want = SIMD_BASELINE;
#endif
  ASSERT_EQ(simd_cpu_level(), want);
  if (getenv(SIMD_LEVEL_ENV) == NULL) {
    ASSERT_EQ(simd_level(), want);
  }
  return 0;
}


TEST(simd_set_max_lowers_and_restores) {
  unsetenv(SIMD_LEVEL_ENV);   // this test's process (each test runs in its own)
  simd_level_t cpu = simd_cpu_level();
  ASSERT_EQ(simd_level(), cpu);
  for (int l = SIMD_BASELINE; l < SIMD_LEVEL_COUNT; l++) {
    simd_level_t before = simd_set_max((simd_level_t)l);
    ASSERT_EQ(before, l == 0 ? SIMD_LEVEL_COUNT : l - 1);
    ASSERT_EQ(simd_level(), (simd_level_t)l < cpu ? (simd_level_t)l : cpu);
  }
  ASSERT_EQ(simd_set_max(SIMD_LEVEL_COUNT), SIMD_AVX512);
  ASSERT_EQ(simd_level(), cpu);
  ASSERT_EQ(simd_set_max((simd_level_t)99), SIMD_LEVEL_COUNT);   // no bound
  ASSERT_EQ(simd_level(), cpu);
  ASSERT_EQ(strcmp(simd_level_name(SIMD_BASELINE), "baseline"), 0);
  ASSERT_EQ(strcmp(simd_level_name(SIMD_AVX2), "avx2"), 0);
  ASSERT_EQ(strcmp(simd_level_name(SIMD_AVX512), "avx512"), 0);
  ASSERT_EQ(strcmp(simd_level_name(SIMD_LEVEL_COUNT), "unknown"), 0);
  return 0;
}


TEST(simd_env_lowers_never_raises) {
  // read on first use: this process has not asked yet
  setenv(SIMD_LEVEL_ENV, "baseline", 1);
  ASSERT_EQ(simd_level(), SIMD_BASELINE);
  ASSERT_EQ(simd_set_max(SIMD_LEVEL_COUNT), SIMD_LEVEL_COUNT);
  ASSERT_EQ(simd_level(), SIMD_BASELINE);   // the variable still bounds it
  err_msg_t msg = {{0}};
  ASSERT_EQ(simd_check_env(&msg), 0);
  return 0;
}


TEST(simd_env_above_the_processor_is_the_processor) {
  setenv(SIMD_LEVEL_ENV, "avx512", 1);
  ASSERT_EQ(simd_level(), simd_cpu_level());
  return 0;
}


TEST(simd_bad_env_is_refused_naming_it) {
  setenv(SIMD_LEVEL_ENV, "avx3", 1);
  err_msg_t msg = {{0}};
  ASSERT_EQ(simd_check_env(&msg), ERR_INVAL);
  ASSERT_TRUE(strstr(msg.text, "SENSIM_SIMD = \"avx3\"") != NULL);
  ASSERT_TRUE(strstr(msg.text, "baseline, avx2 or avx512") != NULL);
  ASSERT_EQ(simd_level(), simd_cpu_level());   // ignored by the kernels themselves
  setenv(SIMD_LEVEL_ENV, "", 1);
  ASSERT_EQ(simd_check_env(&msg), ERR_INVAL);
  return 0;
}
