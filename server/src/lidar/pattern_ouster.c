// SPDX-License-Identifier: MIT
// pattern_ouster.c: the Ouster OS1 (docs/models/lidar.md, "Ouster OS1"): N beams (16, 32, 64,
// 128) uniformly spaced from the top beam down, or the unit's own beam_altitude_angles; W
// columns (512, 1024, 2048) at 10 or 20 Hz; every beam of a column shares its timestamp; column
// j looks at azimuth pi - 2 pi j / W in the sensor frame (column 0 at the rear, clockwise, the
// Ouster lidar frame being the sensor frame turned half a turn about z). A beam's azimuth
// offset (beam_azimuth_angles, lidar frame, positive clockwise) is subtracted, and the optional
// beam-origin offset n puts the emission point n metres out along the encoder direction.
// Default vertical fields: the OS1 gen-1 datasheet's +-16.6 degrees for 16 and 64 beams and the
// later +-22.5 degrees (45 degree field) for 32 and 128 beams.
#include <math.h>

#include "lidar/pattern.h"


double lidar_pattern_ouster_half_field(uint32_t channels) {
  return (channels == 16 || channels == 64 ? 16.6 : 22.5) * (M_PI / 180.0);
}


int lidar_pattern_ouster_check(const lidar_ouster_desc_t* d, const char* prefix,
                               err_msg_t* msg) {
  // sizes and rate
  uint32_t n = d->channels;
  if (n != 16 && n != 32 && n != 64 && n != 128) {
    return err_set(msg, ERR_INVAL, "%s.channels = %u must be 16, 32, 64 or 128", prefix, n);
  }
  if (d->columns != 512 && d->columns != 1024 && d->columns != 2048) {
    return err_set(msg, ERR_INVAL, "%s.columns = %u must be 512, 1024 or 2048", prefix,
                   d->columns);
  }
  if (d->frequency != 10.0 && d->frequency != 20.0) {
    return err_set(msg, ERR_INVAL, "%s.frequency = %g must be 10 or 20 Hz", prefix, d->frequency);
  }
  if (!isfinite(d->beam_origin) || d->beam_origin < 0.0 || d->beam_origin > 1.0) {
    return err_set(msg, ERR_INVAL, "%s.lidar_origin_to_beam_origin = %g is outside [0, 1] m",
                   prefix, d->beam_origin);
  }

  // elevations: the unit's table, or uniform between the field's bounds
  double half = lidar_pattern_ouster_half_field(n);
  double top = isnan(d->elevation_max) ? half : d->elevation_max;
  double bottom = isnan(d->elevation_min) ? -half : d->elevation_min;
  if (d->naltitude != 0 && d->naltitude != n) {
    return err_set(msg, ERR_INVAL, "%s.beam_altitude_angles has %u values for %u channels",
                   prefix, d->naltitude, n);
  }
  if (d->nazimuth != 0 && d->nazimuth != n) {
    return err_set(msg, ERR_INVAL, "%s.beam_azimuth_angles has %u values for %u channels",
                   prefix, d->nazimuth, n);
  }
  if (!d->naltitude) {
    if (!isfinite(top) || fabs(top) > M_PI / 2) {
      return err_set(msg, ERR_INVAL, "%s.elevation_max = %g is outside [-pi/2, pi/2]", prefix,
                     top);
    }
    if (!isfinite(bottom) || fabs(bottom) > M_PI / 2 || !(bottom < top)) {
      return err_set(msg, ERR_INVAL, "%s.elevation_min = %g must be in [-pi/2, elevation_max)",
                     prefix, bottom);
    }
  }
  for (uint32_t i = 0; i < d->naltitude; i++) {
    if (!isfinite(d->altitudes[i]) || fabs(d->altitudes[i]) > M_PI / 2) {
      return err_set(msg, ERR_INVAL, "%s.beam_altitude_angles[%u] = %g is outside [-pi/2, pi/2]",
                     prefix, i, d->altitudes[i]);
    }
  }
  for (uint32_t i = 0; i < d->nazimuth; i++) {
    if (!isfinite(d->azimuths[i]) || fabs(d->azimuths[i]) > M_PI) {
      return err_set(msg, ERR_INVAL, "%s.beam_azimuth_angles[%u] = %g is outside [-pi, pi]",
                     prefix, i, d->azimuths[i]);
    }
  }
  return 0;
}


int lidar_pattern_ouster_init(lidar_pattern_t* p, const lidar_ouster_desc_t* d,
                              const char* prefix, err_msg_t* msg) {
  int rc;
  if ((rc = lidar_pattern_ouster_check(d, prefix, msg))) {
    return rc;
  }
  uint32_t n = d->channels;
  double half = lidar_pattern_ouster_half_field(n);
  double top = isnan(d->elevation_max) ? half : d->elevation_max;
  double bottom = isnan(d->elevation_min) ? -half : d->elevation_min;

  // tables
  if ((rc = lidar_pattern_alloc(p, n, 0, prefix, msg))) {
    return rc;
  }
  p->kind = LIDAR_PATTERN_OUSTER;
  for (uint32_t i = 0; i < n; i++) {
    p->elevation[i] =
        d->naltitude ? d->altitudes[i] : top - (double)i * (top - bottom) / (double)(n - 1);
    p->azimuth[i] = d->nazimuth ? -d->azimuths[i] : 0.0;
    p->ring[i] = i;
  }
  p->group_period = 1.0 / (d->frequency * (double)d->columns);
  p->groups_per_sweep = d->columns;
  p->sweep_period = p->group_period * (double)d->columns;
  p->spin_rate = -2.0 * M_PI * d->frequency;
  p->start_azimuth = M_PI;
  p->beam_origin_radius = d->beam_origin;
  return lidar_pattern_prepare(p, prefix, msg);
}


void lidar_pattern_ouster_pixel_shifts(const lidar_pattern_t* p, int32_t* out) {
  // the beam azimuth alpha_i is stored as the sensor-frame offset -alpha_i: a beam alpha_i
  // clockwise of the encoder looks where a beam without offset looks alpha_i W / 2 pi columns
  // later (units whose beams are 4.22, 1.41, -1.40 and -4.18 degrees off report shifts of 12,
  // 4, -4 and -12 at 1024 columns)
  double w = (double)p->groups_per_sweep;
  for (uint32_t i = 0; i < p->nray; i++) {
    out[i] = (int32_t)lround(-p->azimuth[i] * w / (2.0 * M_PI));
  }
}
