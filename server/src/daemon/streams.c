// SPDX-License-Identifier: MIT
// streams.c: subscriptions, their queues, the lanes of frames and the encoder threads (see
// streams.h).
//
// A lane is a FIFO of slots, one per record of a step it wants, in step order: PENDING (its
// record waits for an encoder), RUNNING (being framed), DONE (its frame is ready) or DROPPED
// (the backlog passed STREAMS_BACKLOG). The loop takes the DONE and DROPPED slots at the head of
// each lane, so a subscription sees its lane's records in order whatever order the encoders
// finish them in, and a dropped record still takes its sequence number (a gap the subscriber
// sees and GetInfo counts).
//
// Sequence numbers: a subscription numbers the records produced for it, 1, 2, ...: each frame
// it queues keeps its number, and a record that never became a frame (dropped from a lane's
// backlog, or not encoded) takes one too, so the gaps a subscriber sees count its drops
// exactly.
//
// Locking: st->mu guards the lanes and their slots (the environments' queues add records, the
// encoders take and finish them, the loop takes finished ones). Lanes are created under it by
// any thread and freed only by the loop, or by the encoder that finishes the last running slot
// of a lane nobody wants any more. Subscriptions and their queues are the loop's alone.
// st->nlanes counts the lanes in st->lanes (changed under mu): a step with no lane at all reads
// it and returns without taking the lock.
#include "daemon/streams.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <uv.h>

#include "base/clock.h"
#include "base/list.h"
#include "base/log.h"
#include "base/mem.h"
#include "net/stream_queue.h"
#include "net/wire_stream.h"

// Frames a queue may hold whatever their size (the byte budget is the real bound).
#define QUEUE_MAX_FRAMES 65536u
// Closed slow subscribers remembered for GetInfo.
#define RECENT_CLOSED 16u

typedef enum slot_state {
  SLOT_PENDING = 0,
  SLOT_RUNNING,
  SLOT_DONE,
  SLOT_DROPPED,
} slot_state_t;

typedef struct streams_lane lane_t;

typedef struct slot {
  struct slot* next;            // in its lane, in step order
  lane_t* lane;
  slot_state_t state;
  uint64_t stamp;               // the step's (streams_submit)
  int eos;                      // the end_of_stream frame of a removed sensor
  sensor_record_t rec;          // PENDING, RUNNING: a copy holding the cloud's buffer
  double start_time;
  shared_buf_t* frame;          // DONE: the frame; NULL when it could not be made (a drop)
  struct slot* at_once;         // streams_submit's list of the slots it frames itself
} slot_t;

struct streams_lane {
  list_node_t node;             // in st->lanes while somebody wants it
  const void* env_key;
  uint32_t sensor_id;
  wire_stream_params_t p;       // read only once created
  uint32_t refs;                // subscriptions, and demands not yet subscriptions
  int ended;                    // the sensor was removed: no more records, not found by key
  uint32_t waiting;             // demands not yet subscriptions: its slots wait for them
  int dead;                     // nobody wants it: freed once its running slots finish
  slot_t* head;
  slot_t* tail;
  uint32_t pending;             // slots waiting for an encoder
  uint32_t running;             // slots being framed
};

typedef struct sub {
  list_node_t node;             // in st->subs
  session_t* s;
  const void* env_key;
  char env_name[64];
  uint32_t sensor_id;
  wire_stream_params_t p;
  lane_t* lane;                 // holds one of its refs
  uint64_t since;               // gets the records of steps stamped from then on
  stream_queue_t q;
  uint64_t seq;                 // last sequence number given
  uint64_t held;                // q.bytes counted in the server's budget
  uint64_t served;              // round-robin stamp among the session's subscriptions
  uint64_t soft_since_ns;       // the connection's queues above soft_bytes since (0: below)
  int eos_done;                 // the end_of_stream frame is queued; no more frames
  wire_sub_info_t info;         // counters (frames/bytes sent and dropped)
} sub_t;

typedef struct recent {
  wire_sub_info_t info;
  char env_name[64];
  char peer[64];
  char reason[200];
} recent_t;

struct streams {
  server_t* srv;
  streams_config_t cfg;
  list_t subs;
  uint64_t serve_clock;
  uint64_t frames_dropped;
  uint64_t bytes_dropped;
  uint64_t closed;
  recent_t recent[RECENT_CLOSED];
  uint32_t nrecent;             // remembered, at most RECENT_CLOSED
  uint32_t recent_next;         // slot of the next one

