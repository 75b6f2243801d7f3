// SPDX-License-Identifier: MIT
// motion.c: velocities and accelerations of a body over one step, from the velocities the
// client sent or, when it sent none, from backward differences of the poses (see imu.h and
// docs/models/imu.md, "Sampling").
#include <math.h>
#include <string.h>

#include "imu/imu.h"

void imu_angular_rate(const double q0[4], const double q1[4], double dt, double dest[3]) {
  dest[0] = dest[1] = dest[2] = 0.0;
  if (!(dt > 0.0)) {
    return;
  }
  // world-frame increment dq = q1 q0^-1 (R1 = dR R0), shortest arc
  double c[4], dq[4];
  xform_quat_conj(q0, c);
  xform_quat_mul(q1, c, dq);
  if (dq[0] < 0.0) {
    for (int i = 0; i < 4; i++) {
      dq[i] = -dq[i];
    }
  }
  double s = sqrt(dq[1] * dq[1] + dq[2] * dq[2] + dq[3] * dq[3]);
  if (s == 0.0) {
    return;
  }
  double angle = 2.0 * atan2(s, dq[0]);
  for (int i = 0; i < 3; i++) {
    dest[i] = dq[1 + i] / s * angle / dt;
  }
}

void imu_motion_step(const view_body_t* body, double t0, double t1, const imu_motion_t* prev,
                     imu_step_motion_t* m, imu_motion_t* next) {
  memset(m, 0, sizeof(*m));
  double dt = t1 - t0;
  const body_state_t* s0 = &body->at[0];
  const body_state_t* s1 = &body->at[1];

  // end of the step
  int have1 = 1;
  if (s1->has_velocity) {
    memcpy(m->v1, s1->linear_velocity, sizeof(m->v1));
    memcpy(m->w1, s1->angular_velocity, sizeof(m->w1));
  } else if (dt >= SENSOR_MIN_INTERVAL) {
    for (int i = 0; i < 3; i++) {
      m->v1[i] = (s1->pose.p[i] - s0->pose.p[i]) / dt;
    }
    imu_angular_rate(s0->pose.q, s1->pose.q, dt, m->w1);
  } else {
    have1 = 0;          // no interval (or under 1 ns), no velocity: zero, and no estimate
  }

  // start of the step
  if (s0->has_velocity) {
    memcpy(m->v0, s0->linear_velocity, sizeof(m->v0));
    memcpy(m->w0, s0->angular_velocity, sizeof(m->w0));
  } else if (prev->have && prev->t == t0) {
    memcpy(m->v0, prev->v, sizeof(m->v0));
    memcpy(m->w0, prev->w, sizeof(m->w0));
  } else {
    memcpy(m->v0, m->v1, sizeof(m->v0));
    memcpy(m->w0, m->w1, sizeof(m->w0));
  }

  if (dt >= SENSOR_MIN_INTERVAL) {
    for (int i = 0; i < 3; i++) {
      m->a[i] = (m->v1[i] - m->v0[i]) / dt;
      m->alpha[i] = (m->w1[i] - m->w0[i]) / dt;
    }
  }

  next->have = have1;
  next->t = t1;
  memcpy(next->v, m->v1, sizeof(next->v));
  memcpy(next->w, m->w1, sizeof(next->w));
}
