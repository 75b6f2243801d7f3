// SPDX-License-Identifier: MIT
// wire_lidar.c: LidarConfig -> lidar_config_t (lidar/config.h), field by field: a field sent is
// copied and its presence flag raised; absent fields take the lidar's own defaults, and every
// check (naming the wire field, "lidar.spinning.columns = 0 must be > 0") is the lidar's.
#include <string.h>

#include "lidar/config.h"
#include "net/wire_sensor.h"

// The wire's enum values are the core's (the core names them in its messages).
_Static_assert((int)SENSIM__V1__SPIN_DIRECTION__SPIN_COUNTER_CLOCKWISE ==
               (int)LIDAR_SPIN_COUNTER_CLOCKWISE, "spin direction");
_Static_assert((int)SENSIM__V1__NOISE_AXIS__NOISE_AXIS_AZIMUTH == (int)LIDAR_ANGLE_AZIMUTH,
               "noise axis");
_Static_assert((int)SENSIM__V1__RETURN_MODE__RETURN_ALL == (int)LIDAR_RETURN_ALL, "return mode");
_Static_assert((int)SENSIM__V1__OUTPUT_FRAME__FRAME_WORLD == (int)LIDAR_FRAME_WORLD, "frame");
_Static_assert((int)SENSIM__V1__PUBLISH__PUBLISH_PER_STEP == (int)LIDAR_PUBLISH_PER_STEP,
               "publish");
_Static_assert((int)SENSIM__V1__MISS_MODE__MISSES_NAN == (int)LIDAR_MISS_NAN, "misses");
_Static_assert((int)SENSIM__V1__POINT_LAYOUT__LAYOUT_XYZI == (int)LIDAR_LAYOUT_XYZI, "layout");


