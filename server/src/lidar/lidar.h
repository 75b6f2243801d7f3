// SPDX-License-Identifier: MIT
// lidar.h: the lidar sensor (docs/models/lidar.md): a scan pattern (pattern.h) fired in sweep
// time (sweep.h), every ray traced into its returns (returns.h) at the sensor pose of its own
// firing time, and the returns assembled into point clouds (points.h). A cloud is published per
// completed sweep (revolution, flash frame; the default) or per step; points in the sensor frame
// (the default; each point from the pose of its own ray, no motion compensation, like a real
// device) or the world frame. Misses are removed (default), kept as zeros or kept as NaN.
// A lidar does not see the objects of the body it is mounted on (unless see_own_body), nor
// those of excluded bodies or of object groups outside its group mask: its rays pass through
// them (scene_trace's filter).
//
// Rays are traced in coherent packets of 16 (tiles of neighbouring rays) on the step's worker
// pool; every random number is keyed by (seed, sensor, sweep, ray index within the sweep,
// draw), so clouds are bit-identical whatever the number of workers and however the time line
// is cut into steps. A lidar is a model, const after create (model.h), and data that steps
// change (data.h), as MuJoCo's mjModel and mjData.
//
// Thread: created on any thread; stepped on the environment's executor thread (it uses the
// view's pool).
#ifndef SENSIM_LIDAR_LIDAR_H_
#define SENSIM_LIDAR_LIDAR_H_

#include <stdint.h>

#include "base/err.h"
#include "lidar/noise.h"
#include "lidar/pattern.h"
#include "lidar/points.h"
#include "lidar/returns.h"
#include "sensor/sensor.h"

#define LIDAR_MAX_EXCLUDED_BODIES 64

// Largest |start_time|, s (the bound of the environment's state times).
#define LIDAR_MAX_START_TIME 1e9

typedef struct lidar_desc {
  lidar_pattern_t pattern;      // built by a lidar_pattern_*_init; see lidar_create
  int has_start_time;           // t_s given; else the time of the lidar's first step's start
  double start_time;            // s, absolute, |start_time| <= LIDAR_MAX_START_TIME
  const char* pattern_field;    // the pattern's field prefix ("lidar.vlp16"); NULL = "lidar"
  const char* frame_field;      // what to change when a frame is too large
                                //   ("lidar.flash.columns x rows"); NULL = pattern_field
  uint64_t max_frame_bytes;     // most bytes of one published frame (rays x returns x
                                //   point_step, per-revolution publishing); 0 = no limit
  lidar_returns_desc_t returns;
  lidar_angle_noise_desc_t angle_noise;
  lidar_miss_mode_t misses;
  int world_frame;              // points in the world frame (else the sensor frame)
  int publish_per_step;         // a cloud every step (else per completed sweep)
  lidar_layout_preset_t layout;
  const char* const* fields;    // (nfield) names for LIDAR_LAYOUT_FIELDS
  uint32_t nfield;
  int see_own_body;             // see the objects on the body it is mounted on (default 0)
  const uint32_t* exclude_bodies;   // (nexclude_body) bodies whose objects it does not see
  uint32_t nexclude_body;
  uint32_t group_mask;          // object groups it sees (bit g = group g); 0 = all
} lidar_desc_t;

// Build a lidar. Validates everything (lidar_desc_check, then the frame against
// max_frame_bytes; errors name the field: "lidar.range_max = ...", "lidar.fields[1] = ...") and
// on success takes ownership of d->pattern's tables (d->pattern is zeroed) and fills out (kind,
// ops, self). On failure d->pattern is left to the caller. A client's configuration comes
// through lidar_config_create (config.h), which fills the defaults and builds d.
int lidar_create(lidar_desc_t* d, sensor_t* out, err_msg_t* msg) CHECKRET;

// The lidar's sensor operations (kind_name "lidar").
extern const sensor_ops_t lidar_ops;

// Bytes a lidar (sensor_t.self of a lidar) holds for the points of its open sweep: about a
// frame's, or the last step's when it publishes per step, once a step is committed.
size_t lidar_accumulator_bytes(const void* self);

#endif  // SENSIM_LIDAR_LIDAR_H_
