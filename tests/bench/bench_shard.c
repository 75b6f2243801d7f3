// SPDX-License-Identifier: MIT
// bench_shard.c: sensors sharded over three real sensimd (sensim/shard.h) against the same
// scenario on one sensimd, all four on this host, each figure a median of paired ratios
// measured alternately in this process.
//
//   BENCH shard3_step_over_shard1   per-step time (UpdateState + Step, every record returned)
//        of six VLP-16 lidars at 10 Hz, one revolution per step, over a terrain: two lidars
//        on each of three daemons over all six on one daemon. Every daemon runs its default
//        worker threads (one per core): on one host the shards share the same cores, so no
//        speed-up is expected here; see docs/sharding.md for the model on hosts of their own
//   BENCH shard_fanout_update_over_single   an UpdateState of 100 bodies to three shards
//        (sent to all, then every reply awaited) over the same UpdateState to one daemon
//        (goal <= 1.5: the shards' round trips overlap), with this thread on one core and
//        every daemon on the other. Measured in three placements, each pinning ours and a raw
//        reference alike (BENCH shard_fanout_update_over_single_{one_core,two_cores,unpinned}):
//   BENCH shard_fanout_raw_{one_core,two_cores,unpinned}   the same byte counts each way
//        written to three echo processes (all sent, then every reply read) over one: what
//        loopback sockets alone give in that placement, the floor of the figure above it.
//        Beside them: this thread's CPU and each daemon's per update, the model for a free
//        core per process, and the model for processes taking turns on busy cores (the CPU
//        ratio, which one core approaches)
//
//   bench_shard [--quick] [--sensimd PATH] [--steps N] [--updates N]
//
// Both runs share the seed: every step's records must agree byte for byte between one daemon
// and three (checked on every step, --quick included), the merged records in sensor id order.
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <math.h>
#include <signal.h>
#include <time.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sensim/sensim.h>
#include <sensim/shard.h>

#include "bench_util.h"

#ifndef SENSIMD_DEFAULT
#define SENSIMD_DEFAULT "sensimd"
#endif

#define IO_TIMEOUT_MS 60000
#define TERRAIN_SIZE 200.0      // m
#define TERRAIN_GRID 200u       // cells per side
#define NLIDAR 6
#define NBODY 100               // bodies of the fan-out figure
#define DT 0.1                  // s: one VLP-16 revolution per step
#define NSHARD 3                // daemons of the sharded runs: g_daemons[0 .. NSHARD - 1]
#define ONE NSHARD              // the single daemon: g_daemons[ONE]
#define NDAEMON (NSHARD + 1)

static bench_daemon_t g_daemons[NDAEMON];

static void kill_daemons(void) {
  for (int i = 0; i < NDAEMON; i++) {
    if (g_daemons[i].pid > 0) {
      kill(g_daemons[i].pid, SIGKILL);
    }
  }
}


// The CPU every daemon has run so far (bench_pid_cpu), indexed as g_daemons.
static void daemons_cpu(double cpu[NDAEMON]) {
  for (int i = 0; i < NDAEMON; i++) {
    cpu[i] = bench_pid_cpu(g_daemons[i].pid);
  }
}


// "a, b, c": the shards' figures (v[0 .. NSHARD - 1]) times scale with `digits` decimals, for
// the lines that list them.
static const char* shard_list(const double v[NDAEMON], double scale, int digits, char* buf,
                              size_t cap) {
  size_t len = 0;
  buf[0] = '\0';
  for (int i = 0; i < NSHARD && len < cap; i++) {
    len += (size_t)snprintf(buf + len, cap - len, "%s%.*f", i ? ", " : "", digits,
                            scale * v[i]);
  }
  return buf;
}


typedef struct options {
  int quick;
  const char* sensimd;
  unsigned steps, updates;
} options_t;


