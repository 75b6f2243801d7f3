// SPDX-License-Identifier: MIT
// test_wire.c: the protobuf adapter: status-code mapping against the protocol's numbers,
// decoding of good and bad payloads, request classification and reply encoding.
#include "net/wire.h"

#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "check.h"
#include "net/wire_pb.h"


// Pack env as a request and decode it, as the daemon receives it; *out_len: frame size.
static int pack_decode(Sensim__V1__Envelope* env, wire_request_t** out, size_t* out_len) {
  uint8_t* buf;
  size_t len;
  if (wire_pack(env, &buf, &len) != 0) {
    return -1;
  }
  int rc = wire_decode(buf, len, out, NULL);
  mem_free(buf);
  if (out_len) {
    *out_len = len;
  }
  return rc;
}


TEST(wire_status_codes_are_the_protocol_numbers) {
  // gRPC / google.rpc.Code numbers, as documented in proto/README.md
  ASSERT_EQ(wire_status_code(0), 0);
  ASSERT_EQ(wire_status_code(ERR_INVAL), 3);
  ASSERT_EQ(wire_status_code(ERR_PROTO), 3);
  ASSERT_EQ(wire_status_code(ERR_NOTFOUND), 5);
  ASSERT_EQ(wire_status_code(ERR_EXISTS), 6);
  ASSERT_EQ(wire_status_code(ERR_LIMIT), 8);
  ASSERT_EQ(wire_status_code(ERR_STATE), 9);
  ASSERT_EQ(wire_status_code(ERR_UNIMPL), 12);
  ASSERT_EQ(wire_status_code(ERR_INTERNAL), 13);
  ASSERT_EQ(wire_status_code(ERR_AUTH), 16);
  ASSERT_EQ(SENSIM__V1__STATUS_CODE__UNAUTHENTICATED, 16);
  return 0;
}


TEST(wire_decodes_a_hello_and_classifies_it) {
  Sensim__V1__Hello h = SENSIM__V1__HELLO__INIT;
  h.has_protocol_version = 1;
  h.protocol_version = 1;
  h.environment = "arena";
  h.has_role = 1;
  h.role = SENSIM__V1__ROLE__ROLE_OBSERVER;
  Sensim__V1__Envelope env = SENSIM__V1__ENVELOPE__INIT;
  env.has_id = 1;
  env.id = 42;
  env.body_case = SENSIM__V1__ENVELOPE__BODY_HELLO;
  env.hello = &h;
  wire_request_t* r;
  ASSERT_OK(pack_decode(&env, &r, NULL));
  ASSERT_EQ(wire_id(r), 42);
  ASSERT_EQ(wire_kind(r), WIRE_KIND_HELLO);
  ASSERT_STREQ(wire_body_name(r), "hello");
  wire_hello_t out;
  wire_get_hello(r, &out);
  ASSERT_EQ(out.protocol_version, 1);
  ASSERT_STREQ(out.environment, "arena");
  ASSERT_STREQ(out.token, "");
  ASSERT_EQ(out.observer, 1);
  wire_free(r);
  return 0;
}


TEST(wire_rejects_garbage_without_crashing) {
  srand(3);
  int rejected = 0;
  for (int round = 0; round < 5000; round++) {
    uint8_t junk[48];
    size_t n = 1 + (size_t)(rand() % 48);
    for (size_t i = 0; i < n; i++) {
      junk[i] = (uint8_t)rand();
    }
    wire_request_t* r = NULL;
    err_msg_t msg;
    int rc = wire_decode(junk, n, &r, &msg);
    if (rc == 0) {
      // some random bytes are a valid Envelope; it must classify without crashing
      (void)wire_kind(r);
      (void)wire_body_name(r);
      wire_free(r);
    } else {
      ASSERT_EQ(rc, ERR_PROTO);
      ASSERT_CONTAINS(msg.text, "does not decode");
      rejected++;
    }
  }
  ASSERT_TRUE(rejected > 1000);
  return 0;
}


