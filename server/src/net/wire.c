// SPDX-License-Identifier: MIT
// wire.c: protobuf-c codec of the Envelope, classification of requests, and the encoders of
// the session-level replies (status, hello, pong, info). Environment requests are translated
// in wire_env.c.
#include "net/wire.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "base/mem.h"
#include "base/text.h"
#include "net/wire_pb.h"
#include "net/wire_tick.h"

// Most bytes fields of one body left in the frame (wire_decode_frame).
#define WIRE_BORROW_MAX 8

// Bytes of a request's own arena for what protobuf-c allocates while decoding it: a lock-step
// tick's UpdateState of one body (seven parts) and its Step (two) fit, so that neither costs a
// malloc and a free per part, nor free_unpacked's walk over the descriptors; a larger request
// takes its other parts from the heap as before. The request stays within malloc's fast bins.
#define WIRE_ARENA_BYTES 640
#define WIRE_ARENA_ALIGN 16
#define WIRE_HEAP_LISTED 12

struct wire_request {
  Sensim__V1__Envelope* env;
  size_t size;
  int (*cancelled)(void* ctx);  // nullable
  void* cancel_ctx;
  char* bad_text;               // nullable: why a string field is refused (wire_text_error)
  uint8_t* frame;               // nullable: the frame the borrowed fields point into (owned)
  ProtobufCBinaryData* borrowed[WIRE_BORROW_MAX];  // fields of env pointing into frame
  uint32_t nborrowed;
  uint32_t heap_parts;          // parts of env outside the arena (then free_unpacked runs)
  int plain_tick;               // decoded by wire_tick_decode (no text field to check)
  // The first parts outside the arena: a tick's (at most WIRE_HEAP_LISTED: an UpdateState
  // of many bodies, its arrays and bytes) are freed from this list, without free_unpacked's
  // walk over the descriptors (about 1,000 instructions for an UpdateState's five parts).
  void* heap_listed[WIRE_HEAP_LISTED];
  size_t arena_used;
  _Alignas(WIRE_ARENA_ALIGN) uint8_t arena[WIRE_ARENA_BYTES];   // the other parts of env
};


static void* pb_alloc(void* data, size_t size) {
  (void)data;
  return mem_alloc(size);
}


static void pb_free(void* data, void* ptr) {
  (void)data;
  mem_free(ptr);
}


// protobuf-c allocates through base/mem.h so that tests can count and fail allocations.
ProtobufCAllocator wire_allocator = {pb_alloc, pb_free, NULL};


// Decoding is bounded: protobuf-c allocates a struct per sub-message and per unknown field, so a
// frame of tiny fields could otherwise decode into many times its size on the loop thread.
typedef struct decode_budget {
  size_t left;
  int exhausted;
  wire_request_t* r;            // whose arena takes the parts first
} decode_budget_t;


static int in_arena(const wire_request_t* r, const void* p) {
  uintptr_t a = (uintptr_t)r->arena, q = (uintptr_t)p;
  return q >= a && q < a + WIRE_ARENA_BYTES;
}


static void* budget_alloc(void* data, size_t size) {
  decode_budget_t* b = data;
  if (size > b->left) {
    b->exhausted = 1;
    return NULL;
  }
  b->left -= size;
  wire_request_t* r = b->r;
  size_t whole = (size + WIRE_ARENA_ALIGN - 1) / WIRE_ARENA_ALIGN * WIRE_ARENA_ALIGN;
  if (whole >= size && whole <= WIRE_ARENA_BYTES - r->arena_used) {
    void* p = r->arena + r->arena_used;
    r->arena_used += whole;
    return p;
  }
  void* p = mem_alloc(size);
  if (p && r->heap_parts < WIRE_HEAP_LISTED) {
    r->heap_listed[r->heap_parts] = p;
  }
  r->heap_parts += p != NULL;
  return p;
}


// The parts of a request's message: those in its arena go with it.
static void request_part_free(void* data, void* ptr) {
  const wire_request_t* r = data;
  if (!in_arena(r, ptr)) {
    mem_free(ptr);
  }
}


static void budget_free(void* data, void* ptr) {
  request_part_free(((decode_budget_t*)data)->r, ptr);
}


// Strings are checked on the encoded bytes, where their length is known: protobuf-c hands out
// NUL-terminated copies, so "ab\0cd" would silently become "ab" after decoding.
#define TEXT_MAX_DEPTH 32

static int read_varint(const uint8_t* p, size_t n, size_t* pos, uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 64 && *pos < n; shift += 7) {
    uint8_t b = p[(*pos)++];
    *v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      return 0;
    }
  }
  return -1;
}


// path + "." + name (name alone at the start), cut to WIRE_STATUS_MAX - 1 bytes; returns the
// new length. Runs for every message and string field of every request: no printf.
static size_t path_append(char* path, size_t path_len, const char* name) {
  size_t at = path_len;
  if (at > 0 && at < WIRE_STATUS_MAX - 1) {
    path[at++] = '.';
  }
  size_t n = strlen(name);
  if (n > WIRE_STATUS_MAX - 1 - at) {
    n = WIRE_STATUS_MAX - 1 - at;
  }
  memcpy(path + at, name, n);
  path[at + n] = '\0';
  return at + n;
}


