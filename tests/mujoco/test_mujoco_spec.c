// SPDX-License-Identifier: MIT
// test_mujoco_spec.c: the bridge's spec texts (spec.c) into the C client's structs: every
// kind's keys land in their fields, angles in degrees are converted, lists are read whole, and
// every mistake is refused with a message naming the key and what it accepts.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "spec.h"

#define DEG (M_PI / 180.0)


static spec_sensor_t* parse_ok(const char* text) {
  static spec_sensor_t s;
  char err[512] = "";
  if (spec_sensor_parse(text, &s, err, sizeof(err)) != 0) {
    fprintf(stderr, "# '%s': %s\n", text, err);
    return NULL;
  }
  return &s;
}


// The message of a refused sensor spec ("" if it was accepted).
static const char* refusal(const char* text) {
  static char err[512];
  static spec_sensor_t s;
  err[0] = '\0';
  if (spec_sensor_parse(text, &s, err, sizeof(err)) == 0) {
    return "";
  }
  return err;
}


TEST(spec_lidar_keys_land_in_their_fields) {
  spec_sensor_t* s = parse_ok("lidar site=roof pattern=vlp16 frequency=15 range_max=80.5 "
                              "range_min=0.4 layout=velodyne frame=world publish=step "
                              "misses=nan return_mode=dual see_own_body exclude=a,bb,ccc "
                              "noise_base=0.01 angle_noise=0.1deg angle_noise_axis=azimuth "
                              "group_mask=5 start_azimuth=90deg id=12");
  ASSERT_TRUE(s);
  ASSERT_EQ(s->kind, SPEC_LIDAR);
  ASSERT_EQ(s->id, 12);
  ASSERT_STREQ(s->site, "roof");
  ASSERT_EQ(s->lidar.pattern, SENSIM_PATTERN_VLP16);
  ASSERT_NEAR(s->lidar.vlp16.frequency, 15.0, 0.0);
  ASSERT_NEAR(s->lidar.vlp16.start_azimuth, M_PI / 2, 1e-15);
  ASSERT_NEAR(s->lidar.range_max, 80.5, 0.0);
  ASSERT_NEAR(s->lidar.range_min, 0.4, 0.0);
  ASSERT_EQ(s->lidar.layout, SENSIM_LAYOUT_VELODYNE);
  ASSERT_EQ(s->lidar.frame, SENSIM_FRAME_WORLD);
  ASSERT_EQ(s->lidar.publish, SENSIM_PUBLISH_PER_STEP);
  ASSERT_EQ(s->lidar.misses, SENSIM_MISSES_NAN);
  ASSERT_EQ(s->lidar.return_mode, SENSIM_RETURN_DUAL);
  ASSERT_TRUE(s->lidar.see_own_body);
  ASSERT_EQ(s->nexclude, 3);
  ASSERT_STREQ(s->exclude_names[2], "ccc");
  ASSERT_NEAR(s->lidar.distance_noise.stddev_base, 0.01, 0.0);
  ASSERT_NEAR(s->lidar.angle_noise.stddev, 0.1 * DEG, 1e-18);
  ASSERT_EQ(s->lidar.angle_noise.axis, SENSIM_NOISE_AXIS_AZIMUTH);
  ASSERT_EQ(s->lidar.group_mask, 5);

  // the pattern's presets are the base, whatever the order of the keys
  s = parse_ok("lidar columns=2048 site=x pattern=ouster channels=128 fields=x,y,z,ring "
               "frequency=20");
  ASSERT_TRUE(s);
  ASSERT_EQ(s->lidar.ouster.channels, 128);
  ASSERT_EQ(s->lidar.ouster.columns, 2048);
  ASSERT_NEAR(s->lidar.ouster.frequency, 20.0, 0.0);
  ASSERT_EQ(s->lidar.nfields, 4);
  ASSERT_STREQ(s->lidar.fields[3], "ring");
  s = parse_ok("lidar site=x pattern=spinning frequency=5 columns=100 elevations=0");
  ASSERT_TRUE(s);
  ASSERT_NEAR(s->lidar.spinning.frequency, 5.0, 0.0);
  ASSERT_EQ(s->lidar.spinning.columns, 100);
  s = parse_ok("lidar site=x pattern=spinning elevations=-15deg,0,15deg columns=360");
  ASSERT_TRUE(s);
  ASSERT_EQ(s->lidar.spinning.nchannels, 3);
  ASSERT_NEAR(s->lidar.spinning.channel_elevations[0], -15 * DEG, 1e-15);
  ASSERT_NEAR(s->lidar.spinning.channel_elevations[1], 0.0, 0.0);
  s = parse_ok("lidar site=x pattern=flash columns=32 rows=16 fov_horizontal=60deg "
               "fov_vertical=0.5 frame_rate=20 projective=1");
  ASSERT_TRUE(s);
  ASSERT_EQ(s->lidar.flash.rows, 16);
  ASSERT_NEAR(s->lidar.flash.fov_horizontal, M_PI / 3, 1e-15);
  ASSERT_TRUE(s->lidar.flash.projective);
  s = parse_ok("lidar site=x pattern=livox fov=70deg point_rate=200000 frame_rate=5");
  ASSERT_TRUE(s);
  ASSERT_NEAR(s->lidar.livox.point_rate, 200000.0, 0.0);
  return 0;
}


