// SPDX-License-Identifier: MIT
// test_client_sensors.c: every sensor kind created through the C client against the real
// sensimd, checked on what it measures: every lidar pattern inside a sphere sees it at its
// radius; lidar options show in the cloud; an IMU reads the body's rotation and its bias; the
// joint sensors follow their joint; the cone finds a box's face. Every refusal names its
// argument or field.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

#define RADIUS 10.0


static float f32(const uint8_t* p) {
  float v;
  memcpy(&v, p, 4);
  return v;
}


// A vacuum for the environment: ranges are optical path lengths (n = 1 makes them geometric)
// and air gives random early returns (none without a return probability).
static sensim_status_t vacuum(sensim_client_t* cli) {
  sensim_ambient_t a;
  sensim_ambient_init(&a);
  a.attenuation = 0.0;
  a.refractive_index = 1.0;
  a.return_probability_scaling = 0.0;
  return sensim_set_ambient(cli, &a);
}


// Step state and step at t (no bodies); returns the result.
static sensim_status_t tick(sensim_client_t* cli, double t, const sensim_step_result_t** r) {
  sensim_state_t state;
  sensim_state_init(&state);
  state.time = t;
  sensim_step_t step;
  sensim_step_init(&step);
  step.time = t;
  return sensim_update_and_step(cli, &state, &step, r);
}


// The first point cloud of sensor id in a result, or NULL.
static const sensim_point_cloud_t* cloud_of(const sensim_step_result_t* r, uint32_t id) {
  for (uint32_t i = 0; i < r->noutputs; i++) {
    if (r->outputs[i].sensor_id == id && r->outputs[i].kind == SENSIM_PAYLOAD_POINT_CLOUD) {
      return &r->outputs[i].point_cloud;
    }
  }
  return NULL;
}


// Count the points of a RAW cloud whose x y z lie at `range` from `centre` (float precision);
// -1 when the cloud has no x y z.
static long at_range(const sensim_point_cloud_t* c, const double centre[3], double range) {
  const sensim_point_field_t* fx = sensim_point_cloud_field(c, "x");
  const sensim_point_field_t* fy = sensim_point_cloud_field(c, "y");
  const sensim_point_field_t* fz = sensim_point_cloud_field(c, "z");
  if (!fx || !fy || !fz || c->encoding != SENSIM_ENCODING_RAW ||
      c->size != (size_t)c->count * c->point_step) {
    return -1;
  }
  long n = 0;
  const uint8_t* p = c->data;
  for (uint32_t i = 0; i < c->count; i++, p += c->point_step) {
    double x = f32(p + fx->offset) - centre[0], y = f32(p + fy->offset) - centre[1],
           z = f32(p + fz->offset) - centre[2];
    n += fabs(sqrt(x * x + y * y + z * z) - range) < 1e-5 * range;
  }
  return n;
}


