// SPDX-License-Identifier: MIT
// bench_pipelined.c: the C reference of bench_pipelined.py: a vehicle with a VLP-16 and an IMU
// stepped at 1 kHz through a real sensimd by the C client (libsensim), several ticks in
// flight: the loop a C physics engine would run.
//
// Joins environment NAME of the daemon on 127.0.0.1:PORT, builds the scene bench_pipelined.py
// builds (clear air without atmospheric returns, a ground plane, a row of boxes, body 1 on a
// circle of 10 m at 5 m/s, a VLP-16 at 10 Hz as sensim.presets' "vlp16": 100 m range, 1.5 mrad
// divergence, velodyne layout, 1.8 m above the body; an IMU with accelerometer and gyroscope),
// sends the state at t = 0 and its step, then for each of STEPS ticks of 1 ms sends the state
// and the step in one write (sensim_update_and_step_send), keeping at most DEPTH ticks in
// flight, and goes through every record of every reply. Prints one line:
//   steps N clouds C points P imu I wall_s W cpu_s U
// W the wall time of the ticks alone (scene setup excluded), U this process's CPU time over
// them.
//
//    bench_pipelined --port PORT --environment NAME [--steps N] [--depth D]
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sensim/sensim.h>

#include "bench_util.h"

#define DT 1e-3
#define MAX_DEPTH 1024
#define TIMEOUT_MS 60000

static sensim_client_t* cli;


static void check(sensim_status_t st, const char* what) {
  if (st != SENSIM_OK) {
    bench_die("%s: %s (%s)", what, sensim_client_last_error(cli), sensim_status_name(st));
  }
}

//---------------- Scene

static void scene(void) {
  sensim_ambient_t air;
  sensim_ambient_init(&air);
  air.return_probability_scaling = 0.0;
  check(sensim_set_ambient(cli, &air), "set_ambient");

  // the ground and a row of boxes
  sensim_primitive_t prim;
  sensim_primitive_init(&prim);
  prim.id = 1;
  prim.shape = SENSIM_SHAPE_PLANE;
  check(sensim_create_primitive(cli, &prim), "create_primitive plane");
  prim.id = 2;
  prim.shape = SENSIM_SHAPE_BOX;
  prim.half_extents[0] = prim.half_extents[1] = prim.half_extents[2] = 1.0;
  check(sensim_create_primitive(cli, &prim), "create_primitive box");
  sensim_object_t obj;
  sensim_object_init(&obj);
  obj.id = 1;
  obj.geometry_id = 1;
  check(sensim_create_object(cli, &obj), "create_object ground");
  for (uint32_t i = 1; i < 13; i++) {
    obj.id = 1 + i;
    obj.geometry_id = 2;
    obj.local_pose.position[0] = -30.0 + 5.0 * i;
    obj.local_pose.position[1] = 16.0;
    obj.local_pose.position[2] = 1.0;
    check(sensim_create_object(cli, &obj), "create_object box");
  }

  // the vehicle, its VLP-16 (the "vlp16" preset) and its IMU
  sensim_body_t body;
  sensim_body_init(&body);
  body.id = 1;
  check(sensim_create_body(cli, &body), "create_body");
  sensim_sensor_t sensor;
  sensim_sensor_init(&sensor);
  sensor.id = 5;
  sensor.body_id = 1;
  sensor.mount.position[2] = 1.8;
  sensim_lidar_config_t lidar;
  sensim_lidar_config_init(&lidar, SENSIM_PATTERN_VLP16);
  lidar.vlp16.frequency = 10.0;
  lidar.range_max = 100.0;
  lidar.beam.enabled = true;
  lidar.beam.divergence = 0.0015;
  lidar.layout = SENSIM_LAYOUT_VELODYNE;
  check(sensim_create_lidar(cli, &sensor, &lidar), "create_lidar");
  sensim_sensor_init(&sensor);
  sensor.id = 7;
  sensor.body_id = 1;
  sensim_imu_config_t imu;
  sensim_imu_config_init(&imu);  // accelerometer and gyroscope, ideal
  check(sensim_create_imu(cli, &sensor, &imu), "create_imu");
}

//---------------- The loop

typedef struct totals {
  unsigned long clouds, points, imu;
} totals_t;


