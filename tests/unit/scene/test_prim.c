// SPDX-License-Identifier: MIT
// test_prim.c: the primitives MuJoCo has and the first ones lacked, traced through the scene
// against constructions independent of prim.c: an ellipsoid hit at points of its
// parametrised surface, with the gradient normal, from outside, inside and through a turned
// instance; a rectangle bounded per axis or unbounded, one-sided as MuJoCo's plane (seen
// from above only) or two-sided; the size rules.
#include "scene/scene.h"

#include <stdlib.h>

#include "base/mem.h"
#include "check.h"
#include "scene/prim.h"

// Embree traverses in float32 (docs/backend.md, "Precision"): 1e-5 relative is the bound with
// margin at these distances; the hit itself is solved in double.
#define TOL_REL 1e-5
#define TOL(x) (TOL_REL * fmax(fabs((double)(x)), 1.0))

static const double kUnit[3] = {1.0, 1.0, 1.0};

typedef struct fixture {
  scene_device_t* dev;
  scene_t* s;
  int64_t live;
} fixture_t;


static int setup(fixture_t* f) {
  err_msg_t msg = {{0}};
  f->live = mem_live_count();
  f->dev = scene_device_create(&msg);
  f->s = f->dev ? scene_create(f->dev, &msg) : NULL;
  if (!f->s) {
    fprintf(stderr, "# setup: %s\n", msg.text);
    return 1;
  }
  return 0;
}


static int teardown(fixture_t* f) {
  scene_destroy(f->s);
  scene_device_destroy(f->dev);
  return mem_live_count() != f->live;
}


// One primitive at `pose`, committed; 0 on success.
static int place_prim(scene_t* s, scene_prim_kind_t kind, double a, double b, double c,
                      pose_t pose) {
  err_msg_t msg = {{0}};
  double size[3] = {a, b, c};
  int g = scene_add_primitive(s, kind, size, &msg);
  int h = g >= 0 ? scene_add_instance(s, g, kUnit, 7, 70, &msg) : g;
  if (h < 0) {
    fprintf(stderr, "# %s\n", msg.text);
    return 1;
  }
  pose_t local = xform_identity();
  scene_set_instance_pose(s, h, &local, &pose, &pose);
  if (scene_commit(s, &msg) < 0) {
    fprintf(stderr, "# scene_commit: %s\n", msg.text);
    return 1;
  }
  return 0;
}


static scene_hit_t shoot(const scene_t* s, const double o[3], const double d[3]) {
  double n = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
  scene_ray_t r = {{o[0], o[1], o[2]}, {d[0] / n, d[1] / n, d[2] / n}, INFINITY, 0.0};
  scene_hit_t h;
  scene_trace(s, &(scene_batch_t){.layout = SCENE_ROWS, .n = 1, .rays = &r, .hits = &h});
  return h;
}


#define ASSERT_HIT(h, dist, nx, ny, nz)           \
  do {                                            \
    ASSERT_NEAR((h).distance, (dist), TOL(dist)); \
    ASSERT_NEAR((h).normal[0], (nx), TOL_REL);    \
    ASSERT_NEAR((h).normal[1], (ny), TOL_REL);    \
    ASSERT_NEAR((h).normal[2], (nz), TOL_REL);    \
  } while (0)

#define ASSERT_MISS(h) ASSERT_TRUE(isinf((h).distance) && (h).object_id == 0)

//---------------- Ellipsoid

// Semi-axes of the test ellipsoid and a point of its surface with its unit outward normal:
// p = (a cos e cos u, b cos e sin u, c sin e), n ~ (x / a^2, y / b^2, z / c^2).
static const double kAxes[3] = {3.0, 1.5, 0.75};

static void surface_point(double u, double e, double p[3], double n[3]) {
  p[0] = kAxes[0] * cos(e) * cos(u);
  p[1] = kAxes[1] * cos(e) * sin(u);
  p[2] = kAxes[2] * sin(e);
  double len = 0.0;
  for (int i = 0; i < 3; i++) {
    n[i] = p[i] / (kAxes[i] * kAxes[i]);
    len += n[i] * n[i];
  }
  for (int i = 0; i < 3; i++) {
    n[i] /= sqrt(len);
  }
}


