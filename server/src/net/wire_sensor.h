// SPDX-License-Identifier: MIT
// wire_sensor.h: private to the protobuf adapter: translation of CreateSensor into the sensor
// models' constructors, of the step's sensor records into SensorData messages, and the small
// conversions every translation file shares. Nothing outside net/wire*.c includes this.
#ifndef SENSIM_NET_WIRE_SENSOR_H_
#define SENSIM_NET_WIRE_SENSOR_H_

#include "net/shared_buf.h"
#include "net/wire_pb.h"
#include "sensor/sensor.h"
#include "world/env.h"

// Vector from the wire: absent vector = (dx, dy, dz); absent components = 0.
void wire_vec3_or(const Sensim__V1__Vec3* v, double dx, double dy, double dz, double dest[3]);

// Pose from the wire in internal order (w, x, y, z): absent position = origin, absent
// orientation = identity. Not normalised: the core validates and normalises it.
pose_t wire_pose_from(const Sensim__V1__Pose* p);

// Row-major 3x3 matrix from the wire; absent matrix = identity; ERR_INVAL naming `field` unless
// it has exactly 9 values (finiteness is the model's check).
int wire_mat3_or_identity(const Sensim__V1__Mat3* m, const char* field, double dest[9],
                          err_msg_t* msg) CHECKRET;

// CreateSensor: build the model's sensor from its configuration and add it to e.
int wire_sensor_create(const Sensim__V1__CreateSensor* m, env_t* e, err_msg_t* msg) CHECKRET;

// Each model's translation: validate the configuration (errors name the field, e.g.
// "lidar.spinning.columns = 0 must be > 0"), build the sensor (out->self owned by the caller on
// success). body_id and mount are known to the caller; model constructors do not need them.
// wire_lidar_build refuses a lidar whose one frame exceeds max_frame_bytes (the step output
// limit; 0 = none).
int wire_lidar_build(const Sensim__V1__LidarConfig* m, uint64_t max_frame_bytes, sensor_t* out,
                     err_msg_t* msg) CHECKRET;
// What Describe tells of a lidar built from m (which wire_lidar_build accepted): its cloud
// layout, frame and pattern name.
int wire_lidar_brief(const Sensim__V1__LidarConfig* m, env_sensor_brief_t* out) CHECKRET;
int wire_imu_build(const Sensim__V1__ImuConfig* m, sensor_t* out, err_msg_t* msg) CHECKRET;
int wire_encoder_build(const Sensim__V1__EncoderConfig* m, sensor_t* out,
                       err_msg_t* msg) CHECKRET;
int wire_odometer_build(const Sensim__V1__OdometerConfig* m, sensor_t* out,
                        err_msg_t* msg) CHECKRET;
int wire_cone_build(const Sensim__V1__ConeConfig* m, sensor_t* out, err_msg_t* msg) CHECKRET;

// The records of a step as SensorData messages attached to `done`. Storage lives in *store
// until wire_sensor_outputs_free.
typedef struct wire_outputs wire_outputs_t;
int wire_sensor_outputs(const sensor_out_t* recs, Sensim__V1__StepDone* done,
                        wire_outputs_t** store, err_msg_t* msg) CHECKRET;
void wire_sensor_outputs_free(wire_outputs_t* store);
// The same in the caller's memory (buf, cap bytes, aligned for any type) when the block of
// recs->n messages fits in it (wire_sensor_outputs_bytes), else allocated: a step of a few
// records takes no heap block that malloc would have to find past its small-block caches.
size_t wire_sensor_outputs_bytes(uint32_t n);
int wire_sensor_outputs_in(const sensor_out_t* recs, Sensim__V1__StepDone* done, void* buf,
                           size_t cap, wire_outputs_t** store, err_msg_t* msg) CHECKRET;

//---------------- Describe (wire_describe.c)

