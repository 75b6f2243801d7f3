// SPDX-License-Identifier: MIT
// scene.c: a scene of the Embree backend: its top-level scene (one instance per object) and
// its lifetime, the commit that brings the flat scene, the horizon bounds and the top level up
// to date, and the counters.
#include <embree3/rtcore.h>
#include <stdatomic.h>

#include "base/mem.h"
#include "scene/embree.h"

scene_t* scene_create(scene_device_t* dev, err_msg_t* msg) {
  scene_t* s = mem_calloc(1, sizeof *s);
  if (!s) {
    err_set(msg, ERR_NOMEM, "scene: out of memory");
    return NULL;
  }
  s->dev = dev;
  s->free_geom = -1;
  s->free_inst = -1;
  s->flat_slot = -1;
  atomic_init(&s->rays_traced, 0);
  atomic_init(&s->rays_culled, 0);
  atomic_init(&s->rays_invalid, 0);

  // The top level is rebuilt every step from a few hundred instances: a fast low-quality
  // dynamic build wins; robust mode keeps rays aimed at shared edges from slipping through.
  uint64_t before = atomic_load(&dev->nerror);
  s->top = rtcNewScene(dev->rtc);
  if (s->top) {
    rtcSetSceneFlags(s->top, RTC_SCENE_FLAG_DYNAMIC | RTC_SCENE_FLAG_ROBUST);
    rtcSetSceneBuildQuality(s->top, RTC_BUILD_QUALITY_LOW);

    // commit the empty scene so that tracing before the first scene_commit is valid
    rtcCommitScene(s->top);
  }
  int rc = device_check(dev, before, "scene_create", msg);
  if (!s->top || rc) {
    if (!rc) {
      err_set(msg, ERR_BACKEND, "scene_create: rtcNewScene failed");
    }
    if (s->top) {
      rtcReleaseScene(s->top);
    }
    mem_free(s);
    return NULL;
  }
  return s;
}


void scene_destroy(scene_t* s) {
  if (!s) {
    return;
  }
  rtcReleaseScene(s->top);
  if (s->flat) {
    rtcReleaseScene(s->flat);
  }
  for (int i = 0; i < s->ninst; i++) {
    if (s->insts[i].rtc) {
      rtcReleaseGeometry(s->insts[i].rtc);
    }
  }
  for (int i = 0; i < s->ngeom; i++) {
    if (s->geoms[i]->rtc) {
      rtcReleaseScene(s->geoms[i]->rtc);
    }
    mem_free(s->geoms[i]->parts);
    mem_free(s->geoms[i]);
  }
  mem_free(s->still_boxes);
  mem_free(s->moving_boxes);
  mem_free(s->insts);
  mem_free(s->geoms);
  mem_free(s);
}


int scene_commit(scene_t* s, err_msg_t* msg) {
  flat_update(s);
  bounds_update(s);
  uint64_t before = atomic_load(&s->dev->nerror);
  rtcCommitScene(s->top);
  s->commits++;
  return device_check(s->dev, before, "scene_commit", msg);
}



void scene_counters(const scene_t* s, scene_counters_t* out) {
  out->geometry_builds = s->geometry_builds;
  out->instance_updates = s->instance_updates;
  out->commits = s->commits;
  out->flat_builds = s->flat_builds;
  out->flat_objects = s->flat_objects;
  out->rays_traced = atomic_load(&((scene_t*)s)->rays_traced);
  out->rays_culled = atomic_load(&((scene_t*)s)->rays_culled);
  out->rays_invalid = atomic_load(&((scene_t*)s)->rays_invalid);
  scene_device_counters(s->dev, &out->backend_errors, &out->backend_bytes);
}
