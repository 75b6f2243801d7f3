// SPDX-License-Identifier: MIT
// test_client_raycast.c: raycasts through the C client against the real sensimd: analytic
// hits, ray times on a moving body, exclusions and ranges, large raycasts in parts equal to
// one request bit for bit, parts that saw different worlds sent again as one, replies that
// arrive during other calls, every refusal, and (to a scripted peer) the arrays of a request
// placed at a multiple of 8 in their frame.
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support.h"


// Rays from the origin in n directions spread over the sphere (a golden spiral).
static void spiral(uint32_t n, double* org, double* dir) {
  for (uint32_t i = 0; i < n; i++) {
    double z = 1.0 - 2.0 * (i + 0.5) / n, r = sqrt(1.0 - z * z), a = 2.399963229728653 * i;
    org[3 * i] = org[3 * i + 1] = org[3 * i + 2] = 0.0;
    dir[3 * i] = r * cos(a);
    dir[3 * i + 1] = r * sin(a);
    dir[3 * i + 2] = z;
  }
}


TEST(raycast_hits_are_the_analytic_ones) {
  td_daemon_t d;
  ASSERT_OK(td_start(&d, NULL));
  sensim_client_t* cli = td_connect(&d, "hits");
  ASSERT_TRUE(cli != NULL);
  ASSERT_OK_ST(cli, td_sphere(cli, 1, 2.0, 10, 0, 0, 21));

  // rays at the sphere from the origin with offsets b: distance 10 - sqrt(4 - b^2), normal
  // (-sqrt(4 - b^2), b, 0) / 2; the last ray misses
  enum { N = 5 };
  double b[N] = {0, 0.5, 1.0, 1.5, 2.5};
  double org[N][3], dir[N][3];
  for (int i = 0; i < N; i++) {
    org[i][0] = 0;
    org[i][1] = b[i];
    org[i][2] = 0;
    dir[i][0] = 2;  // normalised by the daemon
    dir[i][1] = dir[i][2] = 0;
  }
  sensim_hit_t hits[N];
  memset(hits, 0xff, sizeof(hits));
  sensim_raycast_t r;
  sensim_raycast_init(&r);
  r.nrays = N;
  r.origins = &org[0][0];
  r.directions = &dir[0][0];
  uint64_t serial = 0;
  ASSERT_OK_ST(cli, sensim_raycast(cli, &r, hits, &serial));
  ASSERT_TRUE(serial > 0);
  for (int i = 0; i < N - 1; i++) {
    double c = sqrt(4.0 - b[i] * b[i]);
    ASSERT_NEAR(hits[i].distance, 10.0 - c, 1e-6);
    ASSERT_NEAR(hits[i].normal[0], -c / 2, 1e-6);
    ASSERT_NEAR(hits[i].normal[1], b[i] / 2, 1e-6);
    ASSERT_EQ(hits[i].object_id, 1);
    ASSERT_EQ(hits[i].label, 21);
    ASSERT_EQ(hits[i].reserved[0], 0);
    ASSERT_EQ(hits[i].reserved[1], 0);
  }
  ASSERT_TRUE(isinf(hits[N - 1].distance) && hits[N - 1].distance > 0);
  ASSERT_EQ(hits[N - 1].object_id, 0);
  ASSERT_DEQ(hits[N - 1].normal[0], 0.0);

  // max_range cuts the hits beyond it; no rays is a valid raycast
  r.max_range = 8.5;
  ASSERT_OK_ST(cli, sensim_raycast(cli, &r, hits, NULL));
  ASSERT_NEAR(hits[0].distance, 8.0, 1e-6);
  ASSERT_TRUE(isinf(hits[3].distance));  // 8.68 m
  r.nrays = 0;
  ASSERT_OK_ST(cli, sensim_raycast(cli, &r, NULL, NULL));
  sensim_client_close(cli);
  ASSERT_EQ(td_stop(&d), 0);
  return 0;
}


TEST(raycast_times_and_exclusions) {
  td_daemon_t d;
  ASSERT_OK(td_start(&d, NULL));
  sensim_client_t* cli = td_connect(&d, "times");
  ASSERT_TRUE(cli != NULL);
  sensim_primitive_t p;
  sensim_primitive_init(&p);
  p.id = 1;
  p.shape = SENSIM_SHAPE_SPHERE;
  p.radius = 1.0;
  ASSERT_OK_ST(cli, sensim_create_primitive(cli, &p));
  sensim_body_t b;
  sensim_body_init(&b);
  b.id = 1;
  ASSERT_OK_ST(cli, sensim_create_body(cli, &b));
  sensim_object_t o;
  sensim_object_init(&o);
  o.id = 1;
  o.geometry_id = 1;
  o.body_id = 1;
  ASSERT_OK_ST(cli, sensim_create_object(cli, &o));

  // the body goes from x = 10 at t = 0 to x = 20 at t = 1; rays at 0, 0.5 and 1 s
  uint32_t id[1] = {1};
  double pose[7] = {10, 0, 0, 0, 0, 0, 1};
  sensim_state_t state;
  sensim_state_init(&state);
  state.nbodies = 1;
  state.body_ids = id;
  state.body_poses = pose;
  ASSERT_OK_ST(cli, sensim_update_state(cli, &state));
  sensim_step_t step;
  sensim_step_init(&step);
  const sensim_step_result_t* res;
  ASSERT_OK_ST(cli, sensim_step(cli, &step, &res));
  pose[0] = 20;
  state.time = 1.0;
  ASSERT_OK_ST(cli, sensim_update_state(cli, &state));
  double org[9] = {0}, dir[9] = {1, 0, 0, 1, 0, 0, 1, 0, 0}, times[3] = {0, 0.5, 1.0};
  sensim_hit_t hits[3];
  sensim_raycast_t r;
  sensim_raycast_init(&r);
  r.nrays = 3;
  r.origins = org;
  r.directions = dir;
  r.times = times;
  r.ntimes = 3;
  ASSERT_OK_ST(cli, sensim_raycast(cli, &r, hits, NULL));
  ASSERT_NEAR(hits[0].distance, 9.0, 1e-6);
  ASSERT_NEAR(hits[1].distance, 14.0, 1e-6);
  ASSERT_NEAR(hits[2].distance, 19.0, 1e-6);
  r.ntimes = 1;  // one time for every ray
  r.times = &times[1];
  ASSERT_OK_ST(cli, sensim_raycast(cli, &r, hits, NULL));
  ASSERT_NEAR(hits[2].distance, 14.0, 1e-6);
  times[0] = 5.0;
  r.times = times;
  ASSERT_STATUS(cli, sensim_raycast(cli, &r, hits, NULL), SENSIM_INVALID_ARGUMENT, "times");

  // through the body's objects
  r.times = NULL;
  r.ntimes = 0;
  r.exclude_bodies = id;
  r.nexclude_bodies = 1;
  ASSERT_OK_ST(cli, sensim_raycast(cli, &r, hits, NULL));
  ASSERT_TRUE(isinf(hits[0].distance));
  sensim_client_close(cli);
  ASSERT_EQ(td_stop(&d), 0);
  return 0;
}


