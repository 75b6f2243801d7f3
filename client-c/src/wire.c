// SPDX-License-Identifier: MIT
// wire.c: the nanopb adapter. Requests are encoded into a gather whose bulk arrays stay in the
// caller's memory (holes); replies are decoded from a reader that hands out views of memory
// frames or streams from the socket. Also a walker of an Envelope's outermost fields, so that
// frames can be filed by id before anything is decoded.
#include <stdlib.h>
#include <string.h>

#include <pb_common.h>

#include "internal.h"


void sensim_gather_reset(sensim_gather_t* g) {
  g->len = 0;
  g->nholes = 0;
  g->bytes = 0;
}


void sensim_gather_free(sensim_gather_t* g) {
  free(g->buf);
  free(g->holes);
  memset(g, 0, sizeof(*g));
}


// Room for n more elements of `size` bytes in the array *base of *cap elements, `used` taken:
// the capacity doubled (from `first`) until they fit. False when memory runs out.
static bool grow(void** base, size_t* cap, size_t used, size_t n, size_t size, size_t first) {
  if (*cap - used >= n) {
    return true;
  }
  size_t c = *cap ? *cap : first;
  while (c - used < n) {
    if (c > SIZE_MAX / 2 / size) {
      return false;
    }
    c *= 2;
  }
  void* p = realloc(*base, c * size);
  if (!p) {
    return false;
  }
  *base = p;
  *cap = c;
  return true;
}


static bool gather_reserve(sensim_gather_t* g, size_t n) {
  void* buf = g->buf;
  bool ok = grow(&buf, &g->cap, g->len, n, 1, 1024);
  g->buf = buf;
  return ok;
}


// nanopb output callback of a gather: the request's own bytes.
static bool gather_write(pb_ostream_t* s, const pb_byte_t* buf, size_t n) {
  sensim_gather_t* g = s->state;
  if (!gather_reserve(g, n)) {
    PB_RETURN_ERROR(s, "out of memory");
  }
  memcpy(g->buf + g->len, buf, n);
  g->len += n;
  return true;
}


// Room for n more holes.
static bool gather_reserve_holes(sensim_gather_t* g, size_t n) {
  void* holes = g->holes;
  bool ok = grow(&holes, &g->holecap, g->nholes, n, sizeof(*g->holes), 16);
  g->holes = holes;
  return ok;
}


// Record n bytes at data as sent from there, after the bytes written so far.
static bool gather_hole(pb_ostream_t* s, const void* data, size_t n) {
  sensim_gather_t* g = s->state;
  if (s->bytes_written + n < s->bytes_written || s->bytes_written + n > s->max_size) {
    PB_RETURN_ERROR(s, "stream full");
  }
  if (!gather_reserve_holes(g, 1)) {
    PB_RETURN_ERROR(s, "out of memory");
  }
  g->holes[g->nholes++] = (sensim_hole_t){.at = g->len, .data = data, .len = n};
  s->bytes_written += n;
  return true;
}


