// SPDX-License-Identifier: MIT
// test_client_failures.c: what goes wrong, through the C client. Against the real sensimd: the
// daemon killed during a blocking call, within a frame (a raycast streamed into its hits, a
// step's cloud) and while it pushes; the handle's timeout on a frozen daemon. Against a
// scripted peer, for what the real daemon never sends: frames trickled byte by byte (the
// timeout covers the whole call), a peer that stops reading, and hostile frames (wrong sizes,
// fields outside the point, truncated or oversized zstd bodies, malformed protobuf): each is
// refused with a status, never a hang, a crash or a read out of bounds (ASan checks the last).
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "support.h"


static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}


// A child process that sends sig to pid after ms; returns its pid.
static pid_t signal_later(pid_t pid, int sig, int ms) {
  pid_t k = fork();
  if (k == 0) {
    sleep_ms(ms);
    kill(pid, sig);
    _exit(0);
  }
  return k;
}


static bool closed_status(sensim_status_t st) {
  return st == SENSIM_ECLOSED || st == SENSIM_EIO;
}


// Wait until the daemon holds at least `bytes` (GetInfo's held_bytes, through a connection of
// its own) and has handed at least `out` bytes to its connections (bytes_out, counted as a
// reply is queued): a reply is then stuck in it, partly written. A large request is held too
// while it runs: `out` tells its reply from it. 0 when it does, -1 when it has not within
// 5 minutes (the daemon's trace of the cloud is the slow part: minutes in a sanitizer build on
// a loaded machine; the wait ends as soon as the bytes are held).
static int wait_held(const td_daemon_t* d, uint64_t bytes, uint64_t out) {
  sensim_options_t o;
  sensim_options_init(&o);
  o.environment = "probe";
  o.role = SENSIM_ROLE_OBSERVER;
  o.timeout_ms = TD_TIMEOUT_MS;
  sensim_client_t* probe = td_connect_opts(d, &o);
  int rc = -1;
  const double deadline = td_now_ms() + 300e3;
  while (probe && rc != 0 && td_now_ms() < deadline) {
    const sensim_info_t* info;
    if (sensim_get_info(probe, &info) != SENSIM_OK) {
      fprintf(stderr, "# wait_held: %s\n", sensim_client_last_error(probe));
      break;
    }
    if (info->counters.value[SENSIM_COUNTER_HELD_BYTES] >= bytes &&
        info->counters.value[SENSIM_COUNTER_BYTES_OUT] >= out) {
      rc = 0;
    } else {
      sleep_ms(10);
    }
  }
  sensim_client_close(probe);
  return rc;
}


//---------------- The real daemon

TEST(failures_daemon_killed_during_a_blocking_call) {
  td_daemon_t d;
  ASSERT_OK(td_start(&d, NULL));
  sensim_client_t* cli = td_connect(&d, "killed");
  ASSERT_TRUE(cli != NULL);

  // frozen, so that the ping waits; killed 200 ms into the wait
  kill(d.pid, SIGSTOP);
  pid_t killer = signal_later(d.pid, SIGKILL, 200);
  double t0 = td_now_ms();
  sensim_status_t st = sensim_ping(cli, NULL, 0, NULL);
  double dt = td_now_ms() - t0;
  waitpid(killer, NULL, 0);
  if (!closed_status(st)) {
    CHECK_FAIL("ping: %s (%s)", sensim_status_name(st), sensim_client_last_error(cli));
  }
  ASSERT_TRUE(dt >= 150.0 && dt < 9000.0);  // returned when the connection went, not at 10 s
  ASSERT_EQ(sensim_client_fd(cli), -1);
  ASSERT_CONTAINS(sensim_client_last_error(cli), "closed");

  // every later call says so at once
  sensim_body_t b;
  sensim_body_init(&b);
  st = sensim_create_body(cli, &b);
  ASSERT_TRUE(closed_status(st));
  ASSERT_CONTAINS(sensim_client_last_error(cli), "connection is closed");
  td_kill(&d);
  sensim_client_close(cli);
  return 0;
}


TEST(failures_daemon_killed_within_a_raycast_reply) {
  td_daemon_t d;
  ASSERT_OK(td_start(&d, NULL));
  sensim_client_t* cli = td_connect(&d, "killed_raycast");
  ASSERT_TRUE(cli != NULL);
  ASSERT_OK_ST(cli, td_sphere(cli, 1, 50.0, 0, 0, 0, 1));

  // a 19 MB reply, more than the socket buffers hold while nobody reads: the daemon is still
  // writing it when it is killed
  uint32_t n = 400000;
  double* org = calloc(3 * (size_t)n, sizeof(double));
  double* dir = calloc(3 * (size_t)n, sizeof(double));
  sensim_hit_t* hits = malloc(sizeof(sensim_hit_t) * n);
  ASSERT_TRUE(org && dir && hits);
  for (uint32_t i = 0; i < n; i++) {
    dir[3 * i] = 1.0;
  }
  sensim_raycast_t r;
  sensim_raycast_init(&r);
  r.nrays = n;
  r.origins = org;
  r.directions = dir;
  uint64_t id;
  ASSERT_OK_ST(cli, sensim_raycast_send(cli, &r, hits, &id));
  ASSERT_OK(wait_held(&d, 1u << 20, (uint64_t)n * sizeof(sensim_hit_t) / 2));
  td_kill(&d);

  // the blocking wait streams the reply into the hits: part of it, then the end
  sensim_status_t st = sensim_raycast_wait(cli, id, -1, NULL);
  ASSERT_EQ(st, SENSIM_ECLOSED);
  ASSERT_CONTAINS(sensim_client_last_error(cli), "within a frame");
  free(org);
  free(dir);
  free(hits);
  sensim_client_close(cli);
  return 0;
}


// A flash lidar of 700 x 700 pixels inside a sphere: a 7.8 MB cloud every 0.1 s.
static sensim_status_t big_lidar(sensim_client_t* cli) {
  sensim_status_t st = td_sphere(cli, 1, 20.0, 0, 0, 0, 1);
  if (st != SENSIM_OK) {
    return st;
  }
  sensim_lidar_config_t c;
  sensim_lidar_config_init(&c, SENSIM_PATTERN_FLASH);
  c.flash.columns = c.flash.rows = 700;
  sensim_sensor_t s;
  sensim_sensor_init(&s);
  s.id = 9;
  return sensim_create_lidar(cli, &s, &c);
}


static sensim_status_t tick_send(sensim_client_t* cli, double t, uint64_t* a, uint64_t* b) {
  sensim_state_t state;
  sensim_state_init(&state);
  state.time = t;
  sensim_step_t step;
  sensim_step_init(&step);
  step.time = t;
  sensim_status_t st = sensim_update_state_send(cli, &state, a);
  return st != SENSIM_OK ? st : sensim_step_send(cli, &step, b);
}


