// SPDX-License-Identifier: MIT
// points.h: lidar point assembly (docs/models/lidar.md, "Point fields"), the last stage of the
// pipeline and its one point writer: which fields a point carries and where they sit in its
// bytes, described like sensor_msgs/PointCloud2 (name, offset, datatype, count, point_step,
// little-endian), so a client maps a cloud to a NumPy structured array or a PointCloud2 without
// copying; and where each ray's points go in its cloud. A layout is either a list of field
// names (packed in the order given, each aligned to its size) or a preset byte-compatible with
// a common ROS driver's point type:
//   velodyne  x y z intensity ring time          (velodyne_pointcloud PointXYZIRT, 22 bytes)
//   ouster    x y z intensity t reflectivity ring ambient range  (ouster_ros Point, 48 bytes)
//   xyzi      x y z intensity                    (16 bytes)
//
// Field names: x y z (float32, m), intensity (float32, relative), ring (uint16), azimuth and
// elevation (float32, rad), distance (float32, m), time_offset (float32, s after the cloud's
// frame_start_time), object_id and label (uint32), return_index and return_count (uint8),
// normal (float32 x 3, in the cloud's frame). The presets add time (float32 s), t (uint32 ns),
// reflectivity (uint16: 100 pi intensity, the Lambertian albedo in percent for a target at
// normal incidence without range losses), ambient (uint16, 0: no ambient light model) and
// range (uint32 mm).
//
// Rings and order follow the drivers: with the velodyne preset `ring` is the channel's rank by
// elevation (0 = lowest, as velodyne_pointcloud numbers lasers), otherwise the pattern's
// channel. A cloud is unorganised (1 x N, points in firing order, each ray's returns in a row),
// except the ouster preset on an Ouster pattern with misses kept, which is organised as
// ouster_ros publishes it: a point per pixel, rows = beams from the top (then the same beams'
// second returns, and so on), columns in measurement order, destaggered per beam for a whole
// revolution.
//
// Thread: a layout and a writer are read-only after init; lidar_points_write runs on any thread
// (on disjoint destinations).
#ifndef SENSIM_LIDAR_POINTS_H_
#define SENSIM_LIDAR_POINTS_H_

#include <stdint.h>

#include "base/err.h"
#include "lidar/pattern.h"
#include "lidar/returns.h"
#include "lidar/sweep.h"
#include "sensor/sensor.h"

typedef enum lidar_miss_mode {
  LIDAR_MISS_REMOVE = 0,        // no point for a ray without a return
  LIDAR_MISS_ZERO,              // a point at (0, 0, 0), distance 0, intensity 0
  LIDAR_MISS_NAN,               // a point at (NaN, NaN, NaN), distance NaN, intensity 0
} lidar_miss_mode_t;

typedef enum lidar_layout_preset {
  LIDAR_LAYOUT_FIELDS = 0,      // the listed field names (empty list: xyzi)
  LIDAR_LAYOUT_VELODYNE,
  LIDAR_LAYOUT_OUSTER,
  LIDAR_LAYOUT_XYZI,
} lidar_layout_preset_t;

typedef enum lidar_point_field {
  LIDAR_FIELD_X = 0,
  LIDAR_FIELD_Y,
  LIDAR_FIELD_Z,
  LIDAR_FIELD_INTENSITY,
  LIDAR_FIELD_RING,
  LIDAR_FIELD_AZIMUTH,
  LIDAR_FIELD_ELEVATION,
  LIDAR_FIELD_DISTANCE,
  LIDAR_FIELD_TIME_OFFSET,
  LIDAR_FIELD_OBJECT_ID,
  LIDAR_FIELD_LABEL,
  LIDAR_FIELD_RETURN_INDEX,
  LIDAR_FIELD_RETURN_COUNT,
  LIDAR_FIELD_NORMAL,
  // preset-only fields
  LIDAR_FIELD_TIME,             // velodyne: float32 s
  LIDAR_FIELD_T_NS,             // ouster: uint32 ns
  LIDAR_FIELD_REFLECTIVITY,     // ouster: uint16
  LIDAR_FIELD_AMBIENT,          // ouster: uint16
  LIDAR_FIELD_RANGE_MM,         // ouster: uint32 mm
  LIDAR_FIELD_COUNT
} lidar_point_field_t;