  // the lanes and the encoders (guarded by mu)
  pthread_mutex_t mu;
  pthread_cond_t work;          // a slot is PENDING, or stopping
  list_t lanes;
  atomic_uint nlanes;           // how many lanes are in `lanes` (written under mu)
  uint64_t stamp;               // of the last step submitted
  int stopping;
  pthread_t* encoders;
  unsigned nencoder;
  uv_async_t done;              // wakes the loop when slots are DONE
  int done_open;
};


//---------------- lanes (under st->mu)

// The lane of a sensor that is not removed, in encoding p.
static lane_t* find_lane(streams_t* st, const void* env_key, uint32_t sensor_id,
                         const wire_stream_params_t* p) {
  for (list_node_t* n = st->lanes.head.next; n != &st->lanes.head; n = n->next) {
    lane_t* l = container_of(n, lane_t, node);
    if (l->env_key == env_key && l->sensor_id == sensor_id && !l->ended &&
        wire_stream_params_equal(&l->p, p)) {
      return l;
    }
  }
  return NULL;
}


static void slot_free(slot_t* sl) {
  sensor_record_release(&sl->rec);
  shared_buf_release(sl->frame);
  mem_free(sl);
}


// One reference less; a lane nobody wants drops its slots (the running ones end with their
// encoder) and is freed.
static void lane_unref(streams_t* st, lane_t* l) {
  if (--l->refs > 0) {
    return;
  }
  list_remove(&l->node);
  atomic_fetch_sub_explicit(&st->nlanes, 1, memory_order_release);
  l->dead = 1;
  for (slot_t* sl = l->head; sl;) {
    slot_t* next = sl->next;
    if (sl->state == SLOT_RUNNING) {
      sl->next = NULL;          // an orphan, freed by its encoder
    } else {
      slot_free(sl);
    }
    sl = next;
  }
  l->head = l->tail = NULL;
  l->pending = 0;
  if (l->running == 0) {
    mem_free(l);
  }
}


static void lane_append(lane_t* l, slot_t* sl) {
  sl->lane = l;
  sl->next = NULL;
  if (l->tail) {
    l->tail->next = sl;
  } else {
    l->head = sl;
  }
  l->tail = sl;
}


// A running slot's frame (nullable) is ready. 1 when the loop has something to take.
static int slot_finish(slot_t* sl, shared_buf_t* frame) {
  lane_t* l = sl->lane;
  sensor_record_release(&sl->rec);
  l->running--;
  if (l->dead) {
    shared_buf_release(frame);
    mem_free(sl);
    if (l->running == 0) {
      mem_free(l);
    }
    return 0;
  }
  sl->frame = frame;
  sl->state = SLOT_DONE;
  return l->head && l->head->state >= SLOT_DONE;
}


//---------------- encoders

// The slot waiting longest for an encoder (the oldest step first), or NULL.
static slot_t* next_pending(streams_t* st) {
  slot_t* best = NULL;
  for (list_node_t* n = st->lanes.head.next; n != &st->lanes.head; n = n->next) {
    lane_t* l = container_of(n, lane_t, node);
    for (slot_t* sl = l->head; l->pending && sl; sl = sl->next) {
      if (sl->state == SLOT_PENDING) {
        if (!best || sl->stamp < best->stamp) {
          best = sl;
        }
        break;
      }
    }
  }
  return best;
}


static shared_buf_t* frame_of(const slot_t* sl) {
  shared_buf_t* frame = NULL;
  err_msg_t msg;
  if (wire_stream_encode(&sl->rec, sl->start_time, &sl->lane->p, &frame, &msg) != 0) {
    LOG_WARN("sensor %u: frame %llu not encoded as %s: %s", sl->rec.sensor_id,
             (unsigned long long)sl->rec.frame, codec_name(sl->lane->p.codec.encoding),
             msg.text);
    return NULL;
  }
  return frame;
}


static void* encoder_main(void* arg) {
  streams_t* st = arg;

  // below the tracing: an expensive encoding (zstd level 19) only takes what it leaves
  if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), STREAMS_ENCODER_NICE) != 0) {
    LOG_DEBUG("streams: could not lower the encoder thread's priority");
  }
  pthread_mutex_lock(&st->mu);
  while (!st->stopping) {
    slot_t* sl = next_pending(st);
    if (!sl) {
      pthread_cond_wait(&st->work, &st->mu);
      continue;
    }
    sl->state = SLOT_RUNNING;
    sl->lane->pending--;
    sl->lane->running++;
    pthread_mutex_unlock(&st->mu);
    shared_buf_t* frame = frame_of(sl);
    pthread_mutex_lock(&st->mu);
    if (slot_finish(sl, frame) && st->done_open) {
      uv_async_send(&st->done);
    }
  }
  pthread_mutex_unlock(&st->mu);
  return NULL;
}


