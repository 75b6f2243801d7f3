// SPDX-License-Identifier: MIT
// log.h: levelled logging to stderr. The level is process-wide and set once at start-up.
#ifndef SENSIM_BASE_LOG_H_
#define SENSIM_BASE_LOG_H_

typedef enum log_level {
  LOG_LEVEL_ERROR = 0,
  LOG_LEVEL_WARN,
  LOG_LEVEL_INFO,
  LOG_LEVEL_DEBUG,
  LOG_LEVEL_COUNT
} log_level_t;

// Parse "error", "warn", "info" or "debug"; returns 0 and sets *out, or -1.
int log_level_parse(const char* text, log_level_t* out);

// Set the level; messages above it are dropped. Thread: call before starting threads.
void log_set_level(log_level_t level);

// Current level.
log_level_t log_get_level(void);

// Write one line "sensimd LEVEL message" to stderr. Thread: any.
void log_write(log_level_t level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

#define LOG_ERROR(...) log_write(LOG_LEVEL_ERROR, __VA_ARGS__)
#define LOG_WARN(...) log_write(LOG_LEVEL_WARN, __VA_ARGS__)
#define LOG_INFO(...) log_write(LOG_LEVEL_INFO, __VA_ARGS__)
#define LOG_DEBUG(...) log_write(LOG_LEVEL_DEBUG, __VA_ARGS__)

#endif  // SENSIM_BASE_LOG_H_
