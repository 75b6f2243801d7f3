// SPDX-License-Identifier: MIT
// shard.c: sensors sharded over several daemons (sensim/shard.h): one client handle per
// daemon, requests for every shard sent to all of them before any reply is awaited (the scene
// calls through the handle's deferred status, a state's body encoded once and framed for each
// shard, the others through their *_send halves), the replies awaited within one deadline
// (status replies shard by shard, the last one sent first, each through its handle's own
// receive; step replies by one poll over the shards' sockets), step records merged in sensor
// id order, raycasts split in contiguous parts, and every failure reported naming its shard.
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "sensim/shard.h"

#define SHARD_ERROR_CAP 1024
#define SHARD_ADDRESS_CAP 300           // "[" host "]:" port, host at most 255 bytes
#define SHARD_SPLIT_MIN_RAYS 4096u      // fewer rays go whole to one shard
#define SHARD_DEFAULT_PORT 7700

// A sensor placed (before its creation) or created through the handle.
typedef struct shard_sensor {
  uint32_t id;
  uint32_t shard;
  bool created;
  uint32_t mark;                        // the step whose output_sensors listed it last
} shard_sensor_t;

struct sensim_shards {
  uint32_t n;
  sensim_client_t** cli;                // n handles (closed ones included)
  char (*host)[256];
  uint16_t* port;
  char (*name)[SHARD_ADDRESS_CAP];      // "host:port" for messages

  sensim_options_t opts;                // for reconnections, its strings owned below
  char* environment;
  char* token;
  char* client_name;

  int focus;                            // -1: every shard
  int failed;                           // the shard of the last failure, or -1
  uint32_t next_raycast, next_poll;     // the shard whose turn it is

  shard_sensor_t* sensors;              // sorted by id
  uint32_t nsensors, capsensors;
  uint32_t mark;

  // per shard, for one fan-out
  uint64_t* ids;                        // the request in flight (0: none)
  uint64_t* ids2;                       // the step of an update-and-step
  sensim_status_t* st;
  bool* sent;
  sensim_step_t* steps;
  const sensim_step_result_t** results;
  uint32_t* taken;                      // records of each result merged so far
  uint32_t* listed;                     // output_sensors regrouped by shard
  uint32_t listed_cap;

  struct pollfd* pfd;                   // the sockets awaited by one poll, and their shards
  uint32_t* pshard;
  sensim_gather_t body;                 // a request body encoded once for every shard

  sensim_sensor_data_t* merged;
  uint32_t merged_cap;
  sensim_step_result_t result;

  char err[SHARD_ERROR_CAP];
};


//---------------- Placement

// SplitMix64's finaliser: consecutive ids spread over all 64 bits.
static uint64_t shard_mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}


uint32_t sensim_shard_for(uint32_t sensor_id, uint32_t nshards) {
  // Lamping and Veach, "A Fast, Minimal Memory, Consistent Hash Algorithm" (2014): the key
  // jumps forward through the buckets, landing in bucket j of n + 1 with probability 1/(n+1).
  uint64_t key = shard_mix64(sensor_id);
  int64_t b = -1, j = 0;
  if (nshards == 0) {
    nshards = 1;
  }
  while (j < (int64_t)nshards) {
    b = j;
    key = key * 2862933555777941757ull + 1;
    j = (int64_t)((double)(b + 1) * ((double)(1ll << 31) / (double)((key >> 33) + 1)));
  }
  return (uint32_t)b;
}


// The index of sensor id in the sorted table, or where it would go (*found false).
static uint32_t sensor_find(const sensim_shards_t* sh, uint32_t id, bool* found) {
  uint32_t lo = 0, hi = sh->nsensors;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (sh->sensors[mid].id < id) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  *found = lo < sh->nsensors && sh->sensors[lo].id == id;
  return lo;
}


// The entry of sensor id, added (unplaced) when missing; NULL when memory ran out.
static shard_sensor_t* sensor_entry(sensim_shards_t* sh, uint32_t id) {
  bool found;
  uint32_t at = sensor_find(sh, id, &found);
  if (found) {
    return &sh->sensors[at];
  }
  if (sh->nsensors == sh->capsensors) {
    uint32_t cap = sh->capsensors ? 2 * sh->capsensors : 16;
    shard_sensor_t* grown = realloc(sh->sensors, cap * sizeof(*grown));
    if (!grown) {
      return NULL;
    }
    sh->sensors = grown;
    sh->capsensors = cap;
  }
  memmove(&sh->sensors[at + 1], &sh->sensors[at], (sh->nsensors - at) * sizeof(*sh->sensors));
  sh->nsensors++;
  sh->sensors[at] = (shard_sensor_t){.id = id, .shard = sensim_shard_for(id, sh->n)};
  return &sh->sensors[at];
}


static void sensor_forget(sensim_shards_t* sh, uint32_t id) {
  bool found;
  uint32_t at = sensor_find(sh, id, &found);
  if (found) {
    memmove(&sh->sensors[at], &sh->sensors[at + 1],
            (sh->nsensors - at - 1) * sizeof(*sh->sensors));
    sh->nsensors--;
  }
}


uint32_t sensim_shards_owner(const sensim_shards_t* sh, uint32_t sensor_id) {
  if (!sh) {
    return 0;
  }
  bool found;
  uint32_t at = sensor_find(sh, sensor_id, &found);
  return found ? sh->sensors[at].shard : sensim_shard_for(sensor_id, sh->n);
}


sensim_status_t sensim_shards_place(sensim_shards_t* sh, uint32_t sensor_id, uint32_t shard) {
  if (!sh) {
    return SENSIM_INVALID_ARGUMENT;
  }
  sh->failed = -1;
  if (shard >= sh->n) {
    snprintf(sh->err, sizeof(sh->err), "shard: %u is not a shard index in [0, %u)", shard, sh->n);
    return SENSIM_INVALID_ARGUMENT;
  }
  shard_sensor_t* e = sensor_entry(sh, sensor_id);
  if (!e) {
    snprintf(sh->err, sizeof(sh->err), "out of memory");
    return SENSIM_ENOMEM;
  }
  if (e->created && e->shard != shard) {
    snprintf(sh->err, sizeof(sh->err), "sensor_id: sensor %u exists on shard %u already",
             sensor_id, e->shard);
    return SENSIM_INVALID_ARGUMENT;
  }
  e->shard = shard;
  return SENSIM_OK;
}


//---------------- Handle

