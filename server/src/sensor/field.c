// SPDX-License-Identifier: MIT
// field.c: uniform field plus magnetic dipoles (see field.h).
#include "sensor/field.h"

#include "base/xform.h"

void field_dipole_add(const field_dipole_t* d, const double p[3], double b[3]) {
  const double mu0_4pi = 1e-7;  // T m / A
  double r[3] = {p[0] - d->position[0], p[1] - d->position[1], p[2] - d->position[2]};
  double rn = xform_norm(r, 3);
  if (!(rn >= 1e-6)) {
    return;  // singular at the dipole itself
  }
  double u[3] = {r[0] / rn, r[1] / rn, r[2] / rn};
  const double* m = d->moment;
  double mu = m[0] * u[0] + m[1] * u[1] + m[2] * u[2];
  double k = mu0_4pi / (rn * rn * rn);
  for (int j = 0; j < 3; j++) {
    b[j] += k * (3.0 * u[j] * mu - m[j]);
  }
}


void field_magnetic_at(const field_magnetic_t* f, const double p[3], double dest[3]) {
  double b[3] = {f->uniform[0], f->uniform[1], f->uniform[2]};
  for (uint32_t i = 0; i < f->ndipole; i++) {
    field_dipole_add(&f->dipoles[i], p, b);
  }
  dest[0] = b[0];
  dest[1] = b[1];
  dest[2] = b[2];
}
