// SPDX-License-Identifier: MIT
// returns.c: the lidar raytrace process (AGX Sensor technical description, section 2.1;
// docs/models/lidar.md): a binary heap of ray segments per primary ray, return candidates from
// surfaces and media, and the return modes.
//
// A heap node is one straight segment and the interface that ends it: node i starts at optical
// path length (OPL) X0 with weight W in a medium (alpha, n); it ends after geometric length L
// (to the hit, or to the remaining range) and OPL dX = n L. Candidates:
//   surface     I = W tau(dX) rho_bs BD(X0 + dX)        at X0 + dX
//   atmosphere  I = W tau(xa) rho_atm BD(X0 + xa)       at X0 + xa, xa sampled per segment
// A surface hit spawns a reflection child 2i+1 with weight W tau w_R (w_R = 0 for Lambertian
// surfaces); the boundary of a volume filled with another medium spawns a reflection child and
// a refracted transmission child 2i+2 with the Fresnel R and T of the two media and no surface
// return. With round-trip attenuation tau and the interface weights are squared (the light
// comes back the same way); BD never is.
//
// Each formula lives in one function (surface_return_tau, atmosphere_return, the interface weights
// of eval_node); the depth-1 paths (packets of columns, and a fast path for rays with no
// atmospheric candidate) call the same ones, so their returns equal the heap's bit for bit.
//
// Volumes: a ray starts in the view's ambient medium; crossing the boundary of an object that
// has a medium enters it, crossing the boundary of the volume the segment is in leaves it (back
// to the medium it was entered from). Volumes may nest; a lidar placed inside a volume is
// taken to be in the ambient medium.
#include "lidar/returns.h"

#include <math.h>
#include <string.h>

#include "base/simd.h"
#include "material/atmosphere.h"
#include "material/brdf.h"

#define BATCH_RAYS 64          // primary rays traced per scene_trace call
#define RAYS_PER_TRACE_MAX 512 // primary rays per scene_trace call of the packets of columns
#define MAX_NODES ((1u << LIDAR_MAX_DEPTH) - 1u)
#define MAX_CANDIDATES (2u * MAX_NODES)
#define NODE_BUDGET 256        // heap nodes of one chunk of rays (>= MAX_NODES)
#define NO_NODE 0xffffu
_Static_assert(NODE_BUDGET >= MAX_NODES, "a chunk holds the heap of at least one ray");

// Offset of a secondary segment's origin from the hit, along the normal: 1e-6 m, grown with the
// magnitude of the coordinates so that it stays above the single-precision resolution of the
// backend's hit points far from the origin. The offset's component along the new segment is
// added back to its traced length, so optical path lengths do not shrink at each interface.
#define SELF_HIT_OFFSET 1e-6
#define SELF_HIT_RELATIVE 4e-7


//---------------- configuration

int lidar_returns_init(lidar_returns_t* p, const lidar_returns_desc_t* d, err_msg_t* msg) {
  lidar_returns_t r;
  memset(&r, 0, sizeof r);

  // heap depth and return mode
  r.depth = d->depth == 0 ? 1 : d->depth;
  if (r.depth > LIDAR_MAX_DEPTH) {
    return err_set(msg, ERR_INVAL, "lidar.raytrace_depth = %u is outside [1, %u]",
                   (unsigned)d->depth, (unsigned)LIDAR_MAX_DEPTH);
  }
  r.max_candidates = 2u * ((1u << r.depth) - 1u);
  switch (d->mode) {
    case LIDAR_RETURN_STRONGEST:
    case LIDAR_RETURN_FIRST:
    case LIDAR_RETURN_LAST:
      r.max_returns = 1;
      break;
    case LIDAR_RETURN_DUAL:
      r.max_returns = 2;
      break;
    case LIDAR_RETURN_ALL:
      if (d->max_returns > LIDAR_MAX_RETURNS) {
        return err_set(msg, ERR_INVAL, "lidar.max_returns = %u is outside [1, %u]",
                       (unsigned)d->max_returns, (unsigned)LIDAR_MAX_RETURNS);
      }
      r.max_returns = d->max_returns != 0 ? d->max_returns : r.max_candidates;
      if (r.max_returns > LIDAR_MAX_RETURNS) {
        r.max_returns = LIDAR_MAX_RETURNS;
      }
      break;
    default:
      return err_set(msg, ERR_INVAL,
                     "lidar.return_mode = %d is not STRONGEST (0), FIRST (1), LAST (2), DUAL (3) "
                     "or ALL (4)",
                     (int)d->mode);
  }
  r.mode = d->mode;

  // detection threshold and ranges
  if (!isfinite(d->intensity_threshold) || !(d->intensity_threshold >= 0.0)) {
    return err_set(msg, ERR_INVAL, "lidar.intensity_threshold = %g must be finite and >= 0",
                   d->intensity_threshold);
  }
  if (!isfinite(d->range_min) || !(d->range_min >= 0.0)) {
    return err_set(msg, ERR_INVAL, "lidar.range_min = %g must be finite and >= 0", d->range_min);
  }
  if (isnan(d->range_max) || !(d->range_max > d->range_min)) {
    return err_set(msg, ERR_INVAL, "lidar.range_max = %g must be > lidar.range_min = %g",
                   d->range_max, d->range_min);
  }
  r.intensity_threshold = d->intensity_threshold;
  r.range_min = d->range_min;
  r.range_max = d->range_max;
  r.round_trip = d->round_trip ? 1 : 0;

  // beam divergence and distance noise
  int rc;
  if ((rc = lidar_divergence_init(&r.beam, &d->beam, "lidar.beam", msg)) < 0 ||
      (rc = lidar_noise_distance_init(&r.distance_noise, &d->distance_noise,
                                      "lidar.distance_noise", msg)) < 0) {
    return rc;
  }
  *p = r;
  return 0;
}


uint32_t lidar_returns_max(const lidar_returns_t* p) {
  return p->max_returns;
}


//---------------- selection

// Candidate order: OPL, then heap node, then the surface before the atmosphere.
static int cand_before(const lidar_candidate_t* a, const lidar_candidate_t* b) {
  if (a->distance != b->distance) {
    return a->distance < b->distance;
  }
  if (a->node != b->node) {
    return a->node < b->node;
  }
  return a->atmospheric < b->atmospheric;
}


// Index of the strongest candidate of c (sorted), skipping `skip` (or none when skip >= n):
// ties go to the earlier one, i.e. the smaller OPL, then the smaller node.
static uint32_t strongest(const lidar_candidate_t* c, uint32_t n, uint32_t skip) {
  uint32_t best = n;
  for (uint32_t i = 0; i < n; i++) {
    if (i != skip && (best == n || c[i].intensity > c[best].intensity)) {
      best = i;
    }
  }
  return best;
}


// Write one return (the only place a lidar_return_t is filled).
static inline void put_return(lidar_return_t* o, double x, double intensity, double nx, double ny,
                              double nz, uint32_t object_id, uint32_t label, uint32_t index,
                              uint32_t count, uint8_t atmospheric) {
  o->distance = x;
  o->intensity = intensity;
  o->normal[0] = nx;
  o->normal[1] = ny;
  o->normal[2] = nz;
  o->object_id = object_id;
  o->label = label;
  o->index = (uint16_t)index;
  o->count = (uint16_t)count;
  o->atmospheric = atmospheric;
}


