// SPDX-License-Identifier: MIT
// record.c: the request recording of sensimd --record (record.h). The loop thread copies each
// record into a 1 MiB buffer; full buffers go to a writer thread of their own, so that a disk
// write never stalls the network thread. What waits for the writer is bounded
// (RECORD_MAX_QUEUED): a disk slower than the requests stops the recording, not the daemon.
#include "daemon/record.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "base/list.h"
#include "base/log.h"
#include "base/mem.h"

#define RECORD_BUFFER (1u << 20)
#define RECORD_MAX_QUEUED (64u << 20)  // bytes handed to the writer and not yet written

typedef struct chunk {
  list_node_t node;
  size_t len;
  size_t cap;
  uint8_t data[];
} chunk_t;

struct recorder {
  FILE* f;
  char* path;
  uint64_t max_bytes;
  uint64_t bytes;            // written or handed to the writer so far
  uint64_t index;            // records written
  int stopped;               // Thread: loop
  chunk_t* cur;              // the buffer being filled (loop thread)

  pthread_t writer;
  int has_writer;
  pthread_mutex_t mu;
  pthread_cond_t cv;         // work for the writer, or it is to finish
  list_t todo;               // chunks to write (mu)
  uint64_t queued;           // bytes handed over and not yet written (mu)
  int quit;                  // (mu)
  atomic_int failed;         // a write failed (set by the writer, which logged it)
};


static void put_u16(uint8_t* p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}


static void put_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; i++) {
    p[i] = (uint8_t)(v >> (8 * i));
  }
}


static void put_u64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; i++) {
    p[i] = (uint8_t)(v >> (8 * i));
  }
}


static void* writer_main(void* arg) {
  recorder_t* r = arg;
  pthread_mutex_lock(&r->mu);
  for (;;) {
    list_node_t* n = list_front(&r->todo);
    if (!n) {
      if (r->quit) {
        break;
      }
      pthread_cond_wait(&r->cv, &r->mu);
      continue;
    }
    list_remove(n);
    pthread_mutex_unlock(&r->mu);
    chunk_t* c = container_of(n, chunk_t, node);
    if (!atomic_load(&r->failed) &&
        (fwrite(c->data, 1, c->len, r->f) != c->len || fflush(r->f) != 0)) {
      LOG_ERROR("--record %s: write failed: %s; recording stopped (the daemon goes on)",
                r->path, strerror(errno));
      atomic_store(&r->failed, 1);
    }
    size_t len = c->len;
    mem_free(c);
    pthread_mutex_lock(&r->mu);
    r->queued -= len;
  }
  pthread_mutex_unlock(&r->mu);
  return NULL;
}


// Hand the current buffer to the writer. 0, or -1 when the writer is too far behind.
static int hand_over(recorder_t* r) {
  chunk_t* c = r->cur;
  if (!c || c->len == 0) {
    return 0;
  }
  int rc = 0;
  pthread_mutex_lock(&r->mu);
  if (r->queued + c->len > RECORD_MAX_QUEUED) {
    rc = -1;
  } else {
    r->queued += c->len;
    list_push_back(&r->todo, &c->node);
    r->cur = NULL;
    pthread_cond_signal(&r->cv);
  }
  pthread_mutex_unlock(&r->mu);
  return rc;
}


// Copy n bytes into the buffers; -1 when out of memory or the writer is too far behind.
static int append(recorder_t* r, const void* p, size_t n) {
  const uint8_t* src = p;
  while (n > 0) {
    if (!r->cur || r->cur->len == r->cur->cap) {
      if (hand_over(r) < 0) {
        return -1;
      }
      r->cur = mem_alloc(sizeof(chunk_t) + RECORD_BUFFER);
      if (!r->cur) {
        return -1;
      }
      r->cur->len = 0;
      r->cur->cap = RECORD_BUFFER;
    }
    size_t k = r->cur->cap - r->cur->len;
    k = k < n ? k : n;
    memcpy(r->cur->data + r->cur->len, src, k);
    r->cur->len += k;
    src += k;
    n -= k;
  }
  return 0;
}


static int write_record(recorder_t* r, record_type_t type, uint64_t session, int role,
                        const char* environment, const void* payload, size_t len) {
  size_t nlen = environment ? strlen(environment) : 0;
  uint8_t head[RECORD_FIXED_BYTES];
  put_u32(head, (uint32_t)(RECORD_FIXED_BYTES - 4 + nlen + len));
  head[4] = (uint8_t)type;
  head[5] = (uint8_t)role;
  put_u16(head + 6, (uint16_t)nlen);
  put_u64(head + 8, session);
  put_u64(head + 16, r->index + 1);
  if (append(r, head, sizeof(head)) < 0 || append(r, environment, nlen) < 0 ||
      append(r, payload, len) < 0) {
    return -1;
  }
  r->index++;
  r->bytes += sizeof(head) + nlen + len;
  return 0;
}


