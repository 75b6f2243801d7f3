// SPDX-License-Identifier: MIT
// prim.c: exact ray/primitive intersection in double precision. Convex solids (box, cylinder)
// clip the ray's parameter interval against their bounding slabs and curved sides, so rays
// aimed exactly at an edge or a corner still hit; the capsule takes the nearest of its
// genuine surface points; the ellipsoid is a stretched unit sphere; a ray starting inside a
// solid hits where it leaves.
#include "scene/prim.h"

#include <math.h>

#include "base/xform.h"

// A parameter interval [t0, t1] on the ray with the bound that set each end: 0..2 = the slab
// of that axis, 3 = the curved side, -1 = unbounded.
typedef struct span {
  double t0, t1;
  int w0, w1;
} span_t;

enum { SIDE_CURVED = 3 };


// One size of a primitive: finite, in [PRIM_MIN_SIZE, PRIM_MAX_SIZE], or 0 when zero_ok.
static int check_size(const char* shape, const char* field, double v, bool zero_ok,
                      err_msg_t* msg) {
  if (!isfinite(v)) {
    return err_set(msg, ERR_INVAL, "%s.%s = %g is not finite", shape, field, v);
  }
  if (zero_ok && v == 0.0) {
    return 0;
  }
  if (!(v > 0.0)) {
    return err_set(msg, ERR_INVAL, "%s.%s = %g must be > 0", shape, field, v);
  }
  if (v < PRIM_MIN_SIZE) {
    return err_set(msg, ERR_INVAL, "%s.%s = %g is below the smallest size %g m", shape, field,
                   v, PRIM_MIN_SIZE);
  }
  if (v > PRIM_MAX_SIZE) {
    return err_set(msg, ERR_INVAL, "%s.%s = %g exceeds %g m", shape, field, v, PRIM_MAX_SIZE);
  }
  return 0;
}


int prim_check(scene_prim_kind_t kind, const double size[3], err_msg_t* msg) {
  // the fields each kind uses, as the protocol names them; the others are ignored
  static const char* const kBox[3] = {"half_extents.x", "half_extents.y", "half_extents.z"};
  static const char* const kRound[2] = {"radius", "half_length"};
  static const char* const kRadii[3] = {"radii.x", "radii.y", "radii.z"};
  static const char* const kHalves[2] = {"half_size_x", "half_size_y"};
  static const char* const kPlane[1] = {"half_size"};
  const char* shape;
  const char* const* field;
  int nused;
  unsigned zero_ok = 0;  // bit i: size[i] may be 0
  switch (kind) {
    case SCENE_PRIM_BOX:
      shape = "box", field = kBox, nused = 3;
      break;
    case SCENE_PRIM_SPHERE:
      shape = "sphere", field = kRound, nused = 1;
      break;
    case SCENE_PRIM_CYLINDER:
      shape = "cylinder", field = kRound, nused = 2;
      break;
    case SCENE_PRIM_CAPSULE:
      shape = "capsule", field = kRound, nused = 2, zero_ok = 2;
      break;
    case SCENE_PRIM_PLANE:
      shape = "plane", field = kPlane, nused = 1, zero_ok = 1;
      break;
    case SCENE_PRIM_ELLIPSOID:
      shape = "ellipsoid", field = kRadii, nused = 3;
      break;
    case SCENE_PRIM_RECTANGLE:
      shape = "rectangle", field = kHalves, nused = 2, zero_ok = 3;
      if (size[2] != 0.0 && size[2] != 1.0) {
        return err_set(msg, ERR_INVAL, "rectangle: one-sided flag %g is not 0 or 1", size[2]);
      }
      break;
    default:
      return err_set(msg, ERR_INVAL, "kind = %d is not a primitive kind", (int)kind);
  }
  for (int i = 0; i < nused; i++) {
    int rc = check_size(shape, field[i], size[i], (zero_ok >> i) & 1u, msg);
    if (rc) {
      return rc;
    }
  }
  return 0;
}


