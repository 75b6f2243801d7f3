// SPDX-License-Identifier: MIT
// client.c: the connection handle: connect and Hello handshake, requests in flight (a ring of
// slots indexed by id), the filing of every received frame (reply, pushed record, or nobody's),
// waits, the per-handle last error, view memory, and ping.
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"


int64_t sensim_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}


int64_t sensim_deadline(const sensim_client_t* cli, int timeout_ms) {
  if (timeout_ms < 0) {
    timeout_ms = cli->timeout_ms;
    if (timeout_ms <= 0) {
      return -1;
    }
  }
  return sensim_now_ms() + timeout_ms;
}


bool sensim_copy_str(char* dst, size_t cap, const char* src) {
  size_t n = strlen(src);
  if (n >= cap) {
    return false;
  }
  memcpy(dst, src, n + 1);
  return true;
}


sensim_status_t sensim_sized_copy_err(char* err, size_t err_cap, void* local, size_t local_size,
                                      const void* given, const char* what, const char* init) {
  if (given == NULL) {
    return sensim_fail(err, err_cap, SENSIM_INVALID_ARGUMENT, "%s: NULL", what);
  }
  uint32_t size;
  memcpy(&size, given, sizeof(size));
  if (size != local_size) {
    // A smaller size is a program built against an older header (none exists yet: version
    // 1 structs are the smallest); a larger one needs a newer library.
    return sensim_fail(err, err_cap, SENSIM_INVALID_ARGUMENT,
                       "%s.struct_size = %u, this library's is %zu: initialise it with %s%s",
                       what, size, local_size, init,
                       size > local_size ? " (or use the sensim library the program was "
                                           "built against)"
                                         : "");
  }
  memcpy(local, given, local_size);
  return SENSIM_OK;
}


sensim_status_t sensim_sized_copy(sensim_client_t* cli, void* local, size_t local_size,
                                  const void* given, const char* what, const char* init) {
  return sensim_sized_copy_err(cli->last_error, sizeof(cli->last_error), local, local_size,
                               given, what, init);
}

//---------------- Options and accessors

void sensim_options_init_sized(sensim_options_t* opts, size_t size) {
  SENSIM_INIT_SIZED(sensim_options_t, opts, size, {
    d_.role = SENSIM_ROLE_CONTROLLER;
    d_.retention = SENSIM_RETENTION_DEFAULT;
    d_.timeout_ms = CLIENT_DEFAULT_TIMEOUT_MS;
    d_.max_frame_bytes = CLIENT_DEFAULT_MAX_FRAME;
    d_.pushed_max_frames = 1024;
    d_.pushed_max_bytes = (uint64_t)256 << 20;
  });
}


sensim_pose_t sensim_pose_identity(void) {
  sensim_pose_t p = {{0, 0, 0}, {0, 0, 0, 1}};
  return p;
}


const char* sensim_client_last_error(const sensim_client_t* cli) {
  return cli != NULL ? cli->last_error : "no client handle";
}


const char* sensim_client_server_version(const sensim_client_t* cli) {
  return cli != NULL ? cli->server_version : "";
}


const sensim_session_t* sensim_client_session(const sensim_client_t* cli) {
  return cli != NULL ? &cli->session : NULL;
}


int sensim_client_fd(const sensim_client_t* cli) {
  return cli != NULL ? cli->fd : -1;
}


bool sensim_client_want_write(const sensim_client_t* cli) {
  return cli != NULL && cli->fd >= 0 && cli->outq_off < cli->outq_len;
}


uint64_t sensim_client_pushed_dropped(const sensim_client_t* cli) {
  return cli != NULL ? cli->pushed_dropped : 0;
}


uint32_t sensim_client_pushed_queued(const sensim_client_t* cli) {
  return cli != NULL ? cli->pushed_frames : 0;
}

//---------------- Frames and views

sensim_frame_t* sensim_frame_get(sensim_client_t* cli, size_t n) {
  size_t want = n ? n : 1;
  for (sensim_frame_t** pp = &cli->pool; *pp; pp = &(*pp)->next) {
    sensim_frame_t* f = *pp;
    // a buffer much larger than the frame stays for a frame of its size
    if (f->cap >= want && (f->cap <= 4 * want || f->cap <= CLIENT_RBUF_BYTES)) {
      *pp = f->next;
      cli->npool--;
      f->next = NULL;
      f->len = 0;
      return f;
    }
  }
  sensim_frame_t* f = malloc(sizeof(*f));
  if (!f) {
    return NULL;
  }
  size_t cap = want < 1024 ? 1024 : want;
  f->data = malloc(cap);
  if (!f->data) {
    free(f);
    return NULL;
  }
  f->cap = cap;
  f->len = 0;
  f->next = NULL;
  return f;
}


