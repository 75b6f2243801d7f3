// SPDX-License-Identifier: MIT
// wire_out.c: frames of sensor records that refer to the points instead of copying them (see
// wire_sensor.h). protobuf-c packs a message into one contiguous buffer; here every message
// around a cloud's points is packed by protobuf-c with the points left out (a SensorData's own
// fields, and a whole record without a cloud, are written by hand: wire_sd.c), and the points'
// field (its key and length) is written by hand after the rest, followed by the points
// themselves as a reference into their buffer. The lengths of the enclosing messages are
// computed first, so the frame is written front to back in one pass.
#include <pthread.h>
#include <string.h>

#include "base/mem.h"
#include "net/frame.h"
#include "net/wire_sensor.h"

// Wire type of a length-delimited field.
#define WT_LEN 2u

// The number of field `name` of message descriptor d.
static uint32_t field_id(const ProtobufCMessageDescriptor* d, const char* name) {
  return protobuf_c_message_descriptor_get_field_by_name(d, name)->id;
}


// The numbers of the fields written by hand, looked up by name once (a lookup is a binary
// search of strcmp calls: eight of them were 3 % of a small step's instructions). Read through
// fields(), from any thread.
static struct {
  uint32_t env_step_done, env_sensor_data, done_outputs, sd_cloud, cloud_data;
} g_f;
static pthread_once_t g_f_once = PTHREAD_ONCE_INIT;

static void fields_init(void) {
  g_f.env_step_done = field_id(&sensim__v1__envelope__descriptor, "step_done");
  g_f.env_sensor_data = field_id(&sensim__v1__envelope__descriptor, "sensor_data");
  g_f.done_outputs = field_id(&sensim__v1__step_done__descriptor, "outputs");
  g_f.sd_cloud = field_id(&sensim__v1__sensor_data__descriptor, "point_cloud");
  g_f.cloud_data = field_id(&sensim__v1__point_cloud__descriptor, "data");
}

static void fields(void) {
  (void)pthread_once(&g_f_once, fields_init);
}


// Key and length of a length-delimited field of `len` bytes: its size, and writing it.
static size_t head_size(uint32_t field, size_t len) {
  return wire_varint_size((uint64_t)field << 3 | WT_LEN) + wire_varint_size(len);
}


static uint8_t* put_head(uint8_t* at, uint32_t field, size_t len) {
  return wire_put_varint(wire_put_varint(at, (uint64_t)field << 3 | WT_LEN), len);
}


// The cloud whose data goes by reference, or NULL (x is then packed whole).
static Sensim__V1__PointCloud* by_ref(const wire_sd_t* x) {
  const Sensim__V1__SensorData* sd = x->sd;
  if (!x->owner || sd->payload_case != SENSIM__V1__SENSOR_DATA__PAYLOAD_POINT_CLOUD) {
    return NULL;
  }
  Sensim__V1__PointCloud* pc = sd->point_cloud;
  return pc->has_data && pc->data.len ? pc : NULL;
}


// Packed sizes of the SensorData without its payload (S) and of its cloud without the data
// (P).
static void split_sizes(Sensim__V1__SensorData* sd, Sensim__V1__PointCloud* pc, size_t* s,
                        size_t* p) {
  pc->has_data = 0;
  *p = protobuf_c_message_get_packed_size(&pc->base);
  pc->has_data = 1;
  sd->payload_case = SENSIM__V1__SENSOR_DATA__PAYLOAD__NOT_SET;
  *s = wire_sd_packed_size(sd);
  sd->payload_case = SENSIM__V1__SENSOR_DATA__PAYLOAD_POINT_CLOUD;
}


void wire_sd_measure(wire_sd_t* x) {
  Sensim__V1__PointCloud* pc = by_ref(x);
  if (!pc) {
    x->own = wire_sd_packed_size(x->sd);
    x->ref = 0;
    return;
  }
  size_t s, p, d = pc->data.len;
  split_sizes(x->sd, pc, &s, &p);
  fields();
  uint32_t f_data = g_f.cloud_data, f_cloud = g_f.sd_cloud;
  size_t cloud = p + head_size(f_data, d) + d;
  x->own = s + head_size(f_cloud, cloud) + cloud - d;
  x->ref = d;
}


