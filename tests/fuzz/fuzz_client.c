// SPDX-License-Identifier: MIT
// fuzz_client.c: the C client's decoding of what a daemon sends (client-c/src: transport.c's
// framing, client.c's reply matching and status mapping, info.c, raycast.c, step.c, data.c
// (a step's reply read by hand through cursor.h, its other frames by nanopb) and decode.c),
// through its public API: a thread of this program plays the daemon on a
// loopback port and sends the input's stream, each reply once its request came (serve), then
// closes its side; the client connects
// (Hello) and makes one call of every reply type it decodes:
//   id 1 Hello, 2 GetInfo, 3 Ping "fuzz", 4 Raycast of 4 rays (hits into the caller's buffer),
//   5 Step (outputs, and parts sent ahead), 6 Subscribe (a status alone), 7 GetInfo,
// then takes every pushed SensorData it holds. Pushed data (id 0), replies nobody waits for,
// refusals and broken frames may come anywhere in the stream. Every point cloud handed back
// is decoded (RAW, ZSTD, QUANTIZED_ZSTD) into a buffer of exactly its size, and into one too
// small.
//
// Oracle, besides the sanitizers: no crash, no hang, nothing written past a caller's buffer
// (hits, decoded points) or into it after its call returned; every string handed back is
// terminated; every status is one of the table's, and a status the client raises itself is
// not a daemon's code passed through: EIO, ECLOSED, ETIMEDOUT and EPROTO (but a ping's echo
// and a decoder's refusal) leave the connection closed, ECONNECT comes only from connecting,
// EAGAIN only from a wait with a timeout of its own, ENOMEM never (the frames are at most
// 1 MiB); a decoded RAW cloud is its data, byte for byte.
//
// Input: one byte of options, then the daemon's byte stream (frames: u32 little-endian
// length + Envelope).
//   [0] bit 0 nonblocking handle; bit 1 at most 2 pushed frames kept (else 1024); bit 2 the
//       raycast as sensim_raycast_send + sensim_raycast_wait
// The seeds are the replies of a daemon to these calls, pushed data of every kind and
// encoding (the clouds from the daemon's encoder: fuzz_seeds_codec's corpus), and refusals.
//
// This target follows the C client's entry points (client-c/include/sensim/sensim.h); it must
// follow the client when its API changes.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fuzz.h"
#include "sensim/sensim.h"

#define ACCEPT_TIMEOUT_MS 10000
#define NRAYS 4u
#define MAX_DECODE (1u << 22)       // largest cloud decoded (bytes); the frame limit is 1 MiB
#define NAME_MAX_BYTES 4096         // a string handed back is terminated within this

static int g_listen = -1;
static uint16_t g_port;
static pid_t g_client_tid;  // the thread making the client's calls

typedef struct feed {
  const uint8_t* data;
  size_t size;
} feed_t;


int LLVMFuzzerInitialize(int* argc, char*** argv) {
  (void)argc;
  (void)argv;
  g_listen = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  FUZZ_ASSERT(g_listen >= 0, "socket");
  struct sockaddr_in a;
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t alen = sizeof(a);
  FUZZ_ASSERT(bind(g_listen, (struct sockaddr*)&a, sizeof(a)) == 0 && listen(g_listen, 4) == 0 &&
              getsockname(g_listen, (struct sockaddr*)&a, &alen) == 0, "listen on loopback");
  g_port = ntohs(a.sin_port);
  return 0;
}


// The requests the client has sent so far, read as they come: only the highest Envelope id
// matters (the client numbers its requests 1, 2, 3, ...).
typedef struct requests {
  int fd;
  uint8_t buf[4096];                // the unread start of the client's stream
  size_t have;
  uint64_t skip;                    // bytes of the current frame still to pass over
  uint64_t max_id;
  bool closed;
} requests_t;

