// SPDX-License-Identifier: MIT
// test_client_step_wire.c: the C client's hand encoder of a tick's requests and its hand
// decoder of a step's reply against nanopb's.
//
// Encoding: random states and steps (empty, NULL and large arrays, every output selection,
// sensor ids of every varint length) sent by sensim_update_and_step_send to a scripted peer
// that records the bytes, which must equal nanopb's encoding of the same messages with the
// same ids (sensim_wire_frame), and sensim_state_body's body nanopb's (sensim_wire_body).
//
// Decoding: the hand decoder of a step's reply (step.c,
// sensim_step_reply; data.c, sensim_data_hand_decode) against nanopb's (the same frame through
// pb_decode and the client's callbacks, sensim_step_reply_nanopb). Generated replies carry
// every record kind (IMU with any count of values, packed or not; encoder; cone; point
// cloud; none), varints of every length from 1 to 11 bytes (padded, sign-extended, too
// long), unknown fields of every wire type at every level, repeated sub-messages, replaced
// oneof members, daemon statuses with long and odd messages, other bodies, wrong wire types;
// then each is cut at every byte of its StepDone and of one of its records (the lengths
// around the cut made consistent), and mutated at random bytes. Both decoders must give the
// same status, the same StepDone and the same records, field for field.
//
// Peeking: the frame peek that routes every frame (wire.c, sensim_wire_peek and
// sensim_wire_peek_id, on cursor.h's varint reader, the client's only one) against nanopb's
// stream functions on generated Envelopes, whole, cut and mutated: the same verdict and the
// same id, status code and body.
//
// These call the static library's internal functions (client-c/src/internal.h) on frames in
// memory, with a handle connected to a scripted peer that only answers the Hello.
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "support.h"

#define CASES 20000         // generated replies
#define CUT_CASES 400       // of them, cut at every byte
#define MUTATIONS 4         // random byte mutations of each

//---------------- A writer with varints of chosen lengths

typedef struct buf {
  uint8_t p[8192];
  size_t n;
} buf_t;

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static bool g_hostile;              // this reply may break the rules (else every varint fits
                                    // its field, every wire type is the field's)


static uint32_t rnd(uint32_t n) {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return n ? (uint32_t)(g_rng % n) : 0;
}


static void put(buf_t* b, const void* p, size_t n) {
  if (b->n + n <= sizeof(b->p)) {
    memcpy(b->p + b->n, p, n);
    b->n += n;
  }
}


static void byte(buf_t* b, uint8_t v) {
  put(b, &v, 1);
}


// v as a varint of its own length, or padded with continuation bytes to `len` bytes (up to
// 11: one too many for nanopb).
static void varint_len(buf_t* b, uint64_t v, int len) {
  int n = 0;
  do {
    uint8_t x = (uint8_t)(v & 0x7F);
    v >>= 7;
    n++;
    bool more = v != 0 || n < len;
    byte(b, (uint8_t)(x | (more ? 0x80 : 0)));
    if (!more) {
      break;
    }
  } while (n < 11);
}


// A varint usually minimal, sometimes padded to a random length up to 10 bytes (11 in a
// hostile reply).
static void varint(buf_t* b, uint64_t v) {
  varint_len(b, v, rnd(6) == 0 ? 1 + (int)rnd(g_hostile ? 11 : 10) : 0);
}


// A value for a 32-bit varint field: small, large, over 32 bits, or a negative int32's
// 10-byte sign extension.
static uint64_t any_u(void) {
  switch (g_hostile && rnd(4) == 0 ? rnd(6) : rnd(2) * 5) {
    case 0:
      return rnd(200);
    case 1:
      return 0xFFFFFFFFull - rnd(3);
    case 2:
      return 0x100000000ull + rnd(3);
    case 3:
      return (uint64_t)(int64_t)(int32_t)(0x80000000u + rnd(100));
    case 4:
      return ~0ull - rnd(3);
    default:
      return (uint64_t)rnd(1u << 30) << rnd(g_hostile ? 34 : 3);
  }
}


static void key(buf_t* b, uint32_t field, unsigned wt) {
  varint(b, (uint64_t)field << 3 | wt);
}


static double any_d(void) {
  static const double v[] = {0.0, -0.0, 1.5, -2.25e-300, 9.81, 1e308};
  return rnd(3) ? v[rnd(6)] : (double)rnd(100000) / 7.0;
}


static void fixed64(buf_t* b, double d) {
  put(b, &d, 8);
}


// An unknown field of a random wire type (and sometimes an invalid one, or field number 0).
static void unknown(buf_t* b) {
  uint32_t field = g_hostile && rnd(20) == 0 ? 0 : 14 + rnd(2000);
  unsigned wt = g_hostile && rnd(12) == 0 ? 3 + rnd(2) * 3 : (unsigned[]){0, 1, 2, 5}[rnd(4)];
  key(b, field, wt);
  if (wt == 0) {
    varint_len(b, any_u(), rnd(4) == 0 ? 1 + (int)rnd(g_hostile ? 14 : 10) : 0);
  } else if (wt == 1) {
    fixed64(b, 1.0);
  } else if (wt == 5) {
    put(b, "abcd", 4);
  } else if (wt == 2) {
    uint32_t n = rnd(6);
    varint(b, n);
    put(b, "xyzxyz", n);
  }
}


