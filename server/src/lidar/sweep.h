// SPDX-License-Identifier: MIT
// sweep.h: sweep time stepping (docs/models/lidar.md, "Sweep timing"): which rays of a pattern
// a step fires, and where the sensor is when each fires. A step over (t0, t1] fires exactly the
// rays whose firing time t_s + t(g, k) falls in it, however long the step: a lidar keeps a
// cursor on the next ray to fire, so a revolution assembled from 1, 10 or 1000 steps holds the
// same rays. The sensor pose at a ray's time is its body's pose interpolated to that time (lerp
// of the origin, slerp of the orientation) with the mount composed rigidly on it.
//
// Thread: pure functions; any thread.
#ifndef SENSIM_LIDAR_SWEEP_H_
#define SENSIM_LIDAR_SWEEP_H_

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "base/xform.h"
#include "lidar/pattern.h"
#include "scene/scene.h"
#include "sensor/view.h"

// The next ray to fire: ray `ray` of group `group` (linear index group * nray + ray).
typedef uint64_t lidar_cursor_t;

// First ray whose firing time t_s + t is >= t (absolute s).
lidar_cursor_t lidar_sweep_seek(const lidar_pattern_t* p, double t_s, double t);

// Whether the ray at cursor c fires at or before t_end (absolute s).
int lidar_sweep_fired(const lidar_pattern_t* p, double t_s, lidar_cursor_t c, double t_end);

// The rays [c, c + n) that fire at or before t_end, all in the sweep of ray c, n <= max.
// Returns n (0 when ray c fires after t_end).
size_t lidar_sweep_take(const lidar_pattern_t* p, double t_s, lidar_cursor_t c, double t_end,
                        size_t max);

// Sweep of the ray at cursor c.
uint64_t lidar_sweep_of(const lidar_pattern_t* p, lidar_cursor_t c);

// Ray at cursor c. Output: out.
void lidar_sweep_ray(const lidar_pattern_t* p, lidar_cursor_t c, lidar_pattern_ray_t* out);

// The n rays from cursor c. Output: out (n).
void lidar_sweep_rays(const lidar_pattern_t* p, lidar_cursor_t c, size_t n,
                      lidar_pattern_ray_t* out);

// The same through lidar_pattern_rays_lean (time, index, origin and direction only).
void lidar_sweep_rays_lean(const lidar_pattern_t* p, lidar_cursor_t c, size_t n,
                           lidar_pattern_ray_t* out);

// The sensor's world pose at fraction s of the step, with its rotation matrix.
typedef struct lidar_sweep_pose {
  double s;                     // fraction of the step
  pose_t pose;                  // world <- sensor
  double rot[9];                // R(pose.q), row-major
} lidar_sweep_pose_t;

// Pose of a sensor mounted at `mount` on `body` (NULL = the world) at fraction s.
void lidar_sweep_pose(const view_body_t* body, const pose_t* mount, double s,
                      lidar_sweep_pose_t* out);

// World ray from a sensor-frame origin and unit direction at pose `ps`: origin = p + R o,
// dir = R d, time = ps->s, tmax = +inf. (Inline: it runs once per ray.)
static inline void lidar_sweep_world_ray(const lidar_sweep_pose_t* ps, const double origin[3],
                                         const double dir[3], scene_ray_t* out) {
  const double* r = ps->rot;
  for (int i = 0; i < 3; i++) {
    out->origin[i] = ps->pose.p[i] + r[3 * i] * origin[0] + r[3 * i + 1] * origin[1] +
                     r[3 * i + 2] * origin[2];
    out->dir[i] = r[3 * i] * dir[0] + r[3 * i + 1] * dir[1] + r[3 * i + 2] * dir[2];
  }
  out->tmax = INFINITY;
  out->time = ps->s;
}

// lidar_sweep_world_ray of a packet's SCENE_PACKET rays at one pose, in place: their
// sensor-frame origins and unit directions become world ones (the same arithmetic per lane,
// vectorised for the CPU's widest vectors). tmax and time are left as they are.
void lidar_sweep_world_packet(const lidar_sweep_pose_t* ps, scene_packet_t* pk);

#endif  // SENSIM_LIDAR_SWEEP_H_
