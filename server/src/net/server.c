// SPDX-License-Identifier: MIT
// server.c: the libuv TCP listener. Accepts connections into sessions (net/session.c), holds
// the daemon-wide budget of bytes held for them, and runs one timer that checks the deadlines
// of every session a few times a second and gives memory back once the connections released it.
#include "net/server.h"

#include <uv.h>

#include "base/list.h"
#include "base/log.h"
#include "base/mem.h"
#include "net/server_impl.h"

// Period of the deadline checks: a quarter of the shortest deadline, within these bounds.
#define TICK_MIN_MS 10
#define TICK_MAX_MS 250


static void on_connection(uv_stream_t* listener, int status) {
  server_t* srv = listener->data;
  if (status < 0) {
    LOG_WARN("accept failed: %s", uv_strerror(status));
    return;
  }
  session_accept(srv);
}


// The allocator keeps what the connections freed (main.c raises its trim threshold so that
// bulk buffers are reused), and many small blocks freed in the middle of the heap are never
// returned by themselves: after a flood of small replies the daemon would keep its peak for
// good. Once the bytes held have stayed low for a while, the free memory goes back to the
// system; a steady load of large requests, whose held bytes drop only between requests, keeps
// its buffers.
static void maybe_trim(server_t* srv, uint64_t now) {
  if (srv->held_peak < SERVER_TRIM_MIN_PEAK || srv->held > srv->held_peak / 4) {
    srv->low_since_ms = 0;
    return;
  }
  if (!srv->low_since_ms) {
    srv->low_since_ms = now ? now : 1;
    return;
  }
  if (now - srv->low_since_ms >= SERVER_TRIM_AFTER_MS) {
    mem_trim();
    srv->trims++;
    srv->held_peak = srv->held;
    srv->low_since_ms = 0;
  }
}


static void on_tick(uv_timer_t* t) {
  server_t* srv = t->data;
  uint64_t now = uv_now(srv->loop);
  for (list_node_t* n = srv->sessions.head.next; n != &srv->sessions.head;) {
    session_t* s = container_of(n, session_t, node);
    n = n->next;
    if (!s->closing) {
      session_check_deadlines(s, now);
    }
  }
  maybe_trim(srv, now);
}


static void on_turn(uv_idle_t* h) {
  server_t* srv = h->data;
  uv_idle_stop(&srv->turn);
  srv->turn_active = 0;
  for (list_node_t* n = srv->sessions.head.next; n != &srv->sessions.head;) {
    session_t* s = container_of(n, session_t, node);
    n = n->next;
    if (s->yielded) {
      session_next_turn(s);
    }
  }
}


void server_yield(server_t* srv) {
  if (!srv->turn_active) {
    srv->turn_active = 1;
    uv_idle_start(&srv->turn, on_turn);
  }
}


static void start_tick(server_t* srv) {
  const server_limits_t* lim = &srv->limits;
  uint32_t shortest = 0;
  uint32_t all[3] = {lim->handshake_timeout_ms, lim->idle_timeout_ms, lim->io_timeout_ms};
  for (int i = 0; i < 3; i++) {
    if (all[i] && (!shortest || all[i] < shortest)) {
      shortest = all[i];
    }
  }
  uint32_t period = shortest ? shortest / 4 : TICK_MAX_MS;
  period = period < TICK_MIN_MS ? TICK_MIN_MS : period > TICK_MAX_MS ? TICK_MAX_MS : period;
  uv_timer_init(srv->loop, &srv->tick);
  srv->tick.data = srv;
  srv->ticking = 1;
  uv_timer_start(&srv->tick, on_tick, period, period);
  uv_idle_init(srv->loop, &srv->turn);
  srv->turn.data = srv;
}


server_t* server_create(uv_loop_t* loop, const char* host, int port,
                        const server_limits_t* limits, const server_hooks_t* hooks,
                        err_msg_t* msg) {
  struct sockaddr_storage addr;
  if (uv_ip4_addr(host, port, (struct sockaddr_in*)&addr) != 0 &&
      uv_ip6_addr(host, port, (struct sockaddr_in6*)&addr) != 0) {
    err_set(msg, ERR_INVAL, "listen address '%s' is not an IPv4 or IPv6 literal", host);
    return NULL;
  }
  server_t* srv = mem_calloc(1, sizeof(*srv));
  if (!srv) {
    err_set(msg, ERR_NOMEM, "out of memory");
    return NULL;
  }
  srv->loop = loop;
  srv->limits = *limits;
  srv->hooks = *hooks;
  list_init(&srv->sessions);
  uv_tcp_init(loop, &srv->listener);
  srv->listener.data = srv;
  int rc = uv_tcp_bind(&srv->listener, (const struct sockaddr*)&addr, 0);
  if (rc == 0) {
    rc = uv_listen((uv_stream_t*)&srv->listener, 128, on_connection);
  }
  if (rc != 0) {
    err_set(msg, ERR_INVAL, "cannot listen on %s:%d: %s", host, port, uv_strerror(rc));
    srv->closed = 1;
    uv_close((uv_handle_t*)&srv->listener, NULL);
    return srv;  // the caller runs the loop to finish closing, then destroys
  }
  struct sockaddr_storage bound;
  int len = sizeof(bound);
  uv_tcp_getsockname(&srv->listener, (struct sockaddr*)&bound, &len);
  srv->port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6*)&bound)->sin6_port
                                                 : ((struct sockaddr_in*)&bound)->sin_port);
  start_tick(srv);
  return srv;
}


int server_port(const server_t* srv) {
  return srv->closed ? -1 : srv->port;
}


void server_close(server_t* srv) {
  if (!uv_is_closing((uv_handle_t*)&srv->listener)) {
    uv_close((uv_handle_t*)&srv->listener, NULL);
  }
  srv->closed = 1;
  if (srv->ticking && !uv_is_closing((uv_handle_t*)&srv->tick)) {
    uv_close((uv_handle_t*)&srv->tick, NULL);
    uv_close((uv_handle_t*)&srv->turn, NULL);
  }
  for (list_node_t* n = srv->sessions.head.next; n != &srv->sessions.head;) {
    session_t* s = container_of(n, session_t, node);
    n = n->next;
    session_close_now(s);
  }
}


void server_destroy(server_t* srv) {
  spares_drop(&srv->spare_writes);
  mem_free(srv->read_buf);
  mem_free(srv);
}


uint32_t server_sessions(const server_t* srv) {
  return srv->nlive;
}


void server_get_stats(const server_t* srv, server_stats_t* out) {
  out->held_bytes = srv->held;
  out->timed_out = srv->timed_out;
  out->blocked = 0;
  for (list_node_t* n = srv->sessions.head.next; n != &srv->sessions.head; n = n->next) {
    out->blocked += container_of(n, session_t, node)->blocked;
  }
  out->trims = srv->trims;
  out->writes = srv->writes;
}


void server_hold(server_t* srv, int64_t delta) {
  if (delta > 0) {
    server_held_add(srv, (uint64_t)delta);
  } else {
    srv->held -= (uint64_t)-delta;
  }
}
