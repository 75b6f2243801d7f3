// SPDX-License-Identifier: MIT
// test_cone.c: KAT-CONE and KAT-CONV of the model documentation (docs/models/cone.md): the
// in-cone test and closest points of segments, Table 2 of Kallin's thesis in LINES mode, the
// thesis' obstacle in both modes, and EXACT mode against analytic closest points on meshes,
// boxes, spheres, ellipsoids, cylinders and capsules (inside the cone, on its lateral surface,
// on a clipped edge); speed from real step times; configuration errors.
#include <math.h>
#include <string.h>

#include "check.h"
#include "cone/cone.h"

#define DEG (M_PI / 180.0)
#define KAT_REL 2e-8
#define KAT_FLOOR 1e-3
#define EXACT_TOL 1e-6

static cone_shape_t shape(double fh_deg, double fv_deg, double range) {
  cone_shape_t k;
  cone_shape_init(&k, fh_deg * DEG, fv_deg * DEG, range);
  return k;
}

static view_object_t prim(uint32_t id, int kind, double s0, double s1, double s2) {
  view_object_t o;
  memset(&o, 0, sizeof(o));
  o.id = id;
  o.prim = kind;
  o.size[0] = s0;
  o.size[1] = s1;
  o.size[2] = s2;
  o.scale[0] = o.scale[1] = o.scale[2] = 1.0;
  o.pose = xform_identity();
  return o;
}

static void rotz(double angle, double q[4]) {
  q[0] = cos(0.5 * angle);
  q[1] = q[2] = 0.0;
  q[3] = sin(0.5 * angle);
}

// Evaluate objects seen from a sensor at the origin (sensor frame = world).
static cone_best_t eval(const cone_shape_t* k, const view_object_t* objs, int n, cone_mode_t mode,
                        uint32_t lines) {
  cone_best_t best = {0};
  for (int i = 0; i < n; i++) {
    cone_object_t o = {.obj = &objs[i], .pose = objs[i].pose};
    cone_object_eval(k, &o, mode, lines, &best);
  }
  return best;
}

TEST(kat_cone_inside_and_angles) {
  cone_shape_t k = shape(45, 30, 20);
  static const double p[7][3] = {{1, 0, 0},  {7, -5, 0},   {10, 4, 0}, {10, 4.2, 0},
                                 {10, 0, 2.6}, {21, 0, 0}, {-1, 0, 0}};
  static const int inside[7] = {1, 0, 1, 0, 1, 0, 0};
  for (int i = 0; i < 7; i++) {
    ASSERT_EQ(cone_inside(&k, p[i]), inside[i]);
  }
  ASSERT_KAT(atan2(-5.0, 7.0) / DEG, -35.5376778, KAT_REL, KAT_FLOOR);
  ASSERT_KAT(atan2(4.0, 10.0) / DEG, 21.8014095, KAT_REL, KAT_FLOOR);
  ASSERT_KAT(atan2(2.6, 10.0) / DEG, 14.5742162, KAT_REL, KAT_FLOOR);
  return 0;
}

TEST(kat_cone_closest_point_of_segments) {
  cone_shape_t k = shape(45, 30, 20);
  cone_best_t b = {0};
  double a0[3] = {2, -1, 0.5}, a1[3] = {2, 1, 0.5};
  cone_offer_segment(&k, a0, a1, 1, &b);
  ASSERT_TRUE(b.found);
  ASSERT_KAT(b.q[0], 2, KAT_REL, KAT_FLOOR);
  ASSERT_KAT(b.q[1], 0, KAT_REL, KAT_FLOOR);
  ASSERT_KAT(b.q[2], 0.5, KAT_REL, KAT_FLOOR);
  cone_best_t c = {0};
  double s0[3] = {3, 1, 0}, s1[3] = {5, 2, 0};
  cone_offer_segment(&k, s0, s1, 2, &c);
  ASSERT_KAT(c.q[0], 3, KAT_REL, KAT_FLOOR);
  ASSERT_KAT(c.q[1], 1, KAT_REL, KAT_FLOOR);
  // a segment beside the cone (y from 5 to 20 at x = 10, the cone reaches y = 4.14): nothing
  cone_best_t d = {0};
  double e0[3] = {10, 20, 0}, e1[3] = {10, 5, 0};
  cone_offer_segment(&k, e0, e1, 3, &d);
  ASSERT_TRUE(!d.found);
  // a segment crossing the cone: clipped at the lateral surface, y = +-a x
  double f0[3] = {10, 20, 0}, f1[3] = {10, -20, 0};
  double tin, tout;
  ASSERT_TRUE(cone_clip_segment(&k, f0, f1, &tin, &tout));
  ASSERT_NEAR(20.0 - 40.0 * tin, 10.0 * k.a, 1e-12);
  ASSERT_NEAR(20.0 - 40.0 * tout, -10.0 * k.a, 1e-12);
  return 0;
}

// Table 2 of the thesis: a 1 x 1 x 1e-5 obstacle at distance 1 (face at 0.999995).
TEST(thesis_table2_lines_mode) {
  static const uint32_t kLines[4] = {2, 10, 100, 1000};
  static const double kRange[4] = {1.1180295, 1.0015370, 1.0000078, 0.9999951};
  static const double kElev[4] = {26.56517, 3.17985, 0.289372, 0.0286767};
  static const double kThesisRange[4] = {1.118025, 1.001532, 1.000003, 0.99999};
  cone_shape_t k = shape(90, 90, 20);
  view_object_t box = prim(1, SCENE_PRIM_BOX, 0.5e-5, 0.5, 0.5);
  box.pose.p[0] = 1.0;
  for (int i = 0; i < 4; i++) {
    cone_best_t b = eval(&k, &box, 1, CONE_MODE_LINES, kLines[i]);
    ASSERT_TRUE(b.found);
    double range = sqrt(b.d2);
    ASSERT_NEAR(range, kRange[i], 1e-7);
    // the thesis' single-precision values (1.001532 against 1.0015370 is 5.03e-6 off)
    ASSERT_NEAR(range, kThesisRange[i], 6e-6);
    ASSERT_NEAR(fabs(atan2(b.q[2], b.q[0])) / DEG, kElev[i], 1e-5 * kElev[i]);
    ASSERT_NEAR(atan2(b.q[1], b.q[0]), 0.0, 1e-12);
  }
  // the exact mode finds the face itself
  cone_best_t e = eval(&k, &box, 1, CONE_MODE_EXACT, 0);
  ASSERT_NEAR(sqrt(e.d2), 0.999995, 1e-12);
  return 0;
}

