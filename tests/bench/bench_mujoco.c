// SPDX-License-Identifier: MIT
// bench_mujoco.c: MuJoCo with sensimd in the loop through the bridge (client-c/mujoco), the
// shipped vehicle scene at 1 kHz physics with a sensor step every physics step, two ticks in
// flight, outputs off (as sensim-mujoco runs).
//
//   BENCH mujoco_bridge_overhead   wall time of MuJoCo + bridge + sensimd with the VLP-16 and
//        the IMU over the sum of what the two cost alone: MuJoCo's same steps in this process
//        (no bridge) plus the daemon's own time, its CPU time over the run (every thread,
//        /proc/PID/task/*/schedstat). 1 = coupling them costs nothing; below 1 the daemon
//        traces while MuJoCo computes (two cores). Median over rounds, alternating the order.
//   BENCH mujoco_vehicle_realtime_factor   simulated seconds per wall second of the scene as
//        shipped (VLP-16, OS1-64, IMU, four encoders, odometer), free running; median.
//
//   bench_mujoco [--quick] [--sensimd PATH] [--scene PATH] [--seconds S] [--rounds N]
//
// --quick runs short rounds and checks only what a run must show (ctest, label bench): every
// tick stepped, the lidars' rays traced.
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mujoco/mujoco.h>
#include <sensim/sensim.h>

#include "bench_util.h"
#include "bridge.h"
#include "mjbridge.h"

typedef struct options {
  int quick;
  const char* sensimd;
  const char* scene;
  double seconds;
  unsigned rounds;
} options_t;

static bench_daemon_t g_daemon;


static void parse(int argc, char** argv, options_t* o) {
  static const char kUsage[] =
      "usage: bench_mujoco [--quick] [--sensimd PATH] [--scene PATH] [--seconds S] "
      "[--rounds N]\n"
      "  --quick          short rounds; only the checks matter\n"
      "  --sensimd PATH   the daemon (default: the build's, or $SENSIMD)\n"
      "  --scene PATH     the vehicle scene (default: client-c/mujoco/scenes/vehicle.xml)\n"
      "  --seconds S      simulated seconds per run (default 2)\n"
      "  --rounds N       runs of each measurement (default 5)\n";
  o->quick = bench_has_arg(argc, argv, "--quick");
  o->sensimd = getenv("SENSIMD") ? getenv("SENSIMD") : SENSIMD_DEFAULT;
  o->scene = SENSIM_SCENES_DIR "/vehicle.xml";
  o->seconds = o->quick ? 0.2 : 2.0;
  o->rounds = o->quick ? 1 : 5;
  bench_opt_t opts[] = {
      {"quick", BENCH_OPT_FLAG, NULL, 0, 0},
      {"sensimd", BENCH_OPT_STRING, &o->sensimd, 0, 0},
      {"scene", BENCH_OPT_STRING, &o->scene, 0, 0},
      {"seconds", BENCH_OPT_POSITIVE, &o->seconds, 0, 0},
      {"rounds", BENCH_OPT_COUNT, &o->rounds, 1, 1000},
  };
  bench_parse_options(argc, argv, opts, sizeof(opts) / sizeof(opts[0]), kUsage);
}


// CPU seconds of every thread of process pid so far.
static double process_cpu(pid_t pid) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
  DIR* dir = opendir(path);
  if (!dir) {
    bench_die("%s: cannot list the daemon's threads", path);
  }
  double total = 0.0;
  struct dirent* e;
  while ((e = readdir(dir)) != NULL) {
    if (e->d_name[0] == '.') {
      continue;
    }
    char file[320];
    snprintf(file, sizeof(file), "/proc/%d/task/%s/schedstat", (int)pid, e->d_name);
    FILE* f = fopen(file, "r");
    unsigned long long ns = 0;
    if (f && fscanf(f, "%llu", &ns) == 1) {
      total += 1e-9 * (double)ns;
    }
    if (f) {
      fclose(f);
    }
  }
  closedir(dir);
  return total;
}


static mjModel* load(const char* path) {
  char err[1024] = "";
  mjModel* m = mj_loadXML(path, NULL, err, sizeof(err));
  if (!m) {
    bench_die("%s: %s", path, err);
  }
  return m;
}


static void reset(const mjModel* m, mjData* d) {
  mj_resetData(m, d);
  if (m->nkey > 0) {
    mj_resetDataKeyframe(m, d, 0);
  }
  mj_forward(m, d);
}


// sensim-mujoco's physics step (Euler: the split step costs what mj_step costs).
static void physics_step(const mjModel* m, mjData* d) {
  mj_step2(m, d);
  mj_step1(m, d);
}


// Wall seconds of `steps` physics steps of MuJoCo alone.
static double run_mujoco(const mjModel* m, mjData* d, long steps) {
  reset(m, d);
  double t0 = bench_now();
  for (long k = 0; k < steps; k++) {
    physics_step(m, d);
  }
  return bench_now() - t0;
}


