// SPDX-License-Identifier: MIT
// noise.h: lidar measurement noise (docs/models/lidar.md, "Noise"): the detection distance
// inaccuracy of every reported return, x' = max(x + mu + (sigma_base + sigma_slope x) N, 0),
// and the optional Gaussian ray emission angle noise. Random numbers come from base/rng.h keyed
// by the ray (seed, sensor, frame, ray index) with a fixed draw number per purpose, so a ray's
// noise does not depend on threads or on the other rays.
//
// Thread: any (pure functions; structs read-only after init).
#ifndef SENSIM_LIDAR_NOISE_H_
#define SENSIM_LIDAR_NOISE_H_

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "base/rng.h"

// Draw numbers of a ray's key (base/rng.h). Each purpose owns a fixed range, so adding returns
// or segments never shifts another purpose's numbers. The first draw of a ray serves its two
// most frequent needs at once (one generator call per ray in the common case): words 0-1 are
// the uniform of the root segment's atmospheric return, words 2-3 the distance noise of the
// first reported return.
#define LIDAR_DRAW_ANGLE 0u                 // ray emission angle noise (words 0-1)
#define LIDAR_DRAW_RAY 1u                   // root atmosphere (words 0-1), return 0 (words 2-3)
#define LIDAR_DRAW_DISTANCE 1u              // distance noise of return k >= 1: draw 1 + k
#define LIDAR_DRAW_ATMOSPHERE 512u          // segment (heap node) i: 512 + 80 i ... + 79
#define LIDAR_DRAW_ATMOSPHERE_STRIDE 80u    //   (root: its gamma sample only, from 513)

//---------------- Random variates

// The 52 bits lidar_noise_uniform reads from two words (rng_bits52).
static inline uint64_t lidar_noise_uniform_bits(uint32_t hi, uint32_t lo) {
  return rng_bits52(hi, lo);
}

// Uniform in the open interval (0, 1) from two words (52 bits), never 0 or 1: rng_unit_of_bits
// of their bits, as rng_uniform computes it. (Inline: it runs once per point.)
static inline double lidar_noise_uniform(uint32_t hi, uint32_t lo) {
  return rng_unit_of_bits(lidar_noise_uniform_bits(hi, lo));
}

// The number of 52-bit values whose uniform is below p: lidar_noise_uniform(hi, lo) < p exactly
// when lidar_noise_uniform_bits(hi, lo) < lidar_noise_uniform_count_below(p) (the uniform grows
// with the bits), an integer test that runs across SIMD lanes. 0 for p <= 0 or NaN, 2^52 for
// p > 1 - 2^-53.
uint64_t lidar_noise_uniform_count_below(double p);

// Standard normal quantile Phi^-1(u) for u in (0, 1): P. J. Acklam's rational approximation
// (relative error below 1.2e-9), so one uniform gives one normal without a log or a cosine in
// 95 % of the draws.
double lidar_noise_normal_quantile(double u);

// z[i] = lidar_noise_normal_quantile(lidar_noise_uniform(w[i][2], w[i][3])) for i < n: the
// quantiles of words 2-3 of n draws (the distance noise of a ray's first return, from its
// first draw), the central branch across SIMD lanes (bit for bit the scalar arithmetic: the
// same operations in the same order, no fused multiply-add).
void lidar_noise_normal_quantiles(const uint32_t (*w)[4], size_t n, double* z);

// A standard normal from draw `draw` of key (words 0-1).
double lidar_noise_normal(const rng_key_t* key, uint32_t draw);

//---------------- Detection distance noise

// Bounds of the distance noise: |mean| and stddev_base in m, stddev_slope in m/m.
#define LIDAR_NOISE_MAX_DISTANCE 1e6
#define LIDAR_NOISE_MAX_SLOPE 1e3

typedef struct lidar_distance_noise_desc {
  double stddev_base;           // sigma_base, m, >= 0
  double stddev_slope;          // sigma_slope, m per m, >= 0
  double mean;                  // mu, m (finite)
} lidar_distance_noise_desc_t;

typedef struct lidar_distance_noise {
  double stddev_base;
  double stddev_slope;
  double mean;
  int enabled;                  // any parameter non-zero
} lidar_distance_noise_t;

// Validate and fill n; ERR_INVAL naming "<prefix>.<field>"; n untouched on failure.
int lidar_noise_distance_init(lidar_distance_noise_t* n, const lidar_distance_noise_desc_t* d,
                              const char* prefix, err_msg_t* msg) CHECKRET;

// sigma(x) = sigma_base + sigma_slope * x.
static inline double lidar_noise_distance_stddev(const lidar_distance_noise_t* n, double x) {
  return n->stddev_base + n->stddev_slope * x;
}

// x' = max(x + mu + sigma(x) * z, 0) for a standard normal sample z (injectable for tests).
static inline double lidar_noise_distance_apply(const lidar_distance_noise_t* n, double x,
                                                double z) {
  double sigma = lidar_noise_distance_stddev(n, x);

  // sigma = 0 gives exactly x + mu (no 0 * z rounding)
  double xn = sigma == 0.0 ? x + n->mean : x + n->mean + sigma * z;
  return xn > 0.0 ? xn : 0.0;
}

// The same with z drawn from `key` for output return slot k: words 2-3 of LIDAR_DRAW_RAY for
// k = 0, draw LIDAR_DRAW_DISTANCE + k otherwise. Returns x unchanged (no draw) when the noise is
// disabled, x + mu when sigma(x) = 0.
double lidar_noise_distance(const lidar_distance_noise_t* n, const rng_key_t* key, uint32_t k,
                            double x);

//---------------- Ray emission angle noise

typedef enum lidar_angle_axis {
  LIDAR_ANGLE_ELEVATION = 0,    // rotation about x_opt
  LIDAR_ANGLE_AZIMUTH = 1,      // rotation about y_opt
} lidar_angle_axis_t;

// Bound of the angle noise's |mean| and stddev, rad (half a turn).
#define LIDAR_NOISE_MAX_ANGLE 3.141592653589793

typedef struct lidar_angle_noise_desc {
  lidar_angle_axis_t axis;
  double mean;                  // rad, in [-pi, pi]
  double stddev;                // rad, in [0, pi]
} lidar_angle_noise_desc_t;

typedef struct lidar_angle_noise {
  lidar_angle_axis_t axis;
  double mean;
  double stddev;
  int enabled;
} lidar_angle_noise_t;

int lidar_noise_angle_init(lidar_angle_noise_t* n, const lidar_angle_noise_desc_t* d,
                           const char* prefix, err_msg_t* msg) CHECKRET;

// Rotate the unit direction dir (sensor frame, z up) by beta = mu + sigma * z about one axis of
// its optical frame: z_opt = dir, x_opt = normalize(e_z x dir) (e_y when dir is vertical),
// y_opt = z_opt x x_opt. Elevation rotates about x_opt, azimuth about y_opt. dest may alias dir.
void lidar_noise_angle_apply(const lidar_angle_noise_t* n, const double dir[3], double z,
                             double dest[3]);

// The same with z drawn from `key`, draw LIDAR_DRAW_ANGLE; copies dir when disabled.
void lidar_noise_angle(const lidar_angle_noise_t* n, const rng_key_t* key, const double dir[3],
                       double dest[3]);

#endif  // SENSIM_LIDAR_NOISE_H_
