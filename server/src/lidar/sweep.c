// SPDX-License-Identifier: MIT
// sweep.c: which rays a step fires and the sensor pose at each (see sweep.h).
#include "lidar/sweep.h"

#include <math.h>
#include <string.h>

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


// The same arithmetic across SIMD lanes (its forms: base/simd.h), in place: each lane's six
// inputs are read before its outputs are written, and the packet's rows are distinct members,
// so the compiler vectorises the loop (through an array of pointers to the rows, or with the
// pose read through a pointer, it did not: about 50 instructions a ray).
static inline SIMD_BODY void world_packet(const lidar_sweep_pose_t* ps, scene_packet_t* pk) {
  double r[9], p[3];   // copies: stores into the packet cannot change them
  memcpy(r, ps->rot, sizeof r);
  memcpy(p, ps->pose.p, sizeof p);
  for (unsigned k = 0; k < SCENE_PACKET; k++) {
    const double o0 = pk->ox[k], o1 = pk->oy[k], o2 = pk->oz[k];
    const double d0 = pk->dx[k], d1 = pk->dy[k], d2 = pk->dz[k];
    pk->ox[k] = p[0] + r[0] * o0 + r[1] * o1 + r[2] * o2;
    pk->oy[k] = p[1] + r[3] * o0 + r[4] * o1 + r[5] * o2;
    pk->oz[k] = p[2] + r[6] * o0 + r[7] * o1 + r[8] * o2;
    pk->dx[k] = r[0] * d0 + r[1] * d1 + r[2] * d2;
    pk->dy[k] = r[3] * d0 + r[4] * d1 + r[5] * d2;
    pk->dz[k] = r[6] * d0 + r[7] * d1 + r[8] * d2;
  }
}

SIMD_FORMS(world_packet, (const lidar_sweep_pose_t* ps, scene_packet_t* pk), (ps, pk))


void lidar_sweep_world_packet(const lidar_sweep_pose_t* ps, scene_packet_t* pk) {
  SIMD_CALL(world_packet, (ps, pk));
}