TEST(sensors_every_lidar_pattern_sees_the_sphere_around_it) {
  td_daemon_t d;
  ASSERT_OK(td_start(&d, NULL));
  sensim_client_t* cli = td_connect(&d, "patterns");
  ASSERT_TRUE(cli != NULL);
  ASSERT_OK_ST(cli, vacuum(cli));
  ASSERT_OK_ST(cli, td_sphere(cli, 1, RADIUS, 0, 0, 0, 3));

  // one lidar of each pattern at the centre, publishing what each step covered
  double elev[3] = {-0.1, 0.0, 0.1}, az[3] = {0, 0.01, 0.02}, toff[3] = {0, 1e-6, 2e-6};
  double caz[4] = {0, 1, 2, 3}, cel[4] = {0, 0.1, -0.1, 0.2}, ct[4] = {0, 0.01, 0.02, 0.03};
  uint32_t cch[4] = {0, 1, 2, 3};
  const char* fields[4] = {"x", "y", "z", "distance"};
  for (int k = SENSIM_PATTERN_SPINNING; k <= SENSIM_PATTERN_LIVOX; k++) {
    sensim_lidar_config_t c;
    sensim_lidar_config_init(&c, (sensim_lidar_pattern_t)k);
    c.publish = SENSIM_PUBLISH_PER_STEP;
    c.range_max = 100.0;
    c.spinning.channel_elevations = elev;
    c.spinning.channel_azimuth_offsets = az;
    c.spinning.channel_time_offsets = toff;
    c.spinning.nchannels = 3;
    c.spinning.columns = 360;
    c.spinning.spin = SENSIM_SPIN_COUNTER_CLOCKWISE;
    c.ouster.channels = 16;
    c.ouster.columns = 512;
    c.flash.columns = 8;
    c.flash.rows = 4;
    c.custom.azimuths = caz;
    c.custom.elevations = cel;
    c.custom.time_offsets = ct;
    c.custom.channels = cch;
    c.custom.nrays = 4;
    if (k == SENSIM_PATTERN_FLASH) {
      c.fields = fields;
      c.nfields = 4;
    } else if (k == SENSIM_PATTERN_VLP16) {
      c.layout = SENSIM_LAYOUT_VELODYNE;
    } else if (k == SENSIM_PATTERN_OUSTER) {
      c.layout = SENSIM_LAYOUT_OUSTER;
    }
    sensim_sensor_t s;
    sensim_sensor_init(&s);
    s.id = 10 + (uint32_t)k;
    ASSERT_OK_ST(cli, sensim_create_lidar(cli, &s, &c));
  }

  // two steps: the second covers (0, 0.1 s], a whole frame of every pattern at 10 Hz
  const sensim_step_result_t* r;
  ASSERT_OK_ST(cli, tick(cli, 0.0, &r));
  ASSERT_OK_ST(cli, tick(cli, 0.1, &r));
  const double origin[3] = {0, 0, 0};
  for (int k = SENSIM_PATTERN_SPINNING; k <= SENSIM_PATTERN_LIVOX; k++) {
    const sensim_point_cloud_t* c = cloud_of(r, 10 + (uint32_t)k);
    if (!c || c->count == 0) {
      CHECK_FAIL("pattern %d: no cloud", k);
    }
    long n = at_range(c, origin, RADIUS);
    if (n != (long)c->count) {
      CHECK_FAIL("pattern %d: %ld of %u points at %g m", k, n, c->count, RADIUS);
    }
    ASSERT_EQ((uint64_t)c->height * c->width, c->count);
  }

  // counts where the pattern fixes them: 3 x 360 rays a revolution, 8 x 4 pixels a frame,
  // 4 custom rays a frame, 10,000 Livox rays a frame (100k/s at 10 Hz)
  ASSERT_EQ(cloud_of(r, 10 + SENSIM_PATTERN_SPINNING)->count, 3 * 360);
  ASSERT_EQ(cloud_of(r, 10 + SENSIM_PATTERN_FLASH)->count, 32);
  ASSERT_EQ(cloud_of(r, 10 + SENSIM_PATTERN_CUSTOM)->count, 4);
  ASSERT_EQ(cloud_of(r, 10 + SENSIM_PATTERN_LIVOX)->count, 10000);

  // the fields asked for: the flash's, and the Velodyne layout's, in their order
  const sensim_point_cloud_t* flash = cloud_of(r, 10 + SENSIM_PATTERN_FLASH);
  ASSERT_EQ(flash->nfields, 4);
  ASSERT_STREQ(flash->fields[3].name, "distance");
  const sensim_point_field_t* dist = sensim_point_cloud_field(flash, "distance");
  ASSERT_TRUE(dist != NULL);
  ASSERT_NEAR(f32((const uint8_t*)flash->data + dist->offset), RADIUS, 1e-4);
  const sensim_point_cloud_t* vlp = cloud_of(r, 10 + SENSIM_PATTERN_VLP16);
  static const char* const velodyne[6] = {"x", "y", "z", "intensity", "ring", "time"};
  ASSERT_EQ(vlp->nfields, 6);
  for (int i = 0; i < 6; i++) {
    ASSERT_STREQ(vlp->fields[i].name, velodyne[i]);
  }
  ASSERT_EQ(sensim_point_cloud_field(vlp, "ring")->datatype, SENSIM_DATATYPE_UINT16);
  ASSERT_TRUE(sensim_point_cloud_field(vlp, "nope") == NULL);
  sensim_client_close(cli);
  ASSERT_EQ(td_stop(&d), 0);
  return 0;
}


