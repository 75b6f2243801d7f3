// SPDX-License-Identifier: MIT
// odometer.h: distance travelled by a wheel on a revolute joint (docs/models/joint_sensors.md,
// "Odometer"): d = R theta, then Gaussian noise, binning at 2 pi R / PPR (floor), scaling.
// Signed, not wrapped.
#ifndef SENSIM_JOINT_ODOMETER_H_
#define SENSIM_JOINT_ODOMETER_H_

#include <stdint.h>

#include "base/err.h"
#include "sensor/sensor.h"

typedef struct odometer_config {
  uint32_t joint_id;            // > 0
  double wheel_radius;          // m, > 0 (default 0.5)
  uint32_t pulses_per_revolution;  // default 1024; 0 = no binning
  double noise_stddev;          // m
  double scaling;               // default 1
} odometer_config_t;

void odometer_config_default(odometer_config_t* c);

int odometer_config_check(const odometer_config_t* c, err_msg_t* msg) CHECKRET;

// Distance for joint angle theta (rad) with standard normal draw n.
double odometer_measure(const odometer_config_t* c, double theta, double n);

int odometer_create(const odometer_config_t* c, sensor_t* out, err_msg_t* msg) CHECKRET;

#endif  // SENSIM_JOINT_ODOMETER_H_
