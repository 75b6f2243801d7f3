// SPDX-License-Identifier: MIT
// transport.h: a blocking TCP connection carrying frames (u32 little-endian length + one
// Envelope) encoded and decoded with nanopb. Any I/O failure closes it: a stream that lost a
// frame boundary cannot be trusted again.
#ifndef SENSIM_CLIENT_TRANSPORT_H
#define SENSIM_CLIENT_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include "sensim.pb.h"
#include "sensim/sensim.h"

typedef struct sensim_transport {
  int fd;                           // socket; -1 when closed
  int timeout_ms;                   // per send or receive of one frame; <= 0 = forever
  uint32_t max_frame_bytes;         // largest incoming frame accepted
  uint8_t* buf;                     // frame buffer shared by send and receive
  size_t cap;                       // bytes allocated in buf
  char* err;                        // where failures are described (the handle's last error)
  size_t err_cap;                   // bytes in err
} sensim_transport_t;

// Prepare a closed transport that reports failures into err (err_cap bytes).
// Ownership: err is borrowed for the transport's lifetime.
void sensim_transport_init(sensim_transport_t* tr, int timeout_ms, uint32_t max_frame_bytes,
                           char* err, size_t err_cap);

// Resolve host and connect to host:port within the timeout. Returns SENSIM_OK,
// SENSIM_ECONNECT or SENSIM_ETIMEDOUT; on failure the transport stays closed.
sensim_status_t sensim_transport_connect(sensim_transport_t* tr, const char* host, uint16_t port);

// Encode env and send it as one frame. Returns SENSIM_OK, SENSIM_ECLOSED, SENSIM_EIO,
// SENSIM_ETIMEDOUT, SENSIM_EPROTO (encoding failed) or SENSIM_ENOMEM.
sensim_status_t sensim_transport_send(sensim_transport_t* tr, const sensim_v1_Envelope* env);

// Receive one frame and decode it into env, which the caller has initialised (callbacks set).
// Returns SENSIM_OK, SENSIM_ECLOSED (the daemon closed the connection), SENSIM_EIO,
// SENSIM_ETIMEDOUT, SENSIM_EPROTO (over max_frame_bytes or undecodable) or SENSIM_ENOMEM.
sensim_status_t sensim_transport_recv(sensim_transport_t* tr, sensim_v1_Envelope* env);

// Close the socket and free the buffer. Safe to call on a closed transport.
void sensim_transport_close(sensim_transport_t* tr);

#endif  // SENSIM_CLIENT_TRANSPORT_H