static void on_done(uv_async_t* h);


streams_t* streams_create(server_t* srv, struct uv_loop_s* loop, const streams_config_t* cfg) {
  streams_t* st = mem_calloc(1, sizeof(*st));
  if (!st) {
    return NULL;
  }
  st->srv = srv;
  st->cfg = *cfg;
  list_init(&st->subs);
  list_init(&st->lanes);
  atomic_init(&st->nlanes, 0);
  pthread_mutex_init(&st->mu, NULL);
  pthread_cond_init(&st->work, NULL);
  unsigned n = cfg->encoders ? cfg->encoders : 1;
  st->encoders = mem_calloc(n, sizeof(*st->encoders));
  if (!st->encoders || uv_async_init(loop, &st->done, on_done) != 0) {
    pthread_cond_destroy(&st->work);
    pthread_mutex_destroy(&st->mu);
    mem_free(st->encoders);
    mem_free(st);
    return NULL;
  }
  st->done.data = st;
  st->done_open = 1;
  for (; st->nencoder < n; st->nencoder++) {
    if (pthread_create(&st->encoders[st->nencoder], NULL, encoder_main, st) != 0) {
      break;
    }
  }
  if (st->nencoder == 0) {
    LOG_ERROR("streams: cannot start an encoder thread");
    streams_stop(st);
    return st;  // frames that need no encoder still flow; the others wait
  }
  return st;
}


void streams_stop(streams_t* st) {
  if (!st) {
    return;
  }
  pthread_mutex_lock(&st->mu);
  int was = st->stopping;
  st->stopping = 1;
  pthread_cond_broadcast(&st->work);
  pthread_mutex_unlock(&st->mu);
  if (was) {
    return;
  }
  for (unsigned i = 0; i < st->nencoder; i++) {
    pthread_join(st->encoders[i], NULL);
  }
  st->nencoder = 0;
  pthread_mutex_lock(&st->mu);
  st->done_open = 0;
  pthread_mutex_unlock(&st->mu);
  uv_close((uv_handle_t*)&st->done, NULL);
}


static void sub_free(streams_t* st, sub_t* sub);


void streams_destroy(streams_t* st) {
  if (!st) {
    return;
  }
  list_node_t* n;
  while ((n = list_front(&st->subs)) != NULL) {
    sub_free(st, container_of(n, sub_t, node));
  }
  while ((n = list_front(&st->lanes)) != NULL) {
    lane_t* l = container_of(n, lane_t, node);
    l->refs = 1;
    lane_unref(st, l);
  }
  pthread_cond_destroy(&st->work);
  pthread_mutex_destroy(&st->mu);
  mem_free(st->encoders);
  mem_free(st);
}


//---------------- demand

int streams_demand_add(streams_t* st, const void* env_key, uint32_t sensor_id,
                       const wire_stream_params_t* p, streams_lane_t** lane, uint64_t* since) {
  int rc = 0;
  pthread_mutex_lock(&st->mu);
  lane_t* l = find_lane(st, env_key, sensor_id, p);
  if (!l && (l = mem_calloc(1, sizeof(*l))) != NULL) {
    l->env_key = env_key;
    l->sensor_id = sensor_id;
    l->p = *p;
    list_push_back(&st->lanes, &l->node);
    atomic_fetch_add_explicit(&st->nlanes, 1, memory_order_release);
  }
  if (l) {
    l->refs++;
    l->waiting++;
    *lane = l;
    *since = st->stamp + 1;
  } else {
    rc = ERR_NOMEM;
  }
  pthread_mutex_unlock(&st->mu);
  return rc;
}


// The loop drains again: a lane's slots held for a demand may go out now.
static void kick(streams_t* st) {
  pthread_mutex_lock(&st->mu);
  if (st->done_open) {
    uv_async_send(&st->done);
  }
  pthread_mutex_unlock(&st->mu);
}


