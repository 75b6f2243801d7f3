// SPDX-License-Identifier: MIT
// wire_lidar.c: LidarConfig -> lidar sensor.
#include "net/wire_sensor.h"

int wire_lidar_build(const Sensim__V1__LidarConfig* m, sensor_t* out, err_msg_t* msg) {
  (void)m;
  (void)out;
  return err_set(msg, ERR_UNIMPL, "lidar sensors are not served by this daemon yet");
}