TEST(raycast_in_parts_equals_one_request_bit_for_bit) {
  td_daemon_t d;
  ASSERT_OK(td_start(&d, NULL));
  sensim_client_t* cli = td_connect(&d, "parts");
  ASSERT_TRUE(cli != NULL);
  ASSERT_OK_ST(cli, td_sphere(cli, 1, 30.0, 0, 0, 0, 1));
  ASSERT_OK_ST(cli, td_box(cli, 2, 2, 3, 4, 8, -5, 2, 2));
  ASSERT_OK_ST(cli, td_sphere(cli, 3, 1.5, -6, 6, -3, 3));

  // 200,003 rays: seven parts in flight four at a time, against one request
  uint32_t n = 200003;
  double* org = malloc(3 * sizeof(double) * n);
  double* dir = malloc(3 * sizeof(double) * n);
  sensim_hit_t* parts = malloc(sizeof(sensim_hit_t) * n);
  sensim_hit_t* whole = malloc(sizeof(sensim_hit_t) * n);
  ASSERT_TRUE(org && dir && parts && whole);
  spiral(n, org, dir);
  memset(parts, 0xab, sizeof(sensim_hit_t) * n);
  sensim_raycast_t r;
  sensim_raycast_init(&r);
  r.nrays = n;
  r.origins = org;
  r.directions = dir;
  uint64_t s1 = 0, s2 = 0, id;
  ASSERT_OK_ST(cli, sensim_raycast(cli, &r, parts, &s1));
  ASSERT_OK_ST(cli, sensim_raycast_send(cli, &r, whole, &id));
  ASSERT_OK_ST(cli, sensim_raycast_wait(cli, id, -1, &s2));
  ASSERT_EQ(s1, s2);
  ASSERT_MEM_EQ(parts, whole, sizeof(sensim_hit_t) * n);
  uint32_t labels[4] = {0};
  for (uint32_t i = 0; i < n; i++) {
    labels[parts[i].label < 4 ? parts[i].label : 0]++;
  }
  ASSERT_EQ(labels[0], 0);  // the big sphere around everything: no miss
  ASSERT_TRUE(labels[2] > 100 && labels[3] > 100);
  free(org);
  free(dir);
  free(parts);
  free(whole);
  sensim_client_close(cli);
  ASSERT_EQ(td_stop(&d), 0);
  return 0;
}


TEST(raycast_parts_that_saw_different_worlds_are_sent_again_as_one) {
  td_daemon_t d;
  ASSERT_OK(td_start(&d, NULL));
  sensim_client_t* cli = td_connect(&d, "worlds");
  ASSERT_TRUE(cli != NULL);
  sensim_primitive_t p;
  sensim_primitive_init(&p);
  p.id = 1;
  p.shape = SENSIM_SHAPE_PLANE;
  ASSERT_OK_ST(cli, sensim_create_primitive(cli, &p));
  sensim_body_t b;
  sensim_body_init(&b);
  b.id = 1;
  ASSERT_OK_ST(cli, sensim_create_body(cli, &b));
  sensim_object_t o;
  sensim_object_init(&o);
  o.id = 1;
  o.geometry_id = 1;
  o.body_id = 1;
  ASSERT_OK_ST(cli, sensim_create_object(cli, &o));

  // another process moves the plane (z = 1 or z = 2, in turns) while this one traces 300k
  // rays straight up: every hit must come from one world, whatever the interleaving
  pid_t mover = fork();
  ASSERT_TRUE(mover >= 0);
  if (mover == 0) {
    sensim_client_t* m = td_connect(&d, "worlds");
    uint32_t id[1] = {1};
    double pose[7] = {0, 0, 1, 0, 0, 0, 1};
    sensim_state_t state;
    sensim_state_init(&state);
    state.nbodies = 1;
    state.body_ids = id;
    state.body_poses = pose;
    for (int k = 1; m && k < 100000; k++) {
      state.time = k;
      pose[2] = 1.0 + (k & 1);
      if (sensim_update_state(m, &state) != SENSIM_OK) {
        break;
      }
    }
    sensim_client_close(m);
    _exit(0);
  }
  uint32_t n = 300000;
  double* org = calloc(3 * (size_t)n, sizeof(double));
  double* dir = calloc(3 * (size_t)n, sizeof(double));
  sensim_hit_t* hits = malloc(sizeof(sensim_hit_t) * n);
  ASSERT_TRUE(org && dir && hits);
  for (uint32_t i = 0; i < n; i++) {
    org[3 * i] = (double)(i % 1000);
    org[3 * i + 1] = (double)(i / 1000);
    dir[3 * i + 2] = 1.0;
  }
  sensim_raycast_t r;
  sensim_raycast_init(&r);
  r.nrays = n;
  r.origins = org;
  r.directions = dir;
  for (int round = 0; round < 3; round++) {
    ASSERT_OK_ST(cli, sensim_raycast(cli, &r, hits, NULL));
    for (uint32_t i = 1; i < n; i++) {
      if (hits[i].distance != hits[0].distance) {
        CHECK_FAIL("round %d: ray %u met the plane at %g m, ray 0 at %g m", round, i,
                   hits[i].distance, hits[0].distance);
      }
    }
  }
  kill(mover, SIGKILL);
  waitpid(mover, NULL, 0);
  free(org);
  free(dir);
  free(hits);
  sensim_client_close(cli);
  ASSERT_EQ(td_stop(&d), 0);
  return 0;
}


