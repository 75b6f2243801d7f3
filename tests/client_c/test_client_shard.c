// SPDX-License-Identifier: MIT
// test_client_shard.c: sensors sharded over three real sensimd through sensim/shard.h: six
// noisy lidars and two noisy IMUs give byte-identical records to the same scenario on one
// daemon with the same seed (listed outputs and split raycasts too); placement by hash agrees
// with the Python client's; a killed shard is named within the timeout; a restarted shard is
// rebuilt under sensim_shards_focus; bad arguments are refused before any shard changes.
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sensim/shard.h>

#include "support.h"

#define NLIDAR 6
#define NIMU 2
#define ROOM 20.0

static const uint32_t k_lidars[NLIDAR] = {11, 12, 13, 14, 15, 16};
static const uint32_t k_imus[NIMU] = {21, 22};
// sensor -> shard: two lidars on each shard, the IMUs on shards 0 and 1
static const uint32_t k_place[NLIDAR + NIMU] = {0, 1, 2, 0, 1, 2, 0, 1};


// The scenario through either a client or the shards (one of them NULL): a room (sphere), a
// box, a moving body with six lidars and two IMUs, all with noise; seed 7.
static sensim_status_t build(sensim_client_t* c, sensim_shards_t* s) {
#define DO(call_c, call_s)                                   \
  do {                                                       \
    sensim_status_t st_ = c ? (call_c) : (call_s);           \
    if (st_ != SENSIM_OK) {                                  \
      fprintf(stderr, "# %s: %s\n", #call_c,                 \
              c ? sensim_client_last_error(c) : sensim_shards_last_error(s)); \
      return st_;                                            \
    }                                                        \
  } while (0)
  sensim_environment_t env;
  sensim_environment_init(&env);
  env.set_seed = true;
  env.seed = 7;
  DO(sensim_set_environment(c, &env), sensim_shards_set_environment(s, &env));
  sensim_ambient_t amb;
  sensim_ambient_init(&amb);
  amb.return_probability_scaling = 0.0;
  DO(sensim_set_ambient(c, &amb), sensim_shards_set_ambient(s, &amb));
  sensim_primitive_t p;
  sensim_primitive_init(&p);
  p.id = 1;
  p.shape = SENSIM_SHAPE_SPHERE;
  p.radius = ROOM;
  DO(sensim_create_primitive(c, &p), sensim_shards_create_primitive(s, &p));
  p.id = 2;
  p.shape = SENSIM_SHAPE_BOX;
  p.half_extents[0] = 1.0;
  p.half_extents[1] = 2.0;
  p.half_extents[2] = 0.5;
  DO(sensim_create_primitive(c, &p), sensim_shards_create_primitive(s, &p));
  sensim_object_t o;
  sensim_object_init(&o);
  o.id = 1;
  o.geometry_id = 1;
  DO(sensim_create_object(c, &o), sensim_shards_create_object(s, &o));
  o.id = 2;
  o.geometry_id = 2;
  o.label = 9;
  o.local_pose.position[0] = 4.0;
  DO(sensim_create_object(c, &o), sensim_shards_create_object(s, &o));
  sensim_body_t b;
  sensim_body_init(&b);
  b.id = 1;
  b.pose.position[2] = 1.0;
  DO(sensim_create_body(c, &b), sensim_shards_create_body(s, &b));

  double elev[8];
  for (int i = 0; i < 8; i++) {
    elev[i] = -0.3 + 0.04 * i;
  }
  for (int k = 0; k < NLIDAR; k++) {
    sensim_sensor_t sen;
    sensim_sensor_init(&sen);
    sen.id = k_lidars[k];
    sen.body_id = 1;
    double yaw = k * M_PI / 3;
    sen.mount.position[0] = 0.1 * k;
    sen.mount.position[2] = 0.2;
    sen.mount.orientation[2] = sin(yaw / 2);
    sen.mount.orientation[3] = cos(yaw / 2);
    sensim_lidar_config_t cfg;
    sensim_lidar_config_init(&cfg, SENSIM_PATTERN_SPINNING);
    cfg.spinning.frequency = 10.0;
    cfg.spinning.columns = 128;
    cfg.spinning.channel_elevations = elev;
    cfg.spinning.nchannels = 8;
    cfg.distance_noise.stddev_base = 0.02;
    cfg.frame = SENSIM_FRAME_WORLD;
    DO(sensim_create_lidar(c, &sen, &cfg), sensim_shards_create_lidar(s, &sen, &cfg));
  }
  for (int k = 0; k < NIMU; k++) {
    sensim_sensor_t sen;
    sensim_sensor_init(&sen);
    sen.id = k_imus[k];
    sen.body_id = 1;
    sensim_imu_config_t cfg;
    sensim_imu_config_init(&cfg);
    for (int a = 0; a < 3; a++) {
      cfg.accelerometer.noise_stddev[a] = 0.1;
      cfg.gyroscope.noise_stddev[a] = 0.01;
    }
    DO(sensim_create_imu(c, &sen, &cfg), sensim_shards_create_imu(s, &sen, &cfg));
  }
  return SENSIM_OK;
#undef DO
}


