// SPDX-License-Identifier: MIT
// xform.h: rigid transforms in double precision: poses (position + unit quaternion), their
// composition and inverse, rotation of vectors, norms, lerp/slerp interpolation, frames mounted
// on interpolated bodies (docs/frames.md, docs/time.md).
// Quaternions are stored (w, x, y, z), Hamilton product, active rotation local -> parent.
#ifndef SENSIM_BASE_XFORM_H_
#define SENSIM_BASE_XFORM_H_

#include <math.h>

typedef struct pose {
  double p[3];  // position, m
  double q[4];  // unit quaternion (w, x, y, z)
} pose_t;

// The identity pose.
pose_t xform_identity(void);

// Rotate v by unit quaternion q: dest = R(q) v. dest may alias v.
void xform_quat_rotate(const double q[4], const double v[3], double dest[3]);

// Hamilton product dest = a * b. dest may alias a or b.
void xform_quat_mul(const double a[4], const double b[4], double dest[4]);

// Conjugate (= inverse for unit quaternions).
void xform_quat_conj(const double q[4], double dest[4]);

// Rotation matrix R(q), row-major 3x3 (columns = local axes in the parent frame).
void xform_quat_to_mat(const double q[4], double dest[9]);

// Euclidean norm of n values, scaled by the largest magnitude first so that the squares neither
// overflow nor underflow (finite inputs give a finite result).
double xform_norm(const double* v, int n);

// xform_norm of a 3-vector, inline: the plain sum of squares when it is safely in range.
static inline double xform_norm3(const double v[3]) {
  double s = v[0] * v[0] + v[1] * v[1] + v[2] * v[2];
  return s > 1e-290 && s < 1e290 ? sqrt(s) : xform_norm(v, 3);
}

// Normalise q in place (finite components of any magnitude: scaled by the largest first, so
// neither the norm nor the quotients overflow); returns its norm before normalisation, +inf when
// that norm exceeds DBL_MAX. A zero q becomes the identity.
double xform_quat_normalize(double q[4]);

// Sum of squares below which, or at or above which, xform_quat_unit leaves q to
// xform_quat_normalize: inside, no square overflowed and none that underflowed matters.
#define XFORM_QUAT_UNIT_MIN 1e-290
#define XFORM_QUAT_UNIT_MAX 1e290

// The sum of squares of q = (a, b, c, d) that the normalisation below takes: a caller that
// needs it first (to check its range) passes the same bits on to xform_quat_unit_sq.
static inline double xform_quat_sq(double a, double b, double c, double d) {
  return a * a + b * b + c * c + d * d;
}

// Normalise q in place, cheaply when its sum of squares s is safely in range (the orientations
// of a state: once per body per update): q / sqrt(s) as one square root, one division and four
// products, no call; otherwise xform_quat_normalize. Returns the norm before normalisation.
// Each component's relative error is at most about 5 units of roundoff (2^-53): 4 from the sum
// of squares (halved by the root), one each from the root, 1 / r and the product; the bound of
// xform_quat_normalize, whose results may differ from these in the last bit. A q whose squares
// sum to exactly 1 is kept bit for bit. s must be xform_quat_sq(q[0], q[1], q[2], q[3]).
static inline double xform_quat_unit_sq(double q[4], double s) {
  if (!(s > XFORM_QUAT_UNIT_MIN && s < XFORM_QUAT_UNIT_MAX)) {
    return xform_quat_normalize(q);
  }
  double r = sqrt(s);
  double inv = 1.0 / r;
  q[0] *= inv;
  q[1] *= inv;
  q[2] *= inv;
  q[3] *= inv;
  return r;
}

// xform_quat_unit_sq computing s itself.
static inline double xform_quat_unit(double q[4]) {
  return xform_quat_unit_sq(q, xform_quat_sq(q[0], q[1], q[2], q[3]));
}

// Shortest-arc slerp (docs/time.md): flips b when a.b < 0, lerps and normalises when
// a.b > 0.9995. s in [0, 1].
void xform_slerp(const double a[4], const double b[4], double s, double dest[4]);

// Pose at fraction s: lerp of positions, slerp of orientations.
pose_t xform_interpolate(const pose_t* a, const pose_t* b, double s);

// Pose of a frame rigidly mounted on a moving body (an object, a sensor), at fraction s of the
// step: the body is interpolated between its poses a (s = 0) and b (s = 1) (lerp of its origin,
// slerp of its orientation) and the mount composed on it, X(s) = X_body(s) * local, so a point
// away from the body's origin moves along the arc, not the chord (docs/time.md).
pose_t xform_mounted(const pose_t* a, const pose_t* b, const pose_t* local, double s);

// Composition: the pose of frame c in the world given a = world<-b and b_c = b<-c.
pose_t xform_compose(const pose_t* a, const pose_t* b_c);

// Inverse pose.
pose_t xform_inverse(const pose_t* a);

// Apply a pose to a point: dest = R(q) v + p.
void xform_apply(const pose_t* a, const double v[3], double dest[3]);

#endif  // SENSIM_BASE_XFORM_H_