void sensim_frame_put(sensim_client_t* cli, sensim_frame_t* f) {
  if (!f) {
    return;
  }
  if (cli->npool < CLIENT_POOL_FRAMES && f->cap <= CLIENT_POOL_MAX_BYTES) {
    f->next = cli->pool;
    cli->pool = f;
    cli->npool++;
    return;
  }
  free(f->data);
  free(f);
}


static void list_push(sensim_frame_list_t* l, sensim_frame_t* f) {
  f->next = NULL;
  if (l->tail) {
    l->tail->next = f;
  } else {
    l->head = f;
  }
  l->tail = f;
}


static sensim_frame_t* list_pop(sensim_frame_list_t* l) {
  sensim_frame_t* f = l->head;
  if (f) {
    l->head = f->next;
    if (!l->head) {
      l->tail = NULL;
    }
    f->next = NULL;
  }
  return f;
}


static void list_put_all(sensim_client_t* cli, sensim_frame_list_t* l) {
  sensim_frame_t* f;
  while ((f = list_pop(l)) != NULL) {
    sensim_frame_put(cli, f);
  }
}


static void list_free_all(sensim_frame_list_t* l) {
  sensim_frame_t* f;
  while ((f = list_pop(l)) != NULL) {
    free(f->data);
    free(f);
  }
}


