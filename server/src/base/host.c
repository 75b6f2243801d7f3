// SPDX-License-Identifier: MIT
// host.c: the CPUs and memory this process is granted (see host.h).
#include "base/host.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HOST_PATH_MAX 4096
#define HOST_TEXT_MAX 8192

// The file's first bytes as a string; 0 on success.
static int read_text(const char* path, char* buf, size_t cap) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return -1;
  }
  size_t n = 0;
  while (n + 1 < cap) {
    ssize_t r = read(fd, buf + n, cap - 1 - n);
    if (r < 0 && errno == EINTR) {
      continue;
    }
    if (r <= 0) {
      break;
    }
    n += (size_t)r;
  }
  close(fd);
  buf[n] = '\0';
  return 0;
}


static int is_dir(const char* path) {
  char probe[HOST_PATH_MAX];
  return snprintf(probe, sizeof(probe), "%s/.", path) < (int)sizeof(probe) &&
         access(probe, F_OK) == 0;
}


// The group path of controller `ctl` in /proc/self/cgroup's text ("ID:CONTROLLERS:PATH" lines;
// ctl NULL: the v2 line, "0::PATH"); 0 when found.
static int group_path(const char* self, const char* ctl, char* out, size_t cap) {
  for (const char* line = self; line && *line;) {
    const char* end = strchr(line, '\n');
    size_t len = end ? (size_t)(end - line) : strlen(line);
    const char* c1 = memchr(line, ':', len);
    const char* c2 = c1 ? memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - line)) : NULL;
    if (c2) {
      const char* ctls = c1 + 1;
      size_t nctls = (size_t)(c2 - ctls);
      int match = 0;
      if (!ctl) {
        match = nctls == 0 && c1 - line == 1 && line[0] == '0';
      } else {
        // the controllers are a comma-separated list: "cpu,cpuacct"
        for (const char* p = ctls; p < c2;) {
          const char* q = memchr(p, ',', (size_t)(c2 - p));
          size_t n = q ? (size_t)(q - p) : (size_t)(c2 - p);
          if (n == strlen(ctl) && memcmp(p, ctl, n) == 0) {
            match = 1;
          }
          p += n + 1;
        }
      }
      size_t plen = len - (size_t)(c2 + 1 - line);
      if (match && plen + 1 <= cap) {
        memcpy(out, c2 + 1, plen);
        out[plen] = '\0';
        return 0;
      }
    }
    line = end ? end + 1 : NULL;
  }
  return -1;
}


// A limit read from one group directory: 1 and *value when the directory sets one.
typedef int (*limit_fn)(const char* dir, double* value);

// The smallest limit over the group `path` under `mount` and its ancestors up to the mount
// itself (a group that does not exist there, as in a container that sees the host's paths, is
// skipped: the container's own group is then the mount's root). +inf when none.
static double smallest_limit(const char* mount, const char* path, limit_fn fn) {
  double best = INFINITY;
  if (!is_dir(mount)) {
    return best;
  }
  char dir[HOST_PATH_MAX];
  if (snprintf(dir, sizeof(dir), "%s%s", mount, path) >= (int)sizeof(dir)) {
    return best;
  }
  size_t root = strlen(mount);
  for (;;) {
    double v;
    if (is_dir(dir) && fn(dir, &v) && v < best) {
      best = v;
    }
    char* slash = strrchr(dir + root, '/');
    if (!slash) {
      break;
    }
    *slash = '\0';
  }
  return best;
}


static int read_file_in(const char* dir, const char* name, char* buf, size_t cap) {
  char path[HOST_PATH_MAX];
  if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path)) {
    return -1;
  }
  return read_text(path, buf, cap);
}


// v2 cpu.max: "max PERIOD" or "QUOTA PERIOD" (microseconds).
static int cpu_v2(const char* dir, double* cpus) {
  char t[128];
  double quota, period;
  if (read_file_in(dir, "cpu.max", t, sizeof(t)) != 0 || sscanf(t, "%lf %lf", &quota, &period) != 2 ||
      !(quota > 0.0) || !(period > 0.0)) {
    return 0;  // "max" does not scan: no limit
  }
  *cpus = quota / period;
  return 1;
}


