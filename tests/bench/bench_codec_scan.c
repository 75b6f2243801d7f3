// SPDX-License-Identifier: MIT
// bench_codec_scan.c: see bench_codec_scan.h.
#include "bench_codec_scan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/pool.h"
#include "bench_util.h"
#include "codec/codec.h"
#include "lidar/lidar.h"
#include "world/env.h"


static void check(int rc, const err_msg_t* msg, const char* what) {
  if (rc != 0) {
    bench_die("%s: %s", what, msg->text);
  }
}


uint32_t scan_objects(scan_object_t* out) {
  uint32_t n = 0;
  out[n++] = (scan_object_t){1, {0, 0, 0}};
  for (int side = -1; side <= 1; side += 2) {
    for (int k = -6; k <= 6; k++) {
      double x = 14.0 * k + 3.0 * side;
      out[n++] = (scan_object_t){2, {x, side * (12.0 + 2.0 * (k & 1)), 5.0}};
      out[n++] = (scan_object_t){3, {x, side * 6.5, 3.0}};
      if (k % 2 == 0) {
        out[n++] = (scan_object_t){4, {x + 4.0, side * 4.5, 0.7}};
      }
    }
  }
  return n;
}


struct scan_world {
  scene_device_t* dev;
  pool_t* pool;
  env_t* e;
  double t;
};


scan_world_t* scan_world_create(unsigned threads) {
  err_msg_t msg = {0};
  scan_world_t* w = bench_xmalloc(sizeof(*w));
  w->dev = scene_device_create(&msg);
  w->pool = threads > 1 ? pool_create(threads) : NULL;
  env_limits_t lim = env_default_limits();
  w->e = w->dev ? env_create("bench", &lim, w->dev, w->pool, &msg) : NULL;
  if (!w->e) {
    bench_die("environment: %s", msg.text);
  }
  prim_desc_t prims[4] = {
      {.id = 1, .kind = SCENE_PRIM_PLANE, .size = {200.0}},
      {.id = 2, .kind = SCENE_PRIM_BOX, .size = {6.0, 4.0, 5.0}},
      {.id = 3, .kind = SCENE_PRIM_CYLINDER, .size = {0.15, 3.0}},
      {.id = 4, .kind = SCENE_PRIM_BOX, .size = {2.2, 0.9, 0.7}},
  };
  for (int g = 0; g < 4; g++) {
    check(env_create_primitive(w->e, &prims[g], &msg), &msg, "primitive");
  }
  scan_object_t objs[128];
  uint32_t nobj = scan_objects(objs);
  for (uint32_t i = 0; i < nobj; i++) {
    object_desc_t o = {.id = i + 1, .geometry_id = objs[i].geom, .local_pose = xform_identity(),
                       .scale = {1, 1, 1}};
    memcpy(o.local_pose.p, objs[i].pos, sizeof(objs[i].pos));
    check(env_create_object(w->e, &o, &msg), &msg, "object");
  }
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
  sensor_desc_t sd = {.id = 1, .mount = xform_identity()};
  sd.mount.p[2] = SCAN_LIDAR_HEIGHT;
  check(lidar_create(&d, &sd.sensor, &msg), &msg, "lidar_create");
  check(env_create_sensor(w->e, &sd, &msg), &msg, "env_create_sensor");
  env_state_update_t u = {.time = 0.0};
  check(env_update_state(w->e, &u, &msg), &msg, "state");
  w->t = 0.0;
  return w;
}


const uint8_t* scan_world_step(scan_world_t* w, uint32_t* count, uint32_t* point_step) {
  err_msg_t msg = {0};
  w->t += 0.1;
  env_state_update_t u = {.time = w->t};
  check(env_update_state(w->e, &u, &msg), &msg, "state");
  check(env_step(w->e, w->t, &msg), &msg, "step");
  const sensor_out_t* out = env_outputs(w->e);
  if (out->n != 1 || out->rec[0].kind != SENSOR_REC_CLOUD) {
    bench_die("expected one cloud, got %u records", out->n);
  }
  *count = out->rec[0].u.cloud.count;
  *point_step = out->rec[0].u.cloud.point_step;
  return out->rec[0].u.cloud.data;
}


const float* scan_world_azimuths(const scan_world_t* w, uint32_t* stride) {
  const sensor_out_t* out = env_outputs(w->e);
  if (out->n != 1 || !out->rec[0].u.cloud.azimuth) {
    bench_die("the lidar gives no azimuths beside its points");
  }
  *stride = out->rec[0].u.cloud.stride;
  return out->rec[0].u.cloud.azimuth;
}


void scan_world_destroy(scan_world_t* w) {
  env_destroy(w->e);
  pool_destroy(w->pool);
  scene_device_destroy(w->dev);
  free(w);
}


uint8_t* scan_make_fed(uint32_t* count, uint32_t* point_step, float** azimuth,
                       uint32_t* stride) {
  scan_world_t* w = scan_world_create(1);
  const uint8_t* data = scan_world_step(w, count, point_step);
  size_t bytes = (size_t)*count * *point_step;
  uint8_t* pts = bench_xmalloc(bytes);
  memcpy(pts, data, bytes);
  if (azimuth) {
    const float* az = scan_world_azimuths(w, stride);
    *azimuth = bench_xmalloc((size_t)*count * sizeof(float) + 1);
    memcpy(*azimuth, az, (size_t)*count * sizeof(float));
  }
  scan_world_destroy(w);
  return pts;
}


uint8_t* scan_make(uint32_t* count, uint32_t* point_step) {
  return scan_make_fed(count, point_step, NULL, NULL);
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


size_t scan_encode_fed(int encoding, int level, double precision, const uint8_t* pts,
                       uint32_t count, uint32_t step, const float* azimuth, uint32_t stride,
                       uint8_t* out, double* max_error) {
  codec_params_t p = {.encoding = (codec_encoding_t)encoding, .level = level,
                      .precision = precision};
  codec_cloud_t c = cloud(pts, count, step);
  c.azimuth = azimuth;
  c.stride = stride;
  size_t len;
  err_msg_t msg;
  check(codec_encode(&p, &c, out, codec_max_size(&p, &c), &len, max_error, &msg), &msg,
        "codec_encode");
  return len;
}


size_t scan_encode(int encoding, int level, double precision, const uint8_t* pts, uint32_t count,
                   uint32_t step, uint8_t* out, double* max_error) {
  return scan_encode_fed(encoding, level, precision, pts, count, step, NULL, 0, out, max_error);
}


int scan_decode_checked(int encoding, const uint8_t* in, size_t len, uint32_t count,
                        uint32_t step, uint8_t* out) {
  err_msg_t msg;
  return codec_decode((codec_encoding_t)encoding, in, len, count, step, out, &msg);
}


void scan_decode(int encoding, const uint8_t* in, size_t len, uint32_t count, uint32_t step,
                 uint8_t* out) {
  err_msg_t msg;
  check(codec_decode((codec_encoding_t)encoding, in, len, count, step, out, &msg), &msg,
        "codec_decode");
}
