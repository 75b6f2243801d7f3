// SPDX-License-Identifier: MIT
// main.c: sensim-mujoco, a MuJoCo simulation with sensimd in the loop. Loads an MJCF model,
// mirrors it into an environment of the daemon (mjbridge.c), then runs the physics: after
// every physics step the state goes to the daemon, and every k-th step a sensor step with
// outputs off, so the sensors' records go to the environment's subscribers.
//
//   sensim-mujoco MODEL.xml [--host H] [--port P] [--environment NAME] [--token T]
//                 [--seconds S] [--ratio K] [--realtime X] [--depth N] [--map FILE]
//                 [--key N] [--wait-subscribers N] [--wait-timeout S] [--trace BODY:FILE]
//                 [--keep-sensors] [--quiet]
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mujoco/mujoco.h>
#include <sensim/sensim.h>

#include "bridge.h"
#include "mjbridge.h"

static volatile sig_atomic_t g_stop = 0;


static void on_signal(int sig) {
  (void)sig;
  g_stop = 1;
}


typedef struct options {
  const char* model;
  const char* host;
  unsigned long port;
  const char* environment;
  const char* token;
  double seconds;
  const char* map;
  long key;                         // keyframe; -1 = the first if the model has one
  unsigned long wait_subscribers;
  double wait_timeout;
  const char* trace;                // BODY:FILE
  bool keep_sensors;
  bool quiet;
  bridge_options_t bridge;
} options_t;


static void usage(FILE* f) {
  fprintf(f,
          "usage: sensim-mujoco MODEL.xml [options]\n"
          "  --host H               sensimd's address (127.0.0.1)\n"
          "  --port P               its port (7700)\n"
          "  --environment NAME     the environment to create or join (mujoco)\n"
          "  --token T              the daemon's --token\n"
          "  --seconds S            simulated seconds to run (10)\n"
          "  --ratio K              a sensor step every K physics steps (1)\n"
          "  --realtime X           pace at X simulated seconds per wall second (0: free)\n"
          "  --depth N              ticks in flight, 1..%d (2)\n"
          "  --map FILE             a side file of sensim.* specs (docs/mujoco.md)\n"
          "  --key N                start from keyframe N (default: the first, if any)\n"
          "  --wait-subscribers N   start stepping once N subscriptions are open\n"
          "  --wait-timeout S       ... waiting at most S seconds (60)\n"
          "  --trace BODY:FILE      write t and BODY's pose at every sensor step (CSV)\n"
          "  --keep-sensors         do not remove the sensors at the end (no end_of_stream)\n"
          "  --quiet                print the summary line only\n",
          BRIDGE_MAX_DEPTH);
}


static bool number(const char* s, double lo, double hi, double* out) {
  char* end = NULL;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end || !(v >= lo && v <= hi)) {
    return false;
  }
  *out = v;
  return true;
}


// Parse argv; returns 0, or 2 after printing the reason.
static int parse(int argc, char** argv, options_t* o) {
  memset(o, 0, sizeof(*o));
  o->host = "127.0.0.1";
  o->port = 7700;
  o->environment = "mujoco";
  o->seconds = 10.0;
  o->key = -1;
  o->wait_timeout = 60.0;
  bridge_options_init(&o->bridge);
  o->bridge.stop = &g_stop;
  for (int i = 1; i < argc; i++) {
    const char* a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      exit(0);
    }
    if (strcmp(a, "--keep-sensors") == 0) {
      o->keep_sensors = true;
      continue;
    }
    if (strcmp(a, "--quiet") == 0) {
      o->quiet = true;
      continue;
    }
    if (a[0] != '-') {
      if (o->model) {
        fprintf(stderr, "sensim-mujoco: two models given: %s and %s\n", o->model, a);
        return 2;
      }
      o->model = a;
      continue;
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "sensim-mujoco: %s needs a value\n", a);
      return 2;
    }
    const char* v = argv[++i];
    double x = 0.0;
    bool ok = true;
    if (strcmp(a, "--host") == 0) {
      o->host = v;
    } else if (strcmp(a, "--environment") == 0) {
      o->environment = v;
    } else if (strcmp(a, "--token") == 0) {
      o->token = v;
    } else if (strcmp(a, "--map") == 0) {
      o->map = v;
    } else if (strcmp(a, "--trace") == 0) {
      o->trace = v;
      ok = strchr(v, ':') != NULL;
    } else if (strcmp(a, "--port") == 0) {
      ok = number(v, 1, 65535, &x) && x == floor(x);
      o->port = (unsigned long)x;
    } else if (strcmp(a, "--seconds") == 0) {
      ok = number(v, 1e-9, 1e9, &o->seconds);
    } else if (strcmp(a, "--ratio") == 0) {
      ok = number(v, 1, 1e6, &x) && x == floor(x);
      o->bridge.sensor_ratio = (uint32_t)x;
    } else if (strcmp(a, "--realtime") == 0) {
      ok = number(v, 0, 1e6, &o->bridge.realtime);
    } else if (strcmp(a, "--depth") == 0) {
      ok = number(v, 1, BRIDGE_MAX_DEPTH, &x) && x == floor(x);
      o->bridge.depth = (uint32_t)x;
    } else if (strcmp(a, "--key") == 0) {
      ok = number(v, 0, 1e9, &x) && x == floor(x);
      o->key = (long)x;
    } else if (strcmp(a, "--wait-subscribers") == 0) {
      ok = number(v, 0, 1e6, &x) && x == floor(x);
      o->wait_subscribers = (unsigned long)x;
    } else if (strcmp(a, "--wait-timeout") == 0) {
      ok = number(v, 0, 1e6, &o->wait_timeout);
    } else {
      fprintf(stderr, "sensim-mujoco: unknown option %s\n", a);
      usage(stderr);
      return 2;
    }
    if (!ok) {
      fprintf(stderr, "sensim-mujoco: %s '%s' is not valid (see --help)\n", a, v);
      return 2;
    }
  }
  if (!o->model) {
    usage(stderr);
    return 2;
  }
  return 0;
}