static void parse_options(int argc, char** argv, options_t* o) {
  o->quick = bench_has_arg(argc, argv, "--quick");
  o->sensimd = getenv("SENSIMD") ? getenv("SENSIMD") : SENSIMD_DEFAULT;
  o->steps = o->quick ? 6 : 60;
  o->updates = o->quick ? 50 : 3000;
  const bench_opt_t opts[] = {
      {"quick", BENCH_OPT_FLAG, NULL, 0, 0},
      {"sensimd", BENCH_OPT_STRING, &o->sensimd, 0, 0},
      {"steps", BENCH_OPT_COUNT, &o->steps, 2, 100000},
      {"updates", BENCH_OPT_COUNT, &o->updates, 2, 1000000},
  };
  bench_parse_options(argc, argv, opts, sizeof(opts) / sizeof(opts[0]),
                      "usage: bench_shard [--quick] [--sensimd PATH] [--steps N] [--updates N]\n"
                      "  --quick       few iterations; only the cross-checks matter\n"
                      "  --sensimd     the daemon (default $SENSIMD, else the build's)\n"
                      "  --steps N     paired steps of the six-lidar scenario\n"
                      "  --updates N   paired UpdateStates of 100 bodies\n");
}


// The client or the shards (the other NULL) must have succeeded.
static void need(sensim_client_t* c, sensim_shards_t* s, sensim_status_t st, const char* what) {
  if (st != SENSIM_OK) {
    bench_die("%s: %s: %s", what, sensim_status_name(st),
              c ? sensim_client_last_error(c) : sensim_shards_last_error(s));
  }
}


// The six-lidar scenario through one client or the shards: terrain, a body, six VLP-16 at
// yaw k * 60 degrees, distance noise (so that the byte check covers the noise keys), seed 11.
static void build(sensim_client_t* c, sensim_shards_t* s, const float* v, const uint32_t* idx) {
  sensim_environment_t env;
  sensim_environment_init(&env);
  env.set_seed = true;
  env.seed = 11;
  need(c, s, c ? sensim_set_environment(c, &env) : sensim_shards_set_environment(s, &env), "seed");
  sensim_mesh_t m;
  sensim_mesh_init(&m);
  m.id = 1;
  m.vertices = v;
  m.nvertices = (TERRAIN_GRID + 1) * (TERRAIN_GRID + 1);
  m.indices = idx;
  m.ntriangles = 2 * TERRAIN_GRID * TERRAIN_GRID;
  need(c, s, c ? sensim_create_mesh(c, &m) : sensim_shards_create_mesh(s, &m), "terrain");
  sensim_object_t o;
  sensim_object_init(&o);
  o.id = 1;
  o.geometry_id = 1;
  need(c, s, c ? sensim_create_object(c, &o) : sensim_shards_create_object(s, &o), "object");
  sensim_body_t b;
  sensim_body_init(&b);
  b.id = 1;
  b.pose.position[2] = bench_terrain_height(0, 0) + 1.5;
  need(c, s, c ? sensim_create_body(c, &b) : sensim_shards_create_body(s, &b), "body");
  for (int k = 0; k < NLIDAR; k++) {
    sensim_sensor_t sen;
    sensim_sensor_init(&sen);
    sen.id = 10 + (uint32_t)k;
    sen.body_id = 1;
    sen.mount.orientation[2] = sin(k * M_PI / 6);
    sen.mount.orientation[3] = cos(k * M_PI / 6);
    sensim_lidar_config_t cfg;
    sensim_lidar_config_init(&cfg, SENSIM_PATTERN_VLP16);
    cfg.distance_noise.stddev_base = 0.01;
    cfg.range_max = 100.0;
    if (s) {
      need(NULL, s, sensim_shards_place(s, sen.id, (uint32_t)k % NSHARD), "place");
    }
    need(c, s, c ? sensim_create_lidar(c, &sen, &cfg) : sensim_shards_create_lidar(s, &sen, &cfg),
         "lidar");
  }
}


// Bodies 1..NBODY for the fan-out figure (no sensors: the figure is the fan-out itself).
static void build_bodies(sensim_client_t* c, sensim_shards_t* s) {
  for (uint32_t i = 1; i <= NBODY; i++) {
    sensim_body_t b;
    sensim_body_init(&b);
    b.id = i;
    need(c, s, c ? sensim_create_body(c, &b) : sensim_shards_create_body(s, &b), "body");
  }
}


