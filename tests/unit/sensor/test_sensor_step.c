// SPDX-License-Identifier: MIT
// The path from env_step to the sensors: a test-only sensor records the step view it receives
// (interval, body and joint states at both ends, fields, rigid mount) and emits one scalar
// record; failures make the step all or nothing; sensors pin their body and joint.
#include <stdlib.h>

#include "base/mem.h"
#include "check.h"
#include "world/env.h"

typedef struct probe {
  int steps;              // step calls
  int commits;            // commit calls
  int fail_next;          // make the next step fail
  uint32_t cloud_points;  // also emit a cloud of this many 16-byte points
  int* destroyed;         // set when destroyed
  step_view_t seen;       // the last view (pointers not kept)
  view_body_t body;       // body 10 as seen
  view_joint_t joint;     // joint 20 as seen
  int found_body, found_joint;
  pose_t mount_mid;       // the mounted frame at s = 0.5
  double field[3];        // magnetic field at the origin
} probe_t;

static int probe_step(void* self, const sensor_ctx_t* ctx, const step_view_t* v, sensor_out_t* out,
                      err_msg_t* msg) {
  probe_t* p = self;
  p->steps++;
  sensor_record_t* r = sensor_out_push(out, ctx->id, SENSOR_REC_SCALAR);
  if (!r) {
    return err_set(msg, ERR_NOMEM, "no memory");
  }
  r->time = v->t1;
  r->u.scalar.position = (double)ctx->id;
  if (p->cloud_points) {
    sensor_record_t* c = sensor_out_push(out, ctx->id, SENSOR_REC_CLOUD);
    if (!c) {
      return err_set(msg, ERR_NOMEM, "no memory");
    }
    c->u.cloud.point_step = 16;
    int rc = sensor_cloud_alloc(&c->u.cloud, p->cloud_points, msg);
    if (rc) {
      return rc;
    }
  }
  if (p->fail_next) {
    p->fail_next = 0;
    return err_set(msg, ERR_STATE, "probe %u failed on purpose", ctx->id);
  }
  p->seen = *v;
  const view_body_t* b = view_find_body(v, 10);
  p->found_body = b != NULL;
  if (b) {
    p->body = *b;
  }
  const view_joint_t* j = view_find_joint(v, 20);
  p->found_joint = j != NULL;
  if (j) {
    p->joint = *j;
  }
  p->mount_mid = view_mount_pose(view_find_body(v, ctx->body_id), &ctx->mount, 0.5);
  field_magnetic_at(&v->magnetic, (double[3]){0, 0, 0}, p->field);
  return 0;
}

static void probe_commit(void* self) { ((probe_t*)self)->commits++; }

static void probe_destroy(void* self) {
  probe_t* p = self;
  if (p->destroyed) {
    *p->destroyed = 1;
  }
}

static const sensor_ops_t probe_ops = {
    .kind_name = "probe", .step = probe_step, .commit = probe_commit, .destroy = probe_destroy};

typedef struct world {
  scene_device_t* dev;
  env_t* e;
} world_t;

static int world_open_limited(world_t* w, const env_limits_t* limits) {
  err_msg_t msg;
  w->dev = scene_device_create(&msg);
  w->e = w->dev ? env_create("sensors", limits, w->dev, NULL, &msg) : NULL;
  if (!w->e) {
    fprintf(stderr, "# %s\n", msg.text);
    return 1;
  }
  body_desc_t body = {.id = 10, .pose = xform_identity()};
  joint_desc_t joint = {.id = 20, .type = JOINT_TYPE_REVOLUTE, .position = 0.25};
  if (env_create_body(w->e, &body, &msg) || env_create_joint(w->e, &joint, &msg)) {
    fprintf(stderr, "# %s\n", msg.text);
    return 1;
  }
  return 0;
}

static int world_open(world_t* w) { return world_open_limited(w, NULL); }

static void world_close(world_t* w) {
  env_destroy(w->e);
  scene_device_destroy(w->dev);
}

static int add_probe(env_t* e, uint32_t id, uint32_t body, uint32_t joint, pose_t mount,
                     probe_t* p, err_msg_t* msg) {
  sensor_desc_t d = {.id = id, .body_id = body, .mount = mount,
                     .sensor = {.kind = SENSOR_TEST, .ops = &probe_ops, .self = p,
                                .joint_id = joint}};
  return env_create_sensor(e, &d, msg);
}