// Whether a message of descriptor d can hold text: a string field, or a message field (which
// may). A tick's UpdateState and Step hold none: their fields are not walked one lookup each.
static int may_hold_text(const ProtobufCMessageDescriptor* d) {
  for (unsigned i = 0; i < d->n_fields; i++) {
    if (d->fields[i].type == PROTOBUF_C_TYPE_STRING ||
        d->fields[i].type == PROTOBUF_C_TYPE_MESSAGE) {
      return 1;
    }
  }
  return 0;
}


// Walk one encoded message: every string field (at any depth) must be clean and at most
// TEXT_NAME_MAX bytes. path holds the field path so far ("create_body"). 0 or ERR_INVAL.
static int check_text(const ProtobufCMessageDescriptor* desc, const uint8_t* p, size_t n,
                      int depth, char* path, size_t path_len, err_msg_t* msg) {
  if (!may_hold_text(desc)) {
    return 0;
  }
  size_t pos = 0;
  while (pos < n) {
    uint64_t tag, len;
    if (read_varint(p, n, &pos, &tag)) {
      return 0;  // unreachable for a frame that decoded; nothing more to check
    }
    switch (tag & 7) {
      case 0:
        if (read_varint(p, n, &pos, &len)) {
          return 0;
        }
        continue;
      case 1:
        pos += 8;
        continue;
      case 5:
        pos += 4;
        continue;
      case 2:
        break;
      default:
        return 0;
    }
    if (read_varint(p, n, &pos, &len) || len > n - pos) {
      return 0;
    }
    const uint8_t* v = p + pos;
    pos += (size_t)len;
    const ProtobufCFieldDescriptor* f =
        protobuf_c_message_descriptor_get_field(desc, (unsigned)(tag >> 3));
    if (!f || (f->type != PROTOBUF_C_TYPE_STRING && f->type != PROTOBUF_C_TYPE_MESSAGE)) {
      continue;
    }
    size_t sub_len = path_append(path, path_len, f->name);
    if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
      if (depth >= TEXT_MAX_DEPTH) {
        return err_set(msg, ERR_INVAL, "%s is nested more than %d messages deep", path,
                       TEXT_MAX_DEPTH);
      }
      int rc = check_text(f->descriptor, v, (size_t)len, depth + 1, path, sub_len, msg);
      if (rc) {
        return rc;
      }
    } else {
      size_t at;
      if (len > TEXT_NAME_MAX) {
        return err_set(msg, ERR_INVAL, "%s is %llu bytes; text fields are at most %u bytes",
                       path, (unsigned long long)len, TEXT_NAME_MAX);
      }
      if (!text_is_clean((const char*)v, (size_t)len, &at)) {
        return err_set(msg, ERR_INVAL,
                       "%s contains a NUL, a control character or invalid UTF-8 (byte 0x%02x "
                       "at offset %zu)",
                       path, v[at], at);
      }
    }
    path[path_len] = '\0';
  }
  return 0;
}


const char* wire_text_error(const wire_request_t* r) {
  return r->bad_text;
}


int wire_peek_id(const uint8_t* payload, size_t len, uint64_t* id) {
  // the daemon's replies start with the envelope id (field 1, varint): protobuf-c packs
  // fields in number order
  size_t pos = 0;
  uint64_t tag;
  *id = 0;
  if (read_varint(payload, len, &pos, &tag) || tag != 8) {
    return 0;
  }
  return read_varint(payload, len, &pos, id) == 0;
}


// Unpack `data` (the frame's payload, or what wire_decode_frame keeps of it) into a request,
// within the budget of a frame of frame_len bytes.
static int unpack(const uint8_t* data, size_t n, size_t frame_len, wire_request_t** out,
                  err_msg_t* msg) {
  // the request first: its arena takes the message's parts
  wire_request_t* r = mem_alloc(sizeof(*r));
  if (!r) {
    return err_set(msg, ERR_NOMEM, "out of memory decoding a frame");
  }
  memset(r, 0, offsetof(wire_request_t, arena));
  decode_budget_t budget = {WIRE_DECODE_FACTOR * frame_len + WIRE_DECODE_SLACK, 0, r};
  ProtobufCAllocator bounded = {budget_alloc, budget_free, &budget};
  Sensim__V1__Envelope* env = NULL;
  r->plain_tick = wire_tick_decode(data, n, &bounded, &env);
  if (!r->plain_tick) {
    // anything but a tick's plain request: protobuf-c, from an untouched budget and arena
    budget = (decode_budget_t){WIRE_DECODE_FACTOR * frame_len + WIRE_DECODE_SLACK, 0, r};
    r->arena_used = 0;
    r->heap_parts = 0;
    env = sensim__v1__envelope__unpack(&bounded, n, data);
  }
  if (!env) {
    mem_free(r);
    if (budget.exhausted) {
      return err_set(msg, ERR_LIMIT,
                     "frame of %zu bytes decodes to more than %zu bytes (unknown or empty "
                     "fields?)", frame_len, WIRE_DECODE_FACTOR * frame_len + WIRE_DECODE_SLACK);
    }
    return err_set(msg, ERR_PROTO,
                   "frame of %zu bytes does not decode as a sensim.v1.Envelope", frame_len);
  }
  r->env = env;
  r->size = frame_len + (WIRE_DECODE_FACTOR * frame_len + WIRE_DECODE_SLACK - budget.left);
  *out = r;
  return 0;
}


