// SPDX-License-Identifier: MIT
// test_wire_tick.c: the hand decoder of a tick's requests (wire_tick.c) against protobuf-c over
// generated UpdateState and Step envelopes and their mutations (bytes changed, cut, inserted,
// fields repeated, unknown fields, unpacked and overlong forms). Whatever it decodes,
// protobuf-c decodes to the same message (both packed again by protobuf-c: the same bytes);
// whatever it leaves, it leaves nothing allocated; and every plain request generated is its.
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "net/wire_tick.h"

static uint64_t g_state = 0x2545F4914F6CDD1Dull;

static uint64_t next(void) {
  g_state ^= g_state << 13;
  g_state ^= g_state >> 7;
  g_state ^= g_state << 17;
  return g_state;
}

static uint32_t below(uint32_t n) {
  return (uint32_t)(next() % n);
}

// Values of every varint length, and doubles of any bits (NaNs too: compared as bytes).
static uint32_t any_u32(void) {
  return (uint32_t)(next() >> (32 + below(32)));
}

static double any_f64(void) {
  uint64_t b = next();
  double d;
  memcpy(&d, &b, sizeof d);
  return below(4) ? (double)(int32_t)next() / 1024.0 : d;
}

// A counting allocator: the parts the decoder holds.
static long g_live;

static void* count_alloc(void* data, size_t size) {
  (void)data;
  g_live++;
  return malloc(size ? size : 1);
}

static void count_free(void* data, void* p) {
  (void)data;
  g_live -= p != NULL;
  free(p);
}

static ProtobufCAllocator g_alloc = {count_alloc, count_free, NULL};


// A random plain tick request packed by protobuf-c into buf (returns its length).
static size_t generate(uint8_t* buf, size_t cap) {
  Sensim__V1__Envelope env = SENSIM__V1__ENVELOPE__INIT;
  Sensim__V1__UpdateState us = SENSIM__V1__UPDATE_STATE__INIT;
  Sensim__V1__Step st = SENSIM__V1__STEP__INIT;
  uint32_t u[5][8];
  double f[6][8 * 7];
  uint8_t raw[5][64];
  env.has_id = below(8) != 0;
  env.id = next() >> (1 + below(63));
  env.has_sequence = below(4) == 0;
  env.sequence = next() >> (1 + below(63));
  if (below(2)) {
    env.body_case = SENSIM__V1__ENVELOPE__BODY_UPDATE_STATE;
    env.update_state = &us;
    us.has_time = below(8) != 0;
    us.time = any_f64();
    size_t* nu[2] = {&us.n_body_ids, &us.n_joint_ids};
    uint32_t** pu[2] = {&us.body_ids, &us.joint_ids};
    for (int i = 0; i < 2; i++) {
      *nu[i] = below(3) ? below(9) : 0;
      for (size_t j = 0; j < *nu[i]; j++) {
        u[i][j] = any_u32();
      }
      *pu[i] = u[i];
    }
    size_t* nf[3] = {&us.n_body_poses, &us.n_body_velocities, &us.n_joint_positions};
    double** pf[3] = {&us.body_poses, &us.body_velocities, &us.joint_positions};
    for (int i = 0; i < 3; i++) {
      *nf[i] = below(3) ? below(8 * 7 + 1) : 0;
      for (size_t j = 0; j < *nf[i]; j++) {
        f[i][j] = any_f64();
      }
      *pf[i] = f[i];
    }
    protobuf_c_boolean* has[5] = {&us.has_body_ids_bytes, &us.has_body_poses_bytes,
                                  &us.has_body_velocities_bytes, &us.has_joint_ids_bytes,
                                  &us.has_joint_positions_bytes};
    ProtobufCBinaryData* b[5] = {&us.body_ids_bytes, &us.body_poses_bytes,
                                 &us.body_velocities_bytes, &us.joint_ids_bytes,
                                 &us.joint_positions_bytes};
    for (int i = 0; i < 5; i++) {
      *has[i] = below(3) == 0;
      b[i]->len = 1 + below(64);
      for (size_t j = 0; j < b[i]->len; j++) {
        raw[i][j] = (uint8_t)next();
      }
      b[i]->data = raw[i];
    }
  } else {
    env.body_case = SENSIM__V1__ENVELOPE__BODY_STEP;
    env.step = &st;
    st.has_time = below(8) != 0;
    st.time = any_f64();
    st.has_outputs = below(2);
    st.outputs = (Sensim__V1__StepOutputs)below(3);
    st.n_output_sensors = below(2) ? below(9) : 0;
    for (size_t j = 0; j < st.n_output_sensors; j++) {
      u[0][j] = any_u32();
    }
    st.output_sensors = u[0];
  }
  size_t n = sensim__v1__envelope__get_packed_size(&env);
  if (n > cap) {
    abort();
  }
  return sensim__v1__envelope__pack(&env, buf);
}


