// SPDX-License-Identifier: MIT
// test_server.c: the TCP transport on loopback, driven by libuv clients in the same loop:
// framing across reads, outgoing headers, stream errors, pause/resume, the output cap,
// reading stopped by replies the peer does not take (plain or shared frames, each counted at
// the memory it holds), turns between connections, memory given back, retained sessions and
// shutdown with sessions open.
#include "net/server.h"

#include <uv.h>

#include "base/blob.h"
#include "base/log.h"
#include "base/mem.h"
#include "check.h"
#include "net/frame.h"
#include "net/session.h"

#define MAX_SESSIONS 8
#define MAX_CLIENTS 4

// libuv allocates through mem_* as in the daemon, so that mem_live_count covers its memory.
__attribute__((constructor)) static void use_mem_allocator(void) {
  uv_replace_allocator(mem_alloc, mem_realloc, mem_calloc, mem_free);
  log_set_level(LOG_LEVEL_ERROR);
}

typedef struct tctx tctx_t;

//---------------- client side (libuv, same loop)

typedef struct client {
  uv_tcp_t tcp;
  uv_connect_t connect;
  tctx_t* t;
  buf_t in;                      // every byte received
  int read;                      // start reading once connected
  int connected;
  int eof;
  int read_error;                // libuv code of a read error other than EOF
  int write_error;
  int closing;
  void (*on_connect)(struct client* c);
  void (*on_end)(struct client* c);   // EOF or read error
} client_t;

typedef struct client_write {
  uv_write_t req;
  uint8_t data[];
} client_write_t;

//---------------- server side

struct tctx {
  int64_t live;                  // allocations before tctx_init
  uv_loop_t loop;
  server_t* srv;
  uv_timer_t timer;
  void (*on_timer)(tctx_t* t);
  uint64_t poll_ms;              // on_timer polls every poll_ms from a client's connection on
  client_t clients[MAX_CLIENTS];
  int nclients;
  int shut;

  session_t* sessions[MAX_SESSIONS];
  int opens;
  int closes;
  int close_count[MAX_SESSIONS];

  int nframes;
  int count_only;                // count frames (and call frame_cb) without recording them
  buf_t frames;                  // payloads of every frame, concatenated
  size_t frame_len[4096];

  int stream_errors;
  int stream_error_code;
  char stream_error_msg[512];

  int refused;                   // on_send_refused calls
  size_t refused_len;
  char refused_msg[512];

  // per-test behaviour
  int (*open_cb)(tctx_t* t, session_t* s);
  void (*frame_cb)(tctx_t* t, session_t* s, const uint8_t* p, size_t len);
  void (*stream_error_cb)(tctx_t* t, session_t* s);
  void (*close_cb)(tctx_t* t, session_t* s);

  // scratch for the tests
  int bad;
  char bad_text[256];
  int round;
  size_t pos;
  int ticks;
  int sent;
  uint64_t queued_after_open;
  uint64_t queued_at_close;
};


static void note_bad(tctx_t* t, const char* what) {
  if (!t->bad++) {
    snprintf(t->bad_text, sizeof(t->bad_text), "%s", what);
  }
}


static uint8_t* payload_new(size_t len, unsigned seed) {
  uint8_t* p = mem_alloc(len);
  for (size_t i = 0; i < len; i++) {
    p[i] = (uint8_t)(seed * 13u + i * 7u + (i >> 8));
  }
  return p;
}


static int payload_ok(const uint8_t* p, size_t len, unsigned seed) {
  for (size_t i = 0; i < len; i++) {
    if (p[i] != (uint8_t)(seed * 13u + i * 7u + (i >> 8))) {
      return 0;
    }
  }
  return 1;
}


static void on_client_closed(uv_handle_t* h) {
  (void)h;
}


static void client_close(client_t* c) {
  if (!c->closing) {
    c->closing = 1;
    uv_close((uv_handle_t*)&c->tcp, on_client_closed);
  }
}


static void on_client_write(uv_write_t* req, int status) {
  client_t* c = req->handle->data;
  if (status < 0) {
    c->write_error = status;
  }
  mem_free(req);
}


static void client_write(client_t* c, const void* data, size_t n) {
  client_write_t* w = mem_alloc(sizeof(*w) + n);
  memcpy(w->data, data, n);
  uv_buf_t b = uv_buf_init((char*)w->data, (unsigned)n);
  int rc = uv_write(&w->req, (uv_stream_t*)&c->tcp, &b, 1, on_client_write);
  if (rc != 0) {
    c->write_error = rc;
    mem_free(w);
  }
}


static void on_client_alloc(uv_handle_t* h, size_t suggested, uv_buf_t* out) {
  (void)h;
  size_t n = suggested < 65536 ? suggested : 65536;
  *out = uv_buf_init(mem_alloc(n), (unsigned)n);
}


static void on_client_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) {
  client_t* c = stream->data;
  if (nread > 0 && buf_append(&c->in, buf->base, (size_t)nread) != 0) {
    note_bad(c->t, "client out of memory");
  }
  mem_free(buf->base);
  if (nread < 0) {
    if (nread == UV_EOF) {
      c->eof = 1;
    } else {
      c->read_error = (int)nread;
    }
    uv_read_stop(stream);
    if (c->on_end) {
      c->on_end(c);
    }
  }
}


static void client_start_reading(client_t* c) {
  uv_read_start((uv_stream_t*)&c->tcp, on_client_alloc, on_client_read);
}


static void on_timer(uv_timer_t* h);


static void on_client_connect(uv_connect_t* req, int status) {
  client_t* c = req->handle->data;
  if (status < 0) {
    note_bad(c->t, "connect failed");
    client_close(c);
    return;
  }
  c->connected = 1;
  if (c->read) {
    client_start_reading(c);
  }
  if (c->on_connect) {
    c->on_connect(c);
  }
  if (c->t->poll_ms) {
    uv_timer_start(&c->t->timer, on_timer, c->t->poll_ms, c->t->poll_ms);
  }
}


static client_t* client_new(tctx_t* t, int read) {
  client_t* c = &t->clients[t->nclients++];
  c->t = t;
  c->read = read;
  buf_init(&c->in);
  uv_tcp_init(&t->loop, &c->tcp);
  c->tcp.data = c;
  return c;
}


static void client_connect(client_t* c) {
  struct sockaddr_in a;
  uv_ip4_addr("127.0.0.1", server_port(c->t->srv), &a);
  if (uv_tcp_connect(&c->connect, &c->tcp, (const struct sockaddr*)&a, on_client_connect)) {
    note_bad(c->t, "uv_tcp_connect failed");
    client_close(c);
  }
}


// The nth frame of the bytes a client received: 1 with *p / *len set, 0 if incomplete.
static int client_frame(const client_t* c, int nth, const uint8_t** p, uint32_t* len) {
  size_t pos = 0;
  for (int i = 0;; i++) {
    if (c->in.len - pos < FRAME_HEADER_BYTES) {
      return 0;
    }
    const uint8_t* h = c->in.data + pos;
    uint32_t n = (uint32_t)h[0] | (uint32_t)h[1] << 8 | (uint32_t)h[2] << 16 |
                 (uint32_t)h[3] << 24;
    if (c->in.len - pos - FRAME_HEADER_BYTES < n) {
      return 0;
    }
    if (i == nth) {
      *p = h + FRAME_HEADER_BYTES;
      *len = n;
      return 1;
    }
    pos += FRAME_HEADER_BYTES + n;
  }
}


//---------------- server hooks

static int session_index(session_t* s) {
  return (int)(intptr_t)session_data(s) - 1;
}


static int hook_open(void* user, session_t* s) {
  tctx_t* t = user;
  if (t->opens == MAX_SESSIONS) {
    note_bad(t, "too many sessions");
    return ERR_LIMIT;
  }
  t->sessions[t->opens++] = s;
  session_set_data(s, (void*)(intptr_t)t->opens);
  return t->open_cb ? t->open_cb(t, s) : 0;
}


static void hook_frame(void* user, session_t* s, const uint8_t* p, size_t len) {
  tctx_t* t = user;
  if (t->count_only) {
    t->nframes++;
  } else if (t->nframes < (int)(sizeof(t->frame_len) / sizeof(t->frame_len[0]))) {
    t->frame_len[t->nframes++] = len;
    if (buf_append(&t->frames, p, len) != 0) {
      note_bad(t, "out of memory recording a frame");
    }
  } else {
    note_bad(t, "too many frames");
  }
  if (t->frame_cb) {
    t->frame_cb(t, s, p, len);
  }
}


