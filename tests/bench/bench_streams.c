// SPDX-License-Identifier: MIT
// bench_streams.c: a lidar stream end to end over loopback against the sum of its parts, an
// empty step's round trip against a bare TCP ping-pong of the same bytes, what a step's reply
// costs the stepping client, and how often the daemon copies a cloud.
//
// A real sensimd (child, `--listen 127.0.0.1:0`) is given the street scene of
// bench_codec_scan.h and its OS1-128 2048x10 lidar; a controller connection steps it one
// revolution at a time while an observer connection subscribes with ENCODING_QUANTIZED_ZSTD
// (1 mm). End to end: from writing UpdateState + Step to the observer holding the decoded
// points (protobuf-c unpack, then the codec's decoder). Parts, measured in this process: the
// same revolution traced by the core on as many worker threads as the daemon, its encoding,
// a loopback TCP transfer of a frame of the encoded size through raw sockets, and its
// decoding. Medians of the repetitions:
//   BENCH step_to_decoded_over_parts   end to end / (trace + encode + transfer + decode)
//   BENCH empty_step_rtt_over_tcp_pingpong   UpdateState + Step of an environment without
//         sensors / the same request and reply bytes through an in-process echo thread
//   BENCH controller_bytes_per_step_outputs_off   bytes the controller receives for a step
//         that completes an OS1-128 revolution with Step.outputs = NONE (goal <= 128)
//   BENCH step_rtt_four_os1_all_fields_over_one   UpdateState + Step, outputs ALL, until every
//         frame of the reply is in: four OS1-128 with every point field completing their
//         revolution in the step / one of them (goal <= 4.5), after 4 untimed revolutions
//   BENCH copies_per_published_byte   bytes the daemon copies in blocks of 64 KiB or more per
//         byte of cloud published, with the StepDone carrying the cloud and a RAW subscriber
//         (copycount.c preloaded into a second daemon; not under sanitizers)
#include <arpa/inet.h>
#include <errno.h>
#include <malloc.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench_codec_scan.h"
#include "bench_proto.h"
#include "bench_util.h"
#include "sensim.pb-c.h"

#ifndef SENSIMD_DEFAULT
#define SENSIMD_DEFAULT "sensimd"
#endif

#define IO_TIMEOUT_S 60

//---------------- Requests

static void create_os1(bench_conn_t* c, uint32_t id, int all_fields);


// The street scene and the lidar of bench_codec_scan.h (id 1), through the protocol.
static void build_street(bench_conn_t* c, int all_fields) {
  Sensim__V1__Envelope env = SENSIM__V1__ENVELOPE__INIT;
  env.body_case = SENSIM__V1__ENVELOPE__BODY_CREATE_PRIMITIVE;
  Sensim__V1__CreatePrimitive prim = SENSIM__V1__CREATE_PRIMITIVE__INIT;
  env.create_primitive = &prim;
  prim.has_id = 1;
  Sensim__V1__Plane plane = SENSIM__V1__PLANE__INIT;
  plane.has_half_size = 1;
  plane.half_size = 200.0;
  prim.id = 1;
  prim.shape_case = SENSIM__V1__CREATE_PRIMITIVE__SHAPE_PLANE;
  prim.plane = &plane;
  bench_call(c, &env, "plane");
  Sensim__V1__Vec3 block_half = bench_vec3(6.0, 4.0, 5.0), car_half = bench_vec3(2.2, 0.9, 0.7);
  Sensim__V1__Box block = SENSIM__V1__BOX__INIT, car = SENSIM__V1__BOX__INIT;
  block.half_extents = &block_half;
  car.half_extents = &car_half;
  prim.id = 2;
  prim.shape_case = SENSIM__V1__CREATE_PRIMITIVE__SHAPE_BOX;
  prim.box = &block;
  bench_call(c, &env, "block");
  Sensim__V1__Cylinder pole = SENSIM__V1__CYLINDER__INIT;
  pole.has_radius = pole.has_half_length = 1;
  pole.radius = 0.15;
  pole.half_length = 3.0;
  prim.id = 3;
  prim.shape_case = SENSIM__V1__CREATE_PRIMITIVE__SHAPE_CYLINDER;
  prim.cylinder = &pole;
  bench_call(c, &env, "pole");
  prim.id = 4;
  prim.shape_case = SENSIM__V1__CREATE_PRIMITIVE__SHAPE_BOX;
  prim.box = &car;
  bench_call(c, &env, "car");

  scan_object_t objs[128];
  uint32_t n = scan_objects(objs);
  for (uint32_t i = 0; i < n; i++) {
    Sensim__V1__Vec3 pos = bench_vec3(objs[i].pos[0], objs[i].pos[1], objs[i].pos[2]);
    Sensim__V1__Pose pose = SENSIM__V1__POSE__INIT;
    pose.position = &pos;
    Sensim__V1__CreateObject obj = SENSIM__V1__CREATE_OBJECT__INIT;
    obj.has_id = obj.has_geometry_id = 1;
    obj.id = i + 1;
    obj.geometry_id = objs[i].geom;
    obj.local_pose = &pose;
    env.body_case = SENSIM__V1__ENVELOPE__BODY_CREATE_OBJECT;
    env.create_object = &obj;
    bench_call(c, &env, "create_object");
  }

  create_os1(c, 1, all_fields);
}


