// SPDX-License-Identifier: MIT
// test_client_session.c: the C client's connection against the real sensimd: handshake and
// options, token and client limits, ping, info and counters, the status table, waits, the
// in-flight limit, nonblocking sends in a poll loop, and environments kept across connections.
#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "support.h"


TEST(session_connect_reports_the_handshake) {
  td_daemon_t d;
  ASSERT_OK(td_start(&d, (const char* const[]){"--threads", "2", NULL}));
  sensim_client_t* cli = td_connect(&d, "handshake");
  ASSERT_TRUE(cli != NULL);
  const sensim_session_t* s = sensim_client_session(cli);
  ASSERT_EQ(s->protocol_version, SENSIM_PROTOCOL_VERSION);
  ASSERT_TRUE(s->server_version[0] != '\0');
  ASSERT_STREQ(s->server_version, sensim_client_server_version(cli));
  ASSERT_STREQ(s->environment, "handshake");
  ASSERT_TRUE(s->environment_created);
  ASSERT_EQ(s->threads, 2);
  ASSERT_TRUE(s->session_id > 0);
  ASSERT_EQ(s->limits.max_frame_bytes, 64u << 20);  // the daemon's default
  ASSERT_EQ(s->limits.max_clients, 64);
  ASSERT_EQ(s->limits.max_name_bytes, 256);
  ASSERT_TRUE(sensim_client_fd(cli) >= 0);
  ASSERT_TRUE(!sensim_client_want_write(cli));

  // a second client joins it
  sensim_client_t* other = td_connect(&d, "handshake");
  ASSERT_TRUE(other != NULL);
  ASSERT_TRUE(!sensim_client_session(other)->environment_created);
  ASSERT_TRUE(sensim_client_session(other)->session_id != s->session_id);
  sensim_client_close(other);
  sensim_client_close(cli);
  ASSERT_EQ(td_stop(&d), 0);
  return 0;
}