TEST(wire_status_reply_round_trips) {
  uint8_t* buf;
  size_t len;
  ASSERT_OK(wire_encode_status(7, ERR_NOTFOUND, "create_object: geometry 3 does not exist", &buf,
                               &len));
  Sensim__V1__Envelope* env = sensim__v1__envelope__unpack(NULL, len, buf);
  ASSERT_TRUE(env != NULL);
  ASSERT_EQ(env->id, 7);
  ASSERT_TRUE(env->status != NULL);
  ASSERT_EQ(env->status->code, SENSIM__V1__STATUS_CODE__NOT_FOUND);
  ASSERT_STREQ(env->status->message, "create_object: geometry 3 does not exist");
  ASSERT_EQ(env->body_case, SENSIM__V1__ENVELOPE__BODY__NOT_SET);
  sensim__v1__envelope__free_unpacked(env, NULL);
  mem_free(buf);
  return 0;
}


// The OK reply written by hand (wire.c, pack_ok) is byte for byte what protobuf-c packs, for
// ids of every varint length; a reply with a body, a message or a sequence is protobuf-c's own.
TEST(wire_ok_reply_is_protobuf_c_bytes) {
  const uint64_t ids[] = {0, 1, 127, 128, 300, 16383, 16384, 1ull << 32, (1ull << 63) + 5,
                          UINT64_MAX};
  for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
    Sensim__V1__Status st = SENSIM__V1__STATUS__INIT;
    st.has_code = 1;
    st.code = SENSIM__V1__STATUS_CODE__OK;
    st.message = "";
    Sensim__V1__Envelope want = SENSIM__V1__ENVELOPE__INIT;
    want.has_id = 1;
    want.id = ids[i];
    want.status = &st;
    uint8_t ref[64];
    size_t ref_len = sensim__v1__envelope__pack(&want, ref);
    uint8_t* buf;
    size_t len;
    ASSERT_OK(wire_encode_status(ids[i], 0, NULL, &buf, &len));
    ASSERT_EQ(len, ref_len);
    ASSERT_TRUE(memcmp(buf, ref, len) == 0);
    mem_free(buf);
    Sensim__V1__Envelope bare = SENSIM__V1__ENVELOPE__INIT;
    ASSERT_OK(wire_pack_reply(ids[i], 0, "", &bare, &buf, &len));
    ASSERT_EQ(len, ref_len);
    ASSERT_TRUE(memcmp(buf, ref, len) == 0);
    mem_free(buf);
  }

  // a sequence goes through protobuf-c: present in the bytes
  Sensim__V1__Envelope seq = SENSIM__V1__ENVELOPE__INIT;
  seq.has_sequence = 1;
  seq.sequence = 9;
  uint8_t* buf;
  size_t len;
  ASSERT_OK(wire_pack_reply(3, 0, NULL, &seq, &buf, &len));
  Sensim__V1__Envelope* env = sensim__v1__envelope__unpack(NULL, len, buf);
  ASSERT_TRUE(env != NULL);
  ASSERT_EQ(env->id, 3);
  ASSERT_TRUE(env->has_sequence && env->sequence == 9);
  ASSERT_EQ(env->status->code, SENSIM__V1__STATUS_CODE__OK);
  sensim__v1__envelope__free_unpacked(env, NULL);
  mem_free(buf);
  return 0;
}


