// SPDX-License-Identifier: MIT
// test_hfield.c: a height field's mesh, traced. Truth from the definition, not from hfield.c:
// a planar field is its plane; a ray straight down onto a cell meets the triangle the
// diagonal (r, c)-(r+1, c+1) puts it in, at the height interpolated on that triangle; the
// sides are the piecewise-linear profile of the border above the bottom z = -base_depth; the
// bottom is met from below; the surface's triangle index names its cell. And the rules.
#include "scene/hfield.h"

#include <stdlib.h>

#include "base/mem.h"
#include "check.h"
#include "scene/scene.h"

// Float32 vertices and traversal (docs/backend.md, "Precision"): 1e-5 relative, with margin.
#define TOL_REL 1e-5
#define TOL(x) (TOL_REL * fmax(fabs((double)(x)), 1.0))

typedef struct fixture {
  scene_device_t* dev;
  scene_t* s;
  int64_t live;
} fixture_t;


// A scene holding height field h as object 3 at the origin.
static int setup(fixture_t* f, const hfield_t* h) {
  err_msg_t msg = {{0}};
  f->live = mem_live_count();
  f->dev = scene_device_create(&msg);
  f->s = f->dev ? scene_create(f->dev, &msg) : NULL;
  if (!f->s) {
    fprintf(stderr, "# setup: %s\n", msg.text);
    return 1;
  }
  if (hfield_check(h, &msg) < 0) {
    fprintf(stderr, "# hfield_check: %s\n", msg.text);
    return 1;
  }
  uint32_t nv = hfield_max_vertices(h), nt = hfield_max_triangles(h);
  float* v = malloc(3 * sizeof(float) * nv);
  uint32_t* idx = malloc(3 * sizeof(uint32_t) * nt);
  ASSERT_TRUE(v && idx);
  nt = hfield_mesh(h, v, idx);
  static const double kUnit[3] = {1, 1, 1};
  int g = scene_add_mesh(f->s, v, nv, idx, nt, &msg);
  free(v);
  free(idx);
  int k = g >= 0 ? scene_add_instance(f->s, g, kUnit, 3, 30, &msg) : g;
  if (k < 0) {
    fprintf(stderr, "# %s\n", msg.text);
    return 1;
  }
  pose_t id = xform_identity();
  scene_set_instance_pose(f->s, k, &id, &id, &id);
  return scene_commit(f->s, &msg) < 0;
}


static int teardown(fixture_t* f) {
  scene_destroy(f->s);
  scene_device_destroy(f->dev);
  return mem_live_count() != f->live;
}


static scene_hit_t shoot(const scene_t* s, double ox, double oy, double oz, double dx, double dy,
                         double dz) {
  double n = sqrt(dx * dx + dy * dy + dz * dz);
  scene_ray_t r = {{ox, oy, oz}, {dx / n, dy / n, dz / n}, INFINITY, 0.0};
  scene_hit_t h;
  scene_trace(s, &(scene_batch_t){.layout = SCENE_ROWS, .n = 1, .rays = &r, .hits = &h});
  return h;
}


TEST(hfield_planar_field_is_its_plane) {
  // z = 0.2 x - 0.1 y + 1 sampled on 7 x 5 (rows along y) over 6 m x 4 m
  enum { R = 7, C = 5 };
  float z[R * C];
  for (int r = 0; r < R; r++) {
    for (int c = 0; c < C; c++) {
      double x = -3.0 + c * 1.5, y = -2.0 + r * (4.0 / 6.0);
      z[r * C + c] = (float)(0.2 * x - 0.1 * y + 1.0);
    }
  }
  hfield_t h = {R, C, z, 3.0, 2.0, 0.5};
  fixture_t f;
  ASSERT_OK(setup(&f, &h));
  double len = sqrt(0.04 + 0.01 + 1.0);
  for (double x = -2.9; x < 3.0; x += 0.37) {
    for (double y = -1.9; y < 2.0; y += 0.41) {
      scene_hit_t hit = shoot(f.s, x, y, 10.0, 0, 0, -1);
      ASSERT_NEAR(hit.distance, 10.0 - (0.2 * x - 0.1 * y + 1.0), TOL(10.0));
      ASSERT_NEAR(hit.normal[0], -0.2 / len, TOL_REL);
      ASSERT_NEAR(hit.normal[1], 0.1 / len, TOL_REL);
      ASSERT_NEAR(hit.normal[2], 1.0 / len, TOL_REL);
      ASSERT_EQ(hit.object_id, 3);
    }
  }
  return teardown(&f);
}


