// SPDX-License-Identifier: MIT
// wire_stream.c: pushed SensorData frames (see wire_stream.h).
#include "net/wire_stream.h"

#include "base/mem.h"
#include "net/wire_pb.h"
#include "net/wire_sensor.h"

// Envelope field 3 (sequence), wire type 0.
#define KEY_SEQUENCE 0x18u


static int pack_shared(Sensim__V1__SensorData* sd, shared_buf_t** out) {
  Sensim__V1__Envelope env = SENSIM__V1__ENVELOPE__INIT;
  env.body_case = SENSIM__V1__ENVELOPE__BODY_SENSOR_DATA;
  env.sensor_data = sd;
  size_t size = protobuf_c_message_get_packed_size(&env.base);
  shared_buf_t* b = shared_buf_create(size);
  if (!b) {
    return ERR_NOMEM;
  }
  protobuf_c_message_pack(&env.base, shared_buf_payload(b));
  *out = b;
  return 0;
}


int wire_stream_encode(const sensor_record_t* rec, double start_time, const codec_params_t* p,
                       shared_buf_t** out, err_msg_t* msg) {
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
  uint8_t* enc = NULL;
  if (rec->kind == SENSOR_REC_CLOUD && p->encoding != CODEC_RAW) {
    codec_cloud_t c = codec_cloud_of(&rec->u.cloud);
    size_t cap = codec_max_size(p, &c), len;
    double max_error;
    enc = mem_alloc(cap ? cap : 1);
    rc = enc ? codec_encode(p, &c, enc, cap, &len, &max_error, msg)
             : err_set(msg, ERR_NOMEM, "out of memory encoding a point cloud");
    if (rc == 0) {
      Sensim__V1__PointCloud* pc = sd->point_cloud;
      pc->encoding = (Sensim__V1__Encoding)p->encoding;
      pc->data.data = enc;
      pc->data.len = len;
      pc->has_max_error = 1;
      pc->max_error = max_error;
      if (p->encoding == CODEC_QZSTD) {
        pc->has_precision = 1;
        pc->precision = p->precision;
      }
    }
  }
  if (rc == 0 && pack_shared(sd, out) != 0) {
    rc = err_set(msg, ERR_NOMEM, "out of memory for a sensor frame");
  }
  mem_free(enc);
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
  uint8_t var[10];
  size_t n = 0;
  do {
    var[n] = (uint8_t)(sequence & 0x7Fu);
    sequence >>= 7;
    var[n] |= sequence ? 0x80u : 0u;
    n++;
  } while (sequence);
  buf[0] = KEY_SEQUENCE;
  for (size_t i = 0; i < n; i++) {
    buf[1 + i] = var[i];
  }
  return 1 + n;
}
