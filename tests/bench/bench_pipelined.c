// SPDX-License-Identifier: MIT
// bench_pipelined.c: the C reference of bench_pipelined.py: a vehicle with a VLP-16 and an IMU
// stepped at 1 kHz through a real sensimd, several steps in flight, written with protobuf-c
// and no client library (the loop a C physics engine would run).
//
// Joins environment NAME of the daemon on 127.0.0.1:PORT, builds the scene bench_pipelined.py
// builds (a ground plane, a row of boxes, body 1 on a circle of 10 m at 5 m/s, a VLP-16 at
// 10 Hz as sensim.presets' "vlp16": 100 m range, 1.5 mrad divergence, velodyne layout, 1.8 m
// above the body; an IMU with accelerometer and gyroscope), then for each of STEPS steps of
// 1 ms sends UpdateState (pose and velocity as bytes fields) and Step in one write, keeping at
// most DEPTH steps in flight, and decodes every reply (protobuf-c, the clouds' bytes included).
// Prints one line:
//   steps N clouds C points P imu I wall_s W cpu_s U
// W the wall time of the stepping loop alone (scene setup excluded), U this process's CPU time
// over it.
//
//    bench_pipelined --port PORT --environment NAME [--steps N] [--depth D]
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_proto.h"
#include "bench_util.h"
#include "sensim.pb-c.h"

#define IO_TIMEOUT_MS 60000
#define DT 1e-3
#define MAX_DEPTH 1024

//---------------- Scene

static void create(bench_conn_t* c, Sensim__V1__Envelope* env, const char* what) {
  bench_call(c, env, what);
  Sensim__V1__Envelope blank = SENSIM__V1__ENVELOPE__INIT;
  *env = blank;
}