// v1: cpu.cfs_quota_us (-1: none) over cpu.cfs_period_us.
static int cpu_v1(const char* dir, double* cpus) {
  char q[64], p[64];
  if (read_file_in(dir, "cpu.cfs_quota_us", q, sizeof(q)) != 0 ||
      read_file_in(dir, "cpu.cfs_period_us", p, sizeof(p)) != 0) {
    return 0;
  }
  double quota = strtod(q, NULL), period = strtod(p, NULL);
  if (!(quota > 0.0) || !(period > 0.0)) {
    return 0;
  }
  *cpus = quota / period;
  return 1;
}


// v2 memory.max ("max": none), v1 memory.limit_in_bytes (an unlimited group reads as about
// 2^63: larger than the memory, so the minimum ignores it).
static int memory_v2(const char* dir, double* bytes) {
  char t[64];
  if (read_file_in(dir, "memory.max", t, sizeof(t)) != 0 || t[0] < '0' || t[0] > '9') {
    return 0;
  }
  *bytes = strtod(t, NULL);
  return 1;
}


static int memory_v1(const char* dir, double* bytes) {
  char t[64];
  if (read_file_in(dir, "memory.limit_in_bytes", t, sizeof(t)) != 0 || t[0] < '0' ||
      t[0] > '9') {
    return 0;
  }
  *bytes = strtod(t, NULL);
  return 1;
}


// The smallest limit of the v2 hierarchy (at the root, or at unified/ in the hybrid layout)
// and the v1 hierarchy of controller `ctl` (mounted under one of `v1_mounts`).
static double group_limit(const char* root, const char* self, const char* ctl,
                          const char* const* v1_mounts, limit_fn v2, limit_fn v1) {
  char path[HOST_PATH_MAX], mount[HOST_PATH_MAX];
  double best = INFINITY;
  if (group_path(self, NULL, path, sizeof(path)) == 0) {
    static const char* const kV2[] = {"", "/unified"};
    for (size_t i = 0; i < sizeof(kV2) / sizeof(kV2[0]); i++) {
      if (snprintf(mount, sizeof(mount), "%s%s", root, kV2[i]) < (int)sizeof(mount)) {
        best = fmin(best, smallest_limit(mount, path, v2));
      }
    }
  }
  if (group_path(self, ctl, path, sizeof(path)) == 0) {
    for (size_t i = 0; v1_mounts[i]; i++) {
      if (snprintf(mount, sizeof(mount), "%s/%s", root, v1_mounts[i]) < (int)sizeof(mount)) {
        best = fmin(best, smallest_limit(mount, path, v1));
      }
    }
  }
  return best;
}


unsigned host_cpus_at(const char* cgroup_root, const char* self_cgroup, unsigned cpus) {
  static const char* const kMounts[] = {"cpu", "cpu,cpuacct", "cpuacct,cpu", NULL};
  double quota = group_limit(cgroup_root, self_cgroup, "cpu", kMounts, cpu_v2, cpu_v1);
  if (quota < (double)cpus) {
    cpus = (unsigned)ceil(quota);  // 1.5 CPUs of quota: two threads, each often busy
  }
  return cpus > 0 ? cpus : 1;
}


uint64_t host_memory_at(const char* cgroup_root, const char* self_cgroup, uint64_t physical) {
  static const char* const kMounts[] = {"memory", NULL};
  double limit = group_limit(cgroup_root, self_cgroup, "memory", kMounts, memory_v2, memory_v1);
  if (limit < (double)physical || (physical == 0 && isfinite(limit))) {
    return (uint64_t)limit;
  }
  return physical;
}


unsigned host_cpus(void) {
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  unsigned cpus = online > 0 ? (unsigned)online : 1;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0 &&
      (unsigned)CPU_COUNT(&set) < cpus) {
    cpus = (unsigned)CPU_COUNT(&set);  // taskset, or a container's cpuset
  }
  char self[HOST_TEXT_MAX];
  if (read_text("/proc/self/cgroup", self, sizeof(self)) != 0) {
    return cpus;
  }
  return host_cpus_at("/sys/fs/cgroup", self, cpus);
}


uint64_t host_memory(void) {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  uint64_t physical = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
  char self[HOST_TEXT_MAX];
  if (read_text("/proc/self/cgroup", self, sizeof(self)) != 0) {
    return physical;
  }
  return host_memory_at("/sys/fs/cgroup", self, physical);
}
