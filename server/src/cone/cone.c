// SPDX-License-Identifier: MIT
// cone.c: the cone sensor: configuration, the faces of each object for the two modes, and the
// per-step reading (see cone.h).
//
// World interface (for the environment's step view): the sensor needs
// step_view_t.objects/nobject (sensor/view.h): for every object of the committed scene, its id,
// its geometry (triangle mesh vertices and indices in the object frame, or the analytic
// primitive kind and size of scene.h), its per-axis scale and its world pose at t1 (body pose at
// t1 composed with the object's local pose). With no objects listed it detects nothing.
#include "cone/cone.h"

#include <math.h>
#include <string.h>

#include "base/mem.h"

// Lines per face at most (LINES mode).
#define CONE_MAX_LINES 100000u

// Tessellation of the curved primitives in LINES mode (the line method needs faces).
#define CONE_TESS_AROUND 24
#define CONE_TESS_ALONG 12

// The state carried from one step to the next.
typedef struct cone_state {
  int prev_found;
  double prev_point[3];         // world
  double prev_time;
  uint64_t frame;
} cone_state_t;

// `st`: committed, every step starts from it; `next`: staged by the last successful step,
// applied by cone_commit (sensor.h: two phases).
typedef struct cone_sensor {
  cone_config_t c;
  cone_shape_t k;
  cone_state_t st;
  cone_state_t next;
  int staged;
} cone_sensor_t;

void cone_config_default(cone_config_t* c) {
  memset(c, 0, sizeof(*c));
  c->fov_horizontal = 45.0 * M_PI / 180.0;
  c->fov_vertical = 30.0 * M_PI / 180.0;
  c->range = 20.0;
  c->mode = CONE_MODE_EXACT;
  c->lines_per_face = 10;
}

int cone_config_check(const cone_config_t* c, err_msg_t* msg) {
  if (!(c->fov_horizontal > 0.0 && c->fov_horizontal < M_PI)) {
    return err_set(msg, ERR_INVAL, "cone.fov_horizontal = %g rad must be in (0, pi)",
                   c->fov_horizontal);
  }
  if (!(c->fov_vertical > 0.0 && c->fov_vertical < M_PI)) {
    return err_set(msg, ERR_INVAL, "cone.fov_vertical = %g rad must be in (0, pi)",
                   c->fov_vertical);
  }
  if (!isfinite(c->range) || !(c->range > 0.0)) {
    return err_set(msg, ERR_INVAL, "cone.range = %g m must be finite and > 0", c->range);
  }
  if (c->mode != CONE_MODE_EXACT && c->mode != CONE_MODE_LINES) {
    return err_set(msg, ERR_INVAL, "cone.mode = %d is not CONE_EXACT or CONE_LINES",
                   (int)c->mode);
  }
  if (c->mode == CONE_MODE_LINES &&
      (c->lines_per_face < 2 || c->lines_per_face > CONE_MAX_LINES)) {
    return err_set(msg, ERR_INVAL, "cone.lines_per_face = %u must be in [2, %u] in LINES mode",
                   c->lines_per_face, CONE_MAX_LINES);
  }
  return 0;
}

void cone_object_point(const cone_object_t* o, const double x[3], double dest[3]) {
  double s[3] = {x[0] * o->obj->scale[0], x[1] * o->obj->scale[1], x[2] * o->obj->scale[2]};
  xform_apply(&o->pose, s, dest);
}

// One quad face in the sensor frame: lines, or two triangles.
static void eval_quad_sensor(const cone_shape_t* k, const cone_object_t* o, cone_mode_t mode,
                             uint32_t n, const double v[4][3], cone_best_t* best) {
  if (mode == CONE_MODE_LINES) {
    cone_lines_quad(k, v, n, o->obj->id, best);
    return;
  }
  double t1[3][3], t2[3][3];
  memcpy(t1[0], v[0], sizeof(t1[0]));
  memcpy(t1[1], v[1], sizeof(t1[1]));
  memcpy(t1[2], v[2], sizeof(t1[2]));
  memcpy(t2[0], v[0], sizeof(t2[0]));
  memcpy(t2[1], v[2], sizeof(t2[1]));
  memcpy(t2[2], v[3], sizeof(t2[2]));
  cone_exact_triangle(k, t1, o->obj->id, best);
  cone_exact_triangle(k, t2, o->obj->id, best);
}

// One quad face (object frame).
static void eval_quad(const cone_shape_t* k, const cone_object_t* o, cone_mode_t mode, uint32_t n,
                      const double local[4][3], cone_best_t* best) {
  double v[4][3];
  for (int i = 0; i < 4; i++) {
    cone_object_point(o, local[i], v[i]);
  }
  eval_quad_sensor(k, o, mode, n, v, best);
}