static size_t put_varint(uint8_t* p, uint64_t v) {
  size_t n = 0;
  while (v >= 0x80) {
    p[n++] = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  p[n++] = (uint8_t)v;
  return n;
}


// The most bytes of an Envelope's head: the id's key and varint, the body's key and length.
#define ENVELOPE_HEAD_MAX (1 + 10 + 5 + 10)

// The Envelope as nanopb writes it for a request (only the id and the body are set): the id
// (field 1, varint), then the key and length of body field `tag`. Returns the head's bytes.
static size_t envelope_head(uint8_t* p, uint64_t id, uint32_t tag, uint64_t body) {
  size_t n = 0;
  p[n++] = (sensim_v1_Envelope_id_tag << 3) | PB_WT_VARINT;
  n += put_varint(p + n, id);
  n += put_varint(p + n, (uint64_t)tag << 3 | PB_WT_STRING);
  n += put_varint(p + n, body);
  return n;
}


size_t sensim_wire_body_at(uint64_t id, uint32_t tag, uint64_t body) {
  uint8_t head[ENVELOPE_HEAD_MAX];
  return FRAME_HEADER + envelope_head(head, id, tag, body);
}


// The frame's length prefix for an Envelope of `envelope` bytes (at most UINT32_MAX).
static void put_frame_header(uint8_t* p, uint64_t envelope) {
  for (int i = 0; i < FRAME_HEADER; i++) {
    p[i] = (uint8_t)(envelope >> (8 * i));
  }
}


const pb_msgdesc_t* sensim_wire_body_fields(const pb_msgdesc_t** cache, pb_size_t tag) {
  if (tag > ENVELOPE_MAX_TAG) {
    return NULL;
  }
  if (!cache[tag]) {
    sensim_v1_Envelope env;
    memset(&env, 0, sizeof(env));
    pb_field_iter_t it;
    if (pb_field_iter_begin(&it, sensim_v1_Envelope_fields, &env) &&
        pb_field_iter_find(&it, tag) && PB_LTYPE_IS_SUBMSG(it.type)) {
      cache[tag] = it.submsg_desc;
    }
  }
  return cache[tag];
}


sensim_status_t sensim_wire_over_4gib(char* err, size_t err_cap) {
  // a frame's length is a u32: such a request exceeds any daemon's max_frame_bytes, a limit
  // like any other (nothing was sent; the connection goes on)
  return sensim_fail(err, err_cap, SENSIM_RESOURCE_EXHAUSTED,
                     "request of over 4 GiB: no frame holds it (max_frame_bytes)");
}


sensim_status_t sensim_wire_frame(sensim_gather_t* g, uint64_t id, uint32_t tag,
                                  const pb_msgdesc_t* fields, const void* body, size_t* size,
                                  char* err, size_t err_cap) {
  // the body is encoded once, after room for the longest head; the head is written once its
  // length is known and the body's own bytes (tags, lengths, scalars: few) moved up to it
  size_t len0 = g->len, holes0 = g->nholes;
  if (!gather_reserve(g, FRAME_HEADER + ENVELOPE_HEAD_MAX)) {
    return sensim_fail(err, err_cap, SENSIM_ENOMEM, "out of memory for a request");
  }
  size_t start = len0 + FRAME_HEADER + ENVELOPE_HEAD_MAX;
  g->len = start;
  pb_ostream_t out = {.callback = gather_write, .state = g, .max_size = SIZE_MAX};
  uint8_t head[ENVELOPE_HEAD_MAX];
  size_t n = 0;
  if (pb_encode(&out, fields, body)) {
    n = envelope_head(head, id, tag, out.bytes_written);
  }
  if (n == 0 || n + out.bytes_written > UINT32_MAX) {
    g->len = len0;
    g->nholes = holes0;
    if (n != 0) {
      return sensim_wire_over_4gib(err, err_cap);
    }
    const char* why = PB_GET_ERROR(&out);
    sensim_status_t st = strcmp(why, "out of memory") == 0 ? SENSIM_ENOMEM : SENSIM_EPROTO;
    return sensim_fail(err, err_cap, st, "cannot encode the request: %s", why);
  }
  size_t gap = ENVELOPE_HEAD_MAX - n;
  memmove(g->buf + start - gap, g->buf + start, g->len - start);
  g->len -= gap;
  for (size_t k = holes0; k < g->nholes; k++) {
    g->holes[k].at -= gap;
  }
  uint64_t envelope = n + out.bytes_written;
  put_frame_header(g->buf + len0, envelope);
  memcpy(g->buf + len0 + FRAME_HEADER, head, n);
  g->bytes += FRAME_HEADER + envelope;
  *size = (size_t)envelope;
  return SENSIM_OK;
}


sensim_status_t sensim_wire_body(sensim_gather_t* g, const pb_msgdesc_t* fields, const void* msg,
                                 char* err, size_t err_cap) {
  sensim_gather_reset(g);
  pb_ostream_t out = {.callback = gather_write, .state = g, .max_size = SIZE_MAX};
  if (!pb_encode(&out, fields, msg) || out.bytes_written > UINT32_MAX) {
    sensim_gather_reset(g);
    if (out.bytes_written > UINT32_MAX) {
      return sensim_wire_over_4gib(err, err_cap);
    }
    const char* why = PB_GET_ERROR(&out);
    sensim_status_t st = strcmp(why, "out of memory") == 0 ? SENSIM_ENOMEM : SENSIM_EPROTO;
    return sensim_fail(err, err_cap, st, "cannot encode the request: %s", why);
  }
  g->bytes = out.bytes_written;
  return SENSIM_OK;
}


sensim_status_t sensim_wire_frame_body(sensim_gather_t* g, uint64_t id, uint32_t tag,
                                       const sensim_gather_t* body, size_t* size, char* err,
                                       size_t err_cap) {
  uint8_t head[FRAME_HEADER + ENVELOPE_HEAD_MAX];
  size_t n = FRAME_HEADER + envelope_head(head + FRAME_HEADER, id, tag, body->bytes);
  uint64_t envelope = n - FRAME_HEADER + body->bytes;
  if (envelope > UINT32_MAX) {
    return sensim_wire_over_4gib(err, err_cap);
  }
  put_frame_header(head, envelope);
  if (!gather_reserve(g, n + body->len) || !gather_reserve_holes(g, body->nholes)) {
    return sensim_fail(err, err_cap, SENSIM_ENOMEM, "out of memory for a request");
  }
  memcpy(g->buf + g->len, head, n);
  g->len += n;
  // the body's own bytes are few (tags, lengths, scalars): copied; its holes stay holes
  size_t own = 0;
  for (size_t k = 0; k < body->nholes; k++) {
    const sensim_hole_t* h = &body->holes[k];
    memcpy(g->buf + g->len, body->buf + own, h->at - own);
    g->len += h->at - own;
    own = h->at;
    g->holes[g->nholes++] = (sensim_hole_t){.at = g->len, .data = h->data, .len = h->len};
  }
  memcpy(g->buf + g->len, body->buf + own, body->len - own);
  g->len += body->len - own;
  g->bytes += (size_t)FRAME_HEADER + envelope;
  *size = (size_t)envelope;
  return SENSIM_OK;
}


bool sensim_wire_encode_span(pb_ostream_t* s, const pb_field_t* f, void* const* arg) {
  const sensim_span_t* span = *arg;
  if (span->len == 0) {
    return true;
  }

  // a bytes field or a packed array: both length-delimited; the tag nanopb would pick for a
  // repeated double is the unpacked one
  if (!pb_encode_tag(s, PB_WT_STRING, f->tag) || !pb_encode_varint(s, span->len)) {
    return false;
  }
  if (s->callback == NULL) {
    return pb_write(s, NULL, span->len);  // sizing pass
  }
  return gather_hole(s, span->data, span->len);
}


void sensim_wire_set_span(pb_callback_t* cb, sensim_span_t* span, const void* data, size_t len) {
  span->data = data;
  span->len = data ? len : 0;
  cb->funcs.encode = sensim_wire_encode_span;
  cb->arg = span;
}


size_t sensim_wire_varint_size(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    n++;
  }
  return n;
}


