// SPDX-License-Identifier: MIT
// returns.h: the lidar raytrace process and return selection (docs/models/lidar.md): every
// primary ray is traced into a binary heap of segments (reflection child 2i+1, transmission
// child 2i+2, up to depth D), each surface interface and each segment's medium gives return
// candidates with a relative intensity (surface backscatter, Beer-Lambert attenuation,
// interface weights, beam divergence), and the return mode picks the reported ones (strongest,
// first, last, dual, all); detection distance noise is applied last. Points lie along the
// emission direction at the optical path length of their return, so a return seen through a
// mirror appears behind the mirror (the "ghost" of a real lidar).
//
// Primary rays are traced in packets of 16 consecutive rays of the batch (the caller orders them
// in compact tiles): at depth 1 in columns (scene_trace of SCENE_COLUMNS, lidar_returns_packets),
// deeper in rows (SCENE_ROWS in groups of 16) and then each level of deeper segments of the
// batch in one call (SCENE_ROWS). Tracing allocates nothing and cannot fail.
//
// Thread: lidar_returns_t is read-only after init; lidar_returns_trace runs on any number of
// threads at once (disjoint outputs), after the scene is committed.
#ifndef SENSIM_LIDAR_RETURNS_H_
#define SENSIM_LIDAR_RETURNS_H_

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "lidar/divergence.h"
#include "lidar/noise.h"
#include "scene/scene.h"
#include "sensor/view.h"

#define LIDAR_MAX_DEPTH 8               // D: the heap of one ray holds 2^D - 1 = 255 nodes
#define LIDAR_MAX_RETURNS 255           // max_returns of LIDAR_RETURN_ALL

typedef enum lidar_return_mode {
  LIDAR_RETURN_STRONGEST = 0,   // the largest intensity (ties: smaller distance, then node)
  LIDAR_RETURN_FIRST,           // the smallest optical path length
  LIDAR_RETURN_LAST,            // the largest optical path length
  LIDAR_RETURN_DUAL,            // strongest and last (second strongest when they coincide)
  LIDAR_RETURN_ALL,             // up to max_returns by decreasing intensity
} lidar_return_mode_t;

// Configuration as it arrives from the client (wire translation fills it).
typedef struct lidar_returns_desc {
  uint32_t depth;                       // D in [1, LIDAR_MAX_DEPTH]; 0 = default 1
  lidar_return_mode_t mode;
  uint32_t max_returns;                 // LIDAR_RETURN_ALL: [1, LIDAR_MAX_RETURNS]; 0 = every
                                        //   candidate (2 (2^D - 1), at most 255)
  double intensity_threshold;           // I_min >= 0: candidates with I <= I_min are dropped
  int round_trip;                       // square the attenuation and interface weights
  double range_min;                     // m, >= 0 (0.1 is the usual default)
  double range_max;                     // m, > range_min; +inf = unlimited
  lidar_beam_desc_t beam;
  lidar_distance_noise_desc_t distance_noise;
} lidar_returns_desc_t;

// Validated configuration.
typedef struct lidar_returns {
  uint32_t depth;
  lidar_return_mode_t mode;
  uint32_t max_returns;                 // returns per ray written by lidar_returns_trace
  uint32_t max_candidates;              // per ray, all modes
  double intensity_threshold;
  int round_trip;
  double range_min;
  double range_max;
  lidar_beam_t beam;
  lidar_distance_noise_t distance_noise;
} lidar_returns_t;

// Validate d and fill p. ERR_INVAL naming the field under "lidar." (e.g. "lidar.raytrace_depth
// = 9 is outside [1, 8]", "lidar.beam.divergence = nan is not finite"); p untouched on failure.
int lidar_returns_init(lidar_returns_t* p, const lidar_returns_desc_t* d, err_msg_t* msg)
    CHECKRET;

// Returns per ray that lidar_returns_trace may write: 1 (strongest, first, last), 2 (dual),
// max_returns (all).
uint32_t lidar_returns_max(const lidar_returns_t* p);

// One reported return.
// Farthest distance a return may report (after distance noise), m: points are float32.
#define LIDAR_MAX_DISTANCE 1e30

