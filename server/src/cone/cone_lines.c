// SPDX-License-Identifier: MIT
// cone_lines.c: LINES mode (Kallin's line method): each quad face sampled by N lines, each line
// clipped to the cone and reduced to its closest point (see cone.h).
#include "cone/cone.h"

void cone_lines_quad(const cone_shape_t* k, const double v[4][3], uint32_t n, uint32_t object_id,
                     cone_best_t* best) {
  for (uint32_t m = 0; m < n; m++) {
    double f = n > 1 ? (double)m / (double)(n - 1) : 0.0;
    double q0[3], q1[3];
    for (int i = 0; i < 3; i++) {
      q0[i] = v[0][i] + (v[3][i] - v[0][i]) * f;
      q1[i] = v[1][i] + (v[2][i] - v[1][i]) * f;
    }
    cone_offer_segment(k, q0, q1, object_id, best);
  }
}
