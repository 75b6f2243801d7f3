// SPDX-License-Identifier: MIT
// cursor.h: a cursor over the bytes of one protobuf message, for the C client's hand decoders
// of a step's reply (data.c, step.c) and its peek at every frame (wire.c): the client's one
// varint reader. Every function accepts exactly what nanopb 0.4 accepts for the same field
// and fails (false) where nanopb fails, so that both decoders refuse the same frames. Inline:
// these run a few dozen times a tick.
#ifndef SENSIM_CLIENT_CURSOR_H
#define SENSIM_CLIENT_CURSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <pb.h>

typedef struct sensim_cursor {
  const uint8_t* p;
  size_t at, end;                   // the next byte, one past the last
} sensim_cursor_t;

// Varints as nanopb reads them: 32-bit ones (keys, lengths, bools; up to 10 bytes, the bytes
// past bit 31 zero or a negative int32's sign extension) and 64-bit ones (at most 10 bytes).
static inline bool sensim_cur_varint32(sensim_cursor_t* c, uint32_t* v) {
  if (c->at >= c->end) {
    return false;
  }
  uint8_t b = c->p[c->at++];
  if (b < 0x80u) {  // the common case: one byte
    *v = b;
    return true;
  }
  uint32_t x = b & 0x7Fu;
  // nanopb reads a 32-bit varint as up to 10 bytes: bits past 31 must be zero, or (when bit 31
  // is set) the sign extension of a negative int32; bits 28..31 come from the fifth byte
  for (unsigned shift = 7; b & 0x80u; shift += 7) {
    if (c->at >= c->end) {
      return false;
    }
    b = c->p[c->at++];
    if (shift >= 32) {
      uint8_t sign = shift < 63 ? 0xFFu : 0x01u;
      if (shift >= 64 || ((b & 0x7Fu) != 0 && !((x >> 31) != 0 && b == sign))) {
        return false;
      }
    } else if (shift == 28) {
      if ((b & 0x70u) != 0 && (b & 0x78u) != 0x78u) {
        return false;
      }
      x |= (uint32_t)(b & 0x0Fu) << 28;
    } else {
      x |= (uint32_t)(b & 0x7Fu) << shift;
    }
  }
  *v = x;
  return true;
}


static inline bool sensim_cur_varint64(sensim_cursor_t* c, uint64_t* v) {
  if (c->at < c->end && c->p[c->at] < 0x80u) {  // the common case: one byte
    *v = c->p[c->at++];
    return true;
  }
  uint64_t x = 0;
  uint8_t b;
  unsigned shift = 0;
  do {
    if (c->at >= c->end) {
      return false;
    }
    b = c->p[c->at++];
    if (shift >= 63 && (b & 0xFEu) != 0) {  // a tenth byte of 0 or 1, and no eleventh
      return false;
    }
    x |= (uint64_t)(b & 0x7Fu) << shift;
    shift += 7;
  } while (b & 0x80u);
  *v = x;
  return true;
}


// A field's key: false on a field number 0.
static inline bool sensim_cur_key(sensim_cursor_t* c, uint32_t* field, unsigned* wt) {
  uint32_t k;
  if (!sensim_cur_varint32(c, &k) || k >> 3 == 0) {
    return false;
  }
  *field = k >> 3;
  *wt = k & 7u;
  return true;
}


// A length-delimited value as a cursor of its own (c moves past it).
static inline bool sensim_cur_sub(sensim_cursor_t* c, sensim_cursor_t* sub) {
  uint32_t n;
  if (!sensim_cur_varint32(c, &n) || n > c->end - c->at) {
    return false;
  }
  *sub = (sensim_cursor_t){.p = c->p, .at = c->at, .end = c->at + n};
  c->at += n;
  return true;
}


// The bytes of a value of a fixed-size wire type (8 or 4), else 0.
static inline size_t sensim_cur_fixed_bytes(unsigned wt) {
  return wt == PB_WT_64BIT ? 8 : wt == PB_WT_32BIT ? 4 : 0;
}


// Skip an unknown field's value of wire type wt (varints of any length, as nanopb does).
static inline bool sensim_cur_skip(sensim_cursor_t* c, unsigned wt) {
  sensim_cursor_t sub;
  size_t n;
  if (wt == PB_WT_VARINT) {
    do {  // any length
      if (c->at >= c->end) {
        return false;
      }
    } while (c->p[c->at++] & 0x80u);
    return true;
  }
  if (wt == PB_WT_STRING) {
    return sensim_cur_sub(c, &sub);
  }
  if ((n = sensim_cur_fixed_bytes(wt)) == 0 || n > c->end - c->at) {
    return false;
  }
  c->at += n;
  return true;
}


// Known scalar fields; false on another wire type, as nanopb: double, uint64, uint32 (a
// larger value fails), bool.
static inline bool sensim_cur_double(sensim_cursor_t* c, unsigned wt, double* v) {
  if (wt != PB_WT_64BIT || c->end - c->at < 8) {
    return false;
  }
  memcpy(v, c->p + c->at, 8);  // little-endian hosts only (internal.h)
  c->at += 8;
  return true;
}


static inline bool sensim_cur_u64(sensim_cursor_t* c, unsigned wt, uint64_t* v) {
  return wt == PB_WT_VARINT && sensim_cur_varint64(c, v);
}


static inline bool sensim_cur_u32(sensim_cursor_t* c, unsigned wt, uint32_t* v) {
  uint64_t x;
  if (wt != PB_WT_VARINT || !sensim_cur_varint64(c, &x) || x > UINT32_MAX) {
    return false;
  }
  *v = (uint32_t)x;
  return true;
}


static inline bool sensim_cur_bool(sensim_cursor_t* c, unsigned wt, bool* v) {
  uint32_t x;
  if (wt != PB_WT_VARINT || !sensim_cur_varint32(c, &x)) {
    return false;
  }
  *v = x != 0;
  return true;
}

// The fields of the message in c, one by one: field(c, number, wire type, arg) reads or skips
// each value. False on a malformed key (a field number 0 included) or when field fails.
typedef bool (*sensim_cur_field_t)(sensim_cursor_t* c, uint32_t field, unsigned wt, void* arg);

static inline bool sensim_cur_each(sensim_cursor_t* c, sensim_cur_field_t field, void* arg) {
  while (c->at < c->end) {
    uint32_t f;
    unsigned w;
    if (!sensim_cur_key(c, &f, &w) || !field(c, f, w, arg)) {
      return false;
    }
  }
  return true;
}


// A sub-message field of wire type wt, its fields walked as sensim_cur_each does (any other
// wire type fails).
static inline bool sensim_cur_message(sensim_cursor_t* c, unsigned wt, sensim_cur_field_t field,
                                      void* arg) {
  sensim_cursor_t m;
  return wt == PB_WT_STRING && sensim_cur_sub(c, &m) && sensim_cur_each(&m, field, arg);
}


#endif  // SENSIM_CLIENT_CURSOR_H
