// SPDX-License-Identifier: MIT
// Counter-based random numbers: the Philox-4x32-10 known-answer vectors published with the
// algorithm (Random123 kat_vectors), determinism by key, and the moments of each distribution.
#include <string.h>

#include "base/rng.h"
#include "base/simd.h"
#include "check.h"


TEST(philox_known_answers) {
  uint32_t a[4] = {0, 0, 0, 0};
  rng_philox(a, 0, 0);
  ASSERT_EQ(a[0], 0x6627e8d5u);
  ASSERT_EQ(a[1], 0xe169c58du);
  ASSERT_EQ(a[2], 0xbc57ac4cu);
  ASSERT_EQ(a[3], 0x9b00dbd8u);
  uint32_t b[4] = {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu};
  rng_philox(b, 0xffffffffu, 0xffffffffu);
  ASSERT_EQ(b[0], 0x408f276du);
  ASSERT_EQ(b[1], 0x41c83b0eu);
  ASSERT_EQ(b[2], 0xa20bc7c6u);
  ASSERT_EQ(b[3], 0x6d5451fdu);
  uint32_t c[4] = {0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u};
  rng_philox(c, 0xa4093822u, 0x299f31d0u);
  ASSERT_EQ(c[0], 0xd16cfe09u);
  ASSERT_EQ(c[1], 0x94fdccebu);
  ASSERT_EQ(c[2], 0x5001e420u);
  ASSERT_EQ(c[3], 0x24126ea1u);
  return 0;
}

TEST(draws_depend_on_every_part_of_the_key_only) {
  rng_key_t k = {.seed = 42, .stream = 3, .frame = 7, .index = 11};
  double u = rng_uniform(&k, 0);
  ASSERT_TRUE(u == rng_uniform(&k, 0));  // a pure function
  rng_key_t v = k;
  v.seed++;
  ASSERT_TRUE(rng_uniform(&v, 0) != u);
  v = k;
  v.stream++;
  ASSERT_TRUE(rng_uniform(&v, 0) != u);
  v = k;
  v.frame += 1ull << 32;  // the high half of the frame counts too
  ASSERT_TRUE(rng_uniform(&v, 0) != u);
  v = k;
  v.index += 1ull << 40;
  ASSERT_TRUE(rng_uniform(&v, 0) != u);
  ASSERT_TRUE(rng_uniform(&k, 1) != u);
  return 0;
}

// The batched words equal the one-key words for every lane of every batch length (whole and
// partial vector blocks, indices past 2^32), with the Philox key derived from the same key, in
// each form of the batch this CPU runs (base/simd.h).
TEST(batched_words_equal_single_words) {
  rng_key_t k = {.seed = 0x0123456789abcdefull, .stream = 77, .frame = (1ull << 33) + 5};
  uint64_t index[41];
  for (int i = 0; i < 41; i++) {
    index[i] = (uint64_t)i * 0x9E3779B97F4A7C15ull;
  }
  uint32_t out[41][4];
  static const size_t lengths[] = {0, 1, 2, 3, 7, 15, 16, 17, 31, 32, 33, 41};
  const size_t nlen = sizeof lengths / sizeof lengths[0];
  for (size_t t = 0; t < (simd_allowed_level() + 1u) * nlen; t++) {
    simd_set_max((simd_level_t)(t / nlen));
    ASSERT_EQ(simd_level(), t / nlen);
    size_t n = lengths[t % nlen];
    for (size_t i = 0; i < 41; i++) {
      out[i][0] = out[i][1] = out[i][2] = out[i][3] = 0xdeadbeefu;
    }
    rng_words_n(&k, index, 1234567u, out, n);
    for (size_t i = 0; i < 41; i++) {
      uint32_t w[4] = {0xdeadbeefu, 0xdeadbeefu, 0xdeadbeefu, 0xdeadbeefu};
      if (i < n) {
        rng_key_t ki = k;
        ki.index = index[i];
        rng_words(&ki, 1234567u, w);
      }
      for (int j = 0; j < 4; j++) {
        ASSERT_EQ(out[i][j], w[j]);   // equal in the batch, untouched past it
      }
    }
  }
  return 0;
}

