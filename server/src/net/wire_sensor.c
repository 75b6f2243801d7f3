// SPDX-License-Identifier: MIT
// wire_sensor.c: CreateSensor -> the model's constructor -> env_create_sensor, and the step's
// sensor records -> SensorData messages (see wire_sensor.h).
#include "net/wire_sensor.h"

#include <string.h>

#include "base/mem.h"

void wire_vec3_or(const Sensim__V1__Vec3* v, double dx, double dy, double dz, double dest[3]) {
  if (!v) {
    dest[0] = dx;
    dest[1] = dy;
    dest[2] = dz;
    return;
  }
  dest[0] = v->has_x ? v->x : 0.0;
  dest[1] = v->has_y ? v->y : 0.0;
  dest[2] = v->has_z ? v->z : 0.0;
}


pose_t wire_pose_from(const Sensim__V1__Pose* p) {
  pose_t out = xform_identity();
  if (!p) {
    return out;
  }
  wire_vec3_or(p->position, 0, 0, 0, out.p);
  if (p->orientation) {
    const Sensim__V1__Quat* q = p->orientation;
    out.q[0] = q->has_w ? q->w : 0.0;
    out.q[1] = q->has_x ? q->x : 0.0;
    out.q[2] = q->has_y ? q->y : 0.0;
    out.q[3] = q->has_z ? q->z : 0.0;
  }
  return out;
}


