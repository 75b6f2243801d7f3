// SPDX-License-Identifier: MIT
// test_client_streams.c: subscriptions through the C client against the real sensimd: every
// encoding decodes to the step's own cloud (lossless ones bit for bit, the quantized one within
// its stated error), chosen fields, sequences, the end of a stream, the handle's bounded queue,
// records arriving during other calls, and every refusal.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

#define LIDAR 5


static float f32(const uint8_t* p) {
  float v;
  memcpy(&v, p, 4);
  return v;
}


// A room (a big box seen from inside, a ball) and a spinning lidar at its centre publishing
// a revolution (8 x 360 rays) per 0.1 s, with intensity, ring and distance.
static sensim_status_t room(sensim_client_t* cli) {
  sensim_status_t st = td_box(cli, 1, 20, 15, 5, 0, 0, 0, 1);
  if (st != SENSIM_OK || (st = td_sphere(cli, 2, 1.0, 5, 3, 0, 2)) != SENSIM_OK) {
    return st;
  }
  static const double elev[8] = {-0.3, -0.2, -0.1, 0.0, 0.05, 0.1, 0.2, 0.3};
  static const char* const fields[6] = {"x", "y", "z", "intensity", "ring", "distance"};
  sensim_lidar_config_t c;
  sensim_lidar_config_init(&c, SENSIM_PATTERN_SPINNING);
  c.spinning.channel_elevations = elev;
  c.spinning.nchannels = 8;
  c.spinning.columns = 360;
  c.fields = fields;
  c.nfields = 6;
  c.distance_noise.stddev_base = 0.002;
  sensim_sensor_t s;
  sensim_sensor_init(&s);
  s.id = LIDAR;
  return sensim_create_lidar(cli, &s, &c);
}


static sensim_status_t tick(sensim_client_t* cli, double t, const sensim_step_result_t** r) {
  sensim_state_t state;
  sensim_state_init(&state);
  state.time = t;
  sensim_step_t step;
  sensim_step_init(&step);
  step.time = t;
  return sensim_update_and_step(cli, &state, &step, r);
}


static sensim_client_t* observer(const td_daemon_t* d, const char* env, uint32_t max_frames) {
  sensim_options_t o;
  sensim_options_init(&o);
  o.environment = env;
  o.role = SENSIM_ROLE_OBSERVER;
  if (max_frames) {
    o.pushed_max_frames = max_frames;
  }
  return td_connect_opts(d, &o);
}


