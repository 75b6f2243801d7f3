// SPDX-License-Identifier: MIT
// pattern_hdl64e.c: the Velodyne HDL-64E (docs/models/lidar.md, "Velodyne HDL-64E"). From the
// HDL-64E S2 datasheet and user's manual: 64 lasers in an upper and a lower block, vertical
// field +2 to -24.8 degrees (upper block about 1/3 degree apart, lower block about 1/2 degree),
// 5 to 20 Hz, about 1.33 million points per second. Model here: upper block uniform from +2 to
// -8.33 degrees, lower block uniform from -8.83 to -24.8 degrees (units differ: a per-unit
// table is a custom spinning pattern), lasers of a column fired together, clockwise; default
// columns = the datasheet point rate divided by 64 lasers and the frequency.
#include <math.h>

#include "lidar/pattern.h"

#define HDL64E_POINT_RATE 1.3333e6  // points per second, single return


uint32_t lidar_pattern_hdl64e_columns(double frequency) {
  return (uint32_t)lround(HDL64E_POINT_RATE / (64.0 * frequency));
}


// The generic description of the HDL-64E at d's settings; el receives the 64 elevations.
static lidar_spinning_desc_t hdl64e_spinning(const lidar_hdl64e_desc_t* d, double el[64]) {
  for (int i = 0; i < 32; i++) {
    el[i] = (2.0 - (double)i * (2.0 + 8.33) / 31.0) * (M_PI / 180.0);
    el[32 + i] = (-8.83 - (double)i * (24.8 - 8.83) / 31.0) * (M_PI / 180.0);
  }
  return (lidar_spinning_desc_t){
      .frequency = d->frequency,
      .columns = d->columns ? d->columns : lidar_pattern_hdl64e_columns(d->frequency),
      .elevations = el,
      .nchannel = 64,
      .start_azimuth = d->start_azimuth,
  };
}


int lidar_pattern_hdl64e_check(const lidar_hdl64e_desc_t* d, const char* prefix,
                               err_msg_t* msg) {
  int rc;
  if ((rc = lidar_pattern_check_finite(d->frequency, prefix, "frequency", msg))) {
    return rc;
  }
  if (d->frequency < 5.0 || d->frequency > 20.0) {
    return err_set(msg, ERR_INVAL, "%s.frequency = %g is outside [5, 20] Hz", prefix,
                   d->frequency);
  }
  double el[64];
  lidar_spinning_desc_t s = hdl64e_spinning(d, el);
  return lidar_pattern_spinning_check(&s, prefix, msg);
}


int lidar_pattern_hdl64e_init(lidar_pattern_t* p, const lidar_hdl64e_desc_t* d,
                              const char* prefix, err_msg_t* msg) {
  int rc;
  if ((rc = lidar_pattern_hdl64e_check(d, prefix, msg))) {
    return rc;
  }
  double el[64];
  lidar_spinning_desc_t s = hdl64e_spinning(d, el);
  if ((rc = lidar_pattern_spinning_init(p, &s, prefix, msg))) {
    return rc;
  }
  p->kind = LIDAR_PATTERN_HDL64E;
  return 0;
}