// KAT-CONV: the thesis' obstacle at (5, 0, 7) in Unity, (7, -5, 0) here, turned to face the
// sensor: range = |(7, -5)| - half the thickness, azimuth -35.5376778 deg, in both modes.
TEST(thesis_obstacle_both_modes) {
  cone_shape_t k = shape(90, 60, 20);
  view_object_t box = prim(4, SCENE_PRIM_BOX, 0.5e-5, 0.5, 0.5);
  box.pose.p[0] = 7.0;
  box.pose.p[1] = -5.0;
  rotz(atan2(-5.0, 7.0), box.pose.q);
  for (int mode = 0; mode < 2; mode++) {
    cone_best_t b = eval(&k, &box, 1, (cone_mode_t)mode, 11);
    ASSERT_TRUE(b.found);
    ASSERT_EQ(b.object_id, 4);
    ASSERT_NEAR(sqrt(b.d2), sqrt(74.0) - 0.5e-5, 1e-9);
    ASSERT_NEAR(sqrt(b.d2), 8.60232, 5e-6);
    ASSERT_KAT(atan2(b.q[1], b.q[0]) / DEG, -35.5376778, KAT_REL, KAT_FLOOR);
    ASSERT_NEAR(atan2(b.q[2], b.q[0]), 0.0, 1e-12);
  }
  return 0;
}

// A wall y = 2 beside the boresight, as a two-triangle mesh: only its part beyond x = 2/a is
// in the cone; the closest point is (2/a, 2, 0) on the cone's lateral surface.
TEST(exact_mesh_wall_on_the_lateral_surface) {
  cone_shape_t k = shape(45, 30, 20);
  static const float kV[12] = {0, 2, -5, 30, 2, -5, 30, 2, 5, 0, 2, 5};
  static const uint32_t kI[6] = {0, 1, 2, 0, 2, 3};
  view_object_t wall = prim(7, 0, 0, 0, 0);
  wall.vertices = kV;
  wall.nvertex = 4;
  wall.indices = kI;
  wall.ntriangle = 2;
  cone_best_t b = eval(&k, &wall, 1, CONE_MODE_EXACT, 0);
  ASSERT_TRUE(b.found);
  double x = 2.0 / k.a;
  ASSERT_NEAR(b.q[0], x, EXACT_TOL);
  ASSERT_NEAR(b.q[1], 2.0, EXACT_TOL);
  ASSERT_NEAR(b.q[2], 0.0, EXACT_TOL);
  ASSERT_NEAR(sqrt(b.d2), sqrt(x * x + 4.0), EXACT_TOL);
  // the line method with few lines is farther away
  cone_best_t l = eval(&k, &wall, 1, CONE_MODE_LINES, 4);
  ASSERT_TRUE(l.found);
  ASSERT_TRUE(sqrt(l.d2) >= sqrt(b.d2) - 1e-12);
  // the same wall cut at z >= 0.5: the closest point is on that edge, at the cone surface
  static const float kV2[12] = {0, 2, 0.5f, 30, 2, 0.5f, 30, 2, 5, 0, 2, 5};
  wall.vertices = kV2;
  b = eval(&k, &wall, 1, CONE_MODE_EXACT, 0);
  double x2 = sqrt(pow(2.0 / k.a, 2) + pow(0.5 / k.b, 2));
  ASSERT_NEAR(b.q[0], x2, EXACT_TOL);
  ASSERT_NEAR(b.q[2], 0.5, EXACT_TOL);
  return 0;
}

// The documentation's analytic exact-mode values (FOV 45 x 30 deg, range 20 m): a wall across
// the view, a wall along the left side and a ceiling, as unbounded planes.
TEST(exact_mode_documented_walls) {
  cone_shape_t k = shape(45, 30, 20);
  view_object_t p = prim(1, SCENE_PRIM_PLANE, 0, 0, 0);
  // x = 5: the plane's normal (+z local) turned to -x
  p.pose.p[0] = 5.0;
  p.pose.q[0] = cos(M_PI / 4);
  p.pose.q[2] = -sin(M_PI / 4);
  cone_best_t b = eval(&k, &p, 1, CONE_MODE_EXACT, 0);
  ASSERT_NEAR(sqrt(b.d2), 5.0, EXACT_TOL);
  ASSERT_NEAR(atan2(b.q[1], b.q[0]), 0.0, 1e-9);
  // y = 3: normal turned to -y
  p.pose = xform_identity();
  p.pose.p[1] = 3.0;
  p.pose.q[0] = cos(M_PI / 4);
  p.pose.q[1] = sin(M_PI / 4);
  b = eval(&k, &p, 1, CONE_MODE_EXACT, 0);
  ASSERT_NEAR(sqrt(b.d2), 7.83937779, EXACT_TOL);
  ASSERT_NEAR(b.q[0], 7.24264069, EXACT_TOL);
  ASSERT_NEAR(atan2(b.q[1], b.q[0]) / DEG, 22.5, 1e-6);
  ASSERT_NEAR(atan2(b.q[2], b.q[0]) / DEG, 0.0, 1e-6);
  // z = 2
  p.pose = xform_identity();
  p.pose.p[2] = 2.0;
  b = eval(&k, &p, 1, CONE_MODE_EXACT, 0);
  ASSERT_NEAR(sqrt(b.d2), 7.72740661, EXACT_TOL);
  ASSERT_NEAR(b.q[0], 7.46410162, EXACT_TOL);
  ASSERT_NEAR(atan2(b.q[2], b.q[0]) / DEG, 15.0, 1e-6);
  return 0;
}

// Entry distance of the ray along unit d into the sphere (c, r).
static double ray_sphere(const double d[3], const double c[3], double r) {
  double cd = c[0] * d[0] + c[1] * d[1] + c[2] * d[2];
  double cc = c[0] * c[0] + c[1] * c[1] + c[2] * c[2];
  return cd - sqrt(r * r - (cc - cd * cd));
}

