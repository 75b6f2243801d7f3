// SPDX-License-Identifier: MIT
// transport.c: the client's socket. Sends a gather with one sendmsg (the caller's arrays as
// iovecs), keeps what a nonblocking socket does not take in an output queue, receives into a
// read-ahead buffer, cuts frames (u32 little-endian length + Envelope) and hands each to
// sensim_client_on_frame. The socket is always non-blocking; waits poll against deadlines that
// cover whole calls, so a large frame cannot stretch a timeout. Any I/O failure closes it: a
// stream that lost a frame boundary cannot be trusted again.
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "internal.h"

#ifndef IOV_MAX
#define IOV_MAX 1024
#endif

// Reads of at least this many bytes go straight into their destination.
#define DIRECT_READ_BYTES 4096


// Wait until fd is ready for events or the deadline (-1 = none) passes. Returns the revents,
// 0 on timeout, -1 on a poll error (errno set).
static int wait_fd(int fd, short events, int64_t deadline) {
  for (;;) {
    int wait = -1;
    if (deadline >= 0) {
      int64_t left = deadline - sensim_now_ms();
      if (left < 0) {
        left = 0;
      }
      wait = left > 0x7fffffff ? 0x7fffffff : (int)left;
    }
    struct pollfd p = {.fd = fd, .events = events, .revents = 0};
    int n = poll(&p, 1, wait);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      return -1;
    }
    return n > 0 ? (p.revents ? p.revents : events) : 0;
  }
}


// Whether the deadline has passed; 0 ("now": a call that may not wait) has without a clock read.
static bool expired(int64_t deadline) {
  return deadline == 0 || (deadline > 0 && sensim_now_ms() >= deadline);
}


// Fail the connection: the message into the last error, every request in flight failed.
static sensim_status_t fail(sensim_client_t* cli, sensim_status_t st, const char* what, int err) {
  if (err != 0) {
    sensim_cli_fail(cli, st, "%s: %s", what, strerror(err));
  } else {
    sensim_cli_fail(cli, st, "%s", what);
  }
  sensim_client_fail_closed(cli, st);
  return st;
}


// Connect one resolved address without blocking past the deadline. Returns the connected
// non-blocking socket, or -1 with errno set (ETIMEDOUT on timeout).
static int connect_addr(const struct addrinfo* ai, int64_t deadline) {
  int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
  if (fd < 0) {
    return -1;
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

  // requests are small and latency matters more than batching
  int one = 1;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;

fail:;
  int saved = errno;
  close(fd);
  errno = saved;
  return -1;
}


sensim_status_t sensim_transport_connect(sensim_client_t* cli, const char* host, uint16_t port) {
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
    return sensim_cli_fail(cli, SENSIM_ECONNECT, "resolve %s: %s", host, gai_strerror(gai));
  }

  // try each address until one connects; report the last failure
  int64_t deadline = sensim_deadline(cli, -1);
  int err = 0;
  for (const struct addrinfo* ai = list; ai != NULL; ai = ai->ai_next) {
    int fd = connect_addr(ai, deadline);
    if (fd >= 0) {
      cli->fd = fd;
      break;
    }
    err = errno;
    if (err == ETIMEDOUT) {
      break;
    }
  }
  freeaddrinfo(list);
  if (cli->fd < 0) {
    sensim_status_t st = err == ETIMEDOUT ? SENSIM_ETIMEDOUT : SENSIM_ECONNECT;
    return sensim_cli_fail(cli, st, "connect to %s:%u: %s", host, (unsigned)port,
                           strerror(err));
  }
  cli->rbuf = malloc(CLIENT_RBUF_BYTES);
  if (!cli->rbuf) {
    return sensim_cli_fail(cli, SENSIM_ENOMEM, "out of memory for the receive buffer");
  }
  return SENSIM_OK;
}


void sensim_transport_close(sensim_client_t* cli) {
  if (cli->fd >= 0) {
    close(cli->fd);
    cli->fd = -1;
  }
  if (cli->big) {
    sensim_frame_put(cli, cli->big);
    cli->big = NULL;
  }
  cli->rstart = cli->rend = 0;
  cli->outq_len = cli->outq_off = 0;
  sensim_gather_reset(&cli->g);
}

//---------------- Receiving

static uint32_t le32(const uint8_t* p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}


// The raycast slot with a buffer that frame `id` answers, when it may be streamed now.
static slot_t* streamable(sensim_client_t* cli, const uint8_t* p, size_t avail, int* more) {
  uint64_t id;
  int r = sensim_wire_peek_id(p, avail, &id);
  *more = r == 0;
  if (r != 1) {
    return NULL;
  }
  slot_t* s = sensim_slot(cli, id);
  return s && s->kind == SLOT_RAYCAST && s->hits && !s->discard && !s->done ? s : NULL;
}


