// SPDX-License-Identifier: MIT
// record.c: the request recording of sensimd --record (record.h): a file written through a
// 1 MiB stdio buffer, bounded in size, stopped (not the daemon) by a write error.
#include "daemon/record.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "base/mem.h"

struct recorder {
  FILE* f;
  char* path;
  uint64_t max_bytes;
  uint64_t bytes;            // written or buffered so far
  uint64_t index;            // records written
  int stopped;
  char* buf;                 // stdio's buffer
};

#define RECORD_BUFFER (1u << 20)


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


// A write failed: stop recording, say why once.
static void fail(recorder_t* r, const char* what) {
  if (!r->stopped) {
    LOG_ERROR("--record %s: %s: %s; recording stopped (the daemon goes on)", r->path, what,
              strerror(errno));
  }
  r->stopped = 1;
}


static void write_record(recorder_t* r, record_type_t type, uint64_t session, int role,
                         const char* environment, const void* payload, size_t len) {
  size_t nlen = environment ? strlen(environment) : 0;
  uint8_t head[RECORD_FIXED_BYTES];
  put_u32(head, (uint32_t)(RECORD_FIXED_BYTES - 4 + nlen + len));
  head[4] = (uint8_t)type;
  head[5] = (uint8_t)role;
  put_u16(head + 6, (uint16_t)nlen);
  put_u64(head + 8, session);
  put_u64(head + 16, ++r->index);
  if (fwrite(head, 1, sizeof(head), r->f) != sizeof(head) ||
      (nlen && fwrite(environment, 1, nlen, r->f) != nlen) ||
      (len && fwrite(payload, 1, len, r->f) != len)) {
    fail(r, "write failed");
    return;
  }
  r->bytes += sizeof(head) + nlen + len;
}


recorder_t* record_open(const char* path, uint64_t max_bytes) {
  recorder_t* r = mem_calloc(1, sizeof(*r));
  if (!r || !(r->path = mem_strdup(path)) || !(r->buf = mem_alloc(RECORD_BUFFER))) {
    LOG_ERROR("--record %s: out of memory", path);
    record_close(r);
    return NULL;
  }
  r->max_bytes = max_bytes;
  r->f = fopen(path, "wb");
  if (!r->f) {
    LOG_ERROR("--record %s: cannot create it: %s", path, strerror(errno));
    record_close(r);
    return NULL;
  }
  setvbuf(r->f, r->buf, _IOFBF, RECORD_BUFFER);
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
  LOG_INFO("recording every request to %s (at most %llu bytes)", path,
           (unsigned long long)max_bytes);
  return r;
}


void record_put(recorder_t* r, record_type_t type, uint64_t session, int role,
                const char* environment, const void* payload, size_t len) {
  if (!r || r->stopped) {
    return;
  }
  size_t nlen = environment ? strlen(environment) : 0;
  uint64_t need = RECORD_FIXED_BYTES + nlen + len;
  // room is kept for the END record that closes a truncated recording
  if (r->bytes + need + RECORD_FIXED_BYTES > r->max_bytes || nlen > UINT16_MAX ||
      need > UINT32_MAX) {
    LOG_WARN("--record %s: the next record (%llu bytes) would pass --record-max-bytes %llu; "
             "recording stopped (the daemon goes on)", r->path, (unsigned long long)need,
             (unsigned long long)r->max_bytes);
    write_record(r, RECORD_END, 0, 0, NULL, NULL, 0);
    r->stopped = 1;
    if (fflush(r->f) != 0) {
      fail(r, "write failed");
    }
    return;
  }
  write_record(r, type, session, role, environment, payload, len);
}


void record_flush(recorder_t* r) {
  if (r && r->f && fflush(r->f) != 0) {
    fail(r, "write failed");
  }
}


void record_close(recorder_t* r) {
  if (!r) {
    return;
  }
  if (r->f) {
    if (fclose(r->f) != 0) {
      fail(r, "close failed");
    }
  }
  mem_free(r->buf);
  mem_free(r->path);
  mem_free(r);
}