// The records of two steps agree byte for byte.
static void compare(const sensim_step_result_t* a, const sensim_step_result_t* b, unsigned k) {
  if (a->noutputs != b->noutputs || a->step != b->step) {
    bench_die("step %u: %u records (step %llu) on one daemon, %u (step %llu) on three", k,
              a->noutputs, (unsigned long long)a->step, b->noutputs, (unsigned long long)b->step);
  }
  for (uint32_t i = 0; i < a->noutputs; i++) {
    const sensim_sensor_data_t *x = &a->outputs[i], *y = &b->outputs[i];
    if (x->sensor_id != y->sensor_id || x->frame != y->frame ||
        x->point_cloud.size != y->point_cloud.size ||
        memcmp(x->point_cloud.data, y->point_cloud.data, x->point_cloud.size) != 0) {
      bench_die("step %u: record %u (sensor %u on one daemon, %u on three) differs", k, i,
                x->sensor_id, y->sensor_id);
    }
  }
}


static sensim_shards_t* connect_shards(const bench_daemon_t* d, const char* environment) {
  char a[NSHARD][32];
  const char* addr[NSHARD];
  for (int i = 0; i < NSHARD; i++) {
    snprintf(a[i], sizeof(a[i]), "127.0.0.1:%d", d[i].port);
    addr[i] = a[i];
  }
  sensim_options_t opts;
  sensim_options_init(&opts);
  opts.environment = environment;
  opts.timeout_ms = IO_TIMEOUT_MS;
  sensim_shards_t* s = NULL;
  need(NULL, s, sensim_shards_connect(addr, NSHARD, &opts, &s), "connect the shards");
  return s;
}


static sensim_client_t* connect_one(const bench_daemon_t* d, const char* environment) {
  sensim_options_t opts;
  sensim_options_init(&opts);
  opts.environment = environment;
  opts.timeout_ms = IO_TIMEOUT_MS;
  sensim_client_t* c = NULL;
  sensim_status_t st = sensim_client_connect("127.0.0.1", (uint16_t)d->port, &opts, &c);
  if (st != SENSIM_OK) {
    bench_die("connect: %s", c ? sensim_client_last_error(c) : "no memory");
  }
  return c;
}


