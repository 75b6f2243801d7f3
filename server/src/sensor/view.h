// SPDX-License-Identifier: MIT
// view.h: the read-only view of one step that every sensor evaluation receives (the model/data
// split of MuJoCo's mjModel/mjData): the scene to trace, materials and media, body and joint
// states at both ends of the step, and the environment's fields. Sensor code depends on this
// view, `scene`, `material` and `base` only, never on `world`'s tables; `world` keeps the view
// from step to step and writes in it only what changed (world/env_sensor.c), so a step's view
// costs what moved, not what exists.
//
// Time: the step covers the interval (t0, t1]. A scene ray's `time` is the fraction
// s = (t - t0) / (t1 - t0) in [0, 1] (0 when t1 == t0, which happens on the first step when it
// is at the time of the first state). Bodies are interpolated between the two ends (lerp of the
// position, slerp of the orientation); frames mounted on a body move rigidly with it
// (docs/time.md).
//
// Thread: valid for the duration of one sensor step; may be read from any number of threads.
#ifndef SENSIM_SENSOR_VIEW_H_
#define SENSIM_SENSOR_VIEW_H_

#include <stdint.h>

#include "base/xform.h"
#include "material/material.h"
#include "scene/scene.h"
#include "sensor/field.h"

typedef struct pool pool_t;

// State of a body at one end of the step, world frame.
typedef struct body_state {
  pose_t pose;                  // world <- body
  double linear_velocity[3];    // m/s, of the body origin
  double angular_velocity[3];   // rad/s
  int has_velocity;             // the client sent the velocities of this state
} body_state_t;

typedef struct view_body {
  uint32_t id;
  body_state_t at[2];           // [0] at t0, [1] at t1
} view_body_t;

typedef enum view_joint_type {
  VIEW_JOINT_REVOLUTE = 0,      // position in rad
  VIEW_JOINT_PRISMATIC = 1,     // position in m
} view_joint_type_t;

typedef struct view_joint {
  uint32_t id;
  view_joint_type_t type;
  double position[2];           // at t0 and t1
} view_joint_t;

// Geometry of one scene object at the end of the step, for sensors that need more than rays
// (the cone sensor's exact closest point); listed only while such a sensor (sensor_t
// needs_objects) exists. Filled by the world (world/env_sensor.c) from its
// object and geometry tables: world pose at t1 = body pose at t1 composed with the object's
// local pose; a local point x is at pose * (scale .* x).
typedef struct view_object {
  uint32_t id;                  // object id (as reported by the scene on hits)
  uint32_t body_id;             // the body carrying it, 0 = the world
  int prim;                     // 0 = triangle mesh, else a scene_prim_kind_t
  double size[3];               // primitive size (scene.h)
  const float* vertices;        // mesh: 3 floats per vertex, object frame (nvertex)
  uint32_t nvertex;
  const uint32_t* indices;      // mesh: 3 per triangle (ntriangle)
  uint32_t ntriangle;
  double scale[3];              // per axis, applied first
  pose_t pose;                  // world <- object at t1
} view_object_t;

typedef struct step_view {
  double t0;                    // start of the interval, s
  double t1;                    // end of the interval (the step's time), s
  uint64_t step;                // index of this step, from 1
  uint64_t seed;                // environment seed (base/rng.h keys)

  const scene_t* scene;         // committed, two time steps: ray time = fraction of (t0, t1]
  pool_t* pool;                 // nullable: serial

  const view_body_t* bodies;    // sorted by id (nbody); body 0 (the world) is not listed
  uint32_t nbody;
  const view_joint_t* joints;   // sorted by id (njoint)
  uint32_t njoint;

  const view_object_t* objects; // every object of the committed scene, sorted by id (nobject);
  uint32_t nobject;             //   NULL/0 when the world does not provide them

  double gravity[3];            // m/s^2, world
  field_magnetic_t magnetic;    // at t1, world

  // Media and surface materials, looked up through the world without exposing its tables.
  const ambient_material_t* ambient;   // medium 0, the space the sensors are in
  const void* lookup_ctx;
  // Long work (many rays, many faces) polls view_cancelled between chunks and, once it says
  // so, returns ERR_STATE (the request was cancelled or ran out of time).
  int (*cancelled)(void* ctx);  // nullable
  void* cancel_ctx;
  // Bytes the records of this sensor may still take in this step (the step's output limit
  // minus what the sensors before it produced, counting a cloud's point bytes plus 512 per
  // record). A sensor that can tell in advance that it would exceed it refuses the step
  // (ERR_LIMIT) before doing the work.
  uint64_t output_budget;

  // Surface material at a hit (mesh per-triangle material, else the object's). Never NULL for
  // an object id reported by the scene.
  const surface_material_t* (*hit_material)(const void* ctx, uint32_t object_id,
                                            uint32_t primitive);
  // An object's optics, in one lookup that sensors may cache by object: the medium filling it
  // (NULL when it is an opaque surface), and its surface material when every primitive has it
  // (NULL when a mesh gives some triangles their own: then hit_material per hit).
  void (*object_optics)(const void* ctx, uint32_t object_id, const ambient_material_t** medium,
                        const surface_material_t** material);
} step_view_t;

// States of body `id` at both ends; body 0 is the world (identity pose, zero velocity, has
// velocity). Returns NULL when the body is unknown.
const view_body_t* view_find_body(const step_view_t* v, uint32_t id);

// Joint `id`, or NULL.
const view_joint_t* view_find_joint(const step_view_t* v, uint32_t id);

// Whether the step should stop now (the request was cancelled or ran out of time).
int view_cancelled(const step_view_t* v);

// Fraction of the interval at absolute time t (clamped to [0, 1]; 0 when t1 == t0).
double view_fraction(const step_view_t* v, double t);

// World pose at fraction s of a frame mounted at `mount` on body `body` (NULL = world): the
// body's pose interpolated (lerp + slerp), the mount composed rigidly on it.
pose_t view_mount_pose(const view_body_t* body, const pose_t* mount, double s);

#endif  // SENSIM_SENSOR_VIEW_H_
