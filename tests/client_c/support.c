// SPDX-License-Identifier: MIT
// support.c: the real daemon as a child, client helpers and the scripted peer of the C
// client's tests (support.h).
#include "support.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>


double td_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

const char* td_str(const char* s) {
  return s ? s : "";
}


bool td_names(const char* err, const char* text) {
  return text == NULL || strstr(err, text) != NULL;
}

//---------------- sensimd

// Daemons still running when a test ends early (a failed assertion returns) are killed at
// exit, so that none outlives its test.
#define MAX_DAEMONS 8
static pid_t g_daemons[MAX_DAEMONS];


static void kill_leftovers(void) {
  for (int i = 0; i < MAX_DAEMONS; i++) {
    if (g_daemons[i] > 0) {
      kill(g_daemons[i], SIGCONT);
      kill(g_daemons[i], SIGKILL);
      waitpid(g_daemons[i], NULL, 0);
      g_daemons[i] = 0;
    }
  }
}


static void track(pid_t pid, pid_t old) {
  static bool registered;
  if (!registered) {
    atexit(kill_leftovers);
    registered = true;
  }
  for (int i = 0; i < MAX_DAEMONS; i++) {
    if (g_daemons[i] == old) {
      g_daemons[i] = pid;
      return;
    }
  }
}


int td_start(td_daemon_t* d, const char* const* extra) {
  const char* exe = getenv("SENSIMD");
  if (!exe || !exe[0]) {
    fprintf(stderr, "# SENSIMD is not set (the path of the sensimd to test)\n");
    return -1;
  }
  const char* argv[24] = {exe, "--listen", "127.0.0.1:0", "--log-level", "error"};
  size_t na = 5;
  for (size_t i = 0; extra && extra[i] && na < 23; i++) {
    argv[na++] = extra[i];
  }
  argv[na] = NULL;
  int p[2];
  if (pipe(p) != 0) {
    return -1;
  }
  pid_t pid = fork();
  if (pid < 0) {
    return -1;
  }
  if (pid == 0) {
    dup2(p[1], STDOUT_FILENO);
    close(p[0]);
    close(p[1]);
    execv(exe, (char* const*)argv);
    _exit(127);
  }
  close(p[1]);
  d->pid = pid;
  d->out = p[0];
  track(pid, 0);

  // "sensimd listening on 127.0.0.1:PORT"
  char line[256];
  size_t n = 0;
  for (;;) {
    struct pollfd pf = {.fd = d->out, .events = POLLIN};
    if (poll(&pf, 1, 30000) <= 0) {
      break;
    }
    ssize_t k = read(d->out, line + n, sizeof(line) - 1 - n);
    if (k <= 0) {
      break;
    }
    n += (size_t)k;
    line[n] = '\0';
    if (strchr(line, '\n') && sscanf(line, "sensimd listening on 127.0.0.1:%d", &d->port) == 1) {
      return 0;
    }
  }
  fprintf(stderr, "# %s did not start\n", exe);
  td_kill(d);
  return -1;
}


int td_stop(td_daemon_t* d) {
  if (d->pid <= 0) {
    return -1;
  }
  kill(d->pid, SIGTERM);
  int status = 0;
  double deadline = td_now_ms() + 20000;
  while (waitpid(d->pid, &status, WNOHANG) == 0) {
    if (td_now_ms() > deadline) {
      td_kill(d);
      return -1;
    }
    struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
  }
  track(0, d->pid);
  d->pid = -1;
  close(d->out);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}


void td_kill(td_daemon_t* d) {
  if (d->pid > 0) {
    kill(d->pid, SIGCONT);
    kill(d->pid, SIGKILL);
    waitpid(d->pid, NULL, 0);
    close(d->out);
    track(0, d->pid);
    d->pid = -1;
  }
}


sensim_client_t* td_connect_opts(const td_daemon_t* d, const sensim_options_t* opts) {
  sensim_client_t* cli = NULL;
  sensim_status_t st = sensim_client_connect("127.0.0.1", (uint16_t)d->port, opts, &cli);
  if (st != SENSIM_OK) {
    fprintf(stderr, "# connect: %s (%s)\n", sensim_client_last_error(cli),
            sensim_status_name(st));
    sensim_client_close(cli);
    return NULL;
  }
  return cli;
}


sensim_client_t* td_connect(const td_daemon_t* d, const char* environment) {
  sensim_options_t opts;
  sensim_options_init(&opts);
  opts.environment = environment;
  opts.client_name = "test_client";
  opts.timeout_ms = TD_TIMEOUT_MS;
  return td_connect_opts(d, &opts);
}

//---------------- Scene helpers

static sensim_status_t place(sensim_client_t* cli, uint32_t id, double x, double y, double z,
                             uint32_t label) {
  sensim_object_t obj;
  sensim_object_init(&obj);
  obj.id = id;
  obj.geometry_id = id;
  obj.label = label;
  obj.local_pose.position[0] = x;
  obj.local_pose.position[1] = y;
  obj.local_pose.position[2] = z;
  return sensim_create_object(cli, &obj);
}


sensim_status_t td_sphere(sensim_client_t* cli, uint32_t id, double r, double x, double y,
                          double z, uint32_t label) {
  sensim_primitive_t p;
  sensim_primitive_init(&p);
  p.id = id;
  p.shape = SENSIM_SHAPE_SPHERE;
  p.radius = r;
  sensim_status_t st = sensim_create_primitive(cli, &p);
  return st != SENSIM_OK ? st : place(cli, id, x, y, z, label);
}