TEST(session_connect_refused_and_unresolvable) {
  // a port nothing listens on: a socket bound to it, not listening, open while the client
  // tries it (a port released, as a stopped daemon's, could be given meanwhile to a daemon of
  // a test running in parallel)
  int held = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_TRUE(held >= 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t alen = sizeof(a);
  ASSERT_EQ(bind(held, (struct sockaddr*)&a, sizeof(a)), 0);
  ASSERT_EQ(getsockname(held, (struct sockaddr*)&a, &alen), 0);
  sensim_client_t* cli = NULL;
  ASSERT_STATUS(cli, sensim_client_connect("127.0.0.1", ntohs(a.sin_port), NULL, &cli),
                SENSIM_ECONNECT, "refused");
  close(held);
  ASSERT_TRUE(cli != NULL);
  ASSERT_TRUE(strstr(sensim_client_last_error(cli), "127.0.0.1") != NULL);
  ASSERT_EQ(sensim_client_fd(cli), -1);
  ASSERT_STREQ(sensim_client_server_version(cli), "");
  // every call on the closed handle says so (waiting for pushed data left the error empty)
  ASSERT_STATUS(cli, sensim_ping(cli, NULL, 0, NULL), SENSIM_ECONNECT, "connection is closed");
  const sensim_sensor_data_t* data;
  ASSERT_STATUS(cli, sensim_next_sensor_data(cli, 0, &data), SENSIM_ECONNECT,
                "connection is closed");
  sensim_client_close(cli);

  cli = NULL;
  ASSERT_STATUS(cli, sensim_client_connect("no-such-host.invalid", 7700, NULL, &cli),
                SENSIM_ECONNECT, "resolve");
  sensim_client_close(cli);
  ASSERT_EQ(sensim_client_connect("127.0.0.1", 7700, NULL, NULL), SENSIM_INVALID_ARGUMENT);
  return 0;
}


TEST(session_connect_refuses_bad_options) {
  td_daemon_t d;
  ASSERT_OK(td_start(&d, NULL));
  sensim_options_t o;
  char longname[300];
  memset(longname, 'a', sizeof(longname) - 1);
  longname[sizeof(longname) - 1] = '\0';
  for (int k = 0; k < 7; k++) {
    sensim_options_init(&o);
    const char* field = NULL;
    switch (k) {
      case 0:
        o.struct_size = 0;
        field = "options.struct_size";
        break;
      case 1:
        o.role = (sensim_role_t)7;
        field = "options.role";
        break;
      case 2:
        o.retention = (sensim_retention_t)9;
        field = "options.retention";
        break;
      case 3:
        o.environment = longname;
        field = "options.environment";
        break;
      case 4:
        o.client_name = longname;
        field = "options.client_name";
        break;
      case 5:
        o.token = longname;
        field = "options.token";
        break;
      case 6:
        o.max_frame_bytes = 10;
        field = "options.max_frame_bytes";
        break;
    }
    sensim_client_t* cli = NULL;
    ASSERT_STATUS(cli, sensim_client_connect("127.0.0.1", (uint16_t)d.port, &o, &cli),
                  SENSIM_INVALID_ARGUMENT, field);
    sensim_client_close(cli);
  }

  // the daemon refuses a name the client can send: its own message, the connection closed
  sensim_options_init(&o);
  o.environment = "bad\x01name";
  sensim_client_t* cli = NULL;
  ASSERT_STATUS(cli, sensim_client_connect("127.0.0.1", (uint16_t)d.port, &o, &cli),
                SENSIM_INVALID_ARGUMENT, "environment");
  ASSERT_EQ(sensim_client_fd(cli), -1);
  ASSERT_STATUS(cli, sensim_ping(cli, NULL, 0, NULL), SENSIM_INVALID_ARGUMENT, NULL);
  sensim_client_close(cli);
  ASSERT_EQ(td_stop(&d), 0);
  return 0;
}


TEST(session_token_and_client_limit) {
  td_daemon_t d;
  ASSERT_OK(td_start(&d, (const char* const[]){"--token", "s3cret", "--max-clients", "1", NULL}));
  sensim_options_t o;
  sensim_options_init(&o);
  o.token = "wrong";
  sensim_client_t* cli = NULL;
  ASSERT_STATUS(cli, sensim_client_connect(NULL, (uint16_t)d.port, &o, &cli),
                SENSIM_UNAUTHENTICATED, "token");
  ASSERT_EQ(sensim_client_fd(cli), -1);
  sensim_client_close(cli);

  o.token = "s3cret";
  sensim_client_t* ok = td_connect_opts(&d, &o);
  ASSERT_TRUE(ok != NULL);
  cli = NULL;
  ASSERT_STATUS(cli, sensim_client_connect(NULL, (uint16_t)d.port, &o, &cli),
                SENSIM_RESOURCE_EXHAUSTED, "max_clients");
  sensim_client_close(cli);
  sensim_client_close(ok);
  ASSERT_EQ(td_stop(&d), 0);
  return 0;
}


TEST(session_ping_echoes_its_payload) {
  td_daemon_t d;
  ASSERT_OK(td_start(&d, NULL));
  sensim_client_t* cli = td_connect(&d, "ping");
  ASSERT_TRUE(cli != NULL);
  uint8_t payload[256];
  for (int i = 0; i < 256; i++) {
    payload[i] = (uint8_t)(i * 13 + 5);
  }
  uint64_t t1 = 0, t2 = 0;
  ASSERT_OK_ST(cli, sensim_ping(cli, payload, sizeof(payload), &t1));
  ASSERT_OK_ST(cli, sensim_ping(cli, NULL, 0, &t2));
  ASSERT_TRUE(t1 > 0 && t2 >= t1);
  ASSERT_OK_ST(cli, sensim_ping(cli, payload, 1, NULL));
  ASSERT_STATUS(cli, sensim_ping(cli, payload, 257, NULL), SENSIM_INVALID_ARGUMENT, "len");
  ASSERT_STATUS(cli, sensim_ping(cli, NULL, 3, NULL), SENSIM_INVALID_ARGUMENT, "payload");
  ASSERT_EQ(sensim_ping(NULL, NULL, 0, NULL), SENSIM_INVALID_ARGUMENT);
  ASSERT_OK_ST(cli, sensim_ping(cli, NULL, 0, NULL));  // refusals changed nothing
  sensim_client_close(cli);
  ASSERT_EQ(td_stop(&d), 0);
  return 0;
}


TEST(session_info_reports_environments_counters_and_subscribers) {
  td_daemon_t d;
  ASSERT_OK(td_start(&d, NULL));
  sensim_client_t* cli = td_connect(&d, "info_env");
  ASSERT_TRUE(cli != NULL);
  ASSERT_OK_ST(cli, td_sphere(cli, 1, 1.0, 5, 0, 0, 0));
  sensim_sensor_t sensor;
  sensim_sensor_init(&sensor);
  sensor.id = 7;
  sensim_cone_config_t cone;
  sensim_cone_config_init(&cone);
  ASSERT_OK_ST(cli, sensim_create_cone(cli, &sensor, &cone));
  sensim_subscription_t sub;
  sensim_subscription_init(&sub);
  sub.sensor_id = 7;
  ASSERT_OK_ST(cli, sensim_subscribe(cli, &sub));
  sensim_state_t state;
  sensim_state_init(&state);
  sensim_step_t step;
  sensim_step_init(&step);
  const sensim_step_result_t* r;
  for (int k = 0; k < 3; k++) {
    state.time = step.time = 0.01 * k;
    ASSERT_OK_ST(cli, sensim_update_and_step(cli, &state, &step, &r));
  }

  const sensim_info_t* info = NULL;
  ASSERT_OK_ST(cli, sensim_get_info(cli, &info));
  ASSERT_STREQ(info->server_version, sensim_client_server_version(cli));
  ASSERT_EQ(info->protocol_version, 1);
  ASSERT_TRUE(info->uptime_s > 0);
  ASSERT_EQ(info->connections, 1);
  ASSERT_EQ(info->limits.max_frame_bytes, sensim_client_session(cli)->limits.max_frame_bytes);
  ASSERT_EQ(info->nenvironments, 1);
  const sensim_environment_info_t* e = &info->environments[0];
  ASSERT_STREQ(e->name, "info_env");
  ASSERT_EQ(e->clients, 1);
  ASSERT_EQ(e->geometries, 1);
  ASSERT_EQ(e->objects, 1);
  ASSERT_EQ(e->sensors, 1);
  ASSERT_EQ(e->steps, 3);
  ASSERT_TRUE(e->has_time);
  ASSERT_NEAR(e->time, 0.02, 0);
  ASSERT_EQ(e->counters.value[SENSIM_COUNTER_STEPS], 3);
  ASSERT_TRUE(e->counters.present >> SENSIM_COUNTER_STEPS & 1);

  // daemon totals: every frame this client sent so far (hello, 3 creates, a subscribe, 3 x 2
  // for the steps, this get_info)
  ASSERT_EQ(info->counters.value[SENSIM_COUNTER_STEPS], 3);
  ASSERT_EQ(info->counters.value[SENSIM_COUNTER_FRAMES_IN], 1 + 3 + 1 + 6 + 1);
  ASSERT_EQ(info->counters.value[SENSIM_COUNTER_CONNECTIONS_TOTAL], 1);
  ASSERT_TRUE(info->counters.present >> SENSIM_COUNTER_FRAMES_IN & 1);
  ASSERT_TRUE(!(info->counters.present & 1));  // field 0 does not exist
  ASSERT_EQ(info->nsubscribers, 1);
  ASSERT_EQ(info->subscribers[0].sensor_id, 7);
  ASSERT_STREQ(info->subscribers[0].environment, "info_env");
  ASSERT_EQ(info->subscribers[0].session_id, sensim_client_session(cli)->session_id);
  ASSERT_EQ(info->subscribers[0].encoding, SENSIM_ENCODING_RAW);
  ASSERT_STREQ(info->subscribers[0].closed_reason, "");
  ASSERT_TRUE(strstr(info->subscribers[0].peer, "127.0.0.1") != NULL);

  ASSERT_STATUS(cli, sensim_get_info(cli, NULL), SENSIM_INVALID_ARGUMENT, "out");
  ASSERT_EQ(sensim_get_info(NULL, &info), SENSIM_INVALID_ARGUMENT);
  sensim_client_close(cli);
  ASSERT_EQ(td_stop(&d), 0);
  return 0;
}


TEST(session_counter_names_and_status_table) {
  // every counter of the protocol has its name; unknown fields have none
  static const char* const names[] = {"frames_in", "frames_out", "bytes_in", "bytes_out",
                                      "requests_failed", "connections_total",
                                      "connections_rejected", "frames_rejected", "steps",
                                      "rays_traced", "mesh_builds", "instance_updates",
                                      "scene_commits", "backend_errors", "backend_bytes",
                                      "frames_dropped", "held_bytes", "connections_timed_out",
                                      "requests_timed_out", "bytes_dropped",
                                      "subscribers_closed", "rays_culled", "rays_invalid"};
  for (unsigned f = 1; f <= 23; f++) {
    ASSERT_TRUE(sensim_counter_name(f) != NULL);
    ASSERT_STREQ(sensim_counter_name(f), names[f - 1]);
  }
  ASSERT_TRUE(sensim_counter_name(0) == NULL);
  ASSERT_TRUE(sensim_counter_name(40) == NULL);
  ASSERT_TRUE(sensim_counter_name(1000) == NULL);

  // the table: names and descriptions of every status, the wire's codes
  static const struct {
    sensim_status_t st;
    int value;
    const char* name;
  } k[] = {{SENSIM_OK, 0, "OK"},
           {SENSIM_INVALID_ARGUMENT, 3, "INVALID_ARGUMENT"},
           {SENSIM_DEADLINE_EXCEEDED, 4, "DEADLINE_EXCEEDED"},
           {SENSIM_NOT_FOUND, 5, "NOT_FOUND"},
           {SENSIM_ALREADY_EXISTS, 6, "ALREADY_EXISTS"},
           {SENSIM_RESOURCE_EXHAUSTED, 8, "RESOURCE_EXHAUSTED"},
           {SENSIM_FAILED_PRECONDITION, 9, "FAILED_PRECONDITION"},
           {SENSIM_UNIMPLEMENTED, 12, "UNIMPLEMENTED"},
           {SENSIM_INTERNAL, 13, "INTERNAL"},
           {SENSIM_UNAUTHENTICATED, 16, "UNAUTHENTICATED"},
           {SENSIM_EIO, 101, "EIO"},
           {SENSIM_ECLOSED, 102, "ECLOSED"},
           {SENSIM_ETIMEDOUT, 103, "ETIMEDOUT"},
           {SENSIM_EPROTO, 104, "EPROTO"},
           {SENSIM_ENOMEM, 105, "ENOMEM"},
           {SENSIM_ECONNECT, 106, "ECONNECT"},
           {SENSIM_EAGAIN, 107, "EAGAIN"},
           {SENSIM_EUNKNOWN, 108, "EUNKNOWN"}};
  for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++) {
    ASSERT_EQ((int)k[i].st, k[i].value);
    ASSERT_STREQ(sensim_status_name(k[i].st), k[i].name);
    ASSERT_TRUE(strcmp(sensim_status_str(k[i].st), "unknown status") != 0);
    for (size_t j = 0; j < i; j++) {
      ASSERT_TRUE(strcmp(sensim_status_str(k[i].st), sensim_status_str(k[j].st)) != 0);
    }
  }
  ASSERT_STREQ(sensim_status_name((sensim_status_t)2), "UNKNOWN");
  ASSERT_STREQ(sensim_status_str((sensim_status_t)999), "unknown status");
  ASSERT_STREQ(sensim_client_last_error(NULL), "no client handle");
  sensim_client_close(NULL);
  // the init functions do nothing with NULL (they wrote the defaults through it)
  sensim_options_init_sized(NULL, sizeof(sensim_options_t));
  sensim_mesh_init_sized(NULL, sizeof(sensim_mesh_t));
  sensim_lidar_config_init_sized(NULL, sizeof(sensim_lidar_config_t), SENSIM_PATTERN_FLASH);
  sensim_state_init_sized(NULL, sizeof(sensim_state_t));
  sensim_step_init_sized(NULL, sizeof(sensim_step_t));
  sensim_raycast_init_sized(NULL, sizeof(sensim_raycast_t));
  sensim_subscription_init_sized(NULL, sizeof(sensim_subscription_t));
  return 0;
}


