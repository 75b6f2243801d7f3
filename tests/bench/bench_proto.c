// SPDX-License-Identifier: MIT
// bench_proto.c: a protobuf-c connection to sensimd for the benchmark programs (see
// bench_proto.h).
#include "bench_proto.h"

#include <stdlib.h>

#include "bench_util.h"


bench_conn_t bench_conn_open(int port, int timeout_ms) {
  return (bench_conn_t){.fd = bench_connect_loopback(port, timeout_ms), .next_id = 1};
}


void bench_read_frame(bench_conn_t* c) {
  long n = bench_recv_frame(c->fd, &c->buf, &c->cap);
  if (n < 0) {
    bench_die("recv: the connection failed or was closed by the daemon");
  }
  c->len = (size_t)n;
}


uint64_t bench_frame_append(bench_conn_t* c, Sensim__V1__Envelope* env, uint8_t** out,
                            size_t* len) {
  env->has_id = 1;
  env->id = c->next_id++;
  size_t n = sensim__v1__envelope__get_packed_size(env);
  uint8_t* p = realloc(*out, *len + 4 + n);
  if (!p) {
    bench_die("out of memory");
  }
  for (int i = 0; i < 4; i++) {
    p[*len + (size_t)i] = (uint8_t)(n >> (8 * i));
  }
  sensim__v1__envelope__pack(env, p + *len + 4);
  *out = p;
  *len += 4 + n;
  return env->id;
}


Sensim__V1__Envelope* bench_reply(bench_conn_t* c, uint64_t id, const char* what) {
  for (;;) {
    bench_read_frame(c);
    Sensim__V1__Envelope* r = sensim__v1__envelope__unpack(NULL, c->len, c->buf);
    if (!r) {
      bench_die("%s: a frame does not decode", what);
    }
    if (r->id == 0) {
      sensim__v1__envelope__free_unpacked(r, NULL);
      continue;
    }
    if (r->id != id) {
      bench_die("%s: reply id %llu, expected %llu", what, (unsigned long long)r->id,
                (unsigned long long)id);
    }
    if (r->status && r->status->code != 0) {
      bench_die("%s: status %d: %s", what, (int)r->status->code,
                r->status->message ? r->status->message : "");
    }
    return r;
  }
}


void bench_expect_reply(bench_conn_t* c, uint64_t id, const char* what) {
  sensim__v1__envelope__free_unpacked(bench_reply(c, id, what), NULL);
}


void bench_call(bench_conn_t* c, Sensim__V1__Envelope* env, const char* what) {
  uint8_t* f = NULL;
  size_t len = 0;
  uint64_t id = bench_frame_append(c, env, &f, &len);
  bench_write_all(c->fd, f, len);
  free(f);
  bench_expect_reply(c, id, what);
}


void bench_hello(bench_conn_t* c, const char* client_name, const char* env_name,
                 Sensim__V1__Role role) {
  Sensim__V1__Hello h = SENSIM__V1__HELLO__INIT;
  h.has_protocol_version = 1;
  h.protocol_version = SENSIM__V1__PROTOCOL_VERSION__PROTOCOL_VERSION;
  h.client_name = (char*)client_name;
  h.environment = (char*)env_name;
  h.has_role = 1;
  h.role = role;
  Sensim__V1__Envelope env = SENSIM__V1__ENVELOPE__INIT;
  env.body_case = SENSIM__V1__ENVELOPE__BODY_HELLO;
  env.hello = &h;
  bench_call(c, &env, "hello");
}


Sensim__V1__Vec3 bench_vec3(double x, double y, double z) {
  Sensim__V1__Vec3 v = SENSIM__V1__VEC3__INIT;
  v.has_x = v.has_y = v.has_z = 1;
  v.x = x;
  v.y = y;
  v.z = z;
  return v;
}