static void hook_stream_error(void* user, session_t* s, int code, const char* msg) {
  tctx_t* t = user;
  t->stream_errors++;
  t->stream_error_code = code;
  snprintf(t->stream_error_msg, sizeof(t->stream_error_msg), "%s", msg);
  if (t->stream_error_cb) {
    t->stream_error_cb(t, s);
  }
  // the hook owns the close (after its last frame)
  session_close(s);
}


// A refused frame is replaced by a 10-byte substitute (payload_new(10, 99)).
static void hook_send_refused(void* user, session_t* s, const uint8_t* p, size_t len, int code,
                              const char* msg) {
  tctx_t* t = user;
  (void)p;
  t->refused++;
  t->refused_len = len;
  snprintf(t->refused_msg, sizeof(t->refused_msg), "%s", msg);
  if (code != ERR_LIMIT) {
    note_bad(t, "on_send_refused code is not ERR_LIMIT");
  }
  session_send(s, payload_new(10, 99), 10);
}


static void hook_close(void* user, session_t* s) {
  tctx_t* t = user;
  t->closes++;
  int i = session_index(s);
  if (i < 0 || i >= MAX_SESSIONS) {
    note_bad(t, "on_close for an unknown session");
    return;
  }
  t->close_count[i]++;
  if (session_queued_bytes(s) != 0) {
    note_bad(t, "on_close with writes still queued");
  }
  if (t->close_cb) {
    t->close_cb(t, s);
  }
}


static void on_timer(uv_timer_t* h) {
  tctx_t* t = h->data;
  if (t->on_timer) {
    t->on_timer(t);
  }
}


static void timer_start(tctx_t* t, void (*cb)(tctx_t* t), uint64_t ms, uint64_t repeat) {
  t->on_timer = cb;
  uv_timer_start(&t->timer, on_timer, ms, repeat);
}


//---------------- fixture

static server_hooks_t test_hooks(void* user) {
  server_hooks_t hooks = {.user = user, .on_open = hook_open, .on_frame = hook_frame,
                          .on_stream_error = hook_stream_error, .on_close = hook_close,
                          .on_send_refused = hook_send_refused};
  return hooks;
}


// Limits a test sets beyond the fixture's (deadlines, budget; 0 = the fixture's value).
static server_limits_t g_extra;


static int tctx_init(tctx_t* t, uint32_t max_frame, uint64_t max_queue) {
  memset(t, 0, sizeof(*t));
  t->live = mem_live_count();
  ASSERT_OK(uv_loop_init(&t->loop));
  uv_timer_init(&t->loop, &t->timer);
  t->timer.data = t;
  buf_init(&t->frames);
  // sessions here never complete a handshake: max_hello_bytes is the limit of incoming
  // frames, while outgoing ones may be as large as the queue
  server_limits_t lim = {.max_frame_bytes = 1u << 30, .max_queue_bytes = max_queue,
                         .max_hello_bytes = max_frame};
  if (g_extra.max_frame_bytes) {
    lim.max_frame_bytes = g_extra.max_frame_bytes;
  }
  if (g_extra.max_hello_bytes) {
    lim.max_hello_bytes = g_extra.max_hello_bytes;
  }
  lim.max_held_bytes = g_extra.max_held_bytes;
  lim.pause_unsent_bytes = g_extra.pause_unsent_bytes;
  lim.handshake_timeout_ms = g_extra.handshake_timeout_ms;
  lim.idle_timeout_ms = g_extra.idle_timeout_ms;
  lim.io_timeout_ms = g_extra.io_timeout_ms;
  server_hooks_t hooks = test_hooks(t);
  err_msg_t msg;
  t->srv = server_create(&t->loop, "127.0.0.1", 0, &lim, &hooks, &msg);
  ASSERT_TRUE(t->srv != NULL);
  ASSERT_TRUE(server_port(t->srv) > 0);
  return 0;
}


// End of the test's traffic: close the server, the clients and the timer.
static void tctx_shutdown(tctx_t* t) {
  if (t->shut) {
    return;
  }
  t->shut = 1;
  server_close(t->srv);
  for (int i = 0; i < t->nclients; i++) {
    client_close(&t->clients[i]);
  }
  uv_close((uv_handle_t*)&t->timer, NULL);
}


// Run the loop to completion; it must close cleanly with every session closed once.
static int tctx_run(tctx_t* t) {
  ASSERT_OK(uv_run(&t->loop, UV_RUN_DEFAULT));
  ASSERT_EQ(t->shut, 1);
  ASSERT_OK(uv_loop_close(&t->loop));
  ASSERT_EQ(server_sessions(t->srv), 0);
  ASSERT_EQ(t->closes, t->opens);
  for (int i = 0; i < t->opens; i++) {
    ASSERT_EQ(t->close_count[i], 1);
  }
  if (t->bad) {
    CHECK_FAIL("%d problems, first: %s", t->bad, t->bad_text);
  }
  return 0;
}


static void tctx_free(tctx_t* t) {
  server_destroy(t->srv);
  buf_close(&t->frames);
  for (int i = 0; i < t->nclients; i++) {
    buf_close(&t->clients[i].in);
  }
}


// One test's traffic: the server's limit on unsent output, the per-test hooks, and the clients
// (all connect; the last `nquiet` never read; on_connect / on_end apply to each).
typedef struct tcase {
  uint64_t max_queue;
  int (*open_cb)(tctx_t* t, session_t* s);
  void (*frame_cb)(tctx_t* t, session_t* s, const uint8_t* p, size_t len);
  void (*stream_error_cb)(tctx_t* t, session_t* s);
  void (*close_cb)(tctx_t* t, session_t* s);
  void (*on_timer)(tctx_t* t);
  uint64_t poll_ms;              // nonzero: on_timer polls from each client's connection on
  int nclients;                  // 0: one
  int nquiet;
  int count_only;                // tctx_t.count_only
  void (*on_connect)(client_t* c);
  void (*on_end)(client_t* c);
} tcase_t;


// Set up t for the case (frames up to 1024 bytes), connect its clients and run the loop to
// completion (tctx_run's checks).
static int tctx_start(tctx_t* t, const tcase_t* tc) {
  if (tctx_init(t, 1024, tc->max_queue)) {
    return 1;
  }
  t->open_cb = tc->open_cb;
  t->frame_cb = tc->frame_cb;
  t->stream_error_cb = tc->stream_error_cb;
  t->close_cb = tc->close_cb;
  t->on_timer = tc->on_timer;
  t->poll_ms = tc->poll_ms;
  t->count_only = tc->count_only;
  int n = tc->nclients ? tc->nclients : 1;
  for (int i = 0; i < n; i++) {
    client_t* c = client_new(t, i < n - tc->nquiet);
    c->on_connect = tc->on_connect;
    c->on_end = tc->on_end;
    client_connect(c);
  }
  return tctx_run(t);
}


// Free t; nothing the test allocated may be left.
static int tctx_finish(tctx_t* t) {
  tctx_free(t);
  ASSERT_EQ(mem_live_count(), t->live);
  return 0;
}


// The nth frame client c received has len bytes of payload_new(len, seed).
static int expect_payload_frame(const client_t* c, int nth, uint32_t len, unsigned seed) {
  const uint8_t* p;
  uint32_t n;
  ASSERT_TRUE(client_frame(c, nth, &p, &n));
  ASSERT_EQ(n, len);
  ASSERT_TRUE(payload_ok(p, n, seed));
  return 0;
}


static void shutdown_on_close(tctx_t* t, session_t* s) {
  (void)s;
  tctx_shutdown(t);
}


static void shutdown_on_end(client_t* c) {
  tctx_shutdown(c->t);
}


// A polling timer's end: the test's traffic ends once `done`, or, `what` noted as a problem,
// after `most` ticks.
static void end_when(tctx_t* t, int done, int most, const char* what) {
  if (!done && ++t->ticks <= most) {
    return;
  }
  if (!done) {
    note_bad(t, what);
  }
  uv_timer_stop(&t->timer);
  tctx_shutdown(t);
}


// A polling timer's end once client 0 has received `bytes` in all: the server must then hold
// `held` bytes and have nothing queued for the session (else `counted` is noted).
static void end_once_received(tctx_t* t, size_t bytes, uint64_t held, const char* counted) {
  server_stats_t st;
  server_get_stats(t->srv, &st);
  int done = t->clients[0].in.len == bytes;
  if (done && (st.held_bytes != held || session_queued_bytes(t->sessions[0]) != 0)) {
    note_bad(t, counted);
  }
  end_when(t, done, 4000, "the replies did not arrive");
}


//---------------- frames split at every byte boundary

#define SPLIT_NFRAMES 4
static const uint32_t k_split_lens[SPLIT_NFRAMES] = {1, 2, 7, 258};
#define SPLIT_BYTES (4 * FRAME_HEADER_BYTES + 1 + 2 + 7 + 258)
#define SPLIT_ROUNDS ((int)SPLIT_BYTES)  // rounds 0..BYTES-2 split once at round+1; last: bytewise