TEST(wire_classifies_every_request_kind) {
  struct {
    Sensim__V1__Envelope__BodyCase body;
    wire_kind_t kind;
  } cases[] = {
      {SENSIM__V1__ENVELOPE__BODY_PING, WIRE_KIND_PING},
      {SENSIM__V1__ENVELOPE__BODY_GET_INFO, WIRE_KIND_GET_INFO},
      {SENSIM__V1__ENVELOPE__BODY_CREATE_MESH, WIRE_KIND_ENV_WRITE},
      {SENSIM__V1__ENVELOPE__BODY_STEP, WIRE_KIND_ENV_WRITE},
      {SENSIM__V1__ENVELOPE__BODY_RAYCAST, WIRE_KIND_ENV_READ},
      {SENSIM__V1__ENVELOPE__BODY_CREATE_SENSOR, WIRE_KIND_ENV_WRITE},
      {SENSIM__V1__ENVELOPE__BODY_SUBSCRIBE, WIRE_KIND_SUBSCRIBE},
      {SENSIM__V1__ENVELOPE__BODY_UNSUBSCRIBE, WIRE_KIND_UNSUBSCRIBE},
      {SENSIM__V1__ENVELOPE__BODY_STEP_DONE, WIRE_KIND_REPLY},
      {SENSIM__V1__ENVELOPE__BODY__NOT_SET, WIRE_KIND_EMPTY},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    // an empty sub-message: protobuf-c packs it by its own (empty) descriptor, and an empty
    // message of any type has the same encoding
    Sensim__V1__Ping empty = SENSIM__V1__PING__INIT;
    Sensim__V1__Envelope env = SENSIM__V1__ENVELOPE__INIT;
    env.has_id = 1;
    env.id = 1;
    env.body_case = cases[i].body;
    env.ping = cases[i].body == SENSIM__V1__ENVELOPE__BODY__NOT_SET ? NULL : &empty;
    wire_request_t* r;
    ASSERT_OK(pack_decode(&env, &r, NULL));
    ASSERT_EQ(wire_kind(r), cases[i].kind);
    wire_free(r);
  }
  return 0;
}


TEST(wire_remove_environment_is_told_apart_from_other_bodies) {
  // a create_body whose fields would alias Remove.kind = ENTITY_ENVIRONMENT must stay a write
  Sensim__V1__CreateBody body = SENSIM__V1__CREATE_BODY__INIT;
  body.has_id = 1;
  body.id = SENSIM__V1__ENTITY_KIND__ENTITY_ENVIRONMENT;
  Sensim__V1__Remove rm = SENSIM__V1__REMOVE__INIT;
  rm.has_kind = 1;
  rm.kind = SENSIM__V1__ENTITY_KIND__ENTITY_ENVIRONMENT;
  Sensim__V1__Remove rm_obj = SENSIM__V1__REMOVE__INIT;
  rm_obj.has_kind = 1;
  rm_obj.kind = SENSIM__V1__ENTITY_KIND__ENTITY_OBJECT;
  struct {
    Sensim__V1__Envelope__BodyCase body;
    void* msg;
    wire_kind_t kind;
  } cases[] = {
      {SENSIM__V1__ENVELOPE__BODY_CREATE_BODY, &body, WIRE_KIND_ENV_WRITE},
      {SENSIM__V1__ENVELOPE__BODY_REMOVE, &rm, WIRE_KIND_ENV_RELEASE},
      {SENSIM__V1__ENVELOPE__BODY_REMOVE, &rm_obj, WIRE_KIND_ENV_WRITE},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    Sensim__V1__Envelope env = SENSIM__V1__ENVELOPE__INIT;
    env.has_id = 1;
    env.id = 1;
    env.body_case = cases[i].body;
    env.create_body = cases[i].msg;
    wire_request_t* r;
    ASSERT_OK(pack_decode(&env, &r, NULL));
    ASSERT_EQ(wire_kind(r), cases[i].kind);
    wire_free(r);
  }
  return 0;
}


