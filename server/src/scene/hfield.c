// SPDX-License-Identifier: MIT
// hfield.c: a height field's triangle mesh (hfield.h). Vertices: the grid's samples, then one
// bottom vertex under each sample of the border, walked around the rectangle. The surface's
// triangles come first, in cell order, so a hit's triangle index names its cell.
#include "scene/hfield.h"

#include <math.h>

// The grid's coordinate of sample i of n along a half size: -half + i 2 half / (n - 1), exact
// at both ends.
static double grid_at(uint32_t i, uint32_t n, double half) {
  return i + 1 == n ? half : -half + 2.0 * half * (double)i / (double)(n - 1);
}


static int check_half(const char* field, double v, err_msg_t* msg) {
  if (!isfinite(v) || v < HFIELD_MIN_SIZE || v > HFIELD_MAX_SIZE) {
    return err_set(msg, ERR_INVAL, "height_field.%s = %g must be in [%g, %g] m", field, v,
                   HFIELD_MIN_SIZE, HFIELD_MAX_SIZE);
  }
  return 0;
}


int hfield_check(const hfield_t* h, err_msg_t* msg) {
  if (h->rows < 2 || h->columns < 2) {
    return err_set(msg, ERR_INVAL, "height_field.%s = %u must be >= 2",
                   h->rows < 2 ? "rows" : "columns", h->rows < 2 ? h->rows : h->columns);
  }
  if ((uint64_t)h->rows * h->columns > HFIELD_MAX_SAMPLES) {
    return err_set(msg, ERR_INVAL, "height_field: rows x columns = %u x %u exceeds %u samples",
                   h->rows, h->columns, HFIELD_MAX_SAMPLES);
  }
  int rc = check_half("half_size_x", h->half_x, msg);
  if (rc == 0) {
    rc = check_half("half_size_y", h->half_y, msg);
  }
  if (rc) {
    return rc;
  }
  if (!isfinite(h->base_depth) || h->base_depth < 0.0 || h->base_depth > HFIELD_MAX_SIZE) {
    return err_set(msg, ERR_INVAL, "height_field.base_depth = %g must be in [0, %g] m",
                   h->base_depth, HFIELD_MAX_SIZE);
  }
  size_t n = h->heights ? (size_t)h->rows * h->columns : 0;
  for (size_t i = 0; i < n; i++) {
    double z = h->heights[i];
    if (!isfinite(z)) {
      return err_set(msg, ERR_INVAL, "height_field.heights[%zu] = %g is not finite", i, z);
    }
    if (fabs(z) > HFIELD_MAX_SIZE) {
      return err_set(msg, ERR_INVAL, "height_field.heights[%zu] = %g exceeds %g m in magnitude",
                     i, z, HFIELD_MAX_SIZE);
    }
    if (z < -h->base_depth) {
      return err_set(msg, ERR_INVAL, "height_field.heights[%zu] = %g is below the bottom "
                     "-base_depth = %g m", i, z, -h->base_depth);
    }
  }
  return 0;
}


// Samples on the border: 2 (rows + columns) - 4.
static uint32_t border_samples(const hfield_t* h) {
  return 2 * (h->rows + h->columns) - 4;
}


uint32_t hfield_max_vertices(const hfield_t* h) {
  return h->rows * h->columns + border_samples(h);
}


uint32_t hfield_max_triangles(const hfield_t* h) {
  return 2 * (h->rows - 1) * (h->columns - 1) + 2 * border_samples(h) + 2;
}


// The grid index of border sample k, walking around: row 0 left to right, the last column
// upwards, the last row right to left, column 0 downwards.
static uint32_t border_index(const hfield_t* h, uint32_t k) {
  uint32_t R = h->rows, C = h->columns;
  if (k < C) {
    return k;                                   // row 0, c = k
  }
  k -= C - 1;
  if (k < R) {
    return k * C + (C - 1);                     // column C - 1, r = k
  }
  k -= R - 1;
  if (k < C) {
    return (R - 1) * C + (C - 1 - k);           // row R - 1, c = C - 1 - k
  }
  k -= C - 1;
  return (R - 1 - k) * C;                       // column 0, r = R - 1 - k
}


static void tri(uint32_t* idx, uint32_t* n, uint32_t a, uint32_t b, uint32_t c) {
  idx[3 * *n] = a;
  idx[3 * *n + 1] = b;
  idx[3 * *n + 2] = c;
  (*n)++;
}


uint32_t hfield_mesh(const hfield_t* h, float* v, uint32_t* idx) {
  uint32_t R = h->rows, C = h->columns, nb = border_samples(h), grid = R * C;
  float bottom = (float)-h->base_depth;

  // the samples, then the bottom vertex under each border sample
  for (uint32_t r = 0; r < R; r++) {
    float y = (float)grid_at(r, R, h->half_y);
    for (uint32_t c = 0; c < C; c++) {
      float* p = v + 3 * ((size_t)r * C + c);
      p[0] = (float)grid_at(c, C, h->half_x);
      p[1] = y;
      p[2] = h->heights[(size_t)r * C + c];
    }
  }
  for (uint32_t k = 0; k < nb; k++) {
    const float* top = v + 3 * (size_t)border_index(h, k);
    float* p = v + 3 * ((size_t)grid + k);
    p[0] = top[0];
    p[1] = top[1];
    p[2] = bottom;
  }

  // the surface: cell (r, c) as MuJoCo's mj_rayHfield splits it, (r, c) (r+1, c+1) (r, c+1)
  // and (r, c) (r+1, c+1) (r+1, c)
  uint32_t n = 0;
  for (uint32_t r = 0; r + 1 < R; r++) {
    for (uint32_t c = 0; c + 1 < C; c++) {
      uint32_t a = r * C + c, d = (r + 1) * C + c + 1;
      tri(idx, &n, a, d, a + 1);
      tri(idx, &n, a, d, d - 1);
    }
  }

  // the walls: a quad between consecutive border samples and their bottom vertices, without
  // the triangles of zero height (a border at the bottom makes none)
  for (uint32_t k = 0; k < nb; k++) {
    uint32_t k1 = (k + 1) % nb;
    uint32_t t0 = border_index(h, k), t1 = border_index(h, k1);
    uint32_t b0 = grid + k, b1 = grid + k1;
    if (v[3 * (size_t)t1 + 2] > bottom) {
      tri(idx, &n, t0, t1, b1);
    }
    if (v[3 * (size_t)t0 + 2] > bottom) {
      tri(idx, &n, t0, b1, b0);
    }
  }

  // the bottom: the rectangle of the four corners' bottom vertices
  uint32_t c0 = grid, c1 = grid + (C - 1), c2 = grid + (C - 1) + (R - 1),
           c3 = grid + 2 * (C - 1) + (R - 1);
  tri(idx, &n, c0, c2, c1);
  tri(idx, &n, c0, c3, c2);
  return n;
}


double hfield_extent(const hfield_t* h) {
  double top = h->base_depth;
  size_t n = (size_t)h->rows * h->columns;
  for (size_t i = 0; i < n; i++) {
    top = fmax(top, fabs((double)h->heights[i]));
  }
  return sqrt(h->half_x * h->half_x + h->half_y * h->half_y + top * top);
}
