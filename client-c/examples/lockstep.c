// SPDX-License-Identifier: MIT
// lockstep.c: the loop of a physics engine coupled to sensimd at 1 kHz. A vehicle drives a
// circle around a few obstacles on a ground plane; it carries a Velodyne VLP-16 and an IMU.
// Each tick the engine sends the vehicle's state and a Step for the tick, then collects the
// previous tick's step (two ticks in flight), so its physics runs while the daemon traces.
//
//   sensim_lockstep [--host H] [--port P] [--seconds S] [--radius R] [--speed V] [--depth N]
//
// Prints one summary line per lidar cloud and, at the end, the IMU's mean readings, which a
// test compares with the circle's analytic values (centripetal acceleration v^2 / R to the
// left, +g up, yaw rate v / R).
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sensim/sensim.h>

#define TICK 0.001          // s: the engine's step, 1 kHz
#define VEHICLE 1           // body id
#define LIDAR 10            // sensor ids
#define IMU 11
#define MAX_DEPTH 16


static int fail(sensim_client_t* cli, const char* what, sensim_status_t st) {
  fprintf(stderr, "sensim_lockstep: %s: %s (%s)\n", what, sensim_client_last_error(cli),
          sensim_status_name(st));
  sensim_client_close(cli);
  return 1;
}


// The engine's "physics": the vehicle on a circle of radius r at speed v, counter-clockwise,
// heading along the path. pose: px py pz qx qy qz qw; vel: vx vy vz wx wy wz (world).
static void vehicle_state(double t, double r, double v, double pose[7], double vel[6]) {
  double w = v / r, a = w * t, yaw = a + M_PI / 2;
  pose[0] = r * cos(a);
  pose[1] = r * sin(a);
  pose[2] = 0.5;
  pose[3] = pose[4] = 0.0;
  pose[5] = sin(yaw / 2);
  pose[6] = cos(yaw / 2);
  vel[0] = -v * sin(a);
  vel[1] = v * cos(a);
  vel[2] = vel[3] = vel[4] = 0.0;
  vel[5] = w;
}


// The scene: ground, four boxes outside the circle, the vehicle with its hull.
static sensim_status_t build(sensim_client_t* cli, double r, double v) {
  sensim_status_t st;
  sensim_primitive_t prim;
  sensim_primitive_init(&prim);
  prim.id = 1;
  prim.shape = SENSIM_SHAPE_PLANE;
  if ((st = sensim_create_primitive(cli, &prim)) != SENSIM_OK) {
    return st;
  }
  prim.id = 2;
  prim.shape = SENSIM_SHAPE_BOX;
  prim.half_extents[0] = prim.half_extents[1] = prim.half_extents[2] = 1.0;
  if ((st = sensim_create_primitive(cli, &prim)) != SENSIM_OK) {
    return st;
  }
  sensim_object_t obj;
  sensim_object_init(&obj);
  obj.id = 1;
  obj.geometry_id = 1;
  obj.label = 1;
  if ((st = sensim_create_object(cli, &obj)) != SENSIM_OK) {
    return st;
  }
  for (uint32_t k = 0; k < 4; k++) {
    obj.id = 2 + k;
    obj.geometry_id = 2;
    obj.label = 2;
    obj.local_pose.position[0] = (r + 8.0) * cos(M_PI / 2 * k);
    obj.local_pose.position[1] = (r + 8.0) * sin(M_PI / 2 * k);
    obj.local_pose.position[2] = 1.0;
    if ((st = sensim_create_object(cli, &obj)) != SENSIM_OK) {
      return st;
    }
  }

  // the vehicle: a body at its t = 0 state, a hull box on it (the lidar does not see it)
  sensim_body_t body;
  sensim_body_init(&body);
  body.id = VEHICLE;
  double pose[7], vel[6];
  vehicle_state(0.0, r, v, pose, vel);
  memcpy(body.pose.position, pose, sizeof(body.pose.position));
  memcpy(body.pose.orientation, pose + 3, sizeof(body.pose.orientation));
  memcpy(body.linear_velocity, vel, sizeof(body.linear_velocity));
  memcpy(body.angular_velocity, vel + 3, sizeof(body.angular_velocity));
  if ((st = sensim_create_body(cli, &body)) != SENSIM_OK) {
    return st;
  }
  obj.id = 100;
  obj.geometry_id = 2;
  obj.body_id = VEHICLE;
  obj.label = 3;
  obj.local_pose = sensim_pose_identity();
  obj.scale[0] = 2.0;
  obj.scale[2] = 0.4;
  if ((st = sensim_create_object(cli, &obj)) != SENSIM_OK) {
    return st;
  }

  // a VLP-16 on the roof, an IMU at the body origin
  sensim_sensor_t sensor;
  sensim_sensor_init(&sensor);
  sensor.id = LIDAR;
  sensor.name = "roof_vlp16";
  sensor.body_id = VEHICLE;
  sensor.mount.position[2] = 1.0;
  sensim_lidar_config_t lidar;
  sensim_lidar_config_init(&lidar, SENSIM_PATTERN_VLP16);
  lidar.vlp16.frequency = 10.0;
  lidar.layout = SENSIM_LAYOUT_VELODYNE;
  lidar.range_max = 100.0;
  if ((st = sensim_create_lidar(cli, &sensor, &lidar)) != SENSIM_OK) {
    return st;
  }
  sensim_sensor_init(&sensor);
  sensor.id = IMU;
  sensor.name = "imu";
  sensor.body_id = VEHICLE;
  sensim_imu_config_t imu;
  sensim_imu_config_init(&imu);  // accelerometer and gyroscope, ideal
  return sensim_create_imu(cli, &sensor, &imu);
}


