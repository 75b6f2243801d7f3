// SPDX-License-Identifier: MIT
// bench_session.c: round trips through a real sensimd over loopback TCP against a raw-socket
// server in this process that answers the same framed bytes.
//
// sensimd is started as a child (`--listen 127.0.0.1:0`, port read from its stdout line), given
// a terrain and a few boxes, and asked two workloads: Ping (small) and a Raycast of a lidar fan
// (default 10k rays). Each reply is validated once (pong payload, status, ray count, sampled
// distances against a brute-force trace of the same triangles and boxes) and recorded. The
// reference is a thread with a blocking socket that reads each request frame and writes back
// the recorded reply frame: the client sends and receives exactly the same bytes on both paths,
// so the ratio is the daemon's cost over bare loopback transport. Measured: one request in
// flight (median and p99 round trip, requests/s) and pipelined with a window of requests in
// flight (requests/s), in interleaved rounds. Exit status 1 when validation fails.
//
// End to end: the same scene is also built in this process, and a raycast of 131,072 rays is
// traced here with env_raycast (as many worker threads as the daemon) and through the Python
// client (tests/bench/bench_e2e.py, run as a child, joining the daemon's environment as an
// observer): BENCH e2e_python_over_inprocess is the Python client's rays per second over the
// in-process ones (medians), and the Python hits must equal the in-process hits bit for bit.
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/pool.h"
#include "bench_util.h"
#include "scene/scene.h"
#include "sensim.pb-c.h"
#include "world/env.h"

#ifndef SENSIMD_DEFAULT
#define SENSIMD_DEFAULT "sensimd"
#endif
#ifndef BENCH_PYTHON
#define BENCH_PYTHON "python3"
#endif
#ifndef BENCH_E2E_SCRIPT
#define BENCH_E2E_SCRIPT "bench_e2e.py"
#endif
#ifndef BENCH_PYTHONPATH
#define BENCH_PYTHONPATH ""
#endif

#define IO_TIMEOUT_MS 30000     // any single wait on a socket or the daemon
#define TERRAIN_SIZE 200.0      // m
#define MAX_RANGE 120.0         // m
#define PING_PAYLOAD 32         // bytes
#define NBOX 4
#define NSAMPLE 64              // raycast rays checked by brute force
#define LEN_SLACK 8             // bytes a reply may differ from the recorded one (varints)

//---------------- Options

typedef struct options {
  int quick;
  const char* sensimd;
  unsigned daemon_threads;  // 0: the daemon's default
  unsigned grid;            // terrain cells per side
  unsigned rays;            // per raycast
  unsigned rounds;          // interleaved rounds
  unsigned ping_lat;        // one-in-flight pings per path and round
  unsigned ping_pipe;       // pipelined pings per path and round
  unsigned ping_window;
  unsigned ray_lat;         // one-in-flight raycasts per path and round
  unsigned ray_pipe;        // pipelined raycasts per path and round
  unsigned ray_window;
  unsigned e2e_rays;        // rays per end-to-end raycast; 0: no end-to-end part
  unsigned e2e_calls;       // timed calls per side
  const char* python;       // interpreter for bench_e2e.py
} options_t;

static const char* const g_usage =
    "Usage: bench_session [OPTIONS] [SENSIMD]\n"
    "Round trips of Ping and Raycast through a real sensimd on loopback TCP, against a\n"
    "raw-socket server in this process that answers the same bytes.\n"
    "\n"
    "  SENSIMD, --sensimd PATH  the daemon (default: $SENSIMD, else the one built with this)\n"
    "  --quick               fewer round trips (a few seconds)\n"
    "  --daemon-threads N    sensimd --threads (default: the daemon's default)\n"
    "  --rays N              rays per raycast (default 10000)\n"
    "  --grid N              terrain cells per side (default 160: 51k triangles)\n"
    "  --rounds N            interleaved rounds, >= 1 (default 10)\n"
    "  --pings N             one-in-flight pings per path and round (default 2000; 5x as\n"
    "                        many pipelined)\n"
    "  --raycasts N          one-in-flight raycasts per path and round (default 20; as many\n"
    "                        pipelined)\n"
    "  --e2e-rays N          rays per end-to-end raycast through the Python client (default\n"
    "                        131072)\n"
    "  --e2e-calls N         timed end-to-end calls per side, in pairs (default 20; 4 with\n"
    "                        --quick)\n"
    "  --no-e2e              skip the end-to-end part\n"
    "  --python PATH         interpreter for bench_e2e.py (default: $SENSIM_PYTHON, else the\n"
    "                        build's)\n";


