// SPDX-License-Identifier: MIT
// field.h: the magnetic flux density model of an environment (docs/models/imu.md,
// "Magnetometer"): a uniform field plus point dipoles, each placed in world coordinates for the
// instant being evaluated.
#ifndef SENSIM_SENSOR_FIELD_H_
#define SENSIM_SENSOR_FIELD_H_

#include <stdint.h>

typedef struct field_dipole {
  double moment[3];    // A m^2, world frame
  double position[3];  // m, world frame
} field_dipole_t;

typedef struct field_magnetic {
  double uniform[3];             // T, world frame
  const field_dipole_t* dipoles; // (ndipole), world frame
  uint32_t ndipole;
} field_magnetic_t;

// Add the flux density of one dipole at world point p to b (nothing within 1e-6 m of it).
void field_dipole_add(const field_dipole_t* d, const double p[3], double b[3]);

// Flux density at world point p: uniform + sum over dipoles of
// mu0 / (4 pi) * (3 r (m . r) / |r|^5 - m / |r|^3), r = p - position. A point closer than
// 1e-6 m to a dipole takes no contribution from it (the field is singular there).
void field_magnetic_at(const field_magnetic_t* f, const double p[3], double dest[3]);

#endif  // SENSIM_SENSOR_FIELD_H_
