// SPDX-License-Identifier: MIT
// describe.c: Describe: the sensors and bodies of the connection's environment, every page
// asked for and joined into one description in view memory.
#include <string.h>

#include "internal.h"

// What the callbacks of the pages fill.
typedef struct describe_ctx {
  sensim_client_t* cli;
  sensim_description_t* d;
  uint32_t sensor_cap, body_cap;
  uint32_t last_sensor, last_body;  // the last ids received: the next page starts above them
} describe_ctx_t;


static void pose_from(const sensim_v1_Pose* p, bool has, sensim_pose_t* out) {
  *out = sensim_pose_identity();
  if (!has) {
    return;
  }
  if (p->has_position) {
    out->position[0] = p->position.x;
    out->position[1] = p->position.y;
    out->position[2] = p->position.z;
  }
  if (p->has_orientation) {
    out->orientation[0] = p->orientation.x;
    out->orientation[1] = p->orientation.y;
    out->orientation[2] = p->orientation.z;
    out->orientation[3] = p->orientation.w;
  }
}


static bool decode_sensor(pb_istream_t* s, const pb_field_t* f, void** arg) {
  (void)f;
  describe_ctx_t* ctx = *arg;
  sensim_description_t* d = ctx->d;
  sensim_v1_SensorDescription m;
  memset(&m, 0, sizeof(m));
  if (!pb_decode(s, sensim_v1_SensorDescription_fields, &m)) {
    return false;
  }
  // in increasing id order above the last one received (Describe.sensors_after): so that every
  // page moves on and the pages end
  if (m.id <= ctx->last_sensor) {
    PB_RETURN_ERROR(s, "sensors not in increasing id order");
  }
  sensim_sensor_description_t* v =
      sensim_arena_grow(ctx->cli, d->sensors, d->nsensors, &ctx->sensor_cap, sizeof(*v));
  char* name = sensim_arena_strndup(ctx->cli, m.name, strlen(m.name));
  char* pattern = sensim_arena_strndup(ctx->cli, m.lidar.pattern, strlen(m.lidar.pattern));
  sensim_point_field_t* fields = m.lidar.fields_count
      ? sensim_arena_alloc(ctx->cli, m.lidar.fields_count * sizeof(*fields)) : NULL;
  if (!v || !name || !pattern || (m.lidar.fields_count && !fields)) {
    PB_RETURN_ERROR(s, "out of memory");
  }
  sensim_sensor_description_t* e = &v[d->nsensors++];
  memset(e, 0, sizeof(*e));
  e->id = m.id;
  e->kind = m.kind >= sensim_v1_SensorKind_SENSOR_KIND_LIDAR &&
                    m.kind <= sensim_v1_SensorKind_SENSOR_KIND_CONE
                ? (sensim_sensor_kind_t)m.kind
                : SENSIM_SENSOR_UNSPECIFIED;
  e->name = name;
  e->body_id = m.body_id;
  pose_from(&m.mount, m.has_mount, &e->mount);
  e->joint_id = m.joint_id;
  for (pb_size_t i = 0; i < m.lidar.fields_count; i++) {
    const sensim_v1_PointField* w = &m.lidar.fields[i];
    char* fname = sensim_arena_strndup(ctx->cli, w->name, strlen(w->name));
    if (!fname) {
      PB_RETURN_ERROR(s, "out of memory");
    }
    fields[i] = (sensim_point_field_t){.name = fname, .offset = w->offset,
                                       .datatype = (sensim_datatype_t)w->datatype,
                                       .count = w->count};
  }
  e->nfields = m.lidar.fields_count;
  e->fields = fields;
  e->point_step = m.lidar.point_step;
  e->frame = (sensim_output_frame_t)m.lidar.frame;
  e->layout = (sensim_layout_t)m.lidar.layout;
  e->pattern = pattern;
  d->sensors = v;
  ctx->last_sensor = m.id;
  return true;
}