TEST(wire_decoding_is_bounded_by_the_frame_size) {
  // 600000 unknown varint fields (field 99: a two-byte tag, a one-byte value): 3 bytes each on
  // the wire (1.8 MB), a struct and an allocation each when decoded (about 15 MB)
  size_t n = 600000, len = 0;
  uint8_t* buf = mem_alloc(3 * n);
  ASSERT_TRUE(buf != NULL);
  for (size_t i = 0; i < n; i++) {
    buf[len++] = (uint8_t)(((99 << 3) & 0x7f) | 0x80);
    buf[len++] = (uint8_t)((99 << 3) >> 7);
    buf[len++] = 1;
  }
  wire_request_t* r = NULL;
  err_msg_t msg;
  int rc = wire_decode(buf, len, &r, &msg);
  mem_free(buf);
  ASSERT_EQ(rc, ERR_LIMIT);
  ASSERT_CONTAINS(msg.text, "decodes to more than");

  // a packed array of the same size decodes within the budget
  size_t nd = 7500;
  Sensim__V1__Raycast ray = SENSIM__V1__RAYCAST__INIT;
  double* values = mem_calloc(nd, sizeof(double));
  ASSERT_TRUE(values != NULL);
  ray.n_origins = nd;
  ray.origins = values;
  Sensim__V1__Envelope env = SENSIM__V1__ENVELOPE__INIT;
  env.has_id = 1;
  env.id = 1;
  env.body_case = SENSIM__V1__ENVELOPE__BODY_RAYCAST;
  env.raycast = &ray;
  ASSERT_OK(pack_decode(&env, &r, NULL));
  wire_free(r);
  mem_free(values);
  return 0;
}


TEST(wire_decoding_admits_the_largest_legitimate_nested_request) {
  // SetEnvironment with 1024 dipoles of small sub-messages: about 12 times its frame decoded
  enum { N = 1024 };
  static Sensim__V1__MagneticDipole dip[N];
  static Sensim__V1__Vec3 moment[N];
  static Sensim__V1__MagneticDipole* dips[N];
  for (int i = 0; i < N; i++) {
    sensim__v1__vec3__init(&moment[i]);
    moment[i].has_z = 1;
    moment[i].z = 1.0;
    sensim__v1__magnetic_dipole__init(&dip[i]);
    dip[i].moment = &moment[i];
    dip[i].has_body_id = 1;
    dip[i].body_id = 1;
    dips[i] = &dip[i];
  }
  Sensim__V1__SetEnvironment set = SENSIM__V1__SET_ENVIRONMENT__INIT;
  set.n_dipoles = N;
  set.dipoles = dips;
  Sensim__V1__Envelope env = SENSIM__V1__ENVELOPE__INIT;
  env.has_id = 1;
  env.id = 1;
  env.body_case = SENSIM__V1__ENVELOPE__BODY_SET_ENVIRONMENT;
  env.set_environment = &set;
  wire_request_t* r;
  size_t len;
  ASSERT_OK(pack_decode(&env, &r, &len));
  ASSERT_TRUE(wire_size(r) > 4 * len);  // the decoded size is what back-pressure counts
  wire_free(r);
  return 0;
}


//---------------- A frame the request keeps: large bytes fields point into it

// A raycast of n rays packed into a frame block (header, then payload) as the daemon hands it
// over: *payload and *len set.
static uint8_t* raycast_frame(const Sensim__V1__Raycast* rc, const uint8_t** payload,
                              size_t* len) {
  Sensim__V1__Envelope env = SENSIM__V1__ENVELOPE__INIT;
  env.has_id = 1;
  env.id = 7;
  env.body_case = SENSIM__V1__ENVELOPE__BODY_RAYCAST;
  env.raycast = (Sensim__V1__Raycast*)rc;
  size_t n = sensim__v1__envelope__get_packed_size(&env);
  uint8_t* block = mem_alloc(4 + n);
  if (!block) {
    return NULL;
  }
  memset(block, 0, 4);
  sensim__v1__envelope__pack(&env, block + 4);
  *payload = block + 4;
  *len = n;
  return block;
}