// A refused string is answered as a bad argument of the request, not as a broken stream.
static int check_request_text(wire_request_t* r, const uint8_t* payload, size_t len,
                              err_msg_t* msg) {
  if (r->plain_tick) {
    return 0;  // an Envelope's id and sequence and an UpdateState or Step: no text in them
  }
  char path[WIRE_STATUS_MAX] = "";
  err_msg_t tmsg;
  if (check_text(&sensim__v1__envelope__descriptor, payload, len, 0, path, 0, &tmsg) != 0) {
    r->bad_text = mem_strdup(tmsg.text);
    if (!r->bad_text) {
      return err_set(msg, ERR_NOMEM, "out of memory decoding a frame");
    }
  }
  return 0;
}


int wire_decode(const uint8_t* payload, size_t len, wire_request_t** out, err_msg_t* msg) {
  wire_request_t* r = NULL;
  int rc = unpack(payload, len, len, &r, msg);
  if (rc == 0 && (rc = check_request_text(r, payload, len, msg)) != 0) {
    wire_free(r);
  }
  if (rc == 0) {
    *out = r;
  }
  return rc;
}


//---------------- Decoding a frame the request owns: its large bytes fields are not copied

// A bytes field of the body at least this long is left in the frame (origins and directions
// of a raycast, a mesh's vertices, a state's bodies): protobuf-c would copy it.
#define WIRE_BORROW_MIN 4096u

typedef struct borrow_plan {
  const ProtobufCFieldDescriptor* body;    // the Envelope's field holding the body
  size_t body_at, body_len;                // the body's contents in the payload
  size_t body_field_at, body_field_end;    // the body field itself (tag, length, contents)
  size_t removed;                          // bytes of the borrowed fields, whole
  uint32_t n;
  const ProtobufCFieldDescriptor* field[WIRE_BORROW_MAX];
  size_t at[WIRE_BORROW_MAX];              // each borrowed field: its value...
  size_t len[WIRE_BORROW_MAX];
  size_t field_at[WIRE_BORROW_MAX];        // ... and the whole field (tag, length, value)
} borrow_plan_t;


// Skip one field's value of wire type `wt` at *pos; -1 for groups or a value past n.
static int skip_value(const uint8_t* p, size_t n, size_t* pos, unsigned wt, uint64_t* len) {
  uint64_t v;
  switch (wt) {
    case 0:
      return read_varint(p, n, pos, &v);
    case 1:
      *pos += 8;
      return *pos <= n ? 0 : -1;
    case 5:
      *pos += 4;
      return *pos <= n ? 0 : -1;
    case 2:
      if (read_varint(p, n, pos, len) || *len > n - *pos) {
        return -1;
      }
      *pos += (size_t)*len;
      return 0;
    default:
      return -1;
  }
}


// Which bytes fields of the body can stay in the frame: singular, outside any oneof, at least
// WIRE_BORROW_MIN bytes, each present once; the body present once. 0 with plan->n > 0 when
// there are some; -1 when none (or when the frame is anything but plain: a decode with copies
// then handles it as always).
static int plan_borrow(const uint8_t* p, size_t n, borrow_plan_t* plan) {
  memset(plan, 0, sizeof(*plan));
  size_t pos = 0;
  while (pos < n) {
    size_t field_at = pos;
    uint64_t tag, len = 0;
    if (read_varint(p, n, &pos, &tag)) {
      return -1;
    }
    if (skip_value(p, n, &pos, (unsigned)(tag & 7), &len)) {
      return -1;
    }
    size_t value_at = pos - (size_t)len;  // a length-delimited value: after its length
    const ProtobufCFieldDescriptor* f = protobuf_c_message_descriptor_get_field(
        &sensim__v1__envelope__descriptor, (unsigned)(tag >> 3));
    if (!f || f->type != PROTOBUF_C_TYPE_MESSAGE || (tag & 7) != 2) {
      continue;
    }
    if (plan->body) {
      return -1;  // two bodies (or a merged one): as always
    }
    plan->body = f;
    plan->body_at = value_at;
    plan->body_len = (size_t)len;
    plan->body_field_at = field_at;
    plan->body_field_end = pos;
  }
  if (!plan->body) {
    return -1;
  }
  const ProtobufCMessageDescriptor* d = plan->body->descriptor;
  const uint8_t* b = p + plan->body_at;
  size_t bn = plan->body_len;
  pos = 0;
  uint64_t seen = 0;      // field numbers below 64 met so far
  uint64_t borrowed = 0;  // of which borrowed (a borrowed field's number is below 64)
  while (pos < bn) {
    size_t field_at = pos;
    uint64_t tag, len = 0;
    if (read_varint(b, bn, &pos, &tag)) {
      return -1;
    }
    if (skip_value(b, bn, &pos, (unsigned)(tag & 7), &len)) {
      return -1;
    }
    size_t value_at = pos - (size_t)len;
    uint64_t number = tag >> 3;
    uint64_t bit = number < 64 ? 1ull << number : 0;
    if (borrowed & bit) {
      return -1;  // a borrowed field met again: the last one counts; as always
    }
    int again = (seen & bit) != 0;
    seen |= bit;
    const ProtobufCFieldDescriptor* f =
        protobuf_c_message_descriptor_get_field(d, (unsigned)number);
    if (!f || f->type != PROTOBUF_C_TYPE_BYTES || (tag & 7) != 2 || len < WIRE_BORROW_MIN ||
        f->label == PROTOBUF_C_LABEL_REPEATED || (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) ||
        again || !bit || plan->n == WIRE_BORROW_MAX) {
      continue;
    }
    borrowed |= bit;
    plan->field[plan->n] = f;
    plan->at[plan->n] = plan->body_at + value_at;
    plan->len[plan->n] = (size_t)len;
    plan->field_at[plan->n] = plan->body_at + field_at;
    plan->removed += pos - field_at;
    plan->n++;
  }
  return plan->n > 0 ? 0 : -1;
}


