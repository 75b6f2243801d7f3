// SPDX-License-Identifier: MIT
// raycast.c: build a small scene (a ground plane, a sphere and a box) and trace rays against it
// from the engine's own arrays; the hits land in the engine's buffer.
//
//   sensim_raycast [--host H] [--port P] [--extra N]
//
// Prints one line per named ray ("ray NAME distance D object O label L normal X Y Z") and,
// with --extra N, traces N more rays straight down (they all meet the ground 1 m below: a
// large raycast goes as parts in flight) and prints how many hit at 1 m.
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sensim/sensim.h>


static int fail(sensim_client_t* cli, const char* what, sensim_status_t st) {
  fprintf(stderr, "sensim_raycast: %s: %s (%s)\n", what, sensim_client_last_error(cli),
          sensim_status_name(st));
  sensim_client_close(cli);
  return 1;
}


// Ground (object 1, label 1), sphere of radius 1 at (5, 0, 1) (object 2, label 2), cube of side
// 1 at (0, 5, 1) (object 3, label 3).
static sensim_status_t build(sensim_client_t* cli) {
  static const struct {
    sensim_shape_t shape;
    double size, x, y, z;
  } k[3] = {{SENSIM_SHAPE_PLANE, 0, 0, 0, 0},
            {SENSIM_SHAPE_SPHERE, 1.0, 5, 0, 1},
            {SENSIM_SHAPE_BOX, 0.5, 0, 5, 1.0}};
  for (uint32_t i = 0; i < 3; i++) {
    sensim_primitive_t prim;
    sensim_primitive_init(&prim);
    prim.id = i + 1;
    prim.shape = k[i].shape;
    prim.radius = k[i].size;
    prim.half_extents[0] = prim.half_extents[1] = prim.half_extents[2] = k[i].size;
    sensim_status_t st = sensim_create_primitive(cli, &prim);
    if (st != SENSIM_OK) {
      return st;
    }
    sensim_object_t obj;
    sensim_object_init(&obj);
    obj.id = i + 1;
    obj.geometry_id = i + 1;
    obj.label = i + 1;
    obj.local_pose.position[0] = k[i].x;
    obj.local_pose.position[1] = k[i].y;
    obj.local_pose.position[2] = k[i].z;
    if ((st = sensim_create_object(cli, &obj)) != SENSIM_OK) {
      return st;
    }
  }
  return SENSIM_OK;
}


int main(int argc, char** argv) {
  const char* host = "127.0.0.1";
  unsigned long port = 7700, extra = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    char* end = NULL;
    errno = 0;
    unsigned long v = strtoul(argv[i + 1], &end, 10);
    if (strcmp(argv[i], "--host") == 0) {
      host = argv[i + 1];
    } else if (errno || *end || end == argv[i + 1]) {
      fprintf(stderr, "sensim_raycast: %s '%s' must be a number\n", argv[i], argv[i + 1]);
      return 2;
    } else if (strcmp(argv[i], "--port") == 0 && v > 0 && v <= 65535) {
      port = v;
    } else if (strcmp(argv[i], "--extra") == 0 && v <= (1ul << 22)) {
      extra = v;
    } else {
      fprintf(stderr, "usage: sensim_raycast [--host H] [--port P] [--extra N]\n");
      return 2;
    }
  }
  if (argc % 2 == 0) {
    fprintf(stderr, "usage: sensim_raycast [--host H] [--port P] [--extra N]\n");
    return 2;
  }

  sensim_options_t opts;
  sensim_options_init(&opts);
  opts.environment = "raycast_example";
  opts.client_name = "sensim_raycast";
  sensim_client_t* cli = NULL;
  sensim_status_t st = sensim_client_connect(host, (uint16_t)port, &opts, &cli);
  if (st != SENSIM_OK) {
    return fail(cli, "connect", st);
  }
  if ((st = build(cli)) != SENSIM_OK) {
    return fail(cli, "building the scene", st);
  }

  // four named rays from 1 m above the origin
  static const char* const names[4] = {"sphere", "box", "ground", "sky"};
  double origins[4][3], directions[4][3] = {{1, 0, 0}, {0, 1, 0}, {0, 0, -1}, {0, 0, 1}};
  for (int i = 0; i < 4; i++) {
    origins[i][0] = origins[i][1] = 0.0;
    origins[i][2] = 1.0;
  }
  sensim_hit_t hits[4];
  sensim_raycast_t rays;
  sensim_raycast_init(&rays);
  rays.nrays = 4;
  rays.origins = &origins[0][0];
  rays.directions = &directions[0][0];
  if ((st = sensim_raycast(cli, &rays, hits, NULL)) != SENSIM_OK) {
    return fail(cli, "raycast", st);
  }
  for (int i = 0; i < 4; i++) {
    printf("ray %s distance %.9g object %" PRIu32 " label %" PRIu32 " normal %g %g %g\n",
           names[i], hits[i].distance, hits[i].object_id, hits[i].label, hits[i].normal[0],
           hits[i].normal[1], hits[i].normal[2]);
  }

  // many rays: a grid looking down from 1 m
  if (extra > 0) {
    double* org = malloc(3 * sizeof(double) * extra);
    double* dir = malloc(3 * sizeof(double) * extra);
    sensim_hit_t* many = malloc(sizeof(sensim_hit_t) * extra);
    if (!org || !dir || !many) {
      fprintf(stderr, "sensim_raycast: out of memory\n");
      return 1;
    }
    for (unsigned long i = 0; i < extra; i++) {
      org[3 * i] = -100.0 + 200.0 * (double)(i % 1000) / 1000.0;
      org[3 * i + 1] = 20.0 + 200.0 * (double)(i / 1000 % 1000) / 1000.0;  // clear of the objects
      org[3 * i + 2] = 1.0;
      dir[3 * i] = dir[3 * i + 1] = 0.0;
      dir[3 * i + 2] = -1.0;
    }
    rays.nrays = (uint32_t)extra;
    rays.origins = org;
    rays.directions = dir;
    uint64_t serial = 0;
    if ((st = sensim_raycast(cli, &rays, many, &serial)) != SENSIM_OK) {
      return fail(cli, "raycast of the grid", st);
    }
    unsigned long ground = 0;
    for (unsigned long i = 0; i < extra; i++) {
      ground += fabs(many[i].distance - 1.0) < 1e-6 && many[i].object_id == 1;
    }
    printf("grid %lu rays, %lu on the ground at 1 m, world_serial %" PRIu64 "\n", extra, ground,
           serial);
    free(org);
    free(dir);
    free(many);
  }
  sensim_client_close(cli);
  return 0;
}