// The reply body of a Describe of e: a Description in *store's memory, attached to reply.
// ERR_NOMEM.
typedef struct wire_description wire_description_t;
int wire_describe(const Sensim__V1__Describe* m, env_t* e, Sensim__V1__Envelope* reply,
                  wire_description_t** store, err_msg_t* msg) CHECKRET;
void wire_describe_free(wire_description_t* store);

//---------------- Frames of records by reference (wire_out.c)

// A SensorData to frame. When its point cloud carries data lying inside `owner`, the frame
// refers to those bytes instead of copying them: they travel as the cloud's last field, and
// every other byte is the frame's own (fields of a message may come in any order).
typedef struct wire_sd {
  Sensim__V1__SensorData* sd;   // borrowed; changed only for the duration of a call
  blob_t* owner;                // nullable: the cloud's data is copied
  size_t own;                   // set by wire_sd_measure: own bytes of its encoding
  size_t ref;                   // set by wire_sd_measure: referenced bytes
} wire_sd_t;

// The size of x's encoding (own + ref), which the calls below need.
void wire_sd_measure(wire_sd_t* x);

// A SensorData's packed size and its packing (out holds that size): protobuf-c's bytes,
// written by hand when it has no cloud (wire_sd.c), else by protobuf-c.
size_t wire_sd_packed_size(const Sensim__V1__SensorData* sd);
size_t wire_sd_pack(const Sensim__V1__SensorData* sd, uint8_t* out);

// The same for a StepDone: by hand while it has no outputs attached (wire_sd.c).
size_t wire_step_done_packed_size(const Sensim__V1__StepDone* m);
size_t wire_step_done_pack(const Sensim__V1__StepDone* m, uint8_t* out);

// Envelope{sensor_data} pushed to subscribers (no id) into *out (one reference). ERR_NOMEM.
int wire_out_pushed(wire_sd_t* x, shared_buf_t** out) CHECKRET;

// A reply's frames for a step's records: StepDone{time, step, outputs: xs} alone when it fits
// in max_frame_bytes; otherwise one Envelope{id, sensor_data} per record, in order, then
// StepDone{time, step, outputs_in_parts: n}. *frames (mem_alloc'ed, one reference each) and
// *nframes. ERR_NOMEM; ERR_LIMIT (msg) when a record alone does not fit in a frame.
int wire_out_step_done(uint64_t id, double time, uint64_t step, wire_sd_t* xs, uint32_t n,
                       uint32_t max_frame_bytes, shared_buf_t*** frames, uint32_t* nframes,
                       err_msg_t* msg) CHECKRET;

// The bytes wire_out_step_done would produce (all frames, length prefixes included).
uint64_t wire_out_step_done_bytes(uint64_t id, double time, uint64_t step, wire_sd_t* xs,
                                  uint32_t n, uint32_t max_frame_bytes);

// How a step's reply travels, worked out once (its size checked before the step commits, its
// frames made after): the reply's StepDone without outputs, the sizes, whether the records go
// in parts.
typedef struct wire_out_plan {
  Sensim__V1__StepDone done;
  uint64_t id;
  uint32_t n;                   // records
  uint32_t max_frame_bytes;
  uint8_t head[WIRE_OK_HEAD_MAX];  // the reply's Envelope without its body (env_len bytes)
  size_t env_len;
  size_t done_own;              // StepDone without outputs
  size_t done_len;              // StepDone with the outputs it carries
  int parts;
  uint64_t bytes;               // every frame, length prefixes included
} wire_out_plan_t;

// Plan the reply of wire_out_step_done's arguments into *p; returns p->bytes.
uint64_t wire_out_plan(uint64_t id, double time, uint64_t step, const wire_sd_t* xs, uint32_t n,
                       uint32_t max_frame_bytes, wire_out_plan_t* p);

// wire_out_step_done from its plan (xs the records planned, still measured the same).
int wire_out_planned(const wire_out_plan_t* p, wire_sd_t* xs, shared_buf_t*** frames,
                     uint32_t* nframes, err_msg_t* msg) CHECKRET;

#endif  // SENSIM_NET_WIRE_SENSOR_H_