static void scene(bench_conn_t* c) {
  Sensim__V1__Envelope env = SENSIM__V1__ENVELOPE__INIT;

  // clear air without atmospheric returns, as bench_pipelined.py sets it
  Sensim__V1__AmbientMaterial air = SENSIM__V1__AMBIENT_MATERIAL__INIT;
  air.has_return_probability_scaling = 1;
  air.return_probability_scaling = 0.0;
  Sensim__V1__SetAmbient amb = SENSIM__V1__SET_AMBIENT__INIT;
  amb.medium_case = SENSIM__V1__SET_AMBIENT__MEDIUM_CUSTOM;
  amb.custom = &air;
  env.body_case = SENSIM__V1__ENVELOPE__BODY_SET_AMBIENT;
  env.set_ambient = &amb;
  create(c, &env, "set_ambient");

  // the ground and a row of boxes
  Sensim__V1__Plane plane = SENSIM__V1__PLANE__INIT;
  Sensim__V1__CreatePrimitive prim = SENSIM__V1__CREATE_PRIMITIVE__INIT;
  prim.has_id = 1;
  prim.id = 1;
  prim.shape_case = SENSIM__V1__CREATE_PRIMITIVE__SHAPE_PLANE;
  prim.plane = &plane;
  env.body_case = SENSIM__V1__ENVELOPE__BODY_CREATE_PRIMITIVE;
  env.create_primitive = &prim;
  create(c, &env, "create_primitive plane");
  Sensim__V1__Vec3 half = bench_vec3(1.0, 1.0, 1.0);
  Sensim__V1__Box box = SENSIM__V1__BOX__INIT;
  box.half_extents = &half;
  prim.id = 2;
  prim.shape_case = SENSIM__V1__CREATE_PRIMITIVE__SHAPE_BOX;
  prim.box = &box;
  env.body_case = SENSIM__V1__ENVELOPE__BODY_CREATE_PRIMITIVE;
  env.create_primitive = &prim;
  create(c, &env, "create_primitive box");
  for (uint32_t i = 0; i < 13; i++) {
    Sensim__V1__Vec3 pos = i == 0 ? bench_vec3(0, 0, 0) : bench_vec3(-30.0 + 5.0 * i, 16.0, 1.0);
    Sensim__V1__Pose pose = SENSIM__V1__POSE__INIT;
    pose.position = &pos;
    Sensim__V1__CreateObject obj = SENSIM__V1__CREATE_OBJECT__INIT;
    obj.has_id = obj.has_geometry_id = 1;
    obj.id = 1 + i;
    obj.geometry_id = i == 0 ? 1 : 2;
    obj.local_pose = &pose;
    env.body_case = SENSIM__V1__ENVELOPE__BODY_CREATE_OBJECT;
    env.create_object = &obj;
    create(c, &env, "create_object");
  }

  // the vehicle
  Sensim__V1__CreateBody body = SENSIM__V1__CREATE_BODY__INIT;
  body.has_id = 1;
  body.id = 1;
  env.body_case = SENSIM__V1__ENVELOPE__BODY_CREATE_BODY;
  env.create_body = &body;
  create(c, &env, "create_body");

  // the VLP-16 preset
  Sensim__V1__Vlp16Pattern vlp = SENSIM__V1__VLP16_PATTERN__INIT;
  vlp.has_frequency = 1;
  vlp.frequency = 10.0;
  Sensim__V1__BeamDivergence beam = SENSIM__V1__BEAM_DIVERGENCE__INIT;
  beam.has_divergence = 1;
  beam.divergence = 0.0015;
  Sensim__V1__LidarConfig lidar = SENSIM__V1__LIDAR_CONFIG__INIT;
  lidar.pattern_case = SENSIM__V1__LIDAR_CONFIG__PATTERN_VLP16;
  lidar.vlp16 = &vlp;
  lidar.has_range_max = 1;
  lidar.range_max = 100.0;
  lidar.beam = &beam;
  lidar.has_layout = 1;
  lidar.layout = SENSIM__V1__POINT_LAYOUT__LAYOUT_VELODYNE;
  Sensim__V1__Vec3 up = bench_vec3(0, 0, 1.8);
  Sensim__V1__Pose mount = SENSIM__V1__POSE__INIT;
  mount.position = &up;
  Sensim__V1__CreateSensor cs = SENSIM__V1__CREATE_SENSOR__INIT;
  cs.has_id = cs.has_body_id = 1;
  cs.id = 5;
  cs.body_id = 1;
  cs.mount = &mount;
  cs.config_case = SENSIM__V1__CREATE_SENSOR__CONFIG_LIDAR;
  cs.lidar = &lidar;
  env.body_case = SENSIM__V1__ENVELOPE__BODY_CREATE_SENSOR;
  env.create_sensor = &cs;
  create(c, &env, "create_sensor lidar");

  // the IMU: accelerometer and gyroscope with their default chains
  Sensim__V1__AccelerometerConfig acc = SENSIM__V1__ACCELEROMETER_CONFIG__INIT;
  Sensim__V1__GyroscopeConfig gyr = SENSIM__V1__GYROSCOPE_CONFIG__INIT;
  Sensim__V1__ImuConfig imu = SENSIM__V1__IMU_CONFIG__INIT;
  imu.accelerometer = &acc;
  imu.gyroscope = &gyr;
  Sensim__V1__CreateSensor ci = SENSIM__V1__CREATE_SENSOR__INIT;
  ci.has_id = ci.has_body_id = 1;
  ci.id = 7;
  ci.body_id = 1;
  ci.config_case = SENSIM__V1__CREATE_SENSOR__CONFIG_IMU;
  ci.imu = &imu;
  env.body_case = SENSIM__V1__ENVELOPE__BODY_CREATE_SENSOR;
  env.create_sensor = &ci;
  create(c, &env, "create_sensor imu");
}

//---------------- The loop

static double process_cpu(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}


typedef struct totals {
  unsigned long clouds, points, imu;
} totals_t;


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


