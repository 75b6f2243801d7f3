// SPDX-License-Identifier: MIT
// bridge.c: the engine-independent bridge: creation of the mirrored world through the C
// client, the state arrays the engine writes in place (sent from there, never copied), and
// the loop of ticks in flight. A tick's requests are written in one go and collected `depth`
// ticks later, so the engine's next physics steps run while the daemon traces.
#include "bridge.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct bridge {
  sensim_client_t* cli;
  bridge_options_t opts;
  char err[1024];

  // the state arrays, one slot per body and joint, in creation order
  uint32_t nbodies, cap_bodies;
  uint32_t* body_ids;
  double* poses;                    // 7 per body
  double* velocities;               // 6 per body
  uint32_t njoints, cap_joints;
  uint32_t* joint_ids;
  double* joint_positions;

  // sensors created, for bridge_remove_sensors and the next free id
  uint32_t nsensors, cap_sensors;
  uint32_t* sensor_ids;
  uint64_t next_sensor_id;          // past the largest id given: UINT32_MAX + 1 = none left

  // the loop
  bool begun, ended;
  double t0, t_last;
  uint64_t ticks, steps;
  struct {
    uint64_t state, step;
  } flight[BRIDGE_MAX_DEPTH];
  uint32_t head, count;             // ring of ticks in flight, oldest at head
  double wall0, wall1, wait_s, sleep_s;
};


static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}


// Record a failure: the context, then the client's detail when the status came from it.
__attribute__((format(printf, 4, 5))) static sensim_status_t fail(bridge_t* b,
                                                                  sensim_status_t st,
                                                                  bool from_client,
                                                                  const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(b->err, sizeof(b->err), fmt, ap);
  va_end(ap);
  if (from_client && n >= 0 && (size_t)n < sizeof(b->err)) {
    snprintf(b->err + n, sizeof(b->err) - (size_t)n, ": %s (%s)",
             sensim_client_last_error(b->cli), sensim_status_name(st));
  }
  return st;
}


// Grow *ids to hold n + 1 ids (capacity doubling from 16).
static bool grow_ids(uint32_t** ids, uint32_t* cap, uint32_t n) {
  if (n < *cap) {
    return true;
  }
  uint32_t c = *cap ? 2 * *cap : 16;
  uint32_t* q = realloc(*ids, (size_t)c * sizeof(*q));
  if (!q) {
    return false;
  }
  *ids = q;
  *cap = c;
  return true;
}


// Resize an array of doubles to c elements of `per` doubles (parallel arrays share one
// capacity, raised only once all of them have grown).
static bool resize_doubles(double** p, uint32_t c, size_t per) {
  double* q = realloc(*p, (size_t)c * per * sizeof(*q));
  if (!q) {
    return false;
  }
  *p = q;
  return true;
}


void bridge_options_init(bridge_options_t* opts) {
  memset(opts, 0, sizeof(*opts));
  opts->sensor_ratio = 1;
  opts->depth = 2;
}


bridge_t* bridge_create(sensim_client_t* cli, const bridge_options_t* opts) {
  bridge_t* b = calloc(1, sizeof(*b));
  if (!b) {
    return NULL;
  }
  b->cli = cli;
  if (opts) {
    b->opts = *opts;
  } else {
    bridge_options_init(&b->opts);
  }
  if (b->opts.sensor_ratio == 0) {
    b->opts.sensor_ratio = 1;
  }
  if (b->opts.depth == 0) {
    b->opts.depth = 1;
  }
  if (b->opts.depth > BRIDGE_MAX_DEPTH) {
    b->opts.depth = BRIDGE_MAX_DEPTH;
  }
  b->next_sensor_id = 1;
  return b;
}


void bridge_destroy(bridge_t* b) {
  if (!b) {
    return;
  }
  free(b->body_ids);
  free(b->poses);
  free(b->velocities);
  free(b->joint_ids);
  free(b->joint_positions);
  free(b->sensor_ids);
  free(b);
}


const char* bridge_last_error(const bridge_t* b) {
  return b->err;
}


sensim_client_t* bridge_client(const bridge_t* b) {
  return b->cli;
}

//---------------- Describing the world

