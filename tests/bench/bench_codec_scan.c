// SPDX-License-Identifier: MIT
// bench_codec_scan.c: see bench_codec_scan.h.
#include "bench_codec_scan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "codec/codec.h"
#include "lidar/lidar.h"
#include "world/env.h"


static void check(int rc, const err_msg_t* msg, const char* what) {
  if (rc != 0) {
    bench_die("%s: %s", what, msg->text);
  }
}


uint8_t* scan_make(uint32_t* count, uint32_t* point_step) {
  err_msg_t msg = {0};
  scene_device_t* dev = scene_device_create(&msg);
  env_limits_t lim = env_default_limits();
  env_t* e = env_create("bench", &lim, dev, NULL, &msg);
  if (!dev || !e) {
    bench_die("environment: %s", msg.text);
  }

  // a ground plane, two rows of building blocks along a street, poles and parked cars
  prim_desc_t ground = {.id = 1, .kind = SCENE_PRIM_PLANE, .size = {200.0}};
  prim_desc_t block = {.id = 2, .kind = SCENE_PRIM_BOX, .size = {6.0, 4.0, 5.0}};
  prim_desc_t pole = {.id = 3, .kind = SCENE_PRIM_CYLINDER, .size = {0.15, 3.0}};
  prim_desc_t car = {.id = 4, .kind = SCENE_PRIM_BOX, .size = {2.2, 0.9, 0.7}};
  check(env_create_primitive(e, &ground, &msg), &msg, "plane");
  check(env_create_primitive(e, &block, &msg), &msg, "block");
  check(env_create_primitive(e, &pole, &msg), &msg, "pole");
  check(env_create_primitive(e, &car, &msg), &msg, "car");
  uint32_t id = 1;
  object_desc_t g = {.id = id++, .geometry_id = 1, .local_pose = xform_identity(),
                     .scale = {1, 1, 1}};
  check(env_create_object(e, &g, &msg), &msg, "ground");
  for (int side = -1; side <= 1; side += 2) {
    for (int k = -6; k <= 6; k++) {
      object_desc_t o = {.id = id++, .geometry_id = 2, .local_pose = xform_identity(),
                         .scale = {1, 1, 1}};
      o.local_pose.p[0] = 14.0 * k + 3.0 * side;
      o.local_pose.p[1] = side * (12.0 + 2.0 * (k & 1));
      o.local_pose.p[2] = 5.0;
      check(env_create_object(e, &o, &msg), &msg, "block");
      object_desc_t p = o;
      p.id = id++;
      p.geometry_id = 3;
      p.local_pose.p[1] = side * 6.5;
      p.local_pose.p[2] = 3.0;
      check(env_create_object(e, &p, &msg), &msg, "pole");
      if (k % 2 == 0) {
        object_desc_t c = o;
        c.id = id++;
        c.geometry_id = 4;
        c.local_pose.p[0] += 4.0;
        c.local_pose.p[1] = side * 4.5;
        c.local_pose.p[2] = 0.7;
        check(env_create_object(e, &c, &msg), &msg, "car");
      }
    }
  }

  // the lidar 1.8 m above the street
  lidar_desc_t d;
  memset(&d, 0, sizeof d);
  d.returns.range_min = 0.1;
  d.returns.range_max = 120.0;
  d.returns.depth = 1;
  d.returns.distance_noise.stddev_base = 0.01;
  d.misses = LIDAR_MISS_ZERO;
  lidar_ouster_desc_t od = {.channels = 128, .columns = 2048, .frequency = 10.0,
                            .elevation_max = NAN, .elevation_min = NAN};
  check(lidar_pattern_ouster_init(&d.pattern, &od, "ouster", &msg), &msg, "ouster");
  sensor_desc_t s = {.id = 1, .mount = xform_identity()};
  s.mount.p[2] = 1.8;
  check(lidar_create(&d, &s.sensor, &msg), &msg, "lidar_create");
  check(env_create_sensor(e, &s, &msg), &msg, "env_create_sensor");
  env_state_update_t u = {.time = 0.0};
  check(env_update_state(e, &u, &msg), &msg, "state");
  u.time = 0.1;
  check(env_update_state(e, &u, &msg), &msg, "state");
  check(env_step(e, 0.1, &msg), &msg, "step");
  const sensor_out_t* out = env_outputs(e);
  if (out->n != 1 || out->rec[0].kind != SENSOR_REC_CLOUD) {
    bench_die("expected one cloud, got %u records", out->n);
  }
  const sensor_cloud_t* c = &out->rec[0].u.cloud;
  size_t bytes = (size_t)c->count * c->point_step;
  uint8_t* pts = bench_xmalloc(bytes);
  memcpy(pts, c->data, bytes);
  *count = c->count;
  *point_step = c->point_step;
  env_destroy(e);
  scene_device_destroy(dev);
  return pts;
}


static codec_cloud_t cloud(const uint8_t* pts, uint32_t count, uint32_t step) {
  return (codec_cloud_t){.data = pts, .count = count, .point_step = step,
                         .xyz_offset = {0, 4, 8}};
}


size_t scan_max_size(int encoding, const uint8_t* pts, uint32_t count, uint32_t step) {
  codec_params_t p = {.encoding = (codec_encoding_t)encoding};
  codec_cloud_t c = cloud(pts, count, step);
  return codec_max_size(&p, &c);
}


size_t scan_encode(int encoding, int level, double precision, const uint8_t* pts, uint32_t count,
                   uint32_t step, uint8_t* out, double* max_error) {
  codec_params_t p = {.encoding = (codec_encoding_t)encoding, .level = level,
                      .precision = precision};
  codec_cloud_t c = cloud(pts, count, step);
  size_t len;
  err_msg_t msg;
  check(codec_encode(&p, &c, out, codec_max_size(&p, &c), &len, max_error, &msg), &msg,
        "codec_encode");
  return len;
}


void scan_decode(int encoding, const uint8_t* in, size_t len, uint32_t count, uint32_t step,
                 uint8_t* out) {
  err_msg_t msg;
  check(codec_decode((codec_encoding_t)encoding, in, len, count, step, out, &msg), &msg,
        "codec_decode");
}
