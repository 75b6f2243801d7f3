// SPDX-License-Identifier: MIT
// test_wire_out.c: a step's reply built by reference (its clouds' points as pieces of the
// frame, not copies) reads, with protobuf-c, as the very message protobuf-c packs whole from
// the same records: in one frame, or each record ahead in a frame of the Step's id and then
// the StepDone with their count; the bytes it announces are the bytes it makes.
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "check.h"
#include "net/frame.h"
#include "net/wire_sensor.h"

// Records: a cloud of npt points (16 bytes each), an IMU sample, an encoder reading.
static void make_records(sensor_out_t* out, uint32_t npt) {
  memset(out, 0, sizeof(*out));
  sensor_record_t* r = sensor_out_push(out, 3, SENSOR_REC_CLOUD);
  r->time = 0.5;
  r->frame = 7;
  sensor_cloud_t* c = &r->u.cloud;
  static const char* const names[4] = {"x", "y", "z", "intensity"};
  for (uint32_t i = 0; i < 4; i++) {
    c->fields[i] = (sensor_field_t){names[i], 4 * i, SENSOR_FLOAT32, 1};
  }
  c->nfield = 4;
  c->point_step = 16;
  c->frame_start_time = 0.4;
  c->complete = 1;
  err_msg_t msg;
  if (sensor_cloud_alloc(c, npt, &msg) != 0) {
    abort();
  }
  for (uint32_t i = 0; i < 16 * npt; i++) {
    c->data[i] = (uint8_t)(i * 13 + 5);
  }
  r = sensor_out_push(out, 4, SENSOR_REC_IMU);
  r->time = 0.5;
  r->frame = 2;
  r->u.imu.has_acceleration = 1;
  r->u.imu.acceleration[2] = 9.81;
  r->u.imu.nvalues = 3;
  r->u.imu.values[2] = 9.81;
  r = sensor_out_push(out, 6, SENSOR_REC_SCALAR);
  r->time = 0.5;
  r->u.scalar.position = 1.25;
}


// The frame's bytes (its pieces gathered), unpacked by protobuf-c.
static Sensim__V1__Envelope* unpack_frame(const shared_buf_t* b) {
  uint32_t count = shared_buf_pieces(b, FRAME_HEADER_BYTES, NULL, NULL, 0);
  const uint8_t** p = malloc(count * sizeof(*p));
  size_t* n = malloc(count * sizeof(*n));
  uint8_t* bytes = malloc(shared_buf_len(b) + 1);
  shared_buf_pieces(b, FRAME_HEADER_BYTES, p, n, count);
  size_t at = 0;
  for (uint32_t i = 0; i < count; i++) {
    memcpy(bytes + at, p[i], n[i]);
    at += n[i];
  }
  Sensim__V1__Envelope* e = at == shared_buf_len(b)
                                ? sensim__v1__envelope__unpack(NULL, at, bytes)
                                : NULL;
  free(p);
  free(n);
  free(bytes);
  return e;
}


// 1 when protobuf-c packs a and b to the same bytes (its packing is canonical).
static int same_message(const ProtobufCMessage* a, const ProtobufCMessage* b) {
  size_t na = protobuf_c_message_get_packed_size(a), nb = protobuf_c_message_get_packed_size(b);
  uint8_t* pa = malloc(na + 1);
  uint8_t* pb = malloc(nb + 1);
  protobuf_c_message_pack(a, pa);
  protobuf_c_message_pack(b, pb);
  int same = na == nb && memcmp(pa, pb, na) == 0;
  free(pa);
  free(pb);
  return same;
}


// 1 when a piece of b is the cloud's points themselves.
static int refers_to(const shared_buf_t* b, const uint8_t* data, size_t len) {
  const uint8_t* p[64];
  size_t n[64];
  uint32_t count = shared_buf_pieces(b, 0, p, n, 64);
  for (uint32_t i = 0; i < count && i < 64; i++) {
    if (p[i] == data && n[i] == len) {
      return 1;
    }
  }
  return 0;
}


// The records as protobuf-c builds them, and their by-reference twins.
typedef struct fixture {
  sensor_out_t recs;
  Sensim__V1__StepDone ref;     // the StepDone protobuf-c packs whole
  wire_outputs_t* store;
  wire_outputs_t* store2;
  wire_sd_t sd[3];
} fixture_t;

static int setup(fixture_t* f, uint32_t npt) {
  memset(f, 0, sizeof(*f));
  make_records(&f->recs, npt);
  err_msg_t msg;
  Sensim__V1__StepDone tmp = SENSIM__V1__STEP_DONE__INIT;
  sensim__v1__step_done__init(&f->ref);
  ASSERT_OK(wire_sensor_outputs(&f->recs, &f->ref, &f->store, &msg));
  ASSERT_OK(wire_sensor_outputs(&f->recs, &tmp, &f->store2, &msg));
  f->ref.has_time = f->ref.has_step = 1;
  f->ref.time = 0.5;
  f->ref.step = 300;
  for (uint32_t i = 0; i < 3; i++) {
    const sensor_record_t* r = &f->recs.rec[i];
    f->sd[i] = (wire_sd_t){.sd = tmp.outputs[i],
                           .owner = r->kind == SENSOR_REC_CLOUD ? r->u.cloud.blob : NULL};
    wire_sd_measure(&f->sd[i]);
  }
  return 0;
}

static void teardown(fixture_t* f) {
  wire_sensor_outputs_free(f->store);
  wire_sensor_outputs_free(f->store2);
  sensor_out_free(&f->recs);
}