TEST(spec_imu_joint_and_cone_keys) {
  spec_sensor_t* s = parse_ok("imu site=imu accel_noise=0.01 gyro_bias=0.1,0.2,0.3 "
                              "magnetometer=yes sample_rate=400 mag_density=1e-7");
  ASSERT_TRUE(s);
  ASSERT_EQ(s->kind, SPEC_IMU);
  ASSERT_TRUE(s->imu.has_accelerometer && s->imu.has_gyroscope && s->imu.has_magnetometer);
  ASSERT_NEAR(s->imu.accelerometer.noise_stddev[2], 0.01, 0.0);
  ASSERT_NEAR(s->imu.gyroscope.bias[1], 0.2, 0.0);
  ASSERT_NEAR(s->imu.magnetometer.spectral_noise_density[0], 1e-7, 0.0);
  ASSERT_NEAR(s->imu.sample_rate, 400.0, 0.0);
  s = parse_ok("encoder joint=hinge mode=incremental resolution=0.01 range_upper=6.28");
  ASSERT_TRUE(s);
  ASSERT_STREQ(s->joint, "hinge");
  ASSERT_EQ(s->encoder.mode, SENSIM_ENCODER_INCREMENTAL);
  ASSERT_NEAR(s->encoder.resolution, 0.01, 0.0);
  s = parse_ok("odometer joint=wheel pulses=0");
  ASSERT_TRUE(s);
  ASSERT_TRUE(!(s->has_wheel_radius));
  ASSERT_EQ(s->odometer.pulses_per_revolution, 0);
  s = parse_ok("odometer joint=wheel wheel_radius=0.25");
  ASSERT_TRUE(s && s->has_wheel_radius);
  s = parse_ok("cone site=nose fov_horizontal=40deg range=12 mode=lines lines_per_face=20");
  ASSERT_TRUE(s);
  ASSERT_EQ(s->cone.mode, SENSIM_CONE_LINES);
  ASSERT_NEAR(s->cone.fov_horizontal, 40 * DEG, 1e-15);
  return 0;
}


TEST(spec_mistakes_are_named) {
  ASSERT_CONTAINS(refusal(""), "empty sensor spec");
  ASSERT_CONTAINS(refusal("radar site=x"), "kind = 'radar' is not one of: lidar, imu");
  ASSERT_CONTAINS(refusal("lidar site=x"), "pattern= is required");
  ASSERT_CONTAINS(refusal("lidar pattern=vlp16"), "lidar: site= is required");
  ASSERT_CONTAINS(refusal("encoder"), "encoder: joint= is required");
  ASSERT_CONTAINS(refusal("lidar site=x pattern=vlp17"), "pattern = 'vlp17' is not one of");
  ASSERT_CONTAINS(refusal("lidar site=x pattern=vlp16 freq=10"),
                  "lidar: unknown key 'freq' (keys: id, site, pattern, frequency");
  ASSERT_CONTAINS(refusal("lidar site=x pattern=vlp16 channels=32"),
                  "channels applies to the patterns ouster only");
  ASSERT_CONTAINS(refusal("lidar site=x pattern=flash frequency=10"),
                  "frequency applies to the patterns spinning, vlp16, ouster, hdl64e, bpearl");
  ASSERT_CONTAINS(refusal("lidar site=x pattern=vlp16 range_max=far"),
                  "range_max = 'far' is not a number");
  ASSERT_CONTAINS(refusal("lidar site=x pattern=vlp16 range_max=nan"),
                  "range_max = 'nan' is not a number");
  ASSERT_CONTAINS(refusal("lidar site=x pattern=ouster columns=-5"),
                  "columns = '-5' is not an integer");
  ASSERT_CONTAINS(refusal("lidar site=x pattern=vlp16 layout=ros"),
                  "layout = 'ros' is not one of: fields, velodyne, ouster, xyzi");
  ASSERT_CONTAINS(refusal("lidar site=x pattern=vlp16 see_own_body=maybe"),
                  "see_own_body = 'maybe' is not a boolean");
  ASSERT_CONTAINS(refusal("lidar site=x pattern=spinning elevations="), "an empty list");
  ASSERT_CONTAINS(refusal("imu site=x gyro_bias=1,2"), "gyro_bias: 1 or 3 numbers, got 2");
  ASSERT_CONTAINS(refusal("imu site=x joint=j"), "imu: unknown key 'joint'");
  ASSERT_CONTAINS(refusal("odometer joint= "), "joint: a name is required");
  ASSERT_CONTAINS(refusal("site=x lidar"), "starts with its kind");

  // a list longer than its table, a name longer than a name
  char long_list[4096] = "lidar site=x pattern=spinning elevations=0";
  for (int i = 0; i < 200; i++) {
    strcat(long_list, ",0.01");
  }
  ASSERT_CONTAINS(refusal(long_list), "elevations: more than 128 values");
  char long_name[400] = "imu site=";
  memset(long_name + 9, 'n', 300);
  long_name[309] = '\0';
  ASSERT_CONTAINS(refusal(long_name), "site: name longer than 127 bytes");
  return 0;
}