static uint8_t g_split_msg[SPLIT_BYTES];


static void split_build(int round) {
  size_t pos = 0;
  for (int f = 0; f < SPLIT_NFRAMES; f++) {
    frame_write_header(g_split_msg + pos, k_split_lens[f]);
    pos += FRAME_HEADER_BYTES;
    for (uint32_t i = 0; i < k_split_lens[f]; i++) {
      g_split_msg[pos++] = (uint8_t)(round * 7 + f * 31 + (int)i);
    }
  }
}


static void split_tick(tctx_t* t) {
  client_t* c = &t->clients[0];
  if (t->round < SPLIT_ROUNDS - 1) {
    client_write(c, g_split_msg + t->pos, SPLIT_BYTES - t->pos);   // the rest
    t->pos = SPLIT_BYTES;
  } else {
    client_write(c, g_split_msg + t->pos, 1);                      // one byte per tick
    t->pos++;
  }
  if (t->pos == SPLIT_BYTES) {
    uv_timer_stop(&t->timer);
  }
}


// Write the first part of this round's bytes; a timer writes the rest once the server has read.
static void split_start_round(tctx_t* t) {
  split_build(t->round);
  t->pos = t->round < SPLIT_ROUNDS - 1 ? (size_t)t->round + 1 : 1;
  client_write(&t->clients[0], g_split_msg, t->pos);
  timer_start(t, split_tick, 1, 1);
}


static void split_connected(client_t* c) {
  split_start_round(c->t);
}


static void split_frame(tctx_t* t, session_t* s, const uint8_t* p, size_t len) {
  (void)s;
  int n = t->nframes - 1;
  int round = n / SPLIT_NFRAMES, f = n % SPLIT_NFRAMES;
  if (len != k_split_lens[f]) {
    note_bad(t, "frame of the wrong length");
  }
  for (size_t i = 0; i < len && i < k_split_lens[f]; i++) {
    if (p[i] != (uint8_t)(round * 7 + f * 31 + (int)i)) {
      note_bad(t, "frame with the wrong bytes");
      break;
    }
  }
  if (f == SPLIT_NFRAMES - 1) {
    if (++t->round == SPLIT_ROUNDS) {
      client_close(&t->clients[0]);     // the server sees EOF and closes the session
    } else {
      split_start_round(t);
    }
  }
}


TEST(server_frames_split_at_every_byte_arrive_whole) {
  static tctx_t t;
  const tcase_t tc = {.max_queue = 1 << 20, .frame_cb = split_frame,
                      .close_cb = shutdown_on_close, .on_connect = split_connected};
  ASSERT_OK(tctx_start(&t, &tc));
  ASSERT_EQ(t.opens, 1);
  ASSERT_EQ(t.nframes, SPLIT_ROUNDS * SPLIT_NFRAMES);
  ASSERT_EQ(t.stream_errors, 0);
  ASSERT_EQ(t.clients[0].write_error, 0);
  return tctx_finish(&t);
}


//---------------- session_send: header and payload, then close after flush

static const uint32_t k_send_lens[] = {1, 255, 256, 0x010203, 0x123456};
#define SEND_N ((int)(sizeof(k_send_lens) / sizeof(k_send_lens[0])))


static int send_open(tctx_t* t, session_t* s) {
  uint64_t total = 0;
  for (int i = 0; i < SEND_N; i++) {
    session_send(s, payload_new(k_send_lens[i], (unsigned)i), k_send_lens[i]);
    total += FRAME_HEADER_BYTES + k_send_lens[i];
  }
  // frames the socket took whole at once are written; the others count as queued until their
  // write completes (the small first ones always go at once)
  uint64_t queued = session_queued_bytes(s);
  t->queued_after_open = queued <= total - (3 * FRAME_HEADER_BYTES + 1 + 255 + 256);
  session_close(s);
  if (!session_is_closing(s)) {
    note_bad(t, "session_close did not mark the session closing");
  }
  return 0;
}


TEST(server_session_send_writes_le_header_and_flushes_before_close) {
  static tctx_t t;
  const tcase_t tc = {.max_queue = 64 << 20, .open_cb = send_open, .on_end = shutdown_on_end};
  ASSERT_OK(tctx_start(&t, &tc));
  const client_t* c = &t.clients[0];
  ASSERT_EQ(t.opens, 1);
  ASSERT_EQ(t.queued_after_open, 1);
  ASSERT_EQ(c->eof, 1);
  ASSERT_EQ(c->read_error, 0);

  size_t pos = 0;
  for (int i = 0; i < SEND_N; i++) {
    uint32_t n = k_send_lens[i];
    ASSERT_TRUE(c->in.len - pos >= FRAME_HEADER_BYTES + (size_t)n);
    const uint8_t* h = c->in.data + pos;
    ASSERT_EQ(h[0], n & 0xff);
    ASSERT_EQ(h[1], (n >> 8) & 0xff);
    ASSERT_EQ(h[2], (n >> 16) & 0xff);
    ASSERT_EQ(h[3], (n >> 24) & 0xff);
    ASSERT_TRUE(payload_ok(h + FRAME_HEADER_BYTES, n, (unsigned)i));
    pos += FRAME_HEADER_BYTES + n;
  }
  ASSERT_EQ(c->in.len, pos);
  return tctx_finish(&t);
}


// A frame sent after session_close is dropped; the frames queued before it still go out whole.
static int late_send_open(tctx_t* t, session_t* s) {
  (void)t;
  session_send(s, payload_new(8u << 20, 1), 8u << 20);   // more than the socket buffers take
  session_close(s);
  session_send(s, payload_new(16, 2), 16);
  return 0;
}


TEST(server_send_after_close_is_dropped_and_queued_frames_flush) {
  static tctx_t t;
  const tcase_t tc = {.max_queue = 64 << 20, .open_cb = late_send_open,
                      .on_end = shutdown_on_end};
  ASSERT_OK(tctx_start(&t, &tc));
  const client_t* c = &t.clients[0];
  ASSERT_EQ(c->eof, 1);
  ASSERT_EQ(c->read_error, 0);
  ASSERT_EQ(c->in.len, FRAME_HEADER_BYTES + (8u << 20));
  ASSERT_OK(expect_payload_frame(c, 0, 8u << 20, 1));
  return tctx_finish(&t);
}


// on_open refuses: its own error frame is delivered, then EOF.
static int refuse_open(tctx_t* t, session_t* s) {
  (void)t;
  session_send(s, (uint8_t*)mem_strdup("full"), 4);
  return ERR_LIMIT;
}


TEST(server_refused_session_gets_its_frame_then_eof) {
  static tctx_t t;
  const tcase_t tc = {.max_queue = 1 << 20, .open_cb = refuse_open, .on_end = shutdown_on_end};
  ASSERT_OK(tctx_start(&t, &tc));
  const client_t* c = &t.clients[0];
  ASSERT_EQ(c->eof, 1);
  ASSERT_EQ(c->in.len, FRAME_HEADER_BYTES + 4);
  ASSERT_MEM_EQ(c->in.data + FRAME_HEADER_BYTES, "full", 4);
  return tctx_finish(&t);
}


//---------------- stream errors

static void oversize_connected(client_t* c) {
  uint8_t bytes[2 * FRAME_HEADER_BYTES + 5 + 100];
  frame_write_header(bytes, 5);
  memcpy(bytes + FRAME_HEADER_BYTES, "hello", 5);
  frame_write_header(bytes + FRAME_HEADER_BYTES + 5, 1025);
  memset(bytes + 2 * FRAME_HEADER_BYTES + 5, 0xab, 100);   // the start of the oversize payload
  client_write(c, bytes, sizeof(bytes));
}


static void oversize_error(tctx_t* t, session_t* s) {
  (void)t;
  session_send(s, (uint8_t*)mem_strdup("E:limit"), 7);  // the last frame before the close
}


static void end_when_both_closed(client_t* c) {
  if (c->t->closes == 1) {
    tctx_shutdown(c->t);
    return;
  }

  // like a real client, close on end of stream: the server lingers until then (lingering close)
  client_close(c);
}


static void close_when_both_closed(tctx_t* t, session_t* s) {
  (void)s;
  if (t->clients[0].eof || t->clients[0].read_error) {
    tctx_shutdown(t);
  }
}