TEST(raycast_reply_arriving_during_another_call_fills_the_hits) {
  td_daemon_t d;
  ASSERT_OK(td_start(&d, NULL));
  sensim_client_t* cli = td_connect(&d, "during");
  ASSERT_TRUE(cli != NULL);
  ASSERT_OK_ST(cli, td_sphere(cli, 1, 5.0, 0, 0, 0, 8));
  uint32_t n = 20000;
  double* org = malloc(3 * sizeof(double) * n);
  double* dir = malloc(3 * sizeof(double) * n);
  sensim_hit_t* hits = calloc(n, sizeof(sensim_hit_t));
  ASSERT_TRUE(org && dir && hits);
  spiral(n, org, dir);
  sensim_raycast_t r;
  sensim_raycast_init(&r);
  r.nrays = n;
  r.origins = org;
  r.directions = dir;
  uint64_t id;
  ASSERT_OK_ST(cli, sensim_raycast_send(cli, &r, hits, &id));
  ASSERT_OK_ST(cli, sensim_ping(cli, NULL, 0, NULL));  // replies come in order: the hits first
  ASSERT_NEAR(hits[n - 1].distance, 5.0, 1e-5);
  ASSERT_STATUS(cli, sensim_wait(cli, id, -1), SENSIM_INVALID_ARGUMENT, "sensim_raycast_wait");
  ASSERT_OK_ST(cli, sensim_raycast_wait(cli, id, 0, NULL));
  for (uint32_t i = 0; i < n; i++) {
    ASSERT_NEAR(hits[i].distance, 5.0, 1e-5);
  }

  // a discarded raycast never writes into its buffer again
  memset(hits, 0, sizeof(sensim_hit_t) * n);
  ASSERT_OK_ST(cli, sensim_raycast_send(cli, &r, hits, &id));
  ASSERT_OK_ST(cli, sensim_discard(cli, id));
  ASSERT_OK_ST(cli, sensim_ping(cli, NULL, 0, NULL));
  ASSERT_DEQ(hits[0].distance, 0.0);
  free(org);
  free(dir);
  free(hits);
  sensim_client_close(cli);
  ASSERT_EQ(td_stop(&d), 0);
  return 0;
}


// What the scripted peer found in the raycast requests after its Hello.
typedef struct aligned_check {
  uint32_t requests;                // to read
  const double* org;                // the arrays every request was sent from (rays 0..)
  const double* dir;
  const double* times;
  uint32_t frames, arrays;          // read, and arrays met in them
  uint32_t unaligned, wrong, pads;  // arrays off a multiple of 8, arrays unlike the caller's,
                                    // padding fields
  uint32_t bad_pad;                 // padding fields with a nonzero byte, or frames unparsed
} aligned_check_t;


static int read_varint(const uint8_t* p, size_t n, size_t* at, uint64_t* v) {
  *v = 0;
  for (int shift = 0; *at < n && shift < 64; shift += 7) {
    uint8_t b = p[(*at)++];
    *v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      return 0;
    }
  }
  return -1;
}


// One length-delimited field of a request's body: its number, its bytes and where they start
// in the frame.
typedef void (*field_fn)(void* arg, uint64_t field, const uint8_t* data, uint64_t len,
                         size_t at);


// Call fn for each length-delimited field of the body of a request frame (the Envelope: its
// id, then the body); the other fields skipped. -1 when the frame does not parse.
static int walk_body(const uint8_t* frame, size_t n, field_fn fn, void* arg) {
  size_t at = 0, body = 0;
  uint64_t key, v, body_len = 0;
  while (at < n && body == 0) {
    if (read_varint(frame, n, &at, &key) != 0 || read_varint(frame, n, &at, &v) != 0) {
      return -1;
    }
    if ((key & 7) == 2) {
      body = at;
      body_len = v;
    }
  }
  for (at = body; at < body + body_len;) {
    if (read_varint(frame, n, &at, &key) != 0) {
      return -1;
    }
    if ((key & 7) != 2) {  // max_range (fixed64) or a varint
      at += (key & 7) == 1 ? 8 : 0;
      if ((key & 7) == 0 && read_varint(frame, n, &at, &v) != 0) {
        return -1;
      }
      continue;
    }
    if (read_varint(frame, n, &at, &v) != 0 || v > n - at) {
      return -1;
    }
    fn(arg, key >> 3, frame + at, v, at);
    at += v;
  }
  return 0;
}


