// SPDX-License-Identifier: MIT
// mjtest.h: what the MuJoCo bridge's tests share: models loaded from text with the shipped
// scenes' files at hand (MuJoCo's virtual file system), a scene's text with lines inserted,
// a bridge mirrored into a real sensimd (tests/client_c/support.h starts it) and an observer
// that records the pushed records of chosen sensors.
#ifndef SENSIM_TESTS_MUJOCO_MJTEST_H_
#define SENSIM_TESTS_MUJOCO_MJTEST_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mujoco/mujoco.h>

#include "bridge.h"
#include "mjbridge.h"
#include "support.h"

// The text of a file of client-c/mujoco/scenes (malloc'd), or NULL.
char* mjt_scene_text(const char* name);

// xml with `text` inserted before the last occurrence of `before` (malloc'd), or NULL.
char* mjt_insert(const char* xml, const char* before, const char* text);

// Compile the model `xml`, with the files of client-c/mujoco/scenes listed in `files`
// (NULL-terminated; NULL = none) available by name; NULL and the reason printed on failure.
mjModel* mjt_load(const char* xml, const char* const* files);

// A mirrored model: the daemon, a controller with its bridge, an observer.
typedef struct mjt_rig {
  td_daemon_t daemon;
  sensim_client_t* controller;
  sensim_client_t* observer;
  bridge_t* bridge;
  mjbridge_t* mirror;
} mjt_rig_t;

// Start sensimd, connect, mirror (m, d after mj_forward) with the side text `side` (NULL =
// none) and the bridge options (NULL = defaults), and connect an observer of the same
// environment. 0 on success (the reason printed otherwise).
int mjt_rig_start(mjt_rig_t* rig, const mjModel* m, const mjData* d, const char* side,
                  const bridge_options_t* opts);
void mjt_rig_stop(mjt_rig_t* rig);

// Subscribe the observer to the sensor the spec `name` created; its id, or 0.
uint32_t mjt_subscribe(mjt_rig_t* rig, const char* name);

// The physics step of sensim-mujoco (mj_step2 then mj_step1: positions and velocities of the
// new state computed); *acc_sensors, if given, receives d->sensordata as mj_step2 left it:
// the acceleration-stage sensors of the state the step started from.
void mjt_physics_step(const mjModel* m, mjData* d, mjtNum* acc_sensors);

// One IMU record or scalar record, as pushed.
typedef struct mjt_sample {
  uint32_t sensor_id;
  double time;
  double v[6];                      // IMU: acceleration, angular velocity; scalar: position
} mjt_sample_t;

// Drain the observer's pushed IMU and scalar records into out (cap), waiting up to wait_ms
// for each next one; returns the count.
size_t mjt_drain(mjt_rig_t* rig, mjt_sample_t* out, size_t cap, int wait_ms);

#endif  // SENSIM_TESTS_MUJOCO_MJTEST_H_
