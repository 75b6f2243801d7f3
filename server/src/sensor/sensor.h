// SPDX-License-Identifier: MIT
// sensor.h: what every sensor model offers the world, and the records sensors produce.
//
// A sensor is created by its model's own constructor (lidar/, imu/, joint/, cone/ — each
// validates its configuration and names the offending field) and handed to the world with
// env_create_sensor, which owns it from then on. At every step the world builds a step_view_t
// and calls each sensor's `step` in increasing id order; the sensor appends its records (zero,
// one or several: a lidar publishes when a revolution completes, an IMU at a fixed rate may
// sample several times in a long step) to the step's output list.
//
// Two phases, so that a step is all or nothing: `step` computes the records from the sensor's
// committed state and stages whatever state it carries to the next step (a lidar's unfinished
// revolution, an encoder's last reading, a bias drift) without applying it; once every sensor
// of the environment succeeded the world calls `commit` on each. A failed step (ERR_NOMEM, a
// cancelled request) calls no commit, so the next step starts again from the committed state.
//
// Thread: `step` runs on the environment's executor thread and may use view->pool;
// `destroy` on the environment's owner.
#ifndef SENSIM_SENSOR_SENSOR_H_
#define SENSIM_SENSOR_SENSOR_H_

#include <stddef.h>
#include <stdint.h>

#include "base/blob.h"
#include "base/err.h"
#include "base/xform.h"
#include "sensor/view.h"

typedef enum sensor_kind {
  SENSOR_LIDAR = 1,
  SENSOR_IMU,
  SENSOR_ENCODER,
  SENSOR_ODOMETER,
  SENSOR_CONE,
  SENSOR_TEST,                  // used by unit tests only
} sensor_kind_t;

//---------------- Output records

typedef enum sensor_record_kind {
  SENSOR_REC_CLOUD = 1,
  SENSOR_REC_IMU,
  SENSOR_REC_SCALAR,
  SENSOR_REC_CONE,
} sensor_record_kind_t;

// Point field datatypes, numbered as sensor_msgs/PointField (and the wire's PointField).
typedef enum sensor_datatype {
  SENSOR_INT8 = 1,
  SENSOR_UINT8,
  SENSOR_INT16,
  SENSOR_UINT16,
  SENSOR_INT32,
  SENSOR_UINT32,
  SENSOR_FLOAT32,
  SENSOR_FLOAT64,
} sensor_datatype_t;

// Bytes of one element of datatype t (4 for a value outside the enumeration).
uint32_t sensor_datatype_size(sensor_datatype_t t);

#define SENSOR_MAX_FIELDS 16

// Largest magnitude a sensor's numeric configuration value may have (a bias, a noise level, a
// scale factor, a wheel radius, ...), in its own unit: far beyond any real sensor, and small
// enough that no product along a model's chain overflows a double, its inputs being bounded too
// (positions by ENV_MAX_COORD, velocities and fields by ENV_MAX_VALUE). A larger value is
// refused naming the field rather than turning samples into +-inf.
#define SENSOR_MAX_VALUE 1e9

// Shortest interval over which a sensor forms a derivative (an IMU's velocities from poses and
// its accelerations, an encoder's or a cone's speed), in seconds: over a shorter one (a step
// of 1e-300 s is a valid step) a difference quotient could overflow to +-inf. Such a step is
// treated as one of zero length for its derivatives.
#define SENSOR_MIN_INTERVAL 1e-9

typedef struct sensor_field {
  const char* name;             // static string
  uint32_t offset;              // bytes from the start of a point
  sensor_datatype_t datatype;
  uint32_t count;               // elements
} sensor_field_t;

// A point cloud, described like sensor_msgs/PointCloud2: little-endian points of point_step
// bytes. The points live in a reference-counted blob (base/blob.h) of which the record holds
// one reference: the lidar hands the buffer it wrote its points into, and everything after it
// (the step's reply, every subscriber's frame) reads that buffer, never a copy.
typedef struct sensor_cloud {
  sensor_field_t fields[SENSOR_MAX_FIELDS];
  uint32_t nfield;
  uint32_t point_step;
  uint32_t count;               // points
  uint32_t height, width;       // organisation: height x width = count, rows of width points
                                //   (an organised lidar cloud); 0 x 0 = unorganised, 1 x count
  uint8_t* data;                // count * point_step bytes, inside blob (read only once shared)
  blob_t* blob;                 // the buffer holding data; one reference owned by the record
  double frame_start_time;      // s; each point's time offset is relative to it
  int complete;                 // a whole revolution (or flash frame)
  int world_frame;              // points in the world frame (else the sensor frame)
  // what the sensor knows of its points, for the encoders (codec/): 0 / NULL when it does not
  uint32_t stride;              // the point of the same channel in the previous column is
                                //   `stride` points back
  const float* azimuth;         // (count) rad: the azimuth the sensor aimed each point at, in
                                //   the cloud's frame (inside blob)
} sensor_cloud_t;

typedef struct sensor_imu {
  int has_acceleration;
  int has_angular_velocity;
  int has_magnetic_field;
  double acceleration[3];       // m/s^2, IMU frame
  double angular_velocity[3];   // rad/s
  double magnetic_field[3];     // T
  double values[9];             // the selected axes, accelerometer first
  uint32_t nvalues;
} sensor_imu_t;