static void maybe_unknown(buf_t* b) {
  if (rnd(8) == 0) {
    unknown(b);
  }
}


// A length-delimited field holding sub.
static void sub(buf_t* b, uint32_t field, const buf_t* s) {
  key(b, field, 2);
  varint(b, s->n);
  put(b, s->p, s->n);
}


// A field of wire type wt: the right one almost always.
static unsigned wt_or(unsigned wt) {
  return g_hostile && rnd(40) == 0 ? (unsigned[]){0, 1, 2, 5, 3}[rnd(5)] : wt;
}


// A scalar field as the wire type given (usually the right one) says.
static void scalar(buf_t* b, uint32_t field, unsigned right) {
  unsigned wt = wt_or(right);
  key(b, field, wt);
  if (wt == 0) {
    varint(b, right == 0 ? any_u() : rnd(300));
  } else if (wt == 1) {
    fixed64(b, any_d());
  } else if (wt == 2) {
    uint32_t n = rnd(9);
    varint(b, n);
    put(b, "012345678", n);
  } else if (wt == 5) {
    put(b, "wxyz", 4);
  }
}

//---------------- Generated messages

static void vec3(buf_t* b, uint32_t field) {
  buf_t v = {.n = 0};
  for (uint32_t f = 1; f <= 3; f++) {
    if (rnd(5)) {
      scalar(&v, f, 1);
    }
    maybe_unknown(&v);
  }
  sub(b, field, &v);
}


static void imu(buf_t* b) {
  for (uint32_t f = 1; f <= 3; f++) {
    if (rnd(4)) {
      vec3(b, f);
    }
  }
  if (rnd(6) == 0) {
    vec3(b, 1 + rnd(3));  // merged into the first
  }
  unsigned k = rnd(4);
  if (k == 0) {  // packed: 0..10 values, sometimes a length that is not a multiple of 8
    buf_t v = {.n = 0};
    uint32_t n = g_hostile ? rnd(11) : 1 + rnd(9);
    for (uint32_t i = 0; i < n; i++) {
      fixed64(&v, any_d());
    }
    v.n -= g_hostile && rnd(8) == 0 && v.n ? 1 + rnd((uint32_t)v.n) : 0;
    sub(b, 4, &v);
  } else if (k == 1) {  // one value per field, of any wire type
    for (uint32_t i = rnd(4); i > 0; i--) {
      // nanopb hands the callback a varint's raw bytes too: one of 8 to 10 bytes is a value
      unsigned wt = rnd(3) ? 1 : g_hostile ? (unsigned[]){0, 5, 3}[rnd(3)] : 0;
      key(b, 4, wt);
      if (wt == 0) {
        varint_len(b, any_u(), g_hostile ? 6 + (int)rnd(6) : 8 + (int)rnd(3));
      } else if (wt == 1) {
        fixed64(b, any_d());
      } else if (wt == 5) {
        put(b, "1234", 4);
      }
    }
  }
  maybe_unknown(b);
}


static void cone(buf_t* b) {
  static const unsigned wts[8] = {0, 0, 1, 1, 1, 1, 2, 0};
  for (uint32_t f = 1; f <= 7; f++) {
    if (rnd(4) == 0) {
      continue;
    }
    if (f == 6) {
      vec3(b, 6);
    } else {
      scalar(b, f, wts[f - 1]);
    }
    maybe_unknown(b);
  }
}


static void cloud(buf_t* b) {
  uint32_t step = 4 * (1 + rnd(4)), count = rnd(5);
  uint32_t nf = g_hostile ? rnd(4) : rnd(step / 4 + 1);  // a clean cloud's fields fit
  for (uint32_t i = 0; i < nf; i++) {
    buf_t f = {.n = 0};
    uint32_t len = g_hostile && rnd(12) == 0 ? 40 : 1 + rnd(5);  // 40: over the name's 32 bytes
    key(&f, 1, 2);
    varint(&f, len);
    for (uint32_t k = 0; k < len; k++) {
      byte(&f, (uint8_t)('a' + rnd(26)));
    }
    key(&f, 2, 0);
    varint(&f, 4 * i);                        // offset
    key(&f, 3, 0);
    varint(&f, rnd(10) || !g_hostile ? 7 : 1 + rnd(12));   // datatype FLOAT32, or another
    key(&f, 4, 0);
    varint(&f, 1);                            // count
    sub(b, 1, &f);
  }
  key(b, 2, 0);
  varint(b, step);
  key(b, 3, 0);
  varint(b, count);
  if (rnd(5) == 0) {
    key(b, 4, 0);
    varint(b, rnd(4));
  }
  uint32_t size = rnd(6) || !g_hostile ? step * count : step * count + 1;
  buf_t d = {.n = 0};
  for (uint32_t i = 0; i < size; i++) {
    byte(&d, (uint8_t)rnd(256));
  }
  sub(b, 5, &d);
  for (uint32_t f = 6; f <= (g_hostile ? 12u : 10u); f++) {  // height, width: must fit
    if (rnd(3) == 0) {
      scalar(b, f, f <= 8 ? 1 : 0);
    }
  }
  maybe_unknown(b);
}