TEST(exact_sphere_inside_and_on_the_lateral_surface) {
  cone_shape_t k = shape(45, 30, 20);
  view_object_t s = prim(2, SCENE_PRIM_SPHERE, 1.0, 0, 0);
  s.pose.p[0] = 10.0;
  s.pose.p[2] = 0.5;
  cone_best_t b = eval(&k, &s, 1, CONE_MODE_EXACT, 0);
  double cn = sqrt(100.25);
  ASSERT_NEAR(sqrt(b.d2), cn - 1.0, EXACT_TOL);
  // beside the cone: centre at azimuth 30.96 deg, radius 2: the closest point lies on the
  // generatrix at azimuth +22.5 deg in the plane z = 0
  s.size[0] = 2.0;
  s.pose.p[1] = 6.0;
  s.pose.p[2] = 0.0;
  b = eval(&k, &s, 1, CONE_MODE_EXACT, 0);
  ASSERT_TRUE(b.found);
  double d[3] = {cos(22.5 * DEG), sin(22.5 * DEG), 0};
  double t = ray_sphere(d, s.pose.p, 2.0);
  ASSERT_NEAR(sqrt(b.d2), t, EXACT_TOL);
  ASSERT_NEAR(b.q[2], 0.0, EXACT_TOL);
  ASSERT_NEAR(atan2(b.q[1], b.q[0]) / DEG, 22.5, 1e-6);
  return 0;
}

TEST(exact_ellipsoid_cylinder_capsule) {
  cone_shape_t k = shape(45, 30, 20);
  // a unit sphere scaled (2, 1, 1) at x = 10: an ellipsoid whose closest point is (8, 0, 0)
  view_object_t e = prim(3, SCENE_PRIM_SPHERE, 1.0, 0, 0);
  e.scale[0] = 2.0;
  e.pose.p[0] = 10.0;
  cone_best_t b = eval(&k, &e, 1, CONE_MODE_EXACT, 0);
  ASSERT_NEAR(sqrt(b.d2), 8.0, EXACT_TOL);
  // an upright cylinder (radius 1, half length 3) at x = 10: (9, 0, 0)
  view_object_t c = prim(5, SCENE_PRIM_CYLINDER, 1.0, 3.0, 0);
  c.pose.p[0] = 10.0;
  b = eval(&k, &c, 1, CONE_MODE_EXACT, 0);
  ASSERT_NEAR(sqrt(b.d2), 9.0, EXACT_TOL);
  // the same cylinder lying across the boresight (axis along y) and seen end-on from above
  c.pose.p[2] = 1.5;
  c.pose.q[0] = cos(M_PI / 4);
  c.pose.q[1] = sin(M_PI / 4);
  b = eval(&k, &c, 1, CONE_MODE_EXACT, 0);
  // the point of the cylinder closest to the sensor: on the axis' closest approach, r = 1 in
  // the direction of the sensor
  ASSERT_NEAR(sqrt(b.d2), sqrt(100.0 + 2.25) - 1.0, EXACT_TOL);
  // a capsule beside the cone: its cross-section z = 0 is a circle of radius 1 at (10, 5)
  view_object_t p = prim(6, SCENE_PRIM_CAPSULE, 1.0, 2.0, 0);
  p.pose.p[0] = 10.0;
  p.pose.p[1] = 5.0;
  b = eval(&k, &p, 1, CONE_MODE_EXACT, 0);
  ASSERT_TRUE(b.found);
  double d[3] = {cos(22.5 * DEG), sin(22.5 * DEG), 0};
  double t = ray_sphere(d, p.pose.p, 1.0);
  ASSERT_NEAR(sqrt(b.d2), t, EXACT_TOL);
  // nothing in the cone: a sphere behind the sensor and one beyond the range
  view_object_t far[2] = {prim(8, SCENE_PRIM_SPHERE, 1.0, 0, 0),
                          prim(9, SCENE_PRIM_SPHERE, 1.0, 0, 0)};
  far[0].pose.p[0] = -5.0;
  far[1].pose.p[0] = 25.0;
  b = eval(&k, far, 2, CONE_MODE_EXACT, 0);
  ASSERT_TRUE(!b.found);
  b = eval(&k, far, 2, CONE_MODE_LINES, 10);
  ASSERT_TRUE(!b.found);
  return 0;
}

TEST(exact_picks_the_nearest_object) {
  cone_shape_t k = shape(45, 30, 20);
  view_object_t objs[3] = {prim(1, SCENE_PRIM_BOX, 0.5, 0.5, 0.5),
                           prim(2, SCENE_PRIM_SPHERE, 0.5, 0, 0),
                           prim(3, SCENE_PRIM_PLANE, 0, 0, 0)};
  objs[0].pose.p[0] = 6.0;
  objs[1].pose.p[0] = 4.0;
  objs[1].pose.p[1] = 0.3;
  // a floor 2 m below, unbounded: the closest visible point is where the lower cone surface
  // meets it, at x = 2 / b
  objs[2].pose.p[2] = -2.0;
  cone_best_t b = eval(&k, objs, 3, CONE_MODE_EXACT, 0);
  double floor_x = 2.0 / k.b;
  double sphere = sqrt(16.0 + 0.09) - 0.5;
  ASSERT_TRUE(sphere < sqrt(floor_x * floor_x + 4.0));
  ASSERT_EQ(b.object_id, 2);
  ASSERT_NEAR(sqrt(b.d2), sphere, EXACT_TOL);
  // the sensor's two passes (pieces whose own closest point is in view first) agree
  cone_best_t two = {0};
  for (int pass = 1; pass <= 2; pass++) {
    two.pass = pass;
    for (int i = 0; i < 3; i++) {
      cone_object_t o = {.obj = &objs[i], .pose = objs[i].pose};
      cone_object_eval(&k, &o, CONE_MODE_EXACT, 0, &two);
    }
  }
  ASSERT_EQ(two.object_id, 2);
  ASSERT_TRUE(two.d2 == b.d2);
  b = eval(&k, &objs[2], 1, CONE_MODE_EXACT, 0);
  ASSERT_EQ(b.object_id, 3);
  ASSERT_NEAR(sqrt(b.d2), sqrt(floor_x * floor_x + 4.0), EXACT_TOL);
  return 0;
}

// Deterministic pseudo-random numbers in [0, 1) (xorshift64).
static double rnd(uint64_t* state) {
  uint64_t x = *state;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  *state = x;
  return (double)(x >> 11) / (double)(1ull << 53);
}

