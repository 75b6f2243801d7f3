// SPDX-License-Identifier: MIT
// test_imu.c: the IMU sensor over hand-built step views: centripetal omega^2 r on a spinning
// body (velocities sent, or estimated from poses), +g at rest, 0 in free fall, magnetometer in a
// rotated uniform field and near a dipole, selected axes, fixed-rate sampling, noise of the
// whole sensor, determinism, configuration errors.
#include <math.h>
#include <string.h>

#include "check.h"
#include "imu/imu.h"
#include "imu_fixture.h"

static int make_imu(const imu_config_t* c, sensor_t* s) {
  err_msg_t msg;
  int rc = imu_create(c, s, &msg);
  if (rc != 0) {
    fprintf(stderr, "# imu_create: %s\n", msg.text);
  }
  return rc;
}

static int step(sensor_t* s, const sensor_ctx_t* ctx, fixture_t* f, sensor_out_t* out) {
  err_msg_t msg;
  sensor_out_clear(out);
  int rc = s->ops->step(s->self, ctx, &f->v, out, &msg);
  if (rc != 0) {
    fprintf(stderr, "# step: %s\n", msg.text);
  } else {
    s->ops->commit(s->self);
  }
  return rc;
}

static void spin_pose(double w, double t, pose_t* p) {
  memset(p, 0, sizeof(*p));
  quat_axis_angle(0, 0, 1, w * t, p->q);
}

// A body spinning about z at omega (origin on the axis); the IMU 0.5 m out on x; returns the
// largest relative error of the centripetal reading over 20 steps.
static int spin_case(int send_velocity, double rate, double* max_err, uint32_t* nsamples) {
  imu_config_t c;
  imu_config_default(&c);
  c.has_accelerometer = 1;
  c.has_gyroscope = 1;
  c.sample_rate = rate;
  sensor_t s;
  if (make_imu(&c, &s) != 0) {
    return 1;
  }
  sensor_ctx_t ctx = {.id = 1, .body_id = 1, .mount = xform_identity()};
  ctx.mount.p[0] = 0.5;
  fixture_t f;
  fixture_init(&f);
  sensor_out_t out = {0};
  const double w = 3.0, r = 0.5, dt = 0.01;
  double vel[3] = {0, 0, 0}, om[3] = {0, 0, w};
  *max_err = 0.0;
  *nsamples = 0;
  for (int k = 0; k <= 20; k++) {
    pose_t p;
    double t = 1.0 + k * dt;
    spin_pose(w, t, &p);
    fixture_advance(&f, t, &p, send_velocity ? vel : NULL, om);
    if (step(&s, &ctx, &f, &out) != 0) {
      return 1;
    }
    if (k < 2) {
      continue;   // estimates from poses need two steps of history
    }
    for (uint32_t i = 0; i < out.n; i++) {
      const sensor_imu_t* m = &out.rec[i].u.imu;
      // in the IMU frame (rotating with the body) the centripetal acceleration points to -x
      double e = fabs(m->acceleration[0] - (-w * w * r)) / (w * w * r);
      e = fmax(e, fabs(m->acceleration[1]) / (w * w * r));
      e = fmax(e, fabs(m->acceleration[2] - G0) / G0);
      e = fmax(e, fabs(m->angular_velocity[2] - w) / w);
      *max_err = fmax(*max_err, e);
      (*nsamples)++;
    }
  }
  sensor_out_free(&out);
  s.ops->destroy(s.self);
  return 0;
}

TEST(centripetal_with_sent_velocities) {
  double err;
  uint32_t n;
  ASSERT_OK(spin_case(1, 0.0, &err, &n));
  ASSERT_EQ(n, 19);
  ASSERT_TRUE(err <= 1e-9);
  return 0;
}

TEST(centripetal_from_poses) {
  double err;
  uint32_t n;
  ASSERT_OK(spin_case(0, 0.0, &err, &n));
  ASSERT_TRUE(err <= 1e-9);
  return 0;
}

TEST(centripetal_at_fixed_rate_several_samples_per_step) {
  double err;
  uint32_t n;
  ASSERT_OK(spin_case(1, 400.0, &err, &n));   // 4 samples per 10 ms step
  ASSERT_EQ(n, 19 * 4);
  ASSERT_TRUE(err <= 1e-9);
  return 0;
}