TEST(session_observer_may_read_only) {
  td_daemon_t d;
  ASSERT_OK(td_start(&d, NULL));
  sensim_client_t* ctl = td_connect(&d, "roles");
  ASSERT_TRUE(ctl != NULL);
  sensim_options_t o;
  sensim_options_init(&o);
  o.environment = "roles";
  o.role = SENSIM_ROLE_OBSERVER;
  sensim_client_t* obs = td_connect_opts(&d, &o);
  ASSERT_TRUE(obs != NULL);
  sensim_body_t body;
  sensim_body_init(&body);
  body.id = 1;
  ASSERT_STATUS(obs, sensim_create_body(obs, &body), SENSIM_FAILED_PRECONDITION, "observer");
  ASSERT_OK_ST(ctl, sensim_create_body(ctl, &body));
  const sensim_info_t* info;
  ASSERT_OK_ST(obs, sensim_get_info(obs, &info));  // reading is allowed
  ASSERT_EQ(info->environments[0].bodies, 1);
  sensim_client_close(obs);
  sensim_client_close(ctl);
  ASSERT_EQ(td_stop(&d), 0);
  return 0;
}


// Describe: an observer lists what the controller made; pages joined (1100 bodies: two
// pages of the daemon's 1024). Truth: what was sent, and the velodyne_pointcloud layout.
TEST(session_observer_describes_sensors_and_bodies) {
  td_daemon_t d;
  ASSERT_OK(td_start(&d, NULL));
  sensim_client_t* ctl = td_connect(&d, "described");
  ASSERT_TRUE(ctl != NULL);
  sensim_options_t o;
  sensim_options_init(&o);
  o.environment = "described";
  o.role = SENSIM_ROLE_OBSERVER;
  sensim_client_t* obs = td_connect_opts(&d, &o);
  ASSERT_TRUE(obs != NULL);
  sensim_body_t body;
  sensim_body_init(&body);
  for (uint32_t i = 1; i <= 1100; i++) {
    body.id = 2 * i;
    body.name = i == 1 ? "cart" : NULL;
    body.pose.position[0] = i;
    ASSERT_OK_ST(ctl, sensim_create_body(ctl, &body));
  }
  sensim_sensor_t s;
  sensim_sensor_init(&s);
  s.id = 5;
  s.name = "roof";
  s.body_id = 2;
  s.mount.position[2] = 1.5;
  s.mount.orientation[2] = 2;  // not unit: described normalised
  s.mount.orientation[3] = 2;
  sensim_lidar_config_t c;
  sensim_lidar_config_init(&c, SENSIM_PATTERN_VLP16);
  c.layout = SENSIM_LAYOUT_VELODYNE;
  ASSERT_OK_ST(ctl, sensim_create_lidar(ctl, &s, &c));
  sensim_sensor_init(&s);
  s.id = 3;
  sensim_cone_config_t cone;
  sensim_cone_config_init(&cone);
  ASSERT_OK_ST(ctl, sensim_create_cone(ctl, &s, &cone));
  double pose[7] = {4, -1, 0.5, 0, 0, 0, 1};
  uint32_t id = 2;
  sensim_state_t state;
  sensim_state_init(&state);
  state.time = 0.25;
  state.nbodies = 1;
  state.body_ids = &id;
  state.body_poses = pose;
  ASSERT_OK_ST(ctl, sensim_update_state(ctl, &state));

  const sensim_description_t* desc = NULL;
  ASSERT_OK_ST(obs, sensim_describe(obs, &desc));
  ASSERT_STREQ(desc->environment, "described");
  ASSERT_TRUE(desc->has_time);
  ASSERT_NEAR(desc->time, 0.25, 0);
  ASSERT_EQ(desc->nsensors, 2);
  ASSERT_EQ(desc->sensors[0].id, 3);
  ASSERT_EQ(desc->sensors[0].kind, SENSIM_SENSOR_CONE);
  ASSERT_EQ(desc->sensors[0].nfields, 0);
  ASSERT_STREQ(desc->sensors[0].name, "");
  const sensim_sensor_description_t* l = &desc->sensors[1];
  ASSERT_EQ(l->id, 5);
  ASSERT_EQ(l->kind, SENSIM_SENSOR_LIDAR);
  ASSERT_STREQ(l->name, "roof");
  ASSERT_EQ(l->body_id, 2);
  ASSERT_NEAR(l->mount.position[2], 1.5, 0);
  ASSERT_NEAR(l->mount.orientation[2], sqrt(0.5), 1e-15);
  ASSERT_NEAR(l->mount.orientation[3], sqrt(0.5), 1e-15);
  ASSERT_STREQ(l->pattern, "vlp16");
  ASSERT_EQ(l->layout, SENSIM_LAYOUT_VELODYNE);
  ASSERT_EQ(l->frame, SENSIM_FRAME_SENSOR);
  // velodyne_pointcloud: x y z intensity float32, ring uint16 at 16, time float32 at 18
  ASSERT_EQ(l->point_step, 22);
  ASSERT_EQ(l->nfields, 6);
  static const char* const kNames[6] = {"x", "y", "z", "intensity", "ring", "time"};
  static const uint32_t kOffsets[6] = {0, 4, 8, 12, 16, 18};
  for (int i = 0; i < 6; i++) {
    ASSERT_STREQ(l->fields[i].name, kNames[i]);
    ASSERT_EQ(l->fields[i].offset, kOffsets[i]);
    ASSERT_EQ(l->fields[i].count, 1);
  }
  ASSERT_EQ(l->fields[4].datatype, SENSIM_DATATYPE_UINT16);
  ASSERT_EQ(l->fields[5].datatype, SENSIM_DATATYPE_FLOAT32);
  ASSERT_EQ(desc->nbodies, 1100);
  for (uint32_t i = 0; i < 1100; i++) {
    ASSERT_EQ(desc->bodies[i].id, 2 * (i + 1));
    if (i > 0) {
      ASSERT_NEAR(desc->bodies[i].pose.position[0], i + 1, 0);
    }
  }
  ASSERT_STREQ(desc->bodies[0].name, "cart");
  ASSERT_STREQ(desc->bodies[1].name, "");
  for (int k = 0; k < 7; k++) {
    ASSERT_NEAR((&desc->bodies[0].pose.position[0])[k], pose[k], 0);
  }
  ASSERT_STATUS(obs, sensim_describe(obs, NULL), SENSIM_INVALID_ARGUMENT, "out");
  ASSERT_EQ(sensim_describe(NULL, &desc), SENSIM_INVALID_ARGUMENT);
  sensim_client_close(obs);
  sensim_client_close(ctl);
  ASSERT_EQ(td_stop(&d), 0);
  return 0;
}


