// SPDX-License-Identifier: MIT
// pattern_custom.c: a ray list sent in the configuration (docs/models/lidar.md, "Custom ray
// list"): azimuth, elevation, time offset inside the frame and channel of every ray, repeated
// every 1 / frame_rate. Rays fire in order of time offset (then channel, then as given).
#include <math.h>

#include "lidar/pattern.h"


int lidar_pattern_custom_check(const lidar_custom_desc_t* d, const char* prefix,
                               err_msg_t* msg) {
  // list
  if (d->nray == 0) {
    return err_set(msg, ERR_INVAL, "%s.azimuths is empty: a ray list needs at least one ray",
                   prefix);
  }
  if (d->nray > LIDAR_PATTERN_MAX_GROUP) {
    return err_set(msg, ERR_INVAL, "%s.azimuths has %u rays, more than %u", prefix, d->nray,
                   LIDAR_PATTERN_MAX_GROUP);
  }
  int rc;
  if ((rc = lidar_pattern_check_rate(d->frame_rate, 1e4, prefix, "frame_rate", msg)) ||
      (rc = lidar_pattern_check_ray_rate(d->frame_rate, d->nray, prefix, "frame_rate", "azimuths",
                                         msg))) {
    return rc;
  }
  if (d->ntime_offset != 0 && d->ntime_offset != d->nray) {
    return err_set(msg, ERR_INVAL, "%s.time_offsets has %u values for %u rays", prefix,
                   d->ntime_offset, d->nray);
  }
  if (d->nchannel != 0 && d->nchannel != d->nray) {
    return err_set(msg, ERR_INVAL, "%s.channels has %u values for %u rays", prefix, d->nchannel,
                   d->nray);
  }
  double period = 1.0 / d->frame_rate;
  for (uint32_t i = 0; i < d->nray; i++) {
    if (!(fabs(d->azimuths[i]) <= LIDAR_PATTERN_MAX_AZIMUTH)) {
      return err_set(msg, ERR_INVAL, "%s.azimuths[%u] = %g is outside [-2 pi, 2 pi] rad", prefix,
                     i, d->azimuths[i]);
    }
    if (!isfinite(d->elevations[i]) || fabs(d->elevations[i]) > M_PI / 2) {
      return err_set(msg, ERR_INVAL, "%s.elevations[%u] = %g is outside [-pi/2, pi/2]", prefix, i,
                     d->elevations[i]);
    }
    if (d->nchannel && d->channels[i] > UINT16_MAX) {
      // reported as the point field ring, a uint16: a larger one would arrive wrapped
      return err_set(msg, ERR_INVAL, "%s.channels[%u] = %u exceeds 65535 (ring is a uint16)",
                     prefix, i, d->channels[i]);
    }
    if (d->ntime_offset) {
      double t = d->time_offsets[i];
      if (!isfinite(t) || t < 0.0 || t >= period) {
        return err_set(msg, ERR_INVAL, "%s.time_offsets[%u] = %g is outside [0, %g) s (one "
                       "frame)", prefix, i, t, period);
      }
    }
  }
  return 0;
}


int lidar_pattern_custom_init(lidar_pattern_t* p, const lidar_custom_desc_t* d,
                              const char* prefix, err_msg_t* msg) {
  // tables, in firing order
  int rc;
  if ((rc = lidar_pattern_custom_check(d, prefix, msg)) ||
      (rc = lidar_pattern_alloc(p, d->nray, 0, prefix, msg))) {
    return rc;
  }
  p->kind = LIDAR_PATTERN_CUSTOM;
  for (uint32_t i = 0; i < d->nray; i++) {
    p->azimuth[i] = d->azimuths[i];
    p->elevation[i] = d->elevations[i];
    p->time_offset[i] = d->ntime_offset ? d->time_offsets[i] : 0.0;
    p->ring[i] = d->nchannel ? d->channels[i] : i;
  }
  if ((rc = lidar_pattern_sort(p, prefix, msg))) {
    lidar_pattern_close(p);
    return rc;
  }
  double period = 1.0 / d->frame_rate;
  p->group_period = period;
  p->groups_per_sweep = 1;
  p->sweep_period = period;
  return lidar_pattern_prepare(p, prefix, msg);
}