typedef struct lidar_return {
  double distance;              // m: optical path length of the return after distance noise;
                                //   the point is origin + dir * distance (emission direction)
  double intensity;             // relative (emitted = 1), 1/sr, > I_min
  double normal[3];             // unit, world frame, facing the incoming segment; 0 for an
                                //   atmospheric return
  uint32_t object_id;           // object of a surface return; 0 for an atmospheric return
  uint32_t label;
  uint16_t index;               // 0-based position among the ray's candidates in OPL order
  uint16_t count;               // candidates of the ray (after range and threshold filters)
  uint8_t atmospheric;          // 1: return from the medium (fog, rain, ...)
} lidar_return_t;

// A batch of primary rays of one sensor frame.
typedef struct lidar_returns_batch {
  const step_view_t* view;      // committed scene, materials, ambient medium, seed
  uint32_t sensor_id;           // rng stream
  uint64_t frame;               // rng frame
  const scene_ray_t* rays;      // (n) world frame, origin = emission point, dir unit, time =
                                //   fraction of the step; tmax is ignored (range_max rules; see
                                //   lidar_returns_primary_tmax)
  const uint64_t* ray_index;    // (n) rng index of each ray (unique within the frame)
  size_t n;
  const scene_filter_t* filter; // objects the rays do not see (nullable: none)
} lidar_returns_batch_t;

// The length of the primary rays' trace (range_max in the view's ambient medium). Rays that
// come with it as their tmax are traced in place, without a copy.
double lidar_returns_primary_tmax(const lidar_returns_t* p, const step_view_t* v);

// Trace the batch: ray i writes its returns, in increasing OPL order (before noise), to
// out[i * lidar_returns_max(p) ...] and their number (0 = miss) to nret[i]. Uses about 100 KB
// of stack and no heap.
// Output: out (n x lidar_returns_max(p)), nret (n).
// Thread: any, concurrently on disjoint outputs.
void lidar_returns_trace(const lidar_returns_t* p, const lidar_returns_batch_t* b,
                         lidar_return_t* out, uint8_t* nret);

// Primary rays of one sensor frame in packets of columns (the lidar's own tiles).
typedef struct lidar_returns_packets {
  const step_view_t* view;
  uint32_t sensor_id;           // rng stream
  uint64_t frame;               // rng frame
  const scene_packet_t* rays;   // ray i is lane i % SCENE_PACKET of packet i / SCENE_PACKET: as
                                //   lidar_returns_batch_t.rays, each tmax
                                //   lidar_returns_primary_tmax
  const uint64_t* ray_index;    // (n) rng index of each ray
  size_t n;
  const scene_filter_t* filter; // nullable: none
  const scene_horizon_t* horizon;   // nullable: none (every ray traced); else the scene
                                    //   skips the rays from inside its region above it
  double* distance;             // nullable: with max_returns 1, each ray's return's distance
  double* intensity;            //   and intensity (n each, where nret says it has one), and
                                //   nothing in `out` (NULL): a consumer that reads no other
                                //   field of a return (the lean point writer)
} lidar_returns_packets_t;

// lidar_returns_trace at depth 1 (p->depth must be 1) of rays in packets of columns: the same
// returns, bit for bit, without rows of rays and hits (or only their distances and intensities:
// b->distance). Uses about 30 KB of stack.
// Output: out (n x lidar_returns_max(p); unused with b->distance), nret (n). Thread: as
// lidar_returns_trace.
void lidar_returns_packets(const lidar_returns_t* p, const lidar_returns_packets_t* b,
                           lidar_return_t* out, uint8_t* nret);

//---------------- Building blocks (pure; exposed for tests)

// A return candidate of one ray.
typedef struct lidar_candidate {
  double distance;              // X: optical path length, m
  double intensity;             // I, 1/sr
  double normal[3];
  uint32_t object_id;
  uint32_t label;
  uint32_t node;                // heap node index (tie-break)
  uint8_t atmospheric;
} lidar_candidate_t;

// Keep the candidates inside [range_min, range_max] with intensity > I_min, sort them by
// distance (ties: node, then surface before atmosphere), and write the returns of p's mode to
// out (at most lidar_returns_max(p)), distances without noise. Returns their number. c is
// reordered in place.
uint32_t lidar_returns_select(const lidar_returns_t* p, lidar_candidate_t* c, uint32_t nc,
                              lidar_return_t* out);

#endif  // SENSIM_LIDAR_RETURNS_H_
