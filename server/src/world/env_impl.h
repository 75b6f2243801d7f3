// SPDX-License-Identifier: MIT
// env_impl.h: the private layout of env_t, shared by the files that implement env.h (env.c:
// entities and settings; env_time.c: states, steps and raycasts). Nothing outside world/
// includes this header.
#ifndef SENSIM_WORLD_ENV_IMPL_H_
#define SENSIM_WORLD_ENV_IMPL_H_

#include <stdint.h>

#include "sensor/sensor.h"
#include "world/env.h"
#include "world/table.h"

// A mesh or an analytic primitive (one id space).
typedef struct env_geometry {
  int handle;                   // scene geometry handle
  int is_mesh;
  scene_prim_kind_t prim;       // when !is_mesh
  uint32_t nvertex;             // mesh only
  uint32_t ntriangle;           // mesh only
  uint32_t* material_ids;       // per triangle, 0 = the object's material (ntriangle); nullable
  double extent;                // largest distance of the geometry from its origin, m
  uint64_t nuser;               // objects using this geometry
  char* name;
} env_geometry_t;

typedef struct env_material {
  surface_material_t m;
  uint64_t nuser;               // objects + mesh triangles referring to it
  char* name;
} env_material_t;

typedef struct env_medium {
  ambient_material_t a;
  uint64_t nuser;               // objects filled with it
} env_medium_t;

typedef struct env_body {
  // what a state update reads and writes first, together (two or three cache lines of the
  // record rather than all five: an update of many bodies is bound by their records' misses)
  uint64_t stamp;               // last env_update_state call naming this body
  double update_sq;             // that call's orientation's xform_quat_sq, from its check to
                                // its normalisation (meaningless once the call returns)
  int moved;                    // ENV_BODY_* bits; listed in env->moved_bodies while non-zero
  int has_velocity;             // the velocities at t_cur were sent (or given at creation)
  pose_t pose_cur;              // state at t_cur
  double linear_velocity[3];    // m/s, world, of the body origin, at t_cur
  double angular_velocity[3];   // rad/s, world, at t_cur
  uint32_t view_at;             // its entry in env->view_bodies (while !env->view_stale)

  pose_t pose_prev;             // state at t_prev (start of the interval)
  double center_of_mass[3];     // m, body frame
  double linear_velocity_prev[3];   // at t_prev
  double angular_velocity_prev[3];  // at t_prev
  int has_velocity_prev;        // the same at t_prev
  uint32_t nsensor;             // sensors mounted on it
  uint32_t* objects;            // slots of the objects carried (nobject)
  uint32_t nobject;
  uint32_t object_cap;
  char* name;
} env_body_t;

// env_body_t.moved bits. MOVED: the state at t_cur differs from the one at t_prev (rolled at
// env_step). STALE: the instances of its objects do not show its motion yet (synced at the next
// env_commit). ROLLED: rolled at the last step; its instances still show the motion that ended
// at t_cur, which is right for the rays of an empty interval (s = 1): they are synced to stand
// still only when a new interval opens without an update of the body. So each moving object's
// instance is written once per step.
#define ENV_BODY_MOVED 1
#define ENV_BODY_STALE 2
#define ENV_BODY_ROLLED 4

typedef struct env_object {
  uint32_t geometry_id;
  uint32_t body_id;             // 0 = static world
  uint32_t material_id;
  uint32_t medium_id;           // 0 = opaque surface
  uint32_t label;
  pose_t local_pose;            // relative to the body
  double scale[3];              // per axis, in the object frame, before local_pose
  int instance;                 // scene instance handle
  char* name;
} env_object_t;

typedef struct env_joint {
  joint_type_t type;
  double position_prev;         // at t_prev
  double position;              // at t_cur
  uint32_t nsensor;             // sensors reading it
  uint64_t stamp;               // last env_update_state call naming this joint
  int moved;                    // listed in env->moved_joints
  uint32_t view_at;             // its entry in env->view_joints (while !env->view_stale)
  char* name;
} env_joint_t;

struct env {
  char* name;
  env_limits_t limits;
  scene_device_t* dev;          // borrowed
  scene_t* scene;
  pool_t* pool;                 // borrowed, nullable
  int dirty;                    // scene edited since the last commit

  // entities (records listed above); id 0 of materials and media lives outside the tables
  table_t geometries;
  env_material_t material0;     // the default surface material, id 0
  table_t materials;            // ids > 0
  env_medium_t medium0;         // the environment's ambient medium, id 0
  table_t media;                // ids > 0
  table_t bodies;
  table_t objects;
  table_t joints;

  // settings
  double gravity[3];            // m/s^2
  double magnetic_field[3];     // T
  env_dipole_t* dipoles;        // (ndipole)
  uint32_t ndipole;
  uint64_t seed;
  int freeze_objects;

