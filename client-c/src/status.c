// SPDX-License-Identifier: MIT
// status.c: names and descriptions of sensim_status_t, and the error formatter of the client.
// The wire codes are pinned to the generated sensim.v1.StatusCode at compile time.
#include <stdarg.h>
#include <stdio.h>

#include "internal.h"

// The public enum promises the wire numbers; break the build if the protocol ever disagrees.
#define SAME_CODE(name)                                                      \
  _Static_assert((int)SENSIM_##name == (int)sensim_v1_StatusCode_##name, \
                 "SENSIM_" #name " differs from sensim.v1.StatusCode")
SAME_CODE(OK);
SAME_CODE(INVALID_ARGUMENT);
SAME_CODE(NOT_FOUND);
SAME_CODE(ALREADY_EXISTS);
SAME_CODE(RESOURCE_EXHAUSTED);
SAME_CODE(FAILED_PRECONDITION);
SAME_CODE(UNIMPLEMENTED);
SAME_CODE(INTERNAL);
SAME_CODE(UNAUTHENTICATED);
#undef SAME_CODE
_Static_assert((int)_sensim_v1_StatusCode_MAX < 100, "wire codes must stay below the client codes");

// clang-format off
#define STATUS_MAP(X)                                                       \
  X(OK,                  "success")                                         \
  X(INVALID_ARGUMENT,    "invalid argument")                                \
  X(NOT_FOUND,           "not found")                                       \
  X(ALREADY_EXISTS,      "already exists")                                  \
  X(RESOURCE_EXHAUSTED,  "resource exhausted")                              \
  X(FAILED_PRECONDITION, "failed precondition")                             \
  X(UNIMPLEMENTED,       "not implemented by the daemon")                   \
  X(INTERNAL,            "internal error in the daemon")                    \
  X(UNAUTHENTICATED,     "unauthenticated")                                 \
  X(EIO,                 "input/output error on the connection")            \
  X(ECLOSED,             "connection closed")                               \
  X(ETIMEDOUT,           "timed out")                                       \
  X(EPROTO,              "protocol error")                                  \
  X(ENOMEM,              "out of memory")                                   \
  X(ECONNECT,            "cannot connect")
// clang-format on


const char* sensim_status_name(sensim_status_t status) {
  switch (status) {
#define X(name, text) \
  case SENSIM_##name: \
    return #name;
    STATUS_MAP(X)
#undef X
  }
  return "UNKNOWN";
}


const char* sensim_status_str(sensim_status_t status) {
  switch (status) {
#define X(name, text) \
  case SENSIM_##name: \
    return text;
    STATUS_MAP(X)
#undef X
  }
  return "unknown status";
}


sensim_status_t sensim_fail(char* err, size_t err_cap, sensim_status_t st, const char* fmt, ...) {
  if (err != NULL && err_cap > 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_cap, fmt, ap);
    va_end(ap);
  }
  return st;
}
