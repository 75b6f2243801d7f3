// SPDX-License-Identifier: MIT
// test_wire_stream.c: a pushed frame (a subscriber's sequence prefix, then the shared bytes)
// decodes with protobuf-c as one Envelope with that sequence and the record's data; a RAW
// frame refers to the record's points instead of copying them; point fields are selected and
// packed as asked; the end-of-stream frame.
#include "net/wire_stream.h"

#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "check.h"
#include "net/wire_pb.h"

#define NPT 5u


// A cloud of NPT points: x y z intensity (float32), ring (uint16), 2 padding bytes.
static sensor_record_t make_cloud(void) {
  sensor_record_t r;
  memset(&r, 0, sizeof(r));
  r.sensor_id = 9;
  r.time = 0.3;
  r.frame = 4;
  r.kind = SENSOR_REC_CLOUD;
  sensor_cloud_t* c = &r.u.cloud;
  static const char* const names[5] = {"x", "y", "z", "intensity", "ring"};
  for (uint32_t i = 0; i < 5; i++) {
    c->fields[i] = (sensor_field_t){names[i], 4 * i, i < 4 ? SENSOR_FLOAT32 : SENSOR_UINT16, 1};
  }
  c->nfield = 5;
  c->point_step = 20;
  err_msg_t msg;
  if (sensor_cloud_alloc(c, NPT, &msg) != 0) {
    abort();
  }
  for (uint32_t i = 0; i < NPT; i++) {
    float v[4] = {1.0f + (float)i, -2.0f, 0.5f * (float)i, 0.25f * (float)i};
    uint16_t ring = (uint16_t)(100 + i);
    memcpy(c->data + 20 * i, v, 16);
    memcpy(c->data + 20 * i + 16, &ring, 2);
  }
  return r;
}


// Prefix + shared payload (its pieces gathered, as a scatter-gather write sends them),
// unpacked by protobuf-c.
static Sensim__V1__Envelope* unpack_frame(shared_buf_t* b, uint64_t seq) {
  uint8_t frame[1 << 12];
  size_t n = wire_stream_prefix(seq, frame);
  if (n > WIRE_STREAM_PREFIX_MAX || n + shared_buf_len(b) > sizeof(frame)) {
    return NULL;
  }
  const uint8_t* p[8];
  size_t len[8];
  uint32_t np = shared_buf_pieces(b, 4, p, len, 8);
  for (uint32_t i = 0; i < np && i < 8; i++) {
    memcpy(frame + n, p[i], len[i]);
    n += len[i];
  }
  return sensim__v1__envelope__unpack(NULL, n, frame);
}


// 1 when a piece of b is exactly the n bytes at data (referred to, not copied).
static int refers_to(const shared_buf_t* b, const uint8_t* data, size_t n) {
  const uint8_t* p[8];
  size_t len[8];
  uint32_t np = shared_buf_pieces(b, 0, p, len, 8);
  for (uint32_t i = 0; i < np && i < 8; i++) {
    if (p[i] == data && len[i] == n) {
      return 1;
    }
  }
  return 0;
}