// field_fn: where origins_bytes (5), directions_bytes (6) and times_bytes (7) start from the
// frame's first byte (its length prefix), whether they hold the caller's bytes, and that the
// padding (10) is zeros.
static void aligned_field(void* arg, uint64_t field, const uint8_t* data, uint64_t v,
                          size_t at) {
  aligned_check_t* c = arg;
  if (field == 10) {
    c->pads++;
    for (uint64_t i = 0; i < v; i++) {
      c->bad_pad += data[i] != 0;
    }
  } else if (field >= 5 && field <= 7) {
    const double* want = field == 5 ? c->org : field == 6 ? c->dir : c->times;
    c->arrays++;
    c->unaligned += (4 + at) % 8 != 0;  // + the frame's length prefix
    c->wrong += memcmp(data, want, v) != 0;
  }
}


// Walk each Raycast frame's body (aligned_field).
static void check_aligned(int fd, void* arg) {
  aligned_check_t* c = arg;
  if (td_peer_hello(fd) == 0) {
    return;
  }
  static uint8_t frame[4 << 20];
  for (uint32_t k = 0; k < c->requests; k++) {
    long len = td_read_frame(fd, frame, sizeof(frame));
    if (len <= 0) {
      return;
    }
    c->frames++;
    if (walk_body(frame, (size_t)len, aligned_field, c) != 0) {
      c->bad_pad++;
      return;
    }
  }
}


TEST(raycast_arrays_start_at_a_multiple_of_8_in_their_frame) {
  // ray counts whose arrays' lengths take 1, 2 or 3 bytes as varints (the last two at its
  // boundary: 5461 rays are 131,064 bytes, 5462 are 131,088), per-ray times, one time, none,
  // a max_range or not, and ids from 2 past 128: every offset before the arrays varies
  static const uint32_t counts[] = {1, 2, 5, 6, 170, 171, 5461, 5462, 20000};
  const uint32_t ncounts = sizeof(counts) / sizeof(counts[0]), requests = 140, most = 20000;
  double* rays = malloc(7 * sizeof(double) * most);  // origins, directions, times
  sensim_hit_t* hits = malloc(sizeof(sensim_hit_t) * most);
  ASSERT_TRUE(rays && hits);
  double *org = rays, *dir = rays + 3 * most, *times = rays + 6 * most;
  spiral(most, org, dir);
  for (uint32_t i = 0; i < most; i++) {
    org[3 * i] = 0.25 * i;
    times[i] = 1e-6 * i;
  }
  aligned_check_t c = {.requests = requests, .org = org, .dir = dir, .times = times};
  td_peer_t* p = td_peer_start(check_aligned, &c);
  ASSERT_TRUE(p != NULL);
  sensim_options_t o;
  sensim_options_init(&o);
  o.timeout_ms = 10000;
  sensim_client_t* cli = NULL;
  ASSERT_EQ(sensim_client_connect("127.0.0.1", (uint16_t)td_peer_port(p), &o, &cli), SENSIM_OK);
  uint32_t expect_arrays = 0;
  uint64_t id = 0;
  for (uint32_t k = 0; k < requests; k++) {
    sensim_raycast_t r;
    sensim_raycast_init(&r);
    r.nrays = counts[k % ncounts];
    r.origins = org;
    r.directions = dir;
    r.times = times;
    r.ntimes = k % 3 == 0 ? r.nrays : k % 3 == 1 ? 1 : 0;
    r.max_range = k % 2 ? 50.0 : 0.0;
    ASSERT_OK_ST(cli, sensim_raycast_send(cli, &r, hits, &id));
    expect_arrays += r.ntimes ? 3 : 2;
  }
  ASSERT_TRUE(id > 128);
  td_peer_stop(p);
  sensim_client_close(cli);
  ASSERT_EQ(c.frames, requests);
  ASSERT_EQ(c.arrays, expect_arrays);
  ASSERT_EQ(c.wrong, 0);
  ASSERT_EQ(c.unaligned, 0);
  ASSERT_EQ(c.bad_pad, 0);
  ASSERT_TRUE(c.pads > 0);
  free(rays);
  free(hits);
  return 0;
}


