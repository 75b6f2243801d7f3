// SPDX-License-Identifier: MIT
// wire_sensor.h: private to the protobuf adapter: translation of CreateSensor into the sensor
// models' constructors, of the step's sensor records into SensorData messages, and the small
// conversions every translation file shares. Nothing outside net/wire*.c includes this.
#ifndef SENSIM_NET_WIRE_SENSOR_H_
#define SENSIM_NET_WIRE_SENSOR_H_

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

#endif  // SENSIM_NET_WIRE_SENSOR_H_
