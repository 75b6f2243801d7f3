// SPDX-License-Identifier: MIT
// bench_proto.h: a protobuf-c connection to sensimd for the benchmark programs: framed
// Envelopes with ids assigned in order, replies checked for their id and an OK status.
#ifndef SENSIM_BENCH_PROTO_H_
#define SENSIM_BENCH_PROTO_H_

#include <stddef.h>
#include <stdint.h>

#include "sensim.pb-c.h"

typedef struct bench_conn {
  int fd;
  uint64_t next_id;             // the id of the next request
  uint8_t* buf;                 // the last frame read (free it when done)
  size_t cap;
  size_t len;                   // of the last frame read
} bench_conn_t;

// A connection to 127.0.0.1:port (see bench_connect_loopback); its first request gets id 1.
bench_conn_t bench_conn_open(int port, int timeout_ms);

// Read one frame's payload into c->buf (c->len bytes); bench_die on error or end of stream.
void bench_read_frame(bench_conn_t* c);

// Append the frame of env (id assigned here) to *out (of *len bytes, realloc'd); returns the id.
uint64_t bench_frame_append(bench_conn_t* c, Sensim__V1__Envelope* env, uint8_t** out,
                            size_t* len);

// Read frames until the reply to id (pushed frames, id 0, are skipped); bench_die unless it
// decodes with an OK status. Returns it decoded (sensim__v1__envelope__free_unpacked).
Sensim__V1__Envelope* bench_reply(bench_conn_t* c, uint64_t id, const char* what);

// bench_reply, the reply freed.
void bench_expect_reply(bench_conn_t* c, uint64_t id, const char* what);

// Send env and wait for its OK reply.
void bench_call(bench_conn_t* c, Sensim__V1__Envelope* env, const char* what);

// Hello as client_name joining (creating) environment env_name in the given role.
void bench_hello(bench_conn_t* c, const char* client_name, const char* env_name,
                 Sensim__V1__Role role);

// A Vec3 with all three components set.
Sensim__V1__Vec3 bench_vec3(double x, double y, double z);

#endif  // SENSIM_BENCH_PROTO_H_