TEST(wire_out_step_done_in_one_frame_is_the_whole_message) {
  int64_t live = mem_live_count();
  fixture_t f;
  ASSERT_OK(setup(&f, 1000));
  shared_buf_t** frames;
  uint32_t n;
  err_msg_t msg;
  ASSERT_OK(wire_out_step_done(42, 0.5, 300, f.sd, 3, 1 << 20, &frames, &n, &msg));
  ASSERT_EQ(n, 1);
  ASSERT_EQ(wire_out_step_done_bytes(42, 0.5, 300, f.sd, 3, 1 << 20),
            shared_buf_frame_len(frames[0]));
  ASSERT_TRUE(refers_to(frames[0], f.recs.rec[0].u.cloud.data, 16000));
  Sensim__V1__Envelope* e = unpack_frame(frames[0]);
  ASSERT_TRUE(e != NULL);
  ASSERT_EQ(e->id, 42);
  ASSERT_EQ(e->status->code, SENSIM__V1__STATUS_CODE__OK);
  ASSERT_EQ(e->body_case, SENSIM__V1__ENVELOPE__BODY_STEP_DONE);
  ASSERT_TRUE(!e->step_done->has_outputs_in_parts);
  ASSERT_TRUE(same_message(&e->step_done->base, &f.ref.base));

  // the frame keeps the points alive after the records are gone
  uint8_t keep[16000];
  memcpy(keep, f.recs.rec[0].u.cloud.data, sizeof keep);
  teardown(&f);
  sensim__v1__envelope__free_unpacked(e, NULL);
  e = unpack_frame(frames[0]);
  ASSERT_MEM_EQ(e->step_done->outputs[0]->point_cloud->data.data, keep, sizeof keep);
  sensim__v1__envelope__free_unpacked(e, NULL);
  shared_buf_release(frames[0]);
  mem_free(frames);
  ASSERT_EQ(mem_live_count(), live);
  return 0;
}


TEST(wire_out_step_done_in_parts_when_one_frame_is_too_small) {
  int64_t live = mem_live_count();
  fixture_t f;
  ASSERT_OK(setup(&f, 1000));
  shared_buf_t** frames;
  uint32_t n;
  err_msg_t msg;
  ASSERT_OK(wire_out_step_done(42, 0.5, 300, f.sd, 3, 16200, &frames, &n, &msg));
  ASSERT_EQ(n, 4);
  uint64_t total = 0;
  for (uint32_t i = 0; i < n; i++) {
    total += shared_buf_frame_len(frames[i]);
    ASSERT_TRUE(shared_buf_len(frames[i]) <= 16200);
  }
  ASSERT_EQ(wire_out_step_done_bytes(42, 0.5, 300, f.sd, 3, 16200), total);
  ASSERT_TRUE(refers_to(frames[0], f.recs.rec[0].u.cloud.data, 16000));
  for (uint32_t i = 0; i < 3; i++) {
    Sensim__V1__Envelope* e = unpack_frame(frames[i]);
    ASSERT_TRUE(e != NULL);
    ASSERT_EQ(e->id, 42);
    ASSERT_TRUE(e->status == NULL);
    ASSERT_EQ(e->body_case, SENSIM__V1__ENVELOPE__BODY_SENSOR_DATA);
    ASSERT_TRUE(same_message(&e->sensor_data->base, &f.ref.outputs[i]->base));
    sensim__v1__envelope__free_unpacked(e, NULL);
  }
  Sensim__V1__Envelope* e = unpack_frame(frames[3]);
  ASSERT_TRUE(e != NULL);
  ASSERT_EQ(e->id, 42);
  ASSERT_EQ(e->status->code, SENSIM__V1__STATUS_CODE__OK);
  ASSERT_EQ(e->step_done->n_outputs, 0);
  ASSERT_EQ(e->step_done->outputs_in_parts, 3);
  ASSERT_DEQ(e->step_done->time, 0.5);
  ASSERT_EQ(e->step_done->step, 300);
  sensim__v1__envelope__free_unpacked(e, NULL);
  for (uint32_t i = 0; i < n; i++) {
    shared_buf_release(frames[i]);
  }
  mem_free(frames);

  // a record that does not fit in a frame by itself is refused, and nothing is left over
  ASSERT_EQ(wire_out_step_done(42, 0.5, 300, f.sd, 3, 8000, &frames, &n, &msg), ERR_LIMIT);
  ASSERT_CONTAINS(msg.text, "sensor 3");
  teardown(&f);
  ASSERT_EQ(mem_live_count(), live);
  return 0;
}


TEST(wire_out_pushed_frame_and_an_empty_step) {
  int64_t live = mem_live_count();
  fixture_t f;
  ASSERT_OK(setup(&f, 0));   // a cloud without points: nothing to refer to
  shared_buf_t* b;
  ASSERT_OK(wire_out_pushed(&f.sd[0], &b));
  Sensim__V1__Envelope* e = unpack_frame(b);
  ASSERT_TRUE(e != NULL && !e->has_id && e->status == NULL);
  ASSERT_TRUE(same_message(&e->sensor_data->base, &f.ref.outputs[0]->base));
  sensim__v1__envelope__free_unpacked(e, NULL);
  shared_buf_release(b);

  shared_buf_t** frames;
  uint32_t n;
  err_msg_t msg;
  ASSERT_OK(wire_out_step_done(9, 1.0, 1, NULL, 0, 100, &frames, &n, &msg));
  ASSERT_EQ(n, 1);
  e = unpack_frame(frames[0]);
  ASSERT_TRUE(e != NULL && e->step_done->n_outputs == 0 && !e->step_done->has_outputs_in_parts);
  ASSERT_TRUE(shared_buf_frame_len(frames[0]) <= 64);
  sensim__v1__envelope__free_unpacked(e, NULL);
  shared_buf_release(frames[0]);
  mem_free(frames);
  teardown(&f);
  ASSERT_EQ(mem_live_count(), live);
  return 0;
}
