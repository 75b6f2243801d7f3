// SPDX-License-Identifier: MIT
// wire_imu.c: ImuConfig, EncoderConfig, OdometerConfig and ConeConfig -> sensors.
#include "net/wire_sensor.h"

int wire_imu_build(const Sensim__V1__ImuConfig* m, sensor_t* out, err_msg_t* msg) {
  (void)m;
  (void)out;
  return err_set(msg, ERR_UNIMPL, "imu sensors are not served by this daemon yet");
}

int wire_encoder_build(const Sensim__V1__EncoderConfig* m, sensor_t* out, err_msg_t* msg) {
  (void)m;
  (void)out;
  return err_set(msg, ERR_UNIMPL, "encoder sensors are not served by this daemon yet");
}

int wire_odometer_build(const Sensim__V1__OdometerConfig* m, sensor_t* out, err_msg_t* msg) {
  (void)m;
  (void)out;
  return err_set(msg, ERR_UNIMPL, "odometer sensors are not served by this daemon yet");
}

int wire_cone_build(const Sensim__V1__ConeConfig* m, sensor_t* out, err_msg_t* msg) {
  (void)m;
  (void)out;
  return err_set(msg, ERR_UNIMPL, "cone sensors are not served by this daemon yet");
}
