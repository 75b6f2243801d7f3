// SPDX-License-Identifier: MIT
// test_encoder.c: KAT-ENC of the model documentation (docs/models/joint_sensors.md): wrap,
// clamp, binning, odometer distances, the speed-estimation table and the speed across the
// wrap; the sensors over hand-built step views (wrap and clamp at the range ends, timeout,
// noise statistics); configuration errors.
#include <math.h>
#include <string.h>

#include "base/rng.h"
#include "check.h"
#include "joint/encoder.h"
#include "joint/odometer.h"

#define KAT_REL 2e-8
#define KAT_FLOOR 1e-3

TEST(kat_enc_wrap_clamp_binning) {
  const double tp = 2.0 * M_PI, res = 2.0 * M_PI / 1024;
  ASSERT_KAT(encoder_wrap(7.0, 0, tp), 0.716814693, KAT_REL, KAT_FLOOR);
  ASSERT_KAT(encoder_wrap(-1.0, 0, tp), 5.28318531, KAT_REL, KAT_FLOOR);
  ASSERT_KAT(encoder_wrap(tp, 0, tp), 0.0, KAT_REL, KAT_FLOOR);
  ASSERT_KAT(encoder_wrap(4.0, -M_PI, M_PI), -2.28318531, KAT_REL, KAT_FLOOR);
  encoder_config_t c;
  encoder_config_default(&c, ENCODER_MODE_ABSOLUTE);
  c.joint_id = 1;
  c.lower = -M_PI / 2;
  c.upper = M_PI / 2;
  ASSERT_KAT(encoder_measure(&c, 2.0, 0.0), 1.57079633, KAT_REL, KAT_FLOOR);
  ASSERT_KAT(encoder_measure(&c, -2.0, 0.0), -1.57079633, KAT_REL, KAT_FLOOR);
  ASSERT_KAT(res, 0.00613592315, KAT_REL, KAT_FLOOR);
  ASSERT_KAT(encoder_bin(1.0, res), 0.994019551, KAT_REL, KAT_FLOOR);
  ASSERT_EQ((long long)floor(1.0 / res), 162);
  ASSERT_KAT(encoder_bin(-0.001, res), -0.00613592315, KAT_REL, KAT_FLOOR);
  encoder_config_default(&c, ENCODER_MODE_INCREMENTAL);
  c.joint_id = 1;
  c.resolution = res;
  ASSERT_KAT(encoder_measure(&c, 7.0, 0.0), 0.711767086, KAT_REL, KAT_FLOOR);
  return 0;
}

TEST(kat_odometer) {
  odometer_config_t c;
  odometer_config_default(&c);
  c.joint_id = 1;
  ASSERT_KAT(c.wheel_radius, 0.5, KAT_REL, KAT_FLOOR);
  ASSERT_EQ(c.pulses_per_revolution, 1024);
  c.pulses_per_revolution = 0;
  ASSERT_KAT(odometer_measure(&c, 10.0, 0.0), 5.0, KAT_REL, KAT_FLOOR);
  c.pulses_per_revolution = 1024;
  ASSERT_KAT(2 * M_PI * 0.5 / 1024, 0.00306796158, KAT_REL, KAT_FLOOR);
  ASSERT_KAT(odometer_measure(&c, 10.0, 0.0), 4.99770941, KAT_REL, KAT_FLOOR);
  ASSERT_KAT(odometer_measure(&c, -3.0, 0.0), -1.50023321, KAT_REL, KAT_FLOOR);

  // bins finer than the values' resolution bin nothing: a 5e-324 m wheel's bin width underflows
  // to 0 (it gave NaN), a 5e-324 encoder resolution overflowed u / res (it gave inf)
  c.wheel_radius = 5e-324;
  ASSERT_TRUE(odometer_measure(&c, 10.0, 0.0) == c.wheel_radius * 10.0);
  ASSERT_TRUE(encoder_bin(1.0, 5e-324) == 1.0);
  ASSERT_TRUE(encoder_bin(0.0, 0.0) == 0.0);
  return 0;
}

