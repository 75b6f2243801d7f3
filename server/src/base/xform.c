// SPDX-License-Identifier: MIT
// xform.c: rigid transforms in double precision (docs/frames.md, docs/time.md): unit
// quaternions (w, x, y, z) with the Hamilton product, poses, and lerp/slerp interpolation
// between poses.
#include "base/xform.h"

#include <math.h>


pose_t xform_identity(void) {
  pose_t a = {{0.0, 0.0, 0.0}, {1.0, 0.0, 0.0, 0.0}};
  return a;
}


void xform_quat_rotate(const double q[4], const double v[3], double dest[3]) {
  // v' = v + 2 w (u x v) + 2 u x (u x v), u = vector part; the same as R(q) v for unit q
  double w = q[0], ux = q[1], uy = q[2], uz = q[3];
  double tx = 2.0 * (uy * v[2] - uz * v[1]);
  double ty = 2.0 * (uz * v[0] - ux * v[2]);
  double tz = 2.0 * (ux * v[1] - uy * v[0]);
  double rx = v[0] + w * tx + (uy * tz - uz * ty);
  double ry = v[1] + w * ty + (uz * tx - ux * tz);
  double rz = v[2] + w * tz + (ux * ty - uy * tx);
  dest[0] = rx;
  dest[1] = ry;
  dest[2] = rz;
}


void xform_quat_mul(const double a[4], const double b[4], double dest[4]) {
  double w = a[0] * b[0] - a[1] * b[1] - a[2] * b[2] - a[3] * b[3];
  double x = a[0] * b[1] + a[1] * b[0] + a[2] * b[3] - a[3] * b[2];
  double y = a[0] * b[2] - a[1] * b[3] + a[2] * b[0] + a[3] * b[1];
  double z = a[0] * b[3] + a[1] * b[2] - a[2] * b[1] + a[3] * b[0];
  dest[0] = w;
  dest[1] = x;
  dest[2] = y;
  dest[3] = z;
}


void xform_quat_conj(const double q[4], double dest[4]) {
  dest[0] = q[0];
  dest[1] = -q[1];
  dest[2] = -q[2];
  dest[3] = -q[3];
}


void xform_quat_to_mat(const double q[4], double dest[9]) {
  double w = q[0], x = q[1], y = q[2], z = q[3];
  dest[0] = 1.0 - 2.0 * (y * y + z * z);
  dest[1] = 2.0 * (x * y - w * z);
  dest[2] = 2.0 * (x * z + w * y);
  dest[3] = 2.0 * (x * y + w * z);
  dest[4] = 1.0 - 2.0 * (x * x + z * z);
  dest[5] = 2.0 * (y * z - w * x);
  dest[6] = 2.0 * (x * z - w * y);
  dest[7] = 2.0 * (y * z + w * x);
  dest[8] = 1.0 - 2.0 * (x * x + y * y);
}


// The largest |v[i]|, NaNs skipped (0 when all are NaN), as a chain of fmax from 0 gives it, but
// inline: a comparison (maxsd) per value, not a call into libm's fmax through the PLT.
static inline double xform_max_abs(const double* v, int n) {
  double m = 0.0;
  for (int i = 0; i < n; i++) {
    double a = fabs(v[i]);
    m = a > m ? a : m;
  }
  return m;
}


double xform_norm(const double* v, int n) {
  // the plain sum of squares when it is safely inside the normal range: no square that
  // underflowed can matter beside it, and none overflowed
  double s = 0.0;
  for (int i = 0; i < n; i++) {
    s += v[i] * v[i];
  }
  if (s > 1e-290 && s < 1e290) {
    return sqrt(s);
  }

  // otherwise scaled by the largest magnitude first
  double m = xform_max_abs(v, n);
  if (!(m > 0.0) || isinf(m)) {
    return m;
  }
  s = 0.0;
  for (int i = 0; i < n; i++) {
    s += (v[i] / m) * (v[i] / m);
  }
  return m * sqrt(s);
}


double xform_quat_normalize(double q[4]) {
  double m = xform_max_abs(q, 4);

  // a zero quaternion has no direction: fall back to the identity rather than divide by 0
  if (!(m > 0.0)) {
    q[0] = 1.0;
    q[1] = q[2] = q[3] = 0.0;
    return 0.0;
  }

  // q / m has components in [-1, 1] and a norm in [1, 2]: no overflow, no underflow to zero
  double u[4];
  for (int i = 0; i < 4; i++) {
    u[i] = q[i] / m;
  }
  double r = sqrt(u[0] * u[0] + u[1] * u[1] + u[2] * u[2] + u[3] * u[3]);
  for (int i = 0; i < 4; i++) {
    q[i] = u[i] / r;
  }
  return m * r;
}


void xform_slerp(const double a[4], const double b[4], double s, double dest[4]) {
  // shortest arc: q and -q are the same rotation, take the b nearer to a
  double c = a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3];
  double sign = 1.0;
  if (c < 0.0) {
    sign = -1.0;
    c = -c;
  }

  // Close to parallel, sin(th) -> 0 makes the slerp weights ill-conditioned; the normalised
  // lerp differs from the slerp there by far less than the rounding error of the weights.
  double wa, wb;
  if (c > 0.9995) {
    wa = 1.0 - s;
    wb = s;
  } else {
    double th = acos(c);
    double sth = sin(th);
    wa = sin((1.0 - s) * th) / sth;
    wb = sin(s * th) / sth;
  }
  wb *= sign;

  // combine; aliasing of dest with a or b is safe because each component is read once
  for (int i = 0; i < 4; i++) {
    dest[i] = wa * a[i] + wb * b[i];
  }
  if (c > 0.9995) {
    xform_quat_normalize(dest);
  }
}


pose_t xform_interpolate(const pose_t* a, const pose_t* b, double s) {
  pose_t r;
  for (int i = 0; i < 3; i++) {
    r.p[i] = (1.0 - s) * a->p[i] + s * b->p[i];
  }
  xform_slerp(a->q, b->q, s, r.q);
  return r;
}


pose_t xform_mounted(const pose_t* a, const pose_t* b, const pose_t* local, double s) {
  pose_t body = xform_interpolate(a, b, s);
  return xform_compose(&body, local);
}


pose_t xform_compose(const pose_t* a, const pose_t* b_c) {
  // world<-c = (world<-b)(b<-c): p = R_a p_bc + p_a, q = q_a q_bc
  pose_t r;
  xform_apply(a, b_c->p, r.p);
  xform_quat_mul(a->q, b_c->q, r.q);
  return r;
}


pose_t xform_inverse(const pose_t* a) {
  // b<-world: q' = conj(q), p' = -R(q)^T p
  pose_t r;
  xform_quat_conj(a->q, r.q);
  xform_quat_rotate(r.q, a->p, r.p);
  for (int i = 0; i < 3; i++) {
    r.p[i] = -r.p[i];
  }
  return r;
}


void xform_apply(const pose_t* a, const double v[3], double dest[3]) {
  double r[3];
  xform_quat_rotate(a->q, v, r);
  for (int i = 0; i < 3; i++) {
    dest[i] = r[i] + a->p[i];
  }
}
