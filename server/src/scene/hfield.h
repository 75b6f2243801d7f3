// SPDX-License-Identifier: MIT
// hfield.h: a height field as the triangle mesh the scene traces. The surface over a regular
// grid, each cell split into two triangles along the diagonal from sample (r, c) to
// (r + 1, c + 1) as MuJoCo splits them, vertical walls down to a flat bottom at -base_depth
// on the four sides, and the bottom: a closed solid, seen exactly by Embree's ray/triangle
// intersection. No backend types (like prim.h).
#ifndef SENSIM_SCENE_HFIELD_H_
#define SENSIM_SCENE_HFIELD_H_

#include <stdint.h>

#include "base/err.h"

#define HFIELD_MAX_SAMPLES (1u << 22)   // rows x columns
#define HFIELD_MAX_SIZE 1e9             // m: half sizes, base depth, |height|
#define HFIELD_MIN_SIZE 1e-6            // m: half sizes

typedef struct hfield {
  uint32_t rows, columns;       // samples along y and x, each >= 2
  const float* heights;         // rows x columns, row-major: row r at y = -half_y + r dy,
                                //   column c at x = -half_x + c dx (dy = 2 half_y / (rows - 1))
  double half_x, half_y;        // m
  double base_depth;            // m, the bottom is the plane z = -base_depth
} hfield_t;

// The rules: rows and columns >= 2 with rows x columns <= HFIELD_MAX_SAMPLES, half sizes in
// [HFIELD_MIN_SIZE, HFIELD_MAX_SIZE], base depth in [0, HFIELD_MAX_SIZE], every height finite,
// at most HFIELD_MAX_SIZE in magnitude and >= -base_depth (heights NULL: the grid alone is
// checked). Returns 0, or ERR_INVAL naming the field as the protocol does
// ("height_field.heights[12] = nan is not finite").
int hfield_check(const hfield_t* h, err_msg_t* msg) CHECKRET;

// Upper bounds of the mesh's vertices and triangles (walls of zero height are left out, so
// hfield_mesh may make fewer triangles).
uint32_t hfield_max_vertices(const hfield_t* h);
uint32_t hfield_max_triangles(const hfield_t* h);

// Write the mesh of a checked height field: vertices (3 floats each, hfield_max_vertices of
// them) and indices (3 per triangle, room for hfield_max_triangles); returns the triangle
// count. Triangle t < 2 (rows - 1) (columns - 1) is the surface's: cell (r, c) = t / 2 split as
// documented above.
uint32_t hfield_mesh(const hfield_t* h, float* vertices, uint32_t* indices);

// Largest distance of the solid's points from its origin, m.
double hfield_extent(const hfield_t* h);

#endif  // SENSIM_SCENE_HFIELD_H_
