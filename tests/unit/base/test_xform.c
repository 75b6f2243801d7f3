// SPDX-License-Identifier: MIT
// test_xform.c: poses and quaternions: the known-answer pose interpolation (docs/time.md),
// frames mounted on interpolated bodies (KAT-INT), rotation matrices by hand, and
// composition/inverse round trips.
#include "base/xform.h"

#include <string.h>

#include "check.h"

// Known-answer pass criterion for double precision: 2e-8 relative above a 1e-3 floor.
#define KAT_REL 2e-8
#define KAT_FLOOR 1e-3

// Round-trip identities hold to a few ulps of the magnitudes involved (|p| <= 10).
#define RT_TOL 1e-12


static void quat_axis_angle(double x, double y, double z, double angle, double dest[4]) {
  double n = sqrt(x * x + y * y + z * z);
  double s = sin(0.5 * angle) / n;
  dest[0] = cos(0.5 * angle);
  dest[1] = x * s;
  dest[2] = y * s;
  dest[3] = z * s;
}


// Deterministic pseudo-random numbers in [-1, 1) (xorshift64).
static double rnd(uint64_t* state) {
  uint64_t x = *state;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  *state = x;
  return (double)(x >> 11) / (double)(1ull << 52) - 1.0;
}


static pose_t random_pose(uint64_t* state) {
  pose_t a;
  for (int i = 0; i < 3; i++) {
    a.p[i] = 10.0 * rnd(state);
  }
  for (int i = 0; i < 4; i++) {
    a.q[i] = rnd(state);
  }
  xform_quat_normalize(a.q);
  return a;
}


#define ASSERT_QUAT_KAT(q, w, x, y, z)        \
  do {                                        \
    ASSERT_KAT((q)[0], (w), KAT_REL, KAT_FLOOR); \
    ASSERT_KAT((q)[1], (x), KAT_REL, KAT_FLOOR); \
    ASSERT_KAT((q)[2], (y), KAT_REL, KAT_FLOOR); \
    ASSERT_KAT((q)[3], (z), KAT_REL, KAT_FLOOR); \
  } while (0)


TEST(xform_slerp_identity_to_rz90_kat) {
  double id[4] = {1, 0, 0, 0}, rz[4], q[4];
  quat_axis_angle(0, 0, 1, M_PI / 2, rz);
  xform_slerp(id, rz, 0.5, q);
  ASSERT_QUAT_KAT(q, 0.923879533, 0, 0, 0.382683432);
  xform_slerp(id, rz, 0.25, q);
  ASSERT_QUAT_KAT(q, 0.98078528, 0, 0, 0.195090322);
  return 0;
}


TEST(xform_slerp_takes_the_shortest_arc_kat) {
  double id[4] = {1, 0, 0, 0}, rz[4], q[4];
  quat_axis_angle(0, 0, 1, M_PI / 2, rz);
  for (int i = 0; i < 4; i++) {
    rz[i] = -rz[i];
  }
  xform_slerp(id, rz, 0.5, q);
  ASSERT_QUAT_KAT(q, 0.923879533, 0, 0, 0.382683432);
  return 0;
}


TEST(xform_slerp_general_axes_kat) {
  double a[4], b[4], q[4];
  quat_axis_angle(0, 0, 1, M_PI / 2, a);
  quat_axis_angle(1, 1, 0, 2.0, b);
  xform_slerp(a, b, 0.3, q);
  ASSERT_QUAT_KAT(q, 0.76458677, 0.222972017, 0.222972017, 0.562115674);
  return 0;
}


TEST(xform_interpolate_position_and_ray_direction_kat) {
  // sensor at 10 m/s over a 0.01 s step, ray fired 0.004 s in: s = 0.4, yaw 0 -> 90 deg
  pose_t a = xform_identity(), b = xform_identity();
  a.p[2] = 1.0;
  b.p[0] = 0.1;
  b.p[2] = 1.0;
  quat_axis_angle(0, 0, 1, M_PI / 2, b.q);
  pose_t m = xform_interpolate(&a, &b, 0.4);
  ASSERT_KAT(m.p[0], 0.04, KAT_REL, KAT_FLOOR);
  ASSERT_KAT(m.p[1], 0.0, KAT_REL, KAT_FLOOR);
  ASSERT_KAT(m.p[2], 1.0, KAT_REL, KAT_FLOOR);
  double fwd[3] = {1, 0, 0}, d[3];
  xform_quat_rotate(m.q, fwd, d);
  ASSERT_KAT(d[0], 0.809016994, KAT_REL, KAT_FLOOR);
  ASSERT_KAT(d[1], 0.587785252, KAT_REL, KAT_FLOOR);
  ASSERT_KAT(d[2], 0.0, KAT_REL, KAT_FLOOR);
  return 0;
}


