// SPDX-License-Identifier: MIT
// inst.c: objects as instances in the top-level scene of the Embree backend: their poses over
// the step (one matrix when still, two when moving, two quaternion decompositions when
// turning), the body and group they belong to, and the objects a sensor does not see.
#include <embree3/rtcore.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "scene/embree.h"

bool inst_valid(const scene_t* s, int h) {
  return h >= 0 && h < s->ninst && s->insts[h].rtc && !s->insts[h].flat_root;
}


// One time step of an instance. Embree's quaternion decomposition is M = T R S with S = scale
// then shift: x -> T + R (shift + scale x); between time steps it lerps T and S and slerps R.
static void inst_step(inst_t* in, unsigned k, const double q[4], const double shift[3],
                      const double t[3]) {
  struct RTCQuaternionDecomposition qd;
  rtcInitQuaternionDecomposition(&qd);
  rtcQuaternionDecompositionSetScale(&qd, (float)in->scale[0], (float)in->scale[1],
                                     (float)in->scale[2]);
  rtcQuaternionDecompositionSetShift(&qd, (float)shift[0], (float)shift[1], (float)shift[2]);
  rtcQuaternionDecompositionSetQuaternion(&qd, (float)q[0], (float)q[1], (float)q[2],
                                          (float)q[3]);
  rtcQuaternionDecompositionSetTranslation(&qd, (float)t[0], (float)t[1], (float)t[2]);
  rtcSetGeometryTransformQuaternion(in->rtc, k, &qd);
}


// Write an instance's time steps. An object with local pose (p_l, q_l) on a body at
// (p_b(s), q_b(s)) is at x -> p_b + R(q_b) (p_l + R(q_l) scale x)
//                            = p_b + R(q_b q_l) (R(q_l)^-1 p_l + scale x):
// T = the body origin (lerped by Embree), R = q_b q_l (slerped: slerp(q_b0 q_l, q_b1 q_l, s)
// = slerp(q_b0, q_b1, s) q_l since right-multiplying by a unit quaternion keeps every angle),
// shift = R(q_l)^-1 p_l, the same at both ends. The object thus moves rigidly with its body.
// An instance that moves without turning takes two matrices instead (the same rotation; T
// lerped). A static instance has one time step (Embree keeps it out of the slower motion-blur
// hierarchy) and a matrix composed in double: Embree's float quaternion-to-matrix conversion
// moved rays by micrometres (a ray grazing a crease of a rotated mesh passed it by).
static void inst_write(inst_t* in, const pose_t* local, const pose_t* b0, const pose_t* b1,
                       int moving) {
  if (moving != in->moving) {
    rtcSetGeometryTimeStepCount(in->rtc, moving ? 2 : 1);
    in->moving = moving;
  }
  double r[9];
  xform_quat_to_mat(in->q1, r);
  for (int i = 0; i < 9; i++) {
    in->nmat[i] = r[i] / in->scale[i % 3];
  }
  in->turning = memcmp(in->q0, in->q1, sizeof in->q0) != 0;
  if (!moving) {
    pose_t w = b1 ? xform_compose(b1, local) : *local;
    float m[12];  // column-major 3x4: R S | p
    for (int i = 0; i < 9; i++) {
      in->world[4 * (i / 3) + i % 3] = r[i] * in->scale[i % 3];
      m[3 * (i % 3) + i / 3] = (float)(r[i] * in->scale[i % 3]);
    }
    for (int i = 0; i < 3; i++) {
      in->world[4 * i + 3] = w.p[i];
      m[9 + i] = (float)w.p[i];
    }
    rtcSetGeometryTransform(in->rtc, 0, RTC_FORMAT_FLOAT3X4_COLUMN_MAJOR, m);
  } else if (!in->turning) {
    // moving without turning: two matrices of one rotation (Embree bounds a linear motion at
    // once, a quaternion motion by sampling it: a top-level commit of 100 moving instances took
    // 0.8 ms as quaternions, 0.2 ms as matrices)
    float m[12];
    for (int i = 0; i < 9; i++) {
      m[3 * (i % 3) + i / 3] = (float)(r[i] * in->scale[i % 3]);
      in->world0[4 * (i / 3) + i % 3] = in->world[4 * (i / 3) + i % 3] = r[i] * in->scale[i % 3];
    }
    for (unsigned k = 0; k < 2; k++) {
      pose_t w = xform_compose(k ? b1 : b0, local);
      for (int i = 0; i < 3; i++) {
        m[9 + i] = (float)w.p[i];
        (k ? in->world : in->world0)[4 * i + 3] = w.p[i];
      }
      rtcSetGeometryTransform(in->rtc, k, RTC_FORMAT_FLOAT3X4_COLUMN_MAJOR, m);
    }
  } else {
    double ql_inv[4], shift[3];
    xform_quat_conj(local->q, ql_inv);
    xform_quat_rotate(ql_inv, local->p, shift);
    memcpy(in->t0, b0->p, sizeof in->t0);
    memcpy(in->t1, b1->p, sizeof in->t1);
    in->shift_len = xform_norm3(shift);
    inst_step(in, 0, in->q0, shift, b0->p);
    inst_step(in, 1, in->q1, shift, b1->p);
  }
  rtcCommitGeometry(in->rtc);
}


