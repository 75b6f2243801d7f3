// SPDX-License-Identifier: MIT
// client.c: the connection handle: connect and Hello handshake, request/reply correlation by
// envelope id, the per-handle last error, and the requests of sensim.h.
#include <stdlib.h>
#include <string.h>

#include <pb_decode.h>

#include "internal.h"


void sensim_options_init(sensim_options_t* opts) {
  memset(opts, 0, sizeof(*opts));
  opts->role = SENSIM_ROLE_CONTROLLER;
  opts->timeout_ms = CLIENT_DEFAULT_TIMEOUT_MS;
  opts->max_frame_bytes = CLIENT_DEFAULT_MAX_FRAME;
}


const char* sensim_client_last_error(const sensim_client_t* cli) {
  return cli != NULL ? cli->last_error : "no client handle";
}


const char* sensim_client_server_version(const sensim_client_t* cli) {
  return cli != NULL ? cli->server_version : "";
}


// Copy a C string into a fixed nanopb field; returns false if it does not fit.
static bool copy_field(char* dst, size_t cap, const char* src) {
  size_t n = strlen(src);
  if (n >= cap) {
    return false;
  }
  memcpy(dst, src, n + 1);
  return true;
}


// Decode callback of Info.environments: only the number of entries is kept.
static bool count_environment(pb_istream_t* stream, const pb_field_t* field, void** arg) {
  (void)field;
  uint32_t* count = *arg;
  (*count)++;
  return pb_read(stream, NULL, stream->bytes_left);
}


// Message-level callback of the Envelope body, called once nanopb has selected the oneof
// member and before it decodes it. Callbacks inside the member must be set here: nanopb zeroes
// the member when it selects it, so anything set in advance would be lost.
static bool select_body(pb_istream_t* stream, const pb_field_t* field, void** arg) {
  (void)stream;
  sensim_client_t* cli = *arg;
  if (field->tag == sensim_v1_Envelope_info_tag) {
    sensim_v1_Info* info = field->pData;
    cli->environments = 0;
    info->environments.funcs.decode = count_environment;
    info->environments.arg = &cli->environments;
  }
  return true;
}


// Start a request: a fresh envelope with the next id and body `tag`.
static sensim_v1_Envelope* begin_request(sensim_client_t* cli, pb_size_t tag) {
  sensim_v1_Envelope* tx = &cli->tx;
  *tx = (sensim_v1_Envelope)sensim_v1_Envelope_init_zero;
  tx->has_id = true;
  tx->id = ++cli->next_id;
  tx->which_body = tag;
  return tx;
}


// Send the prepared request and wait for the reply with its id; on SENSIM_OK cli->rx holds it
// and its body is `reply_tag` (0 = any). A non-OK status from the daemon becomes the result,
// with the daemon's message as the last error.
static sensim_status_t call(sensim_client_t* cli, pb_size_t reply_tag) {
  sensim_status_t st = sensim_transport_send(&cli->tr, &cli->tx);
  if (st != SENSIM_OK) {
    return st;
  }
  uint64_t id = cli->tx.id;
  sensim_v1_Envelope* rx = &cli->rx;
  for (;;) {
    *rx = (sensim_v1_Envelope)sensim_v1_Envelope_init_zero;
    rx->cb_body.funcs.decode = select_body;
    rx->cb_body.arg = cli;
    st = sensim_transport_recv(&cli->tr, rx);
    if (st != SENSIM_OK) {
      return st;
    }
    if (rx->id == id) {
      break;
    }

    // An id-0 status without a body is the daemon refusing the connection (frame limit,
    // client limit) just before it closes it; any other id-0 frame is pushed sensor data,
    // which this client does not subscribe to, and a stale id is a reply nobody waits for.
    if (rx->id == 0 && rx->has_status && rx->status.code != sensim_v1_StatusCode_OK &&
        rx->which_body == 0) {
      sensim_transport_close(&cli->tr);
      return sensim_fail(cli->last_error, sizeof(cli->last_error),
                         (sensim_status_t)rx->status.code, "%s", rx->status.message);
    }
  }

  // status, then the expected body
  if (rx->has_status && rx->status.code != sensim_v1_StatusCode_OK) {
    return sensim_fail(cli->last_error, sizeof(cli->last_error), (sensim_status_t)rx->status.code,
                       "%s", rx->status.message);
  }
  if (reply_tag != 0 && rx->which_body != reply_tag) {
    return sensim_fail(cli->last_error, sizeof(cli->last_error), SENSIM_EPROTO,
                       "reply %llu carries body %u, expected %u", (unsigned long long)id,
                       (unsigned)rx->which_body, (unsigned)reply_tag);
  }
  return SENSIM_OK;
}