// Send UpdateState and Step for time t in one write; *a, *b receive their ids.
static void send_step(bench_conn_t* c, double t, uint64_t* a, uint64_t* b) {
  uint32_t ids[1] = {1};
  double pose[7], vel[6];
  vehicle(t, pose, vel);
  Sensim__V1__UpdateState us = SENSIM__V1__UPDATE_STATE__INIT;
  us.has_time = 1;
  us.time = t;
  us.has_body_ids_bytes = us.has_body_poses_bytes = us.has_body_velocities_bytes = 1;
  us.body_ids_bytes = (ProtobufCBinaryData){sizeof ids, (uint8_t*)ids};
  us.body_poses_bytes = (ProtobufCBinaryData){sizeof pose, (uint8_t*)pose};
  us.body_velocities_bytes = (ProtobufCBinaryData){sizeof vel, (uint8_t*)vel};
  Sensim__V1__Step st = SENSIM__V1__STEP__INIT;
  st.has_time = 1;
  st.time = t;
  Sensim__V1__Envelope e1 = SENSIM__V1__ENVELOPE__INIT, e2 = SENSIM__V1__ENVELOPE__INIT;
  e1.body_case = SENSIM__V1__ENVELOPE__BODY_UPDATE_STATE;
  e1.update_state = &us;
  e2.body_case = SENSIM__V1__ENVELOPE__BODY_STEP;
  e2.step = &st;
  uint8_t* f = NULL;
  size_t len = 0;
  *a = bench_frame_append(c, &e1, &f, &len);
  *b = bench_frame_append(c, &e2, &f, &len);
  bench_write_all(c->fd, f, len);
  free(f);
}


// Wait for one step's replies and count what its StepDone carried.
static void collect(bench_conn_t* c, uint64_t a, uint64_t b, totals_t* tot) {
  bench_expect_reply(c, a, "update_state");
  Sensim__V1__Envelope* r = bench_reply(c, b, "step");
  if (!r->step_done) {
    bench_die("step: no step_done in the reply");
  }
  for (size_t i = 0; i < r->step_done->n_outputs; i++) {
    const Sensim__V1__SensorData* d = r->step_done->outputs[i];
    if (d->payload_case == SENSIM__V1__SENSOR_DATA__PAYLOAD_POINT_CLOUD) {
      tot->clouds++;
      tot->points += d->point_cloud->count;
    } else if (d->payload_case == SENSIM__V1__SENSOR_DATA__PAYLOAD_IMU) {
      tot->imu++;
    }
  }
  sensim__v1__envelope__free_unpacked(r, NULL);
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
  bench_conn_t c = bench_conn_open((int)port, IO_TIMEOUT_MS);
  bench_hello(&c, "bench_pipelined", name, SENSIM__V1__ROLE__ROLE_CONTROLLER);
  scene(&c);

  // the first state, at t = 0, as bench_pipelined.py sends it before its clock starts
  uint64_t ids[MAX_DEPTH][2];
  totals_t tot = {0, 0, 0};
  send_step(&c, 0.0, &ids[0][0], &ids[0][1]);
  collect(&c, ids[0][0], ids[0][1], &tot);
  tot = (totals_t){0, 0, 0};

  double t0 = bench_now(), c0 = process_cpu();
  unsigned sent = 0, done = 0;
  for (unsigned k = 1; k <= steps; k++) {
    while (sent - done >= depth) {
      collect(&c, ids[done % depth][0], ids[done % depth][1], &tot);
      done++;
    }
    send_step(&c, k * DT, &ids[sent % depth][0], &ids[sent % depth][1]);
    sent++;
  }
  while (done < sent) {
    collect(&c, ids[done % depth][0], ids[done % depth][1], &tot);
    done++;
  }
  double wall = bench_now() - t0, cpu = process_cpu() - c0;
  printf("steps %u clouds %lu points %lu imu %lu wall_s %.6f cpu_s %.6f\n", steps, tot.clouds,
         tot.points, tot.imu, wall, cpu);
  free(c.buf);
  return 0;
}