// An OS1-128 2048 x 10 lidar (id) of the street, 1 cm range noise, misses as zero points; with
// all_fields, every point field (60 bytes a point).
static void create_os1(bench_conn_t* c, uint32_t id, int all_fields) {
  static char* kAll[] = {"x", "y", "z", "intensity", "ring", "azimuth", "elevation", "distance",
                         "time_offset", "object_id", "label", "return_index", "return_count",
                         "normal"};
  Sensim__V1__Envelope env = SENSIM__V1__ENVELOPE__INIT;
  Sensim__V1__OusterPattern os = SENSIM__V1__OUSTER_PATTERN__INIT;
  os.has_channels = os.has_columns = os.has_frequency = 1;
  os.channels = 128;
  os.columns = 2048;
  os.frequency = 10.0;
  Sensim__V1__DistanceNoise noise = SENSIM__V1__DISTANCE_NOISE__INIT;
  noise.has_stddev_base = 1;
  noise.stddev_base = 0.01;
  Sensim__V1__LidarConfig lc = SENSIM__V1__LIDAR_CONFIG__INIT;
  lc.pattern_case = SENSIM__V1__LIDAR_CONFIG__PATTERN_OUSTER;
  lc.ouster = &os;
  lc.has_range_min = lc.has_range_max = lc.has_misses = 1;
  lc.range_min = 0.1;
  lc.range_max = 120.0;
  lc.misses = SENSIM__V1__MISS_MODE__MISSES_ZERO;
  lc.distance_noise = &noise;
  if (all_fields) {
    lc.n_fields = sizeof kAll / sizeof kAll[0];
    lc.fields = kAll;
  }
  Sensim__V1__Vec3 mpos = bench_vec3(0, 0, SCAN_LIDAR_HEIGHT);
  Sensim__V1__Pose mount = SENSIM__V1__POSE__INIT;
  mount.position = &mpos;
  Sensim__V1__CreateSensor cs = SENSIM__V1__CREATE_SENSOR__INIT;
  cs.has_id = 1;
  cs.id = id;
  cs.mount = &mount;
  cs.config_case = SENSIM__V1__CREATE_SENSOR__CONFIG_LIDAR;
  cs.lidar = &lc;
  env.body_case = SENSIM__V1__ENVELOPE__BODY_CREATE_SENSOR;
  env.create_sensor = &cs;
  bench_call(c, &env, "create_sensor lidar");
}


