// SPDX-License-Identifier: MIT
// data.c: SensorData records, from a step's reply (its outputs and the parts sent ahead) or
// pushed to a subscriber, into sensim_sensor_data_t views: a point cloud's bytes stay in the
// received frame; fields and the small payloads are copied into view memory. A step reply's
// records are read by hand (below), the others by nanopb with the callbacks here.
#include <stdio.h>
#include <string.h>

#include "internal.h"

// What the callbacks of one SensorData fill.
typedef struct data_ctx {
  sensim_client_t* cli;
  sensim_point_field_t* fields;
  uint32_t nfields, capfields;
  const uint8_t* data;              // PointCloud.data, in the frame
  size_t size;
  uint32_t nvalues;
  double values[9];
} data_ctx_t;

static bool decode_field(pb_istream_t* s, const pb_field_t* f, void** arg) {
  (void)f;
  data_ctx_t* ctx = *arg;
  sensim_v1_PointField m;
  memset(&m, 0, sizeof(m));
  if (!pb_decode(s, sensim_v1_PointField_fields, &m)) {
    return false;
  }
  if (ctx->nfields == ctx->capfields) {
    uint32_t cap = ctx->capfields ? 2 * ctx->capfields : 16;
    sensim_point_field_t* v = sensim_arena_alloc(ctx->cli, cap * sizeof(*v));
    if (!v) {
      PB_RETURN_ERROR(s, "out of memory");
    }
    if (ctx->nfields) {
      memcpy(v, ctx->fields, ctx->nfields * sizeof(*v));
    }
    ctx->fields = v;
    ctx->capfields = cap;
  }
  sensim_point_field_t* out = &ctx->fields[ctx->nfields++];
  out->name = sensim_arena_strndup(ctx->cli, m.name, strlen(m.name));
  if (!out->name) {
    PB_RETURN_ERROR(s, "out of memory");
  }
  out->offset = m.offset;
  out->datatype = (sensim_datatype_t)m.datatype;
  out->count = m.count;
  return true;
}


static bool decode_cloud_data(pb_istream_t* s, const pb_field_t* f, void** arg) {
  (void)f;
  data_ctx_t* ctx = *arg;
  return sensim_wire_view(s, &ctx->data, &ctx->size);
}


static bool decode_value(pb_istream_t* s, const pb_field_t* f, void** arg) {
  (void)f;
  data_ctx_t* ctx = *arg;
  double v;
  if (!pb_decode_fixed64(s, &v)) {
    return false;
  }
  if (ctx->nvalues == 9) {
    PB_RETURN_ERROR(s, "imu.values has more than 9 values");
  }
  ctx->values[ctx->nvalues++] = v;
  return true;
}


// SensorData's payload callback: the member is selected; set the callbacks inside it.
static bool select_payload(pb_istream_t* s, const pb_field_t* f, void** arg) {
  (void)s;
  data_ctx_t* ctx = *arg;
  if (f->tag == sensim_v1_SensorData_point_cloud_tag) {
    sensim_v1_PointCloud* pc = f->pData;
    pc->fields.funcs.decode = decode_field;
    pc->fields.arg = ctx;
    pc->data.funcs.decode = decode_cloud_data;
    pc->data.arg = ctx;
  } else if (f->tag == sensim_v1_SensorData_imu_tag) {
    sensim_v1_ImuSample* imu = f->pData;
    imu->values.funcs.decode = decode_value;
    imu->values.arg = ctx;
  }
  return true;
}


static void vec3(const sensim_v1_Vec3* v, double out[3]) {
  out[0] = v->x;
  out[1] = v->y;
  out[2] = v->z;
}