// Split "host:port", "[v6]:port" or "host" into host and port; false (err set) when malformed.
static bool parse_address(const char* a, char host[256], uint16_t* port, char* err, size_t cap) {
  const char* colon = NULL;
  const char* h = a;
  size_t hlen;
  if (!a || !*a) {
    snprintf(err, cap, "address: empty");
    return false;
  }
  if (a[0] == '[') {
    const char* end = strchr(a, ']');
    if (!end || (end[1] != '\0' && end[1] != ':')) {
      snprintf(err, cap, "address \"%s\": expected [v6 address] or [v6 address]:port", a);
      return false;
    }
    h = a + 1;
    hlen = (size_t)(end - h);
    colon = end[1] == ':' ? end + 1 : NULL;
  } else {
    colon = strchr(a, ':');
    if (colon && strchr(colon + 1, ':')) {
      snprintf(err, cap, "address \"%s\": an IPv6 address goes in brackets, [addr]:port", a);
      return false;
    }
    hlen = colon ? (size_t)(colon - a) : strlen(a);
  }
  if (hlen == 0 || hlen > 255) {
    snprintf(err, cap, "address \"%s\": host of %zu bytes, expected 1 to 255", a, hlen);
    return false;
  }
  memcpy(host, h, hlen);
  host[hlen] = '\0';
  *port = SHARD_DEFAULT_PORT;
  if (colon) {
    char* end;
    long p = strtol(colon + 1, &end, 10);
    if (colon[1] == '\0' || *end != '\0' || p < 1 || p > 65535) {
      snprintf(err, cap, "address \"%s\": port \"%s\" is not a number in 1..65535", a, colon + 1);
      return false;
    }
    *port = (uint16_t)p;
  }
  return true;
}


static void set_name(sensim_shards_t* sh, uint32_t i) {
  bool v6 = strchr(sh->host[i], ':') != NULL;
  snprintf(sh->name[i], sizeof(sh->name[i]), "%s%s%s:%u", v6 ? "[" : "", sh->host[i],
           v6 ? "]" : "", (unsigned)sh->port[i]);
}


static char* dup_str(const char* s) {
  return s ? strdup(s) : NULL;
}


// Connect shard i with the handle's options; on failure the message names it.
static sensim_status_t connect_shard(sensim_shards_t* sh, uint32_t i) {
  sensim_status_t st = sensim_client_connect(sh->host[i], sh->port[i], &sh->opts, &sh->cli[i]);
  if (st != SENSIM_OK) {
    sh->failed = (int)i;
    snprintf(sh->err, sizeof(sh->err), "shard %u (%s): %s: %s", i, sh->name[i],
             sensim_status_name(st), sh->cli[i] ? sensim_client_last_error(sh->cli[i]) : "");
  }
  return st;
}


sensim_status_t sensim_shards_connect(const char* const* addresses, uint32_t n,
                                      const sensim_options_t* opts, sensim_shards_t** out) {
  if (!out) {
    return SENSIM_INVALID_ARGUMENT;
  }
  sensim_shards_t* sh = calloc(1, sizeof(*sh));
  *out = sh;
  if (!sh) {
    return SENSIM_ENOMEM;
  }
  sh->focus = sh->failed = -1;
  sensim_options_init(&sh->opts);
  if (opts) {
    // refused as sensim_client_connect refuses it: options of another size would be read in
    // part (or not at all: the defaults, a token left out) without a word
    sensim_status_t st = sensim_sized_copy_err(sh->err, sizeof(sh->err), &sh->opts,
                                               sizeof(sh->opts), opts, "options",
                                               "sensim_options_init");
    if (st != SENSIM_OK) {
      return st;
    }
  }
  sh->environment = dup_str(sh->opts.environment);
  sh->token = dup_str(sh->opts.token);
  sh->client_name = dup_str(sh->opts.client_name);
  sh->opts.environment = sh->environment;
  sh->opts.token = sh->token;
  sh->opts.client_name = sh->client_name;
  if (n == 0 || !addresses) {
    snprintf(sh->err, sizeof(sh->err), "addresses: expected at least one daemon address");
    return SENSIM_INVALID_ARGUMENT;
  }
  sh->cli = calloc(n, sizeof(*sh->cli));
  sh->host = calloc(n, sizeof(*sh->host));
  sh->port = calloc(n, sizeof(*sh->port));
  sh->name = calloc(n, sizeof(*sh->name));
  sh->ids = calloc(n, sizeof(*sh->ids));
  sh->ids2 = calloc(n, sizeof(*sh->ids2));
  sh->st = calloc(n, sizeof(*sh->st));
  sh->sent = calloc(n, sizeof(*sh->sent));
  sh->steps = calloc(n, sizeof(*sh->steps));
  sh->results = calloc(n, sizeof(*sh->results));
  sh->taken = calloc(n, sizeof(*sh->taken));
  sh->pfd = calloc(n, sizeof(*sh->pfd));
  sh->pshard = calloc(n, sizeof(*sh->pshard));
  if (!sh->cli || !sh->host || !sh->port || !sh->name || !sh->ids || !sh->ids2 || !sh->st ||
      !sh->sent || !sh->steps || !sh->results || !sh->taken || !sh->pfd || !sh->pshard ||
      (opts && ((opts->environment && !sh->environment) || (opts->token && !sh->token) ||
                (opts->client_name && !sh->client_name)))) {
    snprintf(sh->err, sizeof(sh->err), "out of memory");
    return SENSIM_ENOMEM;
  }
  for (uint32_t i = 0; i < n; i++) {
    char what[64];
    if (!parse_address(addresses[i], sh->host[i], &sh->port[i], sh->err, sizeof(sh->err))) {
      snprintf(what, sizeof(what), "addresses[%u]: ", i);
      size_t w = strlen(what), e = strlen(sh->err);
      if (w + e < sizeof(sh->err)) {
        memmove(sh->err + w, sh->err, e + 1);
        memcpy(sh->err, what, w);
      }
      return SENSIM_INVALID_ARGUMENT;
    }
    set_name(sh, i);
  }
  sh->n = n;
  for (uint32_t i = 0; i < n; i++) {
    sensim_status_t st = connect_shard(sh, i);
    if (st != SENSIM_OK) {
      for (uint32_t j = 0; j < n; j++) {
        if (sh->cli[j]) {
          sensim_transport_close(sh->cli[j]);
        }
      }
      return st;
    }
  }
  return SENSIM_OK;
}


