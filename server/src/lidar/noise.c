// SPDX-License-Identifier: MIT
// noise.c: detection distance inaccuracy (AGX Sensor technical description, section on the
// detection distance; slope in metres per metre as OpenPLX `LidarDetectionDistanceGaussianNoise`
// documents it) and ray emission angle noise (AGXUnity `LidarRayAngleGaussianNoise`, OpenPLX
// `RayEmissionAngleGaussianNoise`).
#include "lidar/noise.h"

#include <math.h>

#include "base/simd.h"


static int check_nonneg(const char* prefix, const char* field, double v, err_msg_t* msg) {
  if (!isfinite(v) || !(v >= 0.0)) {
    return err_set(msg, ERR_INVAL, "%s.%s = %g must be finite and >= 0", prefix, field, v);
  }
  return 0;
}


static int check_finite(const char* prefix, const char* field, double v, err_msg_t* msg) {
  if (!isfinite(v)) {
    return err_set(msg, ERR_INVAL, "%s.%s = %g is not finite", prefix, field, v);
  }
  return 0;
}


int lidar_noise_distance_init(lidar_distance_noise_t* n, const lidar_distance_noise_desc_t* d,
                              const char* prefix, err_msg_t* msg) {
  int rc;
  if ((rc = check_nonneg(prefix, "stddev_base", d->stddev_base, msg)) < 0 ||
      (rc = check_nonneg(prefix, "stddev_slope", d->stddev_slope, msg)) < 0 ||
      (rc = check_finite(prefix, "mean", d->mean, msg)) < 0) {
    return rc;
  }
  // bounded so that a noisy distance stays far inside float32 (points are float32)
  if (d->stddev_base > LIDAR_NOISE_MAX_DISTANCE || fabs(d->mean) > LIDAR_NOISE_MAX_DISTANCE) {
    int base = d->stddev_base > LIDAR_NOISE_MAX_DISTANCE;
    return err_set(msg, ERR_INVAL, "%s.%s = %g must be within +-%g m", prefix,
                   base ? "stddev_base" : "mean", base ? d->stddev_base : d->mean,
                   LIDAR_NOISE_MAX_DISTANCE);
  }
  if (d->stddev_slope > LIDAR_NOISE_MAX_SLOPE) {
    return err_set(msg, ERR_INVAL, "%s.stddev_slope = %g must be <= %g", prefix,
                   d->stddev_slope, LIDAR_NOISE_MAX_SLOPE);
  }
  *n = (lidar_distance_noise_t){
      .stddev_base = d->stddev_base,
      .stddev_slope = d->stddev_slope,
      .mean = d->mean,
      .enabled = d->stddev_base != 0.0 || d->stddev_slope != 0.0 || d->mean != 0.0,
  };
  return 0;
}


// P. J. Acklam, "An algorithm for computing the inverse normal cumulative distribution
// function" (2003): a rational function of u - 1/2 in the centre, of sqrt(-2 ln u) in the
// tails (below QUANTILE_P_LOW and symmetrically above 1 - QUANTILE_P_LOW)
#define QUANTILE_P_LOW 0.02425
static const double g_qa[6] = {-3.969683028665376e+01, 2.209460984245205e+02,
                               -2.759285104469687e+02, 1.383577518672690e+02,
                               -3.066479806614716e+01, 2.506628277459239e+00};
static const double g_qb[5] = {-5.447609879822406e+01, 1.615858368580409e+02,
                               -1.556989798598866e+02, 6.680131188771972e+01,
                               -1.328068155288572e+01};

// The central branch.
static inline double quantile_centre(double u) {
  const double* a = g_qa;
  const double* b = g_qb;
  double q = u - 0.5;
  double r = q * q;
  return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
         (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1.0);
}


double lidar_noise_normal_quantile(double u) {
  static const double c[6] = {-7.784894002430293e-03, -3.223964580411365e-01,
                              -2.400758277161838e+00, -2.549732539343734e+00,
                              4.374664141464968e+00, 2.938163982698783e+00};
  static const double d[4] = {7.784695709041462e-03, 3.224671290700398e-01,
                              2.445134137142996e+00, 3.754408661907416e+00};
  const double p_low = QUANTILE_P_LOW;
  if (u > p_low && u < 1.0 - p_low) {
    return quantile_centre(u);
  }
  double tail = u <= p_low ? u : 1.0 - u;
  double q = sqrt(-2.0 * log(tail));
  double x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
             ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0);
  return u <= p_low ? x : -x;
}