TEST(xform_slerp_endpoints_and_near_parallel) {
  uint64_t st = 0x9e3779b97f4a7c15ull;
  for (int k = 0; k < 100; k++) {
    pose_t a = random_pose(&st), b = random_pose(&st);
    double q[4];
    xform_slerp(a.q, b.q, 0.0, q);
    for (int i = 0; i < 4; i++) {
      ASSERT_NEAR(q[i], a.q[i], RT_TOL);
    }

    // at s = 1 the result is b or -b (the same rotation)
    xform_slerp(a.q, b.q, 1.0, q);
    double sgn = q[0] * b.q[0] + q[1] * b.q[1] + q[2] * b.q[2] + q[3] * b.q[3] < 0 ? -1.0 : 1.0;
    for (int i = 0; i < 4; i++) {
      ASSERT_NEAR(q[i], sgn * b.q[i], RT_TOL);
    }
  }

  // identical ends take the normalised-lerp branch and return the same unit quaternion
  double r[4], q[4];
  quat_axis_angle(1, 2, 3, 0.7, r);
  xform_slerp(r, r, 0.3, q);
  for (int i = 0; i < 4; i++) {
    ASSERT_NEAR(q[i], r[i], RT_TOL);
  }
  return 0;
}


TEST(xform_quat_to_mat_by_hand) {
  double q[4], m[9];

  // Rz(90): x -> y, y -> -x
  quat_axis_angle(0, 0, 1, M_PI / 2, q);
  xform_quat_to_mat(q, m);
  const double rz[9] = {0, -1, 0, 1, 0, 0, 0, 0, 1};
  for (int i = 0; i < 9; i++) {
    ASSERT_NEAR(m[i], rz[i], 1e-15);
  }

  // Rx(90): y -> z, z -> -y
  quat_axis_angle(1, 0, 0, M_PI / 2, q);
  xform_quat_to_mat(q, m);
  const double rx[9] = {1, 0, 0, 0, 0, -1, 0, 1, 0};
  for (int i = 0; i < 9; i++) {
    ASSERT_NEAR(m[i], rx[i], 1e-15);
  }

  // 120 deg about (1, 1, 1), q = (1/2, 1/2, 1/2, 1/2): cycles x -> y -> z -> x (exact)
  double c[4] = {0.5, 0.5, 0.5, 0.5};
  xform_quat_to_mat(c, m);
  const double rc[9] = {0, 0, 1, 1, 0, 0, 0, 1, 0};
  for (int i = 0; i < 9; i++) {
    ASSERT_EQ(m[i] == rc[i], 1);
  }
  return 0;
}


TEST(xform_rotate_matches_matrix_and_product) {
  uint64_t st = 12345;
  for (int k = 0; k < 200; k++) {
    pose_t a = random_pose(&st), b = random_pose(&st);
    double v[3] = {rnd(&st), rnd(&st), rnd(&st)};

    // R(q) v by matrix and by quaternion
    double m[9], mv[3], qv[3];
    xform_quat_to_mat(a.q, m);
    for (int i = 0; i < 3; i++) {
      mv[i] = m[3 * i] * v[0] + m[3 * i + 1] * v[1] + m[3 * i + 2] * v[2];
    }
    xform_quat_rotate(a.q, v, qv);
    for (int i = 0; i < 3; i++) {
      ASSERT_NEAR(qv[i], mv[i], RT_TOL);
    }

    // R(a b) v = R(a) R(b) v, also with dest aliasing the inputs
    double ab[4], abv[3], bv[3], a_bv[3];
    xform_quat_mul(a.q, b.q, ab);
    xform_quat_rotate(ab, v, abv);
    xform_quat_rotate(b.q, v, bv);
    xform_quat_rotate(a.q, bv, a_bv);
    for (int i = 0; i < 3; i++) {
      ASSERT_NEAR(abv[i], a_bv[i], RT_TOL);
    }
    double alias[4] = {a.q[0], a.q[1], a.q[2], a.q[3]};
    xform_quat_mul(alias, b.q, alias);
    for (int i = 0; i < 4; i++) {
      ASSERT_NEAR(alias[i], ab[i], 0.0);
    }
    xform_quat_rotate(a.q, bv, bv);
    for (int i = 0; i < 3; i++) {
      ASSERT_NEAR(bv[i], a_bv[i], 0.0);
    }
  }
  return 0;
}


