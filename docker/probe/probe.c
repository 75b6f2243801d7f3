// SPDX-License-Identifier: MIT
// probe.c: sensim_probe [--live] [--timeout MS] HOST PORT: the health check of a deployed
// sensimd. A handshake and a Ping, both answered without waiting for any simulation work.
//
// Exit status: 0 healthy, 1 not, 2 usage. Without --live (readiness) healthy means the daemon
// accepted the handshake and echoed the Ping within the timeout. With --live (liveness) any
// answer from the daemon counts, a refusal included (too many clients or environments, a wrong
// token): the daemon is running, and restarting it would not help. SENSIM_TOKEN, if set, is
// sent as the shared token.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sensim/sensim.h>

// The probe joins an environment of its own: a handshake is answered on its environment's
// queue, so joining an environment that is busy stepping would wait for that step.
#define PROBE_ENVIRONMENT "sensim-probe"


static int usage(void) {
  fprintf(stderr,
          "usage: sensim_probe [--live] [--timeout MS] HOST PORT\n"
          "  Handshake and Ping a sensimd; exit 0 if healthy, 1 if not.\n"
          "  --live        any answer counts (a refusal too): the daemon is alive\n"
          "  --timeout MS  connect and reply timeout in milliseconds, 1 to 600000 (default 3000)\n"
          "  SENSIM_TOKEN, if set, is sent as the shared token.\n");
  return 2;
}


// Parse an integer in [lo, hi]; returns 0 or -1.
static int parse_long(const char* text, long lo, long hi, long* out) {
  char* end = NULL;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < lo || v > hi) {
    return -1;
  }
  *out = v;
  return 0;
}


int main(int argc, char** argv) {
  // arguments
  int live = 0;
  long timeout_ms = 3000;
  int i = 1;
  for (; i < argc && argv[i][0] == '-'; i++) {
    if (strcmp(argv[i], "--live") == 0) {
      live = 1;
    } else if (strcmp(argv[i], "--timeout") == 0 && i + 1 < argc) {
      if (parse_long(argv[++i], 1, 600000, &timeout_ms) != 0) {
        fprintf(stderr, "sensim_probe: --timeout '%s' must be 1 to 600000 ms\n", argv[i]);
        return 2;
      }
    } else {
      return usage();
    }
  }
  if (argc - i != 2) {
    return usage();
  }
  const char* host = argv[i];
  long port = 0;
  if (parse_long(argv[i + 1], 1, 65535, &port) != 0) {
    fprintf(stderr, "sensim_probe: port '%s' must be 1 to 65535\n", argv[i + 1]);
    return 2;
  }

  // handshake
  sensim_options_t opts;
  sensim_options_init(&opts);
  opts.client_name = "sensim_probe";
  opts.environment = PROBE_ENVIRONMENT;
  opts.role = SENSIM_ROLE_OBSERVER;
  opts.token = getenv("SENSIM_TOKEN");
  opts.timeout_ms = (int)timeout_ms;
  sensim_client_t* cli = NULL;
  sensim_status_t st = sensim_client_connect(host, (uint16_t)port, &opts, &cli);
  if (st != SENSIM_OK) {
    // statuses up to 100 are the daemon's own answers (sensim.h): it is running
    int answered = st > SENSIM_OK && st <= 100;
    fprintf(stderr, "sensim_probe: %s:%ld %s: %s (%s)\n", host, port,
            answered ? "refused the handshake" : "did not answer",
            sensim_client_last_error(cli), sensim_status_name(st));
    sensim_client_close(cli);
    return live && answered ? 0 : 1;
  }

  // ping
  st = sensim_ping(cli, "probe", 5, NULL);
  if (st != SENSIM_OK) {
    fprintf(stderr, "sensim_probe: %s:%ld ping failed: %s (%s)\n", host, port,
            sensim_client_last_error(cli), sensim_status_name(st));
    sensim_client_close(cli);
    return 1;
  }
  printf("sensimd %s at %s:%ld is healthy\n", sensim_client_server_version(cli), host, port);
  sensim_client_close(cli);
  return 0;
}
