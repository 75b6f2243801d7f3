// SPDX-License-Identifier: MIT
// env_sensor.c: the sensor table of an environment and the evaluation of its sensors at each
// step through a read-only step view (sensor/view.h). Sensors never see the tables below. The
// view's bodies and joints persist between steps, sorted by id: a state change writes its own
// entries, and only creating or removing a body or joint has the next step rebuild them.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "world/env_impl.h"

// Bytes counted for each record besides its point data (the message around it).
#define ENV_RECORD_OVERHEAD 512u

void env_sensors_init(env_t* e) {
  table_init(&e->sensors, sizeof(env_sensor_t));
  e->view_stale = 1;
}


void env_sensors_close(env_t* e) {
  for (uint32_t s = 0; s < e->sensors.used; s++) {
    if (table_slot_id(&e->sensors, s) != 0) {
      env_sensor_t* r = table_at(&e->sensors, s);
      r->sensor.ops->destroy(r->sensor.self);
      mem_free(r->name);
    }
  }
  table_close(&e->sensors);
  sensor_out_free(&e->outputs);
  mem_free(e->view_bodies);
  mem_free(e->view_joints);
  mem_free(e->view_dipoles);
  mem_free(e->view_objects);
}


static int check_mount(const pose_t* m, pose_t* dest, err_msg_t* msg) {
  static const char* const kAxis[3] = {"x", "y", "z"};
  for (int k = 0; k < 3; k++) {
    if (!isfinite(m->p[k]) || fabs(m->p[k]) > ENV_MAX_COORD) {
      return err_set(msg, ERR_INVAL, "mount.position.%s = %g is not finite or beyond %g m",
                     kAxis[k], m->p[k], ENV_MAX_COORD);
    }
  }
  for (int k = 0; k < 4; k++) {
    if (!isfinite(m->q[k])) {
      return err_set(msg, ERR_INVAL, "mount.orientation is not finite");
    }
  }
  *dest = *m;
  if (xform_quat_normalize(dest->q) < ENV_QUAT_MIN_NORM) {
    return err_set(msg, ERR_INVAL, "mount.orientation has a zero norm");
  }
  return 0;
}


int env_create_sensor(env_t* e, const sensor_desc_t* d, err_msg_t* msg) {
  if (d->id == 0) {
    return err_set(msg, ERR_INVAL, "id = 0 is reserved (sensor ids are > 0)");
  }
  if (table_find(&e->sensors, d->id) != TABLE_NONE) {
    return err_set(msg, ERR_EXISTS, "sensor %u already exists", d->id);
  }
  if (e->sensors.count >= e->limits.max_sensors) {
    return err_set(msg, ERR_LIMIT, "sensor %u exceeds the limit max_sensors = %u", d->id,
                   e->limits.max_sensors);
  }
  if (!d->sensor.ops || !d->sensor.ops->step || !d->sensor.ops->destroy) {
    return err_set(msg, ERR_INVAL, "sensor %u has no model", d->id);
  }
  env_body_t* body = NULL;
  if (d->body_id != 0 && !(body = table_get(&e->bodies, d->body_id))) {
    return err_set(msg, ERR_NOTFOUND, "body_id = %u is not a known body", d->body_id);
  }
  env_joint_t* joint = NULL;
  if (d->sensor.joint_id != 0 && !(joint = table_get(&e->joints, d->sensor.joint_id))) {
    return err_set(msg, ERR_NOTFOUND, "%s.joint_id = %u is not a known joint",
                   d->sensor.ops->kind_name, d->sensor.joint_id);
  }
  if (joint && d->sensor.revolute_joint && joint->type != JOINT_TYPE_REVOLUTE) {
    return err_set(msg, ERR_INVAL, "%s.joint_id = %u is a prismatic joint; it needs a revolute one",
                   d->sensor.ops->kind_name, d->sensor.joint_id);
  }
  pose_t mount;
  int rc = check_mount(&d->mount, &mount, msg);
  if (rc < 0) {
    return rc;
  }

  // the step already due (an UpdateState after the last step) must be one it can take
  if (e->has_time && e->t_cur > e->t_prev) {
    env_sensor_t probe = {.sensor = d->sensor, .ctx = {.id = d->id, .body_id = d->body_id,
                                                       .mount = mount}};
    err_msg_t why;
    if (env_check_step(e, e->t_prev, e->t_cur, &probe, &why) < 0) {
      return err_set(msg, ERR_LIMIT, "the step already due, over (%.17g, %.17g], is too long "
                     "for it: %s; step first, then create it", e->t_prev, e->t_cur, why.text);
    }
  }
  char* name = NULL;
  if ((d->name && d->name[0] && !(name = mem_strdup(d->name))) ||
      table_reserve(&e->sensors, 1) < 0) {
    mem_free(name);
    return err_set(msg, ERR_NOMEM, "out of memory for sensor %u", d->id);
  }
  env_sensor_t* r = table_at(&e->sensors, table_insert(&e->sensors, d->id));
  r->sensor = d->sensor;
  r->ctx.id = d->id;
  r->ctx.body_id = d->body_id;
  r->ctx.mount = mount;
  r->name = name;
  if (d->brief) {
    r->brief = *d->brief;
  } else {
    memset(&r->brief, 0, sizeof(r->brief));
  }
  if (body) {
    body->nsensor++;
  }
  if (joint) {
    joint->nsensor++;
  }
  return 0;
}