void streams_demand_remove(streams_t* st, streams_lane_t* lane) {
  pthread_mutex_lock(&st->mu);
  lane->waiting--;
  lane_unref(st, lane);
  pthread_mutex_unlock(&st->mu);
  kick(st);
}


//---------------- records

// Framed as soon as it is submitted: a frame that refers to the points (RAW, every field) or a
// small record; the rest waits for an encoder.
static int frames_at_once(const sensor_record_t* rec, const wire_stream_params_t* p) {
  return rec->kind != SENSOR_REC_CLOUD || (p->codec.encoding == CODEC_RAW && p->nfield == 0);
}


void streams_submit(streams_t* st, const void* env_key, const sensor_out_t* recs,
                    double start_time) {
  // no lane at all (nobody subscribed): nothing to queue, and no lock to take. A lane added
  // meanwhile (streams_demand_add) numbers its first step after this one, as it would had this
  // step taken the lock first.
  if (recs->n == 0 || atomic_load_explicit(&st->nlanes, memory_order_acquire) == 0) {
    return;
  }

  // a slot per record and lane that wants it; the ones framed at once are taken out of the
  // encoders' reach (RUNNING) and framed after the lock is let go
  slot_t* now = NULL;
  int wake = 0;
  pthread_mutex_lock(&st->mu);
  if (st->stopping) {
    pthread_mutex_unlock(&st->mu);
    return;
  }
  uint64_t stamp = ++st->stamp;
  for (uint32_t r = 0; r < recs->n; r++) {
    const sensor_record_t* rec = &recs->rec[r];
    for (list_node_t* n = st->lanes.head.next; n != &st->lanes.head; n = n->next) {
      lane_t* l = container_of(n, lane_t, node);
      if (l->env_key != env_key || l->sensor_id != rec->sensor_id || l->ended) {
        continue;
      }
      slot_t* sl = mem_calloc(1, sizeof(*sl));
      if (!sl) {
        LOG_ERROR("out of memory queueing sensor %u's frame for subscribers", rec->sensor_id);
        continue;
      }
      sl->stamp = stamp;
      sl->start_time = start_time;
      sensor_record_copy(&sl->rec, rec);
      lane_append(l, sl);
      if (frames_at_once(rec, &l->p)) {
        sl->state = SLOT_RUNNING;
        l->running++;
        sl->at_once = now;
        now = sl;
        continue;
      }

      // the backlog: past it, the oldest record waiting for an encoder is dropped
      sl->state = SLOT_PENDING;
      wake = 1;
      if (++l->pending > STREAMS_BACKLOG) {
        for (slot_t* old = l->head; old; old = old->next) {
          if (old->state == SLOT_PENDING) {
            old->state = SLOT_DROPPED;
            sensor_record_release(&old->rec);
            l->pending--;
            break;
          }
        }
      }
    }
  }
  if (wake) {
    pthread_cond_broadcast(&st->work);
  }
  pthread_mutex_unlock(&st->mu);

  // the frames that cost nothing, here
  int ready = wake;   // a record dropped may head a lane now
  while (now) {
    slot_t* sl = now;
    now = sl->at_once;
    shared_buf_t* frame = frame_of(sl);
    pthread_mutex_lock(&st->mu);
    ready |= slot_finish(sl, frame);
    pthread_mutex_unlock(&st->mu);
  }
  pthread_mutex_lock(&st->mu);
  if (ready && st->done_open) {
    uv_async_send(&st->done);
  }
  pthread_mutex_unlock(&st->mu);
}


//---------------- subscriptions

// s's subscription to sensor_id, unless that sensor was removed (its lane ended: only its last
// frames are to come, and the id may name a new sensor).
static sub_t* find_sub(streams_t* st, session_t* s, uint32_t sensor_id) {
  sub_t* found = NULL;
  pthread_mutex_lock(&st->mu);
  for (list_node_t* n = st->subs.head.next; n != &st->subs.head; n = n->next) {
    sub_t* sub = container_of(n, sub_t, node);
    if (sub->s == s && sub->sensor_id == sensor_id && !sub->lane->ended) {
      found = sub;
      break;
    }
  }
  pthread_mutex_unlock(&st->mu);
  return found;
}