TEST(sensors_lidar_options_show_in_the_cloud) {
  td_daemon_t d;
  ASSERT_OK(td_start(&d, NULL));
  sensim_client_t* cli = td_connect(&d, "lidar_options");
  ASSERT_TRUE(cli != NULL);
  ASSERT_OK_ST(cli, vacuum(cli));
  ASSERT_OK_ST(cli, td_sphere(cli, 1, RADIUS, 1, 2, 3, 3));

  // a body at (1, 2, 3) carrying a small box around its lidar
  sensim_body_t b;
  sensim_body_init(&b);
  b.id = 1;
  b.pose.position[0] = 1;
  b.pose.position[1] = 2;
  b.pose.position[2] = 3;
  ASSERT_OK_ST(cli, sensim_create_body(cli, &b));
  sensim_primitive_t p;
  sensim_primitive_init(&p);
  p.id = 2;
  p.half_extents[0] = p.half_extents[1] = p.half_extents[2] = 0.5;
  ASSERT_OK_ST(cli, sensim_create_primitive(cli, &p));
  sensim_object_t o;
  sensim_object_init(&o);
  o.id = 2;
  o.geometry_id = 2;
  o.body_id = 1;
  ASSERT_OK_ST(cli, sensim_create_object(cli, &o));

  double elev[2] = {-0.2, 0.2};
  sensim_lidar_config_t c;
  sensim_lidar_config_init(&c, SENSIM_PATTERN_SPINNING);
  c.spinning.channel_elevations = elev;
  c.spinning.nchannels = 2;
  c.spinning.columns = 100;
  c.publish = SENSIM_PUBLISH_PER_STEP;
  sensim_sensor_t s;
  sensim_sensor_init(&s);
  s.body_id = 1;

  // 20: default, in the sensor frame, sees out through its own body
  s.id = 20;
  ASSERT_OK_ST(cli, sensim_create_lidar(cli, &s, &c));
  // 21: world frame; 22: sees its own body (the box at 0.5 m); 23: range_max below the sphere
  // with misses as NaN points; 24: distance noise
  c.frame = SENSIM_FRAME_WORLD;
  s.id = 21;
  ASSERT_OK_ST(cli, sensim_create_lidar(cli, &s, &c));
  c.frame = SENSIM_FRAME_SENSOR;
  c.see_own_body = true;
  s.id = 22;
  ASSERT_OK_ST(cli, sensim_create_lidar(cli, &s, &c));
  c.see_own_body = false;
  c.range_max = 5.0;
  c.misses = SENSIM_MISSES_NAN;
  s.id = 23;
  ASSERT_OK_ST(cli, sensim_create_lidar(cli, &s, &c));
  c.range_max = INFINITY;
  c.misses = SENSIM_MISSES_REMOVE;
  c.distance_noise.stddev_base = 0.01;
  c.beam.enabled = true;
  c.beam.divergence = 0.001;
  c.angle_noise.stddev = 1e-4;
  c.return_mode = SENSIM_RETURN_FIRST;
  c.raytrace_depth = 2;
  c.intensity_threshold = 0.0;
  c.round_trip_attenuation = true;
  s.id = 24;
  ASSERT_OK_ST(cli, sensim_create_lidar(cli, &s, &c));

  const sensim_step_result_t* r;
  ASSERT_OK_ST(cli, tick(cli, 0.0, &r));
  ASSERT_OK_ST(cli, tick(cli, 0.1, &r));
  const double zero[3] = {0, 0, 0}, body[3] = {1, 2, 3};
  const sensim_point_cloud_t* c20 = cloud_of(r, 20);
  ASSERT_TRUE(c20 && c20->count == 200);
  ASSERT_EQ(at_range(c20, zero, RADIUS), 200);
  ASSERT_EQ(c20->frame, SENSIM_FRAME_SENSOR);
  const sensim_point_cloud_t* c21 = cloud_of(r, 21);
  ASSERT_EQ(at_range(c21, body, RADIUS), 200);
  ASSERT_EQ(c21->frame, SENSIM_FRAME_WORLD);
  const sensim_point_cloud_t* c22 = cloud_of(r, 22);
  long near = 0;
  for (uint32_t i = 0; i < c22->count; i++) {
    const uint8_t* q = (const uint8_t*)c22->data + (size_t)i * c22->point_step;
    near += fabs(f32(q)) <= 0.5 + 1e-5 && fabs(f32(q + 4)) <= 0.5 + 1e-5;
  }
  ASSERT_EQ(near, 200);  // every ray met the box around it
  const sensim_point_cloud_t* c23 = cloud_of(r, 23);
  ASSERT_EQ(c23->count, 200);
  ASSERT_TRUE(isnan(f32(c23->data)));
  const sensim_point_cloud_t* c24 = cloud_of(r, 24);
  ASSERT_TRUE(c24 && c24->count > 150);
  long exact = at_range(c24, zero, RADIUS);
  ASSERT_TRUE(exact < (long)c24->count / 2);  // noisy ranges
  sensim_client_close(cli);
  ASSERT_EQ(td_stop(&d), 0);
  return 0;
}


