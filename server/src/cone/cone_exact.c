// SPDX-License-Identifier: MIT
// cone_exact.c: EXACT mode: the true closest point to the sensor of a convex piece of the scene
// (a triangle, a sphere, a cylinder, a capsule, an ellipsoid) inside the truncated cone K.
//
// Minimising |q| over piece C intersected with K is a convex problem with one minimum. Either
// the closest point of C to the sensor lies in K (then it is the answer), or the minimum lies on
// the boundary of C within K: on an edge of a triangle clipped to K (exact, as a line of the
// LINES mode), on the cap x = range (exact), or on the lateral surface of the cone. The
// lateral surface is parametrised by its generatrices g(theta) = (1, a cos theta, b sin theta):
// the candidate on generatrix theta is where it enters C (a ray from the apex, exact), and the
// distance along the generatrices is minimised by sampling theta and refining each local
// minimum by golden-section search to about 1e-12 rad. Every candidate is an actual point of C
// inside K, so the result is never farther than the true minimum plus the refinement error
// (far below 1e-6 m at the ranges of the sensor).
#include <float.h>
#include <math.h>
#include <string.h>

#include "cone/cone.h"

#define LATERAL_SAMPLES CONE_LATERAL_SAMPLES
#define LATERAL_REFINE 4          // local minima refined per piece
#define GOLDEN_ITERATIONS 56      // 0.049 rad * 0.618^56: below 1e-13 rad

// A point on generatrix (1, gy, gz), or +inf: fills q.
typedef double (*lateral_fn)(const cone_shape_t* k, const void* ctx, double gy, double gz,
                             double q[3]);

// A lower bound of the distance of every point f can return on the generatrices of the bracket
// [theta_{i-1}, theta_{i+1}] that the refinement of sample i searches (0 when unknown).
typedef double (*lateral_bound_fn)(const cone_shape_t* k, const void* ctx, int i);

// The generatrix at theta: its y and z over x.
static void generatrix(const cone_shape_t* k, double theta, double g[2]) {
  g[0] = k->a * cos(theta);
  g[1] = k->b * sin(theta);
}


void cone_shape_init(cone_shape_t* k, double fov_h, double fov_v, double range) {
  memset(k, 0, sizeof(*k));
  k->a = tan(0.5 * fov_h);
  k->b = tan(0.5 * fov_v);
  k->range = range;
  k->na = sqrt(1.0 + k->a * k->a);
  k->nb = sqrt(1.0 + k->b * k->b);
  const double step = 2.0 * M_PI / LATERAL_SAMPLES;
  for (int i = 0; i < LATERAL_SAMPLES; i++) {
    double g[2];
    generatrix(k, i * step, g);
    k->gy[i] = g[0];
    k->gz[i] = g[1];
  }
  k->sampled = 1;
  k->window = 1;
}


// Generatrix theta (a refinement point).
static double lateral_at(const cone_shape_t* k, lateral_fn f, const void* ctx, double theta,
                         double q[3]) {
  double g[2];
  generatrix(k, theta, g);
  return f(k, ctx, g[0], g[1], q);
}


// Sample i of the generatrices: from the shape's table when it has one (the same bits).
static double lateral_sample(const cone_shape_t* k, lateral_fn f, const void* ctx, int i,
                             double q[3]) {
  if (k->sampled) {
    return f(k, ctx, k->gy[i], k->gz[i], q);
  }
  return lateral_at(k, f, ctx, i * (2.0 * M_PI / LATERAL_SAMPLES), q);
}

static double dot3(const double a[3], const double b[3]) {
  return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}

static void sub3(const double a[3], const double b[3], double d[3]) {
  d[0] = a[0] - b[0];
  d[1] = a[1] - b[1];
  d[2] = a[2] - b[2];
}

static void cross3(const double a[3], const double b[3], double d[3]) {
  d[0] = a[1] * b[2] - a[2] * b[1];
  d[1] = a[2] * b[0] - a[0] * b[2];
  d[2] = a[0] * b[1] - a[1] * b[0];
}

