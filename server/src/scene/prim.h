// SPDX-License-Identifier: MIT
// prim.h: exact ray intersection with the analytic primitive shapes of scene.h (box, sphere,
// capped cylinder, capsule, square plane) in their local frame, in double precision. No
// backend types: scene.c wraps these as Embree user geometries.
#ifndef SENSIM_SCENE_PRIM_H_
#define SENSIM_SCENE_PRIM_H_

#include <stdbool.h>

#include "base/err.h"
#include "scene/scene.h"

// Half side used for a plane given with half_size 0 ("infinite" ground), m.

typedef struct prim {
  scene_prim_kind_t kind;
  double size[3];  // as scene_prim_kind_t documents, after defaults (plane half side > 0)
} prim_t;

// Validate kind and size and fill p. Returns 0, or ERR_INVAL naming the bad field in msg.
int prim_init(prim_t* p, scene_prim_kind_t kind, const double size[3], err_msg_t* msg) CHECKRET;

// Axis-aligned bounds of the shape in its local frame.
void prim_bounds(const prim_t* p, double lo[3], double hi[3]);

// First point of the surface on o + t d with t in [tmin, tmax] (d need not be unit; t is in
// its parametrisation). Works from inside a solid shape (the exit point is then the hit).
// Returns true and fills *out_t and out_n (outward unit normal in the local frame) on a hit.
bool prim_intersect(const prim_t* p, const double o[3], const double d[3], double tmin,
                    double tmax, double* out_t, double out_n[3]);

#endif  // SENSIM_SCENE_PRIM_H_