// Whether a box cannot give anything in EXACT mode: its bounding sphere (centre and radius in
// the sensor frame) lies wholly behind the sensor, beyond the cap or outside one side of the
// pyramid |y| <= a x, |z| <= b x that holds the cone (then each of its triangles has its three
// corners outside that face, and cone_exact_triangle's own cull drops it), or farther than the
// best point found (then each triangle's closest point is, and it returns at once). A margin
// far above the rounding of the corners (1e-9 of the distances) keeps the answer the same bits
// as evaluating the twelve triangles; most steps of a moving sensor see most boxes culled here
// for a few dozen operations instead of eight corners and twelve triangles, twice.
static int box_culled(const cone_shape_t* k, const cone_object_t* o, const cone_best_t* best) {
  const double* h = o->obj->size;
  const double* s = o->obj->scale;
  double he[3] = {h[0] * s[0], h[1] * s[1], h[2] * s[2]};
  const double* c = o->pose.p;
  double dc = xform_norm3(c), rb = xform_norm3(he);
  if (!isfinite(dc) || !isfinite(rb)) {
    return 0;
  }
  double r = rb + 1e-9 * (dc + rb);
  double na = k->na, nb = k->nb;
  if (c[0] + r <= 0.0 || c[0] - r > k->range || (c[1] - k->a * c[0]) / na > r ||
      (-c[1] - k->a * c[0]) / na > r || (c[2] - k->b * c[0]) / nb > r ||
      (-c[2] - k->b * c[0]) / nb > r) {
    return 1;
  }
  double lb = dc - r;
  return best->found && lb > 0.0 && lb * lb >= best->d2 * (1.0 + 1e-9);
}

// The faces of a box in EXACT mode, to skip a face that cannot come closer than the best
// point found: the sensor origin's excess over the box along each axis of the box frame
// (rotation undone, scale kept) and, per normal axis, how much nearer than its face a point
// offered by one of the face's triangles can be.
typedef struct box_faces {
  int ready;
  double o[3];
  double hs[3];                 // half extent * scale: the + face of axis j is at hs[j]
  double ex2[3];                // (o - o clamped to the box)^2 per axis
  double slack[3];              // per normal axis, see box_face_skipped
} box_faces_t;

static void box_faces_init(const cone_shape_t* k, const cone_object_t* o, box_faces_t* f) {
  pose_t inv = xform_inverse(&o->pose);
  double he[3];
  for (int j = 0; j < 3; j++) {
    f->o[j] = inv.p[j];
    f->hs[j] = o->obj->size[j] * o->obj->scale[j];
    he[j] = fabs(f->hs[j]);
    double c = f->o[j] < -he[j] ? -he[j] : (f->o[j] > he[j] ? he[j] : f->o[j]);
    f->ex2[j] = (f->o[j] - c) * (f->o[j] - c);
  }
  double ab = k->a > k->b ? k->a : k->b;
  double qv = k->range * (1.0 + 1e-12) * sqrt(1.0 + ab * ab) + xform_norm3(o->pose.p) +
              xform_norm3(he);
  for (int axis = 0; axis < 3; axis++) {
    double A = 2.0 * he[axis == 0 ? 1 : 0], B = 2.0 * he[axis == 2 ? 1 : 2];
    double l = sqrt(A * A + B * B), nn = A * B, lmin = A < B ? A : B;
    double t = 2.0 * (1e-12 * 2.0 * l / lmin + 1e-12 * (1.0 + l * l / nn) * qv);
    f->slack[axis] = 1.01 * t * l * (A + B + l) / nn + 2e-9 * qv;   // NaN or inf for A or B 0
  }
  f->ready = 1;
}

// Whether face (axis, side) of the box cannot offer a point nearer than the best: its
// distance, less its slack, is not below the best. The offered points are corners and points
// of edges clipped to the cone (rounding: a few units of 1e-16 of qv = |q| + |corner|) or
// found on the mantle, which pass tri_contains: within 1.01 t l P / |n| + 1e-9 qv of the
// triangle (the bound of cone_exact_triangle's sample window, here for a right triangle of
// legs A, B: |n| = A B, perimeter P, longest edge l); 1e-9 qv more covers the rounding of the
// face's distance. Each skipped triangle would have returned at its own closest point, no
// nearer than the face, offering nothing: the same bits.
static int box_face_skipped(const cone_shape_t* k, const cone_object_t* o, box_faces_t* f,
                            int axis, int side, const cone_best_t* best) {
  if (!best->found) {
    return 0;
  }
  if (!f->ready) {
    box_faces_init(k, o, f);
  }
  double dn = f->o[axis] - side * f->hs[axis];
  double d2 = dn * dn + f->ex2[axis == 0 ? 1 : 0] + f->ex2[axis == 2 ? 1 : 2];
  double lb = sqrt(d2) - f->slack[axis];
  return lb > 0.0 && lb * lb >= best->d2 * (1.0 + 1e-9);    // false for NaN
}

