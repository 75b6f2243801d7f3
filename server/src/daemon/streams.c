// SPDX-License-Identifier: MIT
// streams.c: subscriptions, their queues and the demand table (see streams.h).
//
// Sequence numbers: a subscription numbers the frames it is given, 1, 2, ...; its queue only
// ever drops its oldest frames and sends its oldest, so the frames queued are always
// consecutive and the head's number is (last given - queued + 1). A frame too large for the
// budget alone drops everything queued before it, then itself, which keeps that true.
#include "daemon/streams.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "base/list.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/pool.h"
#include "net/stream_queue.h"
#include "net/wire_stream.h"

// Frames a queue may hold whatever their size (the byte budget is the real bound).
#define QUEUE_MAX_FRAMES 65536u
// Closed slow subscribers remembered for GetInfo.
#define RECENT_CLOSED 16u

typedef struct demand {
  const void* env_key;
  uint32_t sensor_id;
  wire_stream_params_t p;
  uint32_t refs;
} demand_t;

typedef struct sub {
  list_node_t node;             // in st->subs
  session_t* s;
  const void* env_key;
  char env_name[64];
  uint32_t sensor_id;
  wire_stream_params_t p;
  stream_queue_t q;
  uint64_t seq;                 // last sequence number given
  uint64_t held;                // q.bytes counted in the server's budget
  uint64_t served;              // round-robin stamp among the session's subscriptions
  uint64_t soft_since_ns;       // above soft_bytes since (0: below)
  int ended;                    // the end_of_stream frame is queued; no more frames
  wire_sub_info_t info;         // counters (frames/bytes sent and dropped)
} sub_t;

typedef struct recent {
  wire_sub_info_t info;
  char env_name[64];
  char peer[64];
  char reason[160];
} recent_t;

typedef struct batch_frame {
  uint32_t sensor_id;
  wire_stream_params_t p;
  shared_buf_t* buf;
} batch_frame_t;

struct streams_batch {
  batch_frame_t* f;
  uint32_t n;
};

struct streams {
  server_t* srv;
  pool_t* pool;                 // encodes a step's frames in parallel (nullable)
  streams_config_t cfg;
  list_t subs;
  uint64_t serve_clock;
  uint64_t frames_dropped;
  uint64_t bytes_dropped;
  uint64_t closed;
  recent_t recent[RECENT_CLOSED];
  uint32_t nrecent;             // remembered, at most RECENT_CLOSED
  uint32_t recent_next;         // slot of the next one

  // Guards the demand table: read by step jobs on executor threads, written by the loop and
  // by subscribe jobs. Held only to copy or change the small table, never while encoding.
  pthread_mutex_t mu;
  demand_t* demand;
  uint32_t ndemand;
  uint32_t demand_cap;
};


streams_t* streams_create(server_t* srv, pool_t* pool, const streams_config_t* cfg) {
  streams_t* st = mem_calloc(1, sizeof(*st));
  if (!st) {
    return NULL;
  }
  st->srv = srv;
  st->pool = pool;
  st->cfg = *cfg;
  list_init(&st->subs);
  pthread_mutex_init(&st->mu, NULL);
  return st;
}


static void sub_free(streams_t* st, sub_t* sub) {
  list_remove(&sub->node);
  server_hold(st->srv, -(int64_t)sub->held);
  stream_queue_close(&sub->q);
  mem_free(sub);
}


void streams_destroy(streams_t* st) {
  if (!st) {
    return;
  }
  list_node_t* n;
  while ((n = list_front(&st->subs)) != NULL) {
    sub_free(st, container_of(n, sub_t, node));
  }
  pthread_mutex_destroy(&st->mu);
  mem_free(st->demand);
  mem_free(st);
}


//---------------- demand

int streams_demand_add(streams_t* st, const void* env_key, uint32_t sensor_id,
                       const wire_stream_params_t* p) {
  int rc = 0;
  pthread_mutex_lock(&st->mu);
  for (uint32_t i = 0; i < st->ndemand; i++) {
    demand_t* d = &st->demand[i];
    if (d->env_key == env_key && d->sensor_id == sensor_id &&
        wire_stream_params_equal(&d->p, p)) {
      d->refs++;
      goto out;
    }
  }
  if (st->ndemand == st->demand_cap) {
    uint32_t cap = st->demand_cap ? 2 * st->demand_cap : 16;
    demand_t* grown = mem_realloc(st->demand, cap * sizeof(*grown));
    if (!grown) {
      rc = ERR_NOMEM;
      goto out;
    }
    st->demand = grown;
    st->demand_cap = cap;
  }
  st->demand[st->ndemand++] = (demand_t){env_key, sensor_id, *p, 1};
out:
  pthread_mutex_unlock(&st->mu);
  return rc;
}