TEST(session_environment_kept_across_connections) {
  td_daemon_t d;
  ASSERT_OK(td_start(&d, NULL));
  sensim_options_t o;
  sensim_options_init(&o);
  o.environment = "kept";
  o.retention = SENSIM_RETENTION_KEEP;
  sensim_client_t* cli = td_connect_opts(&d, &o);
  ASSERT_TRUE(cli != NULL);
  ASSERT_OK_ST(cli, td_sphere(cli, 1, 1.0, 3, 0, 0, 4));
  sensim_client_close(cli);

  // the sphere is still there for the next client
  cli = td_connect(&d, "kept");
  ASSERT_TRUE(cli != NULL);
  ASSERT_TRUE(!sensim_client_session(cli)->environment_created);
  double o3[3] = {0, 0, 0}, d3[3] = {1, 0, 0};
  sensim_raycast_t rays;
  sensim_raycast_init(&rays);
  rays.nrays = 1;
  rays.origins = o3;
  rays.directions = d3;
  sensim_hit_t hit;
  ASSERT_OK_ST(cli, sensim_raycast(cli, &rays, &hit, NULL));
  ASSERT_EQ(hit.label, 4);
  ASSERT_NEAR(hit.distance, 2.0, 1e-6);

  // released: destroyed when its last client leaves
  ASSERT_OK_ST(cli, sensim_remove(cli, SENSIM_ENTITY_ENVIRONMENT, 0));
  sensim_client_close(cli);
  cli = td_connect(&d, "kept");
  ASSERT_TRUE(cli != NULL);
  ASSERT_TRUE(sensim_client_session(cli)->environment_created);
  sensim_client_close(cli);
  ASSERT_EQ(td_stop(&d), 0);
  return 0;
}