// The payload without the borrowed fields (the body's length rewritten): what protobuf-c
// decodes. Returns its length; out has room for n bytes.
static size_t without_borrowed(const uint8_t* p, size_t n, const borrow_plan_t* plan,
                               uint8_t* out) {
  uint8_t* o = out;
  memcpy(o, p, plan->body_field_at);
  o += plan->body_field_at;
  o = wire_put_varint(o, (uint64_t)plan->body->id << 3 | 2);
  o = wire_put_varint(o, plan->body_len - plan->removed);
  size_t from = plan->body_at;
  for (uint32_t i = 0; i < plan->n; i++) {  // in payload order
    memcpy(o, p + from, plan->field_at[i] - from);
    o += plan->field_at[i] - from;
    from = plan->at[i] + plan->len[i];
  }
  memcpy(o, p + from, plan->body_at + plan->body_len - from);
  o += plan->body_at + plan->body_len - from;
  memcpy(o, p + plan->body_field_end, n - plan->body_field_end);
  o += n - plan->body_field_end;
  return (size_t)(o - out);
}


// Point the borrowed fields of the decoded request into its frame. -1 when the body is not
// where the plan expects it (never for a frame that decoded: then decoded with copies).
static int lend(wire_request_t* r, const uint8_t* payload, const borrow_plan_t* plan) {
  const ProtobufCFieldDescriptor* bf = plan->body;
  if (bf->quantifier_offset &&
      *(const uint32_t*)((const char*)r->env + bf->quantifier_offset) != bf->id) {
    return -1;
  }
  ProtobufCMessage* body = *(ProtobufCMessage**)((char*)r->env + bf->offset);
  if (!body) {
    return -1;
  }
  for (uint32_t i = 0; i < plan->n; i++) {
    const ProtobufCFieldDescriptor* f = plan->field[i];
    ProtobufCBinaryData* v = (ProtobufCBinaryData*)((char*)body + f->offset);
    v->data = (uint8_t*)payload + plan->at[i];
    v->len = plan->len[i];
    if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->quantifier_offset) {
      *(protobuf_c_boolean*)((char*)body + f->quantifier_offset) = 1;
    }
    r->borrowed[r->nborrowed++] = v;
  }
  return 0;
}


int wire_decode_frame(const uint8_t* payload, size_t len, wire_take_fn take, void* take_ctx,
                      wire_request_t** out, err_msg_t* msg) {
  borrow_plan_t plan;
  uint8_t* frame = NULL;
  uint8_t* rest = NULL;
  wire_request_t* r = NULL;

  // the frame is taken from its owner only when something of it is borrowed
  if (plan_borrow(payload, len, &plan) == 0 && (frame = take(take_ctx)) != NULL) {
    rest = mem_alloc(len - plan.removed + 16);  // + a body length's varint, never longer
  }
  if (rest && unpack(rest, without_borrowed(payload, len, &plan, rest), len, &r, msg) == 0 &&
      lend(r, payload, &plan) == 0) {
    r->frame = frame;
    size_t held = mem_footprint(frame);
    r->size += held > len ? held - len : 0;  // the frame's block, all of it
    mem_free(rest);
    int rc = check_request_text(r, payload, len, msg);
    if (rc == 0) {
      *out = r;
    } else {
      wire_free(r);
    }
    return rc;
  }

  // nothing to borrow, or anything unusual: decoded with copies, errors reported as always
  mem_free(rest);
  wire_free(r);
  int rc = wire_decode(payload, len, out, msg);
  mem_free(frame);
  return rc;
}


void wire_free(wire_request_t* r) {
  if (!r) {
    return;
  }
  for (uint32_t i = 0; i < r->nborrowed; i++) {
    r->borrowed[i]->data = NULL;  // the frame's, not protobuf-c's to free
    r->borrowed[i]->len = 0;
  }
  if (r->env && r->plain_tick && r->heap_parts <= WIRE_HEAP_LISTED) {
    // the hand decoder frees nothing once it has decoded: every part it took is listed
    for (uint32_t i = 0; i < r->heap_parts; i++) {
      mem_free(r->heap_listed[i]);
    }
  } else if (r->env && r->heap_parts) {
    ProtobufCAllocator parts = {pb_alloc, request_part_free, r};
    sensim__v1__envelope__free_unpacked(r->env, &parts);
  }
  mem_free(r->frame);
  mem_free(r->bad_text);
  mem_free(r);
}