// The central branch across SIMD lanes (its forms: base/simd.h), then the tails (one draw in
// twenty) in blocks of QUANTILE_BLOCK draws: each draw's flag across the lanes too, by its bits
// (a tail when they are below lo or at least hi: quantile_bounds), then the flagged draws one
// by one. Testing the uniform itself there, draw by draw, was a third of the kernel's time.
#define QUANTILE_BLOCK 256

static inline SIMD_BODY void quantiles(const uint32_t (*w)[4], size_t n, int64_t lo, int64_t hi,
                                       double* z) {
  for (size_t i = 0; i < n; i++) {
    z[i] = quantile_centre(lidar_noise_uniform(w[i][2], w[i][3]));
  }
  int64_t tail[QUANTILE_BLOCK];
  for (size_t b = 0; b < n; b += QUANTILE_BLOCK) {
    const uint32_t (*wb)[4] = w + b;
    size_t m = n - b < QUANTILE_BLOCK ? n - b : QUANTILE_BLOCK;
    for (size_t i = 0; i < m; i++) {
      // at most 2^52: signed comparisons (which AVX2 has) order them as unsigned ones
      int64_t bits = (int64_t)lidar_noise_uniform_bits(wb[i][2], wb[i][3]);
      tail[i] = (bits < lo) | (bits >= hi);
    }
    for (size_t i = 0; i < m; i++) {
      if (tail[i]) {
        z[b + i] = lidar_noise_normal_quantile(lidar_noise_uniform(wb[i][2], wb[i][3]));
      }
    }
  }
}

SIMD_FORMS(quantiles, (const uint32_t (*w)[4], size_t n, int64_t lo, int64_t hi, double* z),
           (w, n, lo, hi, z))


uint64_t lidar_noise_uniform_count_below(double p) {
  const uint64_t top = (uint64_t)1 << 52;
  if (!(p > rng_unit_of_bits(0))) {
    return 0;
  }
  if (p > rng_unit_of_bits(top - 1)) {
    return top;
  }
  // the count c: rng_unit_of_bits(c - 1) < p <= rng_unit_of_bits(c); p 2^52 - 1/2 is within a
  // step of it (the products by 2^52 are exact), then the exact comparisons settle it
  double guess = floor(p * 4503599627370496.0 - 0.5);
  uint64_t c = guess <= 0.0 ? 0 : (guess >= (double)top ? top : (uint64_t)guess);
  while (c > 0 && !(rng_unit_of_bits(c - 1) < p)) {
    c--;
  }
  while (c < top && rng_unit_of_bits(c) < p) {
    c++;
  }
  return c;
}


// The bits of the central branch, [*lo, *hi): the uniform is above QUANTILE_P_LOW exactly from
// the first bits whose uniform is not at most it, and below 1 - QUANTILE_P_LOW exactly below
// the count of those whose uniform is below it (the uniform grows with the bits).
static void quantile_bounds(int64_t* lo, int64_t* hi) {
  uint64_t c = lidar_noise_uniform_count_below(QUANTILE_P_LOW);
  *lo = (int64_t)c + (rng_unit_of_bits(c) == QUANTILE_P_LOW);
  *hi = (int64_t)lidar_noise_uniform_count_below(1.0 - QUANTILE_P_LOW);
}


void lidar_noise_normal_quantiles(const uint32_t (*w)[4], size_t n, double* z) {
  int64_t lo, hi;
  quantile_bounds(&lo, &hi);
  SIMD_CALL(quantiles, (w, n, lo, hi, z));
}


double lidar_noise_normal(const rng_key_t* key, uint32_t draw) {
  uint32_t w[4];
  rng_words(key, draw, w);
  return lidar_noise_normal_quantile(lidar_noise_uniform(w[0], w[1]));
}