static void bench_steps(const options_t* o, const bench_daemon_t* one, const bench_daemon_t* d) {
  float* v = bench_xmalloc(3 * sizeof(float) * (TERRAIN_GRID + 1) * (TERRAIN_GRID + 1));
  uint32_t* idx = bench_xmalloc(3 * sizeof(uint32_t) * 2 * TERRAIN_GRID * TERRAIN_GRID);
  bench_terrain(TERRAIN_GRID, TERRAIN_SIZE, v, idx);
  sensim_client_t* c = connect_one(one, "lidars");
  sensim_shards_t* s = connect_shards(d, "lidars");
  build(c, NULL, v, idx);
  build(NULL, s, v, idx);
  free(v);
  free(idx);

  double* t1 = bench_xmalloc(o->steps * sizeof(double));
  double* t3 = bench_xmalloc(o->steps * sizeof(double));
  uint64_t points = 0;
  double cpu0[NDAEMON];
  daemons_cpu(cpu0);
  static const uint32_t body = 1;
  for (unsigned k = 0; k <= o->steps; k++) {
    double t = DT * k;
    sensim_pose_t pose = sensim_pose_identity();
    pose.position[0] = 2.0 * t;         // driving at 2 m/s
    pose.position[2] = bench_terrain_height(2.0 * t, 0) + 1.5;
    sensim_state_t st;
    sensim_state_init(&st);
    st.time = t;
    st.nbodies = 1;
    st.body_ids = &body;
    st.body_poses = pose.position;
    sensim_step_t step;
    sensim_step_init(&step);
    step.time = t;
    const sensim_step_result_t *r1, *r3;
    // alternate which goes first, so that neither always runs on a cache the other warmed
    double a = bench_now(), b, e;
    if (k % 2 == 0) {
      need(c, NULL, sensim_update_and_step(c, &st, &step, &r1), "step (one daemon)");
      b = bench_now();
      need(NULL, s, sensim_shards_update_and_step(s, &st, &step, &r3), "step (three)");
      e = bench_now();
      if (k > 0) {
        t1[k - 1] = b - a;
        t3[k - 1] = e - b;
      }
    } else {
      need(NULL, s, sensim_shards_update_and_step(s, &st, &step, &r3), "step (three)");
      b = bench_now();
      need(c, NULL, sensim_update_and_step(c, &st, &step, &r1), "step (one daemon)");
      e = bench_now();
      t3[k - 1] = b - a;
      t1[k - 1] = e - b;
    }
    compare(r1, r3, k);
    for (uint32_t i = 0; i < r1->noutputs; i++) {
      points += r1->outputs[i].point_cloud.count;
    }
  }
  double ratio = bench_median_ratio(t3, t1, o->steps);
  double m1 = bench_median(t1, o->steps), m3 = bench_median(t3, o->steps);
  double cpu[NDAEMON], busiest = 0;
  daemons_cpu(cpu);
  for (int i = 0; i < NDAEMON; i++) {
    cpu[i] = (cpu[i] - cpu0[i]) / (o->steps + 1);
    busiest = i != ONE && cpu[i] > busiest ? cpu[i] : busiest;
  }
  char pts[32], list[160];
  printf("six VLP-16, %u steps of %.1f s: one daemon %.2f ms a step, three daemons %.2f ms; "
         "%s points, identical records\n", o->steps, DT, 1e3 * m1, 1e3 * m3,
         bench_count(points, pts));
  printf("daemon CPU a step: one daemon %.2f ms; shards %s ms\n", 1e3 * cpu[ONE],
         shard_list(cpu, 1e3, 2, list, sizeof(list)));
  printf("model, each daemon on cores of its own: a step takes its busiest shard's CPU over its "
         "cores plus the round trip, so three over one ~ %.2f (busiest shard's CPU over one "
         "daemon's)\n", busiest / cpu[ONE]);
  printf("BENCH shard3_step_over_shard1 %.2f x\n", ratio);
  free(t1);
  free(t3);
  sensim_shards_close(s);
  sensim_client_close(c);
}


//---------------- The fan-out of an UpdateState, and its raw reference

// The raw reference: processes that each answer `reply` bytes to every `req` bytes received on
// one loopback connection, standing where the daemons stand (g_echo[i] beside g_daemons[i]).
typedef struct echo_proc {
  pid_t pid;
  int fd;             // this process's end of the connection
} echo_proc_t;

static echo_proc_t g_echo[NDAEMON];

static void kill_all(void) {
  kill_daemons();
  for (int i = 0; i < NDAEMON; i++) {
    if (g_echo[i].pid > 0) {
      kill(g_echo[i].pid, SIGKILL);
    }
  }
}


static void echo_procs_start(size_t req, size_t reply) {
  for (int i = 0; i < NDAEMON; i++) {
    int listener = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t alen = sizeof(a);
    if (listener < 0 || bind(listener, (struct sockaddr*)&a, sizeof(a)) != 0 ||
        listen(listener, 1) != 0 || getsockname(listener, (struct sockaddr*)&a, &alen) != 0) {
      bench_die("echo listener: %s", strerror(errno));
    }
    pid_t pid = fork();
    if (pid < 0) {
      bench_die("fork: %s", strerror(errno));
    }
    if (pid == 0) {
      // keep no other end open: an echo exits when its own connection closes
      for (int j = 0; j < i; j++) {
        close(g_echo[j].fd);
      }
      int fd = accept(listener, NULL, NULL);
      if (fd < 0) {
        _exit(1);
      }
      bench_set_nodelay(fd);
      uint8_t* in = bench_xmalloc(req);
      uint8_t* out = bench_xmalloc(reply);
      memset(out, 0x5a, reply);
      while (bench_recv_all(fd, in, req) == 0 && bench_send_all(fd, out, reply) == 0) {
      }
      _exit(0);
    }
    g_echo[i].pid = pid;
    g_echo[i].fd = bench_connect_loopback(ntohs(a.sin_port), IO_TIMEOUT_MS);
    close(listener);
  }
}