// The decoded message and what its callbacks gathered, as a record.
static void convert(const sensim_v1_SensorData* m, const data_ctx_t* ctx, sensim_sensor_data_t* d) {
  memset(d, 0, sizeof(*d));
  d->sensor_id = m->sensor_id;
  d->time = m->time;
  d->start_time = m->start_time;
  d->frame = m->frame;
  d->sequence = m->sequence;
  d->end_of_stream = m->end_of_stream;
  switch (m->which_payload) {
    case sensim_v1_SensorData_point_cloud_tag: {
      const sensim_v1_PointCloud* pc = &m->payload.point_cloud;
      sensim_point_cloud_t* c = &d->point_cloud;
      d->kind = SENSIM_PAYLOAD_POINT_CLOUD;
      c->fields = ctx->fields;
      c->nfields = ctx->nfields;
      c->point_step = pc->point_step;
      c->count = pc->count;
      c->height = pc->has_height ? pc->height : 1;
      c->width = pc->has_width ? pc->width : pc->count;
      c->encoding = (sensim_encoding_t)pc->encoding;
      c->data = ctx->data;
      c->size = ctx->size;
      c->precision = pc->precision;
      c->max_error = pc->max_error;
      c->frame_start_time = pc->frame_start_time;
      c->complete = pc->complete;
      c->frame = (sensim_output_frame_t)pc->frame;
      break;
    }
    case sensim_v1_SensorData_imu_tag: {
      const sensim_v1_ImuSample* s = &m->payload.imu;
      sensim_imu_sample_t* o = &d->imu;
      d->kind = SENSIM_PAYLOAD_IMU;
      o->has_acceleration = s->has_acceleration;
      vec3(&s->acceleration, o->acceleration);
      o->has_angular_velocity = s->has_angular_velocity;
      vec3(&s->angular_velocity, o->angular_velocity);
      o->has_magnetic_field = s->has_magnetic_field;
      vec3(&s->magnetic_field, o->magnetic_field);
      o->nvalues = ctx->nvalues;
      memcpy(o->values, ctx->values, sizeof(o->values));
      break;
    }
    case sensim_v1_SensorData_scalar_tag:
      d->kind = SENSIM_PAYLOAD_SCALAR;
      d->scalar.position = m->payload.scalar.position;
      d->scalar.has_speed = m->payload.scalar.has_speed;
      d->scalar.speed = m->payload.scalar.speed;
      break;
    case sensim_v1_SensorData_cone_tag: {
      const sensim_v1_ConeReading* r = &m->payload.cone;
      d->kind = SENSIM_PAYLOAD_CONE;
      d->cone.detected = r->detected;
      d->cone.range = r->range;
      d->cone.azimuth = r->azimuth;
      d->cone.elevation = r->elevation;
      d->cone.has_speed = r->has_speed;
      d->cone.speed = r->speed;
      vec3(&r->point, d->cone.point);
      d->cone.object_id = r->object_id;
      break;
    }
    default:
      d->kind = SENSIM_PAYLOAD_NONE;
      break;
  }
}


// A received cloud must describe itself: every field inside the point, a RAW cloud exactly
// count x point_step bytes, height x width = count; otherwise the reader of the views would
// run past the data. 0, or -1 with the reason in msg.
static int check_cloud(const sensim_point_cloud_t* c, char* msg, size_t cap) {
  static const unsigned kSize[9] = {0, 1, 1, 2, 2, 4, 4, 4, 8};
  for (uint32_t i = 0; i < c->nfields; i++) {
    const sensim_point_field_t* f = &c->fields[i];
    if (f->datatype < SENSIM_DATATYPE_INT8 || f->datatype > SENSIM_DATATYPE_FLOAT64) {
      snprintf(msg, cap, "point field '%s' has datatype %d", f->name, (int)f->datatype);
      return -1;
    }
    if ((uint64_t)f->offset + (uint64_t)kSize[f->datatype] * f->count > c->point_step) {
      snprintf(msg, cap, "point field '%s' (offset %u, %u x %u bytes) does not fit in a point "
               "of %u bytes", f->name, f->offset, f->count, kSize[f->datatype], c->point_step);
      return -1;
    }
  }
  if (c->encoding == SENSIM_ENCODING_RAW && (uint64_t)c->count * c->point_step != c->size) {
    snprintf(msg, cap, "a raw cloud of %u points of %u bytes carries %zu bytes", c->count,
             c->point_step, c->size);
    return -1;
  }
  if ((uint64_t)c->height * c->width != c->count) {
    snprintf(msg, cap, "a cloud of %u points is %u x %u", c->count, c->height, c->width);
    return -1;
  }
  return 0;
}


sensim_sensor_data_t* sensim_data_list_add(sensim_client_t* cli, sensim_data_list_t* l) {
  if (l->n == l->cap) {
    uint32_t cap = l->cap ? 2 * l->cap : 8;
    sensim_sensor_data_t* v = sensim_arena_alloc(cli, cap * sizeof(*v));
    if (!v) {
      return NULL;
    }
    if (l->n) {
      memcpy(v, l->v, l->n * sizeof(*v));
    }
    l->v = v;
    l->cap = cap;
  }
  return &l->v[l->n++];
}