// The body's state at t: moving along x and turning.
static void state_at(double t, sensim_pose_t* pose, double vel[6], sensim_state_t* st,
                     const uint32_t* id) {
  double yaw = 0.5 * t;
  *pose = sensim_pose_identity();
  pose->position[0] = 0.5 * t;
  pose->position[1] = 0.2 * t;
  pose->position[2] = 1.0;
  pose->orientation[2] = sin(yaw / 2);
  pose->orientation[3] = cos(yaw / 2);
  double v[6] = {0.5, 0.2, 0.0, 0.0, 0.0, 0.5};
  memcpy(vel, v, sizeof(v));
  sensim_state_init(st);
  st->time = t;
  st->nbodies = 1;
  st->body_ids = id;
  st->body_poses = pose->position;
  st->body_velocities = vel;
}


// A record's identity and content as bytes comparable across runs.
static bool same_record(const sensim_sensor_data_t* a, const sensim_sensor_data_t* b) {
  if (a->sensor_id != b->sensor_id || a->frame != b->frame || a->time != b->time ||
      a->kind != b->kind) {
    return false;
  }
  if (a->kind == SENSIM_PAYLOAD_POINT_CLOUD) {
    return a->point_cloud.count == b->point_cloud.count &&
           a->point_cloud.size == b->point_cloud.size &&
           memcmp(a->point_cloud.data, b->point_cloud.data, a->point_cloud.size) == 0;
  }
  return a->kind == SENSIM_PAYLOAD_IMU &&
         memcmp(a->imu.acceleration, b->imu.acceleration, sizeof(a->imu.acceleration)) == 0 &&
         memcmp(a->imu.angular_velocity, b->imu.angular_velocity,
                sizeof(a->imu.angular_velocity)) == 0;
}


// One tick on both; checks the records agree (for every sensor, or those off shard `skip`).
// separate: the state and the step as two calls (sensim_shards_update_state, whose body is
// encoded once for every shard, then sensim_shards_step), else one update-and-step.
// Returns the number of records compared, or -1.
static int tick_both_as(sensim_client_t* c, sensim_shards_t* s, double t,
                        const sensim_step_t* step, int skip, bool separate) {
  static const uint32_t id = 1;
  sensim_pose_t pose;
  double vel[6];
  sensim_state_t st;
  state_at(t, &pose, vel, &st, &id);
  const sensim_step_result_t *want, *got;
  if (sensim_update_and_step(c, &st, step, &want) != SENSIM_OK) {
    fprintf(stderr, "# one daemon: %s\n", sensim_client_last_error(c));
    return -1;
  }
  if (separate && sensim_shards_update_state(s, &st) != SENSIM_OK) {
    fprintf(stderr, "# shards' state: %s\n", sensim_shards_last_error(s));
    return -1;
  }
  if ((separate ? sensim_shards_step(s, step, &got)
                : sensim_shards_update_and_step(s, &st, step, &got)) != SENSIM_OK) {
    fprintf(stderr, "# shards: %s\n", sensim_shards_last_error(s));
    return -1;
  }
  if (want->step != got->step || want->time != got->time) {
    fprintf(stderr, "# step %llu at %g, shards %llu at %g\n", (unsigned long long)want->step,
            want->time, (unsigned long long)got->step, got->time);
    return -1;
  }
  uint32_t j = 0, compared = 0;
  for (uint32_t i = 0; i < want->noutputs; i++) {
    const sensim_sensor_data_t* w = &want->outputs[i];
    if (skip >= 0 && sensim_shards_owner(s, w->sensor_id) == (uint32_t)skip) {
      continue;
    }
    while (j < got->noutputs && skip >= 0 &&
           sensim_shards_owner(s, got->outputs[j].sensor_id) == (uint32_t)skip) {
      j++;
    }
    if (j >= got->noutputs || !same_record(w, &got->outputs[j])) {
      fprintf(stderr, "# t %g: record %u (sensor %u frame %llu) differs\n", t, i, w->sensor_id,
              (unsigned long long)w->frame);
      return -1;
    }
    j++;
    compared++;
  }
  if (skip < 0 && got->noutputs != want->noutputs) {
    fprintf(stderr, "# t %g: %u records, one daemon %u\n", t, got->noutputs, want->noutputs);
    return -1;
  }
  return (int)compared;
}

static int tick_both(sensim_client_t* c, sensim_shards_t* s, double t, const sensim_step_t* step,
                     int skip) {
  return tick_both_as(c, s, t, step, skip, false);
}


static sensim_shards_t* connect3(td_daemon_t d[3], int timeout_ms) {
  char a[3][32];
  const char* addr[3];
  for (int i = 0; i < 3; i++) {
    snprintf(a[i], sizeof(a[i]), "127.0.0.1:%d", d[i].port);
    addr[i] = a[i];
  }
  sensim_options_t opts;
  sensim_options_init(&opts);
  opts.timeout_ms = timeout_ms;
  sensim_shards_t* s = NULL;
  if (sensim_shards_connect(addr, 3, &opts, &s) != SENSIM_OK) {
    fprintf(stderr, "# connect: %s\n", s ? sensim_shards_last_error(s) : "no memory");
    sensim_shards_close(s);
    return NULL;
  }
  for (int k = 0; k < NLIDAR + NIMU; k++) {
    uint32_t id = k < NLIDAR ? k_lidars[k] : k_imus[k - NLIDAR];
    if (sensim_shards_place(s, id, k_place[k]) != SENSIM_OK) {
      sensim_shards_close(s);
      return NULL;
    }
  }
  return s;
}