// The generatrices through which a point of box lo..hi (sensor frame) with 0 < x <= range can
// be seen from the apex: y/x in [win[0], win[1]] and z/x in [win[2], win[3]], widened by 1e-9
// of their size, far above the rounding of a point's y/x (a few units of 1e-16). 0 when the
// box reaches x <= 0 (then every generatrix may pass through it) or is not finite.
static int box_window(const cone_shape_t* k, const double lo[3], const double hi[3],
                      double win[4]) {
  double x0 = lo[0], x1 = fmin(hi[0], k->range * (1.0 + 1e-9));
  if (!(x0 > 0.0) || !isfinite(x1)) {
    return 0;
  }
  for (int j = 1; j < 3; j++) {
    // over x in [x0, x1] the ratio is extreme at the ends; with x1 < x0 (the box beyond the
    // cap) the window comes out empty or the samples fail their range test: misses either way
    double l = fmin(lo[j] / x0, lo[j] / x1), h = fmax(hi[j] / x0, hi[j] / x1);
    double w = 1e-9 * (fabs(l) + fabs(h));
    if (!isfinite(w)) {
      return 0;
    }
    win[2 * j - 2] = l - w;
    win[2 * j - 1] = h + w;
  }
  if (x1 < x0) {
    win[0] = 1.0;               // empty: nothing of the box is within the cap
    win[1] = -1.0;
  }
  return 1;
}

// Minimise f over the generatrices; offers the best points found. `win` (nullable, see
// box_window): the samples outside it are misses (INFINITY) without evaluating f, the
// others evaluate as without it. `bound` (nullable): a local minimum whose bracket cannot
// come as near as the best point found is not refined (its offers would change nothing).
// Both only with the shape's window (cone_shape_t).
static void lateral_search(const cone_shape_t* k, lateral_fn f, lateral_bound_fn bound,
                           const void* ctx, const double* win, uint32_t object_id,
                           cone_best_t* best) {
  double h[LATERAL_SAMPLES];
  int hit[LATERAL_SAMPLES];     // the samples with a finite h, in increasing order
  int nhit = 0;
  double q[3];
  const double step = 2.0 * M_PI / LATERAL_SAMPLES;
  if (win && k->sampled && k->window) {
    for (int i = 0; i < LATERAL_SAMPLES; i++) {
      double gy = k->gy[i], gz = k->gz[i];
      h[i] = INFINITY;
      if (gy >= win[0] && gy <= win[1] && gz >= win[2] && gz <= win[3]) {
        h[i] = f(k, ctx, gy, gz, q);
        if (isfinite(h[i])) {
          hit[nhit++] = i;
        }
      }
    }
  } else {
    for (int i = 0; i < LATERAL_SAMPLES; i++) {
      h[i] = lateral_sample(k, f, ctx, i, q);
      if (isfinite(h[i])) {
        hit[nhit++] = i;
      }
    }
  }
  // local minima (cyclic) among the finite samples; the LATERAL_REFINE smallest are refined
  int idx[LATERAL_REFINE];
  int nidx = 0;
  for (int j = 0; j < nhit; j++) {
    int i = hit[j];
    double l = h[(i + LATERAL_SAMPLES - 1) % LATERAL_SAMPLES], r = h[(i + 1) % LATERAL_SAMPLES];
    if (h[i] > l || h[i] > r) {
      continue;
    }
    int pos;
    if (nidx < LATERAL_REFINE) {
      pos = nidx++;
    } else if (h[i] < h[idx[LATERAL_REFINE - 1]]) {
      pos = LATERAL_REFINE - 1;
    } else {
      continue;
    }
    idx[pos] = i;
    while (pos > 0 && h[idx[pos]] < h[idx[pos - 1]]) {
      int tmp = idx[pos];
      idx[pos] = idx[pos - 1];
      idx[pos - 1] = tmp;
      pos--;
    }
  }
  const double gr = 0.5 * (sqrt(5.0) - 1.0);
  int pruned = bound && k->sampled && k->window;
  for (int m = 0; m < nidx; m++) {
    int i = idx[m];
    if (pruned && best->found) {
      double lb = bound(k, ctx, i);
      if (lb * lb >= best->d2) {
        continue;
      }
    }
    double lo = (i - 1) * step, hi = (i + 1) * step;
    double x1 = hi - gr * (hi - lo), x2 = lo + gr * (hi - lo);
    double f1 = lateral_at(k, f, ctx, x1, q), f2 = lateral_at(k, f, ctx, x2, q);
    for (int it = 0; it < GOLDEN_ITERATIONS; it++) {
      if (f1 <= f2) {
        hi = x2;
        x2 = x1;
        f2 = f1;
        x1 = hi - gr * (hi - lo);
        f1 = lateral_at(k, f, ctx, x1, q);
      } else {
        lo = x1;
        x1 = x2;
        f1 = f2;
        x2 = lo + gr * (hi - lo);
        f2 = lateral_at(k, f, ctx, x2, q);
      }
    }
    // the best of the refined point and the sample itself
    double hr = lateral_at(k, f, ctx, 0.5 * (lo + hi), q);
    if (isfinite(hr) && hr <= h[i]) {
      cone_offer_point(q, object_id, best);
    } else {
      lateral_sample(k, f, ctx, i, q);
      cone_offer_point(q, object_id, best);
    }
  }
}