TEST(fixed_rate_sample_times) {
  imu_config_t c;
  imu_config_default(&c);
  c.has_gyroscope = 1;
  c.sample_rate = 100.0;
  sensor_t s;
  ASSERT_OK(make_imu(&c, &s));
  sensor_ctx_t ctx = {.id = 2, .body_id = 1, .mount = xform_identity()};
  fixture_t f;
  fixture_init(&f);
  sensor_out_t out = {0};
  pose_t p = xform_identity();
  fixture_advance(&f, 0.0, &p, NULL, NULL);
  ASSERT_OK(step(&s, &ctx, &f, &out));
  ASSERT_EQ(out.n, 0);           // (0, 0] is empty
  fixture_advance(&f, 0.035, &p, NULL, NULL);
  ASSERT_OK(step(&s, &ctx, &f, &out));
  ASSERT_EQ(out.n, 3);           // 0.01 0.02 0.03
  ASSERT_NEAR(out.rec[0].time, 0.01, 1e-15);
  ASSERT_NEAR(out.rec[2].time, 0.03, 1e-15);
  ASSERT_EQ(out.rec[2].frame, 2);
  fixture_advance(&f, 0.037, &p, NULL, NULL);
  ASSERT_OK(step(&s, &ctx, &f, &out));
  ASSERT_EQ(out.n, 0);           // a short step between two samples
  fixture_advance(&f, 0.04, &p, NULL, NULL);
  ASSERT_OK(step(&s, &ctx, &f, &out));
  ASSERT_EQ(out.n, 1);
  ASSERT_NEAR(out.rec[0].time, 0.04, 1e-15);
  ASSERT_EQ(out.rec[0].frame, 3);
  sensor_out_free(&out);
  s.ops->destroy(s.self);
  return 0;
}

TEST(static_body_and_world_read_plus_g) {
  imu_config_t c;
  imu_config_default(&c);
  c.has_accelerometer = 1;
  sensor_t s;
  ASSERT_OK(make_imu(&c, &s));
  fixture_t f;
  fixture_init(&f);
  sensor_out_t out = {0};
  for (uint32_t body = 0; body <= 1; body++) {
    sensor_ctx_t ctx = {.id = 3, .body_id = body, .mount = xform_identity()};
    ctx.mount.p[1] = 0.3;
    pose_t p = xform_identity();
    p.p[0] = 4.0;
    fixture_advance(&f, 0.01 * (body + 1), &p, NULL, NULL);
    ASSERT_OK(step(&s, &ctx, &f, &out));
    ASSERT_EQ(out.n, 1);
    const sensor_imu_t* m = &out.rec[0].u.imu;
    ASSERT_NEAR(m->acceleration[0], 0.0, 1e-12);
    ASSERT_NEAR(m->acceleration[1], 0.0, 1e-12);
    ASSERT_NEAR(m->acceleration[2], G0, 1e-12);
  }
  sensor_out_free(&out);
  s.ops->destroy(s.self);
  return 0;
}

static int free_fall(int send_velocity) {
  imu_config_t c;
  imu_config_default(&c);
  c.has_accelerometer = 1;
  sensor_t s;
  ASSERT_OK(make_imu(&c, &s));
  sensor_ctx_t ctx = {.id = 4, .body_id = 1, .mount = xform_identity()};
  quat_axis_angle(1, 1, 0, 0.7, ctx.mount.q);     // any orientation
  fixture_t f;
  fixture_init(&f);
  sensor_out_t out = {0};
  for (int k = 0; k < 10; k++) {
    double t = 0.02 * k;
    pose_t p = xform_identity();
    p.p[2] = 100.0 - 0.5 * G0 * t * t;
    p.p[0] = 2.0 * t;
    double v[3] = {2.0, 0, -G0 * t}, w[3] = {0, 0, 0};
    fixture_advance(&f, t, &p, send_velocity ? v : NULL, w);
    ASSERT_OK(step(&s, &ctx, &f, &out));
    if (k >= (send_velocity ? 1 : 2)) {
      const sensor_imu_t* m = &out.rec[0].u.imu;
      for (int i = 0; i < 3; i++) {
        ASSERT_NEAR(m->acceleration[i], 0.0, 1e-9);
      }
    }
  }
  sensor_out_free(&out);
  s.ops->destroy(s.self);
  return 0;
}

TEST(free_fall_reads_zero) {
  ASSERT_OK(free_fall(1));
  ASSERT_OK(free_fall(0));
  return 0;
}