TEST(shard_three_daemons_give_the_records_of_one) {
  td_daemon_t one, d[3];
  ASSERT_OK(td_start(&one, NULL));
  for (int i = 0; i < 3; i++) {
    ASSERT_OK(td_start(&d[i], NULL));
  }
  sensim_client_t* c = td_connect(&one, "default");
  ASSERT_TRUE(c != NULL);
  sensim_shards_t* s = connect3(d, 10000);
  ASSERT_TRUE(s != NULL);
  ASSERT_OK_ST(c, build(c, NULL));
  ASSERT_EQ(build(NULL, s), SENSIM_OK);

  // each daemon holds the scene and only its own sensors
  for (uint32_t i = 0; i < 3; i++) {
    const sensim_info_t* info;
    ASSERT_OK_ST(sensim_shards_client(s, i), sensim_get_info(sensim_shards_client(s, i), &info));
    ASSERT_EQ(info->nenvironments, 1u);
    ASSERT_EQ(info->environments[0].objects, 2u);
    ASSERT_EQ(info->environments[0].sensors, i < 2 ? 3u : 2u);
  }

  sensim_step_t all;
  sensim_step_init(&all);
  int compared = 0;
  for (int k = 0; k <= 6; k++) {
    all.time = 0.05 * k;
    int n = tick_both(c, s, all.time, &all, -1);
    ASSERT_TRUE(n >= 0);
    compared += n;
  }
  ASSERT_TRUE(compared >= 6 + 2 * 7);   // every lidar's revolution and every IMU sample

  // listed outputs: each shard asked for its own
  const uint32_t pick[4] = {16, 21, 11, 14};
  sensim_step_t listed;
  sensim_step_init(&listed);
  listed.outputs = SENSIM_STEP_OUTPUTS_LISTED;
  listed.output_sensors = pick;
  listed.noutput_sensors = 4;
  for (int k = 7; k <= 9; k++) {
    listed.time = 0.05 * k;
    ASSERT_TRUE(tick_both(c, s, listed.time, &listed, -1) >= 0);
  }

  // the state on its own, its body encoded once and framed for each shard, then the step
  compared = 0;
  for (int k = 10; k <= 13; k++) {
    all.time = 0.05 * k;
    int n = tick_both_as(c, s, all.time, &all, -1, true);
    ASSERT_TRUE(n >= 0);
    compared += n;
  }
  ASSERT_TRUE(compared >= 2 * 4);       // at least the IMUs' samples, which see the velocities

  // raycasts split across the shards: the hits of one daemon, byte for byte
  enum { N = 20000 };
  double* org = malloc(3 * N * sizeof(double));
  double* dir = malloc(3 * N * sizeof(double));
  sensim_hit_t* h1 = malloc(N * sizeof(sensim_hit_t));
  sensim_hit_t* h3 = malloc(N * sizeof(sensim_hit_t));
  ASSERT_TRUE(org && dir && h1 && h3);
  srand(3);
  for (int i = 0; i < 3 * N; i++) {
    org[i] = 4.0 * rand() / RAND_MAX - 2.0;
    dir[i] = 2.0 * rand() / RAND_MAX - 1.0 + 1e-3;
  }
  sensim_raycast_t r;
  sensim_raycast_init(&r);
  r.nrays = N;
  r.origins = org;
  r.directions = dir;
  ASSERT_OK_ST(c, sensim_raycast(c, &r, h1, NULL));
  ASSERT_EQ(sensim_shards_raycast(s, &r, h3), SENSIM_OK);
  ASSERT_TRUE(memcmp(h1, h3, N * sizeof(sensim_hit_t)) == 0);
  int box = 0;
  for (int i = 0; i < N; i++) {
    ASSERT_TRUE(isfinite(h3[i].distance));
    box += h3[i].label == 9;
  }
  ASSERT_TRUE(box > 0);
  r.nrays = 10;                         // a small one goes whole to one shard
  ASSERT_EQ(sensim_shards_raycast(s, &r, h3), SENSIM_OK);
  ASSERT_TRUE(memcmp(h1, h3, 10 * sizeof(sensim_hit_t)) == 0);

  // one origin for every ray, split across the shards: the hits of that origin per ray
  for (int i = 0; i < N; i++) {
    memcpy(org + 3 * i, org, 3 * sizeof(double));
  }
  r.nrays = N;
  ASSERT_OK_ST(c, sensim_raycast(c, &r, h1, NULL));
  r.origin = org;
  r.origins = NULL;
  memset(h3, 0, N * sizeof(sensim_hit_t));
  ASSERT_EQ(sensim_shards_raycast(s, &r, h3), SENSIM_OK);
  ASSERT_TRUE(memcmp(h1, h3, N * sizeof(sensim_hit_t)) == 0);
  free(org);
  free(dir);
  free(h1);
  free(h3);

  sensim_shards_close(s);
  sensim_client_close(c);
  ASSERT_EQ(td_stop(&one), 0);
  for (int i = 0; i < 3; i++) {
    ASSERT_EQ(td_stop(&d[i]), 0);
  }
  return 0;
}


