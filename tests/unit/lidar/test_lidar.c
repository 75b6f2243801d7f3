// SPDX-License-Identifier: MIT
// test_lidar.c: the lidar sensor end to end in an environment (scene, bodies, steps) against
// analytic geometry: the centre of a hollow sphere sees its radius on every ray, a plane at an
// angle is seen at d / cos(theta), a wall moving towards the lidar at v is seen at d0 - v t_j,
// a VLP-16 in a closed room fires the firing table's times and azimuths in continuous time,
// the same revolution assembled from 1, 10 and 1000 steps is the same, 1 and 2 workers give
// the same bytes (on the segment heap's rows and on the depth-1 packets of tiles), misses are
// removed or kept, bad configurations name their field; the Ouster point type on an Ouster
// pattern is organised as ouster_ros publishes it (rows = beams from the top, destaggered
// columns, a pixel per ray and return, misses and unfired columns at NaN).
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "base/pool.h"
#include "base/simd.h"
#include "check.h"
#include "codec/codec.h"
#include "lidar/lidar.h"
#include "material/ambient.h"
#include "material/material.h"
#include "world/env.h"

#define DEG (M_PI / 180.0)

//---------------- Fixture

typedef struct fx {
  scene_device_t* dev;
  pool_t* pool;
  env_t* e;
} fx_t;


static int fx_open(fx_t* f, unsigned threads) {
  err_msg_t msg = {0};
  memset(f, 0, sizeof *f);
  f->dev = scene_device_create(&msg);
  if (!f->dev) {
    CHECK_FAIL("scene_device_create: %s", msg.text);
  }
  if (threads > 0) {
    f->pool = pool_create(threads);
    ASSERT_TRUE(f->pool != NULL);
  }
  env_limits_t lim = env_default_limits();
  f->e = env_create("lidar", &lim, f->dev, f->pool, &msg);
  if (!f->e) {
    CHECK_FAIL("env_create: %s", msg.text);
  }

  // geometry tests read distances: a medium of refractive index 1 makes the optical path
  // length of a return its geometric distance (air's 1.000273 would add 0.027 %), and without
  // air's rare atmospheric returns every point lies on a surface
  ambient_material_t vacuum = ambient_default_air();
  vacuum.refractive_index = 1.0;
  vacuum.attenuation = 0.0;
  vacuum.return_scaling = 0.0;
  if (env_set_medium(f->e, 0, &vacuum, &msg)) {
    CHECK_FAIL("env_set_medium: %s", msg.text);
  }
  return 0;
}


static void fx_close(fx_t* f) {
  env_destroy(f->e);
  pool_destroy(f->pool);
  scene_device_destroy(f->dev);
}


// Primitive geometry `gid` and an object `oid` of it in `group` on body `body` at `pose`.
static int add_prim_in(env_t* e, uint32_t gid, uint32_t oid, scene_prim_kind_t kind, double a,
                       double b, double c, uint32_t body, pose_t pose, uint32_t group) {
  err_msg_t msg = {0};
  prim_desc_t p = {.id = gid, .kind = kind, .size = {a, b, c}};
  if (env_create_primitive(e, &p, &msg)) {
    CHECK_FAIL("env_create_primitive: %s", msg.text);
  }
  object_desc_t o = {.id = oid, .geometry_id = gid, .body_id = body, .local_pose = pose,
                     .scale = {1, 1, 1}, .label = 5, .group = group};
  if (env_create_object(e, &o, &msg)) {
    CHECK_FAIL("env_create_object: %s", msg.text);
  }
  return 0;
}


static int add_prim(env_t* e, uint32_t gid, uint32_t oid, scene_prim_kind_t kind, double a,
                    double b, double c, uint32_t body, pose_t pose) {
  return add_prim_in(e, gid, oid, kind, a, b, c, body, pose, 0);
}


static int add_lidar(env_t* e, uint32_t id, uint32_t body, pose_t mount, lidar_desc_t* d) {
  err_msg_t msg = {0};
  sensor_desc_t s = {.id = id, .body_id = body, .mount = mount};
  if (lidar_create(d, &s.sensor, &msg)) {
    lidar_pattern_close(&d->pattern);
    CHECK_FAIL("lidar_create: %s", msg.text);
  }
  if (env_create_sensor(e, &s, &msg)) {
    s.sensor.ops->destroy(s.sensor.self);
    CHECK_FAIL("env_create_sensor: %s", msg.text);
  }
  return 0;
}


// State at t (bodies: ids with poses px py pz qx qy qz qw).
static int set_state(env_t* e, double t, uint32_t nbody, const uint32_t* ids,
                     const double* poses) {
  err_msg_t msg = {0};
  env_state_update_t u = {.time = t, .nbody = nbody, .body_ids = ids, .body_poses = poses};
  if (env_update_state(e, &u, &msg)) {
    CHECK_FAIL("env_update_state(%g): %s", t, msg.text);
  }
  return 0;
}


static int do_step(env_t* e, double t) {
  err_msg_t msg = {0};
  if (env_step(e, t, &msg)) {
    CHECK_FAIL("env_step(%g): %s", t, msg.text);
  }
  return 0;
}


// Clouds collected over several steps (copies).
typedef struct clouds {
  sensor_record_t rec[4096];
  uint32_t n;
} clouds_t;


static void clouds_free(clouds_t* c) {
  for (uint32_t i = 0; i < c->n; i++) {
    mem_free(c->rec[i].u.cloud.data);
  }
  c->n = 0;
}


static int collect(env_t* e, uint32_t sensor, clouds_t* c) {
  const sensor_out_t* out = env_outputs(e);
  for (uint32_t i = 0; i < out->n; i++) {
    const sensor_record_t* r = &out->rec[i];
    if (r->sensor_id != sensor || r->kind != SENSOR_REC_CLOUD) {
      continue;
    }
    ASSERT_TRUE(c->n < 4096);
    sensor_record_t* d = &c->rec[c->n++];
    *d = *r;
    size_t bytes = (size_t)r->u.cloud.count * r->u.cloud.point_step;
    d->u.cloud.data = mem_alloc(bytes ? bytes : 1);
    ASSERT_TRUE(d->u.cloud.data != NULL);
    memcpy(d->u.cloud.data, r->u.cloud.data, bytes);
  }
  return 0;
}


// Static world, states at times t = t_from + k (t_to - t_from) / nstep, a step after each.
static int run(env_t* e, double t_from, double t_to, uint32_t nstep, uint32_t sensor,
               clouds_t* c) {
  for (uint32_t k = 1; k <= nstep; k++) {
    double t = k == nstep ? t_to : t_from + (t_to - t_from) * k / nstep;
    if (set_state(e, t, 0, NULL, NULL) || do_step(e, t) || collect(e, sensor, c)) {
      return 1;
    }
  }
  return 0;
}


// Body 2 at pose p0 at t = 0 and p1 at t = 0.1 (x y z qx qy qz qw), one step to 0.1: the one
// record of sensor 3 into c.
static int body_step(fx_t* f, const double p0[7], const double p1[7], clouds_t* c) {
  uint32_t ids[1] = {2};
  ASSERT_OK(set_state(f->e, 0.0, 1, ids, p0));
  ASSERT_OK(set_state(f->e, 0.1, 1, ids, p1));
  ASSERT_OK(do_step(f->e, 0.1));
  c->n = 0;
  ASSERT_OK(collect(f->e, 3, c));
  ASSERT_EQ(c->n, 1);
  return 0;
}


// Field of a cloud by name; -1 when absent.
static int field_of(const sensor_cloud_t* c, const char* name) {
  for (uint32_t i = 0; i < c->nfield; i++) {
    if (strcmp(c->fields[i].name, name) == 0) {
      return (int)c->fields[i].offset;
    }
  }
  return -1;
}


static float getf(const sensor_cloud_t* c, uint32_t i, int off) {
  float f;
  memcpy(&f, c->data + (size_t)i * c->point_step + off, 4);
  return f;
}


static uint32_t getu(const sensor_cloud_t* c, uint32_t i, int off, int size) {
  uint32_t u = 0;
  memcpy(&u, c->data + (size_t)i * c->point_step + off, (size_t)size);
  return u;
}


static const char* const kAllFields[] = {"x", "y", "z", "intensity", "ring", "azimuth",
                                         "elevation", "distance", "time_offset", "object_id",
                                         "label", "return_index", "return_count", "normal"};


static lidar_desc_t base_desc(void) {
  lidar_desc_t d;
  memset(&d, 0, sizeof d);
  d.returns.range_min = 0.1;
  d.returns.range_max = INFINITY;
  d.fields = kAllFields;
  d.nfield = 14;
  return d;
}


static pose_t at(double x, double y, double z) {
  pose_t p = xform_identity();
  p.p[0] = x;
  p.p[1] = y;
  p.p[2] = z;
  return p;
}


// base_desc() with a 64-channel spinning pattern of 512 columns at 10 Hz, each column fired
// at once (traced in tiles of 2 channels x 8 columns), elevations 0.04 rad apart.
static int spinning64_desc(lidar_desc_t* d) {
  enum { CHANNELS = 64, COLUMNS = 512 };
  *d = base_desc();
  double el[CHANNELS];
  for (int k = 0; k < CHANNELS; k++) {
    el[k] = (k - CHANNELS / 2) * 0.04;
  }
  lidar_spinning_desc_t sp = {.frequency = 10.0, .columns = COLUMNS, .elevations = el,
                              .nchannel = CHANNELS};
  err_msg_t msg = {0};
  ASSERT_OK(lidar_pattern_spinning_init(&d->pattern, &sp, "lidar.spinning", &msg));
  return 0;
}


// base_desc() with a VLP-16 pattern spinning at `frequency` Hz.
static int vlp16_desc(double frequency, lidar_desc_t* d) {
  *d = base_desc();
  lidar_vlp16_desc_t v = {.frequency = frequency};
  err_msg_t msg = {0};
  ASSERT_OK(lidar_pattern_vlp16_init(&d->pattern, &v, "lidar.vlp16", &msg));
  return 0;
}


// A fixture (fx_open) inside a hollow sphere of the given radius centred on the origin
// (group and object 1).
static int sphere_room(fx_t* f, unsigned threads, double radius) {
  ASSERT_OK(fx_open(f, threads));
  ASSERT_OK(add_prim(f->e, 1, 1, SCENE_PRIM_SPHERE, radius, 0, 0, 0, at(0, 0, 0)));
  return 0;
}


//---------------- Geometry

TEST(lidar_hollow_sphere_sees_its_radius) {
  // noise off: every ray at the radius (to float precision); noise on: within 4 sigma
  for (int noisy = 0; noisy < 2; noisy++) {
    fx_t f;
    ASSERT_OK(fx_open(&f, 2));
    const double radius = 7.5;
    ASSERT_OK(add_prim(f.e, 1, 1, SCENE_PRIM_SPHERE, radius, 0, 0, 0, at(0, 0, 0)));
    lidar_desc_t d = base_desc();
    lidar_ouster_desc_t o = {.channels = 64, .columns = 512, .frequency = 10.0,
                             .elevation_max = NAN, .elevation_min = NAN};
    err_msg_t msg = {0};
    ASSERT_OK(lidar_pattern_ouster_init(&d.pattern, &o, "lidar.ouster", &msg));
    const double sigma = 0.02;
    if (noisy) {
      d.returns.distance_noise.stddev_base = sigma;
    }
    ASSERT_OK(add_lidar(f.e, 3, 0, xform_identity(), &d));
    ASSERT_OK(set_state(f.e, 0.0, 0, NULL, NULL));
    static clouds_t c;
    c.n = 0;
    ASSERT_OK(run(f.e, 0.0, 0.1, 3, 3, &c));
    ASSERT_EQ(c.n, 1);
    const sensor_cloud_t* pc = &c.rec[0].u.cloud;
    ASSERT_EQ(pc->count, 64 * 512);
    ASSERT_TRUE(pc->complete);
    int ox = field_of(pc, "x"), oy = field_of(pc, "y"), oz = field_of(pc, "z");
    int od = field_of(pc, "distance"), oo = field_of(pc, "object_id");
    double sum = 0, sum2 = 0;
    for (uint32_t i = 0; i < pc->count; i++) {
      double x = getf(pc, i, ox), y = getf(pc, i, oy), z = getf(pc, i, oz);
      double dist = getf(pc, i, od);
      ASSERT_EQ(getu(pc, i, oo, 4), 1);
      ASSERT_NEAR(sqrt(x * x + y * y + z * z), dist, 1e-5 * radius);
      if (noisy) {
        ASSERT_NEAR(dist, radius, 4.0 * sigma * 1.2);
        sum += dist - radius;
        sum2 += (dist - radius) * (dist - radius);
      } else {
        ASSERT_NEAR(dist, radius, 2e-6 * radius);
      }
    }
    if (noisy) {
      double n = pc->count;
      double mean = sum / n, sd = sqrt(sum2 / n - mean * mean);
      ASSERT_NEAR(mean, 0.0, 4.0 * sigma / sqrt(n));
      ASSERT_NEAR(sd, sigma, 4.0 * sigma / sqrt(2.0 * n));
    }
    clouds_free(&c);
    fx_close(&f);
  }
  return 0;
}