// UpdateState + Step at t as one write, Step.outputs = outputs (-1: not set); *step_id the
// step's id. Returns the bytes written.
static size_t send_step_outputs(bench_conn_t* c, double t, int outputs, uint64_t* update_id,
                                uint64_t* step_id, uint8_t** frames) {
  Sensim__V1__UpdateState us = SENSIM__V1__UPDATE_STATE__INIT;
  us.has_time = 1;
  us.time = t;
  Sensim__V1__Step st = SENSIM__V1__STEP__INIT;
  st.has_time = 1;
  st.time = t;
  if (outputs >= 0) {
    st.has_outputs = 1;
    st.outputs = (Sensim__V1__StepOutputs)outputs;
  }
  Sensim__V1__Envelope e1 = SENSIM__V1__ENVELOPE__INIT, e2 = SENSIM__V1__ENVELOPE__INIT;
  e1.body_case = SENSIM__V1__ENVELOPE__BODY_UPDATE_STATE;
  e1.update_state = &us;
  e2.body_case = SENSIM__V1__ENVELOPE__BODY_STEP;
  e2.step = &st;
  uint8_t* f = NULL;
  size_t len = 0;
  *update_id = bench_frame_append(c, &e1, &f, &len);
  *step_id = bench_frame_append(c, &e2, &f, &len);
  bench_write_all(c->fd, f, len);
  if (frames) {
    *frames = f;
  } else {
    free(f);
  }
  return len;
}


static size_t send_step(bench_conn_t* c, double t, uint64_t* update_id, uint64_t* step_id,
                        uint8_t** frames) {
  return send_step_outputs(c, t, -1, update_id, step_id, frames);
}


// When read_step_reply saw the first byte of the step's reply (bench_now): the daemon had
// finished the step and started writing (this process reads frames whole, without buffering
// ahead, so the socket holds nothing of it before).
static double g_reply_start;

// The whole reply of step `id`: the records sent ahead of it and the StepDone. Returns the
// bytes received (length prefixes included); *records: the records it carried.
static size_t read_step_reply(bench_conn_t* c, uint64_t id, uint32_t* records) {
  size_t bytes = 0;
  *records = 0;
  struct pollfd pf = {.fd = c->fd, .events = POLLIN};
  if (poll(&pf, 1, IO_TIMEOUT_S * 1000) != 1) {
    bench_die("step %llu: no reply in %d s", (unsigned long long)id, IO_TIMEOUT_S);
  }
  g_reply_start = bench_now();
  for (;;) {
    bench_read_frame(c);
    Sensim__V1__Envelope* r = sensim__v1__envelope__unpack(NULL, c->len, c->buf);
    if (!r) {
      bench_die("a reply frame does not decode");
    }
    if (r->id == 0) {
      sensim__v1__envelope__free_unpacked(r, NULL);
      continue;
    }
    bytes += c->len + 4;
    int done = r->body_case == SENSIM__V1__ENVELOPE__BODY_STEP_DONE;
    if (r->id != id || (!done && r->body_case != SENSIM__V1__ENVELOPE__BODY_SENSOR_DATA) ||
        (r->status && r->status->code != 0)) {
      bench_die("step %llu: an unexpected reply frame (id %llu, body %d)",
                (unsigned long long)id, (unsigned long long)r->id, (int)r->body_case);
    }
    *records += done ? (uint32_t)r->step_done->n_outputs : 1;
    sensim__v1__envelope__free_unpacked(r, NULL);
    if (done) {
      return bytes;
    }
  }
}


// Revolutions stepped before the timed ones of all_fields_rtt: the first ones allocate (and
// fault in) the daemon's two point buffers per lidar and this process's heap for the unpacked
// records (with four lidars, four revolutions: timed, they were four of the nine and held up
// the median of four lidars, not of one).
#define ALL_FIELDS_WARMUP 4

