// SPDX-License-Identifier: MIT
// main.c: command line of sensimd: parse and validate options, then daemon_run().
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/text.h"
#include "daemon.h"

static const char* const g_usage =
    "Usage: sensimd [OPTIONS]\n"
    "Sensor-simulation daemon: holds Sensor Environments and evaluates lidars, IMUs, encoders,\n"
    "odometers and cone sensors for physics engines that connect over TCP.\n"
    "\n"
    "Options:\n"
    "  --listen ADDR:PORT      address to listen on (default 127.0.0.1:7700; port 0 = any free\n"
    "                          port; IPv6 as [::1]:PORT)\n"
    "  --threads N             ray-tracing worker threads (default: the CPUs granted: the\n"
    "                          affinity mask, a control group's CPU quota rounded up)\n"
    "  --token TOKEN           shared secret every client must send in Hello (visible to\n"
    "                          other local users in the process list: prefer --token-file)\n"
    "  --token-file FILE       read the token from FILE (its first line; a trailing line end\n"
    "                          is dropped), e.g. a mounted secret\n"
    "  --max-frame-bytes N     largest accepted frame payload (default 67108864)\n"
    "  --max-clients N         simultaneous connections (default 64)\n"
    "  --max-environments N    named environments (default 64)\n"
    "  --max-scene-bytes N     memory the ray-tracing backend may hold for all environments;\n"
    "                          larger scenes fail with RESOURCE_EXHAUSTED (default: half of\n"
    "                          the memory granted: physical, or a control group's limit;\n"
    "                          0 = unlimited)\n"
    "  --max-held-bytes N      memory held for all connections together: input buffers,\n"
    "                          requests waiting, unsent replies, each at what it takes; past\n"
    "                          three quarters of it, connections that do not read their\n"
    "                          replies are not read (default: a sixteenth of the granted\n"
    "                          memory, at least 268435456; 0 = unlimited)\n"
    "  --handshake-timeout S   seconds from connecting to a successful Hello (default 5;\n"
    "                          0 = none); until then frames are limited to 65536 bytes\n"
    "  --idle-timeout S        close a connection without traffic and without requests in\n"
    "                          progress after S seconds (default 0 = never)\n"
    "  --io-timeout S          a started frame must arrive completely, and unsent replies\n"
    "                          must keep moving, within S seconds (default 30; 0 = never)\n"
    "  --max-request-seconds S one request's execution time; a longer one is stopped and\n"
    "                          answered DEADLINE_EXCEEDED (default 60; 0 = unlimited)\n"
    "  --subscriber-max-bytes N  frames queued per subscription; past it the oldest whole\n"
    "                          frames are dropped and counted (default 33554432)\n"
    "  --subscriber-soft-bytes N  a connection whose subscriptions queue more than this\n"
    "                          together for --subscriber-soft-seconds is closed (default\n"
    "                          16777216)\n"
    "  --subscriber-soft-seconds S  (default 10; 0 = never)\n"
    "  --retention POLICY      destroy | keep: what happens to an environment when its last\n"
    "                          client leaves (default destroy); a client may override it in\n"
    "                          the Hello that creates the environment\n"
    "  --record FILE           write every accepted request to FILE, to play the run again\n"
    "                          (python -m sensim.replay; docs/recording.md); no tokens\n"
    "  --record-max-bytes N    the recording's limit: past it recording stops, the daemon\n"
    "                          goes on (default 1073741824, at least 4096)\n"
    "  --log-level LEVEL       error | warn | info | debug (default info)\n"
    "  --help                  print this help and exit\n"
    "  --version               print the version and exit\n"
    "\n"
    "Once listening, one line 'sensimd listening on ADDR:PORT' is printed to stdout; logs go to\n"
    "stderr. SIGINT or SIGTERM shut down cleanly (exit 0).\n";