// Box faces: lines run along the first tangent axis and step along the second (for the faces
// normal to x: along y, stepping in z). The 8 corners are taken to the sensor frame once (each
// is a corner of three faces).
static void eval_box(const cone_shape_t* k, const cone_object_t* o, cone_mode_t mode, uint32_t n,
                     cone_best_t* best) {
  if (mode == CONE_MODE_EXACT && box_culled(k, o, best)) {
    return;
  }
  box_faces_t faces = {0};
  const double* h = o->obj->size;
  double corner[8][3];                  // bit j of the index: + along axis j
  for (int c = 0; c < 8; c++) {
    double local[3];
    for (int j = 0; j < 3; j++) {
      local[j] = (c >> j & 1 ? 1.0 : -1.0) * h[j];
    }
    cone_object_point(o, local, corner[c]);
  }
  for (int axis = 0; axis < 3; axis++) {
    int t = axis == 0 ? 1 : 0;          // lines along
    int u = axis == 2 ? 1 : 2;          // stepping along
    for (int side = -1; side <= 1; side += 2) {
      if (mode == CONE_MODE_EXACT && box_face_skipped(k, o, &faces, axis, side, best)) {
        continue;
      }
      double v[4][3];
      static const int kT[4] = {0, 1, 1, 0}, kU[4] = {0, 0, 1, 1};   // + along t, u
      for (int i = 0; i < 4; i++) {
        int c = (side > 0) << axis | kT[i] << t | kU[i] << u;
        memcpy(v[i], corner[c], sizeof(v[i]));
      }
      eval_quad_sensor(k, o, mode, n, v, best);
    }
  }
}

// A point of a curved primitive's surface for LINES mode: around in [0, 1), along in [0, 1].
static void curved_point(const view_object_t* obj, double around, double along, double p[3]) {
  double phi = 2.0 * M_PI * around;
  double r = obj->size[0], h = obj->size[1];
  switch (obj->prim) {
    case SCENE_PRIM_SPHERE: {
      double lat = M_PI * (along - 0.5);
      p[0] = r * cos(lat) * cos(phi);
      p[1] = r * cos(lat) * sin(phi);
      p[2] = r * sin(lat);
      return;
    }
    case SCENE_PRIM_ELLIPSOID: {   // the unit sphere stretched by the semi-axes
      double lat = M_PI * (along - 0.5);
      p[0] = obj->size[0] * cos(lat) * cos(phi);
      p[1] = obj->size[1] * cos(lat) * sin(phi);
      p[2] = obj->size[2] * sin(lat);
      return;
    }
    case SCENE_PRIM_CYLINDER: {
      // bottom cap (0..1/4), side (1/4..3/4), top cap (3/4..1)
      double rr = along < 0.25 ? r * along * 4.0 : (along > 0.75 ? r * (1.0 - along) * 4.0 : r);
      double z = along < 0.25 ? -h : (along > 0.75 ? h : h * (4.0 * along - 2.0));
      p[0] = rr * cos(phi);
      p[1] = rr * sin(phi);
      p[2] = z;
      return;
    }
    default: {  // capsule: bottom hemisphere (0..1/3), side, top hemisphere (2/3..1)
      double lat, z0;
      if (along < 1.0 / 3.0) {
        lat = -0.5 * M_PI * (1.0 - 3.0 * along);
        z0 = -h;
      } else if (along > 2.0 / 3.0) {
        lat = 0.5 * M_PI * (3.0 * along - 2.0);
        z0 = h;
      } else {
        lat = 0.0;
        z0 = h * (6.0 * along - 3.0);
      }
      p[0] = r * cos(lat) * cos(phi);
      p[1] = r * cos(lat) * sin(phi);
      p[2] = z0 + r * sin(lat);
      return;
    }
  }
}