//---------------- Triangles

typedef struct tri_ctx {
  const double (*v)[3];
  double e[3][3];               // edges v[i + 1] - v[i], kept for the many tri_contains
  double n[3];                  // normal (not unit)
  double d;                     // n . v0
  double scale;                 // |n| times a length, for the edge tolerance
  double tol;                   // -1e-12 scale
} tri_ctx_t;

static int tri_contains(const tri_ctx_t* t, const double q[3]) {
  for (int i = 0; i < 3; i++) {
    double w[3], c[3];
    sub3(q, t->v[i], w);
    cross3(t->e[i], w, c);
    if (dot3(c, t->n) < t->tol) {
      return 0;
    }
  }
  return 1;
}

static double tri_lateral(const cone_shape_t* k, const void* opaque, double gy, double gz,
                          double q[3]) {
  const tri_ctx_t* t = opaque;
  double g[3] = {1.0, gy, gz};
  double ng = dot3(t->n, g);
  if (ng == 0.0) {
    return INFINITY;
  }
  double s = t->d / ng;
  if (!(s > 0.0) || s > k->range * (1.0 + 1e-12)) {
    return INFINITY;
  }
  for (int i = 0; i < 3; i++) {
    q[i] = s * g[i];
  }
  if (!tri_contains(t, q)) {
    return INFINITY;
  }
  return sqrt(dot3(q, q));
}

// The bracket bound (lateral_bound_fn) of tri_lateral. On generatrix g(theta) = (1, a cos
// theta, b sin theta) its point is q = s g, s = d / (n . g) > 0, |q| = |d| |g| / |n . g|. Over
// the bracket, |theta - theta_i| <= step, so |n . g| <= |n . g_i| + (|n_y| a + |n_z| b) step
// and |g| >= max(sqrt(1 + min(a, b)^2), |g_i| - max(a, b) step); 1 % on the step and 1e-9 on
// the result are far above the rounding of theta, of q and of its distance.
static double tri_bracket_bound(const cone_shape_t* k, const void* opaque, int i) {
  const tri_ctx_t* t = opaque;
  const double step = 1.01 * (2.0 * M_PI / LATERAL_SAMPLES);
  double gy = k->gy[i], gz = k->gz[i];
  double ng = fabs(t->n[0] + t->n[1] * gy + t->n[2] * gz) +
              (fabs(t->n[1]) * k->a + fabs(t->n[2]) * k->b) * step;
  double lo = fmin(k->a, k->b), hi = fmax(k->a, k->b);
  double g = fmax(sqrt(1.0 + lo * lo), sqrt(1.0 + gy * gy + gz * gz) - hi * step);
  return fabs(t->d) / ng * g * (1.0 - 1e-9);   // NaN (nothing skipped) for ng 0
}

