// SPDX-License-Identifier: MIT
// info.c: GetInfo: the daemon's state, its limits, its environments and subscriptions, and the
// counters, read generically by field number so that counters newer than this client are kept.
#include <string.h>

#include "internal.h"

// Names of the counter fields this client knows (sensim.v1.Counters), by field number.
static const char* const kCounterNames[] = {
    [SENSIM_COUNTER_FRAMES_IN] = "frames_in",
    [SENSIM_COUNTER_FRAMES_OUT] = "frames_out",
    [SENSIM_COUNTER_BYTES_IN] = "bytes_in",
    [SENSIM_COUNTER_BYTES_OUT] = "bytes_out",
    [SENSIM_COUNTER_REQUESTS_FAILED] = "requests_failed",
    [SENSIM_COUNTER_CONNECTIONS_TOTAL] = "connections_total",
    [SENSIM_COUNTER_CONNECTIONS_REJECTED] = "connections_rejected",
    [SENSIM_COUNTER_FRAMES_REJECTED] = "frames_rejected",
    [SENSIM_COUNTER_STEPS] = "steps",
    [SENSIM_COUNTER_RAYS_TRACED] = "rays_traced",
    [SENSIM_COUNTER_MESH_BUILDS] = "mesh_builds",
    [SENSIM_COUNTER_INSTANCE_UPDATES] = "instance_updates",
    [SENSIM_COUNTER_SCENE_COMMITS] = "scene_commits",
    [SENSIM_COUNTER_BACKEND_ERRORS] = "backend_errors",
    [SENSIM_COUNTER_BACKEND_BYTES] = "backend_bytes",
    [SENSIM_COUNTER_FRAMES_DROPPED] = "frames_dropped",
    [SENSIM_COUNTER_HELD_BYTES] = "held_bytes",
    [SENSIM_COUNTER_CONNECTIONS_TIMED_OUT] = "connections_timed_out",
    [SENSIM_COUNTER_REQUESTS_TIMED_OUT] = "requests_timed_out",
    [SENSIM_COUNTER_BYTES_DROPPED] = "bytes_dropped",
    [SENSIM_COUNTER_SUBSCRIBERS_CLOSED] = "subscribers_closed",
    [SENSIM_COUNTER_RAYS_CULLED] = "rays_culled",
    [SENSIM_COUNTER_RAYS_INVALID] = "rays_invalid",
};


const char* sensim_counter_name(unsigned field) {
  return field < sizeof(kCounterNames) / sizeof(kCounterNames[0]) ? kCounterNames[field] : NULL;
}


void sensim_limits_from(const sensim_v1_Limits* m, sensim_limits_t* out) {
  out->max_frame_bytes = m->max_frame_bytes;
  out->max_clients = m->max_clients;
  out->max_environments = m->max_environments;
  out->max_mesh_vertices = m->max_mesh_vertices;
  out->max_mesh_triangles = m->max_mesh_triangles;
  out->max_geometries = m->max_geometries;
  out->max_materials = m->max_materials;
  out->max_bodies = m->max_bodies;
  out->max_objects = m->max_objects;
  out->max_joints = m->max_joints;
  out->max_sensors = m->max_sensors;
  out->max_rays_per_step = m->max_rays_per_step;
  out->max_raycast_rays = m->max_raycast_rays;
  out->max_queue_bytes = m->max_queue_bytes;
  out->max_scene_bytes = m->max_scene_bytes;
  out->max_held_bytes = m->max_held_bytes;
  out->max_name_bytes = m->max_name_bytes;
  out->handshake_timeout_ms = m->handshake_timeout_ms;
  out->idle_timeout_ms = m->idle_timeout_ms;
  out->io_timeout_ms = m->io_timeout_ms;
  out->max_request_ms = m->max_request_ms;
  out->max_hello_bytes = m->max_hello_bytes;
  out->subscriber_max_bytes = m->subscriber_max_bytes;
  out->subscriber_soft_bytes = m->subscriber_soft_bytes;
  out->subscriber_soft_ms = m->subscriber_soft_ms;
}