TEST(raycast_refusals_name_the_argument_or_field) {
  td_daemon_t d;
  ASSERT_OK(td_start(&d, (const char* const[]){"--max-frame-bytes", "1048576", NULL}));
  sensim_client_t* cli = td_connect(&d, "raycast_refusals");
  ASSERT_TRUE(cli != NULL);
  double org[6] = {0}, dir[6] = {1, 0, 0, 0, 0, 0};
  sensim_hit_t hits[2];
  sensim_raycast_t r;
  sensim_raycast_init(&r);
  r.nrays = 2;
  ASSERT_STATUS(cli, sensim_raycast(cli, NULL, hits, NULL), SENSIM_INVALID_ARGUMENT,
                "rays: NULL");
  ASSERT_STATUS(cli, sensim_raycast(cli, &r, hits, NULL), SENSIM_INVALID_ARGUMENT,
                "rays.origins");
  r.origins = org;
  ASSERT_STATUS(cli, sensim_raycast(cli, &r, hits, NULL), SENSIM_INVALID_ARGUMENT,
                "rays.directions");
  r.directions = dir;
  ASSERT_STATUS(cli, sensim_raycast(cli, &r, NULL, NULL), SENSIM_INVALID_ARGUMENT, "hits");
  r.ntimes = 1;
  ASSERT_STATUS(cli, sensim_raycast(cli, &r, hits, NULL), SENSIM_INVALID_ARGUMENT, "rays.times");
  double t[3] = {0, 0, 0};
  r.times = t;
  r.ntimes = 3;
  ASSERT_STATUS(cli, sensim_raycast(cli, &r, hits, NULL), SENSIM_INVALID_ARGUMENT, "rays.ntimes");
  r.times = NULL;
  r.ntimes = 0;
  r.nexclude_bodies = 1;
  ASSERT_STATUS(cli, sensim_raycast(cli, &r, hits, NULL), SENSIM_INVALID_ARGUMENT,
                "rays.exclude_bodies");
  r.nexclude_bodies = 0;
  ASSERT_STATUS(cli, sensim_raycast(cli, &r, hits, NULL), SENSIM_INVALID_ARGUMENT,
                "directions");  // the second direction is zero: the daemon names it
  dir[4] = 1;
  ASSERT_OK_ST(cli, sensim_raycast(cli, &r, hits, NULL));

  // 30,000 rays: 1.44 MB of hits cannot come back in frames of 1 MiB
  uint32_t n = 30000;
  double* many = calloc(3 * (size_t)n, sizeof(double));
  sensim_hit_t* mh = malloc(sizeof(sensim_hit_t) * n);
  ASSERT_TRUE(many && mh);
  r.nrays = n;
  r.origins = r.directions = many;
  ASSERT_STATUS(cli, sensim_raycast(cli, &r, mh, NULL), SENSIM_RESOURCE_EXHAUSTED,
                "max_frame_bytes");
  free(many);
  free(mh);
  ASSERT_OK_ST(cli, sensim_ping(cli, NULL, 0, NULL));  // the connection goes on
  // an exclusion count past the daemon's 1024 is refused before the ids are read (one here)
  static const uint32_t one_body = 1;
  r.nrays = 1;
  r.origins = r.directions = dir;
  r.exclude_bodies = &one_body;
  r.nexclude_bodies = UINT32_MAX;
  ASSERT_STATUS(cli, sensim_raycast(cli, &r, hits, NULL), SENSIM_INVALID_ARGUMENT,
                "rays.nexclude_bodies = 4294967295: at most 1024");
  r.exclude_bodies = NULL;
  r.nexclude_bodies = 0;
  ASSERT_EQ(sensim_raycast(NULL, &r, hits, NULL), SENSIM_INVALID_ARGUMENT);
  ASSERT_EQ(sensim_raycast_send(NULL, &r, hits, NULL), SENSIM_INVALID_ARGUMENT);
  ASSERT_EQ(sensim_raycast_wait(NULL, 1, 0, NULL), SENSIM_INVALID_ARGUMENT);
  sensim_client_close(cli);
  ASSERT_EQ(td_stop(&d), 0);
  return 0;
}


TEST(raycast_one_origin_equals_the_origin_per_ray_bit_for_bit) {
  td_daemon_t d;
  ASSERT_OK(td_start(&d, NULL));
  sensim_client_t* cli = td_connect(&d, "one_origin");
  ASSERT_TRUE(cli != NULL);
  ASSERT_TRUE((sensim_client_session(cli)->features & SENSIM_FEATURE_RAYCAST_ORIGIN) != 0);
  ASSERT_OK_ST(cli, td_sphere(cli, 1, 30.0, 0, 0, 0, 1));
  ASSERT_OK_ST(cli, td_box(cli, 2, 2, 3, 4, 8, -5, 2, 2));
  ASSERT_OK_ST(cli, td_sphere(cli, 3, 1.5, -6, 6, -3, 3));

  // 50,001 rays (in parts) from one point off the world's origin: the origin sent once
  // (found equal, or given), and once per ray (as to a daemon without Raycast.origin, given
  // or written out by the client) give the same hits, bit for bit
  uint32_t n = 50001;
  const double at[3] = {1.25, -0.75, 0.5};
  double* org = malloc(3 * sizeof(double) * n);
  double* dir = malloc(3 * sizeof(double) * n);
  sensim_hit_t* hits[4];
  for (int k = 0; k < 4; k++) {
    hits[k] = malloc(sizeof(sensim_hit_t) * n);
    ASSERT_TRUE(hits[k] != NULL);
    memset(hits[k], 0xab, sizeof(sensim_hit_t) * n);
  }
  ASSERT_TRUE(org && dir);
  spiral(n, org, dir);
  for (uint32_t i = 0; i < n; i++) {
    memcpy(org + 3 * i, at, sizeof(at));
  }
  sensim_raycast_t r;
  sensim_raycast_init(&r);
  r.nrays = n;
  r.origins = org;
  r.directions = dir;
  uint64_t serial[4];
  ASSERT_OK_ST(cli, sensim_raycast(cli, &r, hits[0], &serial[0]));
  r.origins = NULL;
  r.origin = at;
  ASSERT_OK_ST(cli, sensim_raycast(cli, &r, hits[1], &serial[1]));

  // the session as a daemon older than Raycast.origin leaves it
  sensim_session_t* s = (sensim_session_t*)sensim_client_session(cli);
  s->features = 0;
  ASSERT_OK_ST(cli, sensim_raycast(cli, &r, hits[2], &serial[2]));
  r.origin = NULL;
  r.origins = org;
  ASSERT_OK_ST(cli, sensim_raycast(cli, &r, hits[3], &serial[3]));
  for (int k = 1; k < 4; k++) {
    ASSERT_EQ(serial[k], serial[0]);
    ASSERT_MEM_EQ(hits[k], hits[0], sizeof(sensim_hit_t) * n);
  }
  uint32_t labels[4] = {0};
  for (uint32_t i = 0; i < n; i++) {
    labels[hits[0][i].label < 4 ? hits[0][i].label : 0]++;
  }
  ASSERT_EQ(labels[0], 0);  // the big sphere around everything: no miss
  ASSERT_TRUE(labels[2] > 100 && labels[3] > 100);

  // truth: a ray straight up from `at` leaves the big sphere (radius 30 about 0) where
  // x^2 + y^2 + z^2 = 900
  r.nrays = 1;
  r.origins = NULL;
  r.origin = at;
  r.directions = (const double[3]){0, 0, 1};
  s->features = SENSIM_FEATURE_RAYCAST_ORIGIN;
  ASSERT_OK_ST(cli, sensim_raycast(cli, &r, hits[0], NULL));
  double up = sqrt(900.0 - at[0] * at[0] - at[1] * at[1]) - at[2];
  ASSERT_NEAR(hits[0][0].distance, up, 1e-4);

  // one origin and per-ray origins at once
  r.origins = org;
  ASSERT_STATUS(cli, sensim_raycast(cli, &r, hits[0], NULL), SENSIM_INVALID_ARGUMENT,
                "rays.origins and rays.origin");
  free(org);
  free(dir);
  for (int k = 0; k < 4; k++) {
    free(hits[k]);
  }
  sensim_client_close(cli);
  ASSERT_EQ(td_stop(&d), 0);
  return 0;
}