TEST(streams_every_encoding_decodes_to_the_steps_cloud) {
  td_daemon_t d;
  ASSERT_OK(td_start(&d, NULL));
  sensim_client_t* ctl = td_connect(&d, "encodings");
  ASSERT_TRUE(ctl != NULL);
  ASSERT_OK_ST(ctl, room(ctl));
  sensim_client_t* obs[3];
  sensim_encoding_t enc[3] = {SENSIM_ENCODING_RAW, SENSIM_ENCODING_ZSTD,
                              SENSIM_ENCODING_QUANTIZED_ZSTD};
  for (int k = 0; k < 3; k++) {
    obs[k] = observer(&d, "encodings", 0);
    ASSERT_TRUE(obs[k] != NULL);
    sensim_subscription_t sub;
    sensim_subscription_init(&sub);
    sub.sensor_id = LIDAR;
    sub.encoding = enc[k];
    sub.precision = 0.002;
    sub.level = 3;
    ASSERT_OK_ST(obs[k], sensim_subscribe(obs[k], &sub));
  }

  // the step's own cloud (raw), copied before the next call
  const sensim_step_result_t* r;
  ASSERT_OK_ST(ctl, tick(ctl, 0.0, &r));
  ASSERT_OK_ST(ctl, tick(ctl, 0.1, &r));
  ASSERT_EQ(r->noutputs, 1);
  const sensim_point_cloud_t* sc = &r->outputs[0].point_cloud;
  ASSERT_EQ(sc->encoding, SENSIM_ENCODING_RAW);
  uint32_t n = sc->count, step = sc->point_step;
  ASSERT_TRUE(n > 2000);
  size_t bytes = (size_t)n * step;
  uint8_t* truth = malloc(bytes);
  uint8_t* got = malloc(bytes);
  ASSERT_TRUE(truth && got);
  ASSERT_OK_ST(ctl, sensim_point_cloud_read(sc, truth, bytes));
  ASSERT_EQ(sensim_point_cloud_read(sc, truth, bytes - 1), SENSIM_INVALID_ARGUMENT);
  uint32_t dist_off = sensim_point_cloud_field(sc, "distance")->offset;

  for (int k = 0; k < 3; k++) {
    const sensim_sensor_data_t* dd;
    ASSERT_OK_ST(obs[k], sensim_next_sensor_data(obs[k], 10000, &dd));
    ASSERT_EQ(dd->sensor_id, LIDAR);
    ASSERT_EQ(dd->sequence, 1);
    ASSERT_EQ(dd->kind, SENSIM_PAYLOAD_POINT_CLOUD);
    ASSERT_NEAR(dd->time, 0.1, 0);
    const sensim_point_cloud_t* c = &dd->point_cloud;
    ASSERT_EQ(c->encoding, enc[k]);
    ASSERT_EQ(c->count, n);
    ASSERT_EQ(c->point_step, step);
    ASSERT_TRUE(c->complete);
    memset(got, 0, bytes);
    ASSERT_OK_ST(obs[k], sensim_point_cloud_read(c, got, bytes));
    if (k < 2) {
      ASSERT_MEM_EQ(got, truth, bytes);
      ASSERT_DEQ(c->max_error, 0.0);
      continue;
    }

    // quantized: positions within the stated error (itself within the precision), every
    // other byte of every point exact
    ASSERT_NEAR(c->precision, 0.002, 0);
    ASSERT_TRUE(c->max_error > 0 && c->max_error <= 0.002);
    double worst = 0;
    for (uint32_t i = 0; i < n; i++) {
      const uint8_t* a = truth + (size_t)i * step;
      const uint8_t* b = got + (size_t)i * step;
      double dx = f32(a) - f32(b), dy = f32(a + 4) - f32(b + 4), dz = f32(a + 8) - f32(b + 8);
      worst = fmax(worst, sqrt(dx * dx + dy * dy + dz * dz));
      ASSERT_MEM_EQ(a + 12, b + 12, step - 12);
    }
    ASSERT_TRUE(worst <= c->max_error * (1 + 1e-6) + 1e-7);
    ASSERT_TRUE(dist_off >= 12);
  }
  free(truth);
  free(got);
  for (int k = 0; k < 3; k++) {
    sensim_client_close(obs[k]);
  }
  sensim_client_close(ctl);
  ASSERT_EQ(td_stop(&d), 0);
  return 0;
}


TEST(streams_fields_sequences_and_the_end_of_a_stream) {
  td_daemon_t d;
  ASSERT_OK(td_start(&d, NULL));
  sensim_client_t* ctl = td_connect(&d, "fields");
  ASSERT_TRUE(ctl != NULL);
  ASSERT_OK_ST(ctl, room(ctl));
  sensim_client_t* obs = observer(&d, "fields", 0);
  ASSERT_TRUE(obs != NULL);
  const char* want[3] = {"ring", "z", "x"};
  sensim_subscription_t sub;
  sensim_subscription_init(&sub);
  sub.sensor_id = LIDAR;
  sub.fields = want;
  sub.nfields = 3;
  ASSERT_OK_ST(obs, sensim_subscribe(obs, &sub));
  const sensim_step_result_t* r;
  ASSERT_OK_ST(ctl, tick(ctl, 0.0, &r));
  for (uint64_t seq = 1; seq <= 3; seq++) {
    // one revolution at a time: a record with chosen fields waits for the daemon's encoder
    // threads, which drop the oldest waiting one when the steps outrun them (docs/streams.md)
    ASSERT_OK_ST(ctl, tick(ctl, 0.1 * (double)seq, &r));
    const sensim_sensor_data_t* dd;
    ASSERT_OK_ST(obs, sensim_next_sensor_data(obs, 10000, &dd));
    ASSERT_EQ(dd->sequence, seq);
    ASSERT_EQ(dd->frame, seq - 1);
    const sensim_point_cloud_t* c = &dd->point_cloud;
    ASSERT_EQ(c->nfields, 3);
    ASSERT_STREQ(c->fields[0].name, "ring");
    ASSERT_STREQ(c->fields[1].name, "z");
    ASSERT_STREQ(c->fields[2].name, "x");
    ASSERT_EQ(c->fields[1].offset, 4);  // ring uint16 at 0, z at the next multiple of 4
    ASSERT_EQ(c->point_step, 12);
  }

  // removing the sensor ends the stream with a last record without payload
  ASSERT_OK_ST(ctl, sensim_remove(ctl, SENSIM_ENTITY_SENSOR, LIDAR));
  const sensim_sensor_data_t* dd;
  ASSERT_OK_ST(obs, sensim_next_sensor_data(obs, 10000, &dd));
  ASSERT_TRUE(dd->end_of_stream);
  ASSERT_EQ(dd->kind, SENSIM_PAYLOAD_NONE);
  ASSERT_EQ(dd->sequence, 4);
  ASSERT_STATUS(obs, sensim_next_sensor_data(obs, 50, &dd), SENSIM_EAGAIN, "no sensor data");
  ASSERT_STATUS(obs, sensim_unsubscribe(obs, LIDAR), SENSIM_NOT_FOUND, NULL);
  sensim_client_close(obs);
  sensim_client_close(ctl);
  ASSERT_EQ(td_stop(&d), 0);
  return 0;
}