bool sensim_wire_encode_u32s(pb_ostream_t* s, const pb_field_t* f, void* const* arg) {
  const sensim_u32s_t* a = *arg;
  if (a->n == 0) {
    return true;
  }
  size_t size = 0;
  for (uint32_t i = 0; i < a->n; i++) {
    size += sensim_wire_varint_size(a->v[i]);
  }
  if (!pb_encode_tag(s, PB_WT_STRING, f->tag) || !pb_encode_varint(s, size)) {
    return false;
  }
  for (uint32_t i = 0; i < a->n; i++) {
    if (!pb_encode_varint(s, a->v[i])) {
      return false;
    }
  }
  return true;
}


void sensim_wire_set_u32s(pb_callback_t* cb, sensim_u32s_t* arr, const uint32_t* v, uint32_t n) {
  arr->v = v;
  arr->n = v ? n : 0;
  cb->funcs.encode = sensim_wire_encode_u32s;
  cb->arg = arr;
}


bool sensim_wire_encode_strings(pb_ostream_t* s, const pb_field_t* f, void* const* arg) {
  const sensim_strings_t* v = *arg;
  for (uint32_t i = 0; i < v->n; i++) {
    const char* str = v->v[i] ? v->v[i] : "";
    if (!pb_encode_tag_for_field(s, f) ||
        !pb_encode_string(s, (const pb_byte_t*)str, strlen(str))) {
      return false;
    }
  }
  return true;
}