TEST(sensors_lidar_refusals_name_the_field) {
  td_daemon_t d;
  ASSERT_OK(td_start(&d, NULL));
  sensim_client_t* cli = td_connect(&d, "lidar_refusals");
  ASSERT_TRUE(cli != NULL);
  sensim_sensor_t s;
  sensim_sensor_init(&s);
  s.id = 1;
  sensim_lidar_config_t c;
  sensim_lidar_config_init(&c, SENSIM_PATTERN_SPINNING);
  ASSERT_STATUS(cli, sensim_create_lidar(cli, &s, &c), SENSIM_INVALID_ARGUMENT, "lidar.spinning");
  c.spinning.nchannels = 2;
  ASSERT_STATUS(cli, sensim_create_lidar(cli, &s, &c), SENSIM_INVALID_ARGUMENT,
                "cfg.spinning.channel_elevations");
  double elev[2] = {0, 0.1};
  c.spinning.channel_elevations = elev;
  c.spinning.columns = 0;
  ASSERT_STATUS(cli, sensim_create_lidar(cli, &s, &c), SENSIM_INVALID_ARGUMENT,
                "lidar.spinning.columns");
  c.spinning.columns = 10;
  c.pattern = (sensim_lidar_pattern_t)0;
  ASSERT_STATUS(cli, sensim_create_lidar(cli, &s, &c), SENSIM_INVALID_ARGUMENT, "cfg.pattern");
  c.pattern = SENSIM_PATTERN_SPINNING;
  const char* fields[2] = {"x", NULL};
  c.fields = fields;
  c.nfields = 2;
  ASSERT_STATUS(cli, sensim_create_lidar(cli, &s, &c), SENSIM_INVALID_ARGUMENT, "cfg.fields[1]");
  fields[1] = "y";
  c.layout = SENSIM_LAYOUT_XYZI;
  ASSERT_STATUS(cli, sensim_create_lidar(cli, &s, &c), SENSIM_INVALID_ARGUMENT, "lidar.fields");
  c.layout = SENSIM_LAYOUT_FIELDS;
  c.nexclude_bodies = 1;
  ASSERT_STATUS(cli, sensim_create_lidar(cli, &s, &c), SENSIM_INVALID_ARGUMENT,
                "cfg.exclude_bodies");
  // counts past the daemon's bounds are refused before the arrays are read (these hold one
  // entry: the client read 2^32 - 1 of them, past their end)
  static const uint32_t one_body = 1;
  c.exclude_bodies = &one_body;
  c.nexclude_bodies = UINT32_MAX;
  ASSERT_STATUS(cli, sensim_create_lidar(cli, &s, &c), SENSIM_INVALID_ARGUMENT,
                "cfg.nexclude_bodies = 4294967295: at most 64");
  c.nexclude_bodies = 0;
  c.nfields = UINT32_MAX;
  ASSERT_STATUS(cli, sensim_create_lidar(cli, &s, &c), SENSIM_INVALID_ARGUMENT,
                "cfg.nfields = 4294967295: at most 16");
  c.fields = NULL;
  c.nfields = 0;
  c.vlp16.frequency = 50.0;
  c.pattern = SENSIM_PATTERN_VLP16;
  ASSERT_STATUS(cli, sensim_create_lidar(cli, &s, &c), SENSIM_INVALID_ARGUMENT,
                "lidar.vlp16.frequency");
  c.pattern = SENSIM_PATTERN_CUSTOM;
  c.custom.nrays = 3;
  ASSERT_STATUS(cli, sensim_create_lidar(cli, &s, &c), SENSIM_INVALID_ARGUMENT,
                "cfg.custom.azimuths");
  c.pattern = SENSIM_PATTERN_OUSTER;
  c.ouster.nbeam_altitude_angles = 64;
  ASSERT_STATUS(cli, sensim_create_lidar(cli, &s, &c), SENSIM_INVALID_ARGUMENT,
                "cfg.ouster.beam_altitude_angles");
  c.pattern = SENSIM_PATTERN_VLP16;
  c.vlp16.frequency = 10.0;
  s.body_id = 9;
  ASSERT_STATUS(cli, sensim_create_lidar(cli, &s, &c), SENSIM_NOT_FOUND, NULL);
  s.body_id = 0;
  ASSERT_STATUS(cli, sensim_create_lidar(cli, NULL, &c), SENSIM_INVALID_ARGUMENT,
                "sensor: NULL");
  ASSERT_STATUS(cli, sensim_create_lidar(cli, &s, NULL), SENSIM_INVALID_ARGUMENT, "cfg: NULL");
  ASSERT_OK_ST(cli, sensim_create_lidar(cli, &s, &c));
  ASSERT_STATUS(cli, sensim_create_lidar(cli, &s, &c), SENSIM_ALREADY_EXISTS, NULL);
  ASSERT_EQ(sensim_create_lidar(NULL, &s, &c), SENSIM_INVALID_ARGUMENT);
  sensim_client_close(cli);
  ASSERT_EQ(td_stop(&d), 0);
  return 0;
}


