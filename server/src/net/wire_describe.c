// SPDX-License-Identifier: MIT
// wire_describe.c: Describe, the listing of an environment's sensors and bodies for any
// client, translated from the core's read-only listings (env_list_sensors, env_list_bodies)
// into a Description. Pages are bounded so that a reply stays far below any frame limit:
// a sensor entry is at most about 1 KiB (name, 16 point fields), a body about 330 bytes.
#include <string.h>

#include "base/mem.h"
#include "net/wire_sensor.h"

#define DESCRIBE_MAX_SENSORS 256u
#define DESCRIBE_MAX_BODIES 1024u

_Static_assert((int)SENSIM__V1__SENSOR_KIND__SENSOR_KIND_LIDAR == (int)SENSOR_LIDAR, "kind");
_Static_assert((int)SENSIM__V1__SENSOR_KIND__SENSOR_KIND_CONE == (int)SENSOR_CONE, "kind");

// A pose on the wire, its storage beside it.
typedef struct pose_msg {
  Sensim__V1__Pose pose;
  Sensim__V1__Vec3 p;
  Sensim__V1__Quat q;
} pose_msg_t;

typedef struct sensor_msg {
  Sensim__V1__SensorDescription msg;
  pose_msg_t mount;
  Sensim__V1__LidarDescription lidar;
  Sensim__V1__PointField fields[SENSOR_MAX_FIELDS];
  Sensim__V1__PointField* field_ptrs[SENSOR_MAX_FIELDS];
} sensor_msg_t;

typedef struct body_msg {
  Sensim__V1__BodyDescription msg;
  pose_msg_t pose;
} body_msg_t;

struct wire_description {
  Sensim__V1__Description msg;
  env_sensor_info_t sinfo[DESCRIBE_MAX_SENSORS];
  env_body_info_t* binfo;       // (DESCRIBE_MAX_BODIES)
  sensor_msg_t* sensors;        // (DESCRIBE_MAX_SENSORS)
  Sensim__V1__SensorDescription* sensor_ptrs[DESCRIBE_MAX_SENSORS];
  body_msg_t* bodies;           // (DESCRIBE_MAX_BODIES)
  Sensim__V1__BodyDescription** body_ptrs;  // (DESCRIBE_MAX_BODIES)
};


// Wire order of a pose: x y z, quaternion x y z w (internal w x y z).
static void pose_to(const pose_t* in, pose_msg_t* out) {
  sensim__v1__pose__init(&out->pose);
  sensim__v1__vec3__init(&out->p);
  sensim__v1__quat__init(&out->q);
  out->p.has_x = out->p.has_y = out->p.has_z = 1;
  out->p.x = in->p[0];
  out->p.y = in->p[1];
  out->p.z = in->p[2];
  out->q.has_x = out->q.has_y = out->q.has_z = out->q.has_w = 1;
  out->q.w = in->q[0];
  out->q.x = in->q[1];
  out->q.y = in->q[2];
  out->q.z = in->q[3];
  out->pose.position = &out->p;
  out->pose.orientation = &out->q;
}


static void sensor_to(const env_sensor_info_t* in, sensor_msg_t* o) {
  Sensim__V1__SensorDescription* m = &o->msg;
  sensim__v1__sensor_description__init(m);
  m->has_id = 1;
  m->id = in->id;
  m->has_kind = 1;
  m->kind = in->kind >= SENSOR_LIDAR && in->kind <= SENSOR_CONE
                ? (Sensim__V1__SensorKind)in->kind
                : SENSIM__V1__SENSOR_KIND__SENSOR_KIND_UNSPECIFIED;
  m->name = (char*)(in->name ? in->name : NULL);
  m->has_body_id = 1;
  m->body_id = in->body_id;
  pose_to(&in->mount, &o->mount);
  m->mount = &o->mount.pose;
  if (in->joint_id) {
    m->has_joint_id = 1;
    m->joint_id = in->joint_id;
  }
  const env_sensor_brief_t* b = in->brief;
  if (in->kind != SENSOR_LIDAR || !b || b->point_step == 0) {
    return;
  }
  Sensim__V1__LidarDescription* l = &o->lidar;
  sensim__v1__lidar_description__init(l);
  for (uint32_t i = 0; i < b->nfield; i++) {
    Sensim__V1__PointField* f = &o->fields[i];
    sensim__v1__point_field__init(f);
    f->name = (char*)b->fields[i].name;
    f->has_offset = f->has_datatype = f->has_count = 1;
    f->offset = b->fields[i].offset;
    f->datatype = (Sensim__V1__PointField__Datatype)b->fields[i].datatype;
    f->count = b->fields[i].count;
    o->field_ptrs[i] = f;
  }
  l->n_fields = b->nfield;
  l->fields = o->field_ptrs;
  l->has_point_step = 1;
  l->point_step = b->point_step;
  l->has_frame = 1;
  l->frame = b->world_frame ? SENSIM__V1__OUTPUT_FRAME__FRAME_WORLD
                            : SENSIM__V1__OUTPUT_FRAME__FRAME_SENSOR;
  l->has_layout = 1;
  l->layout = (Sensim__V1__PointLayout)b->layout;
  l->pattern = (char*)b->pattern;
  m->lidar = l;
}


