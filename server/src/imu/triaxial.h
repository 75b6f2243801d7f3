// SPDX-License-Identifier: MIT
// triaxial.h: the processing chain shared by the accelerometer, the gyroscope and the
// magnetometer (docs/models/imu.md, "Triaxial chain"), in its normative order:
//   1. range clamp per axis        u_i = min(max(u_i, lower_i), upper_i)
//   2. zero bias                   u += bias
//   3. cross-axis sensitivity      u = A u
//   4. total Gaussian noise        u_i += sigma_i N
//   5. scaling                     u_i *= c_i
//   6. spectral noise              u_i += density_i sqrt(nu) N   (nu = sample rate, Hz)
//   7. (gyroscope) linear-acceleration effect, added by the caller
//   8. drift: turn-on bias + Gauss-Markov bias instability + random walk
//   9. quantization                u_i = precision round(u_i / precision)
// Steps 8 and 9 are off by default. Every function is pure: the standard normal draws are
// passed in, so tests can inject them and the sensor can take them from base/rng.h.
#ifndef SENSIM_IMU_TRIAXIAL_H_
#define SENSIM_IMU_TRIAXIAL_H_

#include <stdint.h>

#include "base/err.h"

typedef struct triax_config {
  double lower[3];              // range, signal units; -inf = open
  double upper[3];              // +inf = open
  double bias[3];               // zero-g / zero-rate / zero-flux bias
  double cross[9];              // cross-axis matrix, row-major (identity = ideal)
  int has_cross_scalar;         // the datasheet's scalar form instead: cross_scalar in [0, 1]
  double cross_scalar;          //   on every off-diagonal element (triax_config_resolve)
  double noise_stddev[3];       // total RMS noise per axis
  double scaling[3];            // (1, 1, 1) = off
  double spectral_density[3];   // per sqrt(Hz)
  uint32_t axes;                // output axes, bit mask x = 1, y = 2, z = 4; 0 = all three
  // drift (one value for the three axes)
  double turn_on_mean;          // mean of the turn-on bias
  double turn_on_stddev;        // its standard deviation
  double bias_instability;      // stationary std of the Gauss-Markov bias
  double bias_tau;              // its correlation time, s (> 0 when bias_instability > 0)
  double random_walk;           // density, unit / sqrt(s)
  double precision;             // quantization step; 0 = off
} triax_config_t;

// Drift state of one sensor (per axis).
typedef struct triax_drift {
  int started;                  // turn-on bias drawn, Gauss-Markov bias started
  double turn_on[3];
  double markov[3];
  double walk[3];
} triax_drift_t;

// Ideal configuration: open ranges, no bias, identity cross-axis, no noise, unit scaling, all
// three axes, no drift.
void triax_config_default(triax_config_t* c);

// Cross-axis matrix of a datasheet's scalar sensitivity s: 1 on the diagonal, s elsewhere.
void triax_cross_scalar(double s, double dest[9]);

// Validate; errors name the field under `prefix` (e.g. "imu.accelerometer"). 0 or ERR_INVAL.
int triax_config_check(const triax_config_t* c, const char* prefix, err_msg_t* msg) CHECKRET;

// Expand the scalar cross-axis form into the matrix (has_cross_scalar cleared); the chain
// reads the matrix only.
void triax_config_resolve(triax_config_t* c);

// Steps 1-6 for ideal signal u: white[3] and spectral[3] are standard normal draws, nu the
// sample rate in Hz (0: no spectral noise). dest may alias u.
void triax_chain(const triax_config_t* c, const double u[3], const double white[3],
                 const double spectral[3], double nu, double dest[3]);

// Step 8: advance the drift state by dt seconds and return the additive drift in add[3].
// `normals` holds 9 standard normal draws: [0..2] turn-on bias (used once, when the state has
// not started), [3..5] Gauss-Markov innovation (or its stationary start), [6..8] random walk.
// dt <= 0 leaves the Gauss-Markov bias and the random walk where they are. `next` may alias
// `prev`.
void triax_drift_advance(const triax_config_t* c, const triax_drift_t* prev, double dt,
                         const double normals[9], triax_drift_t* next, double add[3]);

// Step 9 (identity when precision is 0, and where u / precision is not finite). dest may alias
// u.
void triax_quantize(const triax_config_t* c, const double u[3], double dest[3]);

// Copy the selected axes of u (x, y, z order) to dest; returns how many.
uint32_t triax_select(const triax_config_t* c, const double u[3], double* dest);

#endif  // SENSIM_IMU_TRIAXIAL_H_