int env_remove_sensor(env_t* e, uint32_t id, err_msg_t* msg) {
  env_sensor_t* r = table_get(&e->sensors, id);
  if (!r) {
    return err_set(msg, ERR_NOTFOUND, "sensor %u not found", id);
  }
  if (r->ctx.body_id != 0) {
    ((env_body_t*)table_get(&e->bodies, r->ctx.body_id))->nsensor--;
  }
  if (r->sensor.joint_id != 0) {
    ((env_joint_t*)table_get(&e->joints, r->sensor.joint_id))->nsensor--;
  }
  r->sensor.ops->destroy(r->sensor.self);
  mem_free(r->name);
  table_remove(&e->sensors, id);
  return 0;
}


const sensor_out_t* env_outputs(const env_t* e) {
  return &e->outputs;
}


int env_take_outputs(env_t* e, sensor_out_t* dst) {
  return sensor_out_move(&e->outputs, dst);
}


// Most records of an array handed back that the environment keeps for its next step (a
// lock-step tick's few); a larger one, from a long step, is freed as before.
#define ENV_KEEP_OUTPUTS 64

void env_return_outputs(env_t* e, sensor_out_t* spent) {
  sensor_out_clear(spent);
  if (e->outputs.n == 0 && e->outputs.cap == 0 && spent->cap > 0 &&
      spent->cap <= ENV_KEEP_OUTPUTS) {
    mem_free(e->outputs.rec);
    e->outputs = *spent;
    memset(spent, 0, sizeof(*spent));
    return;
  }
  sensor_out_free(spent);
}


sensor_kind_t env_sensor_kind(const env_t* e, uint32_t id) {
  const env_sensor_t* r = table_get(&e->sensors, id);
  return r ? r->sensor.kind : (sensor_kind_t)0;
}

//---------------- The step view


static int cmp_id(const void* a, const void* b) {
  uint32_t x = *(const uint32_t*)a, y = *(const uint32_t*)b;  // id is each record's first field
  return (x > y) - (x < y);
}


// Sort n records of `size` bytes by their first field, the id (each id once). Slots are
// handed out in creation order, so a step's few objects and sensors are usually in id order
// already: one pass finds that, where qsort cost a few hundred instructions a step for
// three records. The same order either way: the ids are distinct.
static void sort_by_id(void* base, uint32_t n, size_t size) {
  const uint8_t* p = base;
  uint32_t prev = 0;
  for (uint32_t i = 0; i < n; i++) {
    uint32_t id;
    memcpy(&id, p + i * size, sizeof(id));
    if (i > 0 && id < prev) {
      qsort(base, n, size, cmp_id);
      return;
    }
    prev = id;
  }
}


static int grow(void** arr, uint32_t* cap, uint32_t need, size_t elem) {
  if (need <= *cap) {
    return 0;
  }
  uint32_t c = *cap ? *cap : 16;
  while (c < need) {
    c = c > UINT32_MAX / 2 ? need : 2 * c;
  }
  void* p = mem_realloc(*arr, (size_t)c * elem);
  if (!p) {
    return ERR_NOMEM;
  }
  *arr = p;
  *cap = c;
  return 0;
}


