// SPDX-License-Identifier: MIT
// bench_client.c: the C client (client-c, linked statically) against a real sensimd over
// loopback, each figure a ratio to a reference measured in this process in the same run.
//
//   BENCH c_step_rtt_over_ping     UpdateState + Step (sensim_update_and_step, blocking, one
//        IMU, one encoder, one cone) over a raw TCP ping-pong of the same request and reply
//        byte counts through an echo thread of this process (median of paired ratios), the
//        worse of two placements that pin the echo thread where the daemon runs:
//   BENCH c_step_rtt_over_ping_one_core    this thread, the daemon and the echo on one CPU
//   BENCH c_step_rtt_over_ping_two_cores   this thread on one CPU, the daemon and the echo on
//        another (the shape of a deployment; every round trip also pays the host's cross-core
//        wake-ups, on both sides)
//   BENCH c_step_rtt_over_daemon_ping   the same tick over a Ping through the same client, in
//        the worse placement
//   BENCH c_step_client_cpu_us     CPU microseconds of this thread per blocking tick, one core:
//        the client's encoding, filing and decoding, and its socket calls (loopback TCP
//        included); c_step_client_cpu_two_cores_us the same on two cores, where its sends also
//        wake the daemon's core
//   BENCH c_step_sensors_us        one core: a tick's median over the same tick in an
//        environment without sensors (a second pass, each tick after a Ping; a line before
//        splits the tick's time above a Ping into the sensorless tick's and the sensors')
//   BENCH c_pipelined_steps_per_s_over_blocking   ticks per second with four ticks in flight
//        (sensim_update_and_step_send, waits) over blocking ticks
//   BENCH c_pipelined_with_work_over_blocking   the same when the engine computes for 30 us
//        per tick (a busy loop standing in for its physics): what pipelining is for
//   BENCH c_raycast_e2e_over_inprocess   a raycast of 131,072 rays through sensim_raycast over
//        env_raycast on the same scene in this process with as many threads as the daemon, from
//        the one origin the client sends (median of paired ratios, the kinds of call in turn);
//        the hits must agree bit for bit. The tracing threads are pinned alike on both sides
//        (--float: not): see trace_placement_t
//   BENCH c_raycast_ceiling_over_inprocess   the same in-process trace over that trace made
//        while a thread of this process moves the raycast's request and reply bytes through
//        a loopback TCP connection to an echo thread: what no client and daemon can beat here
//   BENCH c_raycast_cpu_over_inprocess   CPU time of the in-process trace over that of the
//        raycast through the client (the client's thread and every thread of the daemon):
//        not moved by where the scheduler puts the threads
//   BENCH c_update_state_copies    bytes the client itself copies per body of an UpdateState:
//        the bytes it hands to the kernel from memory other than the caller's arrays, beyond
//        those of one body, per extra body (sendmsg is wrapped at link time to see where each
//        byte of each iovec comes from)
//
//   bench_client [--quick] [--sensimd PATH] [--rounds N] [--bodies N] [--rays N] [--calls N]
//                [--float]
//
// --quick runs few iterations and checks only the cross-checks (ctest, label bench): every
// step's records (kinds and values), pipelined results in order, the hits against the
// in-process trace, every byte of the bodies sent from the caller's arrays, a blocking tick's
// calls (one send, no poll before the recv).
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <sensim/sensim.h>

#include "base/pool.h"
#include "bench_util.h"
#include "daemon/exec.h"
#include "scene/scene.h"
#include "world/env.h"

#ifndef SENSIMD_DEFAULT
#define SENSIMD_DEFAULT "sensimd"
#endif

#define IO_TIMEOUT_MS 60000
#define TERRAIN_SIZE 200.0  // m
#define MAX_RANGE 120.0     // m
#define NBOX 4
#define WINDOW 4            // ticks in flight
#define WORK_US 30.0        // the engine's own work per tick in the second pipelined figure

//---------------- Where the client's bytes come from (sendmsg, send, recv wrapped)

ssize_t __real_sendmsg(int fd, const struct msghdr* m, int flags);
ssize_t __real_send(int fd, const void* p, size_t n, int flags);
ssize_t __real_recv(int fd, void* p, size_t n, int flags);
ssize_t __wrap_sendmsg(int fd, const struct msghdr* m, int flags);
ssize_t __wrap_send(int fd, const void* p, size_t n, int flags);
ssize_t __wrap_recv(int fd, void* p, size_t n, int flags);
int __real_poll(struct pollfd* fds, nfds_t n, int timeout);
int __wrap_poll(struct pollfd* fds, nfds_t n, int timeout);

typedef struct range {
  const uint8_t* p;
  size_t n;
} range_t;

static struct {
  int on;
  range_t caller[8];        // the caller's arrays
  int ncaller;
  uint64_t from_caller;     // bytes sent straight from them
  uint64_t from_client;     // bytes sent from anything else (the client's own buffers)
  uint64_t received;
  unsigned sends, recvs, polls;  // calls
} g_io;


static int in_caller(const void* p) {
  for (int i = 0; i < g_io.ncaller; i++) {
    if ((const uint8_t*)p >= g_io.caller[i].p &&
        (const uint8_t*)p < g_io.caller[i].p + g_io.caller[i].n) {
      return 1;
    }
  }
  return 0;
}


ssize_t __wrap_sendmsg(int fd, const struct msghdr* m, int flags) {
  ssize_t n = __real_sendmsg(fd, m, flags);
  g_io.sends += g_io.on;
  if (g_io.on && n > 0) {
    size_t left = (size_t)n;
    for (size_t i = 0; i < m->msg_iovlen && left > 0; i++) {
      size_t k = m->msg_iov[i].iov_len < left ? m->msg_iov[i].iov_len : left;
      *(in_caller(m->msg_iov[i].iov_base) ? &g_io.from_caller : &g_io.from_client) += k;
      left -= k;
    }
  }
  return n;
}


ssize_t __wrap_send(int fd, const void* p, size_t n, int flags) {
  ssize_t k = __real_send(fd, p, n, flags);
  g_io.sends += g_io.on;
  if (g_io.on && k > 0) {
    *(in_caller(p) ? &g_io.from_caller : &g_io.from_client) += (uint64_t)k;
  }
  return k;
}


ssize_t __wrap_recv(int fd, void* p, size_t n, int flags) {
  ssize_t k = __real_recv(fd, p, n, flags);
  g_io.recvs += g_io.on;
  if (g_io.on && k > 0) {
    g_io.received += (uint64_t)k;
  }
  return k;
}


int __wrap_poll(struct pollfd* fds, nfds_t n, int timeout) {
  g_io.polls += g_io.on;
  return __real_poll(fds, n, timeout);
}