int inst_slot(scene_t* s) {
  int h;
  if (s->free_inst >= 0) {
    h = s->free_inst;
    s->free_inst = s->insts[h].next_free;
  } else {
    if (s->ninst == s->cap_inst) {
      int cap = s->cap_inst ? 2 * s->cap_inst : 64;
      inst_t* t = mem_realloc(s->insts, (size_t)cap * sizeof *t);
      if (!t) {
        return ERR_NOMEM;
      }
      s->insts = t;
      s->cap_inst = cap;
    }
    h = s->ninst++;
  }
  memset(&s->insts[h], 0, sizeof s->insts[h]);
  return h;
}


int scene_add_instance(scene_t* s, int geometry, const double scale[3], uint32_t object_id,
                       uint32_t label, err_msg_t* msg) {
  // arguments
  if (!geom_valid(s, geometry)) {
    return err_set(msg, ERR_NOTFOUND, "geometry = %d is not a geometry of this scene", geometry);
  }
  for (int i = 0; i < 3; i++) {
    if (!isfinite(scale[i]) || scale[i] == 0.0) {
      return err_set(msg, ERR_INVAL, "scale[%d] = %g must be finite and non-zero", i, scale[i]);
    }
  }

  // slot
  int h = inst_slot(s);
  if (h < 0) {
    return err_set(msg, h, "scene_add_instance: out of memory");
  }
  inst_t* in = &s->insts[h];
  in->geometry = geometry;
  in->object_id = object_id;
  in->label = label;
  memcpy(in->scale, scale, sizeof in->scale);
  in->is_prim = s->geoms[geometry]->is_prim;
  in->q0[0] = in->q1[0] = 1.0;

  // static instance at the identity pose; its Embree ID is the handle
  uint64_t before = atomic_load(&s->dev->nerror);
  in->rtc = rtcNewGeometry(s->dev->rtc, RTC_GEOMETRY_TYPE_INSTANCE);
  if (in->rtc) {
    pose_t id = xform_identity();
    rtcSetGeometryInstancedScene(in->rtc, s->geoms[geometry]->rtc);
    rtcSetGeometryTimeStepCount(in->rtc, 1);
    inst_write(in, &id, NULL, NULL, 0);
    rtcAttachGeometryByID(s->top, in->rtc, (unsigned)h);
    s->still_dirty = true;
  }
  int rc = device_check(s->dev, before, "scene_add_instance", msg);
  if (!in->rtc || rc) {
    if (in->rtc) {
      rtcReleaseGeometry(in->rtc);
      in->rtc = NULL;
    }
    in->next_free = s->free_inst;
    s->free_inst = h;
    return rc ? rc : err_set(msg, ERR_BACKEND, "scene_add_instance: rtcNewGeometry failed");
  }
  return h;
}