static void payload(buf_t* b) {
  buf_t p = {.n = 0};
  uint32_t kind = rnd(10);
  uint32_t field = kind < 3 ? 11 : kind < 6 ? 12 : kind < 8 ? 13 : 10;
  if (field == 11) {
    imu(&p);
  } else if (field == 12) {
    for (uint32_t f = 1; f <= 2; f++) {
      if (rnd(4)) {
        scalar(&p, f, 1);
      }
      maybe_unknown(&p);
    }
  } else if (field == 13) {
    cone(&p);
  } else {
    cloud(&p);
  }
  if (g_hostile && rnd(60) == 0) {  // a member of a scalar wire type
    key(b, field, 0);
    varint(b, 1);
    return;
  }
  sub(b, field, &p);
}


static void record(buf_t* r) {
  static const unsigned wts[6] = {0, 1, 0, 0, 1, 0};
  for (uint32_t f = 1; f <= 6; f++) {
    if (rnd(3)) {
      scalar(r, f, wts[f - 1]);
    }
    maybe_unknown(r);
  }
  uint32_t n = rnd(12) == 0 ? 0 : rnd(12) == 0 ? 2 + rnd(2) : 1;  // none, replaced, one
  for (uint32_t i = 0; i < n; i++) {
    payload(r);
  }
  maybe_unknown(r);
}


// A reply: its records, the StepDone's other fields around them, the Envelope's around that.
typedef struct reply {
  buf_t rec[5];
  uint32_t nrec;
  buf_t head, tail;                 // the StepDone's fields before and after the records
  buf_t env_head, env_tail;         // the Envelope's before and after the step_done
} reply_t;


static void status(buf_t* b) {
  buf_t s = {.n = 0};
  if (rnd(3)) {
    key(&s, 1, wt_or(0));
    varint(&s, rnd(2) || !g_hostile ? rnd(20) : any_u());
  }
  if (rnd(2)) {
    uint32_t len = rnd(8) == 0 ? 505 + rnd(g_hostile ? 12 : 8) : rnd(30);  // 511 fit
    key(&s, 2, 2);
    varint(&s, len);
    for (uint32_t i = 0; i < len; i++) {
      byte(&s, rnd(30) == 0 ? (uint8_t[]){0, 0xC3, 0xFF, 0x80}[rnd(4)] : (uint8_t)('a' + rnd(26)));
    }
  }
  maybe_unknown(&s);
  sub(b, 2, &s);
}


static void generate(reply_t* r) {
  memset(r, 0, sizeof(*r));
  g_hostile = rnd(2);
  r->nrec = rnd(6);
  for (uint32_t i = 0; i < r->nrec; i++) {
    record(&r->rec[i]);
  }
  if (rnd(5)) {
    scalar(&r->head, 1, 1);
  }
  if (rnd(5)) {
    scalar(&r->head, 2, 0);
  }
  maybe_unknown(&r->head);
  if (rnd(5)) {
    scalar(&r->tail, 4, 0);
  }
  maybe_unknown(&r->tail);
  if (g_hostile && rnd(30) == 0) {  // a record of a scalar wire type
    scalar(&r->tail, 3, 1);
  }
  key(&r->env_head, 1, wt_or(0));
  varint(&r->env_head, 1 + rnd(1000));
  if (rnd(6) == 0) {
    status(&r->env_head);
  }
  if (rnd(10) == 0) {
    scalar(&r->env_head, 3, 0);
  }
  maybe_unknown(&r->env_head);
  if (rnd(10) == 0) {
    status(&r->env_tail);
  }
  if (rnd(25) == 0) {  // another body: the whole frame goes to nanopb
    buf_t e = {.n = 0};
    sub(&r->env_tail, (uint32_t[]){10, 13, 15, 41, 52}[rnd(5)], &e);
  }
  if (rnd(25) == 0) {  // the step_done again: merged
    buf_t t = {.n = 0};
    scalar(&t, 4, 0);
    sub(&r->env_tail, 42, &t);
  }
  maybe_unknown(&r->env_tail);
}


// The frame of a reply, record `cut_rec` cut to `rec_at` bytes and the StepDone to `body_at`
// bytes (SIZE_MAX: whole).
static void frame(const reply_t* r, uint32_t cut_rec, size_t rec_at, size_t body_at, buf_t* out) {
  buf_t body = {.n = 0};
  put(&body, r->head.p, r->head.n);
  for (uint32_t i = 0; i < r->nrec; i++) {
    buf_t rec = r->rec[i];
    if (i == cut_rec && rec_at < rec.n) {
      rec.n = rec_at;
    }
    sub(&body, 3, &rec);
  }
  put(&body, r->tail.p, r->tail.n);
  if (body_at < body.n) {
    body.n = body_at;
  }
  out->n = 0;
  put(out, r->env_head.p, r->env_head.n);
  sub(out, 42, &body);
  put(out, r->env_tail.p, r->env_tail.n);
}

//---------------- Both decoders, compared