TEST(sensors_imu_reads_the_rotation_and_its_bias) {
  td_daemon_t d;
  ASSERT_OK(td_start(&d, NULL));
  sensim_client_t* cli = td_connect(&d, "imu");
  ASSERT_TRUE(cli != NULL);
  sensim_body_t b;
  sensim_body_init(&b);
  b.id = 1;
  ASSERT_OK_ST(cli, sensim_create_body(cli, &b));
  sensim_sensor_t s;
  sensim_sensor_init(&s);
  s.id = 1;
  s.body_id = 1;
  sensim_imu_config_t c;
  sensim_imu_config_init(&c);
  c.accelerometer.bias[0] = 0.25;
  c.accelerometer.axes = 1 | 4;  // x and z
  c.accelerometer.cross_axis = SENSIM_CROSS_AXIS_MATRIX;
  c.gyroscope.cross_axis = SENSIM_CROSS_AXIS_SCALAR;
  c.gyroscope.cross_axis_scalar = 0.0;
  c.gyroscope.range_upper[2] = 0.4;  // clamps the yaw rate
  c.lae = SENSIM_LAE_DIAGONAL;
  c.sample_rate = 1000.0;
  ASSERT_OK_ST(cli, sensim_create_imu(cli, &s, &c));

  // turning at 0.5 rad/s about z, standing still: ten samples in a 10 ms step
  uint32_t ids[1] = {1};
  double pose[7] = {0, 0, 0, 0, 0, 0, 1}, vel[6] = {0, 0, 0, 0, 0, 0.5};
  sensim_state_t state;
  sensim_state_init(&state);
  state.nbodies = 1;
  state.body_ids = ids;
  state.body_poses = pose;
  state.body_velocities = vel;
  sensim_step_t step;
  sensim_step_init(&step);
  const sensim_step_result_t* r;
  ASSERT_OK_ST(cli, sensim_update_and_step(cli, &state, &step, &r));
  state.time = step.time = 0.01;
  pose[5] = sin(0.5 * 0.01 / 2);
  pose[6] = cos(0.5 * 0.01 / 2);
  ASSERT_OK_ST(cli, sensim_update_and_step(cli, &state, &step, &r));
  ASSERT_EQ(r->noutputs, 10);
  for (uint32_t i = 0; i < r->noutputs; i++) {
    const sensim_sensor_data_t* o = &r->outputs[i];
    ASSERT_EQ(o->kind, SENSIM_PAYLOAD_IMU);
    ASSERT_NEAR(o->time, 0.001 * (i + 1), 1e-9);
    ASSERT_NEAR(o->imu.angular_velocity[2], 0.4, 1e-9);  // clamped
    ASSERT_NEAR(o->imu.acceleration[0], 0.25, 1e-9);    // the bias
    ASSERT_NEAR(o->imu.acceleration[2], 9.80665, 1e-9);
    ASSERT_EQ(o->imu.nvalues, 2 + 3);                     // accelerometer x z, gyroscope x y z
    ASSERT_NEAR(o->imu.values[1], 9.80665, 1e-9);
  }

  // refusals
  c.accelerometer.cross_axis = (sensim_cross_axis_t)3;
  s.id = 2;
  ASSERT_STATUS(cli, sensim_create_imu(cli, &s, &c), SENSIM_INVALID_ARGUMENT,
                "cfg.accelerometer.cross_axis");
  c.accelerometer.cross_axis = SENSIM_CROSS_AXIS_NONE;
  c.lae = (sensim_lae_t)4;
  ASSERT_STATUS(cli, sensim_create_imu(cli, &s, &c), SENSIM_INVALID_ARGUMENT, "cfg.lae");
  c.lae = SENSIM_LAE_MATRIX;
  c.gyroscope.cross_axis_scalar = 2.0;
  ASSERT_STATUS(cli, sensim_create_imu(cli, &s, &c), SENSIM_INVALID_ARGUMENT,
                "imu.gyroscope.chain.cross_axis_scalar");
  c.gyroscope.cross_axis_scalar = 0.0;
  c.has_magnetometer = true;
  c.magnetometer.noise_stddev[1] = -1.0;
  ASSERT_STATUS(cli, sensim_create_imu(cli, &s, &c), SENSIM_INVALID_ARGUMENT, "magnetometer");
  ASSERT_STATUS(cli, sensim_create_imu(cli, &s, NULL), SENSIM_INVALID_ARGUMENT, "cfg: NULL");
  sensim_client_close(cli);
  ASSERT_EQ(td_stop(&d), 0);
  return 0;
}


