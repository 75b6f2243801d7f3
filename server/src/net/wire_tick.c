// SPDX-License-Identifier: MIT
// wire_tick.c: the hand decoder of a lock-step tick's requests (wire_tick.h). protobuf-c's
// generic unpack looks every field up in its descriptor, scans each repeated field twice and
// allocates each part separately: about 2,000 instructions for a tick's small UpdateState or
// Step. Here each message's few fields are read in one pass with their numbers known. The
// decoder takes only what it can decode exactly as protobuf-c does and leaves everything else
// to protobuf-c (the caller's fallback), so it never has to reproduce protobuf-c's rules for
// repeated, merged, unknown or malformed fields: it only has to recognise them as not plain.
#include "net/wire_tick.h"

#include <string.h>

// Most parts of one request: the Envelope, its body, five arrays and five bytes fields.
#define TICK_MAX_PARTS 12

typedef struct tick_dec {
  ProtobufCAllocator* a;
  void* part[TICK_MAX_PARTS];
  uint32_t nparts;
} tick_dec_t;

typedef struct cursor {
  const uint8_t* p;
  size_t n, pos;
} cursor_t;


static void* take(tick_dec_t* d, size_t size) {
  if (d->nparts == TICK_MAX_PARTS) {
    return NULL;
  }
  void* q = d->a->alloc(d->a->allocator_data, size);
  if (q) {
    d->part[d->nparts++] = q;
  }
  return q;
}


// A message of descriptor desc with its defaults, as protobuf-c starts one.
static void* message(tick_dec_t* d, const ProtobufCMessageDescriptor* desc) {
  void* m = take(d, desc->sizeof_message);
  if (m) {
    protobuf_c_message_init(desc, m);
  }
  return m;
}


// A varint of at most max_bytes in its shortest form (no trailing zero byte after the first):
// 0, or -1 when it is not (or runs past the end).
static int varint(cursor_t* c, unsigned max_bytes, uint64_t* v) {
  uint64_t x = 0;
  for (unsigned i = 0; i < max_bytes && c->pos < c->n; i++) {
    uint8_t b = c->p[c->pos++];
    x |= (uint64_t)(b & 0x7f) << (7 * i);
    if (!(b & 0x80)) {
      if (b == 0 && i > 0) {
        return -1;
      }
      *v = x;
      return 0;
    }
  }
  return -1;
}


// A field's tag: number and wire type; -1 at a tag protobuf-c would have to judge.
static int tag(cursor_t* c, uint32_t* number, unsigned* type) {
  uint64_t t;
  if (varint(c, 2, &t) != 0) {
    return -1;
  }
  *number = (uint32_t)(t >> 3);
  *type = (unsigned)(t & 7);
  return 0;
}


// A length-delimited value: *at and *len; -1 unless it fits (and is not empty, unless
// may_be_empty: a message of default fields).
static int span_of(cursor_t* c, int may_be_empty, const uint8_t** at, size_t* len) {
  uint64_t l;
  if (varint(c, 5, &l) != 0 || (l == 0 && !may_be_empty) || l > c->n - c->pos) {
    return -1;
  }
  *at = c->p + c->pos;
  *len = (size_t)l;
  c->pos += (size_t)l;
  return 0;
}


static int span(cursor_t* c, const uint8_t** at, size_t* len) {
  return span_of(c, 0, at, len);
}


static int fixed64(cursor_t* c, double* v) {
  if (c->n - c->pos < 8) {
    return -1;
  }
  memcpy(v, c->p + c->pos, 8);  // the wire's fixed64: little-endian hosts only (below)
  c->pos += 8;
  return 0;
}


// A packed repeated uint32: each value at most five bytes and at most 2^32 - 1.
static int packed_u32(tick_dec_t* d, cursor_t* c, size_t* n, uint32_t** out) {
  const uint8_t* at;
  size_t len;
  if (span(c, &at, &len) != 0) {
    return -1;
  }
  size_t count = 0;
  for (size_t i = 0; i < len; i++) {
    count += !(at[i] & 0x80);
  }
  uint32_t* v = take(d, count * sizeof(*v));
  if (!v) {
    return -1;
  }
  cursor_t in = {at, len, 0};
  for (size_t i = 0; i < count; i++) {
    uint64_t x;
    if (varint(&in, 5, &x) != 0 || x > UINT32_MAX) {
      return -1;
    }
    v[i] = (uint32_t)x;
  }
  if (in.pos != len) {
    return -1;
  }
  *n = count;
  *out = v;
  return 0;
}


// A packed repeated double.
static int packed_f64(tick_dec_t* d, cursor_t* c, size_t* n, double** out) {
  const uint8_t* at;
  size_t len;
  if (span(c, &at, &len) != 0 || len % 8 != 0) {
    return -1;
  }
  double* v = take(d, len);
  if (!v) {
    return -1;
  }
  memcpy(v, at, len);
  *n = len / 8;
  *out = v;
  return 0;
}


static int bytes(tick_dec_t* d, cursor_t* c, protobuf_c_boolean* has, ProtobufCBinaryData* b) {
  const uint8_t* at;
  size_t len;
  if (span(c, &at, &len) != 0) {
    return -1;
  }
  uint8_t* v = take(d, len);
  if (!v) {
    return -1;
  }
  memcpy(v, at, len);
  b->data = v;
  b->len = len;
  *has = 1;
  return 0;
}