TEST(xform_compose_and_inverse_round_trip) {
  uint64_t st = 777;
  for (int k = 0; k < 200; k++) {
    pose_t a = random_pose(&st), b = random_pose(&st);
    double v[3] = {5 * rnd(&st), 5 * rnd(&st), 5 * rnd(&st)};

    // a * a^-1 = identity (q up to sign)
    pose_t ai = xform_inverse(&a);
    pose_t id = xform_compose(&a, &ai);
    for (int i = 0; i < 3; i++) {
      ASSERT_NEAR(id.p[i], 0.0, RT_TOL * 10);
    }
    ASSERT_NEAR(fabs(id.q[0]), 1.0, RT_TOL);

    // apply(a * b, v) = apply(a, apply(b, v))
    pose_t ab = xform_compose(&a, &b);
    double x1[3], x2[3], bv[3];
    xform_apply(&ab, v, x1);
    xform_apply(&b, v, bv);
    xform_apply(&a, bv, x2);
    for (int i = 0; i < 3; i++) {
      ASSERT_NEAR(x1[i], x2[i], RT_TOL * 20);
    }

    // apply(a^-1, apply(a, v)) = v
    double av[3], back[3];
    xform_apply(&a, v, av);
    xform_apply(&ai, av, back);
    for (int i = 0; i < 3; i++) {
      ASSERT_NEAR(back[i], v[i], RT_TOL * 20);
    }
  }
  return 0;
}


TEST(xform_normalize_returns_norm_and_handles_zero) {
  double q[4] = {0, 3, 0, 4};
  ASSERT_NEAR(xform_quat_normalize(q), 5.0, 0.0);
  ASSERT_NEAR(q[1], 0.6, 1e-16);
  ASSERT_NEAR(q[3], 0.8, 1e-16);
  double z[4] = {0, 0, 0, 0};
  ASSERT_NEAR(xform_quat_normalize(z), 0.0, 0.0);
  ASSERT_NEAR(z[0], 1.0, 0.0);
  pose_t id = xform_identity();
  ASSERT_NEAR(id.q[0], 1.0, 0.0);
  ASSERT_NEAR(id.p[0] + id.p[1] + id.p[2] + id.q[1] + id.q[2] + id.q[3], 0.0, 0.0);
  return 0;
}


// Both normalisations against an independent one in long double (64-bit significand, with the
// sum of squares of exact double products): every component within 5 units of roundoff
// (5 * 2^-53 relative) of the truth, over magnitudes from 1e-140 to 1e140 (xform_quat_unit's
// own path) and beyond (its fallback); xform_quat_unit returns the norm and keeps a quaternion
// whose squares sum to exactly 1 bit for bit.
TEST(xform_quat_unit_is_within_roundoff_of_long_double_truth) {
  uint64_t seed = 0x5eed1234abcdull;
  const double bound = 5.0 * 0x1p-53;
  static const double scale[] = {1e-200, 1e-140, 1e-20, 1e-3, 1.0, 7.0, 1e20, 1e140, 1e200};
  for (size_t k = 0; k < sizeof(scale) / sizeof(scale[0]); k++) {
    for (int n = 0; n < 2000; n++) {
      double q[4], a[4], b[4];
      long double s = 0.0L;
      for (int i = 0; i < 4; i++) {
        q[i] = scale[k] * rnd(&seed);
        s += (long double)q[i] * (long double)q[i];
      }
      long double r = sqrtl(s);
      memcpy(a, q, sizeof(q));
      memcpy(b, q, sizeof(q));
      double ra = xform_quat_unit(a);
      xform_quat_normalize(b);
      ASSERT_NEAR((double)(ra / r), 1.0, 3.0 * 0x1p-53);
      for (int i = 0; i < 4; i++) {
        long double t = (long double)q[i] / r;
        double tol = bound * fabs((double)t);
        ASSERT_NEAR(a[i], (double)t, tol);
        ASSERT_NEAR(b[i], (double)t, tol);
      }
    }
  }
  // squares summing to exactly 1 (0.6 and 0.8 would not: neither is a binary fraction)
  static const double unit[][4] = {{1, 0, 0, 0}, {0, 0, 0, -1}, {0.5, -0.5, 0.5, 0.5},
                                   {0, -1, 0, 0}};
  for (size_t k = 0; k < sizeof(unit) / sizeof(unit[0]); k++) {
    double q[4];
    memcpy(q, unit[k], sizeof(q));
    ASSERT_NEAR(xform_quat_unit(q), 1.0, 0.0);
    ASSERT_EQ(memcmp(q, unit[k], sizeof(q)), 0);
  }
  double z[4] = {0, 0, 0, 0};
  ASSERT_NEAR(xform_quat_unit(z), 0.0, 0.0);
  ASSERT_NEAR(z[0], 1.0, 0.0);
  return 0;
}


