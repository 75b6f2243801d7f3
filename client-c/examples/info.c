// SPDX-License-Identifier: MIT
// info.c: sensim_info [HOST [PORT]]: connect to sensimd, shake hands and print what the daemon
// reports about itself. The smallest complete use of the C client.
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sensim/sensim.h>


static int usage(void) {
  fprintf(stderr, "usage: sensim_info [HOST [PORT]]\n"
                  "  Print the version, uptime, connections and counters of a sensimd.\n"
                  "  HOST defaults to 127.0.0.1, PORT to 7700. SENSIM_TOKEN, if set, is sent\n"
                  "  as the shared token.\n");
  return 2;
}


static void print_counter(const char* name, uint64_t value) {
  printf("  %-22s %" PRIu64 "\n", name, value);
}


int main(int argc, char** argv) {
  // arguments
  if (argc > 3 || (argc > 1 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0))) {
    return usage();
  }
  const char* host = argc > 1 ? argv[1] : "127.0.0.1";
  unsigned long port = 7700;
  if (argc > 2) {
    char* end = NULL;
    errno = 0;
    port = strtoul(argv[2], &end, 10);
    if (errno != 0 || end == argv[2] || *end != '\0' || port == 0 || port > 65535) {
      fprintf(stderr, "sensim_info: invalid port '%s'\n", argv[2]);
      return 2;
    }
  }

  // connect and shake hands
  sensim_options_t opts;
  sensim_options_init(&opts);
  opts.client_name = "sensim_info";
  opts.role = SENSIM_ROLE_OBSERVER;
  opts.token = getenv("SENSIM_TOKEN");
  sensim_client_t* cli = NULL;
  sensim_status_t st = sensim_client_connect(host, (uint16_t)port, &opts, &cli);
  if (st != SENSIM_OK) {
    fprintf(stderr, "sensim_info: cannot connect to %s:%lu: %s (%s)\n", host, port,
            sensim_client_last_error(cli), sensim_status_name(st));
    sensim_client_close(cli);
    return 1;
  }

  // ask
  sensim_info_t info;
  st = sensim_get_info(cli, &info);
  if (st != SENSIM_OK) {
    fprintf(stderr, "sensim_info: get_info failed: %s (%s)\n", sensim_client_last_error(cli),
            sensim_status_name(st));
    sensim_client_close(cli);
    return 1;
  }

  // print
  printf("sensimd at %s:%lu\n", host, port);
  printf("  %-22s %s\n", "server version", info.server_version);
  printf("  %-22s %" PRIu32 "\n", "protocol version", info.protocol_version);
  printf("  %-22s %.3f s\n", "uptime", info.uptime_s);
  printf("  %-22s %" PRIu32 "\n", "connections", info.connections);
  printf("  %-22s %" PRIu32 "\n", "threads", info.threads);
  printf("  %-22s %" PRIu32 "\n", "environments", info.environments);
  if (info.max_frame_bytes != 0) {
    printf("  %-22s %" PRIu32 "\n", "max frame bytes", info.max_frame_bytes);
  }
  if (info.max_clients != 0) {
    printf("  %-22s %" PRIu32 "\n", "max clients", info.max_clients);
  }
  printf("counters\n");
  print_counter("frames in", info.counters.frames_in);
  print_counter("frames out", info.counters.frames_out);
  print_counter("bytes in", info.counters.bytes_in);
  print_counter("bytes out", info.counters.bytes_out);
  print_counter("requests failed", info.counters.requests_failed);
  print_counter("connections total", info.counters.connections_total);
  print_counter("connections rejected", info.counters.connections_rejected);
  print_counter("frames rejected", info.counters.frames_rejected);
  print_counter("steps", info.counters.steps);
  print_counter("rays traced", info.counters.rays_traced);
  print_counter("rays culled", info.counters.rays_culled);
  print_counter("rays invalid", info.counters.rays_invalid);
  print_counter("scene commits", info.counters.scene_commits);
  print_counter("frames dropped", info.counters.frames_dropped);

  sensim_client_close(cli);
  return 0;
}