typedef struct sensor_scalar {
  double position;              // encoder: rad or m; odometer: m
  int has_speed;
  double speed;                 // encoder: rad/s or m/s
} sensor_scalar_t;

typedef struct sensor_cone {
  int detected;
  double range;                 // m
  double azimuth;               // rad
  double elevation;             // rad
  int has_speed;
  double speed;                 // m/s
  double point[3];              // closest point, world frame
  uint32_t object_id;
} sensor_cone_t;

typedef struct sensor_record {
  uint32_t sensor_id;
  double time;                  // s: end of the step, or the sample's own time
  uint64_t frame;               // per-sensor counter of records
  sensor_record_kind_t kind;
  union {
    sensor_cloud_t cloud;
    sensor_imu_t imu;
    sensor_scalar_t scalar;
    sensor_cone_t cone;
  } u;
} sensor_record_t;

// The records of one step, in sensor id order.
typedef struct sensor_out {
  sensor_record_t* rec;
  uint32_t n;
  uint32_t cap;
} sensor_out_t;

// Append a zeroed record of `kind` for `sensor_id`; NULL when out of memory.
sensor_record_t* sensor_out_push(sensor_out_t* out, uint32_t sensor_id, sensor_record_kind_t kind);

// Drop the records appended after the first `n` (releasing their clouds' buffers).
void sensor_out_truncate(sensor_out_t* out, uint32_t n);

// Move every record of src to the end of dst, in order (their buffers go with them: nothing
// is copied but the record structs); src is left empty. ERR_NOMEM (nothing moved).
int sensor_out_move(sensor_out_t* src, sensor_out_t* dst) CHECKRET;

// *dst becomes a copy of src holding its own reference to the cloud's buffer.
void sensor_record_copy(sensor_record_t* dst, const sensor_record_t* src);

// Release what a record holds (its cloud's buffer reference). Nullable: r.
void sensor_record_release(sensor_record_t* r);

// Drop every record; keep the capacity.
void sensor_out_clear(sensor_out_t* out);

// Release everything.
void sensor_out_free(sensor_out_t* out);

// Allocate a cloud's data for `count` points of cloud->point_step bytes (zeroed) in a buffer of
// its own. ERR_NOMEM or ERR_LIMIT (over 4 GiB) with a message.
int sensor_cloud_alloc(sensor_cloud_t* cloud, uint32_t count, err_msg_t* msg) CHECKRET;

// sensor_cloud_alloc without zeroing, for a caller that writes every byte at once.
int sensor_cloud_alloc_unset(sensor_cloud_t* cloud, uint32_t count, err_msg_t* msg) CHECKRET;

// The cloud's points are the `count` points of cloud->point_step bytes at byte `offset` of
// blob, which the cloud references from now on (a reference is added; any buffer it held is
// released). ERR_LIMIT (over 4 GiB, or beyond the blob) with a message.
int sensor_cloud_share(sensor_cloud_t* cloud, blob_t* blob, size_t offset, uint32_t count,
                       err_msg_t* msg) CHECKRET;

//---------------- Sensors

// Where a sensor is: on body `body_id` (0 = the world) at pose `mount` relative to the body.
typedef struct sensor_ctx {
  uint32_t id;
  uint32_t body_id;
  pose_t mount;
} sensor_ctx_t;

typedef struct sensor_ops {
  const char* kind_name;        // "lidar", "imu", ...
  // Evaluate the sensor over (v->t0, v->t1] and append its records to out. Returns 0 or a
  // negative code with msg (the caller drops the records it appended).
  int (*step)(void* self, const sensor_ctx_t* ctx, const step_view_t* v, sensor_out_t* out,
              err_msg_t* msg);
  // Apply the state staged by the last successful `step` (nullable: a stateless sensor).
  void (*commit)(void* self);
  // The most bytes of records (clouds: points x point_step, plus 512 a record) a step over
  // (t0, t1] can give from the committed state, into *bytes; or ERR_LIMIT with msg when no step
  // can cover that interval (more rays or samples than one step may take, or records past
  // `budget`, the environment's max_output_bytes for one sensor's step). The world asks it at
  // UpdateState and CreateSensor, so that a step is refused there, before anything changed,
  // rather than at every Step from then on. Reads only. Nullable: a sensor whose every step
  // gives a few small records.
  int (*bound)(const void* self, const sensor_ctx_t* ctx, double t0, double t1, uint64_t budget,
               uint64_t* bytes, err_msg_t* msg);
  void (*destroy)(void* self);
} sensor_ops_t;

typedef struct sensor {
  sensor_kind_t kind;
  const sensor_ops_t* ops;
  void* self;
  uint32_t joint_id;            // the joint it reads (encoder, odometer), 0 = none
  int revolute_joint;           // the joint must be revolute (a wheel: the odometer)
  int needs_objects;            // reads step_view_t.objects (the cone sensor's closest point)
} sensor_t;

#endif  // SENSIM_SENSOR_SENSOR_H_
