// SPDX-License-Identifier: MIT
// test_triaxial.c: KAT-IMU of the model documentation (docs/models/imu.md): accelerometer,
// gyroscope and magnetometer ideal signals, the triaxial chain with clamp, bias and cross-axis
// sensitivity, the linear-acceleration effect, noise densities; and statistics of every noise
// term over 10^4 or more samples of the counter-based generator.
#include <math.h>

#include "base/rng.h"
#include "check.h"
#include "imu/imu.h"
#include "imu/triaxial.h"

#define KAT_REL 2e-8
#define KAT_FLOOR 1e-3

// Rz(+90 deg): columns (0,1,0), (-1,0,0), (0,0,1).
static const double kRz90[4] = {0.70710678118654752, 0, 0, 0.70710678118654752};
static const double kId[4] = {1, 0, 0, 0};
static const double kG[3] = {0, 0, -9.80665};

#define ASSERT_V3(v, x, y, z, floor_)                 \
  do {                                                \
    ASSERT_KAT((v)[0], (x), KAT_REL, (floor_));       \
    ASSERT_KAT((v)[1], (y), KAT_REL, (floor_));       \
    ASSERT_KAT((v)[2], (z), KAT_REL, (floor_));       \
  } while (0)

static const double kZero[3] = {0, 0, 0};

TEST(acc1_centripetal) {
  double w[3] = {0, 0, 2}, r[3] = {0.5, 0, 0}, u[3];
  accel_ideal(kId, kZero, kZero, w, r, kG, 0, u);
  ASSERT_V3(u, -2, 0, 9.80665, KAT_FLOOR);
  accel_ideal(kId, kZero, kZero, w, r, kG, 1, u);
  ASSERT_V3(u, -2, 0, -9.80665, KAT_FLOOR);
  return 0;
}

TEST(acc0_rest_reads_plus_g) {
  double u[3];
  accel_ideal(kId, kZero, kZero, kZero, kZero, kG, 0, u);
  ASSERT_V3(u, 0, 0, 9.80665, KAT_FLOOR);
  return 0;
}

static void acc2_ideal(double u[3]) {
  double a[3] = {0.01 / 0.01, 0, 0}, alpha[3] = {0, 0, 0.005 / 0.01}, w[3] = {0, 0, 2};
  double r[3] = {0.5, 0, 0};
  accel_ideal(kRz90, a, alpha, w, r, kG, 0, u);
}

TEST(acc2_full) {
  double u[3], out[3];
  acc2_ideal(u);
  ASSERT_V3(u, 0.25, 1, 9.80665, KAT_FLOOR);
  triax_config_t c;
  triax_config_default(&c);
  for (int i = 0; i < 3; i++) {
    c.lower[i] = -19.6133;
    c.upper[i] = 19.6133;
  }
  c.bias[0] = 0.1;
  c.bias[1] = -0.1;
  c.bias[2] = 0.05;
  triax_cross_scalar(0.01, c.cross);
  triax_chain(&c, u, kZero, kZero, 100.0, out);
  ASSERT_V3(out, 0.4575665, 1.0020665, 9.86915, KAT_FLOOR);
  for (int i = 0; i < 3; i++) {
    c.lower[i] = -8;
    c.upper[i] = 8;
  }
  triax_chain(&c, u, kZero, kZero, 100.0, out);
  ASSERT_V3(out, 0.4395, 0.984, 8.0625, KAT_FLOOR);
  return 0;
}

TEST(gyr1_chain_and_lae) {
  double w[3] = {0.1, -0.2, 0.3}, u[3], out[3];
  gyro_ideal(kRz90, w, u);
  ASSERT_V3(u, -0.2, -0.1, 0.3, KAT_FLOOR);
  triax_config_t c;
  triax_config_default(&c);
  for (int i = 0; i < 3; i++) {
    c.lower[i] = -0.25;
    c.upper[i] = 0.25;
  }
  c.bias[0] = 0.001;
  c.bias[1] = 0.002;
  c.bias[2] = -0.003;
  triax_cross_scalar(0.02, c.cross);
  triax_chain(&c, u, kZero, kZero, 100.0, out);
  ASSERT_V3(out, -0.19602, -0.09704, 0.24106, KAT_FLOOR);
  double lae[9] = {0.001, 0, 0, 0, 0.001, 0, 0, 0, 0.002}, acc[3];
  acc2_ideal(acc);
  gyro_lae(lae, acc, out);
  ASSERT_V3(out, -0.19577, -0.09604, 0.2606733, KAT_FLOOR);
  return 0;
}

TEST(mag1_rotated_uniform_field_and_bias) {
  field_magnetic_t f = {.uniform = {2.0e-5, 0, -4.5e-5}};
  double p[3] = {3, -2, 1}, u[3], out[3];
  mag_ideal(kRz90, &f, p, u);
  ASSERT_V3(u, 0, -2e-5, -4.5e-5, 1e-12);
  triax_config_t c;
  triax_config_default(&c);
  c.bias[0] = 1e-7;
  c.bias[1] = -1e-7;
  triax_chain(&c, u, kZero, kZero, 100.0, out);
  ASSERT_V3(out, 1e-7, -2.01e-5, -4.5e-5, 1e-12);
  return 0;
}

