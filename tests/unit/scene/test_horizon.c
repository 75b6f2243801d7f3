// SPDX-License-Identifier: MIT
// test_horizon.c: the elevation horizon against exact ray-box intersection: it never culls a ray
// that meets a box, from any origin in its region; it culls what rises clear of everything; its
// bins follow the azimuth.
#include "scene/horizon.h"

#include <stdint.h>
#include <stdlib.h>

#include "check.h"

static double urand(uint64_t* s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(*s >> 11) / 9007199254740992.0;
}


// Whether the ray o + t d (t >= 0) meets the box (slab test in double).
static int meets(const double* box, const double o[3], const double d[3]) {
  double t0 = 0.0, t1 = INFINITY;
  for (int a = 0; a < 3; a++) {
    if (d[a] == 0.0) {
      if (o[a] < box[a] || o[a] > box[3 + a]) {
        return 0;
      }
      continue;
    }
    double u = (box[a] - o[a]) / d[a], v = (box[3 + a] - o[a]) / d[a];
    t0 = fmax(t0, fmin(u, v));
    t1 = fmin(t1, fmax(u, v));
  }
  return t0 <= t1;
}


// A point uniformly inside the ball (c, r).
static void in_ball(uint64_t* s, const double c[3], double r, double p[3]) {
  double x, y, z;
  do {
    x = 2 * urand(s) - 1;
    y = 2 * urand(s) - 1;
    z = 2 * urand(s) - 1;
  } while (x * x + y * y + z * z > 1.0);
  p[0] = c[0] + r * x;
  p[1] = c[1] + r * y;
  p[2] = c[2] + r * z;
}


// Random boxes around a ball of origins of several sizes (the ground under it, boxes around
// it; the horizon of the box around the ball), rays from inside the ball and from anywhere in
// the region (the upright cylinder around the box, open upwards), in random directions and
// aimed a hair either side of the boxes' top corners: no ray that meets a box is above the
// horizon; and, from a ball of up to half a metre, most rays that meet none are (the boxes
// leave open sky).
TEST(horizon_never_culls_a_ray_that_meets_a_box) {
  static const double radii[] = {0.0, 0.02, 0.5, 3.0};
  uint64_t seed = 11;
  enum { NBOX = 60, NRAY = 40000 };
  horizon_box_t* box = malloc(NBOX * sizeof *box);
  scene_horizon_t* h = malloc(sizeof *h);
  ASSERT_TRUE(box && h);
  for (size_t ri = 0; ri < sizeof radii / sizeof radii[0]; ri++) {
    double c[3] = {1.5, -2.0, 1.8};
    for (int i = 0; i < NBOX; i++) {
      // the ground under the column of origins, and boxes standing around it, some taller
      // than the origins are high
      double r = radii[ri];
      double dist = i == 0 ? 0.0 : r + 3.0 + 50.0 * urand(&seed) * urand(&seed);
      double az = 2 * M_PI * urand(&seed);
      double x = c[0] + dist * cos(az), y = c[1] + dist * sin(az);
      double wx = i == 0 ? 8.0 : 0.1 + 4 * urand(&seed);
      double wy = i == 0 ? 8.0 : 0.1 + 4 * urand(&seed);
      double z0 = i == 0 ? c[2] - r - 3.0 : -1.0 + 2 * urand(&seed);
      double hz = i == 0 ? 2.0 : 0.1 + 5 * urand(&seed) * urand(&seed);
      double b[6] = {x - wx / 2, y - wy / 2, z0, x + wx / 2, y + wy / 2, z0 + hz};
      memcpy(box[i], b, sizeof b);
    }
    double lo[3] = {c[0] - radii[ri], c[1] - radii[ri], c[2] - radii[ri]};
    double hi[3] = {c[0] + radii[ri], c[1] + radii[ri], c[2] + radii[ri]};
    horizon_build((const horizon_box_t*)box, NBOX / 2, (const horizon_box_t*)(box + NBOX / 2),
                  NBOX - NBOX / 2, lo, hi, h);
    int missed = 0, culled = 0;
    for (int k = 0; k < NRAY; k++) {
      double o[3], d[3];
      if (k % 2 == 0) {
        in_ball(&seed, c, radii[ri], o);
      } else {
        double rr = radii[ri] * M_SQRT2 * sqrt(urand(&seed)), a = 2 * M_PI * urand(&seed);
        o[0] = c[0] + rr * cos(a);
        o[1] = c[1] + rr * sin(a);
        o[2] = c[2] - radii[ri] + (2 * radii[ri] + 2.0) * urand(&seed);
      }
      if (k % 4 < 2) {
        double az = 2 * M_PI * urand(&seed), el = asin(2 * urand(&seed) - 1);
        d[0] = cos(el) * cos(az);
        d[1] = cos(el) * sin(az);
        d[2] = sin(el);
      } else {
        // at a top corner of a box, moved by up to 1e-6 of the distance either way
        const double* b = box[1 + (int)(urand(&seed) * (NBOX - 1))];
        int q = (int)(urand(&seed) * 4);
        double to[3] = {b[q & 1 ? 3 : 0], b[q & 2 ? 4 : 1], b[5]}, len = 0.0;
        for (int a = 0; a < 3; a++) {
          d[a] = to[a] - o[a];
          len += d[a] * d[a];
        }
        len = sqrt(len);
        for (int a = 0; a < 3; a++) {
          d[a] = (d[a] + len * 1e-6 * (2 * urand(&seed) - 1)) / len;
        }
        double n = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
        for (int a = 0; a < 3; a++) {
          d[a] /= n;
        }
      }
      double el = asin(d[2]);
      int hit = 0;
      for (int i = 0; i < NBOX && !hit; i++) {
        hit = meets(box[i], o, d);
      }
      int above = horizon_above(h, o, d);
      if (hit && above) {
        CHECK_FAIL("radius %g: ray %d (el %.4f rad) meets a box but is above the horizon",
                   radii[ri], k, el);
      }
      if (k % 4 == 0) {   // random directions from the ball: how much is culled
        missed += !hit;
        culled += above;
      }
    }
    if (radii[ri] <= 0.5) {
      ASSERT_TRUE(culled > missed / 2);   // (a wide region sees over little from its bottom)
    }

    // an origin outside the region (beside it, under it) is never culled
    double far[3] = {c[0] + 1.5 * radii[ri] + 1.0, c[1], c[2]}, up[3] = {0, 0, 1};
    double low[3] = {c[0], c[1], c[2] - radii[ri] - 0.01};
    ASSERT_TRUE(!horizon_above(h, far, up));
    ASSERT_TRUE(!horizon_above(h, low, up));
  }
  free(box);
  free(h);
  return 0;
}