// Hand the complete frames of the read-ahead buffer to the client; start a large frame in a
// buffer of its own, or stream a raycast reply into its hits when a blocking call allows it.
static sensim_status_t drain(sensim_client_t* cli, bool* moved) {
  while (!cli->big && cli->fd >= 0) {
    size_t avail = cli->rend - cli->rstart;
    if (avail < FRAME_HEADER) {
      break;
    }
    const uint8_t* p = cli->rbuf + cli->rstart;
    uint32_t len = le32(p);
    if (len == 0 || len > cli->max_frame_in) {
      sensim_cli_fail(cli, SENSIM_EPROTO, "the daemon sent a frame of %u bytes (limit: "
                      "max_frame_bytes %u)", len, cli->max_frame_in);
      sensim_client_fail_closed(cli, SENSIM_EPROTO);
      return SENSIM_EPROTO;
    }
    avail -= FRAME_HEADER;
    if (avail >= len) {
      cli->rstart += FRAME_HEADER + (size_t)len;
      *moved = true;
      sensim_status_t st = sensim_client_on_frame(cli, NULL, p + FRAME_HEADER, len);
      if (st != SENSIM_OK) {
        return st;
      }
      continue;
    }

    // incomplete: a raycast reply goes straight into its hits during blocking calls
    if (cli->stream_ok) {
      int more = 0;
      slot_t* s = streamable(cli, p + FRAME_HEADER, avail, &more);
      if (more) {
        break;  // the id is not in yet
      }
      if (s) {
        cli->rstart += FRAME_HEADER;
        *moved = true;
        sensim_status_t st = sensim_raycast_stream(cli, s, len, cli->stream_deadline);
        if (st != SENSIM_OK) {
          return st;
        }
        continue;
      }
    }
    if (FRAME_HEADER + (size_t)len > CLIENT_RBUF_BYTES) {
      sensim_frame_t* f = sensim_frame_get(cli, len);
      if (!f) {
        return fail(cli, SENSIM_ENOMEM, "out of memory for a frame", 0);
      }
      f->len = len;
      memcpy(f->data, p + FRAME_HEADER, avail);
      cli->big = f;
      cli->big_have = avail;
      cli->rstart = cli->rend = 0;
    }
    break;
  }

  // keep the unread bytes at the front
  if (cli->rstart == cli->rend) {
    cli->rstart = cli->rend = 0;
  } else if (cli->rstart > 0 && cli->fd >= 0) {
    memmove(cli->rbuf, cli->rbuf + cli->rstart, cli->rend - cli->rstart);
    cli->rend -= cli->rstart;
    cli->rstart = 0;
  }
  return SENSIM_OK;
}


// One recv without waiting. SENSIM_OK (bytes came, *moved), SENSIM_EAGAIN (none), or a
// failure with the connection closed.
static sensim_status_t recv_once(sensim_client_t* cli, bool* moved) {
  uint8_t* dst;
  size_t room;
  if (cli->big) {
    dst = cli->big->data + cli->big_have;
    room = cli->big->len - cli->big_have;
  } else {
    dst = cli->rbuf + cli->rend;
    room = CLIENT_RBUF_BYTES - cli->rend;
  }
  ssize_t n;
  do {
    n = recv(cli->fd, dst, room, 0);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      cli->rx_empty = true;
      return SENSIM_EAGAIN;
    }
    if (errno == ECONNRESET) {
      return fail(cli, SENSIM_ECLOSED, "connection closed by the daemon (reset)", 0);
    }
    return fail(cli, SENSIM_EIO, "recv", errno);
  }
  if (n == 0) {
    return fail(cli, SENSIM_ECLOSED, cli->big || cli->rend > cli->rstart
                                         ? "connection closed by the daemon within a frame"
                                         : "connection closed by the daemon", 0);
  }
  *moved = true;
  cli->rx_empty = (size_t)n < room;  // a stream socket gives what it holds, up to room
  if (cli->big) {
    cli->big_have += (size_t)n;
    if (cli->big_have == cli->big->len) {
      sensim_frame_t* f = cli->big;
      cli->big = NULL;
      sensim_status_t st = sensim_client_on_frame(cli, f, f->data, f->len);
      if (st != SENSIM_OK) {
        return st;
      }
    }
  } else {
    cli->rend += (size_t)n;
  }
  return drain(cli, moved);
}