TEST(failures_daemon_killed_within_a_steps_cloud) {
  td_daemon_t d;
  ASSERT_OK(td_start(&d, NULL));
  sensim_client_t* cli = td_connect(&d, "killed_step");
  ASSERT_TRUE(cli != NULL);
  ASSERT_OK_ST(cli, big_lidar(cli));

  // the first step's cloud is written while nobody reads
  uint64_t a, b;
  const sensim_step_result_t* r;
  ASSERT_OK_ST(cli, tick_send(cli, 0.0, &a, &b));
  ASSERT_OK(wait_held(&d, 1u << 20, 0));
  td_kill(&d);
  ASSERT_OK_ST(cli, sensim_wait(cli, a, -1));  // the state's reply came first, whole
  ASSERT_STATUS(cli, sensim_step_wait(cli, b, -1, &r), SENSIM_ECLOSED, "within a frame");
  sensim_client_close(cli);
  return 0;
}


// The most the kernel may buffer of what the daemon writes to a connection: its send buffer
// grows up to tcp_wmem's maximum (4 MiB by default; the daemon sets none of its own).
static uint64_t kernel_send_max(void) {
  uint64_t lo, def, max = 4u << 20;
  FILE* f = fopen("/proc/sys/net/ipv4/tcp_wmem", "r");
  if (f) {
    if (fscanf(f, "%" SCNu64 " %" SCNu64 " %" SCNu64, &lo, &def, &max) != 3) {
      max = 64u << 20;    // unreadable: a generous guess, only costing pushes
    }
    fclose(f);
  }
  return max;
}


TEST(failures_daemon_killed_while_pushing) {
  // Clouds pushed to an observer that does not read, until more than the kernel can buffer
  // between the daemon and the observer has been pushed: the observer's receive buffer is
  // made small (its autotuning, up to tcp_rmem's maximum, could take 32 MiB here), the
  // daemon's send buffer is at most tcp_wmem's maximum. So at least one whole cloud is still
  // in the daemon when it is killed, whatever the kernel's buffer sizes, and none is dropped:
  // the subscription's queue and the held budget take every cloud pushed, and a reader that
  // stops is never let go while the test runs.
  const uint64_t cloud_min = UINT64_C(490000) * 12;    // x y z at least, bytes
  const uint64_t rcvbuf = 64u << 10;
  uint64_t kernel = kernel_send_max() + 4 * rcvbuf;   // the receive side takes up to 2 rcvbuf
  int pushes = (int)(kernel / cloud_min) + 2;
  char queue[32];
  snprintf(queue, sizeof(queue), "%" PRIu64, (uint64_t)(pushes + 1) * UINT64_C(490000) * 32);
  char held[32];
  uint64_t held_max = (uint64_t)(pushes + 2) * UINT64_C(490000) * 64;   // the default at least
  snprintf(held, sizeof(held), "%" PRIu64, held_max > (256u << 20) ? held_max : 256u << 20);
  const char* const extra[] = {"--subscriber-max-bytes", queue, "--max-held-bytes", held,
                               "--subscriber-soft-seconds", "0", NULL};
  td_daemon_t d;
  ASSERT_OK(td_start(&d, extra));
  sensim_client_t* ctl = td_connect(&d, "killed_push");
  ASSERT_TRUE(ctl != NULL);
  ASSERT_OK_ST(ctl, big_lidar(ctl));
  sensim_options_t o;
  sensim_options_init(&o);
  o.environment = "killed_push";
  o.role = SENSIM_ROLE_OBSERVER;
  o.timeout_ms = TD_TIMEOUT_MS;
  sensim_client_t* obs = td_connect_opts(&d, &o);
  ASSERT_TRUE(obs != NULL);
  // before anything large comes: the buffer is then fixed (no autotuning)
  int size = (int)rcvbuf;
  ASSERT_EQ(setsockopt(sensim_client_fd(obs), SOL_SOCKET, SO_RCVBUF, &size, sizeof(size)), 0);
  int actual = 0;
  socklen_t len = sizeof(actual);
  ASSERT_EQ(getsockopt(sensim_client_fd(obs), SOL_SOCKET, SO_RCVBUF, &actual, &len), 0);
  ASSERT_TRUE((uint64_t)actual <= 2 * rcvbuf);
  sensim_subscription_t sub;
  sensim_subscription_init(&sub);
  sub.sensor_id = 9;
  ASSERT_OK_ST(obs, sensim_subscribe(obs, &sub));

  // the clouds; then the daemon dies while it holds (at least) the last one
  uint64_t a, b;
  const sensim_step_result_t* r;
  for (int k = 0; k < pushes; k++) {
    ASSERT_OK_ST(ctl, tick_send(ctl, 0.1 * k, &a, &b));
    ASSERT_OK_ST(ctl, sensim_wait(ctl, a, -1));
    ASSERT_OK_ST(ctl, sensim_step_wait(ctl, b, -1, &r));
  }
  ASSERT_OK(wait_held(&d, cloud_min, 0));
  td_kill(&d);

  // whole records come out decoded, in order, then the end; never all that were pushed
  int got = 0;
  sensim_status_t st;
  const sensim_sensor_data_t* dd;
  while ((st = sensim_next_sensor_data(obs, 10000, &dd)) == SENSIM_OK) {
    got++;
    ASSERT_EQ(dd->point_cloud.count, 490000);
    ASSERT_EQ(dd->sequence, (uint64_t)got);
  }
  if (!closed_status(st)) {
    CHECK_FAIL("after %d records: %s (%s)", got, sensim_status_name(st),
               sensim_client_last_error(obs));
  }
  ASSERT_TRUE(got < pushes);  // the last cloud, at least, was held in the daemon
  sensim_client_close(obs);
  sensim_client_close(ctl);
  return 0;
}


TEST(failures_timeout_on_a_frozen_daemon_closes_the_connection) {
  td_daemon_t d;
  ASSERT_OK(td_start(&d, NULL));
  sensim_options_t o;
  sensim_options_init(&o);
  o.environment = "frozen";
  o.timeout_ms = 300;
  sensim_client_t* cli = td_connect_opts(&d, &o);
  ASSERT_TRUE(cli != NULL);
  kill(d.pid, SIGSTOP);
  double t0 = td_now_ms();
  ASSERT_STATUS(cli, sensim_ping(cli, NULL, 0, NULL), SENSIM_ETIMEDOUT, "within 300 ms");
  double dt = td_now_ms() - t0;
  ASSERT_TRUE(dt >= 299.0 && dt < 5000.0);
  ASSERT_EQ(sensim_client_fd(cli), -1);
  ASSERT_STATUS(cli, sensim_ping(cli, NULL, 0, NULL), SENSIM_ETIMEDOUT, "within 300 ms");

  // a wait with its own timeout is not the handle's: EAGAIN, and the connection stays
  sensim_client_t* other = NULL;
  kill(d.pid, SIGCONT);
  other = td_connect_opts(&d, &o);
  ASSERT_TRUE(other != NULL);
  kill(d.pid, SIGSTOP);
  uint64_t id;
  sensim_state_t state;
  sensim_state_init(&state);
  ASSERT_OK_ST(other, sensim_update_state_send(other, &state, &id));
  ASSERT_STATUS(other, sensim_wait(other, id, 100), SENSIM_EAGAIN, NULL);
  kill(d.pid, SIGCONT);
  ASSERT_OK_ST(other, sensim_wait(other, id, 5000));
  sensim_client_close(other);
  sensim_client_close(cli);
  ASSERT_EQ(td_stop(&d), 0);
  return 0;
}

