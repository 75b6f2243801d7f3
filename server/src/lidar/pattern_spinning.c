// SPDX-License-Identifier: MIT
// pattern_spinning.c: the generic spinning lidar (docs/models/lidar.md, "Spinning lidar"):
// channels with their own elevation, azimuth offset and firing offset inside each column; W
// columns per revolution at frequency f; ray (j, c) fires at t_s + j / (f W) + dt_c with azimuth
// phi_0 + sigma 2 pi f (t - t_s) + dphi_c, sigma = -1 clockwise seen from +z.
#include <math.h>

#include "lidar/pattern.h"


int lidar_pattern_spinning_check(const lidar_spinning_desc_t* d, const char* prefix,
                                 err_msg_t* msg) {
  // rotor and columns
  int rc;
  if ((rc = lidar_pattern_check_rate(d->frequency, 1000.0, prefix, "frequency", msg)) ||
      (rc = lidar_pattern_check_azimuth(d->start_azimuth, prefix, "start_azimuth", msg))) {
    return rc;
  }
  if (d->columns == 0) {
    return err_set(msg, ERR_INVAL, "%s.columns = 0 must be > 0", prefix);
  }
  if (d->columns > (1u << 20)) {
    return err_set(msg, ERR_INVAL, "%s.columns = %u exceeds %u", prefix, d->columns, 1u << 20);
  }
  double column_period = 1.0 / (d->frequency * (double)d->columns);

  // channels
  if (d->nchannel == 0) {
    return err_set(msg, ERR_INVAL, "%s.channel_elevations is empty: a spinning lidar needs at "
                   "least one channel", prefix);
  }
  if (d->nchannel > 4096) {
    return err_set(msg, ERR_INVAL, "%s.channel_elevations has %u channels, more than 4096",
                   prefix, d->nchannel);
  }
  if (d->nazimuth_offset != 0 && d->nazimuth_offset != d->nchannel) {
    return err_set(msg, ERR_INVAL, "%s.channel_azimuth_offsets has %u values for %u channels",
                   prefix, d->nazimuth_offset, d->nchannel);
  }
  if (d->ntime_offset != 0 && d->ntime_offset != d->nchannel) {
    return err_set(msg, ERR_INVAL, "%s.channel_time_offsets has %u values for %u channels",
                   prefix, d->ntime_offset, d->nchannel);
  }
  if ((rc = lidar_pattern_check_ray_rate(d->frequency, (double)d->columns * d->nchannel, prefix,
                                         "frequency", "columns x channel_elevations", msg))) {
    return rc;
  }
  for (uint32_t c = 0; c < d->nchannel; c++) {
    double el = d->elevations[c];
    if (!isfinite(el) || fabs(el) > M_PI / 2) {
      return err_set(msg, ERR_INVAL, "%s.channel_elevations[%u] = %g is outside [-pi/2, pi/2]",
                     prefix, c, el);
    }
    if (d->nazimuth_offset && !(fabs(d->azimuth_offsets[c]) <= LIDAR_PATTERN_MAX_AZIMUTH)) {
      return err_set(msg, ERR_INVAL, "%s.channel_azimuth_offsets[%u] = %g is outside [-2 pi, "
                     "2 pi] rad", prefix, c, d->azimuth_offsets[c]);
    }
    if (d->ntime_offset) {
      double dt = d->time_offsets[c];
      if (!isfinite(dt) || dt < 0.0 || dt >= column_period) {
        return err_set(msg, ERR_INVAL, "%s.channel_time_offsets[%u] = %g is outside [0, %g) s "
                       "(one column)", prefix, c, dt, column_period);
      }
    }
  }
  return 0;
}


int lidar_pattern_spinning_init(lidar_pattern_t* p, const lidar_spinning_desc_t* d,
                                const char* prefix, err_msg_t* msg) {
  int rc;
  if ((rc = lidar_pattern_spinning_check(d, prefix, msg))) {
    return rc;
  }
  double column_period = 1.0 / (d->frequency * (double)d->columns);

  // tables, in firing order
  if ((rc = lidar_pattern_alloc(p, d->nchannel, 0, prefix, msg))) {
    return rc;
  }
  p->kind = LIDAR_PATTERN_SPINNING;
  for (uint32_t c = 0; c < d->nchannel; c++) {
    p->elevation[c] = d->elevations[c];
    p->azimuth[c] = d->nazimuth_offset ? d->azimuth_offsets[c] : 0.0;
    p->time_offset[c] = d->ntime_offset ? d->time_offsets[c] : 0.0;
    p->ring[c] = c;
  }
  if ((rc = lidar_pattern_sort(p, prefix, msg))) {
    lidar_pattern_close(p);
    return rc;
  }
  p->group_period = column_period;
  p->groups_per_sweep = d->columns;
  p->sweep_period = column_period * (double)d->columns;
  p->spin_rate = (d->counter_clockwise ? 2.0 : -2.0) * M_PI * d->frequency;
  p->start_azimuth = d->start_azimuth;
  return lidar_pattern_prepare(p, prefix, msg);
}