TEST(kat_speed_estimation_table) {
  static const double kMeasured[15] = {0.0, 0.0, 0.0, 0.1, 0.1, 0.1, 0.1, 0.2,
                                       0.2, 0.2, 0.3, 0.3, 0.3, 0.4, 0.4};
  static const double kSpeed[15] = {0, 0, 0, 3.33333, 3.33333, 3.33333, 3.33333, 2.5,
                                    2.5, 2.5, 3.33333, 3.33333, 3.33333, 3.33333, 3.33333};
  encoder_config_t c;
  encoder_config_default(&c, ENCODER_MODE_ABSOLUTE);
  c.joint_id = 1;
  c.resolution = 0.1;
  c.lower = -100;
  c.upper = 100;
  encoder_speed_t s = {0};
  for (int k = 0; k < 15; k++) {
    double t = 0.01 * k;
    double m = encoder_measure(&c, 0.013 + 3.1 * t, 0.0);
    ASSERT_NEAR(m, kMeasured[k], 1e-12);
    double v = encoder_speed_update(&c, &s, m, t);
    ASSERT_NEAR(v, kSpeed[k], 5e-6);   // the table prints 6 significant digits
  }
  return 0;
}

TEST(kat_speed_across_the_wrap) {
  encoder_config_t c;
  encoder_config_default(&c, ENCODER_MODE_INCREMENTAL);
  c.joint_id = 1;
  encoder_speed_t s = {0};
  ASSERT_NEAR(encoder_speed_update(&c, &s, 6.2, 1.00), 0.0, 0);
  ASSERT_KAT(encoder_speed_update(&c, &s, 0.1, 1.02), 9.15926536, KAT_REL, KAT_FLOOR);
  return 0;
}

TEST(wrap_into_a_range_too_small_to_count_turns) {
  // (u - L) / (U - L) overflows: the reading still lies in [L, U) and the speed stays finite
  const double tiny = 5e-324;
  double m = encoder_wrap(0.5, 0.0, tiny);
  ASSERT_TRUE(isfinite(m) && m >= 0.0 && m < tiny);
  m = encoder_wrap(-0.75, 0.0, tiny);
  ASSERT_TRUE(isfinite(m) && m >= 0.0 && m < tiny);
  m = encoder_wrap(3.0, 1.0, 1.0 + 2.220446049250313e-16);
  ASSERT_TRUE(m >= 1.0 && m < 1.0 + 2.220446049250313e-16);
  encoder_config_t c;
  encoder_config_default(&c, ENCODER_MODE_INCREMENTAL);
  c.joint_id = 1;
  c.upper = tiny;
  encoder_speed_t s = {0};
  encoder_speed_update(&c, &s, encoder_measure(&c, 0.3, 0.0), 1.0);
  double v = encoder_speed_update(&c, &s, encoder_measure(&c, -0.2, 0.0), 1.5);
  ASSERT_TRUE(isfinite(v) && fabs(v) <= tiny / 0.5 + 1e-300);
  v = encoder_speed_update(&c, &s, 1e300, 2.0);   // a jump the quotient cannot count
  ASSERT_TRUE(isfinite(v));
  return 0;
}

TEST(speed_timeout) {
  encoder_config_t c;
  encoder_config_default(&c, ENCODER_MODE_ABSOLUTE);
  c.joint_id = 1;
  c.speed_timeout = 0.05;
  encoder_speed_t s = {0};
  encoder_speed_update(&c, &s, 0.0, 0.0);
  ASSERT_NEAR(encoder_speed_update(&c, &s, 0.1, 0.01), 10.0, 1e-12);
  ASSERT_NEAR(encoder_speed_update(&c, &s, 0.1, 0.05), 10.0, 1e-12);   // held
  ASSERT_NEAR(encoder_speed_update(&c, &s, 0.1, 0.07), 0.0, 0);        // timed out
  return 0;
}

//---------------- The sensors over step views

typedef struct jfix {
  view_joint_t joint;
  step_view_t v;
} jfix_t;

static void jfix_step(jfix_t* f, double t, double q) {
  f->v.t0 = f->v.step ? f->v.t1 : t;
  f->v.t1 = t;
  f->v.step++;
  f->joint.position[0] = f->joint.position[1];
  f->joint.position[1] = q;
}

static int run(sensor_t* s, uint32_t id, jfix_t* f, sensor_out_t* out) {
  err_msg_t msg;
  sensor_ctx_t ctx = {.id = id, .mount = xform_identity()};
  sensor_out_clear(out);
  int rc = s->ops->step(s->self, &ctx, &f->v, out, &msg);
  if (rc != 0) {
    fprintf(stderr, "# %s\n", msg.text);
  } else {
    s->ops->commit(s->self);
  }
  return rc;
}

