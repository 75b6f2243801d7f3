// SPDX-License-Identifier: MIT
// wire_imu.c: ImuConfig, EncoderConfig, OdometerConfig and ConeConfig -> the models'
// configurations, field by field over the models' defaults (docs/models/imu.md,
// joint_sensors.md, cone.md); every check and its message (naming the wire field) is the
// model's own. The one check here is the shape of a Mat3 (9 values).
#include <stdio.h>

#include "cone/cone.h"
#include "imu/imu.h"
#include "joint/encoder.h"
#include "joint/odometer.h"
#include "net/wire_sensor.h"

// The wire's enum values are the models' (the models name them in their messages).
_Static_assert((int)SENSIM__V1__ENCODER_MODE__ENCODER_INCREMENTAL ==
               (int)ENCODER_MODE_INCREMENTAL, "encoder mode");
_Static_assert((int)SENSIM__V1__CONE_MODE__CONE_LINES == (int)CONE_MODE_LINES, "cone mode");

// The components of v that were sent, over dest (absent ones keep the model's default).
static void vec3_over(const Sensim__V1__Vec3* v, double dest[3]) {
  if (!v) {
    return;
  }
  if (v->has_x) {
    dest[0] = v->x;
  }
  if (v->has_y) {
    dest[1] = v->y;
  }
  if (v->has_z) {
    dest[2] = v->z;
  }
}

static int chain_from(const Sensim__V1__TriaxialConfig* m, const char* field, pose_t* mount,
                      triax_config_t* c, err_msg_t* msg) {
  triax_config_default(c);
  *mount = xform_identity();
  if (!m) {
    return 0;
  }
  *mount = wire_pose_from(m->mount);
  if (m->range) {
    vec3_over(m->range->lower, c->lower);
    vec3_over(m->range->upper, c->upper);
  }
  vec3_over(m->bias, c->bias);
  if (m->cross_axis_case == SENSIM__V1__TRIAXIAL_CONFIG__CROSS_AXIS_CROSS_AXIS_SCALAR) {
    c->has_cross_scalar = 1;
    c->cross_scalar = m->cross_axis_scalar;
  } else if (m->cross_axis_case == SENSIM__V1__TRIAXIAL_CONFIG__CROSS_AXIS_CROSS_AXIS_MATRIX) {
    char name[96];
    snprintf(name, sizeof(name), "%s.cross_axis_matrix", field);
    int rc = wire_mat3_or_identity(m->cross_axis_matrix, name, c->cross, msg);
    if (rc < 0) {
      return rc;
    }
  }
  vec3_over(m->noise_stddev, c->noise_stddev);
  vec3_over(m->scaling, c->scaling);
  vec3_over(m->spectral_noise_density, c->spectral_density);
  if (m->has_axes) {
    c->axes = m->axes;
  }
  if (m->drift) {
    const Sensim__V1__TriaxialDrift* d = m->drift;
    c->turn_on_mean = d->has_turn_on_bias_mean ? d->turn_on_bias_mean : 0.0;
    c->turn_on_stddev = d->has_turn_on_bias_stddev ? d->turn_on_bias_stddev : 0.0;
    c->bias_instability = d->has_bias_instability ? d->bias_instability : 0.0;
    c->bias_tau = d->has_bias_correlation_time ? d->bias_correlation_time : 0.0;
    c->random_walk = d->has_random_walk ? d->random_walk : 0.0;
    c->precision = d->has_precision ? d->precision : 0.0;
  }
  return 0;
}

