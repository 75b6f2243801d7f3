// SPDX-License-Identifier: MIT
// sensors.c: CreateSensor for every kind (lidar with its eight scan patterns, IMU with its
// triaxial chains, encoder, odometer, cone). The *_init functions hold the documented
// defaults, so the values sent equal what an absent field means; fields whose absence has a
// meaning no value has (a start time, a datasheet elevation) are left out when NAN.
#include <math.h>
#include <string.h>

#include "internal.h"

#define DEG (3.14159265358979323846 / 180.0)
// LidarConfig's bounds in the daemon: point fields, excluded bodies
#define LIDAR_MAX_FIELDS 16
#define LIDAR_MAX_EXCLUDED 64


void sensim_sensor_init_sized(sensim_sensor_t* sensor, size_t size) {
  SENSIM_INIT_SIZED(sensim_sensor_t, sensor, size, { d_.mount = sensim_pose_identity(); });
}


// Start cli->tx as CreateSensor with the common fields; NULL after a failure (message set).
static sensim_v1_CreateSensor* begin_sensor(sensim_client_t* cli, const sensim_sensor_t* given,
                                            pb_size_t config_tag, sensim_status_t* st) {
  sensim_sensor_t s;
  sensim_sensor_init(&s);
  *st = sensim_sized_copy(cli, &s, sizeof(s), given, "sensor", "sensim_sensor_init");
  if (*st != SENSIM_OK) {
    return NULL;
  }
  sensim_v1_CreateSensor* w =
      &sensim_begin(cli, sensim_v1_Envelope_create_sensor_tag)->body.create_sensor;
  w->has_id = w->has_body_id = w->has_mount = true;
  w->id = s.id;
  w->body_id = s.body_id;
  sensim_wire_pose(&w->mount, &s.mount);
  w->which_config = config_tag;
  *st = sensim_set_name(cli, w->name, sizeof(w->name), &w->has_name, s.name, "sensor.name");
  return *st == SENSIM_OK ? w : NULL;
}


// A double field that is sent unless NAN (its absence has a meaning of its own).
#define OPTIONAL(msg, field, value)   \
  do {                                \
    if (!isnan(value)) {              \
      (msg)->has_##field = true;      \
      (msg)->field = (value);         \
    }                                 \
  } while (0)

#define SET(msg, field, value)   \
  do {                           \
    (msg)->has_##field = true;   \
    (msg)->field = (value);      \
  } while (0)

//---------------- Lidar

void sensim_lidar_config_init_sized(sensim_lidar_config_t* cfg, size_t size,
                                    sensim_lidar_pattern_t pattern) {
  SENSIM_INIT_SIZED(sensim_lidar_config_t, cfg, size, {
    d_.pattern = pattern;
    d_.spinning.frequency = 10.0;
    d_.spinning.columns = 1024;
    d_.spinning.start_time = NAN;
    d_.vlp16.frequency = 10.0;
    d_.vlp16.start_time = NAN;
    d_.ouster.channels = 64;
    d_.ouster.columns = 1024;
    d_.ouster.frequency = 10.0;
    d_.ouster.elevation_max = d_.ouster.elevation_min = NAN;
    d_.ouster.start_time = NAN;
    d_.flash.columns = 64;
    d_.flash.rows = 32;
    d_.flash.fov_horizontal = 1.0;
    d_.flash.fov_vertical = 0.5;
    d_.flash.frame_rate = 10.0;
    d_.flash.start_time = NAN;
    d_.hdl64e.frequency = 10.0;
    d_.hdl64e.start_time = NAN;
    d_.bpearl.frequency = 10.0;
    d_.bpearl.start_time = NAN;
    d_.custom.frame_rate = 10.0;
    d_.custom.start_time = NAN;
    d_.livox.fov = 38.4 * DEG;
    d_.livox.point_rate = 100000.0;
    d_.livox.frame_rate = 10.0;
    d_.livox.prism_rates[0] = 7294.0 / 60.0;
    d_.livox.prism_rates[1] = -4664.0 / 60.0;
    d_.livox.start_time = NAN;
    d_.range_min = 0.1;
    d_.range_max = INFINITY;
    d_.return_mode = SENSIM_RETURN_STRONGEST;
    d_.beam.divergence = 0.001;
    d_.beam.exit_radius = 0.005;
    d_.beam.detector_radius = NAN;
    d_.frame = SENSIM_FRAME_SENSOR;
    d_.publish = SENSIM_PUBLISH_PER_REVOLUTION;
    d_.misses = SENSIM_MISSES_REMOVE;
    d_.layout = SENSIM_LAYOUT_FIELDS;
  });
}