static const surface_material_t* view_hit_material(const void* ctx, uint32_t object_id,
                                                   uint32_t primitive) {
  return env_hit_material(ctx, object_id, primitive);
}


static void view_object_optics(const void* ctx, uint32_t object_id,
                               const ambient_material_t** medium,
                               const surface_material_t** material) {
  const env_t* e = ctx;
  *medium = NULL;
  *material = NULL;
  const env_object_t* o = table_get(&e->objects, object_id);
  if (!o) {
    return;
  }
  if (o->medium_id != 0) {
    *medium = &env_find_medium(e, o->medium_id)->a;
  }
  const env_geometry_t* g = table_get(&e->geometries, o->geometry_id);
  if (!g->material_ids) {
    *material = &env_find_material(e, o->material_id)->m;
  }
}


// Every object's shape and world pose at t_cur, sorted by id (for the cone sensor).
static int build_objects(env_t* e, step_view_t* v, err_msg_t* msg) {
  if (grow((void**)&e->view_objects, &e->view_object_cap, e->objects.count,
           sizeof(view_object_t))) {
    return err_set(msg, ERR_NOMEM, "out of memory for the step view's objects");
  }
  uint32_t n = 0;
  for (uint32_t s = 0; s < e->objects.used; s++) {
    uint32_t id = table_slot_id(&e->objects, s);
    if (id == 0) {
      continue;
    }
    const env_object_t* o = table_at(&e->objects, s);
    const env_geometry_t* g = table_get(&e->geometries, o->geometry_id);
    const env_body_t* b = o->body_id ? table_get(&e->bodies, o->body_id) : NULL;
    view_object_t* vo = &e->view_objects[n++];
    scene_shape_t shape;
    scene_geometry_shape(e->scene, g->handle, &shape);
    vo->id = id;
    vo->body_id = o->body_id;
    vo->prim = shape.prim;
    memcpy(vo->size, shape.size, sizeof(vo->size));
    vo->vertices = shape.vertices;
    vo->nvertex = g->is_mesh ? g->nvertex : 0;
    vo->indices = shape.indices;
    vo->ntriangle = g->is_mesh ? g->ntriangle : 0;
    memcpy(vo->scale, o->scale, sizeof(vo->scale));
    vo->pose = b ? xform_compose(&b->pose_cur, &o->local_pose) : o->local_pose;
  }
  if (n > 1) {
    sort_by_id(e->view_objects, n, sizeof(view_object_t));
  }
  v->objects = e->view_objects;
  v->nobject = n;
  return 0;
}


// A body's state at the end of the step, as its view entry shows it.
static void put_body_cur(view_body_t* vb, const env_body_t* b) {
  vb->at[1].pose = b->pose_cur;
  memcpy(vb->at[1].linear_velocity, b->linear_velocity, sizeof(double[3]));
  memcpy(vb->at[1].angular_velocity, b->angular_velocity, sizeof(double[3]));
  vb->at[1].has_velocity = b->has_velocity;
}


// A body's states at both ends of the step, as its view entry shows them.
static void put_body(view_body_t* vb, const env_body_t* b) {
  vb->at[0].pose = b->pose_prev;
  memcpy(vb->at[0].linear_velocity, b->linear_velocity_prev, sizeof(double[3]));
  memcpy(vb->at[0].angular_velocity, b->angular_velocity_prev, sizeof(double[3]));
  vb->at[0].has_velocity = b->has_velocity_prev;
  put_body_cur(vb, b);
}


static void put_joint(view_joint_t* vj, const env_joint_t* j) {
  vj->type = j->type == JOINT_TYPE_PRISMATIC ? VIEW_JOINT_PRISMATIC : VIEW_JOINT_REVOLUTE;
  vj->position[0] = j->position_prev;
  vj->position[1] = j->position;
}


void env_view_body(env_t* e, const env_body_t* b) {
  if (!e->view_stale) {
    put_body(&e->view_bodies[b->view_at], b);
  }
}