static void parse_options(int argc, char** argv, options_t* o) {
  int quick = bench_has_arg(argc, argv, "--quick");
  memset(o, 0, sizeof *o);
  o->quick = quick;
  const char* env = getenv("SENSIMD");
  o->sensimd = env && env[0] ? env : SENSIMD_DEFAULT;
  o->grid = 160;
  o->rays = 10000;
  o->rounds = quick ? 5 : 10;
  o->ping_lat = quick ? 400 : 2000;
  o->ping_pipe = quick ? 2000 : 10000;
  o->ping_window = 32;
  o->ray_lat = quick ? 6 : 20;
  o->ray_pipe = quick ? 8 : 20;
  o->ray_window = 4;
  o->e2e_rays = 131072;
  o->e2e_calls = quick ? 4 : 20;
  const char* py = getenv("SENSIM_PYTHON");
  o->python = py && py[0] ? py : BENCH_PYTHON;

  // --pings N: N one-in-flight and 5 N pipelined; --raycasts N: N of each (0: not given)
  unsigned pings = 0, raycasts = 0;
  const bench_opt_t opts[] = {
      {"quick", BENCH_OPT_FLAG, NULL, 0, 0},
      {"sensimd", BENCH_OPT_STRING, &o->sensimd, 0, 0},
      {"daemon-threads", BENCH_OPT_COUNT, &o->daemon_threads, 1, 256},
      {"rays", BENCH_OPT_COUNT, &o->rays, NSAMPLE, 1u << 22},
      {"grid", BENCH_OPT_COUNT, &o->grid, 1, 1000},
      {"rounds", BENCH_OPT_COUNT, &o->rounds, 1, 1000},
      {"pings", BENCH_OPT_COUNT, &pings, 1, 10000000},
      {"raycasts", BENCH_OPT_COUNT, &raycasts, 1, 1000000},
      {"e2e-rays", BENCH_OPT_COUNT, &o->e2e_rays, 1, 1u << 22},
      {"e2e-calls", BENCH_OPT_COUNT, &o->e2e_calls, 1, 10000},
      {"no-e2e", BENCH_OPT_FLAG, NULL, 0, 0},
      {"python", BENCH_OPT_STRING, &o->python, 0, 0},
  };
  int first = bench_parse_options(argc, argv, opts, sizeof opts / sizeof opts[0], g_usage);
  if (pings) {
    o->ping_lat = pings;
    o->ping_pipe = 5 * pings;
  }
  if (raycasts) {
    o->ray_lat = o->ray_pipe = raycasts;
  }
  if (bench_has_arg(argc, argv, "--no-e2e")) {
    o->e2e_rays = 0;
  }
  if (first + 1 == argc) {
    o->sensimd = argv[first];
  } else if (first < argc) {
    fputs(g_usage, stderr);
    exit(2);
  }
}

//---------------- Frames and sockets

// A whole frame: 4-byte little-endian length, then the Envelope bytes.
typedef struct frame {
  uint8_t* data;
  size_t len;
} frame_t;


static frame_t frame_encode(const Sensim__V1__Envelope* env) {
  size_t n = sensim__v1__envelope__get_packed_size(env);
  frame_t f = {.data = bench_xmalloc(4 + n), .len = 4 + n};
  f.data[0] = (uint8_t)n;
  f.data[1] = (uint8_t)(n >> 8);
  f.data[2] = (uint8_t)(n >> 16);
  f.data[3] = (uint8_t)(n >> 24);
  sensim__v1__envelope__pack(env, f.data + 4);
  return f;
}


static void set_nonblocking(int fd, bool on) {
  int fl = fcntl(fd, F_GETFL);
  fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK);
}


// A growable receive buffer.
typedef struct rbuf {
  uint8_t* data;
  size_t cap;
} rbuf_t;

//---------------- Protocol helpers

static uint64_t g_next_id = 1;


// Send env (id assigned here) and return the decoded reply, checking id and an OK status.
static Sensim__V1__Envelope* call(int fd, Sensim__V1__Envelope* env, rbuf_t* b,
                                  const char* what) {
  env->has_id = 1;
  env->id = g_next_id++;
  frame_t f = frame_encode(env);
  if (bench_send_all(fd, f.data, f.len)) {
    bench_die("%s: send failed", what);
  }
  free(f.data);
  long n = bench_recv_frame(fd, &b->data, &b->cap);
  if (n < 0) {
    bench_die("%s: no reply (connection closed)", what);
  }
  Sensim__V1__Envelope* r = sensim__v1__envelope__unpack(NULL, (size_t)n, b->data);
  if (!r) {
    bench_die("%s: reply does not decode", what);
  }
  if (!r->has_id || r->id != env->id) {
    bench_die("%s: reply id %llu, expected %llu", what, (unsigned long long)r->id,
              (unsigned long long)env->id);
  }
  if (r->status && r->status->has_code && r->status->code != 0) {
    bench_die("%s: status %d: %s", what, (int)r->status->code,
              r->status->message ? r->status->message : "");
  }
  return r;
}


static void call_ok(int fd, Sensim__V1__Envelope* env, rbuf_t* b, const char* what) {
  sensim__v1__envelope__free_unpacked(call(fd, env, b, what), NULL);
}

//---------------- The scene (sent to the daemon, traced by brute force for the check)

typedef struct world {
  float* v;
  uint32_t nv;
  uint32_t* idx;
  uint32_t nt;
  double box_center[NBOX][3];
  double box_half[NBOX][3];
} world_t;


static void make_world(world_t* w, unsigned g) {
  w->nv = (g + 1) * (g + 1);
  w->nt = 2 * g * g;
  w->v = bench_xmalloc(3 * sizeof(float) * w->nv);
  w->idx = bench_xmalloc(3 * sizeof(uint32_t) * w->nt);
  bench_terrain(g, TERRAIN_SIZE, w->v, w->idx);
  for (unsigned k = 0; k < NBOX; k++) {
    double a = 1.6 * k + 0.9, r = 8.0 + 3.0 * k;
    double x = r * cos(a), y = r * sin(a);
    w->box_half[k][0] = 2.0;
    w->box_half[k][1] = 0.9;
    w->box_half[k][2] = 0.8;
    w->box_center[k][0] = x;
    w->box_center[k][1] = y;
    w->box_center[k][2] = bench_terrain_height(x, y) + 0.5;
  }
}