int streams_subscribe(streams_t* st, session_t* s, streams_lane_t* lane, const char* env_name,
                      uint64_t since) {
  // the lane's key and parameters are read only once it is created
  uint32_t sensor_id = lane->sensor_id;
  const wire_stream_params_t* p = &lane->p;
  if (find_sub(st, s, sensor_id)) {
    return ERR_EXISTS;
  }
  sub_t* sub = mem_calloc(1, sizeof(*sub));
  if (!sub || stream_queue_init(&sub->q, QUEUE_MAX_FRAMES, st->cfg.max_bytes) != 0) {
    mem_free(sub);
    return ERR_NOMEM;
  }

  // the subscription takes over the reference its demand added to the lane
  sub->lane = lane;
  sub->s = s;
  sub->env_key = lane->env_key;
  snprintf(sub->env_name, sizeof(sub->env_name), "%s", env_name);
  sub->sensor_id = sensor_id;
  sub->p = *p;
  sub->since = since;
  sub->info.session_id = session_id(s);
  sub->info.sensor_id = sensor_id;
  sub->info.encoding = p->codec.encoding;
  sub->info.precision = p->codec.precision;

  // after the connection's other subscriptions: a connection's are adjacent in st->subs, so
  // that what they queue together is summed in one pass (check_soft)
  list_node_t* at = &st->subs.head;
  for (list_node_t* n = st->subs.head.next; n != &st->subs.head; n = n->next) {
    if (container_of(n, sub_t, node)->s == s) {
      at = n->next;
    }
  }
  list_insert_before(at, &sub->node);
  pthread_mutex_lock(&st->mu);
  lane->waiting--;
  pthread_mutex_unlock(&st->mu);
  kick(st);
  return 0;
}


static void sub_free(streams_t* st, sub_t* sub) {
  list_remove(&sub->node);
  server_hold(st->srv, -(int64_t)sub->held);
  stream_queue_close(&sub->q);
  pthread_mutex_lock(&st->mu);
  lane_unref(st, sub->lane);
  pthread_mutex_unlock(&st->mu);
  mem_free(sub);
}


// Count the queue's bytes in the server's budget.
static void sync_held(streams_t* st, sub_t* sub) {
  int64_t delta = (int64_t)sub->q.bytes - (int64_t)sub->held;
  if (delta) {
    server_hold(st->srv, delta);
    sub->held = sub->q.bytes;
  }
}


