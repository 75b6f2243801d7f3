// SPDX-License-Identifier: MIT
// wire_lidar.c: LidarConfig -> lidar sensor. Each pattern message becomes its model's
// description (absent fields take the defaults documented in sensim.proto and
// docs/models/lidar.md); the models validate and name the field ("lidar.spinning.columns = 0
// must be > 0").
#include <math.h>
#include <string.h>

#include "lidar/lidar.h"
#include "net/wire_sensor.h"

#define DEG (M_PI / 180.0)


// The pattern's start time, when given, and the pattern's field names for the lidar's errors
// (start_time; what to reduce when one frame cannot fit in a step's output).
static void start_time(int has, double t, const char* field, const char* frame_field,
                       lidar_desc_t* d) {
  d->has_start_time = has;
  d->start_time = has ? t : 0.0;
  d->pattern_field = field;
  d->frame_field = frame_field;
}


static int build_pattern(const Sensim__V1__LidarConfig* m, lidar_desc_t* d, err_msg_t* msg) {
  lidar_pattern_t* p = &d->pattern;
  switch (m->pattern_case) {
    case SENSIM__V1__LIDAR_CONFIG__PATTERN_SPINNING: {
      const Sensim__V1__SpinningPattern* s = m->spinning;
      if (s->n_channel_elevations > UINT32_MAX || s->n_channel_azimuth_offsets > UINT32_MAX ||
          s->n_channel_time_offsets > UINT32_MAX) {
        return err_set(msg, ERR_INVAL, "lidar.spinning: too many channels");
      }
      lidar_spinning_desc_t sd = {
          .frequency = s->has_frequency ? s->frequency : 0.0,
          .columns = s->has_columns ? s->columns : 0,
          .elevations = s->channel_elevations,
          .nchannel = (uint32_t)s->n_channel_elevations,
          .azimuth_offsets = s->channel_azimuth_offsets,
          .nazimuth_offset = (uint32_t)s->n_channel_azimuth_offsets,
          .time_offsets = s->channel_time_offsets,
          .ntime_offset = (uint32_t)s->n_channel_time_offsets,
          .start_azimuth = s->has_start_azimuth ? s->start_azimuth : 0.0,
      };
      if (s->has_spin && s->spin != SENSIM__V1__SPIN_DIRECTION__SPIN_CLOCKWISE &&
          s->spin != SENSIM__V1__SPIN_DIRECTION__SPIN_COUNTER_CLOCKWISE) {
        return err_set(msg, ERR_INVAL, "lidar.spinning.spin = %d is not CLOCKWISE (0) or "
                       "COUNTER_CLOCKWISE (1)", (int)s->spin);
      }
      sd.counter_clockwise =
          s->has_spin && s->spin == SENSIM__V1__SPIN_DIRECTION__SPIN_COUNTER_CLOCKWISE;
      start_time(s->has_start_time, s->start_time,
                 "lidar.spinning", "lidar.spinning.columns x channel_elevations", d);
      return lidar_pattern_spinning_init(p, &sd, "lidar.spinning", msg);
    }
    case SENSIM__V1__LIDAR_CONFIG__PATTERN_VLP16: {
      const Sensim__V1__Vlp16Pattern* s = m->vlp16;
      lidar_vlp16_desc_t vd = {
          .frequency = s->has_frequency ? s->frequency : 0.0,
          .vertical_offsets = s->has_vertical_offsets && s->vertical_offsets,
          .start_azimuth = s->has_start_azimuth ? s->start_azimuth : 0.0,
      };
      start_time(s->has_start_time, s->start_time, "lidar.vlp16", NULL, d);
      return lidar_pattern_vlp16_init(p, &vd, "lidar.vlp16", msg);
    }
    case SENSIM__V1__LIDAR_CONFIG__PATTERN_OUSTER: {
      const Sensim__V1__OusterPattern* s = m->ouster;
      if (s->n_beam_altitude_angles > UINT32_MAX || s->n_beam_azimuth_angles > UINT32_MAX) {
        return err_set(msg, ERR_INVAL, "lidar.ouster: too many beam angles");
      }
      lidar_ouster_desc_t od = {
          .channels = s->has_channels ? s->channels : 0,
          .columns = s->has_columns ? s->columns : 0,
          .frequency = s->has_frequency ? s->frequency : 0.0,
          .elevation_max = s->has_elevation_max ? s->elevation_max : NAN,
          .elevation_min = s->has_elevation_min ? s->elevation_min : NAN,
          .altitudes = s->beam_altitude_angles,
          .naltitude = (uint32_t)s->n_beam_altitude_angles,
          .azimuths = s->beam_azimuth_angles,
          .nazimuth = (uint32_t)s->n_beam_azimuth_angles,
          .beam_origin = s->has_lidar_origin_to_beam_origin ? s->lidar_origin_to_beam_origin : 0.0,
      };
      if ((s->has_elevation_max && !isfinite(s->elevation_max)) ||
          (s->has_elevation_min && !isfinite(s->elevation_min))) {
        return err_set(msg, ERR_INVAL, "lidar.ouster.elevation_%s = %g is not finite",
                       s->has_elevation_max && !isfinite(s->elevation_max) ? "max" : "min",
                       s->has_elevation_max && !isfinite(s->elevation_max) ? s->elevation_max
                                                                          : s->elevation_min);
      }
      start_time(s->has_start_time, s->start_time,
                 "lidar.ouster", "lidar.ouster.columns x channels", d);
      return lidar_pattern_ouster_init(p, &od, "lidar.ouster", msg);
    }
    case SENSIM__V1__LIDAR_CONFIG__PATTERN_FLASH: {
      const Sensim__V1__FlashPattern* s = m->flash;
      lidar_flash_desc_t fd = {
          .columns = s->has_columns ? s->columns : 0,
          .rows = s->has_rows ? s->rows : 0,
          .fov_horizontal = s->has_fov_horizontal ? s->fov_horizontal : 0.0,
          .fov_vertical = s->has_fov_vertical ? s->fov_vertical : 0.0,
          .frame_rate = s->has_frame_rate ? s->frame_rate : 0.0,
          .projective = s->has_projective && s->projective,
      };
      start_time(s->has_start_time, s->start_time, "lidar.flash", "lidar.flash.columns x rows", d);
      return lidar_pattern_flash_init(p, &fd, "lidar.flash", msg);
    }
    case SENSIM__V1__LIDAR_CONFIG__PATTERN_HDL64E: {
      const Sensim__V1__Hdl64ePattern* s = m->hdl64e;
      lidar_hdl64e_desc_t hd = {
          .frequency = s->has_frequency ? s->frequency : 10.0,
          .columns = s->has_columns ? s->columns : 0,
          .start_azimuth = s->has_start_azimuth ? s->start_azimuth : 0.0,
      };
      if (s->has_columns && s->columns == 0) {
        return err_set(msg, ERR_INVAL, "lidar.hdl64e.columns = 0 must be > 0");
      }
      start_time(s->has_start_time, s->start_time, "lidar.hdl64e", "lidar.hdl64e.columns", d);
      return lidar_pattern_hdl64e_init(p, &hd, "lidar.hdl64e", msg);
    }
    case SENSIM__V1__LIDAR_CONFIG__PATTERN_BPEARL: {
      const Sensim__V1__BpearlPattern* s = m->bpearl;
      lidar_bpearl_desc_t bd = {
          .frequency = s->has_frequency ? s->frequency : 10.0,
          .start_azimuth = s->has_start_azimuth ? s->start_azimuth : 0.0,
      };
      start_time(s->has_start_time, s->start_time, "lidar.bpearl", NULL, d);
      return lidar_pattern_bpearl_init(p, &bd, "lidar.bpearl", msg);
    }
    case SENSIM__V1__LIDAR_CONFIG__PATTERN_CUSTOM: {
      const Sensim__V1__CustomPattern* s = m->custom;
      if (s->n_azimuths != s->n_elevations) {
        return err_set(msg, ERR_INVAL, "lidar.custom.elevations has %zu values for %zu azimuths",
                       s->n_elevations, s->n_azimuths);
      }
      if (s->n_azimuths > LIDAR_PATTERN_MAX_GROUP) {
        return err_set(msg, ERR_INVAL, "lidar.custom.azimuths has %zu rays, more than %u",
                       s->n_azimuths, LIDAR_PATTERN_MAX_GROUP);
      }
      if (s->n_time_offsets > UINT32_MAX || s->n_channels > UINT32_MAX) {
        return err_set(msg, ERR_INVAL, "lidar.custom: too many values");
      }
      lidar_custom_desc_t cd = {
          .azimuths = s->azimuths,
          .elevations = s->elevations,
          .time_offsets = s->time_offsets,
          .ntime_offset = (uint32_t)s->n_time_offsets,
          .channels = s->channels,
          .nchannel = (uint32_t)s->n_channels,
          .nray = (uint32_t)s->n_azimuths,
          .frame_rate = s->has_frame_rate ? s->frame_rate : 0.0,
      };
      start_time(s->has_start_time, s->start_time, "lidar.custom", "lidar.custom.azimuths", d);
      return lidar_pattern_custom_init(p, &cd, "lidar.custom", msg);
    }
    case SENSIM__V1__LIDAR_CONFIG__PATTERN_LIVOX: {
      const Sensim__V1__LivoxPattern* s = m->livox;
      if (s->n_prism_rates != 0 && s->n_prism_rates != 2) {
        return err_set(msg, ERR_INVAL, "lidar.livox.prism_rates has %zu values, expected 2",
                       s->n_prism_rates);
      }
      lidar_livox_desc_t ld = {
          .fov = s->has_fov ? s->fov : 38.4 * DEG,
          .point_rate = s->has_point_rate ? s->point_rate : 100000.0,
          .frame_rate = s->has_frame_rate ? s->frame_rate : 10.0,
          .prism_rate = {7294.0 / 60.0, -4664.0 / 60.0},
      };
      if (s->n_prism_rates == 2) {
        ld.prism_rate[0] = s->prism_rates[0];
        ld.prism_rate[1] = s->prism_rates[1];
      }
      start_time(s->has_start_time, s->start_time,
                 "lidar.livox",
                 "lidar.livox.point_rate / frame_rate (raise lidar.livox.frame_rate)", d);
      return lidar_pattern_livox_init(p, &ld, "lidar.livox", msg);
    }
    default:
      return err_set(msg, ERR_INVAL, "lidar: no scan pattern (set one of spinning, vlp16, "
                     "ouster, flash, hdl64e, bpearl, custom, livox)");
  }
}


