// SPDX-License-Identifier: MIT
// imu_fixture.h: a hand-built step view with one body, for driving sensors without a world.
#ifndef SENSIM_TESTS_IMU_FIXTURE_H_
#define SENSIM_TESTS_IMU_FIXTURE_H_

#include <math.h>
#include <string.h>

#include "sensor/sensor.h"
#include "sensor/view.h"

#define G0 9.80665

typedef struct fixture {
  view_body_t body;             // id 1
  view_joint_t joint;           // id 1
  field_dipole_t dipole;
  step_view_t v;
} fixture_t;

static inline void fixture_init(fixture_t* f) {
  memset(f, 0, sizeof(*f));
  f->body.id = 1;
  for (int i = 0; i < 2; i++) {
    f->body.at[i].pose.q[0] = 1.0;
  }
  f->joint.id = 1;
  f->v.bodies = &f->body;
  f->v.nbody = 1;
  f->v.joints = &f->joint;
  f->v.njoint = 1;
  f->v.gravity[2] = -G0;
  f->v.seed = 12345;
  f->v.output_budget = UINT64_MAX;
}

// Advance the fixture to a new state at time t: the old end becomes the start.
static inline void fixture_advance(fixture_t* f, double t, const pose_t* pose, const double* v,
                                   const double* w) {
  f->body.at[0] = f->body.at[1];
  f->v.t0 = f->v.step ? f->v.t1 : t;
  f->v.t1 = t;
  f->v.step++;
  f->body.at[1].pose = *pose;
  f->body.at[1].has_velocity = v != NULL;
  if (v) {
    memcpy(f->body.at[1].linear_velocity, v, 3 * sizeof(double));
    memcpy(f->body.at[1].angular_velocity, w, 3 * sizeof(double));
  } else {
    memset(f->body.at[1].linear_velocity, 0, 3 * sizeof(double));
    memset(f->body.at[1].angular_velocity, 0, 3 * sizeof(double));
  }
  if (f->v.step == 1) {
    f->body.at[0] = f->body.at[1];
  }
}

static inline void quat_axis_angle(double x, double y, double z, double angle, double q[4]) {
  double n = sqrt(x * x + y * y + z * z), s = sin(0.5 * angle) / n;
  q[0] = cos(0.5 * angle);
  q[1] = x * s;
  q[2] = y * s;
  q[3] = z * s;
}

#endif  // SENSIM_TESTS_IMU_FIXTURE_H_
