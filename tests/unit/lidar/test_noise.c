// SPDX-License-Identifier: MIT
// test_noise.c: detection distance noise (known sigma values of docs/models/lidar.md, injected
// samples, statistics of the drawn noise, determinism) and ray emission angle noise.
#include <math.h>
#include <string.h>

#include "base/simd.h"
#include "check.h"
#include "lidar/noise.h"

static lidar_distance_noise_t distance_noise(double base, double slope, double mean) {
  lidar_distance_noise_desc_t d = {base, slope, mean};
  lidar_distance_noise_t n = {0};
  if (lidar_noise_distance_init(&n, &d, "lidar.distance_noise", NULL) != 0) {
    n.enabled = -1;
  }
  return n;
}



TEST(noise_normal_quantile_known_values) {
  // Phi^-1 at probabilities with known quantiles (centre, both tails, the region boundaries)
  static const double k[][2] = {
      {0.5, 0.0},
      {0.8413447460685429, 1.0},
      {0.975, 1.959963984540054},
      {0.03, -1.880793608151251},
      {0.02, -2.053748910631823},
      {0.001, -3.090232306167813},
      {1e-10, -6.361340902404056},
  };
  for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
    ASSERT_NEAR(lidar_noise_normal_quantile(k[i][0]), k[i][1], 1.2e-9 * fabs(k[i][1]) + 1e-12);
    if (k[i][0] > 1e-6) {  // 1 - 1e-10 is not exact in double
      ASSERT_NEAR(lidar_noise_normal_quantile(1.0 - k[i][0]), -k[i][1],
                  1.2e-9 * fabs(k[i][1]) + 1e-12);
    }
  }

  // monotonic across the region boundaries
  ASSERT_TRUE(lidar_noise_normal_quantile(0.02425) < lidar_noise_normal_quantile(0.0242501));
  ASSERT_TRUE(lidar_noise_normal_quantile(0.9757499) < lidar_noise_normal_quantile(0.97575));

  // the open unit interval from two words: (b + 1/2) / 2^52 of their top 52 bits b, exactly
  // (doubles compared with ==: ASSERT_EQ compares integers)
  ASSERT_TRUE(lidar_noise_uniform(0, 0) == ldexp(1.0, -53));
  ASSERT_TRUE(lidar_noise_uniform(0xffffffffu, 0xffffffffu) == 1.0 - ldexp(1.0, -53));
  ASSERT_TRUE(lidar_noise_uniform(0x80000000u, 0xfffu) == 0.5 + ldexp(1.0, -53));
  ASSERT_TRUE(lidar_noise_uniform(0x80000000u, 0x1000u) == 0.5 + 3.0 * ldexp(1.0, -53));
  return 0;
}


// A draw's uniform is the one rng_uniform gives for words 0-1 of the same draw.
TEST(noise_uniform_is_the_generators) {
  for (uint32_t i = 0; i < 1000; i++) {
    rng_key_t key = {.seed = 42u + i, .stream = 3u, .frame = 7u, .index = 1000u * i};
    uint32_t w[4];
    rng_words(&key, i % 5u, w);
    ASSERT_TRUE(lidar_noise_uniform(w[0], w[1]) == rng_uniform(&key, i % 5u));
  }
  return 0;
}


// The batched quantiles equal the scalar ones bit for bit, in the centre and in both tails
// (words chosen to land there), for batch lengths around the SIMD widths, in each of the
// batch's forms this CPU runs (base/simd.h).
// The count of 52-bit values below p against lidar_noise_uniform's own comparison at the
// boundary (the values just under and at the count) and at its ends, for probabilities that
// fall on a value, between two, and the smallest and largest ones.
TEST(noise_uniform_count_below_matches_the_uniform) {
  const double top = 4503599627370496.0;   // 2^52
  const double p[] = {1e-4, 0.5, 0.3, 1.0 / 3.0, 2.5 / top, 3.0 / top, 0.5 / top, 1e-300,
                      1.0 - 0.5 / top, 1.0 - 1.5 / top, 0.999999, 0.7 + 0.25 / top};
  for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) {
    uint64_t c = lidar_noise_uniform_count_below(p[i]);
    ASSERT_TRUE(c <= ((uint64_t)1 << 52));
    for (uint64_t b = c > 2 ? c - 2 : 0; b < c + 2 && b < ((uint64_t)1 << 52); b++) {
      uint32_t hi = (uint32_t)(b >> 20), lo = (uint32_t)(b << 12) | 0xfffu;   // any low bits
      ASSERT_EQ(lidar_noise_uniform_bits(hi, lo), b);
      ASSERT_EQ(lidar_noise_uniform(hi, lo) < p[i], b < c);
    }
  }
  ASSERT_EQ(lidar_noise_uniform_count_below(0.0), 0u);
  ASSERT_EQ(lidar_noise_uniform_count_below(-1.0), 0u);
  ASSERT_EQ(lidar_noise_uniform_count_below(NAN), 0u);
  ASSERT_EQ(lidar_noise_uniform_count_below(0.5 / top), 0u);            // the smallest uniform
  ASSERT_EQ(lidar_noise_uniform_count_below(1.0), (uint64_t)1 << 52);    // every one
  ASSERT_EQ(lidar_noise_uniform_count_below(0.5), (uint64_t)1 << 51);
  return 0;
}


