// SPDX-License-Identifier: MIT
// wire_sd.c: a SensorData without a point cloud (an IMU sample, an encoder or odometer
// reading, a cone reading, or no payload), and a StepDone's own fields, measured and written by
// hand from their protobuf-c structs: the bytes protobuf-c packs, without its walk over the
// field descriptors (measuring and packing a step's three small records that way was about
// 6,000 instructions, a seventh of the daemon's share of a lock-step tick). A cloud, a StepDone
// with its outputs attached, or a message with unknown fields, goes to protobuf-c as before.
//
// The layout is protobuf-c's for proto2: fields in increasing number, an optional scalar only
// when its has_ flag is set, a message only when its pointer is set, the oneof's member only
// when the case names it, a packed repeated field only when it has values. The field numbers
// below are the proto's (proto/sensim/v1/sensim.proto); test_wire_sd compares every byte with
// protobuf-c's for each payload, flag and varint length, so a renumbered field fails there.
#include <string.h>

#include "net/wire_sensor.h"

// Wire types.
#define WT_VARINT 0u
#define WT_I64 1u
#define WT_LEN 2u

// A key of one byte: field numbers below 16.
#define KEY(field, wt) ((uint8_t)((field) << 3 | (wt)))

// A double's 8 bytes, little-endian (the wire's fixed64): a copy on a little-endian host.
static uint8_t* put_raw_double(uint8_t* at, double d) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  memcpy(at, &d, 8);
#else
  uint64_t u;
  memcpy(&u, &d, sizeof(u));
  for (int i = 0; i < 8; i++) {
    at[i] = (uint8_t)(u >> (8 * i));
  }
#endif
  return at + 8;
}

static uint8_t* put_double(uint8_t* at, uint8_t key, double d) {
  *at++ = key;
  return put_raw_double(at, d);
}


// An optional double: its key and bytes when `has` is set.
static uint8_t* put_opt_double(uint8_t* at, int has, uint32_t field, double d) {
  return has ? put_double(at, KEY(field, WT_I64), d) : at;
}


// A nested message of `len` bytes: its key, its length, and the bytes counted by the caller.
static size_t nested_size(size_t len) {
  return 1 + wire_varint_size(len) + len;
}

static uint8_t* put_nested_head(uint8_t* at, uint32_t field, size_t len) {
  *at++ = KEY(field, WT_LEN);
  return wire_put_varint(at, len);
}


//---------------- Vec3 {x = 1, y = 2, z = 3}

static size_t vec3_size(const Sensim__V1__Vec3* v) {
  return 9u * ((v->has_x != 0) + (v->has_y != 0) + (v->has_z != 0));
}

static uint8_t* put_vec3(uint8_t* at, uint32_t field, const Sensim__V1__Vec3* v) {
  at = put_nested_head(at, field, vec3_size(v));
  at = put_opt_double(at, v->has_x, 1, v->x);
  at = put_opt_double(at, v->has_y, 2, v->y);
  at = put_opt_double(at, v->has_z, 3, v->z);
  return at;
}


//---------------- ImuSample {acceleration = 1, angular_velocity = 2, magnetic_field = 3,
//                            values = 4 (packed)}

static size_t imu_size(const Sensim__V1__ImuSample* m) {
  const Sensim__V1__Vec3* v[3] = {m->acceleration, m->angular_velocity, m->magnetic_field};
  size_t n = 0;
  for (int i = 0; i < 3; i++) {
    n += v[i] ? nested_size(vec3_size(v[i])) : 0;
  }
  return n + (m->n_values ? nested_size(8u * m->n_values) : 0);
}

static uint8_t* put_imu(uint8_t* at, const Sensim__V1__ImuSample* m) {
  const Sensim__V1__Vec3* v[3] = {m->acceleration, m->angular_velocity, m->magnetic_field};
  for (uint32_t i = 0; i < 3; i++) {
    if (v[i]) {
      at = put_vec3(at, i + 1, v[i]);
    }
  }
  if (m->n_values) {
    at = put_nested_head(at, 4, 8u * m->n_values);
    for (size_t i = 0; i < m->n_values; i++) {
      at = put_raw_double(at, m->values[i]);
    }
  }
  return at;
}


//---------------- ScalarSample {position = 1, speed = 2}

static size_t scalar_size(const Sensim__V1__ScalarSample* m) {
  return 9u * ((m->has_position != 0) + (m->has_speed != 0));
}

static uint8_t* put_scalar(uint8_t* at, const Sensim__V1__ScalarSample* m) {
  at = put_opt_double(at, m->has_position, 1, m->position);
  at = put_opt_double(at, m->has_speed, 2, m->speed);
  return at;
}


//---------------- ConeReading {detected = 1, range = 2, azimuth = 3, elevation = 4, speed = 5,
//                              point = 6, object_id = 7}

static size_t cone_size(const Sensim__V1__ConeReading* m) {
  size_t n = m->has_detected ? 2u : 0u;
  n += 9u * ((m->has_range != 0) + (m->has_azimuth != 0) + (m->has_elevation != 0) +
             (m->has_speed != 0));
  n += m->point ? nested_size(vec3_size(m->point)) : 0;
  return n + (m->has_object_id ? 1 + wire_varint_size(m->object_id) : 0);
}

static uint8_t* put_cone(uint8_t* at, const Sensim__V1__ConeReading* m) {
  if (m->has_detected) {
    *at++ = KEY(1, WT_VARINT);
    *at++ = m->detected ? 1u : 0u;
  }
  at = put_opt_double(at, m->has_range, 2, m->range);
  at = put_opt_double(at, m->has_azimuth, 3, m->azimuth);
  at = put_opt_double(at, m->has_elevation, 4, m->elevation);
  at = put_opt_double(at, m->has_speed, 5, m->speed);
  if (m->point) {
    at = put_vec3(at, 6, m->point);
  }
  if (m->has_object_id) {
    *at++ = KEY(7, WT_VARINT);
    at = wire_put_varint(at, m->object_id);
  }
  return at;
}