//---------------- A scripted peer

// What a scripted peer does after its Hello: answer the next request with `frame` (a frame's
// bytes, length prefix included) written `chunk` bytes at a time every `pause_ms`, or stop
// reading (`deaf`).
typedef struct script {
  const uint8_t* frame;
  size_t len;
  size_t chunk;
  int pause_ms;
  bool deaf;
  bool answer_id;                   // patch the request's id into frame[5..] (a 1-byte varint)
  uint64_t features;                // HelloReply.features
} script_t;


static void play(int fd, void* arg) {
  script_t* s = arg;
  if (td_peer_hello_features(fd, s->features) == 0) {
    return;
  }
  if (s->deaf) {
    sleep_ms(3000);
    return;
  }
  static uint8_t req[1 << 20];
  long n = td_read_frame(fd, req, sizeof(req));
  if (n <= 0) {
    return;
  }
  uint8_t* out = malloc(s->len);
  memcpy(out, s->frame, s->len);
  if (s->answer_id && n > 1) {
    out[5] = req[1];  // the request's id (ids below 128 are one byte)
  }
  for (size_t at = 0; at < s->len; at += s->chunk) {
    size_t k = s->len - at < s->chunk ? s->len - at : s->chunk;
    if (td_write_all(fd, out + at, k) != 0) {
      break;
    }
    if (s->pause_ms) {
      sleep_ms(s->pause_ms);
    }
  }
  free(out);
  sleep_ms(200);
}


// A reply frame of `len` bytes (len < 2^21): length, id = 2 (patched to the request's), then
// one unknown bytes field (9) of zeros filling the rest, which a decoder skips.
static uint8_t* reply_frame(size_t len) {
  uint8_t* f = calloc(1, len + 4);
  f[0] = (uint8_t)len;
  f[1] = (uint8_t)(len >> 8);
  f[2] = (uint8_t)(len >> 16);
  f[3] = (uint8_t)(len >> 24);
  f[4] = 0x08;  // Envelope.id
  f[5] = 0x02;
  f[6] = 9 << 3 | 2;
  size_t rest = len - 6;  // after the three bytes of its varint length
  f[7] = (uint8_t)(rest | 0x80);
  f[8] = (uint8_t)(rest >> 7 | 0x80);
  f[9] = (uint8_t)(rest >> 14);
  return f;
}


static sensim_client_t* connect_peer(td_peer_t* p, int timeout_ms, uint32_t max_frame) {
  sensim_options_t o;
  sensim_options_init(&o);
  o.timeout_ms = timeout_ms;
  if (max_frame) {
    o.max_frame_bytes = max_frame;
  }
  sensim_client_t* cli = NULL;
  sensim_status_t st = sensim_client_connect("127.0.0.1", (uint16_t)td_peer_port(p), &o, &cli);
  if (st != SENSIM_OK) {
    fprintf(stderr, "# connect to the peer: %s\n", sensim_client_last_error(cli));
    sensim_client_close(cli);
    return NULL;
  }
  return cli;
}


TEST(failures_timeout_covers_a_trickled_frame) {
  // a 100 kB reply written a byte every 5 ms: every read makes progress, the call must still
  // end at the handle's timeout (in memory: a ping; streamed: a raycast into its hits)
  uint8_t* frame = reply_frame(100000);
  for (int k = 0; k < 2; k++) {
    script_t s = {.frame = frame, .len = 100004, .chunk = 1, .pause_ms = 5, .answer_id = true};
    td_peer_t* p = td_peer_start(play, &s);
    ASSERT_TRUE(p != NULL);
    sensim_client_t* cli = connect_peer(p, 400, 0);
    ASSERT_TRUE(cli != NULL);
    double t0 = td_now_ms();
    sensim_status_t st;
    if (k == 0) {
      st = sensim_ping(cli, NULL, 0, NULL);
    } else {
      double o[3] = {0}, dvec[3] = {1, 0, 0};
      sensim_hit_t hit;
      sensim_raycast_t r;
      sensim_raycast_init(&r);
      r.nrays = 1;
      r.origins = o;
      r.directions = dvec;
      st = sensim_raycast(cli, &r, &hit, NULL);
    }
    double dt = td_now_ms() - t0;
    ASSERT_EQ(st, SENSIM_ETIMEDOUT);
    ASSERT_TRUE(dt >= 399.0 && dt < 3000.0);
    ASSERT_EQ(sensim_client_fd(cli), -1);
    sensim_client_close(cli);
    td_peer_stop(p);
  }
  free(frame);
  return 0;
}


TEST(failures_timeout_covers_a_peer_that_stops_reading) {
  script_t s = {.deaf = true};
  td_peer_t* p = td_peer_start(play, &s);
  ASSERT_TRUE(p != NULL);
  sensim_client_t* cli = connect_peer(p, 500, 0);
  ASSERT_TRUE(cli != NULL);

  // 1.2M rays, 58 MB: more than the socket buffers take from a sender nobody reads
  uint32_t n = 1200000;
  double* zeros = calloc(3 * (size_t)n, sizeof(double));
  sensim_hit_t* hits = malloc(sizeof(sensim_hit_t) * n);
  ASSERT_TRUE(zeros && hits);
  sensim_raycast_t r;
  sensim_raycast_init(&r);
  r.nrays = n;
  r.origins = r.directions = zeros;
  uint64_t id;
  double t0 = td_now_ms();
  ASSERT_STATUS(cli, sensim_raycast_send(cli, &r, hits, &id), SENSIM_ETIMEDOUT, "sending");
  ASSERT_TRUE(td_now_ms() - t0 < 3000.0);
  ASSERT_EQ(sensim_client_fd(cli), -1);
  free(zeros);
  free(hits);
  sensim_client_close(cli);
  td_peer_stop(p);
  return 0;
}


// A pushed frame: Envelope{sequence 1, sensor_data{sensor 5, point_cloud{...}}} built from
// the cloud message bytes.
static void pushed(td_pb_t* env, const td_pb_t* cloud) {
  td_pb_t data = {.len = 0};
  td_pb_uint(&data, 1, 5);
  td_pb_double(&data, 2, 0.1);
  td_pb_bytes(&data, 10, cloud->buf, cloud->len);
  env->len = 0;
  td_pb_uint(env, 3, 1);
  td_pb_bytes(env, 52, data.buf, data.len);
}


