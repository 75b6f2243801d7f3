// SPDX-License-Identifier: MIT
// transport.c: blocking TCP framing for the client. Each operation polls against its own
// deadline, so a silent daemon costs at most timeout_ms per frame; any failure closes the socket.
#include "transport.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <pb_decode.h>
#include <pb_encode.h>

#include "internal.h"

#define FRAME_HEADER 4


static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}


static int64_t deadline_after(int timeout_ms) {
  return timeout_ms > 0 ? now_ms() + timeout_ms : -1;
}


// Wait until fd is ready for events or the deadline (-1 = none) passes. Returns 1 when ready,
// 0 on timeout, -1 on a poll error (errno set).
static int wait_fd(int fd, short events, int64_t deadline) {
  for (;;) {
    int wait = -1;
    if (deadline >= 0) {
      int64_t left = deadline - now_ms();
      if (left <= 0) {
        return 0;
      }
      wait = left > 0x7fffffff ? 0x7fffffff : (int)left;
    }
    struct pollfd p = {.fd = fd, .events = events, .revents = 0};
    int n = poll(&p, 1, wait);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    return n < 0 ? -1 : (n > 0 ? 1 : 0);
  }
}


static sensim_status_t fail(sensim_transport_t* tr, sensim_status_t st, const char* what, int err) {
  sensim_transport_close(tr);
  if (err != 0) {
    return sensim_fail(tr->err, tr->err_cap, st, "%s: %s", what, strerror(err));
  }
  return sensim_fail(tr->err, tr->err_cap, st, "%s", what);
}


static sensim_status_t reserve(sensim_transport_t* tr, size_t need) {
  if (need <= tr->cap) {
    return SENSIM_OK;
  }
  size_t cap = tr->cap ? tr->cap : 4096;
  while (cap < need) {
    cap *= 2;
  }
  uint8_t* buf = realloc(tr->buf, cap);
  if (buf == NULL) {
    return sensim_fail(tr->err, tr->err_cap, SENSIM_ENOMEM, "frame buffer of %zu bytes", need);
  }
  tr->buf = buf;
  tr->cap = cap;
  return SENSIM_OK;
}


void sensim_transport_init(sensim_transport_t* tr, int timeout_ms, uint32_t max_frame_bytes,
                           char* err, size_t err_cap) {
  memset(tr, 0, sizeof(*tr));
  tr->fd = -1;
  tr->timeout_ms = timeout_ms;
  tr->max_frame_bytes = max_frame_bytes;
  tr->err = err;
  tr->err_cap = err_cap;
}


// Connect one resolved address without blocking past the deadline. Returns the connected
// blocking socket, or -1 with errno set (ETIMEDOUT on timeout).
static int connect_addr(const struct addrinfo* ai, int64_t deadline) {
  int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
  if (fd < 0) {
    return -1;
  }

  // non-blocking connect so that the timeout applies
  int flags = fcntl(fd, F_GETFL, 0);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    goto fail;
  }
  if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
    if (errno != EINPROGRESS) {
      goto fail;
    }
    int ready = wait_fd(fd, POLLOUT, deadline);
    if (ready <= 0) {
      if (ready == 0) {
        errno = ETIMEDOUT;
      }
      goto fail;
    }
    int soerr = 0;
    socklen_t len = sizeof(soerr);
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0) {
      goto fail;
    }
    if (soerr != 0) {
      errno = soerr;
      goto fail;
    }
  }

  // back to blocking; requests are small and latency matters more than batching
  if (fcntl(fd, F_SETFL, flags) < 0) {
    goto fail;
  }
  int one = 1;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;

fail:;
  int saved = errno;
  close(fd);
  errno = saved;
  return -1;
}


sensim_status_t sensim_transport_connect(sensim_transport_t* tr, const char* host, uint16_t port) {
  sensim_transport_close(tr);

  // resolve
  char service[8];
  snprintf(service, sizeof(service), "%u", (unsigned)port);
  struct addrinfo hints;
  memset(&hints, 0, sizeof(hints));
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  struct addrinfo* list = NULL;
  int gai = getaddrinfo(host, service, &hints, &list);
  if (gai != 0) {
    return sensim_fail(tr->err, tr->err_cap, SENSIM_ECONNECT, "resolve: %s", gai_strerror(gai));
  }

  // try each address until one connects; report the last failure
  int64_t deadline = deadline_after(tr->timeout_ms);
  int err = 0;
  for (const struct addrinfo* ai = list; ai != NULL; ai = ai->ai_next) {
    int fd = connect_addr(ai, deadline);
    if (fd >= 0) {
      tr->fd = fd;
      break;
    }
    err = errno;
    if (err == ETIMEDOUT) {
      break;
    }
  }
  freeaddrinfo(list);
  if (tr->fd < 0) {
    sensim_status_t st = err == ETIMEDOUT ? SENSIM_ETIMEDOUT : SENSIM_ECONNECT;
    return sensim_fail(tr->err, tr->err_cap, st, "connect: %s", strerror(err));
  }
  return SENSIM_OK;
}