//---------------- Bodies written by hand

bool sensim_wire_reserve(sensim_gather_t* g, size_t own, size_t holes) {
  return gather_reserve(g, own) && gather_reserve_holes(g, holes);
}


// n bytes at p into the gather's own bytes (room reserved).
static void put_own(sensim_gather_t* g, const void* p, size_t n) {
  memcpy(g->buf + g->len, p, n);
  g->len += n;
  g->bytes += n;
}


static void put_key_varint(sensim_gather_t* g, uint32_t field, unsigned wt, uint64_t v) {
  uint8_t b[10 + 10];
  size_t n = put_varint(b, (uint64_t)field << 3 | wt);
  n += put_varint(b + n, v);
  put_own(g, b, n);
}


size_t sensim_wire_put_head(sensim_gather_t* g, uint64_t id, uint32_t tag, uint64_t body) {
  uint8_t head[FRAME_HEADER + ENVELOPE_HEAD_MAX];
  size_t n = envelope_head(head + FRAME_HEADER, id, tag, body);
  put_frame_header(head, n + body);
  put_own(g, head, FRAME_HEADER + n);
  return n + (size_t)body;
}


void sensim_wire_put_double(sensim_gather_t* g, uint32_t field, double v) {
  uint8_t b[5 + 8];
  size_t n = put_varint(b, (uint64_t)field << 3 | PB_WT_64BIT);
  memcpy(b + n, &v, 8);  // little-endian hosts only (internal.h)
  put_own(g, b, n + 8);
}


void sensim_wire_put_uint(sensim_gather_t* g, uint32_t field, uint64_t v) {
  put_key_varint(g, field, PB_WT_VARINT, v);
}


size_t sensim_wire_span_size(uint32_t field, size_t len) {
  return len ? sensim_wire_varint_size((uint64_t)field << 3) + sensim_wire_varint_size(len) + len
             : 0;
}


void sensim_wire_put_span(sensim_gather_t* g, uint32_t field, const void* data, size_t len) {
  if (len) {
    put_key_varint(g, field, PB_WT_STRING, len);
    g->holes[g->nholes++] = (sensim_hole_t){.at = g->len, .data = data, .len = len};
    g->bytes += len;
  }
}


size_t sensim_wire_u32s_size(uint32_t field, const uint32_t* v, uint32_t n) {
  size_t size = 0;
  for (uint32_t i = 0; i < n; i++) {
    size += sensim_wire_varint_size(v[i]);
  }
  return sensim_wire_span_size(field, size);
}


void sensim_wire_put_u32s(sensim_gather_t* g, uint32_t field, const uint32_t* v, uint32_t n) {
  size_t size = 0;
  for (uint32_t i = 0; i < n; i++) {
    size += sensim_wire_varint_size(v[i]);
  }
  if (size) {
    put_key_varint(g, field, PB_WT_STRING, size);
    for (uint32_t i = 0; i < n; i++) {
      g->len += put_varint(g->buf + g->len, v[i]);
    }
    g->bytes += size;
  }
}


//---------------- Decoding

static bool reader_read(pb_istream_t* s, pb_byte_t* buf, size_t n) {
  sensim_reader_t* r = s->state;
  if (r->base) {
    if (buf) {
      memcpy(buf, r->base + r->pos, n);
    }
    r->pos += n;
    return true;
  }
  sensim_status_t st = sensim_transport_read(r->cli, buf, n, r->deadline);
  if (st != SENSIM_OK) {
    r->failure = st;
    PB_RETURN_ERROR(s, "connection failed");
  }
  return true;
}


