// SPDX-License-Identifier: MIT
// config.c: a lidar's configuration: the defaults of absent fields, every check (naming the wire
// field), and the sensor built from it (see config.h). The pattern messages become the pattern
// models' descriptions (pattern.h), the rest a lidar_desc_t (lidar.h).
#include "lidar/config.h"

#include <math.h>
#include <string.h>

#define DEG (M_PI / 180.0)

// Livox defaults: the Mid-40's published field of view, point rate and frame rate; the prism
// rates are illustrative (pattern_livox.c).
#define LIVOX_FOV (38.4 * DEG)
#define LIVOX_POINT_RATE 100000.0
#define LIVOX_FRAME_RATE 10.0
static const double kLivoxPrismRates[2] = {7294.0 / 60.0, -4664.0 / 60.0};

#define DEFAULT_RANGE_MIN 0.1       // m (AGXUnity's)
#define DEFAULT_EXIT_RADIUS 0.005   // m (a 10 mm beam at the exit)
#define DEFAULT_FREQUENCY 10.0      // Hz, HDL-64E and Bpearl


//---------------- Defaults

void lidar_config_defaults(lidar_config_t* c) {
  // pattern
  lidar_ouster_config_t* o = &c->ouster;
  if (!o->has_elevation_max) {
    o->elevation_max = lidar_pattern_ouster_half_field(o->channels);
    o->has_elevation_max = 1;
  }
  if (!o->has_elevation_min) {
    o->elevation_min = -lidar_pattern_ouster_half_field(o->channels);
    o->has_elevation_min = 1;
  }
  lidar_hdl64e_config_t* h = &c->hdl64e;
  if (!h->has_frequency) {
    h->frequency = DEFAULT_FREQUENCY;
    h->has_frequency = 1;
  }
  if (!h->has_columns && h->frequency >= 5.0 && h->frequency <= 20.0) {
    h->columns = lidar_pattern_hdl64e_columns(h->frequency);
    h->has_columns = 1;
  }
  if (!c->bpearl.has_frequency) {
    c->bpearl.frequency = DEFAULT_FREQUENCY;
    c->bpearl.has_frequency = 1;
  }
  lidar_livox_config_t* l = &c->livox;
  if (!l->has_fov) {
    l->fov = LIVOX_FOV;
    l->has_fov = 1;
  }
  if (!l->has_point_rate) {
    l->point_rate = LIVOX_POINT_RATE;
    l->has_point_rate = 1;
  }
  if (!l->has_frame_rate) {
    l->frame_rate = LIVOX_FRAME_RATE;
    l->has_frame_rate = 1;
  }
  if (l->nprism_rate == 0) {
    l->prism_rates = kLivoxPrismRates;
    l->nprism_rate = 2;
  }

  // returns
  if (!c->has_range_min) {
    c->range_min = DEFAULT_RANGE_MIN;
    c->has_range_min = 1;
  }
  if (!c->has_range_max) {
    c->range_max = INFINITY;
    c->has_range_max = 1;
  }
  if (!c->beam.has_exit_radius) {
    c->beam.exit_radius = DEFAULT_EXIT_RADIUS;
    c->beam.has_exit_radius = 1;
  }
  if (!c->beam.has_detector_radius) {
    c->beam.detector_radius = c->beam.exit_radius;
    c->beam.has_detector_radius = 1;
  }

  // output: the Ouster point type on an Ouster pattern keeps every pixel, its misses at NaN
  // (ouster_ros's organised cloud)
  if (!c->has_misses) {
    int ouster = c->layout == LIDAR_LAYOUT_OUSTER && c->pattern == LIDAR_PATTERN_OUSTER;
    c->misses = c->keep_misses ? LIDAR_MISS_ZERO : ouster ? LIDAR_MISS_NAN : LIDAR_MISS_REMOVE;
    c->has_misses = 1;
  }
}


//---------------- Pattern messages -> the models' descriptions

typedef struct pattern_desc {
  lidar_pattern_kind_t kind;
  const char* field;            // the message's field prefix ("lidar.vlp16")
  const char* frame_field;      // what to reduce when a frame is too large (NULL = field)
  union {
    lidar_spinning_desc_t spinning;
    lidar_vlp16_desc_t vlp16;
    lidar_ouster_desc_t ouster;
    lidar_flash_desc_t flash;
    lidar_hdl64e_desc_t hdl64e;
    lidar_bpearl_desc_t bpearl;
    lidar_custom_desc_t custom;
    lidar_livox_desc_t livox;
  } u;
} pattern_desc_t;