TEST(lidar_plane_at_an_angle) {
  // plane x = 4 (the z = 0 plane turned +90 degrees about y): a ray at azimuth a and elevation
  // e meets it at 4 / (cos e cos a)
  fx_t f;
  ASSERT_OK(fx_open(&f, 0));
  pose_t wall = at(4, 0, 0);
  wall.q[0] = cos(M_PI / 4);
  wall.q[2] = sin(M_PI / 4);
  ASSERT_OK(add_prim(f.e, 1, 1, SCENE_PRIM_PLANE, 0, 0, 0, 0, wall));
  lidar_desc_t d = base_desc();
  lidar_flash_desc_t fl = {.columns = 16, .rows = 9, .fov_horizontal = 100 * DEG,
                           .fov_vertical = 60 * DEG, .frame_rate = 20.0};
  err_msg_t msg = {0};
  ASSERT_OK(lidar_pattern_flash_init(&d.pattern, &fl, "lidar.flash", &msg));
  ASSERT_OK(add_lidar(f.e, 3, 0, xform_identity(), &d));
  ASSERT_OK(set_state(f.e, 0.0, 0, NULL, NULL));
  static clouds_t c;
  c.n = 0;
  ASSERT_OK(run(f.e, 0.0, 0.1, 1, 3, &c));
  ASSERT_EQ(c.n, 3);   // frames at 0, 0.05 and 0.1 (a flash frame is complete once fired)
  for (uint32_t r = 0; r < 3; r++) {
    const sensor_cloud_t* pc = &c.rec[r].u.cloud;
    ASSERT_EQ(pc->count, 16 * 9);
    ASSERT_EQ(c.rec[r].frame, r);
    ASSERT_NEAR(pc->frame_start_time, 0.05 * r, 1e-15);
    int od = field_of(pc, "distance"), oa = field_of(pc, "azimuth"), oe = field_of(pc, "elevation");
    int ox = field_of(pc, "x"), on = field_of(pc, "normal");
    for (uint32_t i = 0; i < pc->count; i++) {
      double a = getf(pc, i, oa), e = getf(pc, i, oe);
      double expect = 4.0 / (cos(e) * cos(a));
      ASSERT_NEAR(getf(pc, i, od), expect, 1e-5 * expect);
      ASSERT_NEAR(getf(pc, i, ox), 4.0, 1e-5 * expect);
      ASSERT_NEAR(getf(pc, i, on), -1.0, 1e-6);   // facing the lidar
    }
  }
  clouds_free(&c);
  fx_close(&f);
  return 0;
}


TEST(lidar_moving_wall_is_seen_where_it_is_at_each_ray_time) {
  // wall (plane facing -x) on body 2 at x = d0 at t = 0, moving at -v along x; rays along +x
  // fired at t_j: range d0 - v t_j
  fx_t f;
  ASSERT_OK(fx_open(&f, 2));
  err_msg_t msg = {0};
  body_desc_t b = {.id = 2, .pose = at(10, 0, 0)};
  ASSERT_OK(env_create_body(f.e, &b, &msg));
  pose_t local = xform_identity();
  local.q[0] = cos(M_PI / 4);
  local.q[2] = sin(M_PI / 4);
  ASSERT_OK(add_prim(f.e, 1, 1, SCENE_PRIM_PLANE, 0, 0, 0, 2, local));
  enum { N = 50 };
  double az[N], el[N], tt[N];
  for (int j = 0; j < N; j++) {
    az[j] = 0.0;
    el[j] = 0.0;
    tt[j] = 0.1 * j / N;
  }
  lidar_desc_t d = base_desc();
  lidar_custom_desc_t cu = {.azimuths = az, .elevations = el, .time_offsets = tt,
                            .ntime_offset = N, .nray = N, .frame_rate = 10.0};
  ASSERT_OK(lidar_pattern_custom_init(&d.pattern, &cu, "lidar.custom", &msg));
  ASSERT_OK(add_lidar(f.e, 3, 0, xform_identity(), &d));
  const double d0 = 10.0, v = 20.0;
  uint32_t ids[1] = {2};
  double p0[7] = {d0, 0, 0, 0, 0, 0, 1};
  ASSERT_OK(set_state(f.e, 0.0, 1, ids, p0));
  static clouds_t c;
  c.n = 0;
  for (int k = 1; k <= 4; k++) {   // 4 steps of 25 ms
    double t = 0.025 * k;
    double pk[7] = {d0 - v * t, 0, 0, 0, 0, 0, 1};
    ASSERT_OK(set_state(f.e, t, 1, ids, pk));
    ASSERT_OK(do_step(f.e, t));
    ASSERT_OK(collect(f.e, 3, &c));
  }
  ASSERT_EQ(c.n, 1);
  const sensor_cloud_t* pc = &c.rec[0].u.cloud;
  ASSERT_EQ(pc->count, N);
  int od = field_of(pc, "distance"), ot = field_of(pc, "time_offset");
  for (uint32_t j = 0; j < N; j++) {
    double tj = getf(pc, j, ot);
    ASSERT_NEAR(tj, tt[j], 1e-7);
    ASSERT_NEAR(getf(pc, j, od), d0 - v * tt[j], 2e-5);
  }
  clouds_free(&c);
  fx_close(&f);
  return 0;
}


//---------------- Timing

TEST(lidar_vlp16_closed_room_times_and_azimuths) {
  fx_t f;
  ASSERT_OK(sphere_room(&f, 2, 20.0));
  lidar_desc_t d;
  ASSERT_OK(vlp16_desc(10.0, &d));
  ASSERT_OK(add_lidar(f.e, 3, 0, xform_identity(), &d));
  ASSERT_OK(set_state(f.e, 0.0, 0, NULL, NULL));
  static clouds_t c;
  c.n = 0;
  ASSERT_OK(run(f.e, 0.0, 10.0, 100, 3, &c));   // 100 revolutions in steps of 0.1 s
  ASSERT_EQ(c.n, 100);

  // per revolution: 1808 or 1809 whole sequences of 16; over 10 s 289,352 points per second
  uint64_t total = 0;
  for (uint32_t r = 0; r < c.n; r++) {
    const sensor_cloud_t* pc = &c.rec[r].u.cloud;
    ASSERT_TRUE(pc->count == 1808 * 16 || pc->count == 1809 * 16);
    ASSERT_TRUE(pc->complete);
    ASSERT_NEAR(pc->frame_start_time, 0.1 * r, 1e-12);
    total += pc->count;
  }
  ASSERT_EQ(total, 2893520);   // 289,352 points/s

  // every point of revolution 37: its sequence n (counted from t = 0) and laser j give its
  // time t = n T_seq + 2.304 us j and azimuth -2 pi f t
  const sensor_cloud_t* pc = &c.rec[37].u.cloud;
  int ot = field_of(pc, "time_offset"), oa = field_of(pc, "azimuth"), orr = field_of(pc, "ring");
  int ox = field_of(pc, "x"), oy = field_of(pc, "y"), oe = field_of(pc, "elevation");
  uint64_t n0 = (uint64_t)ceil(3.7 / 55.296e-6);
  static const double kEl[16] = {-15, 1, -13, 3, -11, 5, -9, 7, -7, 9, -5, 11, -3, 13, -1, 15};
  for (uint32_t i = 0; i < pc->count; i++) {
    uint32_t j = i % 16;
    uint64_t n = n0 + i / 16;
    double t = n * 55.296e-6 + j * 2.304e-6;
    ASSERT_EQ(getu(pc, i, orr, 2), j);
    ASSERT_NEAR(getf(pc, i, ot), t - 3.7, 1e-8);   // float32 time offsets
    double phi = remainder(-2.0 * M_PI * 10.0 * t, 2.0 * M_PI);
    ASSERT_NEAR(remainder(getf(pc, i, oa) - phi, 2.0 * M_PI), 0.0, 1e-6);
    ASSERT_NEAR(remainder(atan2(getf(pc, i, oy), getf(pc, i, ox)) - phi, 2.0 * M_PI), 0.0, 1e-5);
    ASSERT_NEAR(getf(pc, i, oe), kEl[j] * DEG, 1e-6);
  }
  clouds_free(&c);
  fx_close(&f);
  return 0;
}


// Lidar d (its pattern built) in a room of radius 15 m with a box, stepped from 0 to 0.15 s in
// nstep steps; its clouds into c.
static int room_revolution(lidar_desc_t* d, uint32_t nstep, unsigned threads, clouds_t* c) {
  fx_t f;
  ASSERT_OK(sphere_room(&f, threads, 15.0));
  ASSERT_OK(add_prim(f.e, 2, 2, SCENE_PRIM_BOX, 1, 2, 3, 0, at(4, 1, 0)));
  ASSERT_OK(add_lidar(f.e, 3, 0, at(0.5, -0.25, 1.0), d));
  ASSERT_OK(set_state(f.e, 0.0, 0, NULL, NULL));
  c->n = 0;
  ASSERT_OK(run(f.e, 0.0, 0.15, nstep, 3, c));
  fx_close(&f);
  return 0;
}


// First complete revolution of a VLP-16 in the room.
static int vlp16_revolution(uint32_t nstep, unsigned threads, int noisy, clouds_t* c) {
  lidar_desc_t d = base_desc();
  lidar_vlp16_desc_t v = {.frequency = 10.0, .vertical_offsets = 1};
  err_msg_t msg = {0};
  ASSERT_OK(lidar_pattern_vlp16_init(&d.pattern, &v, "lidar.vlp16", &msg));
  if (noisy) {
    d.returns.distance_noise.stddev_base = 0.01;
    d.angle_noise.stddev = 0.001;
    d.returns.depth = 2;
  }
  return room_revolution(&d, nstep, threads, c);
}


TEST(lidar_same_revolution_from_1_10_and_1000_steps) {
  static clouds_t a, b, k;
  ASSERT_OK(vlp16_revolution(1, 0, 1, &a));
  ASSERT_OK(vlp16_revolution(10, 0, 1, &b));
  ASSERT_OK(vlp16_revolution(1000, 0, 1, &k));
  ASSERT_EQ(a.n, 1);
  ASSERT_EQ(b.n, 1);
  ASSERT_EQ(k.n, 1);
  const sensor_cloud_t* ca = &a.rec[0].u.cloud;
  ASSERT_EQ(ca->count, 1809 * 16);
  ASSERT_EQ(b.rec[0].u.cloud.count, ca->count);
  ASSERT_EQ(k.rec[0].u.cloud.count, ca->count);
  ASSERT_TRUE(memcmp(ca->data, b.rec[0].u.cloud.data, (size_t)ca->count * ca->point_step) == 0);
  ASSERT_TRUE(memcmp(ca->data, k.rec[0].u.cloud.data, (size_t)ca->count * ca->point_step) == 0);
  clouds_free(&a);
  clouds_free(&b);
  clouds_free(&k);
  return 0;
}


TEST(lidar_identical_at_1_and_2_workers) {
  static clouds_t a, b;
  ASSERT_OK(vlp16_revolution(7, 1, 1, &a));
  ASSERT_OK(vlp16_revolution(7, 2, 1, &b));
  ASSERT_EQ(a.n, 1);
  ASSERT_EQ(b.n, 1);
  const sensor_cloud_t* ca = &a.rec[0].u.cloud;
  ASSERT_EQ(b.rec[0].u.cloud.count, ca->count);
  ASSERT_TRUE(memcmp(ca->data, b.rec[0].u.cloud.data, (size_t)ca->count * ca->point_step) == 0);
  clouds_free(&a);
  clouds_free(&b);
  return 0;
}


// First complete revolution of a spinning lidar whose channels fire one after the other inside
// each column (so that steps end inside columns), traced at depth 1 in tiles (the packet path),
// with distance noise, in the room: in the default x y z intensity layout, or with every field.
// 32 channels with angle noise (rays made ray by ray), or (`lanes`) 64 without: whole chunks
// then made from the model's lanes (sweep.h), the chunks of steps that end inside a column or
// a chunk ray by ray.
static int tiled_revolution(uint32_t nstep, unsigned threads, int all_fields, int lanes,
                            clouds_t* c) {
  enum { MAX_CHANNELS = 64, COLUMNS = 1024 };
  const int channels = lanes ? 64 : 32;
  lidar_desc_t d = base_desc();
  if (!all_fields) {
    d.fields = NULL;
    d.nfield = 0;
  }
  double el[MAX_CHANNELS], dt[MAX_CHANNELS];
  for (int k = 0; k < channels; k++) {
    el[k] = (k - channels / 2) * 0.64 / channels;
    dt[k] = k * (0.1 / COLUMNS) / channels;
  }
  lidar_spinning_desc_t sp = {.frequency = 10.0, .columns = COLUMNS, .elevations = el,
                              .nchannel = (uint32_t)channels, .time_offsets = dt,
                              .ntime_offset = (uint32_t)channels};
  err_msg_t msg = {0};
  ASSERT_OK(lidar_pattern_spinning_init(&d.pattern, &sp, "lidar.spinning", &msg));
  d.returns.distance_noise.stddev_base = 0.01;
  d.angle_noise.stddev = lanes ? 0.0 : 0.001;
  return room_revolution(&d, nstep, threads, c);
}


