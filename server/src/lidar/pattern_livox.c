// SPDX-License-Identifier: MIT
// pattern_livox.c: a non-repetitive Risley-prism rosette (docs/models/lidar.md, "Livox-style
// non-repetitive pattern"). Two wedge prisms rotating at different, incommensurate rates deflect
// a single beam by the sum of two rotating vectors; the beam therefore draws a rosette that
// never closes and covers the circular field more densely the longer one integrates (Z. Liu,
// F. Zhang, X. Hong, "Low-cost retina-like robotic lidars based on incommensurable scanning",
// IEEE/ASME Transactions on Mechatronics, 2021; J. Lin, F. Zhang, "Loam livox: a fast, robust,
// high-precision LiDAR odometry and mapping package for LiDARs of small FoV", ICRA 2020).
//
// Model (first order in the prism deflections): at time t after t_s the beam leaves the +x
// boresight at the polar angle |a1 e^(i w1 t) + a2 e^(i w2 t)| in the direction of that sum in
// the (y, z) plane, with a1 = a2 = FOV / 4 so that the field is a cone of full angle FOV. Rays
// fire at a constant rate; frames hold point_rate / frame_rate rays. Defaults (the wire's):
// FOV 38.4 degrees, 100,000 points per second and 10 Hz frames (the Livox Mid-40's published
// figures), prism rates 7294 / 60 and -4664 / 60 rev/s: illustrative counter-rotating rates whose
// ratio is not a simple fraction (the device's own rates are not published).
#include <math.h>

#include "lidar/pattern.h"


int lidar_pattern_livox_check(const lidar_livox_desc_t* d, const char* prefix,
                              err_msg_t* msg) {
  if (!isfinite(d->fov) || !(d->fov > 0.0) || !(d->fov < M_PI)) {
    return err_set(msg, ERR_INVAL, "%s.fov = %g is outside (0, pi) rad", prefix, d->fov);
  }
  if (!(d->point_rate >= LIDAR_PATTERN_MIN_RATE && d->point_rate <= 1e8)) {
    return err_set(msg, ERR_INVAL, "%s.point_rate = %g must be in [%g, 1e8] per second", prefix,
                   d->point_rate, LIDAR_PATTERN_MIN_RATE);
  }
  if (!(d->frame_rate >= LIDAR_PATTERN_MIN_RATE && d->frame_rate <= d->point_rate)) {
    return err_set(msg, ERR_INVAL, "%s.frame_rate = %g must be in [%g, point_rate] Hz", prefix,
                   d->frame_rate, LIDAR_PATTERN_MIN_RATE);
  }

  // a frame holds round(point_rate / frame_rate) rays: at most 2^32, over at most 10^4 s
  double rays = fmax(1.0, floor(d->point_rate / d->frame_rate + 0.5));
  if (rays > LIDAR_PATTERN_MAX_SWEEP_RAYS || rays / d->point_rate > 1.0 / LIDAR_PATTERN_MIN_RATE) {
    return err_set(msg, ERR_INVAL, "%s.frame_rate = %g: a frame of %.0f rays lasts %g s (at "
                   "most %g rays and %g s)", prefix, d->frame_rate, rays, rays / d->point_rate,
                   LIDAR_PATTERN_MAX_SWEEP_RAYS, 1.0 / LIDAR_PATTERN_MIN_RATE);
  }
  for (int i = 0; i < 2; i++) {
    if (!isfinite(d->prism_rate[i]) || fabs(d->prism_rate[i]) > 1e5) {
      return err_set(msg, ERR_INVAL, "%s.prism_rates[%d] = %g must be finite, within 1e5 rev/s",
                     prefix, i, d->prism_rate[i]);
    }
  }
  if (d->prism_rate[0] == d->prism_rate[1]) {
    return err_set(msg, ERR_INVAL, "%s.prism_rates = (%g, %g) must differ", prefix,
                   d->prism_rate[0], d->prism_rate[1]);
  }
  return 0;
}


int lidar_pattern_livox_init(lidar_pattern_t* p, const lidar_livox_desc_t* d, const char* prefix,
                             err_msg_t* msg) {
  int rc;
  if ((rc = lidar_pattern_livox_check(d, prefix, msg)) ||
      (rc = lidar_pattern_alloc(p, 1, 0, prefix, msg))) {
    return rc;
  }
  p->kind = LIDAR_PATTERN_LIVOX;
  p->group_period = 1.0 / d->point_rate;
  p->groups_per_sweep = (uint64_t)fmax(1.0, floor(d->point_rate / d->frame_rate + 0.5));
  p->sweep_period = p->group_period * (double)p->groups_per_sweep;
  for (int i = 0; i < 2; i++) {
    p->prism_rate[i] = d->prism_rate[i];
    p->prism_amplitude[i] = d->fov / 4.0;
  }
  return lidar_pattern_prepare(p, prefix, msg);
}