// What the scripted peer found in each raycast request: the origin sent once (field 11, its
// x y z), the origins per ray (field 5) and the directions (field 6).
typedef struct origin_check {
  uint64_t features;                // the peer's HelloReply.features
  uint32_t requests;
  uint32_t frames;
  bool has_origin[8];
  double origin[8][3];
  size_t origins_len[8], directions_len[8];
  uint8_t* origins[8];              // copies of origins_bytes
  int bad;                          // frames the walk could not parse
} origin_check_t;


// field_fn: the origin sent once (11), the origins per ray (5), the directions (6).
static void origin_field(void* arg, uint64_t field, const uint8_t* data, uint64_t v,
                         size_t at) {
  (void)at;
  origin_check_t* c = arg;
  uint32_t k = c->frames;
  if (field == 5) {
    c->origins_len[k] = v;
    c->origins[k] = malloc(v ? v : 1);
    memcpy(c->origins[k], data, v);
  } else if (field == 6) {
    c->directions_len[k] = v;
  } else if (field == 11) {
    // Vec3: x, y, z as fixed64 fields 1, 2, 3
    c->has_origin[k] = true;
    for (uint64_t p = 0; p < v; p += 9) {
      uint8_t tag = data[p];
      if ((tag & 7) != 1 || tag >> 3 < 1 || tag >> 3 > 3 || p + 9 > v) {
        c->bad++;
        return;
      }
      memcpy(&c->origin[k][(tag >> 3) - 1], data + p + 1, 8);
    }
  }
}


static void check_origin(int fd, void* arg) {
  origin_check_t* c = arg;
  if (td_peer_hello_features(fd, c->features) == 0) {
    return;
  }
  static uint8_t frame[4 << 20];
  for (; c->frames < c->requests; c->frames++) {
    long len = td_read_frame(fd, frame, sizeof(frame));
    if (len <= 0 || walk_body(frame, (size_t)len, origin_field, c) != 0) {
      c->bad += len > 0;
      return;
    }
  }
}


TEST(raycast_one_origin_travels_once_to_a_daemon_that_takes_it) {
  // five raycasts of 2000 rays to a peer that takes Raycast.origin: origins all equal, one
  // origin given, origins with the last one different (by a sign bit: -0.0), then to a peer
  // that does not: one origin given, origins all equal
  enum { N = 2000 };
  static double org[N][3], dir[N][3];
  static sensim_hit_t hits[N];
  const double at[3] = {0.0, 2.5, -1e-3};
  for (int i = 0; i < N; i++) {
    memcpy(org[i], at, sizeof(at));
    dir[i][0] = 1.0;
    dir[i][1] = 1e-3 * i;
    dir[i][2] = 0.5;
  }
  origin_check_t c[2] = {{.features = SENSIM_FEATURE_RAYCAST_ORIGIN, .requests = 3},
                         {.features = 0, .requests = 2}};
  for (int peer = 0; peer < 2; peer++) {
    td_peer_t* p = td_peer_start(check_origin, &c[peer]);
    ASSERT_TRUE(p != NULL);
    sensim_options_t o;
    sensim_options_init(&o);
    o.timeout_ms = 10000;
    sensim_client_t* cli = NULL;
    ASSERT_EQ(sensim_client_connect("127.0.0.1", (uint16_t)td_peer_port(p), &o, &cli),
              SENSIM_OK);
    ASSERT_EQ(sensim_client_session(cli)->features, c[peer].features);
    sensim_raycast_t r;
    sensim_raycast_init(&r);
    r.nrays = N;
    r.directions = &dir[0][0];
    uint64_t id;
    for (uint32_t k = 0; k < c[peer].requests; k++) {
      bool given = (peer == 0 && k == 1) || (peer == 1 && k == 0);
      r.origins = given ? NULL : &org[0][0];
      r.origin = given ? at : NULL;
      org[N - 1][0] = peer == 0 && k == 2 ? -0.0 : 0.0;
      ASSERT_OK_ST(cli, sensim_raycast_send(cli, &r, hits, &id));
    }
    td_peer_stop(p);
    sensim_client_close(cli);
    ASSERT_EQ(c[peer].frames, c[peer].requests);
    ASSERT_EQ(c[peer].bad, 0);
  }

  // once: field 11 with the origin's bits, no origins_bytes
  for (int k = 0; k < 2; k++) {
    ASSERT_TRUE(c[0].has_origin[k]);
    ASSERT_MEM_EQ(c[0].origin[k], at, sizeof(at));
    ASSERT_EQ(c[0].origins_len[k], 0);
    ASSERT_EQ(c[0].directions_len[k], sizeof(dir));
  }

  // per ray: the caller's origins, or the given one written out per ray
  org[N - 1][0] = -0.0;
  ASSERT_TRUE(!c[0].has_origin[2]);
  ASSERT_EQ(c[0].origins_len[2], sizeof(org));
  ASSERT_MEM_EQ(c[0].origins[2], org, sizeof(org));
  org[N - 1][0] = 0.0;
  for (int k = 0; k < 2; k++) {
    ASSERT_TRUE(!c[1].has_origin[k]);
    ASSERT_EQ(c[1].origins_len[k], sizeof(org));
    ASSERT_MEM_EQ(c[1].origins[k], org, sizeof(org));
  }
  for (int peer = 0; peer < 2; peer++) {
    for (uint32_t k = 0; k < c[peer].requests; k++) {
      free(c[peer].origins[k]);
    }
  }
  return 0;
}