// Body 10 turns 90 degrees about z and moves +x by 2 between t = 1 and t = 3; joint 20 goes
// from 0.25 to 1.5; velocities sent at t = 3 only.
static int move(env_t* e) {
  err_msg_t msg;
  uint32_t ids[1] = {10};
  double pose0[7] = {0, 0, 0, 0, 0, 0, 1};
  uint32_t jids[1] = {20};
  double j0[1] = {0.25};
  env_state_update_t u0 = {.time = 1, .nbody = 1, .body_ids = ids, .body_poses = pose0,
                           .njoint = 1, .joint_ids = jids, .joint_positions = j0};
  if (env_update_state(e, &u0, &msg) || env_step(e, 1, &msg)) {
    fprintf(stderr, "# %s\n", msg.text);
    return 1;
  }
  const double h = sqrt(0.5);
  double pose1[7] = {2, 0, 0, 0, 0, h, h};
  double vel1[6] = {1, 0, 0, 0, 0, M_PI / 4};
  double j1[1] = {1.5};
  env_state_update_t u1 = {.time = 3, .nbody = 1, .body_ids = ids, .body_poses = pose1,
                           .body_velocities = vel1, .njoint = 1, .joint_ids = jids,
                           .joint_positions = j1};
  if (env_update_state(e, &u1, &msg)) {
    fprintf(stderr, "# %s\n", msg.text);
    return 1;
  }
  return 0;
}

TEST(view_holds_both_ends_of_the_step) {
  world_t w;
  ASSERT_OK(world_open(&w));
  err_msg_t msg;
  probe_t p = {0};
  env_settings_t set = {.has_magnetic_field = 1, .magnetic_field = {1e-5, 2e-5, -4e-5}};
  ASSERT_OK(env_set_settings(w.e, &set, &msg));
  pose_t mount = xform_identity();
  mount.p[0] = 1.0;
  ASSERT_OK(add_probe(w.e, 7, 10, 20, mount, &p, &msg));
  ASSERT_OK(move(w.e));
  ASSERT_OK(env_step(w.e, 3, &msg));
  ASSERT_EQ(p.steps, 2);
  ASSERT_EQ(p.commits, 2);
  ASSERT_NEAR(p.seen.t0, 1, 0);
  ASSERT_NEAR(p.seen.t1, 3, 0);
  ASSERT_EQ(p.seen.step, 2);
  ASSERT_TRUE(p.found_body && p.found_joint);
  // body 10: at rest at the origin at t = 1 (velocities from creation), turned at t = 3
  ASSERT_NEAR(p.body.at[0].pose.p[0], 0, 0);
  ASSERT_NEAR(p.body.at[1].pose.p[0], 2, 0);
  ASSERT_NEAR(p.body.at[1].pose.q[3], sqrt(0.5), 1e-15);
  ASSERT_TRUE(p.body.at[1].has_velocity);
  ASSERT_NEAR(p.body.at[1].linear_velocity[0], 1, 0);
  ASSERT_NEAR(p.body.at[1].angular_velocity[2], M_PI / 4, 0);
  ASSERT_NEAR(p.body.at[0].linear_velocity[0], 0, 0);
  ASSERT_EQ(p.body.at[0].has_velocity, 0);  // the state at t = 1 came without velocities
  ASSERT_NEAR(p.joint.position[0], 0.25, 0);
  ASSERT_NEAR(p.joint.position[1], 1.5, 0);
  // the mount 1 m along the body's x rides rigidly: at mid-step the body is at x = 1 turned by
  // 45 degrees, so the mount is at (1 + cos 45, sin 45, 0) -- on the arc, not the chord
  ASSERT_NEAR(p.mount_mid.p[0], 1 + sqrt(0.5), 1e-12);
  ASSERT_NEAR(p.mount_mid.p[1], sqrt(0.5), 1e-12);
  ASSERT_NEAR(p.field[2], -4e-5, 0);
  ASSERT_NEAR(p.seen.gravity[2], -9.80665, 0);
  // one record, the probe's
  const sensor_out_t* out = env_outputs(w.e);
  ASSERT_EQ(out->n, 1);
  ASSERT_EQ(out->rec[0].sensor_id, 7);
  ASSERT_NEAR(out->rec[0].time, 3, 0);
  world_close(&w);
  return 0;
}