TEST(sensors_joint_sensors_follow_their_joints) {
  td_daemon_t d;
  ASSERT_OK(td_start(&d, NULL));
  sensim_client_t* cli = td_connect(&d, "joints");
  ASSERT_TRUE(cli != NULL);
  sensim_joint_t j;
  sensim_joint_init(&j);
  j.id = 1;
  ASSERT_OK_ST(cli, sensim_create_joint(cli, &j));
  sensim_sensor_t s;
  sensim_sensor_init(&s);
  sensim_encoder_config_t e;
  sensim_encoder_config_init(&e);
  e.joint_id = 1;
  s.id = 1;
  ASSERT_OK_ST(cli, sensim_create_encoder(cli, &s, &e));
  e.mode = SENSIM_ENCODER_INCREMENTAL;
  e.speed_timeout = 0.5;
  s.id = 2;
  ASSERT_OK_ST(cli, sensim_create_encoder(cli, &s, &e));
  sensim_odometer_config_t od;
  sensim_odometer_config_init(&od);
  od.joint_id = 1;
  od.wheel_radius = 0.3;
  od.pulses_per_revolution = 0;
  s.id = 3;
  ASSERT_OK_ST(cli, sensim_create_odometer(cli, &s, &od));

  // the joint turns 7 rad in a second
  uint32_t jid[1] = {1};
  double q[1] = {0.0};
  sensim_state_t state;
  sensim_state_init(&state);
  state.njoints = 1;
  state.joint_ids = jid;
  state.joint_positions = q;
  sensim_step_t step;
  sensim_step_init(&step);
  const sensim_step_result_t* r;
  ASSERT_OK_ST(cli, sensim_update_and_step(cli, &state, &step, &r));
  q[0] = 7.0;
  state.time = step.time = 1.0;
  ASSERT_OK_ST(cli, sensim_update_and_step(cli, &state, &step, &r));
  ASSERT_EQ(r->noutputs, 3);
  double got[4] = {0};
  for (uint32_t i = 0; i < 3; i++) {
    ASSERT_EQ(r->outputs[i].kind, SENSIM_PAYLOAD_SCALAR);
    got[r->outputs[i].sensor_id] = r->outputs[i].scalar.position;
  }
  ASSERT_NEAR(got[1], 7.0, 1e-12);
  ASSERT_NEAR(got[2], 7.0 - 2 * M_PI, 1e-12);  // wrapped into [0, 2 pi)
  ASSERT_NEAR(got[3], 7.0 * 0.3, 1e-12);

  e.joint_id = 9;
  s.id = 4;
  ASSERT_STATUS(cli, sensim_create_encoder(cli, &s, &e), SENSIM_NOT_FOUND, NULL);
  e.joint_id = 1;
  e.range_lower = 1.0;
  e.range_upper = 0.5;
  ASSERT_STATUS(cli, sensim_create_encoder(cli, &s, &e), SENSIM_INVALID_ARGUMENT, "range");
  od.wheel_radius = -1.0;
  ASSERT_STATUS(cli, sensim_create_odometer(cli, &s, &od), SENSIM_INVALID_ARGUMENT,
                "wheel_radius");
  ASSERT_STATUS(cli, sensim_create_encoder(cli, &s, NULL), SENSIM_INVALID_ARGUMENT, "cfg: NULL");
  ASSERT_STATUS(cli, sensim_create_odometer(cli, &s, NULL), SENSIM_INVALID_ARGUMENT, "cfg: NULL");
  sensim_client_close(cli);
  ASSERT_EQ(td_stop(&d), 0);
  return 0;
}