TEST(prim_ellipsoid_hit_where_its_surface_is) {
  fixture_t f;
  ASSERT_OK(setup(&f));
  ASSERT_OK(place_prim(f.s, SCENE_PRIM_ELLIPSOID, kAxes[0], kAxes[1], kAxes[2],
                       xform_identity()));

  // along each axis from 10 m: the semi-axis, the axis as normal
  for (int a = 0; a < 3; a++) {
    double o[3] = {0, 0, 0}, d[3] = {0, 0, 0}, n[3] = {0, 0, 0};
    o[a] = 10.0;
    d[a] = -1.0;
    n[a] = 1.0;
    ASSERT_HIT(shoot(f.s, o, d), 10.0 - kAxes[a], n[0], n[1], n[2]);
  }

  // at points spread over the surface, from 7 m out along directions leaning off the normal
  // by up to 57 degrees (from the outside: a convex solid is entered at that point)
  int k = 0;
  for (double u = -3.0; u < 3.1; u += 0.7) {
    for (double e = -1.4; e < 1.45; e += 0.35, k++) {
      double p[3], n[3];
      surface_point(u, e, p, n);
      double t[3] = {-n[1], n[0], 0.0};   // a tangent (n is never along z here)
      double tl = hypot(t[0], t[1]);
      double lean = tan((k % 5) * 0.25);  // 0 .. 57 degrees off the normal
      double w[3], o[3], d[3];
      for (int i = 0; i < 3; i++) {
        w[i] = n[i] + lean * t[i] / tl;
      }
      double wl = sqrt(w[0] * w[0] + w[1] * w[1] + w[2] * w[2]);
      for (int i = 0; i < 3; i++) {
        o[i] = p[i] + 7.0 * w[i] / wl;
        d[i] = -w[i];
      }
      scene_hit_t h = shoot(f.s, o, d);
      ASSERT_HIT(h, 7.0, n[0], n[1], n[2]);
      ASSERT_EQ(h.object_id, 7);
    }
  }

  // from the centre: along unit d the surface is at 1 / sqrt(sum d_i^2 / a_i^2)
  double c[3] = {0, 0, 0}, d[3] = {0.3, -0.5, 0.8};
  double dl = sqrt(0.98), q = 0.0;
  for (int i = 0; i < 3; i++) {
    q += (d[i] / dl) * (d[i] / dl) / (kAxes[i] * kAxes[i]);
  }
  scene_hit_t h = shoot(f.s, c, d);
  ASSERT_NEAR(h.distance, 1.0 / sqrt(q), TOL(1.0));

  // beside it: 1 mm past the semi-axis along y misses
  double o2[3] = {-10.0, kAxes[1] + 1e-3, 0.0}, dx[3] = {1, 0, 0};
  ASSERT_MISS(shoot(f.s, o2, dx));
  return teardown(&f);
}


TEST(prim_ellipsoid_turned_and_moved) {
  fixture_t f;
  ASSERT_OK(setup(&f));

  // turned 90 degrees about z and moved to (5, 1, 2): its a axis now lies along world y
  pose_t pose = xform_identity();
  pose.p[0] = 5.0;
  pose.p[1] = 1.0;
  pose.p[2] = 2.0;
  pose.q[0] = cos(M_PI / 4);
  pose.q[3] = sin(M_PI / 4);
  ASSERT_OK(place_prim(f.s, SCENE_PRIM_ELLIPSOID, kAxes[0], kAxes[1], kAxes[2], pose));
  double o[3] = {5.0, 10.0, 2.0}, d[3] = {0, -1, 0};
  ASSERT_HIT(shoot(f.s, o, d), 9.0 - kAxes[0], 0, 1, 0);
  double o2[3] = {-5.0, 1.0, 2.0}, d2[3] = {1, 0, 0};
  ASSERT_HIT(shoot(f.s, o2, d2), 10.0 - kAxes[1], -1, 0, 0);
  return teardown(&f);
}

