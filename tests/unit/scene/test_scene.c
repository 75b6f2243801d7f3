// SPDX-License-Identifier: MIT
// test_scene.c: the ray-tracing backend against hand-derived geometry: analytic primitives from
// outside and inside, box edges and corners, scaled/rotated instances and their normals,
// moving instances seen at the ray's time, counters, removal, concurrent tracing, and packets
// against single rays.
#include "scene/scene.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "base/pool.h"
#include "base/simd.h"
#include "check.h"

// Embree traces in float32: the ray origin, direction and instance transform are rounded to
// 24-bit mantissas, so distances and normals agree with the exact answer to a few float ulps
// of the largest coordinate involved (~1e-6 at 10 m). 1e-5 relative (1e-5 absolute below 1 m)
// is that bound with margin; the hit itself (prim.c) is solved in double.
#define TOL_REL 1e-5
#define TOL(x) (TOL_REL * fmax(fabs((double)(x)), 1.0))

#define SQRT2 1.4142135623730951
#define SQRT3 1.7320508075688772

typedef struct fixture {
  scene_device_t* dev;
  scene_t* s;
  int64_t live;   // allocations before setup
} fixture_t;


static int setup(fixture_t* f) {
  err_msg_t msg = {{0}};
  f->live = mem_live_count();
  f->dev = scene_device_create(&msg);
  if (!f->dev) {
    fprintf(stderr, "# scene_device_create: %s\n", msg.text);
    return 1;
  }
  f->s = scene_create(f->dev, &msg);
  if (!f->s) {
    fprintf(stderr, "# scene_create: %s\n", msg.text);
    return 1;
  }
  return 0;
}


// Destroy the fixture; nonzero if our own allocations leaked.
static int teardown(fixture_t* f) {
  scene_destroy(f->s);
  scene_device_destroy(f->dev);
  return mem_live_count() != f->live;
}


static pose_t pose_at(double x, double y, double z) {
  pose_t p = xform_identity();
  p.p[0] = x;
  p.p[1] = y;
  p.p[2] = z;
  return p;
}


// Pose rotated by angle (rad) about the unit axis (ax, ay, az), at (x, y, z).
static pose_t pose_rot(double x, double y, double z, double ax, double ay, double az,
                       double angle) {
  pose_t p = pose_at(x, y, z);
  p.q[0] = cos(0.5 * angle);
  p.q[1] = ax * sin(0.5 * angle);
  p.q[2] = ay * sin(0.5 * angle);
  p.q[3] = az * sin(0.5 * angle);
  return p;
}


static const double kUnit[3] = {1.0, 1.0, 1.0};


// rc, after printing what failed when it is an error (negative).
static int noted(int rc, const char* what, const err_msg_t* msg) {
  if (rc < 0) {
    fprintf(stderr, "# %s: %s\n", what, msg->text);
  }
  return rc;
}


// An instance of geometry g at the origin of a body moving from pose a (s = 0) to b (s = 1), or
// frozen at b; its handle, negative on failure.
static int add_instance(scene_t* s, int g, const double scale[3], uint32_t id, uint32_t label,
                        pose_t a, pose_t b, int freeze) {
  err_msg_t msg = {{0}};
  int h = noted(scene_add_instance(s, g, scale, id, label, &msg), "scene_add_instance", &msg);
  if (h >= 0) {
    pose_t local = xform_identity();
    scene_set_instance_pose(s, h, &local, freeze ? &b : &a, &b);
  }
  return h;
}


// An instance of geometry g with a static pose; negative on failure.
static int place(scene_t* s, int g, const double scale[3], pose_t pose, uint32_t id) {
  return add_instance(s, g, scale, id, id + 1000, pose, pose, 0);
}


static int commit(scene_t* s) {
  err_msg_t msg = {{0}};
  return noted(scene_commit(s, &msg), "scene_commit", &msg);
}


// One static instance of geometry g (which must exist), committed.
static int place_one(scene_t* s, int g, const double scale[3], pose_t pose, uint32_t id) {
  ASSERT_TRUE(g >= 0);
  ASSERT_TRUE(place(s, g, scale, pose, id) >= 0);
  return commit(s);
}


static int add_prim(scene_t* s, scene_prim_kind_t kind, double a, double b, double c) {
  err_msg_t msg = {{0}};
  double size[3] = {a, b, c};
  return noted(scene_add_primitive(s, kind, size, &msg), "scene_add_primitive", &msg);
}


// The cube [-1, 1]^3 as 12 triangles.
static int add_cube_mesh(scene_t* s) {
  static const float v[8 * 3] = {-1, -1, -1, 1, -1, -1, 1, 1, -1, -1, 1, -1,
                                 -1, -1, 1,  1, -1, 1,  1, 1, 1,  -1, 1, 1};
  static const uint32_t idx[12 * 3] = {0, 2, 1, 0, 3, 2, 4, 5, 6, 4, 6, 7, 0, 1, 5, 0, 5, 4,
                                       3, 7, 6, 3, 6, 2, 0, 4, 7, 0, 7, 3, 1, 2, 6, 1, 6, 5};
  err_msg_t msg = {{0}};
  return noted(scene_add_mesh(s, v, 8, idx, 12, &msg), "scene_add_mesh", &msg);
}


// The AVX2 packet paths on (where the CPU has AVX2) or off: the core's kernels at their best
// level, or at the baseline (base/simd.h).
static void use_simd(bool on) {
  simd_set_max(on ? SIMD_LEVEL_COUNT : SIMD_BASELINE);
}

//---------------- The entry point in each layout

// SCENE_ROWS in groups of 8 (rows, rows_filtered) and 16 (rows16, rows16_filtered).
static void rows_filtered(const scene_t* s, const scene_ray_t* rays, scene_hit_t* hits, size_t n,
                          const scene_filter_t* f) {
  scene_trace(s, &(scene_batch_t){.layout = SCENE_ROWS, .n = n, .rays = rays, .hits = hits,
                                  .filter = f});
}


static void rows(const scene_t* s, const scene_ray_t* rays, scene_hit_t* hits, size_t n) {
  rows_filtered(s, rays, hits, n, NULL);
}


static void rows16_filtered(const scene_t* s, const scene_ray_t* rays, scene_hit_t* hits,
                            size_t n, const scene_filter_t* f) {
  scene_trace(s, &(scene_batch_t){.layout = SCENE_ROWS, .group = 16, .n = n, .rays = rays,
                                  .hits = hits, .filter = f});
}


static void rows16(const scene_t* s, const scene_ray_t* rays, scene_hit_t* hits, size_t n) {
  rows16_filtered(s, rays, hits, n, NULL);
}


// SCENE_COLUMNS.
static void columns(const scene_t* s, const scene_packet_t* in, size_t n,
                    scene_packet_hits_t* out, const scene_filter_t* f,
                    const scene_horizon_t* hz) {
  scene_trace(s, &(scene_batch_t){.layout = SCENE_COLUMNS, .n = n, .packets = in,
                                  .packet_hits = out, .filter = f, .horizon = hz});
}


// SCENE_REQUEST of rays [begin, end) of `in`, hits into hits[begin, end); returns end or the
// index of the first refused ray.
static size_t request(const scene_t* s, const scene_rays_t* in, size_t begin, size_t end,
                      scene_hit_t* hits, const scene_filter_t* f) {
  return begin + scene_trace(s, &(scene_batch_t){.layout = SCENE_REQUEST, .request = in,
                                                 .first = begin, .n = end - begin,
                                                 .hits = hits + begin, .filter = f});
}


#define RING 20

// RING static instances on a circle of radius 8 m around the origin, alternately the unit cube
// mesh and a sphere of radius 1.5 m (ids 1 .. RING); their handles into h (nullable). Not
// committed.
static int place_ring(scene_t* s, int* h) {
  int gs = add_prim(s, SCENE_PRIM_SPHERE, 1.5, 0, 0);
  int gm = add_cube_mesh(s);
  ASSERT_TRUE(gs >= 0 && gm >= 0);
  for (int i = 0; i < RING; i++) {
    double ang = 2 * M_PI * i / RING;
    int k = place(s, i % 2 ? gs : gm, kUnit, pose_at(8 * cos(ang), 8 * sin(ang), 0),
                  (uint32_t)i + 1);
    ASSERT_TRUE(k >= 0);
    if (h) {
      h[i] = k;
    }
  }
  return 0;
}


// Trace one ray (direction normalised here) at time t.
static scene_hit_t shoot_t(const scene_t* s, double ox, double oy, double oz, double dx,
                           double dy, double dz, double t) {
  double n = sqrt(dx * dx + dy * dy + dz * dz);
  scene_ray_t r = {{ox, oy, oz}, {dx / n, dy / n, dz / n}, INFINITY, t};
  scene_hit_t h;
  rows(s, &r, &h, 1);
  return h;
}


static scene_hit_t shoot(const scene_t* s, double ox, double oy, double oz, double dx,
                         double dy, double dz) {
  return shoot_t(s, ox, oy, oz, dx, dy, dz, 0.0);
}


#define ASSERT_HIT(h, dist, nx, ny, nz)           \
  do {                                            \
    ASSERT_NEAR((h).distance, (dist), TOL(dist)); \
    ASSERT_NEAR((h).normal[0], (nx), TOL_REL);    \
    ASSERT_NEAR((h).normal[1], (ny), TOL_REL);    \
    ASSERT_NEAR((h).normal[2], (nz), TOL_REL);    \
  } while (0)

#define ASSERT_MISS(h)                            \
  do {                                            \
    ASSERT_TRUE(isinf((h).distance));             \
    ASSERT_EQ((h).object_id, 0);                  \
    ASSERT_NEAR((h).normal[0], 0.0, 0.0);         \
  } while (0)


// True if n is (within tolerance) one of the k unit vectors in cand.
static int normal_is_one_of(const double n[3], const double (*cand)[3], int k) {
  for (int i = 0; i < k; i++) {
    if (fabs(n[0] - cand[i][0]) <= TOL_REL && fabs(n[1] - cand[i][1]) <= TOL_REL &&
        fabs(n[2] - cand[i][2]) <= TOL_REL) {
      return 1;
    }
  }
  return 0;
}


//---------------- Primitives

TEST(scene_sphere_from_outside) {
  fixture_t f;
  ASSERT_OK(setup(&f));
  ASSERT_OK(place_one(f.s, add_prim(f.s, SCENE_PRIM_SPHERE, 2.0, 0, 0), kUnit, pose_at(3, 1, 2),
                      5));

  // head-on: distance to the centre minus the radius
  scene_hit_t h = shoot(f.s, -7, 1, 2, 1, 0, 0);
  ASSERT_HIT(h, 10.0 - 2.0, -1, 0, 0);
  ASSERT_EQ(h.object_id, 5);
  ASSERT_EQ(h.label, 1005);
  ASSERT_EQ(h.primitive, 0);

  // offset by b = 1: the chord starts sqrt(r^2 - b^2) before the centre's abscissa
  h = shoot(f.s, -7, 2, 2, 1, 0, 0);
  ASSERT_HIT(h, 10.0 - SQRT3, -SQRT3 / 2, 0.5, 0);

  // passing at b = 2.01 > r misses
  h = shoot(f.s, -7, 3.01, 2, 1, 0, 0);
  ASSERT_MISS(h);
  return teardown(&f);
}


TEST(scene_sphere_from_inside) {
  fixture_t f;
  ASSERT_OK(setup(&f));
  ASSERT_OK(place_one(f.s, add_prim(f.s, SCENE_PRIM_SPHERE, 2.0, 0, 0), kUnit, pose_at(3, 1, 2),
                      5));

  // from the centre every direction reaches the far side at r; the normal faces the ray
  static const double dirs[4][3] = {{1, 0, 0}, {0, 0, -1}, {1, 1, 1}, {-0.3, 0.2, 0.9}};
  for (int i = 0; i < 4; i++) {
    const double* d = dirs[i];
    double n = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
    scene_hit_t h = shoot(f.s, 3, 1, 2, d[0], d[1], d[2]);
    ASSERT_HIT(h, 2.0, -d[0] / n, -d[1] / n, -d[2] / n);
  }

  // general chord from (0.5, 0, 0) off the centre: along +y sqrt(r^2 - 0.25), along -x 2.5
  scene_hit_t h = shoot(f.s, 3.5, 1, 2, 0, 1, 0);
  ASSERT_HIT(h, sqrt(3.75), -0.25, -sqrt(3.75) / 2, 0);
  h = shoot(f.s, 3.5, 1, 2, -1, 0, 0);
  ASSERT_HIT(h, 2.5, 1, 0, 0);
  return teardown(&f);
}


TEST(scene_tilted_plane) {
  fixture_t f;
  ASSERT_OK(setup(&f));

  // half side 0 = "infinite" plane, rotated 30 deg about x: normal (0, -sin 30, cos 30)
  ASSERT_OK(place_one(f.s, add_prim(f.s, SCENE_PRIM_PLANE, 0, 0, 0), kUnit,
                      pose_rot(0, 0, 0, 1, 0, 0, M_PI / 6), 1));

  // down from (0, 2, 10): the plane holds z = y tan 30 there
  double c30 = cos(M_PI / 6), s30 = 0.5;
  scene_hit_t h = shoot(f.s, 0, 2, 10, 0, 0, -1);
  ASSERT_HIT(h, 10.0 - 2.0 * tan(M_PI / 6), 0, -s30, c30);

  // from below the normal flips to face the ray; far out the plane is still there
  h = shoot(f.s, 0, 0, -4, 0, 0, 1);
  ASSERT_HIT(h, 4.0, 0, s30, -c30);
  h = shoot(f.s, 1000, 0, 10, 0, 0, -1);
  ASSERT_HIT(h, 10.0, 0, -s30, c30);
  return teardown(&f);
}


TEST(scene_finite_plane_has_edges) {
  fixture_t f;
  ASSERT_OK(setup(&f));
  ASSERT_OK(place_one(f.s, add_prim(f.s, SCENE_PRIM_PLANE, 1.5, 0, 0), kUnit, pose_at(0, 0, -1),
                      1));
  ASSERT_HIT(shoot(f.s, 1.4, -1.4, 5, 0, 0, -1), 6.0, 0, 0, 1);
  ASSERT_MISS(shoot(f.s, 1.6, 0, 5, 0, 0, -1));
  ASSERT_MISS(shoot(f.s, 0, 0, 5, 1, 0, 0));  // parallel
  return teardown(&f);
}