TEST(server_oversize_frame_reports_limit_then_flushes_and_closes) {
  static tctx_t t;
  const tcase_t tc = {.max_queue = 1 << 20, .stream_error_cb = oversize_error,
                      .close_cb = close_when_both_closed, .on_connect = oversize_connected,
                      .on_end = end_when_both_closed};
  ASSERT_OK(tctx_start(&t, &tc));
  const client_t* c = &t.clients[0];
  ASSERT_EQ(t.nframes, 1);                   // the frame before the bad header
  ASSERT_EQ(t.frame_len[0], 5);
  ASSERT_MEM_EQ(t.frames.data, "hello", 5);
  ASSERT_EQ(t.stream_errors, 1);
  ASSERT_EQ(t.stream_error_code, ERR_LIMIT);
  ASSERT_CONTAINS(t.stream_error_msg, "1025");
  ASSERT_EQ(t.closes, 1);

  // the client reads the error frame, then EOF
  ASSERT_EQ(c->read_error, 0);
  ASSERT_EQ(c->eof, 1);
  ASSERT_EQ(c->in.len, FRAME_HEADER_BYTES + 7);
  const uint8_t* p;
  uint32_t n;
  ASSERT_TRUE(client_frame(c, 0, &p, &n));
  ASSERT_EQ(n, 7);
  ASSERT_MEM_EQ(p, "E:limit", 7);
  return tctx_finish(&t);
}


static void zero_connected(client_t* c) {
  uint8_t bytes[2 * FRAME_HEADER_BYTES + 3];
  frame_write_header(bytes, 3);
  memcpy(bytes + FRAME_HEADER_BYTES, "abc", 3);
  frame_write_header(bytes + FRAME_HEADER_BYTES + 3, 0);
  client_write(c, bytes, sizeof(bytes));
}


TEST(server_zero_length_frame_is_a_protocol_error) {
  static tctx_t t;
  const tcase_t tc = {.max_queue = 1 << 20, .close_cb = close_when_both_closed,
                      .on_connect = zero_connected, .on_end = end_when_both_closed};
  ASSERT_OK(tctx_start(&t, &tc));
  ASSERT_EQ(t.nframes, 1);
  ASSERT_EQ(t.stream_errors, 1);
  ASSERT_EQ(t.stream_error_code, ERR_PROTO);
  ASSERT_EQ(t.clients[0].eof, 1);
  ASSERT_EQ(t.clients[0].in.len, 0);
  return tctx_finish(&t);
}


//---------------- pause / resume

// Frames carry their sequence number in byte 0. The server pauses after frames 0 and 3; while
// paused, the client sends more. Each resume delivers the buffered frames in order.
static void pause_send_batch(client_t* c, int first, int count) {
  uint8_t bytes[8 * (FRAME_HEADER_BYTES + 4)];
  size_t pos = 0;
  for (int i = first; i < first + count; i++) {
    frame_write_header(bytes + pos, 4);
    pos += FRAME_HEADER_BYTES;
    bytes[pos++] = (uint8_t)i;
    bytes[pos++] = 'x';
    bytes[pos++] = 'y';
    bytes[pos++] = 'z';
  }
  client_write(c, bytes, pos);
}


static void pause_connected(client_t* c) {
  pause_send_batch(c, 0, 5);     // one write: the server reads all five frames at once
}


static void pause_tick(tctx_t* t) {
  session_t* s = t->sessions[0];
  t->ticks++;
  if (t->ticks == 1) {
    if (t->nframes != 1) {
      note_bad(t, "frames delivered while paused (1)");
    }
    pause_send_batch(&t->clients[0], 5, 3);   // stays in the socket until resume
  } else if (t->ticks == 2) {
    if (t->nframes != 1) {
      note_bad(t, "frames delivered while paused (2)");
    }
    session_resume(s);           // delivers 1, 2, 3 from the buffer, pauses again at 3
    if (t->nframes != 4) {
      note_bad(t, "resume did not deliver the buffered frames at once");
    }
  } else if (t->ticks == 3) {
    if (t->nframes != 4) {
      note_bad(t, "frames delivered while paused (3)");
    }
    session_resume(s);           // delivers 4, then reads 5..7 from the socket
    if (t->nframes != 5) {
      note_bad(t, "resume did not deliver the last buffered frame at once");
    }
    session_resume(s);           // not paused: no effect
    uv_timer_stop(&t->timer);
  }
}


static void pause_frame(tctx_t* t, session_t* s, const uint8_t* p, size_t len) {
  int seq = t->nframes - 1;
  if (len != 4 || p[0] != seq) {
    note_bad(t, "frame out of order");
  }
  if (seq == 0 || seq == 3) {
    session_pause(s);
    session_pause(s);            // idempotent
    timer_start(t, pause_tick, 20, 20);
  }
  if (seq == 7) {
    client_close(&t->clients[0]);
  }
}


TEST(server_pause_buffers_frames_and_resume_delivers_them_in_order) {
  static tctx_t t;
  const tcase_t tc = {.max_queue = 1 << 20, .frame_cb = pause_frame,
                      .close_cb = shutdown_on_close, .on_connect = pause_connected};
  ASSERT_OK(tctx_start(&t, &tc));
  ASSERT_EQ(t.ticks, 3);
  ASSERT_EQ(t.nframes, 8);
  for (int i = 0; i < 8; i++) {
    ASSERT_EQ(t.frames.data[4 * i], i);
  }
  return tctx_finish(&t);
}


//---------------- max_queue_bytes

#define CAP_BYTES (1u << 20)
#define CAP_FRAME (128u << 10)


static int cap_open(tctx_t* t, session_t* s) {
  (void)s;
  timer_start(t, t->on_timer, 1, 1);
  return 0;
}


// A peer that never reads: the kernel buffers fill, then unsent output grows past the cap.
static void cap_tick_stalled(tctx_t* t) {
  if (t->closes || t->sent > 4000) {        // 500 MiB would mean the cap never triggers
    uv_timer_stop(&t->timer);
    tctx_shutdown(t);
    return;
  }
  session_t* s = t->sessions[0];
  session_send(s, payload_new(CAP_FRAME, (unsigned)t->sent), CAP_FRAME);
  t->sent++;
}


static void cap_closed(tctx_t* t, session_t* s) {
  (void)s;
  uv_timer_stop(&t->timer);
  tctx_shutdown(t);
}


TEST(server_peer_that_never_reads_is_closed_past_max_queue_bytes) {
  static tctx_t t;
  const tcase_t tc = {.max_queue = CAP_BYTES, .on_timer = cap_tick_stalled, .open_cb = cap_open,
                      .close_cb = cap_closed, .nquiet = 1};   // connects, never reads
  ASSERT_OK(tctx_start(&t, &tc));
  ASSERT_EQ(t.closes, 1);
  ASSERT_TRUE(t.sent <= 4000);
  // written bytes do not count: more than the cap went out before the close
  ASSERT_TRUE((uint64_t)t.sent * (FRAME_HEADER_BYTES + CAP_FRAME) > CAP_BYTES);
  return tctx_finish(&t);
}


// The same stream to a peer that reads stays open: only unsent output counts.
static void cap_tick_reading(tctx_t* t) {
  session_t* s = t->sessions[0];
  if (t->closes || session_is_closing(s)) {
    note_bad(t, "a reading peer was closed");
    uv_timer_stop(&t->timer);
    return;
  }
  session_send(s, payload_new(CAP_FRAME, (unsigned)t->sent), CAP_FRAME);
  if (++t->sent == 64) {       // 8 MiB in all, 8 times the cap
    uv_timer_stop(&t->timer);
    session_close(s);
  }
}


TEST(server_reading_peer_is_not_closed_by_max_queue_bytes) {
  static tctx_t t;
  const tcase_t tc = {.max_queue = CAP_BYTES, .on_timer = cap_tick_reading, .open_cb = cap_open,
                      .on_end = shutdown_on_end};
  ASSERT_OK(tctx_start(&t, &tc));
  const client_t* c = &t.clients[0];
  ASSERT_EQ(t.sent, 64);
  ASSERT_EQ(c->eof, 1);
  ASSERT_EQ(c->in.len, 64 * (FRAME_HEADER_BYTES + CAP_FRAME));
  for (int i = 0; i < 64; i++) {
    ASSERT_OK(expect_payload_frame(c, i, CAP_FRAME, (unsigned)i));
  }
  return tctx_finish(&t);
}


//---------------- session_retain

static int retain_open(tctx_t* t, session_t* s) {
  (void)t;
  session_retain(s);
  session_retain(s);
  return 0;
}


static void retain_connected(client_t* c) {
  client_close(c);               // the server sees EOF and closes the session
}


// Runs after on_close: the retained session is still valid memory.
static void retain_tick(tctx_t* t) {
  session_t* s = t->sessions[0];
  if (!session_is_closing(s) || session_id(s) != 1 || session_index(s) != 0 ||
      session_queued_bytes(s) != 0) {
    note_bad(t, "retained session state");
  }
  session_send(s, payload_new(10, 0), 10);   // dropped and freed
  session_close(s);
  session_pause(s);
  session_resume(s);
  session_release(s);
  session_release(s);            // the last reference frees it
  tctx_shutdown(t);
}