  // sensors (env_sensor_t) and what the last step produced
  table_t sensors;
  sensor_out_t outputs;         // records of the last step, valid until the next step
  // The step view's bodies and joints, sorted by id, persist from step to step: each state
  // change writes its own entry (env_view_body, env_view_joint), so a step costs what moved,
  // not what exists. Creating or removing a body or joint marks them stale: the next step
  // rebuilds them (and each record's view_at) once.
  int view_stale;
  view_body_t* view_bodies;     // (view_nbody)
  uint32_t view_nbody;
  uint32_t view_body_cap;
  view_joint_t* view_joints;    // (view_njoint)
  uint32_t view_njoint;
  uint32_t view_joint_cap;
  field_dipole_t* view_dipoles;
  uint32_t view_dipole_cap;
  view_object_t* view_objects;  // only while a sensor needs object shapes (the cone sensor)
  uint32_t view_object_cap;

  // time line
  int has_time;                 // a state was set
  int has_stepped;              // a step was done
  double t_prev;                // start of the current interval
  double t_cur;                 // time of the last state
  uint64_t changes;             // env_changes (counted by the owner)
  double t_step;                // time of the last step
  uint64_t steps;
  uint64_t update_stamp;        // counts env_update_state calls (duplicate detection)

  // bodies and joints changed since the last step: their prev state rolls at env_step
  uint32_t* moved_bodies;       // body slots (nmoved_body), capacity >= bodies.count
  uint32_t nmoved_body;
  uint32_t moved_body_cap;
  uint32_t* update_slots;       // the slots of an update's bodies, found once by its check;
                                // kept after it as the next update's guesses (a client names
                                // the same bodies in the same order tick after tick), each
                                // taken only where table_holds confirms it; TABLE_NONE unused
  uint32_t update_slot_cap;     // >= bodies.count (an update names each body at most once)
  uint32_t* moved_joints;       // joint slots (nmoved_joint), capacity >= joints.count
  uint32_t nmoved_joint;
  uint32_t moved_joint_cap;
};

typedef struct env_sensor {
  sensor_t sensor;              // owned
  sensor_ctx_t ctx;             // id, body, mount
  char* name;
  env_sensor_brief_t brief;     // for env_list_sensors
} env_sensor_t;

// Sensor table lifetime (env_sensor.c).
void env_sensors_init(env_t* e);
void env_sensors_close(env_t* e);

// Write a body's (joint's) states at both ends into its entry of the persistent step view;
// nothing while the view is stale (env_sensor.c). Called after every change of those states.
void env_view_body(env_t* e, const env_body_t* b);
// The same when only its state at t_cur changed (the entry shows its state at t_prev already).
void env_view_body_cur(env_t* e, const env_body_t* b);
void env_view_joint(env_t* e, const env_joint_t* j);

// Remove a sensor (env_sensor.c).
int env_remove_sensor(env_t* e, uint32_t id, err_msg_t* msg);

// Evaluate every sensor over (t_prev, t_cur] into e->outputs; on failure no record is kept and
// every sensor is as it was (env_sensor.c). Called by env_step after the commit.
int env_eval_sensors(env_t* e, const env_step_hooks_t* hooks, err_msg_t* msg);

// ERR_LIMIT naming the sensor when a step over (t0, t1] could not run (sensor_ops_t.bound);
// only: the one sensor to check (NULL: every sensor of e). 0 for an empty interval.
int env_check_step(env_t* e, double t0, double t1, const env_sensor_t* only, err_msg_t* msg);

// World position and moment of a dipole at t_cur (env.c).
void env_dipole_world(const env_t* e, const env_dipole_t* d, field_dipole_t* out);

// Set the scene instance of an object from its body's prev/cur poses (b: its body, NULL for
// the static world).
void env_sync_object(env_t* e, const env_object_t* o, const env_body_t* b);

// Re-sync every object carried by a body.
void env_sync_body(env_t* e, const env_body_t* b);

// Sync the objects of every ENV_BODY_STALE body, and of every ENV_BODY_ROLLED one once a new
// interval is open; drop the bodies left with no bit from env->moved_bodies (env_time.c;
// called by env_commit).
void env_sync_moved(env_t* e);

// Material or medium of an id (0 = the defaults), or NULL.
env_material_t* env_find_material(const env_t* e, uint32_t id);
env_medium_t* env_find_medium(const env_t* e, uint32_t id);

// Add (delta = +1) or drop (-1) the references held by per-triangle material ids (0 = none).
void env_ref_materials(env_t* e, const uint32_t* ids, uint32_t n, int delta);

// Commit the scene if edited; ERR_BACKEND from the scene.
int env_commit(env_t* e, err_msg_t* msg);

// Smallest accepted quaternion norm; smaller ones carry no orientation.
#define ENV_QUAT_MIN_NORM 1e-9

#endif  // SENSIM_WORLD_ENV_IMPL_H_