TEST(streams_queue_keeps_the_newest_and_counts_the_dropped) {
  td_daemon_t d;
  ASSERT_OK(td_start(&d, NULL));
  sensim_client_t* ctl = td_connect(&d, "queue");
  ASSERT_TRUE(ctl != NULL);
  sensim_sensor_t s;
  sensim_sensor_init(&s);
  s.id = 3;
  sensim_cone_config_t cone;
  sensim_cone_config_init(&cone);
  ASSERT_OK_ST(ctl, sensim_create_cone(ctl, &s, &cone));

  // this connection subscribes to its own cone: records arrive while its steps are awaited
  sensim_client_t* obs = observer(&d, "queue", 2);
  ASSERT_TRUE(obs != NULL);
  sensim_subscription_t sub;
  sensim_subscription_init(&sub);
  sub.sensor_id = 3;
  ASSERT_OK_ST(obs, sensim_subscribe(obs, &sub));
  ASSERT_OK_ST(ctl, sensim_subscribe(ctl, &sub));
  const sensim_step_result_t* r;
  for (int k = 0; k < 5; k++) {
    ASSERT_OK_ST(ctl, tick(ctl, 0.1 * k, &r));
  }
  // the observer takes in what arrives without handing anything out: the queue keeps the two
  // newest whatever the arrival times
  for (int k = 0;
       k < 500 && sensim_client_pushed_queued(obs) + sensim_client_pushed_dropped(obs) < 5; k++) {
    ASSERT_OK_ST(obs, sensim_client_pump(obs, 10));
  }
  ASSERT_EQ(sensim_client_pushed_queued(obs), 2);
  const sensim_sensor_data_t* dd;
  ASSERT_OK_ST(obs, sensim_next_sensor_data(obs, 0, &dd));
  ASSERT_EQ(dd->sequence, 4);
  ASSERT_EQ(dd->kind, SENSIM_PAYLOAD_CONE);
  ASSERT_OK_ST(obs, sensim_next_sensor_data(obs, 0, &dd));
  ASSERT_EQ(dd->sequence, 5);
  ASSERT_STATUS(obs, sensim_next_sensor_data(obs, 0, &dd), SENSIM_EAGAIN, NULL);
  ASSERT_EQ(sensim_client_pushed_dropped(obs), 3);

  // the controller's own subscription: the records came during its steps (or come now)
  for (uint64_t seq = 1; seq <= 5; seq++) {
    ASSERT_OK_ST(ctl, sensim_next_sensor_data(ctl, 5000, &dd));
    ASSERT_EQ(dd->sequence, seq);
  }
  ASSERT_EQ(sensim_client_pushed_queued(ctl), 0);
  ASSERT_EQ(sensim_client_pushed_dropped(ctl), 0);
  ASSERT_OK_ST(ctl, sensim_unsubscribe(ctl, 3));
  ASSERT_OK_ST(ctl, tick(ctl, 1.0, &r));
  ASSERT_STATUS(ctl, sensim_next_sensor_data(ctl, 100, &dd), SENSIM_EAGAIN, NULL);
  sensim_client_close(obs);
  sensim_client_close(ctl);
  ASSERT_EQ(td_stop(&d), 0);
  return 0;
}