static void retain_closed(tctx_t* t, session_t* s) {
  (void)s;
  if (t->closes == 1) {
    timer_start(t, retain_tick, 5, 0);
  }
}


TEST(server_retained_session_outlives_its_close) {
  static tctx_t t;
  const tcase_t tc = {.max_queue = 1 << 20, .open_cb = retain_open, .close_cb = retain_closed,
                      .on_connect = retain_connected};
  ASSERT_OK(tctx_start(&t, &tc));
  ASSERT_EQ(t.opens, 1);
  ASSERT_EQ(t.close_count[0], 1);
  return tctx_finish(&t);
}


//---------------- server_close with sessions open

// Session 0: idle and retained past the end of the loop. Session 1: output queued to a peer
// that does not read. Session 2: the same, plus session_close (shutdown pending).
static int close_all_open(tctx_t* t, session_t* s) {
  int i = session_index(s);
  if (i == 0) {
    session_retain(s);
  } else {
    session_send(s, payload_new(8u << 20, 0), 8u << 20);
    if (i == 2) {
      session_close(s);
    }
  }
  if (t->opens == 3) {
    timer_start(t, t->on_timer, 5, 0);
  }
  return 0;
}


static void close_all_tick(tctx_t* t) {
  // session 2 is closing: its slot no longer counts
  if (server_sessions(t->srv) != 2) {
    note_bad(t, "expected two sessions not closing before server_close");
  }
  server_close(t->srv);
  server_close(t->srv);          // idempotent
}


static void close_all_closed(tctx_t* t, session_t* s) {
  (void)s;
  if (t->closes == 3) {
    tctx_shutdown(t);
  }
}


TEST(server_close_with_open_sessions_runs_to_completion) {
  static tctx_t t;
  const tcase_t tc = {.max_queue = 64 << 20, .on_timer = close_all_tick,
                      .open_cb = close_all_open, .close_cb = close_all_closed, .nclients = 3,
                      .nquiet = 2};
  ASSERT_OK(tctx_start(&t, &tc));
  ASSERT_EQ(t.opens, 3);
  ASSERT_EQ(server_port(t.srv), -1);
  tctx_free(&t);

  // the retained session is still valid after the loop and the server are gone
  session_t* s = t.sessions[0];
  ASSERT_TRUE(session_is_closing(s));
  session_release(s);
  ASSERT_EQ(mem_live_count(), t.live);
  return 0;
}


// server_create on loop with the test hooks (no user), 1024-byte frames and a 1 MiB queue.
static server_t* create_on(uv_loop_t* loop, const char* host, int port, err_msg_t* msg) {
  server_limits_t lim = {.max_frame_bytes = 1024, .max_queue_bytes = 1 << 20,
                         .max_hello_bytes = 1024};
  server_hooks_t hooks = test_hooks(NULL);
  return server_create(loop, host, port, &lim, &hooks, msg);
}


// Run loop to completion, then close it.
static int loop_finish(uv_loop_t* loop) {
  ASSERT_OK(uv_run(loop, UV_RUN_DEFAULT));
  ASSERT_OK(uv_loop_close(loop));
  return 0;
}


TEST(server_create_rejects_a_bad_host) {
  int64_t base = mem_live_count();
  uv_loop_t loop;
  ASSERT_OK(uv_loop_init(&loop));
  err_msg_t msg;
  server_t* srv = create_on(&loop, "not-an-ip", 0, &msg);
  ASSERT_TRUE(srv == NULL);
  ASSERT_CONTAINS(msg.text, "not-an-ip");
  ASSERT_OK(loop_finish(&loop));
  ASSERT_EQ(mem_live_count(), base);
  return 0;
}


TEST(server_create_on_a_busy_port_returns_a_closed_server) {
  int64_t base = mem_live_count();
  uv_loop_t loop;
  ASSERT_OK(uv_loop_init(&loop));
  err_msg_t msg;
  server_t* first = create_on(&loop, "127.0.0.1", 0, &msg);
  ASSERT_TRUE(first != NULL);
  int port = server_port(first);
  ASSERT_TRUE(port > 0);
  server_t* second = create_on(&loop, "127.0.0.1", port, &msg);
  ASSERT_TRUE(second != NULL);
  ASSERT_EQ(server_port(second), -1);
  ASSERT_CONTAINS(msg.text, "cannot listen");
  server_close(second);
  server_close(first);
  ASSERT_OK(loop_finish(&loop));
  server_destroy(second);
  server_destroy(first);
  ASSERT_EQ(mem_live_count(), base);
  return 0;
}


//---------------- deadlines, budget, refused frames

TEST(server_handshake_deadline_reports_a_timeout) {
  static tctx_t t;
  g_extra = (server_limits_t){.handshake_timeout_ms = 40};
  const tcase_t tc = {.max_queue = 1 << 20, .on_end = shutdown_on_end};  // sends nothing
  int rc = tctx_start(&t, &tc);
  g_extra = (server_limits_t){0};
  ASSERT_OK(rc);
  ASSERT_EQ(t.stream_errors, 1);
  ASSERT_EQ(t.stream_error_code, SERVER_ERR_TIMEOUT);
  ASSERT_CONTAINS(t.stream_error_msg, "handshake_timeout_ms 40");
  return tctx_finish(&t);
}


static int ready_open(tctx_t* t, session_t* s) {
  (void)t;
  session_set_ready(s);
  return 0;
}


static void partial_connected(client_t* c) {
  uint8_t h[FRAME_HEADER_BYTES + 3];
  frame_write_header(h, 100);
  client_write(c, h, sizeof(h));     // 3 of 100 bytes, then nothing
}


TEST(server_partial_frame_deadline_reports_a_timeout_but_ready_sessions_pass_the_handshake) {
  static tctx_t t;
  g_extra = (server_limits_t){.handshake_timeout_ms = 20, .io_timeout_ms = 80};
  const tcase_t tc = {.max_queue = 1 << 20, .open_cb = ready_open,
                      .on_connect = partial_connected, .on_end = shutdown_on_end};
  int rc = tctx_start(&t, &tc);
  g_extra = (server_limits_t){0};
  ASSERT_OK(rc);
  ASSERT_EQ(t.stream_errors, 1);
  ASSERT_EQ(t.stream_error_code, SERVER_ERR_TIMEOUT);
  ASSERT_CONTAINS(t.stream_error_msg, "io_timeout_ms 80 (7 of 104 bytes)");
  return tctx_finish(&t);
}


static void budget_connected(client_t* c) {
  uint8_t h[FRAME_HEADER_BYTES];
  frame_write_header(h, 5000);
  client_write(c, h, sizeof(h));
}


TEST(server_frame_past_the_memory_budget_is_refused_before_it_is_buffered) {
  static tctx_t t;
  g_extra = (server_limits_t){.max_hello_bytes = 1 << 20, .max_held_bytes = 4096};
  const tcase_t tc = {.max_queue = 1 << 20, .on_connect = budget_connected,
                      .on_end = shutdown_on_end};
  int rc = tctx_start(&t, &tc);
  g_extra = (server_limits_t){0};
  ASSERT_OK(rc);
  ASSERT_EQ(t.stream_errors, 1);
  ASSERT_EQ(t.stream_error_code, ERR_LIMIT);
  ASSERT_CONTAINS(t.stream_error_msg, "a frame of 5004 bytes does not fit");
  ASSERT_CONTAINS(t.stream_error_msg, "max_held_bytes 4096");
  server_stats_t st;
  server_get_stats(t.srv, &st);
  ASSERT_EQ(st.held_bytes, 0);
  return tctx_finish(&t);
}


static int oversize_open(tctx_t* t, session_t* s) {
  (void)t;
  session_send(s, payload_new(2000, 1), 2000);   // over max_frame_bytes: substituted
  session_send(s, payload_new(100, 2), 100);     // the session goes on
  return 0;
}


static void refuse_end_check(tctx_t* t) {
  client_t* c = &t->clients[0];
  const uint8_t* p;
  uint32_t n;
  if (client_frame(c, 1, &p, &n)) {
    uv_timer_stop(&t->timer);
    tctx_shutdown(t);
  }
}


static void refuse_connected(client_t* c) {
  timer_start(c->t, refuse_end_check, 5, 5);
}