// The Envelope id a frame starts with (field 1, a varint, written first by every encoder of
// the project), or 0 when the bytes do not start that way.
static uint64_t envelope_id(const uint8_t* p, size_t n) {
  if (n < 2 || p[0] != 0x08) {
    return 0;
  }
  uint64_t id = 0;
  for (size_t i = 1; i < n && i <= 10; i++) {
    id |= (uint64_t)(p[i] & 0x7f) << (7 * (i - 1));
    if (!(p[i] & 0x80)) {
      return id;
    }
  }
  return 0;
}

// Take what the client sent within timeout_ms: false when nothing came or it closed.
static bool read_requests(requests_t* r, int timeout_ms) {
  struct pollfd p = {.fd = r->fd, .events = POLLIN, .revents = 0};
  if (r->closed || poll(&p, 1, timeout_ms) != 1) {
    return false;
  }
  ssize_t n = recv(r->fd, r->buf + r->have, sizeof(r->buf) - r->have, 0);
  if (n <= 0) {
    r->closed = true;
    return false;
  }
  r->have += (size_t)n;
  size_t o = 0;
  for (;;) {
    uint64_t k = r->have - o < r->skip ? r->have - o : r->skip;
    o += (size_t)k;
    r->skip -= k;
    if (r->skip > 0 || r->have - o < 4) {
      break;
    }
    uint32_t len = (uint32_t)r->buf[o] | (uint32_t)r->buf[o + 1] << 8 |
                   (uint32_t)r->buf[o + 2] << 16 | (uint32_t)r->buf[o + 3] << 24;
    size_t head = len < 11 ? len : 11;  // a key and a varint of at most ten bytes
    if (r->have - o < 4 + head) {
      break;
    }
    uint64_t id = envelope_id(r->buf + o + 4, head);
    r->max_id = id > r->max_id ? id : r->max_id;
    o += 4;
    r->skip = len;
  }
  memmove(r->buf, r->buf + o, r->have - o);
  r->have -= o;
  return true;
}

// Whether the client's thread sleeps: in this program it sleeps only waiting for the daemon's
// bytes (its recv or poll), so it will send nothing more until some come.
static bool client_waits(void) {
  char path[64];
  char stat[256];
  snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)g_client_tid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  FUZZ_ASSERT(fd >= 0, "open %s", path);
  ssize_t n = read(fd, stat, sizeof(stat) - 1);
  close(fd);
  FUZZ_ASSERT(n > 0, "read %s", path);
  stat[n] = '\0';
  const char* end = strrchr(stat, ')');  // "tid (name) state ..."
  return end != NULL && end[1] == ' ' && (end[2] == 'S' || end[2] == 'D');
}

// The daemon's side of one connection, paced as a daemon answers: a frame with Envelope id k > 0
// is sent once the client has sent its request k (pushed frames, id 0, and frames that do not
// parse go at once), or once the client waits without having sent it (for a reply the stream
// has later or not at all), so replies out of order and replies nobody asked for still reach
// it, the same way on every run. Then the sending side is closed and whatever the client sends is taken until
// it closes. (Sent all at once, the replies came before their requests and the client dropped
// them as answering nothing: its decoders were never reached.)
static void* serve(void* arg) {
  const feed_t* f = arg;
  struct pollfd p = {.fd = g_listen, .events = POLLIN, .revents = 0};
  if (poll(&p, 1, ACCEPT_TIMEOUT_MS) != 1) {
    return NULL;
  }
  int fd = accept(g_listen, NULL, NULL);
  if (fd < 0) {
    return NULL;
  }
  static requests_t req;  // one connection at a time
  memset(&req, 0, sizeof(req));
  req.fd = fd;
  size_t sent = 0;
  bool open = true;
  while (open && sent < f->size) {
    size_t end = f->size;
    uint64_t id = 0;
    if (f->size - sent >= 4) {
      const uint8_t* h = f->data + sent;
      uint64_t len = (uint64_t)h[0] | (uint64_t)h[1] << 8 | (uint64_t)h[2] << 16 |
                     (uint64_t)h[3] << 24;
      if (len <= f->size - sent - 4) {
        end = sent + 4 + (size_t)len;
      }
      id = envelope_id(h + 4, end - sent - 4);
    }
    while (id > req.max_id && !req.closed) {
      if (!read_requests(&req, 1) && client_waits()) {
        break;
      }
    }
    while (sent < end) {
      ssize_t n = send(fd, f->data + sent, end - sent, MSG_NOSIGNAL);
      if (n <= 0) {
        open = false;  // the client closed: it stopped reading
        break;
      }
      sent += (size_t)n;
    }
  }
  shutdown(fd, SHUT_WR);
  while (read_requests(&req, ACCEPT_TIMEOUT_MS)) {
  }
  close(fd);
  return NULL;
}