// Report candidate i of the n selected ones.
static inline void emit(const lidar_candidate_t* c, uint32_t i, uint32_t n, lidar_return_t* out) {
  put_return(out, c[i].distance, c[i].intensity, c[i].normal[0], c[i].normal[1], c[i].normal[2],
             c[i].object_id, c[i].label, i, n, c[i].atmospheric);
}


// Whether a segment's hit is a surface within its length tmax (object 0: a miss).
static inline int hit_in_range(uint32_t object_id, double distance, double tmax) {
  return object_id != 0 && distance <= tmax;
}


// Whether a return at OPL x with intensity i passes the range and the detection threshold.
static inline int detectable(const lidar_returns_t* p, double x, double i) {
  return x >= p->range_min && x <= p->range_max && i > p->intensity_threshold;
}


// Whether candidate c passes the range and the detection threshold.
static inline int detected(const lidar_returns_t* p, const lidar_candidate_t* c) {
  return detectable(p, c->distance, c->intensity);
}


// lidar_returns_select of one candidate (the common case): every mode reports it. Inline for
// the depth-1 path, where nearly every ray has one.
static inline uint32_t select_one(const lidar_returns_t* p, const lidar_candidate_t* c,
                                  lidar_return_t* out) {
  if (!detected(p, c)) {
    return 0;
  }
  emit(c, 0, 1, out);
  return 1;
}


uint32_t lidar_returns_select(const lidar_returns_t* p, lidar_candidate_t* c, uint32_t nc,
                              lidar_return_t* out) {
  if (nc == 1) {
    return select_one(p, c, out);
  }

  // range and detection threshold
  uint32_t n = 0;
  for (uint32_t i = 0; i < nc; i++) {
    if (detected(p, &c[i])) {
      c[n++] = c[i];
    }
  }
  if (n == 0) {
    return 0;
  }

  // OPL order (insertion sort: a handful of candidates per ray)
  for (uint32_t i = 1; i < n; i++) {
    lidar_candidate_t t = c[i];
    uint32_t j = i;
    while (j > 0 && cand_before(&t, &c[j - 1])) {
      c[j] = c[j - 1];
      j--;
    }
    c[j] = t;
  }

  switch (p->mode) {
    case LIDAR_RETURN_FIRST:
      emit(c, 0, n, out);
      return 1;
    case LIDAR_RETURN_LAST:
      emit(c, n - 1, n, out);
      return 1;
    case LIDAR_RETURN_DUAL: {
      uint32_t s = strongest(c, n, n);
      uint32_t other = s != n - 1 ? n - 1 : strongest(c, n, s);
      if (other >= n) {
        emit(c, s, n, out);
        return 1;
      }
      uint32_t lo = s < other ? s : other;
      uint32_t hi = s < other ? other : s;
      emit(c, lo, n, &out[0]);
      emit(c, hi, n, &out[1]);
      return 2;
    }
    case LIDAR_RETURN_ALL: {
      if (n <= p->max_returns) {
        for (uint32_t i = 0; i < n; i++) {
          emit(c, i, n, &out[i]);
        }
        return n;
      }

      // the max_returns strongest (ties: smaller OPL), written in OPL order
      uint8_t taken[MAX_CANDIDATES];
      memset(taken, 0, n);
      for (uint32_t k = 0; k < p->max_returns; k++) {
        uint32_t best = n;
        for (uint32_t i = 0; i < n; i++) {
          if (!taken[i] && (best == n || c[i].intensity > c[best].intensity)) {
            best = i;
          }
        }
        taken[best] = 1;
      }
      uint32_t m = 0;
      for (uint32_t i = 0; i < n; i++) {
        if (taken[i]) {
          emit(c, i, n, &out[m++]);
        }
      }
      return m;
    }
    case LIDAR_RETURN_STRONGEST:
    default:
      emit(c, strongest(c, n, n), n, out);
      return 1;
  }
}


//---------------- the segment heap

// One segment (heap node) of a ray.
typedef struct seg {
  double origin[3];                     // world, m
  double dir[3];                        // unit
  double x0;                            // OPL at the start, m
  double weight;                        // W at the start
  double lead;                          // m: how far the self-hit offset moved the origin
                                        //   ahead along dir (added to the traced length)
  const ambient_material_t* medium;     // the medium the segment travels in
  uint32_t volume;                      // object whose volume holds the segment (0: ambient)
  uint16_t outer;                       // node whose segment is outside that volume
  uint8_t valid;
} seg_t;

// The optics of the object hit last (rays in a packet mostly hit the same object).
typedef struct optics_entry {
  uint32_t object_id;                   // 0: empty
  const ambient_material_t* medium;     // filling the object, NULL: opaque
  const surface_material_t* material;   // of every primitive, NULL: per triangle
} optics_entry_t;

// Entries of an optics cache, by object id (a lidar's neighbouring rays alternate between a few
// objects: the ground and what stands on it).
#define OPTICS_WAYS 8u

typedef struct optics_cache {
  optics_entry_t e[OPTICS_WAYS];
} optics_cache_t;

// What one ray's evaluation needs.
typedef struct ray_ctx {
  const lidar_returns_t* p;
  const step_view_t* v;
  optics_cache_t* optics;
  rng_key_t key;
  double time;                          // fraction of the step
  uint32_t* block;                      // words of draw LIDAR_DRAW_RAY (when has_block)
  int has_block;
  const double* z0;                     // the first return's distance noise quantile, from the
                                        //   block's words 2-3 (NULL: computed when needed)
  seg_t* nodes;                         // 2^D - 1 heap nodes
  lidar_candidate_t* cand;
  uint32_t ncand;
} ray_ctx_t;


static double dot3(const double a[3], const double b[3]) {
  return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}


// The words of the ray's first draw (computed once, on first use).
static const uint32_t* ray_block(ray_ctx_t* r) {
  if (!r->has_block) {
    rng_words(&r->key, LIDAR_DRAW_RAY, r->block);
    r->has_block = 1;
  }
  return r->block;
}


// The medium inside the object of a hit (NULL: opaque) and, for an opaque one, the surface
// material at the hit (primitive `prim`), through the cache c. Returns whether they hold for
// every primitive of the object (a medium, or one material).
static inline int hit_optics(const step_view_t* v, optics_cache_t* cache, uint32_t object_id,
                             uint32_t prim, const ambient_material_t** inside,
                             const surface_material_t** material) {
  optics_entry_t* c = &cache->e[object_id % OPTICS_WAYS];
  if (c->object_id != object_id) {
    v->object_optics(v->lookup_ctx, object_id, &c->medium, &c->material);
    c->object_id = object_id;
  }
  *inside = c->medium;
  *material = c->medium != NULL ? NULL
              : c->material != NULL ? c->material
                                    : v->hit_material(v->lookup_ctx, object_id, prim);
  return c->medium != NULL || c->material != NULL;
}


// Geometric length left for a segment starting at OPL x0 in a medium of index n.
static double remaining_length(const lidar_returns_t* p, double x0, double n) {
  return (p->range_max - x0) / n;
}


// BD(x), without a call when the beam is off.
static double beam_factor(const lidar_returns_t* p, double x) {
  return p->beam.enabled ? lidar_divergence_factor(&p->beam, x) : 1.0;
}