double lidar_noise_distance(const lidar_distance_noise_t* n, const rng_key_t* key, uint32_t k,
                            double x) {
  if (!n->enabled) {
    return x;
  }
  double sigma = lidar_noise_distance_stddev(n, x);
  double z = 0.0;
  if (sigma != 0.0 && k == 0) {
    uint32_t w[4];
    rng_words(key, LIDAR_DRAW_RAY, w);
    z = lidar_noise_normal_quantile(lidar_noise_uniform(w[2], w[3]));
  } else if (sigma != 0.0) {
    z = lidar_noise_normal(key, LIDAR_DRAW_DISTANCE + k);
  }
  return lidar_noise_distance_apply(n, x, z);
}


int lidar_noise_angle_init(lidar_angle_noise_t* n, const lidar_angle_noise_desc_t* d,
                           const char* prefix, err_msg_t* msg) {
  if (d->axis != LIDAR_ANGLE_ELEVATION && d->axis != LIDAR_ANGLE_AZIMUTH) {
    return err_set(msg, ERR_INVAL, "%s.axis = %d is not ELEVATION (0) or AZIMUTH (1)", prefix,
                   (int)d->axis);
  }

  // a rotation beyond half a turn is no emission error; unbounded, a normal draw times 1e308
  // makes the angle infinite and the ray's direction NaN
  if (!(fabs(d->mean) <= LIDAR_NOISE_MAX_ANGLE)) {
    return err_set(msg, ERR_INVAL, "%s.mean = %g is outside [-pi, pi] rad", prefix, d->mean);
  }
  if (!(d->stddev >= 0.0 && d->stddev <= LIDAR_NOISE_MAX_ANGLE)) {
    return err_set(msg, ERR_INVAL, "%s.stddev = %g is outside [0, pi] rad", prefix, d->stddev);
  }
  *n = (lidar_angle_noise_t){
      .axis = d->axis,
      .mean = d->mean,
      .stddev = d->stddev,
      .enabled = d->mean != 0.0 || d->stddev != 0.0,
  };
  return 0;
}


void lidar_noise_angle_apply(const lidar_angle_noise_t* n, const double dir[3], double z,
                             double dest[3]) {
  double d[3] = {dir[0], dir[1], dir[2]};
  double beta = n->stddev == 0.0 ? n->mean : n->mean + n->stddev * z;

  // optical frame: z_opt = d, x_opt = e_z x d normalised (e_y for a vertical ray),
  // y_opt = z_opt x x_opt
  double x_opt[3] = {-d[1], d[0], 0.0};
  double len = hypot(x_opt[0], x_opt[1]);
  if (len > 1e-9) {
    x_opt[0] /= len;
    x_opt[1] /= len;
  } else {
    x_opt[0] = 0.0;
    x_opt[1] = 1.0;
  }
  double y_opt[3] = {
      d[1] * x_opt[2] - d[2] * x_opt[1],
      d[2] * x_opt[0] - d[0] * x_opt[2],
      d[0] * x_opt[1] - d[1] * x_opt[0],
  };

  // Rodrigues rotation of d about a unit axis perpendicular to it: d cos b + (a x d) sin b;
  // a x d = -y_opt for a = x_opt (elevation), x_opt for a = y_opt (azimuth)
  const double* ad_sign = n->axis == LIDAR_ANGLE_ELEVATION ? y_opt : x_opt;
  double sgn = n->axis == LIDAR_ANGLE_ELEVATION ? -1.0 : 1.0;
  double cb = cos(beta);
  double sb = sin(beta);
  for (int i = 0; i < 3; i++) {
    dest[i] = d[i] * cb + sgn * ad_sign[i] * sb;
  }
}


void lidar_noise_angle(const lidar_angle_noise_t* n, const rng_key_t* key, const double dir[3],
                       double dest[3]) {
  if (!n->enabled) {
    dest[0] = dir[0];
    dest[1] = dir[1];
    dest[2] = dir[2];
    return;
  }
  double z = n->stddev == 0.0 ? 0.0 : lidar_noise_normal(key, LIDAR_DRAW_ANGLE);
  lidar_noise_angle_apply(n, dir, z, dest);
}