static bool same_record(const sensim_sensor_data_t* a, const sensim_sensor_data_t* b) {
  sensim_sensor_data_t x = *a, y = *b;
  if (a->kind == SENSIM_PAYLOAD_POINT_CLOUD && b->kind == SENSIM_PAYLOAD_POINT_CLOUD) {
    if (a->point_cloud.nfields != b->point_cloud.nfields) {
      return false;
    }
    for (uint32_t i = 0; i < a->point_cloud.nfields; i++) {
      const sensim_point_field_t *f = &a->point_cloud.fields[i], *g = &b->point_cloud.fields[i];
      if (strcmp(f->name, g->name) != 0 || f->offset != g->offset ||
          f->datatype != g->datatype || f->count != g->count) {
        return false;
      }
    }
    x.point_cloud.fields = y.point_cloud.fields = NULL;  // views of their own; the data is
  }                                                     // the same view of the frame
  return memcmp(&x, &y, sizeof(x)) == 0;
}


typedef struct tally {
  unsigned ok, refused, statuses, cases;
} tally_t;


// Decode f both ways; 0 when they agree.
static int compare(sensim_client_t* cli, const buf_t* b, tally_t* t) {
  sensim_frame_t f = {.data = (uint8_t*)b->p, .len = b->n};
  sensim_data_list_t la = {0}, lb = {0};
  sensim_v1_StepDone da, db;
  memset(&da, 0, sizeof(da));
  memset(&db, 0, sizeof(db));
  sensim_views_reset(cli);
  sensim_status_t sa = sensim_step_reply_nanopb(cli, &f, &la, &da);
  char ea[sizeof(((sensim_v1_Status*)0)->message) + 64];
  snprintf(ea, sizeof(ea), "%s", sensim_client_last_error(cli));
  sensim_status_t sb = sensim_step_reply(cli, &f, &lb, &db);
  t->cases++;
  if (sa != sb) {
    fprintf(stderr, "# nanopb: %s (%s), by hand: %s (%s)\n", sensim_status_name(sa), ea,
            sensim_status_name(sb), sensim_client_last_error(cli));
    return 1;
  }
  if (sa != SENSIM_OK) {
    if (sa == SENSIM_EPROTO) {
      t->refused++;
      return 0;
    }
    t->statuses++;  // the daemon's status and message, word for word
    return strcmp(ea, sensim_client_last_error(cli)) != 0;
  }
  t->ok++;
  if (memcmp(&da.time, &db.time, 8) != 0 || da.step != db.step ||
      da.outputs_in_parts != db.outputs_in_parts || la.n != lb.n) {
    fprintf(stderr, "# StepDone differs: step %llu/%llu, parts %u/%u, records %u/%u\n",
            (unsigned long long)da.step, (unsigned long long)db.step, da.outputs_in_parts,
            db.outputs_in_parts, la.n, lb.n);
    return 1;
  }
  for (uint32_t i = 0; i < la.n; i++) {
    if (!same_record(&la.v[i], &lb.v[i])) {
      fprintf(stderr, "# record %u differs (kinds %d, %d)\n", i, (int)la.v[i].kind,
              (int)lb.v[i].kind);
      return 1;
    }
  }
  return 0;
}


static void dump(const buf_t* b) {
  fprintf(stderr, "# frame of %zu bytes:", b->n);
  for (size_t i = 0; i < b->n; i++) {
    fprintf(stderr, " %02x", b->p[i]);
  }
  fprintf(stderr, "\n");
}


static void hello_only(int fd, void* arg) {
  (void)arg;
  if (td_peer_hello(fd) != 0) {
    uint8_t tmp[256];
    while (td_read_frame(fd, tmp, sizeof(tmp)) >= 0) {
    }
  }
}


static sensim_client_t* connect_peer(td_peer_t** peer) {
  *peer = td_peer_start(hello_only, NULL);
  if (!*peer) {
    return NULL;
  }
  sensim_options_t o;
  sensim_options_init(&o);
  o.client_name = "step_decode";
  sensim_client_t* cli = NULL;
  if (sensim_client_connect("127.0.0.1", (uint16_t)td_peer_port(*peer), &o, &cli) != SENSIM_OK) {
    return NULL;
  }
  return cli;
}


