// SPDX-License-Identifier: MIT
// mjbridge.h: the MuJoCo half of the bridge: mirrors a compiled mjModel into sensimd through
// bridge.h (every visible geom with its exact shape, the moving bodies, hinge and slide
// joints, materials and sensors declared in the model's <custom><text> elements or a side
// file) and writes MuJoCo's state into the bridge's arrays in sensimd's conventions:
// quaternions scalar last, velocities (linear, angular) of the body frame origin in world
// axes. docs/mujoco.md says what maps to what.
#ifndef SENSIM_MJBRIDGE_H
#define SENSIM_MJBRIDGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mujoco/mujoco.h>

#include "bridge.h"

typedef struct mjbridge mjbridge_t;

// Mirror m, whose data d is at its initial state with mj_forward done, into b (before
// bridge_begin). `side` is the text of a side file (NULL = none): lines "NAME SPEC" with the
// names of the <custom><text> elements (sensim.sensor.*, sensim.material.*, sensim.geom.*,
// sensim.medium), which it adds to or replaces ("sensim.sensor.NAME none" removes a sensor of
// the model); '#' starts a comment. On failure returns
// NULL and writes the reason into err.
mjbridge_t* mjbridge_create(bridge_t* b, const mjModel* m, const mjData* d, const char* side,
                            char* err, size_t err_cap);

void mjbridge_destroy(mjbridge_t* mb);

// Write the state of d (positions and velocities computed: after mj_forward, or mj_step1)
// into the bridge's arrays.
void mjbridge_state(const mjbridge_t* mb, const mjModel* m, const mjData* d, bridge_t* b);

// Where site `name` is for sensimd: its body (0 = the static world) and its pose in that body,
// as sensors declared on it get them (sensors made in code use this for their mount). False
// when the model has no such site.
bool mjbridge_frame(const mjbridge_t* mb, const char* site, uint32_t* body_id,
                    sensim_pose_t* mount);

// Counts of what was mirrored.
typedef struct mjbridge_counts {
  uint32_t bodies, joints, objects, primitives, meshes, height_fields, sensors, materials;
  uint32_t skipped_geoms;           // invisible (alpha 0) or marked skip
} mjbridge_counts_t;

void mjbridge_counts(const mjbridge_t* mb, mjbridge_counts_t* out);

// The sensor id the spec `name` (sensim.sensor.NAME) received; 0 if none.
uint32_t mjbridge_sensor_id(const mjbridge_t* mb, const char* name);

// The sensors created, in creation order: the name of the i-th (i < counts.sensors) and its
// id. Ownership: the name is owned by mb.
const char* mjbridge_sensor(const mjbridge_t* mb, uint32_t i, uint32_t* id);

// The id of MuJoCo's objects in sensimd: geom g is object g + 1, joint j is joint j + 1,
// body k is body k (0 = the static world).
static inline uint32_t mjbridge_object_id(int geom) {
  return (uint32_t)geom + 1;
}
static inline uint32_t mjbridge_joint_id(int joint) {
  return (uint32_t)joint + 1;
}

#endif  // SENSIM_MJBRIDGE_H