const Sensim__V1__Envelope* wire_envelope(const wire_request_t* r) {
  return r->env;
}


void wire_set_cancel(wire_request_t* r, int (*cancelled)(void* ctx), void* ctx) {
  r->cancelled = cancelled;
  r->cancel_ctx = ctx;
}


void wire_get_cancel(const wire_request_t* r, int (**cancelled)(void* ctx), void** ctx) {
  *cancelled = r->cancelled;
  *ctx = r->cancel_ctx;
}


uint64_t wire_id(const wire_request_t* r) {
  return r->env->has_id ? r->env->id : 0;
}


size_t wire_size(const wire_request_t* r) {
  return r->size;
}


wire_kind_t wire_kind(const wire_request_t* r) {
  switch (r->env->body_case) {
    case SENSIM__V1__ENVELOPE__BODY__NOT_SET:
      return WIRE_KIND_EMPTY;
    case SENSIM__V1__ENVELOPE__BODY_HELLO:
      return WIRE_KIND_HELLO;
    case SENSIM__V1__ENVELOPE__BODY_PING:
      return WIRE_KIND_PING;
    case SENSIM__V1__ENVELOPE__BODY_GET_INFO:
      return WIRE_KIND_GET_INFO;
    case SENSIM__V1__ENVELOPE__BODY_RAYCAST:
    case SENSIM__V1__ENVELOPE__BODY_DESCRIBE:
      return WIRE_KIND_ENV_READ;
    case SENSIM__V1__ENVELOPE__BODY_REMOVE:
      return r->env->remove->has_kind &&
                     r->env->remove->kind == SENSIM__V1__ENTITY_KIND__ENTITY_ENVIRONMENT
                 ? WIRE_KIND_ENV_RELEASE
                 : WIRE_KIND_ENV_WRITE;
    case SENSIM__V1__ENVELOPE__BODY_CREATE_MESH:
    case SENSIM__V1__ENVELOPE__BODY_CREATE_PRIMITIVE:
    case SENSIM__V1__ENVELOPE__BODY_SET_MATERIAL:
    case SENSIM__V1__ENVELOPE__BODY_SET_AMBIENT:
    case SENSIM__V1__ENVELOPE__BODY_SET_ENVIRONMENT:
    case SENSIM__V1__ENVELOPE__BODY_CREATE_BODY:
    case SENSIM__V1__ENVELOPE__BODY_CREATE_OBJECT:
    case SENSIM__V1__ENVELOPE__BODY_CREATE_JOINT:
    case SENSIM__V1__ENVELOPE__BODY_UPDATE_STATE:
    case SENSIM__V1__ENVELOPE__BODY_STEP:
    case SENSIM__V1__ENVELOPE__BODY_CREATE_SENSOR:
      return WIRE_KIND_ENV_WRITE;
    case SENSIM__V1__ENVELOPE__BODY_SUBSCRIBE:
      return WIRE_KIND_SUBSCRIBE;
    case SENSIM__V1__ENVELOPE__BODY_UNSUBSCRIBE:
      return WIRE_KIND_UNSUBSCRIBE;
    case SENSIM__V1__ENVELOPE__BODY_HELLO_REPLY:
    case SENSIM__V1__ENVELOPE__BODY_PONG:
    case SENSIM__V1__ENVELOPE__BODY_INFO:
    case SENSIM__V1__ENVELOPE__BODY_DESCRIPTION:
    case SENSIM__V1__ENVELOPE__BODY_STEP_DONE:
    case SENSIM__V1__ENVELOPE__BODY_RAYCAST_RESULT:
    case SENSIM__V1__ENVELOPE__BODY_SENSOR_DATA:
      return WIRE_KIND_REPLY;
    default:
      return WIRE_KIND_EMPTY;
  }
}


const char* wire_body_name(const wire_request_t* r) {
  const ProtobufCFieldDescriptor* f = protobuf_c_message_descriptor_get_field(
      &sensim__v1__envelope__descriptor, (unsigned)r->env->body_case);
  return f ? f->name : "(none)";
}


void wire_get_subscribe(const wire_request_t* r, wire_subscribe_t* out) {
  memset(out, 0, sizeof(*out));
  if (r->env->body_case == SENSIM__V1__ENVELOPE__BODY_UNSUBSCRIBE) {
    out->sensor_id = r->env->unsubscribe->has_sensor_id ? r->env->unsubscribe->sensor_id : 0;
    return;
  }
  const Sensim__V1__Subscribe* m = r->env->subscribe;
  out->sensor_id = m->has_sensor_id ? m->sensor_id : 0;
  out->encoding = m->has_encoding ? (int)m->encoding : 0;
  out->has_precision = m->has_precision;
  out->precision = m->precision;
  out->level = m->has_level ? m->level : 0;
  out->fields = (const char* const*)m->fields;
  out->nfield = m->n_fields;
}


