// SPDX-License-Identifier: MIT
// raycast.c: Raycast with the rays sent from the caller's arrays (origins_bytes, ...) and the
// 48-byte hit records received into the caller's buffer: straight from the socket while a
// blocking call waits, or copied once from a frame that arrived during another call. A large
// raycast travels as parts in flight together, joined when they saw the same world.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define HIT_BYTES 48
#define MASKED_HIT_BYTES 40           // a record after RaycastResult.hit_mask: no reserved bytes
// From PIPELINE_MIN_RAYS rays on a raycast goes as parts of about PIPELINE_RAYS rays,
// PIPELINE_WINDOW of them in flight, so that the daemon traces one while the next arrives and
// the last replies leave. Parts of 16k rays (786 kB each way) left less of the transfer
// outside the tracing than parts of 32k on bench_client's 131,072 rays (2-core VM: 0.87-1.4
// against 0.78-0.83 of the time in-process; 8k parts and 8 in flight were no better).
#define PIPELINE_MIN_RAYS (1u << 15)
#define PIPELINE_RAYS (1u << 14)
#define PIPELINE_WINDOW 4
// The first and the last part are of PIPELINE_EDGE_RAYS rays: the daemon starts tracing once
// the first has arrived, and the call ends once the last one's hits are back, so these two
// transfers are not overlapped with any tracing.
#define PIPELINE_EDGE_RAYS (PIPELINE_RAYS / 4)
#define REQUEST_SLACK 4096            // bytes of a raycast request besides its arrays
#define REPLY_SLACK 128               // bytes of a raycast reply besides its records and mask
#define RAYCAST_MAX_EXCLUDED 1024     // Raycast.exclude_bodies: the daemon's bound

_Static_assert(sizeof(sensim_hit_t) == HIT_BYTES, "sensim_hit_t is the wire's 48-byte record");
_Static_assert(offsetof(sensim_hit_t, normal) == 8 && offsetof(sensim_hit_t, object_id) == 32 &&
                   offsetof(sensim_hit_t, label) == 36,
               "sensim_hit_t has the wire's offsets");


void sensim_raycast_init_sized(sensim_raycast_t* rays, size_t size) {
  SENSIM_INIT_SIZED(sensim_raycast_t, rays, size, (void)0);
}

//---------------- The reply

// What the callbacks of one reply fill.
typedef struct reply_ctx {
  slot_t* slot;
  bool got_hits;
  size_t nrec;                      // records in hits_bytes
  uint8_t* mask;                    // hit_mask ((nrays + 7) / 8 bytes) when it came
} reply_ctx_t;


// hits_bytes: one 48-byte record per ray, or with omit_misses the 40-byte records of the hits
// alone (at most one per ray, counted against hit_mask once the reply is read), received at
// the start of the caller's buffer.
static bool decode_hits(pb_istream_t* s, const pb_field_t* f, void** arg) {
  (void)f;
  reply_ctx_t* ctx = *arg;
  slot_t* slot = ctx->slot;
  size_t rec = slot->omit_misses ? MASKED_HIT_BYTES : HIT_BYTES;
  size_t len = s->bytes_left;
  sensim_reader_t* r = sensim_wire_reader(s);
  if (!r) {
    PB_RETURN_ERROR(s, "raycast: hits_bytes with another wire type");
  }
  if (slot->omit_misses ? len % rec != 0 || len / rec > slot->nrays
                        : len != (size_t)slot->nrays * rec) {
    sensim_cli_fail(r->cli, SENSIM_EPROTO, "raycast: %zu bytes of hits_bytes for %u rays%s",
                    len, slot->nrays, slot->omit_misses ? " (40-byte records of the hits)" : "");
    r->cli->dec_failed = SENSIM_EPROTO;
    return false;
  }
  ctx->got_hits = true;
  ctx->nrec = len / rec;
  return pb_read(s, (pb_byte_t*)slot->hits, len);
}


