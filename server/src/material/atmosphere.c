// SPDX-License-Identifier: MIT
// atmosphere.c: Beer-Lambert attenuation and gamma-distributed atmospheric returns of an
// ambient medium (AGX Sensor technical description, ambient material; docs/models/materials.md).
// The regularised incomplete gamma function uses the classical pair: its power series below
// x = k + 1 and a Lentz-evaluated continued fraction for the complement above (Abramowitz and
// Stegun 6.5.29 and 6.5.31).
#include "material/atmosphere.h"

#include <float.h>
#include <math.h>

#define GAMMA_MAX_ITER 1000
#define GAMMA_REL_EPS 1e-16
#define GAMMA_TINY 1e-300


double atmosphere_gamma_pdf(double x, double k, double theta) {
  if (x < 0.0) {
    return 0.0;
  }
  if (x == 0.0) {
    return k == 1.0 ? 1.0 / theta : (k > 1.0 ? 0.0 : INFINITY);
  }
  return exp((k - 1.0) * log(x) - x / theta - lgamma(k) - k * log(theta));
}


// x^k e^-x / Gamma(k), the common prefactor of both expansions.
static double gamma_prefactor(double k, double x) {
  return exp(k * log(x) - x - lgamma(k));
}


// P(k, x) by its series sum_{n>=0} x^n / (k (k+1) ... (k+n)), for x < k + 1.
static double gamma_p_series(double k, double x) {
  double term = 1.0 / k;
  double sum = term;
  for (int n = 1; n < GAMMA_MAX_ITER; n++) {
    term *= x / (k + n);
    sum += term;
    if (fabs(term) < fabs(sum) * GAMMA_REL_EPS) {
      break;
    }
  }
  return sum * gamma_prefactor(k, x);
}


// Q(k, x) = 1 - P(k, x) by the continued fraction 1/(x + 1 - k - 1(1 - k)/(x + 3 - k - ...)),
// modified Lentz, for x >= k + 1.
static double gamma_q_fraction(double k, double x) {
  double b = x + 1.0 - k;
  double c = 1.0 / GAMMA_TINY;
  double d = 1.0 / b;
  double h = d;
  for (int i = 1; i < GAMMA_MAX_ITER; i++) {
    double an = -i * (i - k);
    b += 2.0;
    d = an * d + b;
    if (fabs(d) < GAMMA_TINY) {
      d = GAMMA_TINY;
    }
    c = b + an / c;
    if (fabs(c) < GAMMA_TINY) {
      c = GAMMA_TINY;
    }
    d = 1.0 / d;
    double delta = d * c;
    h *= delta;
    if (fabs(delta - 1.0) < GAMMA_REL_EPS) {
      break;
    }
  }
  return h * gamma_prefactor(k, x);
}


double atmosphere_gamma_cdf(double x, double k, double theta) {
  if (!(x > 0.0)) {
    return 0.0;
  }
  double z = x / theta;
  if (isinf(z)) {
    return 1.0;
  }
  if (z < k + 1.0) {
    return gamma_p_series(k, z);
  }
  return 1.0 - gamma_q_fraction(k, z);
}


double atmosphere_return_probability(const ambient_material_t* m, double length) {
  return m->return_scaling * atmosphere_gamma_cdf(length, m->gamma_shape, m->gamma_scale);
}


int atmosphere_sample(const ambient_material_t* m, double length, double u, const rng_key_t* key,
                      uint32_t gamma_draw, double* out_offset) {
  // a return happens with probability s; its distance is Gamma distributed and must fall
  // inside the segment: exactly s F(length), and the Gamma law truncated to [0, length)
  if (!(u < m->return_scaling)) {
    return 0;
  }
  double xa = rng_gamma(key, gamma_draw, m->gamma_shape, m->gamma_scale);
  if (!(xa < length)) {
    return 0;
  }
  *out_offset = xa;
  return 1;
}