uint64_t cone_object_faces(const view_object_t* obj) {
  switch (obj->prim) {
    case 0:
      return obj->ntriangle;
    case SCENE_PRIM_BOX:
      return 6;
    case SCENE_PRIM_PLANE:
    case SCENE_PRIM_RECTANGLE:
      return 1;
    case SCENE_PRIM_SPHERE:
    case SCENE_PRIM_CYLINDER:
    case SCENE_PRIM_CAPSULE:
    case SCENE_PRIM_ELLIPSOID:
      return (uint64_t)CONE_TESS_ALONG * CONE_TESS_AROUND;
    default:
      return 0;
  }
}

void cone_object_eval(const cone_shape_t* k, const cone_object_t* o, cone_mode_t mode, uint32_t n,
                      cone_best_t* best) {
  const view_object_t* obj = o->obj;
  switch (obj->prim) {
    case 0: {   // triangle mesh
      // poll for cancellation about every 10^5 lines (or 4096 triangles in EXACT mode)
      uint32_t chunk = mode == CONE_MODE_LINES ? 100000u / n + 1u : 4096u;
      for (uint32_t t = 0; t < obj->ntriangle; t++) {
        if (best->view && t % chunk == chunk - 1 && view_cancelled(best->view)) {
          best->cancelled = 1;
          return;
        }
        double local[4][3];
        for (int i = 0; i < 3; i++) {
          uint32_t vi = obj->indices[3 * t + i];
          for (int j = 0; j < 3; j++) {
            local[i][j] = obj->vertices[3 * vi + j];
          }
        }
        if (mode == CONE_MODE_LINES) {
          // a triangle is the quad v0 v1 v2 v2: lines from the v0-v2 edge to the v1-v2 edge
          memcpy(local[3], local[2], sizeof(local[3]));
          eval_quad(k, o, mode, n, local, best);
        } else {
          double v[3][3];
          for (int i = 0; i < 3; i++) {
            cone_object_point(o, local[i], v[i]);
          }
          cone_exact_triangle(k, v, obj->id, best);
        }
      }
      return;
    }
    case SCENE_PRIM_BOX:
      eval_box(k, o, mode, n, best);
      return;
    case SCENE_PRIM_PLANE: {
      double h = obj->size[0] > 0.0 ? obj->size[0] : SCENE_PLANE_UNBOUNDED_HALF;
      double q[4][3] = {{-h, -h, 0}, {h, -h, 0}, {h, h, 0}, {-h, h, 0}};
      eval_quad(k, o, mode, n, q, best);
      return;
    }
    case SCENE_PRIM_RECTANGLE: {   // seen from both sides: the cone is no ray
      double hx = obj->size[0], hy = obj->size[1];
      double q[4][3] = {{-hx, -hy, 0}, {hx, -hy, 0}, {hx, hy, 0}, {-hx, hy, 0}};
      eval_quad(k, o, mode, n, q, best);
      return;
    }
    case SCENE_PRIM_SPHERE:
    case SCENE_PRIM_CYLINDER:
    case SCENE_PRIM_CAPSULE:
    case SCENE_PRIM_ELLIPSOID:
      if (mode == CONE_MODE_EXACT) {
        cone_exact_curved(k, o, best);
        return;
      }
      for (int i = 0; i < CONE_TESS_ALONG; i++) {
        for (int j = 0; j < CONE_TESS_AROUND; j++) {
          double q[4][3];
          double a0 = (double)j / CONE_TESS_AROUND, a1 = (double)(j + 1) / CONE_TESS_AROUND;
          double l0 = (double)i / CONE_TESS_ALONG, l1 = (double)(i + 1) / CONE_TESS_ALONG;
          curved_point(obj, a0, l0, q[0]);
          curved_point(obj, a1, l0, q[1]);
          curved_point(obj, a1, l1, q[2]);
          curved_point(obj, a0, l1, q[3]);
          eval_quad(k, o, mode, n, q, best);
        }
      }
      return;
    default:
      return;
  }
}