// Backscatter of the material at a hit, the Lambertian case inline.
static double backscatter(const surface_material_t* m, double n1, double cos_i) {
  if (m->kind == MATERIAL_LAMBERTIAN) {
    return cos_i > BRDF_EPS_COS ? m->reflectance * M_1_PI * (cos_i < 1.0 ? cos_i : 1.0) : 0.0;
  }
  return brdf_backscatter(m, n1, cos_i);
}


// x^2 for the round-trip option, else x.
static double path_power(const lidar_returns_t* p, double x) {
  return p->round_trip ? x * x : x;
}


//---------------- Radiometry: the intensity of every candidate, written once

// tau(x): the transmittance of OPL x in medium med, squared with round-trip attenuation.
static inline double transmittance(const lidar_returns_t* p, const ambient_material_t* med,
                                   double x) {
  return path_power(p, atmosphere_transmittance(med->attenuation, x));
}


// The surface candidate of a segment of weight w in medium med that meets an opaque surface of
// material m at incidence cos_i, OPL dx after its start, at OPL x: I = W tau rho_bs BD(x) into
// *intensity, with tau = transmittance(p, med, dx) given (the caller needs it for the children
// too, or computes it for many hits at once: transmittances). False (no candidate) when the
// surface sends nothing back.
static inline int surface_return_tau(const lidar_returns_t* p, const ambient_material_t* med,
                                     const surface_material_t* m, double cos_i, double w,
                                     double tau, double x, double* intensity) {
  double rho = backscatter(m, med->refractive_index, cos_i);
  if (!(rho > 0.0)) {
    return 0;
  }
  *intensity = w * tau * rho * beam_factor(p, x);
  return 1;
}


// The exponents y[i] = -alpha x[i] of n optical path lengths, x[i] = atmosphere_exp_small(y[i])
// in place, and in *far the number of them outside the series' range, across SIMD lanes (its
// forms: base/simd.h): the same operations on each element (the series' dependent
// multiply-adds, one hit after the other, were a quarter of the depth-1 returns' time; the
// exponents and their count in a scalar pass before it, a tenth of the rest).
static inline SIMD_BODY void exp_small_n(double* restrict x, double* restrict y, size_t n,
                                         double alpha, size_t* far) {
  size_t f = 0;
  for (size_t i = 0; i < n; i++) {
    const double yi = -alpha * x[i];
    y[i] = yi;
    f += !(yi >= -0.0625);
    x[i] = atmosphere_exp_small(yi);
  }
  *far = f;
}

SIMD_FORMS(exp_small_n,
           (double* restrict x, double* restrict y, size_t n, double alpha, size_t* far),
           (x, y, n, alpha, far))


// transmittance(p, med, x[i]) of n optical path lengths x[i] >= 0, in place: the same bits.
static void transmittances(const lidar_returns_t* p, const ambient_material_t* med, double* x,
                           size_t n) {
  const double alpha = med->attenuation;
  if (alpha == 0.0) {
    for (size_t i = 0; i < n; i++) {
      x[i] = path_power(p, 1.0);
    }
    return;
  }

  // the series where atmosphere_transmittance takes it, exp elsewhere (a long path in fog)
  double y[RAYS_PER_TRACE_MAX];
  size_t far;
  SIMD_CALL(exp_small_n, (x, y, n, alpha, &far));
  for (size_t i = 0; far && i < n; i++) {
    if (!(y[i] >= -0.0625)) {
      x[i] = exp(y[i]);
    }
  }
  for (size_t i = 0; p->round_trip && i < n; i++) {
    x[i] = x[i] * x[i];
  }
}


// The atmospheric candidate of a segment of weight w starting at OPL x0 in medium med and
// running OPL dx: whether the medium returns light, drawn from the uniform u and draw `draw` of
// key (atmosphere_sample), at OPL *x = x0 + xa with I = W tau(xa) rho_atm BD(x) into *intensity.
static inline int atmosphere_return(const lidar_returns_t* p, const ambient_material_t* med,
                                    const rng_key_t* key, uint32_t draw, double u, double w,
                                    double x0, double dx, double* x, double* intensity) {
  double xa;
  if (!atmosphere_sample(med, dx, u, key, draw, &xa)) {
    return 0;
  }
  *x = x0 + xa;
  *intensity = w * transmittance(p, med, xa) * med->backscatter * beam_factor(p, *x);
  return 1;
}


static void add_candidate(ray_ctx_t* r, uint32_t node, double x, double intensity,
                          const scene_hit_t* hit) {
  lidar_candidate_t* c = &r->cand[r->ncand++];
  c->distance = x;
  c->intensity = intensity;
  c->node = node;
  if (hit != NULL) {
    c->normal[0] = hit->normal[0];
    c->normal[1] = hit->normal[1];
    c->normal[2] = hit->normal[2];
    c->object_id = hit->object_id;
    c->label = hit->label;
    c->atmospheric = 0;
  } else {
    c->normal[0] = c->normal[1] = c->normal[2] = 0.0;
    c->object_id = 0;
    c->label = 0;
    c->atmospheric = 1;
  }
}


// Start child `ci` of node s at its hit point (`traced` along the traced segment), offset along
// the normal n (side = +1: the incoming side, -1: through the interface).
static void spawn(ray_ctx_t* r, uint32_t ci, const seg_t* s, double traced, const double n[3],
                  double side, const double dir[3], double x1, double weight,
                  const ambient_material_t* medium, uint32_t volume, uint16_t outer) {
  seg_t* c = &r->nodes[ci];
  double hit[3];
  double mag = 0.0;
  for (int k = 0; k < 3; k++) {
    hit[k] = s->origin[k] + s->dir[k] * traced;
    mag = fmax(mag, fabs(hit[k]));
  }
  double off = side * fmax(SELF_HIT_OFFSET, SELF_HIT_RELATIVE * mag);
  for (int k = 0; k < 3; k++) {
    c->origin[k] = hit[k] + n[k] * off;
    c->dir[k] = dir[k];
  }
  c->lead = off * dot3(n, dir);
  c->x0 = x1;
  c->weight = weight;
  c->medium = medium;
  c->volume = volume;
  c->outer = outer;
  c->valid = 1;
}


// Start the reflection child of node i (segment s, its hit h at incidence cos_i, OPL x1) with
// weight w: the mirror direction, in the segment's own medium and volume.
static void reflect(ray_ctx_t* r, uint32_t i, const seg_t* s, const scene_hit_t* h, double cos_i,
                    double x1, double w) {
  double refl[3];
  for (int k = 0; k < 3; k++) {
    refl[k] = s->dir[k] + 2.0 * cos_i * h->normal[k];
  }
  spawn(r, 2 * i + 1, s, h->distance, h->normal, 1.0, refl, x1, w, s->medium, s->volume,
        s->outer);
}