TEST(shard_subscriptions_come_from_the_owning_shards) {
  td_daemon_t d[3];
  for (int i = 0; i < 3; i++) {
    ASSERT_OK(td_start(&d[i], NULL));
  }
  sensim_shards_t* s = connect3(d, 10000);
  ASSERT_TRUE(s != NULL);
  ASSERT_EQ(build(NULL, s), SENSIM_OK);
  for (int k = 0; k < NLIDAR + NIMU; k++) {
    sensim_subscription_t sub;
    sensim_subscription_init(&sub);
    sub.sensor_id = k < NLIDAR ? k_lidars[k] : k_imus[k - NLIDAR];
    ASSERT_EQ(sensim_shards_subscribe(s, &sub), SENSIM_OK);
  }
  // the records of two steps (sensor, frame, size), then the same pushed by the shards
  enum { MAXREC = 64 };
  uint64_t want[MAXREC], got[MAXREC];
  uint32_t nwant = 0, ngot = 0;
  static const uint32_t id = 1;
  for (int k = 0; k <= 2; k++) {
    sensim_pose_t pose;
    double vel[6];
    sensim_state_t st;
    state_at(0.05 * k, &pose, vel, &st, &id);
    sensim_step_t step;
    sensim_step_init(&step);
    step.time = 0.05 * k;
    const sensim_step_result_t* res;
    ASSERT_EQ(sensim_shards_update_and_step(s, &st, &step, &res), SENSIM_OK);
    for (uint32_t i = 0; i < res->noutputs && nwant < MAXREC; i++) {
      const sensim_sensor_data_t* r = &res->outputs[i];
      want[nwant++] = (uint64_t)r->sensor_id << 48 ^ r->frame << 32 ^ r->point_cloud.size;
    }
  }
  ASSERT_TRUE(nwant >= NLIDAR + 3 * NIMU);
  while (ngot < nwant) {
    const sensim_sensor_data_t* r;
    sensim_status_t st = sensim_shards_next_sensor_data(s, 30000, &r);
    if (st != SENSIM_OK) {
      CHECK_FAIL("after %u of %u records: %s", ngot, nwant, sensim_shards_last_error(s));
    }
    got[ngot++] = (uint64_t)r->sensor_id << 48 ^ r->frame << 32 ^ r->point_cloud.size;
  }
  const sensim_sensor_data_t* none;
  ASSERT_EQ(sensim_shards_next_sensor_data(s, 200, &none), SENSIM_EAGAIN);
  for (uint32_t i = 0; i < nwant; i++) {
    bool found = false;
    for (uint32_t j = 0; j < ngot && !found; j++) {
      found = got[j] == want[i];
    }
    if (!found) {
      CHECK_FAIL("record %u (sensor %u) was not pushed", i, (unsigned)(want[i] >> 48));
    }
  }
  sensim_shards_close(s);
  for (int i = 0; i < 3; i++) {
    ASSERT_EQ(td_stop(&d[i]), 0);
  }
  return 0;
}


TEST(shard_hash_placement_is_the_python_clients) {
  // sensim.shard_for(i, 3) for i = 1..16, and for 5 shards at a few ids (client-python)
  static const uint32_t three[16] = {0, 0, 1, 2, 2, 0, 1, 0, 2, 2, 0, 1, 2, 1, 1, 2};
  for (uint32_t i = 1; i <= 16; i++) {
    ASSERT_EQ(sensim_shard_for(i, 3), three[i - 1]);
  }
  ASSERT_EQ(sensim_shard_for(1, 5), 3u);
  ASSERT_EQ(sensim_shard_for(100, 5), 3u);
  ASSERT_EQ(sensim_shard_for(4000000000u, 5), 2u);
  ASSERT_EQ(sensim_shard_for(12345, 5), 2u);
  // consistent: from 3 to 4 shards a sensor stays or moves to the new shard, about a quarter
  uint32_t moved = 0;
  for (uint32_t i = 1; i <= 20000; i++) {
    uint32_t a = sensim_shard_for(i, 3), b = sensim_shard_for(i, 4);
    ASSERT_TRUE(a == b || b == 3);
    moved += a != b;
  }
  ASSERT_TRUE(moved > 4600 && moved < 5400);
  return 0;
}


// Three daemons started, connected (timeout_ms) and given the scenario; NULL on a failure
// (the reason printed), then no daemon is left running.
static sensim_shards_t* start_built3(td_daemon_t d[3], int timeout_ms) {
  int started = 0;
  while (started < 3 && td_start(&d[started], NULL) == 0) {
    started++;
  }
  sensim_shards_t* s = started == 3 ? connect3(d, timeout_ms) : NULL;
  if (s && build(NULL, s) != SENSIM_OK) {
    sensim_shards_close(s);
    s = NULL;
  }
  for (int i = 0; !s && i < started; i++) {
    td_kill(&d[i]);
  }
  if (!s) {
    fprintf(stderr, "# three daemons with the scenario: %d started, not built\n", started);
  }
  return s;
}