static int cone_step(void* opaque, const sensor_ctx_t* ctx, const step_view_t* v,
                     sensor_out_t* out, err_msg_t* msg) {
  cone_sensor_t* self = opaque;
  self->staged = 0;
  const view_body_t* body = view_find_body(v, ctx->body_id);
  if (!body) {
    return err_set(msg, ERR_NOTFOUND, "cone %u: body %u is not in the environment", ctx->id,
                   ctx->body_id);
  }
  uint32_t lines_per_face = self->c.lines_per_face;
  if (self->c.mode == CONE_MODE_LINES) {
    // bound the work up front: every face of every object considered gets N lines. A scene
    // grown past the bound is sampled more coarsely rather than refused (a refusal would
    // repeat at every step until the scene shrinks): N falls to what the bound allows; only a
    // scene where even 2 lines a face pass it is refused
    uint64_t faces = 0;
    for (uint32_t i = 0; i < v->nobject; i++) {
      if (ctx->body_id == 0 || v->objects[i].body_id != ctx->body_id) {
        faces += cone_object_faces(&v->objects[i]);
      }
    }
    if (faces * lines_per_face > CONE_MAX_LINES_PER_STEP) {
      uint64_t fit = CONE_MAX_LINES_PER_STEP / faces;
      if (fit < 2) {
        return err_set(msg, ERR_LIMIT,
                       "cone %u: LINES mode over %llu faces takes over %llu lines per step even "
                       "at 2 lines a face (cone.lines_per_face = %u); use mode EXACT",
                       ctx->id, (unsigned long long)faces,
                       (unsigned long long)CONE_MAX_LINES_PER_STEP, lines_per_face);
      }
      lines_per_face = (uint32_t)fit;
    }
  }
  pose_t sensor = view_mount_pose(body, &ctx->mount, 1.0);
  pose_t inv = xform_inverse(&sensor);
  cone_best_t best = {.view = v};
  int passes = self->c.mode == CONE_MODE_EXACT ? 2 : 1;
  for (int pass = 1; pass <= passes && (pass == 1 || best.deferred); pass++) {
    best.pass = self->c.mode == CONE_MODE_EXACT ? pass : 0;
    for (uint32_t i = 0; i < v->nobject; i++) {
      if (ctx->body_id != 0 && v->objects[i].body_id == ctx->body_id) {
        continue;  // like a lidar, the sensor does not see the body it is mounted on
      }
      if ((i & 255) == 255 && view_cancelled(v)) {
        best.cancelled = 1;
      }
      if (best.cancelled) {
        return err_set(msg, ERR_STATE, "cone %u: cancelled", ctx->id);
      }
      cone_object_t o = {.obj = &v->objects[i]};
      o.pose = xform_compose(&inv, &v->objects[i].pose);
      cone_object_eval(&self->k, &o, self->c.mode, lines_per_face, &best);
    }
  }
  if (best.cancelled) {
    return err_set(msg, ERR_STATE, "cone %u: cancelled", ctx->id);
  }
  sensor_record_t* r = sensor_out_push(out, ctx->id, SENSOR_REC_CONE);
  if (!r) {
    return err_set(msg, ERR_NOMEM, "cone %u: out of memory for its reading", ctx->id);
  }
  const cone_state_t* st = &self->st;
  cone_state_t* nx = &self->next;
  *nx = *st;
  r->time = v->t1;
  r->frame = nx->frame++;
  sensor_cone_t* c = &r->u.cone;
  if (best.found) {
    c->detected = 1;
    c->range = sqrt(best.d2);
    c->azimuth = atan2(best.q[1], best.q[0]);
    c->elevation = atan2(best.q[2], best.q[0]);
    c->object_id = best.object_id;
    xform_apply(&sensor, best.q, c->point);
    if (st->prev_found && v->t1 - st->prev_time >= SENSOR_MIN_INTERVAL) {
      double d[3] = {c->point[0] - st->prev_point[0], c->point[1] - st->prev_point[1],
                     c->point[2] - st->prev_point[2]};
      c->has_speed = 1;
      c->speed = xform_norm(d, 3) / (v->t1 - st->prev_time);
    }
    memcpy(nx->prev_point, c->point, sizeof(nx->prev_point));
  }
  nx->prev_found = best.found;
  nx->prev_time = v->t1;
  self->staged = 1;
  return 0;
}

static void cone_commit(void* opaque) {
  cone_sensor_t* self = opaque;
  if (self->staged) {
    self->st = self->next;
    self->staged = 0;
  }
}

static void cone_destroy(void* opaque) { mem_free(opaque); }

static const sensor_ops_t kConeOps = {
    .kind_name = "cone",
    .step = cone_step,
    .commit = cone_commit,
    .destroy = cone_destroy,
};

int cone_create(const cone_config_t* c, sensor_t* out, err_msg_t* msg) {
  int rc = cone_config_check(c, msg);
  if (rc != 0) {
    return rc;
  }
  cone_sensor_t* self = mem_calloc(1, sizeof(*self));
  if (!self) {
    return err_set(msg, ERR_NOMEM, "out of memory for a cone sensor");
  }
  self->c = *c;
  cone_shape_init(&self->k, c->fov_horizontal, c->fov_vertical, c->range);
  memset(out, 0, sizeof(*out));
  out->kind = SENSOR_CONE;
  out->ops = &kConeOps;
  out->self = self;
  out->needs_objects = 1;
  return 0;
}