void streams_demand_remove(streams_t* st, const void* env_key, uint32_t sensor_id,
                           const wire_stream_params_t* p) {
  pthread_mutex_lock(&st->mu);
  for (uint32_t i = 0; i < st->ndemand; i++) {
    demand_t* d = &st->demand[i];
    if (d->env_key == env_key && d->sensor_id == sensor_id &&
        wire_stream_params_equal(&d->p, p)) {
      if (--d->refs == 0) {
        st->demand[i] = st->demand[--st->ndemand];
      }
      break;
    }
  }
  pthread_mutex_unlock(&st->mu);
}


//---------------- encoding

// One frame to encode: a record in one encoding, or a share of another task's frame.
typedef struct encode_task {
  const sensor_record_t* rec;
  wire_stream_params_t p;
  double start_time;
  shared_buf_t* buf;            // the result; NULL when it could not be encoded
  int64_t share_of;             // index of the task whose frame this one shares, or -1
} encode_task_t;


static void encode_range(void* ctx, size_t begin, size_t end) {
  encode_task_t* tasks = ctx;
  for (size_t k = begin; k < end; k++) {
    encode_task_t* t = &tasks[k];
    err_msg_t msg;
    if (t->share_of < 0 && wire_stream_encode(t->rec, t->start_time, &t->p, &t->buf, &msg)) {
      t->buf = NULL;
      LOG_WARN("sensor %u: frame %llu not encoded as %s: %s", t->rec->sensor_id,
               (unsigned long long)t->rec->frame, codec_name(t->p.codec.encoding), msg.text);
    }
  }
}


streams_batch_t* streams_encode(streams_t* st, const void* env_key, const sensor_out_t* recs,
                                double start_time) {
  if (recs->n == 0) {
    return NULL;
  }

  // what is wanted now, copied so that encoding runs without the lock
  demand_t* want = NULL;
  uint32_t nwant = 0;
  pthread_mutex_lock(&st->mu);
  for (uint32_t i = 0; i < st->ndemand; i++) {
    nwant += st->demand[i].env_key == env_key;
  }
  if (nwant) {
    want = mem_alloc(nwant * sizeof(*want));
    nwant = 0;
    for (uint32_t i = 0; want && i < st->ndemand; i++) {
      if (st->demand[i].env_key == env_key) {
        want[nwant++] = st->demand[i];
      }
    }
  }
  pthread_mutex_unlock(&st->mu);
  if (!want) {
    return NULL;
  }

  // each record once per wanted encoding (other records than clouds once for all), the
  // encodings in parallel on the worker pool
  streams_batch_t* b = mem_calloc(1, sizeof(*b));
  encode_task_t* tasks = mem_alloc((size_t)recs->n * nwant * sizeof(*tasks) + 1);
  if (b) {
    b->f = mem_alloc((size_t)recs->n * nwant * sizeof(*b->f) + 1);
  }
  if (!b || !b->f || !tasks) {
    LOG_ERROR("out of memory encoding sensor frames for subscribers");
    if (b) {
      mem_free(b->f);
    }
    mem_free(b);
    mem_free(tasks);
    mem_free(want);
    return NULL;
  }
  uint32_t ntask = 0;
  for (uint32_t r = 0; r < recs->n; r++) {
    const sensor_record_t* rec = &recs->rec[r];
    int64_t first = -1;
    for (uint32_t w = 0; w < nwant; w++) {
      if (want[w].sensor_id != rec->sensor_id) {
        continue;
      }
      int share = rec->kind != SENSOR_REC_CLOUD && first >= 0;
      tasks[ntask] = (encode_task_t){rec, want[w].p, start_time, NULL, share ? first : -1};
      first = first >= 0 ? first : (int64_t)ntask;
      ntask++;
    }
  }
  pool_parallel_for(st->pool, ntask, 1, encode_range, tasks);
  for (uint32_t k = 0; k < ntask; k++) {
    encode_task_t* t = &tasks[k];
    if (t->share_of >= 0 && tasks[t->share_of].buf) {
      t->buf = shared_buf_retain(tasks[t->share_of].buf);
    }
    if (t->buf) {
      b->f[b->n++] = (batch_frame_t){t->rec->sensor_id, t->p, t->buf};
    }
  }
  mem_free(tasks);
  mem_free(want);
  return b;
}