TEST(sensors_cone_finds_the_closest_face) {
  td_daemon_t d;
  ASSERT_OK(td_start(&d, NULL));
  sensim_client_t* cli = td_connect(&d, "cone");
  ASSERT_TRUE(cli != NULL);
  ASSERT_OK_ST(cli, td_box(cli, 1, 0.5, 0.5, 0.5, 6, 0, 0, 0));
  sensim_sensor_t s;
  sensim_sensor_init(&s);
  sensim_cone_config_t c;
  sensim_cone_config_init(&c);
  s.id = 1;
  ASSERT_OK_ST(cli, sensim_create_cone(cli, &s, &c));
  c.mode = SENSIM_CONE_LINES;
  c.lines_per_face = 50;
  s.id = 2;
  ASSERT_OK_ST(cli, sensim_create_cone(cli, &s, &c));
  c.range = 3.0;
  c.mode = SENSIM_CONE_EXACT;
  s.id = 3;
  ASSERT_OK_ST(cli, sensim_create_cone(cli, &s, &c));
  const sensim_step_result_t* r;
  ASSERT_OK_ST(cli, tick(cli, 0.0, &r));
  ASSERT_OK_ST(cli, tick(cli, 0.1, &r));
  ASSERT_EQ(r->noutputs, 3);
  for (uint32_t i = 0; i < 3; i++) {
    const sensim_sensor_data_t* o = &r->outputs[i];
    ASSERT_EQ(o->kind, SENSIM_PAYLOAD_CONE);
    if (o->sensor_id == 3) {
      ASSERT_TRUE(!o->cone.detected);  // 5.5 m away, beyond its 3 m
      continue;
    }
    // exact mode within 1e-6 m (docs/models/cone.md); lines sample the face, 50 per face
    double tol = o->sensor_id == 1 ? 1e-6 : 1e-4;
    ASSERT_TRUE(o->cone.detected);
    ASSERT_NEAR(o->cone.range, 5.5, tol);
    ASSERT_NEAR(o->cone.point[0], 5.5, tol);
    ASSERT_NEAR(o->cone.azimuth, 0.0, tol);
    ASSERT_EQ(o->cone.object_id, 1);
  }
  c.fov_horizontal = 4.0;
  s.id = 4;
  ASSERT_STATUS(cli, sensim_create_cone(cli, &s, &c), SENSIM_INVALID_ARGUMENT, "fov_horizontal");
  c.fov_horizontal = 0.5;
  c.mode = (sensim_cone_mode_t)7;
  ASSERT_STATUS(cli, sensim_create_cone(cli, &s, &c), SENSIM_INVALID_ARGUMENT, "cone.mode");
  ASSERT_STATUS(cli, sensim_create_cone(cli, &s, NULL), SENSIM_INVALID_ARGUMENT, "cfg: NULL");
  sensim_client_close(cli);
  ASSERT_EQ(td_stop(&d), 0);
  return 0;
}
