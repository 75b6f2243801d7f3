// SPDX-License-Identifier: MIT
// err.h: error codes of the server (0 = success, negative = failure) and a per-call detail
// message that names the offending field. Every code maps to one wire StatusCode.
#ifndef SENSIM_BASE_ERR_H_
#define SENSIM_BASE_ERR_H_

#include <stddef.h>

#define CHECKRET __attribute__((warn_unused_result))

// X(name, value, text): one row per error code.
#define ERR_MAP(X)                                                \
  X(ERR_INVAL, -1, "invalid argument")                            \
  X(ERR_NOTFOUND, -2, "not found")                                \
  X(ERR_EXISTS, -3, "already exists")                             \
  X(ERR_LIMIT, -4, "limit exceeded")                              \
  X(ERR_STATE, -5, "failed precondition")                         \
  X(ERR_UNIMPL, -6, "not implemented")                            \
  X(ERR_NOMEM, -7, "out of memory")                               \
  X(ERR_BACKEND, -8, "ray-tracing backend error")                 \
  X(ERR_AUTH, -9, "unauthenticated")                              \
  X(ERR_INTERNAL, -10, "internal error")                          \
  X(ERR_PROTO, -11, "malformed message")

typedef enum err_code {
  ERR_OK = 0,
#define ERR_ENUM_ROW(name, value, text) name = value,
  ERR_MAP(ERR_ENUM_ROW)
#undef ERR_ENUM_ROW
} err_code_t;

// Symbolic name of a code ("ERR_INVAL"); "ERR_UNKNOWN" for anything else.
const char* err_name(int code);

// Short static text of a code ("invalid argument").
const char* err_str(int code);

// Detail of a failure, written by the function that failed: a sentence naming the field,
// e.g. "create_mesh.indices[7] = 12 is out of range (8 vertices)". Owned by the caller.
typedef struct err_msg {
  char text[512];
} err_msg_t;

// Write a formatted detail into msg (nullable) and return code, so that a failing function can
// `return err_set(msg, ERR_INVAL, "...", ...)`.
int err_set(err_msg_t* msg, int code, const char* fmt, ...) __attribute__((format(printf, 3, 4)));

// Prefix the detail with "prefix." (for nesting field paths); msg nullable.
void err_prefix(err_msg_t* msg, const char* prefix);

#endif  // SENSIM_BASE_ERR_H_