// Trace r with and without Raycast.omit_misses (the session as a daemon without
// FEATURE_RAYCAST_HIT_MASK leaves it): the same records, bit for bit, over buffers filled with
// garbage first. Returns the hits (finite distances) or -1 when the two differ or one failed.
static long masked_equals_full(sensim_client_t* cli, const sensim_raycast_t* r,
                               sensim_hit_t* a, sensim_hit_t* b) {
  sensim_session_t* s = (sensim_session_t*)sensim_client_session(cli);
  uint64_t features = s->features;
  memset(a, 0xab, sizeof(sensim_hit_t) * r->nrays);
  memset(b, 0xcd, sizeof(sensim_hit_t) * r->nrays);
  uint64_t serial[2];
  sensim_status_t st = sensim_raycast(cli, r, a, &serial[0]);
  s->features = features & ~(uint64_t)SENSIM_FEATURE_RAYCAST_HIT_MASK;
  sensim_status_t st2 = sensim_raycast(cli, r, b, &serial[1]);
  s->features = features;
  if (st != SENSIM_OK || st2 != SENSIM_OK || serial[0] != serial[1] ||
      memcmp(a, b, sizeof(sensim_hit_t) * r->nrays) != 0) {
    return -1;
  }
  long hits = 0;
  for (uint32_t i = 0; i < r->nrays; i++) {
    hits += isfinite(a[i].distance);
  }
  return hits;
}


TEST(raycast_hit_mask_equals_the_full_form_bit_for_bit) {
  td_daemon_t d;
  ASSERT_OK(td_start(&d, NULL));
  sensim_client_t* cli = td_connect(&d, "hit_mask");
  ASSERT_TRUE(cli != NULL);
  ASSERT_TRUE((sensim_client_session(cli)->features & SENSIM_FEATURE_RAYCAST_HIT_MASK) != 0);
  ASSERT_OK_ST(cli, td_box(cli, 2, 2, 3, 4, 8, -5, 2, 2));
  ASSERT_OK_ST(cli, td_sphere(cli, 3, 1.5, -6, 6, -3, 3));

  // rays from the origin over the sphere of directions, some hitting the box or the sphere:
  // counts not a multiple of 8, and 50,001 in parts
  uint32_t nmax = 50001;
  double* org = malloc(3 * sizeof(double) * nmax);
  double* dir = malloc(3 * sizeof(double) * nmax);
  sensim_hit_t* a = malloc(sizeof(sensim_hit_t) * nmax);
  sensim_hit_t* b = malloc(sizeof(sensim_hit_t) * nmax);
  ASSERT_TRUE(org && dir && a && b);
  static const uint32_t counts[] = {1, 7, 13, 1001, 50001};
  sensim_raycast_t r;
  sensim_raycast_init(&r);
  r.origins = org;
  r.directions = dir;
  for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
    r.nrays = counts[k];
    spiral(r.nrays, org, dir);
    long hits = masked_equals_full(cli, &r, a, b);
    ASSERT_TRUE(hits >= 0);
    if (r.nrays > 1000) {
      ASSERT_TRUE(hits > 50 && hits < (long)r.nrays / 2);   // some of each
    }
  }

  // all misses (nothing within 1 mm), then all hits (a sphere around everything)
  r.nrays = 50001;
  r.max_range = 1e-3;
  ASSERT_EQ(masked_equals_full(cli, &r, a, b), 0);
  ASSERT_TRUE(isinf(a[0].distance) && a[0].object_id == 0);
  r.max_range = 0.0;
  ASSERT_OK_ST(cli, td_sphere(cli, 1, 30.0, 0, 0, 0, 1));
  ASSERT_EQ(masked_equals_full(cli, &r, a, b), 50001);
  r.nrays = 13;
  ASSERT_EQ(masked_equals_full(cli, &r, a, b), 13);
  // truth: from the origin every ray leaves the big sphere at 30 m, unless it met the box or
  // the small sphere first
  for (uint32_t i = 0; i < 13; i++) {
    ASSERT_TRUE(a[i].distance <= 30.0 + 1e-6);
    if (a[i].object_id == 1) {
      ASSERT_NEAR(a[i].distance, 30.0, 1e-4);
    }
  }
  free(org);
  free(dir);
  free(a);
  free(b);
  sensim_client_close(cli);
  ASSERT_EQ(td_stop(&d), 0);
  return 0;
}


// A peer that announces `features` and records the payload bytes of the first request after
// the Hello.
typedef struct sizer {
  uint64_t features;
  long len;
} sizer_t;


static void record_size(int fd, void* arg) {
  sizer_t* s = arg;
  static uint8_t buf[1 << 20];
  s->len = td_peer_hello_features(fd, s->features) ? td_read_frame(fd, buf, sizeof(buf)) : -1;
}


// The payload bytes of the frame sensim_raycast sends for r, as a peer announcing `features`
// receives it (the request's id is 2, of one byte, as on a connection with few requests).
static long raycast_frame_bytes(const sensim_raycast_t* r, uint64_t features) {
  sizer_t s = {.features = features, .len = -1};
  td_peer_t* p = td_peer_start(record_size, &s);
  if (!p) {
    return -1;
  }
  sensim_options_t o;
  sensim_options_init(&o);
  sensim_client_t* cli = NULL;
  if (sensim_client_connect("127.0.0.1", (uint16_t)td_peer_port(p), &o, &cli) == SENSIM_OK) {
    sensim_hit_t* hits = malloc(sizeof(sensim_hit_t) * r->nrays);
    uint64_t id;
    if (sensim_raycast_send(cli, r, hits, &id) != SENSIM_OK || id != 2) {
      s.len = -2;
    }
    free(hits);
  }
  sensim_client_close(cli);
  td_peer_stop(p);
  return s.len;
}


