// SPDX-License-Identifier: MIT
// pattern.c: what every scan pattern shares: firing groups and sweeps, ray directions and
// emission origins (see pattern.h).
#include "lidar/pattern.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"


void lidar_pattern_close(lidar_pattern_t* p) {
  if (!p) {
    return;
  }
  mem_free(p->elevation);
  mem_free(p->azimuth);
  mem_free(p->time_offset);
  mem_free(p->ring);
  mem_free(p->vertical_offset);
  mem_free(p->trig);
  mem_free(p->rotor);
  memset(p, 0, sizeof *p);
}


int lidar_pattern_alloc(lidar_pattern_t* p, uint32_t nray, int with_vertical_offset,
                        const char* prefix, err_msg_t* msg) {
  memset(p, 0, sizeof *p);
  if (nray == 0 || nray > LIDAR_PATTERN_MAX_GROUP) {
    return err_set(msg, ERR_LIMIT, "%s: %u rays per firing group is outside [1, %u]", prefix,
                   nray, LIDAR_PATTERN_MAX_GROUP);
  }
  p->nray = nray;
  p->elevation = mem_calloc(nray, sizeof *p->elevation);
  p->azimuth = mem_calloc(nray, sizeof *p->azimuth);
  p->time_offset = mem_calloc(nray, sizeof *p->time_offset);
  p->ring = mem_calloc(nray, sizeof *p->ring);
  if (with_vertical_offset) {
    p->vertical_offset = mem_calloc(nray, sizeof *p->vertical_offset);
  }
  if (!p->elevation || !p->azimuth || !p->time_offset || !p->ring ||
      (with_vertical_offset && !p->vertical_offset)) {
    lidar_pattern_close(p);
    return err_set(msg, ERR_NOMEM, "%s: out of memory for %u rays", prefix, nray);
  }
  return 0;
}


int lidar_pattern_check_finite(double v, const char* prefix, const char* field, err_msg_t* msg) {
  if (!isfinite(v)) {
    return err_set(msg, ERR_INVAL, "%s.%s = %g is not finite", prefix, field, v);
  }
  return 0;
}


int lidar_pattern_check_azimuth(double v, const char* prefix, const char* field,
                                err_msg_t* msg) {
  if (!(fabs(v) <= LIDAR_PATTERN_MAX_AZIMUTH)) {
    return err_set(msg, ERR_INVAL, "%s.%s = %g is outside [-2 pi, 2 pi] rad", prefix, field, v);
  }
  return 0;
}


int lidar_pattern_check_rate(double v, double max, const char* prefix, const char* field,
                             err_msg_t* msg) {
  if (!(v >= LIDAR_PATTERN_MIN_RATE && v <= max)) {
    return err_set(msg, ERR_INVAL, "%s.%s = %g must be in [%g, %g] Hz", prefix, field, v,
                   LIDAR_PATTERN_MIN_RATE, max);
  }
  return 0;
}


int lidar_pattern_check_ray_rate(double rate, double rays, const char* prefix,
                                 const char* rate_field, const char* rays_fields,
                                 err_msg_t* msg) {
  if (!(rays * rate <= LIDAR_PATTERN_MAX_RAY_RATE)) {
    return err_set(msg, ERR_INVAL, "%s.%s x %s.%s = %g Hz x %.0f rays = %.4g rays per second, "
                   "more than %g", prefix, rate_field, prefix, rays_fields, rate, rays,
                   rays * rate, LIDAR_PATTERN_MAX_RAY_RATE);
  }
  return 0;
}


//---------------- Sweeps

// Groups and sweeps are counted below 2^62 (sweep.c bounds the cursor there).
#define GROUP_LIMIT 4611686018427387904.0


uint64_t lidar_pattern_sweep_of(const lidar_pattern_t* p, uint64_t g) {
  if (p->groups_per_sweep) {
    return g / p->groups_per_sweep;
  }
  double s = floor((double)g * p->group_period / p->sweep_period);
  return s < GROUP_LIMIT ? (uint64_t)s : (uint64_t)GROUP_LIMIT;
}