// What the callbacks of one Info fill.
typedef struct info_ctx {
  sensim_client_t* cli;
  sensim_info_t* info;
  sensim_counters_t counters;       // of the entry being decoded
  uint32_t env_cap, sub_cap;
  char* str[3];                     // the strings of the subscriber being decoded
} info_ctx_t;


// Decode callback of a Counters message: every varint field by its number.
static bool decode_counters(pb_istream_t* s, const pb_field_t* f, void** arg) {
  (void)f;
  sensim_counters_t* c = *arg;
  memset(c, 0, sizeof(*c));
  for (;;) {
    pb_wire_type_t wt;
    uint32_t tag;
    bool eof;
    if (!pb_decode_tag(s, &wt, &tag, &eof)) {
      return eof;
    }
    if (wt == PB_WT_VARINT && tag < SENSIM_COUNTERS_MAX) {
      if (!pb_decode_varint(s, &c->value[tag])) {
        return false;
      }
      c->present |= (uint64_t)1 << tag;
    } else if (!pb_skip_field(s, wt)) {
      return false;
    }
  }
}


// Decode callback of a string into view memory; arg points at the char* to set.
static bool decode_string(pb_istream_t* s, const pb_field_t* f, void** arg) {
  (void)f;
  char** dst = *arg;
  const uint8_t* p;
  size_t n;
  if (!sensim_wire_view(s, &p, &n)) {
    return false;
  }
  *dst = sensim_arena_strndup(sensim_wire_reader(s)->cli, (const char*)p, n);
  return *dst != NULL;
}


static bool decode_environment(pb_istream_t* s, const pb_field_t* f, void** arg) {
  (void)f;
  info_ctx_t* ctx = *arg;
  sensim_info_t* info = ctx->info;
  sensim_v1_EnvironmentInfo m;
  memset(&m, 0, sizeof(m));
  m.counters.funcs.decode = decode_counters;
  m.counters.arg = &ctx->counters;
  memset(&ctx->counters, 0, sizeof(ctx->counters));
  if (!pb_decode(s, sensim_v1_EnvironmentInfo_fields, &m)) {
    return false;
  }
  sensim_environment_info_t* v =
      sensim_arena_grow(ctx->cli, info->environments, info->nenvironments,
                        &ctx->env_cap, sizeof(*v));
  char* name = sensim_arena_strndup(ctx->cli, m.name, strlen(m.name));
  if (!v || !name) {
    PB_RETURN_ERROR(s, "out of memory");
  }
  sensim_environment_info_t* e = &v[info->nenvironments++];
  memset(e, 0, sizeof(*e));
  e->name = name;
  e->clients = m.clients;
  e->geometries = m.geometries;
  e->materials = m.materials;
  e->bodies = m.bodies;
  e->objects = m.objects;
  e->joints = m.joints;
  e->sensors = m.sensors;
  e->has_time = m.has_time;
  e->time = m.time;
  e->steps = m.steps;
  e->counters = ctx->counters;
  e->retention = (sensim_retention_t)m.retention;
  info->environments = v;
  return true;
}