// The packet path: a revolution is the same from 1, 7 and 1000 steps (steps ending inside
// columns, chunks starting inside groups) and at 1 and 2 workers, in both point writers, with
// its rays made ray by ray or (lanes) from tables where a whole chunk allows.
TEST(lidar_tiled_revolution_same_from_any_steps_and_workers) {
  static clouds_t a, b, k, w;
  for (int run = 0; run < 4; run++) {
    const int all_fields = run % 2, lanes = run / 2;
    ASSERT_OK(tiled_revolution(1, 0, all_fields, lanes, &a));
    ASSERT_OK(tiled_revolution(7, 0, all_fields, lanes, &b));
    ASSERT_OK(tiled_revolution(1000, 0, all_fields, lanes, &k));
    ASSERT_OK(tiled_revolution(7, 2, all_fields, lanes, &w));
    ASSERT_EQ(a.n, 1);
    const sensor_cloud_t* ca = &a.rec[0].u.cloud;
    ASSERT_EQ(ca->count, (lanes ? 64u : 32u) * 1024u);   // the room is closed: every ray has
                                                         //   its return
    const clouds_t* other[3] = {&b, &k, &w};
    for (int i = 0; i < 3; i++) {
      ASSERT_EQ(other[i]->n, 1);
      const sensor_cloud_t* co = &other[i]->rec[0].u.cloud;
      ASSERT_EQ(co->count, ca->count);
      ASSERT_TRUE(memcmp(ca->data, co->data, (size_t)ca->count * ca->point_step) == 0);
    }
    clouds_free(&a);
    clouds_free(&b);
    clouds_free(&k);
    clouds_free(&w);
  }
  return 0;
}


// A revolution of a 64-channel spinning lidar (columns fired at once: the packets of tiles)
// in the room filled with air that returns light (every fifth ray may take an atmospheric
// return), with distance noise (base, slope and mean), a detection threshold and a range
// limit that cuts the room's far side; traced at `depth`.
static int air_revolution(uint32_t depth, clouds_t* c) {
  lidar_desc_t d;
  ASSERT_OK(spinning64_desc(&d));
  err_msg_t msg = {0};
  d.returns.depth = depth;
  d.returns.range_max = 15.2;
  d.returns.intensity_threshold = 0.15;   // drops a few hundred of the darker returns
  d.returns.distance_noise.stddev_base = 0.01;
  d.returns.distance_noise.stddev_slope = 0.002;
  d.returns.distance_noise.mean = 0.003;
  fx_t f;
  ASSERT_OK(sphere_room(&f, 0, 15.0));
  ambient_material_t air = ambient_default_air();
  air.attenuation = 0.01;
  air.return_scaling = 0.2;
  ASSERT_OK(env_set_medium(f.e, 0, &air, &msg));
  ASSERT_OK(add_prim(f.e, 2, 2, SCENE_PRIM_BOX, 1, 2, 3, 0, at(4, 1, 0)));
  ASSERT_OK(add_lidar(f.e, 3, 0, at(0.5, -0.25, 1.0), &d));
  ASSERT_OK(set_state(f.e, 0.0, 0, NULL, NULL));
  c->n = 0;
  ASSERT_OK(run(f.e, 0.0, 0.1, 1, 3, c));
  fx_close(&f);
  return 0;
}


// Depth 1 (the packets of tiles and their all-lanes Lambertian path) and depth 2 (the segment
// heap in rows) give the same bytes where no segment has children (Lambertian surfaces):
// surface and atmospheric returns, ranges cut by the limit and the threshold, noisy distances
// in a medium of refractive index above 1.
TEST(lidar_depth_one_packets_equal_the_segment_heap_in_air) {
  static clouds_t a, b;
  ASSERT_OK(air_revolution(1, &a));
  ASSERT_OK(air_revolution(2, &b));
  ASSERT_EQ(a.n, 1);
  ASSERT_EQ(b.n, 1);
  const sensor_cloud_t* ca = &a.rec[0].u.cloud;
  const sensor_cloud_t* cb = &b.rec[0].u.cloud;
  ASSERT_EQ(cb->count, ca->count);
  ASSERT_TRUE(memcmp(ca->data, cb->data, (size_t)ca->count * ca->point_step) == 0);

  // the scene gives every kind of ray: surface returns, atmospheric ones, rays cut by range
  int od = field_of(ca, "distance"), oo = field_of(ca, "object_id");
  uint32_t surface = 0, atmospheric = 0;
  for (uint32_t i = 0; i < ca->count; i++) {
    double x = getf(ca, i, od);
    ASSERT_TRUE(x <= 15.2 + 0.2);
    surface += getu(ca, i, oo, 4) != 0;
    atmospheric += getu(ca, i, oo, 4) == 0;
  }
  ASSERT_TRUE(surface > 10000 && atmospheric > 100);
  ASSERT_TRUE(ca->count < 64u * 512u * 9u / 10u);
  clouds_free(&a);
  clouds_free(&b);
  return 0;
}


// A 64-channel lidar whose columns fire at once (traced in tiles of 2 channels x 8 columns, so
// a packet's rays come from 8 poses) on a body driving at 10 m/s through a hollow sphere of
// radius 5 centred on the origin: every point, in the sensor frame, put at the sensor's
// position at its time (y = -0.5 + 10 t, z = 0.5), lies on the sphere (a ray made at the pose
// of another column of its chunk would start up to 1.4 cm away and miss it by as much).
TEST(lidar_moving_tiles_fire_each_column_from_its_pose) {
  fx_t f;
  ASSERT_OK(sphere_room(&f, 0, 5.0));
  err_msg_t msg = {0};
  body_desc_t b = {.id = 2, .pose = at(0, 0, 0)};
  ASSERT_OK(env_create_body(f.e, &b, &msg));
  lidar_desc_t d;
  ASSERT_OK(spinning64_desc(&d));
  ASSERT_OK(add_lidar(f.e, 3, 2, at(0, 0, 0.5), &d));
  double p0[7] = {0, -0.5, 0, 0, 0, 0, 1}, p1[7] = {0, 0.5, 0, 0, 0, 0, 1};
  static clouds_t c;
  ASSERT_OK(body_step(&f, p0, p1, &c));
  const sensor_cloud_t* pc = &c.rec[0].u.cloud;
  ASSERT_EQ(pc->count, 64u * 512u);
  int ox = field_of(pc, "x"), oy = field_of(pc, "y"), oz = field_of(pc, "z");
  int ot = field_of(pc, "time_offset");
  for (uint32_t i = 0; i < pc->count; i++) {
    double t = getf(pc, i, ot);
    double x = getf(pc, i, ox), y = getf(pc, i, oy) - 0.5 + 10.0 * t, z = getf(pc, i, oz) + 0.5;
    ASSERT_NEAR(sqrt(x * x + y * y + z * z), 5.0, 1e-4);
  }
  clouds_free(&c);
  fx_close(&f);
  return 0;
}


TEST(lidar_publish_per_step_world_frame) {
  // sensor on a body moving at 1 m/s along y; world-frame points on a sphere of radius 5
  // centred on the origin lie on it; a record per step with time offsets from the step start
  fx_t f;
  ASSERT_OK(fx_open(&f, 0));
  err_msg_t msg = {0};
  body_desc_t b = {.id = 2, .pose = at(0, 0, 0)};
  ASSERT_OK(env_create_body(f.e, &b, &msg));
  ASSERT_OK(add_prim(f.e, 1, 1, SCENE_PRIM_SPHERE, 5.0, 0, 0, 0, at(0, 0, 0)));
  lidar_desc_t d = base_desc();
  d.world_frame = 1;
  d.publish_per_step = 1;
  lidar_ouster_desc_t o = {.channels = 16, .columns = 512, .frequency = 10.0,
                           .elevation_max = NAN, .elevation_min = NAN};
  ASSERT_OK(lidar_pattern_ouster_init(&d.pattern, &o, "lidar.ouster", &msg));
  ASSERT_OK(add_lidar(f.e, 3, 2, at(0, 0, 0.5), &d));
  uint32_t ids[1] = {2};
  double p0[7] = {0, 0, 0, 0, 0, 0, 1};
  ASSERT_OK(set_state(f.e, 0.0, 1, ids, p0));
  static clouds_t c;
  c.n = 0;
  for (int k = 1; k <= 4; k++) {
    double t = 0.03 * k;
    double pk[7] = {0, t, 0, 0, 0, 0, 1};
    ASSERT_OK(set_state(f.e, t, 1, ids, pk));
    ASSERT_OK(do_step(f.e, t));
    ASSERT_OK(collect(f.e, 3, &c));
  }
  ASSERT_EQ(c.n, 4);
  uint32_t total = 0;
  for (uint32_t r = 0; r < 4; r++) {
    const sensor_cloud_t* pc = &c.rec[r].u.cloud;
    ASSERT_EQ(c.rec[r].frame, r);
    ASSERT_TRUE(!pc->complete);
    ASSERT_TRUE(pc->world_frame);
    ASSERT_NEAR(pc->frame_start_time, 0.03 * r, 1e-15);
    int ox = field_of(pc, "x"), oy = field_of(pc, "y"), oz = field_of(pc, "z");
    int ot = field_of(pc, "time_offset");
    for (uint32_t i = 0; i < pc->count; i++) {
      double x = getf(pc, i, ox), y = getf(pc, i, oy), z = getf(pc, i, oz);
      ASSERT_NEAR(sqrt(x * x + y * y + z * z), 5.0, 5e-5);
      double tau = getf(pc, i, ot);
      ASSERT_TRUE(tau >= -1e-9 && tau <= 0.03 + 1e-9);
    }
    total += pc->count;
  }
  // rays in [0, 0.12]: columns 0 .. 614 (0.12 / 195.3125 us = 614.4)
  ASSERT_EQ(total, 615 * 16);
  clouds_free(&c);
  fx_close(&f);
  return 0;
}


//---------------- Misses and configuration

TEST(lidar_misses_removed_zero_or_nan) {
  // a flash grid looking at a wall that fills its left half only
  for (int mode = 0; mode < 3; mode++) {
    fx_t f;
    ASSERT_OK(fx_open(&f, 0));
    pose_t wall = at(5, 5, 0);   // the plane x = 5, y in [0, 10]
    wall.q[0] = cos(M_PI / 4);
    wall.q[2] = sin(M_PI / 4);
    ASSERT_OK(add_prim(f.e, 1, 1, SCENE_PRIM_PLANE, 5.0, 0, 0, 0, wall));
    lidar_desc_t d = base_desc();
    d.misses = (lidar_miss_mode_t)mode;
    lidar_flash_desc_t fl = {.columns = 8, .rows = 2, .fov_horizontal = 40 * DEG,
                             .fov_vertical = 10 * DEG, .frame_rate = 10.0};
    err_msg_t msg = {0};
    ASSERT_OK(lidar_pattern_flash_init(&d.pattern, &fl, "lidar.flash", &msg));
    ASSERT_OK(add_lidar(f.e, 3, 0, xform_identity(), &d));
    ASSERT_OK(set_state(f.e, 0.0, 0, NULL, NULL));
    static clouds_t c;
    c.n = 0;
    ASSERT_OK(run(f.e, 0.0, 0.05, 1, 3, &c));
    ASSERT_EQ(c.n, 1);
    const sensor_cloud_t* pc = &c.rec[0].u.cloud;
    ASSERT_EQ(pc->count, mode == LIDAR_MISS_REMOVE ? 8 : 16);
    int ox = field_of(pc, "x"), oy = field_of(pc, "y"), od = field_of(pc, "distance");
    int oc = field_of(pc, "return_count"), oa = field_of(pc, "azimuth");
    uint32_t hits = 0;
    for (uint32_t i = 0; i < pc->count; i++) {
      int hit = getf(pc, i, oa) > 0.0f;   // left half
      if (mode == LIDAR_MISS_REMOVE) {
        ASSERT_TRUE(hit);
      }
      if (hit) {
        hits++;
        ASSERT_NEAR(getf(pc, i, ox), 5.0, 1e-4);
        ASSERT_EQ(getu(pc, i, oc, 1), 1);
      } else if (mode == LIDAR_MISS_ZERO) {
        ASSERT_DEQ(getf(pc, i, ox), 0.0);
        ASSERT_DEQ(getf(pc, i, oy), 0.0);
        ASSERT_DEQ(getf(pc, i, od), 0.0);
        ASSERT_EQ(getu(pc, i, oc, 1), 0);
      } else {
        ASSERT_TRUE(isnan(getf(pc, i, ox)) && isnan(getf(pc, i, oy)) && isnan(getf(pc, i, od)));
      }
    }
    ASSERT_EQ(hits, 8);
    clouds_free(&c);
    fx_close(&f);
  }
  return 0;
}