int main(int argc, char** argv) {
  const char* host = "127.0.0.1";
  unsigned long port = 7700;
  double seconds = 1.0, radius = 20.0, speed = 5.0;
  int depth = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    char* end = NULL;
    errno = 0;
    if (strcmp(argv[i], "--host") == 0) {
      host = argv[i + 1];
      continue;
    }
    double v = strtod(argv[i + 1], &end);
    if (errno || *end || !(v > 0) || !isfinite(v)) {
      fprintf(stderr, "sensim_lockstep: %s '%s' must be a positive finite number\n", argv[i],
              argv[i + 1]);
      return 2;
    }
    bool whole = v == floor(v);
    if (strcmp(argv[i], "--port") == 0 && v <= 65535 && whole) {
      port = (unsigned long)v;
    } else if (strcmp(argv[i], "--seconds") == 0) {
      seconds = v;
    } else if (strcmp(argv[i], "--radius") == 0) {
      radius = v;
    } else if (strcmp(argv[i], "--speed") == 0) {
      speed = v;
    } else if (strcmp(argv[i], "--depth") == 0 && v <= MAX_DEPTH && whole) {
      depth = (int)v;
    } else {
      fprintf(stderr, "usage: sensim_lockstep [--host H] [--port P] [--seconds S] [--radius R] "
                      "[--speed V] [--depth N (1..%d)]\n", MAX_DEPTH);
      return 2;
    }
  }
  if (argc % 2 == 0) {
    fprintf(stderr, "sensim_lockstep: %s needs a value\n", argv[argc - 1]);
    return 2;
  }

  // connect and build the world
  sensim_options_t opts;
  sensim_options_init(&opts);
  opts.environment = "lockstep";
  opts.client_name = "sensim_lockstep";
  sensim_client_t* cli = NULL;
  sensim_status_t st = sensim_client_connect(host, (uint16_t)port, &opts, &cli);
  if (st != SENSIM_OK) {
    return fail(cli, "connect", st);
  }
  if ((st = build(cli, radius, speed)) != SENSIM_OK) {
    return fail(cli, "building the scene", st);
  }

  // the loop: state and step of tick k out, then tick k - depth + 1 in
  uint32_t body_ids[1] = {VEHICLE};
  uint32_t wanted[2] = {LIDAR, IMU};
  double pose[7], vel[6];
  sensim_state_t state;
  sensim_state_init(&state);
  state.nbodies = 1;
  state.body_ids = body_ids;
  state.body_poses = pose;        // sent from here, not copied
  state.body_velocities = vel;
  sensim_step_t step;
  sensim_step_init(&step);
  step.outputs = SENSIM_STEP_OUTPUTS_LISTED;
  step.output_sensors = wanted;
  step.noutput_sensors = 2;
  uint64_t ids[MAX_DEPTH][2];
  long ticks = lround(seconds / TICK);
  long clouds = 0, samples = 0;
  double acc[3] = {0, 0, 0}, gyro[3] = {0, 0, 0};
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (long k = 0; k <= ticks + depth - 1; k++) {
    if (k <= ticks) {
      state.time = step.time = k * TICK;
      vehicle_state(state.time, radius, speed, pose, vel);
      st = sensim_update_and_step_send(cli, &state, &step, &ids[k % depth][0],
                                       &ids[k % depth][1]);
      if (st != SENSIM_OK) {
        return fail(cli, "sending a tick", st);
      }
    }
    long done = k - depth + 1;  // the tick collected now
    if (done < 0) {
      continue;
    }
    const sensim_step_result_t* r = NULL;
    if ((st = sensim_wait(cli, ids[done % depth][0], -1)) != SENSIM_OK ||
        (st = sensim_step_wait(cli, ids[done % depth][1], -1, &r)) != SENSIM_OK) {
      return fail(cli, "a tick", st);
    }
    for (uint32_t i = 0; i < r->noutputs; i++) {
      const sensim_sensor_data_t* d = &r->outputs[i];
      if (d->kind == SENSIM_PAYLOAD_POINT_CLOUD) {
        const sensim_point_cloud_t* c = &d->point_cloud;
        printf("cloud %ld: %" PRIu32 " points of %" PRIu32 " bytes, t = %.3f s, complete %d\n",
               clouds++, c->count, c->point_step, d->time, (int)c->complete);
      } else if (d->kind == SENSIM_PAYLOAD_IMU && done > 0) {
        for (int a = 0; a < 3; a++) {
          acc[a] += d->imu.acceleration[a];
          gyro[a] += d->imu.angular_velocity[a];
        }
        samples++;
      }
    }
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double wall = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);

  // the summary: what the IMU measured on the circle
  printf("ticks %ld clouds %ld imu_samples %ld wall_s %.3f ticks_per_s %.0f\n", ticks + 1,
         clouds, samples, wall, (double)(ticks + 1) / wall);
  if (samples > 0) {
    printf("imu_mean_accel %.6f %.6f %.6f\n", acc[0] / samples, acc[1] / samples,
           acc[2] / samples);
    printf("imu_mean_gyro %.6f %.6f %.6f\n", gyro[0] / samples, gyro[1] / samples,
           gyro[2] / samples);
  }
  sensim_client_close(cli);
  return 0;
}