// The last error names shard i of d first and lists the shards that accepted the request.
static bool names_failed_shard(sensim_shards_t* s, const td_daemon_t d[3], int i,
                               const char* accepted) {
  char want[64];
  snprintf(want, sizeof(want), "shard %d (127.0.0.1:%d): ", i, d[i].port);
  const char* err = sensim_shards_last_error(s);
  if (strncmp(err, want, strlen(want)) == 0 && td_names(err, accepted)) {
    return true;
  }
  fprintf(stderr, "# last error \"%s\" does not name %sfirst, then %s\n", err, want, accepted);
  return false;
}


// UpdateState of body 1 at time t (state_at) through the shards.
static sensim_status_t update_at(sensim_shards_t* s, double t) {
  static const uint32_t id = 1;
  sensim_pose_t pose;
  double vel[6];
  sensim_state_t st;
  state_at(t, &pose, vel, &st, &id);
  return sensim_shards_update_state(s, &st);
}


TEST(shard_killed_is_named_within_the_timeout) {
  td_daemon_t d[3];
  sensim_shards_t* s = start_built3(d, 3000);
  ASSERT_TRUE(s != NULL);
  static const uint32_t id = 1;
  sensim_pose_t pose;
  double vel[6];
  sensim_state_t st;
  sensim_step_t step;
  sensim_step_init(&step);
  const sensim_step_result_t* res;
  state_at(0.0, &pose, vel, &st, &id);
  ASSERT_EQ(sensim_shards_update_and_step(s, &st, &step, &res), SENSIM_OK);
  td_kill(&d[1]);
  state_at(0.05, &pose, vel, &st, &id);
  step.time = 0.05;
  double t0 = td_now_ms();
  sensim_status_t got = sensim_shards_update_and_step(s, &st, &step, &res);
  ASSERT_TRUE(td_now_ms() - t0 < 3000.0);
  ASSERT_TRUE(got == SENSIM_ECLOSED || got == SENSIM_EIO);
  ASSERT_TRUE(names_failed_shard(s, d, 1, "(shards 0, 2 accepted it)"));
  ASSERT_EQ(sensim_shards_failed(s), 1);
  // the others go on answering
  ASSERT_OK_ST(sensim_shards_client(s, 2), sensim_ping(sensim_shards_client(s, 2), "x", 1, NULL));
  sensim_shards_close(s);
  ASSERT_EQ(td_stop(&d[0]), 0);
  ASSERT_EQ(td_stop(&d[2]), 0);
  return 0;
}


TEST(shard_frozen_times_out_once_for_all_shards) {
  td_daemon_t d[3];
  sensim_shards_t* s = start_built3(d, 2000);
  ASSERT_TRUE(s != NULL);
  kill(d[0].pid, SIGSTOP);
  kill(d[2].pid, SIGSTOP);
  double t0 = td_now_ms();
  ASSERT_EQ(update_at(s, 0.0), SENSIM_ETIMEDOUT);
  double waited = td_now_ms() - t0;
  // one deadline for the fan-out, not one timeout per frozen shard
  ASSERT_TRUE(waited >= 1990.0 && waited < 4000.0);
  char want[96];
  snprintf(want, sizeof(want), "shard 0 (127.0.0.1:%d): ETIMEDOUT", d[0].port);
  ASSERT_TRUE(strncmp(sensim_shards_last_error(s), want, strlen(want)) == 0);
  snprintf(want, sizeof(want), "; also shard 2 (127.0.0.1:%d): ETIMEDOUT", d[2].port);
  ASSERT_TRUE(td_names(sensim_shards_last_error(s), want));
  ASSERT_EQ(sensim_shards_failed(s), 0);
  // the frozen shards' connections are closed, as a client's own timeout closes it
  ASSERT_EQ(sensim_client_fd(sensim_shards_client(s, 0)), -1);
  ASSERT_TRUE(sensim_client_fd(sensim_shards_client(s, 1)) >= 0);
  kill(d[0].pid, SIGCONT);
  kill(d[2].pid, SIGCONT);
  sensim_shards_close(s);
  for (int i = 0; i < 3; i++) {
    ASSERT_EQ(td_stop(&d[i]), 0);
  }
  return 0;
}


