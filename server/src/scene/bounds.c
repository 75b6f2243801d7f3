// SPDX-License-Identifier: MIT
// bounds.c: world bounds of the committed instances over the step (the static meshes' parts,
// each primitive, each moving object along its path), from which scene_horizon builds the
// horizon of a region of ray origins.
#include <math.h>
#include <stdbool.h>

#include "base/mem.h"
#include "scene/embree.h"
#include "scene/horizon.h"

// The world box of object-space box b under the row-major 3 x 4 matrix m.
static void box_transform(const double* b, const double* m, double* out) {
  for (int a = 0; a < 3; a++) {
    double c = m[4 * a + 3], e = 0.0;
    for (int j = 0; j < 3; j++) {
      c += m[4 * a + j] * 0.5 * (b[j] + b[3 + j]);
      e += fabs(m[4 * a + j]) * 0.5 * (b[3 + j] - b[j]);
    }
    out[a] = c - e;
    out[3 + a] = c + e;
  }
}


// Room for one more box in *arr; NULL when out of memory.
static double* box_push(horizon_box_t** arr, size_t* n, size_t* cap) {
  if (*n == *cap) {
    size_t c = *cap ? 2 * *cap : 256;
    horizon_box_t* t = mem_realloc(*arr, c * sizeof *t);
    if (!t) {
      return NULL;
    }
    *arr = t;
    *cap = c;
  }
  return (*arr)[(*n)++];
}


// The world box that holds a moving instance over the whole step: its box at both ends (it
// moves without turning: a box sliding along a line stays within their union), or (turning)
// its origin's path widened by the farthest any of its points can be from it.
static void moving_box(const scene_t* s, const inst_t* in, double* out) {
  const double* b = s->geoms[in->geometry]->bounds;
  if (!in->turning) {
    double e[6];
    box_transform(b, in->world0, out);
    box_transform(b, in->world, e);
    for (int a = 0; a < 3; a++) {
      out[a] = fmin(out[a], e[a]);
      out[3 + a] = fmax(out[3 + a], e[3 + a]);
    }
    return;
  }
  double r2 = 0.0;
  for (int a = 0; a < 3; a++) {
    double x = fmax(fabs(b[a]), fabs(b[3 + a])) * fabs(in->scale[a]);
    r2 += x * x;
  }
  double r = in->shift_len + sqrt(r2);
  for (int a = 0; a < 3; a++) {
    out[a] = fmin(in->t0[a], in->t1[a]) - r;
    out[3 + a] = fmax(in->t0[a], in->t1[a]) + r;
  }
}


// The world boxes of the committed instances: the static ones' parts when one changed, the
// moving ones always.
void bounds_update(scene_t* s) {
  bool ok = true;
  if (s->still_dirty || !s->boxes_ok) {
    s->nstill = 0;
    for (int h = 0; h < s->ninst && ok; h++) {
      const inst_t* in = &s->insts[h];
      const geom_t* g = inst_valid(s, h) && !in->moving ? s->geoms[in->geometry] : NULL;
      for (uint32_t p = 0; g && p < g->nparts && ok; p++) {
        double* out = box_push(&s->still_boxes, &s->nstill, &s->cap_still);
        ok = out != NULL;
        if (ok) {
          box_transform(g->parts[p], in->world, out);
        }
      }
    }
    s->still_dirty = false;
  }
  s->nmoving = 0;
  for (int h = 0; h < s->ninst && ok; h++) {
    if (inst_valid(s, h) && s->insts[h].moving) {
      double* out = box_push(&s->moving_boxes, &s->nmoving, &s->cap_moving);
      ok = out != NULL;
      if (ok) {
        moving_box(s, &s->insts[h], out);
      }
    }
  }
  s->boxes_ok = ok;
}


size_t scene_horizon_boxes(const scene_t* s) {
  return s->nstill + s->nmoving;
}


void scene_horizon(const scene_t* s, const double lo[3], const double hi[3],
                   scene_horizon_t* out) {
  if (s->boxes_ok) {
    horizon_build((const horizon_box_t*)s->still_boxes, s->nstill,
                  (const horizon_box_t*)s->moving_boxes, s->nmoving, lo, hi, out);
    return;
  }
  horizon_build(NULL, 0, NULL, 0, lo, hi, out);
  for (unsigned i = 0; i < HORIZON_BINS; i++) {
    out->sin_el[i] = 1.0;   // nothing is culled
  }
  out->sin_low = 1.0;
}