static void check_string(const char* s, const char* what) {
  FUZZ_ASSERT(s != NULL, "%s is NULL", what);
  FUZZ_ASSERT(memchr(s, '\0', NAME_MAX_BYTES) != NULL, "%s is not terminated", what);
}


// Where a call may legitimately raise a client status that leaves the connection open.
enum {
  MAY_EPROTO = 1,                   // a ping's echo that differs
  MAY_EAGAIN = 2,                   // a wait with a timeout of its own
  MAY_ECONNECT = 4,                 // connecting
};

// What a call leaves on the handle: a status of the table, and a client status only where the
// client raised it (a daemon's code is never handed through as one of them).
static void check_status(sensim_status_t st, const sensim_client_t* cli, const char* call,
                         unsigned may) {
  const char* err = sensim_client_last_error(cli);
  FUZZ_ASSERT(memchr(err, '\0', 640) != NULL, "%s: the last error is not terminated", call);
  FUZZ_ASSERT(strcmp(sensim_status_name(st), "UNKNOWN") != 0, "%s: status %d is not in the "
              "table (%s)", call, (int)st, err);
  switch (st) {
    case SENSIM_EIO:
    case SENSIM_ECLOSED:
    case SENSIM_ETIMEDOUT:
      FUZZ_ASSERT(sensim_client_fd(cli) < 0, "%s: %s with the connection open (%s)", call,
                  sensim_status_name(st), err);
      break;
    case SENSIM_EPROTO:
      FUZZ_ASSERT(sensim_client_fd(cli) < 0 ||
                  ((may & MAY_EPROTO) && strstr(err, "pong payload differs") != NULL),
                  "%s: EPROTO with the connection open (%s)", call, err);
      break;
    case SENSIM_EAGAIN:
      FUZZ_ASSERT(may & MAY_EAGAIN, "%s: EAGAIN from a blocking call (%s)", call, err);
      break;
    case SENSIM_ECONNECT:
      FUZZ_ASSERT(may & MAY_ECONNECT, "%s: ECONNECT after connecting (%s)", call, err);
      break;
    case SENSIM_ENOMEM:
      FUZZ_ASSERT(0, "%s: ENOMEM with frames of at most 1 MiB (%s)", call, err);
      break;
    default:
      break;
  }
}