static double process_cpu(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}


// The vehicle at time t: on a circle of radius 10 m at 5 m/s, facing along its path.
static void vehicle(double t, double pose[7], double vel[6]) {
  const double r = 10.0, w = 0.5;
  double a = w * t;
  pose[0] = r * sin(a);
  pose[1] = r - r * cos(a);
  pose[2] = 0.0;
  pose[3] = pose[4] = 0.0;
  pose[5] = sin(a / 2);
  pose[6] = cos(a / 2);
  vel[0] = r * w * cos(a);
  vel[1] = r * w * sin(a);
  vel[2] = vel[3] = vel[4] = 0.0;
  vel[5] = w;
}


// Send the state and the step of time t in one write; ids[0], ids[1] receive their ids.
static void send_tick(double t, uint64_t ids[2]) {
  static const uint32_t body_ids[1] = {1};
  double pose[7], vel[6];
  vehicle(t, pose, vel);
  sensim_state_t state;
  sensim_state_init(&state);
  state.time = t;
  state.nbodies = 1;
  state.body_ids = body_ids;
  state.body_poses = pose;  // sent from here before the call returns
  state.body_velocities = vel;
  sensim_step_t step;
  sensim_step_init(&step);
  step.time = t;
  check(sensim_update_and_step_send(cli, &state, &step, &ids[0], &ids[1]), "sending a tick");
}


// Collect one tick and count what its step carried.
static void collect(const uint64_t ids[2], totals_t* tot) {
  const sensim_step_result_t* r = NULL;
  check(sensim_wait(cli, ids[0], TIMEOUT_MS), "update_state");
  check(sensim_step_wait(cli, ids[1], TIMEOUT_MS, &r), "step");
  for (uint32_t i = 0; i < r->noutputs; i++) {
    const sensim_sensor_data_t* d = &r->outputs[i];
    if (d->kind == SENSIM_PAYLOAD_POINT_CLOUD) {
      tot->clouds++;
      tot->points += d->point_cloud.count;
    } else if (d->kind == SENSIM_PAYLOAD_IMU) {
      tot->imu++;
    }
  }
}


int main(int argc, char** argv) {
  bench_init("bench_pipelined", NULL);
  unsigned port = 0, steps = 1000, depth = 4;
  const char* name = NULL;
  bench_opt_t opts[] = {
    {"port", BENCH_OPT_COUNT, &port, 1, 65535},
    {"environment", BENCH_OPT_STRING, &name, 0, 0},
    {"steps", BENCH_OPT_COUNT, &steps, 1, 10000000},
    {"depth", BENCH_OPT_COUNT, &depth, 1, MAX_DEPTH},
  };
  bench_parse_options(argc, argv, opts, sizeof opts / sizeof opts[0],
                      "bench_pipelined --port PORT --environment NAME [--steps N] [--depth D]");
  if (!port || !name) {
    bench_die("--port and --environment are required");
  }
  sensim_options_t o;
  sensim_options_init(&o);
  o.environment = name;
  o.client_name = "bench_pipelined";
  check(sensim_client_connect("127.0.0.1", (uint16_t)port, &o, &cli), "connect");
  scene();

  // the first state, at t = 0, as bench_pipelined.py sends it before its clock starts
  static uint64_t ids[MAX_DEPTH][2];
  totals_t tot = {0, 0, 0};
  send_tick(0.0, ids[0]);
  collect(ids[0], &tot);
  tot = (totals_t){0, 0, 0};

  double t0 = bench_now(), c0 = process_cpu();
  unsigned sent = 0, done = 0;
  for (unsigned k = 1; k <= steps; k++) {
    while (sent - done >= depth) {
      collect(ids[done % depth], &tot);
      done++;
    }
    send_tick(k * DT, ids[sent % depth]);
    sent++;
  }
  while (done < sent) {
    collect(ids[done % depth], &tot);
    done++;
  }
  double wall = bench_now() - t0, cpu = process_cpu() - c0;
  printf("steps %u clouds %lu points %lu imu %lu wall_s %.6f cpu_s %.6f\n", steps, tot.clouds,
         tot.points, tot.imu, wall, cpu);
  sensim_client_close(cli);
  return 0;
}