void scene_remove_instance(scene_t* s, int instance) {
  if (!inst_valid(s, instance)) {
    return;
  }
  inst_t* in = &s->insts[instance];
  rtcDetachGeometry(s->top, (unsigned)instance);
  rtcReleaseGeometry(in->rtc);
  in->rtc = NULL;
  s->flat_dirty |= in->flat;
  s->still_dirty |= !in->moving;
  in->flat = false;
  in->next_free = s->free_inst;
  s->free_inst = instance;
}


void scene_set_instance_pose(scene_t* s, int instance, const pose_t* local,
                             const pose_t* body_start, const pose_t* body_end) {
  if (!inst_valid(s, instance)) {
    return;
  }
  inst_t* in = &s->insts[instance];
  const pose_t* b0 = body_start && body_end ? body_start : NULL;
  const pose_t* b1 = b0 ? body_end : NULL;

  // world orientations (unit: products of unit quaternions), the start on the end's hemisphere
  // so that Embree's slerp takes the shortest arc, as xform_slerp does
  if (b0) {
    xform_quat_mul(b0->q, local->q, in->q0);
    xform_quat_mul(b1->q, local->q, in->q1);
  } else {
    memcpy(in->q0, local->q, sizeof in->q0);
    memcpy(in->q1, local->q, sizeof in->q1);
  }
  double c = in->q0[0] * in->q1[0] + in->q0[1] * in->q1[1] + in->q0[2] * in->q1[2] +
             in->q0[3] * in->q1[3];
  if (c < 0.0) {
    for (int i = 0; i < 4; i++) {
      in->q0[i] = -in->q0[i];
    }
  }
  int moving = b0 && (memcmp(b0->p, b1->p, sizeof b0->p) != 0 ||
                      memcmp(in->q0, in->q1, sizeof in->q0) != 0);
  double was[12];
  memcpy(was, in->world, sizeof was);
  int was_moving = in->moving;
  inst_write(in, local, b0, b1, moving);
  int posed = moving || was_moving || memcmp(was, in->world, sizeof was) != 0;
  s->still_dirty |= posed && !(moving && was_moving);   // a static instance's bounds changed
  if (in->flat && posed) {
    // posed again (the same pose again changes nothing): an instance from now on, and out of
    // the flat scene at the commit (flat_update)
    in->flat_never = true;
  }
  s->instance_updates++;
}


void scene_set_instance_body(scene_t* s, int instance, uint32_t body_id, uint32_t group) {
  if (inst_valid(s, instance)) {
    inst_t* in = &s->insts[instance];
    in->body_id = body_id;
    in->group = group & 31u;   // mounted on a body, a flat object leaves at the commit
  }
}


static int cmp_u32(const void* a, const void* b) {
  uint32_t x = *(const uint32_t*)a, y = *(const uint32_t*)b;
  return x < y ? -1 : x > y;
}


uint32_t scene_objects_hidden(const scene_t* s, const uint32_t* bodies, uint32_t nbody,
                              uint32_t group_mask, uint32_t* dest, uint32_t cap) {
  uint32_t n = 0;
  for (int i = 0; i < s->ninst && (nbody > 0 || group_mask != 0); i++) {
    const inst_t* in = &s->insts[i];
    if (!in->rtc || in->flat_root) {
      continue;
    }
    bool hidden = group_mask != 0 && !(group_mask & (1u << in->group));
    for (uint32_t b = 0; b < nbody && !hidden; b++) {
      hidden = in->body_id == bodies[b];
    }
    if (hidden) {
      if (n < cap) {
        dest[n] = in->object_id;
      }
      n++;
    }
  }
  qsort(dest, n < cap ? n : cap, sizeof *dest, cmp_u32);
  return n;
}