bool sensim_data_decode_item(pb_istream_t* s, const pb_field_t* f, void** arg) {
  (void)f;
  sensim_data_list_t* list = *arg;
  sensim_reader_t* r = sensim_wire_reader(s);
  if (!r) {
    PB_RETURN_ERROR(s, "a message field with another wire type");
  }
  sensim_client_t* cli = r->cli;
  data_ctx_t ctx = {.cli = cli};
  sensim_v1_SensorData m;
  memset(&m, 0, sizeof(m));
  m.cb_payload.funcs.decode = select_payload;
  m.cb_payload.arg = &ctx;
  if (!pb_decode_ex(s, sensim_v1_SensorData_fields, &m, cli->noinit_data)) {
    return false;
  }
  sensim_sensor_data_t* d = sensim_data_list_add(cli, list);
  if (!d) {
    PB_RETURN_ERROR(s, "out of memory");
  }
  convert(&m, &ctx, d);
  if (d->kind == SENSIM_PAYLOAD_POINT_CLOUD &&
      check_cloud(&d->point_cloud, cli->last_error, sizeof(cli->last_error)) != 0) {
    cli->dec_failed = SENSIM_EPROTO;
    return false;
  }
  return true;
}


//---------------- The hand decoder of a step's records

// A step reply carries its IMU, encoder, odometer and cone records inside the StepDone; they
// are read here straight from the frame's bytes into the same sensim_v1_SensorData and
// data_ctx_t that nanopb and the callbacks above fill, then converted by the same convert():
// nanopb's generic walk over the field descriptors cost about 11k instructions a tick. A
// point cloud payload (a lidar's record, rare in a step's reply) is handed to nanopb with the
// callbacks above. Every rule of nanopb's is kept: what it refuses fails here, what it
// accepts (unknown fields, a repeated sub-message merged into the first, a oneof member
// replaced by another) gives the same record (tests/client_c/test_client_step_decode.c
// checks both on generated replies).

// A Vec3's fields (merged into the Vec3 at arg, as nanopb merges a repeated sub-message).
static bool vec3_field(sensim_cursor_t* c, uint32_t f, unsigned w, void* arg) {
  sensim_v1_Vec3* v = arg;
  switch (f) {
    case sensim_v1_Vec3_x_tag:
      v->has_x = true;
      return sensim_cur_double(c, w, &v->x);
    case sensim_v1_Vec3_y_tag:
      v->has_y = true;
      return sensim_cur_double(c, w, &v->y);
    case sensim_v1_Vec3_z_tag:
      v->has_z = true;
      return sensim_cur_double(c, w, &v->z);
    default:
      return sensim_cur_skip(c, w);
  }
}


static bool vec3_msg(sensim_cursor_t* c, unsigned w, bool* has, sensim_v1_Vec3* v) {
  *has = true;
  return sensim_cur_message(c, w, vec3_field, v);
}


// One value for ImuSample.values from the 8 bytes at p, as decode_value takes it.
static bool take_value(data_ctx_t* ctx, const uint8_t* p) {
  if (ctx->nvalues == 9) {
    return false;
  }
  memcpy(&ctx->values[ctx->nvalues++], p, 8);
  return true;
}


// ImuSample.values as nanopb hands a callback field to decode_value: a length-delimited one
// value by value, the callback called at least once (so an empty one fails); any other wire
// type as a stream over the value's raw bytes (at most 10 of a varint), of which decode_value
// takes the first 8.
static bool imu_values(sensim_cursor_t* c, unsigned wt, data_ctx_t* ctx) {
  if (wt == PB_WT_STRING) {
    sensim_cursor_t m;
    if (!sensim_cur_sub(c, &m)) {
      return false;
    }
    do {
      if (m.end - m.at < 8 || !take_value(ctx, m.p + m.at)) {
        return false;
      }
      m.at += 8;
    } while (m.at < m.end);
    return true;
  }
  size_t n = 0;
  if (wt == PB_WT_VARINT) {
    do {
      if (++n > 10 || c->at + n > c->end) {
        return false;
      }
    } while (c->p[c->at + n - 1] & 0x80u);
  } else if ((n = sensim_cur_fixed_bytes(wt)) == 0 || n > c->end - c->at) {
    return false;
  }
  const uint8_t* p = c->p + c->at;
  c->at += n;
  return n >= 8 && take_value(ctx, p);
}


// A record being decoded: the message and what the callbacks would gather.
typedef struct record {
  sensim_v1_SensorData* m;
  data_ctx_t* ctx;
} record_t;