// Closest point of triangle v to the origin (Ericson, "Real-Time Collision Detection", 5.1.5).
static void tri_closest(const double v[3][3], double dest[3]) {
  const double* a = v[0];
  const double* b = v[1];
  const double* c = v[2];
  double ab[3], ac[3], ap[3], bp[3], cp[3];
  double p[3] = {0, 0, 0};
  sub3(b, a, ab);
  sub3(c, a, ac);
  sub3(p, a, ap);
  double d1 = dot3(ab, ap), d2 = dot3(ac, ap);
  if (d1 <= 0.0 && d2 <= 0.0) {
    memcpy(dest, a, 3 * sizeof(double));
    return;
  }
  sub3(p, b, bp);
  double d3 = dot3(ab, bp), d4 = dot3(ac, bp);
  if (d3 >= 0.0 && d4 <= d3) {
    memcpy(dest, b, 3 * sizeof(double));
    return;
  }
  double vc = d1 * d4 - d3 * d2;
  if (vc <= 0.0 && d1 >= 0.0 && d3 <= 0.0) {
    double t = d1 / (d1 - d3);
    for (int i = 0; i < 3; i++) dest[i] = a[i] + t * ab[i];
    return;
  }
  sub3(p, c, cp);
  double d5 = dot3(ab, cp), d6 = dot3(ac, cp);
  if (d6 >= 0.0 && d5 <= d6) {
    memcpy(dest, c, 3 * sizeof(double));
    return;
  }
  double vb = d5 * d2 - d1 * d6;
  if (vb <= 0.0 && d2 >= 0.0 && d6 <= 0.0) {
    double t = d2 / (d2 - d6);
    for (int i = 0; i < 3; i++) dest[i] = a[i] + t * ac[i];
    return;
  }
  double va = d3 * d6 - d5 * d4;
  if (va <= 0.0 && (d4 - d3) >= 0.0 && (d5 - d6) >= 0.0) {
    double t = (d4 - d3) / ((d4 - d3) + (d5 - d6));
    for (int i = 0; i < 3; i++) dest[i] = b[i] + t * (c[i] - b[i]);
    return;
  }
  double den = 1.0 / (va + vb + vc);
  double sv = vb * den, sw = vc * den;
  for (int i = 0; i < 3; i++) dest[i] = a[i] + ab[i] * sv + ac[i] * sw;
}

// Outside a face of the pyramid |y| <= a x, |z| <= b x, 0 < x <= range that contains K.
static int tri_culled(const cone_shape_t* k, const double v[3][3]) {
  int out[6] = {1, 1, 1, 1, 1, 1};
  for (int i = 0; i < 3; i++) {
    const double* p = v[i];
    out[0] &= p[0] <= 0.0;
    out[1] &= p[0] > k->range;
    out[2] &= p[1] > k->a * p[0];
    out[3] &= -p[1] > k->a * p[0];
    out[4] &= p[2] > k->b * p[0];
    out[5] &= -p[2] > k->b * p[0];
  }
  for (int i = 0; i < 6; i++) {
    if (out[i]) {
      return 1;
    }
  }
  return 0;
}

// The window (box_window) of the generatrices on which tri_lateral can find a point. A point
// q that passes tri_contains has, for each edge i, the computed D_i = (e_i x (q - v_i)) . n >=
// tol. Exactly, D_i = |e_i| |n| dist_i, with dist_i the signed distance of q (projected on the
// plane: an offset along n does not change D_i) inside edge i's line; its rounding is a few
// units of 1e-16 times |e_i| |q - v_i| |n| (and 1e-16 |n| |e_i| (|e_1| |e_2| / |n|) for the
// edges and normal not being exactly orthogonal), so dist_i >= -t with t = 2 (1e-12 (|e_1| +
// |e_2|) / |e_i| + 1e-12 (1 + l^2 / |n|) (|q| + |v|)), l the longest edge. Each point with
// dist_i >= -t is in the triangle scaled by 1 + t / r about its incentre (r = |n| / perimeter,
// the inradius), within t / r * l of the triangle; q itself is off the plane by a few units of
// 1e-16 (|q| + |v|). So q lies in the triangle's bounding box widened by m = 1.01 t l / r +
// 1e-9 (|q| + |v|) with |q| <= range (1 + 1e-12) |g|. 0 (no window) for slivers (t / r above
// 1e-3) and for triangles reaching x <= 0.
static int tri_window(const cone_shape_t* k, const double v[3][3], const tri_ctx_t* t,
                      double win[4]) {
  double nn = sqrt(dot3(t->n, t->n));
  double le[3], vmax = 0.0;
  for (int i = 0; i < 3; i++) {
    le[i] = sqrt(dot3(t->e[i], t->e[i]));
    vmax = fmax(vmax, sqrt(dot3(v[i], v[i])));
  }
  double lmin = fmin(le[0], fmin(le[1], le[2])), lmax = fmax(le[0], fmax(le[1], le[2]));
  double ab = fmax(k->a, k->b);
  double qv = k->range * (1.0 + 1e-12) * sqrt(1.0 + ab * ab) + vmax;
  double tm = 2.0 * (1e-12 * (le[0] + le[2]) / lmin + 1e-12 * (1.0 + lmax * lmax / nn) * qv);
  double f = tm * (le[0] + le[1] + le[2]) / nn;
  if (!(f <= 1e-3)) {
    return 0;                   // also NaN
  }
  double m = 1.01 * f * lmax + 1e-9 * qv;
  double lo[3], hi[3];
  for (int j = 0; j < 3; j++) {
    lo[j] = fmin(v[0][j], fmin(v[1][j], v[2][j])) - m;
    hi[j] = fmax(v[0][j], fmax(v[1][j], v[2][j])) + m;
  }
  return box_window(k, lo, hi, win);
}