// hit_mask: one bit per ray, into a buffer of the reply's own.
static bool decode_mask(pb_istream_t* s, const pb_field_t* f, void** arg) {
  (void)f;
  reply_ctx_t* ctx = *arg;
  size_t want = ((size_t)ctx->slot->nrays + 7) / 8;
  sensim_reader_t* r = sensim_wire_reader(s);
  if (!r) {
    PB_RETURN_ERROR(s, "raycast: hit_mask with another wire type");
  }
  if (s->bytes_left != want) {
    sensim_cli_fail(r->cli, SENSIM_EPROTO, "raycast: hit_mask has %zu bytes for %u rays, "
                    "expected %zu", s->bytes_left, ctx->slot->nrays, want);
    r->cli->dec_failed = SENSIM_EPROTO;
    return false;
  }
  if (!ctx->mask && !(ctx->mask = malloc(want ? want : 1))) {
    sensim_cli_fail(r->cli, SENSIM_ENOMEM, "raycast: no memory for hit_mask");
    r->cli->dec_failed = SENSIM_ENOMEM;
    return false;
  }
  return pb_read(s, ctx->mask, want);
}


void sensim_raycast_select(sensim_v1_RaycastResult* result, void* arg) {
  reply_ctx_t* ctx = arg;
  if (!ctx || !ctx->slot->hits) {
    return;  // nobody's reply: decoded without its hits
  }
  result->hits_bytes.funcs.decode = decode_hits;
  result->hits_bytes.arg = ctx;
  if (ctx->slot->omit_misses) {
    result->hit_mask.funcs.decode = decode_mask;
    result->hit_mask.arg = ctx;
  }
}


// The reply to omit_misses checked (NULL) or why not: the mask's bits past the last ray clear
// and one set bit per record.
static const char* check_mask(const reply_ctx_t* ctx) {
  uint32_t n = ctx->slot->nrays;
  if (!ctx->mask) {
    return "raycast: the reply has no hit_mask";
  }
  // counted 8 bytes at a time (without the popcnt instruction each count is a libgcc call)
  size_t set = 0, len = ((size_t)n + 7) / 8, k = 0;
  for (; k + 8 <= len; k += 8) {
    uint64_t w;
    memcpy(&w, ctx->mask + k, 8);
    set += (size_t)__builtin_popcountll(w);
  }
  for (; k < len; k++) {
    set += (size_t)__builtin_popcount(ctx->mask[k]);
  }
  if (n % 8 != 0 && (ctx->mask[n / 8] >> (n % 8)) != 0) {
    return "raycast: hit_mask sets bits past the last ray";
  }
  return set == ctx->nrec ? NULL : "raycast: hit_mask sets another number of bits than "
                                   "hits_bytes has records";
}


// Record j of the 40-byte records at `from` as the 48-byte hit h, its reserved bytes zero:
// read in 8-byte words before any is written (h may overlap the record), stored the same way
// (a copy through a buffer of another width stalls on its store-to-load forwarding).
static inline void put_record(sensim_hit_t* h, const uint8_t* from, size_t j) {
  const uint8_t* f = from + j * MASKED_HIT_BYTES;
  uint64_t w[5];
  for (int k = 0; k < 5; k++) {
    memcpy(&w[k], f + 8 * k, 8);
  }
  uint8_t* t = (uint8_t*)h;
  for (int k = 0; k < 5; k++) {
    memcpy(t + 8 * k, &w[k], 8);
  }
  memset(h->reserved, 0, sizeof(h->reserved));
}


// Spread the records at the start of hits over the rays whose mask bit is set (from the
// last one: the j-th set bit is at a ray i >= j, so record j moves to 48 i >= 40 j, never onto
// a record not yet moved), the others written as misses. One pass, a mask byte at a time,
// whole bytes of misses or of hits (most of a scan's: its rays hit in runs) without a test per
// ray.
static void spread_hits(sensim_hit_t* hits, uint32_t n, const uint8_t* mask, size_t nrec) {
  const uint8_t* from = (const uint8_t*)hits;
  const sensim_hit_t miss = {.distance = HUGE_VAL};
  size_t j = nrec;
  for (size_t b = ((size_t)n + 7) / 8; b-- > 0;) {
    size_t i0 = 8 * b, m = n - i0 < 8 ? n - i0 : 8;
    unsigned bits = mask[b];
    if (bits == 0) {
      for (size_t k = m; k-- > 0;) {
        hits[i0 + k] = miss;
      }
    } else if (bits == 0xFF && m == 8) {
      j -= 8;
      for (size_t k = 8; k-- > 0;) {
        put_record(&hits[i0 + k], from, j + k);
      }
    } else {
      for (size_t k = m; k-- > 0;) {
        if (bits >> k & 1) {
          put_record(&hits[i0 + k], from, --j);
        } else {
          hits[i0 + k] = miss;
        }
      }
    }
  }
}