static bool imu_field(sensim_cursor_t* c, uint32_t f, unsigned w, void* arg) {
  const record_t* r = arg;
  sensim_v1_ImuSample* s = &r->m->payload.imu;
  switch (f) {
    case sensim_v1_ImuSample_acceleration_tag:
      return vec3_msg(c, w, &s->has_acceleration, &s->acceleration);
    case sensim_v1_ImuSample_angular_velocity_tag:
      return vec3_msg(c, w, &s->has_angular_velocity, &s->angular_velocity);
    case sensim_v1_ImuSample_magnetic_field_tag:
      return vec3_msg(c, w, &s->has_magnetic_field, &s->magnetic_field);
    case sensim_v1_ImuSample_values_tag:
      return imu_values(c, w, r->ctx);
    default:
      return sensim_cur_skip(c, w);
  }
}


static bool scalar_field(sensim_cursor_t* c, uint32_t f, unsigned w, void* arg) {
  sensim_v1_ScalarSample* s = &((const record_t*)arg)->m->payload.scalar;
  switch (f) {
    case sensim_v1_ScalarSample_position_tag:
      s->has_position = true;
      return sensim_cur_double(c, w, &s->position);
    case sensim_v1_ScalarSample_speed_tag:
      s->has_speed = true;
      return sensim_cur_double(c, w, &s->speed);
    default:
      return sensim_cur_skip(c, w);
  }
}


static bool cone_field(sensim_cursor_t* c, uint32_t f, unsigned w, void* arg) {
  sensim_v1_ConeReading* r = &((const record_t*)arg)->m->payload.cone;
  switch (f) {
    case sensim_v1_ConeReading_detected_tag:
      r->has_detected = true;
      return sensim_cur_bool(c, w, &r->detected);
    case sensim_v1_ConeReading_range_tag:
      r->has_range = true;
      return sensim_cur_double(c, w, &r->range);
    case sensim_v1_ConeReading_azimuth_tag:
      r->has_azimuth = true;
      return sensim_cur_double(c, w, &r->azimuth);
    case sensim_v1_ConeReading_elevation_tag:
      r->has_elevation = true;
      return sensim_cur_double(c, w, &r->elevation);
    case sensim_v1_ConeReading_speed_tag:
      r->has_speed = true;
      return sensim_cur_double(c, w, &r->speed);
    case sensim_v1_ConeReading_point_tag:
      return vec3_msg(c, w, &r->has_point, &r->point);
    case sensim_v1_ConeReading_object_id_tag:
      r->has_object_id = true;
      return sensim_cur_u32(c, w, &r->object_id);
    default:
      return sensim_cur_skip(c, w);
  }
}


// A point cloud payload through nanopb (its own descriptor walk, the callbacks above), from
// a reader over the frame so that the data stays a view.
static bool cloud_msg(sensim_cursor_t* c, unsigned w, const record_t* r) {
  sensim_cursor_t sub;
  if (w != PB_WT_STRING || !sensim_cur_sub(c, &sub)) {
    return false;
  }
  sensim_v1_PointCloud* pc = &r->m->payload.point_cloud;
  pc->fields.funcs.decode = decode_field;
  pc->fields.arg = r->ctx;
  pc->data.funcs.decode = decode_cloud_data;
  pc->data.arg = r->ctx;
  sensim_reader_t rd = {.base = sub.p, .pos = sub.at, .cli = r->ctx->cli};
  pb_istream_t s = sensim_wire_istream(&rd, sub.end - sub.at);
  return pb_decode_ex(&s, sensim_v1_PointCloud_fields, pc, PB_DECODE_NOINIT);
}


// A payload member: selected first (a new member starts from its defaults, zero; the same
// member again is merged into), then decoded (another wire type than a sub-message's fails).
static bool payload(sensim_cursor_t* c, unsigned w, pb_size_t tag, const record_t* r) {
  sensim_v1_SensorData* m = r->m;
  if (m->which_payload != tag) {
    memset(&m->payload, 0, sizeof(m->payload));
    m->which_payload = tag;
  }
  switch (tag) {
    case sensim_v1_SensorData_point_cloud_tag:
      return cloud_msg(c, w, r);
    case sensim_v1_SensorData_imu_tag:
      return sensim_cur_message(c, w, imu_field, (void*)r);
    case sensim_v1_SensorData_scalar_tag:
      return sensim_cur_message(c, w, scalar_field, (void*)r);
    default:
      return sensim_cur_message(c, w, cone_field, (void*)r);
  }
}