// Receive everything the socket holds now: until a recv finds it empty, or takes less than it
// asked for (what the socket held then; no second call only to hear EAGAIN).
static sensim_status_t recv_all(sensim_client_t* cli, bool* moved) {
  for (;;) {
    sensim_status_t st = recv_once(cli, moved);
    if (st == SENSIM_EAGAIN) {
      return SENSIM_OK;
    }
    if (st != SENSIM_OK || cli->fd < 0 || cli->rx_empty) {
      return st;
    }
  }
}


sensim_status_t sensim_transport_read(sensim_client_t* cli, uint8_t* dst, size_t n,
                                      int64_t deadline) {
  cli->rx_empty = false;  // what follows the frame may be in already
  while (n > 0) {
    if (cli->fd < 0) {
      return cli->closed_status != SENSIM_OK ? cli->closed_status : SENSIM_ECLOSED;
    }

    // what the read-ahead buffer holds
    size_t have = cli->rend - cli->rstart;
    if (have > 0) {
      size_t k = have < n ? have : n;
      if (dst) {
        memcpy(dst, cli->rbuf + cli->rstart, k);
        dst += k;
      }
      cli->rstart += k;
      n -= k;
      continue;
    }
    cli->rstart = cli->rend = 0;

    // then the socket: large reads in place, small ones through the buffer (one recv for
    // the rest of a frame's small fields)
    uint8_t* to = dst && n >= DIRECT_READ_BYTES ? dst : cli->rbuf;
    size_t room = to == dst ? n : CLIENT_RBUF_BYTES;
    ssize_t got;
    do {
      got = recv(cli->fd, to, room, 0);
    } while (got < 0 && errno == EINTR);
    if (got > 0) {
      if (to == dst) {
        dst += got;
        n -= (size_t)got;
      } else {
        cli->rend = (size_t)got;
      }
      continue;
    }
    if (got == 0) {
      return fail(cli, SENSIM_ECLOSED, "connection closed by the daemon within a frame", 0);
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      return fail(cli, errno == ECONNRESET ? SENSIM_ECLOSED : SENSIM_EIO, "recv", errno);
    }
    int ready = wait_fd(cli->fd, POLLIN, deadline);
    if (ready == 0) {
      return fail(cli, SENSIM_ETIMEDOUT, "timed out receiving a frame from the daemon", 0);
    }
    if (ready < 0) {
      return fail(cli, SENSIM_EIO, "poll", errno);
    }
  }
  return SENSIM_OK;
}

//---------------- Sending

static bool outq_append(sensim_client_t* cli, const void* p, size_t n) {
  if (cli->outq_off > 0 && cli->outq_off == cli->outq_len) {
    cli->outq_off = cli->outq_len = 0;
  }
  if (cli->outq_cap - cli->outq_len < n) {
    size_t cap = cli->outq_cap ? cli->outq_cap : 4096;
    while (cap - cli->outq_len < n) {
      cap *= 2;
    }
    uint8_t* q = realloc(cli->outq, cap);
    if (!q) {
      return false;
    }
    cli->outq = q;
    cli->outq_cap = cap;
  }
  memcpy(cli->outq + cli->outq_len, p, n);
  cli->outq_len += n;
  return true;
}


// The gather's segments from byte `skip` on: its own bytes and its holes, in order, as up to
// cap iovecs. Returns their number.
static int gather_iov(const sensim_gather_t* g, size_t skip, struct iovec* iov, int cap) {
  int n = 0;
  size_t own = 0;  // bytes of buf placed so far
  for (size_t h = 0; h <= g->nholes && n < cap; h++) {
    size_t end = h < g->nholes ? g->holes[h].at : g->len;
    const uint8_t* segs[2] = {g->buf + own, h < g->nholes ? g->holes[h].data : NULL};
    size_t lens[2] = {end - own, h < g->nholes ? g->holes[h].len : 0};
    own = end;
    for (int k = 0; k < 2 && n < cap; k++) {
      if (lens[k] <= skip) {
        skip -= lens[k];
        continue;
      }
      iov[n].iov_base = (void*)(segs[k] + skip);
      iov[n].iov_len = lens[k] - skip;
      skip = 0;
      n++;
    }
  }
  return n;
}


// Copy the gather's bytes from `from` on into the output queue.
static bool gather_to_outq(sensim_client_t* cli, size_t from) {
  struct iovec iov[64];
  for (;;) {
    int n = gather_iov(&cli->g, from, iov, 64);
    if (n == 0) {
      return true;
    }
    for (int i = 0; i < n; i++) {
      if (!outq_append(cli, iov[i].iov_base, iov[i].iov_len)) {
        return false;
      }
      from += iov[i].iov_len;
    }
  }
}