// Random triangles against brute force: the nearest of a dense grid of the triangle's own points
// inside the cone is an upper bound of the true minimum, so EXACT mode (which offers only true
// points) must be at most that bound, and at least the bound minus the grid's resolution.
TEST(exact_random_triangles_against_brute_force) {
  cone_shape_t k = shape(50, 35, 12);
  uint64_t st = 0x9e3779b97f4a7c15ull;
  const int grid = 300;
  int detected = 0;
  for (int trial = 0; trial < 60; trial++) {
    double v[3][3];
    for (int i = 0; i < 3; i++) {
      v[i][0] = -2.0 + 16.0 * rnd(&st);
      v[i][1] = -8.0 + 16.0 * rnd(&st);
      v[i][2] = -6.0 + 12.0 * rnd(&st);
    }
    cone_best_t b = {0};
    cone_exact_triangle(&k, v, 1, &b);
    double brute = INFINITY;
    for (int i = 0; i <= grid; i++) {
      for (int j = 0; j <= grid - i; j++) {
        double u = (double)i / grid, w = (double)j / grid;
        double p[3];
        for (int c = 0; c < 3; c++) {
          p[c] = v[0][c] + u * (v[1][c] - v[0][c]) + w * (v[2][c] - v[0][c]);
        }
        if (cone_inside(&k, p)) {
          brute = fmin(brute, sqrt(p[0] * p[0] + p[1] * p[1] + p[2] * p[2]));
        }
      }
    }
    if (!isfinite(brute)) {
      continue;                 // the grid saw nothing; a sliver may still be in view
    }
    detected++;
    ASSERT_TRUE(b.found);
    ASSERT_TRUE(cone_inside(&k, b.q));
    double got = sqrt(b.d2);
    ASSERT_TRUE(got <= brute + 1e-9);
    ASSERT_TRUE(got >= brute - 0.1);
  }
  ASSERT_TRUE(detected >= 20);
  return 0;
}

// A position in [1, 13] x [-8, 8] x [-5, 5] and a random orientation.
static void random_pose(uint64_t* st, pose_t* pose) {
  pose->p[0] = 1.0 + 12.0 * rnd(st);
  pose->p[1] = -8.0 + 16.0 * rnd(st);
  pose->p[2] = -5.0 + 10.0 * rnd(st);
  for (int i = 0; i < 4; i++) {
    pose->q[i] = rnd(st) - 0.5;
  }
  xform_quat_normalize(pose->q);
}

// The shape's sampled generatrices give the same bits as computing each one where it is needed
// (the shape without its table, which also evaluates every sample, with no window): every
// reading of random triangles and turned, scaled solids, in both passes, is identical, and the
// lateral surface is searched in many of them.
TEST(exact_sampled_generatrices_same_bits) {
  cone_shape_t k = shape(50, 35, 12);
  cone_shape_t direct = k;
  direct.sampled = 0;
  memset(direct.gy, 0, sizeof(direct.gy));
  memset(direct.gz, 0, sizeof(direct.gz));
  uint64_t st = 0x5851f42d4c957f2dull;
  int found = 0, lateral = 0;
  for (int trial = 0; trial < 400; trial++) {
    cone_best_t b[2] = {{0}, {0}};
    if (trial % 2 == 0) {
      double v[3][3];
      for (int i = 0; i < 3; i++) {
        v[i][0] = -2.0 + 16.0 * rnd(&st);
        v[i][1] = -8.0 + 16.0 * rnd(&st);
        v[i][2] = -6.0 + 12.0 * rnd(&st);
      }
      for (int s = 0; s < 2; s++) {
        cone_exact_triangle(s ? &direct : &k, v, 1, &b[s]);
      }
      cone_best_t inside = {.pass = 1};       // found when the closest point is in the cone
      cone_exact_triangle(&k, v, 1, &inside);
      lateral += b[0].found && !inside.found;  // else found on the boundary
    } else {
      static const int kinds[4] = {SCENE_PRIM_SPHERE, SCENE_PRIM_CYLINDER, SCENE_PRIM_CAPSULE,
                                   SCENE_PRIM_ELLIPSOID};
      view_object_t e = prim(1, kinds[(trial / 2) % 4], 0.5 + rnd(&st), 0.3 + rnd(&st),
                             0.4 + rnd(&st));
      for (int i = 0; i < 3; i++) {
        e.scale[i] = 0.5 + rnd(&st);
      }
      random_pose(&st, &e.pose);
      for (int s = 0; s < 2; s++) {
        b[s] = eval(s ? &direct : &k, &e, 1, CONE_MODE_EXACT, 0);
      }
    }
    ASSERT_EQ(b[0].found, b[1].found);
    ASSERT_TRUE(memcmp(b[0].q, b[1].q, sizeof(b[0].q)) == 0);
    ASSERT_TRUE(memcmp(&b[0].d2, &b[1].d2, sizeof(b[0].d2)) == 0);
    found += b[0].found;
  }
  ASSERT_TRUE(found >= 100);
  ASSERT_TRUE(lateral >= 20);
  return 0;
}