TEST(server_reply_over_max_frame_bytes_is_replaced_and_the_session_goes_on) {
  static tctx_t t;
  g_extra = (server_limits_t){.max_frame_bytes = 1024};
  const tcase_t tc = {.max_queue = 1 << 20, .open_cb = oversize_open,
                      .on_connect = refuse_connected};
  int rc = tctx_start(&t, &tc);
  g_extra = (server_limits_t){0};
  ASSERT_OK(rc);
  ASSERT_EQ(t.refused, 1);
  ASSERT_EQ(t.refused_len, 2000);
  ASSERT_CONTAINS(t.refused_msg, "a reply of 2000 bytes would exceed max_frame_bytes 1024");
  ASSERT_OK(expect_payload_frame(&t.clients[0], 0, 10, 99));
  ASSERT_OK(expect_payload_frame(&t.clients[0], 1, 100, 2));
  ASSERT_EQ(t.stream_errors, 0);
  return tctx_finish(&t);
}


//---------------- replies the peer does not take stop its reading

// A peer that sends many small frames and reads nothing: each frame is answered with a reply,
// as the daemon answers pings. The replies are of 1 KiB so that the kernel's socket buffers
// (a few MiB) fill after a few thousand of them, not hundreds of thousands.
#define FLOOD_FRAMES 40000
#define FLOOD_PAYLOAD 4u
#define FLOOD_REPLY 1024u


static void flood_write(client_t* c, int n, uint8_t tag) {
  size_t each = FRAME_HEADER_BYTES + FLOOD_PAYLOAD;
  uint8_t* all = mem_alloc(each * (size_t)n);
  for (int i = 0; i < n; i++) {
    frame_write_header(all + each * (size_t)i, FLOOD_PAYLOAD);
    memset(all + each * (size_t)i + FRAME_HEADER_BYTES, tag, FLOOD_PAYLOAD);
  }
  client_write(c, all, each * (size_t)n);
  mem_free(all);
}


static void flood_echo(tctx_t* t, session_t* s, const uint8_t* p, size_t len) {
  (void)t;
  (void)len;
  session_send(s, payload_new(FLOOD_REPLY, p[0]), FLOOD_REPLY);
}


static void flood_connected(client_t* c) {
  flood_write(c, FLOOD_FRAMES, 'F');
}


// Frames received by a client: every one must be a FLOOD_REPLY.
static int client_frames(const client_t* c) {
  size_t each = FRAME_HEADER_BYTES + FLOOD_REPLY;
  return c->in.len % each ? -1 : (int)(c->in.len / each);
}


#define PAUSE_UNSENT (256u << 10)

// The memory of the unsent replies stays near the mark whatever the kernel's buffers take.
// Once the session has stayed blocked (nothing delivered for 100 ms), the peer reads, and every
// frame is answered.
static void unsent_tick(tctx_t* t) {
  server_stats_t st;
  server_get_stats(t->srv, &st);
  t->ticks++;
  client_t* c = &t->clients[0];
  if (st.held_bytes > PAUSE_UNSENT + (256u << 10)) {
    note_bad(t, "unsent replies past the mark");
  }
  if (t->round == 0) {
    if (st.blocked != 1 || t->nframes != t->sent) {
      t->sent = t->nframes;
      t->pos = 0;
    } else if (++t->pos == 20) {
      t->round = 1;
      t->queued_after_open = st.held_bytes;
      client_start_reading(c);
    }
  } else if (t->nframes == FLOOD_FRAMES && client_frames(c) == FLOOD_FRAMES) {
    t->queued_at_close = st.blocked;
    uv_timer_stop(&t->timer);
    tctx_shutdown(t);
  }
  if (t->ticks > 6000 && !t->shut) {
    note_bad(t, "the flood did not end as expected");
    uv_timer_stop(&t->timer);
    tctx_shutdown(t);
  }
}


TEST(server_peer_that_takes_no_replies_is_not_read_past_pause_unsent_bytes) {
  static tctx_t t;
  g_extra = (server_limits_t){.pause_unsent_bytes = PAUSE_UNSENT};
  const tcase_t tc = {.max_queue = 256u << 20, .frame_cb = flood_echo,
                      .on_connect = flood_connected, .on_timer = unsent_tick, .poll_ms = 5,
                      .nquiet = 1, .count_only = 1};
  int rc = tctx_start(&t, &tc);
  g_extra = (server_limits_t){0};
  ASSERT_OK(rc);

  // blocked for good with its replies' memory between half the mark and just past it (plus
  // the reader's buffer), after part of the flood only; once the peer read, every frame was
  // answered and it is unblocked
  ASSERT_TRUE(t.sent > 0 && t.sent < FLOOD_FRAMES);
  ASSERT_TRUE(t.queued_after_open > PAUSE_UNSENT / 2);
  ASSERT_TRUE(t.queued_after_open < PAUSE_UNSENT + (256u << 10));
  ASSERT_EQ(t.nframes, FLOOD_FRAMES);
  ASSERT_EQ(client_frames(&t.clients[0]), FLOOD_FRAMES);
  ASSERT_EQ(t.queued_at_close, 0);
  return tctx_finish(&t);
}


// Two peers flood and read nothing (no per-session mark: the budget alone); once they are
// blocked, a third peer that reads gets every reply: the last quarter of the budget is its.
#define BUSY_BUDGET (2u << 20)
#define BUSY_WITNESS_FRAMES 1000


static void busy_tick(tctx_t* t) {
  server_stats_t st;
  server_get_stats(t->srv, &st);
  t->ticks++;
  if (st.held_bytes > BUSY_BUDGET) {
    note_bad(t, "more than the budget held");
  }
  if (t->round == 0 && st.blocked == 2) {
    t->round = 1;
    t->queued_after_open = st.held_bytes;
    client_t* w = client_new(t, 1);
    client_connect(w);
  } else if (t->round == 1 && t->nclients == 3 && t->clients[2].connected) {
    t->round = 2;
    flood_write(&t->clients[2], BUSY_WITNESS_FRAMES, 'W');
  } else if (t->round == 2 && client_frames(&t->clients[2]) == BUSY_WITNESS_FRAMES) {
    uv_timer_stop(&t->timer);
    tctx_shutdown(t);
  } else if (t->ticks > 3000) {
    note_bad(t, "the witness was not answered");
    uv_timer_stop(&t->timer);
    tctx_shutdown(t);
  }
}


static void busy_connected(client_t* c) {
  flood_connected(c);
  if (c == &c->t->clients[0]) {
    timer_start(c->t, busy_tick, 5, 5);
  }
}


TEST(server_peers_that_take_no_replies_leave_a_quarter_of_the_budget_to_the_others) {
  static tctx_t t;
  g_extra = (server_limits_t){.max_held_bytes = BUSY_BUDGET};
  const tcase_t tc = {.max_queue = 256u << 20, .frame_cb = flood_echo, .nclients = 2,
                      .nquiet = 2, .on_connect = busy_connected, .count_only = 1};
  int rc = tctx_start(&t, &tc);
  g_extra = (server_limits_t){0};
  ASSERT_OK(rc);
  ASSERT_TRUE(t.queued_after_open > BUSY_BUDGET / 4 * 3);
  ASSERT_TRUE(t.queued_after_open <= BUSY_BUDGET);
  ASSERT_EQ(t.refused, 0);       // no reply was ever refused for the budget
  ASSERT_EQ(client_frames(&t.clients[2]), BUSY_WITNESS_FRAMES);
  const uint8_t* p;
  uint32_t n;
  ASSERT_TRUE(client_frame(&t.clients[2], BUSY_WITNESS_FRAMES - 1, &p, &n));
  ASSERT_TRUE(payload_ok(p, n, 'W'));
  return tctx_finish(&t);
}


//---------------- shared frames: counted at what they hold

// A reply of FLOOD_REPLY bytes of payload_new(FLOOD_REPLY, seed) as a shared frame built in
// pieces: its first SHARED_OWN bytes its own, the rest referred to in a blob of SHARED_BLOB
// bytes, larger than what is referred to (as a step's reply refers to a cloud's buffer).
#define SHARED_BLOB (16u << 10)
#define SHARED_OWN 16u


static shared_buf_t* shared_reply(tctx_t* t, unsigned seed) {
  uint8_t* p = payload_new(FLOOD_REPLY, seed);
  blob_t* x = blob_create(SHARED_BLOB);
  shared_buf_t* b = shared_buf_create_pieces(SHARED_OWN, 1);
  uint8_t* own = b ? shared_buf_put(b, SHARED_OWN) : NULL;
  if (!p || !x || !own) {
    note_bad(t, "out of memory making a shared reply");
  } else {
    memcpy(blob_data(x), p, FLOOD_REPLY);
    memcpy(own, p, SHARED_OWN);
    if (shared_buf_put_ref(b, x, blob_data(x) + SHARED_OWN, FLOOD_REPLY - SHARED_OWN) != 0) {
      note_bad(t, "a shared reply's reference was refused");
    }
  }
  blob_release(x);    // the frame holds it from here on
  mem_free(p);
  return b;
}


