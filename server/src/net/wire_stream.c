// SPDX-License-Identifier: MIT
// wire_stream.c: pushed SensorData frames (see wire_stream.h).
#include "net/wire_stream.h"

#include <string.h>

#include "base/mem.h"
#include "net/wire_pb.h"
#include "net/wire_sensor.h"

// Envelope field 3 (sequence), wire type 0.
#define KEY_SEQUENCE 0x18u


static int pack_shared(Sensim__V1__SensorData* sd, shared_buf_t** out) {
  wire_sd_t x = {.sd = sd};
  wire_sd_measure(&x);
  return wire_out_pushed(&x, out);
}


int wire_stream_params_equal(const wire_stream_params_t* a, const wire_stream_params_t* b) {
  const codec_params_t* x = &a->codec;
  const codec_params_t* y = &b->codec;
  if (x->encoding != y->encoding || x->level != y->level || a->nfield != b->nfield ||
      (x->encoding == CODEC_QZSTD && x->precision != y->precision)) {
    return 0;
  }
  for (uint32_t i = 0; i < a->nfield; i++) {
    if (strcmp(a->fields[i], b->fields[i]) != 0) {
      return 0;
    }
  }
  return 1;
}


// The cloud reduced to the fields asked for (those it has), into *out with a buffer of its
// own (blob_release out->blob). ERR_NOMEM.
static int select_fields(const sensor_cloud_t* c, const wire_stream_params_t* p,
                         sensor_cloud_t* out) {
  *out = *c;
  out->nfield = 0;
  out->data = NULL;
  out->blob = NULL;
  uint32_t src[SENSOR_MAX_FIELDS], size[SENSOR_MAX_FIELDS], at = 0, align = 1;
  for (uint32_t k = 0; k < p->nfield; k++) {
    for (uint32_t i = 0; i < c->nfield; i++) {
      if (strcmp(c->fields[i].name, p->fields[k]) != 0 || out->nfield == SENSOR_MAX_FIELDS) {
        continue;
      }
      uint32_t es = sensor_datatype_size(c->fields[i].datatype);
      at = (at + es - 1) / es * es;
      align = es > align ? es : align;
      sensor_field_t* f = &out->fields[out->nfield];
      *f = c->fields[i];
      f->offset = at;
      src[out->nfield] = c->fields[i].offset;
      size[out->nfield] = es * c->fields[i].count;
      at += size[out->nfield];
      out->nfield++;
    }
  }
  out->point_step = (at + align - 1) / align * align;
  err_msg_t msg;
  if (sensor_cloud_alloc(out, c->count, &msg) != 0) {
    return ERR_NOMEM;
  }
  for (uint32_t n = 0; n < c->count; n++) {
    const uint8_t* from = c->data + (size_t)n * c->point_step;
    uint8_t* to = out->data + (size_t)n * out->point_step;
    for (uint32_t i = 0; i < out->nfield; i++) {
      memcpy(to + out->fields[i].offset, from + src[i], size[i]);
    }
  }
  return 0;
}


int wire_stream_encode(const sensor_record_t* rec, double start_time,
                       const wire_stream_params_t* p, shared_buf_t** out, err_msg_t* msg) {
  // a point cloud with the fields asked for
  sensor_record_t sel;
  if (rec->kind == SENSOR_REC_CLOUD && p->nfield) {
    sel = *rec;
    if (select_fields(&rec->u.cloud, p, &sel.u.cloud) != 0) {
      return err_set(msg, ERR_NOMEM, "out of memory selecting point fields");
    }
    int rc = wire_stream_encode(&sel, start_time, &(wire_stream_params_t){.codec = p->codec},
                                out, msg);
    sensor_record_release(&sel);
    return rc;
  }
  sensor_out_t one = {.rec = (sensor_record_t*)rec, .n = 1, .cap = 1};  // read only
  Sensim__V1__StepDone done = SENSIM__V1__STEP_DONE__INIT;
  wire_outputs_t* store;
  int rc = wire_sensor_outputs(&one, &done, &store, msg);
  if (rc) {
    return rc;
  }
  Sensim__V1__SensorData* sd = done.outputs[0];
  sd->has_start_time = 1;
  sd->start_time = start_time;

  // the frame refers to the points (RAW) or to their encoding, written once into a buffer of
  // its own: neither is copied into the frame
  blob_t* enc = NULL;
  wire_sd_t x = {.sd = sd, .owner = rec->kind == SENSOR_REC_CLOUD ? rec->u.cloud.blob : NULL};
  const codec_params_t* cp = &p->codec;
  if (rec->kind == SENSOR_REC_CLOUD && cp->encoding != CODEC_RAW) {
    codec_cloud_t c = codec_cloud_of(&rec->u.cloud);
    size_t cap = codec_max_size(cp, &c), len;
    double max_error;
    enc = blob_create(cap ? cap : 1);
    rc = enc ? codec_encode(cp, &c, blob_data(enc), cap, &len, &max_error, msg)
             : err_set(msg, ERR_NOMEM, "out of memory encoding a point cloud");
    if (rc == 0) {
      Sensim__V1__PointCloud* pc = sd->point_cloud;
      x.owner = enc;
      pc->encoding = (Sensim__V1__Encoding)cp->encoding;
      pc->data.data = blob_data(enc);
      pc->data.len = len;
      pc->has_max_error = 1;
      pc->max_error = max_error;
      if (cp->encoding == CODEC_QZSTD) {
        pc->has_precision = 1;
        pc->precision = cp->precision;
      }
    }
  }
  if (rc == 0) {
    wire_sd_measure(&x);
    if (wire_out_pushed(&x, out) != 0) {
      rc = err_set(msg, ERR_NOMEM, "out of memory for a sensor frame");
    }
  }
  blob_release(enc);
  wire_sensor_outputs_free(store);
  return rc;
}


int wire_stream_encode_end(uint32_t sensor_id, shared_buf_t** out) {
  Sensim__V1__SensorData sd = SENSIM__V1__SENSOR_DATA__INIT;
  sd.has_sensor_id = sd.has_end_of_stream = 1;
  sd.sensor_id = sensor_id;
  sd.end_of_stream = 1;
  return pack_shared(&sd, out);
}


size_t wire_stream_prefix(uint64_t sequence, uint8_t buf[WIRE_STREAM_PREFIX_MAX]) {
  buf[0] = KEY_SEQUENCE;
  return (size_t)(wire_put_varint(buf + 1, sequence) - buf);
}