// Decode a cloud handed back: into a buffer of exactly its size (ASan sees a write past it),
// and into one a byte too small, which must be refused.
static void check_cloud(const sensim_point_cloud_t* c) {
  for (uint32_t i = 0; i < c->nfields; i++) {
    check_string(c->fields[i].name, "point_cloud.fields[].name");
  }
  (void)sensim_point_cloud_field(c, "x");
  FUZZ_ASSERT(c->size == 0 || c->data != NULL, "point_cloud.data: NULL for %zu bytes", c->size);
  uint64_t need = (uint64_t)c->count * c->point_step;
  if (need > MAX_DECODE) {
    uint8_t small[64];
    sensim_status_t st = sensim_point_cloud_read(c, small, sizeof(small));
    FUZZ_ASSERT(st == SENSIM_INVALID_ARGUMENT || st == SENSIM_EPROTO,
                "a cloud of %llu bytes read into 64: %s", (unsigned long long)need,
                sensim_status_name(st));
    return;
  }
  uint8_t* out = malloc(need ? (size_t)need : 1);
  FUZZ_ASSERT(out != NULL, "malloc");
  sensim_status_t st = sensim_point_cloud_read(c, out, (size_t)need);
  FUZZ_ASSERT(st == SENSIM_OK || st == SENSIM_EPROTO || st == SENSIM_INVALID_ARGUMENT,
              "point cloud read: %s", sensim_status_name(st));
  if (st == SENSIM_OK && c->encoding == SENSIM_ENCODING_RAW) {
    FUZZ_ASSERT(c->size == need && (need == 0 || memcmp(out, c->data, (size_t)need) == 0),
                "a RAW cloud decoded is not its data (%zu bytes, %llu expected)", c->size,
                (unsigned long long)need);
  }
  if (st == SENSIM_OK && need > 0) {
    st = sensim_point_cloud_read(c, out, (size_t)need - 1);
    FUZZ_ASSERT(st == SENSIM_INVALID_ARGUMENT, "a cloud of %llu bytes read into one byte less: "
                "%s", (unsigned long long)need, sensim_status_name(st));
  }
  free(out);
}


static void check_data(const sensim_sensor_data_t* d) {
  switch (d->kind) {
    case SENSIM_PAYLOAD_NONE:
      break;
    case SENSIM_PAYLOAD_POINT_CLOUD:
      check_cloud(&d->point_cloud);
      break;
    case SENSIM_PAYLOAD_IMU:
      FUZZ_ASSERT(d->imu.nvalues <= 9, "imu.nvalues %u", d->imu.nvalues);
      break;
    case SENSIM_PAYLOAD_SCALAR:
    case SENSIM_PAYLOAD_CONE:
      break;
    default:
      FUZZ_ASSERT(0, "sensor data of kind %d", (int)d->kind);
  }
}


// A counter the daemon did not send reads 0.
static void check_counters(const sensim_counters_t* c) {
  for (unsigned f = 0; f < SENSIM_COUNTERS_MAX; f++) {
    FUZZ_ASSERT((c->present >> f & 1) || c->value[f] == 0, "counter %u is %llu but was not "
                "sent", f, (unsigned long long)c->value[f]);
  }
}


static void check_info(const sensim_info_t* info) {
  check_string(info->server_version, "info.server_version");
  FUZZ_ASSERT(info->nenvironments == 0 || info->environments != NULL, "info.environments NULL");
  for (uint32_t i = 0; i < info->nenvironments; i++) {
    check_string(info->environments[i].name, "info.environments[].name");
    check_counters(&info->environments[i].counters);
  }
  FUZZ_ASSERT(info->nsubscribers == 0 || info->subscribers != NULL, "info.subscribers NULL");
  for (uint32_t i = 0; i < info->nsubscribers; i++) {
    check_string(info->subscribers[i].environment, "info.subscribers[].environment");
    check_string(info->subscribers[i].closed_reason, "info.subscribers[].closed_reason");
    check_string(info->subscribers[i].peer, "info.subscribers[].peer");
  }
  check_counters(&info->counters);
}


static void call_raycast(sensim_client_t* cli, bool split) {
  static const double origins[3 * NRAYS] = {0};
  static const double dirs[3 * NRAYS] = {1, 0, 0, 0, 1, 0, 0, 0, 1, -1, 0, 0};
  sensim_raycast_t r;
  sensim_raycast_init(&r);
  r.nrays = NRAYS;
  r.origins = origins;
  r.directions = dirs;
  // exactly NRAYS records, freed when the call returns: ASan sees a write past it or after
  sensim_hit_t* hits = malloc(NRAYS * sizeof(*hits));
  FUZZ_ASSERT(hits != NULL, "malloc");
  uint64_t serial = 0;
  sensim_status_t st;
  if (split) {
    uint64_t id = 0;
    st = sensim_raycast_send(cli, &r, hits, &id);
    if (st == SENSIM_OK) {
      st = sensim_raycast_wait(cli, id, -1, &serial);
    }
  } else {
    st = sensim_raycast(cli, &r, hits, &serial);
  }
  check_status(st, cli, "sensim_raycast", 0);
  free(hits);
}