// Evaluate node i (segment s, its hit h): candidates, and children when `children` is set.
static void eval_node(ray_ctx_t* r, uint32_t i, const seg_t* s, const scene_hit_t* h,
                      int children) {
  const lidar_returns_t* p = r->p;
  const ambient_material_t* med = s->medium;
  double n_amb = med->refractive_index;
  double tmax = remaining_length(p, s->x0, n_amb);
  int is_hit = hit_in_range(h->object_id, h->distance, tmax);
  double length = is_hit ? h->distance + s->lead : tmax;
  double dx = n_amb * length;
  double x1 = s->x0 + dx;

  // atmospheric return of the segment (the root's uniform comes with the ray's first draw)
  if (med->return_scaling > 0.0) {
    uint32_t draw = LIDAR_DRAW_ATMOSPHERE + i * LIDAR_DRAW_ATMOSPHERE_STRIDE;
    double u;
    if (i == 0) {
      const uint32_t* w = ray_block(r);
      u = lidar_noise_uniform(w[0], w[1]);
    } else {
      u = rng_uniform(&r->key, draw);
    }
    double x, intensity;
    if (atmosphere_return(p, med, &r->key, draw + 1, u, s->weight, s->x0, dx, &x, &intensity)) {
      add_candidate(r, i, x, intensity, NULL);
    }
  }
  if (!is_hit) {
    return;
  }

  // the interface: an opaque surface, or the boundary of a volume with its own medium
  double cos_i = -dot3(h->normal, s->dir);
  const ambient_material_t* inside;
  const surface_material_t* m;
  hit_optics(r->v, r->optics, h->object_id, h->primitive, &inside, &m);
  double tau = transmittance(p, med, dx);
  if (inside == NULL) {
    double intensity;
    if (surface_return_tau(p, med, m, cos_i, s->weight, tau, x1, &intensity)) {
      add_candidate(r, i, x1, intensity, h);
    }
  }
  if (!children) {
    return;
  }

  // the children: the specular reflection of an opaque surface that is not Lambertian, with
  // its weight W tau w_R
  if (inside == NULL) {
    double w = m->kind != MATERIAL_LAMBERTIAN
                   ? s->weight * tau * path_power(p, brdf_reflection_weight(m, n_amb, cos_i))
                   : 0.0;
    if (w > 0.0) {
      reflect(r, i, s, h, cos_i, x1, w);
    }
    return;
  }

  // medium boundary: leaving the volume the segment is in, or entering another one
  const ambient_material_t* far;
  uint32_t far_volume;
  uint16_t far_outer;
  if (s->volume == h->object_id) {
    if (s->outer == NO_NODE) {
      far = r->v->ambient;
      far_volume = 0;
      far_outer = NO_NODE;
    } else {
      const seg_t* o = &r->nodes[s->outer];
      far = o->medium;
      far_volume = o->volume;
      far_outer = o->outer;
    }
  } else {
    far = inside;
    far_volume = h->object_id;
    far_outer = (uint16_t)i;
  }
  double n2 = far->refractive_index;
  double eta = n_amb / n2;
  double ci = fmin(fmax(cos_i, 0.0), 1.0);
  double sin2_t = eta * eta * (1.0 - ci * ci);
  brdf_fresnel_t f = brdf_fresnel(n_amb, n2, 0.0, ci);
  double w_r = sin2_t >= 1.0 ? 1.0 : f.r;
  double w_t = sin2_t >= 1.0 ? 0.0 : f.t;

  // reflection stays in the medium; transmission bends by Snell's law into the far medium
  double wr = s->weight * tau * path_power(p, w_r);
  if (wr > 0.0) {
    reflect(r, i, s, h, cos_i, x1, wr);
  }
  double wt = s->weight * tau * path_power(p, w_t);
  if (wt > 0.0) {
    double cos_t = sqrt(1.0 - sin2_t);
    double refr[3];
    for (int k = 0; k < 3; k++) {
      refr[k] = eta * s->dir[k] + (eta * ci - cos_t) * h->normal[k];
    }
    double len = sqrt(dot3(refr, refr));
    for (int k = 0; k < 3; k++) {
      refr[k] /= len;
    }
    spawn(r, 2 * i + 2, s, h->distance, h->normal, -1.0, refr, x1, wt, far, far_volume,
          far_outer);
  }
}


// Apply the detection distance noise to the k returns of a ray (the first one's normal from
// the ray's first draw, as lidar_noise_distance does); a return whose distance ends up beyond
// LIDAR_MAX_DISTANCE (no float32 point could hold it) is dropped. Returns the returns kept.
static uint32_t add_noise(const lidar_returns_t* p, ray_ctx_t* r, lidar_return_t* o,
                          uint32_t k) {
  const lidar_distance_noise_t* dn = &p->distance_noise;
  if (!dn->enabled) {
    return k;
  }
  uint32_t kept = 0;
  for (uint32_t q = 0; q < k; q++) {
    double z = 0.0;
    if (lidar_noise_distance_stddev(dn, o[q].distance) != 0.0) {
      const uint32_t* w = ray_block(r);
      z = q != 0      ? lidar_noise_normal(&r->key, LIDAR_DRAW_DISTANCE + q)
          : r->z0 != NULL ? *r->z0
                          : lidar_noise_normal_quantile(lidar_noise_uniform(w[2], w[3]));
    }
    double x = lidar_noise_distance_apply(dn, o[q].distance, z);
    o[q].distance = x;
    if (x <= LIDAR_MAX_DISTANCE) {
      if (kept != q) {
        o[kept] = o[q];
      }
      kept++;
    }
  }
  return kept;
}


// The root segment of a primary ray from `origin` along the unit `dir`: OPL 0, weight 1, in
// the ambient medium air.
static void root_segment(seg_t* s, const double origin[3], const double dir[3],
                         const ambient_material_t* air) {
  memcpy(s->origin, origin, sizeof s->origin);
  memcpy(s->dir, dir, sizeof s->dir);
  s->x0 = 0.0;
  s->weight = 1.0;
  s->lead = 0.0;
  s->medium = air;
  s->volume = 0;
  s->outer = NO_NODE;
  s->valid = 1;
}


// The returns of a ray whose candidates are all in r: the selection, then the distance noise,
// into o. Returns their number.
static uint32_t ray_finish(const lidar_returns_t* p, ray_ctx_t* r, lidar_return_t* o) {
  uint32_t k = lidar_returns_select(p, r->cand, r->ncand, o);
  return add_noise(p, r, o, k);
}


// Depth 1, lane j of a packet in columns (rng index `index`, its hit, its first draw `block`)
// as lidar_returns_trace does any ray: the root segment's candidates (eval_node), then
// ray_finish into o (max_returns). Returns their number. For the rays whose first draw may give
// an atmospheric return.
static uint32_t lane_returns(const lidar_returns_t* p, const step_view_t* v,
                             const rng_key_t* key, const scene_packet_t* rays, uint64_t index,
                             unsigned j, const scene_packet_hits_t* hits, uint32_t block[4],
                             optics_cache_t* optics, lidar_return_t* o) {
  seg_t root;
  root_segment(&root, (const double[3]){rays->ox[j], rays->oy[j], rays->oz[j]},
               (const double[3]){rays->dx[j], rays->dy[j], rays->dz[j]}, v->ambient);
  scene_hit_t h = {.distance = hits->distance[j],
                   .normal = {hits->nx[j], hits->ny[j], hits->nz[j]},
                   .object_id = hits->object_id[j], .label = hits->label[j],
                   .primitive = hits->primitive[j]};
  lidar_candidate_t cand[2];
  ray_ctx_t r = {.p = p, .v = v, .optics = optics, .key = *key, .block = block, .has_block = 1,
                 .nodes = &root, .cand = cand};
  r.key.index = index;
  eval_node(&r, 0, &root, &h, 0);
  return ray_finish(p, &r, o);
}