TEST(xform_norm_neither_overflows_nor_underflows) {
  double big[3] = {3e200, 4e200, 0.0};
  double tiny[3] = {3e-200, 4e-200, 0.0};
  double zero[3] = {0.0, 0.0, 0.0};
  ASSERT_NEAR(xform_norm(big, 3) / 5e200, 1.0, 1e-15);
  ASSERT_NEAR(xform_norm(tiny, 3) / 5e-200, 1.0, 1e-15);
  ASSERT_EQ(xform_norm(zero, 3) == 0.0, 1);
  double q[4] = {0.0, 0.0, 3e300, 4e300};  // (w, x, y, z)
  xform_quat_normalize(q);
  ASSERT_NEAR(q[2], 0.6, 1e-15);
  ASSERT_NEAR(q[3], 0.8, 1e-15);
  return 0;
}


TEST(xform_normalize_survives_components_near_dbl_max) {
  // the norm of these exceeds DBL_MAX: the quaternion is still normalised, the norm is +inf
  double q[4] = {1.5e308, 1.5e308, 1.5e308, 1.5e308};
  ASSERT_TRUE(isinf(xform_quat_normalize(q)));
  for (int i = 0; i < 4; i++) {
    ASSERT_NEAR(q[i], 0.5, 1e-15);
  }
  double t[4] = {0.0, 4e-310, 0.0, 3e-310};  // subnormal components
  ASSERT_TRUE(xform_quat_normalize(t) > 0.0);
  ASSERT_NEAR(t[1], 0.8, 1e-15);
  ASSERT_NEAR(t[3], 0.6, 1e-15);
  return 0;
}


// KAT-INT (docs/time.md): body at the origin, identity at s = 0, +90 deg about z at s = 1, a
// frame mounted at local (1, 0, 0): on the arc, (0.7071067812, 0.7071067812, 0) at s = 0.5 and
// (0.9238795325, 0.3826834324, 0) at s = 0.25; the chord would give (0.5, 0.5, 0).
TEST(xform_mounted_frame_moves_on_the_arc_kat_int) {
  pose_t b0 = xform_identity(), b1 = xform_identity();
  quat_axis_angle(0, 0, 1, M_PI / 2, b1.q);
  pose_t local = xform_identity();
  local.p[0] = 1.0;
  static const struct {
    double s, x, y;
  } kKat[] = {{0.5, 0.7071067812, 0.7071067812}, {0.25, 0.9238795325, 0.3826834324}};
  for (int i = 0; i < 2; i++) {
    pose_t m = xform_mounted(&b0, &b1, &local, kKat[i].s);
    ASSERT_NEAR(m.p[0], kKat[i].x, KAT_REL * fmax(fabs(kKat[i].x), KAT_FLOOR));
    ASSERT_NEAR(m.p[1], kKat[i].y, KAT_REL * fmax(fabs(kKat[i].y), KAT_FLOOR));
    ASSERT_NEAR(m.p[2], 0.0, 1e-15);

    // the frame turns with the body: its orientation is the body's, Rz(90 s deg)
    ASSERT_NEAR(m.q[0], cos(kKat[i].s * M_PI / 4), 1e-15);
    ASSERT_NEAR(m.q[3], sin(kKat[i].s * M_PI / 4), 1e-15);
  }

  // a moving body origin is lerped, and the mount's own rotation is kept
  b0.p[0] = 2.0;
  b1.p[0] = 4.0;
  quat_axis_angle(0, 0, 1, M_PI / 2, local.q);
  pose_t m = xform_mounted(&b0, &b1, &local, 0.5);
  ASSERT_NEAR(m.p[0], 3.0 + 0.7071067811865476, 1e-15);
  ASSERT_NEAR(m.p[1], 0.7071067811865476, 1e-15);
  ASSERT_NEAR(m.q[0], cos(3 * M_PI / 8), 1e-15);
  ASSERT_NEAR(m.q[3], sin(3 * M_PI / 8), 1e-15);
  return 0;
}