void env_view_body_cur(env_t* e, const env_body_t* b) {
  if (!e->view_stale) {
    put_body_cur(&e->view_bodies[b->view_at], b);
  }
}


void env_view_joint(env_t* e, const env_joint_t* j) {
  if (!e->view_stale) {
    put_joint(&e->view_joints[j->view_at], j);
  }
}


// Every body and joint into the view, sorted by id, and each record told where its entry is:
// after bodies or joints were created or removed (between those, entries are written one by
// one as states change).
static int rebuild_view(env_t* e, err_msg_t* msg) {
  if (grow((void**)&e->view_bodies, &e->view_body_cap, e->bodies.count, sizeof(view_body_t)) ||
      grow((void**)&e->view_joints, &e->view_joint_cap, e->joints.count, sizeof(view_joint_t))) {
    return err_set(msg, ERR_NOMEM, "out of memory for the step view");
  }
  uint32_t n = 0;
  for (uint32_t s = 0; s < e->bodies.used; s++) {
    uint32_t id = table_slot_id(&e->bodies, s);
    if (id != 0) {
      e->view_bodies[n].id = id;
      put_body(&e->view_bodies[n++], table_at(&e->bodies, s));
    }
  }
  if (n > 1) {
    sort_by_id(e->view_bodies, n, sizeof(view_body_t));
  }
  for (uint32_t i = 0; i < n; i++) {
    ((env_body_t*)table_get(&e->bodies, e->view_bodies[i].id))->view_at = i;
  }
  e->view_nbody = n;

  n = 0;
  for (uint32_t s = 0; s < e->joints.used; s++) {
    uint32_t id = table_slot_id(&e->joints, s);
    if (id != 0) {
      e->view_joints[n].id = id;
      put_joint(&e->view_joints[n++], table_at(&e->joints, s));
    }
  }
  if (n > 1) {
    sort_by_id(e->view_joints, n, sizeof(view_joint_t));
  }
  for (uint32_t i = 0; i < n; i++) {
    ((env_joint_t*)table_get(&e->joints, e->view_joints[i].id))->view_at = i;
  }
  e->view_njoint = n;
  e->view_stale = 0;
  return 0;
}


static int build_view(env_t* e, step_view_t* v, err_msg_t* msg) {
  if (grow((void**)&e->view_dipoles, &e->view_dipole_cap, e->ndipole, sizeof(field_dipole_t))) {
    return err_set(msg, ERR_NOMEM, "out of memory for the step view");
  }
  int rc = e->view_stale ? rebuild_view(e, msg) : 0;
  if (rc < 0) {
    return rc;
  }
  memset(v, 0, sizeof(*v));
  v->t0 = e->t_prev;
  v->t1 = e->t_cur;
  v->step = e->steps + 1;
  v->seed = e->seed;
  v->scene = e->scene;
  v->pool = e->pool;
  v->bodies = e->view_bodies;
  v->nbody = e->view_nbody;
  v->joints = e->view_joints;
  v->njoint = e->view_njoint;

  memcpy(v->gravity, e->gravity, sizeof(v->gravity));
  memcpy(v->magnetic.uniform, e->magnetic_field, sizeof(v->magnetic.uniform));
  for (uint32_t i = 0; i < e->ndipole; i++) {
    env_dipole_world(e, &e->dipoles[i], &e->view_dipoles[i]);
  }
  v->magnetic.dipoles = e->view_dipoles;
  v->magnetic.ndipole = e->ndipole;

  v->ambient = &e->medium0.a;
  v->lookup_ctx = e;
  v->hit_material = view_hit_material;
  v->object_optics = view_object_optics;
  return 0;
}


// Sensors whose order is kept on the stack during a step.
#define ENV_FEW_SENSORS 32

