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

// Lane k of packet pk: origin o and direction d. (Inline: inside vectorised loops.)
static inline void lidar_sweep_packet_put(scene_packet_t* pk, unsigned k, const double o[3],
                                          const double d[3]) {
  pk->ox[k] = o[0];
  pk->oy[k] = o[1];
  pk->oz[k] = o[2];
  pk->dx[k] = d[0];
  pk->dy[k] = d[1];
  pk->dz[k] = d[2];
}

// lidar_sweep_world_ray of a packet's SCENE_PACKET rays at one pose, in place: their
// sensor-frame origins and unit directions become world ones (the same arithmetic per lane,
// vectorised for the CPU's widest vectors). tmax and time are left as they are.
void lidar_sweep_world_packet(const lidar_sweep_pose_t* ps, scene_packet_t* pk);

//---------------- Rays in packets from tables

// What the rays of a whole chunk of groups (a chunk that starts at a group's first ray) keep
// from chunk to chunk, laid out in trace order: each ray's trigonometry and time offset (they
// depend on its ray k only), its firing position in the chunk, and the group of each lane of a
// packet, the same in every packet (a tile of LIDAR_TILE_RAYS rays of consecutive groups: the
// groups of a chunk differ only by their rotor azimuth and start time). Built once at create;
// a chunk's rays are then read from these tables in trace order, their group's rotor applied,
// and turned to the world, packet by packet (lidar_sweep_lane_packets).
typedef struct lidar_sweep_lanes {
  size_t n;                     // rays of the chunk, a multiple of SCENE_PACKET; 0: no tables
  uint32_t ngroup;              // groups of the chunk
  uint32_t* at;                 // (n) firing position in the chunk of each trace position
  double* ce;                   // (n) the ray's lidar_trig_t values (below) and time offset
  double* se;
  double* coff;
  double* soff;
  double* cdt;
  double* sdt;
  double* toff;
  uint32_t group[SCENE_PACKET]; // group of each lane, from the chunk's first
} lidar_sweep_lanes_t;

// The tables of pattern p's chunks of n rays of whole groups, traced in the order `slot` (trace
// position of each firing position, a permutation of [0, n)). When the lanes of the packets do
// not all hold the same groups (or n is not a multiple of SCENE_PACKET), or p is a
// LIDAR_PATTERN_LIVOX pattern or has vertical offsets (none of those is traced in tiles) there
// are no tables: l->n = 0, and the chunk's rays are made ray by ray. ERR_NOMEM.
int lidar_sweep_lanes_init(lidar_sweep_lanes_t* l, const lidar_pattern_t* p, const uint32_t* slot,
                           size_t n, err_msg_t* msg) CHECKRET;

void lidar_sweep_lanes_close(lidar_sweep_lanes_t* l);

// Where a chunk's rays go: their step fraction s = clamp(inv_dt (s_origin + time), 0, 1) (time
// after t_s, the pattern's), their tmax, and the pose of every ray when the sensor does not move
// (NULL: the caller turns them to the world at their own poses).
typedef struct lidar_sweep_frame {
  double inv_dt;
  double s_origin;
  double tmax;
  const lidar_sweep_pose_t* fixed;
} lidar_sweep_frame_t;

// The l->n rays of the chunk whose first ray is ray 0 of group g, in trace order: their
// sensor-frame origins and directions (the values lidar_pattern_rays gives) into `local`, the
// same turned to the world at f->fixed, with their step fractions and tmax, into `world` (with
// f->fixed; without, the step fractions and tmax go into `local` for the caller's poses), and
// their indices within the sweep into `index`. Fewer stores, less memory traffic: a pattern
// without a beam-origin radius has origins 0, which are not written (`local` starts zeroed and
// keeps them), nor are local's step fractions and tmax with f->fixed. With f->fixed, `local`
// may be NULL: nothing in the sensor frame is stored (a caller that needs those rays aims them
// again from the tables, lidar_sweep_lane_aim, for a fraction of the stores and loads).
// Output: local, world (l->n / SCENE_PACKET), index (l->n).
void lidar_sweep_lane_packets(const lidar_pattern_t* p, const lidar_sweep_lanes_t* l, uint64_t g,
                              const lidar_sweep_frame_t* f, scene_packet_t* local,
                              scene_packet_t* world, uint64_t* index);

// The sensor-frame direction and origin of the ray at trace position i of a chunk of lanes l,
// the chunk's groups in gr (l->ngroup, from the chunk's first): the very values
// lidar_sweep_lane_packets stores into `local` (the same arithmetic on the same inputs). Inline:
// it runs once per ray.
static inline void lidar_sweep_lane_aim(const lidar_sweep_lanes_t* l,
                                        const lidar_pattern_group_t* gr, double radius, size_t i,
                                        double dir[3], double origin[3]) {
  const lidar_pattern_group_t* g = &gr[l->group[i % SCENE_PACKET]];
  lidar_pattern_aim(g->cr, g->sr, l->ce[i], l->se[i], l->coff[i], l->soff[i], l->cdt[i],
                    l->sdt[i], 0.0, 0, radius, radius > 0.0, dir, origin);
}

// The poses of a packet's lanes: lane k's ray turns at rotation r[.][k] (row-major) and
// translation p[.][k].
typedef struct lidar_sweep_lane_poses {
  double r[9][SCENE_PACKET];
  double p[3][SCENE_PACKET];
} lidar_sweep_lane_poses_t;

// Set lane k of lp to pose ps.
void lidar_sweep_lane_pose(lidar_sweep_lane_poses_t* lp, unsigned k, const lidar_sweep_pose_t* ps);

// Packet `in`'s sensor-frame rays turned to the world each at its lane's pose
// (lidar_sweep_world_ray's arithmetic, vectorised), their time and tmax copied. Output: out.
void lidar_sweep_turn_lanes(const lidar_sweep_lane_poses_t* lp, const scene_packet_t* in,
                            scene_packet_t* out);

#endif  // SENSIM_LIDAR_SWEEP_H_
