// SPDX-License-Identifier: MIT
// test_config.c: the lidar's configuration without protobuf: the datasheet defaults of absent
// fields (docs/models/lidar.md), every check naming its wire field, and lidar_config_check
// agreeing with lidar_config_create on what is accepted.
#include <math.h>
#include <string.h>

#include "check.h"
#include "lidar/config.h"

#define DEG (M_PI / 180.0)

static lidar_config_t vlp16(void) {
  lidar_config_t c;
  memset(&c, 0, sizeof c);
  c.pattern = LIDAR_PATTERN_VLP16;
  c.vlp16.frequency = 10.0;
  return c;
}


// Create and destroy a lidar from c (no frame limit): the status, the message in msg.
static int create(const lidar_config_t* c, err_msg_t* msg) {
  sensor_t s;
  memset(&s, 0, sizeof s);
  int rc = lidar_config_create(c, 0, &s, msg);
  if (rc == 0) {
    s.ops->destroy(s.self);
  }
  return rc;
}


TEST(config_defaults_are_the_datasheet_values) {
  lidar_config_t c = vlp16();
  lidar_config_defaults(&c);
  ASSERT_NEAR(c.range_min, 0.1, 0);
  ASSERT_TRUE(c.range_max == INFINITY);
  ASSERT_EQ(c.misses, LIDAR_MISS_REMOVE);
  ASSERT_NEAR(c.beam.exit_radius, 0.005, 0);
  ASSERT_NEAR(c.beam.detector_radius, 0.005, 0);
  ASSERT_NEAR(c.hdl64e.frequency, 10.0, 0);
  ASSERT_EQ(c.hdl64e.columns, 2083);                 // round(1.3333e6 / (64 x 10))
  ASSERT_NEAR(c.bpearl.frequency, 10.0, 0);
  ASSERT_NEAR(c.livox.fov, 38.4 * DEG, 1e-15);
  ASSERT_NEAR(c.livox.point_rate, 100000.0, 0);
  ASSERT_NEAR(c.livox.frame_rate, 10.0, 0);
  ASSERT_EQ(c.livox.nprism_rate, 2);
  ASSERT_NEAR(c.livox.prism_rates[0], 7294.0 / 60.0, 0);
  ASSERT_NEAR(c.livox.prism_rates[1], -4664.0 / 60.0, 0);

  // the fields sent stay, the defaults that follow them follow them
  c = vlp16();
  c.keep_misses = 1;
  c.beam.has_exit_radius = 1;
  c.beam.exit_radius = 0.02;
  c.hdl64e.has_frequency = 1;
  c.hdl64e.frequency = 20.0;
  c.ouster.channels = 128;
  c.has_range_min = 1;
  c.range_min = 0.0;
  lidar_config_defaults(&c);
  ASSERT_EQ(c.misses, LIDAR_MISS_ZERO);
  ASSERT_NEAR(c.beam.detector_radius, 0.02, 0);
  ASSERT_EQ(c.hdl64e.columns, 1042);
  ASSERT_NEAR(c.ouster.elevation_max, 22.5 * DEG, 1e-15);
  ASSERT_NEAR(c.ouster.elevation_min, -22.5 * DEG, 1e-15);
  ASSERT_NEAR(c.range_min, 0.0, 0);

  // idempotent
  lidar_config_t again = c;
  lidar_config_defaults(&again);
  ASSERT_TRUE(memcmp(&again, &c, sizeof c) == 0);

  // misses sent win over keep_misses
  c = vlp16();
  c.keep_misses = 1;
  c.has_misses = 1;
  c.misses = LIDAR_MISS_NAN;
  lidar_config_defaults(&c);
  ASSERT_EQ(c.misses, LIDAR_MISS_NAN);

  // the Ouster point type on an Ouster pattern keeps every pixel at NaN (ouster_ros), unless
  // told otherwise; on another pattern it removes misses like any layout
  c = vlp16();
  c.layout = LIDAR_LAYOUT_OUSTER;
  lidar_config_defaults(&c);
  ASSERT_EQ(c.misses, LIDAR_MISS_REMOVE);
  c = vlp16();
  c.pattern = LIDAR_PATTERN_OUSTER;
  c.layout = LIDAR_LAYOUT_OUSTER;
  lidar_config_t zero = c;
  lidar_config_defaults(&c);
  ASSERT_EQ(c.misses, LIDAR_MISS_NAN);
  zero.keep_misses = 1;
  lidar_config_defaults(&zero);
  ASSERT_EQ(zero.misses, LIDAR_MISS_ZERO);
  return 0;
}


