// SPDX-License-Identifier: MIT
// parity.c: one scenario through the C client, for tests/python/test_c_client_parity.py, which
// plays the same scenario through the Python client and compares the outputs byte for byte.
//
//   sensim_c_parity HOST PORT ENVIRONMENT DIR
//
// Writes to DIR the inputs it sent (so that the other client sends the very same numbers):
// vertices.f32, indices.u32, poses.f64 (7 per step), origins.f64, directions.f64, times.f64;
// and what came back: cloud.bin (the VLP-16's revolution, raw, as received), cloud.txt (its
// fields: name offset datatype count, then point_step and count), hits.bin (48-byte records).
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sensim/sensim.h>

#define GRID 24            // terrain cells per side
#define SIDE 60.0          // m
#define STEPS 6            // 0, 0.025, ..., 0.125 s: a revolution at 10 Hz ends after 0.1
#define NRAYS 5000


static int die(sensim_client_t* cli, const char* what, sensim_status_t st) {
  fprintf(stderr, "sensim_c_parity: %s: %s (%s)\n", what, sensim_client_last_error(cli),
          sensim_status_name(st));
  sensim_client_close(cli);
  exit(1);
}


static void save(const char* dir, const char* name, const void* p, size_t n) {
  char path[4096];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  FILE* f = fopen(path, "wb");
  if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
    fprintf(stderr, "sensim_c_parity: cannot write %s: %s\n", path, strerror(errno));
    exit(1);
  }
}


