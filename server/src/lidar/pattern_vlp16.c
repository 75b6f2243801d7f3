// SPDX-License-Identifier: MIT
// pattern_vlp16.c: the Velodyne VLP-16 (docs/models/lidar.md, "VLP-16"): 16 lasers fired one
// after another 2.304 us apart, in firing sequences of 55.296 us (16 firings and a recharge
// pause), clockwise at 5 to 20 Hz. A revolution does not hold a whole number of sequences
// (1808.449 at 10 Hz), so time runs on continuously: sequence n starts at t_s + n T_seq and
// belongs to the revolution that contains its start. Elevations by laser ID and the optional
// per-laser vertical offsets are those of the VLP-16 user manual and the Velodyne ROS driver's
// calibration file (VLP16db.yaml).
#include <math.h>

#include "lidar/pattern.h"

#define VLP16_FIRING 2.304e-6      // s between two lasers of a sequence
#define VLP16_SEQUENCE 55.296e-6   // s, one firing sequence

// clang-format off
static const double kElevationDeg[16] = {
  -15, 1, -13, 3, -11, 5, -9, 7, -7, 9, -5, 11, -3, 13, -1, 15,
};
static const double kVerticalOffset[16] = {   // m, by laser ID
  0.0112, -0.0007, 0.0097, -0.0022, 0.0081, -0.0037, 0.0066, -0.0051,
  0.0051, -0.0066, 0.0037, -0.0081, 0.0022, -0.0097, 0.0007, -0.0112,
};
// clang-format on


int lidar_pattern_vlp16_check(const lidar_vlp16_desc_t* d, const char* prefix,
                              err_msg_t* msg) {
  int rc;
  if ((rc = lidar_pattern_check_finite(d->frequency, prefix, "frequency", msg)) ||
      (rc = lidar_pattern_check_azimuth(d->start_azimuth, prefix, "start_azimuth", msg))) {
    return rc;
  }
  if (d->frequency < 5.0 || d->frequency > 20.0) {
    return err_set(msg, ERR_INVAL, "%s.frequency = %g is outside [5, 20] Hz", prefix,
                   d->frequency);
  }
  return 0;
}


int lidar_pattern_vlp16_init(lidar_pattern_t* p, const lidar_vlp16_desc_t* d, const char* prefix,
                             err_msg_t* msg) {
  int rc;
  if ((rc = lidar_pattern_vlp16_check(d, prefix, msg)) ||
      (rc = lidar_pattern_alloc(p, 16, d->vertical_offsets, prefix, msg))) {
    return rc;
  }
  p->kind = LIDAR_PATTERN_VLP16;
  for (uint32_t k = 0; k < 16; k++) {
    p->elevation[k] = kElevationDeg[k] * (M_PI / 180.0);
    p->time_offset[k] = VLP16_FIRING * (double)k;
    p->ring[k] = k;
    if (p->vertical_offset) {
      p->vertical_offset[k] = kVerticalOffset[k];
    }
  }
  p->group_period = VLP16_SEQUENCE;
  p->groups_per_sweep = 0;
  p->sweep_period = 1.0 / d->frequency;
  p->spin_rate = -2.0 * M_PI * d->frequency;
  p->start_azimuth = d->start_azimuth;
  return lidar_pattern_prepare(p, prefix, msg);
}