void cone_exact_triangle(const cone_shape_t* k, const double v[3][3], uint32_t object_id,
                         cone_best_t* best) {
  if (tri_culled(k, v)) {
    return;
  }
  // 1. the triangle's closest point; a lower bound for the whole triangle
  double p[3];
  tri_closest(v, p);
  double p2 = dot3(p, p);
  if (best->found && p2 >= best->d2) {
    return;
  }
  if (cone_inside(k, p)) {
    cone_offer_point(p, object_id, best);
    return;
  }
  if (best->pass == 1) {
    best->deferred = 1;
    return;
  }
  // 2. the edges clipped to the cone
  for (int i = 0; i < 3; i++) {
    cone_offer_segment(k, v[i], v[(i + 1) % 3], object_id, best);
  }
  // 3. the cap: the triangle's cut by the plane x = range
  double cut[2][3];
  int ncut = 0;
  for (int i = 0; i < 3 && ncut < 2; i++) {
    const double* a = v[i];
    const double* b = v[(i + 1) % 3];
    double fa = a[0] - k->range, fb = b[0] - k->range;
    if ((fa < 0.0 && fb >= 0.0) || (fa >= 0.0 && fb < 0.0)) {
      double t = fa / (fa - fb);
      for (int j = 0; j < 3; j++) {
        cut[ncut][j] = a[j] + t * (b[j] - a[j]);
      }
      cut[ncut][0] = k->range;
      ncut++;
    }
  }
  if (ncut == 2) {
    cone_offer_segment(k, cut[0], cut[1], object_id, best);
  }
  tri_ctx_t t = {.v = v};
  double e1[3], e2[3];
  sub3(v[1], v[0], e1);
  sub3(v[2], v[0], e2);
  cross3(e1, e2, t.n);
  double nn = sqrt(dot3(t.n, t.n));
  if (!(nn > 0.0)) {
    return;                     // degenerate: its edges were enough
  }
  t.d = dot3(t.n, v[0]);
  t.scale = nn * (sqrt(dot3(e1, e1)) + sqrt(dot3(e2, e2)));
  t.tol = -1e-12 * t.scale;
  for (int i = 0; i < 3; i++) {
    sub3(v[(i + 1) % 3], v[i], t.e[i]);
  }
  if (v[0][0] == k->range && v[1][0] == k->range && v[2][0] == k->range) {
    // a triangle in the cap plane: its point closest to the axis
    double w[3][3];
    for (int i = 0; i < 3; i++) {
      w[i][0] = 0.0;
      w[i][1] = v[i][1];
      w[i][2] = v[i][2];
    }
    double c[3];
    tri_closest(w, c);
    c[0] = k->range;
    if (cone_inside(k, c)) {
      cone_offer_point(c, object_id, best);
    }
  }
  // 4. the lateral surface
  double win[4];
  lateral_search(k, tri_lateral, tri_bracket_bound, &t, tri_window(k, v, &t, win) ? win : NULL,
                 object_id, best);
}

//---------------- Curved primitives (convex solids)

typedef struct solid_ctx {
  const cone_object_t* o;
  double rot_t[9];              // object <- sensor rotation (R^T), row-major
  double o_c[3];                // sensor origin in the object frame, scale undone
  double inv_scale[3];
} solid_ctx_t;

// Interval of t where o + t d is inside the infinite cylinder x^2 + y^2 <= r^2.
static int cyl_interval(const double o[3], const double d[3], double r, double* t0, double* t1) {
  double A = d[0] * d[0] + d[1] * d[1];
  double B = 2.0 * (o[0] * d[0] + o[1] * d[1]);
  double C = o[0] * o[0] + o[1] * o[1] - r * r;
  if (A == 0.0) {
    if (C > 0.0) {
      return 0;
    }
    *t0 = -INFINITY;
    *t1 = INFINITY;
    return 1;
  }
  double disc = B * B - 4.0 * A * C;
  if (disc < 0.0) {
    return 0;
  }
  double sq = sqrt(disc);
  double qq = -0.5 * (B + (B >= 0.0 ? sq : -sq));
  double r0 = qq / A, r1 = qq != 0.0 ? C / qq : r0;
  *t0 = fmin(r0, r1);
  *t1 = fmax(r0, r1);
  return 1;
}