// What protobuf-c packs of a decoded message, in a malloc'ed buffer.
static uint8_t* repack(const Sensim__V1__Envelope* env, size_t* n) {
  *n = sensim__v1__envelope__get_packed_size(env);
  uint8_t* b = malloc(*n + 1);
  sensim__v1__envelope__pack(env, b);
  return b;
}


// One buffer through both decoders. 1 when the hand decoder took it, 0 when it left it to
// protobuf-c, -1 on a disagreement (reported).
static int compare(const uint8_t* p, size_t n, const char* what, unsigned round) {
  Sensim__V1__Envelope* mine = NULL;
  g_live = 0;
  int took = wire_tick_decode(p, n, &g_alloc, &mine);
  Sensim__V1__Envelope* theirs = sensim__v1__envelope__unpack(NULL, n, p);
  int bad = 0;
  if (!took) {
    bad = g_live != 0;  // nothing left allocated
  } else if (!theirs) {
    bad = 1;            // taken, but protobuf-c refuses it
  } else {
    size_t na, nb;
    uint8_t* a = repack(mine, &na);
    uint8_t* b = repack(theirs, &nb);
    bad = na != nb || memcmp(a, b, na) != 0;
    free(a);
    free(b);
  }
  if (took) {
    sensim__v1__envelope__free_unpacked(mine, &g_alloc);
    bad |= g_live != 0;
  }
  if (theirs) {
    sensim__v1__envelope__free_unpacked(theirs, NULL);
  }
  if (bad) {
    fprintf(stderr, "%s (round %u): hand decoder %s, protobuf-c %s, %ld parts left\n", what,
            round, took ? "took it" : "left it", theirs ? "decodes it" : "refuses it", g_live);
    return -1;
  }
  return took;
}


#define BUF 4096

// A field appended or put in front: a repeat of one of the message's own (last one wins,
// concatenated or merged by protobuf-c), an unknown one, or one in another wire type.
static size_t add_field(uint8_t* buf, size_t n) {
  static const uint8_t extra[][6] = {
      {2, 0x08, 0x05},                    // id again
      {2, 0x18, 0x01},                    // sequence again
      {3, 0x10, 0x80, 0x01},              // status as a varint
      {3, 0x98, 0x05, 0x07},              // field 419: unknown
      {4, 0xc2, 0x02, 0x01, 0x00},        // update_state again: a one-byte body of a bad tag
      {3, 0xca, 0x02, 0x00},              // step again, empty
      {4, 0x08, 0x80, 0x80, 0x00},        // id overlong
      {3, 0xc0, 0x02, 0x00},              // update_state as a varint
  };
  const uint8_t* e = extra[below(sizeof extra / sizeof extra[0])];
  if (n + e[0] > BUF) {
    return n;
  }
  if (below(2)) {
    memcpy(buf + n, e + 1, e[0]);
  } else {
    memmove(buf + e[0], buf, n);
    memcpy(buf, e + 1, e[0]);
  }
  return n + e[0];
}