// Send or receive exactly len bytes before the deadline.
static sensim_status_t io_all(sensim_transport_t* tr, uint8_t* p, size_t len, bool sending,
                              int64_t deadline) {
  while (len > 0) {
    int ready = wait_fd(tr->fd, sending ? POLLOUT : POLLIN, deadline);
    if (ready == 0) {
      return fail(tr, SENSIM_ETIMEDOUT,
                  sending ? "timed out sending a frame" : "timed out waiting for the daemon", 0);
    }
    if (ready < 0) {
      return fail(tr, SENSIM_EIO, "poll", errno);
    }
    ssize_t n = sending ? send(tr->fd, p, len, MSG_NOSIGNAL) : recv(tr->fd, p, len, 0);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) {
        continue;
      }
      if (errno == ECONNRESET || errno == EPIPE) {
        return fail(tr, SENSIM_ECLOSED, "connection closed by the daemon", errno);
      }
      return fail(tr, SENSIM_EIO, sending ? "send" : "recv", errno);
    }
    if (n == 0) {
      return fail(tr, SENSIM_ECLOSED, "connection closed by the daemon", 0);
    }
    p += n;
    len -= (size_t)n;
  }
  return SENSIM_OK;
}


sensim_status_t sensim_transport_send(sensim_transport_t* tr, const sensim_v1_Envelope* env) {
  if (tr->fd < 0) {
    return sensim_fail(tr->err, tr->err_cap, SENSIM_ECLOSED, "connection is closed");
  }

  // size, then encode behind the length prefix
  size_t size = 0;
  if (!pb_get_encoded_size(&size, sensim_v1_Envelope_fields, env)) {
    return sensim_fail(tr->err, tr->err_cap, SENSIM_EPROTO, "cannot size the request");
  }
  if (size > 0xffffffffu) {
    return sensim_fail(tr->err, tr->err_cap, SENSIM_INVALID_ARGUMENT,
                       "request of %zu bytes does not fit a frame", size);
  }
  sensim_status_t st = reserve(tr, FRAME_HEADER + size);
  if (st != SENSIM_OK) {
    return st;
  }
  pb_ostream_t out = pb_ostream_from_buffer(tr->buf + FRAME_HEADER, size);
  if (!pb_encode(&out, sensim_v1_Envelope_fields, env)) {
    return sensim_fail(tr->err, tr->err_cap, SENSIM_EPROTO, "cannot encode the request: %s",
                       PB_GET_ERROR(&out));
  }
  for (int i = 0; i < FRAME_HEADER; i++) {
    tr->buf[i] = (uint8_t)(size >> (8 * i));
  }

  return io_all(tr, tr->buf, FRAME_HEADER + size, true, deadline_after(tr->timeout_ms));
}


sensim_status_t sensim_transport_recv(sensim_transport_t* tr, sensim_v1_Envelope* env) {
  if (tr->fd < 0) {
    return sensim_fail(tr->err, tr->err_cap, SENSIM_ECLOSED, "connection is closed");
  }
  int64_t deadline = deadline_after(tr->timeout_ms);

  // length prefix, checked before the buffer grows
  uint8_t header[FRAME_HEADER];
  sensim_status_t st = io_all(tr, header, sizeof(header), false, deadline);
  if (st != SENSIM_OK) {
    return st;
  }
  uint32_t len = (uint32_t)header[0] | (uint32_t)header[1] << 8 | (uint32_t)header[2] << 16 |
                 (uint32_t)header[3] << 24;
  if (len > tr->max_frame_bytes) {
    sensim_transport_close(tr);
    return sensim_fail(tr->err, tr->err_cap, SENSIM_EPROTO,
                       "daemon sent a frame of %u bytes, over max_frame_bytes %u", len,
                       tr->max_frame_bytes);
  }
  st = reserve(tr, len);
  if (st != SENSIM_OK) {
    sensim_transport_close(tr);
    return st;
  }

  // body
  st = io_all(tr, tr->buf, len, false, deadline);
  if (st != SENSIM_OK) {
    return st;
  }
  pb_istream_t in = pb_istream_from_buffer(tr->buf, len);
  if (!pb_decode(&in, sensim_v1_Envelope_fields, env)) {
    sensim_transport_close(tr);
    return sensim_fail(tr->err, tr->err_cap, SENSIM_EPROTO, "cannot decode a reply: %s",
                       PB_GET_ERROR(&in));
  }
  return SENSIM_OK;
}


void sensim_transport_close(sensim_transport_t* tr) {
  if (tr->fd >= 0) {
    close(tr->fd);
    tr->fd = -1;
  }
  free(tr->buf);
  tr->buf = NULL;
  tr->cap = 0;
}