typedef struct lidar_layout {
  uint32_t nfield;
  lidar_point_field_t id[SENSOR_MAX_FIELDS];    // (nfield)
  sensor_field_t field[SENSOR_MAX_FIELDS];      // (nfield) name, offset, datatype, count
  uint32_t point_step;          // bytes per point
  int is_xyzi;                  // exactly x y z intensity as float32 at 0 4 8 12 (fast path)
} lidar_layout_t;

// Build a layout: a preset, or (LIDAR_LAYOUT_FIELDS) the n names (n = 0: xyzi). ERR_INVAL naming
// the field ("lidar.fields[2] = \"colour\" is not a point field (x y z ...)"), for an unknown
// or repeated name.
int lidar_layout_init(lidar_layout_t* l, lidar_layout_preset_t preset, const char* const* names,
                      uint32_t n, err_msg_t* msg) CHECKRET;

// Copy the layout's description into a cloud (fields, nfield, point_step).
void lidar_layout_describe(const lidar_layout_t* l, sensor_cloud_t* cloud);

// One point before packing (frame already chosen by the caller).
typedef struct lidar_point {
  double xyz[3];                // m, or NaN for a miss kept as NaN
  double intensity;
  double distance;              // m (NaN for a miss kept as NaN)
  double range_offset;          // m added to distance for the device range (`range`, mm): the
                                //   Ouster beam-origin offset n, whose range counts from the
                                //   lidar origin's side of the beam (r = distance + n)
  double time_offset;           // s after the cloud's frame_start_time
  double azimuth;               // rad
  double elevation;             // rad
  double normal[3];
  uint32_t ring;
  uint32_t object_id;
  uint32_t label;
  uint32_t return_index;
  uint32_t return_count;
} lidar_point_t;

// Pack a point into point_step bytes at dest (little-endian; padding bytes zeroed).
void lidar_points_pack(const lidar_layout_t* l, const lidar_point_t* pt, uint8_t* dest);

//---------------- The writer

typedef struct lidar_points_desc {
  lidar_layout_preset_t layout;
  const char* const* fields;    // (nfield) names for LIDAR_LAYOUT_FIELDS
  uint32_t nfield;
  lidar_miss_mode_t misses;
  int world_frame;              // positions and normals in the world frame (else the sensor's)
  uint32_t maxret;              // returns per ray, >= 1
  const lidar_pattern_t* pattern;   // read during init only
} lidar_points_desc_t;

typedef struct lidar_points {
  lidar_layout_t layout;
  lidar_miss_mode_t misses;
  int world_frame;
  int has_normal;               // the layout carries normals (rotated into the sensor frame)
  int lean;                     // x y z intensity in the sensor frame, misses removed: packed
                                //   straight from lean pattern records (lidar_pattern_rays_lean:
                                //   time, index, origin and direction only)
  uint32_t nray;                // rays per firing group
  uint32_t maxret;
  double range_offset;          // m added to a return's distance for `range` (Ouster beam
                                //   origin: the device counts range from the lidar's axis)
  uint32_t* ring;               // (nray) the ring ray k of a group reports
  int organised;                // a point per ray and return at its pixel (ouster preset on an
                                //   Ouster pattern, misses kept); else appended in firing order
  uint32_t columns;             // organised: groups per sweep
  int32_t* shift;               // (nray) organised: each beam's destaggering shift, in columns
  int azimuths;                 // beside the points, the azimuth each was aimed at (sensor
                                //   frame, float32), which the quantized encoder takes instead
                                //   of recovering it; not in the world frame nor for lean
                                //   clouds
  uint32_t stride;              // the cloud's channels per column for the encoders: a point's
                                //   predecessor in its channel is `stride` points back (rays per
                                //   group of a spinning pattern, one point each; organised: the
                                //   row's previous pixel, 1); 0: no such structure (points
                                //   removed, several returns, a group that is not a column)
} lidar_points_t;