static void stop(recorder_t* r, const char* why) {
  LOG_WARN("--record %s: %s; recording stopped (the daemon goes on)", r->path, why);
  r->stopped = 1;
}


recorder_t* record_open(const char* path, uint64_t max_bytes) {
  recorder_t* r = mem_calloc(1, sizeof(*r));
  if (!r) {
    LOG_ERROR("--record %s: out of memory", path);
    return NULL;
  }
  list_init(&r->todo);
  atomic_init(&r->failed, 0);
  pthread_mutex_init(&r->mu, NULL);
  pthread_cond_init(&r->cv, NULL);
  r->max_bytes = max_bytes;
  if (!(r->path = mem_strdup(path))) {
    LOG_ERROR("--record %s: out of memory", path);
    record_close(r);
    return NULL;
  }
  r->f = fopen(path, "wb");
  if (!r->f) {
    LOG_ERROR("--record %s: cannot create it: %s", path, strerror(errno));
    record_close(r);
    return NULL;
  }
  uint8_t head[RECORD_HEADER_BYTES];
  memcpy(head, RECORD_MAGIC, 8);
  put_u32(head + 8, RECORD_VERSION);
  put_u32(head + 12, 0);
  if (fwrite(head, 1, sizeof(head), r->f) != sizeof(head) || fflush(r->f) != 0) {
    LOG_ERROR("--record %s: cannot write it: %s", path, strerror(errno));
    record_close(r);
    return NULL;
  }
  r->bytes = sizeof(head);
  if (pthread_create(&r->writer, NULL, writer_main, r) != 0) {
    LOG_ERROR("--record %s: cannot start its writer thread", path);
    record_close(r);
    return NULL;
  }
  r->has_writer = 1;
  LOG_INFO("recording every request to %s (at most %llu bytes)", path,
           (unsigned long long)max_bytes);
  return r;
}


void record_put(recorder_t* r, record_type_t type, uint64_t session, int role,
                const char* environment, const void* payload, size_t len) {
  if (!r || r->stopped) {
    return;
  }
  if (atomic_load(&r->failed)) {
    r->stopped = 1;  // the writer logged why
    return;
  }
  size_t nlen = environment ? strlen(environment) : 0;
  uint64_t need = RECORD_FIXED_BYTES + nlen + len;
  // room is kept for the END record that closes a stopped recording
  if (r->bytes + need + RECORD_FIXED_BYTES > r->max_bytes || nlen > UINT16_MAX ||
      need > UINT32_MAX) {
    char why[160];
    snprintf(why, sizeof(why), "the next record (%llu bytes) would pass --record-max-bytes "
             "%llu", (unsigned long long)need, (unsigned long long)r->max_bytes);
    (void)write_record(r, RECORD_END, 0, 0, NULL, NULL, 0);
    stop(r, why);
    return;
  }
  size_t mark = r->cur ? r->cur->len : 0;
  chunk_t* before = r->cur;
  if (write_record(r, type, session, role, environment, payload, len) < 0) {
    // a record is never left half written: the buffer being filled ends at the last whole
    // record (a record that spilled into a handed-over buffer cannot be taken back, which is
    // why the limit of what waits is far above one buffer); then END, if memory allows
    if (r->cur == before && r->cur) {
      r->cur->len = mark;
    }
    (void)write_record(r, RECORD_END, 0, 0, NULL, NULL, 0);
    stop(r, "the disk does not keep up with the requests (64 MiB waiting), or out of memory");
  }
}


void record_flush(recorder_t* r) {
  if (r && hand_over(r) < 0 && !r->stopped) {
    stop(r, "the disk does not keep up with the requests (64 MiB waiting)");
  }
}


void record_close(recorder_t* r) {
  if (!r) {
    return;
  }
  if (r->has_writer) {
    (void)hand_over(r);
    pthread_mutex_lock(&r->mu);
    r->quit = 1;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
    pthread_join(r->writer, NULL);
  }
  while (!list_is_empty(&r->todo)) {
    list_node_t* n = list_front(&r->todo);
    list_remove(n);
    mem_free(container_of(n, chunk_t, node));
  }
  mem_free(r->cur);
  if (r->f && fclose(r->f) != 0 && !atomic_load(&r->failed)) {
    LOG_ERROR("--record %s: close failed: %s", r->path ? r->path : "", strerror(errno));
  }
  pthread_mutex_destroy(&r->mu);
  pthread_cond_destroy(&r->cv);
  mem_free(r->path);
  mem_free(r);
}
