// SPDX-License-Identifier: MIT
// spec.c: the bridge's spec texts into the C client's configuration structs. A text is a kind
// word and key=value tokens; each kind has a table of keys, and an unknown key is refused
// with the list of the kind's keys, so a typo never passes silently. Values are checked for
// their syntax here and for their range by the daemon, which names the field it refuses.
#include "spec.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOKEN_MAX 4096    // bytes of one key=value token (a list of 128 numbers fits)

typedef struct parser {
  const char* p;          // next character of the text
  char* err;
  size_t err_cap;
  char key[64];
  char val[TOKEN_MAX];
  bool has_val;           // the token had '='
} parser_t;

typedef struct name_value {
  const char* name;
  int value;
} name_value_t;


__attribute__((format(printf, 2, 3))) static int fail(parser_t* ps, const char* fmt, ...) {
  if (ps->err_cap > 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ps->err, ps->err_cap, fmt, ap);
    va_end(ap);
  }
  return -1;
}


// The next blank-separated token: the word into key (and, after '=', the value into val).
// Returns 1 for a token, 0 at the end, -1 for a token too long.
static int next_token(parser_t* ps) {
  while (*ps->p && isspace((unsigned char)*ps->p)) {
    ps->p++;
  }
  if (!*ps->p) {
    return 0;
  }
  const char* start = ps->p;
  while (*ps->p && !isspace((unsigned char)*ps->p)) {
    ps->p++;
  }
  size_t n = (size_t)(ps->p - start);
  const char* eq = memchr(start, '=', n);
  size_t nkey = eq ? (size_t)(eq - start) : n;
  if (nkey >= sizeof(ps->key)) {
    return fail(ps, "'%.40s...': key too long", start);
  }
  memcpy(ps->key, start, nkey);
  ps->key[nkey] = '\0';
  ps->has_val = eq != NULL;
  ps->val[0] = '\0';
  if (eq) {
    size_t nval = n - nkey - 1;
    if (nval >= sizeof(ps->val)) {
      return fail(ps, "%s: value longer than %d bytes", ps->key, TOKEN_MAX - 1);
    }
    memcpy(ps->val, eq + 1, nval);
    ps->val[nval] = '\0';
  }
  return 1;
}


// A number: decimal, "inf", "-inf", or an angle with the suffix "deg" (converted to rad).
static bool parse_number(const char* s, double* out) {
  char buf[64];
  size_t n = strlen(s);
  double scale = 1.0;
  if (n > 3 && strcmp(s + n - 3, "deg") == 0) {
    n -= 3;
    scale = M_PI / 180.0;
  }
  if (n == 0 || n >= sizeof(buf)) {
    return false;
  }
  memcpy(buf, s, n);
  buf[n] = '\0';
  char* end = NULL;
  errno = 0;
  double v = strtod(buf, &end);
  if (*end != '\0' || errno == ERANGE || isnan(v)) {
    return false;
  }
  *out = v * scale;
  return true;
}


static int num(parser_t* ps, double* out) {
  if (!ps->has_val || !parse_number(ps->val, out)) {
    return fail(ps, "%s = '%s' is not a number (SI units; angles may end in deg)", ps->key,
                ps->val);
  }
  return 0;
}


static int uint_val(parser_t* ps, uint32_t* out) {
  char* end = NULL;
  errno = 0;
  unsigned long long v = strtoull(ps->val, &end, 10);
  if (!ps->has_val || ps->val[0] == '\0' || ps->val[0] == '-' || *end != '\0' || errno ||
      v > UINT32_MAX) {
    return fail(ps, "%s = '%s' is not an integer in [0, 4294967295]", ps->key, ps->val);
  }
  *out = (uint32_t)v;
  return 0;
}


static int bool_val(parser_t* ps, bool* out) {
  static const char* const kTrue[] = {"1", "true", "yes", "on"};
  static const char* const kFalse[] = {"0", "false", "no", "off"};
  if (!ps->has_val) {   // a bare key is true
    *out = true;
    return 0;
  }
  for (size_t i = 0; i < 4; i++) {
    if (strcmp(ps->val, kTrue[i]) == 0) {
      *out = true;
      return 0;
    }
    if (strcmp(ps->val, kFalse[i]) == 0) {
      *out = false;
      return 0;
    }
  }
  return fail(ps, "%s = '%s' is not a boolean (1, 0, true, false, yes, no, on, off)", ps->key,
              ps->val);
}