// The outcome of a decoded reply, for the wait: the daemon's failure, or the hits in place.
static sensim_status_t outcome(sensim_client_t* cli, slot_t* s, const reply_ctx_t* ctx) {
  const sensim_v1_Envelope* rx = &cli->rx;
  if (rx->has_status && rx->status.code != sensim_v1_StatusCode_OK) {
    char err[CLIENT_ERROR_CAP];
    s->done = true;
    s->status = sensim_status_from_wire((int32_t)rx->status.code, rx->status.message, err,
                                        sizeof(err));
    s->message = strdup(err);
    return SENSIM_OK;
  }
  if (rx->which_body != sensim_v1_Envelope_raycast_result_tag) {
    sensim_cli_fail(cli, SENSIM_EPROTO, "raycast: reply %llu carries body %u, not a "
                    "raycast_result", (unsigned long long)rx->id, (unsigned)rx->which_body);
    sensim_client_fail_closed(cli, SENSIM_EPROTO);
    return SENSIM_EPROTO;
  }
  const char* bad = NULL;
  if (s->nrays > 0 && s->omit_misses) {
    bad = check_mask(ctx);
    if (!bad) {
      spread_hits(s->hits, s->nrays, ctx->mask, ctx->nrec);
    }
  } else if (s->nrays > 0 && !ctx->got_hits) {
    // a daemon older than the bytes form sees no rays and answers without hits_bytes
    bad = "raycast: the reply has no hits_bytes (a daemon older than the bytes form of the "
          "arrays)";
  }
  if (bad) {
    // the frame was whole but its hits are not: a daemon that broke the protocol, the
    // connection closed as for any other EPROTO (what the caller's buffer holds is not hits)
    sensim_cli_fail(cli, SENSIM_EPROTO, "%s", bad);
    sensim_client_fail_closed(cli, SENSIM_EPROTO);
    return SENSIM_EPROTO;
  }
  s->done = true;
  s->status = SENSIM_OK;
  s->has_serial = rx->body.raycast_result.has_world_serial;
  s->world_serial = rx->body.raycast_result.world_serial;
  return SENSIM_OK;
}


// Decode one reply into its slot from `in`; on a failure the connection is closed.
static sensim_status_t decode_into(sensim_client_t* cli, slot_t* s, pb_istream_t* in) {
  reply_ctx_t ctx = {.slot = s};
  void* saved = cli->dec;
  pb_size_t saved_body = cli->dec_body;
  cli->dec = &ctx;
  cli->dec_body = sensim_v1_Envelope_raycast_result_tag;
  sensim_status_t st = sensim_decode_envelope(cli, in);
  cli->dec = saved;
  cli->dec_body = saved_body;
  if (st != SENSIM_OK) {
    free(ctx.mask);
    sensim_client_fail_closed(cli, st);
    return st;
  }
  st = outcome(cli, s, &ctx);
  free(ctx.mask);
  return st;
}


void sensim_raycast_on_frame(sensim_client_t* cli, slot_t* s, const uint8_t* data, size_t len) {
  sensim_reader_t r = {.base = data, .cli = cli};
  pb_istream_t in = sensim_wire_istream(&r, len);
  (void)decode_into(cli, s, &in);
}


sensim_status_t sensim_raycast_stream(sensim_client_t* cli, slot_t* s, size_t len,
                                      int64_t deadline) {
  sensim_reader_t r = {.base = NULL, .cli = cli, .deadline = deadline};
  pb_istream_t in = sensim_wire_istream(&r, len);
  return decode_into(cli, s, &in);
}

//---------------- Requests

// An array sent at a multiple of 8 bytes from the start of its frame (Raycast.padding before
// it when needed): the daemon reads a large frame into an aligned buffer and traces rays that
// are aligned where they lie, and copies them first otherwise (about 0.1 ms per MB, before
// the tracing starts).
typedef struct aligned_span {
  sensim_span_t span;
  const size_t* body_at;            // bytes of the frame before the Raycast body
} aligned_span_t;