sensim_status_t bridge_environment(bridge_t* b, const double gravity[3],
                                   const double magnetic_field[3]) {
  sensim_environment_t env;
  sensim_environment_init(&env);
  env.set_gravity = true;
  memcpy(env.gravity, gravity, sizeof(env.gravity));
  env.set_magnetic_field = true;
  memcpy(env.magnetic_field, magnetic_field, sizeof(env.magnetic_field));
  sensim_status_t st = sensim_set_environment(b->cli, &env);
  return st == SENSIM_OK ? st : fail(b, st, true, "environment (gravity, magnetic field)");
}


sensim_status_t bridge_body(bridge_t* b, const sensim_body_t* body, uint32_t* slot) {
  uint32_t n = b->nbodies;
  if (b->begun) {
    return fail(b, SENSIM_FAILED_PRECONDITION, false, "body %u: after bridge_begin", body->id);
  }
  if (n == b->cap_bodies) {
    uint32_t cap = b->cap_bodies;
    if (!grow_ids(&b->body_ids, &cap, n) || !resize_doubles(&b->poses, cap, 7) ||
        !resize_doubles(&b->velocities, cap, 6)) {
      return fail(b, SENSIM_ENOMEM, false, "body %u: out of memory", body->id);
    }
    b->cap_bodies = cap;
  }
  sensim_status_t st = sensim_create_body(b->cli, body);
  if (st != SENSIM_OK) {
    return fail(b, st, true, "body %u '%s'", body->id, body->name ? body->name : "");
  }
  b->body_ids[n] = body->id;
  memcpy(b->poses + 7 * n, body->pose.position, 3 * sizeof(double));
  memcpy(b->poses + 7 * n + 3, body->pose.orientation, 4 * sizeof(double));
  memcpy(b->velocities + 6 * n, body->linear_velocity, 3 * sizeof(double));
  memcpy(b->velocities + 6 * n + 3, body->angular_velocity, 3 * sizeof(double));
  b->nbodies++;
  if (slot) {
    *slot = n;
  }
  return SENSIM_OK;
}


sensim_status_t bridge_joint(bridge_t* b, const sensim_joint_t* joint, uint32_t* slot) {
  uint32_t n = b->njoints;
  if (b->begun) {
    return fail(b, SENSIM_FAILED_PRECONDITION, false, "joint %u: after bridge_begin", joint->id);
  }
  if (n == b->cap_joints) {
    uint32_t cap = b->cap_joints;
    if (!grow_ids(&b->joint_ids, &cap, n) || !resize_doubles(&b->joint_positions, cap, 1)) {
      return fail(b, SENSIM_ENOMEM, false, "joint %u: out of memory", joint->id);
    }
    b->cap_joints = cap;
  }
  sensim_status_t st = sensim_create_joint(b->cli, joint);
  if (st != SENSIM_OK) {
    return fail(b, st, true, "joint %u '%s'", joint->id, joint->name ? joint->name : "");
  }
  b->joint_ids[n] = joint->id;
  b->joint_positions[n] = joint->position;
  b->njoints++;
  if (slot) {
    *slot = n;
  }
  return SENSIM_OK;
}


sensim_status_t bridge_primitive(bridge_t* b, const sensim_primitive_t* prim) {
  sensim_status_t st = sensim_create_primitive(b->cli, prim);
  return st == SENSIM_OK ? st
                         : fail(b, st, true, "primitive %u '%s'", prim->id,
                                prim->name ? prim->name : "");
}


sensim_status_t bridge_mesh(bridge_t* b, const sensim_mesh_t* mesh) {
  sensim_status_t st = sensim_create_mesh(b->cli, mesh);
  return st == SENSIM_OK ? st
                         : fail(b, st, true, "mesh %u '%s'", mesh->id,
                                mesh->name ? mesh->name : "");
}


sensim_status_t bridge_object(bridge_t* b, const sensim_object_t* obj) {
  sensim_status_t st = sensim_create_object(b->cli, obj);
  return st == SENSIM_OK ? st
                         : fail(b, st, true, "object %u '%s'", obj->id,
                                obj->name ? obj->name : "");
}


