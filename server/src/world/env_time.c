// SPDX-License-Identifier: MIT
// env_time.c: the environment's time line (states, steps) and raycasts at absolute times.
// Each body keeps its state at t_prev and at t_cur; an object's scene instance carries its
// body's two poses and its local pose, so a ray at time t sees it rigidly mounted on the body
// interpolated to s = (t - t_prev) / (t_cur - t_prev). Bodies moved since the last step are
// listed, so updates and steps cost O(moved objects), never O(all); their objects' instances
// are written once per step, at the commit before the first trace.
#include "world/env.h"

#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "base/mem.h"
#include "base/pool.h"
#include "world/env_impl.h"

#define RAY_BATCH ENV_RAYCAST_BATCH   // rays handed to scene_trace at once (its filter
                                     // re-traces batch by batch)
// Rays per pool work item: one batch. A call ends when its last item does, and the threads
// that find no item left wait for it meanwhile, about half an item each: a daemon traces a
// large raycast as a run of parts, one call each, so that wait came once per part (items of
// 1024 rays left the tracing threads idle about 0.1 ms a part on a 2-core VM).
#define RAY_GRAIN RAY_BATCH
_Static_assert(RAY_GRAIN % RAY_BATCH == 0, "a batch starts at a multiple of RAY_BATCH");
#define TIME_REL_TOL 1e-12
#define ENV_MIN_DIRECTION 1e-30  // shortest accepted ray direction (any unit)


void env_get_time(const env_t* e, env_time_t* out) {
  memset(out, 0, sizeof(*out));
  out->has_time = e->has_time;
  if (e->has_time) {
    out->t_prev = e->t_prev;
    out->t_cur = e->t_cur;
  }
  out->steps = e->steps;
}

//---------------- States


// The first fault of body i's numbers, as a message naming its field, or 0 when they are
// fine: the slow path of check_update_bodies, taken only when its one-pass test fails.
static int body_numbers_fault(const env_state_update_t* u, uint32_t i, uint32_t id,
                              err_msg_t* msg) {
  // pose: px py pz qx qy qz qw
  const double* p = u->body_poses + 7 * (size_t)i;
  for (int k = 0; k < 7; k++) {
    if (!isfinite(p[k])) {
      return err_set(msg, ERR_INVAL, "body_poses[%zu] = %g (body %u) is not finite",
                     7 * (size_t)i + k, p[k], id);
    }
    if (k < 3 && fabs(p[k]) > ENV_MAX_COORD) {
      return err_set(msg, ERR_INVAL, "body_poses[%zu] = %g (body %u) exceeds %g m in magnitude",
                     7 * (size_t)i + k, p[k], id, ENV_MAX_COORD);
    }
  }
  // the norm does not depend on the order of the components: normalised once, when applied
  double norm = xform_norm(p + 3, 4);
  if (norm < ENV_QUAT_MIN_NORM) {
    return err_set(msg, ERR_INVAL,
                   "body_poses[%zu..%zu] (body %u): orientation norm %g is below %g",
                   7 * (size_t)i + 3, 7 * (size_t)i + 6, id, norm, ENV_QUAT_MIN_NORM);
  }

  // velocities: vx vy vz wx wy wz
  for (int k = 0; u->body_velocities && k < 6; k++) {
    double v = u->body_velocities[6 * (size_t)i + k];
    if (!isfinite(v)) {
      return err_set(msg, ERR_INVAL, "body_velocities[%zu] = %g (body %u) is not finite",
                     6 * (size_t)i + k, v, id);
    }
    if (fabs(v) > ENV_MAX_VALUE) {
      return err_set(msg, ERR_INVAL,
                     "body_velocities[%zu] = %g (body %u) exceeds %g %s in magnitude",
                     6 * (size_t)i + k, v, id, ENV_MAX_VALUE, k < 3 ? "m/s" : "rad/s");
    }
  }
  return 0;
}