// Each frame is answered with a shared reply; the bytes held grow by what the write holds: the
// whole blob (not the bytes referred to), the frame and the write record.
static void flood_echo_shared(tctx_t* t, session_t* s, const uint8_t* p, size_t len) {
  (void)len;
  shared_buf_t* b = shared_reply(t, p[0]);
  if (!b) {
    return;
  }
  server_stats_t before, after;
  server_get_stats(t->srv, &before);
  if (session_send_shared(s, b) != 0) {
    note_bad(t, "a shared reply was refused");
  }
  server_get_stats(t->srv, &after);
  uint64_t cost = after.held_bytes - before.held_bytes;
  if (cost < SHARED_BLOB + SHARED_OWN || cost > SHARED_BLOB + 1024) {
    note_bad(t, "a shared reply not counted at what it holds");
  }
  shared_buf_release(b);
}


TEST(server_peer_that_takes_no_shared_replies_is_not_read_past_pause_unsent_bytes) {
  static tctx_t t;
  g_extra = (server_limits_t){.pause_unsent_bytes = PAUSE_UNSENT};
  const tcase_t tc = {.max_queue = 256u << 20, .frame_cb = flood_echo_shared,
                      .on_connect = flood_connected, .on_timer = unsent_tick, .poll_ms = 5,
                      .nquiet = 1, .count_only = 1};
  int rc = tctx_start(&t, &tc);
  g_extra = (server_limits_t){0};
  ASSERT_OK(rc);

  // as with plain replies: blocked for good after part of the flood, with the memory of its
  // replies (16 KiB each) near the mark; once the peer read, every frame was answered, whole,
  // and the session read again
  ASSERT_TRUE(t.sent > 0 && t.sent < FLOOD_FRAMES);
  ASSERT_TRUE(t.queued_after_open > PAUSE_UNSENT / 2);
  ASSERT_TRUE(t.queued_after_open < PAUSE_UNSENT + (256u << 10));
  ASSERT_EQ(t.nframes, FLOOD_FRAMES);
  ASSERT_EQ(client_frames(&t.clients[0]), FLOOD_FRAMES);
  ASSERT_OK(expect_payload_frame(&t.clients[0], FLOOD_FRAMES - 1, FLOOD_REPLY, 'F'));
  ASSERT_EQ(t.queued_at_close, 0);
  return tctx_finish(&t);
}


// One frame in, one stream frame (a prefix and the shared frame's payload under one header)
// and one shared reply out; each counts what it holds until written, and nothing once the
// peer has them both.
static void stream_and_reply(tctx_t* t, session_t* s, const uint8_t* p, size_t len) {
  (void)p;
  (void)len;
  shared_buf_t* b = shared_reply(t, 5);
  if (!b) {
    return;
  }
  static const uint8_t prefix[3] = {0xAA, 0xBB, 0xCC};
  server_stats_t st[3];
  server_get_stats(t->srv, &st[0]);
  if (session_send_stream(s, b, prefix, sizeof(prefix)) != 0) {
    note_bad(t, "the stream frame was refused");
  }
  server_get_stats(t->srv, &st[1]);
  if (session_send_shared(s, b) != 0) {
    note_bad(t, "the shared reply was refused");
  }
  server_get_stats(t->srv, &st[2]);
  for (int i = 0; i < 2; i++) {
    uint64_t cost = st[i + 1].held_bytes - st[i].held_bytes;
    if (cost < SHARED_BLOB + SHARED_OWN || cost > SHARED_BLOB + 1024) {
      note_bad(t, i ? "the shared reply not counted at what it holds"
                    : "the stream frame not counted at what it holds");
    }
  }
  if (session_stream_bytes(s) != FRAME_HEADER_BYTES + sizeof(prefix) + FLOOD_REPLY) {
    note_bad(t, "the stream frame's bytes");
  }
  shared_buf_release(b);
}


static void stream_and_reply_tick(tctx_t* t) {
  server_stats_t st;
  server_get_stats(t->srv, &st);
  const client_t* c = &t->clients[0];
  size_t both = 2 * FRAME_HEADER_BYTES + 3 + 2 * FLOOD_REPLY;
  // both written: neither is counted (what stays is the session's small input buffer)
  end_when(t, c->in.len == both && st.held_bytes < SHARED_BLOB / 2, 1000,
           "the frames did not arrive, or their memory stayed counted");
}


static void stream_and_reply_connected(client_t* c) {
  tctx_t* t = c->t;
  flood_write(c, 1, 'S');
  timer_start(t, stream_and_reply_tick, 5, 5);
}


TEST(server_stream_frames_and_shared_replies_count_what_they_hold_until_written) {
  static tctx_t t;
  const tcase_t tc = {.max_queue = 1u << 20, .frame_cb = stream_and_reply,
                      .on_connect = stream_and_reply_connected};
  ASSERT_OK(tctx_start(&t, &tc));

  // the stream frame: the prefix and the payload under one header; then the reply, whole
  const client_t* c = &t.clients[0];
  const uint8_t* p;
  uint32_t n;
  ASSERT_TRUE(client_frame(c, 0, &p, &n));
  ASSERT_EQ(n, 3 + FLOOD_REPLY);
  ASSERT_MEM_EQ(p, "\xAA\xBB\xCC", 3);
  ASSERT_TRUE(payload_ok(p + 3, FLOOD_REPLY, 5));
  ASSERT_OK(expect_payload_frame(c, 1, FLOOD_REPLY, 5));
  return tctx_finish(&t);
}


//---------------- turns

// A flood of small frames and one frame of another peer, both ready at once: the other peer's
// frame does not wait for the whole flood.
#define TURN_FLOOD 20000


static void turn_frame(tctx_t* t, session_t* s, const uint8_t* p, size_t len) {
  (void)s;
  (void)len;
  if (p[0] == 'W') {
    t->pos = (size_t)t->nframes;
  }
  if (t->nframes == TURN_FLOOD + 1) {
    tctx_shutdown(t);
  }
}


static void turn_connected(client_t* c) {
  tctx_t* t = c->t;
  if (!t->clients[0].connected || !t->clients[1].connected) {
    return;
  }
  flood_write(&t->clients[0], TURN_FLOOD, 'F');
  flood_write(&t->clients[1], 1, 'W');
}


TEST(server_flooding_peer_lets_the_others_take_their_turns) {
  static tctx_t t;
  const tcase_t tc = {.max_queue = 256u << 20, .frame_cb = turn_frame, .nclients = 2,
                      .on_connect = turn_connected, .count_only = 1};
  ASSERT_OK(tctx_start(&t, &tc));
  ASSERT_EQ(t.nframes, TURN_FLOOD + 1);
  // 160 KB of frames arrived at once: without turns all of them come first
  ASSERT_TRUE(t.pos > 0);
  ASSERT_TRUE(t.pos < TURN_FLOOD / 4);
  return tctx_finish(&t);
}


//---------------- memory given back

static void trim_tick(tctx_t* t) {
  server_stats_t st;
  server_get_stats(t->srv, &st);
  t->ticks++;
  if (t->round == 0 && st.held_bytes >= SERVER_TRIM_MIN_PEAK) {
    t->round = 1;                // enough held: the peer leaves, its memory is released
    client_close(&t->clients[0]);
  } else if (t->round == 1 && st.trims > 0) {
    t->sent = t->ticks;
    uv_timer_stop(&t->timer);
    tctx_shutdown(t);
  } else if (t->ticks > 1000) {
    note_bad(t, "no trim");
    uv_timer_stop(&t->timer);
    tctx_shutdown(t);
  }
}


TEST(server_gives_memory_back_once_connections_released_it) {
  static tctx_t t;
  const tcase_t tc = {.max_queue = 256u << 20, .frame_cb = flood_echo,
                      .on_connect = flood_connected, .on_timer = trim_tick, .poll_ms = 5,
                      .nquiet = 1, .count_only = 1};
  ASSERT_OK(tctx_start(&t, &tc));
  server_stats_t st;
  server_get_stats(t.srv, &st);
  ASSERT_EQ(st.trims, 1);
  ASSERT_EQ(st.held_bytes, 0);
  return tctx_finish(&t);
}


//---------------- replies of one turn leave together

// A burst of BURST_FRAMES requests arrives in one read; each is answered at once, plain and
// shared replies alternating. The replies of the turn are written in batches (of at most 64
// pieces: plain replies take 2, shared ones 2 or 3), not one system call each, and arrive
// whole and in order.
#define BURST_FRAMES 40
#define BURST_REQUEST 8u