static void track(const range_t* r, int n) {
  memset(&g_io, 0, sizeof(g_io));
  for (int i = 0; i < n; i++) {
    g_io.caller[i] = r[i];
  }
  g_io.ncaller = n;
  g_io.on = 1;
}

//---------------- Options

typedef struct options {
  int quick;
  const char* sensimd;
  unsigned rounds;          // step round trips per path
  unsigned pipe_rounds;     // rounds of blocking and pipelined ticks
  unsigned pipe_ticks;      // ticks per round
  unsigned bodies;          // bodies of the copies measurement
  unsigned rays;            // rays of the end-to-end raycast
  unsigned calls;           // timed raycasts per side
  int float_threads;        // the raycast's tracing threads left where the scheduler puts them
} options_t;

static const char* const g_usage =
    "Usage: bench_client [OPTIONS]\n"
    "The C client against a real sensimd on loopback, as ratios to references measured here.\n"
    "\n"
    "  --quick          few iterations; only the cross-checks matter\n"
    "  --sensimd PATH   the daemon (default: $SENSIMD, else the one built with this)\n"
    "  --rounds N       step round trips per path (default 3000)\n"
    "  --bodies N       bodies of the UpdateState copies measurement (default 10000)\n"
    "  --rays N         rays of the end-to-end raycast (default 131072)\n"
    "  --calls N        timed raycasts per side (default 20)\n"
    "  --float          leave the raycast's tracing threads unpinned on both sides\n";


static void parse_options(int argc, char** argv, options_t* o) {
  memset(o, 0, sizeof(*o));
  o->quick = bench_has_arg(argc, argv, "--quick");
  const char* env = getenv("SENSIMD");
  o->sensimd = env && env[0] ? env : SENSIMD_DEFAULT;
  o->rounds = o->quick ? 50 : 3000;
  o->pipe_rounds = o->quick ? 2 : 10;
  o->pipe_ticks = o->quick ? 40 : 400;
  o->bodies = o->quick ? 200 : 10000;
  o->rays = 131072;
  o->calls = o->quick ? 2 : 20;
  const bench_opt_t opts[] = {
      {"quick", BENCH_OPT_FLAG, NULL, 0, 0},
      {"sensimd", BENCH_OPT_STRING, &o->sensimd, 0, 0},
      {"rounds", BENCH_OPT_COUNT, &o->rounds, 1, 10000000},
      {"bodies", BENCH_OPT_COUNT, &o->bodies, 2, 1000000},
      {"rays", BENCH_OPT_COUNT, &o->rays, 64, 1u << 20},
      {"calls", BENCH_OPT_COUNT, &o->calls, 1, 10000},
      {"float", BENCH_OPT_FLAG, &o->float_threads, 0, 0},
  };
  if (bench_parse_options(argc, argv, opts, sizeof(opts) / sizeof(opts[0]), g_usage) != argc) {
    fputs(g_usage, stderr);
    exit(2);
  }
}


static void check(sensim_client_t* cli, sensim_status_t st, const char* what) {
  if (st != SENSIM_OK) {
    bench_die("%s: %s (%s)", what, sensim_client_last_error(cli), sensim_status_name(st));
  }
}


static sensim_client_t* connect_env(int port, const char* env) {
  sensim_options_t o;
  sensim_options_init(&o);
  o.environment = env;
  o.client_name = "bench_client";
  o.timeout_ms = IO_TIMEOUT_MS;
  sensim_client_t* cli = NULL;
  check(cli, sensim_client_connect("127.0.0.1", (uint16_t)port, &o, &cli), "connect");
  return cli;
}

//---------------- A step with an IMU, an encoder and a cone

// Body 1 and joint 1: all that an environment without sensors holds (the tick's protocol and
// state update alone).
static void build_body_and_joint(sensim_client_t* cli) {
  sensim_body_t b;
  sensim_body_init(&b);
  b.id = 1;
  check(cli, sensim_create_body(cli, &b), "body");
  sensim_joint_t j;
  sensim_joint_init(&j);
  j.id = 1;
  check(cli, sensim_create_joint(cli, &j), "joint");
}


// bench_imu's environment: a box and a sphere before the cone, body 1 with the IMU and the
// cone, joint 1 with the encoder.
static void build_sensors(sensim_client_t* cli) {
  sensim_primitive_t p;
  sensim_primitive_init(&p);
  p.id = 1;
  check(cli, sensim_create_primitive(cli, &p), "box");
  p.id = 2;
  p.shape = SENSIM_SHAPE_SPHERE;
  p.radius = 0.7;
  check(cli, sensim_create_primitive(cli, &p), "sphere");
  static const double at[2][3] = {{6, 1, 0}, {9, -2, 0.5}};
  for (uint32_t i = 0; i < 2; i++) {
    sensim_object_t o;
    sensim_object_init(&o);
    o.id = 10 + i;
    o.geometry_id = 1 + i;
    memcpy(o.local_pose.position, at[i], sizeof(at[i]));
    check(cli, sensim_create_object(cli, &o), "object");
  }
  build_body_and_joint(cli);
  sensim_sensor_t s;
  sensim_sensor_init(&s);
  s.id = 1;
  s.body_id = 1;
  sensim_imu_config_t imu;
  sensim_imu_config_init(&imu);
  imu.has_magnetometer = true;
  for (int k = 0; k < 3; k++) {
    imu.accelerometer.noise_stddev[k] = imu.gyroscope.noise_stddev[k] = 0.01;
    imu.magnetometer.noise_stddev[k] = 0.01;
  }
  check(cli, sensim_create_imu(cli, &s, &imu), "imu");
  sensim_encoder_config_t e;
  sensim_encoder_config_init(&e);
  e.joint_id = 1;
  e.resolution = 0.001;
  s.id = 2;
  s.body_id = 0;
  check(cli, sensim_create_encoder(cli, &s, &e), "encoder");
  sensim_cone_config_t c;
  sensim_cone_config_init(&c);
  s.id = 3;
  s.body_id = 1;
  check(cli, sensim_create_cone(cli, &s, &c), "cone");
}


// The tick's state at t, written into the caller's arrays that `state` points at.
typedef struct tick {
  uint32_t id[1];
  double pose[7], vel[6], q[1];
  sensim_state_t state;
  sensim_step_t step;
} tick_t;


static void tick_init(tick_t* k) {
  memset(k, 0, sizeof(*k));
  k->id[0] = 1;
  sensim_state_init(&k->state);
  k->state.nbodies = 1;
  k->state.body_ids = k->id;
  k->state.body_poses = k->pose;
  k->state.body_velocities = k->vel;
  k->state.njoints = 1;
  k->state.joint_ids = k->id;
  k->state.joint_positions = k->q;
  sensim_step_init(&k->step);
}


