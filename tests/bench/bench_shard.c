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
//        (goal <= 1.5: the shards' round trips overlap). Beside it: this thread's CPU and
//        each daemon's per update, and the model for a free core per process; on a host
//        with fewer free cores than processes the daemons' work (each shard's the same as one
//        daemon's) runs in turn and the measured ratio approaches the CPU ratio instead,
//        printed as the second model
//
//   bench_shard [--quick] [--sensimd PATH] [--steps N] [--updates N]
//
// Both runs share the seed: every step's records must agree byte for byte between one daemon
// and three (checked on every step, --quick included), the merged records in sensor id order.
#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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


// CPU seconds every thread of process pid has run so far (the first field of each
// /proc/PID/task/TID/schedstat, in ns).
static double process_cpu(pid_t pid) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
  DIR* dir = opendir(path);
  if (!dir) {
    bench_die("%s: cannot read the daemon's threads", path);
  }
  double sum = 0;
  struct dirent* e;
  while ((e = readdir(dir)) != NULL) {
    if (e->d_name[0] == '.') {
      continue;
    }
    char file[600];
    snprintf(file, sizeof(file), "%s/%s/schedstat", path, e->d_name);
    FILE* f = fopen(file, "r");
    unsigned long long ns = 0;
    if (f) {
      if (fscanf(f, "%llu", &ns) != 1) {
        ns = 0;
      }
      fclose(f);
    }
    sum += 1e-9 * (double)ns;
  }
  closedir(dir);
  return sum;
}


// The CPU every daemon has run so far (process_cpu), indexed as g_daemons.
static void daemons_cpu(double cpu[NDAEMON]) {
  for (int i = 0; i < NDAEMON; i++) {
    cpu[i] = process_cpu(g_daemons[i].pid);
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


// CPU seconds of the calling thread.
static double thread_cpu(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
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


static void bench_fanout(const options_t* o, const bench_daemon_t* one, const bench_daemon_t* d) {
  sensim_client_t* c = connect_one(one, "bodies");
  sensim_shards_t* s = connect_shards(d, "bodies");
  build_bodies(c, NULL);
  build_bodies(NULL, s);
  uint32_t ids[NBODY];
  sensim_pose_t poses[NBODY];
  for (uint32_t i = 0; i < NBODY; i++) {
    ids[i] = i + 1;
    poses[i] = sensim_pose_identity();
  }
  double* t1 = bench_xmalloc(o->updates * sizeof(double));
  double* t3 = bench_xmalloc(o->updates * sizeof(double));
  double c1 = 0, c3 = 0;                // this thread's CPU for each kind of update
  double cpu0[NDAEMON];
  daemons_cpu(cpu0);
  for (unsigned k = 0; k < o->updates; k++) {
    for (uint32_t i = 0; i < NBODY; i++) {
      poses[i].position[0] = 0.01 * k + i;
    }
    sensim_state_t st;
    sensim_state_init(&st);
    st.time = 0.01 * k;
    st.nbodies = NBODY;
    st.body_ids = ids;
    st.body_poses = poses[0].position;
    // the CPU clock is read outside the timed spans: it is a system call, which the spans
    // would each carry as the same constant (moving their ratio towards 1)
    double a, b, b2, e;
    double ca = thread_cpu(), cb, ce;
    a = bench_now();
    if (k % 2 == 0) {
      need(c, NULL, sensim_update_state(c, &st), "update (one daemon)");
      b = bench_now();
      cb = thread_cpu();
      b2 = bench_now();
      need(NULL, s, sensim_shards_update_state(s, &st), "update (three)");
      e = bench_now();
      ce = thread_cpu();
      t1[k] = b - a;
      t3[k] = e - b2;
      c1 += cb - ca;
      c3 += ce - cb;
    } else {
      need(NULL, s, sensim_shards_update_state(s, &st), "update (three)");
      b = bench_now();
      cb = thread_cpu();
      b2 = bench_now();
      need(c, NULL, sensim_update_state(c, &st), "update (one daemon)");
      e = bench_now();
      ce = thread_cpu();
      t3[k] = b - a;
      t1[k] = e - b2;
      c3 += cb - ca;
      c1 += ce - cb;
    }
  }
  double cpu[NDAEMON];
  daemons_cpu(cpu);
  for (int i = 0; i < NDAEMON; i++) {
    cpu[i] = (cpu[i] - cpu0[i]) / o->updates;
  }
  char list[160];
  double ratio = bench_median_ratio(t3, t1, o->updates);
  double m1 = bench_median(t1, o->updates);
  c1 /= o->updates;
  c3 /= o->updates;
  printf("UpdateState of %d bodies, %u paired: one daemon %.1f us, three shards %.1f us; this "
         "thread's CPU %.1f us and %.1f us\n", NBODY, o->updates, 1e6 * m1,
         1e6 * bench_median(t3, o->updates), 1e6 * c1, 1e6 * c3);
  printf("daemon CPU an update: one daemon %.1f us; shards %s us\n", 1e6 * cpu[ONE],
         shard_list(cpu, 1e6, 1, list, sizeof(list)));
  printf("model, a free core for the client and for each daemon: the shards' round trips "
         "overlap, the client's extra work does not: three over one ~ %.2f\n",
         (m1 + c3 - c1) / m1);
  double shards_cpu = 0;
  for (int i = 0; i < NSHARD; i++) {
    shards_cpu += cpu[i];
  }
  printf("model, every process taking turns on busy cores: the CPU of three over one "
         "(this thread's and the daemons') ~ %.2f\n", (c3 + shards_cpu) / (c1 + cpu[ONE]));
  printf("BENCH shard_fanout_update_over_single %.2f x (goal <= 1.5)\n", ratio);
  free(t1);
  free(t3);
  sensim_shards_close(s);
  sensim_client_close(c);
}


int main(int argc, char** argv) {
  bench_init("bench_shard", kill_daemons);
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