// A point field message.
static void field(td_pb_t* cloud, const char* name, uint32_t offset, uint32_t datatype) {
  td_pb_t f = {.len = 0};
  td_pb_bytes(&f, 1, name, strlen(name));
  td_pb_uint(&f, 2, offset);
  td_pb_uint(&f, 3, datatype);
  td_pb_uint(&f, 4, 1);
  td_pb_bytes(cloud, 1, f.buf, f.len);
}


// A cloud of n points of x y z float32 (12 bytes) with its data in the given encoding.
static void cloud_msg(td_pb_t* c, uint32_t n, uint32_t step, uint32_t encoding, const void* data,
                      size_t len) {
  c->len = 0;
  field(c, "x", 0, 7);
  field(c, "y", 4, 7);
  field(c, "z", 8, 7);
  td_pb_uint(c, 2, step);
  td_pb_uint(c, 3, n);
  td_pb_uint(c, 4, encoding);
  td_pb_bytes(c, 5, data, len);
}


// Frames a scripted peer pushes right after the Hello, one connection per case.
typedef struct push_script {
  uint8_t frame[1 << 16];
  size_t len;
} push_script_t;


static void play_push(int fd, void* arg) {
  push_script_t* s = arg;
  if (td_peer_hello(fd) != 0) {
    td_write_all(fd, s->frame, s->len);
  }
  sleep_ms(500);
}


static void set_push(push_script_t* s, const td_pb_t* env) {
  s->frame[0] = (uint8_t)env->len;
  s->frame[1] = (uint8_t)(env->len >> 8);
  s->frame[2] = (uint8_t)(env->len >> 16);
  s->frame[3] = (uint8_t)(env->len >> 24);
  memcpy(s->frame + 4, env->buf, env->len);
  s->len = env->len + 4;
}


// Connect to a peer pushing s and return the next record's status; *cloud_status the
// decoder's on what came (SENSIM_OK when nothing to decode).
static sensim_status_t receive(push_script_t* s, uint32_t max_frame, sensim_status_t* cloud_status,
                               char* err, size_t cap) {
  td_peer_t* p = td_peer_start(play_push, s);
  sensim_client_t* cli = p ? connect_peer(p, 5000, max_frame) : NULL;
  *cloud_status = SENSIM_OK;
  if (!cli) {
    td_peer_stop(p);
    return SENSIM_ECONNECT;
  }
  const sensim_sensor_data_t* d = NULL;
  sensim_status_t st = sensim_next_sensor_data(cli, 5000, &d);
  if (st == SENSIM_OK && d->kind == SENSIM_PAYLOAD_POINT_CLOUD) {
    // decode into a buffer of exactly the stated size (ASan sees any write past it)
    size_t want = (size_t)d->point_cloud.count * d->point_cloud.point_step;
    void* out = want < (64u << 20) ? malloc(want ? want : 1) : NULL;
    *cloud_status = sensim_point_cloud_read(&d->point_cloud, out, out ? want : 0);
    free(out);
  }
  snprintf(err, cap, "%s", sensim_client_last_error(cli));
  sensim_client_close(cli);
  td_peer_stop(p);
  return st;
}


TEST(failures_hostile_pushed_records_are_refused) {
  static push_script_t s;
  td_pb_t c, env;
  char err[700];
  sensim_status_t cs;

  // a raw cloud whose bytes are not count x point_step: refused on arrival, connection closed
  uint8_t raw[1000];
  memset(raw, 0x3f, sizeof(raw));
  cloud_msg(&c, 10, 12, 0, raw, 100);
  pushed(&env, &c);
  set_push(&s, &env);
  ASSERT_EQ(receive(&s, 0, &cs, err, sizeof(err)), SENSIM_EPROTO);
  ASSERT_CONTAINS(err, "raw cloud");

  // a field outside the point
  c.len = 0;
  field(&c, "x", 10, 8);  // 8 bytes at 10 in a point of 12
  td_pb_uint(&c, 2, 12);
  td_pb_uint(&c, 3, 10);
  td_pb_bytes(&c, 5, raw, 120);
  pushed(&env, &c);
  set_push(&s, &env);
  ASSERT_EQ(receive(&s, 0, &cs, err, sizeof(err)), SENSIM_EPROTO);
  ASSERT_CONTAINS(err, "does not fit");

  // height x width is not the count
  cloud_msg(&c, 10, 12, 0, raw, 120);
  td_pb_uint(&c, 11, 3);
  td_pb_uint(&c, 12, 3);
  pushed(&env, &c);
  set_push(&s, &env);
  ASSERT_EQ(receive(&s, 0, &cs, err, sizeof(err)), SENSIM_EPROTO);
  ASSERT_CONTAINS(err, "3 x 3");

  // the well-formed raw cloud goes through: the same cloud with the right size
  cloud_msg(&c, 10, 12, 0, raw, 120);
  pushed(&env, &c);
  set_push(&s, &env);
  ASSERT_EQ(receive(&s, 0, &cs, err, sizeof(err)), SENSIM_OK);
  ASSERT_EQ(cs, SENSIM_OK);

  // zstd bodies: truncated, larger than the cloud, garbage: the record arrives, its decoding
  // is refused (the connection is fine)
  uint8_t z[4096];
  size_t zn = ZSTD_compress(z, sizeof(z), raw, 120, 1);
  ASSERT_TRUE(!ZSTD_isError(zn) && zn > 12);
  cloud_msg(&c, 10, 12, 1, z, zn - 6);
  pushed(&env, &c);
  set_push(&s, &env);
  ASSERT_EQ(receive(&s, 0, &cs, err, sizeof(err)), SENSIM_OK);
  ASSERT_EQ(cs, SENSIM_EPROTO);
  zn = ZSTD_compress(z, sizeof(z), raw, 240, 1);
  cloud_msg(&c, 10, 12, 1, z, zn);  // 240 bytes for a cloud of 120
  pushed(&env, &c);
  set_push(&s, &env);
  ASSERT_EQ(receive(&s, 0, &cs, err, sizeof(err)), SENSIM_OK);
  ASSERT_EQ(cs, SENSIM_EPROTO);
  cloud_msg(&c, 10, 12, 1, raw, 60);
  pushed(&env, &c);
  set_push(&s, &env);
  ASSERT_EQ(receive(&s, 0, &cs, err, sizeof(err)), SENSIM_OK);
  ASSERT_EQ(cs, SENSIM_EPROTO);

  // quantized: a header for another cloud, a truncated one, a body that lies about its size
  uint8_t q[200];
  memset(q, 0, sizeof(q));
  memcpy(q, "SQZ2", 4);
  q[4] = 11;  // n = 11 for a cloud of 10
  q[8] = 12;
  cloud_msg(&c, 10, 12, 2, q, 100);
  pushed(&env, &c);
  set_push(&s, &env);
  ASSERT_EQ(receive(&s, 0, &cs, err, sizeof(err)), SENSIM_OK);
  ASSERT_EQ(cs, SENSIM_EPROTO);
  q[4] = 10;
  cloud_msg(&c, 10, 12, 2, q, 30);
  pushed(&env, &c);
  set_push(&s, &env);
  ASSERT_EQ(receive(&s, 0, &cs, err, sizeof(err)), SENSIM_OK);
  ASSERT_EQ(cs, SENSIM_EPROTO);
  q[12] = 1;                                         // stride
  q[16] = 0, q[20] = 4, q[24] = 8;                   // x y z offsets
  q[39] = 0x3f, q[38] = 0xf0;                        // range_step 1.0
  q[47] = 0x3f, q[46] = 0xf0;                        // angle_step 1.0
  zn = ZSTD_compress(q + 56, 100, raw, 30, 1);       // 30 bytes: fewer than the header needs
  cloud_msg(&c, 10, 12, 2, q, 56 + zn);
  pushed(&env, &c);
  set_push(&s, &env);
  ASSERT_EQ(receive(&s, 0, &cs, err, sizeof(err)), SENSIM_OK);
  ASSERT_EQ(cs, SENSIM_EPROTO);

  // sizes that overflow: 2^32 - 1 points of 2^32 - 1 bytes (no buffer can take them)
  c.len = 0;
  td_pb_uint(&c, 2, 0xffffffffu);
  td_pb_uint(&c, 3, 0xffffffffu);
  td_pb_uint(&c, 4, 1);
  td_pb_bytes(&c, 5, z, 8);
  td_pb_uint(&c, 11, 1);
  td_pb_uint(&c, 12, 0xffffffffu);
  pushed(&env, &c);
  set_push(&s, &env);
  ASSERT_EQ(receive(&s, 0, &cs, err, sizeof(err)), SENSIM_OK);
  ASSERT_EQ(cs, SENSIM_INVALID_ARGUMENT);
  return 0;
}


