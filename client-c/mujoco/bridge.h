// SPDX-License-Identifier: MIT
// bridge.h: the engine-independent half of a physics-engine bridge to sensimd. It mirrors a
// world described with the C client's own structs (bodies, geometries, objects, joints,
// sensors described by text specs), keeps the state arrays the engine writes every tick, and
// runs the loop: the state at t, a sensor step with outputs off every k ticks, ticks in
// flight, pacing against the wall clock. An engine adapter (mjbridge.c for MuJoCo) does the
// mapping of its model onto these calls; another engine's adapter is the same shape
// (docs/mujoco.md, "Another engine").
//
// Ownership: the bridge borrows the client handle given to bridge_create. Thread: one thread,
// the engine's, as the client handle.
#ifndef SENSIM_BRIDGE_H
#define SENSIM_BRIDGE_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sensim/sensim.h>

#include "spec.h"

#define BRIDGE_MAX_DEPTH 16

typedef struct bridge bridge_t;

// How the loop runs.
typedef struct bridge_options {
  uint32_t sensor_ratio;            // a sensor step every k engine ticks, >= 1; default 1
  double realtime;                  // simulated seconds per wall second to pace at; 0 = free
                                    //   running (default)
  uint32_t depth;                   // ticks in flight, 1..BRIDGE_MAX_DEPTH; default 2
  const volatile sig_atomic_t* stop;  // NULL, or a flag (set by a signal handler): pacing
                                    //   ends once it is nonzero, looked at least every second
} bridge_options_t;

void bridge_options_init(bridge_options_t* opts);

// What the loop did (bridge_stats).
typedef struct bridge_stats {
  uint64_t ticks;                   // engine ticks given to bridge_tick
  uint64_t steps;                   // daemon steps sent and collected
  double sim_seconds;               // simulated time from bridge_begin to the last tick
  double wall_seconds;              // wall time from bridge_begin to bridge_end
  double wait_seconds;              // wall time spent waiting for the daemon's replies
  double sleep_seconds;             // wall time spent pacing
} bridge_stats_t;

// Answers the bridge needs from the engine adapter while it reads sensor specs: where a named
// frame (a MuJoCo site) is, which joint a name is, which body a name is. Each returns true
// when the name exists.
typedef struct bridge_resolver {
  void* ctx;
  bool (*frame)(void* ctx, const char* name, uint32_t* body_id, sensim_pose_t* mount);
  // *wheel_radius: the radius of the round geometry the joint turns, or 0 if unknown
  bool (*joint)(void* ctx, const char* name, uint32_t* joint_id, double* wheel_radius);
  bool (*body)(void* ctx, const char* name, uint32_t* body_id);
} bridge_resolver_t;

// Create a bridge on a connected controller handle. Returns NULL when memory runs out.
bridge_t* bridge_create(sensim_client_t* cli, const bridge_options_t* opts);

// Free the bridge (not the client handle). NULL is a no-op.
void bridge_destroy(bridge_t* b);

// The detail of the last failure ("" if none). Owned by the bridge.
const char* bridge_last_error(const bridge_t* b);

// The client handle given to bridge_create.
sensim_client_t* bridge_client(const bridge_t* b);

//---------------- Describing the world (before bridge_begin)

// Environment-wide settings: gravity (m/s^2), uniform magnetic field (T).
sensim_status_t bridge_environment(bridge_t* b, const double gravity[3],
                                   const double magnetic_field[3]);

// A moving body at its initial state. It gets a slot in the state arrays, in call order;
// *slot may be NULL. Velocities are world frame, of the body origin.
sensim_status_t bridge_body(bridge_t* b, const sensim_body_t* body, uint32_t* slot);

// A joint whose position is sent every step; *slot in the joint arrays (NULL allowed).
sensim_status_t bridge_joint(bridge_t* b, const sensim_joint_t* joint, uint32_t* slot);

// A geometry (ids chosen by the caller) and the objects placing it.
sensim_status_t bridge_primitive(bridge_t* b, const sensim_primitive_t* prim);
sensim_status_t bridge_mesh(bridge_t* b, const sensim_mesh_t* mesh);
sensim_status_t bridge_object(bridge_t* b, const sensim_object_t* obj);

// A material from a spec text ("lambertian reflectance=0.2", see spec.h); id > 0.
sensim_status_t bridge_material(bridge_t* b, uint32_t id, const char* name, const char* text);

// The environment's medium from a spec text ("fog visibility=200", see spec.h).
sensim_status_t bridge_ambient(bridge_t* b, const char* text);

// A sensor from a spec text ("lidar site=roof pattern=vlp16 range_max=100", see spec.h),
// with the next free sensor id unless the text sets id=. Names in the text (site, joint,
// exclude) are resolved by res. *id may be NULL.
sensim_status_t bridge_sensor(bridge_t* b, const char* name, const char* text,
                              const bridge_resolver_t* res, uint32_t* id);

// A sensor from a parsed spec (its mount and ids already resolved). Takes the next free id
// when spec->id is 0. *id may be NULL.
sensim_status_t bridge_sensor_spec(bridge_t* b, const char* name, spec_sensor_t* spec,
                                   uint32_t* id);

//---------------- The state arrays (written by the engine before each bridge_tick)

uint32_t bridge_nbodies(const bridge_t* b);
uint32_t bridge_njoints(const bridge_t* b);

// 7 doubles per body slot: px py pz qx qy qz qw (scalar last), world frame.
double* bridge_poses(bridge_t* b);

// 6 doubles per body slot: vx vy vz wx wy wz, world frame, of the body origin.
double* bridge_velocities(bridge_t* b);

// 1 double per joint slot: rad (revolute) or m (prismatic).
double* bridge_joint_positions(bridge_t* b);

//---------------- The loop

// Wait until n subscriptions to this environment's sensors are open (another connection's
// Subscribe), polling GetInfo; SENSIM_ETIMEDOUT after timeout_s, SENSIM_FAILED_PRECONDITION
// once opts.stop is set.
sensim_status_t bridge_wait_subscribers(bridge_t* b, uint32_t n, double timeout_s);

// Send the state in the arrays as the first state, at time t0. Starts the clocks.
sensim_status_t bridge_begin(bridge_t* b, double t0);

// One engine tick: the arrays hold the state at t (> the previous). Every sensor_ratio-th
// tick sends that state and a step to t with outputs off (they go to subscribers), keeping
// up to depth ticks in flight; then paces. Returns the status of the first refused request
// (its message in bridge_last_error). Pacing returns early when a signal interrupts it or
// opts.stop is set (the caller decides whether to go on).
sensim_status_t bridge_tick(bridge_t* b, double t);

// Collect every tick in flight and stop the clocks.
sensim_status_t bridge_end(bridge_t* b);

// Remove every sensor the bridge created (their subscribers get end_of_stream).
sensim_status_t bridge_remove_sensors(bridge_t* b);

void bridge_stats(const bridge_t* b, bridge_stats_t* out);

#endif  // SENSIM_BRIDGE_H