TEST(step_reply_by_hand_equals_nanopb_on_generated_replies) {
  td_peer_t* peer;
  sensim_client_t* cli = connect_peer(&peer);
  ASSERT_TRUE(cli != NULL);
  static reply_t r;
  static buf_t b;
  tally_t whole = {0}, t = {0};
  for (unsigned c = 0; c < CASES; c++) {
    generate(&r);
    frame(&r, UINT32_MAX, SIZE_MAX, SIZE_MAX, &b);
    if (compare(cli, &b, &whole) != 0) {
      dump(&b);
      CHECK_FAIL("case %u: the decoders disagree", c);
    }
    if (c < CUT_CASES) {  // cut at every byte of the StepDone, and of one record
      buf_t full;
      frame(&r, UINT32_MAX, SIZE_MAX, SIZE_MAX, &full);
      uint32_t which = r.nrec ? rnd(r.nrec) : UINT32_MAX;
      size_t rec_len = r.nrec ? r.rec[which].n : 0;
      for (size_t k = 0; k <= full.n; k++) {
        frame(&r, UINT32_MAX, SIZE_MAX, k, &b);
        if (compare(cli, &b, &t) != 0) {
          dump(&b);
          CHECK_FAIL("case %u cut at byte %zu of the StepDone: the decoders disagree", c, k);
        }
      }
      for (size_t k = 0; k < rec_len; k++) {
        frame(&r, which, k, SIZE_MAX, &b);
        if (compare(cli, &b, &t) != 0) {
          dump(&b);
          CHECK_FAIL("case %u, record %u cut at byte %zu: the decoders disagree", c, which, k);
        }
      }
    }
    for (unsigned m = 0; m < MUTATIONS; m++) {  // random bytes changed
      frame(&r, UINT32_MAX, SIZE_MAX, SIZE_MAX, &b);
      for (uint32_t k = 1 + rnd(3); k > 0 && b.n; k--) {
        b.p[rnd((uint32_t)b.n)] = (uint8_t)rnd(256);
      }
      if (compare(cli, &b, &t) != 0) {
        dump(&b);
        CHECK_FAIL("case %u, mutation %u: the decoders disagree", c, m);
      }
    }
  }
  printf("# %u replies: %u decoded, %u refused, %u daemon statuses; %u cut or mutated: %u "
         "decoded, %u refused, %u statuses\n", whole.cases, whole.ok, whole.refused,
         whole.statuses, t.cases, t.ok, t.refused, t.statuses);
  // the generator must reach every outcome often
  ASSERT_TRUE(whole.ok > CASES / 4 && whole.refused > CASES / 10 && whole.statuses > CASES / 50);
  ASSERT_TRUE(t.ok > 1000 && t.refused > 1000 && t.statuses > 100);
  sensim_client_close(cli);
  td_peer_stop(peer);
  return 0;
}


// A reply of one IMU record whose payload is `imu`, compared both ways; 0 when they agree.
static int compare_imu(sensim_client_t* cli, const buf_t* imu, tally_t* t) {
  buf_t rec = {.n = 0}, body = {.n = 0}, env = {.n = 0};
  sub(&rec, 11, imu);
  sub(&body, 3, &rec);
  key(&env, 1, 0);
  byte(&env, 9);
  sub(&env, 42, &body);
  int bad = compare(cli, &env, t);
  if (bad) {
    dump(&env);
  }
  return bad;
}


TEST(step_reply_by_hand_equals_nanopb_on_edge_cases) {
  td_peer_t* peer;
  sensim_client_t* cli = connect_peer(&peer);
  ASSERT_TRUE(cli != NULL);
  tally_t t = {0};
  g_hostile = false;
  // ImuSample.values: a varint's raw bytes (nanopb takes 8 to 10 of them as a value, refuses
  // 11), 4 bytes, an empty packed array, 9 and 10 values
  for (int len = 1; len <= 11; len++) {
    buf_t imu = {.n = 0};
    key(&imu, 4, 0);
    varint_len(&imu, 5, len);
    ASSERT_EQ(compare_imu(cli, &imu, &t), 0);
  }
  for (uint32_t n = 0; n <= 10; n++) {
    buf_t imu = {.n = 0}, v = {.n = 0};
    for (uint32_t i = 0; i < n; i++) {
      fixed64(&v, 1.0 + i);
    }
    sub(&imu, 4, &v);
    ASSERT_EQ(compare_imu(cli, &imu, &t), 0);
  }
  buf_t imu = {.n = 0};
  key(&imu, 4, 5);
  put(&imu, "abcd", 4);
  ASSERT_EQ(compare_imu(cli, &imu, &t), 0);
  printf("# %u edge cases: %u decoded, %u refused\n", t.cases, t.ok, t.refused);
  ASSERT_TRUE(t.ok >= 12 && t.refused >= 8);
  sensim_client_close(cli);
  td_peer_stop(peer);
  return 0;
}