TEST(failures_malformed_frames_close_the_connection) {
  static push_script_t s;
  td_pb_t c, env;
  char err[700];
  sensim_status_t cs;

  // a bytes field longer than its frame
  env.len = 0;
  td_pb_uint(&env, 3, 1);
  td_pb_key(&env, 52, 2);
  td_pb_varint(&env, 1000);
  td_pb_uint(&env, 1, 5);
  set_push(&s, &env);
  ASSERT_EQ(receive(&s, 0, &cs, err, sizeof(err)), SENSIM_EPROTO);
  ASSERT_CONTAINS(err, "Envelope");

  // an IMU sample with more values than three sub-sensors have
  td_pb_t imu = {.len = 0};
  td_pb_key(&imu, 4, 2);
  td_pb_varint(&imu, 80);
  for (int i = 0; i < 10; i++) {
    double v = i;
    memcpy(imu.buf + imu.len, &v, 8);
    imu.len += 8;
  }
  td_pb_t data = {.len = 0};
  td_pb_uint(&data, 1, 5);
  td_pb_bytes(&data, 11, imu.buf, imu.len);
  env.len = 0;
  td_pb_bytes(&env, 52, data.buf, data.len);
  set_push(&s, &env);
  ASSERT_EQ(receive(&s, 0, &cs, err, sizeof(err)), SENSIM_EPROTO);
  ASSERT_CONTAINS(err, "imu.values");

  // a frame over the client's max_frame_bytes, and an empty frame
  uint8_t raw[120] = {0};
  cloud_msg(&c, 10, 12, 0, raw, 120);
  pushed(&env, &c);
  set_push(&s, &env);
  ASSERT_EQ(receive(&s, 1024, &cs, err, sizeof(err)), SENSIM_OK);
  for (size_t i = 0; i < 4000; i++) {
    td_pb_uint(&c, 15, 1);  // an unknown field, to grow the frame
  }
  pushed(&env, &c);
  set_push(&s, &env);
  ASSERT_EQ(receive(&s, 1024, &cs, err, sizeof(err)), SENSIM_EPROTO);
  ASSERT_CONTAINS(err, "max_frame_bytes 1024");
  memset(s.frame, 0, 4);
  s.len = 4;
  ASSERT_EQ(receive(&s, 0, &cs, err, sizeof(err)), SENSIM_EPROTO);

  // the daemon refusing the connection: an id-0 status, its code and message
  td_pb_t st = {.len = 0};
  td_pb_uint(&st, 1, 8);
  td_pb_bytes(&st, 2, "too many clients (max_clients 1)", 32);
  env.len = 0;
  td_pb_bytes(&env, 2, st.buf, st.len);
  set_push(&s, &env);
  ASSERT_EQ(receive(&s, 0, &cs, err, sizeof(err)), SENSIM_RESOURCE_EXHAUSTED);
  ASSERT_CONTAINS(err, "max_clients 1");
  return 0;
}