TEST(noise_batched_quantiles_equal_scalar) {
  uint32_t w[37][4];
  uint64_t x = 0x243F6A8885A308D3ull;
  for (int i = 0; i < 37; i++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    w[i][0] = w[i][1] = 0;
    w[i][2] = (uint32_t)(x >> 32);
    w[i][3] = (uint32_t)x;
  }
  w[3][2] = 0x00000001u;   // u ~ 2.3e-10: lower tail
  w[4][2] = 0xfffffff0u;   // upper tail
  w[5][2] = 0x063d70a3u;   // u next to the tail boundary 0.02425
  w[6][2] = 0u;            // the smallest u
  w[6][3] = 0;
  static const size_t lengths[] = {0, 1, 2, 7, 8, 9, 16, 17, 37};
  for (size_t t = 0; t < (simd_allowed_level() + 1u) * (sizeof lengths / sizeof lengths[0]); t++) {
    simd_set_max((simd_level_t)(t / (sizeof lengths / sizeof lengths[0])));
    ASSERT_EQ(simd_level(), t / (sizeof lengths / sizeof lengths[0]));
    double z[37];
    for (int i = 0; i < 37; i++) {
      z[i] = -12345.0;
    }
    size_t len = lengths[t % (sizeof lengths / sizeof lengths[0])];
    lidar_noise_normal_quantiles((const uint32_t(*)[4])w, len, z);
    for (size_t i = 0; i < 37; i++) {
      double want = i < len
                        ? lidar_noise_normal_quantile(lidar_noise_uniform(w[i][2], w[i][3]))
                        : -12345.0;
      ASSERT_TRUE(memcmp(&z[i], &want, sizeof want) == 0);
    }
  }
  // the tails were reached
  ASSERT_TRUE(lidar_noise_normal_quantile(lidar_noise_uniform(w[3][2], w[3][3])) < -5.0);
  ASSERT_TRUE(lidar_noise_normal_quantile(lidar_noise_uniform(w[4][2], w[4][3])) > 5.0);
  return 0;
}