TEST(encoder_sensor_wraps_and_clamps_at_the_range_ends) {
  jfix_t f = {.joint = {.id = 3}};
  f.v.joints = &f.joint;
  f.v.njoint = 1;
  encoder_config_t ci, ca;
  encoder_config_default(&ci, ENCODER_MODE_INCREMENTAL);
  encoder_config_default(&ca, ENCODER_MODE_ABSOLUTE);
  ci.joint_id = ca.joint_id = 3;
  ca.lower = -1.0;
  ca.upper = 1.0;
  sensor_t si, sa;
  err_msg_t msg;
  ASSERT_OK(encoder_create(&ci, &si, &msg));
  ASSERT_OK(encoder_create(&ca, &sa, &msg));
  ASSERT_EQ(si.joint_id, 3);
  sensor_out_t out = {0};
  // a joint turning at 1 rad/s through 2 pi and past +1 rad
  for (int k = 0; k <= 80; k++) {
    double t = 0.1 * k, q = -0.5 + 1.0 * t;
    jfix_step(&f, t, q);
    ASSERT_OK(run(&si, 1, &f, &out));
    double m = out.rec[0].u.scalar.position;
    ASSERT_TRUE(m >= 0.0 && m < 2.0 * M_PI);
    ASSERT_NEAR(m, q - 2.0 * M_PI * floor(q / (2.0 * M_PI)), 1e-12);
    if (k > 0) {
      ASSERT_NEAR(out.rec[0].u.scalar.speed, 1.0, 1e-9);   // across the wrap too
    }
    ASSERT_OK(run(&sa, 2, &f, &out));
    ASSERT_NEAR(out.rec[0].u.scalar.position, fmax(-1.0, fmin(q, 1.0)), 1e-15);
    ASSERT_EQ(out.rec[0].time == t, 1);
  }
  sensor_out_free(&out);
  si.ops->destroy(si.self);
  sa.ops->destroy(sa.self);
  return 0;
}

TEST(encoder_and_odometer_noise_statistics) {
  jfix_t f = {.joint = {.id = 1}};
  f.v.joints = &f.joint;
  f.v.njoint = 1;
  f.v.seed = 99;
  encoder_config_t ce;
  encoder_config_default(&ce, ENCODER_MODE_ABSOLUTE);
  ce.joint_id = 1;
  ce.noise_stddev = 0.01;
  odometer_config_t co;
  odometer_config_default(&co);
  co.joint_id = 1;
  co.pulses_per_revolution = 0;
  co.noise_stddev = 0.002;
  sensor_t se, so;
  err_msg_t msg;
  ASSERT_OK(encoder_create(&ce, &se, &msg));
  ASSERT_OK(odometer_create(&co, &so, &msg));
  sensor_out_t out = {0};
  const int n = 10000;
  double s1 = 0, q1 = 0, s2 = 0, q2 = 0;
  for (int k = 0; k < n; k++) {
    jfix_step(&f, 0.01 * k, 2.0);
    ASSERT_OK(run(&se, 1, &f, &out));
    double e = out.rec[0].u.scalar.position - 2.0;
    ASSERT_OK(run(&so, 2, &f, &out));
    double d = out.rec[0].u.scalar.position - 1.0;
    s1 += e;
    q1 += e * e;
    s2 += d;
    q2 += d * d;
  }
  double m1 = s1 / n, m2 = s2 / n;
  ASSERT_NEAR(m1, 0.0, 4.0 * 0.01 / sqrt(n));
  ASSERT_NEAR(sqrt(q1 / n - m1 * m1), 0.01, 4.0 * 0.01 / sqrt(2.0 * n));
  ASSERT_NEAR(m2, 0.0, 4.0 * 0.002 / sqrt(n));
  ASSERT_NEAR(sqrt(q2 / n - m2 * m2), 0.002, 4.0 * 0.002 / sqrt(2.0 * n));
  sensor_out_free(&out);
  se.ops->destroy(se.self);
  so.ops->destroy(so.self);
  return 0;
}

TEST(missing_joint_fails_the_step) {
  jfix_t f = {.joint = {.id = 1}};
  f.v.joints = &f.joint;
  f.v.njoint = 1;
  encoder_config_t c;
  encoder_config_default(&c, ENCODER_MODE_ABSOLUTE);
  c.joint_id = 5;
  sensor_t s;
  err_msg_t msg;
  ASSERT_OK(encoder_create(&c, &s, &msg));
  sensor_out_t out = {0};
  jfix_step(&f, 0.0, 0.0);
  sensor_ctx_t ctx = {.id = 1, .mount = xform_identity()};
  ASSERT_EQ(s.ops->step(s.self, &ctx, &f.v, &out, &msg), ERR_NOTFOUND);
  ASSERT_CONTAINS(msg.text, "joint 5");
  ASSERT_EQ(out.n, 0);
  sensor_out_free(&out);
  s.ops->destroy(s.self);
  return 0;
}

