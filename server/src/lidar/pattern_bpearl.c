// SPDX-License-Identifier: MIT
// pattern_bpearl.c: the RoboSense RS-Bpearl hemispherical lidar (docs/models/lidar.md,
// "RoboSense Bpearl"). From its published specification (RoboSense, "RS-Bpearl" product
// datasheet and user guide): 32 channels, 90 degree vertical field, vertical resolution 2.81
// degrees, 360 degree horizontal field at 0.2 degrees (10 Hz) or 0.4 degrees (20 Hz), 576,000
// points per second single return, clockwise. Model here: channel c at elevation
// c * 90 / 32 degrees (0 at the horizon, upwards; 2.8125 degree steps, the datasheet's 2.81),
// 1800 or 900 columns, all channels of a column fired together. Mount it with the field where
// it belongs (on its side for a near-field skirt).
#include <math.h>

#include "lidar/pattern.h"


int lidar_pattern_bpearl_check(const lidar_bpearl_desc_t* d, const char* prefix,
                               err_msg_t* msg) {
  int rc;
  if ((rc = lidar_pattern_check_azimuth(d->start_azimuth, prefix, "start_azimuth", msg))) {
    return rc;
  }
  if (d->frequency != 10.0 && d->frequency != 20.0) {
    return err_set(msg, ERR_INVAL, "%s.frequency = %g must be 10 or 20 Hz", prefix, d->frequency);
  }
  return 0;
}


int lidar_pattern_bpearl_init(lidar_pattern_t* p, const lidar_bpearl_desc_t* d,
                              const char* prefix, err_msg_t* msg) {
  int rc;
  if ((rc = lidar_pattern_bpearl_check(d, prefix, msg))) {
    return rc;
  }
  double el[32];
  for (int c = 0; c < 32; c++) {
    el[c] = (double)c * (M_PI / 2.0) / 32.0;
  }
  lidar_spinning_desc_t s = {
      .frequency = d->frequency,
      .columns = d->frequency == 10.0 ? 1800 : 900,
      .elevations = el,
      .nchannel = 32,
      .start_azimuth = d->start_azimuth,
  };
  if ((rc = lidar_pattern_spinning_init(p, &s, prefix, msg))) {
    return rc;
  }
  p->kind = LIDAR_PATTERN_BPEARL;
  return 0;
}