// At the exact edges of the central branch (the draws on either side of u = 0.02425 and of
// u = 1 - 0.02425, found here by bisection on the uniform itself) and over more than one block
// of draws, the batch equals the scalar quantile bit for bit, in each form.
TEST(noise_batched_quantiles_at_the_branch_edges) {
  enum { N = 600, WINDOW = 9 };
  static uint32_t w[N][4];
  const double p_low = 0.02425;
  uint64_t edge[2];   // the first bits above p_low, the first not below 1 - p_low
  for (int e = 0; e < 2; e++) {
    uint64_t lo = 0, hi = (uint64_t)1 << 52;
    while (lo < hi) {
      uint64_t mid = lo + (hi - lo) / 2;
      double u = rng_unit_of_bits(mid);
      if (e == 0 ? u > p_low : u >= 1.0 - p_low) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
    edge[e] = lo;
  }
  uint64_t x = 0x13198A2E03707344ull;
  for (int i = 0; i < N; i++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    uint64_t b = x >> 12;
    if (i < 4 * WINDOW || (i >= 300 && i < 300 + 4 * WINDOW)) {
      int k = i % (2 * WINDOW);
      b = edge[k / WINDOW] + (uint64_t)(k % WINDOW) - WINDOW / 2;
    }
    w[i][0] = w[i][1] = 0;
    w[i][2] = (uint32_t)(b >> 20);
    w[i][3] = (uint32_t)(b << 12) | 0xabcu;   // any low bits
    ASSERT_EQ(lidar_noise_uniform_bits(w[i][2], w[i][3]), b);
  }
  for (unsigned level = 0; level <= (unsigned)simd_allowed_level(); level++) {
    simd_set_max((simd_level_t)level);
    static double z[N];
    lidar_noise_normal_quantiles((const uint32_t(*)[4])w, N, z);
    for (size_t i = 0; i < N; i++) {
      double want = lidar_noise_normal_quantile(lidar_noise_uniform(w[i][2], w[i][3]));
      ASSERT_TRUE(memcmp(&z[i], &want, sizeof want) == 0);
    }
  }
  simd_set_max(SIMD_LEVEL_COUNT);
  return 0;
}


TEST(noise_distance_sigma_known_answers) {
  lidar_distance_noise_t n = distance_noise(0.01, 0.001, 0.0);
  ASSERT_NEAR(lidar_noise_distance_stddev(&n, 0.0), 0.01, 1e-15);
  ASSERT_NEAR(lidar_noise_distance_stddev(&n, 50.0), 0.06, 1e-15);
  n = distance_noise(0.0, 0.003, 0.0);
  ASSERT_NEAR(lidar_noise_distance_stddev(&n, 10.0), 0.03, 1e-15);
  n = distance_noise(0.02, 0.0, 0.0);
  ASSERT_NEAR(lidar_noise_distance_stddev(&n, 100.0), 0.02, 1e-15);
  return 0;
}


TEST(noise_distance_injected_samples) {
  lidar_distance_noise_t n = distance_noise(0.01, 0.001, 0.005);
  ASSERT_NEAR(lidar_noise_distance_apply(&n, 50.0, 1.5), 50.0 + 0.005 + 0.06 * 1.5, 1e-12);
  ASSERT_NEAR(lidar_noise_distance_apply(&n, 50.0, -2.0), 50.0 + 0.005 - 0.12, 1e-12);

  // clamped at 0
  ASSERT_TRUE(lidar_noise_distance_apply(&n, 0.01, -10.0) == 0.0);

  // sigma = 0 gives exactly x + mu, whatever the sample
  n = distance_noise(0.0, 0.0, 0.25);
  ASSERT_TRUE(lidar_noise_distance_apply(&n, 3.0, 1e300) == 3.25);
  rng_key_t key = {.seed = 1};
  ASSERT_TRUE(lidar_noise_distance(&n, &key, 0, 3.0) == 3.25);

  // disabled: unchanged
  n = distance_noise(0.0, 0.0, 0.0);
  ASSERT_EQ(n.enabled, 0);
  ASSERT_TRUE(lidar_noise_distance(&n, &key, 0, 3.0) == 3.0);
  return 0;
}


TEST(noise_distance_statistics) {
  // sigma(40) = 0.01 + 0.002 * 40 = 0.09, mean offset 0.03: sample mean and std within 4 sigma
  // of their sampling errors
  lidar_distance_noise_t n = distance_noise(0.01, 0.002, 0.03);
  const int count = 100000;
  double sum = 0.0, s2 = 0.0;
  for (int i = 0; i < count; i++) {
    rng_key_t key = {.seed = 5, .stream = 2, .frame = 9, .index = (uint64_t)i};
    double x = lidar_noise_distance(&n, &key, 0, 40.0) - 40.03;
    sum += x;
    s2 += x * x;
  }
  double mean = sum / count;
  double sd = sqrt(s2 / count - mean * mean);
  ASSERT_NEAR(mean, 0.0, 4 * 0.09 / sqrt(count));
  ASSERT_NEAR(sd, 0.09, 4 * 0.09 / sqrt(2.0 * count));

  // the same key and slot give the same value; another slot an independent one
  rng_key_t key = {.seed = 5, .stream = 2, .frame = 9, .index = 17};
  double a = lidar_noise_distance(&n, &key, 0, 40.0);
  ASSERT_TRUE(a == lidar_noise_distance(&n, &key, 0, 40.0));
  ASSERT_TRUE(a != lidar_noise_distance(&n, &key, 1, 40.0));
  return 0;
}


TEST(noise_angle_rotates_about_the_optical_axes) {
  lidar_angle_noise_desc_t d = {.axis = LIDAR_ANGLE_AZIMUTH, .mean = 0.1, .stddev = 0.0};
  lidar_angle_noise_t n;
  ASSERT_OK(lidar_noise_angle_init(&n, &d, "lidar.angle_noise", NULL));
  double dir[3] = {cos(0.2) * cos(0.5), cos(0.2) * sin(0.5), sin(0.2)};
  double out[3];
  lidar_noise_angle_apply(&n, dir, 0.0, out);

  // azimuth noise on a ray at elevation 0.2: the angle between them is 0.1 and the rotation axis
  // y_opt lies in the vertical plane of the ray, so the new direction is unit length
  double c = dir[0] * out[0] + dir[1] * out[1] + dir[2] * out[2];
  ASSERT_NEAR(acos(c), 0.1, 1e-12);
  ASSERT_NEAR(out[0] * out[0] + out[1] * out[1] + out[2] * out[2], 1.0, 1e-14);

  // elevation noise on a horizontal ray changes the elevation only
  d.axis = LIDAR_ANGLE_ELEVATION;
  ASSERT_OK(lidar_noise_angle_init(&n, &d, "lidar.angle_noise", NULL));
  double h[3] = {cos(0.5), sin(0.5), 0.0};
  lidar_noise_angle_apply(&n, h, 0.0, out);
  ASSERT_NEAR(fabs(asin(out[2])), 0.1, 1e-12);
  ASSERT_NEAR(atan2(out[1], out[0]), 0.5, 1e-12);

  // a vertical ray uses e_y as x_opt
  double up[3] = {0, 0, 1};
  lidar_noise_angle_apply(&n, up, 0.0, out);
  ASSERT_NEAR(out[1], 0.0, 1e-15);
  ASSERT_NEAR(fabs(out[0]), sin(0.1), 1e-15);
  return 0;
}


TEST(noise_rejects_bad_configuration) {
  static const struct {
    lidar_distance_noise_desc_t d;
    const char* field;
  } bad[] = {
      {{-0.01, 0, 0}, "lidar.distance_noise.stddev_base = -0.01"},
      {{NAN, 0, 0}, "lidar.distance_noise.stddev_base = nan"},
      {{0, -1e-3, 0}, "lidar.distance_noise.stddev_slope = -0.001"},
      {{0, INFINITY, 0}, "lidar.distance_noise.stddev_slope = inf"},
      {{0, 0, NAN}, "lidar.distance_noise.mean = nan"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    lidar_distance_noise_t n = {.enabled = 7};
    err_msg_t msg = {{0}};
    ASSERT_EQ(lidar_noise_distance_init(&n, &bad[i].d, "lidar.distance_noise", &msg), ERR_INVAL);
    ASSERT_CONTAINS(msg.text, bad[i].field);
    ASSERT_EQ(n.enabled, 7);
  }
  lidar_angle_noise_desc_t a = {.axis = (lidar_angle_axis_t)5};
  lidar_angle_noise_t an;
  err_msg_t msg = {{0}};
  ASSERT_EQ(lidar_noise_angle_init(&an, &a, "lidar.angle_noise", &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "lidar.angle_noise.axis");
  a = (lidar_angle_noise_desc_t){.axis = LIDAR_ANGLE_AZIMUTH, .stddev = -1.0};
  ASSERT_EQ(lidar_noise_angle_init(&an, &a, "lidar.angle_noise", &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "lidar.angle_noise.stddev");

  // at most half a turn either way: a normal draw times 1e308 gave an infinite angle
  a = (lidar_angle_noise_desc_t){.stddev = 1e308};
  ASSERT_EQ(lidar_noise_angle_init(&an, &a, "lidar.angle_noise", &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "lidar.angle_noise.stddev = 1e+308 is outside [0, pi] rad");
  a = (lidar_angle_noise_desc_t){.mean = -3.2};
  ASSERT_EQ(lidar_noise_angle_init(&an, &a, "lidar.angle_noise", &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "lidar.angle_noise.mean = -3.2 is outside [-pi, pi] rad");
  return 0;
}


TEST(noise_angle_at_its_bounds_keeps_directions_unit) {
  // the widest noise accepted (mean and stddev pi) with the most extreme draws keeps every
  // direction a finite unit vector
  lidar_angle_noise_desc_t a = {.axis = LIDAR_ANGLE_ELEVATION, .mean = M_PI, .stddev = M_PI};
  lidar_angle_noise_t an;
  err_msg_t msg = {{0}};
  ASSERT_OK(lidar_noise_angle_init(&an, &a, "lidar.angle_noise", &msg));
  const double zs[3] = {lidar_noise_normal_quantile(1e-300), 0.0,
                        lidar_noise_normal_quantile(1.0 - 1e-16)};
  const double dir[3] = {0.6, 0.0, 0.8};
  for (int axis = 0; axis < 2; axis++) {
    an.axis = (lidar_angle_axis_t)axis;
    for (int i = 0; i < 3; i++) {
      double out[3];
      lidar_noise_angle_apply(&an, dir, zs[i], out);
      ASSERT_NEAR(out[0] * out[0] + out[1] * out[1] + out[2] * out[2], 1.0, 1e-12);
    }
  }
  return 0;
}
