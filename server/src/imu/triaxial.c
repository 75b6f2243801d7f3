// SPDX-License-Identifier: MIT
// triaxial.c: the triaxial processing chain (see triaxial.h).
#include "imu/triaxial.h"

#include <math.h>
#include <string.h>

#include "sensor/sensor.h"

static const char* const kAxis[3] = {"x", "y", "z"};

void triax_config_default(triax_config_t* c) {
  memset(c, 0, sizeof(*c));
  for (int i = 0; i < 3; i++) {
    c->lower[i] = -INFINITY;
    c->upper[i] = INFINITY;
    c->scaling[i] = 1.0;
  }
  triax_cross_scalar(0.0, c->cross);
  c->axes = 7;
}

void triax_cross_scalar(double s, double dest[9]) {
  for (int i = 0; i < 9; i++) {
    dest[i] = (i % 4 == 0) ? 1.0 : s;
  }
}

static int check_finite3(const double v[3], const char* prefix, const char* name, int nonneg,
                         err_msg_t* msg) {
  for (int i = 0; i < 3; i++) {
    if (!isfinite(v[i]) || fabs(v[i]) > SENSOR_MAX_VALUE) {
      return err_set(msg, ERR_INVAL, "%s.%s.%s = %g must be finite and at most %g in magnitude",
                     prefix, name, kAxis[i], v[i], SENSOR_MAX_VALUE);
    }
    if (nonneg && v[i] < 0.0) {
      return err_set(msg, ERR_INVAL, "%s.%s.%s = %g must be >= 0", prefix, name, kAxis[i], v[i]);
    }
  }
  return 0;
}

static int check_scalar(double v, const char* prefix, const char* name, err_msg_t* msg) {
  if (!isfinite(v) || v > SENSOR_MAX_VALUE) {
    return err_set(msg, ERR_INVAL, "%s.%s = %g must be finite and at most %g", prefix, name, v,
                   SENSOR_MAX_VALUE);
  }
  if (v < 0.0) {
    return err_set(msg, ERR_INVAL, "%s.%s = %g must be >= 0", prefix, name, v);
  }
  return 0;
}

int triax_config_check(const triax_config_t* c, const char* prefix, err_msg_t* msg) {
  int rc;
  for (int i = 0; i < 3; i++) {
    if (isnan(c->lower[i]) || c->lower[i] == INFINITY) {
      return err_set(msg, ERR_INVAL, "%s.range.lower.%s = %g must be a number below +inf",
                     prefix, kAxis[i], c->lower[i]);
    }
    if (isnan(c->upper[i]) || c->upper[i] == -INFINITY) {
      return err_set(msg, ERR_INVAL, "%s.range.upper.%s = %g must be a number above -inf",
                     prefix, kAxis[i], c->upper[i]);
    }
    // a finite bound is within SENSOR_MAX_VALUE like every other value of the chain: the bias,
    // the cross-axis matrix and the scaling multiply the clamped value, and a bound of 1e308
    // made them overflow to +-inf
    if (isfinite(c->lower[i]) && fabs(c->lower[i]) > SENSOR_MAX_VALUE) {
      return err_set(msg, ERR_INVAL, "%s.range.lower.%s = %g must be -inf or at most %g in "
                     "magnitude", prefix, kAxis[i], c->lower[i], SENSOR_MAX_VALUE);
    }
    if (isfinite(c->upper[i]) && fabs(c->upper[i]) > SENSOR_MAX_VALUE) {
      return err_set(msg, ERR_INVAL, "%s.range.upper.%s = %g must be +inf or at most %g in "
                     "magnitude", prefix, kAxis[i], c->upper[i], SENSOR_MAX_VALUE);
    }
    if (!(c->lower[i] <= c->upper[i])) {
      return err_set(msg, ERR_INVAL, "%s.range.lower.%s = %g must not exceed %s.range.upper.%s = "
                     "%g", prefix, kAxis[i], c->lower[i], prefix, kAxis[i], c->upper[i]);
    }
  }
  if ((rc = check_finite3(c->bias, prefix, "bias", 0, msg)) != 0) {
    return rc;
  }
  if (c->has_cross_scalar && !(c->cross_scalar >= 0.0 && c->cross_scalar <= 1.0)) {
    return err_set(msg, ERR_INVAL, "%s.cross_axis_scalar = %g must be in [0, 1]", prefix,
                   c->cross_scalar);
  }
  for (int i = 0; i < 9; i++) {
    if (!isfinite(c->cross[i]) || fabs(c->cross[i]) > SENSOR_MAX_VALUE) {
      return err_set(msg, ERR_INVAL,
                     "%s.cross_axis_matrix.m[%d] = %g must be finite and at most %g in magnitude",
                     prefix, i, c->cross[i], SENSOR_MAX_VALUE);
    }
  }
  if ((rc = check_finite3(c->noise_stddev, prefix, "noise_stddev", 1, msg)) != 0 ||
      (rc = check_finite3(c->scaling, prefix, "scaling", 0, msg)) != 0 ||
      (rc = check_finite3(c->spectral_density, prefix, "spectral_noise_density", 1, msg)) != 0) {
    return rc;
  }
  if (c->axes > 7) {
    return err_set(msg, ERR_INVAL, "%s.axes = %u must be a mask of x = 1, y = 2, z = 4", prefix,
                   c->axes);
  }
  if (!isfinite(c->turn_on_mean) || fabs(c->turn_on_mean) > SENSOR_MAX_VALUE) {
    return err_set(msg, ERR_INVAL,
                   "%s.drift.turn_on_bias_mean = %g must be finite and at most %g in magnitude",
                   prefix, c->turn_on_mean, SENSOR_MAX_VALUE);
  }
  if ((rc = check_scalar(c->turn_on_stddev, prefix, "drift.turn_on_bias_stddev", msg)) != 0 ||
      (rc = check_scalar(c->bias_instability, prefix, "drift.bias_instability", msg)) != 0 ||
      (rc = check_scalar(c->bias_tau, prefix, "drift.bias_correlation_time", msg)) != 0 ||
      (rc = check_scalar(c->random_walk, prefix, "drift.random_walk", msg)) != 0 ||
      (rc = check_scalar(c->precision, prefix, "drift.precision", msg)) != 0) {
    return rc;
  }
  if (c->bias_instability > 0.0 && !(c->bias_tau > 0.0)) {
    return err_set(msg, ERR_INVAL,
                   "%s.drift.bias_correlation_time = %g must be > 0 when bias_instability is set",
                   prefix, c->bias_tau);
  }
  return 0;
}