void streams_batch_free(streams_batch_t* b) {
  if (!b) {
    return;
  }
  for (uint32_t i = 0; i < b->n; i++) {
    shared_buf_release(b->f[i].buf);
  }
  mem_free(b->f);
  mem_free(b);
}


//---------------- subscriptions

static sub_t* find_sub(streams_t* st, session_t* s, uint32_t sensor_id) {
  for (list_node_t* n = st->subs.head.next; n != &st->subs.head; n = n->next) {
    sub_t* sub = container_of(n, sub_t, node);
    if (sub->s == s && sub->sensor_id == sensor_id && !sub->ended) {
      return sub;
    }
  }
  return NULL;
}


int streams_subscribe(streams_t* st, session_t* s, const void* env_key, const char* env_name,
                      uint32_t sensor_id, const wire_stream_params_t* p) {
  if (find_sub(st, s, sensor_id)) {
    return ERR_EXISTS;
  }
  sub_t* sub = mem_calloc(1, sizeof(*sub));
  if (!sub || stream_queue_init(&sub->q, QUEUE_MAX_FRAMES, st->cfg.max_bytes) != 0) {
    mem_free(sub);
    return ERR_NOMEM;
  }
  sub->s = s;
  sub->env_key = env_key;
  snprintf(sub->env_name, sizeof(sub->env_name), "%s", env_name);
  sub->sensor_id = sensor_id;
  sub->p = *p;
  sub->info.session_id = session_id(s);
  sub->info.sensor_id = sensor_id;
  sub->info.encoding = p->codec.encoding;
  sub->info.precision = p->codec.precision;
  list_push_back(&st->subs, &sub->node);
  return 0;
}


// Count the queue's bytes in the server's budget.
static void sync_held(streams_t* st, sub_t* sub) {
  int64_t delta = (int64_t)sub->q.bytes - (int64_t)sub->held;
  if (delta) {
    server_hold(st->srv, delta);
    sub->held = sub->q.bytes;
  }
}


static void end_sub(streams_t* st, sub_t* sub) {
  if (!sub->ended) {
    streams_demand_remove(st, sub->env_key, sub->sensor_id, &sub->p);
  }
  sub_free(st, sub);
}


int streams_unsubscribe(streams_t* st, session_t* s, uint32_t sensor_id) {
  sub_t* sub = find_sub(st, s, sensor_id);
  if (!sub) {
    return ERR_NOTFOUND;
  }
  sub->info.frames_dropped += sub->q.count;
  sub->info.bytes_dropped += sub->q.bytes;
  end_sub(st, sub);
  return 0;
}


// Send the next frame of one of s's subscriptions when nothing of its streams is in the
// kernel writer: the subscription served longest ago first.
static void pump(streams_t* st, session_t* s) {
  if (session_stream_bytes(s) > 0 || session_is_closing(s)) {
    return;
  }
  sub_t* pick = NULL;
  for (list_node_t* n = st->subs.head.next; n != &st->subs.head; n = n->next) {
    sub_t* sub = container_of(n, sub_t, node);
    if (sub->s == s && sub->q.count && (!pick || sub->served < pick->served)) {
      pick = sub;
    }
  }
  if (!pick) {
    return;
  }
  uint64_t seq = pick->seq - pick->q.count + 1;
  shared_buf_t* b = stream_queue_pop(&pick->q);
  sync_held(st, pick);
  pick->served = ++st->serve_clock;
  uint8_t prefix[WIRE_STREAM_PREFIX_MAX];
  size_t plen = wire_stream_prefix(seq, prefix);
  pick->info.frames_sent++;
  pick->info.bytes_sent += shared_buf_frame_len(b) + plen;
  if (session_send_stream(s, b, prefix, plen) != 0) {
    LOG_WARN("session %llu: out of memory sending a sensor frame",
             (unsigned long long)session_id(s));
  }
  shared_buf_release(b);
}