// Median round trip of UpdateState + Step, outputs ALL, with the whole reply read, of an
// environment `name` holding the street and n OS1-128 with every field, stepped one
// revolution at a time after ALL_FIELDS_WARMUP untimed ones.
static double all_fields_rtt(int port, const char* name, uint32_t n, unsigned steps) {
  bench_conn_t c = bench_conn_open(port, IO_TIMEOUT_S * 1000);
  bench_hello(&c, "bench_streams", name, SENSIM__V1__ROLE__ROLE_CONTROLLER);
  build_street(&c, 1);
  for (uint32_t i = 2; i <= n; i++) {
    create_os1(&c, i, 1);
  }
  uint64_t a, b;
  uint32_t records;
  send_step(&c, 0.0, &a, &b, NULL);
  bench_expect_reply(&c, a, "update_state");
  read_step_reply(&c, b, &records);
  double* t = bench_xmalloc(steps * sizeof(double));
  double* first = bench_xmalloc(steps * sizeof(double));
  for (unsigned k = 0; k < ALL_FIELDS_WARMUP + steps; k++) {
    double t0 = bench_now();
    send_step(&c, 0.1 * (k + 1), &a, &b, NULL);
    bench_expect_reply(&c, a, "update_state");
    read_step_reply(&c, b, &records);
    if (k >= ALL_FIELDS_WARMUP) {
      t[k - ALL_FIELDS_WARMUP] = bench_now() - t0;
      first[k - ALL_FIELDS_WARMUP] = g_reply_start - t0;
    }
    if (records != n) {
      bench_die("%s: %u records in a step's reply, expected %u", name, records, n);
    }
  }
  double m = bench_median(t, steps);
  printf("# %s: %.1f ms until the step's reply starts to arrive, %.1f ms in all\n", name,
         bench_median(first, steps) * 1e3, m * 1e3);
  free(first);
  free(t);
  close(c.fd);
  free(c.buf);
  return m;
}


// The observer's next pushed point cloud, decoded into *pts (grown as needed).
static void receive_cloud(bench_conn_t* c, uint8_t** pts, size_t* cap, uint64_t* seq) {
  for (;;) {
    bench_read_frame(c);
    Sensim__V1__Envelope* r = sensim__v1__envelope__unpack(NULL, c->len, c->buf);
    if (!r) {
      bench_die("a pushed frame does not decode");
    }
    if (r->id != 0 || r->body_case != SENSIM__V1__ENVELOPE__BODY_SENSOR_DATA ||
        !r->sensor_data->point_cloud) {
      sensim__v1__envelope__free_unpacked(r, NULL);
      continue;
    }
    const Sensim__V1__PointCloud* pc = r->sensor_data->point_cloud;
    size_t need = (size_t)pc->count * pc->point_step;
    if (need > *cap) {
      free(*pts);
      *pts = bench_xmalloc(need);
      *cap = need;
    }
    if (scan_decode_checked((int)pc->encoding, pc->data.data, pc->data.len, pc->count,
                            pc->point_step, *pts) != 0) {
      bench_die("a pushed cloud does not decode");
    }
    *seq = r->sequence;
    sensim__v1__envelope__free_unpacked(r, NULL);
    return;
  }
}

//---------------- Raw loopback references

typedef struct echo {
  int listen_fd;
  int fd;
  size_t req_len;               // bytes of a request
  const uint8_t* reply;         // sent back for each request
  size_t reply_len;
  unsigned rounds;
} echo_t;


static void* echo_main(void* arg) {
  echo_t* e = arg;
  e->fd = accept(e->listen_fd, NULL, NULL);
  bench_set_nodelay(e->fd);
  uint8_t* req = bench_xmalloc(e->req_len);
  for (unsigned i = 0; i < e->rounds; i++) {
    if (e->req_len) {
      bench_read_all(e->fd, req, e->req_len);
    }
    bench_write_all(e->fd, e->reply, e->reply_len);
  }
  free(req);
  close(e->fd);
  return NULL;
}