// Write as much as the socket takes now: the output queue first, then the gather from *sent.
// SENSIM_OK when everything is out, SENSIM_EAGAIN when the socket is full, or a failure.
static sensim_status_t write_now(sensim_client_t* cli, size_t* sent, bool* moved) {
  while (cli->outq_off < cli->outq_len) {
    ssize_t n = send(cli->fd, cli->outq + cli->outq_off, cli->outq_len - cli->outq_off,
                     MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        return SENSIM_EAGAIN;
      }
      return fail(cli, errno == EPIPE || errno == ECONNRESET ? SENSIM_ECLOSED : SENSIM_EIO,
                  "send", errno);
    }
    cli->outq_off += (size_t)n;
    *moved = true;
  }
  cli->outq_off = cli->outq_len = 0;
  while (*sent < cli->g.bytes) {
    struct iovec iov[IOV_MAX < 1024 ? IOV_MAX : 1024];
    int n = gather_iov(&cli->g, *sent, iov, (int)(sizeof(iov) / sizeof(iov[0])));
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
    ssize_t k = sendmsg(cli->fd, &mh, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) {
      continue;
    }
    if (k < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        return SENSIM_EAGAIN;
      }
      return fail(cli, errno == EPIPE || errno == ECONNRESET ? SENSIM_ECLOSED : SENSIM_EIO,
                  "send", errno);
    }
    *sent += (size_t)k;
    *moved = true;
  }
  return SENSIM_OK;
}


sensim_status_t sensim_transport_send(sensim_client_t* cli, int64_t deadline) {
  if (cli->fd < 0) {
    sensim_gather_reset(&cli->g);
    return sensim_cli_fail(cli, cli->closed_status ? cli->closed_status : SENSIM_ECLOSED,
                           "connection is closed%s%s", cli->closed_reason[0] ? ": " : "",
                           cli->closed_reason);
  }
  size_t sent = 0;
  sensim_status_t st = SENSIM_OK;
  for (;;) {
    bool moved = false;
    st = write_now(cli, &sent, &moved);
    if (st != SENSIM_EAGAIN) {
      break;
    }

    // the socket is full: nonblocking mode keeps the rest; blocking mode waits, reading
    // replies meanwhile so that a daemon that stopped reading until we do is not deadlocked
    if (cli->nonblocking) {
      if (!gather_to_outq(cli, sent)) {
        st = fail(cli, SENSIM_ENOMEM, "out of memory queueing a request", 0);
      } else {
        st = SENSIM_OK;
      }
      break;
    }
    int ready = wait_fd(cli->fd, POLLOUT | POLLIN, deadline);
    if (ready == 0) {
      st = fail(cli, SENSIM_ETIMEDOUT, "timed out sending a request (the daemon does not read)",
                0);
      break;
    }
    if (ready < 0) {
      st = fail(cli, SENSIM_EIO, "poll", errno);
      break;
    }
    if (ready & (POLLIN | POLLHUP | POLLERR)) {
      bool got = false;
      st = recv_all(cli, &got);
      if (st != SENSIM_OK || cli->fd < 0) {
        break;
      }
    }
  }
  sensim_gather_reset(&cli->g);
  return st;
}


sensim_status_t sensim_transport_pump(sensim_client_t* cli, int64_t deadline) {
  for (;;) {
    if (cli->fd < 0) {
      return cli->closed_status != SENSIM_OK ? cli->closed_status : SENSIM_ECLOSED;
    }
    bool moved = false;
    size_t none = 0;
    sensim_status_t st = SENSIM_OK;
    if (cli->outq_off < cli->outq_len) {
      st = write_now(cli, &none, &moved);
      if (st != SENSIM_OK && st != SENSIM_EAGAIN) {
        return st;
      }
    }
    // A socket the last recv emptied is polled first when the call may wait (a reply to a
    // request just sent is rarely in yet): poll and one recv, not a recv that finds nothing,
    // the poll, and the recv. A call that may not wait asks the socket at once.
    bool may_wait = !expired(deadline);
    if (!cli->rx_empty || !may_wait) {
      st = recv_all(cli, &moved);
      if (st != SENSIM_OK) {
        return st;
      }
    }
    if (moved) {
      return SENSIM_OK;
    }
    if (!may_wait) {
      return SENSIM_EAGAIN;
    }
    short events = POLLIN;
    if (cli->outq_off < cli->outq_len) {
      events |= POLLOUT;
    }
    int ready = wait_fd(cli->fd, events, deadline);
    if (ready < 0) {
      return fail(cli, SENSIM_EIO, "poll", errno);
    }
    if (ready == 0) {
      return SENSIM_EAGAIN;
    }
    if (ready & (POLLIN | POLLHUP | POLLERR)) {
      cli->rx_empty = false;  // readable, or an error or hang-up that the recv reports
    }
  }
}
