// SPDX-License-Identifier: MIT
// fuzz_client.c: the C client's decoding of what a daemon sends (client-c/src: transport.c's
// framing, nanopb's decoding of every Envelope with the client's callbacks, client.c's reply
// matching), through its public API: a thread of this program plays the daemon on a loopback
// port and sends the input as its byte stream, then closes its side; the client connects
// (Hello), asks GetInfo, pings and asks GetInfo again. Pushed SensorData (id 0), replies
// nobody waits for, refusals and broken frames may come anywhere in the stream. The client
// must neither crash nor hang, and what it hands back must be well formed.
//
// Input: the daemon's byte stream (frames: u32 little-endian length + Envelope). The seeds
// are the replies a real daemon gives to these calls (ids 1, 2, 3, 4), with pushed data.
//
// This target follows the C client's current entry points (sensim_client_connect,
// sensim_get_info, sensim_ping); it must follow the client when its API changes.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz.h"
#include "sensim/sensim.h"

#define ACCEPT_TIMEOUT_MS 10000

static int g_listen = -1;
static uint16_t g_port;

typedef struct feed {
  const uint8_t* data;
  size_t size;
} feed_t;


int LLVMFuzzerInitialize(int* argc, char*** argv) {
  (void)argc;
  (void)argv;
  g_listen = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  FUZZ_ASSERT(g_listen >= 0, "socket");
  struct sockaddr_in a;
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t alen = sizeof(a);
  FUZZ_ASSERT(bind(g_listen, (struct sockaddr*)&a, sizeof(a)) == 0 && listen(g_listen, 4) == 0 &&
              getsockname(g_listen, (struct sockaddr*)&a, &alen) == 0, "listen on loopback");
  g_port = ntohs(a.sin_port);
  return 0;
}


// The daemon's side of one connection: send the stream, close the sending side, then take
// whatever the client sends until it closes.
static void* serve(void* arg) {
  const feed_t* f = arg;
  struct pollfd p = {.fd = g_listen, .events = POLLIN, .revents = 0};
  if (poll(&p, 1, ACCEPT_TIMEOUT_MS) != 1) {
    return NULL;
  }
  int fd = accept(g_listen, NULL, NULL);
  if (fd < 0) {
    return NULL;
  }
  size_t sent = 0;
  while (sent < f->size) {
    ssize_t n = send(fd, f->data + sent, f->size - sent, MSG_NOSIGNAL);
    if (n <= 0) {
      break;  // the client closed: it stopped reading
    }
    sent += (size_t)n;
  }
  shutdown(fd, SHUT_WR);
  char sink[4096];
  while (recv(fd, sink, sizeof(sink), 0) > 0) {
  }
  close(fd);
  return NULL;
}


// What a call leaves on the handle. Its status is not checked against the named ones: the
// client hands a daemon's status code through as it came (a DEADLINE_EXCEEDED, 4, has no
// name in this client's enum; a code of 101 to 106 reads as one of the client's own).
static void check_status(sensim_status_t st, const sensim_client_t* cli, const char* call) {
  (void)st;
  const char* err = sensim_client_last_error(cli);
  FUZZ_ASSERT(memchr(err, '\0', 640) != NULL, "%s: the last error is not terminated", call);
}


int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  feed_t f = {data, size};
  pthread_t daemon;
  FUZZ_ASSERT(pthread_create(&daemon, NULL, serve, &f) == 0, "pthread_create");

  sensim_options_t opts;
  sensim_options_init(&opts);
  opts.environment = "fuzz";
  opts.token = "token";
  opts.timeout_ms = ACCEPT_TIMEOUT_MS;
  opts.max_frame_bytes = 1u << 20;
  sensim_client_t* cli = NULL;
  sensim_status_t st = sensim_client_connect("127.0.0.1", g_port, &opts, &cli);
  FUZZ_ASSERT(cli != NULL, "no handle (%d)", (int)st);
  check_status(st, cli, "sensim_client_connect");
  FUZZ_ASSERT(memchr(sensim_client_server_version(cli), '\0', 32) != NULL,
              "server version not terminated");

  // the calls go on after a failure: a closed handle must say so, not crash
  sensim_info_t info;
  for (int round = 0; round < 2; round++) {
    st = sensim_get_info(cli, &info);
    check_status(st, cli, "sensim_get_info");
    FUZZ_ASSERT(memchr(info.server_version, '\0', sizeof(info.server_version)) != NULL,
                "info.server_version not terminated");
    if (round == 0) {
      uint64_t t;
      st = sensim_ping(cli, "fuzz", 4, &t);
      check_status(st, cli, "sensim_ping");
    }
  }
  sensim_client_close(cli);
  pthread_join(daemon, NULL);
  return 0;
}