TEST(unit_conversions) {
  // NOISE1, NOISE2, UNIT: 150 ug/sqrt(Hz), 0.005 (deg/s)/sqrt(Hz), 1 (deg/s)/g
  double n_acc = 150e-6 * 9.80665;
  ASSERT_KAT(n_acc, 0.0014709975, KAT_REL, KAT_FLOOR);
  ASSERT_KAT(n_acc * sqrt(100.0), 0.014709975, KAT_REL, KAT_FLOOR);
  ASSERT_KAT(n_acc * sqrt(1000.0), 0.0465170253, KAT_REL, KAT_FLOOR);
  double n_g = 0.005 * M_PI / 180.0;
  ASSERT_KAT(n_g * sqrt(200.0), 0.00123413415, KAT_REL, KAT_FLOOR);
  ASSERT_KAT(M_PI / 180.0 / 9.80665, 0.00177974054, KAT_REL, KAT_FLOOR);
  return 0;
}

TEST(scaling_follows_noise_and_precedes_spectral_noise) {
  triax_config_t c;
  triax_config_default(&c);
  double u[3] = {1, 2, 3}, white[3] = {1, 1, 1}, spec[3] = {1, -1, 2}, out[3];
  for (int i = 0; i < 3; i++) {
    c.noise_stddev[i] = 0.5;
    c.scaling[i] = 2.0;
    c.spectral_density[i] = 0.1;
  }
  triax_chain(&c, u, white, spec, 4.0, out);
  // (u + 0.5) * 2 + 0.1 * 2 * n
  ASSERT_NEAR(out[0], 3.0 + 0.2, 1e-15);
  ASSERT_NEAR(out[1], 5.0 - 0.2, 1e-15);
  ASSERT_NEAR(out[2], 7.0 + 0.4, 1e-15);
  return 0;
}

