// SPDX-License-Identifier: MIT
// fuzz_request.c: decoding, validation and application of requests (net/wire*.c) to a fresh
// in-process environment, as the daemon runs them after the handshake: every string checked
// (wire_text_error), session requests through their accessors and reply encoders,
// environment requests through wire_env_execute. The seeds build scenes with every sensor
// kind (lidar, IMU, encoder, odometer, cone) on moving bodies and step them, so that mutations
// reach the models. Checked on every request:
//   - a frame that does not decode is refused with a message;
//   - every reply decodes, carries the request's id and a status; a failure names the request
//     and leaves the environment's counts and time line as they were;
//   - the clouds of every successful step survive each encoding as docs/streams.md promises,
//     through the daemon's decoder and the C client's (fuzz_check.h).
// Steps stay small: the environment's limits are tight and every request is cancelled after
// a fixed number of polls (as --max-request-seconds would, but deterministic).
//
// Input: the frames of a connection after its Hello (u32 little-endian length, then an
// Envelope); a length past the end takes the rest. At most MAX_REQUESTS are run.
#include <string.h>

#include "base/mem.h"
#include "fuzz.h"
#include "fuzz_check.h"
#include "net/wire.h"
#include "net/wire_pb.h"
#include "world/env.h"

#define MAX_REQUESTS 64
#define CANCEL_AFTER_POLLS 64      // a lidar polls every 512 rays, an IMU every 4096 samples
#define MAX_CHECKED_POINTS 65536   // clouds checked through every encoding

static scene_device_t* g_dev;
static int g_verbose;            // FUZZ_VERBOSE=1: print every request's outcome


int LLVMFuzzerInitialize(int* argc, char*** argv) {
  (void)argc;
  (void)argv;
  err_msg_t msg;
  g_verbose = getenv("FUZZ_VERBOSE") != NULL;
  g_dev = scene_device_create(&msg);
  FUZZ_ASSERT(g_dev, "scene_device_create: %s", msg.text);
  return 0;
}


static int cancel_after(void* ctx) {
  unsigned* polls = ctx;
  return ++*polls > CANCEL_AFTER_POLLS;
}


// What a refused request must leave alone.
typedef struct snapshot {
  uint32_t counts[7];
  env_time_t time;
} snapshot_t;


static void snap(const env_t* e, snapshot_t* s) {
  env_info_t i;
  env_get_info(e, &i);
  memset(s, 0, sizeof(*s));
  uint32_t c[7] = {i.geometries, i.materials, i.media, i.bodies, i.objects, i.joints,
                   i.sensors};
  memcpy(s->counts, c, sizeof(c));
  s->time = i.time;
}


static void check_unchanged(const snapshot_t* a, const snapshot_t* b, const char* body) {
  static const char* const kWhat[7] = {"geometries", "materials", "media", "bodies",
                                       "objects", "joints", "sensors"};
  for (int k = 0; k < 7; k++) {
    FUZZ_ASSERT(a->counts[k] == b->counts[k], "refused %s changed %s: %u -> %u", body,
                kWhat[k], a->counts[k], b->counts[k]);
  }
  FUZZ_ASSERT(a->time.has_time == b->time.has_time && a->time.steps == b->time.steps &&
              memcmp(&a->time.t_prev, &b->time.t_prev, sizeof(double)) == 0 &&
              memcmp(&a->time.t_cur, &b->time.t_cur, sizeof(double)) == 0,
              "refused %s moved the time line", body);
}


// The reply of request `id`: decodes, carries the id and a status that matches code.
static void check_reply(const uint8_t* out, size_t len, uint64_t id, int code,
                        const char* body) {
  Sensim__V1__Envelope* reply = sensim__v1__envelope__unpack(NULL, len, out);
  FUZZ_ASSERT(reply, "the reply to %s does not decode", body);
  FUZZ_ASSERT(reply->id == id && (id == 0 || reply->has_id), "reply id %llu for %llu",
              (unsigned long long)reply->id, (unsigned long long)id);
  FUZZ_ASSERT(reply->status, "the reply to %s has no status", body);
  int expect = code ? wire_status_code(code) : SENSIM__V1__STATUS_CODE__OK;
  FUZZ_ASSERT((int)reply->status->code == expect, "status %d for code %d", reply->status->code,
              code);
  if (code) {
    const char* m = reply->status->message ? reply->status->message : "";
    FUZZ_ASSERT(strncmp(m, body, strlen(body)) == 0 && strlen(m) > strlen(body) + 2,
                "refusal of %s does not name it: \"%s\"", body, m);
    FUZZ_ASSERT(reply->body_case == SENSIM__V1__ENVELOPE__BODY__NOT_SET,
                "refusal of %s carries a body", body);
  }
  sensim__v1__envelope__free_unpacked(reply, NULL);
}


// Every cloud of the last step through every encoding.
static void check_outputs(const env_t* e) {
  const sensor_out_t* o = env_outputs(e);
  for (uint32_t k = 0; k < o->n; k++) {
    const sensor_record_t* rec = &o->rec[k];
    if (rec->kind != SENSOR_REC_CLOUD || rec->u.cloud.count > MAX_CHECKED_POINTS) {
      continue;
    }
    codec_cloud_t c = codec_cloud_of(&rec->u.cloud);
    if (g_verbose) {
      fprintf(stderr, "  cloud of %u points of %u bytes\n", c.count, c.point_step);
    }
    fuzz_cloud_check(&c, CODEC_RAW, 0.0, 0);
    fuzz_cloud_check(&c, CODEC_ZSTD, 0.0, 1);
    fuzz_cloud_check(&c, CODEC_QZSTD, CODEC_DEFAULT_PRECISION, 1);
  }
}