static void send_world(int fd, const world_t* w, rbuf_t* b) {
  Sensim__V1__CreateMesh cm = SENSIM__V1__CREATE_MESH__INIT;
  cm.has_id = 1;
  cm.id = 1;
  cm.has_vertices = 1;
  cm.vertices.data = (uint8_t*)w->v;  // little-endian host (x86): the floats are the bytes
  cm.vertices.len = 3 * sizeof(float) * w->nv;
  cm.has_indices = 1;
  cm.indices.data = (uint8_t*)w->idx;
  cm.indices.len = 3 * sizeof(uint32_t) * w->nt;
  Sensim__V1__Envelope env = SENSIM__V1__ENVELOPE__INIT;
  env.body_case = SENSIM__V1__ENVELOPE__BODY_CREATE_MESH;
  env.create_mesh = &cm;
  call_ok(fd, &env, b, "create_mesh");

  for (unsigned k = 0; k <= NBOX; k++) {
    // geometry k + 2 is box k; object 100 is the terrain, 101.. the boxes
    if (k < NBOX) {
      Sensim__V1__Vec3 he = SENSIM__V1__VEC3__INIT;
      he.has_x = he.has_y = he.has_z = 1;
      he.x = w->box_half[k][0];
      he.y = w->box_half[k][1];
      he.z = w->box_half[k][2];
      Sensim__V1__Box box = SENSIM__V1__BOX__INIT;
      box.half_extents = &he;
      Sensim__V1__CreatePrimitive cp = SENSIM__V1__CREATE_PRIMITIVE__INIT;
      cp.has_id = 1;
      cp.id = k + 2;
      cp.shape_case = SENSIM__V1__CREATE_PRIMITIVE__SHAPE_BOX;
      cp.box = &box;
      Sensim__V1__Envelope pe = SENSIM__V1__ENVELOPE__INIT;
      pe.body_case = SENSIM__V1__ENVELOPE__BODY_CREATE_PRIMITIVE;
      pe.create_primitive = &cp;
      call_ok(fd, &pe, b, "create_primitive");
    }
    Sensim__V1__Vec3 pos = SENSIM__V1__VEC3__INIT;
    Sensim__V1__Pose pose = SENSIM__V1__POSE__INIT;
    Sensim__V1__CreateObject co = SENSIM__V1__CREATE_OBJECT__INIT;
    co.has_id = co.has_geometry_id = 1;
    if (k < NBOX) {
      pos.has_x = pos.has_y = pos.has_z = 1;
      pos.x = w->box_center[k][0];
      pos.y = w->box_center[k][1];
      pos.z = w->box_center[k][2];
      pose.position = &pos;
      co.local_pose = &pose;
      co.id = 101 + k;
      co.geometry_id = k + 2;
    } else {
      co.id = 100;
      co.geometry_id = 1;
    }
    Sensim__V1__Envelope oe = SENSIM__V1__ENVELOPE__INIT;
    oe.body_case = SENSIM__V1__ENVELOPE__BODY_CREATE_OBJECT;
    oe.create_object = &co;
    call_ok(fd, &oe, b, "create_object");
  }
}


// A lidar fan from one origin: 32 channels over +-22.5 degrees, as many columns as needed.
static void make_rays(unsigned n, double* org, double* dir) {
  const unsigned channels = 32;
  unsigned columns = (n + channels - 1) / channels;
  double ox = 0.37, oy = 0.21, oz = bench_terrain_height(ox, oy) + 2.0;
  double span = 45.0 * M_PI / 180.0;
  for (unsigned i = 0; i < n; i++) {
    unsigned col = i / channels, ch = i % channels;
    double az = 2.0 * M_PI * col / columns, el = -0.5 * span + span * ch / (channels - 1);
    org[3 * i + 0] = ox;
    org[3 * i + 1] = oy;
    org[3 * i + 2] = oz;
    dir[3 * i + 0] = cos(el) * cos(az);
    dir[3 * i + 1] = cos(el) * sin(az);
    dir[3 * i + 2] = sin(el);
  }
}


// Nearest hit of the float ray (as the daemon traces it) with the triangles and boxes, in
// double; INFINITY on a miss within MAX_RANGE.
static double brute_trace(const world_t* w, const double od[3], const double dd[3]) {
  double o[3], d[3];
  for (int k = 0; k < 3; k++) {
    o[k] = (float)od[k];
    d[k] = (float)dd[k];
  }
  double best = MAX_RANGE;
  bool hit = false;
  for (uint32_t t = 0; t < w->nt; t++) {
    const float* a = w->v + 3 * w->idx[3 * t];
    const float* b = w->v + 3 * w->idx[3 * t + 1];
    const float* c = w->v + 3 * w->idx[3 * t + 2];
    double e1[3] = {b[0] - a[0], b[1] - a[1], b[2] - a[2]};
    double e2[3] = {c[0] - a[0], c[1] - a[1], c[2] - a[2]};
    double p[3] = {d[1] * e2[2] - d[2] * e2[1], d[2] * e2[0] - d[0] * e2[2],
                   d[0] * e2[1] - d[1] * e2[0]};
    double det = e1[0] * p[0] + e1[1] * p[1] + e1[2] * p[2];
    if (fabs(det) < 1e-18) {
      continue;
    }
    double s[3] = {o[0] - a[0], o[1] - a[1], o[2] - a[2]};
    double u = (s[0] * p[0] + s[1] * p[1] + s[2] * p[2]) / det;
    if (u < 0.0 || u > 1.0) {
      continue;
    }
    double q[3] = {s[1] * e1[2] - s[2] * e1[1], s[2] * e1[0] - s[0] * e1[2],
                   s[0] * e1[1] - s[1] * e1[0]};
    double v = (d[0] * q[0] + d[1] * q[1] + d[2] * q[2]) / det;
    if (v < 0.0 || u + v > 1.0) {
      continue;
    }
    double tt = (e2[0] * q[0] + e2[1] * q[1] + e2[2] * q[2]) / det;
    if (tt > 0.0 && tt <= best) {
      best = tt;
      hit = true;
    }
  }
  for (unsigned k = 0; k < NBOX; k++) {
    double t0 = 0.0, t1 = best;
    bool in = true;
    for (int a = 0; a < 3 && in; a++) {
      double lo = w->box_center[k][a] - w->box_half[k][a];
      double hi = w->box_center[k][a] + w->box_half[k][a];
      if (d[a] == 0.0) {
        in = o[a] >= lo && o[a] <= hi;
        continue;
      }
      double ta = (lo - o[a]) / d[a], tb = (hi - o[a]) / d[a];
      t0 = fmax(t0, fmin(ta, tb));
      t1 = fmin(t1, fmax(ta, tb));
      in = t0 <= t1;
    }
    if (in && t0 > 0.0) {
      best = t0;
      hit = true;
    }
  }
  return hit ? best : INFINITY;
}