TEST(spec_materials_media_geoms) {
  sensim_material_t mat;
  uint32_t label = 0;
  bool has_label = false;
  char err[512] = "";
  ASSERT_OK(spec_material_parse("lambertian reflectance=0.3 label=4", &mat, &label, &has_label,
                                err, sizeof(err)));
  ASSERT_EQ(mat.model, SENSIM_MATERIAL_LAMBERTIAN);
  ASSERT_NEAR(mat.reflectance, 0.3, 0.0);
  ASSERT_TRUE(has_label && label == 4);
  ASSERT_OK(spec_material_parse("two_layer refractive_index=2 diffuse_roughness=0.1", &mat,
                                &label, &has_label, err, sizeof(err)));
  ASSERT_EQ(mat.model, SENSIM_MATERIAL_TWO_LAYER);
  ASSERT_NEAR(mat.refractive_index, 2.0, 0.0);
  ASSERT_TRUE(!(has_label));
  ASSERT_EQ(spec_material_parse("lambertian refractive_index=2", &mat, &label, &has_label, err,
                                sizeof(err)), -1);
  ASSERT_CONTAINS(err, "lambertian: unknown key 'refractive_index' (keys: reflectance, label)");
  ASSERT_EQ(spec_material_parse("matte", &mat, &label, &has_label, err, sizeof(err)), -1);
  ASSERT_CONTAINS(err, "model = 'matte' is not one of: lambertian, two_layer");

  sensim_ambient_t amb;
  ASSERT_OK(spec_ambient_parse("fog visibility=150", &amb, err, sizeof(err)));
  ASSERT_EQ(amb.kind, SENSIM_MEDIUM_FOG);
  ASSERT_NEAR(amb.visibility, 150.0, 0.0);
  ASSERT_OK(spec_ambient_parse("custom refractive_index=1 attenuation=0", &amb, err,
                               sizeof(err)));
  ASSERT_NEAR(amb.refractive_index, 1.0, 0.0);
  ASSERT_EQ(spec_ambient_parse("rain visibility=3", &amb, err, sizeof(err)), -1);
  ASSERT_CONTAINS(err, "medium: unknown key 'visibility' (keys: rate)");

  spec_geom_t g;
  ASSERT_OK(spec_geom_parse("geom label=9 material=steel group=3", &g, err, sizeof(err)));
  ASSERT_TRUE(!g.skip && g.has_label && g.label == 9 && g.has_group && g.group == 3);
  ASSERT_STREQ(g.material, "steel");
  ASSERT_OK(spec_geom_parse("geom skip", &g, err, sizeof(err)));
  ASSERT_TRUE(g.skip);
  ASSERT_EQ(spec_geom_parse("geom hide", &g, err, sizeof(err)), -1);
  ASSERT_CONTAINS(err, "geom: unknown key 'hide' (keys: skip, label, group, material)");
  ASSERT_EQ(spec_geom_parse("label=3", &g, err, sizeof(err)), -1);
  ASSERT_CONTAINS(err, "starts with the word geom");
  return 0;
}
