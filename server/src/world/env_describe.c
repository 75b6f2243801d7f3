// SPDX-License-Identifier: MIT
// env_describe.c: read-only listings of an environment's sensors and bodies in id order, in
// pages (the daemon's Describe): what a client that did not create them (an observer) needs
// to find the sensors and place their frames.
#include <stdlib.h>

#include "base/mem.h"
#include "world/env_impl.h"

static int cmp_u32(const void* a, const void* b) {
  uint32_t x = *(const uint32_t*)a, y = *(const uint32_t*)b;
  return (x > y) - (x < y);
}


// The ids of t above `after`, the smallest `max` of them sorted into *ids (mem_alloc'ed).
// Returns their count or ERR_NOMEM; *more when larger ids remain. Selection by a full sort of
// the candidates: a page is asked for rarely (a viewer's poll), and the tables are bounded by
// the environment's limits.
static int page_ids(const table_t* t, uint32_t after, uint32_t max, uint32_t** ids, int* more) {
  *ids = NULL;
  *more = 0;
  uint32_t n = 0;
  uint32_t* all = mem_alloc((t->count ? t->count : 1) * sizeof(uint32_t));
  if (!all) {
    return ERR_NOMEM;
  }
  for (uint32_t s = 0; s < t->used; s++) {
    uint32_t id = table_slot_id(t, s);
    if (id != 0 && id > after) {
      all[n++] = id;
    }
  }
  qsort(all, n, sizeof(uint32_t), cmp_u32);
  if (n > max) {
    n = max;
    *more = 1;
  }
  *ids = all;
  return (int)n;
}


int env_list_sensors(const env_t* e, uint32_t after, env_sensor_info_t* out, uint32_t max,
                     int* more) {
  uint32_t* ids;
  int n = page_ids(&e->sensors, after, max, &ids, more);
  for (int i = 0; i < n; i++) {
    const env_sensor_t* r = table_get(&e->sensors, ids[i]);
    out[i] = (env_sensor_info_t){
        .id = ids[i],
        .kind = r->sensor.kind,
        .name = r->name,
        .body_id = r->ctx.body_id,
        .mount = r->ctx.mount,
        .joint_id = r->sensor.joint_id,
        .brief = &r->brief,
    };
  }
  mem_free(ids);
  return n;
}


int env_list_bodies(const env_t* e, uint32_t after, env_body_info_t* out, uint32_t max,
                    int* more) {
  uint32_t* ids;
  int n = page_ids(&e->bodies, after, max, &ids, more);
  for (int i = 0; i < n; i++) {
    const env_body_t* b = table_get(&e->bodies, ids[i]);
    out[i] = (env_body_info_t){.id = ids[i], .name = b->name, .pose = b->pose_cur};
  }
  mem_free(ids);
  return n;
}