// Free the ended subscriptions whose last frame has left.
static void reap(streams_t* st) {
  for (list_node_t* n = st->subs.head.next; n != &st->subs.head;) {
    sub_t* sub = container_of(n, sub_t, node);
    n = n->next;
    if (sub->ended && sub->q.count == 0) {
      sub_free(st, sub);
    }
  }
}


static void remember_closed(streams_t* st, const sub_t* sub, const char* reason) {
  recent_t* r = &st->recent[st->recent_next];
  st->recent_next = (st->recent_next + 1) % RECENT_CLOSED;
  st->nrecent += st->nrecent < RECENT_CLOSED;
  r->info = sub->info;
  snprintf(r->env_name, sizeof(r->env_name), "%s", sub->env_name);
  snprintf(r->peer, sizeof(r->peer), "%s", session_peer(sub->s));
  snprintf(r->reason, sizeof(r->reason), "%s", reason);
  r->info.queued_bytes = sub->q.bytes;
  r->info.queued_frames = sub->q.count;
}


// A subscription above the soft limit for too long closes its connection.
static int check_soft(streams_t* st, sub_t* sub, uint64_t now_ns) {
  if (!st->cfg.soft_ms || sub->q.bytes <= st->cfg.soft_bytes) {
    sub->soft_since_ns = 0;
    return 0;
  }
  if (!sub->soft_since_ns) {
    sub->soft_since_ns = now_ns;
    return 0;
  }
  if (now_ns - sub->soft_since_ns < (uint64_t)st->cfg.soft_ms * 1000000u) {
    return 0;
  }
  char reason[160];
  snprintf(reason, sizeof(reason), "slow subscriber: sensor %u queued above %llu bytes "
           "(--subscriber-soft-bytes) for %u ms (--subscriber-soft-seconds)", sub->sensor_id,
           (unsigned long long)st->cfg.soft_bytes, st->cfg.soft_ms);
  LOG_WARN("session %llu (%s): %s; closing", (unsigned long long)session_id(sub->s),
           session_peer(sub->s), reason);
  remember_closed(st, sub, reason);
  st->closed++;
  session_t* s = sub->s;
  streams_session_closed(st, s);
  session_close(s);
  return 1;
}


// Queue frame b (numbered next) on sub, dropping its oldest frames past the budgets.
static void push(streams_t* st, sub_t* sub, shared_buf_t* b) {
  sub->seq++;
  uint64_t len = shared_buf_frame_len(b);
  uint64_t frames = 0, bytes = 0;

  // the daemon-wide budget: this subscription's oldest frames make room first
  server_stats_t ss;
  server_get_stats(st->srv, &ss);
  uint64_t cap = st->cfg.max_held_bytes;
  while (cap && ss.held_bytes + len > cap && sub->q.count) {
    shared_buf_t* old = stream_queue_pop(&sub->q);
    uint64_t old_len = shared_buf_frame_len(old);
    frames++;
    bytes += old_len;
    ss.held_bytes = ss.held_bytes > old_len ? ss.held_bytes - old_len : 0;
    shared_buf_release(old);
  }
  if ((cap && ss.held_bytes + len > cap) || (sub->q.max_bytes && len > sub->q.max_bytes)) {
    // too large for a budget: everything older goes too, so the queue stays consecutive
    for (shared_buf_t* old = stream_queue_pop(&sub->q); old; old = stream_queue_pop(&sub->q)) {
      frames++;
      bytes += shared_buf_frame_len(old);
      shared_buf_release(old);
    }
    frames++;
    bytes += len;
  } else {
    uint64_t dropped = sub->q.dropped, queued = sub->q.bytes;
    if (stream_queue_push(&sub->q, b) != 0) {
      frames++;
      bytes += len;
    } else {
      frames += sub->q.dropped - dropped;
      bytes += queued + len - sub->q.bytes;
    }
  }
  sub->info.frames_dropped += frames;
  sub->info.bytes_dropped += bytes;
  st->frames_dropped += frames;
  st->bytes_dropped += bytes;
  sync_held(st, sub);
}