int wire_describe(const Sensim__V1__Describe* m, env_t* e, Sensim__V1__Envelope* reply,
                  wire_description_t** store, err_msg_t* msg) {
  wire_description_t* w = mem_calloc(1, sizeof(*w));
  *store = w;
  if (!w) {
    return err_set(msg, ERR_NOMEM, "out of memory describing the environment");
  }
  Sensim__V1__Description* d = &w->msg;
  sensim__v1__description__init(d);
  d->environment = (char*)env_name(e);
  env_info_t info;
  env_get_info(e, &info);
  if (info.time.has_time) {
    d->has_time = 1;
    d->time = info.time.t_cur;
  }
  d->has_steps = 1;
  d->steps = info.time.steps;
  d->has_sensor_count = d->has_body_count = 1;
  d->sensor_count = info.sensors;
  d->body_count = info.bodies;

  if (!(m->has_no_sensors && m->no_sensors)) {
    w->sensors = mem_alloc(DESCRIBE_MAX_SENSORS * sizeof(*w->sensors));
    int more = 0;
    int n = w->sensors ? env_list_sensors(e, m->has_sensors_after ? m->sensors_after : 0,
                                          w->sinfo, DESCRIBE_MAX_SENSORS, &more)
                       : ERR_NOMEM;
    if (n < 0) {
      return err_set(msg, ERR_NOMEM, "out of memory listing the sensors");
    }
    for (int i = 0; i < n; i++) {
      sensor_to(&w->sinfo[i], &w->sensors[i]);
      w->sensor_ptrs[i] = &w->sensors[i].msg;
    }
    d->n_sensors = (size_t)n;
    d->sensors = w->sensor_ptrs;
    d->has_more_sensors = 1;
    d->more_sensors = more;
  }
  if (!(m->has_no_bodies && m->no_bodies)) {
    w->binfo = mem_alloc(DESCRIBE_MAX_BODIES * sizeof(*w->binfo));
    w->bodies = mem_alloc(DESCRIBE_MAX_BODIES * sizeof(*w->bodies));
    w->body_ptrs = mem_alloc(DESCRIBE_MAX_BODIES * sizeof(*w->body_ptrs));
    int more = 0;
    int n = w->binfo && w->bodies && w->body_ptrs
                ? env_list_bodies(e, m->has_bodies_after ? m->bodies_after : 0, w->binfo,
                                  DESCRIBE_MAX_BODIES, &more)
                : ERR_NOMEM;
    if (n < 0) {
      return err_set(msg, ERR_NOMEM, "out of memory listing the bodies");
    }
    for (int i = 0; i < n; i++) {
      body_msg_t* b = &w->bodies[i];
      sensim__v1__body_description__init(&b->msg);
      b->msg.has_id = 1;
      b->msg.id = w->binfo[i].id;
      b->msg.name = (char*)w->binfo[i].name;
      pose_to(&w->binfo[i].pose, &b->pose);
      b->msg.pose = &b->pose.pose;
      w->body_ptrs[i] = &b->msg;
    }
    d->n_bodies = (size_t)n;
    d->bodies = w->body_ptrs;
    d->has_more_bodies = 1;
    d->more_bodies = more;
  }
  reply->body_case = SENSIM__V1__ENVELOPE__BODY_DESCRIPTION;
  reply->description = d;
  return 0;
}


void wire_describe_free(wire_description_t* w) {
  if (!w) {
    return;
  }
  mem_free(w->sensors);
  mem_free(w->binfo);
  mem_free(w->bodies);
  mem_free(w->body_ptrs);
  mem_free(w);
}
