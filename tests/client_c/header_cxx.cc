// SPDX-License-Identifier: MIT
// header_cxx.cc: compile-only check that sensim/sensim.h is usable from C++ (extern "C", no
// C-only constructs), as physics engines written in C++ include it.
#include <sensim/sensim.h>

static_assert(SENSIM_OK == 0, "status codes are the protocol's numbers");

int sensim_header_cxx_check(void);

int sensim_header_cxx_check(void) {
  sensim_options_t opts;
  sensim_options_init(&opts);
  sensim_client_t* cli = nullptr;
  sensim_status_t st = sensim_client_connect("127.0.0.1", 0, &opts, &cli);
  sensim_client_close(cli);
  return st == SENSIM_OK ? 0 : static_cast<int>(st);
}
