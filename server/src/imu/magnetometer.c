// SPDX-License-Identifier: MIT
// magnetometer.c: ideal magnetometer signal, the environment's flux density at the sensor in
// the sensor frame (docs/models/imu.md, "Magnetometer").
#include "imu/imu.h"

void mag_ideal(const double q[4], const field_magnetic_t* f, const double p[3], double dest[3]) {
  double b[3], qc[4];
  field_magnetic_at(f, p, b);
  xform_quat_conj(q, qc);
  xform_quat_rotate(qc, b, dest);
}