TEST(records_in_id_order_and_failures_are_all_or_nothing) {
  world_t w;
  ASSERT_OK(world_open(&w));
  err_msg_t msg;
  probe_t a = {0}, b = {0}, c = {0};
  pose_t id = xform_identity();
  ASSERT_OK(add_probe(w.e, 30, 0, 0, id, &c, &msg));
  ASSERT_OK(add_probe(w.e, 5, 10, 0, id, &a, &msg));
  ASSERT_OK(add_probe(w.e, 12, 0, 20, id, &b, &msg));
  ASSERT_OK(move(w.e));
  const sensor_out_t* out = env_outputs(w.e);
  ASSERT_EQ(out->n, 3);
  ASSERT_EQ(out->rec[0].sensor_id, 5);
  ASSERT_EQ(out->rec[1].sensor_id, 12);
  ASSERT_EQ(out->rec[2].sensor_id, 30);

  // the middle sensor fails: no record kept, nobody commits, time does not advance
  b.fail_next = 1;
  int commits = a.commits;
  ASSERT_EQ(env_step(w.e, 3, &msg), ERR_STATE);
  ASSERT_CONTAINS(msg.text, "probe 12 failed");
  ASSERT_EQ(env_outputs(w.e)->n, 0);
  ASSERT_EQ(a.commits, commits);
  ASSERT_EQ(c.commits, commits);
  env_time_t t;
  env_get_time(w.e, &t);
  ASSERT_EQ(t.steps, 1);
  ASSERT_NEAR(t.t_prev, 1, 0);

  // the same step again succeeds
  ASSERT_OK(env_step(w.e, 3, &msg));
  ASSERT_EQ(env_outputs(w.e)->n, 3);
  ASSERT_EQ(a.commits, commits + 1);
  env_info_t info;
  env_get_info(w.e, &info);
  ASSERT_EQ(info.sensors, 3);
  world_close(&w);
  return 0;
}