int wire_imu_build(const Sensim__V1__ImuConfig* m, sensor_t* out, err_msg_t* msg) {
  imu_config_t c;
  imu_config_default(&c);
  int rc;
  if (m->accelerometer) {
    c.has_accelerometer = 1;
    c.literal_gravity_sign = m->accelerometer->has_literal_gravity_sign &&
                             m->accelerometer->literal_gravity_sign;
    if ((rc = chain_from(m->accelerometer->chain, "imu.accelerometer.chain",
                         &c.accelerometer_mount, &c.accelerometer, msg)) < 0) {
      return rc;
    }
  }
  if (m->gyroscope) {
    const Sensim__V1__GyroscopeConfig* g = m->gyroscope;
    c.has_gyroscope = 1;
    if ((rc = chain_from(g->chain, "imu.gyroscope.chain", &c.gyroscope_mount, &c.gyroscope,
                         msg)) < 0) {
      return rc;
    }
    if (g->linear_acceleration_effect_case ==
        SENSIM__V1__GYROSCOPE_CONFIG__LINEAR_ACCELERATION_EFFECT_LAE_DIAGONAL) {
      double d[3];
      wire_vec3_or(g->lae_diagonal, 0, 0, 0, d);
      c.lae[0] = d[0];
      c.lae[4] = d[1];
      c.lae[8] = d[2];
      c.lae_is_diagonal = 1;
    } else if (g->linear_acceleration_effect_case ==
               SENSIM__V1__GYROSCOPE_CONFIG__LINEAR_ACCELERATION_EFFECT_LAE_MATRIX) {
      if ((rc = wire_mat3_or_identity(g->lae_matrix, "imu.gyroscope.lae_matrix", c.lae, msg)) <
          0) {
        return rc;
      }
    }
  }
  if (m->magnetometer) {
    c.has_magnetometer = 1;
    if ((rc = chain_from(m->magnetometer->chain, "imu.magnetometer.chain",
                         &c.magnetometer_mount, &c.magnetometer, msg)) < 0) {
      return rc;
    }
  }
  c.sample_rate = m->has_sample_rate ? m->sample_rate : 0.0;
  return imu_create(&c, out, msg);
}

int wire_encoder_build(const Sensim__V1__EncoderConfig* m, sensor_t* out, err_msg_t* msg) {
  encoder_config_t c;
  encoder_config_default(&c, m->has_mode ? (encoder_mode_t)m->mode : ENCODER_MODE_ABSOLUTE);
  c.joint_id = m->has_joint_id ? m->joint_id : 0;
  if (m->has_noise_stddev) {
    c.noise_stddev = m->noise_stddev;
  }
  if (m->has_resolution) {
    c.resolution = m->resolution;
  }
  if (m->has_scaling) {
    c.scaling = m->scaling;
  }
  if (m->has_range_lower) {
    c.lower = m->range_lower;
  }
  if (m->has_range_upper) {
    c.upper = m->range_upper;
  }
  if (m->has_speed_timeout) {
    c.speed_timeout = m->speed_timeout;
  }
  return encoder_create(&c, out, msg);
}

int wire_odometer_build(const Sensim__V1__OdometerConfig* m, sensor_t* out, err_msg_t* msg) {
  odometer_config_t c;
  odometer_config_default(&c);
  c.joint_id = m->has_joint_id ? m->joint_id : 0;
  if (m->has_wheel_radius) {
    c.wheel_radius = m->wheel_radius;
  }
  if (m->has_pulses_per_revolution) {
    c.pulses_per_revolution = m->pulses_per_revolution;
  }
  if (m->has_noise_stddev) {
    c.noise_stddev = m->noise_stddev;
  }
  if (m->has_scaling) {
    c.scaling = m->scaling;
  }
  return odometer_create(&c, out, msg);
}

int wire_cone_build(const Sensim__V1__ConeConfig* m, sensor_t* out, err_msg_t* msg) {
  cone_config_t c;
  cone_config_default(&c);
  if (m->has_fov_horizontal) {
    c.fov_horizontal = m->fov_horizontal;
  }
  if (m->has_fov_vertical) {
    c.fov_vertical = m->fov_vertical;
  }
  if (m->has_range) {
    c.range = m->range;
  }
  if (m->has_mode) {
    c.mode = (cone_mode_t)m->mode;
  }
  if (m->has_lines_per_face) {
    c.lines_per_face = m->lines_per_face;
  }
  return cone_create(&c, out, msg);
}