static void tick_at(tick_t* k, double t) {
  double a = 0.25 * t;
  double pose[7] = {0.1 * t, 0, 0, 0, 0, sin(a), cos(a)}, vel[6] = {0.1, 0, 0, 0, 0, 0.5};
  memcpy(k->pose, pose, sizeof(pose));
  memcpy(k->vel, vel, sizeof(vel));
  k->q[0] = 2.0 * t;
  k->state.time = k->step.time = t;
}


// A step's records: an IMU sample, the encoder at the joint's position (to its 1 mm bins)
// and a cone reading.
static void check_records(const sensim_step_result_t* r, double t) {
  int kinds = 0;
  for (uint32_t i = 0; i < r->noutputs; i++) {
    const sensim_sensor_data_t* d = &r->outputs[i];
    kinds |= d->kind == SENSIM_PAYLOAD_IMU ? 1 : d->kind == SENSIM_PAYLOAD_SCALAR ? 2
           : d->kind == SENSIM_PAYLOAD_CONE ? 4 : 8;
    if (d->kind == SENSIM_PAYLOAD_SCALAR && fabs(d->scalar.position - 2.0 * t) > 0.001) {
      bench_die("step at %g: encoder reads %.9g, the joint is at %.9g", t, d->scalar.position,
                2.0 * t);
    }
  }
  if (r->noutputs != 3 || kinds != 7 || fabs(r->time - t) > 0) {
    bench_die("step at %g: %u records (kinds %d), time %g", t, r->noutputs, kinds, r->time);
  }
}

//---------------- The raw reference: an echo thread of this process

typedef struct echo {
  int listener, port;
  int cpu;                  // the echo thread's CPU (-1: any)
  size_t req, reply;        // bytes per round trip
  unsigned rounds;
  pthread_t thread;
} echo_t;


static void* echo_main(void* arg) {
  echo_t* e = arg;
  bench_pin_self(e->cpu);
  int fd = accept(e->listener, NULL, NULL);
  if (fd < 0) {
    return NULL;
  }
  bench_set_nodelay(fd);
  uint8_t* in = bench_xmalloc(e->req);
  uint8_t* out = bench_xmalloc(e->reply);
  memset(out, 0x5a, e->reply);
  for (unsigned i = 0; i < e->rounds; i++) {
    if (bench_recv_all(fd, in, e->req) != 0 || bench_send_all(fd, out, e->reply) != 0) {
      break;
    }
  }
  free(in);
  free(out);
  close(fd);
  return NULL;
}


static int echo_start(echo_t* e) {
  e->listener = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t alen = sizeof(a);
  if (e->listener < 0 || bind(e->listener, (struct sockaddr*)&a, sizeof(a)) != 0 ||
      listen(e->listener, 1) != 0 ||
      getsockname(e->listener, (struct sockaddr*)&a, &alen) != 0) {
    bench_die("echo listener: %s", strerror(errno));
  }
  e->port = ntohs(a.sin_port);
  pthread_create(&e->thread, NULL, echo_main, e);
  return bench_connect_loopback(e->port, IO_TIMEOUT_MS);
}

//---------------- 1, 2: steps

// Spin for us microseconds: the engine's physics, standing in.
static void work(double us) {
  double end = bench_now() + 1e-6 * us;
  while (bench_now() < end) {
  }
}


// Ticks per second of n ticks from *t on, `depth` of them in flight (1: blocking, one round
// trip each), with `us` of engine work before each is sent; every result is checked.
static double ticks_per_s(sensim_client_t* cli, double* t, unsigned n, unsigned depth,
                          double us) {
  tick_t ticks[WINDOW];
  uint64_t ids[WINDOW][2];
  double ts[WINDOW];
  uint64_t last = 0;
  const sensim_step_result_t* r;
  double t0 = bench_now();
  for (unsigned i = 0; i < n + depth - 1; i++) {
    if (i < n) {
      tick_t* k = &ticks[i % depth];
      tick_init(k);
      tick_at(k, *t);
      ts[i % depth] = *t;
      *t += 0.01;
      work(us);
      check(cli, sensim_update_and_step_send(cli, &k->state, &k->step, &ids[i % depth][0],
                                             &ids[i % depth][1]), "tick");
    }
    if (i + 1 >= depth) {
      unsigned done = i + 1 - depth;
      check(cli, sensim_wait(cli, ids[done % depth][0], -1), "state");
      check(cli, sensim_step_wait(cli, ids[done % depth][1], -1, &r), "step");
      check_records(r, ts[done % depth]);
      if (last && r->step != last + 1) {
        bench_die("ticks: step %llu after %llu", (unsigned long long)r->step,
                  (unsigned long long)last);
      }
      last = r->step;
    }
  }
  return n / (bench_now() - t0);
}

typedef struct step_figures {
  double over_ping, over_daemon_ping;   // medians of paired ratios
  double cpu_us;                        // this thread's CPU per blocking tick
  double tick_us, bare_us, ping_us;     // steps_apart's medians (us)
} step_figures_t;


// One blocking tick at time t through cli, timed; then its records checked: the IMU, encoder
// and cone's (sensors) or none (an environment without sensors).
static double timed_tick(sensim_client_t* cli, tick_t* k, double t, int sensors) {
  const sensim_step_result_t* r;
  tick_at(k, t);
  double t0 = bench_now();
  check(cli, sensim_update_and_step(cli, &k->state, &k->step, &r), "tick");
  double dt = bench_now() - t0;
  if (sensors) {
    check_records(r, t);
  } else if (r->noutputs != 0) {
    bench_die("a tick without sensors returned %u records", r->noutputs);
  }
  return dt;
}


static double timed_ping(sensim_client_t* cli) {
  double t0 = bench_now();
  check(cli, sensim_ping(cli, NULL, 0, NULL), "ping");
  return bench_now() - t0;
}


