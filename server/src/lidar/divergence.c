// SPDX-License-Identifier: MIT
// divergence.c: beam divergence attenuation (AGX Sensor technical description, eq. 15-21;
// docs/models/lidar.md). The detected fraction of a Gaussian beam of 1/e^2 radius w by a
// coaxial detector of radius R is 1 - exp(-2 R^2 / w^2) exactly; the lateral offset factor
// exp(-2 r_D^2 / w^2) is the far-field approximation of the biaxial case, and the product is
// normalised by 1 - exp(-2) (the detected fraction when R = E at the exit).
#include "lidar/divergence.h"

#include <math.h>

#define DIVERGENCE_MAX 0.1   // rad: the half angle must be below this (a lidar beam, not a cone)
#define RADIUS_MAX 1.0       // m: the exit and detector radii and the detector offset
#define DIVERGENCE_NORM 1.1565176427496656518   // 1 / (1 - e^-2)
#define SMALL_EXPONENT 1e-3  // below: 1 - exp(-a) by expm1, which keeps its relative precision


int lidar_divergence_init(lidar_beam_t* b, const lidar_beam_desc_t* d, const char* prefix,
                          err_msg_t* msg) {
  if (!d->enabled) {
    *b = (lidar_beam_t){.enabled = 0, .detector_radius = 1.0};
    return 0;
  }
  if (!isfinite(d->divergence) || !(d->divergence > 0.0 && d->divergence < DIVERGENCE_MAX)) {
    return err_set(msg, ERR_INVAL,
                   "%s.divergence = %g is outside (0, %g) (the 1/e^2 half angle, rad)", prefix,
                   d->divergence, DIVERGENCE_MAX);
  }
  // apertures and offsets of a lidar are millimetres to centimetres; past a metre the squares
  // of the radii in BD(x) are no longer a lidar's (and past 1e154 m they overflow)
  if (!(d->exit_radius >= 0.0 && d->exit_radius <= RADIUS_MAX)) {
    return err_set(msg, ERR_INVAL, "%s.exit_radius = %g is outside [0, %g] m", prefix,
                   d->exit_radius, RADIUS_MAX);
  }
  if (!(d->detector_radius > 0.0 && d->detector_radius <= RADIUS_MAX)) {
    return err_set(msg, ERR_INVAL, "%s.detector_radius = %g is outside (0, %g] m", prefix,
                   d->detector_radius, RADIUS_MAX);
  }
  if (!(d->detector_offset >= 0.0 && d->detector_offset <= RADIUS_MAX)) {
    return err_set(msg, ERR_INVAL, "%s.detector_offset = %g is outside [0, %g] m", prefix,
                   d->detector_offset, RADIUS_MAX);
  }
  *b = (lidar_beam_t){
      .enabled = 1,
      .tan_divergence = tan(d->divergence),
      .exit_radius = d->exit_radius,
      .detector_radius = d->detector_radius,
      .detector_offset = d->detector_offset,
      .clamp = d->clamp ? 1 : 0,
  };
  return 0;
}


double lidar_divergence_width(const lidar_beam_t* b, double x) {
  return x * b->tan_divergence + b->exit_radius;
}


double lidar_divergence_factor(const lidar_beam_t* b, double x) {
  if (!b->enabled) {
    return 1.0;
  }

  const double norm = DIVERGENCE_NORM;
  double w = lidar_divergence_width(b, x);
  double bd;
  if (!(w > 0.0)) {
    // point emitter at x = 0: the whole beam falls on a coaxial detector, none on an offset one
    bd = b->detector_offset == 0.0 ? norm : 0.0;
  } else {
    double inv_w2 = 1.0 / (w * w);
    double r = b->detector_radius;
    double rd = b->detector_offset;

    // far field (a << 1): -expm1 keeps the relative precision of 1 - exp(-a)
    double a = 2.0 * r * r * inv_w2;
    bd = (a < SMALL_EXPONENT ? -expm1(-a) : 1.0 - exp(-a)) * norm;
    if (rd != 0.0) {
      bd *= exp(-2.0 * rd * rd * inv_w2);
    }
  }
  return b->clamp && bd > 1.0 ? 1.0 : bd;
}