// Median round trip of `rounds` requests of req_len bytes answered with reply_len bytes by a
// thread of this process over loopback TCP.
static double raw_round_trip(const uint8_t* req, size_t req_len, const uint8_t* reply,
                             size_t reply_len, unsigned rounds) {
  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t alen = sizeof a;
  if (lfd < 0 || bind(lfd, (struct sockaddr*)&a, sizeof a) != 0 || listen(lfd, 1) != 0 ||
      getsockname(lfd, (struct sockaddr*)&a, &alen) != 0) {
    bench_die("loopback listener: %s", strerror(errno));
  }
  echo_t e = {.listen_fd = lfd, .req_len = req_len, .reply = reply, .reply_len = reply_len,
              .rounds = rounds};
  pthread_t th;
  pthread_create(&th, NULL, echo_main, &e);
  int fd = bench_connect_loopback(ntohs(a.sin_port), IO_TIMEOUT_S * 1000);
  uint8_t* back = bench_xmalloc(reply_len);
  double* t = bench_xmalloc(rounds * sizeof(double));
  for (unsigned i = 0; i < rounds; i++) {
    double t0 = bench_now();
    bench_write_all(fd, req, req_len);
    bench_read_all(fd, back, reply_len);
    t[i] = bench_now() - t0;
  }
  pthread_join(th, NULL);
  close(fd);
  close(lfd);
  double m = bench_median(t, rounds);
  free(t);
  free(back);
  return m;
}

// Four OS1-128 with every field against one, outputs on: the records of four are 63 MB.
//
// This process keeps its heap from step to step, as a client reading a stream would: each
// record that protobuf-c unpacks takes 15.7 MB of it. glibc's defaults (its mmap threshold
// raised to the size of a freed block, up to 32 MiB, and the heap's top given back past twice
// that) kept one record's block in the heap but gave back the 63 MB of four at every step, so
// the client of four lidars alone took 15,000 page faults a step (40 to 60 ms), and only when
// other work had raised the threshold first (the whole benchmark, not --all-fields-only).
// (The sanitizers' allocator replaces glibc's and refuses its options.)
static void all_fields(int port, unsigned revs) {
#if !defined(__SANITIZE_ADDRESS__)
  if (!mallopt(M_MMAP_THRESHOLD, 32 << 20) || !mallopt(M_TRIM_THRESHOLD, 512 << 20)) {
    bench_die("mallopt refused the heap's thresholds");
  }
#endif
  double rtt1 = all_fields_rtt(port, "one", 1, revs);
  double rtt4 = all_fields_rtt(port, "four", 4, revs);
  printf("BENCH step_rtt_one_os1_all_fields_ms %.1f ms\n", rtt1 * 1e3);
  printf("BENCH step_rtt_four_os1_all_fields_ms %.1f ms\n", rtt4 * 1e3);
  printf("BENCH step_rtt_four_os1_all_fields_over_one %.2f x\n", rtt4 / rtt1);
}

//---------------- Copies

// Measured only where the daemon can take a preloaded library (not under the sanitizers,
// whose runtime must come first).
#if !defined(__SANITIZE_ADDRESS__) && defined(BENCH_COPYCOUNT)
#define BENCH_COPIES 1
#endif

#ifdef BENCH_COPIES
// A RAW subscriber that reads every frame, on a thread of its own.
typedef struct reader {
  bench_conn_t c;
  unsigned frames;              // to read
  size_t cloud_bytes;           // of the last one
} reader_t;


static void* reader_main(void* arg) {
  reader_t* r = arg;
  for (unsigned k = 0; k < r->frames;) {
    bench_read_frame(&r->c);
    Sensim__V1__Envelope* e = sensim__v1__envelope__unpack(NULL, r->c.len, r->c.buf);
    if (e && e->id == 0 && e->body_case == SENSIM__V1__ENVELOPE__BODY_SENSOR_DATA &&
        e->sensor_data->point_cloud) {
      r->cloud_bytes = e->sensor_data->point_cloud->data.len;
      k++;
    }
    sensim__v1__envelope__free_unpacked(e, NULL);
  }
  return NULL;
}
#endif


