// SPDX-License-Identifier: MIT
// atmosphere.h: what an ambient medium does to a lidar beam (docs/models/materials.md,
// "Ambient media"): Beer-Lambert attenuation tau(x) = exp(-alpha x) over an optical path
// length x, and atmospheric returns: the probability that the medium returns the beam between
// x and x + dx from the segment start is s f(x; k, theta) dx, with f the Gamma pdf of shape k
// and scale theta, so a segment of length L returns with probability s F(L; k, theta).
//
// Thread: any (pure functions; random numbers from base/rng.h keys).
#ifndef SENSIM_MATERIAL_ATMOSPHERE_H_
#define SENSIM_MATERIAL_ATMOSPHERE_H_

#include <math.h>
#include <stdint.h>

#include "base/rng.h"
#include "material/material.h"

// e^y for -1/16 <= y <= 0: the Taylor series to y^10 (the next term is below 1.5e-21), summed
// by Estrin's scheme; within 0.54 ulp of e^y (tested against expl) at a third of the cost of
// a call to exp.
static inline double atmosphere_exp_small(double y) {
  const double c2 = 1.0 / 2, c3 = 1.0 / 6, c4 = 1.0 / 24, c5 = 1.0 / 120, c6 = 1.0 / 720,
               c7 = 1.0 / 5040, c8 = 1.0 / 40320, c9 = 1.0 / 362880, c10 = 1.0 / 3628800;
  double y2 = y * y, y4 = y2 * y2;
  double hi = (c8 + c9 * y) + c10 * y2;
  double mid = (c4 + c5 * y) + y2 * (c6 + c7 * y) + y4 * hi;   // c4 + c5 y + ... + c10 y^6
  return 1.0 + (y + y2 * ((c2 + c3 * y) + y2 * mid));
}

// Beer-Lambert transmittance exp(-alpha x) (x >= 0, may be +inf). Inline: once per hit. Clear
// air (alpha ~ 2e-4 / m at 20 km visibility) keeps alpha x within the series' range.
static inline double atmosphere_transmittance(double alpha, double x) {
  if (alpha == 0.0) {
    return 1.0;  // also for x = +inf (no 0 * inf)
  }
  double y = -alpha * x;
  return y >= -0.0625 ? atmosphere_exp_small(y) : exp(y);
}

// Gamma pdf f(x; k, theta), evaluated in log space; at x = 0: 1/theta (k = 1), 0 (k > 1),
// +inf (k < 1); 0 for x < 0.
double atmosphere_gamma_pdf(double x, double k, double theta);

// Gamma CDF F(x; k, theta) = P(k, x / theta), the regularised lower incomplete gamma function
// (series below k + 1, continued fraction above; relative accuracy about 1e-14); 0 for
// x <= 0, 1 for x = +inf.
double atmosphere_gamma_cdf(double x, double k, double theta);

// Probability s F(L; k, theta) that a segment of optical path length L (may be +inf) has an
// atmospheric return.
double atmosphere_return_probability(const ambient_material_t* m, double length);

// Draw the atmospheric return of one segment of optical path length `length`: when the uniform
// u in (0, 1) is below s, a Gamma(k, theta) distance xa (base/rng.h draws from `gamma_draw` on,
// at most 64), kept when xa < length. Returns 1 and writes the offset from the segment start to
// *out_offset, or 0 (no return; no draw made when u >= s).
int atmosphere_sample(const ambient_material_t* m, double length, double u, const rng_key_t* key,
                      uint32_t gamma_draw, double* out_offset);

#endif  // SENSIM_MATERIAL_ATMOSPHERE_H_