sensim_status_t bridge_material(bridge_t* b, uint32_t id, const char* name, const char* text) {
  sensim_material_t mat;
  uint32_t label;
  bool has_label;
  char err[512];
  if (spec_material_parse(text, &mat, &label, &has_label, err, sizeof(err))) {
    return fail(b, SENSIM_INVALID_ARGUMENT, false, "material '%s': %s", name, err);
  }
  mat.id = id;
  mat.name = name;
  sensim_status_t st = sensim_set_material(b->cli, &mat);
  return st == SENSIM_OK ? st : fail(b, st, true, "material '%s'", name);
}


sensim_status_t bridge_ambient(bridge_t* b, const char* text) {
  sensim_ambient_t amb;
  char err[512];
  if (spec_ambient_parse(text, &amb, err, sizeof(err))) {
    return fail(b, SENSIM_INVALID_ARGUMENT, false, "medium: %s", err);
  }
  amb.id = 0;
  sensim_status_t st = sensim_set_ambient(b->cli, &amb);
  return st == SENSIM_OK ? st : fail(b, st, true, "medium");
}


sensim_status_t bridge_sensor_spec(bridge_t* b, const char* name, spec_sensor_t* s,
                                   uint32_t* id) {
  if (!grow_ids(&b->sensor_ids, &b->cap_sensors, b->nsensors)) {
    return fail(b, SENSIM_ENOMEM, false, "sensor '%s': out of memory", name);
  }
  if (!s->id && b->next_sensor_id > UINT32_MAX) {
    return fail(b, SENSIM_INVALID_ARGUMENT, false, "sensor '%s': no free id after %u (give it "
                "id=)", name, UINT32_MAX);
  }
  s->sensor.id = s->id ? s->id : (uint32_t)b->next_sensor_id;
  s->sensor.name = name;
  sensim_status_t st = SENSIM_OK;
  switch (s->kind) {
    case SPEC_LIDAR:
      s->lidar.exclude_bodies = s->nexclude ? s->exclude_ids : NULL;
      s->lidar.nexclude_bodies = s->nexclude;
      st = sensim_create_lidar(b->cli, &s->sensor, &s->lidar);
      break;
    case SPEC_IMU:
      st = sensim_create_imu(b->cli, &s->sensor, &s->imu);
      break;
    case SPEC_ENCODER:
      st = sensim_create_encoder(b->cli, &s->sensor, &s->encoder);
      break;
    case SPEC_ODOMETER:
      st = sensim_create_odometer(b->cli, &s->sensor, &s->odometer);
      break;
    case SPEC_CONE:
      st = sensim_create_cone(b->cli, &s->sensor, &s->cone);
      break;
    default:
      return fail(b, SENSIM_INVALID_ARGUMENT, false, "sensor '%s': kind %d", name, (int)s->kind);
  }
  if (st != SENSIM_OK) {
    return fail(b, st, true, "sensor '%s' (id %u)", name, s->sensor.id);
  }
  b->sensor_ids[b->nsensors++] = s->sensor.id;
  if (s->sensor.id >= b->next_sensor_id) {
    b->next_sensor_id = (uint64_t)s->sensor.id + 1;
  }
  if (id) {
    *id = s->sensor.id;
  }
  return SENSIM_OK;
}


