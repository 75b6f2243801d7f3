// SPDX-License-Identifier: MIT
// bench_imu.c: the cost of the IMU, encoder and cone sensors.
//
// 1. Through a real sensimd over loopback TCP (protobuf-c, no client library): an environment
//    with one IMU (accelerometer, gyroscope and magnetometer, with noise), one encoder and one
//    cone sensor (EXACT mode, a box and a sphere in view). Alternately, a Ping round trip and an
//    UpdateState + Step round trip (both requests in one write, both replies read: one round
//    trip, the way a simulation loop pipelines them); the same in a second environment without
//    sensors, for the cost of the step itself. Prints
//      BENCH imu_step_rtt_over_ping <median of the paired ratios> x      (goal <= 2)
// 2. In this process: an IMU at a fixed 20 kHz over 0.1 s steps, called through its sensor
//    operations on a hand-built step view. Prints
//      BENCH imu_samples_per_cpu_second <samples per CPU second of this thread>
//
//    bench_imu [--sensimd PATH] [--quick] [--rounds N]
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_proto.h"
#include "bench_util.h"
#include "imu/imu.h"
#include "sensim.pb-c.h"

#ifndef SENSIMD_DEFAULT
#define SENSIMD_DEFAULT "sensimd"
#endif

#define IO_TIMEOUT_S 30

//---------------- Scene and sensors

// Join environment `name`; with sensors, build the scene and the three sensors, else only the
// body and the joint (the baseline: the same requests, nothing to evaluate).
static void setup(bench_conn_t* c, const char* name, int sensors) {
  bench_hello(c, "bench_imu", name, SENSIM__V1__ROLE__ROLE_CONTROLLER);
  Sensim__V1__Envelope env = SENSIM__V1__ENVELOPE__INIT;

  // a box and a sphere in front of the cone
  Sensim__V1__Vec3 half = bench_vec3(0.5, 0.5, 0.5);
  Sensim__V1__Box box = SENSIM__V1__BOX__INIT;
  box.half_extents = &half;
  Sensim__V1__CreatePrimitive prim = SENSIM__V1__CREATE_PRIMITIVE__INIT;
  prim.has_id = 1;
  prim.id = 1;
  prim.shape_case = SENSIM__V1__CREATE_PRIMITIVE__SHAPE_BOX;
  prim.box = &box;
  env.body_case = SENSIM__V1__ENVELOPE__BODY_CREATE_PRIMITIVE;
  env.create_primitive = &prim;
  bench_call(c, &env, "create_primitive box");
  Sensim__V1__Sphere sphere = SENSIM__V1__SPHERE__INIT;
  sphere.has_radius = 1;
  sphere.radius = 0.7;
  prim.id = 2;
  prim.shape_case = SENSIM__V1__CREATE_PRIMITIVE__SHAPE_SPHERE;
  prim.sphere = &sphere;
  bench_call(c, &env, "create_primitive sphere");
  for (uint32_t i = 0; i < 2; i++) {
    Sensim__V1__Vec3 pos = i == 0 ? bench_vec3(6, 1, 0) : bench_vec3(9, -2, 0.5);
    Sensim__V1__Pose pose = SENSIM__V1__POSE__INIT;
    pose.position = &pos;
    Sensim__V1__CreateObject obj = SENSIM__V1__CREATE_OBJECT__INIT;
    obj.has_id = obj.has_geometry_id = 1;
    obj.id = 10 + i;
    obj.geometry_id = 1 + i;
    obj.local_pose = &pose;
    env.body_case = SENSIM__V1__ENVELOPE__BODY_CREATE_OBJECT;
    env.create_object = &obj;
    bench_call(c, &env, "create_object");
  }
  Sensim__V1__CreateBody body = SENSIM__V1__CREATE_BODY__INIT;
  body.has_id = 1;
  body.id = 1;
  env.body_case = SENSIM__V1__ENVELOPE__BODY_CREATE_BODY;
  env.create_body = &body;
  bench_call(c, &env, "create_body");
  Sensim__V1__CreateJoint joint = SENSIM__V1__CREATE_JOINT__INIT;
  joint.has_id = 1;
  joint.id = 1;
  env.body_case = SENSIM__V1__ENVELOPE__BODY_CREATE_JOINT;
  env.create_joint = &joint;
  bench_call(c, &env, "create_joint");
  if (!sensors) {
    return;
  }

  // the IMU: three noisy sub-sensors
  Sensim__V1__Vec3 noise = bench_vec3(0.01, 0.01, 0.01);
  Sensim__V1__TriaxialConfig chain = SENSIM__V1__TRIAXIAL_CONFIG__INIT;
  chain.noise_stddev = &noise;
  Sensim__V1__AccelerometerConfig acc = SENSIM__V1__ACCELEROMETER_CONFIG__INIT;
  acc.chain = &chain;
  Sensim__V1__GyroscopeConfig gyr = SENSIM__V1__GYROSCOPE_CONFIG__INIT;
  gyr.chain = &chain;
  Sensim__V1__MagnetometerConfig mag = SENSIM__V1__MAGNETOMETER_CONFIG__INIT;
  mag.chain = &chain;
  Sensim__V1__ImuConfig imu = SENSIM__V1__IMU_CONFIG__INIT;
  imu.accelerometer = &acc;
  imu.gyroscope = &gyr;
  imu.magnetometer = &mag;
  Sensim__V1__CreateSensor cs = SENSIM__V1__CREATE_SENSOR__INIT;
  cs.has_id = cs.has_body_id = 1;
  cs.id = 1;
  cs.body_id = 1;
  cs.config_case = SENSIM__V1__CREATE_SENSOR__CONFIG_IMU;
  cs.imu = &imu;
  env.body_case = SENSIM__V1__ENVELOPE__BODY_CREATE_SENSOR;
  env.create_sensor = &cs;
  bench_call(c, &env, "create_sensor imu");
  Sensim__V1__EncoderConfig enc = SENSIM__V1__ENCODER_CONFIG__INIT;
  enc.has_joint_id = enc.has_resolution = 1;
  enc.joint_id = 1;
  enc.resolution = 0.001;
  cs.id = 2;
  cs.body_id = 0;
  cs.config_case = SENSIM__V1__CREATE_SENSOR__CONFIG_ENCODER;
  cs.encoder = &enc;
  bench_call(c, &env, "create_sensor encoder");
  Sensim__V1__ConeConfig cone = SENSIM__V1__CONE_CONFIG__INIT;
  cone.has_range = 1;
  cone.range = 20.0;
  cs.id = 3;
  cs.body_id = 1;
  cs.config_case = SENSIM__V1__CREATE_SENSOR__CONFIG_CONE;
  cs.cone = &cone;
  bench_call(c, &env, "create_sensor cone");
}

