// SPDX-License-Identifier: MIT
// pattern_flash.c: the flash (solid-state) lidar grid (docs/models/lidar.md, "Flash lidar"):
// N_h x N_v pixels over a horizontal and a vertical field of view, all fired at the frame time,
// in row-major order (row i from the top, then column j from the left). Equi-angular by default
// (pixel centres at phi_j = FOV_h/2 - (j + 0.5) FOV_h / N_h, eps_i = FOV_v/2 - (i + 0.5) FOV_v
// / N_v), or projective (a pinhole camera's pixel centres). The ring of a pixel is its row.
#include <math.h>

#include "lidar/pattern.h"


int lidar_pattern_flash_check(const lidar_flash_desc_t* d, const char* prefix,
                              err_msg_t* msg) {
  // sizes and fields of view
  if (d->columns == 0) {
    return err_set(msg, ERR_INVAL, "%s.columns = 0 must be > 0", prefix);
  }
  if (d->rows == 0) {
    return err_set(msg, ERR_INVAL, "%s.rows = 0 must be > 0", prefix);
  }
  if ((uint64_t)d->columns * d->rows > LIDAR_PATTERN_MAX_GROUP) {
    return err_set(msg, ERR_INVAL, "%s.columns x %s.rows = %u x %u pixels exceed %u", prefix,
                   prefix, d->columns, d->rows, LIDAR_PATTERN_MAX_GROUP);
  }
  double hmax = d->projective ? M_PI : 2.0 * M_PI;
  if (!isfinite(d->fov_horizontal) || !(d->fov_horizontal > 0.0) || !(d->fov_horizontal < hmax)) {
    return err_set(msg, ERR_INVAL, "%s.fov_horizontal = %g is outside (0, %g) rad", prefix,
                   d->fov_horizontal, hmax);
  }
  if (!isfinite(d->fov_vertical) || !(d->fov_vertical > 0.0) || !(d->fov_vertical < M_PI)) {
    return err_set(msg, ERR_INVAL, "%s.fov_vertical = %g is outside (0, pi) rad", prefix,
                   d->fov_vertical);
  }
  int rc;
  if ((rc = lidar_pattern_check_rate(d->frame_rate, 1e4, prefix, "frame_rate", msg))) {
    return rc;
  }
  return lidar_pattern_check_ray_rate(d->frame_rate, (double)d->columns * d->rows, prefix,
                                      "frame_rate", "columns x rows", msg);
}


int lidar_pattern_flash_init(lidar_pattern_t* p, const lidar_flash_desc_t* d, const char* prefix,
                             err_msg_t* msg) {
  // pixels
  int rc;
  if ((rc = lidar_pattern_flash_check(d, prefix, msg)) ||
      (rc = lidar_pattern_alloc(p, d->columns * d->rows, 0, prefix, msg))) {
    return rc;
  }
  p->kind = LIDAR_PATTERN_FLASH;
  double th = tan(d->fov_horizontal / 2.0), tv = tan(d->fov_vertical / 2.0);
  for (uint32_t i = 0; i < d->rows; i++) {
    for (uint32_t j = 0; j < d->columns; j++) {
      uint32_t k = i * d->columns + j;
      if (d->projective) {
        double u = 1.0 - 2.0 * ((double)j + 0.5) / (double)d->columns;
        double v = 1.0 - 2.0 * ((double)i + 0.5) / (double)d->rows;
        p->azimuth[k] = atan2(u * th, 1.0);
        p->elevation[k] = atan2(v * tv, hypot(1.0, u * th));
      } else {
        p->azimuth[k] = d->fov_horizontal / 2.0 -
                        ((double)j + 0.5) * d->fov_horizontal / (double)d->columns;
        p->elevation[k] = d->fov_vertical / 2.0 -
                          ((double)i + 0.5) * d->fov_vertical / (double)d->rows;
      }
      p->ring[k] = i;
    }
  }
  p->group_period = 1.0 / d->frame_rate;
  p->groups_per_sweep = 1;
  p->sweep_period = p->group_period;
  return lidar_pattern_prepare(p, prefix, msg);
}