// The arrays of a lidar configuration, kept while it is encoded.
typedef struct lidar_arrays {
  sensim_span_t a[4];
  sensim_u32s_t channels, exclude;
  sensim_strings_t fields;
} lidar_arrays_t;


static sensim_status_t lidar_pattern(sensim_client_t* cli, const sensim_lidar_config_t* c,
                                     sensim_v1_LidarConfig* w, lidar_arrays_t* arr) {
  sensim_status_t st = SENSIM_OK;
  switch (c->pattern) {
    case SENSIM_PATTERN_SPINNING: {
      sensim_v1_SpinningPattern* p = &w->pattern.spinning;
      size_t n = c->spinning.nchannels;
      if ((st = sensim_need(cli, c->spinning.channel_elevations, n,
                            "cfg.spinning.channel_elevations", "nchannels")) != SENSIM_OK) {
        return st;
      }
      w->which_pattern = sensim_v1_LidarConfig_spinning_tag;
      SET(p, frequency, c->spinning.frequency);
      SET(p, columns, c->spinning.columns);
      sensim_wire_set_span(&p->channel_elevations, &arr->a[0], c->spinning.channel_elevations,
                           8 * n);
      sensim_wire_set_span(&p->channel_azimuth_offsets, &arr->a[1],
                           c->spinning.channel_azimuth_offsets, 8 * n);
      sensim_wire_set_span(&p->channel_time_offsets, &arr->a[2], c->spinning.channel_time_offsets,
                           8 * n);
      SET(p, spin, (sensim_v1_SpinDirection)c->spinning.spin);
      SET(p, start_azimuth, c->spinning.start_azimuth);
      OPTIONAL(p, start_time, c->spinning.start_time);
      return SENSIM_OK;
    }
    case SENSIM_PATTERN_VLP16: {
      sensim_v1_Vlp16Pattern* p = &w->pattern.vlp16;
      w->which_pattern = sensim_v1_LidarConfig_vlp16_tag;
      SET(p, frequency, c->vlp16.frequency);
      SET(p, vertical_offsets, c->vlp16.vertical_offsets);
      SET(p, start_azimuth, c->vlp16.start_azimuth);
      OPTIONAL(p, start_time, c->vlp16.start_time);
      return SENSIM_OK;
    }
    case SENSIM_PATTERN_OUSTER: {
      sensim_v1_OusterPattern* p = &w->pattern.ouster;
      if ((st = sensim_need(cli, c->ouster.beam_altitude_angles, c->ouster.nbeam_altitude_angles,
                            "cfg.ouster.beam_altitude_angles", "nbeam_altitude_angles")) !=
              SENSIM_OK ||
          (st = sensim_need(cli, c->ouster.beam_azimuth_angles, c->ouster.nbeam_azimuth_angles,
                            "cfg.ouster.beam_azimuth_angles", "nbeam_azimuth_angles")) !=
              SENSIM_OK) {
        return st;
      }
      w->which_pattern = sensim_v1_LidarConfig_ouster_tag;
      SET(p, channels, c->ouster.channels);
      SET(p, columns, c->ouster.columns);
      SET(p, frequency, c->ouster.frequency);
      OPTIONAL(p, elevation_max, c->ouster.elevation_max);
      OPTIONAL(p, elevation_min, c->ouster.elevation_min);
      sensim_wire_set_span(&p->beam_altitude_angles, &arr->a[0], c->ouster.beam_altitude_angles,
                           8 * (size_t)c->ouster.nbeam_altitude_angles);
      sensim_wire_set_span(&p->beam_azimuth_angles, &arr->a[1], c->ouster.beam_azimuth_angles,
                           8 * (size_t)c->ouster.nbeam_azimuth_angles);
      SET(p, lidar_origin_to_beam_origin, c->ouster.lidar_origin_to_beam_origin);
      OPTIONAL(p, start_time, c->ouster.start_time);
      return SENSIM_OK;
    }
    case SENSIM_PATTERN_FLASH: {
      sensim_v1_FlashPattern* p = &w->pattern.flash;
      w->which_pattern = sensim_v1_LidarConfig_flash_tag;
      SET(p, columns, c->flash.columns);
      SET(p, rows, c->flash.rows);
      SET(p, fov_horizontal, c->flash.fov_horizontal);
      SET(p, fov_vertical, c->flash.fov_vertical);
      SET(p, frame_rate, c->flash.frame_rate);
      SET(p, projective, c->flash.projective);
      OPTIONAL(p, start_time, c->flash.start_time);
      return SENSIM_OK;
    }
    case SENSIM_PATTERN_HDL64E: {
      sensim_v1_Hdl64ePattern* p = &w->pattern.hdl64e;
      w->which_pattern = sensim_v1_LidarConfig_hdl64e_tag;
      SET(p, frequency, c->hdl64e.frequency);
      if (c->hdl64e.columns != 0) {
        SET(p, columns, c->hdl64e.columns);
      }
      SET(p, start_azimuth, c->hdl64e.start_azimuth);
      OPTIONAL(p, start_time, c->hdl64e.start_time);
      return SENSIM_OK;
    }
    case SENSIM_PATTERN_BPEARL: {
      sensim_v1_BpearlPattern* p = &w->pattern.bpearl;
      w->which_pattern = sensim_v1_LidarConfig_bpearl_tag;
      SET(p, frequency, c->bpearl.frequency);
      SET(p, start_azimuth, c->bpearl.start_azimuth);
      OPTIONAL(p, start_time, c->bpearl.start_time);
      return SENSIM_OK;
    }
    case SENSIM_PATTERN_CUSTOM: {
      sensim_v1_CustomPattern* p = &w->pattern.custom;
      size_t n = c->custom.nrays;
      if ((st = sensim_need(cli, c->custom.azimuths, n, "cfg.custom.azimuths", "nrays")) !=
              SENSIM_OK ||
          (st = sensim_need(cli, c->custom.elevations, n, "cfg.custom.elevations", "nrays")) !=
              SENSIM_OK) {
        return st;
      }
      w->which_pattern = sensim_v1_LidarConfig_custom_tag;
      sensim_wire_set_span(&p->azimuths, &arr->a[0], c->custom.azimuths, 8 * n);
      sensim_wire_set_span(&p->elevations, &arr->a[1], c->custom.elevations, 8 * n);
      sensim_wire_set_span(&p->time_offsets, &arr->a[2], c->custom.time_offsets, 8 * n);
      sensim_wire_set_u32s(&p->channels, &arr->channels, c->custom.channels, c->custom.nrays);
      SET(p, frame_rate, c->custom.frame_rate);
      OPTIONAL(p, start_time, c->custom.start_time);
      return SENSIM_OK;
    }
    case SENSIM_PATTERN_LIVOX: {
      sensim_v1_LivoxPattern* p = &w->pattern.livox;
      w->which_pattern = sensim_v1_LidarConfig_livox_tag;
      SET(p, fov, c->livox.fov);
      SET(p, point_rate, c->livox.point_rate);
      SET(p, frame_rate, c->livox.frame_rate);
      sensim_wire_set_span(&p->prism_rates, &arr->a[0], c->livox.prism_rates,
                           sizeof(c->livox.prism_rates));
      OPTIONAL(p, start_time, c->livox.start_time);
      return SENSIM_OK;
    }
  }
  return sensim_cli_fail(cli, SENSIM_INVALID_ARGUMENT, "cfg.pattern = %d is not a "
                         "sensim_lidar_pattern_t (SPINNING 1 .. LIVOX 8)", (int)c->pattern);
}