void sensim_shards_close(sensim_shards_t* sh) {
  if (!sh) {
    return;
  }
  for (uint32_t i = 0; sh->cli && i < sh->n; i++) {
    sensim_client_close(sh->cli[i]);
  }
  free(sh->cli);
  free(sh->host);
  free(sh->port);
  free(sh->name);
  free(sh->ids);
  free(sh->ids2);
  free(sh->st);
  free(sh->sent);
  free(sh->steps);
  free(sh->results);
  free(sh->taken);
  free(sh->pfd);
  free(sh->pshard);
  sensim_gather_free(&sh->body);
  free(sh->listed);
  free(sh->merged);
  free(sh->sensors);
  free(sh->environment);
  free(sh->token);
  free(sh->client_name);
  free(sh);
}


const char* sensim_shards_last_error(const sensim_shards_t* sh) {
  return sh ? sh->err : "";
}


int sensim_shards_failed(const sensim_shards_t* sh) {
  return sh ? sh->failed : -1;
}


uint32_t sensim_shards_count(const sensim_shards_t* sh) {
  return sh ? sh->n : 0;
}


sensim_client_t* sensim_shards_client(sensim_shards_t* sh, uint32_t index) {
  return sh && index < sh->n ? sh->cli[index] : NULL;
}


//---------------- Fan-out

// Start a call: no error yet.
static void begin(sensim_shards_t* sh) {
  sh->err[0] = '\0';
  sh->failed = -1;
  for (uint32_t i = 0; i < sh->n; i++) {
    sh->ids[i] = sh->ids2[i] = 0;
    sh->st[i] = SENSIM_OK;
    sh->sent[i] = false;
  }
}


// False (the shard's status set) for a shard left without a handle: memory ran out when it
// was connected.
static bool usable(sensim_shards_t* sh, uint32_t i) {
  if (sh->cli[i]) {
    return true;
  }
  sh->st[i] = SENSIM_ECLOSED;
  return false;
}