static int sphere_interval(const double o[3], const double d[3], const double c[3], double r,
                           double* t0, double* t1) {
  double oc[3];
  sub3(o, c, oc);
  double A = dot3(d, d), B = 2.0 * dot3(oc, d), C = dot3(oc, oc) - r * r;
  double disc = B * B - 4.0 * A * C;
  if (disc < 0.0 || A == 0.0) {
    return 0;
  }
  double sq = sqrt(disc);
  double qq = -0.5 * (B + (B >= 0.0 ? sq : -sq));
  double r0 = qq / A, r1 = qq != 0.0 ? C / qq : r0;
  *t0 = fmin(r0, r1);
  *t1 = fmax(r0, r1);
  return 1;
}

// Where the ray o + t d (object frame, scale undone) first meets the solid, t >= 0 (its exit
// when o is inside); +inf on a miss.
static double solid_entry(const view_object_t* obj, const double o[3], const double d[3]) {
  double t0 = -INFINITY, t1 = INFINITY, a, b;
  const double* sz = obj->size;
  switch (obj->prim) {
    case SCENE_PRIM_SPHERE: {
      double c[3] = {0, 0, 0};
      if (!sphere_interval(o, d, c, sz[0], &t0, &t1)) {
        return INFINITY;
      }
      break;
    }
    case SCENE_PRIM_ELLIPSOID: {  // the unit sphere in coordinates divided by the semi-axes
      double os[3] = {o[0] / sz[0], o[1] / sz[1], o[2] / sz[2]};
      double ds[3] = {d[0] / sz[0], d[1] / sz[1], d[2] / sz[2]};
      double c[3] = {0, 0, 0};
      if (!sphere_interval(os, ds, c, 1.0, &t0, &t1)) {
        return INFINITY;
      }
      break;
    }
    case SCENE_PRIM_CYLINDER: {  // infinite cylinder and the slab |z| <= h
      if (!cyl_interval(o, d, sz[0], &t0, &t1)) {
        return INFINITY;
      }
      if (d[2] != 0.0) {
        a = (-sz[1] - o[2]) / d[2];
        b = (sz[1] - o[2]) / d[2];
        t0 = fmax(t0, fmin(a, b));
        t1 = fmin(t1, fmax(a, b));
      } else if (fabs(o[2]) > sz[1]) {
        return INFINITY;
      }
      break;
    }
    case SCENE_PRIM_CAPSULE: {  // union of the cylinder part and the two end spheres (convex)
      double best0 = INFINITY, best1 = -INFINITY;
      double c0, c1;
      if (cyl_interval(o, d, sz[0], &c0, &c1)) {
        if (d[2] != 0.0) {
          a = (-sz[1] - o[2]) / d[2];
          b = (sz[1] - o[2]) / d[2];
          c0 = fmax(c0, fmin(a, b));
          c1 = fmin(c1, fmax(a, b));
        } else if (fabs(o[2]) > sz[1]) {
          c1 = c0 - 1.0;
        }
        if (c0 <= c1) {
          best0 = c0;
          best1 = c1;
        }
      }
      for (int e = -1; e <= 1; e += 2) {
        double c[3] = {0, 0, e * sz[1]};
        if (sphere_interval(o, d, c, sz[0], &c0, &c1)) {
          best0 = fmin(best0, c0);
          best1 = fmax(best1, c1);
        }
      }
      t0 = best0;
      t1 = best1;
      break;
    }
    default:
      return INFINITY;
  }
  if (!(t0 <= t1) || t1 < 0.0) {
    return INFINITY;
  }
  return t0 >= 0.0 ? t0 : t1;
}

static void solid_dir(const solid_ctx_t* s, const double d[3], double dc[3]) {
  for (int i = 0; i < 3; i++) {
    dc[i] = (s->rot_t[3 * i] * d[0] + s->rot_t[3 * i + 1] * d[1] + s->rot_t[3 * i + 2] * d[2]) *
            s->inv_scale[i];
  }
}