TEST(session_waits_name_their_mistakes) {
  td_daemon_t d;
  ASSERT_OK(td_start(&d, NULL));
  sensim_client_t* cli = td_connect(&d, "waits");
  ASSERT_TRUE(cli != NULL);
  ASSERT_STATUS(cli, sensim_wait(cli, 12345, -1), SENSIM_INVALID_ARGUMENT, "not in flight");
  ASSERT_STATUS(cli, sensim_discard(cli, 12345), SENSIM_INVALID_ARGUMENT, "not in flight");

  // a step is collected by sensim_step_wait, a raycast by sensim_raycast_wait
  sensim_state_t state;
  sensim_state_init(&state);
  uint64_t a, b;
  ASSERT_OK_ST(cli, sensim_update_state_send(cli, &state, &a));
  sensim_step_t step;
  sensim_step_init(&step);
  ASSERT_OK_ST(cli, sensim_step_send(cli, &step, &b));
  ASSERT_TRUE(b == a + 1);
  ASSERT_STATUS(cli, sensim_wait(cli, b, -1), SENSIM_INVALID_ARGUMENT, "sensim_step_wait");
  const sensim_step_result_t* r;
  ASSERT_STATUS(cli, sensim_step_wait(cli, a, -1, &r), SENSIM_INVALID_ARGUMENT, "sensim_wait");
  ASSERT_STATUS(cli, sensim_step_wait(cli, b, -1, NULL), SENSIM_INVALID_ARGUMENT, "out");
  ASSERT_OK_ST(cli, sensim_step_wait(cli, b, -1, &r));  // out of order: the state after
  ASSERT_EQ(r->step, 1);
  ASSERT_OK_ST(cli, sensim_wait(cli, a, -1));
  ASSERT_STATUS(cli, sensim_wait(cli, a, -1), SENSIM_INVALID_ARGUMENT, "not in flight");

  // a discarded request is gone, and its reply does not disturb the next one
  state.time = 1.0;
  ASSERT_OK_ST(cli, sensim_update_state_send(cli, &state, &a));
  ASSERT_OK_ST(cli, sensim_discard(cli, a));
  ASSERT_STATUS(cli, sensim_wait(cli, a, 0), SENSIM_INVALID_ARGUMENT, "not in flight");
  step.time = 1.0;
  ASSERT_OK_ST(cli, sensim_step(cli, &step, &r));
  ASSERT_EQ(r->step, 2);
  ASSERT_EQ(sensim_wait(NULL, 1, 0), SENSIM_INVALID_ARGUMENT);
  ASSERT_EQ(sensim_discard(NULL, 1), SENSIM_INVALID_ARGUMENT);
  ASSERT_EQ(sensim_client_pump(NULL, 0), SENSIM_INVALID_ARGUMENT);
  sensim_client_close(cli);
  ASSERT_EQ(td_stop(&d), 0);
  return 0;
}