static void call_step(sensim_client_t* cli) {
  sensim_step_t step;
  sensim_step_init(&step);
  step.time = 0.1;
  const sensim_step_result_t* res = NULL;
  sensim_status_t st = sensim_step(cli, &step, &res);
  check_status(st, cli, "sensim_step", 0);
  if (st != SENSIM_OK) {
    return;
  }
  FUZZ_ASSERT(res != NULL, "sensim_step: OK without a result");
  FUZZ_ASSERT(res->outputs_in_parts <= res->noutputs, "%u outputs in parts of %u",
              res->outputs_in_parts, res->noutputs);
  FUZZ_ASSERT(res->noutputs == 0 || res->outputs != NULL, "step outputs NULL");
  for (uint32_t i = 0; i < res->noutputs; i++) {
    check_data(&res->outputs[i]);
  }
}


int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) {
    return 0;
  }
  uint8_t flags = data[0];
  feed_t f = {data + 1, size - 1};
  g_client_tid = (pid_t)syscall(SYS_gettid);
  pthread_t daemon;
  FUZZ_ASSERT(pthread_create(&daemon, NULL, serve, &f) == 0, "pthread_create");

  sensim_options_t opts;
  sensim_options_init(&opts);
  opts.environment = "fuzz";
  opts.token = "token";
  opts.timeout_ms = ACCEPT_TIMEOUT_MS;
  opts.max_frame_bytes = 1u << 20;
  opts.nonblocking = flags & 1;
  opts.pushed_max_frames = flags & 2 ? 2 : 1024;
  sensim_client_t* cli = NULL;
  sensim_status_t st = sensim_client_connect("127.0.0.1", g_port, &opts, &cli);
  FUZZ_ASSERT(cli != NULL, "no handle (%d)", (int)st);
  check_status(st, cli, "sensim_client_connect", MAY_ECONNECT);
  check_string(sensim_client_server_version(cli), "server version");
  const sensim_session_t* session = sensim_client_session(cli);
  check_string(session->server_version, "session.server_version");
  check_string(session->environment, "session.environment");

  // the calls go on after a failure: a closed handle must say so, not crash
  const sensim_info_t* info = NULL;
  st = sensim_get_info(cli, &info);
  check_status(st, cli, "sensim_get_info", 0);
  if (st == SENSIM_OK) {
    check_info(info);
  }
  uint64_t t;
  st = sensim_ping(cli, "fuzz", 4, &t);
  check_status(st, cli, "sensim_ping", MAY_EPROTO);
  call_raycast(cli, flags & 4);
  call_step(cli);
  sensim_subscription_t sub;
  sensim_subscription_init(&sub);
  sub.sensor_id = 1;
  sub.encoding = SENSIM_ENCODING_QUANTIZED_ZSTD;
  st = sensim_subscribe(cli, &sub);
  check_status(st, cli, "sensim_subscribe", 0);
  st = sensim_get_info(cli, &info);
  check_status(st, cli, "sensim_get_info", 0);
  if (st == SENSIM_OK) {
    check_info(info);
  }

  // the pushed records held (at most what the stream could carry)
  for (int i = 0; i < 4096; i++) {
    const sensim_sensor_data_t* d = NULL;
    st = sensim_next_sensor_data(cli, 0, &d);
    check_status(st, cli, "sensim_next_sensor_data", MAY_EAGAIN);
    if (st != SENSIM_OK) {
      break;
    }
    check_data(d);
  }
  sensim_client_close(cli);
  pthread_join(daemon, NULL);
  return 0;
}