// The description of c's pattern, and the checks of the message's shape (array lengths, enum
// values) that its model's description cannot express.
static int pattern_translate(const lidar_config_t* c, pattern_desc_t* p, err_msg_t* msg) {
  memset(p, 0, sizeof *p);
  p->kind = c->pattern;
  switch (c->pattern) {
    case LIDAR_PATTERN_SPINNING: {
      const lidar_spinning_config_t* s = &c->spinning;
      p->field = "lidar.spinning";
      p->frame_field = "lidar.spinning.columns x channel_elevations";
      if (s->nchannel_elevation > UINT32_MAX || s->nchannel_azimuth_offset > UINT32_MAX ||
          s->nchannel_time_offset > UINT32_MAX) {
        return err_set(msg, ERR_INVAL, "lidar.spinning: too many channels");
      }
      if (s->spin != LIDAR_SPIN_CLOCKWISE && s->spin != LIDAR_SPIN_COUNTER_CLOCKWISE) {
        return err_set(msg, ERR_INVAL, "lidar.spinning.spin = %d is not CLOCKWISE (0) or "
                       "COUNTER_CLOCKWISE (1)", (int)s->spin);
      }
      p->u.spinning = (lidar_spinning_desc_t){
          .frequency = s->frequency,
          .columns = s->columns,
          .elevations = s->channel_elevations,
          .nchannel = (uint32_t)s->nchannel_elevation,
          .azimuth_offsets = s->channel_azimuth_offsets,
          .nazimuth_offset = (uint32_t)s->nchannel_azimuth_offset,
          .time_offsets = s->channel_time_offsets,
          .ntime_offset = (uint32_t)s->nchannel_time_offset,
          .counter_clockwise = s->spin == LIDAR_SPIN_COUNTER_CLOCKWISE,
          .start_azimuth = s->start_azimuth,
      };
      return 0;
    }
    case LIDAR_PATTERN_VLP16:
      p->field = "lidar.vlp16";
      p->u.vlp16 = (lidar_vlp16_desc_t){
          .frequency = c->vlp16.frequency,
          .vertical_offsets = c->vlp16.vertical_offsets != 0,
          .start_azimuth = c->vlp16.start_azimuth,
      };
      return 0;
    case LIDAR_PATTERN_OUSTER: {
      const lidar_ouster_config_t* s = &c->ouster;
      p->field = "lidar.ouster";
      p->frame_field = "lidar.ouster.columns x channels";
      if (s->nbeam_altitude_angle > UINT32_MAX || s->nbeam_azimuth_angle > UINT32_MAX) {
        return err_set(msg, ERR_INVAL, "lidar.ouster: too many beam angles");
      }

      // NAN means "the default" to the model: a value sent must be a number
      if (!isfinite(s->elevation_max) || !isfinite(s->elevation_min)) {
        int top = !isfinite(s->elevation_max);
        return err_set(msg, ERR_INVAL, "lidar.ouster.elevation_%s = %g is not finite",
                       top ? "max" : "min", top ? s->elevation_max : s->elevation_min);
      }
      p->u.ouster = (lidar_ouster_desc_t){
          .channels = s->channels,
          .columns = s->columns,
          .frequency = s->frequency,
          .elevation_max = s->elevation_max,
          .elevation_min = s->elevation_min,
          .altitudes = s->beam_altitude_angles,
          .naltitude = (uint32_t)s->nbeam_altitude_angle,
          .azimuths = s->beam_azimuth_angles,
          .nazimuth = (uint32_t)s->nbeam_azimuth_angle,
          .beam_origin = s->lidar_origin_to_beam_origin,
      };
      return 0;
    }
    case LIDAR_PATTERN_FLASH: {
      const lidar_flash_config_t* s = &c->flash;
      p->field = "lidar.flash";
      p->frame_field = "lidar.flash.columns x rows";
      p->u.flash = (lidar_flash_desc_t){
          .columns = s->columns,
          .rows = s->rows,
          .fov_horizontal = s->fov_horizontal,
          .fov_vertical = s->fov_vertical,
          .frame_rate = s->frame_rate,
          .projective = s->projective != 0,
      };
      return 0;
    }
    case LIDAR_PATTERN_HDL64E: {
      const lidar_hdl64e_config_t* s = &c->hdl64e;
      p->field = "lidar.hdl64e";
      p->frame_field = "lidar.hdl64e.columns";
      if (s->has_columns && s->columns == 0) {
        return err_set(msg, ERR_INVAL, "lidar.hdl64e.columns = 0 must be > 0");
      }
      p->u.hdl64e = (lidar_hdl64e_desc_t){
          .frequency = s->frequency,
          .columns = s->has_columns ? s->columns : 0,
          .start_azimuth = s->start_azimuth,
      };
      return 0;
    }
    case LIDAR_PATTERN_BPEARL:
      p->field = "lidar.bpearl";
      p->u.bpearl = (lidar_bpearl_desc_t){
          .frequency = c->bpearl.frequency,
          .start_azimuth = c->bpearl.start_azimuth,
      };
      return 0;
    case LIDAR_PATTERN_CUSTOM: {
      const lidar_custom_config_t* s = &c->custom;
      p->field = "lidar.custom";
      p->frame_field = "lidar.custom.azimuths";
      if (s->nazimuth != s->nelevation) {
        return err_set(msg, ERR_INVAL, "lidar.custom.elevations has %zu values for %zu azimuths",
                       s->nelevation, s->nazimuth);
      }
      if (s->nazimuth > LIDAR_PATTERN_MAX_GROUP) {
        return err_set(msg, ERR_INVAL, "lidar.custom.azimuths has %zu rays, more than %u",
                       s->nazimuth, LIDAR_PATTERN_MAX_GROUP);
      }
      if (s->ntime_offset > UINT32_MAX || s->nchannel > UINT32_MAX) {
        return err_set(msg, ERR_INVAL, "lidar.custom: too many values");
      }
      p->u.custom = (lidar_custom_desc_t){
          .azimuths = s->azimuths,
          .elevations = s->elevations,
          .time_offsets = s->time_offsets,
          .ntime_offset = (uint32_t)s->ntime_offset,
          .channels = s->channels,
          .nchannel = (uint32_t)s->nchannel,
          .nray = (uint32_t)s->nazimuth,
          .frame_rate = s->frame_rate,
      };
      return 0;
    }
    case LIDAR_PATTERN_LIVOX: {
      const lidar_livox_config_t* s = &c->livox;
      p->field = "lidar.livox";
      p->frame_field = "lidar.livox.point_rate / frame_rate (raise lidar.livox.frame_rate)";
      if (s->nprism_rate != 2) {
        return err_set(msg, ERR_INVAL, "lidar.livox.prism_rates has %zu values, expected 2",
                       s->nprism_rate);
      }
      p->u.livox = (lidar_livox_desc_t){
          .fov = s->fov,
          .point_rate = s->point_rate,
          .frame_rate = s->frame_rate,
          .prism_rate = {s->prism_rates[0], s->prism_rates[1]},
      };
      return 0;
    }
  }
  return err_set(msg, ERR_INVAL, "lidar: no scan pattern (set one of spinning, vlp16, "
                 "ouster, flash, hdl64e, bpearl, custom, livox)");
}