// A raycast frame with only its origins_bytes: n bytes of data.
static uint8_t* origins_frame(const uint8_t* data, size_t n, const uint8_t** payload,
                              size_t* len) {
  Sensim__V1__Raycast rc = SENSIM__V1__RAYCAST__INIT;
  rc.has_origins_bytes = 1;
  rc.origins_bytes = (ProtobufCBinaryData){n, (uint8_t*)data};
  return raycast_frame(&rc, payload, len);
}


static int points_into(const ProtobufCBinaryData* b, const uint8_t* block, size_t n) {
  return b->data >= block && b->data + b->len <= block + n;
}


// The owner of a frame block, as a session is: gives it away once when asked (or never, when
// `keep`), and counts the asks.
typedef struct owner {
  uint8_t* block;
  int keep;
  int asked;
} owner_t;


static uint8_t* owner_take(void* ctx) {
  owner_t* o = ctx;
  o->asked++;
  if (o->keep) {
    return NULL;
  }
  uint8_t* b = o->block;
  o->block = NULL;
  return b;
}


TEST(wire_frame_decode_points_large_bytes_into_the_frame_and_equals_the_copy) {
  int64_t live = mem_live_count();
  enum { RAYS = 1000 };  // 24,000 bytes per array
  static double org[3 * RAYS], dir[3 * RAYS], t[1] = {0.5};
  for (int i = 0; i < 3 * RAYS; i++) {
    org[i] = 0.25 * i;
    dir[i] = -1.0 / (i + 1);
  }
  Sensim__V1__Raycast rc = SENSIM__V1__RAYCAST__INIT;
  rc.has_origins_bytes = rc.has_directions_bytes = rc.has_times_bytes = 1;
  rc.origins_bytes = (ProtobufCBinaryData){sizeof(org), (uint8_t*)org};
  rc.directions_bytes = (ProtobufCBinaryData){sizeof(dir), (uint8_t*)dir};
  rc.times_bytes = (ProtobufCBinaryData){sizeof(t), (uint8_t*)t};  // small: copied
  rc.has_max_range = 1;
  rc.max_range = 80.0;
  const uint8_t* payload;
  size_t len;
  uint8_t* block = raycast_frame(&rc, &payload, &len);
  ASSERT_TRUE(block != NULL);
  wire_request_t* copied;
  ASSERT_OK(wire_decode(payload, len, &copied, NULL));
  wire_request_t* kept;
  owner_t owner = {.block = block};
  ASSERT_OK(wire_decode_frame(payload, len, owner_take, &owner, &kept, NULL));
  ASSERT_EQ(owner.asked, 1);
  ASSERT_TRUE(owner.block == NULL);  // given to the request
  const Sensim__V1__Raycast* a = wire_envelope(copied)->raycast;
  const Sensim__V1__Raycast* b = wire_envelope(kept)->raycast;
  ASSERT_EQ(wire_id(kept), 7);
  ASSERT_EQ(wire_kind(kept), wire_kind(copied));
  ASSERT_TRUE(b->has_origins_bytes && b->has_directions_bytes && b->has_times_bytes);
  ASSERT_TRUE(points_into(&b->origins_bytes, block, 4 + len));
  ASSERT_TRUE(points_into(&b->directions_bytes, block, 4 + len));
  ASSERT_TRUE(!points_into(&b->times_bytes, block, 4 + len));
  ASSERT_TRUE(!points_into(&a->origins_bytes, block, 4 + len));
  ASSERT_EQ(b->origins_bytes.len, sizeof(org));
  ASSERT_EQ(b->directions_bytes.len, sizeof(dir));
  ASSERT_EQ(b->times_bytes.len, sizeof(t));
  ASSERT_OK(memcmp(b->origins_bytes.data, org, sizeof(org)));
  ASSERT_OK(memcmp(b->directions_bytes.data, dir, sizeof(dir)));
  ASSERT_OK(memcmp(b->times_bytes.data, t, sizeof(t)));
  ASSERT_TRUE(b->has_max_range && b->max_range == 80.0);
  ASSERT_TRUE(!b->has_group_mask && b->n_exclude_bodies == 0);
  ASSERT_TRUE(wire_size(kept) >= len);  // the frame it keeps is counted
  wire_free(copied);
  wire_free(kept);  // the frame with it
  ASSERT_EQ(mem_live_count(), live);
  return 0;
}