// Whether body i's numbers are surely fine, tested in one pass without branches per number:
// positions and velocities within their bounds (a NaN fails every comparison, an infinity the
// bound), and the orientation's sum of squares where its norm is surely above
// ENV_QUAT_MIN_NORM (1e-16: a norm of 1e-8) and xform_quat_unit normalises without scaling
// (which also makes every component finite). False sends the body to body_numbers_fault,
// which decides exactly (a quaternion of 1e200 is fine, but not here). *sq: the orientation's
// sum of squares as xform_quat_unit_sq takes it (w, x, y, z: the pose's order once reordered).
static bool body_numbers_fine(const env_state_update_t* u, uint32_t i, double* sq) {
  const double* p = u->body_poses + 7 * (size_t)i;
  double s = xform_quat_sq(p[6], p[3], p[4], p[5]);
  *sq = s;
  bool fine = (fabs(p[0]) <= ENV_MAX_COORD) & (fabs(p[1]) <= ENV_MAX_COORD) &
              (fabs(p[2]) <= ENV_MAX_COORD) & (s >= 1e-16) & (s < XFORM_QUAT_UNIT_MAX);
  if (u->body_velocities) {
    const double* v = u->body_velocities + 6 * (size_t)i;
    for (int k = 0; k < 6; k++) {
      fine &= fabs(v[k]) <= ENV_MAX_VALUE;
    }
  }
  return fine;
}


// Validate the bodies of an update: known, each named once, finite, usable quaternions. The
// slot of body_ids[i] goes to e->update_slots[i], for the update to apply without a second
// lookup (room for every body: each is named once). The slot left there by the last update is
// tried first, and the map searched only when that slot does not hold body_ids[i] (the same
// slot either way).
static int check_update_bodies(env_t* e, const env_state_update_t* u, uint64_t stamp,
                               err_msg_t* msg) {
  for (uint32_t i = 0; i < u->nbody; i++) {
    uint32_t id = u->body_ids[i];
    // (an update naming more bodies than were ever created has no guess past them)
    uint32_t slot = i < e->update_slot_cap ? e->update_slots[i] : TABLE_NONE;
    if (!table_holds(&e->bodies, slot, id)) {
      slot = table_find(&e->bodies, id);
    }
    if (slot == TABLE_NONE) {
      if (id == 0) {
        return err_set(msg, ERR_INVAL, "body_ids[%u] = 0 is the world frame, which does not "
                       "move (body ids are > 0)", i);
      }
      return err_set(msg, ERR_NOTFOUND, "body_ids[%u] = %u is not a known body", i, id);
    }
    env_body_t* b = table_at(&e->bodies, slot);
    if (b->stamp == stamp) {
      return err_set(msg, ERR_INVAL, "body_ids[%u] = %u is repeated", i, id);
    }
    b->stamp = stamp;
    e->update_slots[i] = slot;
    if (!body_numbers_fine(u, i, &b->update_sq)) {
      int rc = body_numbers_fault(u, i, id, msg);
      if (rc < 0) {
        return rc;
      }
    }
  }
  return 0;
}


static int check_update_joints(env_t* e, const env_state_update_t* u, uint64_t stamp,
                               err_msg_t* msg) {
  for (uint32_t i = 0; i < u->njoint; i++) {
    uint32_t id = u->joint_ids[i];
    env_joint_t* j = table_get(&e->joints, id);
    if (!j) {
      if (id == 0) {
        return err_set(msg, ERR_INVAL, "joint_ids[%u] = 0 is reserved (joint ids are > 0)", i);
      }
      return err_set(msg, ERR_NOTFOUND, "joint_ids[%u] = %u is not a known joint", i, id);
    }
    if (j->stamp == stamp) {
      return err_set(msg, ERR_INVAL, "joint_ids[%u] = %u is repeated", i, id);
    }
    j->stamp = stamp;
    if (!isfinite(u->joint_positions[i])) {
      return err_set(msg, ERR_INVAL, "joint_positions[%u] = %g (joint %u) is not finite", i,
                     u->joint_positions[i], id);
    }
    if (fabs(u->joint_positions[i]) > ENV_MAX_VALUE) {
      return err_set(msg, ERR_INVAL, "joint_positions[%u] = %g (joint %u) exceeds %g in "
                     "magnitude", i, u->joint_positions[i], id, ENV_MAX_VALUE);
    }
  }
  return 0;
}