static size_t mutate(uint8_t* buf, size_t n) {
  switch (below(5)) {
    case 0:
      if (n) {
        buf[below((uint32_t)n)] ^= (uint8_t)(1u << below(8));
      }
      return n;
    case 1:
      if (n) {
        buf[below((uint32_t)n)] = (uint8_t)next();
      }
      return n;
    case 2:
      return n ? below((uint32_t)n) : 0;   // cut
    case 3: {
      if (n + 1 > BUF) {
        return n;
      }
      size_t at = below((uint32_t)n + 1);
      memmove(buf + at + 1, buf + at, n - at);
      buf[at] = (uint8_t)next();
      return n + 1;
    }
    default:
      return add_field(buf, n);
  }
}


TEST(hand_decoder_agrees_with_protobuf_c) {
  uint8_t buf[BUF];
  unsigned taken = 0, left = 0, mutated_taken = 0;
  for (unsigned round = 0; round < 20000; round++) {
    size_t n = generate(buf, BUF);
    int rc = compare(buf, n, "generated", round);
    ASSERT_EQ(rc, 1);  // every plain request is the hand decoder's
    taken++;
    for (int k = 0; k < 4; k++) {
      for (uint32_t m = 1 + below(3); m > 0; m--) {
        n = mutate(buf, n);
      }
      rc = compare(buf, n, "mutated", round);
      ASSERT_TRUE(rc >= 0);
      mutated_taken += rc == 1;
      left += rc == 0;
    }
  }
  // the mutations reach both sides: some stay plain, many go to protobuf-c
  ASSERT_TRUE(mutated_taken > 1000);
  ASSERT_TRUE(left > 10000);
  return 0;
}


TEST(hand_decoder_leaves_every_unusual_form_to_protobuf_c) {
  // an UpdateState {time 1.5, body_ids [1, 2]} written in forms protobuf-c reads alike: the
  // plain one is taken, the others left (and none of them is decoded differently)
  static const struct {
    const char* what;
    size_t n;
    uint8_t b[40];
    int taken;
  } cases[] = {
      {"plain", 16, {0xc2, 0x02, 13, 0x09, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f, 0x12, 2, 1, 2}, 1},
      {"ids unpacked", 16,
       {0xc2, 0x02, 13, 0x09, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f, 0x10, 1, 0x10, 2}, 0},
      {"ids in two packed runs", 18,
       {0xc2, 0x02, 15, 0x09, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f, 0x12, 1, 1, 0x12, 1, 2}, 0},
      {"an id overlong", 17,
       {0xc2, 0x02, 14, 0x09, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f, 0x12, 3, 0x81, 0x00, 2}, 0},
      {"an id past 32 bits", 20,
       {0xc2, 0x02, 17, 0x09, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f, 0x12, 6, 0x81, 0x80, 0x80, 0x80,
        0x10, 2}, 0},
      {"time twice", 25,
       {0xc2, 0x02, 22, 0x09, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f, 0x12, 2, 1, 2, 0x09, 0, 0, 0, 0,
        0, 0, 0, 0x40}, 0},
      {"an unknown field", 18,
       {0xc2, 0x02, 15, 0x09, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f, 0x12, 2, 1, 2, 0x60, 7}, 0},
      {"empty ids", 14, {0xc2, 0x02, 11, 0x09, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f, 0x12, 0}, 0},
      {"body length overlong", 17,
       {0xc2, 0x02, 0x8d, 0x00, 0x09, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f, 0x12, 2, 1, 2}, 0},
      {"body cut", 15, {0xc2, 0x02, 13, 0x09, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f, 0x12, 2, 1}, 0},
  };
  for (unsigned i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int rc = compare(cases[i].b, cases[i].n, cases[i].what, i);
    if (rc != cases[i].taken) {
      fprintf(stderr, "%s: %d\n", cases[i].what, rc);
    }
    ASSERT_EQ(rc, cases[i].taken);
  }
  return 0;
}