// The arrays of a Raycast, kept while it is encoded.
typedef struct ray_spans {
  aligned_span_t origins, directions, times;
  sensim_u32s_t exclude;
  size_t body_at;
} ray_spans_t;


// Encode callback (arg: aligned_span_t): a padding field when the array would start off a
// multiple of 8 (s->bytes_written counts from the body's start in both of nanopb's passes),
// then the array.
static bool encode_aligned(pb_ostream_t* s, const pb_field_t* f, void* const* arg) {
  aligned_span_t* a = *arg;
  void* span = &a->span;
  if (a->span.len == 0) {
    return true;
  }
  size_t at = *a->body_at + s->bytes_written +
              sensim_wire_varint_size((uint64_t)f->tag << 3 | PB_WT_STRING) +
              sensim_wire_varint_size(a->span.len);
  size_t shift = (8 - at % 8) % 8;
  if (shift != 0) {
    // the padding field takes 2 + p bytes (its key, its length p < 128, p zeros):
    // 2 + p = shift modulo 8
    static const pb_byte_t zeros[8];
    size_t p = (shift + 6) % 8;
    if (!pb_encode_tag(s, PB_WT_STRING, sensim_v1_Raycast_padding_tag) ||
        !pb_encode_varint(s, p) || !pb_write(s, zeros, p)) {
      return false;
    }
  }
  return sensim_wire_encode_span(s, f, &span);
}


static void set_aligned(pb_callback_t* cb, aligned_span_t* a, const size_t* body_at,
                        const void* data, size_t len) {
  sensim_wire_set_span(cb, &a->span, data, len);
  a->body_at = body_at;
  cb->funcs.encode = encode_aligned;
  cb->arg = a;
}


// Check the rays; the hits buffer too when given.
static sensim_status_t check_rays(sensim_client_t* cli, const sensim_raycast_t* given,
                                  sensim_raycast_t* r, const sensim_hit_t* hits) {
  sensim_raycast_init(r);
  sensim_status_t st = sensim_sized_copy(cli, r, sizeof(*r), given, "rays", "sensim_raycast_init");
  if (st == SENSIM_OK && r->origins && r->origin) {
    return sensim_cli_fail(cli, SENSIM_INVALID_ARGUMENT, "rays.origins and rays.origin are both "
                           "set: one origin per ray or one for all");
  }
  if (st != SENSIM_OK ||
      (!r->origin &&
       (st = sensim_need(cli, r->origins, r->nrays, "rays.origins", "nrays")) != SENSIM_OK) ||
      (st = sensim_need(cli, r->directions, r->nrays, "rays.directions", "nrays")) != SENSIM_OK ||
      (st = sensim_need(cli, r->times, r->ntimes, "rays.times", "ntimes")) != SENSIM_OK ||
      (st = sensim_need(cli, r->exclude_bodies, r->nexclude_bodies, "rays.exclude_bodies",
                        "nexclude_bodies")) != SENSIM_OK ||
      (st = sensim_need(cli, hits, r->nrays, "hits", "rays.nrays")) != SENSIM_OK) {
    return st;
  }
  // the count first, before that many of the caller's ids are read
  if (r->nexclude_bodies > RAYCAST_MAX_EXCLUDED) {
    return sensim_cli_fail(cli, SENSIM_INVALID_ARGUMENT, "rays.nexclude_bodies = %u: at most %d",
                           r->nexclude_bodies, RAYCAST_MAX_EXCLUDED);
  }
  if (r->ntimes > 1 && r->ntimes != r->nrays) {
    return sensim_cli_fail(cli, SENSIM_INVALID_ARGUMENT, "rays.ntimes = %u: 0, 1 or nrays (%u)",
                           r->ntimes, r->nrays);
  }
  return SENSIM_OK;
}


// Whether all n >= 1 origins are the first, bit for bit (so that one sent for all gives the
// same rays): each equals the next exactly when the array equals itself shifted by one
// origin, which libc's memcmp checks at memory speed (a comparison per origin took as long
// as the kernel's copy of the directions).
static bool one_origin(const double* origins, uint32_t n) {
  return memcmp(origins, origins + 3, 3 * sizeof(double) * (n - 1)) == 0;
}