TEST(raycast_limit_is_the_frame_as_sent) {
  // sensim_raycast refused rays whose arrays came within 4 kB of max_frame_bytes, though
  // their frame fitted (sensim_raycast_send sent it). The frame as it goes is measured now:
  // at limit - 1 and limit bytes (as a peer receives them) the daemon answers; at limit + 1
  // the client refuses it, naming the limit, nothing sent. Sizes step by one byte with
  // exclude_bodies (after the arrays, whose paddings keep them where they are).
  const uint32_t limit = 4096, n = 80;
  td_daemon_t d;
  ASSERT_OK(td_start(&d, (const char* const[]){"--max-frame-bytes", "4096", NULL}));
  sensim_client_t* cli = td_connect(&d, "raycast_limit");
  ASSERT_TRUE(cli != NULL);
  uint64_t features = sensim_client_session(cli)->features;
  double org[3 * 80], dir[3 * 80];
  uint32_t exclude[400];
  for (uint32_t i = 0; i < n; i++) {
    org[3 * i] = org[3 * i + 1] = 0.0;
    org[3 * i + 2] = 0.001 * i;  // distinct: an origin per ray is sent
    dir[3 * i] = 1.0;
    dir[3 * i + 1] = dir[3 * i + 2] = 0.0;
  }
  for (uint32_t k = 0; k < 400; k++) {
    exclude[k] = 1;
  }
  sensim_raycast_t r;
  sensim_raycast_init(&r);
  r.nrays = n;
  r.origins = org;
  r.directions = dir;
  r.exclude_bodies = exclude;
  int tried[3] = {0};
  for (uint32_t k = 0; k < 400; k++) {
    r.nexclude_bodies = k;
    long size = raycast_frame_bytes(&r, features);
    ASSERT_TRUE(size > 0);
    if (size < (long)limit - 1 || size > (long)limit + 1 || tried[size - (limit - 1)]) {
      continue;
    }
    tried[size - (limit - 1)] = 1;
    const sensim_info_t* info;
    ASSERT_OK_ST(cli, sensim_get_info(cli, &info));
    uint64_t before = info->counters.value[SENSIM_COUNTER_FRAMES_IN];
    ASSERT_TRUE(sensim_client_session(cli)->features == features);
    sensim_hit_t hits[80];
    if (size > (long)limit) {
      ASSERT_STATUS(cli, sensim_raycast(cli, &r, hits, NULL), SENSIM_RESOURCE_EXHAUSTED,
                    "request of 4097 bytes exceeds the daemon's max_frame_bytes 4096");
      ASSERT_OK_ST(cli, sensim_get_info(cli, &info));
      ASSERT_EQ(info->counters.value[SENSIM_COUNTER_FRAMES_IN], before + 1);  // nothing sent
    } else {
      ASSERT_OK_ST(cli, sensim_raycast(cli, &r, hits, NULL));
      for (uint32_t i = 0; i < n; i++) {
        ASSERT_TRUE(isinf(hits[i].distance));  // an empty scene
      }
      ASSERT_OK_ST(cli, sensim_get_info(cli, &info));
      ASSERT_EQ(info->counters.value[SENSIM_COUNTER_FRAMES_IN], before + 2);
    }
  }
  ASSERT_TRUE(tried[0] && tried[1] && tried[2]);  // (ids below 128 here too: 11 requests)
  sensim_client_close(cli);
  ASSERT_EQ(td_stop(&d), 0);
  return 0;
}


TEST(raycast_one_origin_is_not_written_out_for_rays_that_cannot_go) {
  // One origin for 2^32 - 1 rays to a daemon that does not take Raycast.origin: the client
  // wrote it out once per ray (96 GiB) before measuring the request, and so did a handle whose
  // connect had failed (it knows no features) before reporting the connection closed: ENOMEM,
  // or the allocation itself failing, instead of the request's own refusal.
  static const double at[3] = {0.0, 0.0, 0.0}, dir[3] = {1.0, 0.0, 0.0};
  sensim_hit_t hit;
  sensim_raycast_t r;
  sensim_raycast_init(&r);
  r.nrays = UINT32_MAX;
  r.origin = at;
  r.directions = dir;
  sizer_t s = {.features = 0, .len = 0};
  td_peer_t* p = td_peer_start(record_size, &s);
  ASSERT_TRUE(p != NULL);
  sensim_options_t o;
  sensim_options_init(&o);
  o.timeout_ms = 10000;
  uint16_t port = (uint16_t)td_peer_port(p);
  sensim_client_t* cli = NULL;
  ASSERT_EQ(sensim_client_connect("127.0.0.1", port, &o, &cli), SENSIM_OK);
  uint64_t id;
  ASSERT_STATUS(cli, sensim_raycast_send(cli, &r, &hit, &id), SENSIM_RESOURCE_EXHAUSTED,
                "max_frame_bytes");
  ASSERT_STATUS(cli, sensim_raycast(cli, &r, &hit, NULL), SENSIM_RESOURCE_EXHAUSTED,
                "max_frame_bytes");
  sensim_client_close(cli);
  td_peer_stop(p);
  ASSERT_EQ(s.len, -1);  // nothing was sent

  // a handle whose connect failed: the port of the peer, gone
  cli = NULL;
  ASSERT_EQ(sensim_client_connect("127.0.0.1", port, &o, &cli), SENSIM_ECONNECT);
  ASSERT_STATUS(cli, sensim_raycast_send(cli, &r, &hit, &id), SENSIM_ECONNECT, "closed");
  sensim_client_close(cli);
  return 0;
}