TEST(wire_frame_decode_of_a_repeated_or_small_field_copies_as_always) {
  int64_t live = mem_live_count();
  static uint8_t big[8192], other[8192];
  memset(big, 1, sizeof(big));
  memset(other, 2, sizeof(other));

  // the same field twice: the last one counts, as protobuf says; nothing borrowed
  const uint8_t* p1;
  const uint8_t* p2;
  size_t n1, n2;
  uint8_t* f1 = origins_frame(big, sizeof(big), &p1, &n1);
  uint8_t* f2 = origins_frame(other, sizeof(other), &p2, &n2);
  ASSERT_TRUE(f1 && f2);
  // the frame of both: the envelope of f1, then f2's raycast field again (fields merge)
  uint8_t* both = mem_alloc(4 + n1 + n2);
  ASSERT_TRUE(both != NULL);
  memcpy(both + 4, p1, n1);
  memcpy(both + 4 + n1, p2, n2);
  wire_request_t* r;
  owner_t owner = {.block = both};
  ASSERT_OK(wire_decode_frame(both + 4, n1 + n2, owner_take, &owner, &r, NULL));
  const Sensim__V1__Raycast* b = wire_envelope(r)->raycast;
  ASSERT_EQ(b->origins_bytes.len, sizeof(other));
  ASSERT_OK(memcmp(b->origins_bytes.data, other, sizeof(other)));
  ASSERT_TRUE(!points_into(&b->origins_bytes, both, 4 + n1 + n2));
  ASSERT_EQ(owner.asked, 0);  // nothing borrowed: the frame stays its owner's
  wire_free(r);

  // a field below WIRE_BORROW_MIN only: nothing borrowed, the frame not asked for
  const uint8_t* p3;
  size_t n3;
  uint8_t* f3 = origins_frame(big, 4095, &p3, &n3);
  ASSERT_TRUE(f3 != NULL);
  owner = (owner_t){.block = f3};
  ASSERT_OK(wire_decode_frame(p3, n3, owner_take, &owner, &r, NULL));
  ASSERT_EQ(owner.asked, 0);
  b = wire_envelope(r)->raycast;
  ASSERT_EQ(b->origins_bytes.len, 4095);
  ASSERT_OK(memcmp(b->origins_bytes.data, big, 4095));
  ASSERT_TRUE(!points_into(&b->origins_bytes, f3, 4 + n3));
  wire_free(r);

  // a frame that does not decode fails as wire_decode does, its frame not asked for
  err_msg_t msg;
  uint8_t bad[8];
  memset(bad, 0xff, sizeof(bad));
  owner = (owner_t){.block = bad};
  ASSERT_EQ(wire_decode_frame(bad, sizeof(bad), owner_take, &owner, &r, &msg), ERR_PROTO);
  ASSERT_EQ(owner.asked, 0);
  mem_free(f1);
  mem_free(f2);
  mem_free(f3);
  mem_free(both);
  ASSERT_EQ(mem_live_count(), live);
  return 0;
}


// v as a varint at p[at]; returns the position after it.
static size_t put_varint(uint8_t* p, size_t at, uint64_t v) {
  for (; v >= 0x80; v >>= 7) {
    p[at++] = (uint8_t)(v | 0x80);
  }
  p[at++] = (uint8_t)v;
  return at;
}