// Build a writer: the layout (ERR_INVAL naming the field, as lidar_layout_init), the rings the
// layout reports, the organisation. ERR_NOMEM. Release with lidar_points_close.
int lidar_points_init(lidar_points_t* w, const lidar_points_desc_t* d, err_msg_t* msg)
    CHECKRET;

// Release the tables; w is zeroed. Nullable: w.
void lidar_points_close(lidar_points_t* w);

// Height and width of a cloud of `count` points (organised: rows of the rays' returns, beams
// times returns; else 1 x count).
void lidar_points_shape(const lidar_points_t* w, uint32_t count, uint32_t* height,
                        uint32_t* width);

// A chunk of rays and their returns, as the stages before leave them.
typedef struct lidar_points_chunk {
  const lidar_pattern_ray_t* rays;  // (n) in firing order, directions after the angle noise
                                    //   (lean records when the writer is lean)
  const uint32_t* slot;         // (n) trace position of each ray: its return count nret[slot],
                                //   returns at returns[slot * maxret], world ray world[slot]
  const uint8_t* nret;
  const lidar_return_t* returns;    // NULL when distance is given
  const double* distance;       // nullable: a lean writer's returns (one a ray, where nret says
  const double* intensity;      //   so): their distances and intensities only, at slot
  const scene_ray_t* world;     // the world rays (world frame or normals); else unused
  const scene_packet_t* local;  // nullable: the rays in the sensor frame in trace order
                                //   (packets of SCENE_PACKET), which a lean writer then reads
                                //   instead of the records' directions and origins
  const lidar_sweep_lanes_t* lanes; // nullable: with local NULL, the chunk's rays are the
  const lidar_pattern_t* pattern;   //   tables' (lidar_sweep_lane_packets without `local`),
                                    //   which a lean writer aims again (lidar_sweep_lane_aim)
  size_t n;
  uint64_t first;               // lidar cursor of ray 0 (group * nray + ray)
  double tau_origin;            // s after t_s that time offsets count from; NAN: from the start
                                //   of each ray's sweep
  const view_body_t* body;      // the sensor's body, its mount, and the pose of every ray when
  const pose_t* mount;          //   the body does not move (else NULL): normals in the sensor
  const lidar_sweep_pose_t* fixed;  //   frame are turned by the sensor pose at the ray's time
} lidar_points_chunk_t;

// Where a chunk's points go: the cloud's points (and their azimuths), from point `at`
// on in firing order, or (organised) at their pixels: column c holds group group0 + c
// (destagger: beam i's pixel of group group0 + m sits in column (m + shift[i]) mod width, a
// whole revolution).
typedef struct lidar_points_dest {
  uint8_t* base;                // point 0 of the cloud
  float* azimuth;               // (points of the cloud) when w->azimuths, else unused
  size_t at;                    // unorganised: the chunk's first point
  uint64_t group0;              // organised
  uint32_t width;               //   columns
  int destagger;
} lidar_points_dest_t;

// Points a chunk writes: each ray's returns (a miss kept when it has none), or every ray's
// maxret pixels when organised.
size_t lidar_points_count(const lidar_points_t* w, const uint8_t* nret, size_t n);

// Write the chunk's points (and azimuths) at d: in firing order, or (organised) at their pixels,
// the ray's returns in rows r nray + k, the returns it lacks as misses.
void lidar_points_write(const lidar_points_t* w, const lidar_points_chunk_t* c,
                        const lidar_points_dest_t* d);

// Every pixel of an organised cloud of `count` points (d->width columns) as a ray that never
// fired (a revolution the lidar joined after its start, as ouster_ros fills columns it did not
// receive): a miss (positions by the miss mode), t 0, its beam's ring, azimuth NaN.
void lidar_points_fill_unfired(const lidar_points_t* w, const lidar_points_dest_t* d,
                               size_t count);

#endif  // SENSIM_LIDAR_POINTS_H_
