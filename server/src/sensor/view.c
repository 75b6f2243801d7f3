// SPDX-License-Identifier: MIT
// view.c: lookups in the step view (see view.h).
#include "sensor/view.h"

#include <string.h>

static const view_body_t world_body = {
    .id = 0,
    .at = {{.pose = {.p = {0, 0, 0}, .q = {1, 0, 0, 0}}, .has_velocity = 1},
           {.pose = {.p = {0, 0, 0}, .q = {1, 0, 0, 0}}, .has_velocity = 1}},
};

// Index of the first record whose id (its first field) is >= id, in n records of `size` bytes
// sorted by id.
static uint32_t lower_bound(const void* base, size_t size, uint32_t n, uint32_t id) {
  uint32_t lo = 0, hi = n;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    uint32_t mid_id;
    memcpy(&mid_id, (const char*)base + (size_t)mid * size, sizeof(mid_id));
    if (mid_id < id) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}


const view_body_t* view_find_body(const step_view_t* v, uint32_t id) {
  if (id == 0) {
    return &world_body;
  }
  uint32_t i = lower_bound(v->bodies, sizeof(view_body_t), v->nbody, id);
  return i < v->nbody && v->bodies[i].id == id ? &v->bodies[i] : NULL;
}


const view_joint_t* view_find_joint(const step_view_t* v, uint32_t id) {
  uint32_t i = lower_bound(v->joints, sizeof(view_joint_t), v->njoint, id);
  return i < v->njoint && v->joints[i].id == id ? &v->joints[i] : NULL;
}


int view_cancelled(const step_view_t* v) {
  return v->cancelled && v->cancelled(v->cancel_ctx);
}


double view_fraction(const step_view_t* v, double t) {
  double dt = v->t1 - v->t0;
  if (!(dt > 0.0)) {
    return 0.0;
  }
  double s = (t - v->t0) / dt;
  return s < 0.0 ? 0.0 : (s > 1.0 ? 1.0 : s);
}

pose_t view_mount_pose(const view_body_t* body, const pose_t* mount, double s) {
  if (!body) {
    body = &world_body;
  }
  return xform_mounted(&body->at[0].pose, &body->at[1].pose, mount, s);
}