// The model's check (init = 0) or init (init = 1, into *out) of a translated pattern.
static int pattern_model(const pattern_desc_t* p, int init, lidar_pattern_t* out,
                         err_msg_t* msg) {
  const char* f = p->field;
  switch (p->kind) {
    case LIDAR_PATTERN_SPINNING:
      return init ? lidar_pattern_spinning_init(out, &p->u.spinning, f, msg)
                  : lidar_pattern_spinning_check(&p->u.spinning, f, msg);
    case LIDAR_PATTERN_VLP16:
      return init ? lidar_pattern_vlp16_init(out, &p->u.vlp16, f, msg)
                  : lidar_pattern_vlp16_check(&p->u.vlp16, f, msg);
    case LIDAR_PATTERN_OUSTER:
      return init ? lidar_pattern_ouster_init(out, &p->u.ouster, f, msg)
                  : lidar_pattern_ouster_check(&p->u.ouster, f, msg);
    case LIDAR_PATTERN_FLASH:
      return init ? lidar_pattern_flash_init(out, &p->u.flash, f, msg)
                  : lidar_pattern_flash_check(&p->u.flash, f, msg);
    case LIDAR_PATTERN_HDL64E:
      return init ? lidar_pattern_hdl64e_init(out, &p->u.hdl64e, f, msg)
                  : lidar_pattern_hdl64e_check(&p->u.hdl64e, f, msg);
    case LIDAR_PATTERN_BPEARL:
      return init ? lidar_pattern_bpearl_init(out, &p->u.bpearl, f, msg)
                  : lidar_pattern_bpearl_check(&p->u.bpearl, f, msg);
    case LIDAR_PATTERN_CUSTOM:
      return init ? lidar_pattern_custom_init(out, &p->u.custom, f, msg)
                  : lidar_pattern_custom_check(&p->u.custom, f, msg);
    case LIDAR_PATTERN_LIVOX:
      return init ? lidar_pattern_livox_init(out, &p->u.livox, f, msg)
                  : lidar_pattern_livox_check(&p->u.livox, f, msg);
  }
  return err_set(msg, ERR_INVAL, "lidar: no scan pattern");
}


