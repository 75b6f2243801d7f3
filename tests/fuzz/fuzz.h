// SPDX-License-Identifier: MIT
// fuzz.h: what the fuzz targets share: libFuzzer's entry points, FUZZ_ASSERT (an invariant of
// the code under test that does not hold aborts, which libFuzzer records as a crash with its
// input), and a small deterministic random source derived from the input.
#ifndef SENSIM_TESTS_FUZZ_FUZZ_H_
#define SENSIM_TESTS_FUZZ_FUZZ_H_

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

// Run one input. libFuzzer calls it; so does replay.c, the driver the normal suite uses to
// replay the seed corpora and the regression inputs without libFuzzer.
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

// Optional set-up once per process (weak in replay.c).
int LLVMFuzzerInitialize(int* argc, char*** argv);

#define FUZZ_ASSERT(cond, ...)                                             \
  do {                                                                     \
    if (!(cond)) {                                                         \
      fprintf(stderr, "%s:%d: invariant broken: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                        \
      fprintf(stderr, "\n");                                               \
      abort();                                                             \
    }                                                                      \
  } while (0)

// xorshift64*: the split points and choices a target derives from its input's first bytes, so
// that an input replays identically.
static inline uint64_t fuzz_next(uint64_t* s) {
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 0x2545F4914F6CDD1Dull;
}


static inline uint32_t fuzz_rd32(const uint8_t* p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

#endif  // SENSIM_TESTS_FUZZ_FUZZ_H_