TEST(session_wait_with_a_timeout_returns_eagain_and_resumes) {
  td_daemon_t d;
  ASSERT_OK(td_start(&d, NULL));
  sensim_client_t* cli = td_connect(&d, "eagain");
  ASSERT_TRUE(cli != NULL);
  sensim_state_t state;
  sensim_state_init(&state);
  ASSERT_OK_ST(cli, sensim_update_state(cli, &state));

  // the daemon frozen: nothing can come
  kill(d.pid, SIGSTOP);
  sensim_step_t step;
  sensim_step_init(&step);
  uint64_t id;
  ASSERT_OK_ST(cli, sensim_step_send(cli, &step, &id));
  const sensim_step_result_t* r;
  ASSERT_STATUS(cli, sensim_step_wait(cli, id, 0, &r), SENSIM_EAGAIN, "no reply");
  double t0 = td_now_ms();
  ASSERT_STATUS(cli, sensim_step_wait(cli, id, 100, &r), SENSIM_EAGAIN, "no reply");
  ASSERT_TRUE(td_now_ms() - t0 >= 99.0);
  ASSERT_OK_ST(cli, sensim_client_pump(cli, 0));
  ASSERT_TRUE(sensim_client_fd(cli) >= 0);  // still connected

  // thawed: the same wait completes
  kill(d.pid, SIGCONT);
  ASSERT_OK_ST(cli, sensim_step_wait(cli, id, 10000, &r));
  ASSERT_EQ(r->step, 1);
  sensim_client_close(cli);
  ASSERT_EQ(td_stop(&d), 0);
  return 0;
}