TEST(config_every_pattern_with_its_defaults_is_accepted) {
  static const double el[2] = {-0.1, 0.1};
  static const double az[2] = {0.0, 0.5};
  lidar_config_t c[8];
  for (int i = 0; i < 8; i++) {
    memset(&c[i], 0, sizeof c[i]);
  }
  c[0].pattern = LIDAR_PATTERN_SPINNING;
  c[0].spinning = (lidar_spinning_config_t){.frequency = 10, .columns = 360,
                                            .channel_elevations = el, .nchannel_elevation = 2};
  c[1] = vlp16();
  c[2].pattern = LIDAR_PATTERN_OUSTER;
  c[2].ouster = (lidar_ouster_config_t){.channels = 64, .columns = 1024, .frequency = 10};
  c[3].pattern = LIDAR_PATTERN_FLASH;
  c[3].flash = (lidar_flash_config_t){.columns = 8, .rows = 4, .fov_horizontal = 0.7,
                                      .fov_vertical = 0.35, .frame_rate = 10};
  c[4].pattern = LIDAR_PATTERN_HDL64E;
  c[5].pattern = LIDAR_PATTERN_BPEARL;
  c[6].pattern = LIDAR_PATTERN_CUSTOM;
  c[6].custom = (lidar_custom_config_t){.azimuths = az, .nazimuth = 2, .elevations = el,
                                        .nelevation = 2, .frame_rate = 10};
  c[7].pattern = LIDAR_PATTERN_LIVOX;
  for (int i = 0; i < 8; i++) {
    err_msg_t msg = {0};
    if (lidar_config_check(&c[i], &msg) != 0 || create(&c[i], &msg) != 0) {
      CHECK_FAIL("pattern %d refused: %s", (int)c[i].pattern, msg.text);
    }
  }
  return 0;
}


// One bad field per case: the field its message must name.
typedef struct bad_case {
  const char* field;
  void (*set)(lidar_config_t* c);
} bad_case_t;

static const double kNan[1] = {NAN};
static const double kZero[1] = {0.0};
static const double kThree[3] = {1.0, 2.0, 3.0};
static const char* const kUnknownField[1] = {"colour"};