TEST(failures_hostile_replies_are_refused) {
  // a raycast answered with hits for 2 rays when 3 were sent: nothing written past the buffer
  td_pb_t res = {.len = 0}, env = {.len = 0};
  uint8_t hits96[96] = {0};
  td_pb_bytes(&res, 5, hits96, sizeof(hits96));
  td_pb_uint(&env, 1, 2);
  td_pb_bytes(&env, 44, res.buf, res.len);
  uint8_t frame[4 + 200];
  frame[0] = (uint8_t)env.len;
  frame[1] = frame[2] = frame[3] = 0;
  memcpy(frame + 4, env.buf, env.len);
  script_t s = {.frame = frame, .len = env.len + 4, .chunk = env.len + 4, .answer_id = true};
  td_peer_t* p = td_peer_start(play, &s);
  ASSERT_TRUE(p != NULL);
  sensim_client_t* cli = connect_peer(p, 5000, 0);
  ASSERT_TRUE(cli != NULL);
  double o[9] = {0}, dir[9] = {1, 0, 0, 1, 0, 0, 1, 0, 0};
  sensim_hit_t* hits = malloc(3 * sizeof(sensim_hit_t));
  sensim_raycast_t r;
  sensim_raycast_init(&r);
  r.nrays = 3;
  r.origins = o;
  r.directions = dir;
  ASSERT_STATUS(cli, sensim_raycast(cli, &r, hits, NULL), SENSIM_EPROTO, "96 bytes of hits_bytes");
  free(hits);
  sensim_client_close(cli);
  td_peer_stop(p);

  // a step whose reply says a record came ahead when none did
  td_pb_t done = {.len = 0};
  td_pb_double(&done, 1, 0.0);
  td_pb_uint(&done, 2, 1);
  td_pb_uint(&done, 4, 1);
  env.len = 0;
  td_pb_uint(&env, 1, 2);
  td_pb_bytes(&env, 42, done.buf, done.len);
  frame[0] = (uint8_t)env.len;
  memcpy(frame + 4, env.buf, env.len);
  s.len = s.chunk = env.len + 4;
  p = td_peer_start(play, &s);
  ASSERT_TRUE(p != NULL);
  cli = connect_peer(p, 5000, 0);
  ASSERT_TRUE(cli != NULL);
  sensim_step_t step;
  sensim_step_init(&step);
  const sensim_step_result_t* res2;
  ASSERT_STATUS(cli, sensim_step(cli, &step, &res2), SENSIM_EPROTO, "came ahead");
  sensim_client_close(cli);
  td_peer_stop(p);

  // a raycast answered with another body (an Info, whose callbacks must not see the
  // raycast's context): refused, the hits untouched
  env.len = 0;
  td_pb_uint(&env, 1, 2);
  td_pb_t info = {.len = 0};
  td_pb_bytes(&info, 7, "\x0a\x03env", 5);  // Info.environments[0].name
  td_pb_bytes(&env, 15, info.buf, info.len);
  frame[0] = (uint8_t)env.len;
  memcpy(frame + 4, env.buf, env.len);
  s.len = s.chunk = env.len + 4;
  p = td_peer_start(play, &s);
  ASSERT_TRUE(p != NULL);
  cli = connect_peer(p, 5000, 0);
  ASSERT_TRUE(cli != NULL);
  sensim_hit_t one;
  memset(&one, 0x5a, sizeof(one));
  r.nrays = 1;
  ASSERT_STATUS(cli, sensim_raycast(cli, &r, &one, NULL), SENSIM_EPROTO, "not a raycast_result");
  ASSERT_EQ(one.object_id, 0x5a5a5a5au);
  sensim_client_close(cli);
  td_peer_stop(p);

  // a ping answered with another body
  env.len = 0;
  td_pb_uint(&env, 1, 2);
  td_pb_bytes(&env, 15, "", 0);
  frame[0] = (uint8_t)env.len;
  memcpy(frame + 4, env.buf, env.len);
  s.len = s.chunk = env.len + 4;
  p = td_peer_start(play, &s);
  ASSERT_TRUE(p != NULL);
  cli = connect_peer(p, 5000, 0);
  ASSERT_TRUE(cli != NULL);
  ASSERT_STATUS(cli, sensim_ping(cli, NULL, 0, NULL), SENSIM_EPROTO, "expected");
  sensim_client_close(cli);
  td_peer_stop(p);
  return 0;
}


// A peer that answers a Step with `nparts` records sent ahead (Envelope{id, sensor_data} of
// `part_bytes` bytes each), then the StepDone saying so; it stops when the client hangs up.
typedef struct parts_script {
  uint32_t nparts;
  size_t part_bytes;                // 5, or 2^14 + 13 .. 2^21 (3-byte length varints)
  uint32_t sent;                    // parts written before the client closed
} parts_script_t;


static void put_varint3(uint8_t* p, size_t v) {
  p[0] = (uint8_t)(v | 0x80);
  p[1] = (uint8_t)(v >> 7 | 0x80);
  p[2] = (uint8_t)(v >> 14);
}


static void play_parts(int fd, void* arg) {
  parts_script_t* s = arg;
  static uint8_t req[1 << 16];
  if (td_peer_hello(fd) == 0 || td_read_frame(fd, req, sizeof(req)) <= 1) {
    return;
  }
  uint8_t id = req[1];  // the step's id (below 128: one byte)
  size_t len = s->part_bytes;
  uint8_t* f = calloc(1, 4 + len);
  f[0] = (uint8_t)len;
  f[1] = (uint8_t)(len >> 8);
  f[2] = (uint8_t)(len >> 16);
  uint8_t head[] = {0x08, id, 0xa2, 0x03};  // Envelope.id, then sensor_data (52), length:
  memcpy(f + 4, head, sizeof(head));
  if (len == 5) {
    f[8] = 0;  // an empty SensorData
  } else {
    // SensorData{sensor_id 1, an unknown bytes field 15 filling the rest}
    put_varint3(f + 8, len - 7);
    f[11] = 0x08;
    f[12] = 0x01;
    f[13] = 15 << 3 | 2;
    put_varint3(f + 14, len - 13);
  }
  s->sent = 0;
  while (s->sent < s->nparts && td_write_all(fd, f, 4 + len) == 0) {
    s->sent++;
  }
  free(f);
  if (s->sent == s->nparts) {
    td_pb_t done = {.len = 0}, env = {.len = 0};
    td_pb_double(&done, 1, 0.1);
    td_pb_uint(&done, 2, 1);
    td_pb_uint(&done, 4, s->nparts);
    td_pb_uint(&env, 1, id);
    td_pb_bytes(&env, 42, done.buf, done.len);
    td_pb_send(fd, &env);
  }
  sleep_ms(200);
}


// Step against a parts_script_t peer; the status, *nout the records of an accepted step.
static sensim_status_t step_parts(parts_script_t* s, uint32_t* nout, char* err, size_t cap) {
  td_peer_t* p = td_peer_start(play_parts, s);
  sensim_client_t* cli = p ? connect_peer(p, 20000, 0) : NULL;
  if (!cli) {
    td_peer_stop(p);
    return SENSIM_ECONNECT;
  }
  sensim_step_t step;
  sensim_step_init(&step);
  const sensim_step_result_t* res = NULL;
  sensim_status_t st = sensim_step(cli, &step, &res);
  *nout = st == SENSIM_OK ? res->noutputs : 0;
  snprintf(err, cap, "%s", sensim_client_last_error(cli));
  if (st != SENSIM_OK && sensim_client_fd(cli) != -1) {
    snprintf(err, cap, "the connection is open after %d", (int)st);
    st = SENSIM_EUNKNOWN;
  }
  sensim_client_close(cli);
  td_peer_stop(p);
  return st;
}


TEST(failures_step_parts_are_bounded) {
  // a peer that sends records ahead of a StepDone without end: the client keeps at most
  // SENSIM_STEP_MAX_PARTS frames of at most SENSIM_STEP_MAX_PART_BYTES together, then refuses
  // the reply naming the limit and closes the connection; at the limits the step is whole
  static parts_script_t s;
  char err[700];
  uint32_t n;
  s = (parts_script_t){.nparts = SENSIM_STEP_MAX_PARTS, .part_bytes = 5};
  ASSERT_EQ(step_parts(&s, &n, err, sizeof(err)), SENSIM_OK);
  ASSERT_EQ(n, SENSIM_STEP_MAX_PARTS);
  s = (parts_script_t){.nparts = SENSIM_STEP_MAX_PARTS + 1000, .part_bytes = 5};
  ASSERT_EQ(step_parts(&s, &n, err, sizeof(err)), SENSIM_EPROTO);
  ASSERT_CONTAINS(err, "SENSIM_STEP_MAX_PARTS = 65536");

  // bytes: 256 records of 1 MiB are the limit
  size_t mib = 1u << 20;
  ASSERT_EQ(SENSIM_STEP_MAX_PART_BYTES % mib, 0);
  s = (parts_script_t){.nparts = (uint32_t)(SENSIM_STEP_MAX_PART_BYTES / mib), .part_bytes = mib};
  ASSERT_EQ(step_parts(&s, &n, err, sizeof(err)), SENSIM_OK);
  ASSERT_EQ(n, s.nparts);
  s.nparts += 1000;
  ASSERT_EQ(step_parts(&s, &n, err, sizeof(err)), SENSIM_EPROTO);
  ASSERT_CONTAINS(err, "SENSIM_STEP_MAX_PART_BYTES = 268435456");
  ASSERT_TRUE(s.sent < s.nparts);  // the client stopped reading: the peer could not go on
  return 0;
}