// Whether field `number` (below 32) was met before; marks it met.
static int again(uint32_t* seen, uint32_t number) {
  uint32_t bit = 1u << number;
  int was = (*seen & bit) != 0;
  *seen |= bit;
  return was;
}


static int update_state(tick_dec_t* d, cursor_t* c, Sensim__V1__UpdateState* m) {
  uint32_t seen = 0;
  while (c->pos < c->n) {
    uint32_t number;
    unsigned type;
    if (tag(c, &number, &type) != 0 || number == 0 || number > 11 || again(&seen, number)) {
      return -1;
    }
    int rc;
    if (number == 1) {
      rc = type == 1 ? fixed64(c, &m->time) : -1;
      m->has_time = 1;
    } else if (type != 2) {
      rc = -1;
    } else {
      switch (number) {
        case 2: rc = packed_u32(d, c, &m->n_body_ids, &m->body_ids); break;
        case 3: rc = packed_f64(d, c, &m->n_body_poses, &m->body_poses); break;
        case 4: rc = packed_f64(d, c, &m->n_body_velocities, &m->body_velocities); break;
        case 5: rc = packed_u32(d, c, &m->n_joint_ids, &m->joint_ids); break;
        case 6: rc = packed_f64(d, c, &m->n_joint_positions, &m->joint_positions); break;
        case 7: rc = bytes(d, c, &m->has_body_ids_bytes, &m->body_ids_bytes); break;
        case 8: rc = bytes(d, c, &m->has_body_poses_bytes, &m->body_poses_bytes); break;
        case 9:
          rc = bytes(d, c, &m->has_body_velocities_bytes, &m->body_velocities_bytes);
          break;
        case 10: rc = bytes(d, c, &m->has_joint_ids_bytes, &m->joint_ids_bytes); break;
        default: rc = bytes(d, c, &m->has_joint_positions_bytes, &m->joint_positions_bytes);
      }
    }
    if (rc != 0) {
      return -1;
    }
  }
  return 0;
}


static int step(tick_dec_t* d, cursor_t* c, Sensim__V1__Step* m) {
  uint32_t seen = 0;
  while (c->pos < c->n) {
    uint32_t number;
    unsigned type;
    uint64_t v = 0;
    if (tag(c, &number, &type) != 0 || number == 0 || number > 3 || again(&seen, number)) {
      return -1;
    }
    int rc = -1;
    if (number == 1 && type == 1) {
      rc = fixed64(c, &m->time);
      m->has_time = 1;
    } else if (number == 2 && type == 0) {
      // the enum's named values only: protobuf-c's handling of others is left to it
      rc = varint(c, 1, &v) == 0 && v <= SENSIM__V1__STEP_OUTPUTS__STEP_OUTPUTS_LISTED ? 0 : -1;
      m->outputs = (Sensim__V1__StepOutputs)v;
      m->has_outputs = 1;
    } else if (number == 3 && type == 2) {
      rc = packed_u32(d, c, &m->n_output_sensors, &m->output_sensors);
    }
    if (rc != 0) {
      return -1;
    }
  }
  return 0;
}


static int envelope(tick_dec_t* d, cursor_t* c, Sensim__V1__Envelope* env) {
  const uint8_t* body = NULL;
  size_t body_len = 0;
  uint32_t body_number = 0;
  uint32_t seen = 0;
  while (c->pos < c->n) {
    uint32_t number;
    unsigned type;
    if (tag(c, &number, &type) != 0) {
      return -1;
    }
    if ((number == 1 || number == 3) && type == 0 && !again(&seen, number)) {
      uint64_t v;
      if (varint(c, 9, &v) != 0) {  // below 2^63: no tenth byte to judge
        return -1;
      }
      if (number == 1) {
        env->has_id = 1;
        env->id = v;
      } else {
        env->has_sequence = 1;
        env->sequence = v;
      }
    } else if ((number == 40 || number == 41) && type == 2 && !body_number) {
      if (span_of(c, 1, &body, &body_len) != 0) {
        return -1;
      }
      body_number = number;
    } else {
      return -1;
    }
  }
  cursor_t in = {body, body_len, 0};
  if (body_number == SENSIM__V1__ENVELOPE__BODY_UPDATE_STATE) {
    env->update_state = message(d, &sensim__v1__update_state__descriptor);
    env->body_case = SENSIM__V1__ENVELOPE__BODY_UPDATE_STATE;
    return env->update_state ? update_state(d, &in, env->update_state) : -1;
  }
  if (body_number == SENSIM__V1__ENVELOPE__BODY_STEP) {
    env->step = message(d, &sensim__v1__step__descriptor);
    env->body_case = SENSIM__V1__ENVELOPE__BODY_STEP;
    return env->step ? step(d, &in, env->step) : -1;
  }
  return -1;
}


int wire_tick_decode(const uint8_t* p, size_t n, ProtobufCAllocator* a,
                     Sensim__V1__Envelope** out) {
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
  return 0;  // doubles and arrays are copied as they are: protobuf-c swaps them elsewhere
#endif
  tick_dec_t d = {.a = a};
  Sensim__V1__Envelope* env = message(&d, &sensim__v1__envelope__descriptor);
  cursor_t c = {p, n, 0};
  if (env) {
    if (envelope(&d, &c, env) == 0) {
      *out = env;
      return 1;
    }
  }
  while (d.nparts > 0) {
    a->free(a->allocator_data, d.part[--d.nparts]);
  }
  return 0;
}