sensim_status_t td_box(sensim_client_t* cli, uint32_t id, double hx, double hy, double hz,
                       double x, double y, double z, uint32_t label) {
  sensim_primitive_t p;
  sensim_primitive_init(&p);
  p.id = id;
  p.shape = SENSIM_SHAPE_BOX;
  p.half_extents[0] = hx;
  p.half_extents[1] = hy;
  p.half_extents[2] = hz;
  sensim_status_t st = sensim_create_primitive(cli, &p);
  return st != SENSIM_OK ? st : place(cli, id, x, y, z, label);
}

//---------------- Scripted peer

struct td_peer {
  int listener;
  int port;
  pthread_t thread;
  td_script_t script;
  void* arg;
};


static void* peer_main(void* arg) {
  td_peer_t* p = arg;
  int fd = accept(p->listener, NULL, NULL);
  if (fd >= 0) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    p->script(fd, p->arg);
    close(fd);
  }
  return NULL;
}


td_peer_t* td_peer_start(td_script_t script, void* arg) {
  td_peer_t* p = calloc(1, sizeof(*p));
  if (!p) {
    return NULL;
  }
  p->script = script;
  p->arg = arg;
  p->listener = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t alen = sizeof(a);
  if (p->listener < 0 || bind(p->listener, (struct sockaddr*)&a, sizeof(a)) != 0 ||
      listen(p->listener, 1) != 0 || getsockname(p->listener, (struct sockaddr*)&a, &alen) != 0 ||
      pthread_create(&p->thread, NULL, peer_main, p) != 0) {
    if (p->listener >= 0) {
      close(p->listener);
    }
    free(p);
    return NULL;
  }
  p->port = ntohs(a.sin_port);
  return p;
}


int td_peer_port(const td_peer_t* p) {
  return p->port;
}


void td_peer_stop(td_peer_t* p) {
  if (p) {
    pthread_join(p->thread, NULL);
    close(p->listener);
    free(p);
  }
}


int td_write_all(int fd, const void* p, size_t n) {
  const uint8_t* b = p;
  while (n > 0) {
    ssize_t k = send(fd, b, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) {
      continue;
    }
    if (k <= 0) {
      return -1;
    }
    b += k;
    n -= (size_t)k;
  }
  return 0;
}


static int read_all(int fd, uint8_t* p, size_t n) {
  while (n > 0) {
    ssize_t k = recv(fd, p, n, 0);
    if (k < 0 && errno == EINTR) {
      continue;
    }
    if (k <= 0) {
      return -1;
    }
    p += k;
    n -= (size_t)k;
  }
  return 0;
}


long td_read_frame(int fd, uint8_t* buf, size_t cap) {
  uint8_t h[4];
  if (read_all(fd, h, 4) != 0) {
    return -1;
  }
  size_t len = (size_t)h[0] | (size_t)h[1] << 8 | (size_t)h[2] << 16 | (size_t)h[3] << 24;
  if (len > cap || read_all(fd, buf, len) != 0) {
    return -1;
  }
  return (long)len;
}


uint64_t td_frame_id(const uint8_t* p, long len) {
  uint64_t id = 0;
  if (len > 1 && p[0] == 0x08) {
    for (long i = 1, shift = 0; i < len && shift < 64; i++, shift += 7) {
      id |= (uint64_t)(p[i] & 0x7f) << shift;
      if (!(p[i] & 0x80)) {
        break;
      }
    }
  }
  return id;
}


uint64_t td_peer_hello(int fd) {
  return td_peer_hello_features(fd, 0);
}


uint64_t td_peer_hello_features(int fd, uint64_t features) {
  static uint8_t req[1 << 16];
  long n = td_read_frame(fd, req, sizeof(req));
  if (n < 0) {
    return 0;
  }
  uint64_t id = td_frame_id(req, n);
  td_pb_t limits = {.len = 0}, reply = {.len = 0}, env = {.len = 0};
  td_pb_uint(&limits, 1, 64u << 20);           // Limits.max_frame_bytes
  td_pb_uint(&reply, 2, 1);                    // HelloReply.protocol_version
  td_pb_bytes(&reply, 3, limits.buf, limits.len);
  if (features) {
    td_pb_uint(&reply, 8, features);           // HelloReply.features
  }
  td_pb_uint(&env, 1, id);                     // Envelope.id
  td_pb_bytes(&env, 11, reply.buf, reply.len);  // Envelope.hello_reply
  return td_pb_send(fd, &env) == 0 ? id : 0;
}


void td_pb_varint(td_pb_t* b, uint64_t v) {
  while (v >= 0x80) {
    b->buf[b->len++] = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  b->buf[b->len++] = (uint8_t)v;
}


void td_pb_key(td_pb_t* b, uint32_t field, uint32_t wire_type) {
  td_pb_varint(b, (uint64_t)field << 3 | wire_type);
}


void td_pb_uint(td_pb_t* b, uint32_t field, uint64_t v) {
  td_pb_key(b, field, 0);
  td_pb_varint(b, v);
}


void td_pb_double(td_pb_t* b, uint32_t field, double v) {
  td_pb_key(b, field, 1);
  memcpy(b->buf + b->len, &v, 8);
  b->len += 8;
}


void td_pb_bytes(td_pb_t* b, uint32_t field, const void* p, size_t n) {
  td_pb_key(b, field, 2);
  td_pb_varint(b, n);
  memcpy(b->buf + b->len, p, n);
  b->len += n;
}


int td_pb_send(int fd, const td_pb_t* b) {
  uint8_t h[4] = {(uint8_t)b->len, (uint8_t)(b->len >> 8), (uint8_t)(b->len >> 16),
                  (uint8_t)(b->len >> 24)};
  return td_write_all(fd, h, 4) == 0 && td_write_all(fd, b->buf, b->len) == 0 ? 0 : -1;
}