// The inputs of lambert_lanes: the depth-1 constants of a packet's rays.
typedef struct lambert_consts {
  double n_amb;                 // the ambient refractive index
  double range_min, range_max, threshold;
  double noise_base, noise_slope, noise_mean;   // the distance noise (noise: on)
  int noise;
} lambert_consts_t;


// Four lanes of doubles and their comparison masks (GCC's vector extensions: every operation
// is the scalar one on each element, at any ISA; written out, the comparisons and selects stay
// branch-free, where the compiler may not if-convert scalar code because a floating-point
// comparison can raise a flag).
typedef double lanes4_t __attribute__((vector_size(32)));
typedef int64_t mask4_t __attribute__((vector_size(32)));
#define LANES4_LOAD(p) ({ lanes4_t v_; memcpy(&v_, (p), sizeof v_); v_; })
typedef int8_t bytes4_t __attribute__((vector_size(4)));   // a mask4_t's lanes as bytes
typedef uint32_t ids4_t __attribute__((vector_size(16)));  // four lanes' object ids
#define LANES4_SELECT(m, a, b) ((lanes4_t)(((m) & (mask4_t)(a)) | (~(m) & (mask4_t)(b))))


// d[0, n) = 0 for n <= SCENE_PACKET; a whole packet as vector stores.
static inline void zero_lanes(double* d, unsigned n) {
  if (n == SCENE_PACKET) {
    const lanes4_t zero = {0.0, 0.0, 0.0, 0.0};
    for (unsigned j = 0; j < SCENE_PACKET; j += 4) {
      memcpy(&d[j], &zero, sizeof zero);
    }
  } else {
    memset(d, 0, n * sizeof *d);
  }
}


// The surface returns of the lanes of a packet whose hit is an opaque Lambertian surface of
// reflectance refl[j] with the beam divergence off (the common case), four lanes at a time:
// the operations of surface_return_tau (w = 1, BD = 1), backscatter, detectable and
// lidar_noise_distance_apply in the same order, every value computed and then selected (its
// forms: base/simd.h); a lane's result counts only where keep[j] is non-zero. Scalar, the
// branches on the cosine, the threshold and the range mispredicted often enough to make this
// loop about two thirds of the depth-1 returns' own time.
static inline SIMD_BODY void lambert_body(const lambert_consts_t* c, const scene_packet_t* rays,
                                          const scene_packet_hits_t* hits, const double* refl,
                                          const double* tau, const double* z, double* x,
                                          double* intensity, int64_t* keep, uint8_t* nret,
                                          const int lean) {
  const lambert_consts_t k = *c;   // a copy: the stores cannot change it
  const lanes4_t zero = {0.0, 0.0, 0.0, 0.0};
  const lanes4_t one = zero + 1.0;
  _Static_assert(SCENE_PACKET % 4 == 0, "a packet is whole lanes4_t");
  for (unsigned j = 0; j < SCENE_PACKET; j += 4) {
    const lanes4_t dx = k.n_amb * LANES4_LOAD(&hits->distance[j]);
    const lanes4_t cos_i =
        -(LANES4_LOAD(&hits->nx[j]) * LANES4_LOAD(&rays->dx[j]) +
          LANES4_LOAD(&hits->ny[j]) * LANES4_LOAD(&rays->dy[j]) +
          LANES4_LOAD(&hits->nz[j]) * LANES4_LOAD(&rays->dz[j]));
    const lanes4_t lit = LANES4_LOAD(&refl[j]) * M_1_PI * LANES4_SELECT(cos_i < 1.0, cos_i, one);
    const lanes4_t rho = LANES4_SELECT(cos_i > BRDF_EPS_COS, lit, zero);
    const lanes4_t in = 1.0 * LANES4_LOAD(&tau[j]) * rho * 1.0;
    mask4_t kept = (rho > 0.0) & (dx >= k.range_min) & (dx <= k.range_max) & (in > k.threshold);
    lanes4_t xr = dx;
    if (k.noise) {
      const lanes4_t sigma = k.noise_base + k.noise_slope * dx;
      const lanes4_t mu = dx + k.noise_mean;
      const lanes4_t spread = mu + sigma * LANES4_LOAD(&z[j]);
      const lanes4_t xn = LANES4_SELECT(sigma == 0.0, mu, spread);
      xr = LANES4_SELECT(xn > 0.0, xn, zero);
      kept &= xr <= LIDAR_MAX_DISTANCE;
    }
    if (lean) {
      const lanes4_t xs = LANES4_SELECT(kept, xr, LANES4_LOAD(&x[j]));
      const lanes4_t is = LANES4_SELECT(kept, in, LANES4_LOAD(&intensity[j]));
      memcpy(&x[j], &xs, sizeof xs);
      memcpy(&intensity[j], &is, sizeof is);
      bytes4_t got;
      memcpy(&got, &nret[j], sizeof got);
      got |= __builtin_convertvector(kept, bytes4_t) & 1;
      memcpy(&nret[j], &got, sizeof got);
    } else {
      memcpy(&x[j], &xr, sizeof xr);
      memcpy(&intensity[j], &in, sizeof in);
      memcpy(&keep[j], &kept, sizeof kept);
    }
  }
}

#define LAMBERT_PARAMS                                                                   \
  (const lambert_consts_t* c, const scene_packet_t* rays, const scene_packet_hits_t* hits, \
   const double* refl, const double* tau, const double* z, double* x, double* intensity,  \
   int64_t* keep, uint8_t* nret)
#define LAMBERT_ARGS (c, rays, hits, refl, tau, z, x, intensity, keep, nret)

// Its two cases (their forms: base/simd.h): lambert_lanes stores every lane's x, intensity
// and keep; lambert_lean (a whole packet for the lean writer) stores into its distances x,
// intensities and nret only where a lane is kept, as selects, and leaves the other lanes as
// they were. No lane outside the Lambertian ones is kept (their reflectance is 0), so the
// others' returns stay. Lane by lane after the kernel, the loop over the kept lanes and its
// branch were about a sixth of lidar_returns_packets' own instructions.
static inline SIMD_BODY void lambert_lanes LAMBERT_PARAMS {
  lambert_body(c, rays, hits, refl, tau, z, x, intensity, keep, nret, 0);
}
SIMD_FORMS(lambert_lanes, LAMBERT_PARAMS, LAMBERT_ARGS)

static inline SIMD_BODY void lambert_lean LAMBERT_PARAMS {
  lambert_body(c, rays, hits, refl, tau, z, x, intensity, keep, nret, 1);
}
SIMD_FORMS(lambert_lean, LAMBERT_PARAMS, LAMBERT_ARGS)


// The number of draws of w[0, n) whose uniform (words 0-1) is below the probability whose
// lidar_noise_uniform_count_below is `count`, into *below: the test of packet_returns, across
// SIMD lanes (its forms: base/simd.h) for a whole trace at once. The bits and the count are
// at most 2^52, so signed comparisons (which AVX2 has) order them as unsigned ones.
static inline SIMD_BODY void count_below(const uint32_t (*w)[4], size_t n, uint64_t count,
                                         size_t* below) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    k += (int64_t)lidar_noise_uniform_bits(w[i][0], w[i][1]) < (int64_t)count;
  }
  *below = k;
}

SIMD_FORMS(count_below, (const uint32_t (*w)[4], size_t n, uint64_t count, size_t* below),
           (w, n, count, below))