static void echo_procs_stop(void) {
  for (int i = 0; i < NDAEMON; i++) {
    close(g_echo[i].fd);   // the echo sees the end of its stream and exits
    waitpid(g_echo[i].pid, NULL, 0);
    g_echo[i].pid = 0;
  }
}


// The bytes process pid has read and written so far (rchar and wchar of /proc/PID/io).
static void process_io(pid_t pid, uint64_t* rd, uint64_t* wr) {
  char path[64], line[128];
  snprintf(path, sizeof(path), "/proc/%d/io", (int)pid);
  FILE* f = fopen(path, "r");
  if (!f) {
    bench_die("%s: %s", path, strerror(errno));
  }
  *rd = *wr = UINT64_MAX;
  while (fgets(line, sizeof(line), f)) {
    unsigned long long v;
    if (sscanf(line, "rchar: %llu", &v) == 1) {
      *rd = v;
    } else if (sscanf(line, "wchar: %llu", &v) == 1) {
      *wr = v;
    }
  }
  fclose(f);
  if (*rd == UINT64_MAX || *wr == UINT64_MAX) {
    bench_die("%s: no rchar or wchar", path);
  }
}


// One raw round: the request to the echoes in [lo, hi), every one sent before any reply is
// read (as the shards are sent their UpdateState), then the replies in turn.
static void raw_round(int lo, int hi, const uint8_t* rq, size_t req, uint8_t* rp, size_t reply) {
  for (int i = lo; i < hi; i++) {
    bench_write_all(g_echo[i].fd, rq, req);
  }
  for (int i = lo; i < hi; i++) {
    bench_read_all(g_echo[i].fd, rp, reply);
  }
}


// The update of the fan-out figures, its q-th: the NBODY bodies (ids 1..NBODY) at x = 0.01 q + i,
// at time 0.01 q, from the caller's arrays.
static void bodies_state(unsigned q, uint32_t ids[NBODY], sensim_pose_t poses[NBODY],
                         sensim_state_t* st) {
  for (uint32_t i = 0; i < NBODY; i++) {
    ids[i] = i + 1;
    poses[i] = sensim_pose_identity();
    poses[i].position[0] = 0.01 * q + i;
  }
  sensim_state_init(st);
  st->time = 0.01 * q;
  st->nbodies = NBODY;
  st->body_ids = ids;
  st->body_poses = poses[0].position;
}


typedef struct fanout_figures {
  double ours, raw;       // medians of paired ratios, three over one
} fanout_figures_t;


