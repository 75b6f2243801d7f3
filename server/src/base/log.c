// SPDX-License-Identifier: MIT
// log.c: one formatted line per call, written with a single fwrite so that lines from
// different threads do not interleave. The message is escaped (base/text.h): text from clients
// cannot start a new line or send control sequences to a terminal.
#include "base/log.h"

#include "base/text.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static log_level_t g_level = LOG_LEVEL_INFO;
static const char* const g_names[LOG_LEVEL_COUNT] = {"error", "warn", "info", "debug"};


int log_level_parse(const char* text, log_level_t* out) {
  for (int i = 0; i < LOG_LEVEL_COUNT; i++) {
    if (strcmp(text, g_names[i]) == 0) {
      *out = (log_level_t)i;
      return 0;
    }
  }
  return -1;
}


void log_set_level(log_level_t level) {
  g_level = level;
}


log_level_t log_get_level(void) {
  return g_level;
}


void log_write(log_level_t level, const char* fmt, ...) {
  if (level > g_level) {
    return;
  }
  char text[1024];
  char line[1024];
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  int n = snprintf(line, sizeof(line), "%02d:%02d:%02d.%03ld sensimd %-5s ", tm.tm_hour,
                   tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000L, g_names[level]);
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(text, sizeof(text), fmt, ap);
  va_end(ap);
  size_t tlen = m < 0 ? 0 : (size_t)m < sizeof(text) ? (size_t)m : sizeof(text) - 1;
  size_t len = (size_t)n + text_escape(line + n, sizeof(line) - (size_t)n - 1, text, tlen);
  line[len++] = '\n';
  fwrite(line, 1, len, stderr);
}