TEST(sensors_pin_their_body_and_joint_and_are_removed_cleanly) {
  world_t w;
  ASSERT_OK(world_open(&w));
  err_msg_t msg;
  int destroyed = 0;
  probe_t p = {.destroyed = &destroyed};
  pose_t id = xform_identity();

  // refused: unknown body, unknown joint, zero quaternion, id 0, duplicate id; nothing changes
  ASSERT_EQ(add_probe(w.e, 1, 99, 0, id, &p, &msg), ERR_NOTFOUND);
  ASSERT_CONTAINS(msg.text, "body_id = 99");
  ASSERT_EQ(add_probe(w.e, 1, 10, 98, id, &p, &msg), ERR_NOTFOUND);
  ASSERT_CONTAINS(msg.text, "probe.joint_id = 98");
  pose_t zero = id;
  zero.q[0] = 0;
  ASSERT_EQ(add_probe(w.e, 1, 10, 0, zero, &p, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "mount.orientation");
  pose_t far = id;
  far.p[1] = NAN;
  ASSERT_EQ(add_probe(w.e, 1, 10, 0, far, &p, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "mount.position.y");
  ASSERT_EQ(add_probe(w.e, 0, 10, 0, id, &p, &msg), ERR_INVAL);
  env_info_t info;
  env_get_info(w.e, &info);
  ASSERT_EQ(info.sensors, 0);

  ASSERT_OK(add_probe(w.e, 1, 10, 20, id, &p, &msg));
  ASSERT_EQ(add_probe(w.e, 1, 10, 20, id, &p, &msg), ERR_EXISTS);
  ASSERT_EQ(env_remove(w.e, ENV_ENTITY_BODY, 10, &msg), ERR_STATE);
  ASSERT_CONTAINS(msg.text, "sensor");
  ASSERT_EQ(env_remove(w.e, ENV_ENTITY_JOINT, 20, &msg), ERR_STATE);
  ASSERT_CONTAINS(msg.text, "sensor");
  ASSERT_EQ(destroyed, 0);
  ASSERT_OK(env_remove(w.e, ENV_ENTITY_SENSOR, 1, &msg));
  ASSERT_EQ(destroyed, 1);
  ASSERT_EQ(env_remove(w.e, ENV_ENTITY_SENSOR, 1, &msg), ERR_NOTFOUND);
  ASSERT_OK(env_remove(w.e, ENV_ENTITY_JOINT, 20, &msg));
  ASSERT_OK(env_remove(w.e, ENV_ENTITY_BODY, 10, &msg));

  // a sensor still present at destruction is destroyed with the environment
  destroyed = 0;
  ASSERT_OK(add_probe(w.e, 2, 0, 0, id, &p, &msg));
  world_close(&w);
  ASSERT_EQ(destroyed, 1);
  return 0;
}

TEST(outputs_over_the_limit_refuse_the_step_whole) {
  // the limit is per sensor: two sensors of 97024 bytes each step together (their records
  // travel in parts), one of 112000 bytes refuses the step, whole
  env_limits_t lim = env_default_limits();
  lim.max_output_bytes = 100000;
  world_t w;
  ASSERT_OK(world_open_limited(&w, &lim));
  err_msg_t msg;
  probe_t small = {.cloud_points = 6000}, big = {.cloud_points = 6000};  // 96000 + 2 x 512
  pose_t id = xform_identity();
  ASSERT_OK(add_probe(w.e, 1, 0, 0, id, &small, &msg));
  ASSERT_OK(add_probe(w.e, 2, 0, 0, id, &big, &msg));
  ASSERT_OK(move(w.e));  // steps once at t = 1: 2 x 97024 bytes
  ASSERT_EQ(env_outputs(w.e)->n, 4);
  big.cloud_points = 7000;  // 112000 bytes: over
  int commits = small.commits;
  ASSERT_EQ(env_step(w.e, 3, &msg), ERR_LIMIT);
  ASSERT_CONTAINS(msg.text, "max_output_bytes = 100000");
  ASSERT_CONTAINS(msg.text, "sensor 2");
  ASSERT_EQ(small.commits, commits);
  ASSERT_EQ(env_outputs(w.e)->n, 0);
  env_time_t t;
  env_get_time(w.e, &t);
  ASSERT_EQ(t.steps, 1);
  big.cloud_points = 10;
  ASSERT_OK(env_step(w.e, 3, &msg));
  world_close(&w);
  return 0;
}

static int always(void* ctx) {
  (void)ctx;
  return 1;
}

TEST(a_cancelled_step_changes_nothing_and_each_sensor_has_the_whole_budget) {
  world_t w;
  ASSERT_OK(world_open(&w));
  err_msg_t msg;
  probe_t a = {0}, b = {.cloud_points = 100};
  pose_t id = xform_identity();
  ASSERT_OK(add_probe(w.e, 1, 0, 0, id, &b, &msg));
  ASSERT_OK(add_probe(w.e, 2, 0, 0, id, &a, &msg));
  ASSERT_OK(move(w.e));
  // the budget is per sensor: the second one's is not less the first one's records
  ASSERT_EQ(a.seen.output_budget, env_default_limits().max_output_bytes);
  ASSERT_EQ(b.seen.output_budget, env_default_limits().max_output_bytes);
  int commits = a.commits;
  ASSERT_EQ(env_step_cancellable(w.e, 3, always, NULL, &msg), ERR_STATE);
  ASSERT_CONTAINS(msg.text, "cancelled");
  ASSERT_EQ(a.commits, commits);
  env_time_t t;
  env_get_time(w.e, &t);
  ASSERT_EQ(t.steps, 1);
  ASSERT_OK(env_step_cancellable(w.e, 3, NULL, NULL, &msg));
  world_close(&w);
  return 0;
}

TEST(state_times_are_bounded) {
  world_t w;
  ASSERT_OK(world_open(&w));
  err_msg_t msg;
  env_state_update_t u = {.time = 2e9};
  ASSERT_EQ(env_update_state(w.e, &u, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "time = 2e+09");
  u.time = -1e9;
  ASSERT_OK(env_update_state(w.e, &u, &msg));
  world_close(&w);
  return 0;
}