sensim_status_t sensim_create_lidar(sensim_client_t* cli, const sensim_sensor_t* sensor,
                                    const sensim_lidar_config_t* cfg) {
  if (!cli) {
    return SENSIM_INVALID_ARGUMENT;
  }
  sensim_lidar_config_t c;
  sensim_lidar_config_init(&c, SENSIM_PATTERN_SPINNING);
  sensim_status_t st = sensim_sized_copy(cli, &c, sizeof(c), cfg, "cfg",
                                         "sensim_lidar_config_init");
  if (st != SENSIM_OK ||
      (st = sensim_need(cli, c.fields, c.nfields, "cfg.fields", "nfields")) != SENSIM_OK ||
      (st = sensim_need(cli, c.exclude_bodies, c.nexclude_bodies, "cfg.exclude_bodies",
                        "nexclude_bodies")) != SENSIM_OK) {
    return st;
  }
  // the counts first: no more of the caller's arrays is read than the daemon takes
  if (c.nfields > LIDAR_MAX_FIELDS || c.nexclude_bodies > LIDAR_MAX_EXCLUDED) {
    bool fields = c.nfields > LIDAR_MAX_FIELDS;
    return sensim_cli_fail(cli, SENSIM_INVALID_ARGUMENT, "cfg.%s = %u: at most %d",
                           fields ? "nfields" : "nexclude_bodies",
                           fields ? c.nfields : c.nexclude_bodies,
                           fields ? LIDAR_MAX_FIELDS : LIDAR_MAX_EXCLUDED);
  }
  for (uint32_t i = 0; i < c.nfields; i++) {
    if (c.fields[i] == NULL) {
      return sensim_cli_fail(cli, SENSIM_INVALID_ARGUMENT, "cfg.fields[%u]: NULL", i);
    }
  }
  sensim_v1_CreateSensor* s = begin_sensor(cli, sensor, sensim_v1_CreateSensor_lidar_tag, &st);
  if (!s) {
    return st;
  }
  sensim_v1_LidarConfig* w = &s->config.lidar;
  lidar_arrays_t arr;
  memset(&arr, 0, sizeof(arr));
  if ((st = lidar_pattern(cli, &c, w, &arr)) != SENSIM_OK) {
    return st;
  }

  // returns
  SET(w, range_min, c.range_min);
  if (!(isinf(c.range_max) && c.range_max > 0)) {
    SET(w, range_max, c.range_max);
  }
  SET(w, raytrace_depth, c.raytrace_depth);
  SET(w, return_mode, (sensim_v1_ReturnMode)c.return_mode);
  SET(w, max_returns, c.max_returns);
  SET(w, intensity_threshold, c.intensity_threshold);
  SET(w, round_trip_attenuation, c.round_trip_attenuation);
  if (c.beam.enabled) {
    w->has_beam = true;
    SET(&w->beam, divergence, c.beam.divergence);
    SET(&w->beam, exit_radius, c.beam.exit_radius);
    OPTIONAL(&w->beam, detector_radius, c.beam.detector_radius);
    SET(&w->beam, detector_offset, c.beam.detector_offset);
    SET(&w->beam, clamp, c.beam.clamp);
  }
  if (c.distance_noise.stddev_base != 0.0 || c.distance_noise.stddev_slope != 0.0 ||
      c.distance_noise.mean != 0.0) {
    w->has_distance_noise = true;
    SET(&w->distance_noise, stddev_base, c.distance_noise.stddev_base);
    SET(&w->distance_noise, stddev_slope, c.distance_noise.stddev_slope);
    SET(&w->distance_noise, mean, c.distance_noise.mean);
  }
  if (c.angle_noise.mean != 0.0 || c.angle_noise.stddev != 0.0 ||
      c.angle_noise.axis != SENSIM_NOISE_AXIS_ELEVATION) {
    w->has_angle_noise = true;
    SET(&w->angle_noise, axis, (sensim_v1_NoiseAxis)c.angle_noise.axis);
    SET(&w->angle_noise, mean, c.angle_noise.mean);
    SET(&w->angle_noise, stddev, c.angle_noise.stddev);
  }

  // output
  SET(w, frame, (sensim_v1_OutputFrame)c.frame);
  SET(w, publish, (sensim_v1_Publish)c.publish);
  arr.fields.v = c.fields;
  arr.fields.n = c.nfields;
  w->fields.funcs.encode = sensim_wire_encode_strings;
  w->fields.arg = &arr.fields;
  SET(w, misses, (sensim_v1_MissMode)c.misses);
  SET(w, layout, (sensim_v1_PointLayout)c.layout);

  // what it sees
  SET(w, see_own_body, c.see_own_body);
  sensim_wire_set_u32s(&w->exclude_bodies, &arr.exclude, c.exclude_bodies, c.nexclude_bodies);
  if (c.group_mask != 0) {
    SET(w, group_mask, c.group_mask);
  }
  return sensim_call_status(cli);
}