static int enum_val(parser_t* ps, const name_value_t* table, size_t n, int* out) {
  for (size_t i = 0; i < n; i++) {
    if (strcmp(ps->val, table[i].name) == 0) {
      *out = table[i].value;
      return 0;
    }
  }
  char list[256] = "";
  for (size_t i = 0; i < n; i++) {
    size_t used = strlen(list);
    snprintf(list + used, sizeof(list) - used, "%s%s", i ? ", " : "", table[i].name);
  }
  return fail(ps, "%s = '%s' is not one of: %s", ps->key, ps->val, list);
}

#define ENUM(ps, table, out) enum_val((ps), (table), sizeof(table) / sizeof((table)[0]), (out))


// A comma-separated list of numbers into out (at most cap); *n the count.
static int num_list(parser_t* ps, double* out, uint32_t cap, uint32_t* n) {
  *n = 0;
  char* save = NULL;
  for (char* tok = strtok_r(ps->val, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    if (*n == cap) {
      return fail(ps, "%s: more than %u values", ps->key, cap);
    }
    if (!parse_number(tok, &out[*n])) {
      return fail(ps, "%s: '%s' is not a number", ps->key, tok);
    }
    (*n)++;
  }
  if (*n == 0) {
    return fail(ps, "%s: an empty list", ps->key);
  }
  return 0;
}


// Exactly three numbers (a vector); a single number is taken for all three.
static int vec3(parser_t* ps, double out[3]) {
  double v[3];
  uint32_t n = 0;
  if (num_list(ps, v, 3, &n)) {
    return -1;
  }
  if (n == 1) {
    v[1] = v[2] = v[0];
  } else if (n != 3) {
    return fail(ps, "%s: 1 or 3 numbers, got %u", ps->key, n);
  }
  memcpy(out, v, sizeof(v));
  return 0;
}


static int name_val(parser_t* ps, char* out) {
  size_t n = strlen(ps->val);
  if (!ps->has_val || n == 0) {
    return fail(ps, "%s: a name is required", ps->key);
  }
  if (n >= SPEC_NAME_MAX) {
    return fail(ps, "%s: name longer than %d bytes", ps->key, SPEC_NAME_MAX - 1);
  }
  memcpy(out, ps->val, n + 1);
  return 0;
}


// The word just read becomes the value of `key` (a spec's leading word: its kind or model),
// so that enum_val can check it and name it.
static void as_value(parser_t* ps, const char* key) {
  memcpy(ps->val, ps->key, strlen(ps->key) + 1);   // key is shorter than val
  snprintf(ps->key, sizeof(ps->key), "%s", key);
}


static int unknown(parser_t* ps, const char* kind, const char* keys) {
  return fail(ps, "%s: unknown key '%s' (keys: %s)", kind, ps->key, keys);
}

#define KEY(name) (strcmp(ps->key, (name)) == 0)

//---------------- Lidars

static const name_value_t kPatterns[] = {
    {"spinning", SENSIM_PATTERN_SPINNING}, {"vlp16", SENSIM_PATTERN_VLP16},
    {"ouster", SENSIM_PATTERN_OUSTER},     {"flash", SENSIM_PATTERN_FLASH},
    {"hdl64e", SENSIM_PATTERN_HDL64E},     {"bpearl", SENSIM_PATTERN_BPEARL},
    {"livox", SENSIM_PATTERN_LIVOX},
};

static const char kLidarKeys[] =
    "id, site, pattern, frequency, columns, channels, rows, elevations, spin, start_azimuth, "
    "start_time, vertical_offsets, elevation_max, elevation_min, beam_origin, fov_horizontal, "
    "fov_vertical, projective, frame_rate, fov, point_rate, range_min, range_max, "
    "raytrace_depth, return_mode, max_returns, intensity_threshold, round_trip_attenuation, "
    "divergence, noise_base, noise_slope, noise_mean, angle_noise, angle_noise_mean, "
    "angle_noise_axis, frame, publish, misses, layout, fields, see_own_body, exclude, group_mask";


// A key that exists only for some patterns: the field of the selected pattern, or a refusal
// naming the patterns that have it.
static int pattern_only(parser_t* ps, const char* patterns) {
  return fail(ps, "lidar: %s applies to the patterns %s only", ps->key, patterns);
}


static int lidar_pattern_key(parser_t* ps, spec_sensor_t* s, bool* done) {
  sensim_lidar_config_t* c = &s->lidar;
  sensim_lidar_pattern_t p = c->pattern;
  *done = true;
  if (KEY("frequency")) {
    double* f = p == SENSIM_PATTERN_SPINNING ? &c->spinning.frequency
              : p == SENSIM_PATTERN_VLP16    ? &c->vlp16.frequency
              : p == SENSIM_PATTERN_OUSTER   ? &c->ouster.frequency
              : p == SENSIM_PATTERN_HDL64E   ? &c->hdl64e.frequency
              : p == SENSIM_PATTERN_BPEARL   ? &c->bpearl.frequency
                                             : NULL;
    return f ? num(ps, f) : pattern_only(ps, "spinning, vlp16, ouster, hdl64e, bpearl");
  }
  if (KEY("columns")) {
    uint32_t* n = p == SENSIM_PATTERN_SPINNING ? &c->spinning.columns
                : p == SENSIM_PATTERN_OUSTER   ? &c->ouster.columns
                : p == SENSIM_PATTERN_FLASH    ? &c->flash.columns
                : p == SENSIM_PATTERN_HDL64E   ? &c->hdl64e.columns
                                               : NULL;
    return n ? uint_val(ps, n) : pattern_only(ps, "spinning, ouster, flash, hdl64e");
  }
  if (KEY("start_azimuth")) {
    double* a = p == SENSIM_PATTERN_SPINNING ? &c->spinning.start_azimuth
              : p == SENSIM_PATTERN_VLP16    ? &c->vlp16.start_azimuth
              : p == SENSIM_PATTERN_HDL64E   ? &c->hdl64e.start_azimuth
              : p == SENSIM_PATTERN_BPEARL   ? &c->bpearl.start_azimuth
                                             : NULL;
    return a ? num(ps, a) : pattern_only(ps, "spinning, vlp16, hdl64e, bpearl");
  }
  if (KEY("start_time")) {
    double* t = p == SENSIM_PATTERN_SPINNING ? &c->spinning.start_time
              : p == SENSIM_PATTERN_VLP16    ? &c->vlp16.start_time
              : p == SENSIM_PATTERN_OUSTER   ? &c->ouster.start_time
              : p == SENSIM_PATTERN_FLASH    ? &c->flash.start_time
              : p == SENSIM_PATTERN_HDL64E   ? &c->hdl64e.start_time
              : p == SENSIM_PATTERN_BPEARL   ? &c->bpearl.start_time
                                             : &c->livox.start_time;
    return num(ps, t);
  }
  if (KEY("frame_rate")) {
    double* f = p == SENSIM_PATTERN_FLASH ? &c->flash.frame_rate
              : p == SENSIM_PATTERN_LIVOX ? &c->livox.frame_rate
                                          : NULL;
    return f ? num(ps, f) : pattern_only(ps, "flash, livox");
  }
  if (KEY("channels")) {
    return p == SENSIM_PATTERN_OUSTER ? uint_val(ps, &c->ouster.channels)
                                      : pattern_only(ps, "ouster");
  }
  if (KEY("elevation_max") || KEY("elevation_min")) {
    if (p != SENSIM_PATTERN_OUSTER) {
      return pattern_only(ps, "ouster");
    }
    return num(ps, KEY("elevation_max") ? &c->ouster.elevation_max : &c->ouster.elevation_min);
  }
  if (KEY("beam_origin")) {
    return p == SENSIM_PATTERN_OUSTER ? num(ps, &c->ouster.lidar_origin_to_beam_origin)
                                      : pattern_only(ps, "ouster");
  }
  if (KEY("rows") || KEY("fov_horizontal") || KEY("fov_vertical") || KEY("projective")) {
    if (p != SENSIM_PATTERN_FLASH) {
      return pattern_only(ps, "flash");
    }
    return KEY("rows")             ? uint_val(ps, &c->flash.rows)
         : KEY("fov_horizontal")   ? num(ps, &c->flash.fov_horizontal)
         : KEY("fov_vertical")     ? num(ps, &c->flash.fov_vertical)
                                   : bool_val(ps, &c->flash.projective);
  }
  if (KEY("fov") || KEY("point_rate")) {
    if (p != SENSIM_PATTERN_LIVOX) {
      return pattern_only(ps, "livox");
    }
    return num(ps, KEY("fov") ? &c->livox.fov : &c->livox.point_rate);
  }
  if (KEY("elevations")) {
    if (p != SENSIM_PATTERN_SPINNING) {
      return pattern_only(ps, "spinning");
    }
    c->spinning.channel_elevations = s->elevations;
    return num_list(ps, s->elevations, SPEC_MAX_CHANNELS, &c->spinning.nchannels);
  }
  if (KEY("spin")) {
    static const name_value_t kSpin[] = {{"clockwise", SENSIM_SPIN_CLOCKWISE},
                                         {"counter_clockwise", SENSIM_SPIN_COUNTER_CLOCKWISE}};
    int v;
    if (p != SENSIM_PATTERN_SPINNING) {
      return pattern_only(ps, "spinning");
    }
    if (ENUM(ps, kSpin, &v)) {
      return -1;
    }
    c->spinning.spin = (sensim_spin_t)v;
    return 0;
  }
  if (KEY("vertical_offsets")) {
    return p == SENSIM_PATTERN_VLP16 ? bool_val(ps, &c->vlp16.vertical_offsets)
                                     : pattern_only(ps, "vlp16");
  }
  *done = false;
  return 0;
}


static int lidar_key(parser_t* ps, spec_sensor_t* s) {
  static const name_value_t kReturn[] = {
      {"strongest", SENSIM_RETURN_STRONGEST}, {"first", SENSIM_RETURN_FIRST},
      {"last", SENSIM_RETURN_LAST},           {"dual", SENSIM_RETURN_DUAL},
      {"all", SENSIM_RETURN_ALL}};
  static const name_value_t kFrame[] = {{"sensor", SENSIM_FRAME_SENSOR},
                                        {"world", SENSIM_FRAME_WORLD}};
  static const name_value_t kPublish[] = {{"revolution", SENSIM_PUBLISH_PER_REVOLUTION},
                                          {"step", SENSIM_PUBLISH_PER_STEP}};
  static const name_value_t kMisses[] = {{"remove", SENSIM_MISSES_REMOVE},
                                         {"zero", SENSIM_MISSES_ZERO},
                                         {"nan", SENSIM_MISSES_NAN}};
  static const name_value_t kLayout[] = {{"fields", SENSIM_LAYOUT_FIELDS},
                                         {"velodyne", SENSIM_LAYOUT_VELODYNE},
                                         {"ouster", SENSIM_LAYOUT_OUSTER},
                                         {"xyzi", SENSIM_LAYOUT_XYZI}};
  static const name_value_t kAxis[] = {{"elevation", SENSIM_NOISE_AXIS_ELEVATION},
                                       {"azimuth", SENSIM_NOISE_AXIS_AZIMUTH}};
  sensim_lidar_config_t* c = &s->lidar;
  bool done = false;
  int rc = lidar_pattern_key(ps, s, &done);
  if (done) {
    return rc;
  }
  int v = 0;
  if (KEY("pattern")) {
    return 0;   // read first, by spec_sensor_parse
  } else if (KEY("range_min")) {
    return num(ps, &c->range_min);
  } else if (KEY("range_max")) {
    return num(ps, &c->range_max);
  } else if (KEY("raytrace_depth")) {
    return uint_val(ps, &c->raytrace_depth);
  } else if (KEY("max_returns")) {
    return uint_val(ps, &c->max_returns);
  } else if (KEY("intensity_threshold")) {
    return num(ps, &c->intensity_threshold);
  } else if (KEY("round_trip_attenuation")) {
    return bool_val(ps, &c->round_trip_attenuation);
  } else if (KEY("divergence")) {
    c->beam.enabled = true;
    return num(ps, &c->beam.divergence);
  } else if (KEY("noise_base")) {
    return num(ps, &c->distance_noise.stddev_base);
  } else if (KEY("noise_slope")) {
    return num(ps, &c->distance_noise.stddev_slope);
  } else if (KEY("noise_mean")) {
    return num(ps, &c->distance_noise.mean);
  } else if (KEY("angle_noise")) {
    return num(ps, &c->angle_noise.stddev);
  } else if (KEY("angle_noise_mean")) {
    return num(ps, &c->angle_noise.mean);
  } else if (KEY("see_own_body")) {
    return bool_val(ps, &c->see_own_body);
  } else if (KEY("group_mask")) {
    return uint_val(ps, &c->group_mask);
  } else if (KEY("return_mode") || KEY("frame") || KEY("publish") || KEY("misses") ||
             KEY("layout") || KEY("angle_noise_axis")) {
    if (KEY("return_mode")) {
      rc = ENUM(ps, kReturn, &v), c->return_mode = (sensim_return_mode_t)v;
    } else if (KEY("frame")) {
      rc = ENUM(ps, kFrame, &v), c->frame = (sensim_output_frame_t)v;
    } else if (KEY("publish")) {
      rc = ENUM(ps, kPublish, &v), c->publish = (sensim_publish_t)v;
    } else if (KEY("misses")) {
      rc = ENUM(ps, kMisses, &v), c->misses = (sensim_misses_t)v;
    } else if (KEY("layout")) {
      rc = ENUM(ps, kLayout, &v), c->layout = (sensim_layout_t)v;
    } else {
      rc = ENUM(ps, kAxis, &v), c->angle_noise.axis = (sensim_noise_axis_t)v;
    }
    return rc;
  } else if (KEY("fields")) {
    uint32_t n = 0;
    char* save = NULL;
    for (char* t = strtok_r(ps->val, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
      if (n == SPEC_MAX_FIELDS || strlen(t) >= sizeof(s->field_names[0])) {
        return fail(ps, "fields: at most %d names of at most %zu bytes", SPEC_MAX_FIELDS,
                    sizeof(s->field_names[0]) - 1);
      }
      strcpy(s->field_names[n], t);
      s->fields[n] = s->field_names[n];
      n++;
    }
    c->fields = s->fields;
    c->nfields = n;
    return 0;
  } else if (KEY("exclude")) {
    char* save = NULL;
    for (char* t = strtok_r(ps->val, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
      if (s->nexclude == SPEC_MAX_EXCLUDE || strlen(t) >= SPEC_NAME_MAX) {
        return fail(ps, "exclude: at most %d body names of at most %d bytes", SPEC_MAX_EXCLUDE,
                    SPEC_NAME_MAX - 1);
      }
      strcpy(s->exclude_names[s->nexclude++], t);
    }
    return 0;
  }
  return unknown(ps, "lidar", kLidarKeys);
}

//---------------- IMU, joint sensors, cone

static int imu_key(parser_t* ps, spec_sensor_t* s) {
  sensim_imu_config_t* c = &s->imu;
  // accel_*, gyro_*, mag_*: the chain of one sub-sensor
  struct {
    const char* prefix;
    sensim_triaxial_t* t;
  } const subs[] = {{"accel_", &c->accelerometer}, {"gyro_", &c->gyroscope},
                    {"mag_", &c->magnetometer}};
  for (size_t i = 0; i < 3; i++) {
    size_t n = strlen(subs[i].prefix);
    if (strncmp(ps->key, subs[i].prefix, n) != 0) {
      continue;
    }
    const char* what = ps->key + n;
    if (strcmp(what, "noise") == 0) {
      return vec3(ps, subs[i].t->noise_stddev);
    } else if (strcmp(what, "density") == 0) {
      return vec3(ps, subs[i].t->spectral_noise_density);
    } else if (strcmp(what, "bias") == 0) {
      return vec3(ps, subs[i].t->bias);
    } else if (strcmp(what, "scaling") == 0) {
      return vec3(ps, subs[i].t->scaling);
    }
    break;
  }
  if (KEY("accelerometer")) {
    return bool_val(ps, &c->has_accelerometer);
  } else if (KEY("gyroscope")) {
    return bool_val(ps, &c->has_gyroscope);
  } else if (KEY("magnetometer")) {
    return bool_val(ps, &c->has_magnetometer);
  } else if (KEY("sample_rate")) {
    return num(ps, &c->sample_rate);
  } else if (KEY("literal_gravity_sign")) {
    return bool_val(ps, &c->literal_gravity_sign);
  }
  return unknown(ps, "imu",
                 "id, site, accelerometer, gyroscope, magnetometer, sample_rate, "
                 "literal_gravity_sign, {accel,gyro,mag}_{noise,density,bias,scaling}");
}


static int encoder_key(parser_t* ps, spec_sensor_t* s) {
  static const name_value_t kMode[] = {{"absolute", SENSIM_ENCODER_ABSOLUTE},
                                       {"incremental", SENSIM_ENCODER_INCREMENTAL}};
  sensim_encoder_config_t* c = &s->encoder;
  if (KEY("noise")) {
    return num(ps, &c->noise_stddev);
  } else if (KEY("resolution")) {
    return num(ps, &c->resolution);
  } else if (KEY("scaling")) {
    return num(ps, &c->scaling);
  } else if (KEY("range_lower")) {
    return num(ps, &c->range_lower);
  } else if (KEY("range_upper")) {
    return num(ps, &c->range_upper);
  } else if (KEY("speed_timeout")) {
    return num(ps, &c->speed_timeout);
  } else if (KEY("mode")) {
    int v;
    if (ENUM(ps, kMode, &v)) {
      return -1;
    }
    c->mode = (sensim_encoder_mode_t)v;
    return 0;
  }
  return unknown(ps, "encoder",
                 "id, joint, noise, resolution, scaling, mode, range_lower, range_upper, "
                 "speed_timeout");
}


static int odometer_key(parser_t* ps, spec_sensor_t* s) {
  sensim_odometer_config_t* c = &s->odometer;
  if (KEY("wheel_radius")) {
    s->has_wheel_radius = true;
    return num(ps, &c->wheel_radius);
  } else if (KEY("pulses")) {
    return uint_val(ps, &c->pulses_per_revolution);
  } else if (KEY("noise")) {
    return num(ps, &c->noise_stddev);
  } else if (KEY("scaling")) {
    return num(ps, &c->scaling);
  }
  return unknown(ps, "odometer", "id, joint, wheel_radius, pulses, noise, scaling");
}


static int cone_key(parser_t* ps, spec_sensor_t* s) {
  static const name_value_t kMode[] = {{"exact", SENSIM_CONE_EXACT},
                                       {"lines", SENSIM_CONE_LINES}};
  sensim_cone_config_t* c = &s->cone;
  if (KEY("fov_horizontal")) {
    return num(ps, &c->fov_horizontal);
  } else if (KEY("fov_vertical")) {
    return num(ps, &c->fov_vertical);
  } else if (KEY("range")) {
    return num(ps, &c->range);
  } else if (KEY("lines_per_face")) {
    return uint_val(ps, &c->lines_per_face);
  } else if (KEY("mode")) {
    int v;
    if (ENUM(ps, kMode, &v)) {
      return -1;
    }
    c->mode = (sensim_cone_mode_t)v;
    return 0;
  }
  return unknown(ps, "cone", "id, site, fov_horizontal, fov_vertical, range, mode, "
                             "lines_per_face");
}

//---------------- Sensors

int spec_sensor_parse(const char* text, spec_sensor_t* s, char* err, size_t err_cap) {
  static const name_value_t kKinds[] = {{"lidar", SPEC_LIDAR},       {"imu", SPEC_IMU},
                                        {"encoder", SPEC_ENCODER},   {"odometer", SPEC_ODOMETER},
                                        {"cone", SPEC_CONE}};
  parser_t state = {.p = text ? text : "", .err = err, .err_cap = err_cap};
  parser_t* ps = &state;
  memset(s, 0, sizeof(*s));
  sensim_sensor_init(&s->sensor);
  sensim_imu_config_init(&s->imu);
  sensim_encoder_config_init(&s->encoder);
  sensim_odometer_config_init(&s->odometer);
  sensim_cone_config_init(&s->cone);

  // the kind word
  int rc = next_token(ps);
  if (rc <= 0) {
    return rc < 0 ? -1 : fail(ps, "empty sensor spec: expected lidar, imu, encoder, odometer "
                                   "or cone");
  }
  if (ps->has_val) {
    return fail(ps, "a sensor spec starts with its kind (lidar, imu, encoder, odometer, cone), "
                     "not '%s='", ps->key);
  }
  int kind = 0;
  as_value(ps, "kind");
  if (ENUM(ps, kKinds, &kind)) {
    return -1;
  }
  s->kind = (spec_kind_t)kind;

  // a lidar's pattern first: its presets are the base the other keys change
  if (s->kind == SPEC_LIDAR) {
    parser_t scan = *ps;
    int pattern = 0;
    while ((rc = next_token(&scan)) > 0) {
      if (strcmp(scan.key, "pattern") == 0 && ENUM(&scan, kPatterns, &pattern)) {
        return -1;
      }
    }
    if (rc < 0) {
      return -1;
    }
    if (pattern == 0) {
      return fail(ps, "lidar: pattern= is required (spinning, vlp16, ouster, flash, hdl64e, "
                       "bpearl, livox)");
    }
    sensim_lidar_config_init(&s->lidar, (sensim_lidar_pattern_t)pattern);
  }

  // the keys
  while ((rc = next_token(ps)) > 0) {
    if (strcmp(ps->key, "id") == 0) {
      rc = uint_val(ps, &s->id);
    } else if (strcmp(ps->key, "site") == 0 &&
               (s->kind == SPEC_LIDAR || s->kind == SPEC_IMU || s->kind == SPEC_CONE)) {
      rc = name_val(ps, s->site);
    } else if (strcmp(ps->key, "joint") == 0 &&
               (s->kind == SPEC_ENCODER || s->kind == SPEC_ODOMETER)) {
      rc = name_val(ps, s->joint);
    } else {
      switch (s->kind) {
        case SPEC_LIDAR:
          rc = lidar_key(ps, s);
          break;
        case SPEC_IMU:
          rc = imu_key(ps, s);
          break;
        case SPEC_ENCODER:
          rc = encoder_key(ps, s);
          break;
        case SPEC_ODOMETER:
          rc = odometer_key(ps, s);
          break;
        case SPEC_CONE:
          rc = cone_key(ps, s);
          break;
      }
    }
    if (rc) {
      return -1;
    }
  }
  if (rc < 0) {
    return -1;
  }

  // what each kind needs
  if ((s->kind == SPEC_LIDAR || s->kind == SPEC_IMU || s->kind == SPEC_CONE) && !s->site[0]) {
    return fail(ps, "%s: site= is required (the frame the sensor is mounted on)",
                kKinds[s->kind - 1].name);
  }
  if ((s->kind == SPEC_ENCODER || s->kind == SPEC_ODOMETER) && !s->joint[0]) {
    return fail(ps, "%s: joint= is required", kKinds[s->kind - 1].name);
  }
  return 0;
}

//---------------- Materials, media, geometries

int spec_material_parse(const char* text, sensim_material_t* mat, uint32_t* label,
                        bool* has_label, char* err, size_t err_cap) {
  static const name_value_t kModels[] = {{"lambertian", SENSIM_MATERIAL_LAMBERTIAN},
                                         {"two_layer", SENSIM_MATERIAL_TWO_LAYER}};
  parser_t state = {.p = text ? text : "", .err = err, .err_cap = err_cap};
  parser_t* ps = &state;
  sensim_material_init(mat);
  *has_label = false;
  int rc = next_token(ps);
  if (rc <= 0 || ps->has_val) {
    return rc < 0 ? -1 : fail(ps, "a material spec starts with its model: lambertian or "
                                   "two_layer");
  }
  int model = 0;
  as_value(ps, "model");
  if (ENUM(ps, kModels, &model)) {
    return -1;
  }
  mat->model = (sensim_material_model_t)model;
  while ((rc = next_token(ps)) > 0) {
    bool lam = mat->model == SENSIM_MATERIAL_LAMBERTIAN;
    if (KEY("label")) {
      rc = uint_val(ps, label);
      *has_label = true;
    } else if (lam && KEY("reflectance")) {
      rc = num(ps, &mat->reflectance);
    } else if (!lam && KEY("refractive_index")) {
      rc = num(ps, &mat->refractive_index);
    } else if (!lam && KEY("extinction_coefficient")) {
      rc = num(ps, &mat->extinction_coefficient);
    } else if (!lam && KEY("specular_roughness")) {
      rc = num(ps, &mat->specular_roughness);
    } else if (!lam && KEY("diffuse_reflectance")) {
      rc = num(ps, &mat->diffuse_reflectance);
    } else if (!lam && KEY("diffuse_roughness")) {
      rc = num(ps, &mat->diffuse_roughness);
    } else {
      rc = unknown(ps, lam ? "lambertian" : "two_layer",
                   lam ? "reflectance, label"
                       : "refractive_index, extinction_coefficient, specular_roughness, "
                         "diffuse_reflectance, diffuse_roughness, label");
    }
    if (rc) {
      return -1;
    }
  }
  return rc < 0 ? -1 : 0;
}


int spec_ambient_parse(const char* text, sensim_ambient_t* amb, char* err, size_t err_cap) {
  static const name_value_t kKinds[] = {
      {"custom", SENSIM_MEDIUM_CUSTOM}, {"clear_air", SENSIM_MEDIUM_CLEAR_AIR},
      {"fog", SENSIM_MEDIUM_FOG},       {"rain", SENSIM_MEDIUM_RAIN},
      {"snow", SENSIM_MEDIUM_SNOW}};
  parser_t state = {.p = text ? text : "", .err = err, .err_cap = err_cap};
  parser_t* ps = &state;
  sensim_ambient_init(amb);
  int rc = next_token(ps);
  if (rc <= 0 || ps->has_val) {
    return rc < 0 ? -1 : fail(ps, "a medium spec starts with its kind: custom, clear_air, "
                                   "fog, rain or snow");
  }
  int kind = 0;
  as_value(ps, "kind");
  if (ENUM(ps, kKinds, &kind)) {
    return -1;
  }
  amb->kind = (sensim_medium_kind_t)kind;
  while ((rc = next_token(ps)) > 0) {
    bool custom = amb->kind == SENSIM_MEDIUM_CUSTOM;
    bool vis = amb->kind == SENSIM_MEDIUM_CLEAR_AIR || amb->kind == SENSIM_MEDIUM_FOG;
    if (vis && KEY("visibility")) {
      rc = num(ps, &amb->visibility);
    } else if (!custom && !vis && KEY("rate")) {
      rc = num(ps, &amb->rate);
    } else if (custom && KEY("attenuation")) {
      rc = num(ps, &amb->attenuation);
    } else if (custom && KEY("refractive_index")) {
      rc = num(ps, &amb->refractive_index);
    } else if (custom && KEY("return_gamma_shape")) {
      rc = num(ps, &amb->return_gamma_shape);
    } else if (custom && KEY("return_gamma_scale")) {
      rc = num(ps, &amb->return_gamma_scale);
    } else if (custom && KEY("return_probability_scaling")) {
      rc = num(ps, &amb->return_probability_scaling);
    } else if (custom && KEY("atmospheric_backscatter")) {
      rc = num(ps, &amb->atmospheric_backscatter);
    } else {
      rc = unknown(ps, "medium",
                   custom ? "attenuation, refractive_index, return_gamma_shape, "
                            "return_gamma_scale, return_probability_scaling, "
                            "atmospheric_backscatter"
                   : vis  ? "visibility"
                          : "rate");
    }
    if (rc) {
      return -1;
    }
  }
  return rc < 0 ? -1 : 0;
}


int spec_geom_parse(const char* text, spec_geom_t* g, char* err, size_t err_cap) {
  parser_t state = {.p = text ? text : "", .err = err, .err_cap = err_cap};
  parser_t* ps = &state;
  memset(g, 0, sizeof(*g));
  int rc = next_token(ps);
  if (rc <= 0 || ps->has_val || strcmp(ps->key, "geom") != 0) {
    return rc < 0 ? -1 : fail(ps, "a geometry override starts with the word geom");
  }
  while ((rc = next_token(ps)) > 0) {
    if (KEY("skip")) {
      rc = bool_val(ps, &g->skip);
    } else if (KEY("label")) {
      rc = uint_val(ps, &g->label);
      g->has_label = true;
    } else if (KEY("group")) {
      rc = uint_val(ps, &g->group);
      g->has_group = true;
    } else if (KEY("material")) {
      rc = name_val(ps, g->material);
    } else {
      rc = unknown(ps, "geom", "skip, label, group, material");
    }
    if (rc) {
      return -1;
    }
  }
  return rc < 0 ? -1 : 0;
}