// A box evaluates as the mesh of its faces, each face v0 v1 v2 v3 split into v0 v1 v2 and
// v0 v2 v3 (faces normal to x, y, z, the negative side first; each face runs along its first
// tangent axis, then the second): the same bits, at random poses and scales, wherever it is.
TEST(exact_box_same_bits_as_its_mesh) {
  cone_shape_t k = shape(50, 35, 12);
  // a box, and a thin plate (whose faces' triangles have the widest tolerance, so that the
  // skipping of faces farther than the best point needs its widest margin)
  static const float kHalf[2][3] = {{0.75f, 1.25f, 0.5f}, {0.75f, 1.25f, 0.001f}};
  uint64_t st = 0x94d049bb133111ebull;
  int found = 0;
  for (int set = 0; set < 2; set++) {
    const float* h = kHalf[set];
    float vert[24][3];
    uint32_t idx[12][3];
    for (int axis = 0, f = 0; axis < 3; axis++) {
      int t = axis == 0 ? 1 : 0, u = axis == 2 ? 1 : 2;
      for (int side = -1; side <= 1; side += 2, f++) {
        static const float kT[4] = {-1, 1, 1, -1}, kU[4] = {-1, -1, 1, 1};
        for (int i = 0; i < 4; i++) {
          vert[4 * f + i][axis] = (float)side * h[axis];
          vert[4 * f + i][t] = kT[i] * h[t];
          vert[4 * f + i][u] = kU[i] * h[u];
        }
        uint32_t b = 4u * (uint32_t)f;
        uint32_t tri[2][3] = {{b, b + 1, b + 2}, {b, b + 2, b + 3}};
        memcpy(idx[2 * f], tri, sizeof(tri));
      }
    }
    for (int trial = 0; trial < 500; trial++) {
      view_object_t box = prim(1, SCENE_PRIM_BOX, h[0], h[1], h[2]);
      random_pose(&st, &box.pose);
      for (int i = 0; i < 3; i++) {
        box.scale[i] = 0.5 + 1.5 * rnd(&st);
      }
      view_object_t mesh = box;
      mesh.prim = 0;
      mesh.vertices = &vert[0][0];
      mesh.nvertex = 24;
      mesh.indices = &idx[0][0];
      mesh.ntriangle = 12;
      cone_best_t a = eval(&k, &box, 1, CONE_MODE_EXACT, 0);
      cone_best_t b = eval(&k, &mesh, 1, CONE_MODE_EXACT, 0);
      ASSERT_EQ(a.found, b.found);
      ASSERT_TRUE(memcmp(a.q, b.q, sizeof(a.q)) == 0);
      ASSERT_TRUE(memcmp(&a.d2, &b.d2, sizeof(a.d2)) == 0);
      found += a.found;
    }
  }
  ASSERT_TRUE(found >= 200);
  return 0;
}

// The sample window of the lateral search (cone_shape_t.window: only the generatrices that can
// pass through a piece are evaluated) gives the same bits as evaluating every sample: random
// triangles from 1e-4 m to 30 m across, near and far, some of them slivers, random boxes at
// any pose and scale, and spheres, cylinders, capsules and ellipsoids on the mantle; many of
// them are found on the lateral surface.
TEST(exact_sample_window_same_bits) {
  cone_shape_t k = shape(50, 35, 12);
  cone_shape_t every = k;
  every.window = 0;
  uint64_t st = 0x2545f4914f6cdd1dull;
  int found = 0, lateral = 0;
  for (int trial = 0; trial < 3000; trial++) {
    cone_best_t b[2] = {{0}, {0}};
    cone_best_t inside = {.pass = 1};
    if (trial % 4 != 3) {
      double size = pow(10.0, trial % 5 == 0 ? -4.0 + 4.0 * rnd(&st) : -1.0 + 2.5 * rnd(&st));
      // centred near the mantle, where the lateral search decides
      double x = 0.2 + 12.5 * rnd(&st), th = 2.0 * M_PI * rnd(&st), rho = 0.6 + 0.8 * rnd(&st);
      double c[3] = {x, x * rho * k.a * cos(th), x * rho * k.b * sin(th)};
      double v[3][3];
      for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 3; j++) {
          v[i][j] = c[j] + size * (rnd(&st) - 0.5);
        }
      }
      if (trial % 4 == 1) {     // across the view, in front of the sensor
        for (int i = 0; i < 3; i++) {
          v[i][0] = 0.1 + 14.0 * rnd(&st);
          v[i][1] = -8.0 + 16.0 * rnd(&st);
          v[i][2] = -6.0 + 12.0 * rnd(&st);
        }
      }
      if (trial % 7 == 0) {     // a sliver: v2 near the middle of v0 v1
        for (int j = 0; j < 3; j++) {
          v[2][j] = 0.5 * (v[0][j] + v[1][j]) + 1e-6 * size * (rnd(&st) - 0.5);
        }
      }
      for (int s = 0; s < 2; s++) {
        cone_exact_triangle(s ? &every : &k, v, 1, &b[s]);
      }
      cone_exact_triangle(&k, v, 1, &inside);
    } else if (trial % 8 == 7) {   // a solid near the mantle, at a uniform scale or not
      static const int kinds[4] = {SCENE_PRIM_SPHERE, SCENE_PRIM_CYLINDER, SCENE_PRIM_CAPSULE,
                                   SCENE_PRIM_ELLIPSOID};
      view_object_t e = prim(1, kinds[(trial / 8) % 4], 0.2 + rnd(&st), 0.2 + rnd(&st),
                             0.2 + rnd(&st));
      random_pose(&st, &e.pose);
      double x = 1.0 + 10.0 * rnd(&st), th = 2.0 * M_PI * rnd(&st);
      e.pose.p[0] = x;
      e.pose.p[1] = x * k.a * cos(th);
      e.pose.p[2] = x * k.b * sin(th);
      double u = 0.5 + rnd(&st);
      for (int i = 0; i < 3; i++) {
        e.scale[i] = trial % 16 == 7 ? u : 0.5 + rnd(&st);
      }
      for (int s = 0; s < 2; s++) {
        b[s] = eval(s ? &every : &k, &e, 1, CONE_MODE_EXACT, 0);
      }
      cone_object_t o = {.obj = &e, .pose = e.pose};
      cone_object_eval(&k, &o, CONE_MODE_EXACT, 0, &inside);
    } else {
      view_object_t box = prim(1, SCENE_PRIM_BOX, 0.1 + rnd(&st), 0.1 + rnd(&st),
                               0.1 + rnd(&st));
      random_pose(&st, &box.pose);
      for (int i = 0; i < 3; i++) {
        box.scale[i] = 0.5 + 1.5 * rnd(&st);
      }
      for (int s = 0; s < 2; s++) {
        b[s] = eval(s ? &every : &k, &box, 1, CONE_MODE_EXACT, 0);
      }
      cone_object_t o = {.obj = &box, .pose = box.pose};
      cone_object_eval(&k, &o, CONE_MODE_EXACT, 0, &inside);
    }
    ASSERT_EQ(b[0].found, b[1].found);
    ASSERT_TRUE(memcmp(b[0].q, b[1].q, sizeof(b[0].q)) == 0);
    ASSERT_TRUE(memcmp(&b[0].d2, &b[1].d2, sizeof(b[0].d2)) == 0);
    found += b[0].found;
    lateral += b[0].found && !inside.found;  // found on the boundary
  }
  ASSERT_TRUE(found >= 1400);
  ASSERT_TRUE(lateral >= 500);
  return 0;
}