int wire_removes_sensor(const wire_request_t* r, uint32_t* sensor_id) {
  if (r->env->body_case != SENSIM__V1__ENVELOPE__BODY_REMOVE || !r->env->remove->has_kind ||
      r->env->remove->kind != SENSIM__V1__ENTITY_KIND__ENTITY_SENSOR) {
    return 0;
  }
  *sensor_id = r->env->remove->has_id ? r->env->remove->id : 0;
  return 1;
}


int wire_is_step(const wire_request_t* r) {
  return r->env->body_case == SENSIM__V1__ENVELOPE__BODY_STEP;
}


int wire_step_time(const wire_request_t* r, double* out) {
  if (r->env->body_case != SENSIM__V1__ENVELOPE__BODY_STEP || !r->env->step->has_time) {
    return 0;
  }
  *out = r->env->step->time;
  return 1;
}


int wire_is_state_update(const wire_request_t* r) {
  return r->env->body_case == SENSIM__V1__ENVELOPE__BODY_UPDATE_STATE;
}


static const char* str_or_empty(const char* s) {
  return s ? s : "";
}


void wire_get_hello(const wire_request_t* r, wire_hello_t* out) {
  const Sensim__V1__Hello* h = r->env->hello;
  out->protocol_version = h->has_protocol_version ? h->protocol_version : 0;
  out->client_name = str_or_empty(h->client_name);
  out->environment = str_or_empty(h->environment);
  out->token = str_or_empty(h->token);
  out->observer = h->has_role && h->role == SENSIM__V1__ROLE__ROLE_OBSERVER;
  out->role = h->has_role ? (int)h->role : 0;
  out->retention = h->has_retention ? (int)h->retention : 0;
}


int wire_status_code(int code) {
  switch (code) {
    case 0:
      return SENSIM__V1__STATUS_CODE__OK;
    case ERR_INVAL:
    case ERR_PROTO:
      return SENSIM__V1__STATUS_CODE__INVALID_ARGUMENT;
    case ERR_NOTFOUND:
      return SENSIM__V1__STATUS_CODE__NOT_FOUND;
    case ERR_EXISTS:
      return SENSIM__V1__STATUS_CODE__ALREADY_EXISTS;
    case ERR_LIMIT:
    case ERR_NOMEM:
      return SENSIM__V1__STATUS_CODE__RESOURCE_EXHAUSTED;
    case ERR_STATE:
      return SENSIM__V1__STATUS_CODE__FAILED_PRECONDITION;
    case ERR_UNIMPL:
      return SENSIM__V1__STATUS_CODE__UNIMPLEMENTED;
    case ERR_AUTH:
      return SENSIM__V1__STATUS_CODE__UNAUTHENTICATED;
    case WIRE_ERR_DEADLINE:
      return SENSIM__V1__STATUS_CODE__DEADLINE_EXCEEDED;
    default:
      return SENSIM__V1__STATUS_CODE__INTERNAL;
  }
}


int wire_pack(Sensim__V1__Envelope* env, uint8_t** out, size_t* out_len) {
  size_t n = sensim__v1__envelope__get_packed_size(env);
  uint8_t* p = mem_alloc(n ? n : 1);
  if (!p) {
    return ERR_NOMEM;
  }
  sensim__v1__envelope__pack(env, p);
  *out = p;
  *out_len = n;
  return 0;
}


// Envelope{id, status{code OK, message ""}}, the reply of every state update and the head of
// every step's, written here: protobuf-c's measuring and packing of it took about 2,000
// instructions a reply. These are its bytes (proto2: fields in number order, the code and the
// empty message present because they are set; test_wire compares them with protobuf-c's for
// ids of every length).
size_t wire_ok_head(uint64_t id, uint8_t out[WIRE_OK_HEAD_MAX]) {
  static const uint8_t status[] = {0x12, 4, 0x08, SENSIM__V1__STATUS_CODE__OK, 0x12, 0};
  out[0] = 0x08;  // field 1 (id), varint
  size_t n = (size_t)(wire_put_varint(out + 1, id) - out);
  memcpy(out + n, status, sizeof(status));
  return n + sizeof(status);
}


static int pack_ok(uint64_t id, uint8_t** out, size_t* out_len) {
  uint8_t head[WIRE_OK_HEAD_MAX];
  size_t n = wire_ok_head(id, head);
  uint8_t* p = mem_alloc(n);
  if (!p) {
    return ERR_NOMEM;
  }
  memcpy(p, head, n);
  *out = p;
  *out_len = n;
  return 0;
}


int wire_pack_reply(uint64_t id, int code, const char* message, Sensim__V1__Envelope* env,
                    uint8_t** out, size_t* out_len) {
  // status messages fit the clients' fixed buffers (WIRE_STATUS_MAX bytes, proto options)
  char text[WIRE_STATUS_MAX + 1];
  const char* body = message && message[0] ? message
                     : code == WIRE_ERR_DEADLINE ? "deadline exceeded"
                     : code ? err_str(code) : "";
  if (wire_status_code(code) == SENSIM__V1__STATUS_CODE__OK && !body[0] &&
      env->body_case == SENSIM__V1__ENVELOPE__BODY__NOT_SET && !env->has_sequence &&
      env->base.n_unknown_fields == 0) {
    return pack_ok(id, out, out_len);
  }
  snprintf(text, sizeof(text), "%s", body);
  Sensim__V1__Status st = SENSIM__V1__STATUS__INIT;
  st.has_code = 1;
  st.code = (Sensim__V1__StatusCode)wire_status_code(code);
  st.message = text;
  env->has_id = 1;
  env->id = id;
  env->status = &st;
  int rc = wire_pack(env, out, out_len);
  env->status = NULL;
  return rc;
}


