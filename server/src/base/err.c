// SPDX-License-Identifier: MIT
// err.c: names and texts of the error codes, and the detail-message helpers.
#include "base/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>


const char* err_name(int code) {
  switch (code) {
    case ERR_OK:
      return "ERR_OK";
#define ERR_NAME_ROW(name, value, text) \
  case name:                            \
    return #name;
      ERR_MAP(ERR_NAME_ROW)
#undef ERR_NAME_ROW
    default:
      return "ERR_UNKNOWN";
  }
}


const char* err_str(int code) {
  switch (code) {
    case ERR_OK:
      return "success";
#define ERR_STR_ROW(name, value, text) \
  case name:                           \
    return text;
      ERR_MAP(ERR_STR_ROW)
#undef ERR_STR_ROW
    default:
      return "unknown error";
  }
}


int err_set(err_msg_t* msg, int code, const char* fmt, ...) {
  if (msg) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg->text, sizeof(msg->text), fmt, ap);
    va_end(ap);
  }
  return code;
}


void err_prefix(err_msg_t* msg, const char* prefix) {
  if (!msg || !prefix || !prefix[0]) {
    return;
  }

  // "prefix." + text, truncated to the buffer
  size_t cap = sizeof(msg->text) - 1;
  size_t np = strlen(prefix);
  if (np + 1 > cap) {
    np = cap - 1;
  }
  size_t nt = strnlen(msg->text, cap);
  if (np + 1 + nt > cap) {
    nt = cap - np - 1;
  }
  memmove(msg->text + np + 1, msg->text, nt);
  memcpy(msg->text, prefix, np);
  msg->text[np] = '.';
  msg->text[np + 1 + nt] = '\0';
}
