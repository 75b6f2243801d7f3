// SPDX-License-Identifier: MIT
// config.h: a lidar's configuration as a client gives it (LidarConfig and its pattern messages
// in sensim.proto, without protobuf), its datasheet defaults and every check of it. A
// translation fills the fields it received and raises the presence flag (has_*) of each field
// whose default is not zero; lidar_config_defaults fills the absent ones, lidar_config_check
// validates the whole configuration without allocating, and lidar_config_create builds the
// sensor. Errors name the wire fields ("lidar.vlp16.frequency = 3 is outside [5, 20] Hz",
// "lidar.angle_noise.stddev = 1e+308 is outside [0, pi] rad").
//
// Thread: any (pure functions on the caller's struct).
#ifndef SENSIM_LIDAR_CONFIG_H_
#define SENSIM_LIDAR_CONFIG_H_

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "lidar/lidar.h"

// Output frame and publishing (the wire's OutputFrame and Publish values).
typedef enum lidar_frame {
  LIDAR_FRAME_SENSOR = 0,
  LIDAR_FRAME_WORLD = 1,
} lidar_frame_t;

typedef enum lidar_publish {
  LIDAR_PUBLISH_PER_REVOLUTION = 0,
  LIDAR_PUBLISH_PER_STEP = 1,
} lidar_publish_t;

// Spin direction of a spinning pattern (the wire's SpinDirection values).
typedef enum lidar_spin {
  LIDAR_SPIN_CLOCKWISE = 0,
  LIDAR_SPIN_COUNTER_CLOCKWISE = 1,
} lidar_spin_t;

//---------------- Pattern messages (arrays are borrowed; counts as received)

typedef struct lidar_spinning_config {
  double frequency;             // Hz
  uint32_t columns;
  const double* channel_elevations;        // (nchannel_elevation) rad
  size_t nchannel_elevation;
  const double* channel_azimuth_offsets;   // (nchannel_azimuth_offset) rad
  size_t nchannel_azimuth_offset;
  const double* channel_time_offsets;      // (nchannel_time_offset) s
  size_t nchannel_time_offset;
  lidar_spin_t spin;
  double start_azimuth;         // rad
} lidar_spinning_config_t;

typedef struct lidar_vlp16_config {
  double frequency;             // Hz
  int vertical_offsets;
  double start_azimuth;         // rad
} lidar_vlp16_config_t;

typedef struct lidar_ouster_config {
  uint32_t channels;
  uint32_t columns;
  double frequency;             // Hz
  int has_elevation_max;        // absent: the datasheet field for `channels`
  double elevation_max;         // rad
  int has_elevation_min;        // absent: -(the datasheet half field)
  double elevation_min;         // rad
  const double* beam_altitude_angles;      // (nbeam_altitude_angle) rad
  size_t nbeam_altitude_angle;
  const double* beam_azimuth_angles;       // (nbeam_azimuth_angle) rad
  size_t nbeam_azimuth_angle;
  double lidar_origin_to_beam_origin;      // m
} lidar_ouster_config_t;

typedef struct lidar_flash_config {
  uint32_t columns;
  uint32_t rows;
  double fov_horizontal;        // rad
  double fov_vertical;          // rad
  double frame_rate;            // Hz
  int projective;
} lidar_flash_config_t;

typedef struct lidar_hdl64e_config {
  int has_frequency;            // absent: 10 Hz
  double frequency;
  int has_columns;              // absent: the datasheet point rate at `frequency`
  uint32_t columns;
  double start_azimuth;         // rad
} lidar_hdl64e_config_t;

typedef struct lidar_bpearl_config {
  int has_frequency;            // absent: 10 Hz
  double frequency;
  double start_azimuth;         // rad
} lidar_bpearl_config_t;

typedef struct lidar_custom_config {
  const double* azimuths;       // (nazimuth) rad
  size_t nazimuth;
  const double* elevations;     // (nelevation) rad
  size_t nelevation;
  const double* time_offsets;   // (ntime_offset) s
  size_t ntime_offset;
  const uint32_t* channels;     // (nchannel)
  size_t nchannel;
  double frame_rate;            // Hz
} lidar_custom_config_t;

