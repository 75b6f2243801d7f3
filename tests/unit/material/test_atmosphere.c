// SPDX-License-Identifier: MIT
// test_atmosphere.c: Beer-Lambert attenuation, the gamma pdf and CDF of atmospheric returns and
// their sampling, against the known-answer values of docs/models/materials.md and the
// statistics of the gamma law.
#include <math.h>

#include "check.h"
#include "material/atmosphere.h"

#define REL 2e-8
#define FLOOR 1e-3


TEST(atmosphere_beer_lambert_known_answers) {
  static const double k[][3] = {
      {0.000402272, 100, 0.960571173}, {0.000402272, 1000, 0.668798808},
      {0.01, 50, 0.60653066},          {0.03, 100, 0.0497870684},
      {0.0599146455, 50.0, 0.05},
  };
  for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
    ASSERT_KAT(atmosphere_transmittance(k[i][0], k[i][1]), k[i][2], REL, FLOOR);
  }
  ASSERT_TRUE(atmosphere_transmittance(0.0, INFINITY) == 1.0);
  ASSERT_TRUE(atmosphere_transmittance(0.01, INFINITY) == 0.0);

  // Koschmieder: the default air coefficient, and 50 m fog
  ASSERT_KAT(ambient_koschmieder(7447.03), 0.000402272083, REL, 1e-6);
  ASSERT_KAT(ambient_koschmieder(50.0), 0.0599146455, REL, FLOOR);
  return 0;
}


// The series for short paths (-alpha x >= -1/16) against long double exp: within 0.6 ulp on a
// fine sweep of its range, and continuous with exp where the two meet.
TEST(atmosphere_transmittance_series_within_an_ulp) {
  double worst = 0.0;
  for (int i = 0; i <= 1000000; i++) {
    double y = -0.0625 * i / 1e6;
    double got = atmosphere_transmittance(1.0, -y);
    long double want = expl((long double)y);
    double ulp = nextafter((double)want, INFINITY) - (double)want;
    double err = (double)fabsl((long double)got - want) / ulp;
    worst = err > worst ? err : worst;
  }
  ASSERT_TRUE(worst <= 0.6);

  // either side of the edge of the series (the series, then exp): each within an ulp
  double edge = -0.0625, past = nextafter(edge, -1.0);
  for (int side = 0; side < 2; side++) {
    double y = side ? past : edge;
    long double want = expl((long double)y);
    double ulp = nextafter((double)want, INFINITY) - (double)want;
    ASSERT_TRUE(fabsl((long double)atmosphere_transmittance(1.0, -y) - want) <= ulp);
  }
  ASSERT_TRUE(atmosphere_transmittance(2e-4, 0.0) == 1.0);
  return 0;
}


TEST(atmosphere_gamma_known_answers) {
  static const double k[][5] = {
      {9.5, 0.52, 1, 0.000611186197, 7.84416878e-05},
      {9.5, 0.52, 2, 0.0323405056, 0.0104920012},
      {9.5, 0.52, 4.42, 0.260580208, 0.410132178},
      {9.5, 0.52, 4.94, 0.246738387, 0.543163874},
      {9.5, 0.52, 8, 0.0413205939, 0.957211041},
      {9.5, 0.52, 10, 0.00588217951, 0.994818455},
      {2.0, 1.0, 0.5, 0.30326533, 0.0902040104},
      {2.0, 1.0, 1, 0.367879441, 0.264241118},
      {2.0, 1.0, 3, 0.149361205, 0.800851727},
      {1.0, 2.0, 0, 0.5, 0},
      {1.0, 2.0, 1, 0.30326533, 0.39346934},
      {1.0, 2.0, 2, 0.183939721, 0.632120559},
      {0.5, 1.0, 0.25, 0.878782579, 0.520499878},
      {0.5, 1.0, 1, 0.207553749, 0.842700793},
  };
  for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
    fprintf(stderr, "# row %zu\n", i);
    ASSERT_KAT(atmosphere_gamma_pdf(k[i][2], k[i][0], k[i][1]), k[i][3], REL, FLOOR);
    ASSERT_KAT(atmosphere_gamma_cdf(k[i][2], k[i][0], k[i][1]), k[i][4], REL, FLOOR);
  }

  // the small tail to full relative precision: F(1; 9.5, 0.52)
  ASSERT_KAT(atmosphere_gamma_cdf(1.0, 9.5, 0.52), 7.84416878e-05, REL, 0.0);

  // pdf at 0 and below; CDF limits
  ASSERT_TRUE(atmosphere_gamma_pdf(0.0, 9.5, 0.52) == 0.0);
  ASSERT_TRUE(isinf(atmosphere_gamma_pdf(0.0, 0.5, 1.0)));
  ASSERT_TRUE(atmosphere_gamma_pdf(-1.0, 2.0, 1.0) == 0.0);
  ASSERT_TRUE(atmosphere_gamma_cdf(0.0, 2.0, 1.0) == 0.0);
  ASSERT_TRUE(atmosphere_gamma_cdf(INFINITY, 2.0, 1.0) == 1.0);
  ASSERT_NEAR(atmosphere_gamma_cdf(1e3, 9.5, 0.52), 1.0, 1e-15);
  return 0;
}