double prim_extent(scene_prim_kind_t kind, const double size[3]) {
  switch (kind) {
    case SCENE_PRIM_BOX:
      return xform_norm(size, 3);
    case SCENE_PRIM_CYLINDER:
      return xform_norm(size, 2);
    case SCENE_PRIM_CAPSULE:
      return size[0] + size[1];
    case SCENE_PRIM_PLANE:
      return (size[0] == 0.0 ? SCENE_PLANE_UNBOUNDED_HALF : size[0]) * sqrt(2.0);
    case SCENE_PRIM_ELLIPSOID:
      return fmax(size[0], fmax(size[1], size[2]));
    case SCENE_PRIM_RECTANGLE:
      return hypot(size[0] == 0.0 ? SCENE_PLANE_UNBOUNDED_HALF : size[0],
                   size[1] == 0.0 ? SCENE_PLANE_UNBOUNDED_HALF : size[1]);
    default:
      return size[0];
  }
}


int prim_init(prim_t* p, scene_prim_kind_t kind, const double size[3], err_msg_t* msg) {
  int rc = prim_check(kind, size, msg);
  if (rc) {
    return rc;
  }

  // store the used sizes (the others as 0), with the plane's "infinite" default
  static const int kUsed[] = {[SCENE_PRIM_BOX] = 3,       [SCENE_PRIM_SPHERE] = 1,
                              [SCENE_PRIM_CYLINDER] = 2,  [SCENE_PRIM_CAPSULE] = 2,
                              [SCENE_PRIM_PLANE] = 1,     [SCENE_PRIM_ELLIPSOID] = 3,
                              [SCENE_PRIM_RECTANGLE] = 3};
  p->kind = kind;
  for (int i = 0; i < 3; i++) {
    p->size[i] = i < kUsed[kind] ? size[i] : 0.0;
  }
  if (kind == SCENE_PRIM_PLANE && p->size[0] == 0.0) {
    p->size[0] = SCENE_PLANE_UNBOUNDED_HALF;
  }
  for (int i = 0; kind == SCENE_PRIM_RECTANGLE && i < 2; i++) {
    if (p->size[i] == 0.0) {
      p->size[i] = SCENE_PLANE_UNBOUNDED_HALF;
    }
  }
  return 0;
}


void prim_bounds(const prim_t* p, double lo[3], double hi[3]) {
  double r = p->size[0], h = p->size[1];
  double e[3] = {0.0, 0.0, 0.0};
  switch (p->kind) {
    case SCENE_PRIM_BOX:
      e[0] = p->size[0];
      e[1] = p->size[1];
      e[2] = p->size[2];
      break;
    case SCENE_PRIM_SPHERE:
      e[0] = e[1] = e[2] = r;
      break;
    case SCENE_PRIM_CYLINDER:
      e[0] = e[1] = r;
      e[2] = h;
      break;
    case SCENE_PRIM_CAPSULE:
      e[0] = e[1] = r;
      e[2] = h + r;
      break;
    case SCENE_PRIM_PLANE:
      e[0] = e[1] = r;
      break;
    case SCENE_PRIM_ELLIPSOID:
      e[0] = p->size[0];
      e[1] = p->size[1];
      e[2] = p->size[2];
      break;
    case SCENE_PRIM_RECTANGLE:
      e[0] = p->size[0];
      e[1] = p->size[1];
      break;
  }
  for (int i = 0; i < 3; i++) {
    lo[i] = -e[i];
    hi[i] = e[i];
  }
}


// Roots t0 <= t1 of a t^2 + 2 b t + c = 0 (a > 0) given its discriminant disc = b^2 - a c.
// The larger-magnitude root comes from the formula without cancellation, the other from
// Vieta's product c / (a t).
static bool quad_roots(double a, double b, double c, double disc, double* t0, double* t1) {
  if (disc < 0.0) {
    return false;
  }
  double q = -(b + copysign(sqrt(disc), b));
  double r0, r1;
  if (q == 0.0) {
    r0 = r1 = -b / a;
  } else {
    r0 = q / a;
    r1 = c / q;
  }
  *t0 = fmin(r0, r1);
  *t1 = fmax(r0, r1);
  return true;
}