int wire_encode_status(uint64_t id, int code, const char* message, uint8_t** out,
                       size_t* out_len) {
  Sensim__V1__Envelope env = SENSIM__V1__ENVELOPE__INIT;
  return wire_pack_reply(id, code, message, &env, out, out_len);
}


static void fill_limits(Sensim__V1__Limits* l, const wire_limits_t* w) {
#define LIM(field, value) (l->has_##field = 1, l->field = (value))
  LIM(max_frame_bytes, w->max_frame_bytes);
  LIM(max_clients, w->max_clients);
  LIM(max_environments, w->max_environments);
  LIM(max_mesh_vertices, w->env.max_mesh_vertices);
  LIM(max_mesh_triangles, w->env.max_mesh_triangles);
  LIM(max_geometries, w->env.max_geometries);
  LIM(max_materials, w->env.max_materials);
  LIM(max_bodies, w->env.max_bodies);
  LIM(max_objects, w->env.max_objects);
  LIM(max_joints, w->env.max_joints);
  LIM(max_sensors, w->env.max_sensors);
  LIM(max_raycast_rays, w->env.max_raycast_rays);
  LIM(max_queue_bytes, w->max_queue_bytes);
  LIM(max_scene_bytes, w->max_scene_bytes);
  LIM(max_held_bytes, w->max_held_bytes);
  LIM(max_name_bytes, TEXT_NAME_MAX);
  LIM(handshake_timeout_ms, w->handshake_timeout_ms);
  LIM(idle_timeout_ms, w->idle_timeout_ms);
  LIM(io_timeout_ms, w->io_timeout_ms);
  LIM(max_request_ms, w->max_request_ms);
  LIM(max_hello_bytes, w->max_hello_bytes);
  LIM(subscriber_max_bytes, w->subscriber_max_bytes);
  LIM(subscriber_soft_bytes, w->subscriber_soft_bytes);
  LIM(subscriber_soft_ms, w->subscriber_soft_ms);
#undef LIM
}


int wire_encode_hello_reply(uint64_t id, const wire_hello_reply_t* h, uint8_t** out,
                            size_t* out_len) {
  Sensim__V1__Limits lim = SENSIM__V1__LIMITS__INIT;
  fill_limits(&lim, h->limits);
  Sensim__V1__HelloReply rep = SENSIM__V1__HELLO_REPLY__INIT;
  rep.server_version = (char*)h->server_version;
  rep.has_protocol_version = 1;
  rep.protocol_version = WIRE_PROTOCOL_VERSION;
  rep.limits = &lim;
  rep.has_session_id = 1;
  rep.session_id = h->session_id;
  rep.environment = (char*)h->environment;
  rep.has_environment_created = 1;
  rep.environment_created = h->environment_created != 0;
  rep.has_threads = 1;
  rep.threads = h->threads;
  // the forms this decoder takes beyond the first protocol (wire_env.c)
  rep.has_features = 1;
  rep.features = SENSIM__V1__FEATURE__FEATURE_RAYCAST_ORIGIN |
                 SENSIM__V1__FEATURE__FEATURE_RAYCAST_HIT_MASK;
  Sensim__V1__Envelope env = SENSIM__V1__ENVELOPE__INIT;
  env.body_case = SENSIM__V1__ENVELOPE__BODY_HELLO_REPLY;
  env.hello_reply = &rep;
  return wire_pack_reply(id, 0, NULL, &env, out, out_len);
}


int wire_encode_pong(const wire_request_t* ping, uint64_t now_ns, uint8_t** out,
                     size_t* out_len) {
  Sensim__V1__Pong pong = SENSIM__V1__PONG__INIT;
  const Sensim__V1__Ping* p = ping->env->ping;
  if (p->has_payload) {
    pong.has_payload = 1;
    pong.payload = p->payload;
  }
  pong.has_server_time_ns = 1;
  pong.server_time_ns = now_ns;
  Sensim__V1__Envelope env = SENSIM__V1__ENVELOPE__INIT;
  env.body_case = SENSIM__V1__ENVELOPE__BODY_PONG;
  env.pong = &pong;
  return wire_pack_reply(wire_id(ping), 0, NULL, &env, out, out_len);
}


static void fill_counters(Sensim__V1__Counters* c, const wire_counters_t* w) {
#define CNT(field) (c->has_##field = 1, c->field = w->field)
  CNT(frames_in);
  CNT(frames_out);
  CNT(bytes_in);
  CNT(bytes_out);
  CNT(requests_failed);
  CNT(connections_total);
  CNT(connections_rejected);
  CNT(frames_rejected);
  CNT(steps);
  CNT(rays_traced);
  CNT(rays_culled);
  CNT(rays_invalid);
  CNT(mesh_builds);
  CNT(instance_updates);
  CNT(scene_commits);
  CNT(backend_errors);
  CNT(backend_bytes);
  CNT(frames_dropped);
  CNT(held_bytes);
  CNT(connections_timed_out);
  CNT(requests_timed_out);
  CNT(bytes_dropped);
  CNT(subscribers_closed);
#undef CNT
}


