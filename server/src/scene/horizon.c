// SPDX-License-Identifier: MIT
// horizon.c: the elevation horizon of a set of boxes (see horizon.h).
#include "scene/horizon.h"

// Bins per coarse cell of the build (a box that spans many bins raises whole cells).
#define CELL 32u
#define NCELL (HORIZON_BINS / CELL)

// Padding of every box, m: a centimetre, and a millionth of its coordinates (float rounding of
// the traced rays and geometry is below a ten-millionth).
#define PAD_ABS 0.01
#define PAD_REL 1e-6

typedef struct build {
  double fine[HORIZON_BINS];
  double cell[NCELL];
} build_t;


// Raise bins [lo, hi] (0 <= lo <= hi < HORIZON_BINS) to at least v.
static void raise_run(build_t* b, unsigned lo, unsigned hi, double v) {
  while (lo <= hi) {
    if (lo % CELL == 0 && lo + CELL - 1 <= hi) {
      double* c = &b->cell[lo / CELL];
      *c = *c > v ? *c : v;
      lo += CELL;
    } else {
      b->fine[lo] = b->fine[lo] > v ? b->fine[lo] : v;
      lo++;
    }
  }
}


// Raise bins first .. last (first <= last, any integers: taken around the circle) to v.
static void raise_bins(build_t* b, long first, long last, double v) {
  const long n = (long)HORIZON_BINS;
  if (last - first + 1 >= n) {
    raise_run(b, 0, HORIZON_BINS - 1, v);
    return;
  }
  long lo = ((first % n) + n) % n, hi = lo + (last - first);
  if (hi < n) {
    raise_run(b, (unsigned)lo, (unsigned)hi, v);
  } else {
    raise_run(b, (unsigned)lo, HORIZON_BINS - 1, v);
    raise_run(b, 0, (unsigned)(hi - n), v);
  }
}


// One box seen from the cylinder of axis (c[0], c[1]), radius r and bottom zlo.
static void add_box(build_t* b, const double* box, const double c[2], double r, double zlo) {
  double lo[3], hi[3];
  for (int a = 0; a < 3; a++) {
    double m = fmax(fmax(fabs(box[a]), fabs(box[3 + a])), fabs(a < 2 ? c[a] : zlo));
    double pad = PAD_ABS + PAD_REL * m;
    lo[a] = box[a] - pad;
    hi[a] = box[3 + a] + pad;
  }

  // horizontal distances from the centre's column to the footprint, nearest and farthest
  double dxn = fmax(fmax(lo[0] - c[0], c[0] - hi[0]), 0.0);
  double dyn = fmax(fmax(lo[1] - c[1], c[1] - hi[1]), 0.0);
  double dmin = hypot(dxn, dyn);
  double dmax = hypot(fmax(fabs(lo[0] - c[0]), fabs(hi[0] - c[0])),
                      fmax(fabs(lo[1] - c[1]), fabs(hi[1] - c[1])));

  // the highest elevation from any origin: the top over the lowest origin, nearest (above
  // it) or farthest (below it)
  double zt = hi[2] - zlo;
  double near = dmin - r;
  double s;
  if (zt >= 0.0) {
    s = near > 0.0 ? zt / hypot(zt, near) : 1.0;
  } else {
    s = zt / hypot(zt, dmax + r);
  }
  if (!(s < 1.0)) {
    s = 1.0;   // also NaN (a non-finite box): nothing is culled
  }
  if (!(near > 0.0) || !isfinite(dmin)) {
    raise_bins(b, 0, HORIZON_BINS - 1, s);   // over the column of origins: every azimuth
    return;
  }

  // the footprint's azimuths: between its extreme corners, widened by what an origin off the
  // centre adds (an angle of asin(r / dmin), no more in diamond units: the diamond angle
  // rises at most as fast as the angle), and a bin either side
  double a0 = horizon_diamond(0.5 * (lo[0] + hi[0]) - c[0], 0.5 * (lo[1] + hi[1]) - c[1]);
  double dlo = 0.0, dhi = 0.0;
  for (int k = 0; k < 4; k++) {
    double x = (k & 1 ? hi[0] : lo[0]) - c[0], y = (k & 2 ? hi[1] : lo[1]) - c[1];
    double d = horizon_diamond(x, y) - a0;
    d = d > 2.0 ? d - 4.0 : (d <= -2.0 ? d + 4.0 : d);
    dlo = d < dlo ? d : dlo;
    dhi = d > dhi ? d : dhi;
  }
  double w = asin(fmin(r / dmin, 1.0));
  double scale = HORIZON_BINS / 4.0;
  long first = (long)floor((a0 + dlo - w) * scale) - 1;
  long last = (long)floor((a0 + dhi + w) * scale) + 1;
  raise_bins(b, first, last, s);
}


void horizon_build(const horizon_box_t* a, size_t na, const horizon_box_t* bx, size_t nb,
                   const double lo[3], const double hi[3], scene_horizon_t* out) {
  double center[2] = {0.5 * (lo[0] + hi[0]), 0.5 * (lo[1] + hi[1])};
  double radius = 0.5 * hypot(hi[0] - lo[0], hi[1] - lo[1]);
  build_t b;
  for (unsigned i = 0; i < HORIZON_BINS; i++) {
    b.fine[i] = -1.0;
  }
  for (unsigned i = 0; i < NCELL; i++) {
    b.cell[i] = -1.0;
  }
  for (size_t i = 0; i < na; i++) {
    add_box(&b, a[i], center, radius, lo[2]);
  }
  for (size_t i = 0; i < nb; i++) {
    add_box(&b, bx[i], center, radius, lo[2]);
  }
  out->center[0] = center[0];
  out->center[1] = center[1];
  out->radius = radius;
  out->zlo = lo[2];
  out->sin_low = 1.0;
  for (unsigned i = 0; i < HORIZON_BINS; i++) {
    double c = b.cell[i / CELL];
    out->sin_el[i] = b.fine[i] > c ? b.fine[i] : c;
    out->sin_low = out->sin_el[i] < out->sin_low ? out->sin_el[i] : out->sin_low;
  }
}