// The height on the triangle that MuJoCo's split puts (fx, fy) in, within cell (r, c) of
// corner heights h00 = (r, c), h10 = (r, c+1), h01 = (r+1, c), h11 = (r+1, c+1); fx, fy in
// [0, 1] along x (columns) and y (rows).
static double split_height(double h00, double h10, double h01, double h11, double fx,
                           double fy) {
  if (fx >= fy) {   // (r, c) (r+1, c+1) (r, c+1): below the diagonal
    return h00 + fx * (h10 - h00) + fy * (h11 - h10);
  }
  return h00 + fy * (h01 - h00) + fx * (h11 - h01);   // (r, c) (r+1, c+1) (r+1, c)
}


TEST(hfield_cells_split_along_the_diagonal_as_mujoco) {
  // a saddle-and-bump field: no two triangles of a cell coplanar
  enum { R = 6, C = 9 };
  float z[R * C];
  for (int i = 0; i < R * C; i++) {
    int r = i / C, c = i % C;
    z[i] = (float)(0.5 + 0.3 * sin(1.3 * c) * cos(0.9 * r) + 0.05 * ((r * 7 + c * 3) % 5));
  }
  const double hx = 4.0, hy = 2.5, dx = 2 * hx / (C - 1), dy = 2 * hy / (R - 1);
  hfield_t h = {R, C, z, hx, hy, 0.25};
  fixture_t f;
  ASSERT_OK(setup(&f, &h));
  int checked = 0;
  for (int r = 0; r + 1 < R; r++) {
    for (int c = 0; c + 1 < C; c++) {
      static const double kF[5][2] = {{0.2, 0.7}, {0.7, 0.2}, {0.5, 0.45}, {0.45, 0.5},
                                      {0.9, 0.85}};
      for (int k = 0; k < 5; k++) {
        double fx = kF[k][0], fy = kF[k][1];
        double x = -hx + (c + fx) * dx, y = -hy + (r + fy) * dy;
        double want = split_height(z[r * C + c], z[r * C + c + 1], z[(r + 1) * C + c],
                                   z[(r + 1) * C + c + 1], fx, fy);
        scene_hit_t hit = shoot(f.s, x, y, 5.0, 0, 0, -1);
        ASSERT_NEAR(hit.distance, 5.0 - want, TOL(5.0));
        ASSERT_EQ(hit.primitive / 2, (uint32_t)(r * (C - 1) + c));   // the cell's triangles
        ASSERT_EQ(hit.primitive % 2, fx >= fy ? 0u : 1u);
        checked++;
      }
    }
  }
  ASSERT_EQ(checked, 5 * (R - 1) * (C - 1));
  return teardown(&f);
}