// Where a tick's time goes above a Ping, in a pass of its own after the headline's: the tick,
// a Ping, the same tick in an environment with the same body and joint but no sensors (a
// connection of its own, opened for this pass), a Ping, in turn: each tick timed right after
// a Ping (the order matters on one core: a tick timed right after another tick runs about
// 0.5 us faster here, its code and data still warm). No raw echo here: on one core its time
// depends on how the scheduler interleaves the threads, which a second connection changes (a
// raw round trip read 4.8 us instead of 6.0 in this pass). Fills f's tick, bare and Ping
// medians, in microseconds.
static void steps_apart(const options_t* o, const bench_daemon_t* d, sensim_client_t* cli,
                        const bench_placement_t* p, tick_t* k, double* t, step_figures_t* f) {
  enum { WARM = 50 };
  sensim_client_t* bare = connect_env(d->port, "bench_client_bare");
  build_body_and_joint(bare);
  bench_place(p, &d->pid, 1);   // again: an executor started for the new environment too
  double* tc = bench_xmalloc(sizeof(double) * o->rounds);
  double* tp = bench_xmalloc(sizeof(double) * o->rounds);
  double* tb = bench_xmalloc(sizeof(double) * o->rounds);
  for (unsigned i = 0; i < WARM + o->rounds; i++, *t += 0.01) {
    double tick = timed_tick(cli, k, *t, 1), ping = timed_ping(cli);
    double bare_tick = timed_tick(bare, k, *t, 0);
    (void)timed_ping(cli);
    if (i >= WARM) {
      tc[i - WARM] = tick;
      tp[i - WARM] = ping;
      tb[i - WARM] = bare_tick;
    }
  }
  sensim_client_close(bare);
  f->tick_us = 1e6 * bench_median(tc, o->rounds);
  f->bare_us = 1e6 * bench_median(tb, o->rounds);
  f->ping_us = 1e6 * bench_median(tp, o->rounds);
  printf("step, %s, apart (the tick, a Ping, a tick without sensors, a Ping; %u rounds): the "
         "tick's %.1f us over a Ping go to UpdateState + Step in an environment without sensors "
         "%.1f us, the IMU, encoder and cone with their records %.1f us (medians)\n", p->name,
         o->rounds, f->tick_us - f->ping_us, f->bare_us - f->ping_us, f->tick_us - f->bare_us);
  free(tc);
  free(tp);
  free(tb);
}


// The interleaved round trips of one placement: a tick through the client, a Ping through it,
// the tick's bytes through an echo thread placed where the daemon is; then where the tick's
// time goes (steps_apart); then this thread's CPU over blocking ticks.
static step_figures_t steps_placed(const options_t* o, const bench_daemon_t* d,
                                   sensim_client_t* cli, const bench_placement_t* p, tick_t* k,
                                   double* t, size_t req, size_t reply) {
  enum { WARM = 50 };
  bench_place(p, &d->pid, 1);
  echo_t e = {.cpu = p->peer, .req = req, .reply = reply, .rounds = WARM + o->rounds};
  int raw = echo_start(&e);
  uint8_t* rq = bench_xmalloc(req);
  uint8_t* rp = bench_xmalloc(reply);
  memset(rq, 0x33, req);
  double* tc = bench_xmalloc(sizeof(double) * o->rounds);
  double* tp = bench_xmalloc(sizeof(double) * o->rounds);
  double* tr = bench_xmalloc(sizeof(double) * o->rounds);
  for (unsigned i = 0; i < WARM + o->rounds; i++, *t += 0.01) {
    double tick = timed_tick(cli, k, *t, 1), ping = timed_ping(cli);
    double t0 = bench_now();
    bench_write_all(raw, rq, req);
    bench_read_all(raw, rp, reply);
    if (i >= WARM) {
      tc[i - WARM] = tick;
      tp[i - WARM] = ping;
      tr[i - WARM] = bench_now() - t0;
    }
  }
  pthread_join(e.thread, NULL);
  close(raw);
  close(e.listener);
  step_figures_t f = {bench_median_ratio(tc, tr, o->rounds), bench_median_ratio(tc, tp, o->rounds),
                      0, 0, 0, 0};
  char c1[16], c2[16];
  printf("step, %s (this thread on %s; sensimd and the echo thread on %s): c_client median "
         "%.1f us, daemon Ping %.1f us, raw TCP ping-pong %.1f us (%u rounds, interleaved); "
         "over the ping-pong %.2f, over Ping %.2f\n", p->name, bench_cpu_name(p->self, c1),
         bench_cpu_name(p->peer, c2), 1e6 * bench_median(tc, o->rounds),
         1e6 * bench_median(tp, o->rounds), 1e6 * bench_median(tr, o->rounds), o->rounds,
         f.over_ping, f.over_daemon_ping);
  free(rq);
  free(rp);
  free(tc);
  free(tp);
  free(tr);

  steps_apart(o, d, cli, p, k, t, &f);

  // this thread's CPU per blocking tick
  double c0 = bench_thread_cpu();
  unsigned cpu_ticks = 5 * o->pipe_ticks;
  double wall = cpu_ticks / ticks_per_s(cli, t, cpu_ticks, 1, 0);
  double cpu = bench_thread_cpu() - c0;
  f.cpu_us = 1e6 * cpu / cpu_ticks;
  printf("cpu, %s: %u blocking ticks: %.1f us of this thread's CPU per tick (of %.1f us)\n",
         p->name, cpu_ticks, f.cpu_us, 1e6 * wall / cpu_ticks);
  return f;
}


