// SPDX-License-Identifier: MIT
// prim.h: exact ray intersection with the analytic primitive shapes of scene.h (box, sphere,
// capped cylinder, capsule, square plane) in their local frame, in double precision. No
// backend types: the Embree backend (geom.c) wraps these as user geometries.
#ifndef SENSIM_SCENE_PRIM_H_
#define SENSIM_SCENE_PRIM_H_

#include <stdbool.h>

#include "base/err.h"
#include "scene/scene.h"

// Smallest and largest primitive size (radius, half length, half extent, half side), m. One
// lower bound for every size: below it the curved intersections lose their precision (a
// cylinder of radius 1e-320 returned normals perpendicular to the ray).
#define PRIM_MIN_SIZE 1e-6
#define PRIM_MAX_SIZE 1e9

typedef struct prim {
  scene_prim_kind_t kind;
  double size[3];  // as scene_prim_kind_t documents, after defaults (plane and rectangle half
                   // sides > 0)
} prim_t;

// The rules of a primitive's size, in one place: each size the kind uses finite and in
// [PRIM_MIN_SIZE, PRIM_MAX_SIZE], except a capsule's half length and the half sides of a plane
// or rectangle, which may also be 0 (a sphere; unbounded); a rectangle's size[2] is its
// one-sided flag (0 or 1); unused components are ignored. Returns 0, or ERR_INVAL with a
// message naming the field as the protocol does ("cylinder.half_length").
int prim_check(scene_prim_kind_t kind, const double size[3], err_msg_t* msg) CHECKRET;

// Largest distance of a valid primitive's surface from its origin, m.
double prim_extent(scene_prim_kind_t kind, const double size[3]);

// Check kind and size (prim_check) and fill p.
int prim_init(prim_t* p, scene_prim_kind_t kind, const double size[3], err_msg_t* msg) CHECKRET;

// Axis-aligned bounds of the shape in its local frame.
void prim_bounds(const prim_t* p, double lo[3], double hi[3]);

// First point of the surface on o + t d with t in [tmin, tmax] (d need not be unit; t is in
// its parametrisation). Works from inside a solid shape (the exit point is then the hit).
// Returns true and fills *out_t and out_n (outward unit normal in the local frame) on a hit.
bool prim_intersect(const prim_t* p, const double o[3], const double d[3], double tmin,
                    double tmax, double* out_t, double out_n[3]);

#endif  // SENSIM_SCENE_PRIM_H_