int env_update_state(env_t* e, const env_state_update_t* u, err_msg_t* msg) {
  // time: any finite first time, then strictly increasing
  if (!isfinite(u->time) || fabs(u->time) > ENV_MAX_TIME) {
    return err_set(msg, ERR_INVAL, "time = %g is not finite or beyond +-%g s", u->time,
                   ENV_MAX_TIME);
  }
  if (e->has_time && !(u->time > e->t_cur)) {
    return err_set(msg, ERR_STATE, "time = %.15g does not exceed the last state's time %.15g",
                   u->time, e->t_cur);
  }
  if (u->nbody > 0 && (!u->body_ids || !u->body_poses)) {
    return err_set(msg, ERR_INVAL, "body_ids and body_poses are required for %u bodies",
                   u->nbody);
  }
  if (u->njoint > 0 && (!u->joint_ids || !u->joint_positions)) {
    return err_set(msg, ERR_INVAL, "joint_ids and joint_positions are required for %u joints",
                   u->njoint);
  }

  // everything valid before anything changes (stamps only detect repeated ids)
  uint64_t stamp = ++e->update_stamp;
  int rc = check_update_bodies(e, u, stamp, msg);
  if (rc == 0) {
    rc = check_update_joints(e, u, stamp, msg);
  }
  if (rc < 0) {
    return rc;
  }

  // the next step will cover (t_prev, time]: refused here when a sensor could not take it
  // (too many rays, too many records), since the state could not be taken back afterwards and
  // every Step would be refused from then on
  if (e->has_time && (rc = env_check_step(e, e->t_prev, u->time, NULL, msg)) < 0) {
    err_msg_t why = *msg;
    return err_set(msg, rc, "time = %.17g is too far from the last step (%.17g) for the next "
                   "step: %s", u->time, e->t_prev, why.text);
  }

  // bodies: the first state also defines the start of the first interval. What the loop
  // tests of the update and of the view is read once here: its stores into the records could
  // alias them, so the compiler would read them again for every body.
  int first = !e->has_time;
  const double* vel = u->body_velocities;
  const int moved = ENV_BODY_STALE | (first ? 0 : ENV_BODY_MOVED);
  const bool view = !e->view_stale;
  for (uint32_t i = 0; i < u->nbody; i++) {
    uint32_t slot = e->update_slots[i];
    env_body_t* b = table_at(&e->bodies, slot);
    const double* p = u->body_poses + 7 * (size_t)i;

    // the one reorder (wire x, y, z, w -> w, x, y, z) and normalisation of the orientation,
    // in place: a pose assembled on the stack (where the normalisation's slow path needs it)
    // and copied would be read back in 16-byte words right after its 8-byte stores, which the
    // CPU cannot forward (a stall per word, most of this loop's time). Its sum of squares was
    // taken by the check, from the same numbers.
    pose_t* pose = &b->pose_cur;
    pose->p[0] = p[0];
    pose->p[1] = p[1];
    pose->p[2] = p[2];
    pose->q[0] = p[6];
    pose->q[1] = p[3];
    pose->q[2] = p[4];
    pose->q[3] = p[5];
    xform_quat_unit_sq(pose->q, b->update_sq);
    if (vel) {
      memcpy(b->linear_velocity, vel + 6 * (size_t)i, 3 * sizeof(double));
      memcpy(b->angular_velocity, vel + 6 * (size_t)i + 3, 3 * sizeof(double));
    }
    b->has_velocity = vel != NULL;

    // the objects' instances are written at the next commit
    if (first) {
      b->pose_prev = *pose;
      memcpy(b->linear_velocity_prev, b->linear_velocity, sizeof(b->linear_velocity_prev));
      memcpy(b->angular_velocity_prev, b->angular_velocity, sizeof(b->angular_velocity_prev));
      b->has_velocity_prev = b->has_velocity;
    }
    if (!b->moved) {
      e->moved_bodies[e->nmoved_body++] = slot;
    }
    b->moved |= moved;
    if (view && first) {
      env_view_body(e, b);
    } else if (view) {
      env_view_body_cur(e, b);   // its state at t_prev is the entry's already
    }
    // the scene changes only through the body's objects (env_sync_object marks it dirty): a
    // body carrying none (an IMU's) costs no scene commit
  }

  // joints
  for (uint32_t i = 0; i < u->njoint; i++) {
    uint32_t slot = table_find(&e->joints, u->joint_ids[i]);
    env_joint_t* j = table_at(&e->joints, slot);
    j->position = u->joint_positions[i];
    if (first) {
      j->position_prev = j->position;
    } else if (!j->moved) {
      j->moved = 1;
      e->moved_joints[e->nmoved_joint++] = slot;
    }
    env_view_joint(e, j);
  }

  // time line
  if (first) {
    e->t_prev = u->time;
    e->has_time = 1;
  }
  e->t_cur = u->time;
  return 0;
}

//---------------- Steps