static void session_request(wire_request_t* r, const env_t* e) {
  uint8_t* out = NULL;
  size_t len = 0;
  int code = 0;
  switch (wire_kind(r)) {
    case WIRE_KIND_HELLO: {
      wire_hello_t h;
      wire_get_hello(r, &h);
      FUZZ_ASSERT(h.client_name && h.environment && h.token, "hello strings missing");
      return;
    }
    case WIRE_KIND_SUBSCRIBE:
    case WIRE_KIND_UNSUBSCRIBE: {
      wire_subscribe_t sub;
      wire_get_subscribe(r, &sub);
      for (size_t i = 0; i < sub.nfield; i++) {
        FUZZ_ASSERT(sub.fields[i] != NULL, "subscribe field %zu missing", i);
      }
      return;
    }
    case WIRE_KIND_PING:
      FUZZ_ASSERT(wire_encode_pong(r, 1, &out, &len) == 0, "pong not encoded");
      break;
    case WIRE_KIND_GET_INFO: {
      wire_limits_t limits;
      memset(&limits, 0, sizeof(limits));
      limits.env = *env_get_limits(e);
      wire_env_info_t env = {.name = env_name(e), .clients = 1, .retention = 1};
      env_get_info(e, &env.info);
      wire_info_t info;
      memset(&info, 0, sizeof(info));
      info.server_version = "fuzz";
      info.envs = &env;
      info.nenv = 1;
      info.limits = &limits;
      FUZZ_ASSERT(wire_encode_info(wire_id(r), &info, &out, &len) == 0, "info not encoded");
      break;
    }
    default: {
      // refused by the daemon with a status naming the body (daemon/protocol.c)
      char text[128];
      snprintf(text, sizeof(text), "%s: not a request here", wire_body_name(r));
      code = ERR_INVAL;
      FUZZ_ASSERT(wire_encode_status(wire_id(r), code, text, &out, &len) == 0,
                  "status not encoded");
      break;
    }
  }
  check_reply(out, len, wire_id(r), code, wire_body_name(r));
  mem_free(out);
}


static void run_request(const uint8_t* payload, size_t len, env_t* e) {
  wire_request_t* r;
  err_msg_t msg;
  msg.text[0] = '\0';
  int rc = wire_decode(payload, len, &r, &msg);
  if (rc) {
    FUZZ_ASSERT((rc == ERR_PROTO || rc == ERR_LIMIT) && msg.text[0], "wire_decode: %d (%s)",
                rc, msg.text);
    return;
  }
  FUZZ_ASSERT(wire_size(r) >= len, "request of %zu bytes counted as %zu", len, wire_size(r));
  const char* bad = wire_text_error(r);
  if (bad) {
    FUZZ_ASSERT(bad[0] != '\0', "an empty text error");
    wire_free(r);
    return;
  }
  wire_kind_t kind = wire_kind(r);
  if (kind != WIRE_KIND_ENV_READ && kind != WIRE_KIND_ENV_WRITE) {
    session_request(r, e);
    wire_free(r);
    return;
  }

  // an environment request, on a deterministic deadline
  unsigned polls = 0;
  wire_set_cancel(r, cancel_after, &polls);
  snapshot_t before, after;
  snap(e, &before);
  uint8_t* out = NULL;
  size_t out_len = 0;
  int code = -1;
  FUZZ_ASSERT(wire_env_execute(r, e, &out, &out_len, &code) == 0, "no reply to %s",
              wire_body_name(r));
  check_reply(out, out_len, wire_id(r), code, wire_body_name(r));
  if (g_verbose) {
    Sensim__V1__Envelope* reply = sensim__v1__envelope__unpack(NULL, out_len, out);
    fprintf(stderr, "%s: %d %s (%zu bytes)\n", wire_body_name(r), code,
            reply->status->message ? reply->status->message : "", out_len);
    sensim__v1__envelope__free_unpacked(reply, NULL);
  }
  if (code) {
    snap(e, &after);
    check_unchanged(&before, &after, wire_body_name(r));
  } else if (wire_is_step(r)) {
    check_outputs(e);
  }
  mem_free(out);
  wire_free(r);
}


int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  env_limits_t limits = env_default_limits();
  limits.max_mesh_vertices = 4096;
  limits.max_mesh_triangles = 4096;
  limits.max_raycast_rays = 4096;
  limits.max_output_bytes = 4u << 20;
  err_msg_t msg;
  env_t* e = env_create("fuzz", &limits, g_dev, NULL, &msg);
  FUZZ_ASSERT(e, "env_create: %s", msg.text);

  size_t pos = 0;
  for (int n = 0; n < MAX_REQUESTS && size - pos >= 4; n++) {
    size_t len = fuzz_rd32(data + pos);
    pos += 4;
    len = len < size - pos ? len : size - pos;
    run_request(data + pos, len, e);
    pos += len;
  }
  env_destroy(e);
  return 0;
}