// The frame of a RaycastResult {hit_mask (when mask_len > 0 or with_mask), hits_bytes of
// nrec_bytes bytes: records by hand (distance 1.5 + i, normal 0 -0 -1, object_id 100 + i, label
// 7 i for the i-th)} into frame (its length prefix first); returns the frame's length.
static size_t masked_reply(uint8_t* frame, const uint8_t* mask, size_t mask_len, bool with_mask,
                           size_t nrec_bytes) {
  static td_pb_t res, env;
  static uint8_t recs[4096];
  res.len = env.len = 0;
  for (size_t k = 0; k * 40 < nrec_bytes && k * 40 + 40 <= sizeof(recs); k++) {
    double v[4] = {1.5 + (double)k, 0.0, -0.0, -1.0};
    uint32_t ids[2] = {100 + (uint32_t)k, 7 * (uint32_t)k};
    memcpy(recs + 40 * k, v, 32);
    memcpy(recs + 40 * k + 32, ids, 8);
  }
  td_pb_uint(&res, 7, 1);                       // world_serial
  if (with_mask) {
    td_pb_bytes(&res, 8, mask, mask_len);       // hit_mask
  }
  td_pb_bytes(&res, 5, recs, nrec_bytes);       // hits_bytes
  td_pb_uint(&env, 1, 2);                       // patched to the request's id
  td_pb_bytes(&env, 44, res.buf, res.len);      // raycast_result
  uint32_t len = (uint32_t)env.len;
  memcpy(frame, &len, 4);
  memcpy(frame + 4, env.buf, env.len);
  return env.len + 4;
}


// A raycast of 13 rays from a daemon that answers with hit_mask, its reply `frame`: the status
// and the client's error (an EPROTO must have closed the connection); the hits (exactly 13
// records: ASan sees a write past them) in *out.
static sensim_status_t masked_raycast(const uint8_t* frame, size_t len, sensim_hit_t out[13],
                                      char* err, size_t cap) {
  script_t s = {.frame = frame, .len = len, .chunk = len, .answer_id = true,
                .features = SENSIM_FEATURE_RAYCAST_HIT_MASK};
  td_peer_t* p = td_peer_start(play, &s);
  sensim_client_t* cli = p ? connect_peer(p, 5000, 0) : NULL;
  if (!cli) {
    td_peer_stop(p);
    snprintf(err, cap, "no peer");
    return SENSIM_EIO;
  }
  double o[39] = {0}, dir[39];
  for (int i = 0; i < 39; i++) {
    dir[i] = 1.0;
  }
  sensim_hit_t* hits = malloc(13 * sizeof(sensim_hit_t));
  memset(hits, 0x5a, 13 * sizeof(sensim_hit_t));
  sensim_raycast_t r;
  sensim_raycast_init(&r);
  r.nrays = 13;
  r.origins = o;
  r.directions = dir;
  sensim_status_t st = sensim_raycast(cli, &r, hits, NULL);
  snprintf(err, cap, "%s", sensim_client_last_error(cli));
  if (st == SENSIM_EPROTO && sensim_client_fd(cli) >= 0) {
    snprintf(err, cap, "EPROTO with the connection left open");  // as every EPROTO closes it
  }
  memcpy(out, hits, 13 * sizeof(sensim_hit_t));
  free(hits);
  sensim_client_close(cli);
  td_peer_stop(p);
  return st;
}


TEST(failures_hostile_hit_masks_are_refused) {
  // a reply to omit_misses (13 rays: a 2-byte mask) is spread over the caller's 13 records
  // only when it is whole: never a byte read or written past them
  static uint8_t frame[8192];
  sensim_hit_t hits[13];
  char err[512];
  static const struct {
    uint8_t mask[3];
    size_t mask_len;
    bool with_mask;
    size_t rec_bytes;
    const char* want;
  } bad[] = {
      {{0x01}, 1, true, 40, "hit_mask has 1 bytes for 13 rays, expected 2"},
      {{0x01, 0, 0}, 3, true, 40, "hit_mask has 3 bytes for 13 rays, expected 2"},
      {{0x07, 0x00}, 2, true, 80, "hit_mask sets another number of bits"},
      {{0x03, 0x00}, 2, true, 120, "hit_mask sets another number of bits"},
      {{0xff, 0x1f}, 2, true, 14 * 40, "560 bytes of hits_bytes for 13 rays"},   // one too many
      {{0xff, 0x1f}, 2, true, 16 * 40, "640 bytes of hits_bytes for 13 rays"},   // past the buffer
      {{0x01, 0x00}, 2, true, 41, "41 bytes of hits_bytes for 13 rays"},
      {{0x00, 0x20}, 2, true, 40, "hit_mask sets bits past the last ray"},
      {{0}, 0, false, 0, "the reply has no hit_mask"},
  };
  for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
    size_t len = masked_reply(frame, bad[k].mask, bad[k].mask_len, bad[k].with_mask,
                              bad[k].rec_bytes);
    ASSERT_EQ(masked_raycast(frame, len, hits, err, sizeof(err)), SENSIM_EPROTO);
    if (!td_names(err, bad[k].want)) {
      CHECK_FAIL("case %zu: \"%s\", expected \"%s\"", k, err, bad[k].want);
    }
  }

  // a whole one: hits at rays 0, 7, 8 and 12, the others misses (+inf, the rest 0)
  static const uint8_t mask[2] = {0x81, 0x11};
  size_t len = masked_reply(frame, mask, 2, true, 4 * 40);
  ASSERT_EQ(masked_raycast(frame, len, hits, err, sizeof(err)), SENSIM_OK);
  static const int at[4] = {0, 7, 8, 12};
  for (int i = 0, k = 0; i < 13; i++) {
    if (k < 4 && at[k] == i) {
      double d[4] = {1.5 + k, 0.0, -0.0, -1.0};
      ASSERT_TRUE(memcmp(&hits[i].distance, d, 8) == 0 && memcmp(hits[i].normal, d + 1, 24) == 0);
      ASSERT_EQ(hits[i].object_id, 100u + (uint32_t)k);
      ASSERT_EQ(hits[i].label, 7u * (uint32_t)k);
      k++;
    } else {
      ASSERT_TRUE(isinf(hits[i].distance) && hits[i].distance > 0);
      static const double zero[3];
      ASSERT_TRUE(memcmp(hits[i].normal, zero, sizeof(zero)) == 0);
      ASSERT_EQ(hits[i].object_id, 0u);
      ASSERT_EQ(hits[i].label, 0u);
    }
    ASSERT_EQ(hits[i].reserved[0], 0u);
    ASSERT_EQ(hits[i].reserved[1], 0u);
  }
  return 0;
}