sensim_status_t bridge_sensor(bridge_t* b, const char* name, const char* text,
                              const bridge_resolver_t* res, uint32_t* id) {
  char err[768];
  spec_sensor_t* s = malloc(sizeof(*s));  // about 25 KB: not on the stack
  if (!s) {
    return fail(b, SENSIM_ENOMEM, false, "sensor '%s': out of memory", name);
  }
  sensim_status_t st = SENSIM_OK;
  if (spec_sensor_parse(text, s, err, sizeof(err))) {
    st = fail(b, SENSIM_INVALID_ARGUMENT, false, "sensor '%s': %s", name, err);
    goto done;
  }

  // the names the spec gives, through the engine adapter
  if (s->site[0] && !(res && res->frame &&
                      res->frame(res->ctx, s->site, &s->sensor.body_id, &s->sensor.mount))) {
    st = fail(b, SENSIM_NOT_FOUND, false, "sensor '%s': site '%s' not found", name, s->site);
    goto done;
  }
  if (s->joint[0]) {
    double radius = 0.0;
    uint32_t joint_id = 0;
    if (!(res && res->joint && res->joint(res->ctx, s->joint, &joint_id, &radius))) {
      st = fail(b, SENSIM_NOT_FOUND, false, "sensor '%s': joint '%s' not found (a hinge or "
                                            "slide joint)", name, s->joint);
      goto done;
    }
    s->encoder.joint_id = s->odometer.joint_id = joint_id;
    if (s->kind == SPEC_ODOMETER && !s->has_wheel_radius) {
      if (!(radius > 0.0)) {
        st = fail(b, SENSIM_INVALID_ARGUMENT, false, "sensor '%s': wheel_radius= is needed: "
                                                     "joint '%s' turns no round geometry",
                  name, s->joint);
        goto done;
      }
      s->odometer.wheel_radius = radius;
    }
  }
  for (uint32_t i = 0; i < s->nexclude; i++) {
    if (!(res && res->body && res->body(res->ctx, s->exclude_names[i], &s->exclude_ids[i]))) {
      st = fail(b, SENSIM_NOT_FOUND, false, "sensor '%s': exclude: body '%s' not found", name,
                s->exclude_names[i]);
      goto done;
    }
  }
  st = bridge_sensor_spec(b, name, s, id);
done:
  free(s);
  return st;
}

//---------------- State arrays

uint32_t bridge_nbodies(const bridge_t* b) {
  return b->nbodies;
}


uint32_t bridge_njoints(const bridge_t* b) {
  return b->njoints;
}


double* bridge_poses(bridge_t* b) {
  return b->poses;
}


double* bridge_velocities(bridge_t* b) {
  return b->velocities;
}


double* bridge_joint_positions(bridge_t* b) {
  return b->joint_positions;
}

//---------------- The loop

sensim_status_t bridge_wait_subscribers(bridge_t* b, uint32_t n, double timeout_s) {
  const char* env = sensim_client_session(b->cli)->environment;
  double deadline = now_s() + timeout_s;
  for (;;) {
    const sensim_info_t* info = NULL;
    sensim_status_t st = sensim_get_info(b->cli, &info);
    if (st != SENSIM_OK) {
      return fail(b, st, true, "waiting for subscribers");
    }
    uint32_t open = 0;
    for (uint32_t i = 0; i < info->nsubscribers; i++) {
      const sensim_subscriber_info_t* s = &info->subscribers[i];
      open += strcmp(s->environment, env) == 0 && s->closed_reason[0] == '\0';
    }
    if (open >= n) {
      return SENSIM_OK;
    }
    if (now_s() > deadline) {
      return fail(b, SENSIM_ETIMEDOUT, false, "%u of %u subscribers after %g s", open, n,
                  timeout_s);
    }
    if (b->opts.stop && *b->opts.stop) {
      return fail(b, SENSIM_FAILED_PRECONDITION, false, "stopped while waiting for "
                  "subscribers (%u of %u)", open, n);
    }
    nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
  }
}


static void fill_state(bridge_t* b, sensim_state_t* state, double t) {
  sensim_state_init(state);
  state->time = t;
  state->nbodies = b->nbodies;
  state->body_ids = b->body_ids;
  state->body_poses = b->poses;
  state->body_velocities = b->velocities;
  state->njoints = b->njoints;
  state->joint_ids = b->joint_ids;
  state->joint_positions = b->joint_positions;
}


sensim_status_t bridge_begin(bridge_t* b, double t0) {
  if (b->begun) {
    return fail(b, SENSIM_FAILED_PRECONDITION, false, "bridge_begin called twice");
  }
  sensim_state_t state;
  fill_state(b, &state, t0);
  sensim_status_t st = sensim_update_state(b->cli, &state);
  if (st != SENSIM_OK) {
    return fail(b, st, true, "the first state (t = %.9g s)", t0);
  }
  b->begun = true;
  b->t0 = b->t_last = t0;
  b->wall0 = now_s();
  return SENSIM_OK;
}