// UpdateState + Step at time t in one write; returns the number of sensor outputs.
static size_t update_and_step(bench_conn_t* c, double t) {
  uint32_t ids[1] = {1};
  double pose[7] = {0.1 * t, 0, 0, 0, 0, sin(0.25 * t), cos(0.25 * t)};
  double vel[6] = {0.1, 0, 0, 0, 0, 0.5};
  double jpos[1] = {2.0 * t};
  Sensim__V1__UpdateState us = SENSIM__V1__UPDATE_STATE__INIT;
  us.has_time = 1;
  us.time = t;
  us.n_body_ids = 1;
  us.body_ids = ids;
  us.n_body_poses = 7;
  us.body_poses = pose;
  us.n_body_velocities = 6;
  us.body_velocities = vel;
  us.n_joint_ids = 1;
  us.joint_ids = ids;
  us.n_joint_positions = 1;
  us.joint_positions = jpos;
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
  uint64_t a = bench_frame_append(c, &e1, &f, &len);
  uint64_t b = bench_frame_append(c, &e2, &f, &len);
  bench_write_all(c->fd, f, len);
  free(f);
  sensim__v1__envelope__free_unpacked(bench_reply(c, a, "update_state"), NULL);
  Sensim__V1__Envelope* r = bench_reply(c, b, "step");
  size_t n = r->step_done ? r->step_done->n_outputs : 0;
  sensim__v1__envelope__free_unpacked(r, NULL);
  return n;
}

static void ping(bench_conn_t* c) {
  Sensim__V1__Ping p = SENSIM__V1__PING__INIT;
  Sensim__V1__Envelope env = SENSIM__V1__ENVELOPE__INIT;
  env.body_case = SENSIM__V1__ENVELOPE__BODY_PING;
  env.ping = &p;
  bench_call(c, &env, "ping");
}

//---------------- In-process IMU throughput