static void bench_steps(const options_t* o, const bench_daemon_t* d) {
  sensim_client_t* cli = connect_env(d->port, "bench_client_steps");
  build_sensors(cli);
  tick_t k;
  tick_init(&k);
  const sensim_step_result_t* r;
  double t = 0.0;

  // warm up, and the bytes of one tick each way
  for (int i = 0; i < 20; i++, t += 0.01) {
    tick_at(&k, t);
    check(cli, sensim_update_and_step(cli, &k.state, &k.step, &r), "tick");
    if (i > 0) {
      check_records(r, t);
    }
  }
  track(NULL, 0);
  tick_at(&k, t);
  t += 0.01;
  check(cli, sensim_update_and_step(cli, &k.state, &k.step, &r), "tick");
  g_io.on = 0;
  size_t req = (size_t)(g_io.from_client + g_io.from_caller), reply = (size_t)g_io.received;

  // a blocking tick's system calls, as a blocking peer makes them: the requests in one
  // send, and the wait for the replies in the recv that takes them, without a poll first
  printf("check calls: a blocking tick: %u send, %u recv, %u poll: %s\n", g_io.sends,
         g_io.recvs, g_io.polls, g_io.sends == 1 && g_io.polls == 0 ? "PASS" : "FAIL");
  if (g_io.sends != 1 || g_io.polls != 0) {
    bench_die("a blocking tick made %u sends and %u polls, expected 1 and 0", g_io.sends,
              g_io.polls);
  }

  // Each placement pins both sides alike: the raw echo thread runs where the daemon runs.
  // Left to the scheduler the two references land on different cores from run to run, and on
  // a host where a cross-core wake-up costs tens of microseconds that, not the work, decides
  // the ratio. One core: every wake-up is a context switch, the ratio is the CPU's. Two cores:
  // the deployment's shape (an engine and the daemon on cores of their own), the ratio then
  // carries the host's cross-core wake-up cost on both sides.
  bench_placement_t places[3];
  int nplaces = bench_placements(places, false);
  printf("step: UpdateState + Step with an IMU, an encoder and a cone, %zu bytes out, %zu back\n",
         req, reply);
  step_figures_t f[3];
  for (int i = 0; i < nplaces; i++) {
    f[i] = steps_placed(o, d, cli, &places[i], &k, &t, req, reply);
  }
  bench_unplace(&d->pid, 1);
  printf("check step: every tick's records (IMU, encoder at the joint, cone): PASS\n");
  // the headline is the worse placement: neither can flatter it
  int worst = 0;
  for (int i = 0; i < nplaces; i++) {
    printf("BENCH c_step_rtt_over_ping_%s %.2f x\n", places[i].tag, f[i].over_ping);
    worst = f[i].over_ping > f[worst].over_ping ? i : worst;
  }
  if (nplaces == 1) {
    printf("two cores: this process may run on one CPU only, not measured\n");
  }
  printf("BENCH c_step_rtt_over_ping %.2f x (%s, the worse placement; goal <= 1.3)\n",
         f[worst].over_ping, places[worst].name);
  printf("BENCH c_step_rtt_over_daemon_ping %.2f x (%s)\n", f[worst].over_daemon_ping,
         places[worst].name);
  printf("BENCH c_step_client_cpu_us %.2f us (one core)\n", f[0].cpu_us);
  printf("BENCH c_step_sensors_us %.2f us (one core: the IMU, encoder and cone with their "
         "records)\n", f[0].tick_us - f[0].bare_us);
  if (nplaces > 1) {
    printf("BENCH c_step_client_cpu_two_cores_us %.2f us (its sends also wake the other "
           "core)\n", f[1].cpu_us);
  }

  // blocking ticks against four in flight, in alternating rounds, without and with the
  // engine's own work per tick
  for (int with_work = 0; with_work < 2; with_work++) {
    double* rb = bench_xmalloc(sizeof(double) * o->pipe_rounds);
    double* rpp = bench_xmalloc(sizeof(double) * o->pipe_rounds);
    for (unsigned round = 0; round < o->pipe_rounds; round++) {
      rb[round] = ticks_per_s(cli, &t, o->pipe_ticks, 1, with_work ? WORK_US : 0);
      rpp[round] = ticks_per_s(cli, &t, o->pipe_ticks, WINDOW, with_work ? WORK_US : 0);
    }
    printf("pipelined%s: %u ticks per round, %u rounds; blocking %.0f ticks/s, %d in flight %.0f "
           "ticks/s (medians)\n", with_work ? " with 30 us of engine work per tick" : "",
           o->pipe_ticks, o->pipe_rounds, bench_median(rb, o->pipe_rounds), WINDOW,
           bench_median(rpp, o->pipe_rounds));
    printf("BENCH %s %.2f x\n", with_work ? "c_pipelined_with_work_over_blocking"
                                           : "c_pipelined_steps_per_s_over_blocking",
           bench_median_ratio(rpp, rb, o->pipe_rounds));
    free(rb);
    free(rpp);
  }
  printf("check pipelined: results in order with every record: PASS\n");
  sensim_client_close(cli);
}

//---------------- 3: copies of an UpdateState

static void bench_copies(const options_t* o, int port) {
  sensim_client_t* cli = connect_env(port, "bench_client_copies");
  unsigned n = o->bodies;
  for (unsigned i = 0; i < n; i++) {
    sensim_body_t b;
    sensim_body_init(&b);
    b.id = i + 1;
    check(cli, sensim_create_body(cli, &b), "body");
  }
  uint32_t* ids = bench_xmalloc(sizeof(uint32_t) * n);
  sensim_pose_t* poses = bench_xmalloc(sizeof(sensim_pose_t) * n);
  double* vel = bench_xmalloc(sizeof(double) * 6 * n);
  for (unsigned i = 0; i < n; i++) {
    ids[i] = i + 1;
    poses[i] = sensim_pose_identity();
    poses[i].position[0] = i;
  }
  memset(vel, 0, sizeof(double) * 6 * n);

  // one update of all the bodies, one of one body: the client's own bytes, and the arrays'
  uint64_t own[2], arrays[2];
  unsigned counts[2] = {n, 1};
  for (int k = 0; k < 2; k++) {
    range_t r[3] = {{(const uint8_t*)ids, sizeof(uint32_t) * n},
                    {(const uint8_t*)poses, sizeof(sensim_pose_t) * n},
                    {(const uint8_t*)vel, sizeof(double) * 6 * n}};
    sensim_state_t s;
    sensim_state_init(&s);
    s.time = k;
    s.nbodies = counts[k];
    s.body_ids = ids;
    s.body_poses = poses[0].position;
    s.body_velocities = vel;
    track(r, 3);
    uint64_t id;
    check(cli, sensim_update_state_send(cli, &s, &id), "update_state");
    g_io.on = 0;
    own[k] = g_io.from_client;
    arrays[k] = g_io.from_caller;
    check(cli, sensim_wait(cli, id, -1), "update_state");
  }
  uint64_t want = (uint64_t)n * (4 + 56 + 48);
  if (arrays[0] != want || arrays[1] != 4 + 56 + 48) {
    bench_die("copies: %llu bytes of %u bodies sent from the caller's arrays, expected %llu",
              (unsigned long long)arrays[0], n, (unsigned long long)want);
  }
  double per_body = (double)(own[0] - own[1]) / (n - 1);
  printf("update_state: %u bodies: %llu bytes straight from the caller's arrays, %llu from the "
         "client's buffers (1 body: %llu)\n", n, (unsigned long long)arrays[0],
         (unsigned long long)own[0], (unsigned long long)own[1]);
  printf("check copies: every byte of the ids, poses and velocities sent from the caller's "
         "arrays: PASS\n");
  printf("BENCH c_update_state_copies %.4f bytes/body\n", per_body);
  free(ids);
  free(poses);
  free(vel);
  sensim_client_close(cli);
}

//---------------- 4: a raycast end to end

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
    double half[3] = {2.0, 0.9, 0.8}, c[3] = {x, y, bench_terrain_height(x, y) + 0.5};
    memcpy(w->box_half[k], half, sizeof(half));
    memcpy(w->box_center[k], c, sizeof(c));
  }
}


// The world through the client: the terrain (object 100) and the boxes (101..).
static void send_world(sensim_client_t* cli, const world_t* w) {
  sensim_mesh_t m;
  sensim_mesh_init(&m);
  m.id = 1;
  m.vertices = w->v;
  m.nvertices = w->nv;
  m.indices = w->idx;
  m.ntriangles = w->nt;
  check(cli, sensim_create_mesh(cli, &m), "mesh");
  sensim_object_t o;
  sensim_object_init(&o);
  o.id = 100;
  o.geometry_id = 1;
  check(cli, sensim_create_object(cli, &o), "terrain");
  for (unsigned k = 0; k < NBOX; k++) {
    sensim_primitive_t p;
    sensim_primitive_init(&p);
    p.id = k + 2;
    memcpy(p.half_extents, w->box_half[k], sizeof(p.half_extents));
    check(cli, sensim_create_primitive(cli, &p), "box");
    o.id = 101 + k;
    o.geometry_id = k + 2;
    memcpy(o.local_pose.position, w->box_center[k], sizeof(o.local_pose.position));
    check(cli, sensim_create_object(cli, &o), "box object");
  }
}