static bool data_field(sensim_cursor_t* c, uint32_t f, unsigned w, void* arg) {
  const record_t* r = arg;
  sensim_v1_SensorData* m = r->m;
  switch (f) {
    case sensim_v1_SensorData_sensor_id_tag:
      m->has_sensor_id = true;
      return sensim_cur_u32(c, w, &m->sensor_id);
    case sensim_v1_SensorData_time_tag:
      m->has_time = true;
      return sensim_cur_double(c, w, &m->time);
    case sensim_v1_SensorData_frame_tag:
      m->has_frame = true;
      return sensim_cur_u64(c, w, &m->frame);
    case sensim_v1_SensorData_sequence_tag:
      m->has_sequence = true;
      return sensim_cur_u64(c, w, &m->sequence);
    case sensim_v1_SensorData_start_time_tag:
      m->has_start_time = true;
      return sensim_cur_double(c, w, &m->start_time);
    case sensim_v1_SensorData_end_of_stream_tag:
      m->has_end_of_stream = true;
      return sensim_cur_bool(c, w, &m->end_of_stream);
    case sensim_v1_SensorData_point_cloud_tag:
    case sensim_v1_SensorData_imu_tag:
    case sensim_v1_SensorData_scalar_tag:
    case sensim_v1_SensorData_cone_tag:
      return payload(c, w, (pb_size_t)f, r);
    default:
      return sensim_cur_skip(c, w);
  }
}


sensim_status_t sensim_data_hand_decode(sensim_client_t* cli, sensim_cursor_t* c,
                                        sensim_data_list_t* list) {
  data_ctx_t ctx = {.cli = cli};
  sensim_v1_SensorData m;
  memset(&m, 0, sizeof(m));
  record_t r = {&m, &ctx};
  if (!sensim_cur_each(c, data_field, &r)) {
    return sensim_cli_fail(cli, SENSIM_EPROTO, "cannot decode a reply: a malformed record at "
                           "byte %zu of the step's reply", c->at);
  }
  sensim_sensor_data_t* d = sensim_data_list_add(cli, list);
  if (!d) {
    return sensim_cli_fail(cli, SENSIM_EPROTO, "cannot decode a reply: out of memory");
  }
  convert(&m, &ctx, d);
  if (d->kind == SENSIM_PAYLOAD_POINT_CLOUD &&
      check_cloud(&d->point_cloud, cli->last_error, sizeof(cli->last_error)) != 0) {
    return SENSIM_EPROTO;
  }
  return SENSIM_OK;
}


void sensim_data_select(sensim_v1_SensorData* data, void* arg) {
  data_ctx_t* ctx = arg;
  if (!ctx) {
    return;
  }
  data->cb_payload.funcs.decode = select_payload;
  data->cb_payload.arg = ctx;
}


sensim_status_t sensim_data_from_frame(sensim_client_t* cli, const sensim_frame_t* f,
                                       sensim_sensor_data_t* d, uint64_t* sequence) {
  data_ctx_t ctx = {.cli = cli};
  void* saved = cli->dec;
  pb_size_t saved_body = cli->dec_body;
  cli->dec = &ctx;
  cli->dec_body = sensim_v1_Envelope_sensor_data_tag;
  sensim_status_t st = sensim_decode_reply(cli, f, sensim_v1_Envelope_sensor_data_tag);
  cli->dec = saved;
  cli->dec_body = saved_body;
  if (st != SENSIM_OK) {
    return st;
  }
  convert(&cli->rx.body.sensor_data, &ctx, d);
  if (d->kind == SENSIM_PAYLOAD_POINT_CLOUD &&
      check_cloud(&d->point_cloud, cli->last_error, sizeof(cli->last_error)) != 0) {
    sensim_client_fail_closed(cli, SENSIM_EPROTO);
    return SENSIM_EPROTO;
  }
  if (sequence) {
    *sequence = cli->rx.sequence;
  }
  return SENSIM_OK;
}


sensim_status_t sensim_point_cloud_read(const sensim_point_cloud_t* cloud, void* out,
                                        size_t out_cap) {
  if (!cloud) {
    return SENSIM_INVALID_ARGUMENT;
  }
  return sensim_point_cloud_decode(cloud->encoding, cloud->data, cloud->size, cloud->count,
                                   cloud->point_step, out, out_cap);
}


const sensim_point_field_t* sensim_point_cloud_field(const sensim_point_cloud_t* cloud,
                                                     const char* name) {
  if (!cloud || !name) {
    return NULL;
  }
  for (uint32_t i = 0; i < cloud->nfields; i++) {
    if (cloud->fields[i].name && strcmp(cloud->fields[i].name, name) == 0) {
      return &cloud->fields[i];
    }
  }
  return NULL;
}
