// SPDX-License-Identifier: MIT
// daemon.c: the composition root. Creates, in order, the loop, the ray-tracing device and
// worker pool, the executors and the registry of environments, the listener with the session
// protocol's hooks (daemon/protocol.c), the subscriptions and the signal handlers, and tears
// them down in reverse.
#include "daemon.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "base/clock.h"
#include "base/host.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/pool.h"
#include "daemon/daemon_impl.h"

void daemon_config_default(daemon_config_t* cfg) {
  memset(cfg, 0, sizeof(*cfg));
  snprintf(cfg->host, sizeof(cfg->host), "%s", DAEMON_DEFAULT_HOST);
  cfg->port = DAEMON_DEFAULT_PORT;
  // the CPUs granted (affinity, a container's CPU quota), at most the --threads bound
  unsigned cpus = host_cpus();
  cfg->threads = cpus < DAEMON_MAX_THREADS ? cpus : DAEMON_MAX_THREADS;
  cfg->max_frame_bytes = 64u << 20;
  cfg->max_clients = 64;
  cfg->max_environments = 64;
  cfg->max_queue_bytes = 256ull << 20;
  cfg->max_pending_bytes = 64ull << 20;
  cfg->max_hello_bytes = 64u << 10;
  cfg->handshake_timeout_ms = 5000;
  cfg->io_timeout_ms = 30000;
  cfg->max_request_ms = 60000;

  // half of the memory granted (the physical memory, or a container's limit): a scene too
  // large for it fails with an error instead of the daemon being killed by the kernel
  cfg->max_scene_bytes = host_memory() / 2;

  // a sixteenth of it (at least 256 MiB) for everything queued on connections
  cfg->max_held_bytes = cfg->max_scene_bytes / 8;
  if (cfg->max_held_bytes < (256ull << 20)) {
    cfg->max_held_bytes = 256ull << 20;
  }
  cfg->retain_environments = 0;
  cfg->subscriber_max_bytes = 32ull << 20;
  cfg->subscriber_soft_bytes = 16ull << 20;
  cfg->subscriber_soft_ms = 10000;
  cfg->record_max_bytes = 1ull << 30;
  cfg->log_level = LOG_LEVEL_INFO;
  cfg->limits = env_default_limits();
}


//---------------- life cycle

static void stop(daemon_t* d, const char* why) {
  if (d->stopping) {
    return;
  }
  d->stopping = 1;
  atomic_store(&d->halt, 1);
  LOG_INFO("%s: shutting down", why);
  uv_close((uv_handle_t*)&d->sigint, NULL);
  uv_close((uv_handle_t*)&d->sigterm, NULL);
  server_close(d->server);

  // running jobs finish; queued ones are cancelled and release what they hold; then the
  // encoders finish the frame they are on
  exec_stop(d->exec);
  streams_stop(d->streams);
}


static void on_signal(uv_signal_t* h, int signum) {
  stop(h->data, signum == SIGINT ? "SIGINT" : "SIGTERM");
}