// A state's replies are read shard by shard, the last shard sent first: the replies of the
// others, which come meanwhile, are still collected, and a shard whose daemon was killed is
// named as soon as the shard read first has answered, not at the deadline. Shard 2 (read
// first) is frozen for 300 ms; shard 0's daemon is killed before the call.
TEST(shard_state_replies_read_in_any_order) {
  td_daemon_t d[3];
  sensim_shards_t* s = start_built3(d, 10000);
  ASSERT_TRUE(s != NULL);
  ASSERT_EQ(update_at(s, 0.0), SENSIM_OK);
  td_kill(&d[0]);
  kill(d[2].pid, SIGSTOP);
  pid_t thaw = fork();
  ASSERT_TRUE(thaw >= 0);
  if (thaw == 0) {
    struct timespec nap = {.tv_sec = 0, .tv_nsec = 300 * 1000 * 1000};
    nanosleep(&nap, NULL);
    kill(d[2].pid, SIGCONT);
    _exit(0);
  }
  double t0 = td_now_ms();
  sensim_status_t got = update_at(s, 0.05);
  double waited = td_now_ms() - t0;
  int status = 0;
  ASSERT_EQ(waitpid(thaw, &status, 0), thaw);
  kill(d[2].pid, SIGCONT);
  ASSERT_TRUE(got == SENSIM_ECLOSED || got == SENSIM_EIO);
  // the frozen shard held the call; the deadline (10 s) did not
  ASSERT_TRUE(waited >= 250.0 && waited < 5000.0);
  ASSERT_TRUE(names_failed_shard(s, d, 0, "(shards 1, 2 accepted it)"));
  ASSERT_EQ(sensim_shards_failed(s), 0);
  sensim_shards_close(s);
  ASSERT_EQ(td_stop(&d[1]), 0);
  ASSERT_EQ(td_stop(&d[2]), 0);
  return 0;
}


// CPU seconds this thread has run.
static double thread_cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}


// Nonblocking handles whose daemons are frozen: an UpdateState larger than the sockets take
// (400,000 bodies, 24 MB) leaves most of each request in its handle's output queue, and the
// fan-out waits for the sockets to take more (POLLOUT) or a reply to come (POLLIN) asleep in
// poll: this thread's CPU time is a small part of the wait (a loop around poll that does not
// sleep would take all of it), and the wait ends at the one deadline.
TEST(shard_frozen_nonblocking_waits_asleep) {
  td_daemon_t d[3];
  char a[3][32];
  const char* addr[3];
  for (int i = 0; i < 3; i++) {
    ASSERT_OK(td_start(&d[i], NULL));
    snprintf(a[i], sizeof(a[i]), "127.0.0.1:%d", d[i].port);
    addr[i] = a[i];
  }
  sensim_options_t opts;
  sensim_options_init(&opts);
  opts.timeout_ms = 3000;
  opts.nonblocking = true;
  sensim_shards_t* s = NULL;
  ASSERT_EQ(sensim_shards_connect(addr, 3, &opts, &s), SENSIM_OK);
  enum { NB = 400000 };
  uint32_t* ids = malloc(NB * sizeof(uint32_t));
  sensim_pose_t* poses = malloc(NB * sizeof(sensim_pose_t));
  ASSERT_TRUE(ids && poses);
  for (uint32_t i = 0; i < NB; i++) {
    ids[i] = i + 1;
    poses[i] = sensim_pose_identity();
  }
  sensim_state_t st;
  sensim_state_init(&st);
  st.nbodies = NB;
  st.body_ids = ids;
  st.body_poses = poses[0].position;
  for (int i = 0; i < 3; i++) {
    kill(d[i].pid, SIGSTOP);
  }
  double t0 = td_now_ms(), c0 = thread_cpu_s();
  ASSERT_EQ(sensim_shards_update_state(s, &st), SENSIM_ETIMEDOUT);
  double waited = td_now_ms() - t0, cpu = 1e3 * (thread_cpu_s() - c0);
  fprintf(stderr, "# frozen nonblocking fan-out: waited %.0f ms, %.0f ms of CPU\n", waited, cpu);
  // asleep, the CPU is the copies into the output queues (24 MB each, some 50 ms here); a
  // loop that does not sleep would take the whole wait, or its share of a busy host's cores
  ASSERT_TRUE(waited >= 2990.0);
  ASSERT_TRUE(cpu < 0.1 * waited);
  for (int i = 0; i < 3; i++) {
    kill(d[i].pid, SIGCONT);
  }
  free(ids);
  free(poses);
  sensim_shards_close(s);
  for (int i = 0; i < 3; i++) {
    ASSERT_EQ(td_stop(&d[i]), 0);
  }
  return 0;
}