TEST(streams_refusals_name_the_argument_or_field) {
  td_daemon_t d;
  ASSERT_OK(td_start(&d, NULL));
  sensim_client_t* cli = td_connect(&d, "stream_refusals");
  ASSERT_TRUE(cli != NULL);
  ASSERT_OK_ST(cli, room(cli));
  sensim_subscription_t sub;
  sensim_subscription_init(&sub);
  sub.sensor_id = 77;
  ASSERT_STATUS(cli, sensim_subscribe(cli, &sub), SENSIM_NOT_FOUND, NULL);
  ASSERT_STATUS(cli, sensim_subscribe(cli, NULL), SENSIM_INVALID_ARGUMENT, "sub: NULL");
  sub.sensor_id = LIDAR;
  sub.nfields = 2;
  ASSERT_STATUS(cli, sensim_subscribe(cli, &sub), SENSIM_INVALID_ARGUMENT, "sub.fields");
  const char* f[2] = {"x", NULL};
  sub.fields = f;
  ASSERT_STATUS(cli, sensim_subscribe(cli, &sub), SENSIM_INVALID_ARGUMENT, "sub.fields[1]");
  sub.nfields = 0;
  // a precision out of [1e-6, 1] m is the caller's mistake whatever the encoding: refused
  // before sending, naming the member and its range
  const double bad_precision[] = {5.0, 0.0, -1e-3, NAN, INFINITY};
  const sensim_encoding_t encodings[] = {SENSIM_ENCODING_RAW, SENSIM_ENCODING_ZSTD,
                                         SENSIM_ENCODING_QUANTIZED_ZSTD};
  for (size_t e = 0; e < 3; e++) {
    for (size_t k = 0; k < sizeof(bad_precision) / sizeof(bad_precision[0]); k++) {
      sub.encoding = encodings[e];
      sub.precision = bad_precision[k];
      ASSERT_STATUS(cli, sensim_subscribe(cli, &sub), SENSIM_INVALID_ARGUMENT,
                    "must be in [1e-06, 1] m");
      ASSERT_TRUE(strstr(sensim_client_last_error(cli), "sub.precision = ") != NULL);
    }
  }
  sub.encoding = SENSIM_ENCODING_QUANTIZED_ZSTD;
  sub.precision = 0.001;
  // a level or an encoding the daemon would refuse: refused before sending (the daemon's own
  // refusals are tested in tests/python/test_streams.py, below the Python client's checks)
  sub.level = 40;
  ASSERT_STATUS(cli, sensim_subscribe(cli, &sub), SENSIM_INVALID_ARGUMENT,
                "sub.level = 40 must be in [1, 19]");
  sub.level = -1;
  ASSERT_STATUS(cli, sensim_subscribe(cli, &sub), SENSIM_INVALID_ARGUMENT, "sub.level = -1");
  sub.level = 1;
  sub.encoding = (sensim_encoding_t)9;
  ASSERT_STATUS(cli, sensim_subscribe(cli, &sub), SENSIM_INVALID_ARGUMENT,
                "sub.encoding = 9 is unknown (RAW 0, ZSTD 1, QUANTIZED_ZSTD 2)");
  sub.encoding = (sensim_encoding_t)-1;
  ASSERT_STATUS(cli, sensim_subscribe(cli, &sub), SENSIM_INVALID_ARGUMENT,
                "sub.encoding = -1 is unknown");
  sub.encoding = SENSIM_ENCODING_RAW;
  // a count past the daemon's 16 names is refused before the array is read (it holds one)
  static const char* const one_field[1] = {"x"};
  sub.fields = one_field;
  sub.nfields = UINT32_MAX;
  ASSERT_STATUS(cli, sensim_subscribe(cli, &sub), SENSIM_INVALID_ARGUMENT,
                "sub.nfields = 4294967295: at most 16");
  sub.fields = NULL;
  sub.nfields = 0;
  ASSERT_OK_ST(cli, sensim_subscribe(cli, &sub));
  ASSERT_STATUS(cli, sensim_subscribe(cli, &sub), SENSIM_ALREADY_EXISTS, NULL);
  const sensim_sensor_data_t* dd;
  ASSERT_STATUS(cli, sensim_next_sensor_data(cli, 0, NULL), SENSIM_INVALID_ARGUMENT, "out");
  double t0 = td_now_ms();
  ASSERT_STATUS(cli, sensim_next_sensor_data(cli, 200, &dd), SENSIM_EAGAIN, "200 ms");
  ASSERT_TRUE(td_now_ms() - t0 >= 199.0);
  ASSERT_EQ(sensim_subscribe(NULL, &sub), SENSIM_INVALID_ARGUMENT);
  ASSERT_EQ(sensim_unsubscribe(NULL, 1), SENSIM_INVALID_ARGUMENT);
  ASSERT_EQ(sensim_next_sensor_data(NULL, 0, &dd), SENSIM_INVALID_ARGUMENT);
  ASSERT_EQ(sensim_client_pushed_dropped(NULL), 0);
  ASSERT_EQ(sensim_client_pushed_queued(NULL), 0);
  ASSERT_EQ(sensim_point_cloud_read(NULL, NULL, 0), SENSIM_INVALID_ARGUMENT);
  ASSERT_TRUE(sensim_point_cloud_field(NULL, "x") == NULL);
  sensim_client_close(cli);
  ASSERT_EQ(td_stop(&d), 0);
  return 0;
}