unsigned sensim_wire_noinit_envelope(void) {
  static const sensim_v1_Envelope defaults = sensim_v1_Envelope_init_default;
  static const sensim_v1_Envelope zero = sensim_v1_Envelope_init_zero;
  return memcmp(&defaults, &zero, sizeof(zero)) == 0 ? PB_DECODE_NOINIT : 0;
}


unsigned sensim_wire_noinit_data(void) {
  static const sensim_v1_SensorData defaults = sensim_v1_SensorData_init_default;
  static const sensim_v1_SensorData zero = sensim_v1_SensorData_init_zero;
  return memcmp(&defaults, &zero, sizeof(zero)) == 0 ? PB_DECODE_NOINIT : 0;
}


pb_istream_t sensim_wire_istream(sensim_reader_t* r, size_t len) {
  pb_istream_t s = {.callback = reader_read, .state = r, .bytes_left = len};
  return s;
}


sensim_reader_t* sensim_wire_reader(const pb_istream_t* s) {
  return s->callback == reader_read ? s->state : NULL;
}


bool sensim_wire_view(pb_istream_t* s, const uint8_t** data, size_t* len) {
  sensim_reader_t* r = sensim_wire_reader(s);
  if (!r) {
    PB_RETURN_ERROR(s, "a bytes or message field with another wire type");
  }
  if (!r->base) {
    PB_RETURN_ERROR(s, "a view of a streamed frame");
  }
  *data = r->base + r->pos;
  *len = s->bytes_left;
  r->pos += s->bytes_left;
  s->bytes_left = 0;
  return true;
}


// The peek reads the frame with the hand decoders' cursor (cursor.h): one varint reader for
// the whole client, failing where nanopb fails (a key or varint past 10 bytes, a tenth byte
// over 1), so that a frame the peek routes is one nanopb can decode.

// Status: the code (an enum, varint); everything else skipped.
static bool peek_status_field(sensim_cursor_t* c, uint32_t field, unsigned wt, void* arg) {
  sensim_peek_t* out = arg;
  uint64_t v;
  if (field == sensim_v1_Status_code_tag && wt == PB_WT_VARINT) {
    if (!sensim_cur_varint64(c, &v)) {
      return false;
    }
    out->status_code = (uint32_t)v;
    return true;
  }
  return sensim_cur_skip(c, wt);
}


// Envelope: the id, the status's code and which body it carries; the rest skipped.
static bool peek_envelope_field(sensim_cursor_t* c, uint32_t field, unsigned wt, void* arg) {
  sensim_peek_t* out = arg;
  if (field == sensim_v1_Envelope_id_tag && wt == PB_WT_VARINT) {
    return sensim_cur_varint64(c, &out->id);
  }
  if (field == sensim_v1_Envelope_status_tag && wt == PB_WT_STRING) {
    out->has_status = true;
    return sensim_cur_message(c, wt, peek_status_field, out);
  }
  if (field >= sensim_v1_Envelope_hello_tag && wt == PB_WT_STRING) {
    out->body = field;
  }
  return sensim_cur_skip(c, wt);
}


bool sensim_wire_peek(const uint8_t* p, size_t len, sensim_peek_t* out) {
  memset(out, 0, sizeof(*out));
  sensim_cursor_t c = {.p = p, .at = 0, .end = len};
  return sensim_cur_each(&c, peek_envelope_field, out);
}


int sensim_wire_peek_id(const uint8_t* p, size_t len, uint64_t* id) {
  if (len == 0) {
    return 0;
  }
  if (p[0] != ((sensim_v1_Envelope_id_tag << 3) | PB_WT_VARINT)) {
    return -1;
  }
  // a varint refused within the bytes it may take (1 + 10) is malformed; a shorter one may be
  // the start of one not all here yet
  sensim_cursor_t c = {.p = p, .at = 1, .end = len};
  if (!sensim_cur_varint64(&c, id)) {
    return len >= 11 ? -1 : 0;
  }
  return 1;
}