TEST(atmosphere_return_probability_known_answers) {
  ambient_material_t air = ambient_default_air();
  ASSERT_KAT(atmosphere_return_probability(&air, 3.0), 1.51914712e-06, REL, 0.0);
  ASSERT_KAT(atmosphere_return_probability(&air, 5.0), 8.86458732e-06, REL, 0.0);
  ASSERT_KAT(atmosphere_return_probability(&air, 100.0), 1.58899e-05, REL, 0.0);
  ASSERT_KAT(atmosphere_return_probability(&air, INFINITY), 1.58899e-05, REL, 0.0);
  air.return_scaling = 0.3;
  ASSERT_KAT(atmosphere_return_probability(&air, 5.0), 0.167362677, REL, FLOOR);
  return 0;
}


TEST(atmosphere_sampling_statistics) {
  // s = 0.3 (fog-like), segment of 5 m: the return fraction is s F(5) = 0.167362677 within 4
  // sigma of a binomial; the accepted offsets follow the gamma law truncated to [0, 5)
  ambient_material_t fog = ambient_default_air();
  fog.return_scaling = 0.3;
  const int n = 200000;
  int hits = 0;
  double sum = 0.0;
  int below_mode = 0;
  for (int i = 0; i < n; i++) {
    rng_key_t key = {.seed = 7, .stream = 3, .frame = 11, .index = (uint64_t)i};
    double xa;
    if (atmosphere_sample(&fog, 5.0, rng_uniform(&key, 100), &key, 101, &xa)) {
      ASSERT_TRUE(xa >= 0.0 && xa < 5.0);
      hits++;
      sum += xa;
      below_mode += xa < 4.42;
    }
  }
  double p = 0.167362677;
  double sd = sqrt(p * (1 - p) / n);
  ASSERT_NEAR((double)hits / n, p, 4 * sd);

  // P(x < 4.42 | x < 5) = F(4.42) / F(5)
  double q = atmosphere_gamma_cdf(4.42, 9.5, 0.52) / atmosphere_gamma_cdf(5.0, 9.5, 0.52);
  ASSERT_NEAR((double)below_mode / hits, q, 4 * sqrt(q * (1 - q) / hits));

  // an untruncated segment: mean k theta = 4.94 m, sd 1.60274764 m
  int m = 0;
  double s2 = 0.0;
  sum = 0.0;
  for (int i = 0; i < n; i++) {
    rng_key_t key = {.seed = 9, .stream = 1, .frame = 2, .index = (uint64_t)i};
    double xa;
    if (atmosphere_sample(&fog, INFINITY, rng_uniform(&key, 0), &key, 1, &xa)) {
      m++;
      sum += xa;
      s2 += xa * xa;
    }
  }
  ASSERT_NEAR((double)m / n, 0.3, 4 * sqrt(0.3 * 0.7 / n));
  double mean = sum / m;
  ASSERT_NEAR(mean, 4.94, 4 * 1.60274764 / sqrt(m));
  ASSERT_NEAR(sqrt(s2 / m - mean * mean), 1.60274764, 0.02);

  // s = 0: never
  fog.return_scaling = 0.0;
  rng_key_t key = {.seed = 1};
  double xa = -1.0;
  ASSERT_EQ(atmosphere_sample(&fog, INFINITY, 1e-300, &key, 0, &xa), 0);
  ASSERT_TRUE(xa == -1.0);
  return 0;
}