//---------------- SensorData {sensor_id = 1, time = 2, frame = 3, sequence = 4,
//                             start_time = 5, end_of_stream = 6; payload: imu = 11,
//                             scalar = 12, cone = 13}

// Whether sd is written here: no cloud, no unknown fields, its payload's message set.
static int by_hand(const Sensim__V1__SensorData* sd) {
  if (sd->base.n_unknown_fields) {
    return 0;
  }
  switch (sd->payload_case) {
    case SENSIM__V1__SENSOR_DATA__PAYLOAD__NOT_SET:
      return 1;
    case SENSIM__V1__SENSOR_DATA__PAYLOAD_IMU:
      return sd->imu && !sd->imu->base.n_unknown_fields;
    case SENSIM__V1__SENSOR_DATA__PAYLOAD_SCALAR:
      return sd->scalar && !sd->scalar->base.n_unknown_fields;
    case SENSIM__V1__SENSOR_DATA__PAYLOAD_CONE:
      return sd->cone && !sd->cone->base.n_unknown_fields;
    default:
      return 0;
  }
}


// The fields before the payload.
static size_t head_fields_size(const Sensim__V1__SensorData* sd) {
  size_t n = sd->has_sensor_id ? 1 + wire_varint_size(sd->sensor_id) : 0;
  n += sd->has_time ? 9u : 0u;
  n += sd->has_frame ? 1 + wire_varint_size(sd->frame) : 0;
  n += sd->has_sequence ? 1 + wire_varint_size(sd->sequence) : 0;
  n += sd->has_start_time ? 9u : 0u;
  return n + (sd->has_end_of_stream ? 2u : 0u);
}


// The payload's own bytes (without its key and length), and its field number.
static size_t payload_size(const Sensim__V1__SensorData* sd, uint32_t* field) {
  switch (sd->payload_case) {
    case SENSIM__V1__SENSOR_DATA__PAYLOAD_IMU:
      *field = 11;
      return imu_size(sd->imu);
    case SENSIM__V1__SENSOR_DATA__PAYLOAD_SCALAR:
      *field = 12;
      return scalar_size(sd->scalar);
    case SENSIM__V1__SENSOR_DATA__PAYLOAD_CONE:
      *field = 13;
      return cone_size(sd->cone);
    default:
      *field = 0;
      return 0;
  }
}


size_t wire_sd_packed_size(const Sensim__V1__SensorData* sd) {
  if (!by_hand(sd)) {
    return protobuf_c_message_get_packed_size(&sd->base);
  }
  uint32_t field;
  size_t p = payload_size(sd, &field);
  return head_fields_size(sd) + (field ? nested_size(p) : 0);
}


size_t wire_sd_pack(const Sensim__V1__SensorData* sd, uint8_t* out) {
  if (!by_hand(sd)) {
    return protobuf_c_message_pack(&sd->base, out);
  }
  uint8_t* at = out;
  if (sd->has_sensor_id) {
    *at++ = KEY(1, WT_VARINT);
    at = wire_put_varint(at, sd->sensor_id);
  }
  at = put_opt_double(at, sd->has_time, 2, sd->time);
  if (sd->has_frame) {
    *at++ = KEY(3, WT_VARINT);
    at = wire_put_varint(at, sd->frame);
  }
  if (sd->has_sequence) {
    *at++ = KEY(4, WT_VARINT);
    at = wire_put_varint(at, sd->sequence);
  }
  at = put_opt_double(at, sd->has_start_time, 5, sd->start_time);
  if (sd->has_end_of_stream) {
    *at++ = KEY(6, WT_VARINT);
    *at++ = sd->end_of_stream ? 1u : 0u;
  }
  uint32_t field;
  size_t p = payload_size(sd, &field);
  if (field) {
    at = put_nested_head(at, field, p);
    switch (field) {
      case 11:
        at = put_imu(at, sd->imu);
        break;
      case 12:
        at = put_scalar(at, sd->scalar);
        break;
      default:
        at = put_cone(at, sd->cone);
        break;
    }
  }
  return (size_t)(at - out);
}


//---------------- StepDone {time = 1, step = 2, outputs = 3, outputs_in_parts = 4}, without
//                 its outputs (they are written after it, wire_out.c)

static int done_by_hand(const Sensim__V1__StepDone* m) {
  return m->n_outputs == 0 && m->base.n_unknown_fields == 0;
}


size_t wire_step_done_packed_size(const Sensim__V1__StepDone* m) {
  if (!done_by_hand(m)) {
    return protobuf_c_message_get_packed_size(&m->base);
  }
  size_t n = m->has_time ? 9u : 0u;
  n += m->has_step ? 1 + wire_varint_size(m->step) : 0;
  return n + (m->has_outputs_in_parts ? 1 + wire_varint_size(m->outputs_in_parts) : 0);
}


size_t wire_step_done_pack(const Sensim__V1__StepDone* m, uint8_t* out) {
  if (!done_by_hand(m)) {
    return protobuf_c_message_pack(&m->base, out);
  }
  uint8_t* at = out;
  at = put_opt_double(at, m->has_time, 1, m->time);
  if (m->has_step) {
    *at++ = KEY(2, WT_VARINT);
    at = wire_put_varint(at, m->step);
  }
  if (m->has_outputs_in_parts) {
    *at++ = KEY(4, WT_VARINT);
    at = wire_put_varint(at, m->outputs_in_parts);
  }
  return (size_t)(at - out);
}