TEST(bad_configurations_name_the_field) {
  encoder_config_t c;
  sensor_t s;
  err_msg_t msg;
  encoder_config_default(&c, ENCODER_MODE_INCREMENTAL);
  ASSERT_EQ(encoder_create(&c, &s, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "encoder.joint_id");
  c.joint_id = 1;
  c.resolution = -0.1;
  ASSERT_EQ(encoder_create(&c, &s, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "encoder.resolution");
  c.resolution = 0;
  c.upper = -INFINITY;
  ASSERT_EQ(encoder_create(&c, &s, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "encoder.range_lower");
  c.upper = INFINITY;
  c.lower = 0;
  ASSERT_EQ(encoder_create(&c, &s, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "finite in incremental");
  c.upper = 1;
  c.noise_stddev = -1;
  ASSERT_EQ(encoder_create(&c, &s, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "encoder.noise_stddev");
  c.noise_stddev = 0;
  c.speed_timeout = NAN;
  ASSERT_EQ(encoder_create(&c, &s, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "encoder.speed_timeout");
  c.speed_timeout = 0;
  c.mode = (encoder_mode_t)2;
  ASSERT_EQ(encoder_create(&c, &s, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "encoder.mode = 2 is not ENCODER_ABSOLUTE or ENCODER_INCREMENTAL");
  odometer_config_t o;
  odometer_config_default(&o);
  o.joint_id = 1;
  o.wheel_radius = 0;
  ASSERT_EQ(odometer_create(&o, &s, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "odometer.wheel_radius");
  o.wheel_radius = 0.3;
  o.noise_stddev = INFINITY;
  ASSERT_EQ(odometer_create(&o, &s, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "odometer.noise_stddev");
  return 0;
}

// Two phases (sensor.h): a step evaluated but not committed (another sensor failed it) changes
// nothing: run again, the encoder gives the frame number and the speed of an uninterrupted run
// (a joint at 2 rad/s: speed 2 from the second step on), the odometer its frame number.
TEST(uncommitted_step_changes_nothing) {
  jfix_t f = {.joint = {.id = 1}};
  f.v.joints = &f.joint;
  f.v.njoint = 1;
  encoder_config_t ce;
  encoder_config_default(&ce, ENCODER_MODE_ABSOLUTE);
  ce.joint_id = 1;
  odometer_config_t co;
  odometer_config_default(&co);
  co.joint_id = 1;
  co.pulses_per_revolution = 0;
  sensor_t se, so;
  err_msg_t msg;
  ASSERT_OK(encoder_create(&ce, &se, &msg));
  ASSERT_OK(odometer_create(&co, &so, &msg));
  sensor_out_t out = {0};
  sensor_ctx_t ctx = {.id = 1, .mount = xform_identity()};
  for (int k = 0; k < 5; k++) {
    double t = 0.1 * k, q = 2.0 * t;
    jfix_step(&f, t, q);
    if (k > 0) {
      // uncommitted evaluations of this step, then the step for real
      for (int rep = 0; rep < 2; rep++) {
        sensor_out_clear(&out);
        ASSERT_OK(se.ops->step(se.self, &ctx, &f.v, &out, &msg));
        ASSERT_OK(so.ops->step(so.self, &ctx, &f.v, &out, &msg));
        ASSERT_EQ(out.rec[0].frame, (uint64_t)k);
        ASSERT_EQ(out.rec[1].frame, (uint64_t)k);
        ASSERT_NEAR(out.rec[0].u.scalar.speed, 2.0, 1e-9);
      }
    }
    ASSERT_OK(run(&se, 1, &f, &out));
    ASSERT_EQ(out.rec[0].frame, (uint64_t)k);
    ASSERT_NEAR(out.rec[0].u.scalar.position, q, 1e-15);
    ASSERT_NEAR(out.rec[0].u.scalar.speed, k > 0 ? 2.0 : 0.0, 1e-9);
    ASSERT_OK(run(&so, 2, &f, &out));
    ASSERT_EQ(out.rec[0].frame, (uint64_t)k);
    ASSERT_NEAR(out.rec[0].u.scalar.position, 0.5 * q, 1e-15);
  }
  sensor_out_free(&out);
  se.ops->destroy(se.self);
  so.ops->destroy(so.self);
  return 0;
}