static fanout_figures_t fanout_placed(const options_t* o, const bench_placement_t* p,
                                      sensim_client_t* c, sensim_shards_t* s, size_t req,
                                      size_t reply, unsigned* seq) {
  pid_t pids[2 * NDAEMON];
  for (int i = 0; i < NDAEMON; i++) {
    pids[2 * i] = g_daemons[i].pid;
    pids[2 * i + 1] = g_echo[i].pid;
  }
  bench_place(p, pids, 2 * NDAEMON);
  uint32_t ids[NBODY];
  sensim_pose_t poses[NBODY];
  uint8_t* rq = bench_xmalloc(req);
  uint8_t* rp = bench_xmalloc(reply);
  memset(rq, 0x33, req);
  unsigned n = o->updates, warm = n / 20 + 1;
  double* t1 = bench_xmalloc(n * sizeof(double));
  double* t3 = bench_xmalloc(n * sizeof(double));
  double* r1 = bench_xmalloc(n * sizeof(double));
  double* r3 = bench_xmalloc(n * sizeof(double));
  double c1 = 0, c3 = 0;                // this thread's CPU for each kind of update
  double cpu0[NDAEMON];
  for (unsigned k = 0; k < warm + n; k++) {
    if (k == warm) {
      daemons_cpu(cpu0);
      c1 = c3 = 0;
    }
    sensim_state_t st;
    bodies_state((*seq)++, ids, poses, &st);
    // the four kinds in an order that alternates; the CPU clock is read outside the timed
    // spans (a system call the spans would each carry as the same constant)
    double span[4] = {0, 0, 0, 0}, cpu[2] = {0, 0};
    for (int j = 0; j < 4; j++) {
      int kind = k % 2 == 0 ? j : 3 - j;   // 0: one daemon, 1: three shards, 2, 3: raw
      double ca = kind < 2 ? bench_thread_cpu() : 0;
      double a = bench_now();
      switch (kind) {
        case 0:
          need(c, NULL, sensim_update_state(c, &st), "update (one daemon)");
          break;
        case 1:
          need(NULL, s, sensim_shards_update_state(s, &st), "update (three)");
          break;
        case 2:
          raw_round(ONE, ONE + 1, rq, req, rp, reply);
          break;
        default:
          raw_round(0, NSHARD, rq, req, rp, reply);
          break;
      }
      span[kind] = bench_now() - a;
      if (kind < 2) {
        cpu[kind] = bench_thread_cpu() - ca;
      }
    }
    if (k >= warm) {
      t1[k - warm] = span[0];
      t3[k - warm] = span[1];
      r1[k - warm] = span[2];
      r3[k - warm] = span[3];
      c1 += cpu[0];
      c3 += cpu[1];
    }
  }
  double cpu[NDAEMON];
  daemons_cpu(cpu);
  for (int i = 0; i < NDAEMON; i++) {
    cpu[i] = (cpu[i] - cpu0[i]) / n;
  }
  fanout_figures_t f = {bench_median_ratio(t3, t1, n), bench_median_ratio(r3, r1, n)};
  char list[160], a1[16], a2[16];
  double m1 = bench_median(t1, n);
  c1 /= n;
  c3 /= n;
  printf("UpdateState of %d bodies, %s (this thread on %s; every daemon and echo process on "
         "%s), %u paired:\n", NBODY, p->name, bench_cpu_name(p->self, a1),
         bench_cpu_name(p->peer, a2), n);
  printf("  one daemon %.1f us, three shards %.1f us: %.2f; raw, the same bytes to echo "
         "processes: one %.1f us, three %.1f us: %.2f\n", 1e6 * m1, 1e6 * bench_median(t3, n),
         f.ours, 1e6 * bench_median(r1, n), 1e6 * bench_median(r3, n), f.raw);
  printf("  this thread's CPU %.1f us and %.1f us; daemon CPU an update: one daemon %.1f us, "
         "shards %s us\n", 1e6 * c1, 1e6 * c3, 1e6 * cpu[ONE],
         shard_list(cpu, 1e6, 1, list, sizeof(list)));
  printf("  model, a free core for the client and for each daemon: the shards' round trips "
         "overlap, the client's extra work does not: three over one ~ %.2f\n",
         (m1 + c3 - c1) / m1);
  double shards_cpu = 0;
  for (int i = 0; i < NSHARD; i++) {
    shards_cpu += cpu[i];
  }
  printf("  model, every process taking turns on busy cores: the CPU of three over one "
         "(this thread's and the daemons') ~ %.2f\n", (c3 + shards_cpu) / (c1 + cpu[ONE]));
  free(rq);
  free(rp);
  free(t1);
  free(t3);
  free(r1);
  free(r3);
  return f;
}