//---------------- Everything else -> lidar_desc_t

// The lidar's description from c (its pattern left zeroed), with the checks of the enum values
// and list lengths; the values themselves are lidar_desc_check's.
static int options_translate(const lidar_config_t* c, lidar_desc_t* d, err_msg_t* msg) {
  memset(d, 0, sizeof *d);

  // returns: ranges, depth, mode, threshold, beam divergence, distance noise
  lidar_returns_desc_t* r = &d->returns;
  r->range_min = c->range_min;
  r->range_max = c->range_max;
  r->depth = c->raytrace_depth;
  r->mode = c->return_mode;
  r->max_returns = c->max_returns;
  r->intensity_threshold = c->intensity_threshold;
  r->round_trip = c->round_trip_attenuation != 0;
  if (c->has_beam) {
    r->beam = (lidar_beam_desc_t){
        .enabled = 1,
        .divergence = c->beam.divergence,
        .exit_radius = c->beam.exit_radius,
        .detector_radius = c->beam.detector_radius,
        .detector_offset = c->beam.detector_offset,
        .clamp = c->beam.clamp != 0,
    };
  }
  r->distance_noise = c->distance_noise;

  // angle noise
  if (c->angle_noise.axis != LIDAR_ANGLE_ELEVATION && c->angle_noise.axis != LIDAR_ANGLE_AZIMUTH) {
    return err_set(msg, ERR_INVAL, "lidar.angle_noise.axis = %d is not ELEVATION (0) or "
                   "AZIMUTH (1)", (int)c->angle_noise.axis);
  }
  d->angle_noise = c->angle_noise;

  // output: frame, publishing, misses, layout
  if (c->frame != LIDAR_FRAME_SENSOR && c->frame != LIDAR_FRAME_WORLD) {
    return err_set(msg, ERR_INVAL, "lidar.frame = %d is not FRAME_SENSOR (0) or FRAME_WORLD (1)",
                   (int)c->frame);
  }
  d->world_frame = c->frame == LIDAR_FRAME_WORLD;
  if (c->publish != LIDAR_PUBLISH_PER_REVOLUTION && c->publish != LIDAR_PUBLISH_PER_STEP) {
    return err_set(msg, ERR_INVAL, "lidar.publish = %d is not PER_REVOLUTION (0) or PER_STEP "
                   "(1)", (int)c->publish);
  }
  d->publish_per_step = c->publish == LIDAR_PUBLISH_PER_STEP;
  if ((unsigned)c->misses > LIDAR_MISS_NAN) {
    return err_set(msg, ERR_INVAL, "lidar.misses = %d is not MISSES_REMOVE (0), MISSES_ZERO "
                   "(1) or MISSES_NAN (2)", (int)c->misses);
  }
  d->misses = c->misses;
  if ((unsigned)c->layout > LIDAR_LAYOUT_XYZI) {
    return err_set(msg, ERR_INVAL, "lidar.layout = %d is not LAYOUT_FIELDS (0), "
                   "LAYOUT_VELODYNE (1), LAYOUT_OUSTER (2) or LAYOUT_XYZI (3)", (int)c->layout);
  }
  if (c->layout != LIDAR_LAYOUT_FIELDS && c->nfield) {
    return err_set(msg, ERR_INVAL, "lidar.fields: give either a layout preset or field names, "
                   "not both");
  }
  d->layout = c->layout;
  if (c->nfield > SENSOR_MAX_FIELDS) {
    return err_set(msg, ERR_INVAL, "lidar.fields has %zu names, more than %d", c->nfield,
                   SENSOR_MAX_FIELDS);
  }
  d->fields = c->fields;
  d->nfield = (uint32_t)c->nfield;

  // what it sees
  d->see_own_body = c->see_own_body != 0;
  if (c->nexclude_body > LIDAR_MAX_EXCLUDED_BODIES) {
    return err_set(msg, ERR_INVAL, "lidar.exclude_bodies has %zu bodies, more than %d",
                   c->nexclude_body, LIDAR_MAX_EXCLUDED_BODIES);
  }
  d->exclude_bodies = c->exclude_bodies;
  d->nexclude_body = (uint32_t)c->nexclude_body;
  d->group_mask = c->group_mask;
  return 0;
}