// The same world in this process.
static env_t* build_env(const world_t* w, scene_device_t* dev, pool_t* pool, unsigned nray) {
  env_limits_t lim = env_default_limits();
  if (lim.max_raycast_rays < nray) {
    lim.max_raycast_rays = nray;
  }
  err_msg_t msg;
  env_t* e = env_create("bench_client", &lim, dev, pool, &msg);
  if (!e) {
    bench_die("env_create: %s", msg.text);
  }
  mesh_desc_t md = {.id = 1,
                    .vertices = (const uint8_t*)w->v,
                    .vertices_len = 3 * sizeof(float) * w->nv,
                    .indices = (const uint8_t*)w->idx,
                    .indices_len = 3 * sizeof(uint32_t) * w->nt};
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
    memcpy(pd.size, w->box_half[k], sizeof(pd.size));
    if (env_create_primitive(e, &pd, &msg)) {
      bench_die("env_create_primitive: %s", msg.text);
    }
    od.id = 101 + k;
    od.geometry_id = k + 2;
    memcpy(od.local_pose.p, w->box_center[k], sizeof(od.local_pose.p));
    if (env_create_object(e, &od, &msg)) {
      bench_die("env_create_object: %s", msg.text);
    }
  }
  return e;
}


// A lidar fan from one origin: 32 channels over +-22.5 degrees.
static void make_rays(unsigned n, double* org, double* dir) {
  const unsigned channels = 32;
  unsigned columns = (n + channels - 1) / channels;
  double ox = 0.37, oy = 0.21, oz = bench_terrain_height(ox, oy) + 2.0;
  double span = 45.0 * M_PI / 180.0;
  for (unsigned i = 0; i < n; i++) {
    unsigned col = i / channels, ch = i % channels;
    double az = 2.0 * M_PI * col / columns, el = -0.5 * span + span * ch / (channels - 1);
    org[3 * i] = ox;
    org[3 * i + 1] = oy;
    org[3 * i + 2] = oz;
    dir[3 * i] = cos(el) * cos(az);
    dir[3 * i + 1] = cos(el) * sin(az);
    dir[3 * i + 2] = sin(el);
  }
}


// The raw reference: a raycast's request and reply bytes over a loopback TCP connection to an
// echo thread of this process (it takes the request whole, then sends the reply), moved by the
// calling thread (raw_move) or, while the calling thread traces, by a mover thread (raw_ask,
// raw_wait).
typedef struct raw {
  echo_t echo;
  int fd;
  uint8_t *out, *in;          // the request sent, the reply received
  pthread_t mover;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  unsigned asked, moved;      // transfers asked of the mover, and done
  int stop;
} raw_t;


static void raw_move(raw_t* r) {
  bench_write_all(r->fd, r->out, r->echo.req);
  bench_read_all(r->fd, r->in, r->echo.reply);
}


static void* mover_main(void* arg) {
  raw_t* r = arg;
  pthread_mutex_lock(&r->lock);
  for (;;) {
    while (!r->stop && r->moved == r->asked) {
      pthread_cond_wait(&r->cond, &r->lock);
    }
    if (r->stop) {
      break;
    }
    pthread_mutex_unlock(&r->lock);
    raw_move(r);
    pthread_mutex_lock(&r->lock);
    r->moved++;
    pthread_cond_broadcast(&r->cond);
  }
  pthread_mutex_unlock(&r->lock);
  return NULL;
}


static void raw_start(raw_t* r, size_t req, size_t reply) {
  memset(r, 0, sizeof(*r));
  r->echo = (echo_t){.req = req, .reply = reply, .rounds = UINT_MAX};
  r->fd = echo_start(&r->echo);
  r->out = bench_xmalloc(req);
  r->in = bench_xmalloc(reply);
  memset(r->out, 0x33, req);
  memset(r->in, 0, reply);
  pthread_mutex_init(&r->lock, NULL);
  pthread_cond_init(&r->cond, NULL);
  pthread_create(&r->mover, NULL, mover_main, r);
}


static void raw_ask(raw_t* r) {
  pthread_mutex_lock(&r->lock);
  r->asked++;
  pthread_cond_broadcast(&r->cond);
  pthread_mutex_unlock(&r->lock);
}


static void raw_wait(raw_t* r) {
  pthread_mutex_lock(&r->lock);
  while (r->moved != r->asked) {
    pthread_cond_wait(&r->cond, &r->lock);
  }
  pthread_mutex_unlock(&r->lock);
}


static void raw_stop(raw_t* r) {
  pthread_mutex_lock(&r->lock);
  r->stop = 1;
  pthread_cond_broadcast(&r->cond);
  pthread_mutex_unlock(&r->lock);
  pthread_join(r->mover, NULL);
  shutdown(r->fd, SHUT_WR);   // the echo sees the end of the request stream
  pthread_join(r->echo.thread, NULL);
  close(r->fd);
  close(r->echo.listener);
  pthread_mutex_destroy(&r->lock);
  pthread_cond_destroy(&r->cond);
  free(r->out);
  free(r->in);
}


// Where the tracing threads run. In-process the caller (this thread) and the pool's workers
// trace; in the daemon an executor and the same pool's workers. Left to the scheduler, the
// daemon's two tracing threads sometimes share one core for a whole call while the other
// idles (the worker is woken while the client or the loop thread runs on the other core, and
// an idle core does not take a thread that has just run), which the in-process pair, alone on
// the machine, never does: a call then takes up to twice as long. Pinned, both sides trace on
// the same cores: workers on the first threads - 1 CPUs, the caller or executor on the last;
// the client's and the daemon's I/O threads (and the raw reference's) stay unpinned.
typedef struct placement {
  int on;
  int cpu[CPU_SETSIZE];       // the first `threads` CPUs of this process's mask
  unsigned threads;
} trace_placement_t;


static void placement_init(trace_placement_t* p, unsigned threads, int off) {
  memset(p, 0, sizeof(*p));
  int n = bench_cpus(p->cpu, CPU_SETSIZE);
  p->threads = threads;
  p->on = !off && threads >= 2 && n >= (int)threads;
}


// Pin the threads of process pid named `comm`: the k-th (in the order /proc lists them) to
// cpus[k % ncpu]. Returns how many.
typedef struct pin_by_name {
  pid_t pid;
  const char* comm;
  const int* cpus;
  unsigned ncpu, k;
} pin_by_name_t;