static bool decode_body(pb_istream_t* s, const pb_field_t* f, void** arg) {
  (void)f;
  describe_ctx_t* ctx = *arg;
  sensim_description_t* d = ctx->d;
  sensim_v1_BodyDescription m;
  memset(&m, 0, sizeof(m));
  if (!pb_decode(s, sensim_v1_BodyDescription_fields, &m)) {
    return false;
  }
  if (m.id <= ctx->last_body) {
    PB_RETURN_ERROR(s, "bodies not in increasing id order");
  }
  sensim_body_description_t* v =
      sensim_arena_grow(ctx->cli, d->bodies, d->nbodies, &ctx->body_cap, sizeof(*v));
  char* name = sensim_arena_strndup(ctx->cli, m.name, strlen(m.name));
  if (!v || !name) {
    PB_RETURN_ERROR(s, "out of memory");
  }
  sensim_body_description_t* e = &v[d->nbodies++];
  e->id = m.id;
  e->name = name;
  pose_from(&m.pose, m.has_pose, &e->pose);
  d->bodies = v;
  ctx->last_body = m.id;
  return true;
}


void sensim_describe_select(sensim_v1_Description* m, void* arg) {
  describe_ctx_t* ctx = arg;
  if (!ctx) {
    return;  // a Description nobody asked for: decoded without its lists
  }
  m->sensors.funcs.decode = decode_sensor;
  m->sensors.arg = ctx;
  m->bodies.funcs.decode = decode_body;
  m->bodies.arg = ctx;
}


sensim_status_t sensim_describe(sensim_client_t* cli, const sensim_description_t** out) {
  if (!cli || !out) {
    return cli ? sensim_cli_fail(cli, SENSIM_INVALID_ARGUMENT, "out: NULL")
               : SENSIM_INVALID_ARGUMENT;
  }
  *out = NULL;
  sensim_views_reset(cli);
  sensim_description_t* d = sensim_arena_alloc(cli, sizeof(*d));
  if (!d) {
    return sensim_cli_fail(cli, SENSIM_ENOMEM, "out of memory for the description");
  }
  memset(d, 0, sizeof(*d));
  describe_ctx_t ctx = {.cli = cli, .d = d};
  bool want_sensors = true, want_bodies = true;
  while (want_sensors || want_bodies) {
    sensim_v1_Describe* w = &sensim_begin(cli, sensim_v1_Envelope_describe_tag)->body.describe;
    w->has_sensors_after = w->has_bodies_after = w->has_no_sensors = w->has_no_bodies = true;
    w->sensors_after = ctx.last_sensor;
    w->bodies_after = ctx.last_body;
    w->no_sensors = !want_sensors;
    w->no_bodies = !want_bodies;
    uint64_t id;
    slot_t* s = NULL;
    sensim_status_t st = sensim_send(cli, SLOT_INFO, &id);
    if (st == SENSIM_OK) {
      st = sensim_wait_slot(cli, id, -1, SLOT_INFO, &s);
    }
    if (st != SENSIM_OK) {
      return st;
    }
    uint32_t nsensors = d->nsensors, nbodies = d->nbodies;
    cli->dec = &ctx;
    cli->dec_body = sensim_v1_Envelope_description_tag;
    st = sensim_decode_reply(cli, s->frames.head, sensim_v1_Envelope_description_tag);
    cli->dec = NULL;
    cli->dec_body = 0;
    sensim_slot_free(cli, s, false);
    if (st != SENSIM_OK) {
      return st;
    }
    const sensim_v1_Description* m = &cli->rx.body.description;
    if (!d->environment) {
      d->environment = sensim_arena_strndup(cli, m->environment, strlen(m->environment));
      if (!d->environment) {
        return sensim_cli_fail(cli, SENSIM_ENOMEM, "out of memory for the description");
      }
      d->has_time = m->has_time;
      d->time = m->time;
      d->steps = m->steps;
    }
    // a next page only when this one moved on (a daemon that says "more" with an empty
    // page would otherwise be asked forever; one that sends ids again is refused above)
    want_sensors = want_sensors && m->more_sensors && d->nsensors > nsensors;
    want_bodies = want_bodies && m->more_bodies && d->nbodies > nbodies;
  }
  *out = d;
  return SENSIM_OK;
}