// The description of c (defaults filled) and its pattern's, with every check that needs no
// built pattern.
static int translate(const lidar_config_t* c, lidar_desc_t* d, pattern_desc_t* p,
                     err_msg_t* msg) {
  int rc;
  if ((rc = options_translate(c, d, msg)) < 0 || (rc = pattern_translate(c, p, msg)) < 0) {
    return rc;
  }
  d->has_start_time = c->has_start_time;
  d->start_time = c->has_start_time ? c->start_time : 0.0;
  d->pattern_field = p->field;
  d->frame_field = p->frame_field;
  return 0;
}


//---------------- Checks and creation

int lidar_desc_check(const lidar_desc_t* d, err_msg_t* msg) {
  const char* pfield = d->pattern_field ? d->pattern_field : "lidar";
  if (d->has_start_time &&
      (!isfinite(d->start_time) || fabs(d->start_time) > LIDAR_MAX_START_TIME)) {
    return err_set(msg, ERR_INVAL, "%s.start_time = %g must be finite and within +-%g s",
                   pfield, d->start_time, LIDAR_MAX_START_TIME);
  }
  lidar_returns_t ret;
  lidar_angle_noise_t angle;
  lidar_layout_t layout;
  int rc;
  if ((rc = lidar_returns_init(&ret, &d->returns, msg)) < 0 ||
      (rc = lidar_noise_angle_init(&angle, &d->angle_noise, "lidar.angle_noise", msg)) < 0 ||
      (rc = lidar_layout_init(&layout, d->layout, d->fields, d->nfield, msg)) < 0) {
    return rc;
  }
  if ((unsigned)d->misses > LIDAR_MISS_NAN) {
    return err_set(msg, ERR_INVAL, "lidar.misses = %d is not REMOVE (0), ZERO (1) or NAN (2)",
                   (int)d->misses);
  }
  if (d->nexclude_body > LIDAR_MAX_EXCLUDED_BODIES) {
    return err_set(msg, ERR_INVAL, "lidar.exclude_bodies has %u bodies, more than %d",
                   d->nexclude_body, LIDAR_MAX_EXCLUDED_BODIES);
  }
  return 0;
}


int lidar_config_check(const lidar_config_t* c, err_msg_t* msg) {
  lidar_config_t full = *c;
  lidar_config_defaults(&full);
  lidar_desc_t d;
  pattern_desc_t p;
  int rc;
  if ((rc = translate(&full, &d, &p, msg)) < 0 || (rc = pattern_model(&p, 0, NULL, msg)) < 0) {
    return rc;
  }
  return lidar_desc_check(&d, msg);
}


int lidar_config_create(const lidar_config_t* c, uint64_t max_frame_bytes, sensor_t* out,
                        err_msg_t* msg) {
  lidar_config_t full = *c;
  lidar_config_defaults(&full);
  lidar_desc_t d;
  pattern_desc_t p;
  int rc;
  if ((rc = translate(&full, &d, &p, msg)) < 0 ||
      (rc = pattern_model(&p, 1, &d.pattern, msg)) < 0) {
    return rc;
  }
  d.max_frame_bytes = max_frame_bytes;
  if ((rc = lidar_create(&d, out, msg)) < 0) {
    lidar_pattern_close(&d.pattern);
    return rc;
  }
  return 0;
}
