// SPDX-License-Identifier: MIT
// model.h: a lidar's model, after MuJoCo's mjModel (docs/models/lidar.md, "Implementation"):
// what is fixed when the lidar is created: its scan pattern's tables, its optics (the return
// process, beam and noise), its point layout, its options, and the constants the pipeline
// derives from them. Built and validated once by lidar_model_init, const from then on; what
// steps change is the lidar's data (data.h). The pipeline's stages (lidar.c) read a
// const lidar_model_t* and write their own lidar_data_t*.
//
// Thread: read-only after lidar_model_init (any thread).
#ifndef SENSIM_LIDAR_MODEL_H_
#define SENSIM_LIDAR_MODEL_H_

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "lidar/lidar.h"
#include "lidar/sweep.h"

// Rays per pool task: 32 packets of 16 rays, or up to 64 for a pattern traced in tiles (8
// groups of up to 128 rays).
#define LIDAR_CHUNK 512u
#define LIDAR_CHUNK_MAX 1024u

// A tile (one packet of 16 rays): LIDAR_TILE_RAYS consecutive rays of LIDAR_TILE_GROUPS
// consecutive groups (2 channels x 8 columns of a spinning lidar). On bench_lidar's scene raw
// rtcIntersect16 runs about 5 % faster on these than on tiles of 4 x 4 of the same angular
// size, and 1.4x faster than in firing order.
#define LIDAR_TILE_GROUPS 8u
#define LIDAR_TILE_RAYS 2u

// Patterns with fewer rays per firing group are traced ray by ray across the groups (a VLP-16
// fires 16 lasers at 16 elevations in a row).
#define LIDAR_REGROUP_BELOW 32u

// Most bytes a lidar may accumulate for one cloud (the wire's 4 GiB limit of a cloud).
#define LIDAR_MAX_CLOUD_BYTES ((uint64_t)UINT32_MAX)

//---------------- Model: fixed at create

typedef struct lidar_model {
  // configuration
  lidar_pattern_t pat;          // the scan pattern and its tables (owned)
  lidar_returns_t ret;          // the return process: depth, mode, ranges, beam, distance noise
  lidar_angle_noise_t angle;    // emission angle noise
  lidar_points_t points;        // the point writer: layout, misses, rings, organisation (owned)
  int world_frame;              // points in the world frame (else the sensor frame)
  int per_step;                 // a cloud every step (else per completed sweep)
  int has_start_time;           // start_time given (else sweep 0 starts at the first step)
  double start_time;            // s, absolute
  int see_own_body;
  uint32_t exclude_bodies[LIDAR_MAX_EXCLUDED_BODIES];   // (nexclude_body)
  uint32_t nexclude_body;
  uint32_t group_mask;          // object groups it sees; 0 = all

  // derived
  uint32_t maxret;              // returns per ray
  uint32_t boundret;            // returns per ray counted by the up-front output bounds: maxret,
                                //   1 for RETURN_ALL unorganised (checked as the points come
                                //   instead); an organised cloud has every pixel of every return
  int rows;                     // world rays also in rows (for the segment heap or the points)
  int lean_returns;             // depth 1, one return a ray, a lean writer: the returns are only
                                //   their distances and intensities (lidar_returns_packets_t)
  int regroup;                  // small firing groups, traced ray by ray across the groups
  double origin_reach;          // m, farthest a ray's origin is from the sensor's (pattern)
  size_t frame_points;          // most points of one frame (per-revolution publishing), capped
                                //   by the 4 GiB of a cloud (organised: the points of every
                                //   pixel of a revolution); 0 per step
  size_t chunk;                 // rays per pool task (LIDAR_CHUNK, or a row of tiles)
  size_t batch;                 // rays per batch (multiple of chunk)
  uint32_t* tile_slot;          // (chunk) trace position of each ray of a whole chunk from a
                                //   group's first ray (tiled patterns; NULL otherwise; owned)
  lidar_sweep_lanes_t lanes;    // the rays of such a chunk in trace order, from which a whole
                                //   chunk's packets are made (lanes.n = 0: none; owned)
} lidar_model_t;

// Validate d (lidar_desc_check, then the frame against max_frame_bytes; errors name the field)
// and build m. On success m owns d->pattern's tables (d->pattern is zeroed); on failure nothing
// is allocated and d->pattern is left to the caller.
int lidar_model_init(lidar_model_t* m, lidar_desc_t* d, err_msg_t* msg) CHECKRET;

void lidar_model_close(lidar_model_t* m);

// Whether a pattern with K rays per group is traced in tiles of LIDAR_TILE_GROUPS x
// LIDAR_TILE_RAYS (a column of 32 to 128 channels), each chunk then holding whole rows of tiles.
int lidar_model_tiled(uint32_t K);

// The trace positions of the m rays of a tiled chunk whose first ray is ray k0 of its group:
// ray j is ray (k0 + j) % K of the chunk's group (k0 + j) / K. Output: slot (m).
void lidar_model_tile_slots(uint32_t K, size_t k0, size_t m, uint32_t* slot);

#endif  // SENSIM_LIDAR_MODEL_H_