void streams_publish(streams_t* st, const void* env_key, streams_batch_t* b) {
  if (!b) {
    return;
  }

  // queue every frame on every subscription that wants it
  for (uint32_t i = 0; i < b->n; i++) {
    for (list_node_t* n = st->subs.head.next; n != &st->subs.head; n = n->next) {
      sub_t* sub = container_of(n, sub_t, node);
      if (sub->env_key == env_key && sub->sensor_id == b->f[i].sensor_id && !sub->ended &&
          wire_stream_params_equal(&sub->p, &b->f[i].p) && !session_is_closing(sub->s)) {
        push(st, sub, b->f[i].buf);
      }
    }
  }
  streams_batch_free(b);

  // slow subscribers go (closing frees every subscription of the connection: start over)
  uint64_t now = clock_now_ns();
  for (list_node_t* n = st->subs.head.next; n != &st->subs.head;) {
    sub_t* sub = container_of(n, sub_t, node);
    if (sub->env_key == env_key && check_soft(st, sub, now)) {
      n = st->subs.head.next;
      continue;
    }
    n = n->next;
  }

  // start sending where nothing is in flight
  for (list_node_t* n = st->subs.head.next; n != &st->subs.head; n = n->next) {
    sub_t* sub = container_of(n, sub_t, node);
    if (sub->env_key == env_key) {
      pump(st, sub->s);
    }
  }
}


void streams_sensor_removed(streams_t* st, const void* env_key, uint32_t sensor_id) {
  for (list_node_t* n = st->subs.head.next; n != &st->subs.head; n = n->next) {
    sub_t* sub = container_of(n, sub_t, node);
    if (sub->env_key != env_key || sub->sensor_id != sensor_id || sub->ended) {
      continue;
    }
    shared_buf_t* end;
    if (wire_stream_encode_end(sensor_id, &end) == 0) {
      push(st, sub, end);
      shared_buf_release(end);
    }
    streams_demand_remove(st, sub->env_key, sub->sensor_id, &sub->p);
    sub->ended = 1;
  }
  for (list_node_t* n = st->subs.head.next; n != &st->subs.head; n = n->next) {
    sub_t* sub = container_of(n, sub_t, node);
    if (sub->env_key == env_key) {
      pump(st, sub->s);
    }
  }
  reap(st);
}


void streams_drained(streams_t* st, session_t* s) {
  pump(st, s);
  reap(st);
}


void streams_session_closed(streams_t* st, session_t* s) {
  for (list_node_t* n = st->subs.head.next; n != &st->subs.head;) {
    sub_t* sub = container_of(n, sub_t, node);
    n = n->next;
    if (sub->s == s) {
      end_sub(st, sub);
    }
  }
}


uint32_t streams_info(streams_t* st, wire_sub_info_t** out) {
  uint32_t n = st->nrecent;
  for (list_node_t* l = st->subs.head.next; l != &st->subs.head; l = l->next) {
    n++;
  }
  *out = NULL;
  if (n == 0) {
    return 0;
  }
  wire_sub_info_t* a = mem_calloc(n, sizeof(*a));
  if (!a) {
    return 0;
  }
  uint32_t k = 0;
  for (list_node_t* l = st->subs.head.next; l != &st->subs.head; l = l->next) {
    sub_t* sub = container_of(l, sub_t, node);
    a[k] = sub->info;
    a[k].environment = sub->env_name;
    a[k].peer = session_peer(sub->s);
    a[k].queued_bytes = sub->q.bytes;
    a[k].queued_frames = sub->q.count;
    k++;
  }
  for (uint32_t i = 0; i < st->nrecent; i++) {
    recent_t* r = &st->recent[(st->recent_next + RECENT_CLOSED - st->nrecent + i) %
                              RECENT_CLOSED];
    a[k] = r->info;
    a[k].environment = r->env_name;
    a[k].peer = r->peer;
    a[k].closed_reason = r->reason;
    k++;
  }
  *out = a;
  return n;
}


void streams_totals(const streams_t* st, uint64_t* frames_dropped, uint64_t* bytes_dropped,
                    uint64_t* closed) {
  *frames_dropped = st->frames_dropped;
  *bytes_dropped = st->bytes_dropped;
  *closed = st->closed;
}