//---------------- The raw-socket reference server

typedef struct echo {
  int listener;
  int port;
  pthread_t thread;
  // request payload length -> recorded daemon reply frame
  size_t req_len[2];
  frame_t reply[2];
  unsigned nreply;
} echo_t;


static void* echo_main(void* arg) {
  echo_t* e = arg;
  int fd = accept(e->listener, NULL, NULL);
  if (fd < 0) {
    return NULL;
  }
  bench_set_nodelay(fd);
  rbuf_t b = {0};
  for (;;) {
    long n = bench_recv_frame(fd, &b.data, &b.cap);
    if (n < 0) {
      break;
    }
    unsigned k = 0;
    while (k < e->nreply && e->req_len[k] != (size_t)n) {
      k++;
    }
    if (k == e->nreply || bench_send_all(fd, e->reply[k].data, e->reply[k].len)) {
      break;
    }
  }
  free(b.data);
  close(fd);
  return NULL;
}


static void echo_start(echo_t* e) {
  e->listener = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (e->listener < 0 || bind(e->listener, (struct sockaddr*)&a, sizeof a) != 0 ||
      listen(e->listener, 1) != 0 || getsockname(e->listener, (struct sockaddr*)&a, &len) != 0) {
    bench_die("reference server: %s", strerror(errno));
  }
  e->port = ntohs(a.sin_port);
  if (pthread_create(&e->thread, NULL, echo_main, e) != 0) {
    bench_die("reference server: pthread_create failed");
  }
}

//---------------- Measurements

// Length check of a timed reply: the recorded length give or take a few varint bytes.
static void check_len(size_t got, size_t want, const char* path) {
  if (got + LEN_SLACK < want || got > want + LEN_SLACK) {
    bench_die("%s: reply of %zu bytes, expected about %zu (an error status?)", path, got, want);
  }
}


// n requests one at a time; round trips in microseconds appended to lat.
static void run_latency(int fd, const frame_t* req, size_t reply_len, unsigned n, double* lat,
                        rbuf_t* b, const char* path) {
  for (unsigned i = 0; i < n; i++) {
    double t0 = bench_now();
    if (bench_send_all(fd, req->data, req->len)) {
      bench_die("%s: send failed", path);
    }
    long k = bench_recv_frame(fd, &b->data, &b->cap);
    lat[i] = (bench_now() - t0) * 1e6;
    if (k < 0) {
      bench_die("%s: connection closed", path);
    }
    check_len((size_t)k, reply_len, path);
  }
}


// n requests with up to `window` in flight; returns the elapsed seconds.
static double run_pipelined(int fd, const frame_t* req, size_t reply_len, unsigned n,
                            unsigned window, const char* path) {
  static uint8_t in[1 << 20];
  set_nonblocking(fd, true);
  unsigned sent = 0, got = 0;
  size_t off = 0;          // bytes of the request being sent
  uint8_t hdr[4];
  size_t hgot = 0;         // header bytes of the reply being received
  size_t body_left = 0;
  double t0 = bench_now();
  while (got < n) {
    bool want_send = sent < n && sent - got < window;
    struct pollfd pf = {.fd = fd, .events = (short)(POLLIN | (want_send ? POLLOUT : 0))};
    int pr = poll(&pf, 1, IO_TIMEOUT_MS);
    if (pr < 0 && errno == EINTR) {
      continue;
    }
    if (pr <= 0) {
      bench_die("%s: no progress for %d ms (%u sent, %u received)", path, IO_TIMEOUT_MS, sent, got);
    }
    while ((pf.revents & POLLOUT) && sent < n && sent - got < window) {
      ssize_t k = send(fd, req->data + off, req->len - off, MSG_NOSIGNAL);
      if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        break;
      }
      if (k <= 0) {
        bench_die("%s: send failed: %s", path, strerror(errno));
      }
      off += (size_t)k;
      if (off == req->len) {
        off = 0;
        sent++;
      }
    }
    // drain what has arrived, then go back to sending
    while (pf.revents & (POLLIN | POLLHUP | POLLERR)) {
      ssize_t k = recv(fd, in, sizeof in, 0);
      if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        break;
      }
      if (k <= 0) {
        bench_die("%s: connection closed", path);
      }
      for (size_t pos = 0; pos < (size_t)k;) {
        if (hgot < 4) {
          hdr[hgot++] = in[pos++];
          if (hgot == 4) {
            body_left = bench_le32(hdr);
            check_len(body_left, reply_len, path);
          }
          continue;
        }
        size_t take = (size_t)k - pos < body_left ? (size_t)k - pos : body_left;
        pos += take;
        body_left -= take;
        if (body_left == 0) {
          hgot = 0;
          got++;
        }
      }
    }
  }
  double dt = bench_now() - t0;
  set_nonblocking(fd, false);
  return dt;
}


enum { PATH_SENSIM, PATH_RAW, NPATH };
static const char* const g_path_names[NPATH] = {"sensimd", "raw-echo"};