// Faces, edges and corners of a box with half extents (1, 2, 3) centred at (10, 0, 0).
static int check_box_at_10(const scene_t* s) {
  // faces
  ASSERT_HIT(shoot(s, 0, 0.5, 0.5, 1, 0, 0), 9.0, -1, 0, 0);
  ASSERT_HIT(shoot(s, 10.2, -10, 0.3, 0, 1, 0), 8.0, 0, -1, 0);
  ASSERT_HIT(shoot(s, 9.7, 1.1, 10, 0, 0, -1), 7.0, 0, 0, 1);
  ASSERT_HIT(shoot(s, 20, -0.4, -1, -1, 0, 0), 9.0, 1, 0, 0);

  // from inside, the exit face
  ASSERT_HIT(shoot(s, 10, 0, 0, 0, 0, 1), 3.0, 0, 0, -1);

  // edge x = 9, y = 2 hit head-on at 45 deg from 5 m away
  scene_hit_t h = shoot(s, 9 - 5 / SQRT2, 2 + 5 / SQRT2, 0.5, 1, -1, 0);
  ASSERT_NEAR(h.distance, 5.0, TOL(5.0));
  static const double edge_n[2][3] = {{-1, 0, 0}, {0, 1, 0}};
  ASSERT_TRUE(normal_is_one_of(h.normal, edge_n, 2));

  // corner (9, 2, 3) along (1, -1, -1) from 5 m away
  h = shoot(s, 9 - 5 / SQRT3, 2 + 5 / SQRT3, 3 + 5 / SQRT3, 1, -1, -1);
  ASSERT_NEAR(h.distance, 5.0, TOL(5.0));
  static const double corner_n[3][3] = {{-1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
  ASSERT_TRUE(normal_is_one_of(h.normal, corner_n, 3));

  // grazing along the top face's edge line y = 2, z = 3 (the edge is part of the box)
  h = shoot(s, 0, 2, 3, 1, 0, 0);
  ASSERT_NEAR(h.distance, 9.0, TOL(9.0));

  // just outside an edge misses
  ASSERT_MISS(shoot(s, 0, 2.001, 0, 1, 0, 0));
  return 0;
}


TEST(scene_box_primitive_faces_edges_corners) {
  fixture_t f;
  ASSERT_OK(setup(&f));
  ASSERT_OK(place_one(f.s, add_prim(f.s, SCENE_PRIM_BOX, 1, 2, 3), kUnit, pose_at(10, 0, 0), 3));
  ASSERT_OK(check_box_at_10(f.s));
  return teardown(&f);
}


TEST(scene_box_mesh_faces_edges_corners) {
  fixture_t f;
  ASSERT_OK(setup(&f));
  static const double scale[3] = {1, 2, 3};
  ASSERT_OK(place_one(f.s, add_cube_mesh(f.s), scale, pose_at(10, 0, 0), 3));
  ASSERT_OK(check_box_at_10(f.s));
  return teardown(&f);
}


TEST(scene_scaled_rotated_mesh_instance) {
  fixture_t f;
  ASSERT_OK(setup(&f));
  static const double scale[3] = {2, 1, 0.5};

  // Rz(90): object x (half 2) lies along world y, object y (half 1) along world x
  ASSERT_OK(place_one(f.s, add_cube_mesh(f.s), scale, pose_rot(0, 0, 0, 0, 0, 1, M_PI / 2), 9));
  ASSERT_HIT(shoot(f.s, -10, 0.3, 0.1, 1, 0, 0), 9.0, -1, 0, 0);
  ASSERT_HIT(shoot(f.s, 0.5, -10, -0.2, 0, 1, 0), 8.0, 0, -1, 0);
  ASSERT_HIT(shoot(f.s, 0.9, 1.9, 10, 0, 0, -1), 9.5, 0, 0, 1);
  ASSERT_MISS(shoot(f.s, -10, 0, 0.51, 1, 0, 0));
  ASSERT_MISS(shoot(f.s, 1.01, -10, 0, 0, 1, 0));
  return teardown(&f);
}


TEST(scene_scaled_sphere_normal_uses_inverse_transpose) {
  fixture_t f;
  ASSERT_OK(setup(&f));

  // ellipsoid x^2/4 + y^2 + z^2 = 1; down the line x = 1 it is hit at z = sqrt(3)/2, where the
  // normal is grad = (x/4, y, z) ~ (1/4, 0, sqrt(3)/2) (a plain M n would give (1, 0, 0.87))
  static const double scale[3] = {2, 1, 1};
  ASSERT_OK(place_one(f.s, add_prim(f.s, SCENE_PRIM_SPHERE, 1, 0, 0), scale, xform_identity(), 2));
  double len = sqrt(0.0625 + 0.75);
  ASSERT_HIT(shoot(f.s, 1, 0, 10, 0, 0, -1), 10.0 - SQRT3 / 2, 0.25 / len, 0, SQRT3 / 2 / len);
  return teardown(&f);
}


TEST(scene_cylinder_side_cap_rim_inside) {
  fixture_t f;
  ASSERT_OK(setup(&f));
  ASSERT_OK(place_one(f.s, add_prim(f.s, SCENE_PRIM_CYLINDER, 1, 2, 0), kUnit, pose_at(0, 0, 0),
                      4));

  // side and caps
  ASSERT_HIT(shoot(f.s, -10, 0, 0.5, 1, 0, 0), 9.0, -1, 0, 0);
  ASSERT_HIT(shoot(f.s, -10, 0.6, 1.9, 1, 0, 0), 10.0 - 0.8, -0.8, 0.6, 0);
  ASSERT_HIT(shoot(f.s, 0.3, 0.2, 10, 0, 0, -1), 8.0, 0, 0, 1);
  ASSERT_HIT(shoot(f.s, -0.7, 0.7, -10, 0, 0, 1), 8.0, 0, 0, -1);
  ASSERT_MISS(shoot(f.s, -10, 0, 2.01, 1, 0, 0));
  ASSERT_MISS(shoot(f.s, 0.8, 0.8, 10, 0, 0, -1));

  // rim (1, 0, 2) head-on at 45 deg from 5 m
  scene_hit_t h = shoot(f.s, 1 + 5 / SQRT2, 0, 2 + 5 / SQRT2, -1, 0, -1);
  ASSERT_NEAR(h.distance, 5.0, TOL(5.0));
  static const double rim_n[2][3] = {{1, 0, 0}, {0, 0, 1}};
  ASSERT_TRUE(normal_is_one_of(h.normal, rim_n, 2));

  // from the centre
  ASSERT_HIT(shoot(f.s, 0, 0, 0, 0, 0, 1), 2.0, 0, 0, -1);
  ASSERT_HIT(shoot(f.s, 0, 0, 0, 1, 0, 0), 1.0, -1, 0, 0);
  return teardown(&f);
}


TEST(scene_capsule_side_caps_inside) {
  fixture_t f;
  ASSERT_OK(setup(&f));
  ASSERT_OK(place_one(f.s, add_prim(f.s, SCENE_PRIM_CAPSULE, 1, 2, 0), kUnit, pose_at(0, 0, 0),
                      4));

  // side, and the hemispherical caps (centres at z = +-2)
  ASSERT_HIT(shoot(f.s, -10, 0, 1.5, 1, 0, 0), 9.0, -1, 0, 0);
  ASSERT_HIT(shoot(f.s, 0, 0, 10, 0, 0, -1), 7.0, 0, 0, 1);
  ASSERT_HIT(shoot(f.s, 0.6, 0, 10, 0, 0, -1), 10.0 - 2.8, 0.6, 0, 0.8);
  ASSERT_HIT(shoot(f.s, 0, -0.6, -10, 0, 0, 1), 10.0 - 2.8, 0, -0.6, -0.8);
  ASSERT_HIT(shoot(f.s, -10, 0, 2.5, 1, 0, 0), 10.0 - SQRT3 / 2, -SQRT3 / 2, 0, 0.5);
  ASSERT_MISS(shoot(f.s, -10, 0, 3.01, 1, 0, 0));

  // where the cylinder meets the cap (z = 2), and from inside
  ASSERT_HIT(shoot(f.s, -10, 0, 2, 1, 0, 0), 9.0, -1, 0, 0);
  ASSERT_HIT(shoot(f.s, 0, 0, 0, 0, 0, 1), 3.0, 0, 0, -1);
  ASSERT_HIT(shoot(f.s, 0, 0, 2.5, 1, 0, 0), SQRT3 / 2, -SQRT3 / 2, 0, -0.5);  // exit, flipped
  ASSERT_HIT(shoot(f.s, 0, 0, 1, 0, 1, 0), 1.0, 0, -1, 0);
  return teardown(&f);
}


// One lower bound for every primitive size (prim.h): 1e-320 is refused with the field named;
// the smallest accepted cylinder and capsule still answer with normals facing the ray.
TEST(scene_primitive_sizes_have_one_lower_bound) {
  fixture_t f;
  ASSERT_OK(setup(&f));
  err_msg_t msg = {{0}};
  static const double tiny_r[3] = {1e-320, 1.0, 0.0}, tiny_h[3] = {1.0, 1e-320, 0.0};
  static const double under[3] = {0.99e-6, 1.0, 1.0};
  ASSERT_EQ(scene_add_primitive(f.s, SCENE_PRIM_CYLINDER, tiny_r, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "cylinder.radius");
  ASSERT_CONTAINS(msg.text, "below the smallest size 1e-06 m");
  ASSERT_EQ(scene_add_primitive(f.s, SCENE_PRIM_CAPSULE, tiny_h, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "capsule.half_length");
  ASSERT_EQ(scene_add_primitive(f.s, SCENE_PRIM_BOX, under, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "box.half_extents.x");
  ASSERT_EQ(scene_add_primitive(f.s, SCENE_PRIM_SPHERE, tiny_r, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "sphere.radius");

  // the bound itself: a cylinder and a capsule of radius and half length 1e-6 m
  int gc = add_prim(f.s, SCENE_PRIM_CYLINDER, 1e-6, 1e-6, 0);
  int gk = add_prim(f.s, SCENE_PRIM_CAPSULE, 1e-6, 1e-6, 0);
  ASSERT_TRUE(gc >= 0 && gk >= 0);
  ASSERT_TRUE(place(f.s, gc, kUnit, pose_at(0, 0, 0), 1) >= 0);
  ASSERT_TRUE(place(f.s, gk, kUnit, pose_at(0, 5, 0), 2) >= 0);
  ASSERT_OK(commit(f.s));

  // side and cap of the cylinder, side and end of the capsule, from 1 m away
  scene_hit_t h = shoot(f.s, -1, 0, 0, 1, 0, 0);
  ASSERT_EQ(h.object_id, 1);
  ASSERT_NEAR(h.distance, 1.0 - 1e-6, 1e-6);
  ASSERT_NEAR(h.normal[0], -1.0, 1e-6);
  h = shoot(f.s, 0, 0, 1, 0, 0, -1);
  ASSERT_EQ(h.object_id, 1);
  ASSERT_NEAR(h.normal[2], 1.0, 1e-6);
  h = shoot(f.s, -1, 5, 0, 1, 0, 0);
  ASSERT_EQ(h.object_id, 2);
  ASSERT_NEAR(h.normal[0], -1.0, 1e-6);
  h = shoot(f.s, 0, 5, 1, 0, 0, -1);
  ASSERT_EQ(h.object_id, 2);
  ASSERT_NEAR(h.normal[2], 1.0, 1e-6);
  return teardown(&f);
}


TEST(scene_primitive_rejects_bad_sizes) {
  fixture_t f;
  ASSERT_OK(setup(&f));
  err_msg_t msg = {{0}};
  double neg[3] = {-1, 1, 1}, nan3[3] = {1, NAN, 1}, zero[3] = {0, 0, 0};
  ASSERT_EQ(scene_add_primitive(f.s, SCENE_PRIM_BOX, neg, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "box.half_extents.x = -1 must be > 0");
  ASSERT_EQ(scene_add_primitive(f.s, SCENE_PRIM_CYLINDER, nan3, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "cylinder.half_length = nan is not finite");
  ASSERT_EQ(scene_add_primitive(f.s, SCENE_PRIM_CYLINDER, zero, &msg), ERR_INVAL);
  ASSERT_EQ(scene_add_primitive(f.s, (scene_prim_kind_t)99, kUnit, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "kind");
  static const float v[9] = {0, 0, 0, 1, 0, 0, 0, 1, 0};
  static const uint32_t bad[3] = {0, 1, 3};
  ASSERT_EQ(scene_add_mesh(f.s, v, 3, bad, 1, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "indices[2]");
  ASSERT_EQ(scene_add_instance(f.s, 7, kUnit, 1, 1, &msg), ERR_NOTFOUND);
  scene_counters_t c;
  scene_counters(f.s, &c);
  ASSERT_EQ(c.geometry_builds, 0);
  return teardown(&f);
}


//---------------- Meshes and user data

TEST(scene_mesh_reports_object_label_primitive) {
  fixture_t f;
  ASSERT_OK(setup(&f));

  // the square |y|, |z| <= 1 in the plane x = 0: triangle 0 where y > z, triangle 1 where z > y
  static const float v[4 * 3] = {0, -1, -1, 0, 1, -1, 0, 1, 1, 0, -1, 1};
  static const uint32_t idx[2 * 3] = {0, 1, 2, 0, 2, 3};
  err_msg_t msg = {{0}};
  int g = scene_add_mesh(f.s, v, 4, idx, 2, &msg);
  ASSERT_TRUE(g >= 0);
  pose_t p = pose_at(5, 0, 0);
  ASSERT_TRUE(add_instance(f.s, g, kUnit, 42, 7, p, p, 0) >= 0);
  ASSERT_OK(commit(f.s));

  scene_hit_t a = shoot(f.s, 0, -0.5, 0.5, 1, 0, 0);
  ASSERT_HIT(a, 5.0, -1, 0, 0);
  ASSERT_EQ(a.object_id, 42);
  ASSERT_EQ(a.label, 7);
  ASSERT_EQ(a.primitive, 1);
  scene_hit_t b = shoot(f.s, 10, 0.5, -0.5, -1, 0, 0);
  ASSERT_HIT(b, 5.0, 1, 0, 0);
  ASSERT_EQ(b.primitive, 0);
  ASSERT_EQ(b.object_id, 42);

  // tmax shorter than the hit: a miss
  scene_ray_t r = {{0, 0.5, -0.5}, {1, 0, 0}, 4.9, 0};
  scene_hit_t c;
  rows(f.s, &r, &c, 1);
  ASSERT_MISS(c);
  return teardown(&f);
}


//---------------- Motion

TEST(scene_moving_wall_seen_at_ray_time) {
  fixture_t f;
  ASSERT_OK(setup(&f));

  // a wall 0.2 m thick moving from x = 10 (s = 0) to x = 8 (s = 1): constant velocity, so a
  // ray along +x at time s meets its near face at 10 - 2 s - 0.1 (docs/time.md)
  int g = add_prim(f.s, SCENE_PRIM_BOX, 0.1, 5, 5);
  pose_t a = pose_at(10, 0, 0), b = pose_at(8, 0, 0);
  int h = add_instance(f.s, g, kUnit, 1, 1, a, b, 0);
  ASSERT_TRUE(h >= 0);
  ASSERT_OK(commit(f.s));
  static const double times[4] = {0, 0.25, 0.5, 1};
  for (int i = 0; i < 4; i++) {
    double s = times[i];
    ASSERT_HIT(shoot_t(f.s, 0, 0.3, -0.2, 1, 0, 0, s), 10.0 - 2.0 * s - 0.1, -1, 0, 0);
  }

  // the same wall mesh-built, frozen: every time sees the end pose
  int gm = add_cube_mesh(f.s);
  static const double wall[3] = {0.1, 5, 5};
  ASSERT_TRUE(add_instance(f.s, gm, wall, 2, 2, pose_at(10, 0, 20), pose_at(8, 0, 20), 1) >= 0);
  pose_t origin = xform_identity();
  scene_set_instance_pose(f.s, h, &origin, &b, &b);
  ASSERT_OK(commit(f.s));
  for (int i = 0; i < 4; i++) {
    ASSERT_HIT(shoot_t(f.s, 0, 0.3, -0.2, 1, 0, 0, times[i]), 8.0 - 0.1, -1, 0, 0);
    scene_hit_t hit = shoot_t(f.s, 0, 0.3, 19.9, 1, 0, 0, times[i]);
    ASSERT_HIT(hit, 8.0 - 0.1, -1, 0, 0);
    ASSERT_EQ(hit.object_id, 2);
  }
  return teardown(&f);
}


// One instance moving without turning (two matrices), then turning (two quaternion
// decompositions), then moving without turning again, then still: each step sees the instance
// where its poses put it at the ray's time.
TEST(scene_instance_switches_between_linear_and_turning_motion) {
  fixture_t f;
  ASSERT_OK(setup(&f));
  int g = add_prim(f.s, SCENE_PRIM_BOX, 0.1, 5, 5);
  pose_t origin = xform_identity();
  int h = add_instance(f.s, g, kUnit, 1, 1, pose_at(10, 0, 0), pose_at(8, 0, 0), 0);
  ASSERT_TRUE(h >= 0);
  for (int round = 0; round < 2; round++) {
    // sliding from x = 10 to 8: the near face at 10 - 2 s - 0.1
    pose_t a = pose_at(10, 0, 0), b = pose_at(8, 0, 0);
    scene_set_instance_pose(f.s, h, &origin, &a, &b);
    ASSERT_OK(commit(f.s));
    ASSERT_HIT(shoot_t(f.s, 0, 0.3, -0.2, 1, 0, 0, 0.5), 10.0 - 1.0 - 0.1, -1, 0, 0);

    // turning 0 -> 90 deg about z at x = 10: at s = 0.25 the face at 10 - 0.1 / cos 22.5 deg
    pose_t c = pose_rot(10, 0, 0, 0, 0, 1, M_PI / 2);
    scene_set_instance_pose(f.s, h, &origin, &a, &c);
    ASSERT_OK(commit(f.s));
    double ang = M_PI / 8;
    ASSERT_HIT(shoot_t(f.s, 0, 0, 0, 1, 0, 0, 0.25), 10.0 - 0.1 / cos(ang), -cos(ang),
               -sin(ang), 0);
  }
  // still at x = 9
  pose_t d = pose_at(9, 0, 0);
  scene_set_instance_pose(f.s, h, &origin, &d, &d);
  ASSERT_OK(commit(f.s));
  ASSERT_HIT(shoot_t(f.s, 0, 0.3, -0.2, 1, 0, 0, 0.5), 9.0 - 0.1, -1, 0, 0);
  return teardown(&f);
}


TEST(scene_rotation_interpolated_by_slerp) {
  fixture_t f;
  ASSERT_OK(setup(&f));

  // a plate (half thickness 0.1 along its x) at (10, 0, 0) turning 0 -> 90 deg about z; at s
  // its face normal is (cos a, sin a, 0) with a = 90 s deg, and the ray along +x through the
  // centre meets the face at 10 - 0.1 / cos a
  int g = add_prim(f.s, SCENE_PRIM_BOX, 0.1, 5, 5);
  pose_t a = pose_at(10, 0, 0), b = pose_rot(10, 0, 0, 0, 0, 1, M_PI / 2);
  ASSERT_TRUE(add_instance(f.s, g, kUnit, 1, 1, a, b, 0) >= 0);
  ASSERT_OK(commit(f.s));
  static const double times[3] = {0, 0.25, 0.5};
  for (int i = 0; i < 3; i++) {
    double ang = times[i] * M_PI / 2;
    ASSERT_HIT(shoot_t(f.s, 0, 0, 0, 1, 0, 0, times[i]), 10.0 - 0.1 / cos(ang), -cos(ang),
               -sin(ang), 0);
  }

  // at s = 1 the plate's long side (half 5) faces the ray
  ASSERT_HIT(shoot_t(f.s, 0, 0, 0, 1, 0, 0, 1.0), 5.0, -1, 0, 0);
  return teardown(&f);
}


// KAT-INT (docs/time.md): a body at the origin turning from the identity to +90 deg about z
// in one step carries an object at local (1, 0, 0). The object moves on the arc: at s = 0.5 its
// centre is at (cos 45, sin 45, 0) = (0.7071067812, 0.7071067812, 0), at s = 0.25 at
// (0.9238795325, 0.3826834324, 0); the chord would put it at (0.5, 0.5, 0) at s = 0.5.
TEST(scene_object_moves_rigidly_with_its_body_on_the_arc) {
  fixture_t f;
  ASSERT_OK(setup(&f));
  int g = add_prim(f.s, SCENE_PRIM_SPHERE, 0.1, 0, 0);
  err_msg_t msg = {{0}};
  int h = scene_add_instance(f.s, g, kUnit, 7, 0, &msg);
  ASSERT_TRUE(h >= 0);
  pose_t local = pose_at(1, 0, 0);
  pose_t b0 = xform_identity(), b1 = pose_rot(0, 0, 0, 0, 0, 1, M_PI / 2);
  scene_set_instance_pose(f.s, h, &local, &b0, &b1);
  ASSERT_OK(commit(f.s));

  // rays straight down onto the KAT centres meet the top of the sphere, 10 - 0.1 m away.
  // Embree interpolates the transform in float (its slerp and the inverse it traces with): the
  // centre is placed to about 1e-6 m, which tilts the normal of a 0.1 m sphere by 1e-5.
  static const struct {
    double s, x, y;
  } kKat[] = {{0.0, 1.0, 0.0},
              {0.25, 0.9238795325, 0.3826834324},
              {0.5, 0.7071067812, 0.7071067812},
              {1.0, 0.0, 1.0}};
  for (size_t i = 0; i < sizeof kKat / sizeof kKat[0]; i++) {
    scene_hit_t hit = shoot_t(f.s, kKat[i].x, kKat[i].y, 10, 0, 0, -1, kKat[i].s);
    ASSERT_NEAR(hit.distance, 10.0 - 0.1, TOL(10.0));
    ASSERT_NEAR(hit.normal[0], 0.0, 1e-4);
    ASSERT_NEAR(hit.normal[1], 0.0, 1e-4);
    ASSERT_NEAR(hit.normal[2], 1.0, 1e-8);
    ASSERT_EQ(hit.object_id, 7);
  }

  // the chord's midpoint is empty at s = 0.5 (the sphere is 0.29 m away from it)
  ASSERT_MISS(shoot_t(f.s, 0.5, 0.5, 10, 0, 0, -1, 0.5));

  // from the axis, the object is 1 m away in every direction it passes through
  for (int k = 0; k <= 8; k++) {
    double s = k / 8.0, a = s * M_PI / 2;
    scene_hit_t hit = shoot_t(f.s, 0, 0, 0, cos(a), sin(a), 0, s);
    ASSERT_NEAR(hit.distance, 1.0 - 0.1, TOL(1.0));
    ASSERT_NEAR(hit.normal[0], -cos(a), 1e-4);
    ASSERT_NEAR(hit.normal[1], -sin(a), 1e-4);
  }
  return teardown(&f);
}


// A local pose with its own rotation and a scale: at s = 0.5 the body is at Rz(45 deg) and
// moved by (0, 0, 2) of its (0, 0, 4) travel, the object (a box of half extents
// (0.1, 0.2 * 2, 0.3) after the scale) at local (1, 0, 0) turned by Rz(90 deg), so its world
// orientation is Rz(135 deg): its local -y axis points along (cos 45, sin 45, 0), outward.
TEST(scene_mounted_object_keeps_its_local_rotation_and_scale) {
  fixture_t f;
  ASSERT_OK(setup(&f));
  int g = add_prim(f.s, SCENE_PRIM_BOX, 0.1, 0.2, 0.3);
  err_msg_t msg = {{0}};
  static const double scale[3] = {1.0, 2.0, 1.0};
  int h = scene_add_instance(f.s, g, scale, 8, 0, &msg);
  ASSERT_TRUE(h >= 0);
  pose_t local = pose_rot(1, 0, 0, 0, 0, 1, M_PI / 2);
  pose_t b0 = xform_identity(), b1 = pose_rot(0, 0, 4, 0, 0, 1, M_PI / 2);
  scene_set_instance_pose(f.s, h, &local, &b0, &b1);
  ASSERT_OK(commit(f.s));

  // inward along the radius at 45 deg, at the body's mid height: the face 1 + 0.4 m out
  double c = sqrt(0.5);
  ASSERT_HIT(shoot_t(f.s, 5 * c, 5 * c, 2, -c, -c, 0, 0.5), 5.0 - 1.0 - 0.4, c, c, 0);

  // down onto the centre: the top face, 0.3 m above the centre
  ASSERT_HIT(shoot_t(f.s, c, c, 10, 0, 0, -1, 0.5), 10.0 - 2.0 - 0.3, 0, 0, 1);

  // the same pose through xform_mounted, the double-precision reference for sensors
  pose_t m = xform_mounted(&b0, &b1, &local, 0.5);
  ASSERT_NEAR(m.p[0], c, 1e-12);
  ASSERT_NEAR(m.p[1], c, 1e-12);
  ASSERT_NEAR(m.p[2], 2.0, 1e-12);
  return teardown(&f);
}


// A body standing still: one time step, the object composed on the body in double.
TEST(scene_object_on_a_still_body_is_composed) {
  fixture_t f;
  ASSERT_OK(setup(&f));
  int g = add_prim(f.s, SCENE_PRIM_SPHERE, 0.5, 0, 0);
  err_msg_t msg = {{0}};
  int h = scene_add_instance(f.s, g, kUnit, 9, 0, &msg);
  ASSERT_TRUE(h >= 0);
  pose_t local = pose_at(2, 0, 0);
  pose_t body = pose_rot(10, 0, 0, 0, 0, 1, M_PI / 2);
  scene_set_instance_pose(f.s, h, &local, &body, &body);
  ASSERT_OK(commit(f.s));

  // the object is at (10, 2, 0) at every time
  for (int k = 0; k <= 2; k++) {
    ASSERT_HIT(shoot_t(f.s, 10, -5, 0, 0, 1, 0, 0.5 * k), 7.0 - 0.5, 0, -1, 0);
  }
  return teardown(&f);
}


TEST(scene_instance_updates_never_rebuild_geometry) {
  fixture_t f;
  ASSERT_OK(setup(&f));
  int g = add_cube_mesh(f.s);
  int h[100];
  for (int i = 0; i < 100; i++) {
    err_msg_t msg = {{0}};
    h[i] = scene_add_instance(f.s, g, kUnit, (uint32_t)i + 1, 0, &msg);
    ASSERT_TRUE(h[i] >= 0);
  }

  // 10 steps, each moving every cube: cube i ends at x = 10 + 3 i, y = step
  for (int step = 0; step < 10; step++) {
    for (int i = 0; i < 100; i++) {
      pose_t a = pose_at(10 + 3 * i, step - 1, 0), b = pose_at(10 + 3 * i, step, 0);
      pose_t origin = xform_identity();
      scene_set_instance_pose(f.s, h[i], &origin, &a, &b);
    }
    ASSERT_OK(commit(f.s));
  }
  scene_counters_t c;
  scene_counters(f.s, &c);
  ASSERT_EQ(c.geometry_builds, 1);
  ASSERT_EQ(c.instance_updates, 1000);
  ASSERT_EQ(c.commits, 10);
  ASSERT_EQ(c.backend_errors, 0);
  ASSERT_TRUE(c.backend_bytes > 0);

  // the last step's end pose: cube 0 spans x in [9, 11] at y = 9 +- 1
  scene_hit_t hit = shoot_t(f.s, 0, 9, 0, 1, 0, 0, 1.0);
  ASSERT_HIT(hit, 9.0, -1, 0, 0);
  ASSERT_EQ(hit.object_id, 1);
  hit = shoot_t(f.s, 10 + 3 * 57, 9, 10, 0, 0, -1, 1.0);
  ASSERT_EQ(hit.object_id, 58);
  ASSERT_EQ(hit.primitive / 2, 1);  // triangles 2 and 3 are the +z face
  scene_counters(f.s, &c);
  ASSERT_EQ(c.rays_traced, 2);
  return teardown(&f);
}


//---------------- Removal

TEST(scene_removed_instances_are_not_hit) {
  fixture_t f;
  ASSERT_OK(setup(&f));
  int g = add_prim(f.s, SCENE_PRIM_SPHERE, 1, 0, 0);
  int a = place(f.s, g, kUnit, pose_at(5, 0, 0), 1);
  int b = place(f.s, g, kUnit, pose_at(10, 0, 0), 2);
  int c = place(f.s, g, kUnit, pose_at(15, 0, 0), 3);
  ASSERT_TRUE(a >= 0 && b >= 0 && c >= 0);
  ASSERT_OK(commit(f.s));
  ASSERT_EQ(shoot(f.s, 0, 0, 0, 1, 0, 0).object_id, 1);

  // remove the front two one at a time
  scene_remove_instance(f.s, a);
  ASSERT_OK(commit(f.s));
  scene_hit_t h = shoot(f.s, 0, 0, 0, 1, 0, 0);
  ASSERT_EQ(h.object_id, 2);
  ASSERT_NEAR(h.distance, 9.0, TOL(9.0));
  scene_remove_instance(f.s, b);
  scene_remove_instance(f.s, b);  // twice: ignored
  ASSERT_OK(commit(f.s));
  ASSERT_EQ(shoot(f.s, 0, 0, 0, 1, 0, 0).object_id, 3);

  // a handle is reused, with its new data, right after removal
  int d = place(f.s, g, kUnit, pose_at(2, 0, 0), 4);
  ASSERT_TRUE(d == a || d == b);
  ASSERT_OK(commit(f.s));
  h = shoot(f.s, 0, 0, 0, 1, 0, 0);
  ASSERT_EQ(h.object_id, 4);
  ASSERT_NEAR(h.distance, 1.0, TOL(1.0));

  // remove everything, then the geometry; a new geometry takes its slot
  scene_remove_instance(f.s, c);
  scene_remove_instance(f.s, d);
  ASSERT_OK(commit(f.s));
  ASSERT_MISS(shoot(f.s, 0, 0, 0, 1, 0, 0));
  scene_remove_geometry(f.s, g);
  int g2 = add_prim(f.s, SCENE_PRIM_BOX, 1, 1, 1);
  ASSERT_EQ(g2, g);
  ASSERT_TRUE(place(f.s, g2, kUnit, pose_at(3, 0, 0), 5) >= 0);
  ASSERT_OK(commit(f.s));
  ASSERT_HIT(shoot(f.s, 0, 0, 0, 1, 0, 0), 2.0, -1, 0, 0);
  return teardown(&f);
}


TEST(scene_empty_scene_misses) {
  fixture_t f;
  ASSERT_OK(setup(&f));
  ASSERT_MISS(shoot(f.s, 0, 0, 0, 1, 0, 0));  // never committed: still valid
  ASSERT_OK(commit(f.s));
  ASSERT_MISS(shoot(f.s, 0, 0, 0, 0, 0, 1));
  return teardown(&f);
}


//---------------- Threads

typedef struct trace_job {
  const scene_t* s;
  const scene_ray_t* rays;
  scene_hit_t* hits;
} trace_job_t;


static void trace_chunk(void* ctx, size_t begin, size_t end) {
  trace_job_t* j = ctx;
  rows(j->s, j->rays + begin, j->hits + begin, end - begin);
}


TEST(scene_concurrent_trace_matches_serial) {
  fixture_t f;
  ASSERT_OK(setup(&f));
  ASSERT_OK(place_ring(f.s, NULL));
  ASSERT_OK(commit(f.s));

  // a fan of rays in the horizontal plane, at various times
  enum { N = 20000 };
  scene_ray_t* rays = calloc(N, sizeof *rays);
  scene_hit_t* ref = calloc(N, sizeof *ref);
  scene_hit_t* out = calloc(N, sizeof *out);
  ASSERT_TRUE(rays && ref && out);
  for (int i = 0; i < N; i++) {
    double ang = 2 * M_PI * i / N;
    scene_ray_t r = {{0, 0, 0.1}, {cos(ang), sin(ang), 0}, 100.0, (i % 5) * 0.25};
    rays[i] = r;
  }
  rows(f.s, rays, ref, N);
  int nhit = 0;
  for (int i = 0; i < N; i++) {
    nhit += ref[i].object_id != 0;
  }
  ASSERT_TRUE(nhit > N / 10);

  pool_t* p = pool_create(4);
  ASSERT_TRUE(p != NULL);
  trace_job_t job = {f.s, rays, out};
  pool_parallel_for(p, N, 64, trace_chunk, &job);
  pool_destroy(p);
  int same = memcmp(ref, out, N * sizeof *out) == 0;
  free(rays);
  free(ref);
  free(out);
  ASSERT_TRUE(same);
  scene_counters_t c;
  scene_counters(f.s, &c);
  ASSERT_EQ(c.rays_traced, 2 * N);
  return teardown(&f);
}


//---------------- Packets

// xorshift64*: a fixed stream of uniform doubles in [0, 1)
static double rnd(uint64_t* state) {
  *state ^= *state >> 12;
  *state ^= *state << 25;
  *state ^= *state >> 27;
  return (double)((*state * 0x2545F4914F6CDD1DULL) >> 11) * 0x1.0p-53;
}


static double rnd_in(uint64_t* state, double lo, double hi) {
  return lo + (hi - lo) * rnd(state);
}


// A random unit quaternion pose at (x, y, z).
static pose_t pose_random(uint64_t* st, double x, double y, double z) {
  double ax[3] = {rnd_in(st, -1, 1), rnd_in(st, -1, 1), rnd_in(st, -1, 1)};
  double n = sqrt(ax[0] * ax[0] + ax[1] * ax[1] + ax[2] * ax[2]) + 1e-9;
  return pose_rot(x, y, z, ax[0] / n, ax[1] / n, ax[2] / n, rnd_in(st, -M_PI, M_PI));
}


// A bumpy sphere mesh of radius ~1 (lat-long grid), so packets meet many small triangles.
static int add_blob_mesh(scene_t* s) {
  enum { STACKS = 12, SLICES = 24 };
  float v[(STACKS + 1) * SLICES * 3];
  uint32_t idx[STACKS * SLICES * 6];
  for (int i = 0; i <= STACKS; i++) {
    double th = M_PI * i / STACKS;
    for (int j = 0; j < SLICES; j++) {
      double ph = 2 * M_PI * j / SLICES;
      double r = 1.0 + 0.1 * sin(3 * th) * cos(4 * ph);
      float* p = &v[3 * (i * SLICES + j)];
      p[0] = (float)(r * sin(th) * cos(ph));
      p[1] = (float)(r * sin(th) * sin(ph));
      p[2] = (float)(r * cos(th));
    }
  }
  uint32_t nt = 0;
  for (uint32_t i = 0; i < STACKS; i++) {
    for (uint32_t j = 0; j < SLICES; j++) {
      uint32_t a = i * SLICES + j, b = i * SLICES + (j + 1) % SLICES;
      uint32_t c = a + SLICES, d = b + SLICES;
      uint32_t* t = &idx[6 * nt++];
      t[0] = a, t[1] = c, t[2] = b, t[3] = b, t[4] = c, t[5] = d;
    }
  }
  err_msg_t msg = {{0}};
  return noted(scene_add_mesh(s, v, (STACKS + 1) * SLICES, idx, 2 * nt, &msg), "scene_add_mesh",
               &msg);
}


// Packet tracing (scene_trace over the whole array, and in chunks whose remainders fill
// partial packets) gives bit-identical hits to tracing every ray alone (a one-lane packet):
// mixed primitives and meshes, scaled/rotated and moving instances, clamped times, misses and
// empty rays. Embree intersects a lane with the same float kernels whether it traverses the
// packet or the lane alone, so t and Ng agree to the bit; only an exact tie (equal t on two
// primitives, e.g. a ray through a shared mesh edge) could be resolved by traversal order,
// and random rays meet none. The primitive callbacks see N = 8 with a partial valid mask;
// random rays make incoherent packets, which are traced lane by lane.
TEST(scene_packets_match_single_rays) {
  fixture_t f;
  ASSERT_OK(setup(&f));
  uint64_t st = 0x9E3779B97F4A7C15ULL;

  // geometries: every primitive kind and two meshes
  int g[7] = {
      add_prim(f.s, SCENE_PRIM_BOX, 1, 0.5, 0.75),  add_prim(f.s, SCENE_PRIM_SPHERE, 0.8, 0, 0),
      add_prim(f.s, SCENE_PRIM_CYLINDER, 0.5, 1, 0), add_prim(f.s, SCENE_PRIM_CAPSULE, 0.4, 0.8, 0),
      add_prim(f.s, SCENE_PRIM_PLANE, 2, 0, 0),      add_cube_mesh(f.s),
      add_blob_mesh(f.s),
  };
  for (int i = 0; i < 7; i++) {
    ASSERT_TRUE(g[i] >= 0);
  }

  // 40 instances on a ring of radius 10 around the origin: random scales and orientations,
  // every other one moving (translation and rotation) over the step, every fifth frozen
  enum { NOBJ = 40 };
  for (int i = 0; i < NOBJ; i++) {
    double ang = 2 * M_PI * i / NOBJ;
    double scale[3] = {rnd_in(&st, 0.5, 2), rnd_in(&st, 0.5, 2), rnd_in(&st, 0.5, 2)};
    double z = rnd_in(&st, -2, 2);
    pose_t a = pose_random(&st, 10 * cos(ang), 10 * sin(ang), z);
    pose_t b = a;
    if (i % 2) {
      b = pose_random(&st, 10 * cos(ang) + rnd_in(&st, -1, 1), 10 * sin(ang), z + 0.5);
    }
    ASSERT_TRUE(add_instance(f.s, g[i % 7], scale, (uint32_t)i + 1, (uint32_t)i % 3, a, b,
                             i % 5 == 0) >= 0);
  }
  ASSERT_OK(commit(f.s));

  // rays: lidar-like fans (coherent runs in caller order) from a few origins, then random rays
  // aimed near the ring;
  // times spread over and beyond [0, 1]; some short, zero, negative or NaN tmax
  enum { N = 4099 };  // not a multiple of any packet width: the last packet is partial
  scene_ray_t* rays = calloc(N, sizeof *rays);
  scene_hit_t* pk = calloc(N, sizeof *pk);
  scene_hit_t* one = calloc(N, sizeof *one);
  scene_hit_t* chunked = calloc(N, sizeof *chunked);
  ASSERT_TRUE(rays && pk && one && chunked);
  for (int i = 0; i < N; i++) {
    scene_ray_t* r = &rays[i];
    double d[3];
    if (i < N / 2) {
      int col = i / 32, ch = i % 32;  // column-major: 32 channels per azimuth
      double az = 2 * M_PI * col / 64.0 + 0.01 * (i / 2048), el = -0.25 + 0.5 * ch / 31.0;
      r->origin[0] = (i / 2048) * 0.7;
      r->origin[1] = -(i / 2048) * 0.3;
      r->origin[2] = 0.2;
      d[0] = cos(el) * cos(az), d[1] = cos(el) * sin(az), d[2] = sin(el);
    } else {
      // from anywhere (inside objects too) towards a point near the ring
      double ang = rnd_in(&st, 0, 2 * M_PI);
      double aim[3] = {10 * cos(ang), 10 * sin(ang), 0};
      for (int a = 0; a < 3; a++) {
        r->origin[a] = rnd_in(&st, -12, 12);
        d[a] = aim[a] + rnd_in(&st, -2.5, 2.5) - r->origin[a];
      }
    }
    double n = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
    for (int a = 0; a < 3; a++) {
      r->dir[a] = d[a] / n;
    }
    r->time = rnd_in(&st, -0.2, 1.2);
    double u = rnd(&st);
    r->tmax = u < 0.03 ? 0.0 : u < 0.05 ? -1.0 : u < 0.06 ? NAN : u < 0.3 ? rnd_in(&st, 1, 12)
                                                                         : INFINITY;
  }

  // packets; one at a time; chunks of 1..19 rays (partial packets everywhere)
  rows(f.s, rays, pk, N);
  for (int i = 0; i < N; i++) {
    rows(f.s, &rays[i], &one[i], 1);
  }
  for (int i = 0, m = 1; i < N; i += m, m = m % 19 + 1) {
    rows(f.s, rays + i, chunked + i, (size_t)(N - i < m ? N - i : m));
  }

  // identical, bit for bit; the set is not trivial: hits on every object, misses, empty rays
  int nhit = 0, nempty = 0, nempty_hit = 0, ndiff = 0, first = -1, nnan = 0;
  int seen[NOBJ + 1] = {0};
  for (int i = 0; i < N; i++) {
    if (memcmp(&pk[i], &one[i], sizeof pk[i]) || memcmp(&pk[i], &chunked[i], sizeof pk[i])) {
      ndiff++;
      first = first < 0 ? i : first;
    }
    nhit += pk[i].object_id != 0;
    nempty += !(rays[i].tmax > 0.0);
    nnan += isnan(rays[i].tmax);
    seen[pk[i].object_id <= NOBJ ? pk[i].object_id : 0] = 1;
    nempty_hit += !(rays[i].tmax > 0.0) && (pk[i].object_id != 0 || !isinf(pk[i].distance));
  }
  if (ndiff) {
    fprintf(stderr, "# %d rays differ; first %d: packet %.9g obj %u, single %.9g obj %u\n",
            ndiff, first, pk[first].distance, pk[first].object_id, one[first].distance,
            one[first].object_id);
  }
  int nseen = 0;
  for (int i = 1; i <= NOBJ; i++) {
    nseen += seen[i];
  }
  free(rays);
  free(pk);
  free(one);
  free(chunked);
  ASSERT_EQ(ndiff, 0);
  ASSERT_EQ(nempty_hit, 0);
  ASSERT_TRUE(nhit > N / 5 && nhit < N - N / 10);
  ASSERT_TRUE(nempty > N / 50);
  ASSERT_TRUE(nseen > NOBJ * 3 / 4);
  scene_counters_t c;
  scene_counters(f.s, &c);
  ASSERT_EQ(c.rays_traced + c.rays_invalid, 3 * (uint64_t)N);
  ASSERT_TRUE(nnan > 0);
  ASSERT_EQ(c.rays_invalid, 3 * (uint64_t)nnan);   // a NaN tmax: invalid, not traced
  return teardown(&f);
}


TEST(scene_memory_budget_refuses_builds_with_a_clear_error) {
  // a 1 MiB budget: a 100k-triangle mesh (about 1.2 MB of vertices alone in Embree's buffers)
  // must fail cleanly, and the device must stay usable for what fits
  err_msg_t msg;
  scene_device_t* dev = scene_device_create(&msg);
  ASSERT_TRUE(dev != NULL);
  scene_t* s = scene_create(dev, &msg);
  ASSERT_TRUE(s != NULL);
  scene_device_set_budget(dev, 1 << 20);
  enum { NT = 100000 };
  float* v = malloc(sizeof(float) * 9 * NT);
  uint32_t* idx = malloc(sizeof(uint32_t) * 3 * NT);
  ASSERT_TRUE(v && idx);
  for (uint32_t t = 0; t < NT; t++) {
    float x = (float)(t % 1000), y = (float)(t / 1000);
    float tri[9] = {x, y, 0, x + 1, y, 0, x, y + 1, 0};
    memcpy(v + 9 * t, tri, sizeof(tri));
    idx[3 * t] = 3 * t;
    idx[3 * t + 1] = 3 * t + 1;
    idx[3 * t + 2] = 3 * t + 2;
  }
  int g = scene_add_mesh(s, v, 3 * NT, idx, NT, &msg);
  ASSERT_EQ(g, ERR_LIMIT);
  ASSERT_CONTAINS(msg.text, "memory budget");

  // a small primitive still fits, and tracing works
  static const double r[3] = {1.0, 0.0, 0.0};
  int p = scene_add_primitive(s, SCENE_PRIM_SPHERE, r, &msg);
  ASSERT_TRUE(p >= 0);
  static const double one[3] = {1.0, 1.0, 1.0};
  int in = scene_add_instance(s, p, one, 9, 0, &msg);
  ASSERT_TRUE(in >= 0);
  pose_t id = xform_identity();
  scene_set_instance_pose(s, in, &id, NULL, NULL);
  ASSERT_OK(scene_commit(s, &msg));
  scene_ray_t ray = {{-5, 0, 0}, {1, 0, 0}, INFINITY, 1.0};
  scene_hit_t hit;
  rows(s, &ray, &hit, 1);
  ASSERT_NEAR(hit.distance, 4.0, 1e-5);
  free(v);
  free(idx);
  scene_destroy(s);
  scene_device_destroy(dev);
  return 0;
}


// Whether n rays in rows (trace: rows or rows16) get the same bytes with the AVX2 packet paths
// (into a) as without (into b); both filled with different garbage first.
static bool simd_agrees(const scene_t* s,
                        void (*trace)(const scene_t*, const scene_ray_t*, scene_hit_t*, size_t),
                        const scene_ray_t* rays, size_t n, scene_hit_t* a, scene_hit_t* b) {
  memset(a, 0xA5, n * sizeof *a);
  memset(b, 0x5A, n * sizeof *b);
  use_simd(true);
  trace(s, rays, a, n);
  use_simd(false);
  trace(s, rays, b, n);
  return memcmp(a, b, n * sizeof *a) == 0;
}


// The AVX2 packet paths give the scalar paths' hits bit for bit (every byte of every record):
// 16-wide lidar tiles (coherent, from origins a few centimetres apart, scattered, some lanes
// off, moving and static instances), the same rays in rows of 8, and 8-wide request arrays.
TEST(scene_simd_paths_equal_scalar_paths) {
  fixture_t f;
  ASSERT_OK(setup(&f));
  int h[RING];
  ASSERT_OK(place_ring(f.s, h));
  for (int i = 0; i < RING; i += 3) {
    // on a body that moves (every third object) and turns (every sixth)
    double ang = 2 * M_PI * i / RING;
    pose_t b0 = pose_at(0, 0, 0), b1 = pose_at(0.5, 0, 0.2);
    if (i % 2 == 0) {
      b1.q[0] = cos(0.2);
      b1.q[3] = sin(0.2);
    }
    pose_t local = pose_at(8 * cos(ang), 8 * sin(ang), 0);
    scene_set_instance_pose(f.s, h[i], &local, &b0, &b1);
  }
  ASSERT_OK(commit(f.s));

  enum { N = 16 * 3 * 64 + 7 };
  scene_ray_t* rays = calloc(N, sizeof *rays);
  scene_hit_t* a = calloc(N, sizeof *a);
  scene_hit_t* b = calloc(N, sizeof *b);
  double* org = calloc(3 * N, sizeof *org);
  double* dir = calloc(3 * N, sizeof *dir);
  ASSERT_TRUE(rays && a && b && org && dir);
  uint64_t st = 777;
  for (int i = 0; i < N; i++) {
    int tile = i / 16, lane = i % 16, mode = (tile / 64) % 3;
    double az = 2 * M_PI * (tile % 64) / 64 + 0.003 * (lane % 4);
    double el = 0.01 * (lane / 4) - 0.02;
    if (mode == 2) {
      az = rnd_in(&st, -M_PI, M_PI);
      el = rnd_in(&st, -0.3, 0.3);
    }
    double shift = mode == 1 ? 0.02 * (lane % 4) : 0.0;
    scene_ray_t ray = {{shift, 0.01, 0.1},
                       {cos(el) * cos(az), cos(el) * sin(az), sin(el)},
                       tile % 7 == 3 && lane == 5 ? 0.0 : 100.0,   // a lane off
                       tile % 11 == 4 ? NAN : rnd_in(&st, -0.2, 1.2)};
    rays[i] = ray;
    memcpy(&org[3 * i], ray.origin, sizeof ray.origin);
    memcpy(&dir[3 * i], ray.dir, sizeof ray.dir);
  }
  ASSERT_TRUE(simd_agrees(f.s, rows16, rays, N, a, b));

  // rows of 8 (into a copy: a keeps the rows of 16)
  scene_hit_t* r8 = calloc(N, sizeof *r8);
  ASSERT_TRUE(r8 != NULL);
  ASSERT_TRUE(simd_agrees(f.s, rows, rays, N, r8, b));
  free(r8);
  int nhit = 0;
  for (int i = 0; i < N; i++) {
    nhit += a[i].object_id != 0;
  }
  ASSERT_TRUE(nhit > N / 8);

  // the same rays in packets of columns: the hits of rows of 16, bit for bit, with the
  // AVX2 path and without, and with objects filtered out
  size_t npk = (N + SCENE_PACKET - 1) / SCENE_PACKET;
  scene_packet_t* pk = calloc(npk, sizeof *pk);
  scene_packet_hits_t* ph = calloc(npk, sizeof *ph);
  ASSERT_TRUE(pk && ph);
  for (int i = 0; i < N; i++) {
    scene_packet_t* c = &pk[i / SCENE_PACKET];
    int k = i % SCENE_PACKET;
    c->ox[k] = rays[i].origin[0];
    c->oy[k] = rays[i].origin[1];
    c->oz[k] = rays[i].origin[2];
    c->dx[k] = rays[i].dir[0];
    c->dy[k] = rays[i].dir[1];
    c->dz[k] = rays[i].dir[2];
    c->tmax[k] = rays[i].tmax;
    c->time[k] = rays[i].time;
  }
  uint32_t hidden[3] = {2, 9, 14};
  scene_filter_t filter = {hidden, 3};
  for (int pass = 0; pass < 4; pass++) {
    const scene_filter_t* fl = pass >= 2 ? &filter : NULL;
    use_simd(pass % 2 == 0);
    memset(ph, 0xA5, npk * sizeof *ph);
    columns(f.s, pk, N, ph, fl, NULL);
    rows16_filtered(f.s, rays, b, N, fl);
    int filtered_hits = 0;
    for (int i = 0; i < N; i++) {
      const scene_packet_hits_t* c = &ph[i / SCENE_PACKET];
      int k = i % SCENE_PACKET;
      scene_hit_t col = {.distance = c->distance[k],
                         .normal = {c->nx[k], c->ny[k], c->nz[k]},
                         .object_id = c->object_id[k], .label = c->label[k],
                         .primitive = c->primitive[k]};
      ASSERT_TRUE(memcmp(&col.distance, &b[i].distance, 4 * sizeof(double)) == 0);
      ASSERT_EQ(col.object_id, b[i].object_id);
      ASSERT_EQ(col.label, b[i].label);
      ASSERT_EQ(col.primitive, b[i].primitive);
      filtered_hits += fl && a[i].object_id != col.object_id;
      ASSERT_TRUE(!fl || (col.object_id != 2 && col.object_id != 9 && col.object_id != 14));
    }
    ASSERT_TRUE(!fl || filtered_hits > 0);
  }
  free(pk);
  free(ph);

  scene_rays_t in = {.origins = org, .directions = dir, .tmax = 100.0, .max_coord = 1e6,
                     .min_direction = 1e-12};
  memset(a, 0xA5, N * sizeof *a);
  memset(b, 0x5A, N * sizeof *b);
  use_simd(true);
  ASSERT_EQ(request(f.s, &in, 0, N, a, NULL), (size_t)N);
  use_simd(false);
  ASSERT_EQ(request(f.s, &in, 0, N, b, NULL), (size_t)N);
  ASSERT_TRUE(memcmp(a, b, N * sizeof *a) == 0);
  use_simd(true);
  free(rays);
  free(a);
  free(b);
  free(org);
  free(dir);
  return teardown(&f);
}


//---------------- Rays the backend must not be handed

// Rays no caller should make and an adversarial one can (a lidar whose angle noise made a
// non-finite direction once stopped the daemon inside Embree): origin, direction, tmax; and
// whether a request refuses it (its bounds normalise the direction: any finite non-zero length
// is a usable ray there).
typedef struct bad_ray {
  double o[3], d[3], tmax;
  int request_refuses;
} bad_ray_t;

static const bad_ray_t kBadRays[] = {
    {{NAN, 0.01, 0.1}, {1, 0, 0}, 100.0, 1},          // a NaN origin
    {{0, INFINITY, 0.1}, {1, 0, 0}, 100.0, 1},        // an infinite origin
    {{0, 0.01, 1e300}, {1, 0, 0}, 100.0, 1},          // finite in double, infinite in float
    {{1e30, 0.01, 0.1}, {-1, 0, 0}, INFINITY, 1},     // a float beyond SCENE_RAY_MAX
    {{0, 0.01, 0.1}, {NAN, 0, 0}, 100.0, 1},          // a NaN direction
    {{0, 0.01, 0.1}, {0, 0, 0}, 100.0, 1},            // a zero direction
    {{0, 0.01, 0.1}, {1e-40, 0, 0}, 100.0, 0},        // a float subnormal: zero when traced
    {{0, 0.01, 0.1}, {0.5, 0, -INFINITY}, 100.0, 1},  // an infinite direction
    {{0, 0.01, 0.1}, {1e25, 0, 0}, 100.0, 0},         // a float beyond SCENE_RAY_MAX
    {{0, 0.01, 0.1}, {1e-310, 0, 0}, 100.0, 1},       // its inverse length overflows
    {{0, 0.01, 0.1}, {1, 0, 0}, NAN, 1},              // a NaN tmax
};
#define NBAD ((int)(sizeof kBadRays / sizeof kBadRays[0]))


// Rays in rows as packets of columns.
static void to_columns(const scene_ray_t* rays, size_t n, scene_packet_t* pk) {
  for (size_t i = 0; i < n; i++) {
    scene_packet_t* c = &pk[i / SCENE_PACKET];
    size_t k = i % SCENE_PACKET;
    c->ox[k] = rays[i].origin[0];
    c->oy[k] = rays[i].origin[1];
    c->oz[k] = rays[i].origin[2];
    c->dx[k] = rays[i].dir[0];
    c->dy[k] = rays[i].dir[1];
    c->dz[k] = rays[i].dir[2];
    c->tmax[k] = rays[i].tmax;
    c->time[k] = rays[i].time;
  }
}


// Whether hit a of ray i is the miss an invalid ray gets (bad) or, bit for bit, want.
static int hit_as_expected(const scene_hit_t* got, const scene_hit_t* want, int bad) {
  if (bad) {
    return isinf(got->distance) && got->distance > 0 && got->normal[0] == 0.0 &&
           got->normal[1] == 0.0 && got->normal[2] == 0.0 && got->object_id == 0 &&
           got->label == 0 && got->primitive == 0;
  }
  return memcmp(got, want, offsetof(scene_hit_t, primitive) + sizeof got->primitive) == 0;
}


// Every layout of the entry point with invalid rays in some lanes (a packet's first lane, a
// middle one, its last): they are misses, counted in rays_invalid and not in rays_traced, and
// the other rays get the hits they get when those lanes have nothing to trace (tmax 0), bit for
// bit: rows in groups of 8 and 16 and columns (with a horizon and without), with and without
// the AVX2 paths and a filter, over still, moving and flat objects; a NaN tmax alone in any
// lane of a packet of columns too. A request refuses them (the index of the first), even from
// a caller whose bounds would let them through.
TEST(scene_invalid_rays_are_counted_misses_in_every_layout) {
  fixture_t f;
  ASSERT_OK(setup(&f));
  int h[RING];
  ASSERT_OK(place_ring(f.s, h));
  pose_t b0 = pose_at(0, 0, 0), b1 = pose_at(0.3, 0.2, 0);
  pose_t local = pose_at(8, 0, 0);
  scene_set_instance_pose(f.s, h[0], &local, &b0, &b1);   // object 1 moves over the step
  ASSERT_OK(commit(f.s));
  scene_counters_t c0, c1;
  scene_counters(f.s, &c0);
  ASSERT_TRUE(c0.flat_objects > 0);

  // tiles of 16 rays round the ring; in three of every four tiles, bad rays in lanes 0, 7, 15
  enum { TILES = 3 * NBAD + 3, N = 16 * TILES + 5 };
  scene_ray_t* bad = calloc(N, sizeof *bad);
  scene_ray_t* ref = calloc(N, sizeof *ref);
  scene_hit_t* got = calloc(N, sizeof *got);
  scene_hit_t* want = calloc(N, sizeof *want);
  int* is_bad = calloc(N, sizeof *is_bad);
  scene_packet_t* pk = calloc(TILES + 1, sizeof *pk);
  scene_packet_hits_t* ph = calloc(TILES + 1, sizeof *ph);
  ASSERT_TRUE(bad && ref && got && want && is_bad && pk && ph);
  int nbad = 0, kind = 0;
  for (int i = 0; i < N; i++) {
    int tile = i / 16, lane = i % 16;
    double az = 2 * M_PI * tile / TILES + 0.004 * (lane % 8);
    double el = 0.01 * (lane / 8);
    scene_ray_t r = {{0.0, 0.01, 0.1}, {cos(el) * cos(az), cos(el) * sin(az), sin(el)}, 100.0,
                     lane == 3 ? NAN : 0.5};   // a NaN time counts as 0: not invalid
    ref[i] = bad[i] = r;
    if (tile % 4 != 3 && (lane == 0 || lane == 7 || lane == 15) && i < 16 * TILES) {
      const bad_ray_t* b = &kBadRays[kind++ % NBAD];
      memcpy(bad[i].origin, b->o, sizeof b->o);
      memcpy(bad[i].dir, b->d, sizeof b->d);
      bad[i].tmax = b->tmax;
      ref[i].tmax = 0.0;
      is_bad[i] = 1;
      nbad++;
    }
  }
  ASSERT_TRUE(kind >= 2 * NBAD);
  uint32_t hidden[2] = {4, 11};
  scene_filter_t filter = {hidden, 2};
  scene_horizon_t* hz = malloc(sizeof *hz);
  ASSERT_TRUE(hz != NULL);
  scene_horizon(f.s, bad[1].origin, bad[1].origin, hz);
  to_columns(bad, N, pk);

  for (int pass = 0; pass < 8; pass++) {
    unsigned group = pass & 1 ? 16 : 8;
    int simd = (pass >> 1) & 1;
    const scene_filter_t* fl = pass & 4 ? &filter : NULL;
    use_simd(simd);
    scene_trace(f.s, &(scene_batch_t){.layout = SCENE_ROWS, .group = group, .n = N,
                                      .rays = ref, .hits = want, .filter = fl});
    int nhit = 0;
    for (int i = 0; i < N; i++) {
      nhit += want[i].object_id != 0;
    }
    ASSERT_TRUE(nhit > N / 4);

    // rows
    memset(got, 0xA5, N * sizeof *got);
    scene_counters(f.s, &c0);
    ASSERT_EQ(scene_trace(f.s, &(scene_batch_t){.layout = SCENE_ROWS, .group = group, .n = N,
                                                .rays = bad, .hits = got, .filter = fl}),
              N);
    scene_counters(f.s, &c1);
    ASSERT_EQ(c1.rays_invalid - c0.rays_invalid, nbad);
    if (!fl) {
      ASSERT_EQ(c1.rays_traced - c0.rays_traced, N - nbad);
    }
    for (int i = 0; i < N; i++) {
      if (!hit_as_expected(&got[i], &want[i], is_bad[i])) {
        CHECK_FAIL("pass %d, rows of %u: ray %d (bad %d): distance %g object %u, want %g %u",
                   pass, group, i, is_bad[i], got[i].distance, got[i].object_id,
                   want[i].distance, want[i].object_id);
      }
    }

    // columns, as rows of 16, with a horizon and without
    for (int cull = 0; group == 16 && cull < 2; cull++) {
      memset(ph, 0xA5, (TILES + 1) * sizeof *ph);
      scene_counters(f.s, &c0);
      ASSERT_EQ(scene_trace(f.s, &(scene_batch_t){.layout = SCENE_COLUMNS, .n = N, .packets = pk,
                                                  .packet_hits = ph, .filter = fl,
                                                  .horizon = cull ? hz : NULL}),
                N);
      scene_counters(f.s, &c1);
      ASSERT_EQ(c1.rays_invalid - c0.rays_invalid, nbad);
      for (int i = 0; i < N; i++) {
        const scene_packet_hits_t* c = &ph[i / SCENE_PACKET];
        int k = i % SCENE_PACKET;
        scene_hit_t col = {.distance = c->distance[k], .normal = {c->nx[k], c->ny[k], c->nz[k]},
                           .object_id = c->object_id[k], .label = c->label[k],
                           .primitive = c->primitive[k]};
        if (!hit_as_expected(&col, &want[i], is_bad[i])) {
          CHECK_FAIL("pass %d, columns (horizon %d): ray %d (bad %d): distance %g object %u, "
                     "want %g %u", pass, cull, i, is_bad[i], col.distance, col.object_id,
                     want[i].distance, want[i].object_id);
        }
      }
    }
  }

  // a packet pointing up, above the horizon but for two invalid rays that point up too: those
  // are counted invalid, not culled (and the packet goes to its invalid check, not untraced)
  use_simd(true);
  for (int k = 0; k < SCENE_PACKET; k++) {
    pk[0].ox[k] = bad[1].origin[0];
    pk[0].oy[k] = bad[1].origin[1];
    pk[0].oz[k] = bad[1].origin[2];
    pk[0].dx[k] = 0.3 * cos(0.4 * k);
    pk[0].dy[k] = 0.3 * sin(0.4 * k);
    pk[0].dz[k] = k == 5 ? INFINITY : k == 9 ? 1e25 : sqrt(1.0 - 0.09);
    pk[0].tmax[k] = 100.0;
    pk[0].time[k] = 0.5;
  }
  scene_counters(f.s, &c0);
  columns(f.s, pk, SCENE_PACKET, ph, NULL, hz);
  scene_counters(f.s, &c1);
  ASSERT_EQ(c1.rays_invalid - c0.rays_invalid, 2);
  ASSERT_EQ(c1.rays_culled - c0.rays_culled, 0);   // traced in rows, where nothing is culled
  ASSERT_EQ(c1.rays_traced - c0.rays_traced, SCENE_PACKET - 2);
  for (int k = 0; k < SCENE_PACKET; k++) {
    ASSERT_TRUE(isinf(ph[0].distance[k]) && ph[0].object_id[k] == 0);
  }
  pk[0].dz[5] = pk[0].dz[9] = sqrt(1.0 - 0.09);   // all above: culled (on the AVX2 path)
  columns(f.s, pk, SCENE_PACKET, ph, NULL, hz);
  scene_counters(f.s, &c0);
  ASSERT_EQ(c0.rays_culled - c1.rays_culled, simd_level() >= SIMD_AVX2 ? SCENE_PACKET : 0);

  // a packet of columns whose one invalid ray is each bad ray in turn (a NaN tmax, which the
  // ray's floats do not show, among them), in each lane in turn, on each packing of columns
  // (AVX2, and AVX-512 where the CPU has it): counted invalid and a miss, the others as rows of
  // 16 trace them with that lane off
  for (int step = 0; step < 2 * NBAD * SCENE_PACKET; step++) {
    int lane = step % SCENE_PACKET, which = step / SCENE_PACKET % NBAD;
    simd_set_max(step < NBAD * SCENE_PACKET ? SIMD_AVX2 : SIMD_LEVEL_COUNT);
    const bad_ray_t* b = &kBadRays[which];
    scene_ray_t row[SCENE_PACKET];
    scene_hit_t off[SCENE_PACKET];
    memcpy(row, &ref[3 * SCENE_PACKET], sizeof row);   // a tile without bad rays
    row[lane].tmax = 0.0;
    scene_trace(f.s, &(scene_batch_t){.layout = SCENE_ROWS, .group = 16, .n = SCENE_PACKET,
                                      .rays = row, .hits = off});
    memcpy(row[lane].origin, b->o, sizeof b->o);
    memcpy(row[lane].dir, b->d, sizeof b->d);
    row[lane].tmax = b->tmax;
    to_columns(row, SCENE_PACKET, pk);
    scene_counters(f.s, &c0);
    columns(f.s, pk, SCENE_PACKET, ph, NULL, NULL);
    scene_counters(f.s, &c1);
    ASSERT_EQ(c1.rays_invalid - c0.rays_invalid, 1);
    ASSERT_EQ(c1.rays_traced - c0.rays_traced, SCENE_PACKET - 1);
    for (int k = 0; k < SCENE_PACKET; k++) {
      scene_hit_t col = {.distance = ph[0].distance[k],
                         .normal = {ph[0].nx[k], ph[0].ny[k], ph[0].nz[k]},
                         .object_id = ph[0].object_id[k], .label = ph[0].label[k],
                         .primitive = ph[0].primitive[k]};
      if (!hit_as_expected(&col, &off[k], k == lane)) {
        CHECK_FAIL("bad ray %d in lane %d (%s): lane %d distance %g object %u, want %g %u",
                   which, lane, simd_level_name(simd_level()), k, col.distance, col.object_id,
                   off[k].distance, off[k].object_id);
      }
    }
  }
  use_simd(true);

  // a request refuses each bad ray, even with no bounds of its own, and traces nothing invalid
  enum { M = 40, AT = 21 };
  double org[3 * M], dir[3 * M];
  for (int i = 0; i < M; i++) {
    memcpy(&org[3 * i], ref[i].origin, sizeof ref[i].origin);
    memcpy(&dir[3 * i], ref[i].dir, sizeof ref[i].dir);
  }
  scene_rays_t in = {.origins = org, .directions = dir, .tmax = 100.0, .max_coord = INFINITY,
                     .min_direction = 0.0};
  for (int k = 0; k < 2 * NBAD; k++) {
    const bad_ray_t* b = &kBadRays[k % NBAD];
    use_simd(k < NBAD);
    memcpy(&org[3 * AT], b->o, sizeof b->o);
    memcpy(&dir[3 * AT], b->d, sizeof b->d);
    in.tmax = b->tmax;
    scene_counters(f.s, &c0);
    size_t done = request(f.s, &in, 0, M, got, NULL);
    scene_counters(f.s, &c1);
    ASSERT_EQ(c1.rays_invalid - c0.rays_invalid, 0);
    if (b->request_refuses) {
      ASSERT_EQ(done, isnan(b->tmax) ? 0 : AT);
    } else {
      ASSERT_EQ(done, M);
      ASSERT_TRUE(got[AT].distance > 0.0);
    }
    memcpy(&org[3 * AT], ref[AT].origin, sizeof ref[AT].origin);
    memcpy(&dir[3 * AT], ref[AT].dir, sizeof ref[AT].dir);
  }
  use_simd(true);
  free(bad);
  free(ref);
  free(got);
  free(want);
  free(is_bad);
  free(pk);
  free(ph);
  free(hz);
  return teardown(&f);
}


// Rows in groups of 16 (the lidar's tiles) find the same hits as rows in groups of 8:
// tiles of 4 x 4 neighbouring directions from one origin (coherent packets), the same tiles
// from origins a few centimetres apart (a moving sensor), and scattered directions (traced lane
// by lane), at several times, with partial last packets.
TEST(scene_coherent16_matches_scene_trace) {
  fixture_t f;
  ASSERT_OK(setup(&f));
  ASSERT_OK(place_ring(f.s, NULL));
  ASSERT_OK(commit(f.s));

  enum { COLS = 512, ROWS = 8, N = COLS * ROWS * 3 + 5 };
  scene_ray_t* rays = calloc(N, sizeof *rays);
  scene_hit_t* ref = calloc(N, sizeof *ref);
  scene_hit_t* out = calloc(N, sizeof *out);
  ASSERT_TRUE(rays && ref && out);
  uint64_t st = 12345;
  size_t n = 0;
  for (int mode = 0; mode < 3; mode++) {
    for (int cb = 0; cb < COLS; cb += 4) {
      for (int rb = 0; rb < ROWS; rb += 4) {
        for (int c = cb; c < cb + 4; c++) {
          for (int r = rb; r < rb + 4; r++) {
            double az = 2 * M_PI * c / COLS, el = (r - ROWS / 2) * 0.01;
            if (mode == 2) {
              az = rnd_in(&st, -M_PI, M_PI);
              el = rnd_in(&st, -0.2, 0.2);
            }
            double shift = mode == 1 ? 0.01 * (c - cb) : 0.0;
            scene_ray_t ray = {{shift, 0, 0.1},
                               {cos(el) * cos(az), cos(el) * sin(az), sin(el)},
                               100.0,
                               (c % 5) * 0.25};
            rays[n++] = ray;
          }
        }
      }
    }
  }
  for (; n < N; n++) {
    scene_ray_t ray = {{0, 0, 0.1}, {1, 0, 0}, 100.0, 0.5};
    rays[n] = ray;
  }
  rows(f.s, rays, ref, N);
  rows16(f.s, rays, out, N);
  int nhit = 0, bad = 0;
  for (int i = 0; i < N; i++) {
    nhit += ref[i].object_id != 0;
    bad += ref[i].object_id != out[i].object_id ||
           (ref[i].object_id == 0
                ? out[i].distance != INFINITY
                : !(fabs(ref[i].distance - out[i].distance) <= 1e-5 * ref[i].distance) ||
                      fabs(ref[i].normal[0] * out[i].normal[0] +
                           ref[i].normal[1] * out[i].normal[1] +
                           ref[i].normal[2] * out[i].normal[2] - 1.0) > 1e-6);
  }
  free(rays);
  free(ref);
  free(out);
  ASSERT_TRUE(nhit > N / 4);
  ASSERT_EQ(bad, 0);
  return teardown(&f);
}


//---------------- Rays as a request carries them

TEST(scene_request_checks_normalises_and_traces_request_arrays) {
  fixture_t f;
  ASSERT_OK(setup(&f));

  // a wall 0.2 m thick moving from x = 10 (s = 0) to x = 8 (s = 1): a ray along +x at time s
  // meets it at 10 - 2 s - 0.1; the cube [-1, 1]^3 mesh at x = -10 (its +x face at 9 m along
  // -x, triangles 10 and 11); a unit sphere at y = 10 (9 m along +y)
  int gw = add_prim(f.s, SCENE_PRIM_BOX, 0.1, 5, 5);
  ASSERT_TRUE(add_instance(f.s, gw, kUnit, 1, 11, pose_at(10, 0, 0), pose_at(8, 0, 0), 0) >= 0);
  ASSERT_TRUE(place(f.s, add_cube_mesh(f.s), kUnit, pose_at(-10, 0, 0), 2) >= 0);
  ASSERT_TRUE(place(f.s, add_prim(f.s, SCENE_PRIM_SPHERE, 1, 0, 0), kUnit, pose_at(0, 10, 0),
                    3) >= 0);
  ASSERT_OK(commit(f.s));

  // 21 rays (two full packets and a partial one), target k % 4: wall, cube, sphere, nothing
  // (down, beyond tmax); directions of lengths 1e-3 to 1e200; times around [100, 100.5]
  enum { N = 21 };
  static const double kDir[4][3] = {{1, 0, 0}, {-1, 0, 0}, {0, 1, 0}, {0, 0, -1}};
  double org[3 * N], dir[3 * N], times[N];
  for (int i = 0; i < N; i++) {
    double len = i == 6 ? 1e200 : pow(10.0, (i % 7) - 3);
    int k = i % 4;
    for (int a = 0; a < 3; a++) {
      org[3 * i + a] = a == 2 && k < 2 ? -0.25 + 0.02 * i : 0.0;  // flat targets: any height
      dir[3 * i + a] = kDir[k][a] * len;
    }
    times[i] = 99.9 + 0.04 * i;   // s = (t - 100) / 0.5, clamped to [0, 1]
  }
  scene_rays_t in = {.origins = org, .directions = dir, .times = times, .time_per_ray = 1,
                     .t0 = 100.0, .dt = 0.5, .tmax = 50.0, .max_coord = 1e9,
                     .min_direction = 1e-30};
  scene_hit_t hits[N];
  for (int records = 0; records < 2; records++) {
    in.records = records;
    memset(hits, 0xAB, sizeof hits);
    ASSERT_EQ(request(f.s, &in, 0, N, hits, NULL), N);
    for (int i = 0; i < N; i++) {
      double s = fmin(fmax((times[i] - 100.0) / 0.5, 0.0), 1.0);
      const scene_hit_t* h = &hits[i];
      switch (i % 4) {
        case 0:
          ASSERT_HIT(*h, 9.9 - 2.0 * s, -1, 0, 0);
          ASSERT_EQ(h->object_id, 1);
          ASSERT_EQ(h->label, 11);
          ASSERT_EQ(h->primitive, 0);
          break;
        case 1:
          ASSERT_HIT(*h, 9.0, 1, 0, 0);
          ASSERT_EQ(h->object_id, 2);
          ASSERT_TRUE(records ? h->primitive == 0 : h->primitive == 10 || h->primitive == 11);
          break;
        case 2:
          ASSERT_HIT(*h, 9.0, 0, -1, 0);
          ASSERT_EQ(h->object_id, 3);
          break;
        default:
          ASSERT_MISS(*h);
          ASSERT_EQ(h->label, 0);
          break;
      }
      uint32_t pad;
      memcpy(&pad, (const char*)h + offsetof(scene_hit_t, primitive) + 4, sizeof pad);
      ASSERT_EQ(pad, 0);
    }
  }

  scene_counters_t c;
  scene_counters(f.s, &c);
  ASSERT_EQ(c.rays_traced, 2 * N);

  // one time for every ray; no times: s = 1
  in.time_per_ray = 0;
  in.records = 0;
  ASSERT_EQ(request(f.s, &in, 0, N, hits, NULL), N);
  ASSERT_HIT(hits[8], 9.9, -1, 0, 0);   // times[0] = 99.9: s = 0
  in.times = NULL;
  ASSERT_EQ(request(f.s, &in, 0, N, hits, NULL), N);
  ASSERT_HIT(hits[8], 7.9, -1, 0, 0);

  // a range of the arrays; the sphere filtered out
  uint32_t excluded[1] = {3};
  scene_filter_t filter = {excluded, 1};
  memset(hits, 0xAB, sizeof hits);
  ASSERT_EQ(request(f.s, &in, 2, 11, hits, &filter), 11);
  ASSERT_MISS(hits[2]);
  ASSERT_MISS(hits[6]);
  ASSERT_MISS(hits[10]);
  ASSERT_HIT(hits[4], 7.9, -1, 0, 0);
  ASSERT_HIT(hits[5], 9.0, 1, 0, 0);
  ASSERT_TRUE(hits[1].object_id == 0xABABABABu && hits[11].object_id == 0xABABABABu);

  // scene_ray_from: the unit direction and the time fraction
  in.times = times;
  in.time_per_ray = 1;
  scene_ray_t ray;
  ASSERT_TRUE(scene_ray_from(&in, 6, &ray));
  ASSERT_NEAR(ray.dir[0], 0.0, 0.0);
  ASSERT_NEAR(ray.dir[1], 1.0, 1e-15);
  ASSERT_NEAR(ray.time, (times[6] - 100.0) / 0.5, 1e-12);
  ASSERT_NEAR(ray.tmax, 50.0, 0.0);

  // refused rays: origin beyond max_coord or not finite, direction not finite or too short;
  // the index returned is the refused ray's, in a full packet or the partial one; the packets
  // before it are traced (and counted), the rest not
  scene_counters(f.s, &c);
  uint64_t before = c.rays_traced;
  const struct {
    int ray, axis;
    int is_origin;
    double value;
  } kBad[] = {{13, 0, 1, 2e9}, {3, 1, 1, NAN}, {17, 2, 1, -INFINITY}, {9, 0, 0, NAN},
              {20, 2, 0, INFINITY}};
  for (size_t b = 0; b < sizeof kBad / sizeof kBad[0]; b++) {
    double* p = (kBad[b].is_origin ? org : dir) + 3 * kBad[b].ray + kBad[b].axis;
    double keep = *p;
    *p = kBad[b].value;
    ASSERT_TRUE(!scene_ray_from(&in, (size_t)kBad[b].ray, &ray));
    ASSERT_EQ(request(f.s, &in, 0, N, hits, NULL), kBad[b].ray);
    *p = keep;
  }
  scene_counters(f.s, &c);
  ASSERT_EQ(c.rays_traced - before, 8 + 0 + 16 + 8 + 16);
  double keep[3];
  memcpy(keep, dir + 3 * 5, sizeof keep);
  dir[3 * 5 + 0] = 1e-31;
  dir[3 * 5 + 1] = dir[3 * 5 + 2] = 0.0;
  ASSERT_EQ(request(f.s, &in, 0, N, hits, NULL), 5);
  memcpy(dir + 3 * 5, keep, sizeof keep);
  ASSERT_EQ(request(f.s, &in, 0, N, hits, NULL), N);
  return teardown(&f);
}


//---------------- The flat scene (world-fixed meshes in world coordinates)

// An n x n grid of 1 m cells centred on the origin with gentle hills (2 n^2 triangles); its
// geometry handle.
static int add_terrain_mesh(scene_t* s, int n) {
  uint32_t nv = (uint32_t)((n + 1) * (n + 1)), nt = (uint32_t)(2 * n * n);
  float* v = malloc(3 * sizeof(float) * nv);
  uint32_t* idx = malloc(3 * sizeof(uint32_t) * nt);
  ASSERT_TRUE(v && idx);
  for (int j = 0; j <= n; j++) {
    for (int i = 0; i <= n; i++) {
      float* p = v + 3 * (j * (n + 1) + i);
      p[0] = (float)(i - 0.5 * n);
      p[1] = (float)(j - 0.5 * n);
      p[2] = (float)(0.3 * sin(0.7 * i) * cos(0.5 * j));
    }
  }
  for (int j = 0, t = 0; j < n; j++) {
    for (int i = 0; i < n; i++, t += 2) {
      uint32_t a = (uint32_t)(j * (n + 1) + i), b = a + 1, c = a + (uint32_t)n + 1, d = c + 1;
      uint32_t tri[6] = {a, b, d, a, d, c};
      memcpy(idx + 3 * t, tri, sizeof tri);
    }
  }
  err_msg_t msg = {{0}};
  int g = noted(scene_add_mesh(s, v, nv, idx, nt, &msg), "scene_add_mesh", &msg);
  free(v);
  free(idx);
  return g;
}


// A terrain and 30 turned, scaled cubes on it; every object on body `body` (0: fixed in the
// world, so traced flat). Committed.
static int build_yard(scene_t* s, uint32_t body) {
  int gt = add_terrain_mesh(s, 40);
  int gc = add_cube_mesh(s);
  ASSERT_TRUE(gt >= 0 && gc >= 0);
  static const double tscale[3] = {1.0, 1.5, 2.0};
  int h = place(s, gt, tscale, pose_rot(0.5, -1, -1, 0, 0, 1, 0.3), 100);
  ASSERT_TRUE(h >= 0);
  scene_set_instance_body(s, h, body, 0);
  uint64_t seed = 7;
  for (uint32_t i = 0; i < 30; i++) {
    double r[6];
    for (int k = 0; k < 6; k++) {
      seed = seed * 6364136223846793005ull + 1442695040888963407ull;
      r[k] = (double)(seed >> 11) / 9007199254740992.0;
    }
    double ax = r[3] - 0.5, ay = r[4] - 0.5, az = 0.5, n = sqrt(ax * ax + ay * ay + az * az);
    double scale[3] = {0.3 + r[0], 0.3 + r[1], 0.3 + r[2]};
    pose_t p = pose_rot(-15 + 30 * r[0], -15 + 30 * r[1], 0.5 * r[2], ax / n, ay / n, az / n,
                        6.0 * r[5]);
    h = place(s, gc, scale, p, i + 1);
    ASSERT_TRUE(h >= 0);
    scene_set_instance_body(s, h, body, 0);
  }
  return commit(s);
}


// The world-fixed meshes of a scene, traced flat, give the hits the same objects give as
// instances (on a body): object, label and triangle, distance (within the float tolerance over
// the cosine of incidence) and normal; rays that graze an edge may pick a neighbouring
// triangle.
TEST(scene_flat_meshes_hit_as_their_instances_do) {
  fixture_t f;
  ASSERT_OK(setup(&f));
  err_msg_t msg = {{0}};
  scene_t* inst = scene_create(f.dev, &msg);
  ASSERT_TRUE(inst != NULL);
  ASSERT_OK(build_yard(f.s, 0));
  ASSERT_OK(build_yard(inst, 5));
  scene_counters_t cf, ci;
  scene_counters(f.s, &cf);
  scene_counters(inst, &ci);
  ASSERT_EQ(cf.flat_objects, 31);
  ASSERT_EQ(cf.flat_builds, 1);
  ASSERT_EQ(ci.flat_objects, 0);
  ASSERT_EQ(ci.flat_builds, 0);

  enum { N = 20000 };
  scene_ray_t* rays = malloc(N * sizeof *rays);
  scene_hit_t* a = malloc(N * sizeof *a);
  scene_hit_t* b = malloc(N * sizeof *b);
  ASSERT_TRUE(rays && a && b);
  uint64_t seed = 99;
  for (int i = 0; i < N; i++) {
    double r[5];
    for (int k = 0; k < 5; k++) {
      seed = seed * 6364136223846793005ull + 1442695040888963407ull;
      r[k] = (double)(seed >> 11) / 9007199254740992.0;
    }
    double az = 2 * M_PI * r[0], el = -0.6 + 0.7 * r[1];
    rays[i] = (scene_ray_t){{-10 + 20 * r[2], -10 + 20 * r[3], 1.0 + 2 * r[4]},
                            {cos(el) * cos(az), cos(el) * sin(az), sin(el)}, 60.0, 0.0};
  }
  for (int pass = 0; pass < 2; pass++) {
    if (pass == 0) {
      rows(f.s, rays, a, N);
      rows(inst, rays, b, N);
    } else {
      rows16(f.s, rays, a, N);
      rows16(inst, rays, b, N);
    }
    int hits = 0, other = 0;
    for (int i = 0; i < N; i++) {
      if (a[i].object_id != b[i].object_id || a[i].primitive != b[i].primitive) {
        other++;
        continue;
      }
      if (a[i].object_id == 0) {
        ASSERT_TRUE(isinf(a[i].distance) && isinf(b[i].distance));
        continue;
      }
      hits++;
      ASSERT_EQ(a[i].label, b[i].label);
      // float positions, a distance error of their size over the cosine of incidence
      double c = fabs(b[i].normal[0] * rays[i].dir[0] + b[i].normal[1] * rays[i].dir[1] +
                      b[i].normal[2] * rays[i].dir[2]);
      ASSERT_NEAR(a[i].distance, b[i].distance, TOL(b[i].distance) / fmax(c, 1e-3));
      for (int k = 0; k < 3; k++) {
        ASSERT_NEAR(a[i].normal[k], b[i].normal[k], TOL_REL);
      }
    }
    ASSERT_TRUE(hits > N / 2);
    ASSERT_TRUE(other <= N / 2000);
  }
  free(rays);
  free(a);
  free(b);
  scene_destroy(inst);
  return teardown(&f);
}


// A flat object leaves the flat scene when it is removed, posed elsewhere (it stays an instance
// from then on) or mounted on a body; posing it where it is changes nothing; new static objects
// are traced (as instances) at once and join the flat scene in a batch later.
TEST(scene_flat_objects_leave_and_join) {
  fixture_t f;
  ASSERT_OK(setup(&f));
  int g = add_cube_mesh(f.s);
  int a = place(f.s, g, kUnit, pose_at(5, 0, 0), 1);
  int b = place(f.s, g, kUnit, pose_at(10, 0, 0), 2);
  int c = place(f.s, g, kUnit, pose_at(15, 0, 0), 3);
  ASSERT_TRUE(g >= 0 && a >= 0 && b >= 0 && c >= 0);
  ASSERT_OK(commit(f.s));
  scene_counters_t k;
  scene_counters(f.s, &k);
  ASSERT_EQ(k.flat_objects, 3);
  ASSERT_EQ(k.flat_builds, 1);
  scene_hit_t h = shoot(f.s, 0, 0, 0, 1, 0, 0);
  ASSERT_HIT(h, 4.0, -1, 0, 0);
  ASSERT_EQ(h.object_id, 1);
  ASSERT_EQ(h.label, 1001);

  // removed: the next one is hit; a new object takes the handle and is hit
  scene_remove_instance(f.s, a);
  ASSERT_OK(commit(f.s));
  h = shoot(f.s, 0, 0, 0, 1, 0, 0);
  ASSERT_HIT(h, 9.0, -1, 0, 0);
  ASSERT_EQ(h.object_id, 2);
  int d = place(f.s, g, kUnit, pose_at(2, 0, 0), 4);
  ASSERT_EQ(d, a);
  ASSERT_OK(commit(f.s));
  h = shoot(f.s, 0, 0, 0, 1, 0, 0);
  ASSERT_HIT(h, 1.0, -1, 0, 0);
  ASSERT_EQ(h.object_id, 4);
  scene_counters(f.s, &k);
  ASSERT_EQ(k.flat_objects, 3);
  uint64_t builds = k.flat_builds;

  // posed where it is: nothing to rebuild; posed elsewhere: an instance there
  pose_t id = xform_identity(), here = pose_at(2, 0, 0), there = pose_at(20, 0, 0);
  scene_set_instance_pose(f.s, d, &id, &here, &here);
  ASSERT_OK(commit(f.s));
  scene_counters(f.s, &k);
  ASSERT_EQ(k.flat_builds, builds);
  scene_set_instance_pose(f.s, d, &id, &there, &there);
  ASSERT_OK(commit(f.s));
  scene_counters(f.s, &k);
  ASSERT_EQ(k.flat_builds, builds + 1);
  ASSERT_EQ(k.flat_objects, 2);
  h = shoot(f.s, 0, 0, 0, 1, 0, 0);
  ASSERT_EQ(h.object_id, 2);
  h = shoot(f.s, 25, 0, 0, -1, 0, 0);
  ASSERT_HIT(h, 4.0, 1, 0, 0);
  ASSERT_EQ(h.object_id, 4);
  scene_set_instance_pose(f.s, d, &id, &here, &here);   // back where it was: still an instance
  ASSERT_OK(commit(f.s));
  scene_counters(f.s, &k);
  ASSERT_EQ(k.flat_objects, 2);
  ASSERT_EQ(shoot(f.s, 0, 0, 0, 1, 0, 0).object_id, 4);

  // mounted on a body: an instance
  scene_set_instance_body(f.s, c, 9, 0);
  ASSERT_OK(commit(f.s));
  scene_counters(f.s, &k);
  ASSERT_EQ(k.flat_objects, 1);
  ASSERT_EQ(shoot(f.s, 12, 0, 0, 1, 0, 0).object_id, 3);

  // a large terrain joins at once; a small cube next to it is hit at once and joins later
  int gt = add_terrain_mesh(f.s, 64);
  ASSERT_TRUE(gt >= 0 && place(f.s, gt, kUnit, pose_at(0, 0, -3), 5) >= 0);
  ASSERT_OK(commit(f.s));
  scene_counters(f.s, &k);
  ASSERT_EQ(k.flat_objects, 2);
  builds = k.flat_builds;
  ASSERT_TRUE(place(f.s, g, kUnit, pose_at(-5, 0, 0), 6) >= 0);
  int commits = 0;
  do {
    ASSERT_OK(commit(f.s));
    commits++;
    h = shoot(f.s, 0, 0, 0, -1, 0, 0);
    ASSERT_HIT(h, 4.0, 1, 0, 0);
    ASSERT_EQ(h.object_id, 6);
    scene_counters(f.s, &k);
  } while (k.flat_objects == 2 && commits < 100);
  ASSERT_EQ(k.flat_objects, 3);
  ASSERT_EQ(k.flat_builds, builds + 1);
  ASSERT_TRUE(commits > 1 && commits <= 64);
  h = shoot(f.s, 0, 0, 0, 0, 0, -1);
  ASSERT_EQ(h.object_id, 5);
  ASSERT_EQ(k.backend_errors, 0);
  return teardown(&f);
}


// Sensors' exclusions see flat objects by their ids: a ray goes on through an excluded one.
TEST(scene_flat_objects_filtered_by_id) {
  fixture_t f;
  ASSERT_OK(setup(&f));
  int g = add_cube_mesh(f.s);
  ASSERT_TRUE(place(f.s, g, kUnit, pose_at(5, 0, 0), 1) >= 0);
  ASSERT_TRUE(place(f.s, g, kUnit, pose_at(10, 0, 0), 2) >= 0);
  ASSERT_OK(commit(f.s));
  static const uint32_t ex[1] = {1};
  scene_filter_t filter = {.exclude_objects = ex, .nexclude = 1};
  scene_ray_t r = {{0, 0, 0}, {1, 0, 0}, INFINITY, 0.0};
  scene_hit_t h;
  rows_filtered(f.s, &r, &h, 1, &filter);
  ASSERT_HIT(h, 9.0, -1, 0, 0);
  ASSERT_EQ(h.object_id, 2);
  scene_counters_t k;
  scene_counters(f.s, &k);
  ASSERT_EQ(k.flat_objects, 2);
  return teardown(&f);
}


// Under a memory budget that holds the objects but not a flat copy of them, they stay
// instances: the commit succeeds, without a backend error.
TEST(scene_flat_scene_skipped_beyond_the_memory_budget) {
  fixture_t f;
  ASSERT_OK(setup(&f));
  int gt = add_terrain_mesh(f.s, 100);
  ASSERT_TRUE(gt >= 0);
  scene_counters_t k;
  scene_counters(f.s, &k);
  scene_device_set_budget(f.dev, k.backend_bytes + (256 << 10));
  ASSERT_TRUE(place(f.s, gt, kUnit, pose_at(0, 0, -2), 1) >= 0);
  ASSERT_OK(commit(f.s));
  scene_counters(f.s, &k);
  ASSERT_EQ(k.flat_objects, 0);
  ASSERT_EQ(k.backend_errors, 0);
  scene_hit_t h = shoot(f.s, 0.25, 0.25, 0, 0, 0, -1);
  ASSERT_EQ(h.object_id, 1);
  // (0.25, 0.25) is on the diagonal of cell (50, 50) that both its triangles share: the
  // height there is a quarter of the way from vertex (50, 50) to vertex (51, 51)
  double h00 = (float)(0.3 * sin(0.7 * 50) * cos(0.5 * 50));
  double h11 = (float)(0.3 * sin(0.7 * 51) * cos(0.5 * 51));
  ASSERT_NEAR(h.distance, 2.0 - (0.75 * h00 + 0.25 * h11), TOL(2.0));

  // with room, they join
  scene_device_set_budget(f.dev, 0);
  ASSERT_OK(commit(f.s));
  scene_counters(f.s, &k);
  ASSERT_EQ(k.flat_objects, 1);
  ASSERT_EQ(shoot(f.s, 0.25, 0.25, 0, 0, 0, -1).object_id, 1);
  return teardown(&f);
}


//---------------- Horizons

// Rays from a small sphere in the yard (terrain, turned cubes, a moving and a turning cube, a
// sphere primitive) in coherent packets: culled against the scene's horizon, every hit is the
// same, bit for bit, and a good share of the rays (those into the open sky) are not traced:
// exactly those horizon_above finds above, at every SIMD level. A packet from outside the
// region of origins is traced even where the horizon is low.
TEST(scene_horizon_culls_only_misses) {
  fixture_t f;
  ASSERT_OK(setup(&f));
  ASSERT_OK(build_yard(f.s, 0));
  int gc = add_cube_mesh(f.s);
  int gs = add_prim(f.s, SCENE_PRIM_SPHERE, 1.0, 0, 0);
  ASSERT_TRUE(gc >= 0 && gs >= 0);
  ASSERT_TRUE(add_instance(f.s, gc, kUnit, 201, 0, pose_at(-6, 6, 0.5), pose_at(-5, 7, 1.0), 0) >=
              0);
  ASSERT_TRUE(add_instance(f.s, gc, kUnit, 202, 0, pose_rot(6, 6, 0.5, 0, 0, 1, 0.0),
                           pose_rot(6, 6, 0.5, 0, 0, 1, 0.8), 0) >= 0);
  ASSERT_TRUE(place(f.s, gs, kUnit, pose_at(6, -6, 0.5), 203) >= 0);
  ASSERT_TRUE(place(f.s, gc, kUnit, pose_at(-20, 0, 0), 204) >= 0);
  ASSERT_OK(commit(f.s));

  const double center[3] = {0.2, -0.3, 1.5};
  scene_horizon_t* hz = malloc(sizeof *hz);
  ASSERT_TRUE(hz != NULL);
  const double lo[3] = {center[0] - 0.01, center[1] - 0.01, center[2] - 0.01};
  const double hi[3] = {center[0] + 0.01, center[1] + 0.01, center[2] + 0.01};
  scene_horizon(f.s, lo, hi, hz);
  ASSERT_TRUE(scene_horizon_boxes(f.s) > 30);

  // rows of 128 azimuths at 64 elevations from -40 to +40 degrees, 16 neighbours a packet,
  // origins jittered within 1 cm; then one packet from 10 m to the west, rising 3 degrees
  enum { NAZ = 128, NEL = 64, N = NAZ * NEL + 16 };
  scene_packet_t* pk = calloc(N / SCENE_PACKET, sizeof *pk);
  scene_packet_hits_t* a = calloc(N / SCENE_PACKET, sizeof *a);
  scene_packet_hits_t* b = calloc(N / SCENE_PACKET, sizeof *b);
  ASSERT_TRUE(pk && a && b);
  uint64_t seed = 5;
  for (int i = 0; i < N; i++) {
    scene_packet_t* p = &pk[i / SCENE_PACKET];
    int k = i % SCENE_PACKET;
    double d[3], o[3];
    if (i < NAZ * NEL) {
      double az = 2 * M_PI * (i % NAZ) / NAZ;
      double el = (-40.0 + 80.0 * (i / NAZ) / (NEL - 1)) * M_PI / 180;
      d[0] = cos(el) * cos(az);
      d[1] = cos(el) * sin(az);
      d[2] = sin(el);
      for (int c = 0; c < 3; c++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        o[c] = center[c] + 0.005 * ((double)(seed >> 11) / 9007199254740992.0 - 0.5);
      }
    } else {
      double el = (3.0 + 0.01 * k) * M_PI / 180;
      d[0] = -cos(el);
      d[1] = 0.0;
      d[2] = sin(el);
      o[0] = -10.0;
      o[1] = 0.01 * k;
      o[2] = 0.0;
      ASSERT_TRUE(horizon_above(hz, center, d));   // from the region it would be culled
    }
    p->ox[k] = o[0], p->oy[k] = o[1], p->oz[k] = o[2];
    p->dx[k] = d[0], p->dy[k] = d[1], p->dz[k] = d[2];
    p->tmax[k] = 100.0;
    p->time[k] = (double)(i % 97) / 96.0;
  }
  scene_counters_t c0, c1, c2;
  scene_counters(f.s, &c0);
  columns(f.s, pk, N, a, NULL, NULL);
  scene_counters(f.s, &c1);
  columns(f.s, pk, N, b, NULL, hz);
  scene_counters(f.s, &c2);
  ASSERT_TRUE(memcmp(a, b, (N / SCENE_PACKET) * sizeof *a) == 0);
  ASSERT_EQ(c1.rays_culled - c0.rays_culled, 0);
  uint64_t culled = c2.rays_culled - c1.rays_culled;
  if (simd_level() >= SIMD_AVX2) {
    ASSERT_TRUE(culled > N / 4);
  } else {
    ASSERT_EQ(culled, 0);   // the horizon culls on the AVX2 path only (SENSIM_SIMD=baseline)
  }
  ASSERT_EQ(c2.rays_traced - c1.rays_traced + culled, N);

  // the culled rays are exactly those horizon_above finds above (the AVX2 and AVX-512 forms
  // take each ray to horizon_bin's bin), at each level the CPU has
  uint64_t above = 0;
  for (int i = 0; i < N; i++) {
    const scene_packet_t* p = &pk[i / SCENE_PACKET];
    int k = i % SCENE_PACKET;
    const double o[3] = {p->ox[k], p->oy[k], p->oz[k]}, d[3] = {p->dx[k], p->dy[k], p->dz[k]};
    above += (uint64_t)horizon_above(hz, o, d);
  }
  for (int level = SIMD_AVX2; level <= (int)simd_allowed_level(); level++) {
    simd_level_t was = simd_set_max((simd_level_t)level);
    scene_counters(f.s, &c1);
    columns(f.s, pk, N, b, NULL, hz);
    scene_counters(f.s, &c2);
    simd_set_max(was);
    ASSERT_EQ(c2.rays_culled - c1.rays_culled, above);
    ASSERT_TRUE(memcmp(a, b, (N / SCENE_PACKET) * sizeof *a) == 0);
  }

  // the sky rays are the culled ones, the western packet hits cube 204
  const scene_packet_hits_t* west = &b[N / SCENE_PACKET - 1];
  for (int k = 0; k < SCENE_PACKET; k++) {
    ASSERT_EQ(west->object_id[k], 204);
  }
  free(pk);
  free(a);
  free(b);
  free(hz);
  return teardown(&f);
}


// When the eligible meshes do not all fit in the flat scene (2M triangles), the ones that fit
// are flat and the rest stay instances without a rebuild at every commit; removing the last
// flat object gives the flat copy's memory back.
TEST(scene_flat_scene_full_or_emptied) {
  fixture_t f;
  ASSERT_OK(setup(&f));
  int g = add_terrain_mesh(f.s, 730);   // 1,065,800 triangles: two copies exceed 2M
  ASSERT_TRUE(g >= 0);
  scene_counters_t k;
  scene_counters(f.s, &k);
  int64_t mesh_only = k.backend_bytes;
  int a = place(f.s, g, kUnit, pose_at(0, 0, -2), 1);
  int b = place(f.s, g, kUnit, pose_at(0, 0, -5), 2);
  ASSERT_TRUE(a >= 0 && b >= 0);
  for (int i = 0; i < 40; i++) {
    ASSERT_OK(commit(f.s));
  }
  scene_counters(f.s, &k);
  ASSERT_EQ(k.flat_objects, 1);
  ASSERT_EQ(k.flat_builds, 1);
  int64_t with_flat = k.backend_bytes;
  ASSERT_TRUE(with_flat > mesh_only);
  ASSERT_EQ(shoot(f.s, 0.25, 0.25, 0, 0, 0, -1).object_id, 1);

  // both removed: the flat scene and its instance go, and their memory with them
  scene_remove_instance(f.s, a);
  scene_remove_instance(f.s, b);
  ASSERT_OK(commit(f.s));
  scene_counters(f.s, &k);
  ASSERT_EQ(k.flat_objects, 0);
  ASSERT_TRUE(k.backend_bytes < mesh_only + (with_flat - mesh_only) / 4);
  ASSERT_MISS(shoot(f.s, 0.25, 0.25, 0, 0, 0, -1));
  ASSERT_EQ(k.backend_errors, 0);
  return teardown(&f);
}


//---------------- The instruction set

// A sphere of radius 2 on device dev, seen from its centre along +z: its distance.
static double sphere_seen_on(scene_device_t* dev) {
  err_msg_t msg = {{0}};
  scene_t* s = scene_create(dev, &msg);
  double d = NAN;
  if (s && place_one(s, add_prim(s, SCENE_PRIM_SPHERE, 2.0, 0, 0), kUnit, xform_identity(),
                     7) == 0) {
    d = shoot(s, 0, 0, 0, 0, 0, 1).distance;
  }
  scene_destroy(s);
  return d;
}


// Whether the CPU has what Embree's AVX-512 kernels need (its Skylake-server set).
static int cpu_has_avx512skx(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vl");
}


// The device runs what SCENE_DEVICE_CONFIG_ENV names (Embree's native packet width tells which
// kernels): this process's own setting (./run.sh test forces isa=avx2 in its second pass, and
// that pass must really run AVX2), isa=sse4.2 and isa=avx2 set here, each tracing a sphere; a
// configuration too long to hold is refused naming the variable.
TEST(scene_device_runs_the_instruction_set_of_SENSIM_EMBREE_CONFIG) {
  const char* env = getenv(SCENE_DEVICE_CONFIG_ENV);
  char own[256];
  snprintf(own, sizeof own, "%s", env ? env : "");
  err_msg_t msg = {{0}};
  char text[256];

  // this process's devices
  scene_device_t* dev = scene_device_create(&msg);
  ASSERT_TRUE(dev != NULL);
  unsigned width = scene_device_native_width(dev);
  // SENSIM_SIMD configures the core's kernels when it names a level below the processor's
  const char* simd = getenv(SIMD_LEVEL_ENV);
  int lowered = simd && ((strcmp(simd, "baseline") == 0 && simd_cpu_level() > SIMD_BASELINE) ||
                         (strcmp(simd, "avx2") == 0 && simd_cpu_level() > SIMD_AVX2));
  ASSERT_EQ(scene_device_describe(dev, text, sizeof text), own[0] != 0 || lowered);
  ASSERT_EQ(strstr(text, "(" SIMD_LEVEL_ENV ")") != NULL, lowered);
  fprintf(stderr, "# this run: %s\n", text);
  if (strstr(own, "isa=avx2")) {
    ASSERT_EQ(width, 8);
  } else if (!own[0]) {
    ASSERT_EQ(width, cpu_has_avx512skx() ? 16 : __builtin_cpu_supports("avx") ? 8 : 4);
    ASSERT_CONTAINS(text, "the CPU's best ISA");
  }
  scene_device_destroy(dev);

  // forced here
  static const struct {
    const char* config;
    unsigned width;
  } kForced[] = {{"isa=sse4.2", 4}, {"isa=avx2", 8}};
  for (size_t i = 0; i < sizeof kForced / sizeof kForced[0]; i++) {
    if (kForced[i].width == 8 && !__builtin_cpu_supports("avx2")) {
      continue;
    }
    ASSERT_OK(setenv(SCENE_DEVICE_CONFIG_ENV, kForced[i].config, 1));
    dev = scene_device_create(&msg);
    ASSERT_TRUE(dev != NULL);
    ASSERT_EQ(scene_device_native_width(dev), kForced[i].width);
    ASSERT_TRUE(scene_device_describe(dev, text, sizeof text));
    ASSERT_CONTAINS(text, kForced[i].config);
    ASSERT_NEAR(sphere_seen_on(dev), 2.0, TOL(2.0));
    scene_device_destroy(dev);
  }

  // too long
  char big[200];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = 0;
  ASSERT_OK(setenv(SCENE_DEVICE_CONFIG_ENV, big, 1));
  ASSERT_TRUE(scene_device_create(&msg) == NULL);
  ASSERT_CONTAINS(msg.text, SCENE_DEVICE_CONFIG_ENV);
  if (env) {
    ASSERT_OK(setenv(SCENE_DEVICE_CONFIG_ENV, own, 1));
  } else {
    ASSERT_OK(unsetenv(SCENE_DEVICE_CONFIG_ENV));
  }
  return 0;
}