// Bytes the daemon copies in large blocks per byte of cloud it publishes: a second daemon with
// copycount.c preloaded, the street's OS1-128 stepped one revolution at a time, its StepDone
// carrying the cloud, and a RAW subscriber reading every frame.
static void copies(const char* exe, unsigned revs) {
#ifndef BENCH_COPIES
  (void)exe;
  (void)revs;
  printf("# copies_per_published_byte: not measured (sanitizers, or no copycount library)\n");
#else
  char path[] = "/tmp/sensim_copycount_XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) {
    bench_die("mkstemp: %s", strerror(errno));
  }
  close(fd);
  setenv("SENSIM_COPYCOUNT_FILE", path, 1);
  setenv("LD_PRELOAD", BENCH_COPYCOUNT, 1);
  bench_daemon_t d;
  bench_daemon_start(&d, exe, NULL, IO_TIMEOUT_S * 1000);
  unsetenv("LD_PRELOAD");
  unsetenv("SENSIM_COPYCOUNT_FILE");
  bench_conn_t ctl = bench_conn_open(d.port, IO_TIMEOUT_S * 1000);
  bench_hello(&ctl, "bench_streams", "copies", SENSIM__V1__ROLE__ROLE_CONTROLLER);
  build_street(&ctl, 0);
  reader_t r = {.c = bench_conn_open(d.port, IO_TIMEOUT_S * 1000), .frames = revs};
  bench_hello(&r.c, "bench_streams", "copies", SENSIM__V1__ROLE__ROLE_OBSERVER);
  Sensim__V1__Subscribe sub = SENSIM__V1__SUBSCRIBE__INIT;
  sub.has_sensor_id = sub.has_encoding = 1;
  sub.sensor_id = 1;
  sub.encoding = SENSIM__V1__ENCODING__ENCODING_RAW;
  Sensim__V1__Envelope env = SENSIM__V1__ENVELOPE__INIT;
  env.body_case = SENSIM__V1__ENVELOPE__BODY_SUBSCRIBE;
  env.subscribe = &sub;
  bench_call(&r.c, &env, "subscribe");
  pthread_t th;
  pthread_create(&th, NULL, reader_main, &r);
  uint64_t a, b;
  uint32_t records;
  for (unsigned k = 0; k <= revs; k++) {
    send_step(&ctl, 0.1 * k, &a, &b, NULL);
    bench_expect_reply(&ctl, a, "update_state");
    read_step_reply(&ctl, b, &records);
  }
  pthread_join(th, NULL);
  close(ctl.fd);
  close(r.c.fd);
  free(ctl.buf);
  free(r.c.buf);
  if (bench_daemon_stop(&d) != 0) {
    bench_die("sensimd (copies) did not exit cleanly");
  }
  unsigned long long bytes = 0, calls = 0;
  FILE* f = fopen(path, "r");
  if (!f || fscanf(f, "%llu %llu", &bytes, &calls) != 2) {
    bench_die("no copy count from %s", path);
  }
  fclose(f);
  unlink(path);
  double published = (double)revs * (double)r.cloud_bytes;
  printf("# %u revolutions of %zu bytes: %llu bytes copied in %llu calls of 64 KiB or more\n",
         revs, r.cloud_bytes, bytes, calls);
  printf("BENCH copies_per_published_byte %.3f\n", (double)bytes / published);
#endif
}

//---------------- Main

static const char* const g_usage =
    "Usage: bench_streams [OPTIONS]\n"
    "A lidar stream through a real sensimd (loopback), step to decoded points, against the sum\n"
    "of its parts measured in this process; an empty step against a raw TCP ping-pong.\n"
    "\n"
    "  --quick          5 revolutions, 50 empty steps\n"
    "  --sensimd PATH   the daemon (default: the build's)\n"
    "  --steps N        timed revolutions (default 20)\n"
    "  --threads N      worker threads of the daemon and of the in-process trace (default 2)\n"
    "  --copies-only    only the copies of clouds (works with daemons before Step.outputs)\n"
    "  --all-fields-only  only four OS1-128 with every field against one\n";