// A token: 1 to 127 bytes of valid UTF-8 without control characters.
static int token_ok(const char* t) {
  size_t n = strlen(t);
  return n > 0 && n <= 127 && text_is_clean(t, n, NULL);
}


// Read the token from the first line of `path` into buf (one trailing "\n" or "\r\n"
// dropped; anything after the first line is an error, so a wrong file is not half used).
// Returns 0 or -1 with a message naming the option.
static int read_token_file(const char* path, char* buf, size_t cap) {
  FILE* f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "sensimd: --token-file %s: %s\n", path, strerror(errno));
    return -1;
  }
  size_t n = fread(buf, 1, cap - 1, f);
  int more = fgetc(f) != EOF;
  int failed = ferror(f);
  fclose(f);
  if (failed) {
    fprintf(stderr, "sensimd: --token-file %s: read error\n", path);
    return -1;
  }
  buf[n] = '\0';
  if (n > 0 && buf[n - 1] == '\n') buf[--n] = '\0';
  if (n > 0 && buf[n - 1] == '\r') buf[--n] = '\0';
  if (more || memchr(buf, '\0', n) || !token_ok(buf)) {
    fprintf(stderr, "sensimd: --token-file %s must hold one line of 1 to 127 characters, none "
            "of them a control character\n", path);
    return -1;
  }
  return 0;
}


// Parse an unsigned decimal in [lo, hi]; returns 0 or -1 with a message naming the option.
static int parse_uint(const char* opt, const char* text, unsigned long long lo,
                      unsigned long long hi, unsigned long long* out) {
  char* end = NULL;
  errno = 0;
  unsigned long long v = strtoull(text, &end, 10);
  if (errno || !end || *end || text[0] == '-' || text[0] == '\0' || v < lo || v > hi) {
    fprintf(stderr, "sensimd: --%s '%s' must be an integer in [%llu, %llu]\n", opt, text, lo,
            hi);
    return -1;
  }
  *out = v;
  return 0;
}


// Parse seconds (decimal, e.g. 0.5) in [0, 86400] into milliseconds.
static int parse_seconds(const char* opt, const char* text, uint32_t* out_ms) {
  char* end = NULL;
  errno = 0;
  double v = strtod(text, &end);
  if (errno || !end || *end || text[0] == '\0' || !(v >= 0.0 && v <= 86400.0)) {
    fprintf(stderr, "sensimd: --%s '%s' must be a number of seconds in [0, 86400]\n", opt,
            text);
    return -1;
  }
  double ms = v * 1000.0;
  *out_ms = v > 0.0 && ms < 1.0 ? 1u : (uint32_t)(ms + 0.5);
  return 0;
}


static int parse_listen(const char* text, daemon_config_t* cfg) {
  const char* colon = strrchr(text, ':');
  if (!colon || colon == text) {
    fprintf(stderr, "sensimd: --listen '%s' must be ADDR:PORT\n", text);
    return -1;
  }
  const char* host = text;
  size_t hlen = (size_t)(colon - text);
  if (host[0] == '[' && hlen >= 2 && host[hlen - 1] == ']') {
    host++;
    hlen -= 2;
  }
  if (hlen == 0 || hlen >= sizeof(cfg->host)) {
    fprintf(stderr, "sensimd: --listen address '%.*s' is empty or too long\n", (int)hlen, host);
    return -1;
  }
  unsigned long long port;
  if (parse_uint("listen port", colon + 1, 0, 65535, &port)) {
    return -1;
  }
  memcpy(cfg->host, host, hlen);
  cfg->host[hlen] = '\0';
  cfg->port = (int)port;
  return 0;
}