int streams_unsubscribe(streams_t* st, session_t* s, uint32_t sensor_id) {
  sub_t* sub = find_sub(st, s, sensor_id);
  if (!sub) {
    return ERR_NOTFOUND;
  }
  sub->info.frames_dropped += sub->q.count;
  sub->info.bytes_dropped += sub->q.bytes;
  sub_free(st, sub);
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
  uint64_t seq;
  shared_buf_t* b = stream_queue_pop_tag(&pick->q, &seq);
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
    if (sub->eos_done && sub->q.count == 0) {
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


// A connection whose subscriptions (from `first` to *end, adjacent) queue together more than
// the soft limit for too long is closed: a subscriber that stops reading is let go however
// many subscriptions share its backlog.
static int check_soft(streams_t* st, list_node_t* first, uint64_t now_ns, list_node_t** end) {
  sub_t* lead = container_of(first, sub_t, node);
  sub_t* sub = lead;   // the one queueing most, named in the reason
  uint64_t total = 0, since = 0;
  uint32_t count = 0;
  list_node_t* n = first;
  for (; n != &st->subs.head && container_of(n, sub_t, node)->s == lead->s; n = n->next) {
    sub_t* x = container_of(n, sub_t, node);
    total += x->q.bytes;
    count++;
    if (x->soft_since_ns && (!since || x->soft_since_ns < since)) {
      since = x->soft_since_ns;
    }
    if (x->q.bytes > sub->q.bytes) {
      sub = x;
    }
  }
  *end = n;
  if (!st->cfg.soft_ms || total <= st->cfg.soft_bytes) {
    for (n = first; n != *end; n = n->next) {
      container_of(n, sub_t, node)->soft_since_ns = 0;
    }
    return 0;
  }
  if (!since) {
    lead->soft_since_ns = now_ns;
    return 0;
  }
  if (now_ns - since < (uint64_t)st->cfg.soft_ms * 1000000u) {
    return 0;
  }
  char reason[200];
  snprintf(reason, sizeof(reason), "slow subscriber: %u subscriptions (sensor %u the most) "
           "queued above %llu bytes (--subscriber-soft-bytes) for %u ms "
           "(--subscriber-soft-seconds)", count, sub->sensor_id,
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


// Count one frame (of len bytes, 0 when it was never made) dropped for sub.
static void count_drop(streams_t* st, sub_t* sub, uint64_t frames, uint64_t bytes) {
  sub->info.frames_dropped += frames;
  sub->info.bytes_dropped += bytes;
  st->frames_dropped += frames;
  st->bytes_dropped += bytes;
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
    int rc = stream_queue_push_tag(&sub->q, b, sub->seq);
    frames += sub->q.dropped - dropped + (rc == ERR_NOMEM);   // the queue counts the others
    bytes += queued + len - sub->q.bytes;
  }
  count_drop(st, sub, frames, bytes);
  sync_held(st, sub);
}


// Give a lane's finished slot to each subscription of the lane that wants it: its frame, or
// its sequence number as a drop.
static void deliver(streams_t* st, const slot_t* sl) {
  for (list_node_t* n = st->subs.head.next; n != &st->subs.head; n = n->next) {
    sub_t* sub = container_of(n, sub_t, node);
    if (sub->lane != sl->lane || sub->eos_done || session_is_closing(sub->s) ||
        (!sl->eos && sl->stamp < sub->since)) {
      continue;
    }
    if (sl->frame) {
      push(st, sub, sl->frame);
    } else {
      sub->seq++;
      count_drop(st, sub, 1, 0);
    }
    sub->eos_done = sl->eos;
  }
}


// The loop's side: take the finished slots at the head of every lane, in order, and give
// them out; then close slow subscribers and start sending.
static void drain(streams_t* st) {
  slot_t* first = NULL;
  slot_t** last = &first;
  pthread_mutex_lock(&st->mu);
  for (list_node_t* n = st->lanes.head.next; n != &st->lanes.head; n = n->next) {
    lane_t* l = container_of(n, lane_t, node);
    // a lane with a demand not yet subscribed keeps its slots: the records of the steps after
    // a Subscribe are that subscription's, however soon the step follows
    while (l->head && l->head->state >= SLOT_DONE && l->waiting == 0) {
      slot_t* sl = l->head;
      l->head = sl->next;
      if (!l->head) {
        l->tail = NULL;
      }
      sl->next = NULL;
      *last = sl;
      last = &sl->next;
    }
  }
  pthread_mutex_unlock(&st->mu);
  if (!first) {
    return;
  }

  // lanes are freed on this thread only (or, once nobody wants them, by their encoder, and
  // then no subscription names them): the slots' lanes are safe to compare with
  for (slot_t* sl = first; sl;) {
    slot_t* next = sl->next;
    deliver(st, sl);
    slot_free(sl);
    sl = next;
  }

  // slow subscribers go, a connection at a time (closing frees every subscription of the
  // connection: start over)
  uint64_t now = clock_now_ns();
  for (list_node_t* n = st->subs.head.next; n != &st->subs.head;) {
    list_node_t* end;
    if (check_soft(st, n, now, &end)) {
      n = st->subs.head.next;
      continue;
    }
    n = end;
  }

  // start sending where nothing is in flight
  for (list_node_t* n = st->subs.head.next; n != &st->subs.head; n = n->next) {
    pump(st, container_of(n, sub_t, node)->s);
  }
  reap(st);
}


static void on_done(uv_async_t* h) {
  drain(h->data);
}


void streams_sensor_removed(streams_t* st, const void* env_key, uint32_t sensor_id) {
  // each lane of the sensor ends with the end_of_stream frame, after the records before it;
  // the records of later steps (of a new sensor given the id) go to new lanes
  shared_buf_t* end = NULL;
  if (wire_stream_encode_end(sensor_id, &end) != 0) {
    LOG_ERROR("out of memory for the end of sensor %u's streams", sensor_id);
  }
  int ready = 0;
  pthread_mutex_lock(&st->mu);
  for (list_node_t* n = st->lanes.head.next; n != &st->lanes.head; n = n->next) {
    lane_t* l = container_of(n, lane_t, node);
    if (l->env_key != env_key || l->sensor_id != sensor_id || l->ended) {
      continue;
    }
    l->ended = 1;
    slot_t* sl = mem_calloc(1, sizeof(*sl));
    if (sl) {
      sl->eos = 1;
      sl->state = SLOT_DONE;
      sl->frame = end ? shared_buf_retain(end) : NULL;
      lane_append(l, sl);
      ready = 1;
    }
  }
  if (ready && st->done_open) {
    uv_async_send(&st->done);
  }
  pthread_mutex_unlock(&st->mu);
  shared_buf_release(end);
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
      sub_free(st, sub);
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