// Entry point along unit direction u from the sensor, inside the cap; +inf otherwise.
static double solid_ray(const cone_shape_t* k, const solid_ctx_t* s, const double u[3],
                        double q[3]) {
  double dc[3];
  solid_dir(s, u, dc);
  double t = solid_entry(s->o->obj, s->o_c, dc);
  if (!isfinite(t)) {
    return INFINITY;
  }
  for (int i = 0; i < 3; i++) {
    q[i] = t * u[i];
  }
  if (!cone_inside(k, q)) {
    return INFINITY;
  }
  return t;
}

static double solid_lateral(const cone_shape_t* k, const void* opaque, double gy, double gz,
                            double q[3]) {
  double g[3] = {1.0, gy, gz};
  double n = sqrt(dot3(g, g));
  for (int i = 0; i < 3; i++) {
    g[i] /= n;
  }
  return solid_ray(k, opaque, g, q);
}

// Ray entry for chart point (u, w) of the unit disk (projected onto it when outside).
static double solid_chart(const cone_shape_t* k, const solid_ctx_t* s, double u, double w,
                          double q[3]) {
  double r = hypot(u, w);
  if (r > 1.0) {
    u /= r;
    w /= r;
  }
  double g[3] = {1.0, k->a * u, k->b * w};
  double n = sqrt(dot3(g, g));
  for (int i = 0; i < 3; i++) {
    g[i] /= n;
  }
  return solid_ray(k, s, g, q);
}

// The closest point of the solid to the sensor, when its scale keeps it a sphere, cylinder
// or capsule (uniform, or uniform across the axis for a cylinder). Returns 0 when unknown.
static int solid_closest(const solid_ctx_t* s, double dest[3]) {
  const view_object_t* obj = s->o->obj;
  double sx = fabs(obj->scale[0]), sy = fabs(obj->scale[1]), sz = fabs(obj->scale[2]);
  // sensor origin in the rotated (unscaled) object frame
  double o[3] = {s->o_c[0] * obj->scale[0], s->o_c[1] * obj->scale[1], s->o_c[2] * obj->scale[2]};
  double c[3];
  if (obj->prim == SCENE_PRIM_SPHERE || obj->prim == SCENE_PRIM_CAPSULE) {
    if (sx != sy || sy != sz) {
      return 0;
    }
    double r = obj->size[0] * sx;
    double h = obj->prim == SCENE_PRIM_CAPSULE ? obj->size[1] * sz : 0.0;
    // closest point of the axis segment, then out by the radius
    double a[3] = {0.0, 0.0, fmin(fmax(o[2], -h), h)};
    double w[3];
    sub3(o, a, w);
    double len = sqrt(dot3(w, w));
    if (!(len > r)) {
      return 0;                 // the sensor is inside
    }
    for (int i = 0; i < 3; i++) {
      c[i] = a[i] + w[i] * (r / len);
    }
  } else if (obj->prim == SCENE_PRIM_CYLINDER) {
    if (sx != sy) {
      return 0;
    }
    double r = obj->size[0] * sx, h = obj->size[1] * sz;
    double rho = hypot(o[0], o[1]);
    double z = fmin(fmax(o[2], -h), h);
    if (rho <= r && fabs(o[2]) <= h) {
      return 0;
    }
    double f = rho > r ? r / rho : 1.0;
    c[0] = o[0] * f;
    c[1] = o[1] * f;
    c[2] = z;
  } else {
    return 0;
  }
  // back to the sensor frame: R c + p
  xform_apply(&s->o->pose, c, dest);
  return 1;
}