TEST(shard_restarted_is_rebuilt_under_focus) {
  td_daemon_t one, d[3];
  ASSERT_OK(td_start(&one, NULL));
  for (int i = 0; i < 3; i++) {
    ASSERT_OK(td_start(&d[i], NULL));
  }
  sensim_client_t* c = td_connect(&one, "default");
  ASSERT_TRUE(c != NULL);
  sensim_shards_t* s = connect3(d, 10000);
  ASSERT_TRUE(s != NULL);
  ASSERT_OK_ST(c, build(c, NULL));
  ASSERT_EQ(build(NULL, s), SENSIM_OK);
  sensim_step_t all;
  sensim_step_init(&all);
  for (int k = 0; k <= 3; k++) {
    all.time = 0.05 * k;
    ASSERT_TRUE(tick_both(c, s, all.time, &all, -1) >= 0);
  }

  // shard 2 restarts on its port; the user rebuilds it: scene code again, last state
  char port[32];
  snprintf(port, sizeof(port), "127.0.0.1:%d", d[2].port);
  td_kill(&d[2]);
  const char* same[] = {"--listen", port, NULL};
  ASSERT_OK(td_start(&d[2], same));
  ASSERT_EQ(sensim_shards_reconnect(s, 2, NULL), SENSIM_OK);
  ASSERT_EQ(sensim_shards_focus(s, 2), SENSIM_OK);
  const sensim_step_result_t* res;
  ASSERT_EQ(sensim_shards_step(s, &all, &res), SENSIM_INVALID_ARGUMENT);
  ASSERT_TRUE(td_names(sensim_shards_last_error(s), "focused on shard 2"));
  ASSERT_EQ(build(NULL, s), SENSIM_OK);
  static const uint32_t id = 1;
  sensim_pose_t pose;
  double vel[6];
  sensim_state_t st;
  state_at(0.15, &pose, vel, &st, &id);
  ASSERT_EQ(sensim_shards_update_state(s, &st), SENSIM_OK);
  ASSERT_EQ(sensim_shards_focus(s, -1), SENSIM_OK);
  const sensim_info_t* info;
  ASSERT_OK_ST(sensim_shards_client(s, 2), sensim_get_info(sensim_shards_client(s, 2), &info));
  ASSERT_EQ(info->environments[0].sensors, 2u);      // lidars 13 and 16 only
  ASSERT_EQ(info->environments[0].objects, 2u);

  // the other shards' records stay one daemon's; the rebuilt shard's lidars see the room
  int seen = 0;
  for (int k = 4; k <= 7; k++) {
    all.time = 0.05 * k;
    ASSERT_TRUE(tick_both(c, s, all.time, &all, 2) >= 0);
  }
  static const uint32_t idv = 1;
  for (int k = 8; k <= 9; k++) {       // a revolution of the rebuilt lidars ends in these
    all.time = 0.05 * k;
    state_at(all.time, &pose, vel, &st, &idv);
    ASSERT_EQ(sensim_shards_update_and_step(s, &st, &all, &res), SENSIM_OK);
    for (uint32_t i = 0; i < res->noutputs; i++) {
      const sensim_sensor_data_t* r = &res->outputs[i];
      if (r->sensor_id != 13 && r->sensor_id != 16) {
        continue;
      }
      const sensim_point_cloud_t* pc = &r->point_cloud;
      ASSERT_TRUE(pc->count > 100);
      float* xyz = malloc((size_t)pc->count * pc->point_step);
      ASSERT_TRUE(xyz != NULL);
      ASSERT_EQ(sensim_point_cloud_read(pc, xyz, (size_t)pc->count * pc->point_step), SENSIM_OK);
      uint32_t on_room = 0;
      for (uint32_t p = 0; p < pc->count; p++) {
        const float* q = (const float*)((const uint8_t*)xyz + (size_t)p * pc->point_step);
        double radius = sqrt((double)q[0] * q[0] + (double)q[1] * q[1] + (double)q[2] * q[2]);
        ASSERT_TRUE(radius < ROOM + 0.2);
        on_room += fabs(radius - ROOM) < 0.2;
      }
      ASSERT_TRUE(on_room > pc->count / 2);
      free(xyz);
      seen++;
    }
  }
  ASSERT_EQ(seen, 2);
  sensim_shards_close(s);
  sensim_client_close(c);
  ASSERT_EQ(td_stop(&one), 0);
  for (int i = 0; i < 3; i++) {
    ASSERT_EQ(td_stop(&d[i]), 0);
  }
  return 0;
}


