// SPDX-License-Identifier: MIT
// data.h: a lidar's data, after MuJoCo's mjData (docs/models/lidar.md, "Implementation"): what
// steps change, beside its model (model.h): the sweep state (the working copy, the committed
// and the staged one), the open sweep's point buffer and its spares, the scratch of a batch of
// rays (sized from the model, allocated once), the step's exclusions and horizon.
//
// Thread: one writer at a time (the environment's executor thread, and the pool's workers on
// disjoint chunks of the scratch during a batch).
#ifndef SENSIM_LIDAR_DATA_H_
#define SENSIM_LIDAR_DATA_H_

#include <stddef.h>
#include <stdint.h>

#include "base/blob.h"
#include "base/err.h"
#include "lidar/model.h"
#include "lidar/sweep.h"

// The sweep state carried from step to step.
typedef struct lidar_state {
  int started;                  // sweep 0 is placed
  double t_s;                   // s, start of sweep 0
  lidar_cursor_t cursor;        // next ray to fire
  uint64_t acc_sweep;           // sweep being accumulated
  int acc_complete;             // its first ray was fired by this lidar
  uint64_t frame;               // records published
  blob_t* acc;                  // nullable: the buffer of the open sweep's points
  size_t acc_n;                 // points in it
} lidar_state_t;

typedef struct lidar_data {
  // Sweep state: the working copy a step runs on (the committed one between steps), the
  // committed one (after the last committed step), and the one staged by the last step until
  // its commit. A sweep's points are written once: its buffer is handed whole to the sweep's
  // record (or the step's, per step) when it is published, and the next points go to another.
  lidar_state_t now;            // owns now.acc when it is not committed.acc
  lidar_state_t committed;      // owns a reference to committed.acc
  lidar_state_t staged;         // owns staged.acc when it is not committed.acc
  int has_staged;
  blob_t* spare[2];             // nullable: buffers published before (oldest first), taken
                                //   again for a new sweep once their readers have let them go
                                //   (no allocation then; two, so that one is free whether a
                                //   sweep ends inside a step or at its end)
  size_t last_points;           // points of the last cloud published: a new buffer's first size
  uint64_t grid_group0;         // organised per step: the step's first group (its column 0)
  uint32_t grid_width;          //   and its columns

  // scratch of one batch (m->batch rays), in trace order unless said
  scene_packet_t* packets;      // (batch / SCENE_PACKET) world rays, in columns
  scene_ray_t* rays;            // (batch) the same in rows (m->rows)
  uint64_t* ray_index;          // (batch) index within the sweep (rng key)
  scene_packet_t* local;        // (batch / SCENE_PACKET) the rays in the sensor frame, of
                                //   the chunks made from the model's lanes (NULL without them;
                                //   zeroed: origins 0 are not written, sweep.h)
  lidar_pattern_ray_t* pr;      // (batch) the pattern's rays in firing order, their direction
                                //   after the angle noise
  lidar_return_t* returns;      // (batch x maxret); NULL with m->lean_returns
  double* distance;             // (batch) with m->lean_returns (else NULL): each ray's return's
  double* intensity;            //   distance and intensity
  uint8_t* nret;                // (batch)
  uint32_t* slot;               // (batch) trace position of each ray (firing order) in its chunk
  size_t* chunk_points;         // (batch / chunk + 1) points of each chunk, then their offsets

  // the step's objects not seen (on the lidar's own body, on excluded bodies, other groups)
  uint32_t* excluded;           // (nexcluded) sorted object ids
  uint32_t nexcluded;
  uint32_t excluded_cap;

  // the step's horizon (depth 1)
  scene_horizon_t* horizon;     // nullable: deeper segments start anywhere
  int horizon_on;               // the step culls against it
} lidar_data_t;

// Allocate d's scratch for model m (zeroed state). ERR_NOMEM, with nothing held, on failure.
int lidar_data_init(lidar_data_t* d, const lidar_model_t* m, err_msg_t* msg) CHECKRET;

// Release d's buffers and scratch.
void lidar_data_close(lidar_data_t* d);

// A buffer the lidar no longer writes to (b, owned): kept as the newest spare, the oldest let
// go when both are taken.
void lidar_data_keep_spare(lidar_data_t* d, blob_t* b);

// Make room for `more` points in the open sweep's buffer (a buffer is taken for the first
// points; organised per revolution, a whole revolution's pixels, those of the rays before the
// cursor filled as never fired and counted). ERR_LIMIT past 4 GiB, ERR_NOMEM.
int lidar_data_reserve(lidar_data_t* d, const lidar_model_t* m, size_t more, err_msg_t* msg)
    CHECKRET;

// Give memory back when the open sweep's buffer is far larger than what it must hold: `keep`
// points now, and a frame (per revolution) or `typical` points later.
void lidar_data_trim(lidar_data_t* d, const lidar_model_t* m, size_t keep, size_t typical);

// The azimuths (float32, one per point) buffer b holds after its points, when the model's
// writer gives them (m->points.azimuths).
float* lidar_data_azimuths(const lidar_model_t* m, blob_t* b);

// Bytes held for points: the committed buffer and the spares.
size_t lidar_data_bytes(const lidar_data_t* d);

#endif  // SENSIM_LIDAR_DATA_H_