// Wall seconds of the same steps through the bridge into a fresh environment; *daemon_cpu the
// daemon's CPU seconds meanwhile. Checks that every tick was stepped and that rays were traced.
static double run_bridge(const mjModel* m, mjData* d, long steps, const char* side, int round,
                         double* daemon_cpu) {
  reset(m, d);
  char env[64];
  snprintf(env, sizeof(env), "bench-%d", round);
  sensim_options_t o;
  sensim_options_init(&o);
  o.environment = env;
  o.client_name = "bench_mujoco";
  sensim_client_t* cli = NULL;
  if (sensim_client_connect("127.0.0.1", (uint16_t)g_daemon.port, &o, &cli) != SENSIM_OK) {
    bench_die("connect: %s", sensim_client_last_error(cli));
  }
  bridge_t* b = bridge_create(cli, NULL);
  char err[1024];
  mjbridge_t* mb = mjbridge_create(b, m, d, side, err, sizeof(err));
  if (!mb) {
    bench_die("mirror: %s", err);
  }
  double cpu0 = process_cpu(g_daemon.pid);
  double t0 = bench_now();
  mjbridge_state(mb, m, d, b);
  sensim_status_t st = bridge_begin(b, d->time);
  for (long k = 0; k < steps && st == SENSIM_OK; k++) {
    physics_step(m, d);
    mjbridge_state(mb, m, d, b);
    st = bridge_tick(b, d->time);
  }
  if (st == SENSIM_OK) {
    st = bridge_end(b);
  }
  double wall = bench_now() - t0;
  *daemon_cpu = process_cpu(g_daemon.pid) - cpu0;
  if (st != SENSIM_OK) {
    bench_die("bridge: %s", bridge_last_error(b));
  }

  // the checks: every tick a step, rays traced
  const sensim_info_t* info = NULL;
  if (sensim_get_info(cli, &info) != SENSIM_OK) {
    bench_die("GetInfo: %s", sensim_client_last_error(cli));
  }
  for (uint32_t i = 0; i < info->nenvironments; i++) {
    const sensim_environment_info_t* e = &info->environments[i];
    if (strcmp(e->name, env) != 0) {
      continue;
    }
    bridge_stats_t s;
    bridge_stats(b, &s);
    if (e->steps != (uint64_t)steps || s.steps != (uint64_t)steps ||
        e->counters.value[SENSIM_COUNTER_RAYS_TRACED] == 0) {
      bench_die("%s: %llu steps (bridge %llu) of %ld, %llu rays traced", env,
                (unsigned long long)e->steps, (unsigned long long)s.steps, steps,
                (unsigned long long)e->counters.value[SENSIM_COUNTER_RAYS_TRACED]);
    }
  }
  mjbridge_destroy(mb);
  bridge_destroy(b);
  sensim_client_close(cli);
  return wall;
}


int main(int argc, char** argv) {
  bench_init("bench_mujoco", bench_daemon_kill);
  options_t o;
  parse(argc, argv, &o);
  mjModel* m = load(o.scene);
  mjData* d = mj_makeData(m);
  long steps = lround(o.seconds / m->opt.timestep);
  bench_daemon_start(&g_daemon, o.sensimd, NULL, 30000);
  printf("bench_mujoco: %s, %ld physics steps of %g s per run, %u rounds\n", o.scene, steps,
         m->opt.timestep, o.rounds);

  // the overhead of the coupling: VLP-16 and IMU
  static const char kVlpImu[] =
      "sensim.sensor.os1 none\nsensim.sensor.encoder_fl none\nsensim.sensor.encoder_fr none\n"
      "sensim.sensor.encoder_rl none\nsensim.sensor.encoder_rr none\n"
      "sensim.sensor.odometer none\n";
  double* ratio = bench_xmalloc(o.rounds * sizeof(double));
  double* rtf = bench_xmalloc(o.rounds * sizeof(double));
  double mj_sum = 0.0, cpu_sum = 0.0, wall_sum = 0.0;
  for (unsigned r = 0; r < o.rounds; r++) {
    double mj, cpu, wall;
    if (r % 2 == 0) {
      mj = run_mujoco(m, d, steps);
      wall = run_bridge(m, d, steps, kVlpImu, (int)r, &cpu);
    } else {
      wall = run_bridge(m, d, steps, kVlpImu, (int)r, &cpu);
      mj = run_mujoco(m, d, steps);
    }
    ratio[r] = wall / (mj + cpu);
    mj_sum += mj;
    cpu_sum += cpu;
    wall_sum += wall;
  }
  printf("  VLP-16 + IMU: MuJoCo alone %.1f us per step, the daemon %.1f us of CPU per step, "
         "coupled %.1f us per step (means)\n",
         1e6 * mj_sum / (o.rounds * (double)steps), 1e6 * cpu_sum / (o.rounds * (double)steps),
         1e6 * wall_sum / (o.rounds * (double)steps));
  printf("BENCH mujoco_bridge_overhead %.2f x\n", bench_median(ratio, o.rounds));

  // the scene as shipped
  for (unsigned r = 0; r < o.rounds; r++) {
    double cpu;
    double wall = run_bridge(m, d, steps, NULL, (int)(o.rounds + r), &cpu);
    rtf[r] = (double)steps * m->opt.timestep / wall;
  }
  printf("BENCH mujoco_vehicle_realtime_factor %.2f x\n", bench_median(rtf, o.rounds));

  free(ratio);
  free(rtf);
  mj_deleteData(d);
  mj_deleteModel(m);
  return bench_daemon_stop(&g_daemon) == 0 ? 0 : 1;
}