void env_sync_moved(env_t* e) {
  bool open = e->has_time && e->t_cur > e->t_prev;
  uint32_t n = 0;
  for (uint32_t i = 0; i < e->nmoved_body; i++) {
    uint32_t slot = e->moved_bodies[i];
    env_body_t* b = table_at(&e->bodies, slot);
    if ((b->moved & ENV_BODY_STALE) || ((b->moved & ENV_BODY_ROLLED) && open)) {
      env_sync_body(e, b);
      b->moved &= ~(ENV_BODY_STALE | ENV_BODY_ROLLED);
    }
    if (b->moved) {
      e->moved_bodies[n++] = slot;
    }
  }
  e->nmoved_body = n;
}



int env_step(env_t* e, double t, err_msg_t* msg) {
  return env_step_cancellable(e, t, NULL, NULL, msg);
}


int env_step_cancellable(env_t* e, double t, int (*cancelled)(void* ctx), void* cancel_ctx,
                         err_msg_t* msg) {
  env_step_hooks_t h = {.cancelled = cancelled, .ctx = cancel_ctx};
  return env_step_with(e, t, &h, msg);
}


int env_step_with(env_t* e, double t, const env_step_hooks_t* hooks, err_msg_t* msg) {
  // t must be the last state's time and follow the previous step
  if (!isfinite(t)) {
    return err_set(msg, ERR_INVAL, "time = %g is not finite", t);
  }
  if (!e->has_time) {
    return err_set(msg, ERR_STATE, "no state has been set (UpdateState comes before Step)");
  }
  if (t != e->t_cur) {
    return err_set(msg, ERR_STATE, "time = %.15g is not the time of the last state (%.15g)", t,
                   e->t_cur);
  }
  if (e->has_stepped && !(t > e->t_step)) {
    return err_set(msg, ERR_STATE, "time = %.15g does not exceed the previous step's time %.15g",
                   t, e->t_step);
  }

  // commit the scene for the interval (t_prev, t]
  int rc = env_commit(e, msg);
  if (rc < 0) {
    return rc;
  }

  // every sensor over (t_prev, t]; all or nothing
  rc = env_eval_sensors(e, hooks, msg);
  if (rc < 0) {
    return rc;
  }

  // the current state becomes the start of the next interval; the committed instances still
  // show the motion, which ends where the bodies now stand: they stay listed as rolled until
  // the next interval opens (env_sync_moved)
  for (uint32_t i = 0; i < e->nmoved_body; i++) {
    env_body_t* b = table_at(&e->bodies, e->moved_bodies[i]);
    if (b->moved & ENV_BODY_MOVED) {
      b->pose_prev = b->pose_cur;
      memcpy(b->linear_velocity_prev, b->linear_velocity, sizeof(b->linear_velocity_prev));
      memcpy(b->angular_velocity_prev, b->angular_velocity, sizeof(b->angular_velocity_prev));
      b->has_velocity_prev = b->has_velocity;
      b->moved = ENV_BODY_ROLLED;
      env_view_body(e, b);
    }
  }
  for (uint32_t i = 0; i < e->nmoved_joint; i++) {
    env_joint_t* j = table_at(&e->joints, e->moved_joints[i]);
    j->position_prev = j->position;
    j->moved = 0;
    env_view_joint(e, j);
  }
  e->nmoved_joint = 0;
  e->t_prev = e->t_cur;
  e->t_step = t;
  e->has_stepped = 1;
  e->steps++;
  return 0;
}

//---------------- Raycast


// Rays [i0, ...) of `in` as a request of their own whose ray 0 is ray i0, every one starting
// at `origins` (a shared origin written out once per ray: the tracer reads an origin per ray).
// The scene groups a batch's rays from its first, so the hits are those of the rays in place.
static scene_rays_t rays_from(const scene_rays_t* in, size_t i0, const double* origins) {
  scene_rays_t out = *in;
  out.origins = origins;
  out.directions = in->directions + 3 * i0;
  if (in->times && in->time_per_ray) {
    out.times = in->times + i0;
  }
  return out;
}


