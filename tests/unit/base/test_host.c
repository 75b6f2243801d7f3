// SPDX-License-Identifier: MIT
// test_host.c: the CPUs and memory granted, read from control-group trees laid out as the
// kernel shows them (v2, v1 in the hybrid layout, a container that sees the host's group
// paths) in a temporary directory; and the live values on this machine.
#include "base/host.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"

static char g_root[64];

// Write text to g_root/rel, creating the directories on the way.
static void put(const char* rel, const char* text) {
  char path[512];
  snprintf(path, sizeof(path), "%s/%s", g_root, rel);
  for (char* p = path + strlen(g_root) + 1; *p; p++) {
    if (*p == '/') {
      *p = '\0';
      mkdir(path, 0755);
      *p = '/';
    }
  }
  FILE* f = fopen(path, "w");
  if (f) {
    fputs(text, f);
    fclose(f);
  }
}


static void fresh(void) {
  char cmd[128];
  if (g_root[0]) {
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_root);
    if (system(cmd) != 0) {
      fprintf(stderr, "could not remove %s\n", g_root);
    }
  }
  snprintf(g_root, sizeof(g_root), "/tmp/sensim-host-XXXXXX");
  if (!mkdtemp(g_root)) {
    g_root[0] = '\0';
  }
}


TEST(host_v2_takes_the_smallest_quota_and_limit_along_the_path) {
  fresh();
  ASSERT_TRUE(g_root[0] != '\0');
  put("cgroup.controllers", "cpu memory\n");
  put("cpu.max", "max 100000\n");
  put("kubepods/cpu.max", "400000 100000\n");
  put("kubepods/pod1/cpu.max", "150000 100000\n");   // 1.5 CPUs: two threads
  put("kubepods/pod1/c1/cpu.max", "max 100000\n");
  put("kubepods/memory.max", "8589934592\n");
  put("kubepods/pod1/memory.max", "4294967296\n");
  put("kubepods/pod1/c1/memory.max", "max\n");
  const char* self = "0::/kubepods/pod1/c1\n";
  ASSERT_EQ(host_cpus_at(g_root, self, 64), 2);
  ASSERT_EQ(host_cpus_at(g_root, self, 1), 1);          // fewer CPUs than the quota
  ASSERT_EQ(host_memory_at(g_root, self, 64ull << 30), 4ull << 30);
  ASSERT_EQ(host_memory_at(g_root, self, 2ull << 30), 2ull << 30);
  ASSERT_EQ(host_memory_at(g_root, self, 0), 4ull << 30);  // physical unknown
  // a group outside the limited branch
  ASSERT_EQ(host_cpus_at(g_root, "0::/system.slice\n", 64), 64);
  return 0;
}


TEST(host_v1_hybrid_reads_the_cpu_and_memory_controllers) {
  fresh();
  put("cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "50000\n");
  put("cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n");
  put("cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
  put("cpu,cpuacct/cpu.cfs_period_us", "100000\n");
  put("memory/docker/abc/memory.limit_in_bytes", "9223372036854771712\n");  // unlimited
  put("memory/docker/memory.limit_in_bytes", "1073741824\n");
  put("unified/docker/abc/cgroup.procs", "");
  const char* self = "12:pids:/docker/abc\n4:memory:/docker/abc\n"
                     "2:cpu,cpuacct:/docker/abc\n1:name=systemd:/docker/abc\n0::/docker/abc\n";
  ASSERT_EQ(host_cpus_at(g_root, self, 8), 1);          // half a CPU: one thread
  ASSERT_EQ(host_memory_at(g_root, self, 16ull << 30), 1ull << 30);
  // no quota anywhere: the CPUs as given
  put("cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "-1\n");
  ASSERT_EQ(host_cpus_at(g_root, self, 8), 8);
  return 0;
}


TEST(host_a_container_seeing_host_paths_reads_its_mount_root) {
  fresh();
  // the container's own group is mounted at the root; the host path does not exist in it
  put("cpu/cpu.cfs_quota_us", "200000\n");
  put("cpu/cpu.cfs_period_us", "100000\n");
  put("memory/memory.limit_in_bytes", "536870912\n");
  const char* self = "3:cpu:/kubepods/besteffort/pod9/0123\n4:memory:/kubepods/x\n";
  ASSERT_EQ(host_cpus_at(g_root, self, 16), 2);
  ASSERT_EQ(host_memory_at(g_root, self, 16ull << 30), 512ull << 20);
  return 0;
}


TEST(host_without_control_groups_keeps_the_machine_values) {
  fresh();
  ASSERT_EQ(host_cpus_at(g_root, "", 6), 6);
  ASSERT_EQ(host_cpus_at(g_root, "garbage without colons\n", 6), 6);
  ASSERT_EQ(host_cpus_at("/nonexistent-sensim", "0::/\n", 3), 3);
  ASSERT_EQ(host_memory_at(g_root, "0::/\n", 1000), 1000);
  put("cpu.max", "garbage\n");
  put("memory.max", "\n");
  ASSERT_EQ(host_cpus_at(g_root, "0::/\n", 4), 4);
  ASSERT_EQ(host_memory_at(g_root, "0::/\n", 1000), 1000);
  ASSERT_EQ(host_cpus_at(g_root, "0::/\n", 0), 1);       // never 0 threads
  fresh();                                                // leaves an empty directory
  rmdir(g_root);
  return 0;
}


TEST(host_live_values_are_within_the_machine) {
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  unsigned cpus = host_cpus();
  ASSERT_TRUE(cpus >= 1);
  ASSERT_TRUE(online <= 0 || cpus <= (unsigned)online);
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  uint64_t mem = host_memory();
  ASSERT_TRUE(pages <= 0 || mem <= (uint64_t)pages * (uint64_t)page);
  ASSERT_TRUE(mem > 0);
  return 0;
}