void* sensim_arena_alloc(sensim_client_t* cli, size_t n) {
  size_t need = (n + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
  arena_chunk_t* c = cli->arena;
  for (; c; c = c->next) {
    if (c->cap - c->used >= need) {
      break;
    }
  }
  if (!c) {
    size_t cap = need > 16384 ? need : 16384;
    c = malloc(sizeof(*c) + cap);
    if (!c) {
      return NULL;
    }
    c->cap = cap;
    c->used = 0;
    c->next = cli->arena;
    cli->arena = c;
  }
  void* p = (uint8_t*)c->data + c->used;
  c->used += need;
  return p;
}


void* sensim_arena_grow(sensim_client_t* cli, const void* old, uint32_t n, uint32_t* cap,
                        size_t elem) {
  if (n < *cap) {
    return (void*)old;
  }
  uint32_t c = *cap ? 2 * *cap : 16;
  void* v = sensim_arena_alloc(cli, (size_t)c * elem);
  if (v && old) {
    memcpy(v, old, (size_t)n * elem);
  }
  if (v) {
    *cap = c;
  }
  return v;
}


char* sensim_arena_strndup(sensim_client_t* cli, const char* s, size_t n) {
  char* d = sensim_arena_alloc(cli, n + 1);
  if (d) {
    memcpy(d, s, n);
    d[n] = '\0';
  }
  return d;
}


void sensim_views_reset(sensim_client_t* cli) {
  list_put_all(cli, &cli->held);

  // keep the largest chunk (the peak of one call's views), free the others
  arena_chunk_t* keep = NULL;
  for (arena_chunk_t* c = cli->arena; c;) {
    arena_chunk_t* next = c->next;
    if (!keep || c->cap > keep->cap) {
      free(keep);
      keep = c;
    } else {
      free(c);
    }
    c = next;
  }
  if (keep) {
    keep->used = 0;
    keep->next = NULL;
  }
  cli->arena = keep;
}

//---------------- Requests in flight

slot_t* sensim_slot(sensim_client_t* cli, uint64_t id) {
  if (id == 0 || cli->nslots == 0) {
    return NULL;
  }
  slot_t* s = &cli->slots[id & (cli->nslots - 1)];
  return s->id == id ? s : NULL;
}


static void slot_clear(sensim_client_t* cli, slot_t* s) {
  list_put_all(cli, &s->frames);
  free(s->message);
  memset(s, 0, sizeof(*s));
}


// Take the slot of a new request id, growing the ring when an older request holds its place.
// Ids in a ring of C slots are distinct modulo C, hence modulo 2C: growing never collides.
static sensim_status_t slot_take(sensim_client_t* cli, uint64_t id, slot_kind_t kind) {
  while (cli->nslots == 0 || cli->slots[id & (cli->nslots - 1)].id != 0) {
    uint32_t cap = cli->nslots ? 2 * cli->nslots : 16;
    if (cap > CLIENT_MAX_INFLIGHT) {
      uint64_t held = cli->slots[id & (cli->nslots - 1)].id;
      return sensim_cli_fail(cli, SENSIM_RESOURCE_EXHAUSTED,
                             "request %llu, sent %u requests ago, has not been collected (wait "
                             "for it or sensim_discard it; at most %u requests in flight)",
                             (unsigned long long)held, CLIENT_MAX_INFLIGHT, CLIENT_MAX_INFLIGHT);
    }
    slot_t* ring = calloc(cap, sizeof(*ring));
    if (!ring) {
      return sensim_cli_fail(cli, SENSIM_ENOMEM, "out of memory for requests in flight");
    }
    for (uint32_t i = 0; i < cli->nslots; i++) {
      if (cli->slots[i].id != 0) {
        ring[cli->slots[i].id & (cap - 1)] = cli->slots[i];
      }
    }
    free(cli->slots);
    cli->slots = ring;
    cli->nslots = cap;
  }
  slot_t* s = &cli->slots[id & (cli->nslots - 1)];
  memset(s, 0, sizeof(*s));
  s->id = id;
  s->kind = (uint8_t)kind;
  return SENSIM_OK;
}


void sensim_slot_free(sensim_client_t* cli, slot_t* s, bool with_views) {
  if (with_views) {
    sensim_frame_t* f;
    while ((f = list_pop(&s->frames)) != NULL) {
      list_push(&cli->held, f);
    }
  }
  slot_clear(cli, s);
}


void sensim_client_fail_closed(sensim_client_t* cli, sensim_status_t st) {
  if (cli->fd >= 0 || cli->closed_status == SENSIM_OK) {
    cli->closed_status = st;
    snprintf(cli->closed_reason, sizeof(cli->closed_reason), "%s", cli->last_error);
  }
  sensim_transport_close(cli);
  for (uint32_t i = 0; i < cli->nslots; i++) {
    slot_t* s = &cli->slots[i];
    if (s->id == 0 || s->done) {
      continue;
    }
    if (s->discard) {
      sensim_slot_free(cli, s, false);
      continue;
    }
    s->done = true;
    s->status = st;
    list_put_all(cli, &s->frames);
    s->hits = NULL;  // never written again
  }
}


sensim_v1_Envelope* sensim_begin(sensim_client_t* cli, pb_size_t tag) {
  sensim_v1_Envelope* tx = &cli->tx;
  memset(tx, 0, sizeof(*tx));
  tx->has_id = true;
  tx->id = cli->next_id + 1;
  tx->which_body = tag;
  return tx;
}


// A request to queue: its slot taken for id rid (0 and a status when the connection is closed
// or no slot is left).
static sensim_status_t queue_begin(sensim_client_t* cli, uint64_t rid, slot_kind_t kind) {
  if (cli->fd < 0) {
    sensim_gather_reset(&cli->g);
    return sensim_cli_fail(cli, cli->closed_status ? cli->closed_status : SENSIM_ECLOSED,
                           "connection is closed%s%s", cli->closed_reason[0] ? ": " : "",
                           cli->closed_reason);
  }
  return slot_take(cli, rid, kind);
}


// After the request rid was framed into cli->g (status st, `size` bytes; the gather's marks
// before it): a request over the daemon's frame limit would close the connection, so it is
// taken back out and refused here; on any failure the slot is freed, else rid is the id.
static sensim_status_t queue_end(sensim_client_t* cli, uint64_t rid, sensim_status_t st,
                                 size_t size, const sensim_gather_t* before, uint64_t* id) {
  uint32_t limit = cli->session.limits.max_frame_bytes;
  if (st == SENSIM_OK && limit != 0 && size > limit) {
    cli->g.len = before->len;
    cli->g.nholes = before->nholes;
    cli->g.bytes = before->bytes;
    st = sensim_cli_fail(cli, SENSIM_RESOURCE_EXHAUSTED,
                         "request of %zu bytes exceeds the daemon's max_frame_bytes %u", size,
                         limit);
  }
  if (st != SENSIM_OK) {
    sensim_slot_free(cli, sensim_slot(cli, rid), false);
    return st;
  }
  cli->next_id = rid;
  if (id) {
    *id = rid;
  }
  return SENSIM_OK;
}


_Static_assert(sensim_v1_Envelope_sensor_data_tag <= ENVELOPE_MAX_TAG,
               "ENVELOPE_MAX_TAG below the Envelope's last body field");

sensim_status_t sensim_queue(sensim_client_t* cli, slot_kind_t kind, uint64_t* id) {
  uint64_t rid = cli->tx.id;
  sensim_status_t st = queue_begin(cli, rid, kind);
  if (st != SENSIM_OK) {
    return st;
  }
  sensim_gather_t before = {.len = cli->g.len, .nholes = cli->g.nholes, .bytes = cli->g.bytes};
  size_t size = 0;
  const pb_msgdesc_t* fields = sensim_wire_body_fields(cli->body_fields, cli->tx.which_body);
  st = fields ? sensim_wire_frame(&cli->g, rid, cli->tx.which_body, fields, &cli->tx.body, &size,
                                  cli->last_error, sizeof(cli->last_error))
              : sensim_cli_fail(cli, SENSIM_EPROTO, "cannot encode the request: no body %u",
                                (unsigned)cli->tx.which_body);
  return queue_end(cli, rid, st, size, &before, id);
}


sensim_status_t sensim_queue_written(sensim_client_t* cli, slot_kind_t kind,
                                     sensim_frame_writer_t write, const void* arg,
                                     uint64_t* id) {
  uint64_t rid = cli->next_id + 1;
  sensim_status_t st = queue_begin(cli, rid, kind);
  if (st != SENSIM_OK) {
    return st;
  }
  sensim_gather_t before = {.len = cli->g.len, .nholes = cli->g.nholes, .bytes = cli->g.bytes};
  size_t size = 0;
  st = write(&cli->g, rid, arg, &size, cli->last_error, sizeof(cli->last_error));
  return queue_end(cli, rid, st, size, &before, id);
}


// sensim_frame_writer_t of a body encoded already (arg: a body_frame_t).
typedef struct body_frame {
  uint32_t tag;
  const sensim_gather_t* body;
} body_frame_t;

static sensim_status_t write_body_frame(sensim_gather_t* g, uint64_t id, const void* arg,
                                        size_t* size, char* err, size_t err_cap) {
  const body_frame_t* b = arg;
  return sensim_wire_frame_body(g, id, b->tag, b->body, size, err, err_cap);
}


sensim_status_t sensim_queue_body(sensim_client_t* cli, uint32_t tag, const sensim_gather_t* body,
                                  slot_kind_t kind, uint64_t* id) {
  body_frame_t b = {tag, body};
  return sensim_queue_written(cli, kind, write_body_frame, &b, id);
}


sensim_status_t sensim_flush(sensim_client_t* cli) {
  return sensim_transport_send(cli, sensim_deadline(cli, -1));
}


sensim_status_t sensim_send(sensim_client_t* cli, slot_kind_t kind, uint64_t* id) {
  sensim_status_t st = sensim_queue(cli, kind, id);
  return st != SENSIM_OK ? st : sensim_flush(cli);
}

//---------------- Filing received frames

// Keep a frame's bytes: take the owned buffer, or copy out of the read-ahead buffer.
static sensim_frame_t* keep_frame(sensim_client_t* cli, sensim_frame_t* owned, const uint8_t* p,
                                  size_t len) {
  if (owned) {
    return owned;
  }
  sensim_frame_t* f = sensim_frame_get(cli, len);
  if (f) {
    memcpy(f->data, p, len);
    f->len = len;
  }
  return f;
}


static void push_frame(sensim_client_t* cli, sensim_frame_t* f) {
  list_push(&cli->pushed, f);
  cli->pushed_frames++;
  cli->pushed_bytes += f->len;
  while (cli->pushed_frames > 1 && (cli->pushed_frames > cli->pushed_max_frames ||
                                    cli->pushed_bytes > cli->pushed_max_bytes)) {
    sensim_frame_t* old = list_pop(&cli->pushed);
    cli->pushed_frames--;
    cli->pushed_bytes -= old->len;
    cli->pushed_dropped++;
    sensim_frame_put(cli, old);
  }
}


sensim_status_t sensim_client_on_frame(sensim_client_t* cli, sensim_frame_t* owned,
                                       const uint8_t* data, size_t len) {
  sensim_peek_t pk;
  if (!sensim_wire_peek(data, len, &pk)) {
    sensim_frame_put(cli, owned);
    sensim_cli_fail(cli, SENSIM_EPROTO, "the daemon sent a frame that is not an Envelope");
    sensim_client_fail_closed(cli, SENSIM_EPROTO);
    return SENSIM_EPROTO;
  }

  // pushed data, or the daemon refusing the connection just before it closes it
  if (pk.id == 0) {
    if (pk.body == sensim_v1_Envelope_sensor_data_tag) {
      sensim_frame_t* f = keep_frame(cli, owned, data, len);
      if (!f) {
        cli->pushed_dropped++;  // memory ran out: lost like a frame over the queue's bounds
        return SENSIM_OK;
      }
      push_frame(cli, f);
      return SENSIM_OK;
    }
    if (pk.has_status && pk.status_code != 0 && pk.body == 0) {
      sensim_frame_t tmp = {.data = (uint8_t*)data, .len = len};
      sensim_status_t st = sensim_decode_reply(cli, &tmp, 0);
      sensim_frame_put(cli, owned);
      if (st == SENSIM_OK) {
        st = SENSIM_EPROTO;
      }
      sensim_client_fail_closed(cli, st);
      return st;
    }
    sensim_frame_put(cli, owned);
    return SENSIM_OK;
  }

  // a reply: to its slot, or dropped when nobody waits for it
  slot_t* s = sensim_slot(cli, pk.id);
  bool part = pk.body == sensim_v1_Envelope_sensor_data_tag && !pk.has_status;
  if (!s || s->done) {
    sensim_frame_put(cli, owned);
    return SENSIM_OK;
  }
  if (s->discard) {
    sensim_frame_put(cli, owned);
    if (!part) {
      sensim_slot_free(cli, s, false);
    }
    return SENSIM_OK;
  }
  if (s->kind == SLOT_RAYCAST) {
    sensim_raycast_on_frame(cli, s, data, len);
    sensim_frame_put(cli, owned);
    return SENSIM_OK;
  }
  if (part && s->kind == SLOT_STEP) {
    // a peer that never ends the reply must not fill the memory with its parts
    s->nparts++;
    s->part_bytes += len;
    if (s->nparts > SENSIM_STEP_MAX_PARTS || s->part_bytes > SENSIM_STEP_MAX_PART_BYTES) {
      sensim_frame_put(cli, owned);
      sensim_cli_fail(cli, SENSIM_EPROTO, "step %llu: the daemon sent more records ahead of "
                      "its StepDone than the client keeps (SENSIM_STEP_MAX_PARTS = %u frames, "
                      "SENSIM_STEP_MAX_PART_BYTES = %llu bytes)", (unsigned long long)s->id,
                      SENSIM_STEP_MAX_PARTS, (unsigned long long)SENSIM_STEP_MAX_PART_BYTES);
      sensim_client_fail_closed(cli, SENSIM_EPROTO);
      return SENSIM_EPROTO;
    }
  }
  sensim_frame_t* f = keep_frame(cli, owned, data, len);
  if (!f) {
    sensim_cli_fail(cli, SENSIM_ENOMEM, "out of memory for a reply");
    sensim_client_fail_closed(cli, SENSIM_ENOMEM);
    return SENSIM_ENOMEM;
  }
  list_push(&s->frames, f);
  if (!(part && s->kind == SLOT_STEP)) {
    s->done = true;
    s->code = pk.has_status ? pk.status_code : 0;
    s->body = pk.body;
  }
  return SENSIM_OK;
}

//---------------- Decoding replies

// The Envelope's body callback: nanopb has selected the oneof member and zeroed it; callbacks
// inside the member must be set now, or they would be lost.
static bool select_body(pb_istream_t* stream, const pb_field_t* field, void** arg) {
  (void)stream;
  sensim_client_t* cli = *arg;
  void* ctx = field->tag == cli->dec_body ? cli->dec : NULL;
  switch (field->tag) {
    case sensim_v1_Envelope_info_tag:
      sensim_info_select(field->pData, ctx);
      break;
    case sensim_v1_Envelope_step_done_tag:
      sensim_step_select(field->pData, ctx);
      break;
    case sensim_v1_Envelope_raycast_result_tag:
      sensim_raycast_select(field->pData, ctx);
      break;
    case sensim_v1_Envelope_sensor_data_tag:
      sensim_data_select(field->pData, ctx);
      break;
    case sensim_v1_Envelope_description_tag:
      sensim_describe_select(field->pData, ctx);
      break;
    default:
      break;
  }
  return true;
}


sensim_status_t sensim_decode_envelope(sensim_client_t* cli, pb_istream_t* in) {
  sensim_v1_Envelope* rx = &cli->rx;
  memset(rx, 0, sizeof(*rx));
  rx->cb_body.funcs.decode = select_body;
  rx->cb_body.arg = cli;
  cli->dec_failed = SENSIM_OK;
  if (!pb_decode_ex(in, sensim_v1_Envelope_fields, rx, cli->noinit_envelope)) {
    sensim_reader_t* r = in->state;
    if (r->failure != SENSIM_OK) {
      return r->failure;  // the socket failed; the connection is closed
    }
    if (cli->dec_failed != SENSIM_OK) {
      return cli->dec_failed;  // a callback's own failure (its message is set)
    }
    return sensim_cli_fail(cli, SENSIM_EPROTO, "cannot decode a reply: %s", PB_GET_ERROR(in));
  }
  return SENSIM_OK;
}


sensim_status_t sensim_decode_reply(sensim_client_t* cli, const sensim_frame_t* f,
                                    pb_size_t want_body) {
  sensim_reader_t r = {.base = f->data, .cli = cli};
  pb_istream_t in = sensim_wire_istream(&r, f->len);
  sensim_status_t st = sensim_decode_envelope(cli, &in);
  if (st != SENSIM_OK) {
    if (st == SENSIM_EPROTO) {
      sensim_client_fail_closed(cli, st);
    }
    return st;
  }
  const sensim_v1_Envelope* rx = &cli->rx;
  if (rx->has_status && rx->status.code != sensim_v1_StatusCode_OK) {
    return sensim_status_from_wire((int32_t)rx->status.code, rx->status.message, cli->last_error,
                                   sizeof(cli->last_error));
  }
  if (want_body != 0 && rx->which_body != want_body) {
    sensim_cli_fail(cli, SENSIM_EPROTO, "reply %llu carries body %u, expected %u",
                    (unsigned long long)rx->id, (unsigned)rx->which_body, (unsigned)want_body);
    sensim_client_fail_closed(cli, SENSIM_EPROTO);
    return SENSIM_EPROTO;
  }
  return SENSIM_OK;
}

//---------------- Waits

static const char* kind_wait(slot_kind_t kind) {
  switch (kind) {
    case SLOT_STEP:
      return "sensim_step_wait";
    case SLOT_RAYCAST:
      return "sensim_raycast_wait";
    default:
      return "sensim_wait";
  }
}


sensim_status_t sensim_wait_slot(sensim_client_t* cli, uint64_t id, int timeout_ms,
                                 slot_kind_t kind, slot_t** out) {
  *out = NULL;
  slot_t* s = sensim_slot(cli, id);
  if (!s || s->discard) {
    return sensim_cli_fail(cli, SENSIM_INVALID_ARGUMENT, "id: request %llu is not in flight",
                           (unsigned long long)id);
  }
  bool status_only = kind == SLOT_STATUS && s->kind != SLOT_STEP && s->kind != SLOT_RAYCAST;
  if (s->kind != kind && !status_only) {
    return sensim_cli_fail(cli, SENSIM_INVALID_ARGUMENT,
                           "id: request %llu is collected with %s", (unsigned long long)id,
                           kind_wait((slot_kind_t)s->kind));
  }

  // A blocking wait may stream a raycast reply into its hits: a frame cut short by the
  // deadline closes the connection anyway. A wait with its own timeout keeps frames whole in
  // memory, so that it can return EAGAIN and be resumed.
  int64_t deadline = s->done ? -1 : sensim_deadline(cli, timeout_ms);  // no clock read when in
  bool blocking = timeout_ms < 0;
  cli->stream_ok = blocking;
  cli->stream_deadline = deadline;
  sensim_status_t st = SENSIM_OK;
  while (!s->done) {
    st = sensim_transport_pump(cli, deadline);
    if (st == SENSIM_EAGAIN) {
      if (blocking) {
        sensim_cli_fail(cli, SENSIM_ETIMEDOUT, "no reply to request %llu within %d ms",
                        (unsigned long long)id, cli->timeout_ms);
        sensim_client_fail_closed(cli, SENSIM_ETIMEDOUT);
        st = SENSIM_ETIMEDOUT;
      } else {
        st = sensim_cli_fail(cli, SENSIM_EAGAIN, "request %llu: no reply within %d ms",
                             (unsigned long long)id, timeout_ms);
      }
      break;
    }
    if (st != SENSIM_OK && !s->done) {
      break;
    }
    st = SENSIM_OK;
  }
  cli->stream_ok = false;
  if (!s->done) {
    return st;
  }

  // failed with the connection
  if (s->kind != SLOT_RAYCAST && s->frames.head == NULL) {
    st = s->status != SENSIM_OK ? s->status : SENSIM_ECLOSED;
    sensim_slot_free(cli, s, false);
    return sensim_cli_fail(cli, st, "%s", cli->closed_reason[0] ? cli->closed_reason
                                                                : "connection closed");
  }
  *out = s;
  return SENSIM_OK;
}


sensim_status_t sensim_wait(sensim_client_t* cli, uint64_t id, int timeout_ms) {
  if (!cli) {
    return SENSIM_INVALID_ARGUMENT;
  }
  slot_t* s;
  sensim_status_t st = sensim_wait_slot(cli, id, timeout_ms, SLOT_STATUS, &s);
  if (st != SENSIM_OK) {
    return st;
  }
  // a reply with status OK and no body (the frame was walked on arrival) needs no decoding
  if (s->code == 0 && s->body == 0) {
    sensim_slot_free(cli, s, false);
    return SENSIM_OK;
  }
  st = sensim_decode_reply(cli, s->frames.head, 0);
  sensim_slot_free(cli, s, false);
  return st;
}


sensim_status_t sensim_call_status(sensim_client_t* cli) {
  uint64_t id = 0;
  sensim_status_t st = sensim_send(cli, SLOT_STATUS, &id);
  if (st == SENSIM_OK && cli->deferred != NULL) {
    // shard.c collects the reply itself, after sending the request to every shard
    *cli->deferred = id;
    cli->deferred = NULL;
    return SENSIM_OK;
  }
  return st != SENSIM_OK ? st : sensim_wait(cli, id, -1);
}


sensim_status_t sensim_discard(sensim_client_t* cli, uint64_t id) {
  if (!cli) {
    return SENSIM_INVALID_ARGUMENT;
  }
  slot_t* s = sensim_slot(cli, id);
  if (!s || s->discard) {
    return sensim_cli_fail(cli, SENSIM_INVALID_ARGUMENT, "id: request %llu is not in flight",
                           (unsigned long long)id);
  }
  if (s->done) {
    sensim_slot_free(cli, s, false);
  } else {
    s->discard = true;
    s->hits = NULL;
  }
  return SENSIM_OK;
}


sensim_status_t sensim_client_pump(sensim_client_t* cli, int timeout_ms) {
  if (!cli) {
    return SENSIM_INVALID_ARGUMENT;
  }
  sensim_status_t st = sensim_transport_pump(cli, sensim_deadline(cli, timeout_ms));
  return st == SENSIM_EAGAIN ? SENSIM_OK : st;
}

//---------------- Connection

// Send Hello with the options and check the reply.
static sensim_status_t handshake(sensim_client_t* cli, const sensim_options_t* opts) {
  sensim_v1_Envelope* tx = sensim_begin(cli, sensim_v1_Envelope_hello_tag);
  sensim_v1_Hello* hello = &tx->body.hello;
  hello->has_protocol_version = true;
  hello->protocol_version = sensim_v1_ProtocolVersion_PROTOCOL_VERSION;
  hello->has_role = true;
  hello->role = (sensim_v1_Role)opts->role;
  if (opts->retention != SENSIM_RETENTION_DEFAULT) {
    hello->has_retention = true;
    hello->retention = (sensim_v1_Retention)opts->retention;
  }

  // strings, checked against the nanopb field sizes
  const char* name = opts->client_name != NULL ? opts->client_name : "sensim-c";
  hello->has_client_name = true;
  if (!sensim_copy_str(hello->client_name, sizeof(hello->client_name), name)) {
    return sensim_cli_fail(cli, SENSIM_INVALID_ARGUMENT, "options.client_name: longer than %zu "
                           "bytes", sizeof(hello->client_name) - 1);
  }
  if (opts->environment != NULL && opts->environment[0] != '\0') {
    hello->has_environment = true;
    if (!sensim_copy_str(hello->environment, sizeof(hello->environment), opts->environment)) {
      return sensim_cli_fail(cli, SENSIM_INVALID_ARGUMENT, "options.environment: longer than "
                             "%zu bytes", sizeof(hello->environment) - 1);
    }
  }
  if (opts->token != NULL) {
    hello->has_token = true;
    if (!sensim_copy_str(hello->token, sizeof(hello->token), opts->token)) {
      return sensim_cli_fail(cli, SENSIM_INVALID_ARGUMENT, "options.token: longer than %zu bytes",
                             sizeof(hello->token) - 1);
    }
  }

  uint64_t id;
  sensim_status_t st = sensim_send(cli, SLOT_HELLO, &id);
  slot_t* s = NULL;
  if (st == SENSIM_OK) {
    st = sensim_wait_slot(cli, id, -1, SLOT_HELLO, &s);
  }
  if (st != SENSIM_OK) {
    return st;
  }
  st = sensim_decode_reply(cli, s->frames.head, sensim_v1_Envelope_hello_reply_tag);
  sensim_slot_free(cli, s, false);
  if (st != SENSIM_OK) {
    return st;
  }
  const sensim_v1_HelloReply* reply = &cli->rx.body.hello_reply;
  if (reply->has_protocol_version &&
      reply->protocol_version != sensim_v1_ProtocolVersion_PROTOCOL_VERSION) {
    sensim_cli_fail(cli, SENSIM_EPROTO, "daemon speaks protocol_version %u, this client %u",
                    (unsigned)reply->protocol_version,
                    (unsigned)sensim_v1_ProtocolVersion_PROTOCOL_VERSION);
    sensim_client_fail_closed(cli, SENSIM_EPROTO);
    return SENSIM_EPROTO;
  }

  // the session, kept for the handle's lifetime
  snprintf(cli->server_version, sizeof(cli->server_version), "%s", reply->server_version);
  snprintf(cli->environment, sizeof(cli->environment), "%s", reply->environment);
  sensim_session_t* ss = &cli->session;
  ss->server_version = cli->server_version;
  ss->environment = cli->environment;
  ss->protocol_version = reply->protocol_version;
  ss->session_id = reply->session_id;
  ss->environment_created = reply->environment_created;
  ss->threads = reply->threads;
  ss->features = reply->features;
  if (reply->has_limits) {
    sensim_limits_from(&reply->limits, &ss->limits);
  }
  return SENSIM_OK;
}


sensim_status_t sensim_client_connect(const char* host, uint16_t port,
                                      const sensim_options_t* opts, sensim_client_t** out) {
  if (out == NULL) {
    return SENSIM_INVALID_ARGUMENT;
  }
  *out = NULL;
  sensim_client_t* cli = calloc(1, sizeof(*cli));
  if (cli == NULL) {
    return SENSIM_ENOMEM;
  }
  *out = cli;
  cli->fd = -1;
  cli->noinit_envelope = sensim_wire_noinit_envelope();
  cli->noinit_data = sensim_wire_noinit_data();
  cli->server_version[0] = cli->environment[0] = '\0';
  cli->session.server_version = cli->server_version;
  cli->session.environment = cli->environment;
  sensim_options_t o;
  sensim_options_init(&o);
  cli->timeout_ms = o.timeout_ms;
  cli->max_frame_in = o.max_frame_bytes;
  if (opts != NULL) {
    sensim_status_t st = sensim_sized_copy(cli, &o, sizeof(o), opts, "options",
                                           "sensim_options_init");
    if (st != SENSIM_OK) {
      return st;
    }
  }
  if (o.role != SENSIM_ROLE_CONTROLLER && o.role != SENSIM_ROLE_OBSERVER) {
    return sensim_cli_fail(cli, SENSIM_INVALID_ARGUMENT, "options.role = %d is not "
                           "SENSIM_ROLE_CONTROLLER (0) or SENSIM_ROLE_OBSERVER (1)", (int)o.role);
  }
  if ((unsigned)o.retention > SENSIM_RETENTION_KEEP) {
    return sensim_cli_fail(cli, SENSIM_INVALID_ARGUMENT, "options.retention = %d is not a "
                           "sensim_retention_t", (int)o.retention);
  }
  if (o.max_frame_bytes != 0 && o.max_frame_bytes < 1024) {
    return sensim_cli_fail(cli, SENSIM_INVALID_ARGUMENT, "options.max_frame_bytes = %u: at "
                           "least 1024 (0 = the default)", o.max_frame_bytes);
  }
  cli->timeout_ms = o.timeout_ms;
  cli->nonblocking = o.nonblocking;
  cli->max_frame_in = o.max_frame_bytes != 0 ? o.max_frame_bytes : CLIENT_DEFAULT_MAX_FRAME;
  cli->pushed_max_frames = o.pushed_max_frames ? o.pushed_max_frames : 1;
  cli->pushed_max_bytes = o.pushed_max_bytes;

  // connect, then Hello; a failed handshake leaves the handle closed with the reason
  sensim_status_t st = sensim_transport_connect(cli, host && host[0] ? host : "127.0.0.1", port);
  if (st == SENSIM_OK) {
    st = handshake(cli, &o);
  }
  if (st != SENSIM_OK) {
    if (cli->fd >= 0) {
      sensim_client_fail_closed(cli, st);
    }
    cli->closed_status = st;
  }
  return st;
}


void sensim_client_close(sensim_client_t* cli) {
  if (cli == NULL) {
    return;
  }
  sensim_transport_close(cli);
  for (uint32_t i = 0; i < cli->nslots; i++) {
    if (cli->slots[i].id != 0) {
      slot_clear(cli, &cli->slots[i]);
    }
  }
  free(cli->slots);
  list_free_all(&cli->pushed);
  list_free_all(&cli->held);
  list_free_all(&(sensim_frame_list_t){cli->pool, NULL});
  for (arena_chunk_t* c = cli->arena; c;) {
    arena_chunk_t* next = c->next;
    free(c);
    c = next;
  }
  sensim_gather_free(&cli->g);
  free(cli->outq);
  free(cli->rbuf);
  free(cli);
}

//---------------- Ping

sensim_status_t sensim_ping(sensim_client_t* cli, const void* payload, size_t len,
                            uint64_t* server_time_ns) {
  if (!cli) {
    return SENSIM_INVALID_ARGUMENT;
  }
  sensim_v1_Envelope* tx = sensim_begin(cli, sensim_v1_Envelope_ping_tag);
  sensim_v1_Ping* ping = &tx->body.ping;
  if (len > sizeof(ping->payload.bytes)) {
    return sensim_cli_fail(cli, SENSIM_INVALID_ARGUMENT, "len: %zu bytes of payload, at most %zu",
                           len, sizeof(ping->payload.bytes));
  }
  if (len > 0 && payload == NULL) {
    return sensim_cli_fail(cli, SENSIM_INVALID_ARGUMENT, "payload: NULL with len %zu", len);
  }
  if (len > 0) {
    ping->has_payload = true;
    ping->payload.size = (pb_size_t)len;
    memcpy(ping->payload.bytes, payload, len);
  }
  uint64_t id;
  slot_t* s = NULL;
  sensim_status_t st = sensim_send(cli, SLOT_PING, &id);
  if (st == SENSIM_OK) {
    st = sensim_wait_slot(cli, id, -1, SLOT_PING, &s);
  }
  if (st != SENSIM_OK) {
    return st;
  }
  st = sensim_decode_reply(cli, s->frames.head, sensim_v1_Envelope_pong_tag);
  sensim_slot_free(cli, s, false);
  if (st != SENSIM_OK) {
    return st;
  }
  const sensim_v1_Pong* pong = &cli->rx.body.pong;
  size_t echoed = pong->has_payload ? pong->payload.size : 0;
  if (echoed != len || (len > 0 && memcmp(pong->payload.bytes, payload, len) != 0)) {
    return sensim_cli_fail(cli, SENSIM_EPROTO, "pong payload differs from the ping (%zu bytes "
                           "sent, %zu echoed)", len, echoed);
  }
  if (server_time_ns != NULL) {
    *server_time_ns = pong->server_time_ns;
  }
  return SENSIM_OK;
}