// The whole of a file as a string; NULL (reason printed) on failure.
static char* slurp(const char* path) {
  FILE* f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "sensim-mujoco: %s: %s\n", path, strerror(errno));
    return NULL;
  }
  size_t cap = 4096, n = 0, got;
  char* buf = malloc(cap);
  while (buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
    n += got;
    if (n + 1 == cap) {
      char* more = realloc(buf, cap * 2);
      if (!more) {
        free(buf);
      }
      buf = more;
      cap *= 2;
    }
  }
  if (!buf) {
    fprintf(stderr, "sensim-mujoco: %s: out of memory\n", path);
  } else if (ferror(f)) {   // a directory opens, then fails to read (EISDIR)
    fprintf(stderr, "sensim-mujoco: %s: %s\n", path, strerror(errno));
    free(buf);
    buf = NULL;
  }
  fclose(f);
  if (buf) {
    buf[n] = '\0';
  }
  return buf;
}


// Advance the physics by one step and leave positions and velocities of the new state
// computed. Euler and implicit: mj_step2 finishes the step whose first half (mj_step1) was
// done for the current state, then mj_step1 starts the next one, so the physics costs what
// mj_step costs. RK4 has no split: mj_step, then the kinematics of the new state.
static void physics_step(const mjModel* m, mjData* d) {
  if (m->opt.integrator == mjINT_RK4) {
    mj_step(m, d);
    mj_kinematics(m, d);
    mj_comPos(m, d);
    mj_comVel(m, d);
  } else {
    mj_step2(m, d);
    mj_step1(m, d);
  }
}