// The error of the first ray that the tracer refuses (0 if none): it takes a finite origin
// within ENV_MAX_COORD and a finite direction of length at least ENV_MIN_DIRECTION (a shorter
// one loses its precision when normalised, and is zero under the flush-to-zero mode of the
// tracer).
static int check_rays(const env_raycast_t* r, const scene_rays_t* in, err_msg_t* msg) {
  static const char* const kAxis[3] = {"x", "y", "z"};
  for (uint32_t i = 0; i < r->nray; i++) {
    const double* o = r->origin ? r->origin : r->origins + 3 * (size_t)i;
    const double* d = r->directions + 3 * (size_t)i;
    scene_ray_t ray;
    scene_rays_t one = rays_from(in, i, o);
    if (scene_ray_from(&one, 0, &ray)) {
      continue;
    }
    double len = xform_norm3(d);
    char field[32];   // the origin's field: the shared one, or the ray's
    if (r->origin) {
      snprintf(field, sizeof(field), "origin");
    } else {
      snprintf(field, sizeof(field), "origins[%u]", i);
    }
    for (int k = 0; k < 3; k++) {
      if (!isfinite(o[k])) {
        return err_set(msg, ERR_INVAL, "%s.%s = %g is not finite", field, kAxis[k], o[k]);
      }
      if (fabs(o[k]) > ENV_MAX_COORD) {
        return err_set(msg, ERR_INVAL, "%s.%s = %g exceeds %g m in magnitude", field, kAxis[k],
                       o[k], ENV_MAX_COORD);
      }
      if (!isfinite(d[k])) {
        return err_set(msg, ERR_INVAL, "directions[%u].%s = %g is not finite", i, kAxis[k],
                       d[k]);
      }
    }
    return err_set(msg, ERR_INVAL, "directions[%u] has length %g, below %g", i, len,
                   ENV_MIN_DIRECTION);
  }
  return 0;
}


// The request's sizes, arrays and times (the rays are checked while they are traced).
static int check_raycast(const env_t* e, const env_raycast_t* r, const scene_hit_t* out,
                         err_msg_t* msg) {
  // sizes and arrays
  if (r->nray > e->limits.max_raycast_rays) {
    return err_set(msg, ERR_LIMIT, "nray = %u exceeds the limit max_raycast_rays = %u", r->nray,
                   e->limits.max_raycast_rays);
  }
  if (r->ntime != 0 && r->ntime != 1 && r->ntime != r->nray) {
    return err_set(msg, ERR_INVAL, "ntime = %u must be 0, 1 or nray (%u)", r->ntime, r->nray);
  }
  if (r->origins && r->origin) {
    return err_set(msg, ERR_INVAL, "origins and origin are both given: one origin per ray or "
                   "one for all");
  }
  if (r->nray > 0 && ((!r->origins && !r->origin) || !r->directions || !out)) {
    return err_set(msg, ERR_INVAL, "origins (or origin), directions and the output are "
                   "required");
  }
  if (r->ntime > 0 && !r->times) {
    return err_set(msg, ERR_INVAL, "times is missing (ntime = %u)", r->ntime);
  }
  if (isnan(r->max_range)) {
    return err_set(msg, ERR_INVAL, "max_range is not a number");
  }
  if (r->nexclude_body > ENV_MAX_EXCLUDED_BODIES || (r->nexclude_body && !r->exclude_bodies)) {
    return err_set(msg, ERR_INVAL, "exclude_bodies has %u bodies, more than %d",
                   r->nexclude_body, ENV_MAX_EXCLUDED_BODIES);
  }

  // times: inside the current interval when there is one
  double tol = TIME_REL_TOL * fmax(1.0, fmax(fabs(e->t_prev), fabs(e->t_cur)));
  for (uint32_t i = 0; i < r->ntime; i++) {
    double t = r->times[i];
    if (!isfinite(t)) {
      return err_set(msg, ERR_INVAL, "times[%u] = %g is not finite", i, t);
    }
    if (!e->has_time) {
      return err_set(msg, ERR_STATE, "times[%u] given, but no state has been set (UpdateState "
                     "defines the interval)", i);
    }
    if (t < e->t_prev - tol || t > e->t_cur + tol) {
      return err_set(msg, ERR_INVAL, "times[%u] = %.15g is outside the interval [%.15g, %.15g]",
                     i, t, e->t_prev, e->t_cur);
    }
  }
  return 0;
}


typedef struct raycast_job {
  const scene_t* scene;
  const env_raycast_t* r;
  scene_hit_t* out;
  scene_rays_t rays;    // the request's rays as the scene takes them
  const scene_filter_t* filter;  // objects the rays pass through (nullable)
  atomic_int stopped;   // set by the first chunk that sees r->cancelled
  atomic_int bad;       // set by the first chunk that meets a ray scene_trace refuses
} raycast_job_t;