// Append x's encoding (measured) to b.
static int put_sd(const wire_sd_t* x, shared_buf_t* b) {
  Sensim__V1__PointCloud* pc = by_ref(x);
  if (!pc) {
    uint8_t* at = shared_buf_put(b, x->own);
    if (!at) {
      return ERR_NOMEM;
    }
    wire_sd_pack(x->sd, at);
    return 0;
  }
  size_t s, p, d = pc->data.len;
  split_sizes(x->sd, pc, &s, &p);
  fields();
  uint32_t f_data = g_f.cloud_data, f_cloud = g_f.sd_cloud;
  uint8_t* at = shared_buf_put(b, x->own);
  if (!at) {
    return ERR_NOMEM;
  }

  // the SensorData's other fields, the cloud's key and length, the cloud's other fields, the
  // data's key and length; then the data
  x->sd->payload_case = SENSIM__V1__SENSOR_DATA__PAYLOAD__NOT_SET;
  at += wire_sd_pack(x->sd, at);
  x->sd->payload_case = SENSIM__V1__SENSOR_DATA__PAYLOAD_POINT_CLOUD;
  at = put_head(at, f_cloud, p + head_size(f_data, d) + d);
  pc->has_data = 0;
  at += protobuf_c_message_pack(&pc->base, at);
  pc->has_data = 1;
  put_head(at, f_data, d);
  return shared_buf_put_ref(b, x->owner, pc->data.data, d) == 0 ? 0 : ERR_NOMEM;
}


// An Envelope's fields other than its body (e bytes packed at env), then its body field
// (number f_body) of body_len bytes whose own bytes come next: the frame to fill, with the
// envelope head written.
static shared_buf_t* start_frame(const uint8_t* env, size_t e, uint32_t f_body, size_t body_len,
                                 size_t body_own, uint32_t refs) {
  shared_buf_t* b = shared_buf_create_pieces(e + head_size(f_body, body_len) + body_own, refs);
  uint8_t* at = b ? shared_buf_put(b, e + head_size(f_body, body_len)) : NULL;
  if (!at) {
    shared_buf_release(b);
    return NULL;
  }
  if (e) {
    memcpy(at, env, e);
  }
  put_head(at + e, f_body, body_len);
  return b;
}


int wire_out_pushed(wire_sd_t* x, shared_buf_t** out) {
  fields();
  shared_buf_t* b = start_frame(NULL, 0, g_f.env_sensor_data, x->own + x->ref, x->own,
                                x->ref ? 1 : 0);  // no id, no status
  if (!b || put_sd(x, b) != 0) {
    shared_buf_release(b);
    return ERR_NOMEM;
  }
  *out = b;
  return 0;
}


static void plan_reply(uint64_t id, double time, uint64_t step, const wire_sd_t* xs, uint32_t n,
                       uint32_t max_frame_bytes, wire_out_plan_t* p) {
  p->id = id;
  p->n = n;
  p->max_frame_bytes = max_frame_bytes;
  size_t e = wire_ok_head(id, p->head);  // id and status OK, as wire_pack_reply writes them
  p->env_len = e;
  fields();
  uint32_t f_outputs = g_f.done_outputs, f_done = g_f.env_step_done, f_sd = g_f.env_sensor_data;
  sensim__v1__step_done__init(&p->done);
  p->done.has_time = p->done.has_step = 1;
  p->done.time = time;
  p->done.step = step;

  // all in one StepDone
  size_t outputs = 0;
  for (uint32_t i = 0; i < n; i++) {
    outputs += head_size(f_outputs, xs[i].own + xs[i].ref) + xs[i].own + xs[i].ref;
  }
  p->done_own = wire_step_done_packed_size(&p->done);
  p->done_len = p->done_own + outputs;
  uint64_t one = e + head_size(f_done, p->done_len) + p->done_len;
  p->parts = n > 0 && one > max_frame_bytes;
  p->bytes = FRAME_HEADER_BYTES + one;
  if (!p->parts) {
    return;
  }

  // in parts: each record in an Envelope{id, sensor_data}, then the StepDone alone
  Sensim__V1__Envelope part = SENSIM__V1__ENVELOPE__INIT;
  part.has_id = 1;
  part.id = id;
  size_t pe = protobuf_c_message_get_packed_size(&part.base);
  p->bytes = 0;
  for (uint32_t i = 0; i < n; i++) {
    size_t len = xs[i].own + xs[i].ref;
    p->bytes += FRAME_HEADER_BYTES + pe + head_size(f_sd, len) + len;
  }
  p->done.has_outputs_in_parts = 1;
  p->done.outputs_in_parts = n;
  p->done_own = wire_step_done_packed_size(&p->done);
  p->done_len = p->done_own;
  p->bytes += FRAME_HEADER_BYTES + e + head_size(f_done, p->done_len) + p->done_len;
}