TEST(wire_stream_frame_carries_sequence_and_record) {
  sensor_record_t r = make_cloud();
  wire_stream_params_t p = {.codec = {.encoding = CODEC_RAW}};
  shared_buf_t* b;
  err_msg_t msg;
  ASSERT_OK(wire_stream_encode(&r, 0.2, &p, &b, &msg));
  ASSERT_TRUE(refers_to(b, r.u.cloud.data, (size_t)NPT * 20));
  static const uint64_t kSeqs[] = {1, 127, 128, 300, 1ull << 40, UINT64_MAX};
  for (size_t k = 0; k < sizeof(kSeqs) / sizeof(kSeqs[0]); k++) {
    Sensim__V1__Envelope* e = unpack_frame(b, kSeqs[k]);
    ASSERT_TRUE(e != NULL);
    ASSERT_EQ(e->id, 0u);
    ASSERT_TRUE(e->has_sequence);
    ASSERT_EQ(e->sequence, kSeqs[k]);
    ASSERT_EQ(e->body_case, SENSIM__V1__ENVELOPE__BODY_SENSOR_DATA);
    const Sensim__V1__SensorData* sd = e->sensor_data;
    ASSERT_EQ(sd->sensor_id, 9u);
    ASSERT_EQ(sd->frame, 4u);
    ASSERT_DEQ(sd->time, 0.3);
    ASSERT_DEQ(sd->start_time, 0.2);
    ASSERT_EQ(sd->point_cloud->count, NPT);
    ASSERT_EQ(sd->point_cloud->data.len, (size_t)NPT * 20);
    ASSERT_MEM_EQ(sd->point_cloud->data.data, r.u.cloud.data, (size_t)NPT * 20);
    sensim__v1__envelope__free_unpacked(e, NULL);
  }

  // the frame holds the points' buffer: they outlive the record
  uint8_t copy[NPT * 20];
  memcpy(copy, r.u.cloud.data, sizeof copy);
  sensor_record_release(&r);
  Sensim__V1__Envelope* e = unpack_frame(b, 1);
  ASSERT_TRUE(e != NULL);
  ASSERT_MEM_EQ(e->sensor_data->point_cloud->data.data, copy, sizeof copy);
  sensim__v1__envelope__free_unpacked(e, NULL);
  shared_buf_release(b);
  return 0;
}


TEST(wire_stream_selects_and_packs_fields) {
  sensor_record_t r = make_cloud();
  wire_stream_params_t p = {.codec = {.encoding = CODEC_RAW}, .nfield = 3};
  strcpy(p.fields[0], "ring");
  strcpy(p.fields[1], "colour");
  strcpy(p.fields[2], "x");
  shared_buf_t* b;
  err_msg_t msg;
  ASSERT_OK(wire_stream_encode(&r, 0.2, &p, &b, &msg));
  Sensim__V1__Envelope* e = unpack_frame(b, 1);
  ASSERT_TRUE(e != NULL);
  const Sensim__V1__PointCloud* pc = e->sensor_data->point_cloud;
  ASSERT_EQ(pc->n_fields, 2u);
  ASSERT_STREQ(pc->fields[0]->name, "ring");
  ASSERT_EQ(pc->fields[0]->offset, 0u);
  ASSERT_STREQ(pc->fields[1]->name, "x");
  ASSERT_EQ(pc->fields[1]->offset, 4u);   // aligned to its 4 bytes
  ASSERT_EQ(pc->point_step, 8u);
  for (uint32_t i = 0; i < NPT; i++) {
    uint16_t ring;
    float x;
    memcpy(&ring, pc->data.data + 8 * i, 2);
    memcpy(&x, pc->data.data + 8 * i + 4, 4);
    ASSERT_EQ(ring, 100 + i);
    ASSERT_DEQ(x, 1.0f + (float)i);
  }
  sensim__v1__envelope__free_unpacked(e, NULL);
  shared_buf_release(b);

  // the same fields and encoding give the same frames; others do not
  wire_stream_params_t q = p;
  ASSERT_TRUE(wire_stream_params_equal(&p, &q));
  strcpy(q.fields[2], "y");
  ASSERT_TRUE(!wire_stream_params_equal(&p, &q));
  q = p;
  q.codec.encoding = CODEC_ZSTD;
  ASSERT_TRUE(!wire_stream_params_equal(&p, &q));
  sensor_record_release(&r);
  return 0;
}


TEST(wire_stream_end_of_stream) {
  shared_buf_t* b;
  ASSERT_OK(wire_stream_encode_end(12, &b));
  Sensim__V1__Envelope* e = unpack_frame(b, 7);
  ASSERT_TRUE(e != NULL);
  ASSERT_EQ(e->sequence, 7u);
  ASSERT_EQ(e->sensor_data->sensor_id, 12u);
  ASSERT_TRUE(e->sensor_data->end_of_stream);
  ASSERT_EQ(e->sensor_data->payload_case, SENSIM__V1__SENSOR_DATA__PAYLOAD__NOT_SET);
  sensim__v1__envelope__free_unpacked(e, NULL);
  shared_buf_release(b);
  return 0;
}