// Collect the oldest tick in flight.
static sensim_status_t collect(bridge_t* b) {
  uint64_t state_id = b->flight[b->head].state, step_id = b->flight[b->head].step;
  b->head = (b->head + 1) % BRIDGE_MAX_DEPTH;
  b->count--;
  double w = now_s();
  const sensim_step_result_t* r = NULL;
  sensim_status_t st = sensim_wait(b->cli, state_id, -1);
  if (st != SENSIM_OK) {
    sensim_discard(b->cli, step_id);
    return fail(b, st, true, "state update");
  }
  st = sensim_step_wait(b->cli, step_id, -1, &r);
  b->wait_s += now_s() - w;
  if (st != SENSIM_OK) {
    return fail(b, st, true, "step");
  }
  b->steps++;
  return SENSIM_OK;
}


sensim_status_t bridge_tick(bridge_t* b, double t) {
  if (!b->begun || b->ended) {
    return fail(b, SENSIM_FAILED_PRECONDITION, false, "bridge_tick outside begin/end");
  }
  if (!(t > b->t_last)) {
    return fail(b, SENSIM_INVALID_ARGUMENT, false, "tick time %.17g s is not after %.17g s", t,
                b->t_last);
  }
  b->ticks++;
  b->t_last = t;

  // a sensor step every sensor_ratio ticks: the daemon only keeps the last state before a
  // step, so the states of the ticks in between would be overwritten unseen
  if (b->ticks % b->opts.sensor_ratio == 0) {
    sensim_status_t st;
    if (b->count == b->opts.depth && (st = collect(b)) != SENSIM_OK) {
      return st;
    }
    sensim_state_t state;
    fill_state(b, &state, t);
    sensim_step_t step;
    sensim_step_init(&step);
    step.time = t;
    step.outputs = SENSIM_STEP_OUTPUTS_NONE;
    uint32_t slot = (b->head + b->count) % BRIDGE_MAX_DEPTH;
    st = sensim_update_and_step_send(b->cli, &state, &step, &b->flight[slot].state,
                                     &b->flight[slot].step);
    if (st != SENSIM_OK) {
      return fail(b, st, true, "sending the tick at t = %.9g s", t);
    }
    b->count++;
  }

  // pacing: simulated time runs at `realtime` times the wall clock. Slept in naps of at
  // most a second (a very slow pace is no overflow of timespec); a signal ends the sleep so
  // that the caller can look at why it came, and so does the stop flag, looked at before
  // each nap (a signal that came just before the first one is seen within a second)
  if (b->opts.realtime > 0.0) {
    double due = b->wall0 + (t - b->t0) / b->opts.realtime;
    double start = now_s(), w = start;
    while (w < due && !(b->opts.stop && *b->opts.stop)) {
      double nap = fmin(due - w, 1.0);
      struct timespec ts = {(time_t)nap, (long)((nap - floor(nap)) * 1e9)};
      if (nanosleep(&ts, NULL) != 0 && errno == EINTR) {
        break;
      }
      w = now_s();
    }
    b->sleep_s += now_s() - start;
  }
  return SENSIM_OK;
}


sensim_status_t bridge_end(bridge_t* b) {
  sensim_status_t first = SENSIM_OK;
  while (b->count > 0) {
    sensim_status_t st = collect(b);
    if (st != SENSIM_OK && first == SENSIM_OK) {
      first = st;
    }
  }
  if (!b->ended) {
    b->ended = true;
    b->wall1 = now_s();
  }
  return first;
}


sensim_status_t bridge_remove_sensors(bridge_t* b) {
  for (uint32_t i = 0; i < b->nsensors; i++) {
    sensim_status_t st = sensim_remove(b->cli, SENSIM_ENTITY_SENSOR, b->sensor_ids[i]);
    if (st != SENSIM_OK) {
      return fail(b, st, true, "removing sensor %u", b->sensor_ids[i]);
    }
  }
  b->nsensors = 0;
  return SENSIM_OK;
}


void bridge_stats(const bridge_t* b, bridge_stats_t* out) {
  memset(out, 0, sizeof(*out));
  out->ticks = b->ticks;
  out->steps = b->steps;
  out->sim_seconds = b->t_last - b->t0;
  out->wall_seconds = (b->ended ? b->wall1 : now_s()) - b->wall0;
  out->wait_seconds = b->wait_s;
  out->sleep_seconds = b->sleep_s;
}
