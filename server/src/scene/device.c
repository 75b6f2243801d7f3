// SPDX-License-Identifier: MIT
// device.c: the Embree device (one per process or test): its configuration (the instruction
// set it runs), its error and memory callbacks, the memory budget that refuses allocations past
// it, and the last error for messages.
#include <embree3/rtcore.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "base/simd.h"
#include "scene/embree.h"

static void device_error_cb(void* user, enum RTCError code, const char* str) {
  scene_device_t* dev = user;
  atomic_fetch_add(&dev->nerror, 1);
  pthread_mutex_lock(&dev->lock);
  snprintf(dev->last_error, sizeof dev->last_error, "embree error %d: %s", (int)code,
           str ? str : "(no message)");
  pthread_mutex_unlock(&dev->lock);
}


// Embree asks before it allocates (post = false): refusing makes the operation fail with
// RTC_ERROR_OUT_OF_MEMORY, so a budget bounds what scenes can take. Releases (negative) and
// after-the-fact reports (post) are only counted.
static bool device_memory_cb(void* user, ssize_t bytes, bool post) {
  scene_device_t* dev = user;
  int_fast64_t budget = atomic_load(&dev->budget);
  int_fast64_t now = atomic_fetch_add(&dev->bytes, (int_fast64_t)bytes) + (int_fast64_t)bytes;
  if (bytes > 0 && !post && budget > 0 && now > budget) {
    atomic_fetch_sub(&dev->bytes, (int_fast64_t)bytes);
    atomic_fetch_add(&dev->refused, 1);
    return false;
  }
  return true;
}


scene_device_t* scene_device_create(err_msg_t* msg) {
  // the level of the core's SIMD kernels, when the environment names one (base/simd.h)
  if (simd_check_env(msg) < 0) {
    return NULL;
  }
  scene_device_t* dev = mem_calloc(1, sizeof *dev);
  if (!dev) {
    err_set(msg, ERR_NOMEM, "scene device: out of memory");
    return NULL;
  }
  atomic_init(&dev->nerror, 0);
  atomic_init(&dev->bytes, 0);
  atomic_init(&dev->budget, 0);
  atomic_init(&dev->refused, 0);
  if (pthread_mutex_init(&dev->lock, NULL) != 0) {
    mem_free(dev);
    err_set(msg, ERR_INTERNAL, "scene device: mutex init failed");
    return NULL;
  }

  // The best ISA the CPU has, unless the environment names one (isa=avx2: what a CPU without
  // AVX-512 runs; the tests run the geometry twice, natively and so). Embree 3.13's AVX-512
  // occlusion packets (rtcOccluded16) were seen to spin forever after other packet work in the
  // same process; intersection packets never did, and this backend never calls rtcOccluded*:
  // it traces with rtcIntersect8/16 only.
  const char* config = getenv(SCENE_DEVICE_CONFIG_ENV);
  config = config ? config : "";
  if (strlen(config) >= sizeof dev->config) {
    pthread_mutex_destroy(&dev->lock);
    mem_free(dev);
    err_set(msg, ERR_INVAL, "%s has %zu characters, more than %zu", SCENE_DEVICE_CONFIG_ENV,
            strlen(config), sizeof dev->config - 1);
    return NULL;
  }
  memcpy(dev->config, config, strlen(config) + 1);
  dev->rtc = rtcNewDevice(config[0] ? config : NULL);
  if (!dev->rtc) {
    enum RTCError code = rtcGetDeviceError(NULL);
    pthread_mutex_destroy(&dev->lock);
    mem_free(dev);
    err_set(msg, ERR_BACKEND, "rtcNewDevice failed (embree error %d)%s%s%s", (int)code,
            config[0] ? "; " SCENE_DEVICE_CONFIG_ENV " = \"" : "", config, config[0] ? "\"" : "");
    return NULL;
  }
  rtcSetDeviceErrorFunction(dev->rtc, device_error_cb, dev);
  dev->width = rtcGetDeviceProperty(dev->rtc, RTC_DEVICE_PROPERTY_NATIVE_RAY16_SUPPORTED)  ? 16
               : rtcGetDeviceProperty(dev->rtc, RTC_DEVICE_PROPERTY_NATIVE_RAY8_SUPPORTED) ? 8
                                                                                           : 4;
  rtcSetDeviceMemoryMonitorFunction(dev->rtc, device_memory_cb, dev);
  return dev;
}


void scene_device_destroy(scene_device_t* dev) {
  if (!dev) {
    return;
  }
  rtcReleaseDevice(dev->rtc);
  pthread_mutex_destroy(&dev->lock);
  mem_free(dev);
}


unsigned scene_device_native_width(const scene_device_t* dev) {
  return dev->width;
}


bool scene_device_describe(const scene_device_t* dev, char* buf, size_t cap) {
  // Embree names no ISA; its widest native packet tells AVX-512 from AVX2 (or AVX) from SSE
  const char* isa = dev->width == 16 ? "AVX-512" : dev->width == 8 ? "AVX2 or AVX" : "SSE";
  // SIMD_LEVEL_ENV configured the core's kernels only when it lowered them below the CPU's
  bool lowered = simd_allowed_level() < simd_cpu_level();
  snprintf(buf, cap, "Embree %ld.%ld.%ld, %s (native %u-ray packets), %s%s%s; core kernels %s%s",
           (long)rtcGetDeviceProperty(dev->rtc, RTC_DEVICE_PROPERTY_VERSION_MAJOR),
           (long)rtcGetDeviceProperty(dev->rtc, RTC_DEVICE_PROPERTY_VERSION_MINOR),
           (long)rtcGetDeviceProperty(dev->rtc, RTC_DEVICE_PROPERTY_VERSION_PATCH), isa,
           dev->width, dev->config[0] ? SCENE_DEVICE_CONFIG_ENV " = \"" : "the CPU's best ISA",
           dev->config, dev->config[0] ? "\"" : "", simd_level_name(simd_level()),
           lowered ? " (" SIMD_LEVEL_ENV ")" : "");
  return dev->config[0] != 0 || lowered;
}


void scene_device_set_budget(scene_device_t* dev, int64_t bytes) {
  atomic_store(&dev->budget, bytes > 0 ? bytes : 0);
}


void scene_device_counters(const scene_device_t* dev, uint64_t* out_errors, int64_t* out_bytes) {
  if (out_errors) {
    *out_errors = atomic_load(&dev->nerror);
  }
  if (out_bytes) {
    *out_bytes = atomic_load(&dev->bytes);
  }
}


void scene_device_last_error(scene_device_t* dev, err_msg_t* dest) {
  pthread_mutex_lock(&dev->lock);
  snprintf(dest->text, sizeof dest->text, "%s", dev->last_error);
  pthread_mutex_unlock(&dev->lock);
}


int device_check(scene_device_t* dev, uint64_t before, const char* what, err_msg_t* msg) {
  enum RTCError code = rtcGetDeviceError(dev->rtc);
  if (code == RTC_ERROR_NONE && atomic_load(&dev->nerror) == before) {
    return 0;
  }
  if (code == RTC_ERROR_OUT_OF_MEMORY && atomic_load(&dev->refused) > 0 &&
      atomic_load(&dev->budget) > 0) {
    return err_set(msg, ERR_LIMIT, "%s: the ray-tracing memory budget (%lld bytes, "
                   "--max-scene-bytes) is exhausted", what,
                   (long long)atomic_load(&dev->budget));
  }
  err_msg_t last;
  scene_device_last_error(dev, &last);
  return err_set(msg, ERR_BACKEND, "%s: %s", what, last.text[0] ? last.text : "embree error");
}