TEST(literal_gravity_sign) {
  imu_config_t c;
  imu_config_default(&c);
  c.has_accelerometer = 1;
  c.literal_gravity_sign = 1;
  sensor_t s;
  ASSERT_OK(make_imu(&c, &s));
  sensor_ctx_t ctx = {.id = 5, .body_id = 0, .mount = xform_identity()};
  fixture_t f;
  fixture_init(&f);
  sensor_out_t out = {0};
  pose_t p = xform_identity();
  fixture_advance(&f, 0.0, &p, NULL, NULL);
  ASSERT_OK(step(&s, &ctx, &f, &out));
  ASSERT_NEAR(out.rec[0].u.imu.acceleration[2], -G0, 1e-12);
  sensor_out_free(&out);
  s.ops->destroy(s.self);
  return 0;
}

TEST(magnetometer_rotated_field_and_dipole) {
  imu_config_t c;
  imu_config_default(&c);
  c.has_magnetometer = 1;
  sensor_t s;
  ASSERT_OK(make_imu(&c, &s));
  sensor_ctx_t ctx = {.id = 6, .body_id = 1, .mount = xform_identity()};
  fixture_t f;
  fixture_init(&f);
  f.v.magnetic.uniform[0] = 2e-5;
  f.v.magnetic.uniform[2] = -4.5e-5;
  sensor_out_t out = {0};
  // body turned +90 deg about z: the field's x component appears on -y of the sensor
  pose_t p = xform_identity();
  quat_axis_angle(0, 0, 1, M_PI / 2, p.q);
  fixture_advance(&f, 0.0, &p, NULL, NULL);
  ASSERT_OK(step(&s, &ctx, &f, &out));
  const sensor_imu_t* m = &out.rec[0].u.imu;
  ASSERT_NEAR(m->magnetic_field[0], 0.0, 1e-18);
  ASSERT_NEAR(m->magnetic_field[1], -2e-5, 1e-18);
  ASSERT_NEAR(m->magnetic_field[2], -4.5e-5, 1e-18);
  // a dipole of moment 1 A m^2 along z, 0.1 m below the sensor on the axis: on-axis field
  // mu0 / (4 pi) 2 m / r^3 = 1e-7 * 2 / 1e-3 = 2e-4 T along +z
  f.v.magnetic.uniform[0] = f.v.magnetic.uniform[2] = 0.0;
  f.dipole.moment[2] = 1.0;
  f.dipole.position[0] = 1.0;
  f.dipole.position[2] = -0.1;
  f.v.magnetic.dipoles = &f.dipole;
  f.v.magnetic.ndipole = 1;
  p = xform_identity();
  p.p[0] = 1.0;
  fixture_advance(&f, 0.01, &p, NULL, NULL);
  ASSERT_OK(step(&s, &ctx, &f, &out));
  m = &out.rec[0].u.imu;
  ASSERT_NEAR(m->magnetic_field[0], 0.0, 1e-18);
  ASSERT_NEAR(m->magnetic_field[1], 0.0, 1e-18);
  ASSERT_KAT(m->magnetic_field[2], 2e-4, 1e-12, 0);
  // beside it, on the equator 0.1 m away: -mu0/(4 pi) m / r^3 = -1e-4 T
  p.p[2] = -0.1;
  p.p[0] = 1.1;
  fixture_advance(&f, 0.02, &p, NULL, NULL);
  ASSERT_OK(step(&s, &ctx, &f, &out));
  ASSERT_KAT(out.rec[0].u.imu.magnetic_field[2], -1e-4, 1e-12, 0);
  sensor_out_free(&out);
  s.ops->destroy(s.self);
  return 0;
}