typedef struct workload {
  const char* name;
  frame_t req;
  size_t reply_len;      // payload bytes of the recorded reply
  unsigned lat_n;        // per path and round
  unsigned pipe_n;
  unsigned window;
  double* lat[NPATH];    // rounds * lat_n samples, us
  double* med[NPATH];    // median latency per round, us
  double* pipe[NPATH];   // req/s per round
  double* seq[NPATH];    // one-in-flight req/s per round
} workload_t;


static void workload_round(workload_t* wl, const int fds[NPATH], unsigned round, rbuf_t* b) {
  for (int p = 0; p < NPATH; p++) {
    // alternate which path goes first
    int path = (int)((p + round) % NPATH);
    double* lat = wl->lat[path] + (size_t)round * wl->lat_n;
    double t0 = bench_now();
    run_latency(fds[path], &wl->req, wl->reply_len, wl->lat_n, lat, b, g_path_names[path]);
    wl->seq[path][round] = wl->lat_n / (bench_now() - t0);
    double* tmp = bench_xmalloc(sizeof(double) * wl->lat_n);
    memcpy(tmp, lat, sizeof(double) * wl->lat_n);
    wl->med[path][round] = bench_median(tmp, wl->lat_n);
    free(tmp);
    double dt = run_pipelined(fds[path], &wl->req, wl->reply_len, wl->pipe_n, wl->window,
                              g_path_names[path]);
    wl->pipe[path][round] = wl->pipe_n / dt;
  }
}


static void workload_report(workload_t* wl, unsigned rounds) {
  double p99[NPATH];
  size_t nlat = (size_t)rounds * wl->lat_n;
  double rmed = bench_median_ratio(wl->med[0], wl->med[1], rounds);
  double rseq = bench_median_ratio(wl->seq[0], wl->seq[1], rounds);
  double rpipe = bench_median_ratio(wl->pipe[0], wl->pipe[1], rounds);
  for (int p = 0; p < NPATH; p++) {
    p99[p] = bench_percentile(wl->lat[p], nlat, 99.0);
    double med = bench_median(wl->lat[p], nlat);
    double seq = bench_median(wl->seq[p], rounds);
    double pipe = bench_median(wl->pipe[p], rounds);
    printf("%-8s %-9s %12.1f %10.1f %14.0f %16.0f\n", wl->name, g_path_names[p], med, p99[p],
           seq, pipe);
  }
  printf("%-8s %-9s %12.2f %10.2f %14.3f %16.3f\n", wl->name, "ratio", rmed, p99[0] / p99[1],
         rseq, rpipe);
}

//---------------- End to end: the Python client against tracing in this process

// The world of send_world, built in this process.
static env_t* build_env(const world_t* w, scene_device_t* dev, pool_t* pool, unsigned nray) {
  env_limits_t lim = env_default_limits();
  if (lim.max_raycast_rays < nray) {
    lim.max_raycast_rays = nray;
  }
  err_msg_t msg;
  env_t* e = env_create("bench_e2e", &lim, dev, pool, &msg);
  if (!e) {
    bench_die("env_create: %s", msg.text);
  }
  mesh_desc_t md = {
      .id = 1,
      .vertices = (const uint8_t*)w->v,
      .vertices_len = 3 * sizeof(float) * w->nv,
      .indices = (const uint8_t*)w->idx,
      .indices_len = 3 * sizeof(uint32_t) * w->nt,
  };
  if (env_create_mesh(e, &md, &msg)) {
    bench_die("env_create_mesh: %s", msg.text);
  }
  object_desc_t od = {.id = 100, .geometry_id = 1, .local_pose = xform_identity()};
  for (int i = 0; i < 3; i++) {
    od.scale[i] = 1.0;
  }
  if (env_create_object(e, &od, &msg)) {
    bench_die("env_create_object: %s", msg.text);
  }
  for (unsigned k = 0; k < NBOX; k++) {
    prim_desc_t pd = {.id = k + 2, .kind = SCENE_PRIM_BOX};
    memcpy(pd.size, w->box_half[k], sizeof pd.size);
    if (env_create_primitive(e, &pd, &msg)) {
      bench_die("env_create_primitive: %s", msg.text);
    }
    od.id = 101 + k;
    od.geometry_id = k + 2;
    memcpy(od.local_pose.p, w->box_center[k], sizeof od.local_pose.p);
    if (env_create_object(e, &od, &msg)) {
      bench_die("env_create_object: %s", msg.text);
    }
  }
  return e;
}


// Seconds of one env_raycast of the n rays into hits.
static double trace_inprocess(env_t* e, const double* org, const double* dir, unsigned n,
                              scene_hit_t* hits) {
  env_raycast_t r = {.nray = n, .origins = org, .directions = dir, .max_range = MAX_RANGE};
  err_msg_t msg;
  double t0 = bench_now();
  if (env_raycast(e, &r, hits, &msg)) {
    bench_die("env_raycast: %s", msg.text);
  }
  return bench_now() - t0;
}


static void write_file(const char* path, const void* data, size_t len) {
  FILE* f = fopen(path, "wb");
  if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
    bench_die("cannot write %s: %s", path, strerror(errno));
  }
}


// bench_e2e.py running against the daemon's environment, driven line by line.
typedef struct py_child {
  pid_t pid;
  FILE* to;     // its stdin: "go" per timed call, "end"
  FILE* from;   // its stdout: "ready", then "e2e_seconds S" per call
} py_child_t;