int main(int argc, char** argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: sensim_c_parity HOST PORT ENVIRONMENT DIR\n");
    return 2;
  }
  const char* dir = argv[4];
  sensim_options_t o;
  sensim_options_init(&o);
  o.environment = argv[3];
  o.client_name = "sensim_c_parity";
  sensim_client_t* cli = NULL;
  sensim_status_t st = sensim_client_connect(argv[1], (uint16_t)atoi(argv[2]), &o, &cli);
  if (st != SENSIM_OK) {
    die(cli, "connect", st);
  }

  // a seed, so that the lidar's noise is the same for both clients
  sensim_environment_t env;
  sensim_environment_init(&env);
  env.set_seed = true;
  env.seed = 1234;
  if ((st = sensim_set_environment(cli, &env)) != SENSIM_OK) {
    die(cli, "set_environment", st);
  }

  // terrain: a height field
  static float v[(GRID + 1) * (GRID + 1)][3];
  static uint32_t idx[2 * GRID * GRID][3];
  for (int j = 0; j <= GRID; j++) {
    for (int i = 0; i <= GRID; i++) {
      float* p = v[j * (GRID + 1) + i];
      p[0] = (float)(-SIDE / 2 + SIDE * i / GRID);
      p[1] = (float)(-SIDE / 2 + SIDE * j / GRID);
      p[2] = (float)(0.8 * sin(0.21 * p[0]) * cos(0.17 * p[1]) - 1.5);
    }
  }
  for (int j = 0, t = 0; j < GRID; j++) {
    for (int i = 0; i < GRID; i++) {
      uint32_t a = (uint32_t)(j * (GRID + 1) + i), b = a + 1, c = a + GRID + 1, d = c + 1;
      idx[t][0] = a, idx[t][1] = b, idx[t][2] = d, t++;
      idx[t][0] = a, idx[t][1] = d, idx[t][2] = c, t++;
    }
  }
  sensim_mesh_t mesh;
  sensim_mesh_init(&mesh);
  mesh.id = 1;
  mesh.vertices = &v[0][0];
  mesh.nvertices = (GRID + 1) * (GRID + 1);
  mesh.indices = &idx[0][0];
  mesh.ntriangles = 2 * GRID * GRID;
  if ((st = sensim_create_mesh(cli, &mesh)) != SENSIM_OK) {
    die(cli, "create_mesh", st);
  }
  save(dir, "vertices.f32", v, sizeof(v));
  save(dir, "indices.u32", idx, sizeof(idx));

  // objects: the terrain, three boxes, a ball on the moving body 1
  sensim_primitive_t prim;
  sensim_primitive_init(&prim);
  prim.id = 2;
  prim.half_extents[0] = 1.5, prim.half_extents[1] = 0.75, prim.half_extents[2] = 1.0;
  if ((st = sensim_create_primitive(cli, &prim)) != SENSIM_OK) {
    die(cli, "create_primitive", st);
  }
  prim.id = 3;
  prim.shape = SENSIM_SHAPE_SPHERE;
  prim.radius = 0.6;
  if ((st = sensim_create_primitive(cli, &prim)) != SENSIM_OK) {
    die(cli, "create_primitive", st);
  }
  sensim_body_t body;
  sensim_body_init(&body);
  body.id = 1;
  if ((st = sensim_create_body(cli, &body)) != SENSIM_OK) {
    die(cli, "create_body", st);
  }
  static const double box_at[3][3] = {{8, 3, 0}, {-6, 9, 0}, {2, -11, 0.5}};
  for (uint32_t k = 0; k < 5; k++) {
    sensim_object_t obj;
    sensim_object_init(&obj);
    obj.id = 10 + k;
    obj.label = k + 1;
    obj.geometry_id = k == 0 ? 1 : k < 4 ? 2 : 3;
    if (k >= 1 && k <= 3) {
      memcpy(obj.local_pose.position, box_at[k - 1], sizeof(box_at[0]));
      obj.local_pose.orientation[2] = sin(0.3 * k), obj.local_pose.orientation[3] = cos(0.3 * k);
    }
    if (k == 4) {
      obj.body_id = 1;
      obj.local_pose.position[0] = 4.0;
    }
    if ((st = sensim_create_object(cli, &obj)) != SENSIM_OK) {
      die(cli, "create_object", st);
    }
  }

  // a VLP-16 on the world at 1.2 m, with distance noise, the Velodyne layout
  sensim_sensor_t s;
  sensim_sensor_init(&s);
  s.id = 1;
  s.mount.position[2] = 1.2;
  sensim_lidar_config_t lidar;
  sensim_lidar_config_init(&lidar, SENSIM_PATTERN_VLP16);
  lidar.distance_noise.stddev_base = 0.01;
  lidar.layout = SENSIM_LAYOUT_VELODYNE;
  if ((st = sensim_create_lidar(cli, &s, &lidar)) != SENSIM_OK) {
    die(cli, "create_lidar", st);
  }

  // rays for a raycast inside the last interval (between its state and its step), each at its
  // own time
  static double org[NRAYS][3], dirs[NRAYS][3], times[NRAYS];
  for (int i = 0; i < NRAYS; i++) {
    double a = 0.0013 * i * 7.0, e = -0.35 + 0.5 * (i % 97) / 97.0;
    org[i][0] = 0.1 * (i % 5), org[i][1] = -0.2, org[i][2] = 1.0;
    dirs[i][0] = cos(e) * cos(a), dirs[i][1] = cos(e) * sin(a), dirs[i][2] = sin(e);
    times[i] = 0.1 + 0.025 * (i % 101) / 100.0;
  }
  static sensim_hit_t hits[NRAYS];
  sensim_raycast_t rays;
  sensim_raycast_init(&rays);
  rays.nrays = NRAYS;
  rays.origins = &org[0][0];
  rays.directions = &dirs[0][0];
  rays.times = times;
  rays.ntimes = NRAYS;
  rays.max_range = 40.0;

  // steps: the body (and its ball) drives along y and turns
  static double poses[STEPS][7];
  const sensim_step_result_t* r = NULL;
  uint32_t ids[1] = {1};
  for (int k = 0; k < STEPS; k++) {
    double t = 0.025 * k;
    double* p = poses[k];
    p[0] = 0.0, p[1] = 12.0 * t, p[2] = 0.0;
    p[3] = 0.0, p[4] = 0.0, p[5] = sin(0.5 * t), p[6] = cos(0.5 * t);
    sensim_state_t state;
    sensim_state_init(&state);
    state.time = t;
    state.nbodies = 1;
    state.body_ids = ids;
    state.body_poses = p;
    sensim_step_t step;
    sensim_step_init(&step);
    step.time = t;
    if (k == STEPS - 1) {
      if ((st = sensim_update_state(cli, &state)) != SENSIM_OK) {
        die(cli, "update_state", st);
      }
      if ((st = sensim_raycast(cli, &rays, hits, NULL)) != SENSIM_OK) {
        die(cli, "raycast", st);
      }
      st = sensim_step(cli, &step, &r);
    } else {
      st = sensim_update_and_step(cli, &state, &step, &r);
    }
    if (st != SENSIM_OK) {
      die(cli, "step", st);
    }
    if (k == STEPS - 1) {
      if (r->noutputs != 1 || r->outputs[0].kind != SENSIM_PAYLOAD_POINT_CLOUD) {
        fprintf(stderr, "sensim_c_parity: the last step has %u records, not one cloud\n",
                r->noutputs);
        return 1;
      }
      const sensim_point_cloud_t* c = &r->outputs[0].point_cloud;
      save(dir, "cloud.bin", c->data, c->size);
      char path[4096];
      snprintf(path, sizeof(path), "%s/cloud.txt", dir);
      FILE* f = fopen(path, "w");
      for (uint32_t i = 0; f && i < c->nfields; i++) {
        fprintf(f, "%s %u %d %u\n", c->fields[i].name, c->fields[i].offset,
                (int)c->fields[i].datatype, c->fields[i].count);
      }
      if (!f || fprintf(f, "point_step %u\ncount %u\n", c->point_step, c->count) < 0 ||
          fclose(f) != 0) {
        fprintf(stderr, "sensim_c_parity: cannot write %s\n", path);
        return 1;
      }
    }
  }
  save(dir, "poses.f64", poses, sizeof(poses));

  save(dir, "origins.f64", org, sizeof(org));
  save(dir, "directions.f64", dirs, sizeof(dirs));
  save(dir, "times.f64", times, sizeof(times));
  save(dir, "hits.bin", hits, sizeof(hits));
  sensim_client_close(cli);
  return 0;
}