// pool_fn_t: check and trace rays [begin, end) in batches, each in one pass per packet
// (scene_trace of SCENE_REQUEST: check and convert, trace, write the hits). The rays are
// checked here, in parallel, rather than in a pass of their own before tracing: a request with
// a bad ray is refused all the same (its output is never used), it has only cost some tracing.
// A shared origin is written out for one batch here, where the tracer reads it from cache,
// rather than for the whole request.
static void raycast_chunk(void* ctx, size_t begin, size_t end) {
  raycast_job_t* job = ctx;
  const env_raycast_t* r = job->r;
  double shared[3 * RAY_BATCH];
  if (r->origin) {
    for (size_t k = 0; k < RAY_BATCH; k++) {
      memcpy(&shared[3 * k], r->origin, sizeof(double[3]));
    }
  }

  // a cancelled request (daemon stopping, client gone) leaves its remaining chunks untraced
  if (atomic_load(&job->stopped) || atomic_load(&job->bad) ||
      (r->cancelled && r->cancelled(r->cancel_ctx))) {
    atomic_store(&job->stopped, 1);
    return;
  }
  for (size_t i0 = begin; i0 < end; i0 += RAY_BATCH) {
    size_t n = end - i0 < RAY_BATCH ? end - i0 : RAY_BATCH;
    scene_batch_t batch = {.layout = SCENE_REQUEST, .request = &job->rays, .first = i0, .n = n,
                           .hits = job->out + i0, .filter = job->filter};
    scene_rays_t from_shared;
    if (r->origin) {
      from_shared = rays_from(&job->rays, i0, shared);
      batch.request = &from_shared;
      batch.first = 0;
    }
    if (scene_trace(job->scene, &batch) != n) {
      atomic_store(&job->bad, 1);
      return;
    }
    if (r->traced) {
      r->traced(r->traced_ctx, (uint32_t)i0, (uint32_t)n, job->out + i0);
    }
  }
}


// The request's rays as the scene takes them: absolute times onto the current interval (s = 1
// when it is empty or there is no state), max_range <= 0 as +inf.
static scene_rays_t raycast_rays(const env_t* e, const env_raycast_t* r) {
  scene_rays_t in = {
      .origins = r->origins,
      .directions = r->directions,
      .times = r->ntime > 0 ? r->times : NULL,
      .time_per_ray = r->ntime != 1,
      .t0 = e->t_prev,
      .dt = e->has_time ? e->t_cur - e->t_prev : 0.0,
      .tmax = r->max_range > 0.0 ? r->max_range : INFINITY,
      .max_coord = ENV_MAX_COORD,
      .min_direction = ENV_MIN_DIRECTION,
      .records = r->hit_records,
  };
  return in;
}


int env_raycast(env_t* e, const env_raycast_t* r, scene_hit_t* out, err_msg_t* msg) {
  int rc = check_raycast(e, r, out, msg);
  if (rc < 0 || r->nray == 0) {
    return rc;
  }

  // commit pending edits, then trace (in parallel when the environment has a pool)
  if ((rc = env_commit(e, msg)) < 0) {
    return rc;
  }
  raycast_job_t job = {
      .scene = e->scene,
      .r = r,
      .out = out,
      .rays = raycast_rays(e, r),
  };
  atomic_init(&job.stopped, 0);
  atomic_init(&job.bad, 0);

  // the objects hidden from these rays (excluded bodies, groups outside the mask)
  scene_filter_t filter = {0};
  uint32_t* hidden = NULL;
  if (r->nexclude_body > 0 || r->group_mask != 0) {
    uint32_t none;   // a count only: no entries are written
    uint32_t n = scene_objects_hidden(e->scene, r->exclude_bodies, r->nexclude_body,
                                      r->group_mask, &none, 0);
    hidden = mem_alloc((n ? n : 1) * sizeof *hidden);
    if (!hidden) {
      return err_set(msg, ERR_NOMEM, "out of memory for %u hidden objects", n);
    }
    filter.nexclude = scene_objects_hidden(e->scene, r->exclude_bodies, r->nexclude_body,
                                           r->group_mask, hidden, n);
    filter.exclude_objects = hidden;
    job.filter = &filter;
  }
  pool_parallel_for(e->pool, r->nray, RAY_GRAIN, raycast_chunk, &job);
  mem_free(hidden);
  if (atomic_load(&job.bad)) {
    rc = check_rays(r, &job.rays, msg);
    return rc < 0 ? rc : err_set(msg, ERR_INTERNAL, "a ray was refused, then accepted");
  }
  if (atomic_load(&job.stopped)) {
    return err_set(msg, ERR_STATE, "cancelled (the daemon is stopping or the client left)");
  }
  return 0;
}