// The exact result b against the nearest distance a dense grid of surface points found in
// view (brute; INFINITY when the grid saw none: nothing to check): found, no farther than
// brute and at most 5 cm nearer. Counts the checked ones in *detected.
static int check_brute(const cone_best_t* b, double brute, int* detected) {
  if (!isfinite(brute)) {
    return 0;
  }
  (*detected)++;
  ASSERT_TRUE(b->found);
  double got = sqrt(b->d2);
  ASSERT_TRUE(got <= brute + 1e-6);
  ASSERT_TRUE(got >= brute - 0.05);
  return 0;
}

// Random ellipsoids (spheres at non-uniform scales, turned) against brute force over a dense
// grid of their surface points.
TEST(exact_random_ellipsoids_against_brute_force) {
  cone_shape_t k = shape(60, 40, 15);
  uint64_t st = 0x2545f4914f6cdd1dull;
  int detected = 0;
  for (int trial = 0; trial < 30; trial++) {
    view_object_t e = prim(1, SCENE_PRIM_SPHERE, 1.0, 0, 0);
    for (int i = 0; i < 3; i++) {
      e.scale[i] = 0.3 + 2.0 * rnd(&st);
    }
    random_pose(&st, &e.pose);
    if (xform_norm(e.pose.p, 3) < 2.5) {
      continue;                 // keep the sensor outside
    }
    cone_best_t b = eval(&k, &e, 1, CONE_MODE_EXACT, 0);
    cone_object_t o = {.obj = &e, .pose = e.pose};
    double brute = INFINITY;
    const int n = 400;
    for (int i = 0; i <= n; i++) {
      double lat = M_PI * ((double)i / n - 0.5);
      for (int j = 0; j < 2 * n; j++) {
        double lon = M_PI * j / n;
        double x[3] = {cos(lat) * cos(lon), cos(lat) * sin(lon), sin(lat)}, p[3];
        cone_object_point(&o, x, p);
        if (cone_inside(&k, p)) {
          brute = fmin(brute, xform_norm(p, 3));
        }
      }
    }
    ASSERT_OK(check_brute(&b, brute, &detected));
  }
  ASSERT_TRUE(detected >= 8);
  return 0;
}

// A point of the unit-radius cylinder or capsule (half length h) surface: u, w in [0, 1].
static void tube_point(int capsule, double h, double u, double w, double x[3]) {
  double phi = 2.0 * M_PI * w;
  if (u < 0.25 || u > 0.75) {
    double side = u < 0.25 ? -1.0 : 1.0;
    double f = u < 0.25 ? u * 4.0 : (1.0 - u) * 4.0;   // 0 at the pole, 1 at the rim
    if (capsule) {
      double lat = 0.5 * M_PI * (1.0 - f);
      x[0] = cos(lat) * cos(phi);
      x[1] = cos(lat) * sin(phi);
      x[2] = side * (h + sin(lat));
    } else {
      x[0] = f * cos(phi);
      x[1] = f * sin(phi);
      x[2] = side * h;
    }
    return;
  }
  x[0] = cos(phi);
  x[1] = sin(phi);
  x[2] = h * (4.0 * u - 2.0);
}

TEST(exact_random_cylinders_and_capsules_against_brute_force) {
  cone_shape_t k = shape(55, 40, 14);
  uint64_t st = 0x1234567887654321ull;
  int detected = 0;
  for (int trial = 0; trial < 30; trial++) {
    int capsule = trial % 2;
    double h = 0.3 + 2.0 * rnd(&st);
    view_object_t e = prim(1, capsule ? SCENE_PRIM_CAPSULE : SCENE_PRIM_CYLINDER, 1.0, h, 0);
    double s = 0.4 + 1.2 * rnd(&st);
    e.scale[0] = e.scale[1] = e.scale[2] = s;
    if (!capsule && trial % 4 == 0) {
      e.scale[2] = 0.5 + rnd(&st);  // cylinders keep their shape under any axial scale
    }
    random_pose(&st, &e.pose);
    if (xform_norm(e.pose.p, 3) < 3.0 * (1.0 + h) * s) {
      continue;                 // keep the sensor outside
    }
    cone_best_t b = eval(&k, &e, 1, CONE_MODE_EXACT, 0);
    cone_object_t o = {.obj = &e, .pose = e.pose};
    double brute = INFINITY;
    const int n = 600;
    for (int i = 0; i <= n; i++) {
      for (int j = 0; j < n; j++) {
        double x[3], p[3];
        tube_point(capsule, h, (double)i / n, (double)j / n, x);
        cone_object_point(&o, x, p);
        if (cone_inside(&k, p)) {
          brute = fmin(brute, xform_norm(p, 3));
        }
      }
    }
    ASSERT_OK(check_brute(&b, brute, &detected));
  }
  ASSERT_TRUE(detected >= 8);
  return 0;
}

// The sensor over step views: the reading, the point in the world, speed from real step times.
TEST(sensor_reading_and_speed) {
  cone_config_t c;
  cone_config_default(&c);
  sensor_t s;
  err_msg_t msg;
  ASSERT_OK(cone_create(&c, &s, &msg));
  view_object_t ball = prim(11, SCENE_PRIM_SPHERE, 1.0, 0, 0);
  view_body_t body = {.id = 1};
  body.at[0].pose = body.at[1].pose = xform_identity();
  body.at[0].pose.p[1] = body.at[1].pose.p[1] = 2.0;   // the sensor's body, 2 m along y
  step_view_t v;
  memset(&v, 0, sizeof(v));
  v.bodies = &body;
  v.nbody = 1;
  v.objects = &ball;
  v.nobject = 1;
  sensor_ctx_t ctx = {.id = 5, .body_id = 1, .mount = xform_identity()};
  sensor_out_t out = {0};
  double times[3] = {1.0, 1.02, 1.05};
  double xs[3] = {10.0, 9.9, 9.75};     // the ball approaches at 5 m/s
  for (int i = 0; i < 3; i++) {
    v.t0 = i ? times[i - 1] : times[0];
    v.t1 = times[i];
    v.step = (uint64_t)i + 1;
    ball.pose.p[0] = xs[i];
    ball.pose.p[1] = 2.0;
    sensor_out_clear(&out);
    ASSERT_OK(s.ops->step(s.self, &ctx, &v, &out, &msg));
    s.ops->commit(s.self);
    ASSERT_EQ(out.n, 1);
    const sensor_cone_t* r = &out.rec[0].u.cone;
    ASSERT_TRUE(r->detected);
    ASSERT_EQ(r->object_id, 11);
    ASSERT_NEAR(r->range, xs[i] - 1.0, EXACT_TOL);
    ASSERT_NEAR(r->point[0], xs[i] - 1.0, EXACT_TOL);
    ASSERT_NEAR(r->point[1], 2.0, EXACT_TOL);
    ASSERT_EQ(r->has_speed, i > 0);
    if (i > 0) {
      ASSERT_NEAR(r->speed, 5.0, 1e-6);
    }
  }
  // out of range: not detected, and no speed at the next detection
  v.t0 = v.t1;
  v.t1 = 1.1;
  v.step = 4;
  ball.pose.p[0] = 30.0;
  sensor_out_clear(&out);
  ASSERT_OK(s.ops->step(s.self, &ctx, &v, &out, &msg));
  ASSERT_TRUE(!out.rec[0].u.cone.detected);
  sensor_out_free(&out);
  s.ops->destroy(s.self);
  return 0;
}