TEST(shard_bad_arguments_change_nothing) {
  td_daemon_t d[3];
  for (int i = 0; i < 3; i++) {
    ASSERT_OK(td_start(&d[i], NULL));
  }
  const char* bad[] = {"127.0.0.1:7700", "127.0.0.1:notaport"};
  sensim_shards_t* s = NULL;
  ASSERT_EQ(sensim_shards_connect(bad, 2, NULL, &s), SENSIM_INVALID_ARGUMENT);
  ASSERT_TRUE(td_names(sensim_shards_last_error(s), "addresses[1]: address \"127.0.0.1:notaport\""));
  // description structs of another size are refused as sensim_client's calls refuse them (the
  // options were read in part, or not at all, without a word)
  sensim_options_t opts;
  sensim_options_init(&opts);
  opts.struct_size = 8;
  sensim_shards_t* sized = NULL;
  ASSERT_EQ(sensim_shards_connect(bad, 1, &opts, &sized), SENSIM_INVALID_ARGUMENT);
  ASSERT_TRUE(td_names(sensim_shards_last_error(sized), "options.struct_size = 8"));
  sensim_shards_close(sized);
  // the handle of a failed connect has no shard: a sensor's removal read shard 0's client from
  // an array never allocated (a crash), a raycast divided by the count of shards (SIGFPE), and
  // a mesh went nowhere and returned OK. Every call says it is closed.
  ASSERT_EQ(sensim_shards_remove(s, SENSIM_ENTITY_SENSOR, 5), SENSIM_ECLOSED);
  ASSERT_TRUE(td_names(sensim_shards_last_error(s), "no shard is connected"));
  double o[3] = {0.0, 0.0, 0.0}, dir[3] = {1.0, 0.0, 0.0};
  sensim_hit_t hit;
  sensim_raycast_t r;
  sensim_raycast_init(&r);
  r.nrays = 1;
  r.origins = o;
  r.directions = dir;
  ASSERT_EQ(sensim_shards_raycast(s, &r, &hit), SENSIM_ECLOSED);
  sensim_mesh_t mesh;
  sensim_mesh_init(&mesh);
  ASSERT_EQ(sensim_shards_create_mesh(s, &mesh), SENSIM_ECLOSED);
  sensim_subscription_t sub;
  sensim_subscription_init(&sub);
  sub.sensor_id = 5;
  ASSERT_EQ(sensim_shards_subscribe(s, &sub), SENSIM_ECLOSED);
  const sensim_sensor_data_t* data;
  ASSERT_EQ(sensim_shards_next_sensor_data(s, 0, &data), SENSIM_ECLOSED);
  ASSERT_EQ(sensim_shards_failed(s), -1);
  sensim_shards_close(s);

  s = connect3(d, 10000);
  ASSERT_TRUE(s != NULL);
  ASSERT_EQ(sensim_shards_place(s, 5, 3), SENSIM_INVALID_ARGUMENT);
  ASSERT_TRUE(td_names(sensim_shards_last_error(s), "shard: 3 is not a shard index in [0, 3)"));
  sensim_primitive_t p;
  sensim_primitive_init(&p);
  p.id = 1;
  p.shape = (sensim_shape_t)99;
  ASSERT_EQ(sensim_shards_create_primitive(s, &p), SENSIM_INVALID_ARGUMENT);
  ASSERT_TRUE(td_names(sensim_shards_last_error(s), "prim.shape = 99"));
  ASSERT_EQ(sensim_shards_failed(s), -1);
  ASSERT_EQ(build(NULL, s), SENSIM_OK);

  static const uint32_t id = 1;
  sensim_pose_t pose;
  double vel[6];
  sensim_state_t st;
  state_at(0.0, &pose, vel, &st, &id);
  sensim_step_t step;
  sensim_step_init(&step);
  const sensim_step_result_t* res;
  ASSERT_EQ(sensim_shards_update_and_step(s, &st, &step, &res), SENSIM_OK);
  sensim_step_t short_step = step;
  short_step.struct_size = 4;
  ASSERT_EQ(sensim_shards_step(s, &short_step, &res), SENSIM_INVALID_ARGUMENT);
  ASSERT_TRUE(td_names(sensim_shards_last_error(s), "step.struct_size = 4"));
  sensim_raycast_t short_rays;
  sensim_raycast_init(&short_rays);
  short_rays.struct_size = 4;
  sensim_hit_t no_hit;
  ASSERT_EQ(sensim_shards_raycast(s, &short_rays, &no_hit), SENSIM_INVALID_ARGUMENT);
  ASSERT_TRUE(td_names(sensim_shards_last_error(s), "rays.struct_size = 4"));
  const uint32_t unknown[2] = {21, 99}, twice[2] = {13, 13};
  step.outputs = SENSIM_STEP_OUTPUTS_LISTED;
  step.output_sensors = unknown;
  step.noutput_sensors = 2;
  step.time = 0.05;
  state_at(0.05, &pose, vel, &st, &id);
  ASSERT_EQ(sensim_shards_update_and_step(s, &st, &step, &res), SENSIM_INVALID_ARGUMENT);
  ASSERT_TRUE(td_names(sensim_shards_last_error(s), "step.output_sensors[1] = 99 is not a sensor"));
  step.output_sensors = twice;
  ASSERT_EQ(sensim_shards_update_and_step(s, &st, &step, &res), SENSIM_INVALID_ARGUMENT);
  ASSERT_TRUE(td_names(sensim_shards_last_error(s), "step.output_sensors[1] = 13 is repeated"));
  // more ids than sensors: refused before they are read (the array holds two)
  step.noutput_sensors = UINT32_MAX;
  ASSERT_EQ(sensim_shards_update_and_step(s, &st, &step, &res), SENSIM_INVALID_ARGUMENT);
  ASSERT_TRUE(td_names(sensim_shards_last_error(s), "step.noutput_sensors = 4294967295: more"));
  step.noutput_sensors = 2;
  // a step the handle refuses after the state was queued for shard 0: the state goes with it
  step.outputs = (sensim_step_outputs_t)7;
  ASSERT_EQ(sensim_shards_update_and_step(s, &st, &step, &res), SENSIM_INVALID_ARGUMENT);
  ASSERT_TRUE(td_names(sensim_shards_last_error(s), "step.outputs = 7"));
  ASSERT_EQ(sensim_shards_failed(s), -1);
  step.outputs = SENSIM_STEP_OUTPUTS_LISTED;
  // nothing moved: the same tick goes through now
  step.output_sensors = twice;
  step.noutput_sensors = 1;
  ASSERT_EQ(sensim_shards_update_and_step(s, &st, &step, &res), SENSIM_OK);
  ASSERT_EQ(res->step, 2u);
  ASSERT_TRUE(res->noutputs <= 1);
  for (uint32_t i = 0; i < res->noutputs; i++) {
    ASSERT_EQ(res->outputs[i].sensor_id, 13u);
  }
  sensim_shards_close(s);
  for (int i = 0; i < 3; i++) {
    ASSERT_EQ(td_stop(&d[i]), 0);
  }
  return 0;
}