static double thread_cpu(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double imu_throughput(unsigned steps, uint64_t* nsamples) {
  imu_config_t cfg;
  imu_config_default(&cfg);
  cfg.has_accelerometer = cfg.has_gyroscope = cfg.has_magnetometer = 1;
  for (int i = 0; i < 3; i++) {
    cfg.accelerometer.noise_stddev[i] = cfg.gyroscope.noise_stddev[i] = 0.01;
    cfg.magnetometer.noise_stddev[i] = 1e-7;
  }
  cfg.sample_rate = 20000.0;
  sensor_t s;
  err_msg_t msg;
  if (imu_create(&cfg, &s, &msg) != 0) {
    bench_die("imu_create: %s", msg.text);
  }
  view_body_t body = {.id = 1};
  body.at[0].pose = body.at[1].pose = xform_identity();
  step_view_t v;
  memset(&v, 0, sizeof(v));
  v.bodies = &body;
  v.nbody = 1;
  v.gravity[2] = -9.80665;
  v.magnetic.uniform[0] = 2e-5;
  v.seed = 1;
  v.output_budget = UINT64_MAX;
  sensor_ctx_t ctx = {.id = 1, .body_id = 1, .mount = xform_identity()};
  sensor_out_t out = {0};
  double cpu = 0.0;
  *nsamples = 0;
  for (unsigned k = 0; k <= steps; k++) {
    double t = 0.1 * k;
    body.at[0] = body.at[1];
    body.at[1].pose.p[0] = 0.5 * t * t;
    body.at[1].pose.q[0] = cos(0.25 * t);
    body.at[1].pose.q[3] = sin(0.25 * t);
    v.t0 = k ? v.t1 : t;
    v.t1 = t;
    v.step = k + 1;
    sensor_out_clear(&out);
    double c0 = thread_cpu();
    if (s.ops->step(s.self, &ctx, &v, &out, &msg) != 0) {
      bench_die("imu step: %s", msg.text);
    }
    s.ops->commit(s.self);
    cpu += thread_cpu() - c0;
    *nsamples += out.n;
  }
  sensor_out_free(&out);
  s.ops->destroy(s.self);
  return cpu;
}

int main(int argc, char** argv) {
  bench_init("bench_imu", bench_daemon_kill);
  const char* exe = getenv("SENSIMD");
  if (!exe || !exe[0]) {
    exe = SENSIMD_DEFAULT;
  }
  int quick = 0;
  unsigned rounds = 3000;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quick") == 0) {
      quick = 1;
      rounds = 50;
    } else if (strcmp(argv[i], "--sensimd") == 0 && i + 1 < argc) {
      exe = argv[++i];
    } else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
      rounds = (unsigned)strtoul(argv[++i], NULL, 10);
      if (rounds == 0) {
        bench_die("--rounds must be > 0");
      }
    } else {
      fprintf(stderr, "usage: bench_imu [--sensimd PATH] [--quick] [--rounds N]\n");
      return 2;
    }
  }

  bench_daemon_t d;
  bench_daemon_start(&d, exe, NULL, IO_TIMEOUT_S * 1000);
  bench_conn_t c = bench_conn_open(d.port, IO_TIMEOUT_S * 1000);
  bench_conn_t e = bench_conn_open(d.port, IO_TIMEOUT_S * 1000);
  setup(&c, "bench_imu", 1);
  setup(&e, "bench_imu_empty", 0);
  double t = 0.0;
  if (update_and_step(&c, t) != 3 || update_and_step(&e, t) != 0) {
    bench_die("the first step did not give 3 outputs (imu, encoder, cone) and 0 without sensors");
  }
  double* tp = bench_xmalloc(rounds * sizeof(double));
  double* ts = bench_xmalloc(rounds * sizeof(double));
  double* te = bench_xmalloc(rounds * sizeof(double));
  for (unsigned i = 0; i < rounds; i++) {
    double t0 = bench_now();
    ping(&c);
    tp[i] = bench_now() - t0;
    t += 0.01;
    t0 = bench_now();
    if (update_and_step(&c, t) != 3) {
      bench_die("step %u lost outputs", i);
    }
    ts[i] = bench_now() - t0;
    t0 = bench_now();
    update_and_step(&e, t);
    te[i] = bench_now() - t0;
  }
  double ratio = bench_median_ratio(ts, tp, rounds);
  double ratio_empty = bench_median_ratio(te, tp, rounds);
  printf("ping_rtt_us %.1f\n", 1e6 * bench_median(tp, rounds));
  printf("update_step_rtt_us %.1f (imu + encoder + cone), %.1f (no sensors), %u rounds\n",
         1e6 * bench_median(ts, rounds), 1e6 * bench_median(te, rounds), rounds);
  printf("update_step_no_sensors_over_ping %.2f x\n", ratio_empty);
  printf("BENCH imu_step_rtt_over_ping %.2f x\n", ratio);
  free(tp);
  free(ts);
  free(te);
  close(c.fd);
  close(e.fd);
  free(c.buf);
  free(e.buf);
  int status = bench_daemon_stop(&d);
  if (status != 0) {
    bench_die("sensimd did not exit cleanly (status %d)", status);
  }

  uint64_t n;
  double cpu = imu_throughput(quick ? 5 : 100, &n);
  char s1[32];
  printf("imu_samples %s cpu_s %.3f (20 kHz; accelerometer, gyroscope, magnetometer, noise)\n",
         bench_count(n, s1), cpu);
  printf("BENCH imu_samples_per_cpu_second %.0f\n", (double)n / fmax(cpu, 1e-9));
  return 0;
}