// A sensor turned with its body and its mount: the reading is in the sensor's own frame (the
// thesis obstacle turned with it gives the same range and azimuth), the point in the world.
TEST(sensor_frame_follows_body_and_mount) {
  cone_config_t c;
  cone_config_default(&c);
  c.fov_horizontal = 90.0 * DEG;
  c.fov_vertical = 60.0 * DEG;
  sensor_t s;
  err_msg_t msg;
  ASSERT_OK(cone_create(&c, &s, &msg));
  // body at (1, 2, 0) turned +60 deg about z; mount 0.5 m along the body's x, turned +30 deg:
  // the sensor looks along world +y from (1.25, 2.4330127, 0)
  view_body_t body = {.id = 3};
  body.at[1].pose = xform_identity();
  body.at[1].pose.p[0] = 1.0;
  body.at[1].pose.p[1] = 2.0;
  rotz(60.0 * DEG, body.at[1].pose.q);
  body.at[0] = body.at[1];
  sensor_ctx_t ctx = {.id = 1, .body_id = 3, .mount = xform_identity()};
  ctx.mount.p[0] = 0.5;
  rotz(30.0 * DEG, ctx.mount.q);
  double origin[3] = {1.0 + 0.5 * cos(60.0 * DEG), 2.0 + 0.5 * sin(60.0 * DEG), 0.0};
  // the thesis obstacle at (7, -5, 0) of the sensor frame: world = origin + 7 y_w + 5 x_w
  view_object_t box = prim(9, SCENE_PRIM_BOX, 0.5e-5, 0.5, 0.5);
  box.pose.p[0] = origin[0] + 5.0;
  box.pose.p[1] = origin[1] + 7.0;
  rotz(90.0 * DEG + atan2(-5.0, 7.0), box.pose.q);
  step_view_t v;
  memset(&v, 0, sizeof(v));
  v.bodies = &body;
  v.nbody = 1;
  v.objects = &box;
  v.nobject = 1;
  v.t0 = v.t1 = 0.0;
  v.step = 1;
  sensor_out_t out = {0};
  ASSERT_OK(s.ops->step(s.self, &ctx, &v, &out, &msg));
  const sensor_cone_t* r = &out.rec[0].u.cone;
  ASSERT_TRUE(r->detected);
  ASSERT_NEAR(r->range, sqrt(74.0) - 0.5e-5, 1e-9);
  ASSERT_KAT(r->azimuth / DEG, -35.5376778, KAT_REL, KAT_FLOOR);
  ASSERT_NEAR(r->elevation, 0.0, 1e-12);
  // the face centre, in the world
  double f = (sqrt(74.0) - 0.5e-5) / sqrt(74.0);
  ASSERT_NEAR(r->point[0], origin[0] + 5.0 * f, 1e-9);
  ASSERT_NEAR(r->point[1], origin[1] + 7.0 * f, 1e-9);
  sensor_out_free(&out);
  s.ops->destroy(s.self);
  return 0;
}