//---------------- IMU

static void triaxial_default(sensim_triaxial_t* t) {
  memset(t, 0, sizeof(*t));
  t->mount = sensim_pose_identity();
  for (int k = 0; k < 3; k++) {
    t->range_lower[k] = -INFINITY;
    t->range_upper[k] = INFINITY;
    t->scaling[k] = 1.0;
  }
  for (int k = 0; k < 9; k++) {
    t->cross_axis_matrix[k] = k % 4 == 0 ? 1.0 : 0.0;
  }
}


void sensim_imu_config_init_sized(sensim_imu_config_t* cfg, size_t size) {
  SENSIM_INIT_SIZED(sensim_imu_config_t, cfg, size, {
    d_.has_accelerometer = true;
    d_.has_gyroscope = true;
    triaxial_default(&d_.accelerometer);
    triaxial_default(&d_.gyroscope);
    triaxial_default(&d_.magnetometer);
    for (int k = 0; k < 9; k++) {
      d_.lae_matrix[k] = 0.0;
    }
  });
}


static bool any_nonzero(const double* v, int n) {
  for (int i = 0; i < n; i++) {
    if (v[i] != 0.0) {
      return true;
    }
  }
  return false;
}


static void mat3(sensim_v1_Mat3* m, const double v[9]) {
  m->m_count = 9;
  memcpy(m->m, v, sizeof(m->m));
}