// A refusal of the handle itself (nothing sent anywhere).
static sensim_status_t refuse(sensim_shards_t* sh, sensim_status_t st, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
static sensim_status_t refuse(sensim_shards_t* sh, sensim_status_t st, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(sh->err, sizeof(sh->err), fmt, ap);
  va_end(ap);
  sh->failed = -1;
  return st;
}


// A description struct checked and copied as sensim_client's calls do (sensim_sized_copy): one
// of another struct_size would have its fields read at the wrong places, or not at all.
static sensim_status_t take_sized(sensim_shards_t* sh, void* local, size_t local_size,
                                  const void* given, const char* what, const char* init) {
  sensim_status_t st =
      sensim_sized_copy_err(sh->err, sizeof(sh->err), local, local_size, given, what, init);
  if (st != SENSIM_OK) {
    sh->failed = -1;
  }
  return st;
}


// The deadline of a fan-out: the options' timeout from now (-1: none).
static int64_t fan_deadline(const sensim_shards_t* sh) {
  return sh->opts.timeout_ms > 0 ? sensim_now_ms() + sh->opts.timeout_ms : -1;
}


// What is left of the deadline, for a wait: >= 0 ms, or -1 (none).
static int remaining(int64_t deadline) {
  if (deadline < 0) {
    return -1;
  }
  int64_t left = deadline - sensim_now_ms();
  return left > 0 ? (int)left : 0;
}


// The wait for shard i's request id once await_all returned: none when its reply is in (then
// without a clock read), else what is left of the deadline.
static int left_for(sensim_shards_t* sh, uint32_t i, uint64_t id, int64_t deadline) {
  const slot_t* s = sensim_slot(sh->cli[i], id);
  return s && s->done ? 0 : remaining(deadline);
}


// A wait that ran past the shared deadline: the reply will not come in time, the connection
// is closed as the handle's own timeout would close it.
static sensim_status_t timed_out(sensim_shards_t* sh, uint32_t i) {
  sensim_cli_fail(sh->cli[i], SENSIM_ETIMEDOUT, "no reply within %d ms", sh->opts.timeout_ms);
  sensim_client_fail_closed(sh->cli[i], SENSIM_ETIMEDOUT);
  return SENSIM_ETIMEDOUT;
}


// The slot of the reply shard i's wait ends with (ids2[i] when set: the last of two), when it
// was sent a request, is still connected and that reply is not complete yet; else NULL.
static const slot_t* pending(sensim_shards_t* sh, uint32_t i) {
  sensim_client_t* cli = sh->cli[i];
  if (!sh->sent[i] || !cli || cli->fd < 0) {
    return NULL;
  }
  const slot_t* s = sensim_slot(cli, sh->ids2[i] ? sh->ids2[i] : sh->ids[i]);
  return s && !s->done ? s : NULL;
}


// Receive the status replies of the shards in [lo, hi) one shard after the other, the last
// one sent first, each through its handle's own wait (a blocking recv when the socket blocks:
// no poll). The last request sent is usually the last answered: one sleep tends to cover every
// reply, the others are in when their turn comes, and a reply that finds no one asleep on its
// socket spares its daemon a wake-up. False (nothing received) when a request is still queued
// on a nonblocking handle: only the poll of await_all sends it meanwhile. Not for steps: a
// shard read last could stall meanwhile on a socket full of its large reply.
static bool await_in_turn(sensim_shards_t* sh, uint32_t lo, uint32_t hi, int64_t deadline) {
  for (uint32_t i = lo; i < hi; i++) {
    if (pending(sh, i) && sh->cli[i]->outq_off < sh->cli[i]->outq_len) {
      return false;
    }
  }
  for (uint32_t i = hi; i-- > lo;) {
    while (pending(sh, i)) {
      if (sensim_transport_pump(sh->cli[i], deadline) != SENSIM_OK) {
        break;                          // past the deadline or failed: the waits report it
      }
    }
  }
  return true;
}


// Receive the replies of the shards in [lo, hi) that were sent a request (ids[i], or ids2[i]
// when set: the last of two), all at once: one poll over the sockets of those whose reply is
// not complete yet, each socket that is ready read without waiting, until every reply is
// complete, a connection failed or the deadline passed. The replies are then collected by the
// handle's own waits, which find them complete (or time out at once).
static void await_all(sensim_shards_t* sh, uint32_t lo, uint32_t hi, int64_t deadline) {
  for (;;) {
    nfds_t nfds = 0;
    for (uint32_t i = lo; i < hi; i++) {
      if (pending(sh, i)) {
        // a nonblocking handle may hold part of the request still: sent as the socket takes it
        const sensim_client_t* cli = sh->cli[i];
        short events = cli->outq_off < cli->outq_len ? POLLIN | POLLOUT : POLLIN;
        sh->pfd[nfds] = (struct pollfd){.fd = cli->fd, .events = events};
        sh->pshard[nfds++] = i;
      }
    }
    int left = remaining(deadline);
    if (nfds == 0 || left == 0) {
      return;
    }
    int ready = poll(sh->pfd, nfds, left);
    if (ready < 0 && errno != EINTR) {
      return;                           // the waits report the failure
    }
    // No turn of this loop spins: POLLOUT is asked for only while a queue holds bytes, a
    // ready socket's pump sends until the socket is full and reads what arrived (a hang-up or
    // an error closes the connection, which leaves the set), so the next poll sleeps until
    // a socket takes more or a reply comes (shard_frozen_nonblocking_waits_asleep)
    for (nfds_t k = 0; ready > 0 && k < nfds; k++) {
      if (sh->pfd[k].revents) {
        // a failed connection fails its requests, which the waits then report
        (void)sensim_transport_pump(sh->cli[sh->pshard[k]], 0);
      }
    }
  }
}


// The outcome of a fan-out over the shards in [lo, hi): OK, or the first failure's status
// with a message naming it, the other failures, and the shards that accepted the request.
static sensim_status_t report(sensim_shards_t* sh, uint32_t lo, uint32_t hi) {
  int first = -1;
  size_t len = 0;
  for (uint32_t i = lo; i < hi; i++) {
    if (sh->st[i] == SENSIM_OK) {
      continue;
    }
    const char* msg = sh->cli[i] ? sensim_client_last_error(sh->cli[i]) : "not connected";
    len += (size_t)snprintf(sh->err + len, sizeof(sh->err) - len, "%sshard %u (%s): %s%s%s",
                            first < 0 ? "" : "; also ", i, sh->name[i],
                            sensim_status_name(sh->st[i]), *msg ? ": " : "", msg);
    if (len >= sizeof(sh->err)) {
      len = sizeof(sh->err) - 1;
    }
    if (first < 0) {
      first = (int)i;
    }
  }
  if (first < 0) {
    return SENSIM_OK;
  }
  // the shards that accepted it, which are now ahead: " (shards 0, 2 accepted it)"
  uint32_t accepted = 0;
  for (uint32_t i = lo; i < hi; i++) {
    accepted += sh->st[i] == SENSIM_OK && sh->sent[i];
  }
  uint32_t listed = 0;
  for (uint32_t i = lo; i < hi && accepted; i++) {
    if (sh->st[i] == SENSIM_OK && sh->sent[i]) {
      len += (size_t)snprintf(sh->err + len, sizeof(sh->err) - len, "%s%u",
                              listed++ ? ", " : accepted > 1 ? " (shards " : " (shard ", i);
      if (len >= sizeof(sh->err)) {
        len = sizeof(sh->err) - 1;
      }
    }
  }
  if (accepted) {
    snprintf(sh->err + len, sizeof(sh->err) - len, " accepted it)");
  }
  sh->failed = first;
  return sh->st[first];
}


// The shards a fan-out reaches: `only` (>= 0), else the focused one, else all.
static void targets(const sensim_shards_t* sh, int only, uint32_t* lo, uint32_t* hi) {
  int one = only >= 0 ? only : sh->focus;
  *lo = one >= 0 ? (uint32_t)one : 0;
  *hi = one >= 0 ? (uint32_t)one + 1 : sh->n;
}


typedef sensim_status_t (*shard_call_t)(sensim_client_t* cli, const void* a, const void* b,
                                        uint32_t x);

// Call fn on every target shard with its status reply deferred, then await every reply within
// one deadline.
static sensim_status_t fan(sensim_shards_t* sh, int only, shard_call_t fn, const void* a,
                           const void* b, uint32_t x) {
  uint32_t lo, hi;
  begin(sh);
  targets(sh, only, &lo, &hi);
  for (uint32_t i = lo; i < hi; i++) {
    if (!usable(sh, i)) {
      continue;
    }
    sensim_client_t* cli = sh->cli[i];
    cli->deferred = &sh->ids[i];
    sensim_status_t st = fn(cli, a, b, x);
    cli->deferred = NULL;
    if (st != SENSIM_OK && i == lo && st < SENSIM_EIO) {
      // the arguments, refused before anything was sent: the same for every shard
      return refuse(sh, st, "%s", sensim_client_last_error(cli));
    }
    sh->st[i] = st;
    sh->sent[i] = st == SENSIM_OK;
  }
  int64_t deadline = fan_deadline(sh);
  if (!await_in_turn(sh, lo, hi, deadline)) {
    await_all(sh, lo, hi, deadline);
  }
  for (uint32_t i = lo; i < hi; i++) {
    if (!sh->sent[i]) {
      continue;
    }
    sensim_status_t st = sensim_wait(sh->cli[i], sh->ids[i],
                                     left_for(sh, i, sh->ids[i], deadline));
    sh->st[i] = st == SENSIM_EAGAIN ? timed_out(sh, i) : st;
  }
  return report(sh, lo, hi);
}


//---------------- The scene

static sensim_status_t call_mesh(sensim_client_t* c, const void* a, const void* b, uint32_t x) {
  (void)b, (void)x;
  return sensim_create_mesh(c, a);
}
static sensim_status_t call_primitive(sensim_client_t* c, const void* a, const void* b,
                                      uint32_t x) {
  (void)b, (void)x;
  return sensim_create_primitive(c, a);
}
static sensim_status_t call_material(sensim_client_t* c, const void* a, const void* b,
                                     uint32_t x) {
  (void)b, (void)x;
  return sensim_set_material(c, a);
}
static sensim_status_t call_ambient(sensim_client_t* c, const void* a, const void* b, uint32_t x) {
  (void)b, (void)x;
  return sensim_set_ambient(c, a);
}
static sensim_status_t call_environment(sensim_client_t* c, const void* a, const void* b,
                                        uint32_t x) {
  (void)b, (void)x;
  return sensim_set_environment(c, a);
}
static sensim_status_t call_body(sensim_client_t* c, const void* a, const void* b, uint32_t x) {
  (void)b, (void)x;
  return sensim_create_body(c, a);
}
static sensim_status_t call_object(sensim_client_t* c, const void* a, const void* b, uint32_t x) {
  (void)b, (void)x;
  return sensim_create_object(c, a);
}
static sensim_status_t call_joint(sensim_client_t* c, const void* a, const void* b, uint32_t x) {
  (void)b, (void)x;
  return sensim_create_joint(c, a);
}
static sensim_status_t call_remove(sensim_client_t* c, const void* a, const void* b, uint32_t x) {
  (void)b;
  return sensim_remove(c, *(const sensim_entity_t*)a, x);
}

// A NULL handle has no error message to hold: the status alone. A handle without shards (its
// connect refused the arguments or ran out of memory) is closed: no call reaches a shard.
#define SHARDS_CHECK(sh)                                                                   \
  do {                                                                                     \
    if (!(sh)) {                                                                           \
      return SENSIM_INVALID_ARGUMENT;                                                      \
    }                                                                                      \
    if ((sh)->n == 0) {                                                                    \
      return refuse((sh), SENSIM_ECLOSED, "no shard is connected: sensim_shards_connect "  \
                    "failed");                                                             \
    }                                                                                      \
  } while (0)

sensim_status_t sensim_shards_create_mesh(sensim_shards_t* sh, const sensim_mesh_t* mesh) {
  SHARDS_CHECK(sh);
  return fan(sh, -1, call_mesh, mesh, NULL, 0);
}

sensim_status_t sensim_shards_create_primitive(sensim_shards_t* sh,
                                               const sensim_primitive_t* prim) {
  SHARDS_CHECK(sh);
  return fan(sh, -1, call_primitive, prim, NULL, 0);
}

sensim_status_t sensim_shards_set_material(sensim_shards_t* sh, const sensim_material_t* mat) {
  SHARDS_CHECK(sh);
  return fan(sh, -1, call_material, mat, NULL, 0);
}

sensim_status_t sensim_shards_set_ambient(sensim_shards_t* sh, const sensim_ambient_t* amb) {
  SHARDS_CHECK(sh);
  return fan(sh, -1, call_ambient, amb, NULL, 0);
}

sensim_status_t sensim_shards_set_environment(sensim_shards_t* sh,
                                              const sensim_environment_t* env) {
  SHARDS_CHECK(sh);
  return fan(sh, -1, call_environment, env, NULL, 0);
}

sensim_status_t sensim_shards_create_body(sensim_shards_t* sh, const sensim_body_t* body) {
  SHARDS_CHECK(sh);
  return fan(sh, -1, call_body, body, NULL, 0);
}

sensim_status_t sensim_shards_create_object(sensim_shards_t* sh, const sensim_object_t* obj) {
  SHARDS_CHECK(sh);
  return fan(sh, -1, call_object, obj, NULL, 0);
}

sensim_status_t sensim_shards_create_joint(sensim_shards_t* sh, const sensim_joint_t* joint) {
  SHARDS_CHECK(sh);
  return fan(sh, -1, call_joint, joint, NULL, 0);
}

sensim_status_t sensim_shards_remove(sensim_shards_t* sh, sensim_entity_t kind, uint32_t id) {
  SHARDS_CHECK(sh);
  if (kind != SENSIM_ENTITY_SENSOR) {
    return fan(sh, -1, call_remove, &kind, NULL, id);
  }
  uint32_t owner = sensim_shards_owner(sh, id);
  if (sh->focus >= 0 && (uint32_t)sh->focus != owner) {
    begin(sh);
    return SENSIM_OK;
  }
  sensim_status_t st = fan(sh, (int)owner, call_remove, &kind, NULL, id);
  if (st == SENSIM_OK) {
    sensor_forget(sh, id);
  }
  return st;
}


//---------------- Sensors

static sensim_status_t call_lidar(sensim_client_t* c, const void* a, const void* b, uint32_t x) {
  (void)x;
  return sensim_create_lidar(c, a, b);
}
static sensim_status_t call_imu(sensim_client_t* c, const void* a, const void* b, uint32_t x) {
  (void)x;
  return sensim_create_imu(c, a, b);
}
static sensim_status_t call_encoder(sensim_client_t* c, const void* a, const void* b,
                                    uint32_t x) {
  (void)x;
  return sensim_create_encoder(c, a, b);
}
static sensim_status_t call_odometer(sensim_client_t* c, const void* a, const void* b,
                                     uint32_t x) {
  (void)x;
  return sensim_create_odometer(c, a, b);
}
static sensim_status_t call_cone(sensim_client_t* c, const void* a, const void* b, uint32_t x) {
  (void)x;
  return sensim_create_cone(c, a, b);
}
static sensim_status_t call_subscribe(sensim_client_t* c, const void* a, const void* b,
                                      uint32_t x) {
  (void)b, (void)x;
  return sensim_subscribe(c, a);
}
static sensim_status_t call_unsubscribe(sensim_client_t* c, const void* a, const void* b,
                                        uint32_t x) {
  (void)a, (void)b;
  return sensim_unsubscribe(c, x);
}


// Create a sensor on its shard (skipped, OK, when another shard is focused).
static sensim_status_t create_sensor(sensim_shards_t* sh, shard_call_t fn,
                                     const sensim_sensor_t* sensor, const void* cfg) {
  SHARDS_CHECK(sh);
  uint32_t id = sensor ? sensor->id : 0;
  uint32_t owner = sensim_shards_owner(sh, id);
  if (sh->focus >= 0 && (uint32_t)sh->focus != owner) {
    begin(sh);
    return SENSIM_OK;
  }
  sensim_status_t st = fan(sh, (int)owner, fn, sensor, cfg, 0);
  if (st == SENSIM_OK) {
    shard_sensor_t* e = sensor_entry(sh, id);
    if (!e) {
      return refuse(sh, SENSIM_ENOMEM, "out of memory (sensor %u was created on shard %u)", id,
                    owner);
    }
    e->shard = owner;
    e->created = true;
  }
  return st;
}

sensim_status_t sensim_shards_create_lidar(sensim_shards_t* sh, const sensim_sensor_t* sensor,
                                           const sensim_lidar_config_t* cfg) {
  return create_sensor(sh, call_lidar, sensor, cfg);
}

sensim_status_t sensim_shards_create_imu(sensim_shards_t* sh, const sensim_sensor_t* sensor,
                                         const sensim_imu_config_t* cfg) {
  return create_sensor(sh, call_imu, sensor, cfg);
}

sensim_status_t sensim_shards_create_encoder(sensim_shards_t* sh, const sensim_sensor_t* sensor,
                                             const sensim_encoder_config_t* cfg) {
  return create_sensor(sh, call_encoder, sensor, cfg);
}

sensim_status_t sensim_shards_create_odometer(sensim_shards_t* sh, const sensim_sensor_t* sensor,
                                              const sensim_odometer_config_t* cfg) {
  return create_sensor(sh, call_odometer, sensor, cfg);
}

sensim_status_t sensim_shards_create_cone(sensim_shards_t* sh, const sensim_sensor_t* sensor,
                                          const sensim_cone_config_t* cfg) {
  return create_sensor(sh, call_cone, sensor, cfg);
}

sensim_status_t sensim_shards_subscribe(sensim_shards_t* sh, const sensim_subscription_t* sub) {
  SHARDS_CHECK(sh);
  uint32_t owner = sensim_shards_owner(sh, sub ? sub->sensor_id : 0);
  if (sh->focus >= 0 && (uint32_t)sh->focus != owner) {
    begin(sh);
    return SENSIM_OK;
  }
  return fan(sh, (int)owner, call_subscribe, sub, NULL, 0);
}

sensim_status_t sensim_shards_unsubscribe(sensim_shards_t* sh, uint32_t sensor_id) {
  SHARDS_CHECK(sh);
  uint32_t owner = sensim_shards_owner(sh, sensor_id);
  if (sh->focus >= 0 && (uint32_t)sh->focus != owner) {
    begin(sh);
    return SENSIM_OK;
  }
  return fan(sh, (int)owner, call_unsubscribe, NULL, NULL, sensor_id);
}


sensim_status_t sensim_shards_next_sensor_data(sensim_shards_t* sh, int timeout_ms,
                                               const sensim_sensor_data_t** out) {
  SHARDS_CHECK(sh);
  begin(sh);
  if (!out) {
    return refuse(sh, SENSIM_INVALID_ARGUMENT, "out: NULL");
  }
  *out = NULL;
  if (sh->focus >= 0) {
    return refuse(sh, SENSIM_INVALID_ARGUMENT, "next_sensor_data: the handle is focused on "
                  "shard %d; sensim_shards_focus(sh, -1) first", sh->focus);
  }
  int64_t deadline = timeout_ms < 0 ? fan_deadline(sh) : sensim_now_ms() + timeout_ms;
  struct pollfd fds[64];
  for (;;) {
    for (uint32_t k = 0; k < sh->n; k++) {
      uint32_t i = (sh->next_poll + k) % sh->n;
      if (!usable(sh, i)) {
        return report(sh, i, i + 1);
      }
      sensim_status_t st = sensim_next_sensor_data(sh->cli[i], 0, out);
      if (st == SENSIM_OK) {
        sh->next_poll = (i + 1) % sh->n;
        return SENSIM_OK;
      }
      if (st != SENSIM_EAGAIN) {
        sh->st[i] = st;
        return report(sh, i, i + 1);
      }
    }
    int left = remaining(deadline);
    if (left == 0) {
      return refuse(sh, SENSIM_EAGAIN, "no record arrived");
    }
    // wait for any shard's socket (the first 64: a longer list is polled in turn)
    nfds_t nfds = 0;
    for (uint32_t k = 0; k < sh->n && nfds < 64; k++) {
      sensim_client_t* cli = sh->cli[(sh->next_poll + k) % sh->n];
      int fd = cli ? sensim_client_fd(cli) : -1;
      if (fd >= 0) {
        fds[nfds++] = (struct pollfd){.fd = fd, .events = POLLIN};
      }
    }
    if (nfds == 0) {
      return refuse(sh, SENSIM_ECLOSED, "every shard's connection is closed");
    }
    poll(fds, nfds, sh->n > 64 && (left < 0 || left > 10) ? 10 : left);
  }
}


//---------------- Time

// Check the state and encode its UpdateState body into sh->body, once for the shards in
// [lo, hi): checked through the first one's handle, whose message a refusal carries.
static sensim_status_t encode_state_once(sensim_shards_t* sh, uint32_t lo, uint32_t hi,
                                         const sensim_state_t* state) {
  for (uint32_t i = lo; i < hi; i++) {
    if (sh->cli[i]) {
      sensim_status_t st = sensim_state_body(sh->cli[i], state, &sh->body);
      return st == SENSIM_OK ? st : refuse(sh, st, "%s", sensim_client_last_error(sh->cli[i]));
    }
  }
  return SENSIM_OK;
}


// Queue the encoded state (sh->body) for shard i under a request id of its own (ids[i]).
static sensim_status_t queue_state(sensim_shards_t* sh, uint32_t i) {
  return sensim_queue_body(sh->cli[i], sensim_v1_Envelope_update_state_tag, &sh->body,
                           SLOT_STATUS, &sh->ids[i]);
}


// Send shard i the encoded state and its own step in one write (as
// sensim_update_and_step_send does). A step refused before anything was sent takes the queued
// state back with it: the gather returns to its marks before the state, so frames queued
// earlier stay queued.
static sensim_status_t send_state_and_step(sensim_shards_t* sh, uint32_t i) {
  sensim_client_t* cli = sh->cli[i];
  size_t len = cli->g.len, nholes = cli->g.nholes, bytes = cli->g.bytes;
  sensim_status_t st = queue_state(sh, i);
  if (st != SENSIM_OK) {
    return st;
  }
  st = sensim_step_send(cli, &sh->steps[i], &sh->ids2[i]);
  if (st != SENSIM_OK && cli->g.bytes > bytes) {
    cli->g.len = len;
    cli->g.nholes = nholes;
    cli->g.bytes = bytes;
    sensim_slot_free(cli, sensim_slot(cli, sh->ids[i]), false);
  }
  return st;
}


sensim_status_t sensim_shards_update_state(sensim_shards_t* sh, const sensim_state_t* state) {
  SHARDS_CHECK(sh);
  // the body is encoded once and framed for each shard with its own request id; every shard
  // is sent its request before any reply is awaited
  uint32_t lo, hi;
  begin(sh);
  targets(sh, -1, &lo, &hi);
  sensim_status_t rc = encode_state_once(sh, lo, hi, state);
  if (rc != SENSIM_OK) {
    return rc;
  }
  // one deadline for the sends and the replies: one clock read, not one more per shard
  int64_t deadline = fan_deadline(sh);
  for (uint32_t i = lo; i < hi; i++) {
    if (!usable(sh, i)) {
      continue;
    }
    sensim_client_t* cli = sh->cli[i];
    sensim_status_t st = queue_state(sh, i);
    if (st == SENSIM_OK) {
      st = sensim_transport_send(cli, deadline);
    }
    if (st != SENSIM_OK && i == lo && st < SENSIM_EIO) {
      return refuse(sh, st, "%s", sensim_client_last_error(cli));
    }
    sh->st[i] = st;
    sh->sent[i] = st == SENSIM_OK;
  }
  if (!await_in_turn(sh, lo, hi, deadline)) {
    await_all(sh, lo, hi, deadline);
  }
  for (uint32_t i = lo; i < hi; i++) {
    if (sh->sent[i]) {
      sensim_status_t st = sensim_wait(sh->cli[i], sh->ids[i],
                                     left_for(sh, i, sh->ids[i], deadline));
      sh->st[i] = st == SENSIM_EAGAIN ? timed_out(sh, i) : st;
    }
  }
  return report(sh, lo, hi);
}


// Each shard's Step: the listed sensors regrouped by shard (NONE for a shard with none of
// them). INVALID_ARGUMENT naming the entry for a sensor unknown here or listed twice.
static sensim_status_t split_step(sensim_shards_t* sh, const sensim_step_t* given) {
  sensim_step_t step;
  sensim_status_t st = take_sized(sh, &step, sizeof(step), given, "step", "sensim_step_init");
  if (st != SENSIM_OK) {
    return st;
  }
  for (uint32_t i = 0; i < sh->n; i++) {
    sh->steps[i] = step;
  }
  if (step.outputs != SENSIM_STEP_OUTPUTS_LISTED) {
    return SENSIM_OK;
  }
  uint32_t m = step.noutput_sensors;
  if (m && !step.output_sensors) {
    return refuse(sh, SENSIM_INVALID_ARGUMENT, "step.output_sensors: NULL with "
                  "noutput_sensors = %u", m);
  }
  // distinct sensors known to the handle: the count first, before the ids are read or room
  // is made for them
  if (m > sh->nsensors) {
    return refuse(sh, SENSIM_INVALID_ARGUMENT, "step.noutput_sensors = %u: more than the %u "
                  "sensors placed or created through these shards", m, sh->nsensors);
  }
  if (m > sh->listed_cap) {
    uint32_t* grown = realloc(sh->listed, m * sizeof(*grown));
    if (!grown) {
      return refuse(sh, SENSIM_ENOMEM, "out of memory");
    }
    sh->listed = grown;
    sh->listed_cap = m;
  }
  // count per shard, checking each id once (mark: this step's number)
  sh->mark++;
  for (uint32_t i = 0; i < sh->n; i++) {
    sh->steps[i].noutput_sensors = 0;
  }
  for (uint32_t k = 0; k < m; k++) {
    bool found;
    uint32_t at = sensor_find(sh, step.output_sensors[k], &found);
    if (!found || !sh->sensors[at].created) {
      return refuse(sh, SENSIM_INVALID_ARGUMENT, "step.output_sensors[%u] = %u is not a sensor "
                    "created through these shards", k, step.output_sensors[k]);
    }
    if (sh->sensors[at].mark == sh->mark) {
      return refuse(sh, SENSIM_INVALID_ARGUMENT, "step.output_sensors[%u] = %u is repeated", k,
                    step.output_sensors[k]);
    }
    sh->sensors[at].mark = sh->mark;
    sh->steps[sh->sensors[at].shard].noutput_sensors++;
  }
  uint32_t start = 0;
  for (uint32_t i = 0; i < sh->n; i++) {
    sh->steps[i].output_sensors = sh->listed + start;
    start += sh->steps[i].noutput_sensors;
    sh->steps[i].noutput_sensors = 0;
  }
  for (uint32_t k = 0; k < m; k++) {
    sensim_step_t* s = &sh->steps[sensim_shards_owner(sh, step.output_sensors[k])];
    ((uint32_t*)s->output_sensors)[s->noutput_sensors++] = step.output_sensors[k];
  }
  for (uint32_t i = 0; i < sh->n; i++) {
    if (sh->steps[i].noutput_sensors == 0) {
      sh->steps[i].outputs = SENSIM_STEP_OUTPUTS_NONE;
      sh->steps[i].output_sensors = NULL;
    }
  }
  return SENSIM_OK;
}


// Merge the shards' records in sensor id order (each shard's are in that order already).
static sensim_status_t merge(sensim_shards_t* sh) {
  uint64_t total = 0, index = 0;
  for (uint32_t i = 0; i < sh->n; i++) {
    total += sh->results[i]->noutputs;
    index = sh->results[i]->step > index ? sh->results[i]->step : index;
    sh->taken[i] = 0;
  }
  if (total > sh->merged_cap) {
    sensim_sensor_data_t* grown = realloc(sh->merged, total * sizeof(*grown));
    if (!grown) {
      return refuse(sh, SENSIM_ENOMEM, "out of memory merging %llu records",
                    (unsigned long long)total);
    }
    sh->merged = grown;
    sh->merged_cap = (uint32_t)total;
  }
  for (uint64_t k = 0; k < total; k++) {
    int best = -1;
    for (uint32_t i = 0; i < sh->n; i++) {
      if (sh->taken[i] < sh->results[i]->noutputs &&
          (best < 0 || sh->results[i]->outputs[sh->taken[i]].sensor_id <
                           sh->results[best]->outputs[sh->taken[best]].sensor_id)) {
        best = (int)i;
      }
    }
    sh->merged[k] = sh->results[best]->outputs[sh->taken[best]++];
  }
  sh->result = (sensim_step_result_t){.time = sh->results[0]->time, .step = index,
                                      .noutputs = (uint32_t)total, .outputs = sh->merged};
  return SENSIM_OK;
}


static sensim_status_t tick(sensim_shards_t* sh, const sensim_state_t* state,
                            const sensim_step_t* step, const sensim_step_result_t** out) {
  SHARDS_CHECK(sh);
  begin(sh);
  if (!out) {
    return refuse(sh, SENSIM_INVALID_ARGUMENT, "out: NULL");
  }
  *out = NULL;
  if (sh->focus >= 0) {
    return refuse(sh, SENSIM_INVALID_ARGUMENT, "step: the handle is focused on shard %d; "
                  "sensim_shards_focus(sh, -1) first", sh->focus);
  }
  sensim_status_t st = split_step(sh, step);
  if (st == SENSIM_OK && state) {
    st = encode_state_once(sh, 0, sh->n, state);
  }
  if (st != SENSIM_OK) {
    return st;
  }
  for (uint32_t i = 0; i < sh->n; i++) {
    if (!usable(sh, i)) {
      continue;
    }
    st = state ? send_state_and_step(sh, i) : sensim_step_send(sh->cli[i], &sh->steps[i],
                                                               &sh->ids2[i]);
    if (st != SENSIM_OK && i == 0 && st < SENSIM_EIO) {
      return refuse(sh, st, "%s", sensim_client_last_error(sh->cli[i]));
    }
    sh->st[i] = st;
    sh->sent[i] = st == SENSIM_OK;
  }
  int64_t deadline = fan_deadline(sh);
  await_all(sh, 0, sh->n, deadline);
  for (uint32_t i = 0; i < sh->n; i++) {
    if (!sh->sent[i]) {
      continue;
    }
    sensim_status_t s1 = SENSIM_OK, s2;
    if (state) {
      s1 = sensim_wait(sh->cli[i], sh->ids[i], left_for(sh, i, sh->ids[i], deadline));
      if (s1 == SENSIM_EAGAIN) {
        sh->st[i] = timed_out(sh, i);
        continue;
      }
    }
    char refused[CLIENT_ERROR_CAP];
    snprintf(refused, sizeof(refused), "%s", sensim_client_last_error(sh->cli[i]));
    s2 = sensim_step_wait(sh->cli[i], sh->ids2[i], left_for(sh, i, sh->ids2[i], deadline),
                          &sh->results[i]);
    if (s2 == SENSIM_EAGAIN) {
      s2 = timed_out(sh, i);
    }
    if (s1 != SENSIM_OK) {
      // a refused state is reported first, as sensim_update_and_step does
      sensim_cli_fail(sh->cli[i], s1, "%s", refused);
    }
    sh->st[i] = s1 != SENSIM_OK ? s1 : s2;
  }
  st = report(sh, 0, sh->n);
  if (st == SENSIM_OK) {
    st = merge(sh);
  }
  if (st != SENSIM_OK) {
    return st;
  }
  *out = &sh->result;
  return SENSIM_OK;
}

sensim_status_t sensim_shards_step(sensim_shards_t* sh, const sensim_step_t* step,
                                   const sensim_step_result_t** out) {
  return tick(sh, NULL, step, out);
}

sensim_status_t sensim_shards_update_and_step(sensim_shards_t* sh, const sensim_state_t* state,
                                              const sensim_step_t* step,
                                              const sensim_step_result_t** out) {
  if (sh && !state) {
    begin(sh);
    return refuse(sh, SENSIM_INVALID_ARGUMENT, "state: NULL");
  }
  return tick(sh, state, step, out);
}


//---------------- Queries

sensim_status_t sensim_shards_raycast(sensim_shards_t* sh, const sensim_raycast_t* rays,
                                      sensim_hit_t* hits) {
  SHARDS_CHECK(sh);
  begin(sh);
  if (!rays) {
    return refuse(sh, SENSIM_INVALID_ARGUMENT, "rays: NULL");
  }
  if (sh->focus >= 0) {
    return refuse(sh, SENSIM_INVALID_ARGUMENT, "raycast: the handle is focused on shard %d; "
                  "sensim_shards_focus(sh, -1) first", sh->focus);
  }
  sensim_raycast_t r;
  sensim_status_t taken = take_sized(sh, &r, sizeof(r), rays, "rays", "sensim_raycast_init");
  if (taken != SENSIM_OK) {
    return taken;
  }
  if (r.ntimes > 1 && r.ntimes != r.nrays) {
    return refuse(sh, SENSIM_INVALID_ARGUMENT, "rays.ntimes: %u for %u rays; expected 0, 1 or "
                  "nrays", r.ntimes, r.nrays);
  }
  if (sh->n == 1 || r.nrays < SHARD_SPLIT_MIN_RAYS) {
    uint32_t i = sh->next_raycast;
    sh->next_raycast = (i + 1) % sh->n;
    if (!usable(sh, i)) {
      return report(sh, i, i + 1);
    }
    sh->st[i] = sensim_raycast(sh->cli[i], &r, hits, NULL);
    sh->sent[i] = true;
    return report(sh, i, i + 1);
  }
  if (!hits || (!r.origins && !r.origin) || !r.directions || (r.ntimes && !r.times)) {
    return refuse(sh, SENSIM_INVALID_ARGUMENT, "%s: NULL with nrays = %u",
                  !hits ? "hits" : !r.origins && !r.origin ? "rays.origins" : !r.directions ?
                  "rays.directions" : "rays.times", r.nrays);
  }
  for (uint32_t i = 0; i < sh->n; i++) {
    uint32_t a = (uint32_t)((uint64_t)r.nrays * i / sh->n);
    uint32_t b = (uint32_t)((uint64_t)r.nrays * (i + 1) / sh->n);
    if (!usable(sh, i)) {
      continue;
    }
    sensim_raycast_t part = r;
    part.nrays = b - a;
    part.origins = r.origins ? r.origins + 3 * (size_t)a : NULL;   // or one origin for all
    part.directions = r.directions + 3 * (size_t)a;
    if (r.ntimes > 1) {
      part.times = r.times + a;
      part.ntimes = b - a;
    }
    sensim_status_t st = sensim_raycast_send(sh->cli[i], &part, hits + a, &sh->ids[i]);
    if (st != SENSIM_OK && i == 0 && st < SENSIM_EIO) {
      return refuse(sh, st, "%s", sensim_client_last_error(sh->cli[i]));
    }
    sh->st[i] = st;
    sh->sent[i] = st == SENSIM_OK;
  }
  int64_t deadline = fan_deadline(sh);
  for (uint32_t i = 0; i < sh->n; i++) {
    if (sh->sent[i]) {
      sensim_status_t st = sensim_raycast_wait(sh->cli[i], sh->ids[i], remaining(deadline),
                                               NULL);
      sh->st[i] = st == SENSIM_EAGAIN ? timed_out(sh, i) : st;
    }
  }
  return report(sh, 0, sh->n);
}


//---------------- Restart

sensim_status_t sensim_shards_reconnect(sensim_shards_t* sh, uint32_t index,
                                        const char* address) {
  SHARDS_CHECK(sh);
  begin(sh);
  if (index >= sh->n) {
    return refuse(sh, SENSIM_INVALID_ARGUMENT, "index: %u is not a shard index in [0, %u)",
                  index, sh->n);
  }
  if (address) {
    char host[256];
    uint16_t port;
    if (!parse_address(address, host, &port, sh->err, sizeof(sh->err))) {
      return SENSIM_INVALID_ARGUMENT;
    }
    memcpy(sh->host[index], host, sizeof(host));
    sh->port[index] = port;
    set_name(sh, index);
  }
  sensim_client_close(sh->cli[index]);
  sh->cli[index] = NULL;
  return connect_shard(sh, index);
}


sensim_status_t sensim_shards_focus(sensim_shards_t* sh, int index) {
  SHARDS_CHECK(sh);
  begin(sh);
  if (index < -1 || index >= (int)sh->n) {
    return refuse(sh, SENSIM_INVALID_ARGUMENT, "index: %d is not -1 or a shard index in "
                  "[0, %u)", index, sh->n);
  }
  sh->focus = index;
  return SENSIM_OK;
}