// A reply to the next request carrying status `code` alone, with `message` (short: the frame
// is under 128 bytes).
static size_t status_reply(uint8_t* frame, int64_t code, const char* message) {
  td_pb_t st = {.len = 0}, env = {.len = 0};
  td_pb_uint(&st, 1, (uint64_t)code);
  td_pb_bytes(&st, 2, message, strlen(message));
  td_pb_uint(&env, 1, 2);  // patched to the request's id
  td_pb_bytes(&env, 2, st.buf, st.len);
  frame[0] = (uint8_t)env.len;
  frame[1] = frame[2] = frame[3] = 0;
  memcpy(frame + 4, env.buf, env.len);
  return env.len + 4;
}


TEST(failures_every_daemon_status_reads_as_its_own) {
  // the daemon's codes as they are; any other code, the client's own range included, is
  // EUNKNOWN with its number in the message, on a reply decoded in memory (ping) and on one
  // streamed into the caller's hits (raycast); the connection stays open
  static const struct {
    int64_t code;
    sensim_status_t want;
    const char* text;
  } k[] = {{4, SENSIM_DEADLINE_EXCEEDED, "the message"},
           {16, SENSIM_UNAUTHENTICATED, "the message"},
           {101, SENSIM_EUNKNOWN, "status 101 (unknown to this client): the message"},
           {104, SENSIM_EUNKNOWN, "status 104 (unknown"},
           {106, SENSIM_EUNKNOWN, "status 106 (unknown"},
           {107, SENSIM_EUNKNOWN, "status 107 (unknown"},
           {7, SENSIM_EUNKNOWN, "status 7 (unknown"},
           {100, SENSIM_EUNKNOWN, "status 100 (unknown"},
           {0x7fffffff, SENSIM_EUNKNOWN, "status 2147483647 (unknown"}};
  uint8_t frame[200];
  for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++) {
    for (int raycast = 0; raycast < 2; raycast++) {
      size_t len = status_reply(frame, k[i].code, "the message");
      script_t s = {.frame = frame, .len = len, .chunk = len, .answer_id = true};
      td_peer_t* p = td_peer_start(play, &s);
      ASSERT_TRUE(p != NULL);
      sensim_client_t* cli = connect_peer(p, 5000, 0);
      ASSERT_TRUE(cli != NULL);
      if (raycast) {
        double o[3] = {0}, dir[3] = {1, 0, 0};
        sensim_hit_t hit;
        sensim_raycast_t r;
        sensim_raycast_init(&r);
        r.nrays = 1;
        r.origins = o;
        r.directions = dir;
        ASSERT_STATUS(cli, sensim_raycast(cli, &r, &hit, NULL), k[i].want, k[i].text);
      } else {
        ASSERT_STATUS(cli, sensim_ping(cli, NULL, 0, NULL), k[i].want, k[i].text);
      }
      ASSERT_TRUE(sensim_client_fd(cli) >= 0);
      sensim_client_close(cli);
      td_peer_stop(p);
    }
  }

  // the daemon refusing the connection with a code of the client's range: not an EPROTO
  static push_script_t ps;
  td_pb_t st = {.len = 0}, env = {.len = 0};
  char err[700];
  sensim_status_t cs;
  td_pb_uint(&st, 1, 104);
  td_pb_bytes(&st, 2, "refused", 7);
  td_pb_bytes(&env, 2, st.buf, st.len);
  set_push(&ps, &env);
  ASSERT_EQ(receive(&ps, 0, &cs, err, sizeof(err)), SENSIM_EUNKNOWN);
  ASSERT_CONTAINS(err, "status 104 (unknown to this client): refused");
  return 0;
}


// A daemon answering every Describe with the same page of sensors 1 and 2 and "more to come",
// for at most `pages` requests, then closing.
typedef struct describe_script {
  int pages;
  int asked;
} describe_script_t;

static void describe_again(int fd, void* arg) {
  describe_script_t* ds = arg;
  if (td_peer_hello(fd) == 0) {
    return;
  }
  static uint8_t req[1 << 16];
  for (ds->asked = 0; ds->asked < ds->pages; ds->asked++) {
    long n = td_read_frame(fd, req, sizeof(req));
    if (n <= 0) {
      return;
    }
    td_pb_t sensor = {.len = 0}, desc = {.len = 0}, env = {.len = 0};
    for (uint32_t id = 1; id <= 2; id++) {
      sensor.len = 0;
      td_pb_uint(&sensor, 1, id);                 // SensorDescription.id
      td_pb_bytes(&desc, 4, sensor.buf, sensor.len);  // Description.sensors
    }
    td_pb_uint(&desc, 6, 2);                      // Description.sensor_count
    td_pb_uint(&desc, 8, 1);                      // Description.more_sensors
    td_pb_uint(&env, 1, td_frame_id(req, n));     // Envelope.id
    td_pb_bytes(&env, 17, desc.buf, desc.len);    // Envelope.description
    if (td_pb_send(fd, &env) != 0) {
      return;
    }
  }
}


TEST(failures_describe_pages_that_do_not_move_on_are_a_protocol_error) {
  // sensim_describe asked for a next page while the last one added sensors: a daemon sending
  // the same sensors again with more_sensors set was asked forever, the description growing
  // (here the peer gave up after 2000 pages). Ids must increase above the last one received.
  static describe_script_t ds = {.pages = 2000};
  td_peer_t* p = td_peer_start(describe_again, &ds);
  ASSERT_TRUE(p != NULL);
  sensim_options_t o;
  sensim_options_init(&o);
  o.timeout_ms = 10000;
  sensim_client_t* cli = NULL;
  ASSERT_EQ(sensim_client_connect("127.0.0.1", (uint16_t)td_peer_port(p), &o, &cli), SENSIM_OK);
  const sensim_description_t* desc = NULL;
  ASSERT_STATUS(cli, sensim_describe(cli, &desc), SENSIM_EPROTO, "increasing id order");
  ASSERT_TRUE(desc == NULL);
  ASSERT_EQ(sensim_client_fd(cli), -1);
  sensim_client_close(cli);
  td_peer_stop(p);
  ASSERT_EQ(ds.asked, 2);  // the second page was refused
  return 0;
}