// Send Hello with the options and check the reply.
static sensim_status_t handshake(sensim_client_t* cli, const sensim_options_t* opts) {
  sensim_v1_Envelope* tx = begin_request(cli, sensim_v1_Envelope_hello_tag);
  sensim_v1_Hello* hello = &tx->body.hello;
  hello->has_protocol_version = true;
  hello->protocol_version = sensim_v1_ProtocolVersion_PROTOCOL_VERSION;
  hello->has_role = true;
  hello->role = opts->role == SENSIM_ROLE_OBSERVER ? sensim_v1_Role_ROLE_OBSERVER
                                                   : sensim_v1_Role_ROLE_CONTROLLER;

  // strings, checked against the nanopb field sizes
  const char* name = opts->client_name != NULL ? opts->client_name : "sensim-c";
  hello->has_client_name = true;
  if (!copy_field(hello->client_name, sizeof(hello->client_name), name)) {
    return sensim_fail(cli->last_error, sizeof(cli->last_error), SENSIM_INVALID_ARGUMENT,
                       "client_name: longer than %zu bytes", sizeof(hello->client_name) - 1);
  }
  if (opts->environment != NULL && opts->environment[0] != '\0') {
    hello->has_environment = true;
    if (!copy_field(hello->environment, sizeof(hello->environment), opts->environment)) {
      return sensim_fail(cli->last_error, sizeof(cli->last_error), SENSIM_INVALID_ARGUMENT,
                         "environment: longer than %zu bytes", sizeof(hello->environment) - 1);
    }
  }
  if (opts->token != NULL) {
    hello->has_token = true;
    if (!copy_field(hello->token, sizeof(hello->token), opts->token)) {
      return sensim_fail(cli->last_error, sizeof(cli->last_error), SENSIM_INVALID_ARGUMENT,
                         "token: longer than %zu bytes", sizeof(hello->token) - 1);
    }
  }

  sensim_status_t st = call(cli, sensim_v1_Envelope_hello_reply_tag);
  if (st != SENSIM_OK) {
    return st;
  }
  const sensim_v1_HelloReply* reply = &cli->rx.body.hello_reply;
  if (reply->has_protocol_version &&
      reply->protocol_version != sensim_v1_ProtocolVersion_PROTOCOL_VERSION) {
    sensim_transport_close(&cli->tr);
    return sensim_fail(cli->last_error, sizeof(cli->last_error), SENSIM_EPROTO,
                       "daemon speaks protocol_version %u, this client %u",
                       (unsigned)reply->protocol_version,
                       (unsigned)sensim_v1_ProtocolVersion_PROTOCOL_VERSION);
  }
  memcpy(cli->server_version, reply->server_version, sizeof(cli->server_version));
  cli->server_version[sizeof(cli->server_version) - 1] = '\0';
  return SENSIM_OK;
}


