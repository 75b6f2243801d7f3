// SPDX-License-Identifier: MIT
// encoder.h: a position encoder on a joint (docs/models/joint_sensors.md, "Encoder"). Chain, in
// order: Gaussian noise, resolution binning (floor), scaling, then the mode: INCREMENTAL wraps
// into [L, U), ABSOLUTE clamps to [L, U]. Speed: the change of the measured value between two
// changes divided by the real time between them (wrap-aware in incremental mode), held between
// changes, 0 after an optional timeout without change.
#ifndef SENSIM_JOINT_ENCODER_H_
#define SENSIM_JOINT_ENCODER_H_

#include <stdint.h>

#include "base/err.h"
#include "sensor/sensor.h"

typedef enum encoder_mode {
  ENCODER_MODE_ABSOLUTE = 0,
  ENCODER_MODE_INCREMENTAL = 1,
} encoder_mode_t;

typedef struct encoder_config {
  uint32_t joint_id;            // > 0
  double noise_stddev;          // >= 0, joint units
  double resolution;            // bin width; 0 = no binning
  double scaling;               // default 1
  encoder_mode_t mode;          // default ABSOLUTE
  double lower, upper;          // range; absolute default (-inf, inf), incremental [0, 2 pi)
  double speed_timeout;         // s; 0 = off
} encoder_config_t;

typedef struct encoder_speed {
  int started;
  double m_ref, t_ref;          // value and time of the last change
  double speed;                 // held estimate
} encoder_speed_t;

// Defaults for `mode` (range per mode as above).
void encoder_config_default(encoder_config_t* c, encoder_mode_t mode);

int encoder_config_check(const encoder_config_t* c, err_msg_t* msg) CHECKRET;

// u - (U - L) floor((u - L) / (U - L)), in [L, U).
double encoder_wrap(double u, double lower, double upper);

// res floor(u / res) (res > 0); u itself when u / res is not finite (a step finer than u's
// resolution).
double encoder_bin(double u, double res);

// Measured value of joint position q with standard normal draw n.
double encoder_measure(const encoder_config_t* c, double q, double n);

// Feed measured value m at time t; returns the speed output.
double encoder_speed_update(const encoder_config_t* c, encoder_speed_t* s, double m, double t);

int encoder_create(const encoder_config_t* c, sensor_t* out, err_msg_t* msg) CHECKRET;

#endif  // SENSIM_JOINT_ENCODER_H_