static bool decode_subscriber(pb_istream_t* s, const pb_field_t* f, void** arg) {
  (void)f;
  info_ctx_t* ctx = *arg;
  sensim_info_t* info = ctx->info;
  sensim_v1_SubscriberInfo m;
  memset(&m, 0, sizeof(m));
  pb_callback_t* cbs[3] = {&m.environment, &m.closed_reason, &m.peer};
  for (int i = 0; i < 3; i++) {
    ctx->str[i] = NULL;
    cbs[i]->funcs.decode = decode_string;
    cbs[i]->arg = &ctx->str[i];
  }
  if (!pb_decode(s, sensim_v1_SubscriberInfo_fields, &m)) {
    return false;
  }
  sensim_subscriber_info_t* v =
      sensim_arena_grow(ctx->cli, info->subscribers, info->nsubscribers,
                        &ctx->sub_cap, sizeof(*v));
  if (!v) {
    PB_RETURN_ERROR(s, "out of memory");
  }
  sensim_subscriber_info_t* e = &v[info->nsubscribers++];
  memset(e, 0, sizeof(*e));
  e->session_id = m.session_id;
  e->environment = ctx->str[0] ? ctx->str[0] : "";
  e->sensor_id = m.sensor_id;
  e->encoding = (sensim_encoding_t)m.encoding;
  e->precision = m.precision;
  e->queued_bytes = m.queued_bytes;
  e->queued_frames = m.queued_frames;
  e->frames_sent = m.frames_sent;
  e->bytes_sent = m.bytes_sent;
  e->frames_dropped = m.frames_dropped;
  e->bytes_dropped = m.bytes_dropped;
  e->closed_reason = ctx->str[1] ? ctx->str[1] : "";
  e->peer = ctx->str[2] ? ctx->str[2] : "";
  info->subscribers = v;
  return true;
}


void sensim_info_select(sensim_v1_Info* info, void* arg) {
  info_ctx_t* ctx = arg;
  if (!ctx) {
    return;  // an Info nobody asked for (a stray reply): decoded without its lists
  }
  info->environments.funcs.decode = decode_environment;
  info->environments.arg = ctx;
  info->subscribers.funcs.decode = decode_subscriber;
  info->subscribers.arg = ctx;
  info->counters.funcs.decode = decode_counters;
  info->counters.arg = &ctx->info->counters;
}


sensim_status_t sensim_get_info(sensim_client_t* cli, const sensim_info_t** out) {
  if (!cli || !out) {
    return cli ? sensim_cli_fail(cli, SENSIM_INVALID_ARGUMENT, "out: NULL")
               : SENSIM_INVALID_ARGUMENT;
  }
  *out = NULL;
  sensim_views_reset(cli);
  sensim_begin(cli, sensim_v1_Envelope_get_info_tag);
  uint64_t id;
  slot_t* s = NULL;
  sensim_status_t st = sensim_send(cli, SLOT_INFO, &id);
  if (st == SENSIM_OK) {
    st = sensim_wait_slot(cli, id, -1, SLOT_INFO, &s);
  }
  if (st != SENSIM_OK) {
    return st;
  }

  // decode with the lists and counters into view memory; the strings point into the frame's
  // copy in the arena
  sensim_info_t* info = sensim_arena_alloc(cli, sizeof(*info));
  if (!info) {
    sensim_slot_free(cli, s, false);
    return sensim_cli_fail(cli, SENSIM_ENOMEM, "out of memory for the info");
  }
  memset(info, 0, sizeof(*info));
  info_ctx_t ctx = {.cli = cli, .info = info};
  cli->dec = &ctx;
  cli->dec_body = sensim_v1_Envelope_info_tag;
  st = sensim_decode_reply(cli, s->frames.head, sensim_v1_Envelope_info_tag);
  cli->dec = NULL;
  cli->dec_body = 0;
  sensim_slot_free(cli, s, false);
  if (st != SENSIM_OK) {
    return st;
  }
  const sensim_v1_Info* m = &cli->rx.body.info;
  info->server_version = sensim_arena_strndup(cli, m->server_version, strlen(m->server_version));
  if (!info->server_version) {
    return sensim_cli_fail(cli, SENSIM_ENOMEM, "out of memory for the info");
  }
  info->protocol_version = m->protocol_version;
  info->uptime_s = m->uptime_s;
  info->connections = m->connections;
  info->threads = m->threads;
  if (m->has_limits) {
    sensim_limits_from(&m->limits, &info->limits);
  }
  *out = info;
  return SENSIM_OK;
}