void cone_exact_curved(const cone_shape_t* k, const cone_object_t* o, cone_best_t* best) {
  // 0. a bounding sphere: wholly behind the sensor, beyond the cap, or farther than the best
  const view_object_t* obj = o->obj;
  double smax = fmax(fabs(obj->scale[0]), fmax(fabs(obj->scale[1]), fabs(obj->scale[2])));
  double rb = obj->prim == SCENE_PRIM_SPHERE      ? obj->size[0]
              : obj->prim == SCENE_PRIM_CAPSULE   ? obj->size[0] + obj->size[1]
              : obj->prim == SCENE_PRIM_ELLIPSOID ? fmax(obj->size[0],
                                                         fmax(obj->size[1], obj->size[2]))
                                                  : hypot(obj->size[0], obj->size[1]);
  rb *= smax;
  const double* c0 = o->pose.p;
  double lb = xform_norm(c0, 3) - rb;
  if (c0[0] + rb <= 0.0 || c0[0] - rb > k->range ||
      (best->found && lb > 0.0 && lb * lb >= best->d2)) {
    return;
  }
  // ... or wholly outside one side of the pyramid |y| <= a x, |z| <= b x that holds the cone
  double na = k->na, nb = k->nb;
  if ((c0[1] - k->a * c0[0]) / na > rb || (-c0[1] - k->a * c0[0]) / na > rb ||
      (c0[2] - k->b * c0[0]) / nb > rb || (-c0[2] - k->b * c0[0]) / nb > rb) {
    return;
  }
  // the solid's frame, only for a solid that may be seen
  solid_ctx_t s = {.o = o};
  double rot[9];
  xform_quat_to_mat(o->pose.q, rot);
  for (int i = 0; i < 3; i++) {
    for (int j = 0; j < 3; j++) {
      s.rot_t[3 * i + j] = rot[3 * j + i];
    }
    s.inv_scale[i] = 1.0 / o->obj->scale[i];
  }
  for (int i = 0; i < 3; i++) {
    double v = -(s.rot_t[3 * i] * o->pose.p[0] + s.rot_t[3 * i + 1] * o->pose.p[1] +
                 s.rot_t[3 * i + 2] * o->pose.p[2]);
    s.o_c[i] = v * s.inv_scale[i];
  }
  uint32_t id = o->obj->id;
  // 1. the solid's closest point, when inside the cone, is the answer
  double c[3];
  int known = solid_closest(&s, c);
  if (known && cone_inside(k, c)) {
    cone_offer_point(c, id, best);
    return;
  }
  if (best->pass == 1) {
    best->deferred = 1;         // its boundary search, in pass 2
    return;
  }
  if (known && best->found && dot3(c, c) >= best->d2) {
    return;                     // the solid cannot come closer than the best
  }
  // 2. the lateral surface of the cone, through the window of the bounding sphere: a point
  //    solid_ray finds is where a ray enters the solid, within rb of c0 but for the rounding
  //    of the entry (up to about 1e-8 of the distance at a grazing ray, where the root of the
  //    quadratic is ill-conditioned, and more when the scale is not uniform), far inside
  //    the margin of 1e-6 (rb + |c0|) smax / smin
  double smin = fmin(fabs(obj->scale[0]), fmin(fabs(obj->scale[1]), fabs(obj->scale[2])));
  double sr = rb + 1e-6 * (rb + xform_norm(c0, 3)) * (smax / smin);
  double lo[3], hi[3], win[4];
  for (int j = 0; j < 3; j++) {
    lo[j] = c0[j] - sr;
    hi[j] = c0[j] + sr;
  }
  lateral_search(k, solid_lateral, NULL, &s, box_window(k, lo, hi, win) ? win : NULL, id, best);
  // 3. inside the cone (non-uniform scales, the cap): the entry distance over the directions
  //    of the cone, sampled on a polar grid and refined by a compass search. A solid whose
  //    closest point is known and lies outside the cone has its answer on the mantle (done)
  //    or on the cap, which it can only reach when its bounding sphere crosses x = range.
  if (known && (c0[0] + rb < k->range || c0[0] - rb > k->range)) {
    return;
  }
  double q[3], bu = 0.0, bw = 0.0, bf = INFINITY;
  const int rings = 24, spokes = 48;
  for (int i = 0; i <= rings; i++) {
    double r = (double)i / rings;
    for (int j = 0; j < (i ? spokes : 1); j++) {
      double ang = 2.0 * M_PI * j / spokes;
      double u = r * cos(ang), w = r * sin(ang);
      double f = solid_chart(k, &s, u, w, q);
      if (f < bf) {
        bf = f;
        bu = u;
        bw = w;
      }
    }
  }
  if (!isfinite(bf)) {
    return;
  }
  double h = 1.0 / rings;
  while (h > 1e-13) {
    int moved = 0;
    for (int dir = 0; dir < 8; dir++) {
      double ang = dir * M_PI / 4.0;
      double u = bu + h * cos(ang), w = bw + h * sin(ang);
      double f = solid_chart(k, &s, u, w, q);
      if (f < bf) {
        double r = hypot(u, w);
        bf = f;
        bu = r > 1.0 ? u / r : u;
        bw = r > 1.0 ? w / r : w;
        moved = 1;
        break;
      }
    }
    if (!moved) {
      h *= 0.5;
    }
  }
  solid_chart(k, &s, bu, bw, q);
  cone_offer_point(q, id, best);
}