// The origin the caller gave (r checked), written out once per ray into *expanded (freed by
// the caller) for a daemon that does not take Raycast.origin.
static sensim_status_t choose_origin(sensim_client_t* cli, sensim_raycast_t* r,
                                     double** expanded) {
  *expanded = NULL;
  bool takes = (cli->session.features & SENSIM_FEATURE_RAYCAST_ORIGIN) != 0;
  if (r->origin && !takes && r->nrays > 0) {
    // nothing is written out for rays that cannot go: on a closed handle (a failed connect
    // knows no features) sending reports the closed connection; origins alone past the
    // daemon's frame limit are refused here
    uint32_t limit = cli->session.limits.max_frame_bytes;
    if (cli->fd < 0) {
      return SENSIM_OK;
    }
    if (limit && 3 * sizeof(double) * (uint64_t)r->nrays > limit) {
      return sensim_cli_fail(cli, SENSIM_RESOURCE_EXHAUSTED,
                             "raycast of %u rays: their origins, %llu bytes, exceed "
                             "max_frame_bytes %u; split the rays", r->nrays,
                             (unsigned long long)(3 * sizeof(double) * (uint64_t)r->nrays),
                             limit);
    }
    double* o = malloc(3 * sizeof(double) * r->nrays);
    if (!o) {
      return sensim_cli_fail(cli, SENSIM_ENOMEM, "raycast: no memory for %u origins",
                             r->nrays);
    }
    for (size_t i = 0; i < r->nrays; i++) {
      memcpy(o + 3 * i, r->origin, 3 * sizeof(double));
    }
    r->origins = o;
    r->origin = NULL;
    *expanded = o;
  }
  return SENSIM_OK;
}


// Send rays [a, b) of r (checked, its origin chosen), their hits into hits + a: with one
// origin sent for all when the caller gave one or, to a daemon that takes it, when the part's
// origins are all one. Checked part by part, so that only the first part's check comes before
// the daemon can start tracing: the others run while it traces.
static sensim_status_t send_part(sensim_client_t* cli, const sensim_raycast_t* r, uint32_t a,
                                 uint32_t b, sensim_hit_t* hits, uint64_t* id) {
  ray_spans_t sp;
  sensim_v1_Envelope* tx = sensim_begin(cli, sensim_v1_Envelope_raycast_tag);
  sensim_v1_Raycast* m = &tx->body.raycast;
  size_t n = (size_t)(b - a);
  const double* origin = r->origin;
  if (!origin && n > 1 && (cli->session.features & SENSIM_FEATURE_RAYCAST_ORIGIN) &&
      one_origin(r->origins + 3 * (size_t)a, (uint32_t)n)) {
    origin = r->origins + 3 * (size_t)a;
  }
  if (origin) {
    m->has_origin = true;
    m->origin = (sensim_v1_Vec3){.has_x = true, .x = origin[0], .has_y = true,
                                 .y = origin[1], .has_z = true, .z = origin[2]};
  } else {
    set_aligned(&m->origins_bytes, &sp.origins, &sp.body_at, r->origins + 3 * (size_t)a,
                24 * n);
  }
  set_aligned(&m->directions_bytes, &sp.directions, &sp.body_at, r->directions + 3 * (size_t)a,
              24 * n);
  if (r->ntimes > 1) {
    set_aligned(&m->times_bytes, &sp.times, &sp.body_at, r->times + a, 8 * n);
  } else {
    set_aligned(&m->times_bytes, &sp.times, &sp.body_at, r->times, 8 * (size_t)r->ntimes);
  }
  if (r->max_range != 0.0) {
    m->has_max_range = true;
    m->max_range = r->max_range;
  }
  sensim_wire_set_u32s(&m->exclude_bodies, &sp.exclude, r->exclude_bodies, r->nexclude_bodies);
  if (r->group_mask != 0) {
    m->has_group_mask = true;
    m->group_mask = r->group_mask;
  }
  if (cli->session.features & SENSIM_FEATURE_RAYCAST_HIT_MASK) {
    m->has_omit_misses = true;   // the hits alone come back, spread over the rays on arrival
    m->omit_misses = true;
  }

  // where the body starts in the frame depends on the body's length, which the padding
  // changes by a few bytes: sized until the two agree (a length a few bytes from a varint's
  // boundary could flip between two; then an array may be left unaligned: only slower)
  sp.body_at = sensim_wire_body_at(tx->id, sensim_v1_Envelope_raycast_tag, 0);
  for (int k = 0; k < 3; k++) {
    size_t len;
    if (!pb_get_encoded_size(&len, sensim_v1_Raycast_fields, m)) {
      break;  // sensim_queue meets the same failure and reports it
    }
    size_t at = sensim_wire_body_at(tx->id, sensim_v1_Envelope_raycast_tag, len);
    if (at == sp.body_at) {
      break;
    }
    sp.body_at = at;
  }
  bool omit_misses = m->omit_misses;
  uint64_t rid;
  sensim_status_t st = sensim_queue(cli, SLOT_RAYCAST, &rid);
  if (st != SENSIM_OK) {
    return st;
  }
  slot_t* s = sensim_slot(cli, rid);
  s->hits = hits + a;
  s->nrays = (uint32_t)n;
  s->omit_misses = omit_misses;
  if (id) {
    *id = rid;
  }
  return sensim_flush(cli);
}