// Clip s to lo <= o + t d <= hi along one axis. Returns false when the interval is empty.
static bool span_slab(span_t* s, double o, double d, double lo, double hi, int axis) {
  // A ray parallel to the slab is inside it everywhere or nowhere; dividing would give 0 * inf.
  if (d == 0.0) {
    return o >= lo && o <= hi;
  }
  double a = (lo - o) / d, b = (hi - o) / d;
  if (a > b) {
    double tmp = a;
    a = b;
    b = tmp;
  }
  if (a > s->t0) {
    s->t0 = a;
    s->w0 = axis;
  }
  if (b < s->t1) {
    s->t1 = b;
    s->w1 = axis;
  }
  return s->t0 <= s->t1;
}


// The discriminant b^2 - a c of |o + t d|^2 = r^2 in the xy plane, as a r^2 - (o x d)^2
// (Lagrange's identity): b^2 and a c are each near a |o|^2, and their difference lost every
// digit for a ray from 1e8 radii away (a ray at a sphere's centre missed it).
static double circle_disc(const double o[3], const double d[3], double a, double r) {
  double k = o[0] * d[1] - o[1] * d[0];
  return a * r * r - k * k;
}


// Clip s to the infinite solid cylinder x^2 + y^2 <= r^2.
static bool span_circle(span_t* s, const double o[3], const double d[3], double r) {
  double a = d[0] * d[0] + d[1] * d[1];
  double c = o[0] * o[0] + o[1] * o[1] - r * r;
  if (a == 0.0) {
    return c <= 0.0;
  }
  double b = o[0] * d[0] + o[1] * d[1];
  double t0, t1;
  if (!quad_roots(a, b, c, circle_disc(o, d, a, r), &t0, &t1)) {
    return false;
  }
  if (t0 > s->t0) {
    s->t0 = t0;
    s->w0 = SIDE_CURVED;
  }
  if (t1 < s->t1) {
    s->t1 = t1;
    s->w1 = SIDE_CURVED;
  }
  return s->t0 <= s->t1;
}


// Pick the entry of a convex solid's span, or its exit when the ray starts inside, and the
// outward normal of the bound that set it.
static bool span_hit(const span_t* s, const double o[3], const double d[3], double tmin,
                     double tmax, double* out_t, double out_n[3]) {
  double t;
  int w;
  double sgn;
  if (s->t0 >= tmin && s->t0 <= tmax) {
    t = s->t0;
    w = s->w0;
    sgn = -1.0;
  } else if (s->t1 >= tmin && s->t1 <= tmax) {
    t = s->t1;
    w = s->w1;
    sgn = 1.0;
  } else {
    return false;
  }
  if (w < 0) {
    return false;
  }

  // normal: the slab's axis against (entry) or along (exit) the ray, or radial on the side
  out_n[0] = out_n[1] = out_n[2] = 0.0;
  if (w == SIDE_CURVED) {
    double x = o[0] + t * d[0], y = o[1] + t * d[1];
    double n = hypot(x, y);
    out_n[0] = n > 0.0 ? x / n : 1.0;
    out_n[1] = n > 0.0 ? y / n : 0.0;
  } else {
    out_n[w] = d[w] > 0.0 ? sgn : -sgn;
  }
  *out_t = t;
  return true;
}


static bool hit_box(const prim_t* p, const double o[3], const double d[3], double tmin,
                    double tmax, double* out_t, double out_n[3]) {
  span_t s = {-INFINITY, INFINITY, -1, -1};
  for (int i = 0; i < 3; i++) {
    if (!span_slab(&s, o[i], d[i], -p->size[i], p->size[i], i)) {
      return false;
    }
  }
  return span_hit(&s, o, d, tmin, tmax, out_t, out_n);
}


static bool hit_cylinder(const prim_t* p, const double o[3], const double d[3], double tmin,
                         double tmax, double* out_t, double out_n[3]) {
  span_t s = {-INFINITY, INFINITY, -1, -1};
  if (!span_slab(&s, o[2], d[2], -p->size[1], p->size[1], 2)) {
    return false;
  }
  if (!span_circle(&s, o, d, p->size[0])) {
    return false;
  }
  return span_hit(&s, o, d, tmin, tmax, out_t, out_n);
}


