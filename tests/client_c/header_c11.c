// SPDX-License-Identifier: MIT
// header_c11.c: compile-only check that sensim/sensim.h is self-contained, clean C11 under
// -pedantic-errors, and that its declarations have the types the documentation promises.
#include <sensim/sensim.h>

// Every public function, referenced through a pointer of the documented type.
static sensim_status_t (*const connect_fn)(const char*, uint16_t, const sensim_options_t*,
                                           sensim_client_t**) = sensim_client_connect;
static void (*const close_fn)(sensim_client_t*) = sensim_client_close;
static const char* (*const last_error_fn)(const sensim_client_t*) = sensim_client_last_error;
static const char* (*const server_version_fn)(const sensim_client_t*) =
    sensim_client_server_version;
static const char* (*const status_str_fn)(sensim_status_t) = sensim_status_str;
static const char* (*const status_name_fn)(sensim_status_t) = sensim_status_name;
static void (*const options_init_fn)(sensim_options_t*) = sensim_options_init;
static sensim_status_t (*const ping_fn)(sensim_client_t*, const void*, size_t, uint64_t*) =
    sensim_ping;
static sensim_status_t (*const get_info_fn)(sensim_client_t*, sensim_info_t*) = sensim_get_info;

// The wire codes are part of the contract (sensim.v1.StatusCode).
_Static_assert(SENSIM_OK == 0, "OK");
_Static_assert(SENSIM_INVALID_ARGUMENT == 3, "INVALID_ARGUMENT");
_Static_assert(SENSIM_NOT_FOUND == 5, "NOT_FOUND");
_Static_assert(SENSIM_ALREADY_EXISTS == 6, "ALREADY_EXISTS");
_Static_assert(SENSIM_RESOURCE_EXHAUSTED == 8, "RESOURCE_EXHAUSTED");
_Static_assert(SENSIM_FAILED_PRECONDITION == 9, "FAILED_PRECONDITION");
_Static_assert(SENSIM_UNIMPLEMENTED == 12, "UNIMPLEMENTED");
_Static_assert(SENSIM_INTERNAL == 13, "INTERNAL");
_Static_assert(SENSIM_UNAUTHENTICATED == 16, "UNAUTHENTICATED");
_Static_assert(SENSIM_EIO > 100 && SENSIM_ECLOSED > 100 && SENSIM_ETIMEDOUT > 100 &&
                   SENSIM_EPROTO > 100 && SENSIM_ENOMEM > 100 && SENSIM_ECONNECT > 100,
               "client codes above 100");

int header_c11_uses(void);


int header_c11_uses(void) {
  sensim_info_t info = {0};
  sensim_options_t opts = {0};
  sensim_role_t role = SENSIM_ROLE_OBSERVER;
  opts.role = role;
  return (connect_fn != 0) + (close_fn != 0) + (last_error_fn != 0) + (server_version_fn != 0) +
         (status_str_fn != 0) + (status_name_fn != 0) + (options_init_fn != 0) + (ping_fn != 0) +
         (get_info_fn != 0) + (int)info.counters.steps + (int)opts.role;
}