static void py_start(py_child_t* c, const options_t* o, int port, const char* env_name,
                     const char* rays_path, const char* hits_path) {
  int in[2], out[2];
  if (pipe(in) != 0 || pipe(out) != 0) {
    bench_die("pipe: %s", strerror(errno));
  }
  char port_s[16], range_s[32];
  snprintf(port_s, sizeof port_s, "%d", port);
  snprintf(range_s, sizeof range_s, "%.17g", MAX_RANGE);
  const char* argv[] = {o->python, BENCH_E2E_SCRIPT, "--port", port_s, "--environment",
                        env_name, "--rays", rays_path, "--hits", hits_path, "--max-range",
                        range_s, NULL};
  c->pid = fork();
  if (c->pid < 0) {
    bench_die("fork: %s", strerror(errno));
  }
  if (c->pid == 0) {
    dup2(in[0], STDIN_FILENO);
    dup2(out[1], STDOUT_FILENO);
    close(in[0]);
    close(in[1]);
    close(out[0]);
    close(out[1]);
    const char* old = getenv("PYTHONPATH");
    char path[4096];
    snprintf(path, sizeof path, "%s%s%s", BENCH_PYTHONPATH, old && old[0] ? ":" : "",
             old ? old : "");
    setenv("PYTHONPATH", path, 1);
    execvp(o->python, (char* const*)argv);
    fprintf(stderr, "bench_session: cannot run %s: %s\n", o->python, strerror(errno));
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  c->to = fdopen(in[1], "w");
  c->from = fdopen(out[0], "r");
  if (!c->to || !c->from) {
    bench_die("fdopen: %s", strerror(errno));
  }
  char line[256];
  if (!fgets(line, sizeof line, c->from) || strncmp(line, "ready", 5) != 0) {
    bench_die("%s %s did not start (see its output above)", o->python, BENCH_E2E_SCRIPT);
  }
}


// One timed call through the Python client; its seconds.
static double py_call(py_child_t* c) {
  char line[256];
  double v;
  if (fputs("go\n", c->to) == EOF || fflush(c->to) != 0 || !fgets(line, sizeof line, c->from) ||
      sscanf(line, "e2e_seconds %lf", &v) != 1) {
    bench_die("%s stopped answering", BENCH_E2E_SCRIPT);
  }
  return v;
}


// Let it write the last call's hits and exit.
static void py_end(py_child_t* c) {
  fputs("end\n", c->to);
  fclose(c->to);
  fclose(c->from);
  int status = 0;
  waitpid(c->pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    bench_die("%s failed (status %d)", BENCH_E2E_SCRIPT,
              WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  }
}


// Rays whose hits_bytes record (48 bytes: distance, normal, object id, label) differs from
// the in-process hit in any bit.
static unsigned compare_hits(const char* hits_path, const scene_hit_t* hits, unsigned n) {
  FILE* f = fopen(hits_path, "rb");
  if (!f) {
    bench_die("cannot read %s: %s", hits_path, strerror(errno));
  }
  unsigned bad = 0;
  uint8_t rec[48];
  for (unsigned i = 0; i < n; i++) {
    if (fread(rec, 1, sizeof rec, f) != sizeof rec) {
      bench_die("%s: %u records, expected %u", hits_path, i, n);
    }
    uint32_t ids[2] = {hits[i].object_id, hits[i].label};
    bad += memcmp(rec, &hits[i].distance, 8) != 0 || memcmp(rec + 8, hits[i].normal, 24) != 0 ||
           memcmp(rec + 32, ids, 8) != 0;
  }
  fclose(f);
  return bad;
}


// The end-to-end part; returns whether its check passed.
static bool run_e2e(const options_t* o, const world_t* w, int port, const char* env_name,
                    unsigned threads) {
  unsigned n = o->e2e_rays;
  double* rays = bench_xmalloc(6 * sizeof(double) * n);
  make_rays(n, rays, rays + 3 * (size_t)n);
  char rays_path[] = "/tmp/bench_e2e_rays_XXXXXX", hits_path[] = "/tmp/bench_e2e_hits_XXXXXX";
  int fd1 = mkstemp(rays_path), fd2 = mkstemp(hits_path);
  if (fd1 < 0 || fd2 < 0) {
    bench_die("mkstemp: %s", strerror(errno));
  }
  close(fd1);
  close(fd2);
  write_file(rays_path, rays, 6 * sizeof(double) * n);

  err_msg_t msg;
  scene_device_t* dev = scene_device_create(&msg);
  if (!dev) {
    bench_die("scene_device_create: %s", msg.text);
  }
  pool_t* pool = pool_create(threads ? threads : 1);
  if (!pool) {
    bench_die("pool_create(%u) failed", threads);
  }
  env_t* e = build_env(w, dev, pool, n);
  scene_hit_t* hits = bench_xmalloc(sizeof(scene_hit_t) * n);

  // pairs of calls, alternating which side goes first (each side warmed up once)
  unsigned calls = o->e2e_calls;
  double* inproc = bench_xmalloc(sizeof(double) * calls);
  double* e2e = bench_xmalloc(sizeof(double) * calls);
  py_child_t py;
  py_start(&py, o, port, env_name, rays_path, hits_path);
  trace_inprocess(e, rays, rays + 3 * (size_t)n, n, hits);
  for (unsigned i = 0; i < calls; i++) {
    if (i % 2) {
      e2e[i] = py_call(&py);
    }
    inproc[i] = trace_inprocess(e, rays, rays + 3 * (size_t)n, n, hits);
    if (i % 2 == 0) {
      e2e[i] = py_call(&py);
    }
  }
  py_end(&py);
  double ratio = bench_median_ratio(inproc, e2e, calls);
  unsigned bad = compare_hits(hits_path, hits, n);
  unsigned nhit = 0;
  for (unsigned i = 0; i < n; i++) {
    nhit += isfinite(hits[i].distance) != 0;
  }

  double t_in = bench_median(inproc, calls), t_py = bench_median(e2e, calls);
  char c1[32];
  printf("\ne2e: raycast of %s rays (%u hit), in this process (env_raycast, %u threads) and "
         "through the Python client (%s), %u calls each, in alternating pairs\n",
         bench_count(n, c1), nhit, threads, BENCH_E2E_SCRIPT, calls);
  printf("%-10s %12s %12s\n", "path", "median ms", "Mrays/s");
  printf("%-10s %12.2f %12.2f\n", "in-process", 1e3 * t_in, n / t_in / 1e6);
  printf("%-10s %12.2f %12.2f\n", "python", 1e3 * t_py, n / t_py / 1e6);
  printf("check e2e: Python hits equal the in-process hits bit for bit: %u of %u differ: %s\n",
         bad, n, bad == 0 ? "PASS" : "FAIL");
  printf("(ratio: median of the pairs' in-process time over Python time)\n");
  printf("BENCH e2e_python_over_inprocess %.3f x\n", ratio);

  unlink(rays_path);
  unlink(hits_path);
  free(inproc);
  free(e2e);
  free(hits);
  free(rays);
  env_destroy(e);
  pool_destroy(pool);
  scene_device_destroy(dev);
  return bad == 0 && nhit > 0;
}

//---------------- Main

int main(int argc, char** argv) {
  bench_init("bench_session", bench_daemon_kill);
  options_t opt;
  parse_options(argc, argv, &opt);
  signal(SIGPIPE, SIG_IGN);
  alarm(opt.quick ? 240 : 1800);

  world_t w;
  make_world(&w, opt.grid);
  bench_daemon_t d;
  char daemon_threads[16];
  snprintf(daemon_threads, sizeof daemon_threads, "%u", opt.daemon_threads);
  const char* extra[] = {opt.daemon_threads ? "--threads" : NULL, daemon_threads, NULL};
  bench_daemon_start(&d, opt.sensimd, extra, IO_TIMEOUT_MS);
  echo_t echo = {0};
  echo_start(&echo);

  // handshake and scene
  rbuf_t b = {0};
  int sfd = bench_connect_loopback(d.port, IO_TIMEOUT_MS);
  Sensim__V1__Hello hello = SENSIM__V1__HELLO__INIT;
  hello.has_protocol_version = 1;
  hello.protocol_version = SENSIM__V1__PROTOCOL_VERSION__PROTOCOL_VERSION;
  hello.client_name = "bench_session";
  hello.environment = "bench_session";
  Sensim__V1__Envelope env = SENSIM__V1__ENVELOPE__INIT;
  env.body_case = SENSIM__V1__ENVELOPE__BODY_HELLO;
  env.hello = &hello;
  Sensim__V1__Envelope* hr = call(sfd, &env, &b, "hello");
  unsigned threads = hr->hello_reply && hr->hello_reply->has_threads ? hr->hello_reply->threads
                                                                     : 0;
  sensim__v1__envelope__free_unpacked(hr, NULL);
  send_world(sfd, &w, &b);

  // the two requests, encoded once: every timed request is the same bytes
  uint8_t payload[PING_PAYLOAD];
  for (int i = 0; i < PING_PAYLOAD; i++) {
    payload[i] = (uint8_t)(i * 7 + 1);
  }
  Sensim__V1__Ping ping = SENSIM__V1__PING__INIT;
  ping.has_payload = 1;
  ping.payload.data = payload;
  ping.payload.len = PING_PAYLOAD;
  Sensim__V1__Envelope pe = SENSIM__V1__ENVELOPE__INIT;
  pe.body_case = SENSIM__V1__ENVELOPE__BODY_PING;
  pe.ping = &ping;
  Sensim__V1__Envelope* pr = call(sfd, &pe, &b, "ping");
  bool ok_ping = pr->body_case == SENSIM__V1__ENVELOPE__BODY_PONG && pr->pong->has_payload &&
                 pr->pong->payload.len == PING_PAYLOAD &&
                 memcmp(pr->pong->payload.data, payload, PING_PAYLOAD) == 0;
  sensim__v1__envelope__free_unpacked(pr, NULL);

  unsigned nray = opt.rays;
  double* org = bench_xmalloc(3 * sizeof(double) * nray);
  double* dir = bench_xmalloc(3 * sizeof(double) * nray);
  make_rays(nray, org, dir);
  Sensim__V1__Raycast rc = SENSIM__V1__RAYCAST__INIT;
  rc.n_origins = rc.n_directions = 3 * (size_t)nray;
  rc.origins = org;
  rc.directions = dir;
  rc.has_max_range = 1;
  rc.max_range = MAX_RANGE;
  Sensim__V1__Envelope re = SENSIM__V1__ENVELOPE__INIT;
  re.body_case = SENSIM__V1__ENVELOPE__BODY_RAYCAST;
  re.raycast = &rc;
  Sensim__V1__Envelope* rr = call(sfd, &re, &b, "raycast");
  bool ok_ray = rr->body_case == SENSIM__V1__ENVELOPE__BODY_RAYCAST_RESULT &&
                rr->raycast_result->n_distances == nray;
  unsigned nhit = 0, nbad = 0;
  double max_diff = 0.0;
  if (ok_ray) {
    const double* dist = rr->raycast_result->distances;
    for (unsigned i = 0; i < nray; i++) {
      nhit += isfinite(dist[i]) != 0;
    }
    for (unsigned s = 0; s < NSAMPLE; s++) {
      unsigned i = (unsigned)((uint64_t)s * nray / NSAMPLE) + s % 32;  // every channel
      i = i < nray ? i : nray - 1;
      double want = brute_trace(&w, org + 3 * i, dir + 3 * i);
      bool same = isinf(want) ? isinf(dist[i]) : fabs(dist[i] - want) <= 1e-3 + 1e-5 * want;
      nbad += !same;
      if (same && isfinite(want)) {
        max_diff = fmax(max_diff, fabs(dist[i] - want));
      }
    }
    ok_ray = nhit > 0 && nbad == 0;
  }
  sensim__v1__envelope__free_unpacked(rr, NULL);

  // requests with a fixed id, and the daemon's replies to them, recorded for the reference
  workload_t wls[2] = {
      {.name = "ping", .lat_n = opt.ping_lat, .pipe_n = opt.ping_pipe,
       .window = opt.ping_window},
      {.name = "raycast", .lat_n = opt.ray_lat, .pipe_n = opt.ray_pipe,
       .window = opt.ray_window},
  };
  Sensim__V1__Envelope* reqs[2] = {&pe, &re};
  for (int k = 0; k < 2; k++) {
    reqs[k]->id = 1000000 + (uint64_t)k;
    wls[k].req = frame_encode(reqs[k]);
    if (bench_send_all(sfd, wls[k].req.data, wls[k].req.len)) {
      bench_die("send failed");
    }
    long n = bench_recv_frame(sfd, &b.data, &b.cap);
    if (n < 0) {
      bench_die("no reply");
    }
    wls[k].reply_len = (size_t)n;
    echo.req_len[k] = wls[k].req.len - 4;
    echo.reply[k].len = 4 + (size_t)n;
    echo.reply[k].data = bench_xmalloc(4 + (size_t)n);
    uint8_t h[4] = {(uint8_t)n, (uint8_t)(n >> 8), (uint8_t)(n >> 16), (uint8_t)(n >> 24)};
    memcpy(echo.reply[k].data, h, 4);
    memcpy(echo.reply[k].data + 4, b.data, (size_t)n);
    echo.nreply++;
    for (int p = 0; p < NPATH; p++) {
      wls[k].lat[p] = bench_xmalloc(sizeof(double) * opt.rounds * wls[k].lat_n);
      wls[k].med[p] = bench_xmalloc(sizeof(double) * opt.rounds);
      wls[k].pipe[p] = bench_xmalloc(sizeof(double) * opt.rounds);
      wls[k].seq[p] = bench_xmalloc(sizeof(double) * opt.rounds);
    }
  }
  int fds[NPATH] = {sfd, bench_connect_loopback(echo.port, IO_TIMEOUT_MS)};

  char c1[32], c2[32], c3[32], c4[32];
  printf("bench_session%s: %s (pid %d, port %d, %u threads), reference: raw-socket thread "
         "answering the recorded reply bytes\n",
         opt.quick ? " --quick" : "", opt.sensimd, (int)d.pid, d.port, threads);
  printf("ping: %d-byte payload, frames %zu -> %zu bytes; raycast: %s rays into %s triangles + "
         "%d boxes, frames %s -> %s bytes\n",
         PING_PAYLOAD, wls[0].req.len, 4 + wls[0].reply_len, bench_count(nray, c1),
         bench_count(w.nt, c2), NBOX, bench_count(wls[1].req.len, c3),
         bench_count(4 + wls[1].reply_len, c4));
  printf("check ping: pong echoes the payload: %s\n", ok_ping ? "PASS" : "FAIL");
  printf("check raycast: %u of %u rays hit; %d sampled rays vs brute force: %u differ, max "
         "|diff| %.2g m: %s\n",
         nhit, nray, NSAMPLE, nbad, max_diff, ok_ray ? "PASS" : "FAIL");

  // warm-up, then interleaved rounds
  for (int k = 0; k < 2; k++) {
    double* tmp = bench_xmalloc(sizeof(double) * 20);
    for (int p = 0; p < NPATH; p++) {
      run_latency(fds[p], &wls[k].req, wls[k].reply_len, k == 0 ? 20 : 3, tmp, &b,
                  g_path_names[p]);
    }
    free(tmp);
  }
  for (unsigned round = 0; round < opt.rounds; round++) {
    for (int k = 0; k < 2; k++) {
      workload_round(&wls[k], fds, round, &b);
    }
  }

  printf("\n%-8s %-9s %12s %10s %14s %16s\n", "request", "path", "median us", "p99 us",
         "req/s (1)", "req/s (window)");
  for (int k = 0; k < 2; k++) {
    workload_report(&wls[k], opt.rounds);
  }
  printf("(%u rounds, paths alternating; latency over all %u + %u samples per path; req/s (1): "
         "one in flight, req/s (window): %u pings / %u raycasts in flight, median of rounds;\n"
         " ratio = sensimd / raw-echo (median and req/s: median of per-round paired ratios): "
         "latency > 1 and req/s < 1 mean sensimd is slower)\n",
         opt.rounds, opt.rounds * wls[0].lat_n, opt.rounds * wls[1].lat_n, opt.ping_window,
         opt.ray_window);

  bool ok_e2e = true;
  if (opt.e2e_rays) {
    ok_e2e = run_e2e(&opt, &w, d.port, "bench_session", threads);
  }

  // shutdown
  close(fds[1]);
  pthread_join(echo.thread, NULL);
  close(echo.listener);
  close(sfd);
  int status = bench_daemon_stop(&d);
  printf("sensimd stopped with SIGTERM: exit status %d\n", status);
  bool ok = ok_ping && ok_ray && ok_e2e && status == 0;
  printf("checks: %s\n", ok ? "PASS" : "FAIL");

  for (int k = 0; k < 2; k++) {
    free(wls[k].req.data);
    free(echo.reply[k].data);
    for (int p = 0; p < NPATH; p++) {
      free(wls[k].lat[p]);
      free(wls[k].med[p]);
      free(wls[k].pipe[p]);
      free(wls[k].seq[p]);
    }
  }
  free(b.data);
  free(org);
  free(dir);
  free(w.v);
  free(w.idx);
  return ok ? 0 : 1;
}
