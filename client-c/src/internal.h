// SPDX-License-Identifier: MIT
// internal.h: the structs behind the client's opaque handles and the helpers shared by its
// files. Never installed; the only client header that includes nanopb's generated code.
#ifndef SENSIM_CLIENT_INTERNAL_H
#define SENSIM_CLIENT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sensim.pb.h"
#include "sensim/sensim.h"
#include "transport.h"

#define CLIENT_DEFAULT_TIMEOUT_MS 10000
#define CLIENT_DEFAULT_MAX_FRAME (64u << 20)
#define CLIENT_ERROR_CAP 640

struct sensim_client {
  sensim_transport_t tr;

  // session
  uint64_t next_id;                 // id of the last request sent
  char server_version[32];          // from HelloReply
  uint32_t environments;            // counted while decoding Info.environments

  // scratch envelopes; large (the body union), so kept off the stack
  sensim_v1_Envelope tx;
  sensim_v1_Envelope rx;

  char last_error[CLIENT_ERROR_CAP];
};

// Format a failure into err (err_cap bytes) and return st, so that callers can write
// `return sensim_fail(...)`.
sensim_status_t sensim_fail(char* err, size_t err_cap, sensim_status_t st, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif  // SENSIM_CLIENT_INTERNAL_H