sensim_status_t sensim_raycast_wait(sensim_client_t* cli, uint64_t id, int timeout_ms,
                                    uint64_t* world_serial) {
  if (!cli) {
    return SENSIM_INVALID_ARGUMENT;
  }
  slot_t* s;
  sensim_status_t st = sensim_wait_slot(cli, id, timeout_ms, SLOT_RAYCAST, &s);
  if (st != SENSIM_OK) {
    return st;
  }
  st = s->status;
  if (st != SENSIM_OK) {
    sensim_cli_fail(cli, st, "%s", s->message ? s->message
                                              : cli->closed_reason[0] ? cli->closed_reason
                                                                      : "connection closed");
  } else if (world_serial) {
    *world_serial = s->world_serial;
  }
  sensim_slot_free(cli, s, false);
  return st;
}


// Parts of a raycast of n >= PIPELINE_MIN_RAYS rays: an edge part at each end, the rays
// between them in parts of at most PIPELINE_RAYS.
static uint32_t middle_parts(uint32_t n) {
  return (n - 2 * PIPELINE_EDGE_RAYS + PIPELINE_RAYS - 1) / PIPELINE_RAYS;
}


static uint32_t part_count(uint32_t n) {
  return middle_parts(n) + 2;
}


// The first ray of part i (i = part_count(n): n).
static uint32_t part_start(uint32_t n, uint32_t i) {
  if (i == 0) {
    return 0;
  }
  uint32_t m = middle_parts(n);
  if (i > m + 1) {
    return n;
  }
  uint64_t middle = n - 2 * PIPELINE_EDGE_RAYS;
  return PIPELINE_EDGE_RAYS + (uint32_t)(middle * (i - 1) / m);
}


// The raycast as parts in flight, joined into hits. Returns SENSIM_OK with *joined when every
// part succeeded and saw one world; *joined false (status OK) when they must be sent again
// as one request; or a transport failure.
static sensim_status_t pipelined(sensim_client_t* cli, const sensim_raycast_t* r,
                                 sensim_hit_t* hits, uint64_t* serial, bool* joined) {
  uint32_t n = r->nrays;
  uint32_t k = part_count(n);
  uint64_t ids[PIPELINE_WINDOW];
  uint32_t sent = 0, got = 0;
  bool same = true;
  sensim_status_t st = SENSIM_OK;
  *joined = false;

  // a part is sent when the one PIPELINE_WINDOW before it is in; after a failure or a
  // different world the parts in flight are still collected, and no more are sent
  while (got < k) {
    while (same && st == SENSIM_OK && sent < k && sent - got < PIPELINE_WINDOW) {
      uint32_t a = part_start(n, sent), b = part_start(n, sent + 1);
      st = send_part(cli, r, a, b, hits, &ids[sent % PIPELINE_WINDOW]);
      if (st == SENSIM_OK) {
        sent++;
      }
    }
    if (got == sent) {
      break;
    }
    slot_t* s;
    sensim_status_t w = sensim_wait_slot(cli, ids[got % PIPELINE_WINDOW], -1, SLOT_RAYCAST, &s);
    got++;
    if (w != SENSIM_OK) {
      return w;  // the connection failed: every part has failed with it
    }
    if (s->status != SENSIM_OK || !s->has_serial) {
      cli->serial_unknown |= s->status == SENSIM_OK;  // a daemon without world_serial
      same = false;
    } else if (got == 1) {
      *serial = s->world_serial;
    } else if (s->world_serial != *serial) {
      same = false;
    }
    sensim_slot_free(cli, s, false);
  }
  if (st != SENSIM_OK && cli->fd < 0) {
    return st;
  }
  *joined = same && st == SENSIM_OK && sent == k;
  return SENSIM_OK;
}