sensim_status_t sensim_client_connect(const char* host, uint16_t port,
                                      const sensim_options_t* opts, sensim_client_t** out) {
  sensim_options_t defaults;
  if (opts == NULL) {
    sensim_options_init(&defaults);
    opts = &defaults;
  }
  *out = NULL;
  sensim_client_t* cli = calloc(1, sizeof(*cli));
  if (cli == NULL) {
    return SENSIM_ENOMEM;
  }
  *out = cli;
  uint32_t max_frame = opts->max_frame_bytes != 0 ? opts->max_frame_bytes
                                                  : CLIENT_DEFAULT_MAX_FRAME;
  sensim_transport_init(&cli->tr, opts->timeout_ms, max_frame, cli->last_error,
                        sizeof(cli->last_error));

  // connect, then Hello; a failed handshake leaves the handle closed with the reason
  if (host == NULL || host[0] == '\0') {
    host = "127.0.0.1";
  }
  sensim_status_t st = sensim_transport_connect(&cli->tr, host, port);
  if (st == SENSIM_OK) {
    st = handshake(cli, opts);
  }
  if (st != SENSIM_OK) {
    sensim_transport_close(&cli->tr);
  }
  return st;
}


void sensim_client_close(sensim_client_t* cli) {
  if (cli == NULL) {
    return;
  }
  sensim_transport_close(&cli->tr);
  free(cli);
}


sensim_status_t sensim_ping(sensim_client_t* cli, const void* payload, size_t len,
                            uint64_t* server_time_ns) {
  sensim_v1_Envelope* tx = begin_request(cli, sensim_v1_Envelope_ping_tag);
  sensim_v1_Ping* ping = &tx->body.ping;
  if (len > sizeof(ping->payload.bytes)) {
    return sensim_fail(cli->last_error, sizeof(cli->last_error), SENSIM_INVALID_ARGUMENT,
                       "payload: %zu bytes, at most %zu", len, sizeof(ping->payload.bytes));
  }
  if (len > 0) {
    ping->has_payload = true;
    ping->payload.size = (pb_size_t)len;
    memcpy(ping->payload.bytes, payload, len);
  }

  sensim_status_t st = call(cli, sensim_v1_Envelope_pong_tag);
  if (st != SENSIM_OK) {
    return st;
  }
  const sensim_v1_Pong* pong = &cli->rx.body.pong;
  size_t echoed = pong->has_payload ? pong->payload.size : 0;
  if (echoed != len || (len > 0 && memcmp(pong->payload.bytes, payload, len) != 0)) {
    return sensim_fail(cli->last_error, sizeof(cli->last_error), SENSIM_EPROTO,
                       "pong payload differs from the ping (%zu bytes sent, %zu echoed)", len,
                       echoed);
  }
  if (server_time_ns != NULL) {
    *server_time_ns = pong->server_time_ns;
  }
  return SENSIM_OK;
}


sensim_status_t sensim_get_info(sensim_client_t* cli, sensim_info_t* out) {
  memset(out, 0, sizeof(*out));
  begin_request(cli, sensim_v1_Envelope_get_info_tag);
  sensim_status_t st = call(cli, sensim_v1_Envelope_info_tag);
  if (st != SENSIM_OK) {
    return st;
  }

  // scalars
  const sensim_v1_Info* info = &cli->rx.body.info;
  memcpy(out->server_version, info->server_version, sizeof(out->server_version));
  out->server_version[sizeof(out->server_version) - 1] = '\0';
  out->protocol_version = info->protocol_version;
  out->uptime_s = info->uptime_s;
  out->connections = info->connections;
  out->threads = info->threads;
  out->environments = cli->environments;
  out->max_frame_bytes = info->limits.max_frame_bytes;
  out->max_clients = info->limits.max_clients;

  // counters
  const sensim_v1_Counters* c = &info->counters;
  out->counters.frames_in = c->frames_in;
  out->counters.frames_out = c->frames_out;
  out->counters.bytes_in = c->bytes_in;
  out->counters.bytes_out = c->bytes_out;
  out->counters.requests_failed = c->requests_failed;
  out->counters.connections_total = c->connections_total;
  out->counters.connections_rejected = c->connections_rejected;
  out->counters.frames_rejected = c->frames_rejected;
  out->counters.steps = c->steps;
  out->counters.rays_traced = c->rays_traced;
  out->counters.rays_culled = c->rays_culled;
  out->counters.rays_invalid = c->rays_invalid;
  out->counters.scene_commits = c->scene_commits;
  out->counters.frames_dropped = c->frames_dropped;
  return SENSIM_OK;
}