int daemon_run(const daemon_config_t* cfg) {
  daemon_t* d = mem_calloc(1, sizeof(*d));
  if (!d) {
    LOG_ERROR("out of memory");
    return 1;
  }
  d->cfg = *cfg;
  // one sensor's records of a step must fit in one frame (a reply part) with room to spare
  uint64_t frame_room = cfg->max_frame_bytes > (128u << 10) ? cfg->max_frame_bytes - (64u << 10)
                                                             : cfg->max_frame_bytes / 2;
  if (d->cfg.limits.max_output_bytes > frame_room) {
    d->cfg.limits.max_output_bytes = frame_room;
  }
  d->start_ns = clock_now_ns();
  atomic_init(&d->halt, 0);
  log_set_level(cfg->log_level);
  d->limits = (wire_limits_t){cfg->max_frame_bytes, cfg->max_clients, cfg->max_environments,
                              cfg->max_queue_bytes, cfg->max_scene_bytes, cfg->limits,
                              cfg->max_held_bytes, cfg->handshake_timeout_ms,
                              cfg->idle_timeout_ms, cfg->io_timeout_ms, cfg->max_request_ms,
                              cfg->max_hello_bytes, cfg->subscriber_max_bytes,
                              cfg->subscriber_soft_bytes, cfg->subscriber_soft_ms};
  signal(SIGPIPE, SIG_IGN);
  // a file size limit (ulimit -f) makes a recording's write fail (EFBIG, recording stops)
  // instead of killing the daemon
  signal(SIGXFSZ, SIG_IGN);
  int rc = 1;
  err_msg_t msg;

  // construction, in order
  uv_replace_allocator(mem_alloc, mem_realloc, mem_calloc, mem_free);
  uv_loop_init(&d->loop);
  d->device = scene_device_create(&msg);
  if (!d->device) {
    LOG_ERROR("ray-tracing device: %s", msg.text);
    goto out_loop;
  }
  scene_device_set_budget(d->device, (int64_t)cfg->max_scene_bytes);
  d->pool = pool_create(cfg->threads);
  d->exec = exec_create(&d->loop, cfg->max_environments);
  registry_init(&d->registry, d->exec, cfg->max_environments);
  if (!d->pool || !d->exec) {
    LOG_ERROR("cannot start worker threads");
    if (d->exec) {
      exec_stop(d->exec);
      uv_run(&d->loop, UV_RUN_DEFAULT);
    }
    goto out_threads;
  }
  if (cfg->record_path && !(d->recorder = record_open(cfg->record_path,
                                                       cfg->record_max_bytes))) {
    exec_stop(d->exec);
    uv_run(&d->loop, UV_RUN_DEFAULT);
    goto out_threads;
  }
  server_limits_t lim = {
      .max_frame_bytes = cfg->max_frame_bytes,
      .max_queue_bytes = cfg->max_queue_bytes,
      .max_hello_bytes = cfg->max_hello_bytes,
      .max_held_bytes = cfg->max_held_bytes,
      .pause_unsent_bytes = cfg->max_pending_bytes,
      .handshake_timeout_ms = cfg->handshake_timeout_ms,
      .idle_timeout_ms = cfg->idle_timeout_ms,
      .io_timeout_ms = cfg->io_timeout_ms,
  };
  server_hooks_t hooks;
  protocol_hooks(d, &hooks);
  d->server = server_create(&d->loop, cfg->host, cfg->port, &lim, &hooks, &msg);
  if (!d->server || server_port(d->server) < 0) {
    LOG_ERROR("--listen %s:%d: %s", cfg->host, cfg->port, msg.text);
    if (d->server) {
      server_close(d->server);
    }
    exec_stop(d->exec);
    uv_run(&d->loop, UV_RUN_DEFAULT);
    goto out_server;
  }
  streams_config_t scfg = {cfg->subscriber_max_bytes, cfg->subscriber_soft_bytes,
                           cfg->subscriber_soft_ms, cfg->max_held_bytes, cfg->threads};
  d->streams = streams_create(d->server, &d->loop, &scfg);
  if (!d->streams) {
    LOG_ERROR("out of memory");
    server_close(d->server);
    exec_stop(d->exec);
    uv_run(&d->loop, UV_RUN_DEFAULT);
    goto out_server;
  }
  uv_signal_init(&d->loop, &d->sigint);
  uv_signal_init(&d->loop, &d->sigterm);
  d->sigint.data = d;
  d->sigterm.data = d;
  uv_signal_start(&d->sigint, on_signal, SIGINT);
  uv_signal_start(&d->sigterm, on_signal, SIGTERM);
  d->heap_base = protocol_heap_in_use();

  int loopback = strcmp(cfg->host, "127.0.0.1") == 0 || strcmp(cfg->host, "::1") == 0 ||
                 strncmp(cfg->host, "127.", 4) == 0;
  if (!loopback && !cfg->token) {
    LOG_WARN("listening on non-loopback address %s without --token: anyone who can reach it "
             "can control the daemon", cfg->host);
  }
  LOG_INFO("sensimd %s: %u threads, max frame %u bytes, max %u clients", SENSIM_VERSION,
           cfg->threads, cfg->max_frame_bytes, cfg->max_clients);
  char backend[256];
  bool configured = scene_device_describe(d->device, backend, sizeof backend);
  log_write(configured ? LOG_LEVEL_INFO : LOG_LEVEL_DEBUG, "ray tracing: %s", backend);
  int colon6 = strchr(cfg->host, ':') != NULL;
  printf("sensimd listening on %s%s%s:%d\n", colon6 ? "[" : "", cfg->host, colon6 ? "]" : "",
         server_port(d->server));
  fflush(stdout);

  // serve until a signal stops the listener, the sessions and the executors
  uv_run(&d->loop, UV_RUN_DEFAULT);
  rc = 0;

out_server:
  // environments still registered (kept ones) are destroyed here, on the loop thread
  registry_close(&d->registry);
  streams_destroy(d->streams);
  if (d->server) {
    server_destroy(d->server);
  }
out_threads:
  record_close(d->recorder);
  exec_destroy(d->exec);
  spares_drop(&d->spare_jobs);  // after the last request's done
  pool_destroy(d->pool);
  scene_device_destroy(d->device);
out_loop:
  // a handle left open is a bug: report it in the exit code, which the tests check
  if (uv_loop_close(&d->loop) != 0) {
    LOG_ERROR("event loop closed with handles still open");
    rc = 1;
  }
  mem_free(d);
  if (rc == 0) {
    LOG_INFO("stopped cleanly");
  }
  return rc;
}
