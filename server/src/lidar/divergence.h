// SPDX-License-Identifier: MIT
// divergence.h: beam divergence attenuation of a lidar return (docs/models/lidar.md, "Beam
// divergence"): a Gaussian beam of 1/e^2 radius w(x) = x tan(theta_D) + E at optical path length
// x, received by a detector of radius R at lateral offset r_D from the beam axis:
//   BD(x) = (1 - exp(-2 R^2 / w^2)) exp(-2 r_D^2 / w^2) / (1 - exp(-2)),
// normalised so that BD = 1 for R = E, r_D = 0 at x = 0. Not clamped unless asked.
//
// Thread: any (pure functions; the struct is read-only after init).
#ifndef SENSIM_LIDAR_DIVERGENCE_H_
#define SENSIM_LIDAR_DIVERGENCE_H_

#include "base/err.h"

// Configuration as it arrives from the client.
typedef struct lidar_beam_desc {
  int enabled;                  // 0: no divergence attenuation (BD = 1)
  double divergence;            // theta_D, 1/e^2 HALF angle, rad, in (0, 0.1)
  double exit_radius;           // E, m, in [0, 1] (0.005 is the usual default)
  double detector_radius;       // R, m, in (0, 1] (clients default it to exit_radius)
  double detector_offset;       // r_D, m, in [0, 1] (0 = coaxial)
  int clamp;                    // clamp BD to 1 (default 0: eq. as written, up to 1.1565)
} lidar_beam_desc_t;

// Validated beam, ready for evaluation.
typedef struct lidar_beam {
  int enabled;
  double tan_divergence;        // tan(theta_D)
  double exit_radius;           // E, m
  double detector_radius;       // R, m
  double detector_offset;       // r_D, m
  int clamp;
} lidar_beam_t;

// Validate d and fill b. ERR_INVAL naming the field under `prefix` (e.g. prefix "lidar.beam"
// gives "lidar.beam.divergence = 0.2 is outside (0, 0.1)"); b is untouched on failure. A
// disabled beam is accepted whatever its other fields hold.
int lidar_divergence_init(lidar_beam_t* b, const lidar_beam_desc_t* d, const char* prefix,
                          err_msg_t* msg) CHECKRET;

// Beam radius w(x) = x tan(theta_D) + E, m.
double lidar_divergence_width(const lidar_beam_t* b, double x);

// Normative attenuation factor BD(x) at optical path length x >= 0 (1 when disabled). With
// w = 0 (E = 0, x = 0) the limit: 1/(1 - e^-2) when r_D = 0, else 0.
double lidar_divergence_factor(const lidar_beam_t* b, double x);

#endif  // SENSIM_LIDAR_DIVERGENCE_H_
