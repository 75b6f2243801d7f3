// SPDX-License-Identifier: MIT
// bench_step.c: what a step costs as the world grows but the motion does not, in this process.
//
// Two environments, one with 10 bodies and one with 1000, in each of which only body 1 moves
// and carries an IMU (accelerometer, gyroscope, magnetometer: one sample per step). A timed
// step is the whole env_update_state (body 1's new pose) + env_step; rounds alternate between
// the two environments so that both see the same load. Prints
//   BENCH step_view_cost_ratio_1000_bodies_1_moved <median of the paired ratios> x (goal <= 1.5)
// the step of 1000 bodies over that of 10: near 1 when the step view changes only what moved.
// The same with an object (a sphere) on every body, for the scene's side (instance updates and
// the top-level commit of the tracing structure):
//   BENCH step_scene_cost_ratio_1000_objects_1_moved <ratio> x      (reported, no goal)
// Cross-check: body 1's IMU readings are equal bit for bit in all four environments (the other
// bodies change nothing of them), and each agrees with the analytic reading of its motion.
//
//    bench_step [--quick] [--rounds N] [--steps N]
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "imu/imu.h"
#include "scene/scene.h"
#include "world/env.h"

#define NENV 4

typedef struct step_env {
  scene_device_t* dev;
  env_t* e;
  uint32_t nbody;
  int objects;
  double t;                     // time of the last state
  sensor_imu_t last;            // body 1's IMU reading at the last step
} step_env_t;


static void check(int rc, const err_msg_t* msg, const char* what) {
  if (rc != 0) {
    bench_die("%s: %s", what, msg->text);
  }
}


// nbody bodies on a 1 m grid (body 1 at the origin), each carrying a sphere when `objects`;
// an IMU on body 1.
static void open_env(step_env_t* s, uint32_t nbody, int objects) {
  err_msg_t msg = {0};
  memset(s, 0, sizeof *s);
  s->nbody = nbody;
  s->objects = objects;
  s->dev = scene_device_create(&msg);
  if (!s->dev) {
    bench_die("scene_device_create: %s", msg.text);
  }
  env_limits_t lim = env_default_limits();
  s->e = env_create("bench", &lim, s->dev, NULL, &msg);
  if (!s->e) {
    bench_die("env_create: %s", msg.text);
  }
  if (objects) {
    prim_desc_t p = {.id = 1, .kind = SCENE_PRIM_SPHERE, .size = {0.3, 0.3, 0.3}};
    check(env_create_primitive(s->e, &p, &msg), &msg, "env_create_primitive");
  }
  for (uint32_t i = 1; i <= nbody; i++) {
    body_desc_t b = {.id = i, .pose = xform_identity()};
    b.pose.p[0] = (double)((i - 1) % 32);
    b.pose.p[1] = (double)((i - 1) / 32);
    check(env_create_body(s->e, &b, &msg), &msg, "env_create_body");
    if (objects) {
      object_desc_t o = {.id = i, .geometry_id = 1, .body_id = i, .local_pose = xform_identity(),
                         .scale = {1, 1, 1}};
      check(env_create_object(s->e, &o, &msg), &msg, "env_create_object");
    }
  }
  imu_config_t c;
  imu_config_default(&c);
  c.has_accelerometer = c.has_gyroscope = c.has_magnetometer = 1;
  sensor_desc_t d = {.id = 1, .body_id = 1, .mount = xform_identity()};
  check(imu_create(&c, &d.sensor, &msg), &msg, "imu_create");
  check(env_create_sensor(s->e, &d, &msg), &msg, "env_create_sensor");
  s->t = -1.0;
}


static void close_env(step_env_t* s) {
  env_destroy(s->e);
  scene_device_destroy(s->dev);
}


// Body 1 at step k: spinning about z at 2 rad/s, rising at 0.5 m/s (velocities sent).
static void motion(uint64_t k, double* t, double pose[7], double vel[6]) {
  *t = 0.01 * (double)k;
  double a = 2.0 * *t;
  double p[7] = {0, 0, 0.5 * *t, 0, 0, sin(0.5 * a), cos(0.5 * a)};
  double v[6] = {0, 0, 0.5, 0, 0, 2.0};
  memcpy(pose, p, sizeof p);
  memcpy(vel, v, sizeof v);
}


// One timed unit: the state of step k (body 1 only) and the step. Keeps body 1's reading.
static void step_once(step_env_t* s, uint64_t k) {
  err_msg_t msg = {0};
  double pose[7], vel[6];
  uint32_t id = 1;
  env_state_update_t u = {.nbody = 1, .body_ids = &id, .body_poses = pose,
                          .body_velocities = vel};
  motion(k, &u.time, pose, vel);
  check(env_update_state(s->e, &u, &msg), &msg, "env_update_state");
  check(env_step(s->e, u.time, &msg), &msg, "env_step");
  const sensor_out_t* out = env_outputs(s->e);
  if (out->n != 1 || out->rec[0].kind != SENSOR_REC_IMU) {
    bench_die("step %llu: %u records, expected one IMU sample", (unsigned long long)k, out->n);
  }
  s->last = out->rec[0].u.imu;
  s->t = u.time;
}