TEST(lidar_bad_configurations_name_the_field) {
  err_msg_t msg = {0};
  sensor_t s;
  lidar_desc_t d = base_desc();
  lidar_flash_desc_t fl = {.columns = 4, .rows = 2, .fov_horizontal = 1, .fov_vertical = 0.5,
                           .frame_rate = 10.0};

  // no pattern
  ASSERT_EQ(lidar_create(&d, &s, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "scan pattern");

  // negative range
  ASSERT_OK(lidar_pattern_flash_init(&d.pattern, &fl, "lidar.flash", &msg));
  d.returns.range_min = -1.0;
  ASSERT_EQ(lidar_create(&d, &s, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "lidar.range_min = -1");
  d.returns.range_min = 0.1;
  d.returns.range_max = NAN;
  ASSERT_EQ(lidar_create(&d, &s, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "lidar.range_max = nan");
  d.returns.range_max = INFINITY;

  // unknown and repeated field names
  const char* names[3] = {"x", "colour", "x"};
  d.fields = names;
  d.nfield = 2;
  ASSERT_EQ(lidar_create(&d, &s, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "lidar.fields[1] = \"colour\" is not a point field");
  names[1] = "y";
  d.nfield = 3;
  ASSERT_EQ(lidar_create(&d, &s, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "lidar.fields[2] = \"x\" is listed twice");

  // NaN start time and noise
  d.nfield = 2;
  d.has_start_time = 1;
  d.start_time = NAN;
  ASSERT_EQ(lidar_create(&d, &s, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "lidar.start_time = nan");
  // named under the pattern, and bounded like the environment's times (1e9 s)
  d.pattern_field = "lidar.flash";
  ASSERT_EQ(lidar_create(&d, &s, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "lidar.flash.start_time = nan");
  d.start_time = -1.5e9;
  ASSERT_EQ(lidar_create(&d, &s, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "lidar.flash.start_time = -1.5e+09");
  d.has_start_time = 0;
  d.angle_noise.stddev = NAN;
  ASSERT_EQ(lidar_create(&d, &s, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "lidar.angle_noise");
  d.angle_noise.stddev = 0;

  // the pattern is still the caller's after a failure, and moves in on success
  ASSERT_EQ(d.pattern.nray, 8);
  ASSERT_OK(lidar_create(&d, &s, &msg));
  ASSERT_EQ(d.pattern.nray, 0);
  ASSERT_STREQ(s.ops->kind_name, "lidar");
  s.ops->destroy(s.self);
  return 0;
}


TEST(lidar_start_time_places_sweep_zero) {
  // a spinning lidar whose sweeps start at t_s = -0.05: the first step (0, 0.1] opens in the
  // middle of sweep 0 (incomplete) and completes it at 0.05
  fx_t f;
  ASSERT_OK(sphere_room(&f, 0, 10.0));
  lidar_desc_t d = base_desc();
  double el[2] = {0.0, 0.1};
  lidar_spinning_desc_t sp = {.frequency = 10.0, .columns = 100, .elevations = el,
                              .nchannel = 2};
  err_msg_t msg = {0};
  ASSERT_OK(lidar_pattern_spinning_init(&d.pattern, &sp, "lidar.spinning", &msg));
  d.has_start_time = 1;
  d.start_time = -0.05;
  ASSERT_OK(add_lidar(f.e, 3, 0, xform_identity(), &d));
  ASSERT_OK(set_state(f.e, 0.0, 0, NULL, NULL));
  static clouds_t c;
  c.n = 0;
  ASSERT_OK(run(f.e, 0.0, 0.2, 2, 3, &c));
  ASSERT_EQ(c.n, 2);
  ASSERT_TRUE(!c.rec[0].u.cloud.complete);
  ASSERT_EQ(c.rec[0].u.cloud.count, 50 * 2);   // columns 50 .. 99
  ASSERT_NEAR(c.rec[0].u.cloud.frame_start_time, -0.05, 1e-15);
  ASSERT_TRUE(c.rec[1].u.cloud.complete);
  ASSERT_EQ(c.rec[1].u.cloud.count, 100 * 2);
  ASSERT_NEAR(c.rec[1].u.cloud.frame_start_time, 0.05, 1e-15);
  clouds_free(&c);
  fx_close(&f);
  return 0;
}


TEST(lidar_does_not_see_its_own_body_unless_asked) {
  // the lidar sits inside a 1 m box on its body 2, in a room of radius 10; a pillar on body 3
  // stands 4 m ahead. Default: the box is invisible (the room and the pillar are seen);
  // see_own_body: every ray stops on the box; exclude_bodies {3}: the pillar is invisible too.
  for (int mode = 0; mode < 3; mode++) {
    fx_t f;
    ASSERT_OK(fx_open(&f, 2));
    err_msg_t msg = {0};
    body_desc_t b2 = {.id = 2, .pose = at(0, 0, 0)};
    body_desc_t b3 = {.id = 3, .pose = at(4, 0, 0)};
    ASSERT_OK(env_create_body(f.e, &b2, &msg));
    ASSERT_OK(env_create_body(f.e, &b3, &msg));
    ASSERT_OK(add_prim(f.e, 1, 1, SCENE_PRIM_SPHERE, 10.0, 0, 0, 0, at(0, 0, 0)));
    ASSERT_OK(add_prim(f.e, 2, 2, SCENE_PRIM_BOX, 0.5, 0.5, 0.5, 2, at(0, 0, 0)));
    ASSERT_OK(add_prim(f.e, 3, 3, SCENE_PRIM_BOX, 0.5, 0.5, 20.0, 3, at(0, 0, 0)));
    lidar_desc_t d = base_desc();
    d.see_own_body = mode == 1;
    uint32_t ex[1] = {3};
    if (mode == 2) {
      d.exclude_bodies = ex;
      d.nexclude_body = 1;
    }
    lidar_flash_desc_t fl = {.columns = 9, .rows = 3, .fov_horizontal = 20 * DEG,
                             .fov_vertical = 10 * DEG, .frame_rate = 10.0};
    ASSERT_OK(lidar_pattern_flash_init(&d.pattern, &fl, "lidar.flash", &msg));
    ASSERT_OK(add_lidar(f.e, 5, 2, xform_identity(), &d));
    uint32_t ids[2] = {2, 3};
    double poses[14] = {0, 0, 0, 0, 0, 0, 1, 4, 0, 0, 0, 0, 0, 1};
    ASSERT_OK(set_state(f.e, 0.0, 2, ids, poses));
    ASSERT_OK(do_step(f.e, 0.0));
    static clouds_t c;
    c.n = 0;
    ASSERT_OK(collect(f.e, 5, &c));
    ASSERT_EQ(c.n, 1);
    const sensor_cloud_t* pc = &c.rec[0].u.cloud;
    ASSERT_EQ(pc->count, 27);
    int oo = field_of(pc, "object_id"), od = field_of(pc, "distance");
    int oa = field_of(pc, "azimuth"), oe = field_of(pc, "elevation");
    uint32_t pillar = 0;
    for (uint32_t i = 0; i < pc->count; i++) {
      uint32_t obj = getu(pc, i, oo, 4);
      double a = getf(pc, i, oa), e = getf(pc, i, oe);
      if (mode == 1) {
        ASSERT_EQ(obj, 2);
        ASSERT_NEAR(getf(pc, i, od), 0.5 / (cos(a) * cos(e)), 1e-5);
      } else if (obj == 3) {
        pillar++;
        ASSERT_NEAR(getf(pc, i, od), 3.5 / (cos(a) * cos(e)), 1e-4);
      } else {
        ASSERT_EQ(obj, 1);
        ASSERT_NEAR(getf(pc, i, od), 10.0, 1e-4);
      }
    }
    // the pillar (half width 0.5 at 3.5 m: |azimuth| < 8.13 degrees) takes the 7 middle
    // columns (centres every 2.22 degrees)
    ASSERT_EQ(pillar, mode == 0 ? 7 * 3 : 0);
    clouds_free(&c);
    fx_close(&f);
  }
  return 0;
}


// Steps of a VLP-16 (publishing per revolution) in a room with a moving box, every step first
// tried with the nth allocation failing for n = 1, 2, ... until it succeeds (when oom is set).
static int oom_run(int oom, int organised, clouds_t* c) {
  fx_t f;
  ASSERT_OK(fx_open(&f, 2));
  err_msg_t msg = {0};
  body_desc_t b = {.id = 2, .pose = at(3, 0, 0)};
  ASSERT_OK(env_create_body(f.e, &b, &msg));
  ASSERT_OK(add_prim(f.e, 1, 1, SCENE_PRIM_SPHERE, 9.0, 0, 0, 0, at(0, 0, 0)));
  ASSERT_OK(add_prim(f.e, 2, 2, SCENE_PRIM_BOX, 0.5, 0.5, 0.5, 2, xform_identity()));
  lidar_desc_t d = base_desc();
  if (organised) {
    // an organised Ouster cloud joined in the middle of its first revolution
    lidar_ouster_desc_t o = {.channels = 16, .columns = 512, .frequency = 10.0,
                             .elevation_max = NAN, .elevation_min = NAN};
    ASSERT_OK(lidar_pattern_ouster_init(&d.pattern, &o, "lidar.ouster", &msg));
    d.fields = NULL;
    d.nfield = 0;
    d.layout = LIDAR_LAYOUT_OUSTER;
    d.misses = LIDAR_MISS_NAN;
    d.has_start_time = 1;
    d.start_time = -0.03;
  } else {
    lidar_vlp16_desc_t v = {.frequency = 20.0};
    ASSERT_OK(lidar_pattern_vlp16_init(&d.pattern, &v, "lidar.vlp16", &msg));
  }
  d.returns.distance_noise.stddev_base = 0.01;
  ASSERT_OK(add_lidar(f.e, 3, 0, xform_identity(), &d));
  uint32_t ids[1] = {2};
  double p0[7] = {3, 0, 0, 0, 0, 0, 1};
  ASSERT_OK(set_state(f.e, 0.0, 1, ids, p0));
  c->n = 0;
  for (int k = 1; k <= 7; k++) {
    double t = 0.03 * k;
    double pk[7] = {3, t, 0, 0, 0, 0, 1};
    ASSERT_OK(set_state(f.e, t, 1, ids, pk));
    int failures = 0;
    for (int64_t n = 1; oom; n++) {
      mem_fail_after(n);
      int rc = env_step(f.e, t, &msg);
      mem_fail_after(0);
      if (rc == 0) {
        break;
      }
      ASSERT_TRUE(rc == ERR_NOMEM || rc == ERR_LIMIT || rc == ERR_BACKEND);
      failures++;
      ASSERT_TRUE(failures < 10000);
    }
    if (!oom) {
      ASSERT_OK(do_step(f.e, t));
    }
    ASSERT_OK(collect(f.e, 3, c));
  }
  fx_close(&f);
  return 0;
}


TEST(lidar_failed_steps_change_nothing) {
  // a step that runs out of memory anywhere leaves the lidar as it was: retried, the clouds are
  // those of a run that never failed
  // (and an organised cloud, whose pixels are written out of firing order)
  for (int organised = 0; organised < 2; organised++) {
    static clouds_t ref, got;
    ASSERT_OK(oom_run(0, organised, &ref));
    ASSERT_OK(oom_run(1, organised, &got));
    // revolutions of 50 ms completed by 0.21 s; of 100 ms from -0.03 s
    ASSERT_EQ(ref.n, organised ? 2 : 4);
    ASSERT_EQ(got.n, ref.n);
    for (uint32_t i = 0; i < ref.n; i++) {
      const sensor_cloud_t* a = &ref.rec[i].u.cloud;
      const sensor_cloud_t* b = &got.rec[i].u.cloud;
      ASSERT_EQ(a->count, b->count);
      ASSERT_EQ(a->height, b->height);
      ASSERT_EQ(ref.rec[i].frame, got.rec[i].frame);
      ASSERT_TRUE(memcmp(a->data, b->data, (size_t)a->count * a->point_step) == 0);
    }
    clouds_free(&ref);
    clouds_free(&got);
  }
  return 0;
}


TEST(lidar_group_mask_hides_other_groups) {
  // a room (group 0) and a pillar 4 m ahead (group 3): a lidar with group mask {0} does not see
  // the pillar, one with {3} sees only the pillar, one without a mask sees both
  fx_t f;
  ASSERT_OK(fx_open(&f, 0));
  ASSERT_OK(add_prim_in(f.e, 1, 1, SCENE_PRIM_SPHERE, 10.0, 0, 0, 0, at(0, 0, 0), 0));
  ASSERT_OK(add_prim_in(f.e, 2, 2, SCENE_PRIM_BOX, 0.5, 0.5, 20.0, 0, at(4, 0, 0), 3));
  const uint32_t masks[3] = {1u << 0, 1u << 3, 0};
  for (uint32_t i = 0; i < 3; i++) {
    lidar_desc_t d = base_desc();
    d.group_mask = masks[i];
    lidar_flash_desc_t fl = {.columns = 9, .rows = 1, .fov_horizontal = 20 * DEG,
                             .fov_vertical = 1 * DEG, .frame_rate = 10.0};
    err_msg_t msg = {0};
    ASSERT_OK(lidar_pattern_flash_init(&d.pattern, &fl, "lidar.flash", &msg));
    ASSERT_OK(add_lidar(f.e, 10 + i, 0, xform_identity(), &d));
  }
  ASSERT_OK(set_state(f.e, 0.0, 0, NULL, NULL));
  ASSERT_OK(do_step(f.e, 0.0));
  static clouds_t c;
  c.n = 0;
  for (uint32_t i = 0; i < 3; i++) {
    ASSERT_OK(collect(f.e, 10 + i, &c));
  }
  ASSERT_EQ(c.n, 3);
  uint32_t seen[3][3] = {{0}};
  for (uint32_t i = 0; i < 3; i++) {
    const sensor_cloud_t* pc = &c.rec[i].u.cloud;
    int oo = field_of(pc, "object_id");
    for (uint32_t k = 0; k < pc->count; k++) {
      seen[i][getu(pc, k, oo, 4)]++;
    }
  }
  ASSERT_EQ(seen[0][1], 9);     // room only
  ASSERT_EQ(seen[0][2], 0);
  ASSERT_EQ(seen[1][1], 0);     // pillar only: the 7 middle columns, the others miss
  ASSERT_EQ(seen[1][2], 7);
  ASSERT_EQ(c.rec[1].u.cloud.count, 7);
  ASSERT_EQ(seen[2][1], 2);     // both
  ASSERT_EQ(seen[2][2], 7);
  clouds_free(&c);

  // a group beyond 31 is refused, naming the field
  err_msg_t msg = {0};
  object_desc_t o = {.id = 9, .geometry_id = 1, .local_pose = xform_identity(),
                     .scale = {1, 1, 1}, .group = 32};
  ASSERT_EQ(env_create_object(f.e, &o, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "group = 32");
  fx_close(&f);
  return 0;
}


TEST(raycast_excludes_bodies_and_groups) {
  // the same exclusions for a Raycast: a box on body 2 in group 1 in front of a wall
  fx_t f;
  ASSERT_OK(fx_open(&f, 2));
  err_msg_t msg = {0};
  body_desc_t b = {.id = 2, .pose = at(2, 0, 0)};
  ASSERT_OK(env_create_body(f.e, &b, &msg));
  ASSERT_OK(add_prim_in(f.e, 1, 1, SCENE_PRIM_BOX, 0.5, 0.5, 0.5, 2, xform_identity(), 1));
  ASSERT_OK(add_prim_in(f.e, 2, 2, SCENE_PRIM_BOX, 0.5, 5.0, 5.0, 0, at(6, 0, 0), 0));
  uint32_t ids[1] = {2};
  double p0[7] = {2, 0, 0, 0, 0, 0, 1};
  ASSERT_OK(set_state(f.e, 0.0, 1, ids, p0));
  double o[3] = {0, 0, 0}, d[3] = {1, 0, 0};
  uint32_t ex[1] = {2};
  struct {
    const uint32_t* bodies;
    uint32_t nbody;
    uint32_t mask;
    uint32_t object;
    double distance;
  } cases[] = {
      {NULL, 0, 0, 1, 1.5},        // the box
      {ex, 1, 0, 2, 5.5},          // body 2 excluded: the wall
      {NULL, 0, 1u << 0, 2, 5.5},  // group 0 only: the wall
      {NULL, 0, 1u << 1, 1, 1.5},  // group 1 only: the box
      {ex, 1, 1u << 1, 0, INFINITY},   // both: nothing
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    env_raycast_t r = {.nray = 1, .origins = o, .directions = d, .exclude_bodies = cases[i].bodies,
                       .nexclude_body = cases[i].nbody, .group_mask = cases[i].mask};
    scene_hit_t h;
    ASSERT_OK(env_raycast(f.e, &r, &h, &msg));
    ASSERT_EQ(h.object_id, cases[i].object);
    if (isinf(cases[i].distance)) {
      ASSERT_TRUE(isinf(h.distance));
    } else {
      ASSERT_NEAR(h.distance, cases[i].distance, 1e-5);
    }
  }
  fx_close(&f);
  return 0;
}


// The state update whose step would be too long, 1 with msg; state at t otherwise.
static int refused_state(env_t* e, double t, err_msg_t* msg) {
  env_state_update_t u = {.time = t};
  return env_update_state(e, &u, msg) == ERR_LIMIT;
}


TEST(lidar_refuses_a_step_too_long) {
  // 300 s of a VLP-16 in one step is 86.8 million rays: the state update that would make the
  // step that long is refused, naming the lidar (a step could never take it), and a nearer
  // one is taken
  fx_t f;
  ASSERT_OK(sphere_room(&f, 0, 10.0));
  lidar_desc_t d;
  ASSERT_OK(vlp16_desc(10.0, &d));
  err_msg_t msg = {0};
  ASSERT_OK(add_lidar(f.e, 3, 0, xform_identity(), &d));
  ASSERT_OK(set_state(f.e, 0.0, 0, NULL, NULL));
  ASSERT_TRUE(refused_state(f.e, 300.0, &msg));
  ASSERT_CONTAINS(msg.text, "time = 300 is too far from the last step (0)");
  ASSERT_CONTAINS(msg.text, "lidar 3: the step (0, 300] fires");
  ASSERT_CONTAINS(msg.text, "step more often");
  ASSERT_EQ(env_step(f.e, 300.0, &msg), ERR_STATE);
  ASSERT_OK(set_state(f.e, 0.25, 0, NULL, NULL));
  ASSERT_OK(do_step(f.e, 0.25));
  ASSERT_EQ(env_outputs(f.e)->n, 2);
  fx_close(&f);
  return 0;
}


TEST(lidar_refuses_a_frame_larger_than_a_step_output) {
  // 2048 x 2048 pixels of 16 bytes = 64 MiB: more than a step's output of 64 MiB - 64 KiB
  err_msg_t msg = {0};
  sensor_t s;
  lidar_desc_t d = base_desc();
  const char* names[4] = {"x", "y", "z", "intensity"};
  d.fields = names;
  d.nfield = 4;
  d.max_frame_bytes = (64u << 20) - (64u << 10);
  d.pattern_field = "lidar.flash";
  d.frame_field = "lidar.flash.columns x rows";
  lidar_flash_desc_t fl = {.columns = 2048, .rows = 2048, .fov_horizontal = 1,
                           .fov_vertical = 1, .frame_rate = 10.0};
  ASSERT_OK(lidar_pattern_flash_init(&d.pattern, &fl, "lidar.flash", &msg));
  ASSERT_EQ(lidar_create(&d, &s, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "lidar.flash: one frame of 4194304 rays x 1 returns x 16 bytes");
  ASSERT_CONTAINS(msg.text, "reduce lidar.flash.columns x rows");
  // three fields fit (48 MiB); dual returns of them do not
  d.nfield = 3;
  ASSERT_OK(lidar_create(&d, &s, &msg));
  s.ops->destroy(s.self);
  ASSERT_OK(lidar_pattern_flash_init(&d.pattern, &fl, "lidar.flash", &msg));
  d.returns.mode = LIDAR_RETURN_DUAL;
  ASSERT_EQ(lidar_create(&d, &s, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "x 2 returns x 12 bytes");
  // per step, the frame's 4 M pixels fire at one instant: no step can split them
  d.publish_per_step = 1;
  ASSERT_EQ(lidar_create(&d, &s, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "lidar.flash: 4194304 rays fire at one instant");
  // a spinning lidar of 4096 channels x 2^20 columns (2^32 rays a frame, 0.86e9 rays per
  // second at 0.2 Hz) x 16 bytes per step: each column (4096 rays of one instant) fits, whatever
  // the frame
  lidar_pattern_close(&d.pattern);
  d.returns.mode = LIDAR_RETURN_STRONGEST;
  double el[4096];
  for (int i = 0; i < 4096; i++) {
    el[i] = -1.0 + i / 4096.0;
  }
  lidar_spinning_desc_t sp = {.frequency = 0.2, .columns = 1u << 20, .elevations = el,
                              .nchannel = 4096};
  ASSERT_OK(lidar_pattern_spinning_init(&d.pattern, &sp, "lidar.spinning", &msg));
  ASSERT_OK(lidar_create(&d, &s, &msg));
  s.ops->destroy(s.self);
  return 0;
}


TEST(lidar_refuses_a_step_over_its_output_budget_before_tracing) {
  // VLP-16 at 10 Hz: 20 s are 5.79 M points of 16 bytes = 92.6 MB > 64 MiB of step output
  fx_t f;
  ASSERT_OK(sphere_room(&f, 0, 10.0));
  for (int per_step = 0; per_step < 2; per_step++) {
    lidar_desc_t d = base_desc();
    const char* names[4] = {"x", "y", "z", "intensity"};
    d.fields = names;
    d.nfield = 4;
    d.publish_per_step = per_step;
    lidar_vlp16_desc_t v = {.frequency = 10.0};
    err_msg_t msg = {0};
    ASSERT_OK(lidar_pattern_vlp16_init(&d.pattern, &v, "lidar.vlp16", &msg));
    ASSERT_OK(add_lidar(f.e, 3 + per_step, 0, xform_identity(), &d));
  }
  ASSERT_OK(set_state(f.e, 0.0, 0, NULL, NULL));
  ASSERT_OK(do_step(f.e, 0.0));
  for (int again = 0; again < 2; again++) {
    err_msg_t msg = {0};
    ASSERT_TRUE(refused_state(f.e, 20.0, &msg));
    ASSERT_CONTAINS(msg.text, "lidar 3: the rays fired over (0, 20] can give up to 9.2");
    ASSERT_CONTAINS(msg.text, "step in shorter intervals");
    ASSERT_TRUE(strstr(msg.text, "publish per step") == NULL);
  }

  // nothing changed: a nearer state is taken and stepped
  ASSERT_OK(set_state(f.e, 2.0, 0, NULL, NULL));
  ASSERT_OK(do_step(f.e, 2.0));
  fx_close(&f);
  return 0;
}


TEST(lidar_accumulator_shrinks_to_a_frame_after_a_long_step) {
  // 2 s of a VLP-16 at 20 Hz in one step: 40 revolutions, 579,000 points of 4 bytes gathered
  // (4 bytes more each for their azimuths), then about one frame (14,480 rays) kept once the
  // step is committed; a refused state update (a step too long) leaves it as small. What
  // makes a step long here is its revolutions, 40 frames' worth of points against the one
  // kept; more seconds only add rays, which cost about 2 us each under the sanitizers (30 s,
  // 8.7 M rays, took 15 s of CPU there).
  fx_t f;
  ASSERT_OK(sphere_room(&f, 0, 10.0));
  lidar_desc_t d = base_desc();
  const char* names[1] = {"x"};
  d.fields = names;
  d.nfield = 1;
  lidar_vlp16_desc_t v = {.frequency = 20.0};
  err_msg_t msg = {0};
  ASSERT_OK(lidar_pattern_vlp16_init(&d.pattern, &v, "lidar.vlp16", &msg));
  sensor_desc_t s = {.id = 3, .mount = xform_identity()};
  ASSERT_OK(lidar_create(&d, &s.sensor, &msg));
  void* self = s.sensor.self;
  ASSERT_OK(env_create_sensor(f.e, &s, &msg));
  ASSERT_OK(set_state(f.e, 0.0, 0, NULL, NULL));
  ASSERT_OK(do_step(f.e, 0.0));
  ASSERT_OK(set_state(f.e, 2.0, 0, NULL, NULL));
  ASSERT_OK(do_step(f.e, 2.0));
  // the step was long: 40 revolutions went out, every ray a point (the room is closed)
  const sensor_out_t* out = env_outputs(f.e);
  uint64_t points = 0;
  for (uint32_t i = 0; i < out->n; i++) {
    points += out->rec[i].u.cloud.count;
  }
  ASSERT_EQ(out->n, 40u);
  ASSERT_TRUE(points > 40u * 14400u);
  ASSERT_TRUE(lidar_accumulator_bytes(self) <= 8 * 14480 + 8 * 4096 + 3);
  ASSERT_TRUE(refused_state(f.e, 100.0, &msg));
  ASSERT_TRUE(lidar_accumulator_bytes(self) <= 8 * 14480 + 8 * 4096 + 3);
  fx_close(&f);
  return 0;
}


// A VLP-16 (sensor 3, 10 Hz) at the centre of a sphere of 10 m.
static int vlp16_in_room(fx_t* f) {
  ASSERT_OK(sphere_room(f, 0, 10.0));
  lidar_desc_t d;
  ASSERT_OK(vlp16_desc(10.0, &d));
  ASSERT_OK(add_lidar(f->e, 3, 0, xform_identity(), &d));
  return 0;
}


// Step k of a quarter revolution, its records taken out of the environment into *mine.
static int quarter_revolution(fx_t* f, int k, sensor_out_t* mine) {
  ASSERT_OK(set_state(f->e, 0.025 * k, 0, NULL, NULL));
  ASSERT_OK(do_step(f->e, 0.025 * k));
  memset(mine, 0, sizeof(*mine));
  ASSERT_OK(env_take_outputs(f->e, mine));
  return 0;
}


TEST(record_arrays_handed_back_hold_the_next_steps_records) {
  // records taken out and handed back (env_return_outputs) as the daemon does after each
  // step: the environment keeps the array for the next records (no allocation per step), and
  // the records' clouds are released with it (the lidar's two buffers still take turns)
  fx_t f;
  ASSERT_OK(vlp16_in_room(&f));
  const uint8_t* seen[8];
  uint32_t nrev = 0, nseen = 0;
  for (int k = 0; k <= 40 && nrev < 8; k++) {
    sensor_out_t mine;
    ASSERT_OK(quarter_revolution(&f, k, &mine));
    if (mine.n == 0) {
      continue;
    }
    for (uint32_t i = 0; i < mine.n; i++, nrev++) {
      const uint8_t* data = mine.rec[i].u.cloud.data;
      uint32_t j = 0;
      while (j < nseen && seen[j] != data) {
        j++;
      }
      if (j == nseen) {
        ASSERT_TRUE(nseen < 8);
        seen[nseen++] = data;
      }
    }
    int64_t live = mem_live_count();
    env_return_outputs(f.e, &mine);
    ASSERT_EQ(mem_live_count(), live);   // the array kept, not freed (the lidar keeps its buffers)
    ASSERT_TRUE(mine.rec == NULL && mine.n == 0 && mine.cap == 0);
  }
  ASSERT_EQ(nrev, 8);
  ASSERT_TRUE(nseen <= 2);
  fx_close(&f);
  return 0;
}


TEST(lidar_return_all_frame_buffer_is_bounded_by_the_output) {
  // a VLP-16 at 20 Hz (14,480 rays a revolution) publishing per revolution with RETURN_ALL of
  // up to 255 returns, one 4-byte field, outputs of at most 1 MiB: its frame buffer was sized
  // for every return of every ray (14,480 x 255 points: 29.5 MB with their azimuths), though
  // a sweep whose points pass the output is refused as they come; now at most the output's
  // points (262,016) are set aside, and the revolution still goes out whole
  fx_t f;
  ASSERT_OK(sphere_room(&f, 0, 10.0));
  lidar_desc_t d = base_desc();
  const char* names[1] = {"x"};
  d.fields = names;
  d.nfield = 1;
  d.returns.mode = LIDAR_RETURN_ALL;
  d.returns.max_returns = 255;
  d.max_frame_bytes = 1u << 20;
  lidar_vlp16_desc_t v = {.frequency = 20.0};
  err_msg_t msg = {0};
  ASSERT_OK(lidar_pattern_vlp16_init(&d.pattern, &v, "lidar.vlp16", &msg));
  sensor_desc_t s = {.id = 3, .mount = xform_identity()};
  ASSERT_OK(lidar_create(&d, &s.sensor, &msg));
  void* self = s.sensor.self;
  ASSERT_OK(env_create_sensor(f.e, &s, &msg));
  ASSERT_OK(set_state(f.e, 0.0, 0, NULL, NULL));
  ASSERT_OK(do_step(f.e, 0.0));
  ASSERT_OK(set_state(f.e, 0.06, 0, NULL, NULL));
  ASSERT_OK(do_step(f.e, 0.06));
  const sensor_out_t* out = env_outputs(f.e);
  ASSERT_EQ(out->n, 1u);
  ASSERT_TRUE(out->rec[0].u.cloud.count > 14400u);  // the room is closed: every ray a point
  size_t most = ((1u << 20) - 512) / 4;
  ASSERT_TRUE(lidar_accumulator_bytes(self) <= 2 * (most * 8 + 3));  // two buffers at most
  fx_close(&f);
  return 0;
}


TEST(lidar_points_are_written_once_into_buffers_handed_out_whole) {
  // a VLP-16 stepped a quarter revolution at a time, its records taken out of the environment
  // as the daemon does: each revolution's record holds the very buffer the lidar wrote its
  // points into (the lidar still holds it too, to write the next sweep into once the record
  // lets go; a copy would be the record's alone), and once released, the lidar takes it again:
  // two buffers take turns, never moved or grown, no allocation per revolution; the first
  // revolution's is a frame's size from its first points too (grown by doubling, it moved its
  // points and their azimuths, and ended larger than the later ones)
  fx_t f;
  ASSERT_OK(vlp16_in_room(&f));
  const uint8_t* seen[8];
  size_t caps[8];
  uint32_t nrev = 0, nseen = 0;
  for (int k = 0; k <= 40 && nrev < 8; k++) {
    sensor_out_t mine;
    ASSERT_OK(quarter_revolution(&f, k, &mine));
    ASSERT_EQ(env_outputs(f.e)->n, 0);
    for (uint32_t i = 0; i < mine.n; i++, nrev++) {
      const sensor_cloud_t* c = &mine.rec[i].u.cloud;
      ASSERT_TRUE(c->blob != NULL && c->data == blob_data(c->blob));
      ASSERT_TRUE(c->count > 28900 && c->count < 29000);   // 1808 or 1809 firings of 16
      ASSERT_TRUE(!blob_is_exclusive(c->blob));
      ASSERT_TRUE(nrev < 8);
      caps[nrev] = blob_cap(c->blob);
      uint32_t j = 0;
      while (j < nseen && seen[j] != c->data) {
        j++;
      }
      if (j == nseen) {
        seen[nseen++] = c->data;
      }
    }
    sensor_out_free(&mine);
  }
  ASSERT_EQ(nrev, 8);
  ASSERT_TRUE(nseen <= 2);
  for (uint32_t i = 1; i < nrev; i++) {
    ASSERT_EQ(caps[i], caps[0]);
  }
  fx_close(&f);
  return 0;
}


TEST(lidar_rays_fire_from_the_pose_at_their_time) {
  // a lidar on a body turning from yaw 0 to 90 degrees over the step (0, 0.1]; ten rays along
  // its +x fired at t_j = 0.01 j: in the world they point at yaw 900 t_j degrees (slerp) and
  // meet the room (radius 5 about the origin) there; in the sensor frame every point is
  // (5, 0, 0)
  for (int world = 0; world < 2; world++) {
    fx_t f;
    ASSERT_OK(fx_open(&f, 2));
    err_msg_t msg = {0};
    body_desc_t b = {.id = 2, .pose = at(0, 0, 0)};
    ASSERT_OK(env_create_body(f.e, &b, &msg));
    ASSERT_OK(add_prim(f.e, 1, 1, SCENE_PRIM_SPHERE, 5.0, 0, 0, 0, at(0, 0, 0)));
    enum { N = 10 };
    double az[N] = {0}, el[N] = {0}, tt[N];
    for (int j = 0; j < N; j++) {
      tt[j] = 0.01 * j;
    }
    lidar_desc_t d = base_desc();
    d.world_frame = world;
    lidar_custom_desc_t cu = {.azimuths = az, .elevations = el, .time_offsets = tt,
                              .ntime_offset = N, .nray = N, .frame_rate = 10.0};
    ASSERT_OK(lidar_pattern_custom_init(&d.pattern, &cu, "lidar.custom", &msg));
    ASSERT_OK(add_lidar(f.e, 3, 2, xform_identity(), &d));
    double p0[7] = {0, 0, 0, 0, 0, 0, 1};
    double p1[7] = {0, 0, 0, 0, 0, sin(M_PI / 4), cos(M_PI / 4)};   // yaw 90 degrees
    static clouds_t c;
    ASSERT_OK(body_step(&f, p0, p1, &c));
    const sensor_cloud_t* pc = &c.rec[0].u.cloud;
    ASSERT_EQ(pc->count, N);
    int ox = field_of(pc, "x"), oy = field_of(pc, "y"), od = field_of(pc, "distance");
    for (uint32_t j = 0; j < N; j++) {
      double yaw = (M_PI / 2) * tt[j] / 0.1;
      ASSERT_NEAR(getf(pc, j, od), 5.0, 1e-5);
      ASSERT_NEAR(getf(pc, j, ox), world ? 5.0 * cos(yaw) : 5.0, 5e-5);
      ASSERT_NEAR(getf(pc, j, oy), world ? 5.0 * sin(yaw) : 0.0, 5e-5);
    }
    clouds_free(&c);
    fx_close(&f);
  }
  return 0;
}


TEST(lidar_create_out_of_memory_is_clean) {
  // every allocation of lidar_create failing in turn: ERR_NOMEM, nothing leaked, the pattern
  // still the caller's; then it succeeds
  int64_t live = mem_live_count();
  for (int64_t n = 1;; n++) {
    lidar_desc_t d;
    ASSERT_OK(vlp16_desc(10.0, &d));
    err_msg_t msg = {0};
    sensor_t s;
    mem_fail_after(n);
    int rc = lidar_create(&d, &s, &msg);
    mem_fail_after(0);
    if (rc == 0) {
      ASSERT_EQ(d.pattern.nray, 0);
      s.ops->destroy(s.self);
      break;
    }
    ASSERT_EQ(rc, ERR_NOMEM);
    ASSERT_EQ(d.pattern.nray, 16);
    lidar_pattern_close(&d.pattern);
    ASSERT_EQ(mem_live_count(), live);
    ASSERT_TRUE(n < 100);
  }
  ASSERT_EQ(mem_live_count(), live);
  return 0;
}


// A sensor that fails its step while *fail is set (another sensor of the same step failing).
static int failing_step(void* self, const sensor_ctx_t* ctx, const step_view_t* v,
                        sensor_out_t* out, err_msg_t* msg) {
  (void)ctx;
  (void)v;
  (void)out;
  return *(int*)self ? err_set(msg, ERR_NOMEM, "test: failing on purpose") : 0;
}


static void failing_destroy(void* self) { (void)self; }


static const sensor_ops_t kFailingOps = {.kind_name = "test", .step = failing_step,
                                         .destroy = failing_destroy};


TEST(lidar_step_not_committed_when_another_sensor_fails) {
  // the same run twice: without failures, and with a second sensor failing every other step
  // the first time it is tried; the lidar's clouds must be the same
  static clouds_t runs[2];
  for (int failing = 0; failing < 2; failing++) {
    fx_t f;
    ASSERT_OK(sphere_room(&f, 0, 9.0));
    lidar_desc_t d;
    ASSERT_OK(vlp16_desc(20.0, &d));
    err_msg_t msg = {0};
    d.returns.distance_noise.stddev_base = 0.01;
    ASSERT_OK(add_lidar(f.e, 3, 0, xform_identity(), &d));
    static int fail;
    fail = 0;
    sensor_desc_t sd = {.id = 9, .mount = xform_identity(),
                        .sensor = {.kind = SENSOR_TEST, .ops = &kFailingOps, .self = &fail}};
    ASSERT_OK(env_create_sensor(f.e, &sd, &msg));
    ASSERT_OK(set_state(f.e, 0.0, 0, NULL, NULL));
    runs[failing].n = 0;
    for (int k = 1; k <= 8; k++) {
      double t = 0.03 * k;
      ASSERT_OK(set_state(f.e, t, 0, NULL, NULL));
      if (failing && k % 2 == 0) {
        fail = 1;
        ASSERT_EQ(env_step(f.e, t, &msg), ERR_NOMEM);
        fail = 0;
      }
      ASSERT_OK(do_step(f.e, t));
      ASSERT_OK(collect(f.e, 3, &runs[failing]));
    }
    fx_close(&f);
  }
  ASSERT_EQ(runs[0].n, 4);
  ASSERT_EQ(runs[1].n, runs[0].n);
  for (uint32_t i = 0; i < runs[0].n; i++) {
    const sensor_cloud_t* a = &runs[0].rec[i].u.cloud;
    const sensor_cloud_t* b = &runs[1].rec[i].u.cloud;
    ASSERT_EQ(a->count, b->count);
    ASSERT_EQ(runs[0].rec[i].frame, runs[1].rec[i].frame);
    ASSERT_TRUE(memcmp(a->data, b->data, (size_t)a->count * a->point_step) == 0);
  }
  clouds_free(&runs[0]);
  clouds_free(&runs[1]);
  return 0;
}


//---------------- Horizon culling

// Pose (x, y, z) turned by `yaw` about z then `pitch` about the turned y.
static pose_t yaw_pitch(double x, double y, double z, double yaw, double pitch) {
  pose_t p = at(x, y, z);
  double cy = cos(0.5 * yaw), sy = sin(0.5 * yaw), cp = cos(0.5 * pitch), sp = sin(0.5 * pitch);
  p.q[0] = cy * cp;
  p.q[1] = -sy * sp;
  p.q[2] = cy * sp;
  p.q[3] = sy * cp;
  return p;
}


// A yard seen in one revolution by an Ouster-32 mounted 1 m off the origin of a body that
// drives 3 m and turns 70 degrees in the step, tilted 10 degrees: ground, a ring of posts, a
// post that moves and a cylinder that turns, both some 15 m away; with `far`, 2,000 small
// spheres 500 m away too (beyond range: they change no ray, but make a horizon dearer than the
// rays it could save, so the lidar builds none). The clouds into c, the rays culled into
// *culled.
static int yard_revolution(int far, clouds_t* c, uint64_t* culled) {
  fx_t f;
  ASSERT_OK(fx_open(&f, 2));
  err_msg_t msg = {0};
  for (uint32_t id = 2; id <= 4; id++) {
    body_desc_t b = {.id = id, .pose = at(0, 0, 0)};
    ASSERT_OK(env_create_body(f.e, &b, &msg));
  }
  ASSERT_OK(add_prim(f.e, 1, 1, SCENE_PRIM_BOX, 30, 30, 0.5, 0, at(0, 0, -0.5)));
  for (uint32_t k = 0; k < 12; k++) {
    double a = 2 * M_PI * k / 12, r = 6 + k % 4 * 3;
    ASSERT_OK(add_prim(f.e, 10 + k, 10 + k, SCENE_PRIM_BOX, 0.4, 0.3, 0.5 + 0.3 * (k % 5), 0,
                       yaw_pitch(r * cos(a), r * sin(a), 0.5 + 0.3 * (k % 5), a, 0)));
  }
  ASSERT_OK(add_prim(f.e, 30, 30, SCENE_PRIM_BOX, 0.5, 0.5, 2.0, 3, at(0, 0, 0)));
  ASSERT_OK(add_prim(f.e, 31, 31, SCENE_PRIM_CYLINDER, 0.3, 2.5, 0, 4, at(1.5, 0, 0)));
  for (uint32_t k = 0; far && k < 2000; k++) {
    double a = 2 * M_PI * k / 2000;
    ASSERT_OK(add_prim(f.e, 100 + k, 100 + k, SCENE_PRIM_SPHERE, 0.1, 0, 0, 0,
                       at(500 * cos(a), 500 * sin(a), 3.0)));
  }
  lidar_desc_t d = base_desc();
  d.returns.range_max = 120.0;
  d.misses = LIDAR_MISS_NAN;
  lidar_ouster_desc_t o = {.channels = 32, .columns = 512, .frequency = 10.0,
                           .elevation_max = NAN, .elevation_min = NAN};
  ASSERT_OK(lidar_pattern_ouster_init(&d.pattern, &o, "lidar.ouster", &msg));
  ASSERT_OK(add_lidar(f.e, 7, 2, yaw_pitch(1.0, 0.3, 1.2, 0.4, 10 * M_PI / 180), &d));
  uint32_t ids[3] = {2, 3, 4};
  const double half_turn = 0.5 * 70 * M_PI / 180;   // the vehicle turns 70 degrees about z
  double s0[21] = {0, 0, 0, 0, 0, 0, 1, -14, 8, 2, 0, 0, 0, 1, 14, -12, 2.5, 0, 0, 0, 1};
  double s1[21] = {3,  0.5, 0, 0, 0,   sin(half_turn), cos(half_turn), -11, 8, 2, 0, 0, 0, 1,
                   14, -12, 2.5, sin(0.6), 0, 0, cos(0.6)};
  ASSERT_OK(set_state(f.e, 0.0, 3, ids, s0));
  ASSERT_OK(set_state(f.e, 0.1, 3, ids, s1));
  ASSERT_OK(do_step(f.e, 0.1));
  ASSERT_OK(collect(f.e, 7, c));
  env_info_t info;
  env_get_info(f.e, &info);
  *culled = info.scene.rays_culled;
  fx_close(&f);
  return 0;
}


// The rays above the horizon of a moving, turning lidar are skipped, and its cloud is bit for
// bit the cloud it gives when nothing is skipped.
TEST(lidar_culled_rays_change_nothing_on_a_turning_vehicle) {
  static clouds_t a, b;
  a.n = b.n = 0;
  uint64_t ca = 0, cb = 0;
  ASSERT_OK(yard_revolution(0, &a, &ca));
  ASSERT_OK(yard_revolution(1, &b, &cb));
  ASSERT_EQ(a.n, 1);
  ASSERT_EQ(b.n, 1);
  const sensor_cloud_t* pa = &a.rec[0].u.cloud;
  const sensor_cloud_t* pb = &b.rec[0].u.cloud;
  ASSERT_EQ(pa->count, 32 * 512);
  ASSERT_EQ(pb->count, pa->count);
  ASSERT_TRUE(memcmp(pa->data, pb->data, (size_t)pa->count * pa->point_step) == 0);
  ASSERT_EQ(cb, 0);
  // the horizon culls on the AVX2 path only (scene/trace.c); SENSIM_SIMD=baseline traces all
  if (simd_level() >= SIMD_AVX2) {
    ASSERT_TRUE(ca > 2000);
  } else {
    ASSERT_EQ(ca, 0);
  }

  // and the yard is seen: ground, posts, the moving posts
  int od = field_of(pa, "distance"), oo = field_of(pa, "object_id");
  uint32_t seen[64] = {0}, misses = 0;
  for (uint32_t i = 0; i < pa->count; i++) {
    if (isnan(getf(pa, i, od))) {
      misses++;
      continue;
    }
    uint32_t id = getu(pa, i, oo, 4);
    seen[id < 64 ? id : 63]++;
  }
  ASSERT_TRUE(seen[1] > 1000 && seen[30] > 0 && seen[31] > 0);
  ASSERT_TRUE(misses > 2000 && ca <= misses);
  clouds_free(&a);
  clouds_free(&b);
  return 0;
}


// The default cloud (x y z intensity, packed from lean pattern records or, in tiles, from the
// chunk's packets of rays) holds the very x, y, z and intensity of the cloud with every field
// (packed from full records), point for point: spinning (tiled; 64 channels from the model's
// lanes, without and with a beam-origin radius, from a still sensor and from one riding a body
// that drives and turns, on two-layer surfaces in fog), VLP-16 (regrouped) and Livox patterns.
TEST(lidar_default_cloud_equals_the_full_clouds_columns) {
  // patterns: 0 an OS1-32, 1 a VLP-16, 2 a Livox, 3 to 5 an OS1-64 (3 with a beam-origin
  // radius, 4 on the moving body, 5 in fog on two-layer surfaces with distance noise); each
  // lidar (sensor 5: its draws are the same) in an environment of its own
  for (int pattern = 0; pattern < 6; pattern++) {
    static clouds_t cl[2];   // 0: the default cloud, 1: every field
    for (int full = 0; full <= 1; full++) {
      fx_t f;
      ASSERT_OK(sphere_room(&f, 2, 9.0));
      ASSERT_OK(add_prim(f.e, 2, 2, SCENE_PRIM_BOX, 1.0, 2.0, 1.5, 0, at(4, 1, 0)));
      err_msg_t msg = {0};
      const int moving = pattern == 4;
      const uint32_t body = moving ? 7 : 0;
      if (pattern == 5) {
        surface_material_t m = material_default_two_layer();
        ASSERT_OK(env_set_material(f.e, 0, &m, NULL, &msg));
        ambient_material_t fog;
        ASSERT_OK(ambient_fog(20.0, &fog, &msg));
        ASSERT_OK(env_set_medium(f.e, 0, &fog, &msg));
      }
      if (moving) {
        body_desc_t b = {.id = body, .pose = at(0, 0, 0)};
        ASSERT_OK(env_create_body(f.e, &b, &msg));
      }
      lidar_desc_t d = base_desc();
      if (!full) {
        d.nfield = 0;   // x y z intensity
      }
      if (pattern == 5) {
        d.returns.distance_noise.stddev_base = 0.01;
      }
      if (pattern == 0 || pattern >= 3) {
        // 64 channels: chunks of 8 whole columns, made from the model's lanes
        lidar_ouster_desc_t o = {.channels = pattern == 0 ? 32 : 64, .columns = 512,
                                 .frequency = 10.0, .elevation_max = NAN,
                                 .elevation_min = NAN,
                                 .beam_origin = pattern == 3 ? 0.0158 : 0.0};
        ASSERT_OK(lidar_pattern_ouster_init(&d.pattern, &o, "lidar.ouster", &msg));
      } else if (pattern == 1) {
        lidar_vlp16_desc_t v = {.frequency = 10.0};
        ASSERT_OK(lidar_pattern_vlp16_init(&d.pattern, &v, "lidar.vlp16", &msg));
      } else {
        lidar_livox_desc_t lv = {.fov = 38.4 * M_PI / 180, .point_rate = 100000,
                                 .frame_rate = 10, .prism_rate = {76.7, -51.3}};
        ASSERT_OK(lidar_pattern_livox_init(&d.pattern, &lv, "lidar.livox", &msg));
      }
      ASSERT_OK(add_lidar(f.e, 5, body, at(0.3, -0.2, 0.5), &d));
      cl[full].n = 0;
      for (int k = 0; k <= 5; k++) {
        // the body drives at 2 m/s along x turning about z at 1 rad/s
        const double t = 0.05 * k;
        const double pose[7] = {2.0 * t, 0, 0, 0, 0, sin(0.5 * t), cos(0.5 * t)};
        ASSERT_OK(set_state(f.e, t, moving ? 1 : 0, &body, pose));
        ASSERT_OK(do_step(f.e, t));
        ASSERT_OK(collect(f.e, 5, &cl[full]));
      }
      fx_close(&f);
    }
    ASSERT_TRUE(cl[0].n == 2 && cl[1].n == 2);
    for (uint32_t c = 0; c < cl[0].n; c++) {
      const sensor_cloud_t* pa = &cl[0].rec[c].u.cloud;
      const sensor_cloud_t* pb = &cl[1].rec[c].u.cloud;
      ASSERT_EQ(pa->point_step, 16);
      ASSERT_TRUE(pa->count > 1000 && pa->count == pb->count);
      const char* names[4] = {"x", "y", "z", "intensity"};
      for (int q = 0; q < 4; q++) {
        int oa = field_of(pa, names[q]), ob = field_of(pb, names[q]);
        ASSERT_TRUE(oa >= 0 && ob >= 0);
        for (uint32_t i = 0; i < pa->count; i++) {
          ASSERT_EQ(getu(pa, i, oa, 4), getu(pb, i, ob, 4));
        }
      }
    }
    clouds_free(&cl[0]);
    clouds_free(&cl[1]);
  }
  return 0;
}


//---------------- Driver layouts

// Beam azimuth angles of a unit, degrees clockwise of the encoder (every fourth beam alike):
// ouster_ros destaggers them by 6, 2, -2 and -6 of 512 columns.
static const double kBeamAzimuthDeg[4] = {4.22, 1.41, -1.40, -4.18};

// An OS1-16 (512 columns at 10 Hz, +-16.6 degrees) with those beam azimuths, 1 m above an
// unbounded ground plane, with the Ouster point type and misses at NaN (ouster_ros's): the
// eight beams below the horizon hit the ground at 1 / sin(-elevation), the others miss.
static int ouster_over_ground(fx_t* f, lidar_desc_t* d, double beam_az[16]) {
  ASSERT_OK(fx_open(f, 2));
  ASSERT_OK(add_prim(f->e, 1, 1, SCENE_PRIM_PLANE, 0.0, 0, 0, 0, at(0, 0, -1)));
  *d = base_desc();
  d->fields = NULL;
  d->nfield = 0;
  d->layout = LIDAR_LAYOUT_OUSTER;
  d->misses = LIDAR_MISS_NAN;
  for (int i = 0; i < 16; i++) {
    beam_az[i] = kBeamAzimuthDeg[i % 4] * DEG;
  }
  lidar_ouster_desc_t o = {.channels = 16, .columns = 512, .frequency = 10.0,
                           .elevation_max = NAN, .elevation_min = NAN, .azimuths = beam_az,
                           .nazimuth = 16};
  err_msg_t msg = {0};
  ASSERT_OK(lidar_pattern_ouster_init(&d->pattern, &o, "lidar.ouster", &msg));
  return 0;
}


// Angle in (-pi, pi].
static double wrap(double a) {
  double r = remainder(a, 2.0 * M_PI);
  return r <= -M_PI ? r + 2.0 * M_PI : r;
}


// Pixel (row, col) of an organised Ouster cloud against the sensor: beam u = row mod 16 fired
// in column m at m / (f W) (t: that time less t0_ns, in ns), looking at azimuth
// pi - 2 pi m / W - alpha_u; the first image (rows 0-15) holds its ground return, every other
// row a miss. `col_azimuth`: the azimuth the cloud's column looks at (a destaggered column),
// NAN when it is the staggered column m itself. m < 0: a pixel that never fired.
static int check_pixel(const sensor_cloud_t* pc, uint32_t row, uint32_t col, int64_t m,
                       double t0_ns, double col_azimuth) {
  uint32_t i = row * pc->width + col, u = row % 16;
  double el = (16.6 - 33.2 * u / 15.0) * DEG;
  ASSERT_EQ(getu(pc, i, 26, 2), u);                     // ring: the beam, from the top
  double t_ns = m < 0 ? 0.0 : (double)m * 1e9 / 5120.0 - t0_ns;
  ASSERT_NEAR((double)getu(pc, i, 20, 4), t_ns, 1.0);   // t
  double x = getf(pc, i, 0), y = getf(pc, i, 4), z = getf(pc, i, 8);
  if (m < 0 || row >= 16 || el > 0.0) {
    ASSERT_TRUE(isnan(x) && isnan(y) && isnan(z));
    ASSERT_EQ(getu(pc, i, 32, 4), 0);                   // range
    ASSERT_DEQ(getf(pc, i, 16), 0.0f);                   // intensity
    ASSERT_EQ(getu(pc, i, 24, 2), 0);                   // reflectivity
    return 0;
  }
  double r = 1.0 / sin(-el);
  ASSERT_NEAR(z, -1.0, 1e-4);
  ASSERT_NEAR((double)getu(pc, i, 32, 4), 1e3 * r, 1.0);
  ASSERT_TRUE(getf(pc, i, 16) > 0.0f);
  double az = atan2(y, x);
  ASSERT_NEAR(wrap(az - (M_PI - 2.0 * M_PI * (double)m / 512.0 + kBeamAzimuthDeg[u % 4] * -DEG)),
              0.0, 1e-5);
  if (!isnan(col_azimuth)) {
    ASSERT_TRUE(fabs(wrap(az - col_azimuth)) <= M_PI / 512.0 + 1e-5);
  }
  return 0;
}


TEST(lidar_ouster_layout_is_organised_as_ouster_ros) {
  // a revolution: 16 rows of 512 pixels, row-major, each column destaggered to look in one
  // direction (beam u's pixel of column v fired in column v - shift_u); with dual returns the
  // second returns' image follows (here all misses: one surface); joined in the middle of a
  // revolution, the columns it did not fire are misses at t = 0
  const int shift[4] = {6, 2, -2, -6};
  for (int variant = 0; variant < 3; variant++) {
    fx_t f;
    lidar_desc_t d;
    double beam_az[16];
    ASSERT_OK(ouster_over_ground(&f, &d, beam_az));
    if (variant == 1) {
      d.returns.mode = LIDAR_RETURN_DUAL;
    }
    if (variant == 2) {
      d.has_start_time = 1;
      d.start_time = -0.05;
    }
    ASSERT_OK(add_lidar(f.e, 3, 0, xform_identity(), &d));
    ASSERT_OK(set_state(f.e, 0.0, 0, NULL, NULL));
    static clouds_t c;
    c.n = 0;
    ASSERT_OK(run(f.e, 0.0, 0.09, 3, 3, &c));
    ASSERT_EQ(c.n, variant == 2 ? 1 : 0);
    ASSERT_OK(run(f.e, 0.09, 0.1, 1, 3, &c));
    ASSERT_EQ(c.n, 1);
    const sensor_cloud_t* pc = &c.rec[0].u.cloud;
    uint32_t rows = variant == 1 ? 32 : 16;
    ASSERT_EQ(pc->point_step, 48);
    ASSERT_EQ(pc->height, rows);
    ASSERT_EQ(pc->width, 512);
    ASSERT_EQ(pc->count, rows * 512);
    ASSERT_EQ(pc->complete, variant != 2);
    for (uint32_t row = 0; row < rows; row++) {
      for (uint32_t v = 0; v < 512; v++) {
        int64_t m = ((int64_t)v - shift[row % 4] + 512) % 512;
        if (variant == 2 && m < 256) {
          m = -1;   // before the lidar's first step
        }
        ASSERT_OK(check_pixel(pc, row, v, m, 0.0, M_PI - 2.0 * M_PI * v / 512.0));
      }
    }
    clouds_free(&c);
    fx_close(&f);
  }
  return 0;
}


TEST(lidar_ouster_layout_per_step_and_without_misses) {
  // per step: the step's columns in firing order (a part of a revolution is not destaggered);
  // misses removed: the points in firing order, one row
  for (int variant = 0; variant < 2; variant++) {
    fx_t f;
    lidar_desc_t d;
    double beam_az[16];
    ASSERT_OK(ouster_over_ground(&f, &d, beam_az));
    d.publish_per_step = variant == 0;
    d.misses = variant == 0 ? LIDAR_MISS_NAN : LIDAR_MISS_REMOVE;
    ASSERT_OK(add_lidar(f.e, 3, 0, xform_identity(), &d));
    ASSERT_OK(set_state(f.e, 0.0, 0, NULL, NULL));
    static clouds_t c;
    c.n = 0;
    ASSERT_OK(run(f.e, 0.0, 0.1, 2, 3, &c));
    if (variant == 1) {
      ASSERT_EQ(c.n, 1);
      const sensor_cloud_t* pc = &c.rec[0].u.cloud;
      ASSERT_EQ(pc->count, 8 * 512);
      ASSERT_EQ(pc->height, 1);
      ASSERT_EQ(pc->width, pc->count);
      for (uint32_t i = 0; i < pc->count; i++) {
        ASSERT_EQ(getu(pc, i, 26, 2), 8 + i % 8);   // beam by beam below the horizon
      }
    } else {
      // columns 0 .. 256 in (0, 0.05] (the first step takes its start), 257 .. 512 after
      ASSERT_EQ(c.n, 2);
      int64_t m0 = 0;
      for (uint32_t s = 0; s < 2; s++) {
        const sensor_cloud_t* pc = &c.rec[s].u.cloud;
        uint32_t width = s == 0 ? 257 : 256;
        ASSERT_EQ(pc->height, 16);
        ASSERT_EQ(pc->width, width);
        ASSERT_EQ(pc->count, 16 * width);
        for (uint32_t row = 0; row < 16; row++) {
          for (uint32_t col = 0; col < width; col++) {
            ASSERT_OK(check_pixel(pc, row, col, m0 + col, s * 0.05e9, NAN));
          }
        }
        m0 += width;
      }
    }
    clouds_free(&c);
    fx_close(&f);
  }
  return 0;
}


//---------------- For the encoders

// Every point's azimuth beside a cloud (record) equals its `azimuth` field.
static int azimuths_match(const sensor_cloud_t* pc) {
  int oa = field_of(pc, "azimuth");
  ASSERT_TRUE(oa >= 0 && pc->azimuth != NULL);
  for (uint32_t i = 0; i < pc->count; i++) {
    ASSERT_DEQ(pc->azimuth[i], getf(pc, i, oa));
  }
  return 0;
}


// The quantized encoding of a record (1 mm) is the same with what the lidar hands over beside
// its points (its stride and azimuths) as with the encoder left to find them.
static int fed_same_bytes(const sensor_cloud_t* pc) {
  codec_params_t p = {.encoding = CODEC_QZSTD, .precision = 0.001};
  codec_cloud_t fed = codec_cloud_of(pc), alone = fed;
  ASSERT_TRUE(fed.azimuth != NULL && fed.stride > 0);
  alone.azimuth = NULL;
  alone.stride = 0;
  size_t cap = codec_max_size(&p, &fed), len[2];
  uint8_t* enc[2] = {mem_alloc(cap), mem_alloc(cap)};
  double err[2];
  err_msg_t msg;
  ASSERT_OK(codec_encode(&p, &fed, enc[0], cap, &len[0], &err[0], &msg));
  ASSERT_OK(codec_encode(&p, &alone, enc[1], cap, &len[1], &err[1], &msg));
  ASSERT_EQ(len[0], len[1]);
  ASSERT_MEM_EQ(enc[0], enc[1], len[0]);
  mem_free(enc[0]);
  mem_free(enc[1]);
  return 0;
}


TEST(lidar_records_carry_the_aimed_azimuths_and_the_stride) {
  // a VLP-16 with misses kept: one point a ray, 16 channels per firing sequence; the azimuths
  // beside the points follow them through a buffer that grows (a long step published per step)
  // and one trimmed (a long step per revolution, its open sweep kept at commit); the quantized
  // encoder given them writes the bytes it writes alone
  const char* names[5] = {"x", "y", "z", "azimuth", "ring"};
  for (int per_step = 0; per_step < 2; per_step++) {
    fx_t f;
    ASSERT_OK(sphere_room(&f, 0, 10.0));
    lidar_desc_t d;
    ASSERT_OK(vlp16_desc(20.0, &d));
    d.fields = names;
    d.nfield = 5;
    d.misses = LIDAR_MISS_ZERO;
    d.publish_per_step = per_step;
    ASSERT_OK(add_lidar(f.e, 3, 0, xform_identity(), &d));
    static clouds_t c;
    c.n = 0;
    ASSERT_OK(set_state(f.e, 0.0, 0, NULL, NULL));
    ASSERT_OK(do_step(f.e, 0.0));
    const double t[3] = {0.5, 0.525, 0.6};
    for (int k = 0; k < 3; k++) {
      ASSERT_OK(set_state(f.e, t[k], 0, NULL, NULL));
      ASSERT_OK(do_step(f.e, t[k]));
      const sensor_out_t* out = env_outputs(f.e);
      for (uint32_t r = 0; r < out->n; r++) {
        const sensor_cloud_t* pc = &out->rec[r].u.cloud;
        ASSERT_EQ(pc->stride, 16);
        ASSERT_OK(azimuths_match(pc));
        ASSERT_OK(fed_same_bytes(pc));
        c.n++;
      }
    }
    ASSERT_EQ(c.n, per_step ? 3 : 12);   // revolutions of 50 ms by 0.6 s
    fx_close(&f);
  }

  // none where the encoder could not use them: world frame, the lean default cloud (whose
  // misses go, so no stride either); no stride for a flash frame (a group that is not a column:
  // the encoder finds a better one), its azimuths still
  for (int which = 0; which < 3; which++) {
    fx_t f;
    ASSERT_OK(sphere_room(&f, 0, 10.0));
    lidar_desc_t d;
    ASSERT_OK(vlp16_desc(20.0, &d));
    if (which == 2) {
      lidar_pattern_close(&d.pattern);
      lidar_flash_desc_t fl = {.columns = 16, .rows = 9, .fov_horizontal = 100 * DEG,
                               .fov_vertical = 60 * DEG, .frame_rate = 20.0};
      err_msg_t msg = {0};
      ASSERT_OK(lidar_pattern_flash_init(&d.pattern, &fl, "lidar.flash", &msg));
    }
    d.misses = which == 1 ? LIDAR_MISS_REMOVE : LIDAR_MISS_ZERO;
    d.world_frame = which == 0;
    if (which == 1) {
      d.nfield = 0;
    }
    ASSERT_OK(add_lidar(f.e, 3, 0, xform_identity(), &d));
    ASSERT_OK(set_state(f.e, 0.0, 0, NULL, NULL));
    ASSERT_OK(do_step(f.e, 0.0));
    ASSERT_OK(set_state(f.e, 0.06, 0, NULL, NULL));
    ASSERT_OK(do_step(f.e, 0.06));
    const sensor_out_t* out = env_outputs(f.e);
    ASSERT_TRUE(out->n >= 1);
    ASSERT_TRUE((out->rec[0].u.cloud.azimuth != NULL) == (which == 2));
    ASSERT_EQ(out->rec[0].u.cloud.stride, which == 0 ? 16u : 0u);
    fx_close(&f);
  }

  // the organised Ouster cloud: a row runs along one beam (stride 1); each pixel's azimuth is
  // its point's; the same encoded bytes
  fx_t f;
  lidar_desc_t d;
  double beam_az[16];
  ASSERT_OK(ouster_over_ground(&f, &d, beam_az));
  ASSERT_OK(add_lidar(f.e, 3, 0, xform_identity(), &d));
  static clouds_t c;
  c.n = 0;
  ASSERT_OK(set_state(f.e, 0.0, 0, NULL, NULL));
  ASSERT_OK(run(f.e, 0.0, 0.1, 1, 3, &c));
  const sensor_out_t* out = env_outputs(f.e);
  ASSERT_EQ(out->n, 1);
  const sensor_cloud_t* pc = &out->rec[0].u.cloud;
  ASSERT_EQ(pc->stride, 1);
  ASSERT_TRUE(pc->azimuth != NULL);
  uint32_t hits = 0;
  for (uint32_t i = 0; i < pc->count; i++) {
    double x = getf(pc, i, 0), y = getf(pc, i, 4);
    if (!isnan(x)) {
      ASSERT_NEAR(wrap(pc->azimuth[i] - atan2(y, x)), 0.0, 2e-6);
      hits++;
    }
  }
  ASSERT_EQ(hits, 8 * 512);
  ASSERT_OK(fed_same_bytes(pc));
  clouds_free(&c);
  fx_close(&f);
  return 0;
}