// The lanes of a packet whose object id is `id`, as a mask.
static inline uint32_t lanes_on(const scene_packet_hits_t* hits, uint32_t id) {
  // four lanes at a time, each lane's bit as a vector element (as hit_masks)
  const ids4_t bit = {1, 2, 4, 8};
  ids4_t m = {0, 0, 0, 0};
  for (unsigned k = 0; k < SCENE_PACKET; k += 4) {
    ids4_t ids;
    memcpy(&ids, &hits->object_id[k], sizeof ids);
    m |= (ids4_t)(ids == id) & (bit << k);
  }
  return m[0] | m[1] | m[2] | m[3];
}


// The returns of the lanes [0, n) of a packet at depth 1. A ray whose first draw may give an
// atmospheric return goes to lane_returns. Every other one (all of them when the medium's
// return_scaling is 0, nearly all in clear air) has at most its root's surface candidate,
// which every mode reports: the same operations as eval_node, lidar_returns_select and
// add_noise in the same order, without the candidate and the ray context; the opaque
// Lambertian hits (beam divergence off) all at once in lambert_lanes. hit: the lanes that hit
// a surface in range, as a mask; z[j]: lane j's distance noise quantile when the noise is on,
// tau[j]: its transmittance to the hit (transmittances), both by lane (any value in the other
// lanes); atm_count: lidar_noise_uniform_count_below(return_scaling), or 0 when no lane's draw
// is below it (no atmospheric return, and blocks unused).
static void packet_returns(const lidar_returns_t* p, const step_view_t* v, const rng_key_t* key,
                           const scene_packet_t* rays, const uint64_t* ray_index, unsigned n,
                           const scene_packet_hits_t* hits, uint32_t (*blocks)[4],
                           uint32_t hit, const double* z, const double* tau, uint64_t atm_count,
                           optics_cache_t* optics, lidar_return_t* out, double* xo, double* io,
                           uint8_t* nret) {
  const ambient_material_t* air = v->ambient;
  const double n_amb = air->refractive_index;
  const uint32_t maxr = p->max_returns;
  const lidar_distance_noise_t* dn = &p->distance_noise;
  uint32_t general = 0;   // lanes done by lane_returns
  // (a whole packet's zeros at a length the compiler knows: stored as vectors, where the
  // variable length of the last packet became three `rep stos`, whose start-up was about a
  // seventh of this function's own time)
  if (n == SCENE_PACKET) {
    memset(nret, 0, SCENE_PACKET * sizeof *nret);
  } else {
    memset(nret, 0, n * sizeof *nret);
  }
  if (xo) {
    // a miss's: the lean writer computes every lane's point, and keeps those with a return
    zero_lanes(xo, n);
    zero_lanes(io, n);
  }
  if (atm_count > 0) {
    // lidar_noise_uniform(w0, w1) < return_scaling, in integers across the lanes
    for (unsigned j = 0; j < n; j++) {
      general |= (uint32_t)(lidar_noise_uniform_bits(blocks[j][0], blocks[j][1]) < atm_count)
                 << j;
    }
    for (uint32_t g = general; g; g &= g - 1) {
      unsigned j = (unsigned)__builtin_ctz(g);
      if (xo) {
        lidar_return_t r;   // max_returns 1
        nret[j] = (uint8_t)lane_returns(p, v, key, rays, ray_index[j], j, hits, blocks[j],
                                        optics, &r);
        xo[j] = r.distance;
        io[j] = r.intensity;
      } else {
        nret[j] = (uint8_t)lane_returns(p, v, key, rays, ray_index[j], j, hits, blocks[j],
                                        optics, &out[j * maxr]);
      }
    }
  }

  // each hit lane's optics: an opaque Lambertian surface (beam off) joins lambert_lanes'
  // lanes, every other surface takes the scalar path below
  // (lambert_lanes reads every lane: the others are zero, stored as vectors; as initialisers
  // they became three `rep stos`, whose start-up was a fifth of this function's own time)
  double refl[SCENE_PACKET];
  zero_lanes(refl, SCENE_PACKET);
  uint32_t lambert = 0;
  const int beam = p->beam.enabled;

  // a packet's lanes mostly hit one or two objects: optics that hold for all of an object's
  // primitives are looked up once for all its lanes (lanes_on), and its Lambertian lanes take
  // its reflectance by a select across the lanes
  for (uint32_t todo = hit & ~general; todo;) {
    const unsigned j0 = (unsigned)__builtin_ctz(todo);
    const uint32_t id = hits->object_id[j0];
    const ambient_material_t* inside;
    const surface_material_t* mat;
    const int whole = hit_optics(v, optics, id, hits->primitive[j0], &inside, &mat);
    const uint32_t run = whole ? lanes_on(hits, id) & todo : 1u << j0;
    todo &= ~run;
    if (inside == NULL && !beam && mat->kind == MATERIAL_LAMBERTIAN) {
      const double r = mat->reflectance;
      for (unsigned k = 0; k < SCENE_PACKET; k++) {
        refl[k] = (run >> k) & 1u ? r : refl[k];
      }
      lambert |= run;
      continue;
    }
    if (inside != NULL) {
      continue;   // a volume's boundary: no surface return at depth 1
    }
    for (uint32_t g = run; g; g &= g - 1) {
      const unsigned j = (unsigned)__builtin_ctz(g);

      // the root's surface candidate, as eval_node finds it (x0 = 0, weight 1, no lead: x0 + dx
      // and 1 * tau are exact)
      double dx = n_amb * hits->distance[j];
      double cos_i = -(hits->nx[j] * rays->dx[j] + hits->ny[j] * rays->dy[j] +
                       hits->nz[j] * rays->dz[j]);
      double intensity;
      if (!surface_return_tau(p, air, mat, cos_i, 1.0, tau[j], dx, &intensity) ||
          !detectable(p, dx, intensity)) {
        continue;
      }

      // its distance noise (z is ignored where the deviation is 0, where add_noise draws none)
      double x = dx;
      if (dn->enabled) {
        x = lidar_noise_distance_apply(dn, dx, z[j]);
        if (!(x <= LIDAR_MAX_DISTANCE)) {
          continue;
        }
      }
      if (xo) {
        xo[j] = x;
        io[j] = intensity;
      } else {
        put_return(&out[j * maxr], x, intensity, hits->nx[j], hits->ny[j], hits->nz[j],
                   hits->object_id[j], hits->label[j], 0, 1, 0);
      }
      nret[j] = 1;
    }
  }
  if (lambert == 0) {
    return;
  }
  lambert_consts_t c = {.n_amb = n_amb, .range_min = p->range_min, .range_max = p->range_max,
                        .threshold = p->intensity_threshold, .noise_base = dn->stddev_base,
                        .noise_slope = dn->stddev_slope, .noise_mean = dn->mean,
                        .noise = dn->enabled};
  double x[SCENE_PACKET], intensity[SCENE_PACKET];
  int64_t keep[SCENE_PACKET];
  if (xo && n == SCENE_PACKET) {
    SIMD_CALL(lambert_lean, (&c, rays, hits, refl, tau, z, xo, io, NULL, nret));
    return;
  }
  SIMD_CALL(lambert_lanes, (&c, rays, hits, refl, tau, z, x, intensity, keep, NULL));
  for (uint32_t g = lambert; xo && g; g &= g - 1) {
    unsigned j = (unsigned)__builtin_ctz(g);
    if (keep[j]) {
      xo[j] = x[j];
      io[j] = intensity[j];
      nret[j] = 1;
    }
  }
  for (uint32_t g = xo ? 0 : lambert; g; g &= g - 1) {
    unsigned j = (unsigned)__builtin_ctz(g);
    if (keep[j]) {
      put_return(&out[j * maxr], x[j], intensity[j], hits->nx[j], hits->ny[j], hits->nz[j],
                 hits->object_id[j], hits->label[j], 0, 1, 0);
      nret[j] = 1;
    }
  }
}