TEST(bad_configuration_names_the_field) {
  triax_config_t c;
  err_msg_t msg;
  triax_config_default(&c);
  ASSERT_OK(triax_config_check(&c, "imu.gyroscope", &msg));
  c.noise_stddev[1] = -1;
  ASSERT_EQ(triax_config_check(&c, "imu.gyroscope", &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "imu.gyroscope.noise_stddev.y");
  triax_config_default(&c);
  c.lower[2] = 1;
  c.upper[2] = 0;
  ASSERT_EQ(triax_config_check(&c, "imu.accelerometer", &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "imu.accelerometer.range.lower.z");
  triax_config_default(&c);
  c.bias_instability = 0.1;
  ASSERT_EQ(triax_config_check(&c, "imu.magnetometer", &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "drift.bias_correlation_time");
  triax_config_default(&c);
  c.axes = 8;
  ASSERT_EQ(triax_config_check(&c, "imu.magnetometer", &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "imu.magnetometer.axes");
  triax_config_default(&c);
  c.precision = NAN;
  ASSERT_EQ(triax_config_check(&c, "imu.accelerometer", &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "drift.precision");
  return 0;
}

//---------------- Noise statistics (n samples; 4-sigma bounds of the estimators)

#define NS 20000

static double normal_at(uint64_t k, uint32_t draw) {
  rng_key_t key = {.seed = 7, .stream = 3, .frame = k, .index = 0};
  return rng_normal(&key, draw);
}

// Mean within 4 sigma/sqrt(n); std within 4 sigma/sqrt(2n) (normal samples).
#define ASSERT_MEAN_STD(mean, std, mu, sigma, n)                        \
  do {                                                                  \
    ASSERT_NEAR(mean, mu, 4.0 * (sigma) / sqrt((double)(n)));          \
    ASSERT_NEAR(std, sigma, 4.0 * (sigma) / sqrt(2.0 * (double)(n)));  \
  } while (0)

TEST(white_and_spectral_noise_statistics) {
  triax_config_t c;
  triax_config_default(&c);
  c.noise_stddev[0] = 0.3;
  c.spectral_density[1] = 150e-6 * 9.80665;   // NOISE1: at 100 Hz, sigma = 0.014709975
  double s0 = 0, s1 = 0, q0 = 0, q1 = 0;
  for (int k = 0; k < NS; k++) {
    double u[3] = {1.0, 2.0, 0}, white[3], spec[3], out[3];
    for (uint32_t i = 0; i < 3; i++) {
      white[i] = normal_at((uint64_t)k, i);
      spec[i] = normal_at((uint64_t)k, 3 + i);
    }
    triax_chain(&c, u, white, spec, 100.0, out);
    s0 += out[0] - 1.0;
    q0 += (out[0] - 1.0) * (out[0] - 1.0);
    s1 += out[1] - 2.0;
    q1 += (out[1] - 2.0) * (out[1] - 2.0);
    ASSERT_TRUE(out[2] == 0.0);   // no noise configured on z: exactly the signal
  }
  double m0 = s0 / NS, m1 = s1 / NS;
  ASSERT_MEAN_STD(m0, sqrt(q0 / NS - m0 * m0), 0.0, 0.3, NS);
  ASSERT_MEAN_STD(m1, sqrt(q1 / NS - m1 * m1), 0.0, 0.014709975, NS);
  return 0;
}

TEST(turn_on_bias_statistics) {
  triax_config_t c;
  triax_config_default(&c);
  c.turn_on_mean = 0.05;
  c.turn_on_stddev = 0.01;
  double s = 0, q = 0;
  for (int k = 0; k < NS; k++) {
    triax_drift_t st = {0}, next;
    double n[9], add[3];
    for (uint32_t i = 0; i < 9; i++) {
      n[i] = normal_at((uint64_t)k, i);
    }
    triax_drift_advance(&c, &st, 0.01, n, &next, add);
    s += add[0];
    q += add[0] * add[0];
    // the turn-on bias stays put afterwards
    double add2[3];
    triax_drift_advance(&c, &next, 0.01, n, &next, add2);
    ASSERT_TRUE(add2[0] == add[0]);
  }
  double m = s / NS;
  ASSERT_MEAN_STD(m, sqrt(q / NS - m * m), 0.05, 0.01, NS);
  return 0;
}

TEST(gauss_markov_stationary_std_and_lag1_autocorrelation) {
  triax_config_t c;
  triax_config_default(&c);
  c.bias_instability = 0.02;
  c.bias_tau = 0.5;
  const double dt = 0.01;
  const double phi = exp(-dt / 0.5);
  // many independent chains of 2 samples: (b0, b1) with b0 stationary
  double s0 = 0, q0 = 0, cross = 0, q1 = 0;
  for (int k = 0; k < NS; k++) {
    triax_drift_t st = {0};
    double n[9], add0[3], add1[3];
    for (uint32_t i = 0; i < 9; i++) {
      n[i] = normal_at((uint64_t)k, i);
    }
    triax_drift_advance(&c, &st, dt, n, &st, add0);
    for (uint32_t i = 0; i < 9; i++) {
      n[i] = normal_at((uint64_t)k, 20 + i);
    }
    triax_drift_advance(&c, &st, dt, n, &st, add1);
    s0 += add0[1];
    q0 += add0[1] * add0[1];
    q1 += add1[1] * add1[1];
    cross += add0[1] * add1[1];
  }
  double sd0 = sqrt(q0 / NS), sd1 = sqrt(q1 / NS);
  ASSERT_MEAN_STD(s0 / NS, sd0, 0.0, 0.02, NS);
  ASSERT_NEAR(sd1, 0.02, 4.0 * 0.02 / sqrt(2.0 * NS));
  // lag-1 autocorrelation phi; the estimator's std is about (1 - phi^2) / sqrt(n)
  double rho = cross / sqrt(q0 * q1);
  ASSERT_NEAR(rho, phi, 4.0 * (1.0 - phi * phi) / sqrt((double)NS) + 1e-3);
  return 0;
}

TEST(random_walk_variance_grows_linearly) {
  triax_config_t c;
  triax_config_default(&c);
  c.random_walk = 0.3;          // unit / sqrt(s)
  const double dt = 0.02;
  const int K = 25;
  const int chains = 10000;
  double q[26] = {0};
  for (int k = 0; k < chains; k++) {
    triax_drift_t st = {0};
    for (int j = 0; j <= K; j++) {
      double n[9], add[3];
      for (uint32_t i = 0; i < 9; i++) {
        n[i] = normal_at((uint64_t)k * 64 + (uint64_t)j, 40 + i);
      }
      triax_drift_advance(&c, &st, dt, n, &st, add);
      q[j] += add[2] * add[2];
    }
  }
  ASSERT_TRUE(q[0] == 0.0);     // starts at 0
  for (int j = 5; j <= K; j += 10) {
    double var = 0.09 * j * dt;
    // variance of a sample variance of normals: 2 var^2 / n
    ASSERT_NEAR(q[j] / chains, var, 4.0 * var * sqrt(2.0 / chains));
  }
  return 0;
}

TEST(quantization_step) {
  triax_config_t c;
  triax_config_default(&c);
  c.precision = 0.25;
  double u[3] = {0.12, 0.13, -0.374}, out[3];
  triax_quantize(&c, u, out);
  ASSERT_TRUE(out[0] == 0.0);
  ASSERT_TRUE(out[1] == 0.25);
  ASSERT_TRUE(out[2] == -0.25);
  // every output is a multiple of the precision and within half a step
  for (int k = 0; k < NS; k++) {
    double v[3] = {normal_at((uint64_t)k, 0), normal_at((uint64_t)k, 1), 0}, o[3];
    triax_quantize(&c, v, o);
    ASSERT_TRUE(fabs(o[0] - v[0]) <= 0.125 + 1e-15);
    ASSERT_TRUE(o[0] / 0.25 == round(o[0] / 0.25));
  }

  // a step finer than the values' own resolution quantizes nothing (it gave inf)
  c.precision = 5e-324;
  double g[3] = {9.80665, -1e-3, 0.0};
  triax_quantize(&c, g, out);
  for (int i = 0; i < 3; i++) {
    ASSERT_TRUE(out[i] == g[i]);
  }
  return 0;
}