uint64_t wire_out_plan(uint64_t id, double time, uint64_t step, const wire_sd_t* xs, uint32_t n,
                       uint32_t max_frame_bytes, wire_out_plan_t* p) {
  plan_reply(id, time, step, xs, n, max_frame_bytes, p);
  return p->bytes;
}


uint64_t wire_out_step_done_bytes(uint64_t id, double time, uint64_t step, wire_sd_t* xs,
                                  uint32_t n, uint32_t max_frame_bytes) {
  wire_out_plan_t p;
  return wire_out_plan(id, time, step, xs, n, max_frame_bytes, &p);
}


int wire_out_step_done(uint64_t id, double time, uint64_t step, wire_sd_t* xs, uint32_t n,
                       uint32_t max_frame_bytes, shared_buf_t*** frames, uint32_t* nframes,
                       err_msg_t* msg) {
  wire_out_plan_t p;
  plan_reply(id, time, step, xs, n, max_frame_bytes, &p);
  return wire_out_planned(&p, xs, frames, nframes, msg);
}


int wire_out_planned(const wire_out_plan_t* plan, wire_sd_t* xs, shared_buf_t*** frames,
                     uint32_t* nframes, err_msg_t* msg) {
  wire_out_plan_t p = *plan;  // its StepDone is packed from here
  uint64_t id = p.id;
  uint32_t n = p.n, max_frame_bytes = p.max_frame_bytes;
  uint32_t count = p.parts ? n + 1 : 1;
  shared_buf_t** f = mem_calloc(count, sizeof(*f));
  if (!f) {
    return err_set(msg, ERR_NOMEM, "out of memory for the reply's frames");
  }
  uint32_t made = 0;
  int rc = 0;

  // the parts: each record alone, in order
  for (uint32_t i = 0; p.parts && i < n && rc == 0; i++) {
    Sensim__V1__Envelope part = SENSIM__V1__ENVELOPE__INIT;
    part.has_id = 1;
    part.id = id;
    size_t len = xs[i].own + xs[i].ref;
    uint8_t head[16];  // a key and a varint at most
    size_t pe = protobuf_c_message_pack(&part.base, head);
    size_t payload = pe + head_size(g_f.env_sensor_data, len) + len;
    if (payload > max_frame_bytes) {
      rc = err_set(msg, ERR_LIMIT, "the record %u of sensor %u takes %zu bytes, more than "
                   "max_frame_bytes %u", i, xs[i].sd->sensor_id, payload, max_frame_bytes);
      break;
    }
    f[made] = start_frame(head, pe, g_f.env_sensor_data, len, xs[i].own, xs[i].ref ? 1 : 0);
    rc = f[made] ? put_sd(&xs[i], f[made]) : ERR_NOMEM;
    made += f[made] != NULL;
  }

  // the StepDone, with the records unless they went ahead
  if (rc == 0) {
    uint32_t refs = 0;
    for (uint32_t i = 0; !p.parts && i < n; i++) {
      refs += xs[i].ref ? 1 : 0;
    }
    size_t own = p.done_own;
    uint32_t f_outputs = g_f.done_outputs;
    for (uint32_t i = 0; !p.parts && i < n; i++) {
      own += head_size(f_outputs, xs[i].own + xs[i].ref) + xs[i].own;
    }
    f[made] = start_frame(p.head, p.env_len, g_f.env_step_done, p.done_len, own, refs);
    uint8_t* at = f[made] ? shared_buf_put(f[made], p.done_own) : NULL;
    rc = at ? 0 : ERR_NOMEM;
    if (at) {
      wire_step_done_pack(&p.done, at);
    }
    for (uint32_t i = 0; rc == 0 && !p.parts && i < n; i++) {
      size_t len = xs[i].own + xs[i].ref;
      at = shared_buf_put(f[made], head_size(f_outputs, len));
      rc = at ? put_sd(&xs[i], f[made]) : ERR_NOMEM;
      if (at) {
        put_head(at, f_outputs, len);
      }
    }
    made += f[made] != NULL;
  }
  if (rc != 0) {
    for (uint32_t i = 0; i < made; i++) {
      shared_buf_release(f[i]);
    }
    mem_free(f);
    return rc == ERR_NOMEM ? err_set(msg, ERR_NOMEM, "out of memory for the reply's frames")
                           : rc;
  }
  *frames = f;
  *nframes = made;
  return 0;
}
