// SPDX-License-Identifier: MIT
// host.h: what the machine grants this process, for the daemon's defaults: the CPUs it may run
// on (its affinity mask, bounded by a control group's CPU quota) and the memory it may use (the
// physical memory, bounded by a control group's memory limit). In a container or a Kubernetes
// pod these are the container's limits, not the node's: 64 worker threads under a 2-CPU quota
// are throttled, and a scene sized to half the node's memory gets the pod killed.
//
// Control groups v2 (cpu.max, memory.max) and v1 (cpu.cfs_quota_us / cpu.cfs_period_us,
// memory.limit_in_bytes) are read, at the process's own group and every ancestor, the smallest
// limit winning. What cannot be read counts as no limit.
#ifndef SENSIM_BASE_HOST_H_
#define SENSIM_BASE_HOST_H_

#include <stdint.h>

// CPUs this process may use: at least 1.
unsigned host_cpus(void);

// Bytes of memory this process may use; 0 when unknown.
uint64_t host_memory(void);

// The same from a given control-group file system root (normally "/sys/fs/cgroup"), the text
// of /proc/self/cgroup, and what the process sees without control groups (its CPUs, the
// physical memory): for tests.
unsigned host_cpus_at(const char* cgroup_root, const char* self_cgroup, unsigned cpus);
uint64_t host_memory_at(const char* cgroup_root, const char* self_cgroup, uint64_t physical);

#endif  // SENSIM_BASE_HOST_H_