int wire_encode_info(uint64_t id, const wire_info_t* info, uint8_t** out, size_t* out_len) {
  Sensim__V1__Counters counters = SENSIM__V1__COUNTERS__INIT;
  fill_counters(&counters, &info->counters);
  Sensim__V1__Limits lim = SENSIM__V1__LIMITS__INIT;
  fill_limits(&lim, info->limits);

  // one EnvironmentInfo (and its counters) per environment
  size_t n = info->nenv;
  Sensim__V1__EnvironmentInfo* envs = mem_calloc(n ? n : 1, sizeof(*envs));
  Sensim__V1__EnvironmentInfo** envp = mem_calloc(n ? n : 1, sizeof(*envp));
  Sensim__V1__Counters* envc = mem_calloc(n ? n : 1, sizeof(*envc));
  size_t ns = info->nsub;
  Sensim__V1__SubscriberInfo* subs = mem_calloc(ns ? ns : 1, sizeof(*subs));
  Sensim__V1__SubscriberInfo** subp = mem_calloc(ns ? ns : 1, sizeof(*subp));
  int rc = ERR_NOMEM;
  if (envs && envp && envc && subs && subp) {
    for (size_t i = 0; i < ns; i++) {
      const wire_sub_info_t* w = &info->subs[i];
      Sensim__V1__SubscriberInfo* m = &subs[i];
      sensim__v1__subscriber_info__init(m);
#define SI(field, value) (m->has_##field = 1, m->field = (value))
      SI(session_id, w->session_id);
      SI(sensor_id, w->sensor_id);
      SI(encoding, (Sensim__V1__Encoding)w->encoding);
      if (w->encoding == SENSIM__V1__ENCODING__ENCODING_QUANTIZED_ZSTD) {
        SI(precision, w->precision);
      }
      SI(queued_bytes, w->queued_bytes);
      SI(queued_frames, w->queued_frames);
      SI(frames_sent, w->frames_sent);
      SI(bytes_sent, w->bytes_sent);
      SI(frames_dropped, w->frames_dropped);
      SI(bytes_dropped, w->bytes_dropped);
#undef SI
      m->environment = (char*)w->environment;
      m->peer = (char*)w->peer;
      m->closed_reason = (char*)w->closed_reason;
      subp[i] = m;
    }
    for (size_t i = 0; i < n; i++) {
      const wire_env_info_t* w = &info->envs[i];
      Sensim__V1__EnvironmentInfo* e = &envs[i];
      sensim__v1__environment_info__init(e);
      sensim__v1__counters__init(&envc[i]);
      e->name = (char*)w->name;
#define EI(field, value) (e->has_##field = 1, e->field = (value))
      EI(clients, w->clients);
      EI(geometries, w->info.geometries);
      EI(materials, w->info.materials);
      EI(bodies, w->info.bodies);
      EI(objects, w->info.objects);
      EI(joints, w->info.joints);
      EI(sensors, w->info.sensors);
      if (w->info.time.has_time) {
        EI(time, w->info.time.t_cur);
      }
      EI(steps, w->info.time.steps);
      EI(retention, (Sensim__V1__Retention)w->retention);
#undef EI
      wire_counters_t wc = {0};
      wc.steps = w->info.time.steps;
      wc.rays_traced = w->info.scene.rays_traced;
      wc.rays_culled = w->info.scene.rays_culled;
      wc.rays_invalid = w->info.scene.rays_invalid;
      wc.mesh_builds = w->info.scene.geometry_builds;
      wc.instance_updates = w->info.scene.instance_updates;
      wc.scene_commits = w->info.scene.commits;
      fill_counters(&envc[i], &wc);
      e->counters = &envc[i];
      envp[i] = e;
    }
    Sensim__V1__Info msg = SENSIM__V1__INFO__INIT;
    msg.server_version = (char*)info->server_version;
    msg.has_protocol_version = 1;
    msg.protocol_version = WIRE_PROTOCOL_VERSION;
    msg.has_uptime_s = 1;
    msg.uptime_s = info->uptime_s;
    msg.has_connections = 1;
    msg.connections = info->connections;
    msg.has_threads = 1;
    msg.threads = info->threads;
    msg.counters = &counters;
    msg.n_environments = n;
    msg.environments = envp;
    msg.limits = &lim;
    msg.n_subscribers = ns;
    msg.subscribers = subp;
    Sensim__V1__Envelope env = SENSIM__V1__ENVELOPE__INIT;
    env.body_case = SENSIM__V1__ENVELOPE__BODY_INFO;
    env.info = &msg;
    rc = wire_pack_reply(id, 0, NULL, &env, out, out_len);
  }
  mem_free(envs);
  mem_free(envp);
  mem_free(envc);
  mem_free(subs);
  mem_free(subp);
  return rc;
}