TEST(step_reply_by_hand_reads_a_daemons_records) {
  // one reply as the daemon writes it: an IMU with 9 values, an encoder, a cone
  buf_t rec[3] = {{.n = 0}, {.n = 0}, {.n = 0}};
  buf_t v = {.n = 0}, p = {.n = 0}, body = {.n = 0}, env = {.n = 0};
  for (int i = 0; i < 9; i++) {
    fixed64(&v, 0.5 * i);
  }
  key(&rec[0], 1, 0);
  byte(&rec[0], 1);
  key(&rec[0], 2, 1);
  fixed64(&rec[0], 0.25);
  sub(&p, 4, &v);
  sub(&rec[0], 11, &p);
  p.n = 0;
  key(&rec[1], 1, 0);
  byte(&rec[1], 2);
  key(&p, 1, 1);
  fixed64(&p, 1.5);
  sub(&rec[1], 12, &p);
  p.n = 0;
  key(&rec[2], 1, 0);
  byte(&rec[2], 3);
  key(&p, 1, 0);
  byte(&p, 1);
  key(&p, 2, 1);
  fixed64(&p, 4.0);
  key(&p, 7, 0);
  byte(&p, 11);
  sub(&rec[2], 13, &p);
  key(&body, 1, 1);
  fixed64(&body, 0.25);
  key(&body, 2, 0);
  byte(&body, 7);
  for (int i = 0; i < 3; i++) {
    sub(&body, 3, &rec[i]);
  }
  key(&env, 1, 0);
  byte(&env, 5);
  sub(&env, 42, &body);

  td_peer_t* peer;
  sensim_client_t* cli = connect_peer(&peer);
  ASSERT_TRUE(cli != NULL);
  sensim_frame_t f = {.data = env.p, .len = env.n};
  sensim_data_list_t l = {0};
  sensim_v1_StepDone d;
  ASSERT_OK_ST(cli, sensim_step_reply(cli, &f, &l, &d));
  ASSERT_EQ(d.step, 7);
  ASSERT_EQ(l.n, 3);
  ASSERT_EQ(l.v[0].kind, SENSIM_PAYLOAD_IMU);
  ASSERT_EQ(l.v[0].sensor_id, 1);
  ASSERT_EQ(l.v[0].imu.nvalues, 9);
  ASSERT_TRUE(l.v[0].imu.values[8] == 4.0 && l.v[0].time == 0.25);
  ASSERT_EQ(l.v[1].kind, SENSIM_PAYLOAD_SCALAR);
  ASSERT_TRUE(l.v[1].scalar.position == 1.5);
  ASSERT_EQ(l.v[2].kind, SENSIM_PAYLOAD_CONE);
  ASSERT_TRUE(l.v[2].cone.detected && l.v[2].cone.range == 4.0);
  ASSERT_EQ(l.v[2].cone.object_id, 11);
  sensim_client_close(cli);
  td_peer_stop(peer);
  return 0;
}


//---------------- The tick's requests, encoded

#define ENCODE_CASES 1000   // each two requests in flight (discarded), under the 4096 slots

static struct {
  uint8_t bytes[16u << 20];
  size_t n;
} g_seen;


// After the Hello, every byte the client sends, until it closes.
static void record_all(int fd, void* arg) {
  (void)arg;
  if (td_peer_hello(fd) == 0) {
    return;
  }
  for (;;) {
    ssize_t k = read(fd, g_seen.bytes + g_seen.n, sizeof(g_seen.bytes) - g_seen.n);
    if (k <= 0) {
      return;
    }
    g_seen.n += (size_t)k;
  }
}


// The gather's bytes in order, its holes read from where they point.
static void flatten(const sensim_gather_t* g, uint8_t* out, size_t* n) {
  size_t own = 0;
  for (size_t k = 0; k < g->nholes; k++) {
    memcpy(out + *n, g->buf + own, g->holes[k].at - own);
    *n += g->holes[k].at - own;
    own = g->holes[k].at;
    memcpy(out + *n, g->holes[k].data, g->holes[k].len);
    *n += g->holes[k].len;
  }
  memcpy(out + *n, g->buf + own, g->len - own);
  *n += g->len - own;
}


static double any_time(void) {
  static const double v[] = {0.0, -0.0, 0.001, 1e300, -5.0};
  return rnd(2) ? v[rnd(5)] : (double)rnd(1u << 30) * 1e-6;
}


// nanopb's UpdateState as the client's requests carried it: the arrays as the *_bytes fields
// from the caller's memory (a NULL array not sent).
static void nanopb_state(const sensim_state_t* st, sensim_v1_UpdateState* m, sensim_span_t sp[5]) {
  memset(m, 0, sizeof(*m));
  m->has_time = true;
  m->time = st->time;
  size_t nb = st->nbodies, nj = st->njoints;
  sensim_wire_set_span(&m->body_ids_bytes, &sp[0], st->body_ids, 4 * nb);
  sensim_wire_set_span(&m->body_poses_bytes, &sp[1], st->body_poses, 56 * nb);
  sensim_wire_set_span(&m->body_velocities_bytes, &sp[2], st->body_velocities, 48 * nb);
  sensim_wire_set_span(&m->joint_ids_bytes, &sp[3], st->joint_ids, 4 * nj);
  sensim_wire_set_span(&m->joint_positions_bytes, &sp[4], st->joint_positions, 8 * nj);
}