TEST(selected_axes_accelerometer_first) {
  imu_config_t c;
  imu_config_default(&c);
  c.has_accelerometer = c.has_gyroscope = c.has_magnetometer = 1;
  c.accelerometer.axes = 4;      // z
  c.gyroscope.axes = 3;          // x y
  c.magnetometer.axes = 2;       // y
  sensor_t s;
  ASSERT_OK(make_imu(&c, &s));
  sensor_ctx_t ctx = {.id = 7, .body_id = 1, .mount = xform_identity()};
  fixture_t f;
  fixture_init(&f);
  f.v.magnetic.uniform[1] = 3e-5;
  sensor_out_t out = {0};
  pose_t p = xform_identity();
  double v[3] = {0, 0, 0}, w[3] = {0.1, -0.2, 0.3};
  fixture_advance(&f, 0.0, &p, v, w);
  ASSERT_OK(step(&s, &ctx, &f, &out));
  const sensor_imu_t* m = &out.rec[0].u.imu;
  ASSERT_EQ(m->nvalues, 4);
  ASSERT_NEAR(m->values[0], G0, 1e-12);
  ASSERT_NEAR(m->values[1], 0.1, 1e-15);
  ASSERT_NEAR(m->values[2], -0.2, 1e-15);
  ASSERT_NEAR(m->values[3], 3e-5, 1e-18);
  sensor_out_free(&out);
  s.ops->destroy(s.self);
  return 0;
}

// Noise of the whole sensor over 10^4 steps: spectral density at the step rate, deterministic
// for the same seed, different for another sensor id.
TEST(sensor_noise_statistics_and_determinism) {
  imu_config_t c;
  imu_config_default(&c);
  c.has_accelerometer = 1;
  c.accelerometer.spectral_density[0] = 150e-6 * G0;
  c.accelerometer.noise_stddev[2] = 0.05;
  sensor_t s1, s2;
  ASSERT_OK(make_imu(&c, &s1));
  ASSERT_OK(make_imu(&c, &s2));
  sensor_ctx_t ctx1 = {.id = 8, .body_id = 1, .mount = xform_identity()};
  sensor_ctx_t ctx2 = ctx1;
  fixture_t f;
  fixture_init(&f);
  sensor_out_t o1 = {0}, o2 = {0};
  const int n = 10000;
  double sx = 0, qx = 0, sz = 0, qz = 0;
  for (int k = 0; k < n; k++) {
    pose_t p = xform_identity();
    fixture_advance(&f, 0.01 * k, &p, NULL, NULL);
    ASSERT_OK(step(&s1, &ctx1, &f, &o1));
    ASSERT_OK(step(&s2, &ctx2, &f, &o2));
    ASSERT_MEM_EQ(&o1.rec[0].u.imu, &o2.rec[0].u.imu, sizeof(sensor_imu_t));
    if (k == 0) {
      continue;                  // the first step has no interval: no spectral noise
    }
    double x = o1.rec[0].u.imu.acceleration[0], z = o1.rec[0].u.imu.acceleration[2] - G0;
    sx += x;
    qx += x * x;
    sz += z;
    qz += z * z;
  }
  double m = n - 1;
  double mx = sx / m, mz = sz / m;
  ASSERT_NEAR(mx, 0.0, 4.0 * 0.014709975 / sqrt(m));
  ASSERT_NEAR(sqrt(qx / m - mx * mx), 0.014709975, 4.0 * 0.014709975 / sqrt(2.0 * m));
  ASSERT_NEAR(mz, 0.0, 4.0 * 0.05 / sqrt(m));
  ASSERT_NEAR(sqrt(qz / m - mz * mz), 0.05, 4.0 * 0.05 / sqrt(2.0 * m));
  // another sensor id draws other numbers
  sensor_ctx_t ctx3 = {.id = 9, .body_id = 1, .mount = xform_identity()};
  ASSERT_OK(step(&s2, &ctx3, &f, &o2));
  ASSERT_TRUE(o2.rec[0].u.imu.acceleration[0] != o1.rec[0].u.imu.acceleration[0]);
  sensor_out_free(&o1);
  sensor_out_free(&o2);
  s1.ops->destroy(s1.self);
  s2.ops->destroy(s2.self);
  return 0;
}

