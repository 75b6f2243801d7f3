// SPDX-License-Identifier: MIT
// mjtest.c: the MuJoCo tests' shared parts (mjtest.h).
#include "mjtest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


char* mjt_scene_text(const char* name) {
  char path[1024];
  snprintf(path, sizeof(path), "%s/%s", SENSIM_SCENES_DIR, name);
  FILE* f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "# cannot open %s\n", path);
    return NULL;
  }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char* s = malloc((size_t)n + 1);
  if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
    free(s);
    s = NULL;
  }
  fclose(f);
  if (s) {
    s[n] = '\0';
  }
  return s;
}


char* mjt_insert(const char* xml, const char* before, const char* text) {
  const char* at = NULL;
  for (const char* p = strstr(xml, before); p; p = strstr(p + 1, before)) {
    at = p;
  }
  if (!at) {
    return NULL;
  }
  size_t head = (size_t)(at - xml), nt = strlen(text), rest = strlen(at);
  char* s = malloc(head + nt + rest + 1);
  if (!s) {
    return NULL;
  }
  memcpy(s, xml, head);
  memcpy(s + head, text, nt);
  memcpy(s + head + nt, at, rest + 1);
  return s;
}


mjModel* mjt_load(const char* xml, const char* const* files) {
  // mjVFS holds 2000 file slots: heap only
  mjVFS* vfs = malloc(sizeof(*vfs));
  if (!vfs) {
    return NULL;
  }
  mj_defaultVFS(vfs);
  int len = (int)strlen(xml);
  mjModel* m = NULL;
  if (mj_makeEmptyFileVFS(vfs, "model.xml", len) != 0) {
    fprintf(stderr, "# VFS: cannot add the model\n");
    goto done;
  }
  memcpy(vfs->filedata[mj_findFileVFS(vfs, "model.xml")], xml, (size_t)len);
  for (size_t i = 0; files && files[i]; i++) {
    // 2.2.2 reads `filename` itself (not directory + filename) and stores it without its
    // path: give it the whole path
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", SENSIM_SCENES_DIR, files[i]);
    if (mj_addFileVFS(vfs, NULL, path) != 0) {
      fprintf(stderr, "# VFS: cannot add %s/%s\n", SENSIM_SCENES_DIR, files[i]);
      goto done;
    }
  }
  char err[1024] = "";
  m = mj_loadXML("model.xml", vfs, err, sizeof(err));
  if (!m) {
    fprintf(stderr, "# mj_loadXML: %s\n", err);
  }
done:
  mj_deleteVFS(vfs);
  free(vfs);
  return m;
}


int mjt_rig_start(mjt_rig_t* rig, const mjModel* m, const mjData* d, const char* side,
                  const bridge_options_t* opts) {
  memset(rig, 0, sizeof(*rig));
  if (td_start(&rig->daemon, NULL) != 0) {
    return -1;
  }
  rig->controller = td_connect(&rig->daemon, "mujoco");
  if (!rig->controller) {
    return -1;
  }
  rig->bridge = bridge_create(rig->controller, opts);
  char err[1024] = "";
  rig->mirror = rig->bridge ? mjbridge_create(rig->bridge, m, d, side, err, sizeof(err)) : NULL;
  if (!rig->mirror) {
    fprintf(stderr, "# mirror: %s\n", err);
    return -1;
  }
  sensim_options_t o;
  sensim_options_init(&o);
  o.environment = "mujoco";
  o.role = SENSIM_ROLE_OBSERVER;
  o.timeout_ms = 20000;
  o.pushed_max_frames = 1u << 20;
  o.pushed_max_bytes = 1ull << 31;
  rig->observer = td_connect_opts(&rig->daemon, &o);
  return rig->observer ? 0 : -1;
}


void mjt_rig_stop(mjt_rig_t* rig) {
  mjbridge_destroy(rig->mirror);
  bridge_destroy(rig->bridge);
  sensim_client_close(rig->observer);
  sensim_client_close(rig->controller);
  if (rig->daemon.pid > 0) {
    td_stop(&rig->daemon);
  }
}


uint32_t mjt_subscribe(mjt_rig_t* rig, const char* name) {
  uint32_t id = mjbridge_sensor_id(rig->mirror, name);
  sensim_subscription_t sub;
  sensim_subscription_init(&sub);
  sub.sensor_id = id;
  if (id == 0 || sensim_subscribe(rig->observer, &sub) != SENSIM_OK) {
    fprintf(stderr, "# subscribe %s (id %u): %s\n", name, id,
            sensim_client_last_error(rig->observer));
    return 0;
  }
  return id;
}


void mjt_physics_step(const mjModel* m, mjData* d, mjtNum* acc_sensors) {
  mj_step2(m, d);
  if (acc_sensors) {
    memcpy(acc_sensors, d->sensordata, (size_t)m->nsensordata * sizeof(mjtNum));
  }
  mj_step1(m, d);
}


size_t mjt_drain(mjt_rig_t* rig, mjt_sample_t* out, size_t cap, int wait_ms) {
  size_t n = 0;
  const sensim_sensor_data_t* s = NULL;
  while (n < cap && sensim_next_sensor_data(rig->observer, wait_ms, &s) == SENSIM_OK) {
    if (s->kind == SENSIM_PAYLOAD_IMU) {
      out[n] = (mjt_sample_t){s->sensor_id, s->time, {0}};
      memcpy(out[n].v, s->imu.acceleration, 3 * sizeof(double));
      memcpy(out[n].v + 3, s->imu.angular_velocity, 3 * sizeof(double));
      n++;
    } else if (s->kind == SENSIM_PAYLOAD_SCALAR) {
      out[n] = (mjt_sample_t){s->sensor_id, s->time, {s->scalar.position}};
      n++;
    }
  }
  return n;
}