int main(int argc, char** argv) {
  options_t o;
  int rc = parse(argc, argv, &o);
  if (rc) {
    return rc;
  }

  // everything the program holds, released at `out` whatever happens
  mjModel* m = NULL;
  mjData* d = NULL;
  char* side = NULL;
  FILE* trace = NULL;
  sensim_client_t* cli = NULL;
  bridge_t* b = NULL;
  mjbridge_t* mb = NULL;
  sensim_status_t st;

  // the model, at its keyframe
  char err[1024] = "";
  m = mj_loadXML(o.model, NULL, err, sizeof(err));
  if (!m) {
    fprintf(stderr, "sensim-mujoco: %s: %s\n", o.model, err);
    rc = 1;
    goto out;
  }
  d = mj_makeData(m);
  if (o.key >= m->nkey) {
    fprintf(stderr, "sensim-mujoco: --key %ld: the model has %d keyframes\n", o.key, m->nkey);
    rc = 2;
    goto out;
  }
  if (o.key >= 0 || m->nkey > 0) {
    mj_resetDataKeyframe(m, d, o.key >= 0 ? (int)o.key : 0);
  }
  mj_forward(m, d);

  side = o.map ? slurp(o.map) : NULL;
  if (o.map && !side) {
    rc = 1;
    goto out;
  }
  int trace_body = -1;
  if (o.trace) {
    const char* colon = strchr(o.trace, ':');
    char body[256];
    int nbody = (int)(colon - o.trace);
    snprintf(body, sizeof(body), "%.*s", nbody, o.trace);
    // an empty name would match MuJoCo's first unnamed body, a cut one another body
    trace_body = nbody > 0 && nbody < (int)sizeof(body) ? mj_name2id(m, mjOBJ_BODY, body) : -1;
    if (trace_body < 0) {
      fprintf(stderr, "sensim-mujoco: --trace: the model has no body '%s'\n", body);
      rc = 2;
      goto out;
    }
    trace = fopen(colon + 1, "w");
    if (!trace) {
      fprintf(stderr, "sensim-mujoco: --trace: %s: %s\n", colon + 1, strerror(errno));
      rc = 1;
      goto out;
    }
    fprintf(trace, "t,x,y,z,qx,qy,qz,qw\n");
  }

  // connect and mirror
  sensim_options_t copts;
  sensim_options_init(&copts);
  copts.environment = o.environment;
  copts.token = o.token;
  copts.client_name = "sensim-mujoco";
  copts.timeout_ms = 60000;
  st = sensim_client_connect(o.host, (uint16_t)o.port, &copts, &cli);
  if (st != SENSIM_OK) {
    fprintf(stderr, "sensim-mujoco: connecting to %s:%lu: %s (%s)\n", o.host, o.port,
            cli ? sensim_client_last_error(cli) : "", sensim_status_name(st));
    rc = 1;
    goto out;
  }
  b = bridge_create(cli, &o.bridge);
  mb = b ? mjbridge_create(b, m, d, side, err, sizeof(err)) : NULL;
  if (!mb) {
    fprintf(stderr, "sensim-mujoco: %s: %s\n", o.model, b ? err : "out of memory");
    rc = 1;
    goto out;
  }
  // from here a signal stops the run cleanly: set before the sensor lines are printed, which
  // others read as the sign that the program is running
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  mjbridge_counts_t n;
  mjbridge_counts(mb, &n);
  double dt = m->opt.timestep;
  if (!o.quiet) {
    printf("sensim-mujoco: %s: %u bodies, %u joints, %u objects (%u primitives, %u meshes, "
           "%u height fields, %u geoms not mirrored), %u materials, %u sensors; physics step "
           "%g s, sensor step every %u (%g Hz)\n",
           o.model, n.bodies, n.joints, n.objects, n.primitives, n.meshes, n.height_fields,
           n.skipped_geoms, n.materials, n.sensors, dt, o.bridge.sensor_ratio,
           1.0 / (dt * o.bridge.sensor_ratio));
    for (uint32_t i = 0; i < n.sensors; i++) {
      uint32_t id;
      const char* name = mjbridge_sensor(mb, i, &id);
      printf("sensim-mujoco: sensor %u %s\n", id, name);
    }
    fflush(stdout);
  }
  if (o.wait_subscribers > 0 &&
      (st = bridge_wait_subscribers(b, (uint32_t)o.wait_subscribers, o.wait_timeout)) !=
          SENSIM_OK) {
    fprintf(stderr, "sensim-mujoco: %s\n", bridge_last_error(b));
    rc = 1;
    goto out;
  }

  // the loop
  long steps = lround(o.seconds / dt);
  mjbridge_state(mb, m, d, b);
  if ((st = bridge_begin(b, d->time)) != SENSIM_OK) {
    fprintf(stderr, "sensim-mujoco: %s\n", bridge_last_error(b));
    rc = 1;
    goto out;
  }
  for (long k = 1; k <= steps && !g_stop; k++) {
    physics_step(m, d);
    mjbridge_state(mb, m, d, b);
    if ((st = bridge_tick(b, d->time)) != SENSIM_OK) {
      fprintf(stderr, "sensim-mujoco: at t = %.6f s: %s\n", d->time, bridge_last_error(b));
      rc = 1;
      break;
    }
    if (trace && k % o.bridge.sensor_ratio == 0) {
      const mjtNum* p = d->xpos + 3 * trace_body;
      const mjtNum* q = d->xquat + 4 * trace_body;
      fprintf(trace, "%.9f,%.9f,%.9f,%.9f,%.9f,%.9f,%.9f,%.9f\n", d->time, p[0], p[1], p[2],
              q[1], q[2], q[3], q[0]);
    }
  }
  if ((st = bridge_end(b)) != SENSIM_OK && rc == 0) {
    fprintf(stderr, "sensim-mujoco: %s\n", bridge_last_error(b));
    rc = 1;
  }
  if (!o.keep_sensors && rc == 0 && (st = bridge_remove_sensors(b)) != SENSIM_OK) {
    fprintf(stderr, "sensim-mujoco: %s\n", bridge_last_error(b));
    rc = 1;
  }

  // the summary
  bridge_stats_t s;
  bridge_stats(b, &s);
  double wall = s.wall_seconds > 0 ? s.wall_seconds : 1e-9;
  printf("sensim-mujoco: physics_steps=%llu sensor_steps=%llu sim_s=%.3f wall_s=%.3f "
         "physics_steps_per_s=%.0f realtime_factor=%.3f daemon_wait_s=%.3f\n",
         (unsigned long long)s.ticks, (unsigned long long)s.steps, s.sim_seconds, wall,
         (double)s.ticks / wall, s.sim_seconds / wall, s.wait_seconds);

out:
  if (trace) {
    fclose(trace);
  }
  mjbridge_destroy(mb);
  bridge_destroy(b);
  sensim_client_close(cli);
  free(side);
  if (d) {
    mj_deleteData(d);
  }
  if (m) {
    mj_deleteModel(m);
  }
  return rc;
}
