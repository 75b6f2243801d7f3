// SPDX-License-Identifier: MIT
// sweep.c: which rays a step fires and the sensor pose at each (see sweep.h).
#include "lidar/sweep.h"

#include <math.h>
#include <string.h>

#include "base/mem.h"
#include "base/simd.h"


// Firing time of the ray at cursor c, absolute.
static double fire_time(const lidar_pattern_t* p, double t_s, lidar_cursor_t c) {
  return t_s + lidar_pattern_time(p, c / p->nray, (uint32_t)(c % p->nray));
}


int lidar_sweep_fired(const lidar_pattern_t* p, double t_s, lidar_cursor_t c, double t_end) {
  return fire_time(p, t_s, c) <= t_end;
}


lidar_cursor_t lidar_sweep_seek(const lidar_pattern_t* p, double t_s, double t) {
  // bracket by the group estimate (bounded so that cursors stay far from 2^64: with times
  // bounded to 1e9 s no pattern gets near it), widened by doubling steps, then bisect on the
  // exact firing times; every loop is bounded, even where times no longer resolve a group
  if (!(t > t_s)) {
    return 0;
  }
  double gmax = 4611686018427387904.0 / p->nray;   // 2^62 rays
  double est = floor((t - t_s) / p->group_period);
  uint64_t g = est > 0.0 ? (est < gmax ? (uint64_t)est : (uint64_t)gmax) : 0;
  lidar_cursor_t lo = g > 1 ? (g - 2) * p->nray : 0;
  lidar_cursor_t step = p->nray;
  for (int i = 0; i < 64 && lo > 0 && fire_time(p, t_s, lo) >= t; i++) {
    lo = lo > step ? lo - step : 0;
    step *= 2;
  }
  lidar_cursor_t hi = (g + 2) * p->nray;
  step = p->nray;
  for (int i = 0; i < 64 && fire_time(p, t_s, hi) < t && hi < ((lidar_cursor_t)1 << 62); i++) {
    hi += step;
    step *= 2;
  }
  if (fire_time(p, t_s, hi) < t) {
    return hi;   // out of reach (not with bounded times): no ray before it is left to fire
  }
  if (lo > 0 && fire_time(p, t_s, lo) >= t) {
    lo = 0;
  }

  // smallest c in [lo, hi] with fire_time >= t
  if (fire_time(p, t_s, lo) >= t) {
    return lo;
  }
  while (hi - lo > 1) {
    lidar_cursor_t mid = lo + (hi - lo) / 2;
    if (fire_time(p, t_s, mid) >= t) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return hi;
}


uint64_t lidar_sweep_of(const lidar_pattern_t* p, lidar_cursor_t c) {
  return lidar_pattern_sweep_of(p, c / p->nray);
}


size_t lidar_sweep_take(const lidar_pattern_t* p, double t_s, lidar_cursor_t c, double t_end,
                        size_t max) {
  // the candidates: up to max rays, not past the end of c's sweep
  if (max == 0 || !lidar_sweep_fired(p, t_s, c, t_end)) {
    return 0;
  }
  uint64_t sweep = lidar_sweep_of(p, c);
  lidar_cursor_t end = lidar_pattern_first_group(p, sweep + 1) * p->nray;
  if (end - c > max) {
    end = c + max;
  }
  if (lidar_sweep_fired(p, t_s, end - 1, t_end)) {
    return (size_t)(end - c);
  }

  // firing times increase along the cursor: bisect for the last ray fired
  lidar_cursor_t lo = c, hi = end - 1;   // fired(lo), !fired(hi)
  while (hi - lo > 1) {
    lidar_cursor_t mid = lo + (hi - lo) / 2;
    if (lidar_sweep_fired(p, t_s, mid, t_end)) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return (size_t)(hi - c);
}


void lidar_sweep_ray(const lidar_pattern_t* p, lidar_cursor_t c, lidar_pattern_ray_t* out) {
  lidar_pattern_ray(p, c / p->nray, (uint32_t)(c % p->nray), out);
}


void lidar_sweep_rays(const lidar_pattern_t* p, lidar_cursor_t c, size_t n,
                      lidar_pattern_ray_t* out) {
  lidar_pattern_rays(p, c / p->nray, (uint32_t)(c % p->nray), n, out);
}


void lidar_sweep_rays_lean(const lidar_pattern_t* p, lidar_cursor_t c, size_t n,
                           lidar_pattern_ray_t* out) {
  lidar_pattern_rays_lean(p, c / p->nray, (uint32_t)(c % p->nray), n, out);
}


void lidar_sweep_pose(const view_body_t* body, const pose_t* mount, double s,
                      lidar_sweep_pose_t* out) {
  out->s = s;
  out->pose = view_mount_pose(body, mount, s);
  xform_quat_to_mat(out->pose.q, out->rot);
}


// A sensor-frame origin o and direction d turned to the world by rotation r (row-major) and
// translation p: the arithmetic of lidar_sweep_world_ray.
static inline void turn(const double r[9], const double p[3], const double o[3],
                        const double d[3], double wo[3], double wd[3]) {
  wo[0] = p[0] + r[0] * o[0] + r[1] * o[1] + r[2] * o[2];
  wo[1] = p[1] + r[3] * o[0] + r[4] * o[1] + r[5] * o[2];
  wo[2] = p[2] + r[6] * o[0] + r[7] * o[1] + r[8] * o[2];
  wd[0] = r[0] * d[0] + r[1] * d[1] + r[2] * d[2];
  wd[1] = r[3] * d[0] + r[4] * d[1] + r[5] * d[2];
  wd[2] = r[6] * d[0] + r[7] * d[1] + r[8] * d[2];
}


// The same arithmetic across SIMD lanes (its forms: base/simd.h), in place: each lane's six
// inputs are read before its outputs are written, and the packet's rows are distinct members,
// so the compiler vectorises the loop (through an array of pointers to the rows, or with the
// pose read through a pointer, it did not: about 50 instructions a ray).
static inline SIMD_BODY void world_packet(const lidar_sweep_pose_t* ps, scene_packet_t* pk) {
  double r[9], p[3];   // copies: stores into the packet cannot change them
  memcpy(r, ps->rot, sizeof r);
  memcpy(p, ps->pose.p, sizeof p);
  for (unsigned k = 0; k < SCENE_PACKET; k++) {
    const double o[3] = {pk->ox[k], pk->oy[k], pk->oz[k]};
    const double d[3] = {pk->dx[k], pk->dy[k], pk->dz[k]};
    double wo[3], wd[3];
    turn(r, p, o, d, wo, wd);
    lidar_sweep_packet_put(pk, k, wo, wd);
  }
}

SIMD_FORMS(world_packet, (const lidar_sweep_pose_t* ps, scene_packet_t* pk), (ps, pk))


void lidar_sweep_world_packet(const lidar_sweep_pose_t* ps, scene_packet_t* pk) {
  SIMD_CALL(world_packet, (ps, pk));
}


//---------------- Rays in packets from tables

void lidar_sweep_lanes_close(lidar_sweep_lanes_t* l) {
  mem_free(l->at);
  mem_free(l->ce);   // the block of every table of doubles
  memset(l, 0, sizeof *l);
}


int lidar_sweep_lanes_init(lidar_sweep_lanes_t* l, const lidar_pattern_t* p, const uint32_t* slot,
                           size_t n, err_msg_t* msg) {
  memset(l, 0, sizeof *l);
  const uint32_t K = p->nray;
  if (p->kind == LIDAR_PATTERN_LIVOX || p->vertical_offset || n == 0 || n % SCENE_PACKET ||
      n % K || n / K > SCENE_PACKET) {
    return 0;
  }
  uint32_t* at = mem_alloc(n * sizeof *at);
  if (!at) {
    return err_set(msg, ERR_NOMEM, "lidar: out of memory for the tables of its rays");
  }
  for (size_t j = 0; j < n; j++) {
    at[slot[j]] = (uint32_t)j;
  }
  for (size_t i = 0; i < n; i++) {
    if (at[i] / K != at[i % SCENE_PACKET] / K) {
      mem_free(at);   // lanes of different packets hold different groups: no tables
      return 0;
    }
  }
  double* block = mem_alloc(7 * n * sizeof *block);
  if (!block) {
    mem_free(at);
    return err_set(msg, ERR_NOMEM, "lidar: out of memory for the tables of its rays");
  }
  l->n = n;
  l->ngroup = (uint32_t)(n / K);
  l->at = at;
  double** tab[] = {&l->ce, &l->se, &l->coff, &l->soff, &l->cdt, &l->sdt, &l->toff};
  for (size_t t = 0; t < sizeof tab / sizeof tab[0]; t++) {
    *tab[t] = block + t * n;
  }
  for (size_t i = 0; i < n; i++) {
    const uint32_t k = at[i] % K;
    const double* t = &p->trig[(size_t)k * LIDAR_TRIG_N];
    l->ce[i] = t[LIDAR_TRIG_CE];
    l->se[i] = t[LIDAR_TRIG_SE];
    l->coff[i] = t[LIDAR_TRIG_COFF];
    l->soff[i] = t[LIDAR_TRIG_SOFF];
    l->cdt[i] = t[LIDAR_TRIG_CDT];
    l->sdt[i] = t[LIDAR_TRIG_SDT];
    l->toff[i] = p->time_offset[k];
  }
  for (unsigned k = 0; k < SCENE_PACKET; k++) {
    l->group[k] = at[k] / K;
  }
  return 0;
}


// Per lane of a chunk's packets: its group's rotor (cos, sin) and start time.
typedef struct lane_groups {
  double cr[SCENE_PACKET];
  double sr[SCENE_PACKET];
  double tg[SCENE_PACKET];
} lane_groups_t;


// lidar_sweep_lane_packets's rays: per lane the arithmetic of lidar_pattern_rays
// (lidar_pattern_aim, the time), the step fraction of lidar.c's rays, clamped as it does, and
// with `world_too`, lidar_sweep_world_ray's turn at f->fixed, on the tables' rows and the
// lanes' groups. With constant flags there is no condition in the loop and the compiler
// vectorises the lanes.
static inline SIMD_BODY void lane_packets(const lidar_sweep_lanes_t* l, const lane_groups_t* lg,
                                          double radius, const lidar_sweep_frame_t* f,
                                          scene_packet_t* restrict local,
                                          scene_packet_t* restrict world, const int has_radius,
                                          const int world_too, const int local_too) {
  lane_groups_t g = *lg;   // copies: stores into the packets cannot change them
  const double inv_dt = f->inv_dt, s_origin = f->s_origin, tmax = f->tmax;
  double r[9] = {0}, p[3] = {0};
  if (world_too) {
    memcpy(r, f->fixed->rot, sizeof r);
    memcpy(p, f->fixed->pose.p, sizeof p);
  }
  const double* restrict ce = l->ce;
  const double* restrict se = l->se;
  const double* restrict coff = l->coff;
  const double* restrict soff = l->soff;
  const double* restrict cdt = l->cdt;
  const double* restrict sdt = l->sdt;
  const double* restrict toff = l->toff;
  const size_t npk = l->n / SCENE_PACKET;
  for (size_t q = 0; q < npk; q++) {
    scene_packet_t* restrict lo = local_too ? &local[q] : NULL;
    scene_packet_t* restrict wp = &world[q];
    const size_t i0 = q * SCENE_PACKET;
    for (unsigned k = 0; k < SCENE_PACKET; k++) {
      const size_t i = i0 + k;
      double o[3], d[3];
      lidar_pattern_aim(g.cr[k], g.sr[k], ce[i], se[i], coff[i], soff[i], cdt[i], sdt[i], 0.0,
                        0, radius, has_radius, d, o);
      // clamped to [0, 1] as lidar.c does (NaN and -0 to 0): written as a maximum then a
      // minimum, which the compiler vectorises (x86's max and min take exactly these
      // comparisons), where a select under a condition it does not
      const double s0 = inv_dt * (s_origin + (g.tg[k] + toff[i]));
      const double s1 = s0 > 0.0 ? s0 : 0.0;
      const double s = s1 < 1.0 ? s1 : 1.0;
      // the sensor frame: the directions; the origins when they are not 0; the times for the
      // caller's poses when it turns the rays itself
      if (local_too) {
        lo->dx[k] = d[0];
        lo->dy[k] = d[1];
        lo->dz[k] = d[2];
      }
      if (local_too && has_radius) {
        lo->ox[k] = o[0];
        lo->oy[k] = o[1];
        lo->oz[k] = o[2];
      }
      if (!world_too) {
        lo->time[k] = s;
        lo->tmax[k] = tmax;
      }
      if (world_too) {
        double wo[3], wd[3];
        turn(r, p, o, d, wo, wd);
        wp->time[k] = s;
        wp->tmax[k] = tmax;
        lidar_sweep_packet_put(wp, k, wo, wd);
      }
    }
  }
}

#define LANE_PARAMS                                                                      \
  (const lidar_sweep_lanes_t* l, const lane_groups_t* lg, double radius,                 \
   const lidar_sweep_frame_t* f, scene_packet_t* restrict local,                         \
   scene_packet_t* restrict world)
#define LANE_ARGS (l, lg, radius, f, local, world)

// The kernel's six cases (their forms: base/simd.h): with a beam-origin radius or without,
// the sensor frame alone, the world too, or the world alone.
#define LANE_KERNEL(name, has_radius, world_too, local_too)                        \
  static inline SIMD_BODY void name LANE_PARAMS {                                  \
    lane_packets(l, lg, radius, f, local, world, has_radius, world_too, local_too); \
  }                                                                                \
  SIMD_FORMS(name, LANE_PARAMS, LANE_ARGS)
LANE_KERNEL(lanes_local, 0, 0, 1)
LANE_KERNEL(lanes_world, 0, 1, 1)
LANE_KERNEL(lanes_world_only, 0, 1, 0)
LANE_KERNEL(lanes_local_radius, 1, 0, 1)
LANE_KERNEL(lanes_world_radius, 1, 1, 1)
LANE_KERNEL(lanes_world_only_radius, 1, 1, 0)


// Each lane's index: its packet lane's base plus its firing position, across SIMD lanes (its
// forms: base/simd.h; read through the struct, the positions were loaded and added one by one:
// about 3 instructions a ray).
static inline SIMD_BODY void lane_indices(const uint64_t* restrict base,
                                          const uint32_t* restrict at, size_t n,
                                          uint64_t* restrict index) {
  uint64_t b[SCENE_PACKET];
  memcpy(b, base, sizeof b);
  for (size_t q = 0; q < n; q += SCENE_PACKET) {
    for (unsigned k = 0; k < SCENE_PACKET; k++) {
      index[q + k] = b[k] + at[q + k];
    }
  }
}

SIMD_FORMS(lane_indices,
           (const uint64_t* restrict base, const uint32_t* restrict at, size_t n,
            uint64_t* restrict index),
           (base, at, n, index))


void lidar_sweep_lane_packets(const lidar_pattern_t* p, const lidar_sweep_lanes_t* l, uint64_t g,
                              const lidar_sweep_frame_t* f, scene_packet_t* local,
                              scene_packet_t* world, uint64_t* index) {
  // the chunk's groups (every one is in the lanes of a packet: at most SCENE_PACKET), then
  // each lane's
  lidar_pattern_group_t gr[SCENE_PACKET];
  for (uint32_t c = 0; c < l->ngroup; c++) {
    lidar_pattern_group(p, g + c, &gr[c]);
  }
  lane_groups_t lg;
  uint64_t base[SCENE_PACKET];   // index of a lane's ray less its firing position in the chunk
  const uint32_t K = p->nray;
  for (unsigned k = 0; k < SCENE_PACKET; k++) {
    const uint32_t c = l->group[k];
    lg.cr[k] = gr[c].cr;
    lg.sr[k] = gr[c].sr;
    lg.tg[k] = gr[c].t_group;
    base[k] = (g + c - gr[c].first) * K - (uint64_t)c * K;
  }
  const double radius = p->beam_origin_radius;
  if (f->fixed && !local && radius > 0.0) {
    SIMD_CALL(lanes_world_only_radius, (l, &lg, radius, f, local, world));
  } else if (f->fixed && !local) {
    SIMD_CALL(lanes_world_only, (l, &lg, radius, f, local, world));
  } else if (f->fixed && radius > 0.0) {
    SIMD_CALL(lanes_world_radius, (l, &lg, radius, f, local, world));
  } else if (f->fixed) {
    SIMD_CALL(lanes_world, (l, &lg, radius, f, local, world));
  } else if (radius > 0.0) {
    SIMD_CALL(lanes_local_radius, (l, &lg, radius, f, local, world));
  } else {
    SIMD_CALL(lanes_local, (l, &lg, radius, f, local, world));
  }
  SIMD_CALL(lane_indices, (base, l->at, l->n, index));
}


void lidar_sweep_lane_pose(lidar_sweep_lane_poses_t* lp, unsigned k, const lidar_sweep_pose_t* ps) {
  for (int a = 0; a < 9; a++) {
    lp->r[a][k] = ps->rot[a];
  }
  for (int a = 0; a < 3; a++) {
    lp->p[a][k] = ps->pose.p[a];
  }
}


// lidar_sweep_turn_lanes (its forms: base/simd.h): turn's arithmetic with each lane's own
// rotation and translation.
static inline SIMD_BODY void turn_lanes(const lidar_sweep_lane_poses_t* restrict lp,
                                        const scene_packet_t* restrict in,
                                        scene_packet_t* restrict out) {
  for (unsigned k = 0; k < SCENE_PACKET; k++) {
    const double r[9] = {lp->r[0][k], lp->r[1][k], lp->r[2][k], lp->r[3][k], lp->r[4][k],
                         lp->r[5][k], lp->r[6][k], lp->r[7][k], lp->r[8][k]};
    const double p[3] = {lp->p[0][k], lp->p[1][k], lp->p[2][k]};
    const double o[3] = {in->ox[k], in->oy[k], in->oz[k]};
    const double d[3] = {in->dx[k], in->dy[k], in->dz[k]};
    double wo[3], wd[3];
    turn(r, p, o, d, wo, wd);
    out->time[k] = in->time[k];
    out->tmax[k] = in->tmax[k];
    lidar_sweep_packet_put(out, k, wo, wd);
  }
}

SIMD_FORMS(turn_lanes,
           (const lidar_sweep_lane_poses_t* restrict lp, const scene_packet_t* restrict in,
            scene_packet_t* restrict out),
           (lp, in, out))


void lidar_sweep_turn_lanes(const lidar_sweep_lane_poses_t* lp, const scene_packet_t* in,
                            scene_packet_t* out) {
  SIMD_CALL(turn_lanes, (lp, in, out));
}