typedef struct lidar_livox_config {
  int has_fov;                  // absent: 38.4 degrees
  double fov;                   // rad
  int has_point_rate;           // absent: 100,000 per second
  double point_rate;
  int has_frame_rate;           // absent: 10 Hz
  double frame_rate;
  const double* prism_rates;    // (nprism_rate) rev/s; none: the illustrative pair
  size_t nprism_rate;
} lidar_livox_config_t;

//---------------- The lidar

typedef struct lidar_config {
  // scan pattern: `pattern` says which one is set (0 = none: refused)
  lidar_pattern_kind_t pattern;
  lidar_spinning_config_t spinning;
  lidar_vlp16_config_t vlp16;
  lidar_ouster_config_t ouster;
  lidar_flash_config_t flash;
  lidar_hdl64e_config_t hdl64e;
  lidar_bpearl_config_t bpearl;
  lidar_custom_config_t custom;
  lidar_livox_config_t livox;
  int has_start_time;           // the pattern's start_time; absent: the lidar's first step
  double start_time;            // s

  // returns
  int has_range_min;            // absent: 0.1 m
  double range_min;
  int has_range_max;            // absent: +inf
  double range_max;
  uint32_t raytrace_depth;      // 0 = 1
  lidar_return_mode_t return_mode;
  uint32_t max_returns;
  double intensity_threshold;
  int round_trip_attenuation;
  int has_beam;                 // absent: no divergence loss
  struct {
    double divergence;          // rad
    int has_exit_radius;        // absent: 0.005 m
    double exit_radius;
    int has_detector_radius;    // absent: exit_radius
    double detector_radius;
    double detector_offset;     // m
    int clamp;
  } beam;
  lidar_distance_noise_desc_t distance_noise;   // absent: zeros (no noise)
  lidar_angle_noise_desc_t angle_noise;         // absent: zeros (no noise)

  // output
  lidar_frame_t frame;
  lidar_publish_t publish;
  int has_misses;               // absent: keep_misses ? ZERO : REMOVE (NAN for the ouster
                                //   layout on an Ouster pattern)
  lidar_miss_mode_t misses;
  int keep_misses;
  lidar_layout_preset_t layout;
  const char* const* fields;    // (nfield) point field names
  size_t nfield;

  // what it sees
  int see_own_body;
  const uint32_t* exclude_bodies;   // (nexclude_body)
  size_t nexclude_body;
  uint32_t group_mask;          // 0 = every group
} lidar_config_t;

// Fill every absent field (presence flag 0) with its default and raise its flag; idempotent.
// Defaults that depend on another field (hdl64e columns on its frequency, Ouster elevations on
// its channels) are filled only when that field is valid (else lidar_config_check names it).
void lidar_config_defaults(lidar_config_t* c);

// Validate a configuration as received (absent fields taking their defaults): 0, or ERR_INVAL
// naming the wire field and its valid range. Allocates nothing. Everything lidar_config_create
// checks is checked here except the frame size against the daemon's output limit
// (max_frame_bytes).
int lidar_config_check(const lidar_config_t* c, err_msg_t* msg) CHECKRET;

// Validate everything of a lidar description but its pattern (built and checked by the
// pattern's init) and its frame size: start_time, returns, angle noise, layout, misses,
// excluded bodies. 0 or ERR_INVAL naming the field. lidar_create runs it first.
int lidar_desc_check(const lidar_desc_t* d, err_msg_t* msg) CHECKRET;

// Build a lidar from c as received (defaults filled on a copy, then checked): ERR_INVAL as
// above, or naming the pattern fields whose one frame exceeds max_frame_bytes (0 = no limit),
// or ERR_NOMEM. On success out holds the sensor (kind, ops, self).
int lidar_config_create(const lidar_config_t* c, uint64_t max_frame_bytes, sensor_t* out,
                        err_msg_t* msg) CHECKRET;

#endif  // SENSIM_LIDAR_CONFIG_H_