static void no_pattern(lidar_config_t* c) { c->pattern = 0; }
static void bad_pattern_kind(lidar_config_t* c) { c->pattern = (lidar_pattern_kind_t)99; }
static void vlp_frequency(lidar_config_t* c) { c->vlp16.frequency = NAN; }
static void vlp_start_azimuth(lidar_config_t* c) { c->vlp16.start_azimuth = INFINITY; }
static void start_time(lidar_config_t* c) {
  c->has_start_time = 1;
  c->start_time = 2e9;
}
static void range_min(lidar_config_t* c) {
  c->has_range_min = 1;
  c->range_min = -1.0;
}
static void range_max(lidar_config_t* c) {
  c->has_range_max = 1;
  c->range_max = 0.05;
}
static void depth(lidar_config_t* c) { c->raytrace_depth = 9; }
static void return_mode(lidar_config_t* c) { c->return_mode = (lidar_return_mode_t)7; }
static void max_returns(lidar_config_t* c) {
  c->return_mode = LIDAR_RETURN_ALL;
  c->max_returns = 256;
}
static void threshold(lidar_config_t* c) { c->intensity_threshold = -1.0; }
static void beam_divergence(lidar_config_t* c) { c->has_beam = 1; }
static void beam_exit(lidar_config_t* c) {
  c->has_beam = 1;
  c->beam.divergence = 0.001;
  c->beam.has_exit_radius = 1;
  c->beam.exit_radius = NAN;
}
static void noise_base(lidar_config_t* c) { c->distance_noise.stddev_base = -1.0; }
static void angle_axis(lidar_config_t* c) { c->angle_noise.axis = (lidar_angle_axis_t)2; }
static void angle_stddev(lidar_config_t* c) { c->angle_noise.stddev = NAN; }
static void frame(lidar_config_t* c) { c->frame = (lidar_frame_t)2; }
static void publish(lidar_config_t* c) { c->publish = (lidar_publish_t)2; }
static void misses(lidar_config_t* c) {
  c->has_misses = 1;
  c->misses = (lidar_miss_mode_t)3;
}
static void layout(lidar_config_t* c) { c->layout = (lidar_layout_preset_t)4; }
static void layout_and_fields(lidar_config_t* c) {
  c->layout = LIDAR_LAYOUT_XYZI;
  c->fields = kUnknownField;
  c->nfield = 1;
}
static void field_name(lidar_config_t* c) {
  c->fields = kUnknownField;
  c->nfield = 1;
}
static void too_many_fields(lidar_config_t* c) {
  c->fields = kUnknownField;
  c->nfield = SENSOR_MAX_FIELDS + 1;
}
static void excluded(lidar_config_t* c) { c->nexclude_body = LIDAR_MAX_EXCLUDED_BODIES + 1; }
static void spin(lidar_config_t* c) {
  c->pattern = LIDAR_PATTERN_SPINNING;
  c->spinning = (lidar_spinning_config_t){.frequency = 10, .columns = 10,
                                          .channel_elevations = kZero, .nchannel_elevation = 1,
                                          .spin = (lidar_spin_t)2};
}
static void spinning_channels(lidar_config_t* c) {
  spin(c);
  c->spinning.spin = LIDAR_SPIN_CLOCKWISE;
  c->spinning.nchannel_elevation = (size_t)UINT32_MAX + 1;
}
static void ouster_elevation(lidar_config_t* c) {
  c->pattern = LIDAR_PATTERN_OUSTER;
  c->ouster = (lidar_ouster_config_t){.channels = 64, .columns = 1024, .frequency = 10,
                                      .has_elevation_min = 1, .elevation_min = NAN};
}
static void ouster_beams(lidar_config_t* c) {
  ouster_elevation(c);
  c->ouster.has_elevation_min = 0;
  c->ouster.beam_altitude_angles = kNan;
  c->ouster.nbeam_altitude_angle = 1;
}
static void hdl64e_columns(lidar_config_t* c) {
  c->pattern = LIDAR_PATTERN_HDL64E;
  c->hdl64e.has_columns = 1;
}
static void bpearl_frequency(lidar_config_t* c) {
  c->pattern = LIDAR_PATTERN_BPEARL;
  c->bpearl = (lidar_bpearl_config_t){.has_frequency = 1, .frequency = 15};
}
static void flash_rows(lidar_config_t* c) {
  c->pattern = LIDAR_PATTERN_FLASH;
  c->flash = (lidar_flash_config_t){.columns = 4, .fov_horizontal = 1, .fov_vertical = 1,
                                    .frame_rate = 10};
}
static void custom_lengths(lidar_config_t* c) {
  c->pattern = LIDAR_PATTERN_CUSTOM;
  c->custom = (lidar_custom_config_t){.azimuths = kZero, .nazimuth = 1, .elevations = kThree,
                                      .nelevation = 3, .frame_rate = 10};
}
static void custom_azimuth(lidar_config_t* c) {
  custom_lengths(c);
  c->custom.azimuths = kNan;
  c->custom.nelevation = 1;
  c->custom.elevations = kZero;
}
static void livox_prisms(lidar_config_t* c) {
  c->pattern = LIDAR_PATTERN_LIVOX;
  c->livox.prism_rates = kThree;
  c->livox.nprism_rate = 3;
}
static void livox_rate(lidar_config_t* c) {
  c->pattern = LIDAR_PATTERN_LIVOX;
  c->livox.has_point_rate = 1;
  c->livox.point_rate = 1e12;
}

