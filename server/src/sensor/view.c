// SPDX-License-Identifier: MIT
// view.c: lookups in the step view (see view.h).
#include "sensor/view.h"

static const view_body_t world_body = {
    .id = 0,
    .at = {{.pose = {.p = {0, 0, 0}, .q = {1, 0, 0, 0}}, .has_velocity = 1},
           {.pose = {.p = {0, 0, 0}, .q = {1, 0, 0, 0}}, .has_velocity = 1}},
};

const view_body_t* view_find_body(const step_view_t* v, uint32_t id) {
  if (id == 0) {
    return &world_body;
  }
  uint32_t lo = 0, hi = v->nbody;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (v->bodies[mid].id < id) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo < v->nbody && v->bodies[lo].id == id ? &v->bodies[lo] : NULL;
}

const view_joint_t* view_find_joint(const step_view_t* v, uint32_t id) {
  uint32_t lo = 0, hi = v->njoint;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (v->joints[mid].id < id) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo < v->njoint && v->joints[lo].id == id ? &v->joints[lo] : NULL;
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
  pose_t b = xform_interpolate(&body->at[0].pose, &body->at[1].pose, s);
  return xform_compose(&b, mount);
}