static void pin_if_named(pid_t tid, void* ctx) {
  pin_by_name_t* p = ctx;
  char file[96], name[32] = "";
  snprintf(file, sizeof(file), "/proc/%d/task/%d/comm", (int)p->pid, (int)tid);
  FILE* f = fopen(file, "r");
  if (f && fgets(name, sizeof(name), f)) {
    name[strcspn(name, "\n")] = '\0';
    if (strcmp(name, p->comm) == 0) {
      bench_pin_thread(tid, p->cpus[p->k++ % p->ncpu]);
    }
  }
  if (f) {
    fclose(f);
  }
}


static unsigned pin_listed(pid_t pid, const char* comm, const int* cpus, unsigned ncpu) {
  pin_by_name_t p = {pid, comm, cpus, ncpu, 0};
  bench_each_thread(pid, pin_if_named, &p);
  return p.k;
}


// pin_listed, waiting up to a second for the first such thread (a thread names itself once
// it runs).
static unsigned pin_named(pid_t pid, const char* comm, const int* cpus, unsigned ncpu) {
  unsigned k = 0;
  for (int tries = 0; tries < 1000 && (k = pin_listed(pid, comm, cpus, ncpu)) == 0; tries++) {
    usleep(1000);
  }
  return k;
}


// The daemon's tracing threads pinned as this process's are (its executors started on demand:
// pinned again before every call, off the clock).
static void pin_daemon(const trace_placement_t* p, pid_t daemon) {
  if (p->on && (pin_named(daemon, POOL_THREAD_NAME, p->cpu, p->threads - 1) == 0 ||
                pin_named(daemon, EXEC_THREAD_NAME, &p->cpu[p->threads - 1], 1) == 0)) {
    bench_die("sensimd %d has no threads named %s and %s to pin", (int)daemon,
              POOL_THREAD_NAME, EXEC_THREAD_NAME);
  }
}


// This thread on the callers' CPU (it traces), or on every CPU (it does I/O).
static void pin_self(const trace_placement_t* p, int tracing) {
  if (!p->on) {
    return;
  }
  bench_pin_self(tracing ? p->cpu[p->threads - 1] : -1);
}


// What one call of the raycast comparison measures on each side.
enum { RC_INPROCESS, RC_CLIENT, RC_RAW, RC_BOTH, RC_KINDS };

typedef struct ray_bench {
  sensim_client_t* cli;
  pid_t daemon;
  const sensim_raycast_t* rays;
  sensim_hit_t* hits;
  env_t* env;
  const env_raycast_t* er;
  scene_hit_t* ref;
  raw_t raw;
  trace_placement_t place;
  double* wall[RC_KINDS];     // per call, seconds
  double* cpu[RC_KINDS];      // per call, CPU seconds of this process (and of the daemon)
  double* daemon_cpu;         // per call, CPU seconds of the daemon alone (RC_CLIENT)
} ray_bench_t;


static void trace_here(ray_bench_t* b) {
  err_msg_t msg;
  if (env_raycast(b->env, b->er, b->ref, &msg)) {
    bench_die("env_raycast: %s", msg.text);
  }
}


// One measurement of `kind` as call i.
static void ray_measure(ray_bench_t* b, int kind, unsigned i) {
  pin_self(&b->place, kind == RC_INPROCESS || kind == RC_BOTH);
  if (b->place.on && kind != RC_CLIENT && kind != RC_RAW &&
      pin_named(getpid(), POOL_THREAD_NAME, b->place.cpu, b->place.threads - 1) == 0) {
    bench_die("no thread named %s to pin", POOL_THREAD_NAME);
  }
  if (kind == RC_CLIENT) {
    pin_daemon(&b->place, b->daemon);
  }
  double d0 = kind == RC_CLIENT ? bench_pid_cpu(b->daemon) : 0.0;
  double c0 = bench_process_cpu();
  double t0 = bench_now();
  switch (kind) {
    case RC_INPROCESS:
      trace_here(b);
      break;
    case RC_CLIENT:
      check(b->cli, sensim_raycast(b->cli, b->rays, b->hits, NULL), "raycast");
      break;
    case RC_RAW:
      raw_move(&b->raw);
      break;
    default:
      raw_ask(&b->raw);
      trace_here(b);
      raw_wait(&b->raw);
      break;
  }
  b->wall[kind][i] = bench_now() - t0;
  b->cpu[kind][i] = bench_process_cpu() - c0;
  if (kind == RC_CLIENT) {
    b->daemon_cpu[i] = bench_pid_cpu(b->daemon) - d0;
    b->cpu[kind][i] += b->daemon_cpu[i];
  }
}