// One box east of the origins, 10 m away, its top 1 m above them: rays toward it are above
// the horizon only past its top (with the padding), rays elsewhere above the horizontal
// are; nothing is culled when a box overhangs the origins.
TEST(horizon_of_one_box) {
  scene_horizon_t* h = malloc(sizeof *h);
  ASSERT_TRUE(h != NULL);
  double c[3] = {0, 0, 0};
  horizon_box_t b = {10.0, -1.0, -2.0, 12.0, 1.0, 1.0};
  horizon_build((const horizon_box_t*)&b, 1, NULL, 0, c, c, h);
  double top = atan(1.0 / 10.0);
  double d_in[3] = {cos(top - 0.01), 0, sin(top - 0.01)};
  double d_out[3] = {cos(top + 0.01), 0, sin(top + 0.01)};
  double d_west[3] = {-cos(0.01), 0, sin(0.01)};
  double d_down[3] = {-cos(0.01), 0, -sin(0.01)};
  ASSERT_TRUE(!horizon_above(h, c, d_in));
  ASSERT_TRUE(horizon_above(h, c, d_out));
  ASSERT_TRUE(horizon_above(h, c, d_west));      // nothing there at all
  ASSERT_TRUE(horizon_above(h, c, d_down));
  ASSERT_NEAR(h->sin_low, -1.0, 0.0);

  // a roof over the origins: nothing is culled in any direction
  horizon_box_t roof = {-0.5, -0.5, 3.0, 0.5, 0.5, 3.1};
  horizon_build((const horizon_box_t*)&b, 1, (const horizon_box_t*)&roof, 1, c, c, h);
  ASSERT_TRUE(!horizon_above(h, c, d_west));
  double d_up[3] = {0, 0, 1};
  ASSERT_TRUE(!horizon_above(h, c, d_up));
  ASSERT_NEAR(h->sin_low, 1.0, 0.0);
  free(h);
  return 0;
}


// Bins rise with the azimuth from 0 to 2 pi (the diamond angle starts at +x), cover all of
// them, and the length of the direction does not matter.
TEST(horizon_bin_rises_with_azimuth) {
  unsigned prev = 0, seen = 0;
  static unsigned char hit[HORIZON_BINS];
  for (int i = 0; i < 200000; i++) {
    double az = 2 * M_PI * i / 200000.0;
    unsigned b = horizon_bin(cos(az), sin(az));
    ASSERT_TRUE(b >= prev);
    ASSERT_TRUE(horizon_bin(3.5 * cos(az), 3.5 * sin(az)) - b + 1 <= 2);   // rounding
    prev = b;
    seen += !hit[b];
    hit[b] = 1;
  }
  ASSERT_EQ(seen, HORIZON_BINS);
  ASSERT_EQ(horizon_bin(0.0, 0.0), 0u);
  return 0;
}