TEST(bad_configurations_name_the_field) {
  cone_config_t c;
  sensor_t s;
  err_msg_t msg;
  cone_config_default(&c);
  c.fov_horizontal = M_PI;
  ASSERT_EQ(cone_create(&c, &s, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "cone.fov_horizontal");
  cone_config_default(&c);
  c.fov_vertical = 0;
  ASSERT_EQ(cone_create(&c, &s, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "cone.fov_vertical");
  cone_config_default(&c);
  c.range = -1;
  ASSERT_EQ(cone_create(&c, &s, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "cone.range");
  cone_config_default(&c);
  c.mode = CONE_MODE_LINES;
  c.lines_per_face = 1;
  ASSERT_EQ(cone_create(&c, &s, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "cone.lines_per_face");
  cone_config_default(&c);
  c.mode = (cone_mode_t)5;
  ASSERT_EQ(cone_create(&c, &s, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "cone.mode = 5 is not CONE_EXACT or CONE_LINES");
  return 0;
}

// Two phases (sensor.h): a step evaluated but not committed (another sensor failed it) changes
// nothing: run again, it gives the frame number and the speed of an uninterrupted run (a ball
// approaching at 5 m/s).
TEST(uncommitted_step_changes_nothing) {
  cone_config_t c;
  cone_config_default(&c);
  sensor_t s;
  err_msg_t msg;
  ASSERT_OK(cone_create(&c, &s, &msg));
  view_object_t ball = prim(11, SCENE_PRIM_SPHERE, 1.0, 0, 0);
  view_body_t body = {.id = 1};
  body.at[0].pose = body.at[1].pose = xform_identity();
  step_view_t v;
  memset(&v, 0, sizeof(v));
  v.bodies = &body;
  v.nbody = 1;
  v.objects = &ball;
  v.nobject = 1;
  sensor_ctx_t ctx = {.id = 5, .body_id = 1, .mount = xform_identity()};
  sensor_out_t out = {0};
  for (int i = 0; i < 4; i++) {
    v.t0 = i ? 0.1 * (i - 1) : 0.0;
    v.t1 = 0.1 * i;
    v.step = (uint64_t)i + 1;
    ball.pose.p[0] = 10.0 - 0.5 * i;
    for (int rep = 0; rep < (i ? 3 : 1); rep++) {
      sensor_out_clear(&out);
      ASSERT_OK(s.ops->step(s.self, &ctx, &v, &out, &msg));
      ASSERT_EQ(out.rec[0].frame, (uint64_t)i);
      ASSERT_EQ(out.rec[0].u.cone.has_speed, i > 0);
      if (i > 0) {
        ASSERT_NEAR(out.rec[0].u.cone.speed, 5.0, 1e-6);
      }
    }
    s.ops->commit(s.self);
  }
  sensor_out_free(&out);
  s.ops->destroy(s.self);
  return 0;
}

static int cancel_now(void* ctx) {
  (void)ctx;
  return 1;
}

// LINES mode: the cost (faces x lines per face) is bounded per step. A scene grown past it is
// sampled with fewer lines a face (the most that fit): the reading is that of a sensor
// configured so, bit for bit, where the step was refused (at every step, until the scene
// shrank). The nearest sphere is nearer than any point of the others, so the reference sees
// it alone (its lines are the same, and 10^7 lines are traced once: about 6 s of CPU under
// the sanitizers).
TEST(lines_past_the_bound_sample_fewer_lines) {
  cone_config_t c;
  cone_config_default(&c);
  c.mode = CONE_MODE_LINES;
  c.lines_per_face = 100000;
  sensor_t s, fit;
  err_msg_t msg;
  ASSERT_OK(cone_create(&c, &s, &msg));
  // 35 spheres of 288 faces each: 1.008e9 lines asked, 992 a face fit 10^7
  view_object_t balls[35];
  for (int i = 0; i < 35; i++) {
    balls[i] = prim((uint32_t)i + 1, SCENE_PRIM_SPHERE, 0.1, 0, 0);
    balls[i].pose.p[0] = 5.0 + 0.3 * i;
    balls[i].pose.p[1] = 0.05 * (i % 7) - 0.15;
  }
  step_view_t v;
  memset(&v, 0, sizeof(v));
  v.objects = balls;
  v.nobject = 35;
  v.step = 1;
  sensor_ctx_t ctx = {.id = 3, .mount = xform_identity()};
  sensor_out_t out = {0}, want = {0};
  ASSERT_OK(s.ops->step(s.self, &ctx, &v, &out, &msg));
  ASSERT_EQ(out.n, 1);
  c.lines_per_face = (uint32_t)(CONE_MAX_LINES_PER_STEP / (35 * 288));
  ASSERT_EQ(c.lines_per_face, 992u);
  ASSERT_OK(cone_create(&c, &fit, &msg));
  v.nobject = 1;
  ASSERT_OK(fit.ops->step(fit.self, &ctx, &v, &want, &msg));
  ASSERT_TRUE(out.rec[0].u.cone.detected);
  ASSERT_EQ(out.rec[0].u.cone.object_id, 1u);
  ASSERT_TRUE(memcmp(&out.rec[0].u.cone, &want.rec[0].u.cone, sizeof(sensor_cone_t)) == 0);
  fit.ops->destroy(fit.self);
  s.ops->destroy(s.self);
  sensor_out_free(&want);
  sensor_out_free(&out);
  return 0;
}


// A scene where 2 lines a face pass the bound is refused naming the mode; a long evaluation
// polls the request's cancellation.
TEST(lines_cost_bounded_and_cancellable) {
  cone_config_t c;
  cone_config_default(&c);
  c.mode = CONE_MODE_LINES;
  c.lines_per_face = 100000;
  sensor_t s;
  err_msg_t msg;
  ASSERT_OK(cone_create(&c, &s, &msg));
  step_view_t v;
  memset(&v, 0, sizeof(v));
  v.step = 1;
  sensor_ctx_t ctx = {.id = 3, .mount = xform_identity()};
  sensor_out_t out = {0};

  // a mesh of 6 10^6 triangles: even 2 lines a face pass 10^7 (refused before any is read)
  view_object_t huge = prim(9, 0, 0, 0, 0);
  huge.ntriangle = 6000000;
  v.objects = &huge;
  v.nobject = 1;
  ASSERT_EQ(s.ops->step(s.self, &ctx, &v, &out, &msg), ERR_LIMIT);
  ASSERT_CONTAINS(msg.text, "cone 3: LINES mode over 6000000 faces");
  ASSERT_CONTAINS(msg.text, "use mode EXACT");
  ASSERT_EQ(out.n, 0);
  s.ops->destroy(s.self);
  view_object_t ball = prim(1, SCENE_PRIM_SPHERE, 0.1, 0, 0);
  ASSERT_EQ(cone_object_faces(&ball), 288u);
  // within the bound (one 8-triangle mesh of 1e6 lines per face), but cancelled
  c.lines_per_face = 100000;
  ASSERT_OK(cone_create(&c, &s, &msg));
  static const float kVert[12] = {5, -1, -1, 5, 1, -1, 5, 1, 1, 5, -1, 1};
  static const uint32_t kIdx[24] = {0, 1, 2, 0, 2, 3, 0, 1, 2, 0, 2, 3,
                                    0, 1, 2, 0, 2, 3, 0, 1, 2, 0, 2, 3};
  view_object_t mesh = prim(7, 0, 0, 0, 0);
  mesh.vertices = kVert;
  mesh.nvertex = 4;
  mesh.indices = kIdx;
  mesh.ntriangle = 8;
  v.objects = &mesh;
  v.nobject = 1;
  v.cancelled = cancel_now;
  ASSERT_EQ(s.ops->step(s.self, &ctx, &v, &out, &msg), ERR_STATE);
  ASSERT_CONTAINS(msg.text, "cancelled");
  ASSERT_EQ(out.n, 0);
  // not cancelled: the face at x = 5 is found
  v.cancelled = NULL;
  ASSERT_OK(s.ops->step(s.self, &ctx, &v, &out, &msg));
  ASSERT_EQ(out.n, 1);
  ASSERT_NEAR(out.rec[0].u.cone.range, 5.0, 1e-9);
  sensor_out_free(&out);
  s.ops->destroy(s.self);
  return 0;
}
