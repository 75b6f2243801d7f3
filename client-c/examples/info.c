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
  const sensim_info_t* info = NULL;
  st = sensim_get_info(cli, &info);
  if (st != SENSIM_OK) {
    fprintf(stderr, "sensim_info: get_info failed: %s (%s)\n", sensim_client_last_error(cli),
            sensim_status_name(st));
    sensim_client_close(cli);
    return 1;
  }

  // print
  printf("sensimd at %s:%lu\n", host, port);
  printf("  %-22s %s\n", "server version", info->server_version);
  printf("  %-22s %" PRIu32 "\n", "protocol version", info->protocol_version);
  printf("  %-22s %.3f s\n", "uptime", info->uptime_s);
  printf("  %-22s %" PRIu32 "\n", "connections", info->connections);
  printf("  %-22s %" PRIu32 "\n", "threads", info->threads);
  printf("  %-22s %" PRIu32 "\n", "environments", info->nenvironments);
  if (info->limits.max_frame_bytes != 0) {
    printf("  %-22s %" PRIu32 "\n", "max frame bytes", info->limits.max_frame_bytes);
  }
  if (info->limits.max_clients != 0) {
    printf("  %-22s %" PRIu32 "\n", "max clients", info->limits.max_clients);
  }
  for (uint32_t i = 0; i < info->nenvironments; i++) {
    const sensim_environment_info_t* e = &info->environments[i];
    printf("  environment %-10s %" PRIu32 " clients, %" PRIu32 " objects, %" PRIu32
           " sensors, %" PRIu64 " steps\n", e->name, e->clients, e->objects, e->sensors,
           e->steps);
  }

  // every counter the daemon sent, by name (a counter newer than this client by number)
  printf("counters\n");
  for (unsigned f = 0; f < SENSIM_COUNTERS_MAX; f++) {
    if (info->counters.present >> f & 1) {
      const char* name = sensim_counter_name(f);
      char unknown[32];
      if (!name) {
        snprintf(unknown, sizeof(unknown), "counter %u", f);
        name = unknown;
      }
      print_counter(name, info->counters.value[f]);
    }
  }

  sensim_client_close(cli);
  return 0;
}
