// SPDX-License-Identifier: MIT
// gyroscope.c: ideal gyroscope signal and the linear-acceleration effect (docs/models/imu.md,
// "Gyroscope").
#include "imu/imu.h"

void gyro_ideal(const double q[4], const double omega[3], double dest[3]) {
  double qc[4];
  xform_quat_conj(q, qc);
  xform_quat_rotate(qc, omega, dest);
}

void gyro_lae(const double lae[9], const double a[3], double u[3]) {
  double add[3];
  for (int i = 0; i < 3; i++) {
    add[i] = lae[3 * i] * a[0] + lae[3 * i + 1] * a[1] + lae[3 * i + 2] * a[2];
  }
  for (int i = 0; i < 3; i++) {
    u[i] += add[i];
  }
}