// The lanes of each of np packets' hits that hit a surface in range (hit_in_range's test), as masks,
// across SIMD lanes (its forms: base/simd.h).
static inline SIMD_BODY void hit_masks(const scene_packet_hits_t* hits, unsigned np,
                                       double tmax, uint32_t* mask) {
  // four lanes at a time, each lane's bit as a vector element (written out: the compiler left
  // a loop over the lanes scalar), the elements ORed once per packet
  const mask4_t bit = {1, 2, 4, 8};
  for (unsigned q = 0; q < np; q++) {
    mask4_t m = {0, 0, 0, 0};
    for (unsigned k = 0; k < SCENE_PACKET; k += 4) {
      ids4_t id;
      memcpy(&id, &hits[q].object_id[k], sizeof id);
      const mask4_t on = __builtin_convertvector(id != 0, mask4_t);
      m |= on & (LANES4_LOAD(&hits[q].distance[k]) <= tmax) & (bit << k);
    }
    mask[q] = (uint32_t)(m[0] | m[1] | m[2] | m[3]);
  }
}

SIMD_FORMS(hit_masks, (const scene_packet_hits_t* hits, unsigned np, double tmax,
                       uint32_t* mask), (hits, np, tmax, mask))


// Packets traced per scene call (lidar_returns_packets): 512 rays, 20 KB of hits.
#define PACKETS_PER_TRACE 32
#define RAYS_PER_TRACE (PACKETS_PER_TRACE * SCENE_PACKET)
_Static_assert(RAYS_PER_TRACE <= RAYS_PER_TRACE_MAX, "transmittances holds a trace's hits");

void lidar_returns_packets(const lidar_returns_t* p, const lidar_returns_packets_t* b,
                           lidar_return_t* out, uint8_t* nret) {
  const step_view_t* v = b->view;
  const uint32_t maxr = p->max_returns;
  scene_packet_hits_t hits[PACKETS_PER_TRACE];
  uint32_t blocks[RAYS_PER_TRACE][4];   // every ray's first draw (all_draws)
  uint32_t wq[RAYS_PER_TRACE][4];       // the first draws of the hit lanes, in their order
  double z[RAYS_PER_TRACE];             // their distance noise quantiles
  double tau[RAYS_PER_TRACE];           // their transmittances to the hit
  uint16_t at[RAYS_PER_TRACE];          // the ray (in the trace) of each of them
  uint32_t hit[PACKETS_PER_TRACE];      // each packet's hit lanes
  // the same quantiles and transmittances by ray, where packet_returns reads them lane by lane
  // and lambert_lanes across the lanes (the other rays' values are never kept: zeroed once)
  double zr[RAYS_PER_TRACE], taur[RAYS_PER_TRACE];
  memset(zr, 0, sizeof zr);
  memset(taur, 0, sizeof taur);
  optics_cache_t optics = {0};
  rng_key_t key = {.seed = v->seed, .stream = b->sensor_id, .frame = b->frame};

  // every ray's first draw when every ray may take it (for the atmospheric return of the
  // primary segment); else, with the distance noise on, only the draws of the rays that hit a
  // surface in range, those of the whole trace at once: the other rays have no return to
  // draw for, and a draw is a function of the ray's index alone, so its bits are the same
  const uint64_t atm_count = lidar_noise_uniform_count_below(v->ambient->return_scaling);
  const int all_draws = atm_count > 0;
  const int noise = p->distance_noise.enabled;
  const double tmax = lidar_returns_primary_tmax(p, v);
  const double n_amb = v->ambient->refractive_index;
  const int lean = b->distance != NULL;
  for (size_t base = 0; base < b->n; base += RAYS_PER_TRACE) {
    size_t m = b->n - base < RAYS_PER_TRACE ? b->n - base : RAYS_PER_TRACE;
    const scene_packet_t* rays = &b->rays[base / SCENE_PACKET];
    const uint64_t* index = b->ray_index + base;
    scene_trace(v->scene, &(scene_batch_t){.layout = SCENE_COLUMNS, .n = m, .packets = rays,
                                            .packet_hits = hits, .filter = b->filter,
                                            .horizon = b->horizon});
    // the rays whose first draw gives the root segment an atmospheric candidate (about one
    // in 60 000 in clear air): none in most traces, whose packets skip the test
    uint64_t trace_atm = 0;
    if (all_draws) {
      rng_words_n(&key, index, LIDAR_DRAW_RAY, blocks, m);
      size_t below;
      SIMD_CALL(count_below, ((const uint32_t(*)[4])blocks, m, atm_count, &below));
      trace_atm = below > 0 ? atm_count : 0;
    }

    // the lanes that hit a surface in range, as each packet's mask (across SIMD lanes), then
    // what their returns need, hit by hit: their rays, their optical path lengths (for the
    // transmittances) and, noise on, their first draws or their rng indices; the other rays
    // have no surface return
    const int gather_draws = noise && all_draws, gather_index = noise && !all_draws;
    uint64_t hit_index[RAYS_PER_TRACE];
    unsigned nh = 0, np = (unsigned)((m + SCENE_PACKET - 1) / SCENE_PACKET);
    SIMD_CALL(hit_masks, (hits, np, tmax, hit));
    if (m % SCENE_PACKET) {
      hit[np - 1] &= (1u << m % SCENE_PACKET) - 1u;   // the last packet's unused lanes
    }
    for (unsigned q = 0; q < np; q++) {
      const scene_packet_hits_t* h = &hits[q];
      const size_t r0 = (size_t)q * SCENE_PACKET;
      for (uint32_t g = hit[q]; g; g &= g - 1) {
        const unsigned j = (unsigned)__builtin_ctz(g);
        at[nh] = (uint16_t)(r0 + j);
        tau[nh] = n_amb * h->distance[j];
        if (gather_draws) {
          memcpy(wq[nh], blocks[r0 + j], sizeof wq[nh]);
        }
        if (gather_index) {
          hit_index[nh] = index[r0 + j];
        }
        nh++;
      }
    }
    transmittances(p, v->ambient, tau, nh);
    for (unsigned i = 0; i < nh; i++) {
      taur[at[i]] = tau[i];
    }
    if (noise && nh > 0) {
      if (!all_draws) {
        rng_words_n(&key, hit_index, LIDAR_DRAW_RAY, wq, nh);
      }
      lidar_noise_normal_quantiles((const uint32_t(*)[4])wq, nh, z);
      for (unsigned i = 0; i < nh; i++) {
        zr[at[i]] = z[i];
      }
    }
    for (unsigned q = 0; q < np; q++) {
      size_t r0 = (size_t)q * SCENE_PACKET;
      unsigned n = (unsigned)(m - r0 < SCENE_PACKET ? m - r0 : SCENE_PACKET);
      packet_returns(p, v, &key, &rays[q], index + r0, n, &hits[q], blocks + r0, hit[q],
                     zr + r0, taur + r0, trace_atm, &optics,
                     lean ? NULL : out + (base + r0) * maxr,
                     lean ? b->distance + base + r0 : NULL,
                     lean ? b->intensity + base + r0 : NULL, nret + base + r0);
    }
  }
}