static sensim_status_t triaxial(sensim_client_t* cli, const sensim_triaxial_t* t,
                                sensim_v1_TriaxialConfig* w, const char* what) {
  w->has_mount = true;
  sensim_wire_pose(&w->mount, &t->mount);

  // range: a bound at infinity is no bound, sent as an absent component
  sensim_v1_Vec3* lo = &w->range.lower;
  sensim_v1_Vec3* hi = &w->range.upper;
  bool* has_lo[3] = {&lo->has_x, &lo->has_y, &lo->has_z};
  double* lo_v[3] = {&lo->x, &lo->y, &lo->z};
  bool* has_hi[3] = {&hi->has_x, &hi->has_y, &hi->has_z};
  double* hi_v[3] = {&hi->x, &hi->y, &hi->z};
  for (int k = 0; k < 3; k++) {
    if (!(isinf(t->range_lower[k]) && t->range_lower[k] < 0)) {
      *has_lo[k] = w->range.has_lower = w->has_range = true;
      *lo_v[k] = t->range_lower[k];
    }
    if (!(isinf(t->range_upper[k]) && t->range_upper[k] > 0)) {
      *has_hi[k] = w->range.has_upper = w->has_range = true;
      *hi_v[k] = t->range_upper[k];
    }
  }
  w->has_bias = true;
  sensim_wire_vec3(&w->bias, t->bias);
  switch (t->cross_axis) {
    case SENSIM_CROSS_AXIS_NONE:
      break;
    case SENSIM_CROSS_AXIS_SCALAR:
      w->which_cross_axis = sensim_v1_TriaxialConfig_cross_axis_scalar_tag;
      w->cross_axis.cross_axis_scalar = t->cross_axis_scalar;
      break;
    case SENSIM_CROSS_AXIS_MATRIX:
      w->which_cross_axis = sensim_v1_TriaxialConfig_cross_axis_matrix_tag;
      mat3(&w->cross_axis.cross_axis_matrix, t->cross_axis_matrix);
      break;
    default:
      return sensim_cli_fail(cli, SENSIM_INVALID_ARGUMENT, "%s.cross_axis = %d is not a "
                             "sensim_cross_axis_t (NONE 0, SCALAR 1, MATRIX 2)", what,
                             (int)t->cross_axis);
  }
  w->has_noise_stddev = w->has_scaling = w->has_spectral_noise_density = w->has_axes = true;
  sensim_wire_vec3(&w->noise_stddev, t->noise_stddev);
  sensim_wire_vec3(&w->scaling, t->scaling);
  sensim_wire_vec3(&w->spectral_noise_density, t->spectral_noise_density);
  w->axes = t->axes;
  const double drift[6] = {t->drift.turn_on_bias_mean, t->drift.turn_on_bias_stddev,
                           t->drift.bias_instability, t->drift.bias_correlation_time,
                           t->drift.random_walk, t->drift.precision};
  if (any_nonzero(drift, 6)) {
    sensim_v1_TriaxialDrift* d = &w->drift;
    w->has_drift = true;
    SET(d, turn_on_bias_mean, t->drift.turn_on_bias_mean);
    SET(d, turn_on_bias_stddev, t->drift.turn_on_bias_stddev);
    SET(d, bias_instability, t->drift.bias_instability);
    SET(d, bias_correlation_time, t->drift.bias_correlation_time);
    SET(d, random_walk, t->drift.random_walk);
    SET(d, precision, t->drift.precision);
  }
  return SENSIM_OK;
}