static const bad_case_t kBad[] = {
    {"lidar: no scan pattern", no_pattern},
    {"lidar: no scan pattern", bad_pattern_kind},
    {"lidar.vlp16.frequency", vlp_frequency},
    {"lidar.vlp16.start_azimuth", vlp_start_azimuth},
    {"lidar.vlp16.start_time", start_time},
    {"lidar.range_min", range_min},
    {"lidar.range_max", range_max},
    {"lidar.raytrace_depth", depth},
    {"lidar.return_mode", return_mode},
    {"lidar.max_returns", max_returns},
    {"lidar.intensity_threshold", threshold},
    {"lidar.beam.divergence", beam_divergence},
    {"lidar.beam.exit_radius", beam_exit},
    {"lidar.distance_noise.stddev_base", noise_base},
    {"lidar.angle_noise.axis", angle_axis},
    {"lidar.angle_noise.stddev", angle_stddev},
    {"lidar.frame", frame},
    {"lidar.publish", publish},
    {"lidar.misses", misses},
    {"lidar.layout", layout},
    {"lidar.fields: give either", layout_and_fields},
    {"lidar.fields[0]", field_name},
    {"lidar.fields has", too_many_fields},
    {"lidar.exclude_bodies", excluded},
    {"lidar.spinning.spin", spin},
    {"lidar.spinning: too many channels", spinning_channels},
    {"lidar.ouster.elevation_min", ouster_elevation},
    {"lidar.ouster.beam_altitude_angles", ouster_beams},
    {"lidar.hdl64e.columns", hdl64e_columns},
    {"lidar.bpearl.frequency", bpearl_frequency},
    {"lidar.flash.rows", flash_rows},
    {"lidar.custom.elevations", custom_lengths},
    {"lidar.custom.azimuths[0]", custom_azimuth},
    {"lidar.livox.prism_rates", livox_prisms},
    {"lidar.livox.point_rate", livox_rate},
};


TEST(config_check_names_the_bad_field_and_create_agrees) {
  for (size_t i = 0; i < sizeof kBad / sizeof kBad[0]; i++) {
    lidar_config_t c = vlp16();
    kBad[i].set(&c);
    lidar_config_t before = c;
    err_msg_t checked = {0}, created = {0};
    int rc = lidar_config_check(&c, &checked);
    if (rc != ERR_INVAL || !strstr(checked.text, kBad[i].field)) {
      CHECK_FAIL("case %zu: check returned %d \"%s\", expected ERR_INVAL naming %s", i, rc,
                 checked.text, kBad[i].field);
    }
    ASSERT_TRUE(memcmp(&before, &c, sizeof c) == 0);     // the caller's struct is unchanged
    ASSERT_EQ(create(&c, &created), ERR_INVAL);
    ASSERT_STREQ(created.text, checked.text);
  }
  return 0;
}


TEST(config_frame_limit_is_create_only) {
  // a 64 x 64 flash frame of 16-byte points is 64 KiB: over a 32 KiB output, fine without one
  lidar_config_t c;
  memset(&c, 0, sizeof c);
  c.pattern = LIDAR_PATTERN_FLASH;
  c.flash = (lidar_flash_config_t){.columns = 64, .rows = 64, .fov_horizontal = 1,
                                   .fov_vertical = 1, .frame_rate = 10};
  err_msg_t msg = {0};
  ASSERT_OK(lidar_config_check(&c, &msg));
  sensor_t s;
  ASSERT_EQ(lidar_config_create(&c, 32768, &s, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "lidar.flash.columns x rows");
  ASSERT_OK(lidar_config_create(&c, 1 << 20, &s, &msg));
  ASSERT_EQ(s.kind, SENSOR_LIDAR);
  s.ops->destroy(s.self);
  return 0;
}