static int build_options(const Sensim__V1__LidarConfig* m, lidar_desc_t* d, err_msg_t* msg) {
  // returns: ranges, depth, mode, threshold
  lidar_returns_desc_t* r = &d->returns;
  r->range_min = m->has_range_min ? m->range_min : 0.1;
  r->range_max = m->has_range_max ? m->range_max : INFINITY;
  r->depth = m->has_raytrace_depth ? m->raytrace_depth : 0;
  r->mode = m->has_return_mode ? (lidar_return_mode_t)m->return_mode : LIDAR_RETURN_STRONGEST;
  r->max_returns = m->has_max_returns ? m->max_returns : 0;
  r->intensity_threshold = m->has_intensity_threshold ? m->intensity_threshold : 0.0;
  r->round_trip = m->has_round_trip_attenuation && m->round_trip_attenuation;

  // beam divergence: absent = no loss
  if (m->beam) {
    const Sensim__V1__BeamDivergence* b = m->beam;
    r->beam.enabled = 1;
    r->beam.divergence = b->has_divergence ? b->divergence : 0.0;
    r->beam.exit_radius = b->has_exit_radius ? b->exit_radius : 0.005;
    r->beam.detector_radius = b->has_detector_radius ? b->detector_radius : r->beam.exit_radius;
    r->beam.detector_offset = b->has_detector_offset ? b->detector_offset : 0.0;
    r->beam.clamp = b->has_clamp && b->clamp;
  }

  // noise
  if (m->distance_noise) {
    const Sensim__V1__DistanceNoise* n = m->distance_noise;
    r->distance_noise.stddev_base = n->has_stddev_base ? n->stddev_base : 0.0;
    r->distance_noise.stddev_slope = n->has_stddev_slope ? n->stddev_slope : 0.0;
    r->distance_noise.mean = n->has_mean ? n->mean : 0.0;
  }
  if (m->angle_noise) {
    const Sensim__V1__RayAngleNoise* n = m->angle_noise;
    if (n->has_axis && n->axis != SENSIM__V1__NOISE_AXIS__NOISE_AXIS_ELEVATION &&
        n->axis != SENSIM__V1__NOISE_AXIS__NOISE_AXIS_AZIMUTH) {
      return err_set(msg, ERR_INVAL, "lidar.angle_noise.axis = %d is not ELEVATION (0) or "
                     "AZIMUTH (1)", (int)n->axis);
    }
    d->angle_noise.axis = n->has_axis && n->axis == SENSIM__V1__NOISE_AXIS__NOISE_AXIS_AZIMUTH
                              ? LIDAR_ANGLE_AZIMUTH
                              : LIDAR_ANGLE_ELEVATION;
    d->angle_noise.mean = n->has_mean ? n->mean : 0.0;
    d->angle_noise.stddev = n->has_stddev ? n->stddev : 0.0;
  }

  // output: frame, publishing, misses, layout
  if (m->has_frame && m->frame != SENSIM__V1__OUTPUT_FRAME__FRAME_SENSOR &&
      m->frame != SENSIM__V1__OUTPUT_FRAME__FRAME_WORLD) {
    return err_set(msg, ERR_INVAL, "lidar.frame = %d is not FRAME_SENSOR (0) or FRAME_WORLD (1)",
                   (int)m->frame);
  }
  d->world_frame = m->has_frame && m->frame == SENSIM__V1__OUTPUT_FRAME__FRAME_WORLD;
  if (m->has_publish && m->publish != SENSIM__V1__PUBLISH__PUBLISH_PER_REVOLUTION &&
      m->publish != SENSIM__V1__PUBLISH__PUBLISH_PER_STEP) {
    return err_set(msg, ERR_INVAL, "lidar.publish = %d is not PER_REVOLUTION (0) or PER_STEP "
                   "(1)", (int)m->publish);
  }
  d->publish_per_step = m->has_publish && m->publish == SENSIM__V1__PUBLISH__PUBLISH_PER_STEP;
  if (m->has_misses) {
    if ((unsigned)m->misses > SENSIM__V1__MISS_MODE__MISSES_NAN) {
      return err_set(msg, ERR_INVAL, "lidar.misses = %d is not MISSES_REMOVE (0), MISSES_ZERO "
                     "(1) or MISSES_NAN (2)", (int)m->misses);
    }
    d->misses = (lidar_miss_mode_t)m->misses;
  } else {
    d->misses = m->has_keep_misses && m->keep_misses ? LIDAR_MISS_ZERO : LIDAR_MISS_REMOVE;
  }
  if (m->has_layout) {
    if ((unsigned)m->layout > SENSIM__V1__POINT_LAYOUT__LAYOUT_XYZI) {
      return err_set(msg, ERR_INVAL, "lidar.layout = %d is not LAYOUT_FIELDS (0), "
                     "LAYOUT_VELODYNE (1), LAYOUT_OUSTER (2) or LAYOUT_XYZI (3)", (int)m->layout);
    }
    if (m->layout != SENSIM__V1__POINT_LAYOUT__LAYOUT_FIELDS && m->n_fields) {
      return err_set(msg, ERR_INVAL, "lidar.fields: give either a layout preset or field names, "
                     "not both");
    }
    d->layout = (lidar_layout_preset_t)m->layout;
  }
  if (m->n_fields > SENSOR_MAX_FIELDS) {
    return err_set(msg, ERR_INVAL, "lidar.fields has %zu names, more than %d", m->n_fields,
                   SENSOR_MAX_FIELDS);
  }
  d->fields = (const char* const*)m->fields;
  d->nfield = (uint32_t)m->n_fields;

  // what it sees
  d->see_own_body = m->has_see_own_body && m->see_own_body;
  if (m->n_exclude_bodies > LIDAR_MAX_EXCLUDED_BODIES) {
    return err_set(msg, ERR_INVAL, "lidar.exclude_bodies has %zu bodies, more than %d",
                   m->n_exclude_bodies, LIDAR_MAX_EXCLUDED_BODIES);
  }
  d->exclude_bodies = m->exclude_bodies;
  d->nexclude_body = (uint32_t)m->n_exclude_bodies;
  d->group_mask = m->has_group_mask ? m->group_mask : 0;
  return 0;
}


int wire_lidar_build(const Sensim__V1__LidarConfig* m, uint64_t max_frame_bytes, sensor_t* out,
                     err_msg_t* msg) {
  lidar_desc_t d;
  memset(&d, 0, sizeof d);
  d.max_frame_bytes = max_frame_bytes;
  int rc = build_options(m, &d, msg);
  if (rc < 0) {
    return rc;
  }
  if ((rc = build_pattern(m, &d, msg)) < 0) {
    return rc;
  }
  if ((rc = lidar_create(&d, out, msg)) < 0) {
    lidar_pattern_close(&d.pattern);
    return rc;
  }
  return 0;
}