double lidar_returns_primary_tmax(const lidar_returns_t* p, const step_view_t* v) {
  return remaining_length(p, 0.0, v->ambient->refractive_index);
}


void lidar_returns_trace(const lidar_returns_t* p, const lidar_returns_batch_t* b,
                         lidar_return_t* out, uint8_t* nret) {
  const step_view_t* v = b->view;
  const ambient_material_t* air = v->ambient;
  uint32_t maxr = p->max_returns;

  // Rays are taken in chunks whose heaps fit the node budget (64 rays up to depth 2, 36 at
  // depth 3, 2 at depth 8); each level of a chunk's heaps is traced in one call, so secondary
  // segments are traced in packets too.
  uint32_t npr = (1u << p->depth) - 1u;             // heap nodes per ray
  uint32_t ncr = 2u * npr;                          // candidates per ray
  size_t chunk = NODE_BUDGET / npr < BATCH_RAYS ? NODE_BUDGET / npr : BATCH_RAYS;
  chunk = chunk >= 16 ? chunk / 16 * 16 : chunk;   // whole packets of 16 (the caller's order)
  seg_t nodes[NODE_BUDGET];
  lidar_candidate_t cand[2 * NODE_BUDGET];
  scene_ray_t rays[NODE_BUDGET];
  scene_hit_t hits[NODE_BUDGET];
  uint16_t owner[NODE_BUDGET];                      // chunk ray of each traced segment
  uint16_t which[NODE_BUDGET];                      // its heap node
  ray_ctx_t ctx[BATCH_RAYS];
  uint32_t blocks[BATCH_RAYS][4];
  double z0[BATCH_RAYS];
  double tmax0 = lidar_returns_primary_tmax(p, v);
  optics_cache_t optics = {0};

  // every ray's first draw, at once, when most rays take it: for the distance noise of the
  // returns or the atmospheric return of the primary segment
  int eager = p->distance_noise.enabled || air->return_scaling > 0.0;
  rng_key_t key0 = {.seed = v->seed, .stream = b->sensor_id, .frame = b->frame};

  if (p->depth == 1) {
    // packets of 16 in columns, PACKETS_PER_TRACE at a time
    scene_packet_t pk[PACKETS_PER_TRACE];
    const size_t per_trace = (size_t)PACKETS_PER_TRACE * SCENE_PACKET;
    for (size_t base = 0; base < b->n; base += per_trace) {
      size_t m = b->n - base < per_trace ? b->n - base : per_trace;
      for (size_t k = 0; k < m; k++) {
        const scene_ray_t* w = &b->rays[base + k];
        scene_packet_t* c = &pk[k / SCENE_PACKET];
        size_t j = k % SCENE_PACKET;
        c->ox[j] = w->origin[0];
        c->oy[j] = w->origin[1];
        c->oz[j] = w->origin[2];
        c->dx[j] = w->dir[0];
        c->dy[j] = w->dir[1];
        c->dz[j] = w->dir[2];
        c->tmax[j] = tmax0;
        c->time[j] = w->time;
      }
      lidar_returns_packets_t part = {.view = v, .sensor_id = b->sensor_id, .frame = b->frame,
                                      .rays = pk, .ray_index = b->ray_index + base, .n = m,
                                      .filter = b->filter};
      lidar_returns_packets(p, &part, out + base * maxr, nret + base);
    }
    return;
  }
  for (size_t base = 0; base < b->n; base += chunk) {
    size_t m = b->n - base < chunk ? b->n - base : chunk;

    // primary segments, in packets (in place when their tmax is already the range)
    const scene_ray_t* prim = b->rays + base;
    int in_place = 1;
    for (size_t j = 0; j < m; j++) {
      in_place &= prim[j].tmax == tmax0;
    }
    if (!in_place) {
      for (size_t j = 0; j < m; j++) {
        rays[j] = prim[j];
        rays[j].tmax = tmax0;
      }
      prim = rays;
    }
    scene_trace(v->scene, &(scene_batch_t){.layout = SCENE_ROWS, .group = 16, .n = m,
                                            .rays = prim, .hits = hits, .filter = b->filter});
    int batch_z0 = eager && p->distance_noise.enabled;
    if (eager) {
      rng_words_n(&key0, b->ray_index + base, LIDAR_DRAW_RAY, blocks, m);
    }
    if (batch_z0) {
      lidar_noise_normal_quantiles((const uint32_t(*)[4])blocks, m, z0);
    }
    for (size_t j = 0; j < m; j++) {
      ray_ctx_t* r = &ctx[j];
      r->p = p;
      r->v = v;
      r->optics = &optics;
      r->key = key0;
      r->key.index = b->ray_index[base + j];
      r->time = prim[j].time;
      r->block = blocks[j];
      r->has_block = eager;
      r->z0 = batch_z0 ? &z0[j] : NULL;
      r->nodes = &nodes[j * npr];
      r->cand = &cand[j * ncr];
      r->ncand = 0;
      for (uint32_t k = 1; k < npr; k++) {
        r->nodes[k].valid = 0;
      }
      root_segment(&r->nodes[0], prim[j].origin, prim[j].dir, air);
      eval_node(r, 0, &r->nodes[0], &hits[j], 1);
    }

    // deeper levels: the valid segments of every ray of the chunk, traced together
    for (uint32_t level = 1; level < p->depth; level++) {
      uint32_t first = (1u << level) - 1u;
      uint32_t last = (1u << (level + 1)) - 1u;
      size_t n = 0;
      for (size_t j = 0; j < m; j++) {
        for (uint32_t i = first; i < last; i++) {
          const seg_t* s = &ctx[j].nodes[i];
          double tmax = s->valid ? remaining_length(p, s->x0, s->medium->refractive_index) : 0.0;
          if (!(tmax > 0.0)) {
            continue;
          }
          memcpy(rays[n].origin, s->origin, sizeof rays[n].origin);
          memcpy(rays[n].dir, s->dir, sizeof rays[n].dir);
          rays[n].tmax = tmax;
          rays[n].time = ctx[j].time;
          owner[n] = (uint16_t)j;
          which[n] = (uint16_t)i;
          n++;
        }
      }
      if (n == 0) {
        break;
      }
      scene_trace(v->scene, &(scene_batch_t){.layout = SCENE_ROWS, .n = n, .rays = rays,
                                              .hits = hits, .filter = b->filter});
      int children = level + 1 < p->depth;
      for (size_t k = 0; k < n; k++) {
        ray_ctx_t* r = &ctx[owner[k]];
        eval_node(r, which[k], &r->nodes[which[k]], &hits[k], children);
      }
    }

    // selection, then the detection distance noise of each reported return
    for (size_t j = 0; j < m; j++) {
      size_t i = base + j;
      nret[i] = (uint8_t)ray_finish(p, &ctx[j], &out[i * maxr]);
    }
  }
}