// Body 1's reading at step k against the analytic one: at rest in its rotating frame, the
// accelerometer reads +g up, the gyroscope 2 rad/s about z (velocities are sent, so the
// acceleration is that of the velocities: zero).
static void check_reading(const sensor_imu_t* m, uint64_t k) {
  const double want_acc[3] = {0, 0, 9.80665}, want_gyr[3] = {0, 0, 2.0};
  for (int i = 0; i < 3; i++) {
    if (fabs(m->acceleration[i] - want_acc[i]) > 1e-9 ||
        fabs(m->angular_velocity[i] - want_gyr[i]) > 1e-9) {
      bench_die("step %llu: IMU reads acceleration (%g %g %g), angular velocity (%g %g %g); "
                "expected (0 0 9.80665), (0 0 2)", (unsigned long long)k, m->acceleration[0],
                m->acceleration[1], m->acceleration[2], m->angular_velocity[0],
                m->angular_velocity[1], m->angular_velocity[2]);
    }
  }
}


int main(int argc, char** argv) {
  bench_init("bench_step", NULL);
  int quick = 0;
  unsigned rounds = 0, steps = 0;
  const bench_opt_t opts[] = {
      {"quick", BENCH_OPT_FLAG, &quick, 0, 0},
      {"rounds", BENCH_OPT_COUNT, &rounds, 1, 100000},
      {"steps", BENCH_OPT_COUNT, &steps, 1, 100000},
  };
  bench_parse_options(argc, argv, opts, sizeof opts / sizeof opts[0],
                      "bench_step [--quick] [--rounds N] [--steps N]");
  if (!rounds) {
    rounds = quick ? 5 : 41;
  }
  if (!steps) {
    steps = quick ? 20 : 200;
  }

  // [0] 10 bodies, [1] 1000 bodies, [2] and [3] the same with an object on each
  static const uint32_t kBodies[NENV] = {10, 1000, 10, 1000};
  static const int kObjects[NENV] = {0, 0, 1, 1};
  step_env_t env[NENV];
  for (int i = 0; i < NENV; i++) {
    open_env(&env[i], kBodies[i], kObjects[i]);
  }

  // the first steps (the view built once, the scene committed whole), then timed rounds: each
  // environment in turn takes `steps` steps of the same motion
  uint64_t k = 0;
  for (; k < 3; k++) {
    for (int i = 0; i < NENV; i++) {
      step_once(&env[i], k);
    }
  }
  double* per_step[NENV];
  for (int i = 0; i < NENV; i++) {
    per_step[i] = bench_xmalloc(rounds * sizeof(double));
  }
  for (unsigned r = 0; r < rounds; r++) {
    uint64_t k0 = k;
    for (int j = 0; j < NENV; j++) {
      int i = (int)((r + (unsigned)j) % NENV);   // a different order each round
      double t0 = bench_now();
      for (k = k0; k < k0 + steps; k++) {
        step_once(&env[i], k);
      }
      per_step[i][r] = (bench_now() - t0) / steps;
    }
    for (int i = 0; i < NENV; i++) {
      if (memcmp(&env[i].last, &env[0].last, sizeof env[0].last) != 0) {
        bench_die("round %u: body 1's IMU reading differs between %u bodies%s and 10 bodies",
                  r, env[i].nbody, env[i].objects ? " with objects" : "");
      }
    }
    check_reading(&env[0].last, k - 1);
  }

  double view = bench_median_ratio(per_step[1], per_step[0], rounds);
  double scene = bench_median_ratio(per_step[3], per_step[2], rounds);
  printf("# %u rounds of %u steps; median step: %.2f us (10 bodies), %.2f us (1000 bodies), "
         "%.2f us (10 with objects), %.2f us (1000 with objects)\n", rounds, steps,
         1e6 * bench_median(per_step[0], rounds), 1e6 * bench_median(per_step[1], rounds),
         1e6 * bench_median(per_step[2], rounds), 1e6 * bench_median(per_step[3], rounds));
  printf("BENCH step_view_cost_ratio_1000_bodies_1_moved %.3f x (goal <= 1.5)\n", view);
  printf("BENCH step_scene_cost_ratio_1000_objects_1_moved %.3f x\n", scene);
  for (int i = 0; i < NENV; i++) {
    free(per_step[i]);
    close_env(&env[i]);
  }
  return 0;
}