//---------------- Rectangle

TEST(prim_rectangle_bounded_per_axis) {
  fixture_t f;
  ASSERT_OK(setup(&f));
  ASSERT_OK(place_prim(f.s, SCENE_PRIM_RECTANGLE, 2.0, 0.5, 0.0, xform_identity()));
  double down[3] = {0, 0, -1}, up[3] = {0, 0, 1};

  // inside the 4 m x 1 m rectangle, from above and from below (two-sided)
  double o1[3] = {1.9, -0.45, 3.0}, o2[3] = {-1.9, 0.45, -2.0};
  ASSERT_HIT(shoot(f.s, o1, down), 3.0, 0, 0, 1);
  ASSERT_HIT(shoot(f.s, o2, up), 2.0, 0, 0, -1);

  // outside along either axis
  double o3[3] = {2.1, 0, 3.0}, o4[3] = {0, 0.55, 3.0};
  ASSERT_MISS(shoot(f.s, o3, down));
  ASSERT_MISS(shoot(f.s, o4, down));
  return teardown(&f);
}


TEST(prim_rectangle_unbounded_axis_and_one_side) {
  fixture_t f;
  ASSERT_OK(setup(&f));

  // unbounded along x, 1 m half side along y, one-sided: MuJoCo's plane of size (0, 1)
  ASSERT_OK(place_prim(f.s, SCENE_PRIM_RECTANGLE, 0.0, 1.0, 1.0, xform_identity()));
  double down[3] = {0, 0, -1}, up[3] = {0, 0, 1};
  double far[3] = {5e4, 0.9, 4.0}, out[3] = {0, 1.1, 4.0};
  ASSERT_HIT(shoot(f.s, far, down), 4.0, 0, 0, 1);
  ASSERT_MISS(shoot(f.s, out, down));

  // seen from above only: a ray going up from below passes through, and so does a slanted
  // one; one going down from below never meets it
  double below[3] = {0, 0, -3.0}, slant[3] = {0.3, 0.1, 1.0}, fall[3] = {0, 0, -1};
  ASSERT_MISS(shoot(f.s, below, up));
  ASSERT_MISS(shoot(f.s, below, slant));
  ASSERT_MISS(shoot(f.s, below, fall));

  // slanted from above: where the ray crosses z = 0
  double above[3] = {0, 0, 2.0}, d[3] = {0.6, 0.0, -0.8};
  ASSERT_HIT(shoot(f.s, above, d), 2.5, 0, 0, 1);
  return teardown(&f);
}

//---------------- Sizes

TEST(prim_new_kinds_refuse_bad_sizes_naming_the_field) {
  err_msg_t msg = {{0}};
  double bad_radius[3] = {1.0, 0.0, 1.0};
  ASSERT_EQ(prim_check(SCENE_PRIM_ELLIPSOID, bad_radius, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "ellipsoid.radii.y");
  double nan_radius[3] = {1.0, 1.0, NAN};
  ASSERT_EQ(prim_check(SCENE_PRIM_ELLIPSOID, nan_radius, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "ellipsoid.radii.z");
  double negative[3] = {-1.0, 1.0, 0.0};
  ASSERT_EQ(prim_check(SCENE_PRIM_RECTANGLE, negative, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "rectangle.half_size_x");
  double huge[3] = {1.0, 2e9, 1.0};
  ASSERT_EQ(prim_check(SCENE_PRIM_RECTANGLE, huge, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "rectangle.half_size_y");
  double unbounded[3] = {0.0, 0.0, 1.0};
  ASSERT_OK(prim_check(SCENE_PRIM_RECTANGLE, unbounded, &msg));
  ASSERT_NEAR(prim_extent(SCENE_PRIM_RECTANGLE, unbounded), SCENE_PLANE_UNBOUNDED_HALF * sqrt(2),
              1e-6);
  double axes[3] = {3.0, 1.5, 0.75};
  ASSERT_NEAR(prim_extent(SCENE_PRIM_ELLIPSOID, axes), 3.0, 0.0);
  return 0;
}