int main(int argc, char** argv) {
  bench_init("bench_streams", bench_daemon_kill);
  const char* exe = getenv("SENSIMD") ? getenv("SENSIMD") : SENSIMD_DEFAULT;
  unsigned steps = 20, threads = 2, empties = 400, revs = 9;
  if (bench_has_arg(argc, argv, "--quick")) {
    steps = 5;
    empties = 50;
    revs = 3;
  }
  bench_opt_t opts[] = {
      {"quick", BENCH_OPT_FLAG, NULL, 0, 0},
      {"sensimd", BENCH_OPT_STRING, &exe, 0, 0},
      {"steps", BENCH_OPT_COUNT, &steps, 2, 10000},
      {"threads", BENCH_OPT_COUNT, &threads, 1, 256},
      {"copies-only", BENCH_OPT_FLAG, NULL, 0, 0},
      {"all-fields-only", BENCH_OPT_FLAG, NULL, 0, 0},
  };
  bench_parse_options(argc, argv, opts, sizeof opts / sizeof opts[0], g_usage);
  signal(SIGPIPE, SIG_IGN);
  if (bench_has_arg(argc, argv, "--copies-only")) {
    copies(exe, revs);
    return 0;
  }
  (void)threads;
  bench_daemon_t d;
  bench_daemon_start(&d, exe, NULL, IO_TIMEOUT_S * 1000);
  if (bench_has_arg(argc, argv, "--all-fields-only")) {
    all_fields(d.port, revs);
    if (bench_daemon_stop(&d) != 0) {
      bench_die("sensimd did not exit cleanly");
    }
    return 0;
  }

  // the street, a controller stepping it and an observer subscribed with quantized_zstd
  bench_conn_t ctl = bench_conn_open(d.port, IO_TIMEOUT_S * 1000);
  bench_conn_t obs = bench_conn_open(d.port, IO_TIMEOUT_S * 1000);
  bench_hello(&ctl, "bench_streams", "street", SENSIM__V1__ROLE__ROLE_CONTROLLER);
  build_street(&ctl, 0);
  bench_hello(&obs, "bench_streams", "street", SENSIM__V1__ROLE__ROLE_OBSERVER);
  Sensim__V1__Subscribe sub = SENSIM__V1__SUBSCRIBE__INIT;
  sub.has_sensor_id = sub.has_encoding = sub.has_precision = 1;
  sub.sensor_id = 1;
  sub.encoding = SENSIM__V1__ENCODING__ENCODING_QUANTIZED_ZSTD;
  sub.precision = 0.001;
  Sensim__V1__Envelope env = SENSIM__V1__ENVELOPE__INIT;
  env.body_case = SENSIM__V1__ENVELOPE__BODY_SUBSCRIBE;
  env.subscribe = &sub;
  bench_call(&obs, &env, "subscribe");

  // end to end: from the step's request to the decoded points in the observer
  uint64_t a, b, seq = 0;
  uint8_t* pts = NULL;
  size_t cap = 0, pushed_len = 0;
  send_step(&ctl, 0.0, &a, &b, NULL);
  bench_expect_reply(&ctl, a, "update_state");
  bench_expect_reply(&ctl, b, "step");
  double* e2e = bench_xmalloc((steps + 1) * sizeof(double));
  for (unsigned k = 0; k <= steps; k++) {
    double t0 = bench_now();
    send_step(&ctl, 0.1 * (k + 1), &a, &b, NULL);
    receive_cloud(&obs, &pts, &cap, &seq);
    e2e[k] = bench_now() - t0;
    pushed_len = obs.len + 4;
    bench_expect_reply(&ctl, a, "update_state");
    bench_expect_reply(&ctl, b, "step");
    if (seq != k + 1) {
      bench_die("the observer got frame %llu, expected %u", (unsigned long long)seq, k + 1);
    }
  }

  // a revolution stepped without outputs: what the controller receives (the observer still
  // gets the cloud)
  uint32_t records;
  send_step_outputs(&ctl, 0.1 * (steps + 2), SENSIM__V1__STEP_OUTPUTS__STEP_OUTPUTS_NONE, &a,
                    &b, NULL);
  bench_expect_reply(&ctl, a, "update_state");
  size_t off_bytes = read_step_reply(&ctl, b, &records);
  receive_cloud(&obs, &pts, &cap, &seq);
  if (records != 0 || seq != steps + 2) {
    bench_die("a step without outputs: %u records, the observer's frame %llu", records,
              (unsigned long long)seq);
  }

  // the parts, in this process: trace, encode, raw transfer of the frame's size, decode
  scan_world_t* w = scan_world_create(threads);
  double* tr = bench_xmalloc(steps * sizeof(double));
  double* en = bench_xmalloc(steps * sizeof(double));
  double* de = bench_xmalloc(steps * sizeof(double));
  uint32_t n = 0, step = 0;
  uint8_t* enc = NULL;
  size_t enc_len = 0;
  for (unsigned k = 0; k < steps; k++) {
    double t0 = bench_now();
    const uint8_t* scan = scan_world_step(w, &n, &step);
    tr[k] = bench_now() - t0;
    if (!enc) {
      enc = bench_xmalloc(scan_max_size(2, scan, n, step));
    }
    double err;
    t0 = bench_now();
    enc_len = scan_encode(2, 1, 0.001, scan, n, step, enc, &err);
    en[k] = bench_now() - t0;
    t0 = bench_now();
    scan_decode(2, enc, enc_len, n, step, pts);
    de[k] = bench_now() - t0;
  }
  uint8_t one = 1;
  uint8_t* frame = bench_xmalloc(pushed_len);
  memset(frame, 0x5a, pushed_len);
  double transfer = raw_round_trip(&one, 1, frame, pushed_len, steps);
  double parts = bench_median(tr, steps) + bench_median(en, steps) + transfer +
                 bench_median(de, steps);
  double total = bench_median(e2e + 1, steps);
  printf("# %u points, %zu bytes pushed per revolution\n", n, pushed_len);
  printf("BENCH step_to_decoded_ms %.2f ms\n", total * 1e3);
  printf("BENCH parts_trace_ms %.2f ms\n", bench_median(tr, steps) * 1e3);
  printf("BENCH parts_encode_ms %.2f ms\n", bench_median(en, steps) * 1e3);
  printf("BENCH parts_transfer_ms %.3f ms\n", transfer * 1e3);
  printf("BENCH parts_decode_ms %.2f ms\n", bench_median(de, steps) * 1e3);
  printf("BENCH step_to_decoded_over_parts %.3f x\n", total / parts);
  printf("BENCH controller_bytes_per_step_outputs_off %zu B\n", off_bytes);
  scan_world_destroy(w);

  // an empty step: another environment without sensors, against the same bytes echoed
  bench_conn_t emp = bench_conn_open(d.port, IO_TIMEOUT_S * 1000);
  bench_hello(&emp, "bench_streams", "empty", SENSIM__V1__ROLE__ROLE_CONTROLLER);
  double* rtt = bench_xmalloc(empties * sizeof(double));
  uint8_t* req = NULL;
  size_t req_len = 0, reply_len = 0;
  for (unsigned k = 0; k < empties; k++) {
    free(req);
    double t0 = bench_now();
    req_len = send_step(&emp, 0.01 * k, &a, &b, &req);
    bench_expect_reply(&emp, a, "update_state");
    size_t first = emp.len + 4;
    bench_expect_reply(&emp, b, "step");
    rtt[k] = bench_now() - t0;
    reply_len = first + emp.len + 4;
  }
  uint8_t* reply = bench_xmalloc(reply_len);
  memset(reply, 0, reply_len);
  double raw = raw_round_trip(req, req_len, reply, reply_len, empties);
  double rtt_med = bench_median(rtt + empties / 10, empties - empties / 10);
  printf("BENCH empty_step_rtt_us %.1f us\n", rtt_med * 1e6);
  printf("BENCH tcp_pingpong_rtt_us %.1f us\n", raw * 1e6);
  printf("BENCH empty_step_rtt_over_tcp_pingpong %.2f x\n", rtt_med / raw);

  all_fields(d.port, revs);

  close(ctl.fd);
  close(obs.fd);
  close(emp.fd);
  int status = bench_daemon_stop(&d);
  if (status != 0) {
    bench_die("sensimd did not exit cleanly (status %d)", status);
  }
  copies(exe, revs);
  free(req);
  free(reply);
  free(rtt);
  free(frame);
  free(enc);
  free(pts);
  free(tr);
  free(en);
  free(de);
  free(e2e);
  free(ctl.buf);
  free(obs.buf);
  free(emp.buf);
  return 0;
}