TEST(bad_configurations_name_the_field) {
  imu_config_t c;
  sensor_t s;
  err_msg_t msg;
  imu_config_default(&c);
  ASSERT_EQ(imu_create(&c, &s, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "accelerometer, gyroscope or magnetometer");
  c.has_gyroscope = 1;
  c.sample_rate = -1;
  ASSERT_EQ(imu_create(&c, &s, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "imu.sample_rate");
  c.sample_rate = 0;
  c.lae[4] = NAN;
  ASSERT_EQ(imu_create(&c, &s, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "imu.gyroscope.lae_matrix.m[4]");
  c.lae[4] = 0;
  c.gyroscope_mount.q[0] = 0;
  ASSERT_EQ(imu_create(&c, &s, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "imu.gyroscope.chain.mount.orientation");
  c.gyroscope_mount.q[0] = 1;
  c.gyroscope.spectral_density[0] = -1;
  ASSERT_EQ(imu_create(&c, &s, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "imu.gyroscope.chain.spectral_noise_density.x");
  c.gyroscope.spectral_density[0] = 0;

  // the diagonal form names its axis; the scalar cross-axis sensitivity its own field
  c.lae_is_diagonal = 1;
  c.lae[8] = INFINITY;
  ASSERT_EQ(imu_create(&c, &s, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "imu.gyroscope.lae_diagonal.z");
  c.lae[8] = 0;
  c.gyroscope.has_cross_scalar = 1;
  c.gyroscope.cross_scalar = 1.5;
  ASSERT_EQ(imu_create(&c, &s, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "imu.gyroscope.chain.cross_axis_scalar = 1.5 must be in [0, 1]");
  return 0;
}


TEST(scalar_cross_axis_and_axes_zero_are_expanded_by_the_model) {
  // a scalar sensitivity s puts s on every off-diagonal element: (1, 2, 3) reads (1 + 5s,
  // 2 + 4s, 3 + 3s); axes 0 selects all three
  triax_config_t c;
  err_msg_t msg;
  triax_config_default(&c);
  c.has_cross_scalar = 1;
  c.cross_scalar = 0.01;
  c.axes = 0;
  ASSERT_OK(triax_config_check(&c, "imu.accelerometer", &msg));
  triax_config_resolve(&c);
  ASSERT_EQ(c.has_cross_scalar, 0);
  const double u[3] = {1, 2, 3}, zero[3] = {0, 0, 0};
  double out[3], sel[3];
  triax_chain(&c, u, zero, zero, 0.0, out);
  ASSERT_NEAR(out[0], 1.05, 1e-15);
  ASSERT_NEAR(out[1], 2.04, 1e-15);
  ASSERT_NEAR(out[2], 3.03, 1e-15);
  ASSERT_EQ(triax_select(&c, out, sel), 3);
  ASSERT_NEAR(sel[2], 3.03, 1e-15);
  return 0;
}

TEST(unknown_body_fails_the_step_and_changes_nothing) {
  imu_config_t c;
  imu_config_default(&c);
  c.has_gyroscope = 1;
  sensor_t s;
  ASSERT_OK(make_imu(&c, &s));
  sensor_ctx_t ctx = {.id = 10, .body_id = 99, .mount = xform_identity()};
  fixture_t f;
  fixture_init(&f);
  sensor_out_t out = {0};
  pose_t p = xform_identity();
  fixture_advance(&f, 0.0, &p, NULL, NULL);
  err_msg_t msg;
  ASSERT_EQ(s.ops->step(s.self, &ctx, &f.v, &out, &msg), ERR_NOTFOUND);
  ASSERT_CONTAINS(msg.text, "body 99");
  ASSERT_EQ(out.n, 0);
  sensor_out_free(&out);
  s.ops->destroy(s.self);
  return 0;
}

// Two phases (sensor.h): a step that is not committed (another sensor failed the step) leaves
// the sensor as it was, so the step run again gives what an uninterrupted run gives: the same
// frame numbers, the same random walk and Gauss-Markov drift, the same sample times.
static int run_drifting(int fail_every_step, double rate, sensor_out_t* got) {
  imu_config_t c;
  imu_config_default(&c);
  c.has_gyroscope = 1;
  c.gyroscope.random_walk = 0.01;
  c.gyroscope.bias_instability = 0.002;
  c.gyroscope.bias_tau = 0.5;
  c.gyroscope.turn_on_stddev = 0.1;
  c.sample_rate = rate;
  sensor_t s;
  ASSERT_OK(make_imu(&c, &s));
  sensor_ctx_t ctx = {.id = 4, .body_id = 1, .mount = xform_identity()};
  fixture_t f;
  fixture_init(&f);
  sensor_out_t out = {0};
  err_msg_t msg;
  for (int i = 0; i < 6; i++) {
    pose_t p;
    spin_pose(2.0, 0.05 * i, &p);
    fixture_advance(&f, 0.05 * i, &p, NULL, NULL);
    if (fail_every_step) {
      // the step is evaluated, then dropped by the world: no commit (twice, to be sure
      // nothing accumulates)
      for (int k = 0; k < 2; k++) {
        sensor_out_clear(&out);
        ASSERT_OK(s.ops->step(s.self, &ctx, &f.v, &out, &msg));
      }
    }
    ASSERT_OK(step(&s, &ctx, &f, &out));   // evaluated and committed
    for (uint32_t k = 0; k < out.n; k++) {
      sensor_record_t* r = sensor_out_push(got, 4, SENSOR_REC_IMU);
      ASSERT_TRUE(r != NULL);
      *r = out.rec[k];
    }
  }
  sensor_out_free(&out);
  s.ops->destroy(s.self);
  return 0;
}

TEST(uncommitted_step_changes_nothing) {
  const double rates[2] = {0.0, 100.0};
  for (int i = 0; i < 2; i++) {
    sensor_out_t a = {0}, b = {0};
    ASSERT_OK(run_drifting(0, rates[i], &a));
    ASSERT_OK(run_drifting(1, rates[i], &b));
    // per step: one sample; at 100 Hz: 1 at t = 0 ... none, then 5 per 0.05 s step
    ASSERT_EQ(a.n, rates[i] > 0.0 ? 25u : 6u);
    ASSERT_EQ(b.n, a.n);
    for (uint32_t k = 0; k < a.n; k++) {
      ASSERT_EQ(a.rec[k].frame, (uint64_t)k);
      ASSERT_EQ(b.rec[k].frame, (uint64_t)k);
      ASSERT_TRUE(a.rec[k].time == b.rec[k].time);
      for (int j = 0; j < 3; j++) {
        ASSERT_TRUE(a.rec[k].u.imu.angular_velocity[j] == b.rec[k].u.imu.angular_velocity[j]);
      }
    }
    // the drift did advance between samples (the test would pass trivially otherwise)
    ASSERT_TRUE(a.rec[1].u.imu.angular_velocity[0] != a.rec[a.n - 1].u.imu.angular_velocity[0]);
    sensor_out_free(&a);
    sensor_out_free(&b);
  }
  return 0;
}

static int cancel_now(void* ctx) {
  (void)ctx;
  return 1;
}

// A long fixed-rate step polls the request's cancellation and stops with ERR_STATE, leaving
// nothing; one over what remains of the step's output limit is refused before sampling.
TEST(long_fixed_rate_step_cancelled_and_bounded) {
  imu_config_t c;
  imu_config_default(&c);
  c.has_accelerometer = 1;
  c.sample_rate = 1e5;
  sensor_t s;
  ASSERT_OK(make_imu(&c, &s));
  sensor_ctx_t ctx = {.id = 2, .body_id = 1, .mount = xform_identity()};
  fixture_t f;
  fixture_init(&f);
  sensor_out_t out = {0};
  err_msg_t msg;
  pose_t p = xform_identity();
  fixture_advance(&f, 0.0, &p, NULL, NULL);
  ASSERT_OK(step(&s, &ctx, &f, &out));
  fixture_advance(&f, 5.0, &p, NULL, NULL);   // 500000 samples
  f.v.cancelled = cancel_now;
  sensor_out_clear(&out);
  ASSERT_EQ(s.ops->step(s.self, &ctx, &f.v, &out, &msg), ERR_STATE);
  ASSERT_CONTAINS(msg.text, "cancelled");
  ASSERT_EQ(out.n, 0);
  f.v.cancelled = NULL;
  f.v.output_budget = 512u * 1000u;
  ASSERT_EQ(s.ops->step(s.self, &ctx, &f.v, &out, &msg), ERR_LIMIT);
  ASSERT_CONTAINS(msg.text, "max_output_bytes");
  ASSERT_EQ(out.n, 0);
  // a step that fits: the first samples (the refused steps produced none that count)
  f.v.output_budget = UINT64_MAX;
  fixture_advance(&f, 5.00002, &p, NULL, NULL);
  f.v.t0 = 4.99999;
  ASSERT_OK(step(&s, &ctx, &f, &out));
  ASSERT_EQ(out.n, 3u);
  ASSERT_EQ(out.rec[0].frame, 0u);
  ASSERT_EQ(out.rec[2].frame, 2u);
  sensor_out_free(&out);
  s.ops->destroy(s.self);
  return 0;
}

// The bound (checked by the world at UpdateState and CreateSensor) agrees with the step: the
// bytes it announces are 512 for each record the step then gives, and it refuses exactly the
// intervals the step would refuse (more than 10^6 samples at the fixed rate, more records than
// the budget, a time too large for the rate), naming the sensor and the field.
TEST(bound_matches_the_step_and_refuses_what_it_would) {
  imu_config_t c;
  imu_config_default(&c);
  c.has_gyroscope = 1;
  c.sample_rate = 1000.0;
  sensor_t s;
  ASSERT_OK(make_imu(&c, &s));
  ASSERT_TRUE(s.ops->bound != NULL);
  sensor_ctx_t ctx = {.id = 2, .body_id = 1, .mount = xform_identity()};
  fixture_t f;
  fixture_init(&f);
  sensor_out_t out = {0};
  err_msg_t msg;
  uint64_t bytes = 0;
  pose_t p = xform_identity();
  fixture_advance(&f, 0.0, &p, NULL, NULL);
  ASSERT_OK(step(&s, &ctx, &f, &out));
  // the samples a step gives: multiples of 1 ms in (t0, t1]
  static const double kEnds[] = {0.0004, 0.001, 0.0105, 0.25};
  static const uint32_t kSamples[] = {0, 1, 9, 240};
  for (int i = 0; i < 4; i++) {
    double t0 = f.v.t1;
    ASSERT_OK(s.ops->bound(s.self, &ctx, t0, kEnds[i], UINT64_MAX, &bytes, &msg));
    fixture_advance(&f, kEnds[i], &p, NULL, NULL);
    ASSERT_OK(step(&s, &ctx, &f, &out));
    ASSERT_EQ(out.n, kSamples[i]);
    ASSERT_EQ(bytes, 512u * (uint64_t)out.n);
  }
  // 10^6 samples in (0.25, 1000.25] are taken, one more is not
  ASSERT_OK(s.ops->bound(s.self, &ctx, 0.25, 1000.25, UINT64_MAX, &bytes, &msg));
  ASSERT_EQ(bytes, 512u * 1000000u);
  ASSERT_EQ(s.ops->bound(s.self, &ctx, 0.25, 1000.2515, UINT64_MAX, &bytes, &msg), ERR_LIMIT);
  ASSERT_CONTAINS(msg.text, "holds 1000001 samples, more than 1000000");
  ASSERT_EQ(s.ops->bound(s.self, &ctx, 0.25, 1000.5, UINT64_MAX, &bytes, &msg), ERR_LIMIT);
  ASSERT_CONTAINS(msg.text, "imu 2: the step (0.25, 1000.5] at imu.sample_rate = 1000 Hz "
                  "holds 1000250 samples, more than 1000000; step more often");
  // the budget: 240 records of 512 bytes
  ASSERT_OK(s.ops->bound(s.self, &ctx, 0.25, 0.49, 512u * 240u, &bytes, &msg));
  ASSERT_EQ(s.ops->bound(s.self, &ctx, 0.25, 0.49, 512u * 240u - 1u, &bytes, &msg), ERR_LIMIT);
  ASSERT_CONTAINS(msg.text, "imu 2");
  ASSERT_CONTAINS(msg.text, "max_output_bytes = 122879");
  // ... and the step refuses the same interval under the same budget, giving nothing
  fixture_advance(&f, 0.49, &p, NULL, NULL);
  f.v.output_budget = 512u * 240u - 1u;
  sensor_out_clear(&out);
  ASSERT_EQ(s.ops->step(s.self, &ctx, &f.v, &out, &msg), ERR_LIMIT);
  ASSERT_EQ(out.n, 0u);
  // a time too large for the rate
  ASSERT_EQ(s.ops->bound(s.self, &ctx, 0.25, 1e16, UINT64_MAX, &bytes, &msg), ERR_LIMIT);
  ASSERT_CONTAINS(msg.text, "too large for imu.sample_rate");
  sensor_out_free(&out);
  s.ops->destroy(s.self);

  // one sample per step: 512 bytes whatever the interval
  c.sample_rate = 0.0;
  ASSERT_OK(make_imu(&c, &s));
  ASSERT_OK(s.ops->bound(s.self, &ctx, 0.0, 1e9, UINT64_MAX, &bytes, &msg));
  ASSERT_EQ(bytes, 512u);
  ASSERT_EQ(s.ops->bound(s.self, &ctx, 0.0, 1e9, 511u, &bytes, &msg), ERR_LIMIT);
  s.ops->destroy(s.self);
  return 0;
}