sensim_status_t sensim_create_imu(sensim_client_t* cli, const sensim_sensor_t* sensor,
                                  const sensim_imu_config_t* cfg) {
  if (!cli) {
    return SENSIM_INVALID_ARGUMENT;
  }
  sensim_imu_config_t c;
  sensim_imu_config_init(&c);
  sensim_status_t st = sensim_sized_copy(cli, &c, sizeof(c), cfg, "cfg",
                                         "sensim_imu_config_init");
  if (st != SENSIM_OK) {
    return st;
  }
  sensim_v1_CreateSensor* s = begin_sensor(cli, sensor, sensim_v1_CreateSensor_imu_tag, &st);
  if (!s) {
    return st;
  }
  sensim_v1_ImuConfig* w = &s->config.imu;
  if (c.has_accelerometer) {
    w->has_accelerometer = w->accelerometer.has_chain = true;
    SET(&w->accelerometer, literal_gravity_sign, c.literal_gravity_sign);
    if ((st = triaxial(cli, &c.accelerometer, &w->accelerometer.chain, "cfg.accelerometer")) !=
        SENSIM_OK) {
      return st;
    }
  }
  if (c.has_gyroscope) {
    w->has_gyroscope = w->gyroscope.has_chain = true;
    if ((st = triaxial(cli, &c.gyroscope, &w->gyroscope.chain, "cfg.gyroscope")) != SENSIM_OK) {
      return st;
    }
    switch (c.lae) {
      case SENSIM_LAE_NONE:
        break;
      case SENSIM_LAE_DIAGONAL:
        w->gyroscope.which_linear_acceleration_effect = sensim_v1_GyroscopeConfig_lae_diagonal_tag;
        sensim_wire_vec3(&w->gyroscope.linear_acceleration_effect.lae_diagonal, c.lae_diagonal);
        break;
      case SENSIM_LAE_MATRIX:
        w->gyroscope.which_linear_acceleration_effect = sensim_v1_GyroscopeConfig_lae_matrix_tag;
        mat3(&w->gyroscope.linear_acceleration_effect.lae_matrix, c.lae_matrix);
        break;
      default:
        return sensim_cli_fail(cli, SENSIM_INVALID_ARGUMENT, "cfg.lae = %d is not a "
                               "sensim_lae_t (NONE 0, DIAGONAL 1, MATRIX 2)", (int)c.lae);
    }
  }
  if (c.has_magnetometer) {
    w->has_magnetometer = w->magnetometer.has_chain = true;
    if ((st = triaxial(cli, &c.magnetometer, &w->magnetometer.chain, "cfg.magnetometer")) !=
        SENSIM_OK) {
      return st;
    }
  }
  SET(w, sample_rate, c.sample_rate);
  return sensim_call_status(cli);
}

//---------------- Joint sensors and cone

void sensim_encoder_config_init_sized(sensim_encoder_config_t* cfg, size_t size) {
  SENSIM_INIT_SIZED(sensim_encoder_config_t, cfg, size, {
    d_.scaling = 1.0;
    d_.mode = SENSIM_ENCODER_ABSOLUTE;
    d_.range_lower = d_.range_upper = NAN;
  });
}