TEST(tick_requests_by_hand_equal_nanopbs_encoding) {
  static uint32_t ids[ENCODE_CASES][6], jids[ENCODE_CASES][4], sensors[ENCODE_CASES][6];
  static double poses[ENCODE_CASES][6][7], vels[ENCODE_CASES][6][6], q[ENCODE_CASES][4];
  static uint8_t want[16u << 20];
  static sensim_gather_t g;  // nanopb's frames
  size_t nwant = 0;
  g_seen.n = 0;
  td_peer_t* peer = td_peer_start(record_all, NULL);
  ASSERT_TRUE(peer != NULL);
  sensim_options_t o;
  sensim_options_init(&o);
  sensim_client_t* cli = NULL;
  ASSERT_OK_ST(cli, sensim_client_connect("127.0.0.1", (uint16_t)td_peer_port(peer), &o, &cli));
  static const uint32_t magnitudes[] = {0, 1, 127, 128, 16383, 16384, 2097152, 268435456,
                                        0xFFFFFFFFu};
  for (unsigned c = 0; c < ENCODE_CASES; c++) {
    sensim_state_t st;
    sensim_state_init(&st);
    st.time = any_time();
    st.nbodies = rnd(5) == 0 ? 0 : 1 + rnd(6) % 6;
    st.njoints = rnd(4);
    for (uint32_t i = 0; i < 6; i++) {
      ids[c][i] = magnitudes[rnd(9)];
      for (int k = 0; k < 7; k++) {
        poses[c][i][k] = any_time();
      }
      for (int k = 0; k < 6; k++) {
        vels[c][i][k] = any_time();
      }
    }
    for (uint32_t i = 0; i < 4; i++) {
      jids[c][i] = magnitudes[rnd(9)];
      q[c][i] = any_time();
    }
    st.body_ids = st.nbodies || rnd(2) ? ids[c] : NULL;
    st.body_poses = st.nbodies || rnd(2) ? &poses[c][0][0] : NULL;
    st.body_velocities = rnd(3) ? &vels[c][0][0] : NULL;  // optional
    st.joint_ids = st.njoints || rnd(2) ? jids[c] : NULL;
    st.joint_positions = st.njoints || rnd(2) ? q[c] : NULL;
    sensim_step_t sp;
    sensim_step_init(&sp);
    sp.time = st.time;
    sp.outputs = (sensim_step_outputs_t)rnd(3);
    if (sp.outputs == SENSIM_STEP_OUTPUTS_LISTED) {
      sp.noutput_sensors = rnd(7);
      for (uint32_t i = 0; i < 6; i++) {
        sensors[c][i] = magnitudes[rnd(9)];
      }
      sp.output_sensors = sp.noutput_sensors || rnd(2) ? sensors[c] : NULL;
    }
    uint64_t a, b;
    ASSERT_OK_ST(cli, sensim_update_and_step_send(cli, &st, &sp, &a, &b));
    ASSERT_OK_ST(cli, sensim_discard(cli, a));
    ASSERT_OK_ST(cli, sensim_discard(cli, b));

    // nanopb's frames of the same requests
    sensim_v1_UpdateState ms;
    sensim_span_t spans[5];
    nanopb_state(&st, &ms, spans);
    sensim_v1_Step mp;
    memset(&mp, 0, sizeof(mp));
    mp.has_time = true;
    mp.time = sp.time;
    if (sp.outputs != SENSIM_STEP_OUTPUTS_ALL) {
      mp.has_outputs = true;
      mp.outputs = (sensim_v1_StepOutputs)sp.outputs;
    }
    sensim_u32s_t u;
    sensim_wire_set_u32s(&mp.output_sensors, &u, sp.output_sensors, sp.noutput_sensors);
    size_t size;
    char err[128];
    sensim_gather_reset(&g);
    ASSERT_EQ(sensim_wire_frame(&g, a, sensim_v1_Envelope_update_state_tag,
                                sensim_v1_UpdateState_fields, &ms, &size, err, sizeof(err)),
              SENSIM_OK);
    ASSERT_EQ(sensim_wire_frame(&g, b, sensim_v1_Envelope_step_tag, sensim_v1_Step_fields, &mp,
                                &size, err, sizeof(err)),
              SENSIM_OK);
    flatten(&g, want, &nwant);

    // the body alone (sent to several shards)
    sensim_gather_t hb = {0}, nb = {0};
    uint8_t x[4096], y[4096];
    size_t nx = 0, ny = 0;
    ASSERT_OK_ST(cli, sensim_state_body(cli, &st, &hb));
    ASSERT_EQ(sensim_wire_body(&nb, sensim_v1_UpdateState_fields, &ms, err, sizeof(err)),
              SENSIM_OK);
    flatten(&hb, x, &nx);
    flatten(&nb, y, &ny);
    ASSERT_TRUE(nx == ny && memcmp(x, y, nx) == 0 && hb.bytes == nb.bytes && hb.bytes == nx);
    sensim_gather_free(&hb);
    sensim_gather_free(&nb);
  }
  sensim_client_close(cli);
  td_peer_stop(peer);
  sensim_gather_free(&g);
  ASSERT_EQ(g_seen.n, nwant);
  for (size_t i = 0; i < nwant; i++) {
    if (g_seen.bytes[i] != want[i]) {
      CHECK_FAIL("byte %zu of the requests: 0x%02x sent, nanopb writes 0x%02x", i,
                 g_seen.bytes[i], want[i]);
    }
  }
  return 0;
}


//---------------- The frame peek (wire.c): the client's one varint reader against nanopb's