static void burst_echo(tctx_t* t, session_t* s, const uint8_t* p, size_t len) {
  (void)len;
  if (p[0] % 2) {
    shared_buf_t* b = shared_reply(t, p[0]);
    if (b && session_send_shared(s, b) != 0) {
      note_bad(t, "a shared reply was refused");
    }
    shared_buf_release(b);
  } else {
    session_send(s, payload_new(FLOOD_REPLY, p[0]), FLOOD_REPLY);
  }
}


static void burst_connected(client_t* c) {
  uint8_t msg[BURST_FRAMES * (FRAME_HEADER_BYTES + BURST_REQUEST)];
  for (unsigned i = 0; i < BURST_FRAMES; i++) {
    uint8_t* f = msg + i * (FRAME_HEADER_BYTES + BURST_REQUEST);
    frame_write_header(f, BURST_REQUEST);
    memset(f + FRAME_HEADER_BYTES, (int)i, BURST_REQUEST);
  }
  client_write(c, msg, sizeof(msg));  // one write: the server reads it at once
}


static void burst_tick(tctx_t* t) {
  const uint8_t* p;
  uint32_t n;
  end_when(t, client_frame(&t->clients[0], BURST_FRAMES - 1, &p, &n), 10000,
           "the burst's replies did not all arrive");
}


TEST(server_replies_of_one_turn_leave_in_few_writes_in_order) {
  static tctx_t t;
  const tcase_t tc = {.max_queue = 16u << 20, .frame_cb = burst_echo,
                      .on_connect = burst_connected, .on_timer = burst_tick, .poll_ms = 1};
  ASSERT_OK(tctx_start(&t, &tc));
  ASSERT_EQ(t.nframes, BURST_FRAMES);
  for (int i = 0; i < BURST_FRAMES; i++) {
    ASSERT_OK(expect_payload_frame(&t.clients[0], i, FLOOD_REPLY, (unsigned)i));
  }
  server_stats_t st;
  server_get_stats(t.srv, &st);
  ASSERT_EQ(st.held_bytes, 0);
  // 40 replies of 2 or 3 pieces: at least two batches of 64 pieces; one write each would be
  // 40 (frames the kernel splits over two reads would add one or two)
  ASSERT_TRUE(st.writes >= 2 && st.writes <= 6);
  return tctx_finish(&t);
}


//---------------- what a frame given away and the writes count

// A frame of TAKE_FRAME bytes is read in place (at least 256 KiB) and given to the owner with
// its buffer: from then on it is the owner's to count, not the session's input (the daemon
// counts it with its request: counted twice, a reply of that request could be refused).
#define TAKE_FRAME (300u << 10)


static void take_frame_tick(tctx_t* t) {
  end_once_received(t, FRAME_HEADER_BYTES + 10, 0,
                    "memory counted once the reader gave its frame away and the reply left");
}


static void take_frame_connected(client_t* c) {
  uint8_t* f = payload_new(FRAME_HEADER_BYTES + TAKE_FRAME, 3);
  frame_write_header(f, TAKE_FRAME);
  client_write(c, f, FRAME_HEADER_BYTES + TAKE_FRAME);
  mem_free(f);
  timer_start(c->t, take_frame_tick, 5, 5);
}


static void take_frame_cb(tctx_t* t, session_t* s, const uint8_t* p, size_t len) {
  server_stats_t before, after;
  server_get_stats(t->srv, &before);
  uint8_t* block = session_take_frame(s);
  server_get_stats(t->srv, &after);
  if (before.held_bytes < FRAME_HEADER_BYTES + len) {
    note_bad(t, "the frame being delivered is not counted as the session's input");
  }
  if (!block || block + FRAME_HEADER_BYTES != p) {
    note_bad(t, "the frame was not given with its buffer");
  } else if (after.held_bytes != 0) {
    note_bad(t, "a frame given to its owner still counts as the session's input");
  }
  mem_free(block);
  session_send(s, payload_new(10, 4), 10);  // the client ends the test once it has the reply
}


TEST(server_frame_given_to_its_owner_no_longer_counts_as_input) {
  static tctx_t t;
  g_extra = (server_limits_t){.max_hello_bytes = 1u << 20};
  const tcase_t tc = {.max_queue = 1u << 20, .frame_cb = take_frame_cb, .count_only = 1,
                      .on_connect = take_frame_connected};
  int rc = tctx_start(&t, &tc);
  g_extra = (server_limits_t){0};
  ASSERT_OK(rc);
  ASSERT_EQ(t.nframes, 1);
  ASSERT_OK(expect_payload_frame(&t.clients[0], 0, 10, 4));
  return tctx_finish(&t);
}


// A reply written whole at once counts nothing once session_send returns; one the peer does
// not take yet (LATER_REPLY bytes, more than the kernel's buffers hold) counts its bytes and
// memory until it is written, and so does a reply queued behind it; once the peer has read
// both, nothing of them counts.
#define LATER_REPLY (32u << 20)


static void later_connected(client_t* c) {
  flood_write(c, 1, 'L');  // the session opens; the replies are sent from the timer
}


static void later_tick(tctx_t* t) {
  session_t* s = t->sessions[0];
  client_t* c = &t->clients[0];
  server_stats_t st[4];
  if (t->round == 0) {
    if (t->nframes == 0) {
      return;  // the frame read: the reader's memory is what counts from now on
    }
    server_get_stats(t->srv, &st[0]);
    t->queued_after_open = st[0].held_bytes;
    session_send(s, payload_new(100, 5), 100);
    server_get_stats(t->srv, &st[1]);
    if (st[1].held_bytes != st[0].held_bytes || session_queued_bytes(s) != 0 ||
        st[1].writes != st[0].writes + 1) {
      note_bad(t, "a reply written whole at once still counts, or took more than one write");
    }
    session_send(s, payload_new(LATER_REPLY, 6), LATER_REPLY);
    server_get_stats(t->srv, &st[2]);
    session_send(s, payload_new(100, 7), 100);
    server_get_stats(t->srv, &st[3]);
    if (session_queued_bytes(s) != 2 * FRAME_HEADER_BYTES + LATER_REPLY + 100 ||
        st[2].held_bytes < st[0].held_bytes + LATER_REPLY ||
        st[3].held_bytes <= st[2].held_bytes) {
      note_bad(t, "replies waiting for the peer are not counted");
    }
    client_start_reading(c);
    t->round = 1;
    return;
  }
  end_once_received(t, 3 * FRAME_HEADER_BYTES + 100 + LATER_REPLY + 100, t->queued_after_open,
                    "replies written later still count");
}


TEST(server_write_done_at_once_or_later_releases_what_it_counted) {
  static tctx_t t;
  const tcase_t tc = {.max_queue = 64u << 20, .on_connect = later_connected,
                      .on_timer = later_tick, .poll_ms = 5, .nquiet = 1};
  ASSERT_OK(tctx_start(&t, &tc));
  const client_t* c = &t.clients[0];
  ASSERT_OK(expect_payload_frame(c, 0, 100, 5));
  ASSERT_OK(expect_payload_frame(c, 1, LATER_REPLY, 6));
  ASSERT_OK(expect_payload_frame(c, 2, 100, 7));
  return tctx_finish(&t);
}


// A session closes with writes queued: a large reply in libuv's queue (the peer never reads)
// and a batch of small ones whose write is refused (its array of pieces cannot be allocated).
// The refusal closes the session; the reply that was being queued when it happened is dropped,
// as is everything sent after; once closed, nothing of any of them counts.
#define CLOSING_SMALL 40


static void closing_frame(tctx_t* t, session_t* s, const uint8_t* p, size_t len) {
  (void)p;
  (void)len;
  session_send(s, payload_new(LATER_REPLY, 8), LATER_REPLY);  // leaves with the next one
  for (int i = 0; i < CLOSING_SMALL; i++) {
    uint8_t* reply = payload_new(16, (unsigned)i);
    if (i == 32) {
      // 32 replies of 2 pieces fill a batch (64 pieces): the 33rd sends it, whose array of
      // pieces is the second allocation from here (the first: the 33rd's write record)
      mem_fail_after(2);
    }
    session_send(s, reply, 16);
    if (session_is_closing(s) != (i >= 32)) {
      note_bad(t, "the refused batch did not close the session, or closed it too early");
    }
  }
  mem_fail_after(0);
}


TEST(server_session_closed_with_writes_queued_counts_none_of_them) {
  static tctx_t t;
  const tcase_t tc = {.max_queue = 64u << 20, .frame_cb = closing_frame,
                      .on_connect = later_connected, .close_cb = shutdown_on_close,
                      .nquiet = 1};
  ASSERT_OK(tctx_start(&t, &tc));
  ASSERT_EQ(t.nframes, 1);
  server_stats_t st;
  server_get_stats(t.srv, &st);
  ASSERT_EQ(st.held_bytes, 0);
  return tctx_finish(&t);
}