// A raycast frame whose body holds the origins field twice (`first`, then `second`: a body
// merged from two), after the envelope's id; *len set. mem_free it.
static uint8_t* twice_frame(ProtobufCBinaryData first, ProtobufCBinaryData second,
                            size_t* len) {
  Sensim__V1__Raycast a = SENSIM__V1__RAYCAST__INIT, b = SENSIM__V1__RAYCAST__INIT;
  a.has_origins_bytes = b.has_origins_bytes = 1;
  a.origins_bytes = first;
  b.origins_bytes = second;
  Sensim__V1__Envelope env = SENSIM__V1__ENVELOPE__INIT;
  env.has_id = 1;
  env.id = 7;
  size_t na = sensim__v1__raycast__get_packed_size(&a);
  size_t nb = sensim__v1__raycast__get_packed_size(&b);
  size_t ne = sensim__v1__envelope__get_packed_size(&env);
  uint8_t* f = mem_alloc(ne + 16 + na + nb);
  if (!f) {
    return NULL;
  }
  size_t n = sensim__v1__envelope__pack(&env, f);
  const ProtobufCFieldDescriptor* body =
      protobuf_c_message_descriptor_get_field_by_name(&sensim__v1__envelope__descriptor,
                                                      "raycast");
  n = put_varint(f, n, (uint64_t)body->id << 3 | 2);  // the body's tag, then its length
  n = put_varint(f, n, na + nb);
  n += sensim__v1__raycast__pack(&a, f + n);
  n += sensim__v1__raycast__pack(&b, f + n);
  *len = n;
  return f;
}


TEST(wire_frame_decode_of_a_field_repeated_in_the_body_copies_the_last) {
  int64_t live = mem_live_count();
  static uint8_t big[8192], other[8192];
  memset(big, 1, sizeof(big));
  memset(other, 2, sizeof(other));

  // large twice (the first would be borrowed), and small then large (neither is): the last
  // one counts, copied; the frame is not asked for
  const ProtobufCBinaryData firsts[2] = {{sizeof(big), big}, {16, big}};
  for (int i = 0; i < 2; i++) {
    size_t len;
    uint8_t* f = twice_frame(firsts[i], (ProtobufCBinaryData){sizeof(other), other}, &len);
    ASSERT_TRUE(f != NULL);
    owner_t owner = {.block = f};
    wire_request_t* r;
    ASSERT_OK(wire_decode_frame(f, len, owner_take, &owner, &r, NULL));
    ASSERT_EQ(owner.asked, 0);
    const Sensim__V1__Raycast* b = wire_envelope(r)->raycast;
    ASSERT_EQ(wire_id(r), 7);
    ASSERT_EQ(b->origins_bytes.len, sizeof(other));
    ASSERT_OK(memcmp(b->origins_bytes.data, other, sizeof(other)));
    wire_free(r);
    mem_free(f);
  }
  ASSERT_EQ(mem_live_count(), live);
  return 0;
}


TEST(wire_frame_decode_whose_frame_is_not_given_copies_as_always) {
  int64_t live = mem_live_count();
  static uint8_t big[8192];
  memset(big, 3, sizeof(big));
  const uint8_t* payload;
  size_t len;
  uint8_t* block = origins_frame(big, sizeof(big), &payload, &len);
  ASSERT_TRUE(block != NULL);

  // asked for (a field to borrow), refused: the request copies, the block stays the owner's
  owner_t owner = {.block = block, .keep = 1};
  wire_request_t* r;
  ASSERT_OK(wire_decode_frame(payload, len, owner_take, &owner, &r, NULL));
  ASSERT_EQ(owner.asked, 1);
  const Sensim__V1__Raycast* b = wire_envelope(r)->raycast;
  ASSERT_EQ(b->origins_bytes.len, sizeof(big));
  ASSERT_OK(memcmp(b->origins_bytes.data, big, sizeof(big)));
  ASSERT_TRUE(!points_into(&b->origins_bytes, block, 4 + len));
  ASSERT_EQ(wire_id(r), 7);
  wire_free(r);
  mem_free(block);
  ASSERT_EQ(mem_live_count(), live);
  return 0;
}