// nanopb's reading of what sensim_wire_peek reads: keys by pb_decode_tag (a field number 0
// refused, as pb_decode does), the id and the status's code by pb_decode_varint, the status by
// a substream, every other field skipped by pb_skip_field. False where nanopb fails.
static bool nanopb_peek(const uint8_t* p, size_t len, sensim_peek_t* out) {
  memset(out, 0, sizeof(*out));
  pb_istream_t s = pb_istream_from_buffer(p, len);
  while (s.bytes_left > 0) {
    pb_wire_type_t wt;
    uint32_t field;
    bool eof;
    uint64_t v;
    if (!pb_decode_tag(&s, &wt, &field, &eof) || field == 0) {
      return false;
    }
    if (field == sensim_v1_Envelope_id_tag && wt == PB_WT_VARINT) {
      if (!pb_decode_varint(&s, &out->id)) {
        return false;
      }
    } else if (field == sensim_v1_Envelope_status_tag && wt == PB_WT_STRING) {
      pb_istream_t sub;
      if (!pb_make_string_substream(&s, &sub)) {
        return false;
      }
      out->has_status = true;
      while (sub.bytes_left > 0) {
        if (!pb_decode_tag(&sub, &wt, &field, &eof) || field == 0) {
          return false;
        }
        if (field == sensim_v1_Status_code_tag && wt == PB_WT_VARINT) {
          if (!pb_decode_varint(&sub, &v)) {
            return false;
          }
          out->status_code = (uint32_t)v;
        } else if (!pb_skip_field(&sub, wt)) {
          return false;
        }
      }
      if (!pb_close_string_substream(&s, &sub)) {
        return false;
      }
    } else {
      if (field >= sensim_v1_Envelope_hello_tag && wt == PB_WT_STRING) {
        out->body = field;
      }
      if (!pb_skip_field(&s, wt)) {
        return false;
      }
    }
  }
  return true;
}


// An Envelope's outer fields as a daemon (or a hostile peer) might send them: the id, a
// status with a code and a message, a body, unknown fields, in any order, with varints of any
// length (the hostile ones past 10 bytes, or with a tenth byte over 1).
static void gen_envelope(buf_t* b) {
  b->n = 0;
  for (int k = 0, n = 1 + (int)rnd(5); k < n; k++) {
    switch (rnd(5)) {
      case 0:
        key(b, sensim_v1_Envelope_id_tag, PB_WT_VARINT);
        varint(b, rnd(3) ? rnd(1000) : ~0ull - rnd(3));
        break;
      case 1: {
        buf_t st = {.n = 0};
        key(&st, sensim_v1_Status_code_tag, PB_WT_VARINT);
        varint(&st, any_u());
        maybe_unknown(&st);
        key(&st, 2, PB_WT_STRING);
        varint(&st, 3);
        put(&st, "bad", 3);
        key(b, sensim_v1_Envelope_status_tag, PB_WT_STRING);
        varint(b, st.n);
        put(b, st.p, st.n);
        break;
      }
      case 2:
        key(b, sensim_v1_Envelope_hello_tag + rnd(20), PB_WT_STRING);
        varint(b, 2);
        put(b, "\x08\x01", 2);
        break;
      case 3:
        unknown(b);
        break;
      default:
        // a varint whose tenth byte carries more than bit 63 (nanopb refuses it), or one of
        // exactly 10 bytes that fits
        key(b, sensim_v1_Envelope_id_tag, PB_WT_VARINT);
        for (int i = 0; i < 9; i++) {
          byte(b, 0xFF);
        }
        byte(b, (uint8_t)(rnd(2) ? 0x01 : 0x02 + rnd(0x7E)));
        break;
    }
  }
}


static bool same_peek(const sensim_peek_t* a, const sensim_peek_t* b) {
  return a->id == b->id && a->has_status == b->has_status &&
         a->status_code == b->status_code && a->body == b->body;
}


TEST(peek_reads_envelopes_as_nanopb_does) {
  static buf_t b;
  unsigned refused = 0, cases = 0;
  for (unsigned c = 0; c < CASES; c++) {
    g_hostile = rnd(3) == 0;
    gen_envelope(&b);
    // the whole frame, cut at a random byte, and mutated at one
    for (int form = 0; form < 3; form++) {
      buf_t f = b;
      if (form == 1) {
        f.n = rnd((uint32_t)f.n + 1);
      } else if (form == 2 && f.n > 0) {
        f.p[rnd((uint32_t)f.n)] ^= (uint8_t)(1 + rnd(255));
      }
      sensim_peek_t mine, theirs;
      bool ok = sensim_wire_peek(f.p, f.n, &mine);
      bool want = nanopb_peek(f.p, f.n, &theirs);
      if (ok != want || (ok && !same_peek(&mine, &theirs))) {
        CHECK_FAIL("case %u form %d (%zu bytes): peek %s, nanopb %s", c, form, f.n,
                   ok ? "reads it" : "refuses it", want ? "reads it" : "refuses it");
      }
      refused += !ok;
      cases++;

      // the id from the first bytes, as the transport takes it: found, or more needed, or
      // not an id first; found agrees with nanopb on the whole first field
      uint64_t id = 0;
      int r = sensim_wire_peek_id(f.p, f.n, &id);
      uint64_t nid;
      bool first_is_id = f.n > 0 && f.p[0] == ((sensim_v1_Envelope_id_tag << 3) | PB_WT_VARINT);
      if (first_is_id) {
        pb_istream_t s = pb_istream_from_buffer(f.p + 1, f.n - 1);
        bool nok = pb_decode_varint(&s, &nid);
        ASSERT_TRUE(r == (nok ? 1 : f.n >= 11 ? -1 : 0));
        ASSERT_TRUE(!nok || id == nid);
      } else {
        ASSERT_EQ(r, f.n == 0 ? 0 : -1);
      }
    }
  }
  // both outcomes were exercised
  ASSERT_TRUE(refused > cases / 20 && refused < cases - cases / 20);
  return 0;
}