void triax_config_resolve(triax_config_t* c) {
  if (c->has_cross_scalar) {
    triax_cross_scalar(c->cross_scalar, c->cross);
    c->has_cross_scalar = 0;
  }
}

void triax_chain(const triax_config_t* c, const double u[3], const double white[3],
                 const double spectral[3], double nu, double dest[3]) {
  double v[3], w[3];
  // 1-2: clamp, then bias
  for (int i = 0; i < 3; i++) {
    v[i] = fmin(fmax(u[i], c->lower[i]), c->upper[i]) + c->bias[i];
  }
  // 3: cross-axis
  for (int i = 0; i < 3; i++) {
    w[i] = c->cross[3 * i] * v[0] + c->cross[3 * i + 1] * v[1] + c->cross[3 * i + 2] * v[2];
  }
  // 4-6: total noise, scaling, spectral noise (sigma = 0 adds exactly nothing)
  double root = nu > 0.0 ? sqrt(nu) : 0.0;
  for (int i = 0; i < 3; i++) {
    double x = w[i];
    if (c->noise_stddev[i] > 0.0) {
      x += c->noise_stddev[i] * white[i];
    }
    x *= c->scaling[i];
    if (c->spectral_density[i] > 0.0 && root > 0.0) {
      x += c->spectral_density[i] * root * spectral[i];
    }
    dest[i] = x;
  }
}

void triax_drift_advance(const triax_config_t* c, const triax_drift_t* prev, double dt,
                         const double normals[9], triax_drift_t* next, double add[3]) {
  triax_drift_t s = *prev;
  if (!s.started) {
    // turn-on bias once; the Gauss-Markov bias starts in its stationary distribution; the
    // random walk starts at 0
    for (int i = 0; i < 3; i++) {
      s.turn_on[i] = c->turn_on_mean;
      if (c->turn_on_stddev > 0.0) {
        s.turn_on[i] += c->turn_on_stddev * normals[i];
      }
      s.markov[i] = c->bias_instability > 0.0 ? c->bias_instability * normals[3 + i] : 0.0;
      s.walk[i] = 0.0;
    }
    s.started = 1;
  } else if (dt > 0.0) {
    double phi = c->bias_instability > 0.0 ? exp(-dt / c->bias_tau) : 0.0;
    double innov = c->bias_instability * sqrt(fmax(0.0, 1.0 - phi * phi));
    double step = c->random_walk * sqrt(dt);
    for (int i = 0; i < 3; i++) {
      if (c->bias_instability > 0.0) {
        s.markov[i] = phi * s.markov[i] + innov * normals[3 + i];
      }
      if (c->random_walk > 0.0) {
        s.walk[i] += step * normals[6 + i];
      }
    }
  }
  for (int i = 0; i < 3; i++) {
    add[i] = s.turn_on[i] + s.markov[i] + s.walk[i];
  }
  *next = s;
}

void triax_quantize(const triax_config_t* c, const double u[3], double dest[3]) {
  for (int i = 0; i < 3; i++) {
    // a step finer than u's own resolution quantizes nothing (u / precision would overflow)
    double k = c->precision > 0.0 ? round(u[i] / c->precision) : NAN;
    dest[i] = isfinite(k) ? c->precision * k : u[i];
  }
}

uint32_t triax_select(const triax_config_t* c, const double u[3], double* dest) {
  uint32_t n = 0;
  uint32_t axes = c->axes ? c->axes : 7;
  for (int i = 0; i < 3; i++) {
    if (axes & (1u << i)) {
      dest[n++] = u[i];
    }
  }
  return n;
}