// Nearest root in [tmin, tmax] of the sphere of radius r centred at (0, 0, cz) whose hit point
// satisfies zsign * (z - cz) >= -tol (zsign = 0: any point). Updates *best and n.
static void sphere_candidates(const double o[3], const double d[3], double r, double cz,
                              double zsign, double tol, double tmin, double* best,
                              double n[3]) {
  double oc[3] = {o[0], o[1], o[2] - cz};
  double a = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
  double b = oc[0] * d[0] + oc[1] * d[1] + oc[2] * d[2];
  double c = oc[0] * oc[0] + oc[1] * oc[1] + oc[2] * oc[2] - r * r;
  // the discriminant as a r^2 - |oc x d|^2, as circle_disc
  double cr[3] = {oc[1] * d[2] - oc[2] * d[1], oc[2] * d[0] - oc[0] * d[2],
                  oc[0] * d[1] - oc[1] * d[0]};
  double disc = a * r * r - (cr[0] * cr[0] + cr[1] * cr[1] + cr[2] * cr[2]);
  double t[2];
  if (a == 0.0 || !quad_roots(a, b, c, disc, &t[0], &t[1])) {
    return;
  }
  for (int k = 0; k < 2; k++) {
    if (t[k] < tmin || t[k] > *best) {
      continue;
    }
    double pt[3] = {oc[0] + t[k] * d[0], oc[1] + t[k] * d[1], oc[2] + t[k] * d[2]};
    if (zsign * pt[2] < -tol) {
      continue;
    }
    double len = xform_norm(pt, 3);
    if (!(len > 0.0)) {
      continue;
    }
    *best = t[k];
    for (int i = 0; i < 3; i++) {
      n[i] = pt[i] / len;
    }
    return;
  }
}


static bool hit_sphere(const prim_t* p, const double o[3], const double d[3], double tmin,
                       double tmax, double* out_t, double out_n[3]) {
  double best = tmax;
  double n[3] = {0.0, 0.0, 0.0};
  sphere_candidates(o, d, p->size[0], 0.0, 0.0, 0.0, tmin, &best, n);
  if (n[0] == 0.0 && n[1] == 0.0 && n[2] == 0.0) {
    return false;
  }
  *out_t = best;
  out_n[0] = n[0];
  out_n[1] = n[1];
  out_n[2] = n[2];
  return true;
}


// The capsule (points within r of the segment |z| <= h on the axis) is not a span of simple
// bounds, so take the nearest of its genuine surface points: the side where |z| <= h and each
// end sphere on its outer hemisphere. Every candidate lies on the boundary and every boundary
// point is a candidate, so the nearest is the first crossing, from outside or inside. The
// tolerance keeps a ray through the seam z = +-h from slipping between the two tests.
static bool hit_capsule(const prim_t* p, const double o[3], const double d[3], double tmin,
                        double tmax, double* out_t, double out_n[3]) {
  double r = p->size[0], h = p->size[1];
  double tol = 1e-12 * (r + h);
  double best = tmax;
  double n[3] = {0.0, 0.0, 0.0};

  // side
  double a = d[0] * d[0] + d[1] * d[1];
  if (a > 0.0) {
    double b = o[0] * d[0] + o[1] * d[1];
    double c = o[0] * o[0] + o[1] * o[1] - r * r;
    double t[2];
    if (quad_roots(a, b, c, circle_disc(o, d, a, r), &t[0], &t[1])) {
      for (int k = 0; k < 2; k++) {
        double z = o[2] + t[k] * d[2];
        if (t[k] < tmin || t[k] > best || fabs(z) > h + tol) {
          continue;
        }
        double x = o[0] + t[k] * d[0], y = o[1] + t[k] * d[1];
        double len = hypot(x, y);
        best = t[k];
        n[0] = len > 0.0 ? x / len : 1.0;
        n[1] = len > 0.0 ? y / len : 0.0;
        n[2] = 0.0;
        break;
      }
    }
  }

  // end caps
  sphere_candidates(o, d, r, h, 1.0, tol, tmin, &best, n);
  sphere_candidates(o, d, r, -h, -1.0, tol, tmin, &best, n);
  if (n[0] == 0.0 && n[1] == 0.0 && n[2] == 0.0) {
    return false;
  }
  *out_t = best;
  out_n[0] = n[0];
  out_n[1] = n[1];
  out_n[2] = n[2];
  return true;
}