sensim_status_t sensim_create_encoder(sensim_client_t* cli, const sensim_sensor_t* sensor,
                                      const sensim_encoder_config_t* cfg) {
  if (!cli) {
    return SENSIM_INVALID_ARGUMENT;
  }
  sensim_encoder_config_t c;
  sensim_encoder_config_init(&c);
  sensim_status_t st = sensim_sized_copy(cli, &c, sizeof(c), cfg, "cfg",
                                         "sensim_encoder_config_init");
  if (st != SENSIM_OK) {
    return st;
  }
  sensim_v1_CreateSensor* s = begin_sensor(cli, sensor, sensim_v1_CreateSensor_encoder_tag, &st);
  if (!s) {
    return st;
  }
  sensim_v1_EncoderConfig* w = &s->config.encoder;
  SET(w, joint_id, c.joint_id);
  SET(w, noise_stddev, c.noise_stddev);
  SET(w, resolution, c.resolution);
  SET(w, scaling, c.scaling);
  SET(w, mode, (sensim_v1_EncoderMode)c.mode);
  OPTIONAL(w, range_lower, c.range_lower);
  OPTIONAL(w, range_upper, c.range_upper);
  SET(w, speed_timeout, c.speed_timeout);
  return sensim_call_status(cli);
}


void sensim_odometer_config_init_sized(sensim_odometer_config_t* cfg, size_t size) {
  SENSIM_INIT_SIZED(sensim_odometer_config_t, cfg, size, {
    d_.wheel_radius = 0.5;
    d_.pulses_per_revolution = 1024;
    d_.scaling = 1.0;
  });
}


sensim_status_t sensim_create_odometer(sensim_client_t* cli, const sensim_sensor_t* sensor,
                                       const sensim_odometer_config_t* cfg) {
  if (!cli) {
    return SENSIM_INVALID_ARGUMENT;
  }
  sensim_odometer_config_t c;
  sensim_odometer_config_init(&c);
  sensim_status_t st = sensim_sized_copy(cli, &c, sizeof(c), cfg, "cfg",
                                         "sensim_odometer_config_init");
  if (st != SENSIM_OK) {
    return st;
  }
  sensim_v1_CreateSensor* s = begin_sensor(cli, sensor, sensim_v1_CreateSensor_odometer_tag, &st);
  if (!s) {
    return st;
  }
  sensim_v1_OdometerConfig* w = &s->config.odometer;
  SET(w, joint_id, c.joint_id);
  SET(w, wheel_radius, c.wheel_radius);
  SET(w, pulses_per_revolution, c.pulses_per_revolution);
  SET(w, noise_stddev, c.noise_stddev);
  SET(w, scaling, c.scaling);
  return sensim_call_status(cli);
}


void sensim_cone_config_init_sized(sensim_cone_config_t* cfg, size_t size) {
  SENSIM_INIT_SIZED(sensim_cone_config_t, cfg, size, {
    d_.fov_horizontal = 45.0 * DEG;
    d_.fov_vertical = 30.0 * DEG;
    d_.range = 20.0;
    d_.mode = SENSIM_CONE_EXACT;
    d_.lines_per_face = 10;
  });
}


sensim_status_t sensim_create_cone(sensim_client_t* cli, const sensim_sensor_t* sensor,
                                   const sensim_cone_config_t* cfg) {
  if (!cli) {
    return SENSIM_INVALID_ARGUMENT;
  }
  sensim_cone_config_t c;
  sensim_cone_config_init(&c);
  sensim_status_t st = sensim_sized_copy(cli, &c, sizeof(c), cfg, "cfg",
                                         "sensim_cone_config_init");
  if (st != SENSIM_OK) {
    return st;
  }
  sensim_v1_CreateSensor* s = begin_sensor(cli, sensor, sensim_v1_CreateSensor_cone_tag, &st);
  if (!s) {
    return st;
  }
  sensim_v1_ConeConfig* w = &s->config.cone;
  SET(w, fov_horizontal, c.fov_horizontal);
  SET(w, fov_vertical, c.fov_vertical);
  SET(w, range, c.range);
  SET(w, mode, (sensim_v1_ConeMode)c.mode);
  SET(w, lines_per_face, c.lines_per_face);
  return sensim_call_status(cli);
}