static void pattern_from(const Sensim__V1__LidarConfig* m, lidar_config_t* c) {
  switch (m->pattern_case) {
    case SENSIM__V1__LIDAR_CONFIG__PATTERN_SPINNING: {
      const Sensim__V1__SpinningPattern* s = m->spinning;
      lidar_spinning_config_t* o = &c->spinning;
      c->pattern = LIDAR_PATTERN_SPINNING;
      o->frequency = s->has_frequency ? s->frequency : 0.0;
      o->columns = s->has_columns ? s->columns : 0;
      o->channel_elevations = s->channel_elevations;
      o->nchannel_elevation = s->n_channel_elevations;
      o->channel_azimuth_offsets = s->channel_azimuth_offsets;
      o->nchannel_azimuth_offset = s->n_channel_azimuth_offsets;
      o->channel_time_offsets = s->channel_time_offsets;
      o->nchannel_time_offset = s->n_channel_time_offsets;
      o->spin = s->has_spin ? (lidar_spin_t)s->spin : LIDAR_SPIN_CLOCKWISE;
      o->start_azimuth = s->has_start_azimuth ? s->start_azimuth : 0.0;
      c->has_start_time = s->has_start_time;
      c->start_time = s->start_time;
      return;
    }
    case SENSIM__V1__LIDAR_CONFIG__PATTERN_VLP16: {
      const Sensim__V1__Vlp16Pattern* s = m->vlp16;
      c->pattern = LIDAR_PATTERN_VLP16;
      c->vlp16.frequency = s->has_frequency ? s->frequency : 0.0;
      c->vlp16.vertical_offsets = s->has_vertical_offsets && s->vertical_offsets;
      c->vlp16.start_azimuth = s->has_start_azimuth ? s->start_azimuth : 0.0;
      c->has_start_time = s->has_start_time;
      c->start_time = s->start_time;
      return;
    }
    case SENSIM__V1__LIDAR_CONFIG__PATTERN_OUSTER: {
      const Sensim__V1__OusterPattern* s = m->ouster;
      lidar_ouster_config_t* o = &c->ouster;
      c->pattern = LIDAR_PATTERN_OUSTER;
      o->channels = s->has_channels ? s->channels : 0;
      o->columns = s->has_columns ? s->columns : 0;
      o->frequency = s->has_frequency ? s->frequency : 0.0;
      o->has_elevation_max = s->has_elevation_max;
      o->elevation_max = s->elevation_max;
      o->has_elevation_min = s->has_elevation_min;
      o->elevation_min = s->elevation_min;
      o->beam_altitude_angles = s->beam_altitude_angles;
      o->nbeam_altitude_angle = s->n_beam_altitude_angles;
      o->beam_azimuth_angles = s->beam_azimuth_angles;
      o->nbeam_azimuth_angle = s->n_beam_azimuth_angles;
      o->lidar_origin_to_beam_origin =
          s->has_lidar_origin_to_beam_origin ? s->lidar_origin_to_beam_origin : 0.0;
      c->has_start_time = s->has_start_time;
      c->start_time = s->start_time;
      return;
    }
    case SENSIM__V1__LIDAR_CONFIG__PATTERN_FLASH: {
      const Sensim__V1__FlashPattern* s = m->flash;
      lidar_flash_config_t* o = &c->flash;
      c->pattern = LIDAR_PATTERN_FLASH;
      o->columns = s->has_columns ? s->columns : 0;
      o->rows = s->has_rows ? s->rows : 0;
      o->fov_horizontal = s->has_fov_horizontal ? s->fov_horizontal : 0.0;
      o->fov_vertical = s->has_fov_vertical ? s->fov_vertical : 0.0;
      o->frame_rate = s->has_frame_rate ? s->frame_rate : 0.0;
      o->projective = s->has_projective && s->projective;
      c->has_start_time = s->has_start_time;
      c->start_time = s->start_time;
      return;
    }
    case SENSIM__V1__LIDAR_CONFIG__PATTERN_HDL64E: {
      const Sensim__V1__Hdl64ePattern* s = m->hdl64e;
      c->pattern = LIDAR_PATTERN_HDL64E;
      c->hdl64e.has_frequency = s->has_frequency;
      c->hdl64e.frequency = s->frequency;
      c->hdl64e.has_columns = s->has_columns;
      c->hdl64e.columns = s->columns;
      c->hdl64e.start_azimuth = s->has_start_azimuth ? s->start_azimuth : 0.0;
      c->has_start_time = s->has_start_time;
      c->start_time = s->start_time;
      return;
    }
    case SENSIM__V1__LIDAR_CONFIG__PATTERN_BPEARL: {
      const Sensim__V1__BpearlPattern* s = m->bpearl;
      c->pattern = LIDAR_PATTERN_BPEARL;
      c->bpearl.has_frequency = s->has_frequency;
      c->bpearl.frequency = s->frequency;
      c->bpearl.start_azimuth = s->has_start_azimuth ? s->start_azimuth : 0.0;
      c->has_start_time = s->has_start_time;
      c->start_time = s->start_time;
      return;
    }
    case SENSIM__V1__LIDAR_CONFIG__PATTERN_CUSTOM: {
      const Sensim__V1__CustomPattern* s = m->custom;
      lidar_custom_config_t* o = &c->custom;
      c->pattern = LIDAR_PATTERN_CUSTOM;
      o->azimuths = s->azimuths;
      o->nazimuth = s->n_azimuths;
      o->elevations = s->elevations;
      o->nelevation = s->n_elevations;
      o->time_offsets = s->time_offsets;
      o->ntime_offset = s->n_time_offsets;
      o->channels = s->channels;
      o->nchannel = s->n_channels;
      o->frame_rate = s->has_frame_rate ? s->frame_rate : 0.0;
      c->has_start_time = s->has_start_time;
      c->start_time = s->start_time;
      return;
    }
    case SENSIM__V1__LIDAR_CONFIG__PATTERN_LIVOX: {
      const Sensim__V1__LivoxPattern* s = m->livox;
      lidar_livox_config_t* o = &c->livox;
      c->pattern = LIDAR_PATTERN_LIVOX;
      o->has_fov = s->has_fov;
      o->fov = s->fov;
      o->has_point_rate = s->has_point_rate;
      o->point_rate = s->point_rate;
      o->has_frame_rate = s->has_frame_rate;
      o->frame_rate = s->frame_rate;
      o->prism_rates = s->prism_rates;
      o->nprism_rate = s->n_prism_rates;
      c->has_start_time = s->has_start_time;
      c->start_time = s->start_time;
      return;
    }
    default:
      c->pattern = 0;   // none: the lidar refuses it
      return;
  }
}


