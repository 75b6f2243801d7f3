// SPDX-License-Identifier: MIT
// horizon.h: the elevation horizon of a scene seen from a region of ray origins (a lidar over
// one step; an upright cylinder around their bounding box, open upwards): for each azimuth
// bin, the sine of the highest elevation at which any geometry's bounding box could be met
// from any point of the region. A ray from inside the region whose direction rises above its
// bin's horizon meets no geometry: its hit is a miss without tracing it. About half of a
// spinning lidar's rays point above the horizon of an open scene; tracing a miss costs as
// much as tracing a hit.
// Origins outside the region are never culled, so the region only decides how much is culled.
//
// The bounds are conservative (boxes padded for float rounding; the region's radius widens
// every box's angular extent, its bottom raises every top; a box over the region's column and
// above its bottom covers every bin), so culling only skips rays that would miss: the hits are
// the same, bit for bit.
//
// Azimuth bins are uniform in the "diamond angle" of the horizontal direction (dx, dy), which
// rises monotonically with the azimuth through [0, 4) and needs one division, no arc tangent.
//
// Thread: horizon_build writes its output only; a built horizon is read-only.
#ifndef SENSIM_SCENE_HORIZON_H_
#define SENSIM_SCENE_HORIZON_H_

#include <math.h>
#include <stddef.h>

#define HORIZON_BINS 1024u

typedef struct scene_horizon {
  double center[2];             // the region of origins: x y of its axis,
  double radius;                //   its radius,
  double zlo;                   //   its bottom (an origin higher up sees every box lower)
  double sin_el[HORIZON_BINS];  // per bin: sine of the highest elevation (-1: nothing there)
  double sin_low;               // the lowest of them: a ray at or below it is never above
} scene_horizon_t;

// A world box: lo x y z, hi x y z.
typedef double horizon_box_t[6];

// The horizon of the boxes `a` (na) and `b` (nb) seen from the origins in the box lo..hi (the
// upright cylinder around it).
void horizon_build(const horizon_box_t* a, size_t na, const horizon_box_t* b, size_t nb,
                   const double lo[3], const double hi[3], scene_horizon_t* out);

// The diamond angle of a horizontal direction (dx, dy) of any length, in [0, 4): 0 for (0, 0).
static inline double horizon_diamond(double dx, double dy) {
  double ax = fabs(dx), ay = fabs(dy), s = ax + ay;
  if (!(s > 0.0)) {
    return 0.0;
  }
  return dy >= 0.0 ? (dx >= 0.0 ? ay / s : 1.0 + ax / s) : (dx < 0.0 ? 2.0 + ay / s : 3.0 + ax / s);
}

// The bin of a horizontal direction (dx, dy) ((0, 0) falls in bin 0, which is as good as any: a
// vertical ray is culled only when every bin would cull it; so does a non-finite direction).
static inline unsigned horizon_bin(double dx, double dy) {
  double a = horizon_diamond(dx, dy) * (HORIZON_BINS / 4.0);
  if (!(a >= 0.0)) {
    return 0;
  }
  return a < HORIZON_BINS ? (unsigned)a : HORIZON_BINS - 1;
}

// Whether a ray from `origin` along the unit direction `dir` is above the horizon (a miss).
static inline int horizon_above(const scene_horizon_t* h, const double origin[3],
                                const double dir[3]) {
  double x = origin[0] - h->center[0], y = origin[1] - h->center[1];
  return x * x + y * y <= h->radius * h->radius && origin[2] >= h->zlo &&
         dir[2] > h->sin_el[horizon_bin(dir[0], dir[1])];
}

#endif  // SENSIM_SCENE_HORIZON_H_
