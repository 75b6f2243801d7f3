// SPDX-License-Identifier: MIT
// registry.c: named environments, found by a linear scan (at most --max-environments, 64 by
// default), reference-counted so that jobs in flight outlive a client's departure.
#include "daemon/registry.h"

#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "base/mem.h"

typedef struct destroy_job {
  exec_job_t base;
  registry_t* r;
  registry_entry_t* e;
  env_info_t last;
} destroy_job_t;


void registry_init(registry_t* r, exec_t* exec, uint32_t max) {
  memset(r, 0, sizeof(*r));
  list_init(&r->entries);
  r->max = max;
  r->exec = exec;
}


// Length of the UTF-8 sequence starting at p (shortest form, no surrogates), or 0.
static size_t utf8_sequence(const unsigned char* p) {
  if (p[0] < 0x80) {
    return 1;
  }
  size_t n = p[0] >= 0xf0 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc2 ? 2 : 0;
  if (n == 0 || p[0] > 0xf4) {
    return 0;
  }
  uint32_t cp = p[0] & (0x7f >> n);
  for (size_t i = 1; i < n; i++) {
    if ((p[i] & 0xc0) != 0x80) {
      return 0;
    }
    cp = cp << 6 | (p[i] & 0x3f);
  }
  static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < min_cp[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
    return 0;
  }
  return n;
}


int registry_name_ok(const char* name) {
  size_t n = strlen(name);
  if (n == 0 || n > REGISTRY_NAME_MAX) {
    return 0;
  }
  const unsigned char* p = (const unsigned char*)name;
  for (size_t i = 0; i < n;) {
    if (p[i] < 0x20 || p[i] == 0x7f) {
      return 0;
    }
    size_t k = utf8_sequence(p + i);
    if (k == 0) {
      return 0;
    }
    i += k;
  }
  return 1;
}


void registry_retain(registry_entry_t* e) {
  e->refs++;
}


void registry_release(registry_entry_t* e) {
  if (--e->refs == 0) {
    uv_mutex_destroy(&e->info_lock);
    mem_free(e);
  }
}


static registry_entry_t* find(registry_t* r, const char* name) {
  for (list_node_t* n = r->entries.head.next; n != &r->entries.head; n = n->next) {
    registry_entry_t* e = container_of(n, registry_entry_t, node);
    if (strcmp(e->name, name) == 0) {
      return e;
    }
  }
  return NULL;
}


int registry_join(registry_t* r, const char* name, int retain, registry_entry_t** out,
                  int* out_new) {
  registry_entry_t* e = find(r, name);
  *out_new = 0;
  if (!e) {
    if (r->n >= r->max) {
      return ERR_LIMIT;
    }
    e = mem_calloc(1, sizeof(*e));
    if (!e) {
      return ERR_NOMEM;
    }
    if (uv_mutex_init(&e->info_lock) != 0) {
      mem_free(e);
      return ERR_NOMEM;
    }
    snprintf(e->name, sizeof(e->name), "%s", name);
    e->retain = retain;
    exec_queue_init(&e->queue);
    e->refs = 1;
    e->registered = 1;
    list_push_back(&r->entries, &e->node);
    r->n++;
    *out_new = 1;
  }
  e->clients++;
  e->refs++;
  *out = e;
  return 0;
}


void registry_publish(registry_entry_t* e) {
  env_info_t info;
  if (e->env) {
    env_get_info(e->env, &info);
  } else {
    memset(&info, 0, sizeof(info));
  }
  uv_mutex_lock(&e->info_lock);
  e->info = info;
  uv_mutex_unlock(&e->info_lock);
}


void registry_read_info(registry_entry_t* e, env_info_t* out) {
  uv_mutex_lock(&e->info_lock);
  *out = e->info;
  uv_mutex_unlock(&e->info_lock);
}


void registry_totals_add(registry_totals_t* t, const env_info_t* info) {
  t->steps += info->time.steps;
  t->rays_traced += info->scene.rays_traced;
  t->rays_culled += info->scene.rays_culled;
  t->rays_invalid += info->scene.rays_invalid;
  t->geometry_builds += info->scene.geometry_builds;
  t->instance_updates += info->scene.instance_updates;
  t->commits += info->scene.commits;
}


static void destroy_run(exec_job_t* j) {
  destroy_job_t* dj = (destroy_job_t*)j;
  if (dj->e->env) {
    env_get_info(dj->e->env, &dj->last);
    env_destroy(dj->e->env);
    dj->e->env = NULL;
  }
}


static void destroy_done(exec_job_t* j, int cancelled) {
  destroy_job_t* dj = (destroy_job_t*)j;

  // after exec_stop no executor is left: destroy here, on the loop thread
  if (cancelled) {
    destroy_run(j);
  }
  registry_totals_add(&dj->r->retired, &dj->last);
  LOG_INFO("environment '%s' destroyed", dj->e->name);
  registry_release(dj->e);
  mem_free(dj);
}


// Leave the registry and destroy the environment after every job queued before.
static void retire(registry_t* r, registry_entry_t* e) {
  list_remove(&e->node);
  e->registered = 0;
  r->n--;
  destroy_job_t* dj = mem_calloc(1, sizeof(*dj));
  if (!dj) {
    LOG_ERROR("out of memory retiring environment '%s'; it leaks", e->name);
    return;
  }
  dj->r = r;
  dj->e = e;  // takes over the registry's reference
  dj->base.run = destroy_run;
  dj->base.done = destroy_done;
  exec_submit(r->exec, &e->queue, &dj->base);
}


void registry_leave(registry_t* r, registry_entry_t* e) {
  if (--e->clients == 0 && !e->retain && e->registered) {
    retire(r, e);
  }
  registry_release(e);
}


int registry_snapshot(registry_t* r, registry_entry_t*** out, uint32_t* out_n) {
  registry_entry_t** all = mem_calloc(r->n ? r->n : 1, sizeof(*all));
  if (!all) {
    return ERR_NOMEM;
  }
  uint32_t i = 0;
  for (list_node_t* n = r->entries.head.next; n != &r->entries.head; n = n->next) {
    registry_entry_t* e = container_of(n, registry_entry_t, node);
    e->refs++;
    all[i++] = e;
  }
  *out = all;
  *out_n = i;
  return 0;
}


void registry_close(registry_t* r) {
  while (!list_is_empty(&r->entries)) {
    registry_entry_t* e = container_of(list_front(&r->entries), registry_entry_t, node);
    list_remove(&e->node);
    e->registered = 0;
    r->n--;
    env_destroy(e->env);
    e->env = NULL;
    registry_release(e);
  }
}