static bool hit_plane(const prim_t* p, const double o[3], const double d[3], double tmin,
                      double tmax, double* out_t, double out_n[3]) {
  if (d[2] == 0.0) {
    return false;
  }
  double t = -o[2] / d[2];
  if (!(t >= tmin && t <= tmax)) {
    return false;
  }
  double x = o[0] + t * d[0], y = o[1] + t * d[1];
  double hs = p->size[0];
  if (fabs(x) > hs || fabs(y) > hs) {
    return false;
  }
  *out_t = t;
  out_n[0] = 0.0;
  out_n[1] = 0.0;
  out_n[2] = 1.0;
  return true;
}


// The ellipsoid is the unit sphere stretched by its semi-axes: the ray divided by them meets
// the unit sphere at the same parameters t. The normal is the gradient of the implicit
// function, (x / a^2, y / b^2, z / c^2), normalised.
static bool hit_ellipsoid(const prim_t* p, const double o[3], const double d[3], double tmin,
                          double tmax, double* out_t, double out_n[3]) {
  double os[3], ds[3];
  for (int i = 0; i < 3; i++) {
    os[i] = o[i] / p->size[i];
    ds[i] = d[i] / p->size[i];
  }
  double best = tmax;
  double n[3] = {0.0, 0.0, 0.0};
  sphere_candidates(os, ds, 1.0, 0.0, 0.0, 0.0, tmin, &best, n);
  if (n[0] == 0.0 && n[1] == 0.0 && n[2] == 0.0) {
    return false;
  }
  double g[3];
  for (int i = 0; i < 3; i++) {
    g[i] = (o[i] + best * d[i]) / (p->size[i] * p->size[i]);
  }
  double len = xform_norm(g, 3);
  if (!(len > 0.0)) {
    return false;
  }
  *out_t = best;
  for (int i = 0; i < 3; i++) {
    out_n[i] = g[i] / len;
  }
  return true;
}


// A rectangle of z = 0; one-sided (size[2] = 1) it is met only by rays going down (towards
// -z), as MuJoCo's mj_ray meets its planes: from above, and never from below.
static bool hit_rectangle(const prim_t* p, const double o[3], const double d[3], double tmin,
                          double tmax, double* out_t, double out_n[3]) {
  if (d[2] == 0.0 || (p->size[2] != 0.0 && !(d[2] < 0.0))) {
    return false;
  }
  double t = -o[2] / d[2];
  if (!(t >= tmin && t <= tmax)) {
    return false;
  }
  double x = o[0] + t * d[0], y = o[1] + t * d[1];
  if (fabs(x) > p->size[0] || fabs(y) > p->size[1]) {
    return false;
  }
  *out_t = t;
  out_n[0] = 0.0;
  out_n[1] = 0.0;
  out_n[2] = 1.0;
  return true;
}


bool prim_intersect(const prim_t* p, const double o[3], const double d[3], double tmin,
                    double tmax, double* out_t, double out_n[3]) {
  switch (p->kind) {
    case SCENE_PRIM_BOX:
      return hit_box(p, o, d, tmin, tmax, out_t, out_n);
    case SCENE_PRIM_SPHERE:
      return hit_sphere(p, o, d, tmin, tmax, out_t, out_n);
    case SCENE_PRIM_CYLINDER:
      return hit_cylinder(p, o, d, tmin, tmax, out_t, out_n);
    case SCENE_PRIM_CAPSULE:
      return hit_capsule(p, o, d, tmin, tmax, out_t, out_n);
    case SCENE_PRIM_PLANE:
      return hit_plane(p, o, d, tmin, tmax, out_t, out_n);
    case SCENE_PRIM_ELLIPSOID:
      return hit_ellipsoid(p, o, d, tmin, tmax, out_t, out_n);
    case SCENE_PRIM_RECTANGLE:
      return hit_rectangle(p, o, d, tmin, tmax, out_t, out_n);
  }
  return false;
}