TEST(hfield_sides_and_bottom_close_the_solid) {
  // 3 x 3 samples over 2 m x 2 m, base 0.5 m: the border row y = -1 rises 0, 1, 0.4
  float z[9] = {0.0f, 1.0f, 0.4f, 0.2f, 0.3f, 0.2f, 0.1f, 0.1f, 0.1f};
  hfield_t h = {3, 3, z, 1.0, 1.0, 0.5};
  fixture_t f;
  ASSERT_OK(setup(&f, &h));

  // towards +y onto the side y = -1 from 4 m away: below the profile (0 at x = -1, 1 at
  // x = 0, 0.4 at x = 1) the wall, above it the surface behind or nothing
  scene_hit_t hit = shoot(f.s, -0.5, -5.0, 0.3, 0, 1, 0);   // profile 0.5 there
  ASSERT_NEAR(hit.distance, 4.0, TOL(4.0));
  ASSERT_NEAR(hit.normal[1], -1.0, TOL_REL);
  hit = shoot(f.s, 0.5, -5.0, 0.65, 0, 1, 0);               // profile 0.7 there
  ASSERT_NEAR(hit.distance, 4.0, TOL(4.0));
  hit = shoot(f.s, 0.5, -5.0, 0.75, 0, 1, 0);               // above it, and above all heights
  ASSERT_TRUE(isinf(hit.distance) || hit.distance > 4.0 + 1e-3);

  // the base below z = 0 is solid: from the side at z = -0.4, from below at -0.5
  hit = shoot(f.s, 5.0, 0.3, -0.4, -1, 0, 0);
  ASSERT_NEAR(hit.distance, 4.0, TOL(4.0));
  ASSERT_NEAR(hit.normal[0], 1.0, TOL_REL);
  hit = shoot(f.s, 0.3, 0.2, -3.0, 0, 0, 1);
  ASSERT_NEAR(hit.distance, 2.5, TOL(2.5));
  ASSERT_NEAR(hit.normal[2], -1.0, TOL_REL);
  hit = shoot(f.s, 0.3, 0.2, -0.6, 0, 0, 1);   // just under the bottom
  ASSERT_NEAR(hit.distance, 0.1, TOL(0.1));

  // past the border: nothing
  hit = shoot(f.s, 1.01, 0.0, 5.0, 0, 0, -1);
  ASSERT_TRUE(isinf(hit.distance));
  return teardown(&f);
}


TEST(hfield_mesh_counts_and_flat_borders) {
  // walls of zero height (a border at the bottom) are left out: base 0, border heights 0
  float z[16] = {0, 0, 0, 0, 0, 1, 2, 0, 0, 3, 1, 0, 0, 0, 0, 0};
  hfield_t h = {4, 4, z, 1.5, 1.5, 0.0};
  err_msg_t msg = {{0}};
  ASSERT_OK(hfield_check(&h, &msg));
  ASSERT_EQ(hfield_max_vertices(&h), 16 + 12);
  ASSERT_EQ(hfield_max_triangles(&h), 18 + 24 + 2);
  float v[3 * 28];
  uint32_t idx[3 * 44];
  ASSERT_EQ(hfield_mesh(&h, v, idx), 18 + 2);   // the surface and the bottom only
  ASSERT_NEAR(hfield_extent(&h), sqrt(1.5 * 1.5 * 2 + 9.0), 1e-12);

  // the same with a base: every wall is there
  h.base_depth = 0.25;
  ASSERT_EQ(hfield_mesh(&h, v, idx), 18 + 24 + 2);
  for (uint32_t i = 0; i < 3 * 44; i++) {
    ASSERT_TRUE(idx[i] < 28);
  }
  return 0;
}


TEST(hfield_check_names_the_field) {
  float z[4] = {0, 1, 2, NAN};
  err_msg_t msg = {{0}};
  hfield_t h = {2, 2, z, 1, 1, 0};
  ASSERT_EQ(hfield_check(&h, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "height_field.heights[3]");
  z[3] = -0.5f;
  h.base_depth = 0.25;
  ASSERT_EQ(hfield_check(&h, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "below the bottom");
  z[3] = 0;
  h.rows = 1;
  ASSERT_EQ(hfield_check(&h, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "height_field.rows = 1");
  h.rows = 2;
  h.half_y = 0;
  ASSERT_EQ(hfield_check(&h, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "height_field.half_size_y");
  h.half_y = 1;
  h.base_depth = -1;
  ASSERT_EQ(hfield_check(&h, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "height_field.base_depth");
  hfield_t big = {4096, 2048, NULL, 1, 1, 0};
  ASSERT_EQ(hfield_check(&big, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "exceeds 4194304 samples");
  return 0;
}