static void options_from(const Sensim__V1__LidarConfig* m, lidar_config_t* c) {
  // returns: ranges, depth, mode, threshold
  c->has_range_min = m->has_range_min;
  c->range_min = m->range_min;
  c->has_range_max = m->has_range_max;
  c->range_max = m->range_max;
  c->raytrace_depth = m->has_raytrace_depth ? m->raytrace_depth : 0;
  c->return_mode = m->has_return_mode ? (lidar_return_mode_t)m->return_mode
                                      : LIDAR_RETURN_STRONGEST;
  c->max_returns = m->has_max_returns ? m->max_returns : 0;
  c->intensity_threshold = m->has_intensity_threshold ? m->intensity_threshold : 0.0;
  c->round_trip_attenuation = m->has_round_trip_attenuation && m->round_trip_attenuation;

  // beam divergence (absent = no loss) and noise (absent = none)
  if (m->beam) {
    const Sensim__V1__BeamDivergence* b = m->beam;
    c->has_beam = 1;
    c->beam.divergence = b->has_divergence ? b->divergence : 0.0;
    c->beam.has_exit_radius = b->has_exit_radius;
    c->beam.exit_radius = b->exit_radius;
    c->beam.has_detector_radius = b->has_detector_radius;
    c->beam.detector_radius = b->detector_radius;
    c->beam.detector_offset = b->has_detector_offset ? b->detector_offset : 0.0;
    c->beam.clamp = b->has_clamp && b->clamp;
  }
  if (m->distance_noise) {
    const Sensim__V1__DistanceNoise* n = m->distance_noise;
    c->distance_noise.stddev_base = n->has_stddev_base ? n->stddev_base : 0.0;
    c->distance_noise.stddev_slope = n->has_stddev_slope ? n->stddev_slope : 0.0;
    c->distance_noise.mean = n->has_mean ? n->mean : 0.0;
  }
  if (m->angle_noise) {
    const Sensim__V1__RayAngleNoise* n = m->angle_noise;
    c->angle_noise.axis = n->has_axis ? (lidar_angle_axis_t)n->axis : LIDAR_ANGLE_ELEVATION;
    c->angle_noise.mean = n->has_mean ? n->mean : 0.0;
    c->angle_noise.stddev = n->has_stddev ? n->stddev : 0.0;
  }

  // output: frame, publishing, misses, layout
  c->frame = m->has_frame ? (lidar_frame_t)m->frame : LIDAR_FRAME_SENSOR;
  c->publish = m->has_publish ? (lidar_publish_t)m->publish : LIDAR_PUBLISH_PER_REVOLUTION;
  c->has_misses = m->has_misses;
  c->misses = (lidar_miss_mode_t)m->misses;
  c->keep_misses = m->has_keep_misses && m->keep_misses;
  c->layout = m->has_layout ? (lidar_layout_preset_t)m->layout : LIDAR_LAYOUT_FIELDS;
  c->fields = (const char* const*)m->fields;
  c->nfield = m->n_fields;

  // what it sees
  c->see_own_body = m->has_see_own_body && m->see_own_body;
  c->exclude_bodies = m->exclude_bodies;
  c->nexclude_body = m->n_exclude_bodies;
  c->group_mask = m->has_group_mask ? m->group_mask : 0;
}


int wire_lidar_build(const Sensim__V1__LidarConfig* m, uint64_t max_frame_bytes, sensor_t* out,
                     err_msg_t* msg) {
  lidar_config_t c;
  memset(&c, 0, sizeof c);
  options_from(m, &c);
  pattern_from(m, &c);
  return lidar_config_create(&c, max_frame_bytes, out, msg);
}


int wire_lidar_brief(const Sensim__V1__LidarConfig* m, env_sensor_brief_t* out) {
  memset(out, 0, sizeof(*out));
  lidar_layout_t layout;
  err_msg_t msg;
  lidar_layout_preset_t preset = m->has_layout ? (lidar_layout_preset_t)m->layout
                                               : LIDAR_LAYOUT_FIELDS;
  int rc = lidar_layout_init(&layout, preset, (const char* const*)m->fields,
                             (uint32_t)m->n_fields, &msg);
  if (rc < 0) {
    return rc;
  }
  for (uint32_t i = 0; i < layout.nfield; i++) {
    out->fields[i] = layout.field[i];
  }
  out->nfield = layout.nfield;
  out->point_step = layout.point_step;
  out->world_frame = m->has_frame && m->frame == SENSIM__V1__OUTPUT_FRAME__FRAME_WORLD;
  out->layout = (int)preset;
  // the oneof member's field name, a static string of the descriptor
  const ProtobufCFieldDescriptor* f = protobuf_c_message_descriptor_get_field(
      &sensim__v1__lidar_config__descriptor, (unsigned)m->pattern_case);
  out->pattern = f ? f->name : NULL;
  return 0;
}