int main(int argc, char** argv) {
  // Bulk requests and replies (a 131,072-ray raycast is 6 MB each way) come and go with every
  // request. By default glibc maps and unmaps each such buffer and the kernel faults its pages
  // in again every time; keeping up to 256 MiB of freed heap for reuse made the end-to-end
  // raycast through the Python client about 20 % faster. Held memory stays bounded by
  // --max-held-bytes; this only lets the allocator keep what was freed, and the network layer
  // hands it back (malloc_trim) once the connections have released most of what they held.
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);

  daemon_config_t cfg;
  daemon_config_default(&cfg);
  static char token_buf[256];  // --token-file's token, alive as long as cfg

  enum {
    OPT_LISTEN = 1, OPT_THREADS, OPT_TOKEN, OPT_MAX_FRAME, OPT_MAX_CLIENTS, OPT_MAX_ENVS,
    OPT_RETENTION, OPT_LOG_LEVEL, OPT_HELP, OPT_VERSION, OPT_MAX_SCENE, OPT_MAX_HELD,
    OPT_HANDSHAKE, OPT_IDLE, OPT_IO, OPT_MAX_REQUEST, OPT_SUB_MAX, OPT_SUB_SOFT, OPT_SUB_SOFT_S,
    OPT_TOKEN_FILE, OPT_RECORD, OPT_RECORD_MAX
  };
  static const struct option opts[] = {
      {"listen", required_argument, NULL, OPT_LISTEN},
      {"threads", required_argument, NULL, OPT_THREADS},
      {"token", required_argument, NULL, OPT_TOKEN},
      {"token-file", required_argument, NULL, OPT_TOKEN_FILE},
      {"max-frame-bytes", required_argument, NULL, OPT_MAX_FRAME},
      {"max-clients", required_argument, NULL, OPT_MAX_CLIENTS},
      {"max-environments", required_argument, NULL, OPT_MAX_ENVS},
      {"retention", required_argument, NULL, OPT_RETENTION},
      {"max-scene-bytes", required_argument, NULL, OPT_MAX_SCENE},
      {"max-held-bytes", required_argument, NULL, OPT_MAX_HELD},
      {"handshake-timeout", required_argument, NULL, OPT_HANDSHAKE},
      {"idle-timeout", required_argument, NULL, OPT_IDLE},
      {"io-timeout", required_argument, NULL, OPT_IO},
      {"max-request-seconds", required_argument, NULL, OPT_MAX_REQUEST},
      {"subscriber-max-bytes", required_argument, NULL, OPT_SUB_MAX},
      {"subscriber-soft-bytes", required_argument, NULL, OPT_SUB_SOFT},
      {"subscriber-soft-seconds", required_argument, NULL, OPT_SUB_SOFT_S},
      {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
      {"record", required_argument, NULL, OPT_RECORD},
      {"record-max-bytes", required_argument, NULL, OPT_RECORD_MAX},
      {"help", no_argument, NULL, OPT_HELP},
      {"version", no_argument, NULL, OPT_VERSION},
      {NULL, 0, NULL, 0},
  };

  int c;
  unsigned long long v;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    switch (c) {
      case OPT_LISTEN:
        if (parse_listen(optarg, &cfg)) return 2;
        break;
      case OPT_THREADS:
        if (parse_uint("threads", optarg, 1, DAEMON_MAX_THREADS, &v)) return 2;
        cfg.threads = (unsigned)v;
        break;
      case OPT_TOKEN:
        if (cfg.token) {
          fprintf(stderr, "sensimd: give one of --token and --token-file, once\n");
          return 2;
        }
        if (!token_ok(optarg)) {
          fprintf(stderr, "sensimd: --token must be 1 to 127 characters, none of them a "
                  "control character\n");
          return 2;
        }
        cfg.token = optarg;
        break;
      case OPT_TOKEN_FILE:
        if (cfg.token) {
          fprintf(stderr, "sensimd: give one of --token and --token-file, once\n");
          return 2;
        }
        if (read_token_file(optarg, token_buf, sizeof(token_buf))) return 2;
        cfg.token = token_buf;
        break;
      case OPT_MAX_FRAME:
        if (parse_uint("max-frame-bytes", optarg, 64, 1u << 30, &v)) return 2;
        cfg.max_frame_bytes = (uint32_t)v;
        break;
      case OPT_MAX_CLIENTS:
        if (parse_uint("max-clients", optarg, 1, 65536, &v)) return 2;
        cfg.max_clients = (uint32_t)v;
        break;
      case OPT_MAX_ENVS:
        if (parse_uint("max-environments", optarg, 1, 65536, &v)) return 2;
        cfg.max_environments = (uint32_t)v;
        break;
      case OPT_MAX_SCENE:
        if (parse_uint("max-scene-bytes", optarg, 0, 1ull << 50, &v)) return 2;
        cfg.max_scene_bytes = v;
        break;
      case OPT_MAX_HELD:
        if (parse_uint("max-held-bytes", optarg, 0, 1ull << 50, &v)) return 2;
        cfg.max_held_bytes = v;
        break;
      case OPT_HANDSHAKE:
        if (parse_seconds("handshake-timeout", optarg, &cfg.handshake_timeout_ms)) return 2;
        break;
      case OPT_IDLE:
        if (parse_seconds("idle-timeout", optarg, &cfg.idle_timeout_ms)) return 2;
        break;
      case OPT_IO:
        if (parse_seconds("io-timeout", optarg, &cfg.io_timeout_ms)) return 2;
        break;
      case OPT_SUB_MAX:
        if (parse_uint("subscriber-max-bytes", optarg, 4096, 1ull << 40, &v)) return 2;
        cfg.subscriber_max_bytes = v;
        break;
      case OPT_SUB_SOFT:
        if (parse_uint("subscriber-soft-bytes", optarg, 0, 1ull << 40, &v)) return 2;
        cfg.subscriber_soft_bytes = v;
        break;
      case OPT_SUB_SOFT_S:
        if (parse_seconds("subscriber-soft-seconds", optarg, &cfg.subscriber_soft_ms)) return 2;
        break;
      case OPT_MAX_REQUEST:
        if (parse_seconds("max-request-seconds", optarg, &cfg.max_request_ms)) return 2;
        break;
      case OPT_RETENTION:
        if (strcmp(optarg, "keep") == 0) {
          cfg.retain_environments = 1;
        } else if (strcmp(optarg, "destroy") == 0) {
          cfg.retain_environments = 0;
        } else {
          fprintf(stderr, "sensimd: --retention '%s' must be destroy or keep\n", optarg);
          return 2;
        }
        break;
      case OPT_RECORD:
        if (!optarg[0]) {
          fprintf(stderr, "sensimd: --record needs a file name\n");
          return 2;
        }
        cfg.record_path = optarg;
        break;
      case OPT_RECORD_MAX:
        if (parse_uint("record-max-bytes", optarg, 4096, 1ull << 50, &v)) return 2;
        cfg.record_max_bytes = v;
        break;
      case OPT_LOG_LEVEL:
        if (log_level_parse(optarg, &cfg.log_level)) {
          fprintf(stderr, "sensimd: --log-level '%s' must be error, warn, info or debug\n",
                  optarg);
          return 2;
        }
        break;
      case OPT_HELP:
        fputs(g_usage, stdout);
        return 0;
      case OPT_VERSION:
        printf("sensimd %s (protocol 1)\n", SENSIM_VERSION);
        return 0;
      default:
        fprintf(stderr, "sensimd: unknown or incomplete option '%s' (see --help)\n",
                argv[optind - 1]);
        return 2;
    }
  }
  if (cfg.max_hello_bytes > cfg.max_frame_bytes) {
    cfg.max_hello_bytes = cfg.max_frame_bytes;
  }
  if (optind < argc) {
    fprintf(stderr, "sensimd: unexpected argument '%s' (see --help)\n", argv[optind]);
    return 2;
  }
  return daemon_run(&cfg) == 0 ? 0 : 1;
}