uint64_t lidar_pattern_first_group(const lidar_pattern_t* p, uint64_t sweep) {
  if (p->groups_per_sweep) {
    return sweep * p->groups_per_sweep;
  }

  // the estimate is within a group of the answer; settle it with sweep_of itself so that the
  // two functions agree exactly whatever the rounding (a few steps; should the estimate ever be
  // further off, a bisection on the non-decreasing sweep_of keeps the search bounded)
  double est = ceil((double)sweep * p->sweep_period / p->group_period);
  uint64_t g = est > 0.0 ? (est < GROUP_LIMIT ? (uint64_t)est : (uint64_t)GROUP_LIMIT) : 0;
  for (int i = 0; i < 4; i++) {
    if (g > 0 && lidar_pattern_sweep_of(p, g - 1) >= sweep) {
      g--;
    } else if (lidar_pattern_sweep_of(p, g) < sweep && g < (uint64_t)GROUP_LIMIT) {
      g++;
    } else {
      return g;
    }
  }
  uint64_t lo = 0, hi = (uint64_t)GROUP_LIMIT;   // the first g with sweep_of(g) >= sweep
  while (lo < hi) {
    uint64_t mid = lo + (hi - lo) / 2;
    if (lidar_pattern_sweep_of(p, mid) >= sweep) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo;
}


double lidar_pattern_sweep_start(const lidar_pattern_t* p, uint64_t sweep) {
  return (double)sweep * p->sweep_period;
}


double lidar_pattern_time(const lidar_pattern_t* p, uint64_t g, uint32_t k) {
  return (double)g * p->group_period + p->time_offset[k];
}


double lidar_pattern_rate(const lidar_pattern_t* p) {
  return (double)p->nray / p->group_period;
}


double lidar_pattern_origin_reach(const lidar_pattern_t* p) {
  // the vertical offset o moves the origin by |o| (along a unit vector), the beam origin by
  // its radius (lidar_pattern_rays)
  double vo = 0.0;
  for (uint32_t k = 0; p->vertical_offset && k < p->nray; k++) {
    vo = fmax(vo, fabs(p->vertical_offset[k]));
  }
  return vo + p->beam_origin_radius;
}


//---------------- Rings by elevation

typedef struct chan_key {
  uint32_t ring;
  uint32_t k;
  double elevation;             // of the channel, once its rays are gathered
} chan_key_t;


static int by_ring(const void* a, const void* b) {
  const chan_key_t* x = a;
  const chan_key_t* y = b;
  if (x->ring != y->ring) {
    return x->ring < y->ring ? -1 : 1;
  }
  return x->k < y->k ? -1 : (x->k > y->k);
}


static int by_elevation(const void* a, const void* b) {
  const chan_key_t* x = a;
  const chan_key_t* y = b;
  if (x->elevation != y->elevation) {
    return x->elevation < y->elevation ? -1 : 1;
  }
  return x->ring < y->ring ? -1 : (x->ring > y->ring);
}


int lidar_pattern_elevation_rings(const lidar_pattern_t* p, uint32_t* out, err_msg_t* msg) {
  // the rays by channel, then one key per channel at its rays' mean elevation
  uint32_t n = p->nray;
  chan_key_t* key = mem_alloc((size_t)n * sizeof *key);
  chan_key_t* chan = mem_alloc((size_t)n * sizeof *chan);
  if (!key || !chan) {
    mem_free(key);
    mem_free(chan);
    return err_set(msg, ERR_NOMEM, "lidar: out of memory for the rings of %u rays", n);
  }
  for (uint32_t k = 0; k < n; k++) {
    key[k] = (chan_key_t){.ring = p->ring[k], .k = k};
  }
  qsort(key, n, sizeof *key, by_ring);
  uint32_t nchan = 0;
  for (uint32_t a = 0, b; a < n; a = b) {
    double sum = 0.0;
    for (b = a; b < n && key[b].ring == key[a].ring; b++) {
      sum += p->elevation[key[b].k];
    }
    chan[nchan++] = (chan_key_t){.ring = key[a].ring, .elevation = sum / (double)(b - a)};
  }

  // ranks from the lowest channel up; each ray takes its channel's (both lists are in channel
  // order once the channels are numbered by rank)
  qsort(chan, nchan, sizeof *chan, by_elevation);
  for (uint32_t r = 0; r < nchan; r++) {
    chan[r].k = r;
  }
  qsort(chan, nchan, sizeof *chan, by_ring);
  for (uint32_t a = 0, c = 0; a < n; a++) {
    if (a > 0 && key[a].ring != key[a - 1].ring) {
      c++;
    }
    out[key[a].k] = chan[c].k;
  }
  mem_free(key);
  mem_free(chan);
  return 0;
}


//---------------- Rays

// Angle in (-pi, pi].
static double wrap_angle(double a) {
  double r = remainder(a, 2.0 * M_PI);
  return r <= -M_PI ? r + 2.0 * M_PI : r;
}


// The rotor at tau s after the start of its sweep: its cos, sin and azimuth wrapped to
// (-pi, pi] (LIDAR_ROTOR_N values).
static void rotor_of(const lidar_pattern_t* p, double tau, double out[LIDAR_ROTOR_N]) {
  double rotor = p->start_azimuth + p->spin_rate * tau;
  out[0] = cos(rotor);
  out[1] = sin(rotor);
  out[2] = wrap_angle(rotor);
}


// Direction of the Risley-prism rosette at time t (s after t_s): the sum of two rotating
// deflections, read as a polar angle off the +x boresight.
static void livox_angles(const lidar_pattern_t* p, double t, double* az, double* el, double d[3]) {
  double dy = 0.0, dz = 0.0;
  for (int i = 0; i < 2; i++) {
    // the phase from the fractional turns keeps its precision over long runs
    double turns = p->prism_rate[i] * t;
    double ph = 2.0 * M_PI * (turns - floor(turns));
    dy += p->prism_amplitude[i] * cos(ph);
    dz += p->prism_amplitude[i] * sin(ph);
  }
  double theta = hypot(dy, dz);
  double psi = atan2(dz, dy);
  d[0] = cos(theta);
  d[1] = sin(theta) * cos(psi);
  d[2] = sin(theta) * sin(psi);
  *az = atan2(d[1], d[0]);
  *el = atan2(d[2], hypot(d[0], d[1]));
}


// Rays of the longest sweep of p.
static double sweep_rays(const lidar_pattern_t* p) {
  if (p->groups_per_sweep) {
    return (double)p->groups_per_sweep * p->nray;
  }
  return (floor(p->sweep_period / p->group_period) + 1.0) * p->nray;
}


int lidar_pattern_prepare(lidar_pattern_t* p, const char* prefix, err_msg_t* msg) {
  // the bounds every pattern keeps (pattern.h); a model's own checks name its fields first
  double rate = lidar_pattern_rate(p);
  if (!(p->group_period > 0.0) || !(p->sweep_period * LIDAR_PATTERN_MIN_RATE <= 1.0 + 1e-9) ||
      !(p->sweep_period >= p->group_period) || !(rate <= LIDAR_PATTERN_MAX_RAY_RATE) ||
      !(sweep_rays(p) <= LIDAR_PATTERN_MAX_SWEEP_RAYS)) {
    double period = p->sweep_period;
    double rays = sweep_rays(p);
    lidar_pattern_close(p);
    return err_set(msg, ERR_INVAL, "%s: a sweep of %g s and %.4g rays at %.4g rays per second "
                   "is outside the bounds of a pattern (at most %g s, %g rays and %g rays per "
                   "second)", prefix, period, rays, rate, 1.0 / LIDAR_PATTERN_MIN_RATE,
                   LIDAR_PATTERN_MAX_SWEEP_RAYS, LIDAR_PATTERN_MAX_RAY_RATE);
  }

  p->trig = mem_alloc((size_t)p->nray * LIDAR_TRIG_N * sizeof *p->trig);
  if (!p->trig) {
    lidar_pattern_close(p);
    return err_set(msg, ERR_NOMEM, "%s: out of memory for %u rays", prefix, p->nray);
  }
  for (uint32_t k = 0; k < p->nray; k++) {
    double* t = &p->trig[(size_t)k * LIDAR_TRIG_N];
    double dt = p->spin_rate * p->time_offset[k];
    double off = p->azimuth[k] + dt;
    t[LIDAR_TRIG_CE] = cos(p->elevation[k]);
    t[LIDAR_TRIG_SE] = sin(p->elevation[k]);
    t[LIDAR_TRIG_COFF] = cos(off);
    t[LIDAR_TRIG_SOFF] = sin(off);
    t[LIDAR_TRIG_CDT] = cos(dt);
    t[LIDAR_TRIG_SDT] = sin(dt);
    t[LIDAR_TRIG_OFF] = wrap_angle(off);
  }

  // the rotor of each group of a sweep (rotor_of's arithmetic: the same values)
  if (p->groups_per_sweep > 0 && p->groups_per_sweep <= LIDAR_PATTERN_ROTOR_TABLE) {
    p->rotor = mem_alloc(p->groups_per_sweep * LIDAR_ROTOR_N * sizeof *p->rotor);
    if (!p->rotor) {
      lidar_pattern_close(p);
      return err_set(msg, ERR_NOMEM, "%s: out of memory for %llu groups", prefix,
                     (unsigned long long)p->groups_per_sweep);
    }
    for (uint64_t j = 0; j < p->groups_per_sweep; j++) {
      rotor_of(p, (double)j * p->group_period, &p->rotor[j * LIDAR_ROTOR_N]);
    }
  }
  return 0;
}


void lidar_pattern_group(const lidar_pattern_t* p, uint64_t g, lidar_pattern_group_t* out) {
  // the offset inside the sweep comes from the group difference, so it keeps full precision
  // however long the lidar has run
  out->sweep = lidar_pattern_sweep_of(p, g);
  out->first = lidar_pattern_first_group(p, out->sweep);
  out->t_group = (double)g * p->group_period;
  out->tau_group = p->groups_per_sweep ? (double)(g - out->first) * p->group_period
                                       : out->t_group - (double)out->sweep * p->sweep_period;
  double r[LIDAR_ROTOR_N];
  const double* t = r;
  if (p->rotor) {
    t = &p->rotor[(g - out->first) * LIDAR_ROTOR_N];   // groups_per_sweep > 0
  } else {
    rotor_of(p, out->tau_group, r);
  }
  out->cr = t[0];
  out->sr = t[1];
  out->rw = t[2];
}


// lidar_pattern_rays; without `full`, only each ray's time, index, origin and direction.
static inline void pattern_rays(const lidar_pattern_t* p, uint64_t g, uint32_t k, size_t n,
                                lidar_pattern_ray_t* out, int full) {
  // the tables and constants in locals: the stores into out (doubles) could otherwise change
  // them for the compiler, which then reloads each at every ray
  const uint32_t nray = p->nray;
  const double* const trig = p->trig;
  const double* const time_offset = p->time_offset;
  const double* const vertical_offset = p->vertical_offset;
  const int has_vo = vertical_offset != NULL;
  const double radius = p->beam_origin_radius;
  const int livox = p->kind == LIDAR_PATTERN_LIVOX;
  size_t i = 0;
  while (i < n) {
    lidar_pattern_group_t gr;
    lidar_pattern_group(p, g, &gr);
    for (; k < nray && i < n; k++, i++) {
      lidar_pattern_ray_t* r = &out[i];
      const double* t = &trig[(size_t)k * LIDAR_TRIG_N];
      r->index = (g - gr.first) * nray + k;
      r->time = gr.t_group + time_offset[k];
      if (full) {
        r->sweep = gr.sweep;
        r->time_offset = gr.tau_group + time_offset[k];
        r->ring = p->ring[k];
      }
      if (livox) {
        r->origin[0] = r->origin[1] = r->origin[2] = 0.0;
        livox_angles(p, r->time, &r->azimuth, &r->elevation, r->dir);
        continue;
      }
      if (full) {
        double az = gr.rw + t[LIDAR_TRIG_OFF];
        r->azimuth = az > M_PI ? az - 2.0 * M_PI : (az <= -M_PI ? az + 2.0 * M_PI : az);
        r->elevation = p->elevation[k];
      }
      lidar_pattern_aim(gr.cr, gr.sr, t[LIDAR_TRIG_CE], t[LIDAR_TRIG_SE], t[LIDAR_TRIG_COFF],
                        t[LIDAR_TRIG_SOFF], t[LIDAR_TRIG_CDT], t[LIDAR_TRIG_SDT],
                        has_vo ? vertical_offset[k] : 0.0, has_vo, radius, radius > 0.0, r->dir,
                        r->origin);
    }
    k = 0;
    g++;
  }
}


void lidar_pattern_rays(const lidar_pattern_t* p, uint64_t g, uint32_t k, size_t n,
                        lidar_pattern_ray_t* out) {
  pattern_rays(p, g, k, n, out, 1);
}


void lidar_pattern_rays_lean(const lidar_pattern_t* p, uint64_t g, uint32_t k, size_t n,
                             lidar_pattern_ray_t* out) {
  pattern_rays(p, g, k, n, out, 0);
}


void lidar_pattern_ray(const lidar_pattern_t* p, uint64_t g, uint32_t k, lidar_pattern_ray_t* out) {
  lidar_pattern_rays(p, g, k, 1, out);
}


//---------------- Firing order

typedef struct order_key {
  double t;
  uint32_t ring;
  uint32_t i;
} order_key_t;


static int order_cmp(const void* a, const void* b) {
  const order_key_t* x = a;
  const order_key_t* y = b;
  if (x->t != y->t) {
    return x->t < y->t ? -1 : 1;
  }
  if (x->ring != y->ring) {
    return x->ring < y->ring ? -1 : 1;
  }
  return x->i < y->i ? -1 : (x->i > y->i);
}


int lidar_pattern_sort(lidar_pattern_t* p, const char* prefix, err_msg_t* msg) {
  // rays of a group in firing order: increasing time, then channel, then as given
  uint32_t n = p->nray;
  order_key_t* key = mem_alloc((size_t)n * sizeof *key);
  double* tmp = mem_alloc((size_t)n * sizeof *tmp);
  uint32_t* rtmp = mem_alloc((size_t)n * sizeof *rtmp);
  if (!key || !tmp || !rtmp) {
    mem_free(key);
    mem_free(tmp);
    mem_free(rtmp);
    return err_set(msg, ERR_NOMEM, "%s: out of memory for %u rays", prefix, n);
  }
  for (uint32_t i = 0; i < n; i++) {
    key[i] = (order_key_t){.t = p->time_offset[i], .ring = p->ring[i], .i = i};
  }
  qsort(key, n, sizeof *key, order_cmp);

  // permute every table
  double* tables[] = {p->elevation, p->azimuth, p->time_offset, p->vertical_offset};
  for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++) {
    if (!tables[t]) {
      continue;
    }
    for (uint32_t i = 0; i < n; i++) {
      tmp[i] = tables[t][key[i].i];
    }
    memcpy(tables[t], tmp, (size_t)n * sizeof *tmp);
  }
  for (uint32_t i = 0; i < n; i++) {
    rtmp[i] = p->ring[key[i].i];
  }
  memcpy(p->ring, rtmp, (size_t)n * sizeof *rtmp);
  mem_free(key);
  mem_free(tmp);
  mem_free(rtmp);
  return 0;
}