int env_eval_sensors(env_t* e, const env_step_hooks_t* hooks, err_msg_t* msg) {
  sensor_out_clear(&e->outputs);
  uint32_t count = e->sensors.count;
  if (count == 0) {
    return 0;
  }
  step_view_t v;
  int rc = build_view(e, &v, msg);
  if (rc < 0) {
    return rc;
  }
  v.cancelled = hooks ? hooks->cancelled : NULL;
  v.cancel_ctx = hooks ? hooks->ctx : NULL;

  // sensors in id order, so that the records are in a stable order (a few on the stack: no
  // allocation a step)
  uint32_t few[ENV_FEW_SENSORS];
  uint32_t* order = count <= ENV_FEW_SENSORS ? few : mem_alloc((size_t)count * sizeof(uint32_t));
  if (!order) {
    return err_set(msg, ERR_NOMEM, "out of memory for %u sensors", count);
  }
  uint32_t n = 0;
  int need_objects = 0;
  for (uint32_t s = 0; s < e->sensors.used; s++) {
    uint32_t id = table_slot_id(&e->sensors, s);
    if (id != 0) {
      order[n++] = id;
      need_objects |= ((env_sensor_t*)table_at(&e->sensors, s))->sensor.needs_objects;
    }
  }
  if (need_objects && (rc = build_objects(e, &v, msg)) < 0) {
    if (order != few) {
      mem_free(order);
    }
    return rc;
  }
  if (n > 1) {
    sort_by_id(order, n, sizeof(uint32_t));
  }

  // Each sensor's records of the step are bounded by max_output_bytes (so that each fits a
  // reply part of its own); the step's records together are not: they travel in parts, and
  // their memory is what the sensors hold anyway (a lidar hands over its buffers). A sensor
  // past its bound refuses the step before any sensor commits (all or nothing).
  v.output_budget = e->limits.max_output_bytes;
  for (uint32_t i = 0; i < n && rc == 0; i++) {
    env_sensor_t* r = table_get(&e->sensors, order[i]);
    uint32_t first = e->outputs.n;
    if (view_cancelled(&v)) {
      rc = err_set(msg, ERR_STATE, "cancelled (the daemon is stopping, the client left or the "
                   "request ran out of time)");
      break;
    }
    rc = r->sensor.ops->step(r->sensor.self, &r->ctx, &v, &e->outputs, msg);
    uint64_t bytes = 0;
    for (uint32_t k = first; rc == 0 && k < e->outputs.n; k++) {
      const sensor_record_t* rec = &e->outputs.rec[k];
      bytes += ENV_RECORD_OVERHEAD;
      if (rec->kind == SENSOR_REC_CLOUD) {
        bytes += (uint64_t)rec->u.cloud.count * rec->u.cloud.point_step;
      }
    }
    if (rc == 0 && bytes > e->limits.max_output_bytes) {
      rc = err_set(msg, ERR_LIMIT,
                   "time: the records of sensor %u in this step take %llu bytes, more than "
                   "max_output_bytes = %llu; step in shorter intervals", order[i],
                   (unsigned long long)bytes, (unsigned long long)e->limits.max_output_bytes);
    }
  }
  if (rc == 0 && hooks && hooks->accept) {
    rc = hooks->accept(hooks->ctx, &e->outputs, msg);
  }
  if (rc < 0) {
    sensor_out_clear(&e->outputs);
  } else {
    for (uint32_t i = 0; i < n; i++) {
      env_sensor_t* r = table_get(&e->sensors, order[i]);
      if (r->sensor.ops->commit) {
        r->sensor.ops->commit(r->sensor.self);
      }
    }
  }
  if (order != few) {
    mem_free(order);
  }
  return rc;
}


// ERR_LIMIT (msg) when sensor r could not step over (t0, t1].
static int check_one(const env_t* e, const env_sensor_t* r, double t0, double t1,
                     err_msg_t* msg) {
  uint64_t bytes;
  if (!r->sensor.ops->bound) {
    return 0;
  }
  return r->sensor.ops->bound(r->sensor.self, &r->ctx, t0, t1, e->limits.max_output_bytes,
                              &bytes, msg);
}


int env_check_step(env_t* e, double t0, double t1, const env_sensor_t* only, err_msg_t* msg) {
  if (!(t1 > t0)) {
    return 0;
  }
  if (only) {
    return check_one(e, only, t0, t1, msg);
  }
  for (uint32_t s = 0; s < e->sensors.used; s++) {
    if (table_slot_id(&e->sensors, s) != 0) {
      int rc = check_one(e, table_at(&e->sensors, s), t0, t1, msg);
      if (rc < 0) {
        return rc;
      }
    }
  }
  return 0;
}