// The batched normals equal rng_normal bit for bit for every batch length (whole and partial
// blocks of eight, one draw alone), draws in any order and far apart, in each form this CPU
// runs; nothing past the batch is written.
TEST(batched_normals_equal_single_normals) {
  rng_key_t k = {.seed = 0xfedcba9876543210ull, .stream = 9, .frame = (1ull << 35) + 3,
                 .index = (1ull << 40) + 11};
  uint32_t draws[21];
  for (uint32_t i = 0; i < 21; i++) {
    draws[i] = (i * 2654435761u) ^ (i % 3 ? 0u : 0x80000000u);
  }
  static const size_t lengths[] = {0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 21};
  const size_t nlen = sizeof lengths / sizeof lengths[0];
  for (size_t t = 0; t < (simd_allowed_level() + 1u) * nlen; t++) {
    simd_set_max((simd_level_t)(t / nlen));
    size_t n = lengths[t % nlen];
    double out[22];
    for (size_t i = 0; i < 22; i++) {
      out[i] = -1234.5;
    }
    rng_normal_n(&k, draws, out, n);
    for (size_t i = 0; i < 22; i++) {
      double want = i < n ? rng_normal(&k, draws[i]) : -1234.5;
      ASSERT_TRUE(memcmp(&out[i], &want, sizeof want) == 0);
    }
  }
  simd_set_max(simd_allowed_level());
  return 0;
}

// Sample mean and variance of n draws of f over consecutive indices.
static void moments(double (*f)(const rng_key_t*, void*), void* arg, int n, double* mean,
                    double* var) {
  double s = 0, s2 = 0;
  for (int i = 0; i < n; i++) {
    rng_key_t k = {.seed = 2026, .stream = 1, .frame = (uint64_t)i / 1000, .index = (uint64_t)i};
    double x = f(&k, arg);
    s += x;
    s2 += x * x;
  }
  *mean = s / n;
  *var = s2 / n - *mean * *mean;
}

static double draw_uniform(const rng_key_t* k, void* arg) {
  (void)arg;
  return rng_uniform(k, 5);
}

static double draw_normal(const rng_key_t* k, void* arg) {
  (void)arg;
  return rng_normal(k, 9);
}

static double draw_gamma(const rng_key_t* k, void* arg) {
  const double* p = arg;
  return rng_gamma(k, 2, p[0], p[1]);
}

TEST(moments_within_four_sigma) {
  const int n = 200000;
  double m, v;
  moments(draw_uniform, NULL, n, &m, &v);
  ASSERT_NEAR(m, 0.5, 4 * sqrt(1.0 / 12 / n));
  ASSERT_NEAR(v, 1.0 / 12, 4 * sqrt(1.0 / 180 / n));  // var of (U - 1/2)^2 is 1/180
  moments(draw_normal, NULL, n, &m, &v);
  ASSERT_NEAR(m, 0, 4 * sqrt(1.0 / n));
  ASSERT_NEAR(v, 1, 4 * sqrt(2.0 / n));
  // gamma: mean k theta, variance k theta^2 (shape below and above 1)
  const double params[2][2] = {{0.5, 3.0}, {2.7, 0.4}};
  for (int i = 0; i < 2; i++) {
    double k = params[i][0], th = params[i][1];
    moments(draw_gamma, (void*)params[i], n, &m, &v);
    double var = k * th * th;
    ASSERT_NEAR(m, k * th, 4 * sqrt(var / n));
    // variance of the sample variance: (mu4 - var^2) / n, mu4 = 3 k (k + 2) theta^4
    double mu4 = 3 * k * (k + 2) * th * th * th * th;
    ASSERT_NEAR(v, var, 4 * sqrt((mu4 - var * var) / n));
  }
  return 0;
}
