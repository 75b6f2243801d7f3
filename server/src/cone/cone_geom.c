// SPDX-License-Identifier: MIT
// cone_geom.c: the truncated elliptic cone: inside test, clipping of a segment, closest point
// of a clipped segment (see cone.h).
#include <math.h>
#include <string.h>

#include "cone/cone.h"

// Relative slack of the inside test, so that points computed on the boundary count as inside.
#define CONE_SLACK 1e-12

int cone_inside(const cone_shape_t* k, const double p[3]) {
  double x = p[0];
  if (!(x > 0.0) || x > k->range * (1.0 + CONE_SLACK)) {
    return 0;
  }
  double u = p[1] / (x * k->a), w = p[2] / (x * k->b);
  return u * u + w * w <= 1.0 + CONE_SLACK;
}

// Sort the few breakpoints (at most 6) in place. They are 0, 1 and values strictly between
// (no NaN, no -0), so any sort gives the same array; an insertion sort is a few compares where
// qsort was a call, a merge sort and a comparison call per step.
static void sort_small(double* t, int n) {
  for (int i = 1; i < n; i++) {
    double x = t[i];
    int j = i;
    for (; j > 0 && t[j - 1] > x; j--) {
      t[j] = t[j - 1];
    }
    t[j] = x;
  }
}

int cone_clip_segment(const cone_shape_t* k, const double q0[3], const double q1[3], double* tin,
                      double* tout) {
  double dq[3] = {q1[0] - q0[0], q1[1] - q0[1], q1[2] - q0[2]};
  if (dq[0] == 0.0 && dq[1] == 0.0 && dq[2] == 0.0) {
    if (cone_inside(k, q0)) {
      *tin = *tout = 0.0;
      return 1;
    }
    return 0;
  }
  // breakpoints: the ends, the crossings of the cone surface (quadratic), of the cap plane and
  // of the apex plane x = 0 (which separates the two nappes)
  double t[8];
  int n = 0;
  t[n++] = 0.0;
  t[n++] = 1.0;
  double a2 = k->a * k->a, b2 = k->b * k->b;
  double A = dq[1] * dq[1] / a2 + dq[2] * dq[2] / b2 - dq[0] * dq[0];
  double B = 2.0 * (q0[1] * dq[1] / a2 + q0[2] * dq[2] / b2 - q0[0] * dq[0]);
  double C = q0[1] * q0[1] / a2 + q0[2] * q0[2] / b2 - q0[0] * q0[0];
  double roots[2];
  int nr = 0;
  if (A != 0.0) {
    double disc = B * B - 4.0 * A * C;
    if (disc >= 0.0) {
      // numerically stable pair
      double sq = sqrt(disc);
      double qq = -0.5 * (B + (B >= 0.0 ? sq : -sq));
      if (qq != 0.0) {
        roots[nr++] = qq / A;
        roots[nr++] = C / qq;
      } else {
        roots[nr++] = 0.0;
      }
    }
  } else if (B != 0.0) {
    roots[nr++] = -C / B;
  }
  for (int i = 0; i < nr; i++) {
    if (roots[i] > 0.0 && roots[i] < 1.0) {
      t[n++] = roots[i];
    }
  }
  if (dq[0] != 0.0) {
    double tr = (k->range - q0[0]) / dq[0];
    double ta = -q0[0] / dq[0];
    if (tr > 0.0 && tr < 1.0) {
      t[n++] = tr;
    }
    if (ta > 0.0 && ta < 1.0) {
      t[n++] = ta;
    }
  }
  sort_small(t, n);
  int found = 0;
  double lo = 0.0, hi = 0.0;
  for (int i = 0; i + 1 < n; i++) {
    if (!(t[i + 1] > t[i])) {
      continue;
    }
    double m = 0.5 * (t[i] + t[i + 1]);
    double p[3] = {q0[0] + m * dq[0], q0[1] + m * dq[1], q0[2] + m * dq[2]};
    if (cone_inside(k, p)) {
      if (!found) {
        lo = t[i];
        found = 1;
      }
      hi = t[i + 1];
    }
  }
  if (!found) {
    // a segment touching the cone in a single point (an end on the boundary)
    for (int e = 0; e < 2; e++) {
      const double* p = e ? q1 : q0;
      if (cone_inside(k, p)) {
        *tin = *tout = (double)e;
        return 1;
      }
    }
    return 0;
  }
  *tin = lo;
  *tout = hi;
  return 1;
}

void cone_offer_point(const double q[3], uint32_t object_id, cone_best_t* best) {
  double d2 = q[0] * q[0] + q[1] * q[1] + q[2] * q[2];
  if (!best->found || d2 < best->d2) {
    best->found = 1;
    best->d2 = d2;
    memcpy(best->q, q, sizeof(best->q));
    best->object_id = object_id;
  }
}

void cone_offer_segment(const cone_shape_t* k, const double q0[3], const double q1[3],
                        uint32_t object_id, cone_best_t* best) {
  double tin, tout;
  if (!cone_clip_segment(k, q0, q1, &tin, &tout)) {
    return;
  }
  double dq[3] = {q1[0] - q0[0], q1[1] - q0[1], q1[2] - q0[2]};
  double dd = dq[0] * dq[0] + dq[1] * dq[1] + dq[2] * dq[2];
  double t = tin;
  if (dd > 0.0) {
    t = -(q0[0] * dq[0] + q0[1] * dq[1] + q0[2] * dq[2]) / dd;
    t = fmin(fmax(t, tin), tout);
  }
  double q[3] = {q0[0] + t * dq[0], q0[1] + t * dq[1], q0[2] + t * dq[2]};
  cone_offer_point(q, object_id, best);
}