int wire_mat3_or_identity(const Sensim__V1__Mat3* m, const char* field, double dest[9],
                          err_msg_t* msg) {
  static const double kIdentity[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
  if (!m) {
    memcpy(dest, kIdentity, sizeof(kIdentity));
    return 0;
  }
  if (m->n_m != 9) {
    return err_set(msg, ERR_INVAL, "%s.m has %zu values, expected 9 (row-major 3x3)", field,
                   m->n_m);
  }
  memcpy(dest, m->m, 9 * sizeof(double));
  return 0;
}


int wire_sensor_create(const Sensim__V1__CreateSensor* m, env_t* e, err_msg_t* msg) {
  sensor_t s = {0};
  int rc;
  switch (m->config_case) {
    case SENSIM__V1__CREATE_SENSOR__CONFIG_LIDAR:
      rc = wire_lidar_build(m->lidar, env_get_limits(e)->max_output_bytes, &s, msg);
      break;
    case SENSIM__V1__CREATE_SENSOR__CONFIG_IMU:
      rc = wire_imu_build(m->imu, &s, msg);
      break;
    case SENSIM__V1__CREATE_SENSOR__CONFIG_ENCODER:
      rc = wire_encoder_build(m->encoder, &s, msg);
      break;
    case SENSIM__V1__CREATE_SENSOR__CONFIG_ODOMETER:
      rc = wire_odometer_build(m->odometer, &s, msg);
      break;
    case SENSIM__V1__CREATE_SENSOR__CONFIG_CONE:
      rc = wire_cone_build(m->cone, &s, msg);
      break;
    default:
      return err_set(msg, ERR_INVAL,
                     "config is not set (one of lidar, imu, encoder, odometer, cone)");
  }
  if (rc < 0) {
    return rc;
  }
  env_sensor_brief_t brief = {0};
  if (m->config_case == SENSIM__V1__CREATE_SENSOR__CONFIG_LIDAR &&
      wire_lidar_brief(m->lidar, &brief) < 0) {
    s.ops->destroy(s.self);
    return err_set(msg, ERR_INTERNAL, "lidar: its layout could not be described");
  }
  sensor_desc_t d = {
      .id = m->has_id ? m->id : 0,
      .body_id = m->has_body_id ? m->body_id : 0,
      .mount = wire_pose_from(m->mount),
      .name = m->name,
      .sensor = s,
      .brief = &brief,
  };
  rc = env_create_sensor(e, &d, msg);
  if (rc < 0) {
    s.ops->destroy(s.self);
  }
  return rc;
}

//---------------- Outputs

typedef struct out_rec {
  Sensim__V1__SensorData data;
  union {
    struct {
      Sensim__V1__PointCloud msg;
      Sensim__V1__PointField fields[SENSOR_MAX_FIELDS];
      Sensim__V1__PointField* ptrs[SENSOR_MAX_FIELDS];
    } cloud;
    struct {
      Sensim__V1__ImuSample msg;
      Sensim__V1__Vec3 v[3];
    } imu;
    Sensim__V1__ScalarSample scalar;
    struct {
      Sensim__V1__ConeReading msg;
      Sensim__V1__Vec3 point;
    } cone;
  } u;
} out_rec_t;

// One block: this head, then the records' messages, then the pointers to them.
struct wire_outputs {
  out_rec_t* recs;
  Sensim__V1__SensorData** ptrs;
  int owned;                    // the block is mem_alloc'ed (else the caller's memory)
};


static Sensim__V1__Vec3* vec3_set(Sensim__V1__Vec3* v, const double a[3]) {
  sensim__v1__vec3__init(v);
  v->has_x = v->has_y = v->has_z = 1;
  v->x = a[0];
  v->y = a[1];
  v->z = a[2];
  return v;
}


static void encode_cloud(const sensor_cloud_t* c, out_rec_t* o) {
  Sensim__V1__PointCloud* pc = &o->u.cloud.msg;
  sensim__v1__point_cloud__init(pc);
  for (uint32_t i = 0; i < c->nfield; i++) {
    Sensim__V1__PointField* f = &o->u.cloud.fields[i];
    sensim__v1__point_field__init(f);
    f->name = (char*)c->fields[i].name;  // packed only, never written
    f->has_offset = f->has_datatype = f->has_count = 1;
    f->offset = c->fields[i].offset;
    f->datatype = (Sensim__V1__PointField__Datatype)c->fields[i].datatype;
    f->count = c->fields[i].count;
    o->u.cloud.ptrs[i] = f;
  }
  pc->n_fields = c->nfield;
  pc->fields = o->u.cloud.ptrs;
  pc->has_point_step = pc->has_count = pc->has_encoding = pc->has_data = 1;
  pc->point_step = c->point_step;
  pc->count = c->count;
  pc->encoding = SENSIM__V1__ENCODING__ENCODING_RAW;
  pc->data.len = (size_t)c->count * c->point_step;
  pc->data.data = c->data;
  // organisation as sensor_msgs/PointCloud2: an unorganised cloud is one row of its points
  pc->has_height = pc->has_width = 1;
  pc->height = c->height ? c->height : 1;
  pc->width = c->height ? c->width : c->count;
  pc->has_frame_start_time = pc->has_complete = pc->has_frame = 1;
  pc->frame_start_time = c->frame_start_time;
  pc->complete = c->complete != 0;
  pc->frame = c->world_frame ? SENSIM__V1__OUTPUT_FRAME__FRAME_WORLD
                             : SENSIM__V1__OUTPUT_FRAME__FRAME_SENSOR;
  o->data.payload_case = SENSIM__V1__SENSOR_DATA__PAYLOAD_POINT_CLOUD;
  o->data.point_cloud = pc;
}


static void encode_imu(const sensor_imu_t* s, out_rec_t* o) {
  Sensim__V1__ImuSample* m = &o->u.imu.msg;
  sensim__v1__imu_sample__init(m);
  if (s->has_acceleration) {
    m->acceleration = vec3_set(&o->u.imu.v[0], s->acceleration);
  }
  if (s->has_angular_velocity) {
    m->angular_velocity = vec3_set(&o->u.imu.v[1], s->angular_velocity);
  }
  if (s->has_magnetic_field) {
    m->magnetic_field = vec3_set(&o->u.imu.v[2], s->magnetic_field);
  }
  m->n_values = s->nvalues;
  m->values = (double*)s->values;  // packed only, never written
  o->data.payload_case = SENSIM__V1__SENSOR_DATA__PAYLOAD_IMU;
  o->data.imu = m;
}


static void encode_scalar(const sensor_scalar_t* s, out_rec_t* o) {
  Sensim__V1__ScalarSample* m = &o->u.scalar;
  sensim__v1__scalar_sample__init(m);
  m->has_position = 1;
  m->position = s->position;
  m->has_speed = s->has_speed != 0;
  m->speed = s->speed;
  o->data.payload_case = SENSIM__V1__SENSOR_DATA__PAYLOAD_SCALAR;
  o->data.scalar = m;
}


static void encode_cone(const sensor_cone_t* s, out_rec_t* o) {
  Sensim__V1__ConeReading* m = &o->u.cone.msg;
  sensim__v1__cone_reading__init(m);
  m->has_detected = 1;
  m->detected = s->detected != 0;
  if (s->detected) {
    m->has_range = m->has_azimuth = m->has_elevation = m->has_object_id = 1;
    m->range = s->range;
    m->azimuth = s->azimuth;
    m->elevation = s->elevation;
    m->object_id = s->object_id;
    m->point = vec3_set(&o->u.cone.point, s->point);
  }
  m->has_speed = s->has_speed != 0;
  m->speed = s->speed;
  o->data.payload_case = SENSIM__V1__SENSOR_DATA__PAYLOAD_CONE;
  o->data.cone = m;
}


size_t wire_sensor_outputs_bytes(uint32_t n) {
  _Static_assert(sizeof(wire_outputs_t) % _Alignof(out_rec_t) == 0 &&
                 sizeof(out_rec_t) % _Alignof(Sensim__V1__SensorData*) == 0,
                 "the block's parts stay aligned");
  return sizeof(wire_outputs_t) + (size_t)n * (sizeof(out_rec_t) +
                                               sizeof(Sensim__V1__SensorData*));
}


int wire_sensor_outputs(const sensor_out_t* recs, Sensim__V1__StepDone* done,
                        wire_outputs_t** store, err_msg_t* msg) {
  return wire_sensor_outputs_in(recs, done, NULL, 0, store, msg);
}


int wire_sensor_outputs_in(const sensor_out_t* recs, Sensim__V1__StepDone* done, void* buf,
                           size_t cap, wire_outputs_t** store, err_msg_t* msg) {
  *store = NULL;
  if (recs->n == 0) {
    return 0;
  }
  size_t bytes = wire_sensor_outputs_bytes(recs->n);
  wire_outputs_t* w = bytes <= cap ? buf : mem_alloc(bytes);
  if (!w) {
    return err_set(msg, ERR_NOMEM, "out of memory for %u sensor outputs", recs->n);
  }
  w->owned = w != buf;
  w->recs = (out_rec_t*)(w + 1);
  w->ptrs = (Sensim__V1__SensorData**)(w->recs + recs->n);
  for (uint32_t i = 0; i < recs->n; i++) {
    const sensor_record_t* r = &recs->rec[i];
    out_rec_t* o = &w->recs[i];
    sensim__v1__sensor_data__init(&o->data);
    o->data.has_sensor_id = o->data.has_time = o->data.has_frame = 1;
    o->data.sensor_id = r->sensor_id;
    o->data.time = r->time;
    o->data.frame = r->frame;
    switch (r->kind) {
      case SENSOR_REC_CLOUD:
        encode_cloud(&r->u.cloud, o);
        break;
      case SENSOR_REC_IMU:
        encode_imu(&r->u.imu, o);
        break;
      case SENSOR_REC_SCALAR:
        encode_scalar(&r->u.scalar, o);
        break;
      case SENSOR_REC_CONE:
        encode_cone(&r->u.cone, o);
        break;
    }
    w->ptrs[i] = &o->data;
  }
  done->n_outputs = recs->n;
  done->outputs = w->ptrs;
  *store = w;
  return 0;
}


void wire_sensor_outputs_free(wire_outputs_t* store) {
  if (store && store->owned) {
    mem_free(store);
  }
}
