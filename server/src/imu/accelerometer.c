// SPDX-License-Identifier: MIT
// accelerometer.c: ideal accelerometer signal, the specific force at the sensor
// (docs/models/imu.md, "Accelerometer").
#include <math.h>

#include "imu/imu.h"

static void cross(const double a[3], const double b[3], double d[3]) {
  d[0] = a[1] * b[2] - a[2] * b[1];
  d[1] = a[2] * b[0] - a[0] * b[2];
  d[2] = a[0] * b[1] - a[1] * b[0];
}

void accel_ideal(const double q[4], const double a_origin[3], const double alpha[3],
                 const double omega[3], const double r[3], const double g[3], int literal_sign,
                 double dest[3]) {
  // point acceleration of a rigid body: a_O + alpha x r + omega x (omega x r)
  double ar[3], wr[3], wwr[3], f[3], qc[4];
  cross(alpha, r, ar);
  cross(omega, r, wr);
  cross(omega, wr, wwr);
  double sign = literal_sign ? 1.0 : -1.0;
  for (int i = 0; i < 3; i++) {
    f[i] = a_origin[i] + ar[i] + wwr[i] + sign * g[i];
  }
  // world -> sensor: F^T f
  xform_quat_conj(q, qc);
  xform_quat_rotate(qc, f, dest);
}