static void bench_fanout(const options_t* o, const bench_daemon_t* one, const bench_daemon_t* d) {
  sensim_client_t* c = connect_one(one, "bodies");
  sensim_shards_t* s = connect_shards(d, "bodies");
  build_bodies(c, NULL);
  build_bodies(NULL, s);

  // the bytes of one UpdateState each way, as the single daemon reads and writes them
  uint32_t ids[NBODY];
  sensim_pose_t poses[NBODY];
  sensim_state_t st;
  bodies_state(0, ids, poses, &st);
  uint64_t rd0, wr0, rd, wr;
  process_io(one->pid, &rd0, &wr0);
  need(c, NULL, sensim_update_state(c, &st), "update (one daemon)");
  process_io(one->pid, &rd, &wr);
  size_t req = (size_t)(rd - rd0), reply = (size_t)(wr - wr0);
  if (req == 0 || reply == 0) {
    bench_die("an UpdateState read %zu bytes and wrote %zu: cannot size the raw reference",
              req, reply);
  }
  echo_procs_start(req, reply);
  printf("UpdateState of %d bodies: %zu bytes to a daemon, %zu back (its /proc/PID/io); the "
         "raw reference sends the same counts to echo processes, pinned like the daemons\n",
         NBODY, req, reply);

  // Ours and the raw reference are placed alike, in three placements. One core: every
  // process takes turns on it, nothing overlaps, and three round trips cost about three times
  // the CPU of one, sockets alone included. Two cores: this thread on one, the daemons (and
  // echoes) on the other, so the shards' work overlaps the client's sends and waits: the shape
  // the goal is about, and the headline. Left to the scheduler: whatever it chooses, for ours
  // and the raw reference alike; on a host where a cross-core wake-up is dear that choice, not
  // the work, decides the figure (bench_client explains the placements of a single daemon).
  bench_placement_t places[3];
  int nplaces = bench_placements(places, true);
  fanout_figures_t f[3];
  unsigned seq = 1;
  int head = 0;
  for (int i = 0; i < nplaces; i++) {
    f[i] = fanout_placed(o, &places[i], c, s, req, reply, &seq);
    printf("BENCH shard_fanout_update_over_single_%s %.2f x\n", places[i].tag, f[i].ours);
    printf("BENCH shard_fanout_raw_%s %.2f x (sockets alone: three echo processes over one)\n",
           places[i].tag, f[i].raw);
    head = strcmp(places[i].tag, "two_cores") == 0 ? i : head;
  }
  if (strcmp(places[head].tag, "two_cores") != 0) {
    printf("two cores: this process may run on one CPU only, not measured\n");
  }
  pid_t daemons[NDAEMON];
  for (int i = 0; i < NDAEMON; i++) {
    daemons[i] = g_daemons[i].pid;
  }
  bench_unplace(daemons, NDAEMON);
  echo_procs_stop();
  printf("BENCH shard_fanout_update_over_single %.2f x (%s; goal <= 1.5; raw sockets there "
         "%.2f)\n", f[head].ours, places[head].name, f[head].raw);
  sensim_shards_close(s);
  sensim_client_close(c);
}


int main(int argc, char** argv) {
  bench_init("bench_shard", kill_all);
  options_t o;
  parse_options(argc, argv, &o);
  signal(SIGPIPE, SIG_IGN);
  alarm(o.quick ? 240 : 1800);
  for (int i = 0; i < NDAEMON; i++) {
    bench_daemon_start(&g_daemons[i], o.sensimd, NULL, IO_TIMEOUT_MS);
  }
  double port[NDAEMON];
  for (int i = 0; i < NDAEMON; i++) {
    port[i] = g_daemons[i].port;
  }
  char list[160];
  printf("bench_shard%s: %s, one daemon (port %d) and %d (ports %s), %ld cores\n",
         o.quick ? " --quick" : "", o.sensimd, g_daemons[ONE].port, NSHARD,
         shard_list(port, 1.0, 0, list, sizeof(list)), sysconf(_SC_NPROCESSORS_ONLN));
  bench_steps(&o, &g_daemons[ONE], g_daemons);
  bench_fanout(&o, &g_daemons[ONE], g_daemons);
  int failed = 0;
  for (int i = 0; i < NDAEMON; i++) {
    failed |= bench_daemon_stop(&g_daemons[i]) != 0;
    g_daemons[i].pid = 0;
  }
  printf("daemons stopped with SIGTERM: %s\n", failed ? "a non-zero exit" : "exit status 0");
  printf("checks: %s\n", failed ? "FAIL" : "PASS");
  return failed;
}