TEST(session_in_flight_limit) {
  td_daemon_t d;
  ASSERT_OK(td_start(&d, NULL));
  sensim_client_t* cli = td_connect(&d, "inflight");
  ASSERT_TRUE(cli != NULL);
  static uint64_t ids[4096];
  sensim_state_t state;
  sensim_state_init(&state);
  for (int i = 0; i < 4096; i++) {
    state.time = i;
    ASSERT_OK_ST(cli, sensim_update_state_send(cli, &state, &ids[i]));
  }
  uint64_t extra;
  ASSERT_STATUS(cli, sensim_update_state_send(cli, &state, &extra), SENSIM_RESOURCE_EXHAUSTED,
                "at most 4096 requests in flight");
  for (int i = 0; i < 4096; i++) {
    ASSERT_OK_ST(cli, sensim_wait(cli, ids[i], -1));
  }
  state.time = 5000;
  ASSERT_OK_ST(cli, sensim_update_state(cli, &state));
  sensim_client_close(cli);
  ASSERT_EQ(td_stop(&d), 0);
  return 0;
}


TEST(session_nonblocking_sends_in_a_poll_loop) {
  td_daemon_t d;
  ASSERT_OK(td_start(&d, NULL));
  sensim_options_t o;
  sensim_options_init(&o);
  o.environment = "nonblocking";
  o.nonblocking = true;
  sensim_client_t* cli = td_connect_opts(&d, &o);
  ASSERT_TRUE(cli != NULL);
  ASSERT_OK_ST(cli, td_sphere(cli, 1, 50.0, 0, 0, 0, 9));

  // 400k rays from the centre of a sphere of radius 50: 19 MB that the socket cannot take
  // at once; the rest waits in the handle while the caller polls its descriptor. The daemon
  // is stopped during the send and the client's send buffer kept small, so that the kernel
  // holds only what the two sockets' buffers take (a running daemon, reading as fast as the
  // client writes, could let a loaded machine's send take everything)
  uint32_t n = 400000;
  double* org = calloc(3 * (size_t)n, sizeof(double));
  double* dir = malloc(3 * sizeof(double) * n);
  sensim_hit_t* hits = calloc(n, sizeof(sensim_hit_t));
  ASSERT_TRUE(org && dir && hits);
  for (uint32_t i = 0; i < n; i++) {
    double a = 0.001 * i, e = 1.2 * sin(0.37 * i);
    dir[3 * i] = cos(e) * cos(a);
    dir[3 * i + 1] = cos(e) * sin(a);
    dir[3 * i + 2] = sin(e);
  }
  sensim_raycast_t rays;
  sensim_raycast_init(&rays);
  rays.nrays = n;
  rays.origins = org;
  rays.directions = dir;
  uint64_t id;
  int sndbuf = 65536;
  ASSERT_EQ(setsockopt(sensim_client_fd(cli), SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf), 0);
  ASSERT_EQ(kill(d.pid, SIGSTOP), 0);
  double t0 = td_now_ms();
  sensim_status_t sent = sensim_raycast_send(cli, &rays, hits, &id);
  double took = td_now_ms() - t0;
  int want = sensim_client_want_write(cli);
  ASSERT_EQ(kill(d.pid, SIGCONT), 0);
  ASSERT_OK_ST(cli, sent);
  ASSERT_TRUE(took < 1000.0);
  ASSERT_TRUE(want);

  // the caller's arrays are free once the send returned: spoil them
  memset(dir, 0, 3 * sizeof(double) * n);
  sensim_status_t st = SENSIM_EAGAIN;
  int loops = 0;
  while (st == SENSIM_EAGAIN) {
    struct pollfd p = {.fd = sensim_client_fd(cli),
                       .events = (short)(POLLIN | (sensim_client_want_write(cli) ? POLLOUT : 0))};
    ASSERT_TRUE(poll(&p, 1, 30000) == 1);
    ASSERT_OK_ST(cli, sensim_client_pump(cli, 0));
    st = sensim_raycast_wait(cli, id, 0, NULL);
    loops++;
  }
  ASSERT_OK_ST(cli, st);
  ASSERT_TRUE(loops > 1);
  ASSERT_TRUE(!sensim_client_want_write(cli));
  for (uint32_t i = 0; i < n; i++) {
    if (!(fabs(hits[i].distance - 50.0) < 1e-4) || hits[i].label != 9) {
      CHECK_FAIL("ray %u: distance %.9g label %u", i, hits[i].distance, hits[i].label);
    }
  }
  free(org);
  free(dir);
  free(hits);
  sensim_client_close(cli);
  ASSERT_EQ(td_stop(&d), 0);
  return 0;
}
