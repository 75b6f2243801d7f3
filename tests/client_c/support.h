// SPDX-License-Identifier: MIT
// support.h: what the C client's tests share: a real sensimd started as a child (the
// executable from $SENSIMD), clients connected to it, assertions on a status and the last
// error, and a scripted peer for what the real daemon never sends (hostile frames, trickled
// frames), with a small protobuf writer to build them.
#ifndef SENSIM_TESTS_CLIENT_C_SUPPORT_H_
#define SENSIM_TESTS_CLIENT_C_SUPPORT_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <sensim/sensim.h>

#include "check.h"

//---------------- sensimd

typedef struct td_daemon {
  pid_t pid;
  int port;
  int out;                          // its stdout, kept open
} td_daemon_t;

// Start sensimd --listen 127.0.0.1:0 with the NULL-terminated extra arguments (NULL: none);
// 0 on success.
int td_start(td_daemon_t* d, const char* const* extra);

// SIGTERM and wait; returns its exit status (-1 after SIGKILL or a signal).
int td_stop(td_daemon_t* d);

// SIGKILL and reap.
void td_kill(td_daemon_t* d);

// The handle timeout of td_connect's connections: what the tests' steps and raycasts take is
// not what they check, and a sanitized build on a slow or loaded machine took over the client's
// default 10 s for a step of two 400 x 400 flashes. A test of timeouts sets its own.
#define TD_TIMEOUT_MS 300000

// Connect to d as a controller of `environment` (options: timeout TD_TIMEOUT_MS); NULL on
// failure (the reason printed).
sensim_client_t* td_connect(const td_daemon_t* d, const char* environment);

// The same with options.
sensim_client_t* td_connect_opts(const td_daemon_t* d, const sensim_options_t* opts);

// True when text is NULL or a substring of err.
bool td_names(const char* err, const char* text);

// s, or "" for NULL.
const char* td_str(const char* s);

// Assert a status and, unless NULL, a substring of the handle's last error.
#define ASSERT_STATUS(cli, expr, want, text)                                               \
  do {                                                                                     \
    sensim_status_t st_ = (expr);                                                          \
    const char* err_ = sensim_client_last_error(cli);                                      \
    if (st_ != (want)) {                                                                   \
      CHECK_FAIL("%s: %s (\"%s\"), expected %s", #expr, sensim_status_name(st_), err_,     \
                 sensim_status_name(want));                                                \
    }                                                                                      \
    if (!td_names(err_, (text))) {                                                         \
      CHECK_FAIL("%s: last error \"%s\" does not name \"%s\"", #expr, err_,                \
                 td_str(text));                                                            \
    }                                                                                      \
  } while (0)

#define ASSERT_OK_ST(cli, expr) ASSERT_STATUS(cli, expr, SENSIM_OK, NULL)

//---------------- Scene helpers

// A primitive as object `id` (geometry `id`) at (x, y, z) on the world, label `label`.
sensim_status_t td_sphere(sensim_client_t* cli, uint32_t id, double r, double x, double y,
                          double z, uint32_t label);
sensim_status_t td_box(sensim_client_t* cli, uint32_t id, double hx, double hy, double hz,
                       double x, double y, double z, uint32_t label);

// Milliseconds on the monotonic clock.
double td_now_ms(void);

//---------------- Scripted peer

// A loopback listener that accepts one client and plays a script in a thread.
typedef struct td_peer td_peer_t;
typedef void (*td_script_t)(int fd, void* arg);

// Listen, run script(fd, arg) on the accepted connection in a thread; NULL on failure.
td_peer_t* td_peer_start(td_script_t script, void* arg);
int td_peer_port(const td_peer_t* p);

// Join the script's thread and close everything.
void td_peer_stop(td_peer_t* p);

// Read one frame from fd into buf (cap bytes); returns its length, or -1.
long td_read_frame(int fd, uint8_t* buf, size_t cap);

// Write all n bytes; 0 on success.
int td_write_all(int fd, const void* p, size_t n);

// The id of a request frame of n bytes (its first field, as the client writes it), or 0.
uint64_t td_frame_id(const uint8_t* p, long n);

// Read a request frame and answer a Hello with a HelloReply (protocol 1, max frame 64 MiB);
// returns the request's id, or 0.
uint64_t td_peer_hello(int fd);
// The same with HelloReply.features (bits of sensim_session_t.features) set when not 0.
uint64_t td_peer_hello_features(int fd, uint64_t features);

// A protobuf writer for hand-made frames.
typedef struct td_pb {
  uint8_t buf[1 << 16];
  size_t len;
} td_pb_t;

void td_pb_varint(td_pb_t* b, uint64_t v);
void td_pb_key(td_pb_t* b, uint32_t field, uint32_t wire_type);
void td_pb_uint(td_pb_t* b, uint32_t field, uint64_t v);
void td_pb_double(td_pb_t* b, uint32_t field, double v);
void td_pb_bytes(td_pb_t* b, uint32_t field, const void* p, size_t n);

// Write b as one frame (length prefix first); 0 on success.
int td_pb_send(int fd, const td_pb_t* b);

#endif  // SENSIM_TESTS_CLIENT_C_SUPPORT_H_