static void bench_raycast(const options_t* o, const bench_daemon_t* d) {
  world_t w;
  make_world(&w, 160);
  ray_bench_t b = {.daemon = d->pid};
  b.cli = connect_env(d->port, "bench_client_raycast");
  send_world(b.cli, &w);
  unsigned threads = sensim_client_session(b.cli)->threads;
  unsigned n = o->rays;
  double* org = bench_xmalloc(3 * sizeof(double) * n);
  double* dir = bench_xmalloc(3 * sizeof(double) * n);
  make_rays(n, org, dir);
  b.hits = bench_xmalloc(sizeof(sensim_hit_t) * n);
  sensim_raycast_t rays;
  sensim_raycast_init(&rays);
  rays.nrays = n;
  rays.origins = org;
  rays.directions = dir;
  rays.max_range = MAX_RANGE;
  b.rays = &rays;

  err_msg_t msg;
  scene_device_t* dev = scene_device_create(&msg);
  if (!dev) {
    bench_die("scene_device_create: %s", msg.text);
  }
  pool_t* pool = pool_create(threads ? threads : 1);
  placement_init(&b.place, threads, o->float_threads);
  b.env = build_env(&w, dev, pool, n);
  b.ref = bench_xmalloc(sizeof(scene_hit_t) * n);
  // the rays as the client sends them: every origin is the first, sent once (Raycast.origin)
  env_raycast_t er = {.nray = n, .origin = org, .directions = dir, .max_range = MAX_RANGE};
  b.er = &er;

  // warm up each side, and the bytes of a call each way
  trace_here(&b);
  track(NULL, 0);
  check(b.cli, sensim_raycast(b.cli, &rays, b.hits, NULL), "raycast");
  g_io.on = 0;
  size_t req = (size_t)(g_io.from_caller + g_io.from_client), reply = (size_t)g_io.received;
  printf("raycast: %zu bytes out, %zu back a call\n", req, reply);
  raw_start(&b.raw, req, reply);
  raw_move(&b.raw);
  for (int k = 0; k < RC_KINDS; k++) {
    b.wall[k] = bench_xmalloc(sizeof(double) * o->calls);
    b.cpu[k] = bench_xmalloc(sizeof(double) * o->calls);
  }
  b.daemon_cpu = bench_xmalloc(sizeof(double) * o->calls);

  // call i measures every kind, starting with a different one each time
  for (unsigned i = 0; i < o->calls; i++) {
    for (int j = 0; j < RC_KINDS; j++) {
      ray_measure(&b, (int)((i + j) % RC_KINDS), i);
    }
  }
  raw_stop(&b.raw);
  pin_self(&b.place, 0);

  // every bit of every hit
  unsigned bad = 0, nhit = 0;
  for (unsigned i = 0; i < n; i++) {
    bad += memcmp(&b.hits[i].distance, &b.ref[i].distance, 8) != 0 ||
           memcmp(b.hits[i].normal, b.ref[i].normal, 24) != 0 ||
           b.hits[i].object_id != b.ref[i].object_id || b.hits[i].label != b.ref[i].label;
    nhit += isfinite(b.ref[i].distance) != 0;
  }

  double ratio_e2e = bench_median_ratio(b.wall[RC_INPROCESS], b.wall[RC_CLIENT], o->calls);
  double ratio_ceiling = bench_median_ratio(b.wall[RC_INPROCESS], b.wall[RC_BOTH], o->calls);
  double ratio_cpu = bench_median_ratio(b.cpu[RC_INPROCESS], b.cpu[RC_CLIENT], o->calls);
  double med_wall[RC_KINDS], med_cpu[RC_KINDS], lo[RC_KINDS], hi[RC_KINDS];
  for (int k = 0; k < RC_KINDS; k++) {
    med_cpu[k] = bench_median(b.cpu[k], o->calls);
    lo[k] = bench_percentile(b.wall[k], o->calls, 10);
    hi[k] = bench_percentile(b.wall[k], o->calls, 90);
    med_wall[k] = bench_median(b.wall[k], o->calls);
  }
  // on `threads` cores kept busy, the least time the tracing and the transfer can take
  double cpu_model = med_cpu[RC_INPROCESS] / (med_cpu[RC_INPROCESS] + med_cpu[RC_RAW]);
  char c1[32];
  printf("raycast: %s rays (%u hit) from one origin, %u calls of each kind in turn, %u threads "
         "tracing on each side; medians (10th-90th percentile) of wall time, median CPU of "
         "every thread involved\n", bench_count(n, c1), nhit, o->calls, threads);
  if (b.place.on) {
    printf("  placement: tracing threads pinned on both sides (pool workers on CPU %d%s, this "
           "thread or the daemon's executors on CPU %d), the I/O threads unpinned\n",
           b.place.cpu[0], threads > 2 ? " and on" : "", b.place.cpu[threads - 1]);
  } else {
    printf("  placement: every thread where the scheduler puts it\n");
  }
  printf("  in-process trace (env_raycast)       %6.2f ms (%.2f-%.2f), CPU %6.2f ms\n",
         1e3 * med_wall[RC_INPROCESS], 1e3 * lo[RC_INPROCESS], 1e3 * hi[RC_INPROCESS],
         1e3 * med_cpu[RC_INPROCESS]);
  printf("  raw transfer of the same bytes       %6.2f ms (%.2f-%.2f), CPU %6.2f ms (both "
         "ends)\n", 1e3 * med_wall[RC_RAW], 1e3 * lo[RC_RAW], 1e3 * hi[RC_RAW],
         1e3 * med_cpu[RC_RAW]);
  printf("  the trace and the transfer at once   %6.2f ms (%.2f-%.2f), CPU %6.2f ms: %.2f cores "
         "busy\n", 1e3 * med_wall[RC_BOTH], 1e3 * lo[RC_BOTH], 1e3 * hi[RC_BOTH],
         1e3 * med_cpu[RC_BOTH], med_cpu[RC_BOTH] / med_wall[RC_BOTH]);
  double med_daemon = bench_median(b.daemon_cpu, o->calls);
  printf("  C client (sensim_raycast)            %6.2f ms (%.2f-%.2f), CPU %6.2f ms (daemon "
         "%.2f): %.2f cores busy\n", 1e3 * med_wall[RC_CLIENT], 1e3 * lo[RC_CLIENT],
         1e3 * hi[RC_CLIENT], 1e3 * med_cpu[RC_CLIENT], 1e3 * med_daemon,
         med_cpu[RC_CLIENT] / med_wall[RC_CLIENT]);
  printf("  what differs: the raw bytes go in one request and one reply with nothing decoded, "
         "packed or spread, and are traced without waiting for them; the client's go in parts "
         "in flight together, traced by the daemon's threads as they arrive\n");
  printf("  the CPU model: %u cores kept busy spend trace CPU + transfer CPU: in-process over "
         "that %.3f x\n", threads, cpu_model);
  printf("check raycast: C client hits equal the in-process hits bit for bit: %u of %u differ: "
         "%s\n", bad, n, bad == 0 && nhit > 0 ? "PASS" : "FAIL");
  if (bad != 0 || nhit == 0) {
    bench_die("raycast: the hits differ");
  }
  printf("BENCH c_raycast_e2e_over_inprocess %.3f x\n", ratio_e2e);
  printf("BENCH c_raycast_ceiling_over_inprocess %.3f x\n", ratio_ceiling);
  printf("BENCH c_raycast_cpu_over_inprocess %.3f x\n", ratio_cpu);
  for (int k = 0; k < RC_KINDS; k++) {
    free(b.wall[k]);
    free(b.cpu[k]);
  }
  free(b.daemon_cpu);
  free(b.ref);
  env_destroy(b.env);
  pool_destroy(pool);
  scene_device_destroy(dev);
  free(b.hits);
  free(org);
  free(dir);
  free(w.v);
  free(w.idx);
  sensim_client_close(b.cli);
}

//---------------- Main

int main(int argc, char** argv) {
  bench_init("bench_client", bench_daemon_kill);
  options_t o;
  parse_options(argc, argv, &o);
  signal(SIGPIPE, SIG_IGN);
  alarm(o.quick ? 240 : 1800);
  bench_daemon_t d;
  bench_daemon_start(&d, o.sensimd, NULL, IO_TIMEOUT_MS);
  printf("bench_client%s: %s (pid %d, port %d)\n", o.quick ? " --quick" : "", o.sensimd,
         (int)d.pid, d.port);
  bench_steps(&o, &d);
  bench_copies(&o, d.port);
  bench_raycast(&o, &d);
  int status = bench_daemon_stop(&d);
  printf("sensimd stopped with SIGTERM: exit status %d\n", status);
  printf("checks: %s\n", status == 0 ? "PASS" : "FAIL");
  return status == 0 ? 0 : 1;
}