// A tick's UpdateState of n bodies and joints (packed arrays, or the bytes forms) decoded and
// freed: the values arrive, and every part goes with wire_free, whether it fits in the
// request's own arena (a body or two) or not (a state of many bodies: its parts are freed
// from the request's list of them, without protobuf-c's walk).
static int tick_state_round_trip(uint32_t n, int bytes_form) {
  static uint32_t ids[1000];
  static double poses[7 * 1000], vels[6 * 1000], jpos[1000];
  for (uint32_t i = 0; i < n; i++) {
    ids[i] = 3 * i + 1;
    jpos[i] = 0.5 * i;
    for (int k = 0; k < 7; k++) {
      poses[7 * i + k] = i + 0.125 * k;
    }
    for (int k = 0; k < 6; k++) {
      vels[6 * i + k] = -(i + 0.25 * k);
    }
  }
  Sensim__V1__UpdateState u = SENSIM__V1__UPDATE_STATE__INIT;
  u.has_time = 1;
  u.time = 2.5;
  if (bytes_form) {
    u.has_body_ids_bytes = u.has_body_poses_bytes = u.has_body_velocities_bytes = 1;
    u.has_joint_ids_bytes = u.has_joint_positions_bytes = 1;
    u.body_ids_bytes = (ProtobufCBinaryData){4 * (size_t)n, (uint8_t*)ids};
    u.body_poses_bytes = (ProtobufCBinaryData){56 * (size_t)n, (uint8_t*)poses};
    u.body_velocities_bytes = (ProtobufCBinaryData){48 * (size_t)n, (uint8_t*)vels};
    u.joint_ids_bytes = (ProtobufCBinaryData){4 * (size_t)n, (uint8_t*)ids};
    u.joint_positions_bytes = (ProtobufCBinaryData){8 * (size_t)n, (uint8_t*)jpos};
  } else {
    u.n_body_ids = u.n_joint_ids = u.n_joint_positions = n;
    u.n_body_poses = 7 * (size_t)n;
    u.n_body_velocities = 6 * (size_t)n;
    u.body_ids = u.joint_ids = ids;
    u.body_poses = poses;
    u.body_velocities = vels;
    u.joint_positions = jpos;
  }
  Sensim__V1__Envelope env = SENSIM__V1__ENVELOPE__INIT;  // no id: not what is checked
  env.body_case = SENSIM__V1__ENVELOPE__BODY_UPDATE_STATE;
  env.update_state = &u;
  int64_t live = mem_live_count();
  wire_request_t* r;
  ASSERT_OK(pack_decode(&env, &r, NULL));
  const Sensim__V1__UpdateState* got = wire_envelope(r)->update_state;
  ASSERT_TRUE(got != NULL);
  ASSERT_DEQ(got->time, 2.5);
  if (bytes_form) {
    ASSERT_EQ(got->body_poses_bytes.len, 56 * (size_t)n);
    ASSERT_TRUE(n == 0 || memcmp(got->body_poses_bytes.data, poses, 56 * (size_t)n) == 0);
    ASSERT_TRUE(n == 0 || memcmp(got->joint_positions_bytes.data, jpos, 8 * (size_t)n) == 0);
  } else {
    ASSERT_EQ(got->n_body_velocities, 6 * (size_t)n);
    ASSERT_TRUE(n == 0 || memcmp(got->body_velocities, vels, 48 * (size_t)n) == 0);
    ASSERT_TRUE(n == 0 || memcmp(got->joint_ids, ids, 4 * (size_t)n) == 0);
  }
  wire_free(r);
  ASSERT_EQ(mem_live_count(), live);
  return 0;
}


TEST(wire_free_releases_every_part_of_a_decoded_tick_small_or_large) {
  static const uint32_t counts[] = {0, 1, 2, 3, 10, 100, 1000};
  for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
    ASSERT_OK(tick_state_round_trip(counts[i], 0));
    ASSERT_OK(tick_state_round_trip(counts[i], 1));
  }
  return 0;
}
