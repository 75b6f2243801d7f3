// SPDX-License-Identifier: MIT
// wire_imu.c: ImuConfig, EncoderConfig, OdometerConfig and ConeConfig -> sensors. Absent fields
// take the models' defaults (docs/models/imu.md, joint_sensors.md, cone.md); every check and
// its message (naming the wire field) is the model's own.
#include <math.h>
#include <stdio.h>

#include "cone/cone.h"
#include "imu/imu.h"
#include "joint/encoder.h"
#include "joint/odometer.h"
#include "net/wire_sensor.h"

// Vector with a default per absent component (and for an absent vector).
static void vec3_default(const Sensim__V1__Vec3* v, double d, double dest[3]) {
  dest[0] = v && v->has_x ? v->x : d;
  dest[1] = v && v->has_y ? v->y : d;
  dest[2] = v && v->has_z ? v->z : d;
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
    vec3_default(m->range->lower, -INFINITY, c->lower);
    vec3_default(m->range->upper, INFINITY, c->upper);
  }
  vec3_default(m->bias, 0.0, c->bias);
  if (m->cross_axis_case == SENSIM__V1__TRIAXIAL_CONFIG__CROSS_AXIS_CROSS_AXIS_SCALAR) {
    if (!(m->cross_axis_scalar >= 0.0 && m->cross_axis_scalar <= 1.0)) {
      return err_set(msg, ERR_INVAL, "%s.cross_axis_scalar = %g must be in [0, 1]", field,
                     m->cross_axis_scalar);
    }
    triax_cross_scalar(m->cross_axis_scalar, c->cross);
  } else if (m->cross_axis_case == SENSIM__V1__TRIAXIAL_CONFIG__CROSS_AXIS_CROSS_AXIS_MATRIX) {
    char name[96];
    snprintf(name, sizeof(name), "%s.cross_axis_matrix", field);
    int rc = wire_mat3_or_identity(m->cross_axis_matrix, name, c->cross, msg);
    if (rc < 0) {
      return rc;
    }
  }
  vec3_default(m->noise_stddev, 0.0, c->noise_stddev);
  vec3_default(m->scaling, 1.0, c->scaling);
  vec3_default(m->spectral_noise_density, 0.0, c->spectral_density);
  c->axes = m->has_axes && m->axes != 0 ? m->axes : 7;
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
      for (int i = 0; i < 3; i++) {
        if (!isfinite(d[i])) {
          static const char* const kAxis[3] = {"x", "y", "z"};
          return err_set(msg, ERR_INVAL, "imu.gyroscope.lae_diagonal.%s = %g is not finite",
                         kAxis[i], d[i]);
        }
      }
      c.lae[0] = d[0];
      c.lae[4] = d[1];
      c.lae[8] = d[2];
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
  encoder_config_default(&c, m->has_mode && m->mode == SENSIM__V1__ENCODER_MODE__ENCODER_INCREMENTAL
                                 ? ENCODER_MODE_INCREMENTAL
                                 : ENCODER_MODE_ABSOLUTE);
  if (m->has_mode && m->mode != SENSIM__V1__ENCODER_MODE__ENCODER_INCREMENTAL &&
      m->mode != SENSIM__V1__ENCODER_MODE__ENCODER_ABSOLUTE) {
    return err_set(msg, ERR_INVAL, "encoder.mode = %d is not ENCODER_ABSOLUTE or "
                   "ENCODER_INCREMENTAL", (int)m->mode);
  }
  c.joint_id = m->has_joint_id ? m->joint_id : 0;
  c.noise_stddev = m->has_noise_stddev ? m->noise_stddev : 0.0;
  c.resolution = m->has_resolution ? m->resolution : 0.0;
  c.scaling = m->has_scaling ? m->scaling : 1.0;
  if (m->has_range_lower) {
    c.lower = m->range_lower;
  }
  if (m->has_range_upper) {
    c.upper = m->range_upper;
  }
  c.speed_timeout = m->has_speed_timeout ? m->speed_timeout : 0.0;
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
  c.noise_stddev = m->has_noise_stddev ? m->noise_stddev : 0.0;
  c.scaling = m->has_scaling ? m->scaling : 1.0;
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
    if (m->mode != SENSIM__V1__CONE_MODE__CONE_EXACT &&
        m->mode != SENSIM__V1__CONE_MODE__CONE_LINES) {
      return err_set(msg, ERR_INVAL, "cone.mode = %d is not CONE_EXACT or CONE_LINES",
                     (int)m->mode);
    }
    c.mode = m->mode == SENSIM__V1__CONE_MODE__CONE_LINES ? CONE_MODE_LINES : CONE_MODE_EXACT;
  }
  if (m->has_lines_per_face) {
    c.lines_per_face = m->lines_per_face;
  }
  return cone_create(&c, out, msg);
}