// sensim_raycast with its origins chosen (r checked).
static sensim_status_t raycast_chosen(sensim_client_t* cli, const sensim_raycast_t* rays,
                                      sensim_hit_t* hits, uint64_t* world_serial) {
  sensim_raycast_t r = *rays;
  sensim_status_t st;

  // the hits must fit one reply: their records (a daemon that sends the hits alone: at most
  // a record a ray and the mask) and at most REPLY_SLACK bytes around them
  uint32_t limit = cli->session.limits.max_frame_bytes;
  uint64_t cap = limit && limit < cli->max_frame_in ? limit : cli->max_frame_in;
  uint64_t reply = (cli->session.features & SENSIM_FEATURE_RAYCAST_HIT_MASK)
                       ? (uint64_t)MASKED_HIT_BYTES * r.nrays + (r.nrays + 7) / 8
                       : (uint64_t)HIT_BYTES * r.nrays;
  reply += REPLY_SLACK;
  if (reply > cap) {
    return sensim_cli_fail(cli, SENSIM_RESOURCE_EXHAUSTED,
                           "raycast of %u rays: a reply of up to %llu bytes exceeds "
                           "max_frame_bytes %llu; split the rays", r.nrays,
                           (unsigned long long)reply, (unsigned long long)cap);
  }

  // the request itself is measured exactly when it is framed (sensim_queue: refused there
  // when it is one byte over the daemon's limit, nothing sent); in parts only when the whole
  // surely fits one request, so that the parts can always be sent again as one
  uint64_t per_ray = r.origin ? 24 : 48;
  uint64_t request = per_ray * r.nrays + 8ull * r.ntimes + 5ull * r.nexclude_bodies +
                     REQUEST_SLACK;
  uint64_t serial = 0;
  if (r.nrays >= PIPELINE_MIN_RAYS && !cli->serial_unknown && (!limit || request <= limit)) {
    bool joined;
    st = pipelined(cli, &r, hits, &serial, &joined);
    if (st != SENSIM_OK || joined) {
      if (st == SENSIM_OK && world_serial) {
        *world_serial = serial;
      }
      return st;
    }
  }
  uint64_t id;
  st = send_part(cli, &r, 0, r.nrays, hits, &id);
  return st != SENSIM_OK ? st : sensim_raycast_wait(cli, id, -1, world_serial);
}


// The caller's rays checked and their origin chosen, then sent as one request (*id), or
// (whole) traced to the end in parts or as one (*world_serial).
static sensim_status_t raycast_start(sensim_client_t* cli, const sensim_raycast_t* rays,
                                     sensim_hit_t* hits, bool whole, uint64_t* id,
                                     uint64_t* world_serial) {
  if (!cli) {
    return SENSIM_INVALID_ARGUMENT;
  }
  sensim_raycast_t r;
  double* expanded = NULL;
  sensim_status_t st = check_rays(cli, rays, &r, hits);
  if (st == SENSIM_OK && (st = choose_origin(cli, &r, &expanded)) == SENSIM_OK) {
    st = whole ? raycast_chosen(cli, &r, hits, world_serial)
               : send_part(cli, &r, 0, r.nrays, hits, id);
  }
  free(expanded);
  return st;
}


sensim_status_t sensim_raycast(sensim_client_t* cli, const sensim_raycast_t* rays,
                               sensim_hit_t* hits, uint64_t* world_serial) {
  return raycast_start(cli, rays, hits, true, NULL, world_serial);
}


sensim_status_t sensim_raycast_send(sensim_client_t* cli, const sensim_raycast_t* rays,
                                    sensim_hit_t* hits, uint64_t* id) {
  return raycast_start(cli, rays, hits, false, id, NULL);   // sent when it returns
}
