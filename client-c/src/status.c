// SPDX-License-Identifier: MIT
// status.c: names and descriptions of sensim_status_t from the one table in sensim.h, the
// mapping of a daemon's status codes onto it, and the client's error formatters. The wire codes are pinned to the generated sensim.v1.StatusCode
// at compile time, in both directions: every code the protocol defines is in the table.
#include <stdarg.h>
#include <stdio.h>

#include "internal.h"

// The public enum promises the wire numbers; break the build if the protocol ever disagrees.
#define SAME_CODE(name)                                                  \
  _Static_assert((int)SENSIM_##name == (int)sensim_v1_StatusCode_##name, \
                 "SENSIM_" #name " differs from sensim.v1.StatusCode")
SAME_CODE(OK);
SAME_CODE(INVALID_ARGUMENT);
SAME_CODE(DEADLINE_EXCEEDED);
SAME_CODE(NOT_FOUND);
SAME_CODE(ALREADY_EXISTS);
SAME_CODE(RESOURCE_EXHAUSTED);
SAME_CODE(FAILED_PRECONDITION);
SAME_CODE(UNIMPLEMENTED);
SAME_CODE(INTERNAL);
SAME_CODE(UNAUTHENTICATED);
#undef SAME_CODE

_Static_assert((int)_sensim_v1_StatusCode_MAX < 100, "wire codes must stay below the client codes");

// Every code of the protocol is in the table: a code added to sensim.proto fails this switch
// (-Wswitch-enum) until it is added to SENSIM_STATUS_MAP (and SAME_CODE above).
#pragma GCC diagnostic push
#pragma GCC diagnostic error "-Wswitch-enum"
bool sensim_status_is_wire(uint32_t code) {
  switch ((sensim_v1_StatusCode)code) {
    case sensim_v1_StatusCode_OK:
    case sensim_v1_StatusCode_INVALID_ARGUMENT:
    case sensim_v1_StatusCode_DEADLINE_EXCEEDED:
    case sensim_v1_StatusCode_NOT_FOUND:
    case sensim_v1_StatusCode_ALREADY_EXISTS:
    case sensim_v1_StatusCode_RESOURCE_EXHAUSTED:
    case sensim_v1_StatusCode_FAILED_PRECONDITION:
    case sensim_v1_StatusCode_UNIMPLEMENTED:
    case sensim_v1_StatusCode_INTERNAL:
    case sensim_v1_StatusCode_UNAUTHENTICATED:
      return true;
  }
  return false;
}
#pragma GCC diagnostic pop


sensim_status_t sensim_status_from_wire(int32_t code, const char* message, char* err,
                                        size_t err_cap) {
  // the client's own codes share the enum: a daemon's 104 must not read as EPROTO
  if (code < 0 || !sensim_status_is_wire((uint32_t)code)) {
    return sensim_fail(err, err_cap, SENSIM_EUNKNOWN, "status %d (unknown to this client): %s",
                       (int)code, message);
  }
  return sensim_fail(err, err_cap, (sensim_status_t)code, "%s", message);
}


const char* sensim_status_name(sensim_status_t status) {
  switch (status) {
#define X(name, value, text) \
  case SENSIM_##name:        \
    return #name;
    SENSIM_STATUS_MAP(X)
#undef X
  }
  return "UNKNOWN";
}


const char* sensim_status_str(sensim_status_t status) {
  switch (status) {
#define X(name, value, text) \
  case SENSIM_##name:        \
    return text;
    SENSIM_STATUS_MAP(X)
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


sensim_status_t sensim_cli_fail(sensim_client_t* cli, sensim_status_t st, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cli->last_error, sizeof(cli->last_error), fmt, ap);
  va_end(ap);
  return st;
}
