// SPDX-License-Identifier: MIT
// env.h: the Sensor Environment, the core's public API: geometries (meshes, primitives),
// surface materials, media, settings, bodies, objects, joints, the time line of states, and
// raycasts. No sockets, no protobuf: the daemon translates messages into these calls.
//
// Every mutating call validates all of its input first and either applies it whole or
// returns a negative code with a message naming the offending field and changes nothing.
//
// Time: env_update_state(t) sets the state at t (t must exceed the last state's time, except
// the very first update, which may be any finite t). env_step(t) (t = time of the last state)
// evaluates the interval (t_prev, t], where t_prev is the time of the previous step (or of
// the first state), and then makes the current state the start of the next interval. Objects
// and sensors are interpolated between the state at t_prev and the state at t.
//
// Thread: one thread at a time (the daemon runs every call of one environment on that
// environment's serial queue, possibly on a different executor thread each time). Different
// environments are independent and may be used from different threads at once; their data-
// parallel work shares the pool given to env_create, which serves several callers at once.
#ifndef SENSIM_WORLD_ENV_H_
#define SENSIM_WORLD_ENV_H_

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "base/xform.h"
#include "material/material.h"
#include "scene/scene.h"
#include "sensor/sensor.h"

typedef struct env env_t;
typedef struct pool pool_t;

typedef struct env_limits {
  uint32_t max_mesh_vertices;    // per mesh
  uint32_t max_mesh_triangles;   // per mesh
  uint32_t max_geometries;
  uint32_t max_materials;
  uint32_t max_media;
  uint32_t max_bodies;
  uint32_t max_objects;
  uint32_t max_joints;
  uint32_t max_sensors;
  uint32_t max_raycast_rays;     // per request
  uint32_t max_dipoles;
  uint64_t max_output_bytes;     // records of one sensor in one step (cloud bytes + 512 per
                                 //   record): the largest reply part (one record) and the
                                 //   bound of what a sensor may give a step
} env_limits_t;

// Defaults used by the daemon unless configured.
env_limits_t env_default_limits(void);

// The limits environment e was created with.
const env_limits_t* env_get_limits(const env_t* e);

// Bounds that keep every ray Embree traces valid: it traces in float and requires ray origins
// within 1.8e18 in each instance's frame, where an origin becomes (o - t) / scale. Positions
// (ray origins, body and object positions) are at most ENV_MAX_COORD in magnitude per axis and
// object scales at least ENV_MIN_SCALE, so that no origin exceeds about 5e15 there. Beyond
// these a raycast aborted the daemon inside Embree.
#define ENV_MAX_COORD 1e9       // m
// State times are at most this in magnitude (about 31.7 years): a double then still resolves
// 0.12 microseconds, finer than any lidar's firing interval.
#define ENV_MAX_TIME 1e9        // s
#define ENV_MIN_SCALE 1e-6
// Largest magnitude of the other physical quantities the environment takes, per component:
// body velocities (m/s, rad/s), gravity (m/s^2), the uniform magnetic field (T), dipole moments
// (A m^2) and joint positions (rad or m). Far beyond anything physical; with it no sensor model
// overflows a double (sensor/sensor.h, SENSOR_MAX_VALUE).
#define ENV_MAX_VALUE 1e12

// Create an empty environment: no geometry, default material 0 (Lambertian 0.8), medium 0 =
// air (docs/models/materials.md), gravity (0, 0, -9.80665), no magnetic field, seed 0, objects
// interpolated. dev: borrowed, must outlive the environment. pool: nullable (serial tracing).
env_t* env_create(const char* name, const env_limits_t* limits, scene_device_t* dev,
                  pool_t* pool, err_msg_t* msg);
void env_destroy(env_t* e);

const char* env_name(const env_t* e);

//---------------- Geometry

// Triangle mesh from packed little-endian bytes: vertices 12 bytes each (float32 x, y, z),
// indices 12 bytes each (uint32 a, b, c), material_ids 4 bytes per triangle (optional: NULL or
// length 0; a 0 entry means "the object's material"). Checks: id > 0 and free, lengths
// multiples of 12 / 4, counts non-zero and within limits, every vertex finite, every index <
// nvertex, material ids known. Pointers may be unaligned.
typedef struct mesh_desc {
  uint32_t id;
  const uint8_t* vertices;
  size_t vertices_len;
  const uint8_t* indices;
  size_t indices_len;
  const uint8_t* material_ids;  // nullable
  size_t material_ids_len;
  const char* name;             // nullable
} mesh_desc_t;

// Error codes of the create calls: ERR_INVAL (bad value, id 0), ERR_EXISTS (id in use),
// ERR_NOTFOUND (a referenced id is unknown), ERR_LIMIT (a limit of env_limits_t, named),
// ERR_NOMEM, or the scene's code.
int env_create_mesh(env_t* e, const mesh_desc_t* d, err_msg_t* msg) CHECKRET;

typedef struct prim_desc {
  uint32_t id;
  scene_prim_kind_t kind;
  double size[3];               // as scene_prim_kind_t documents; the rules are prim_check's
                                // (scene/prim.h): in [1e-6, 1e9] m, capsule half length and
                                // plane half side may be 0; unused entries ignored
  const char* name;             // nullable
} prim_desc_t;

int env_create_primitive(env_t* e, const prim_desc_t* d, err_msg_t* msg) CHECKRET;

// A height field (scene/hfield.h): its samples as the wire carries them, 4 little-endian bytes
// (float32) each, rows x columns of them. Traced as the triangle mesh hfield_mesh makes, within
// the limits of a mesh (max_mesh_vertices, max_mesh_triangles).
typedef struct hfield_desc {
  uint32_t id;
  uint32_t rows, columns;
  const uint8_t* heights;       // nullable when heights_len is 0
  size_t heights_len;
  double half_x, half_y;        // m
  double base_depth;            // m
  const char* name;             // nullable
} hfield_desc_t;

int env_create_height_field(env_t* e, const hfield_desc_t* d, err_msg_t* msg) CHECKRET;

//---------------- Materials, media, settings

// Create or replace surface material `id` (0 replaces the default). max_materials counts
// material 0, max_media counts medium 0.
int env_set_material(env_t* e, uint32_t id, const surface_material_t* m, const char* name,
                     err_msg_t* msg) CHECKRET;

// Set medium `id`: 0 = the environment's ambient medium; > 0 = a medium objects can fill.
int env_set_medium(env_t* e, uint32_t id, const ambient_material_t* a, err_msg_t* msg) CHECKRET;

// A dipole on a body moves and turns with it: position and moment are in the body frame.
typedef struct env_dipole {
  double moment[3];             // A m^2, in the frame of body_id (world if 0)
  double position[3];           // m, in the frame of body_id (world if 0)
  uint32_t body_id;
} env_dipole_t;

// Partial update of the settings: only fields with has_* set change. Dipoles: with
// replace_dipoles the list becomes `dipoles` (possibly empty), otherwise `dipoles` are
// appended. A body carrying a dipole cannot be removed.
typedef struct env_settings {
  int has_gravity;
  double gravity[3];
  int has_magnetic_field;
  double magnetic_field[3];
  int replace_dipoles;
  const env_dipole_t* dipoles;
  uint32_t ndipole;
  int has_seed;
  uint64_t seed;
  int has_freeze_objects;
  int freeze_objects;
} env_settings_t;

int env_set_settings(env_t* e, const env_settings_t* s, err_msg_t* msg) CHECKRET;

// Magnetic flux density at world point p at the current state (uniform field + dipoles,
// docs/models/imu.md, "Magnetometer").
void env_magnetic_field(const env_t* e, const double p[3], double dest[3]);

//---------------- Bodies, objects, joints

typedef struct body_desc {
  uint32_t id;                  // > 0 (0 is the static world)
  pose_t pose;                  // any non-zero quaternion (norm >= 1e-9), normalised here;
                                // |position| <= ENV_MAX_COORD per axis
  double linear_velocity[3];    // m/s, world frame, of the body origin (pose.position), not
                                // of the centre of mass
  double angular_velocity[3];   // rad/s, world frame
  double center_of_mass[3];     // body frame
  const char* name;
} body_desc_t;

int env_create_body(env_t* e, const body_desc_t* d, err_msg_t* msg) CHECKRET;

typedef struct object_desc {
  uint32_t id;                  // > 0
  uint32_t geometry_id;
  uint32_t body_id;             // 0 = static world
  pose_t local_pose;
  double scale[3];              // finite, |scale| >= ENV_MIN_SCALE; negative mirrors
  uint32_t material_id;
  uint32_t label;
  uint32_t medium_id;           // 0 = opaque surface
  const char* name;
  uint32_t group;               // 0..31: its bit in sensors' group masks
} object_desc_t;

int env_create_object(env_t* e, const object_desc_t* d, err_msg_t* msg) CHECKRET;

typedef enum joint_type {
  JOINT_TYPE_REVOLUTE = 0,
  JOINT_TYPE_PRISMATIC = 1,
} joint_type_t;

typedef struct joint_desc {
  uint32_t id;
  joint_type_t type;
  double position;
  const char* name;
} joint_desc_t;

int env_create_joint(env_t* e, const joint_desc_t* d, err_msg_t* msg) CHECKRET;

typedef enum env_entity {
  ENV_ENTITY_GEOMETRY = 1,
  ENV_ENTITY_MATERIAL,
  ENV_ENTITY_MEDIUM,
  ENV_ENTITY_BODY,
  ENV_ENTITY_OBJECT,
  ENV_ENTITY_JOINT,
  ENV_ENTITY_SENSOR,
} env_entity_t;

// Remove an entity. ERR_NOTFOUND for an unknown id; ERR_STATE when it is still referenced
// (geometry used by an object, body carrying objects or dipoles, material used by an object or
// a mesh triangle, medium used by an object, body carrying sensors, joint read by a sensor),
// naming one user; material 0 and medium 0 cannot be removed (ERR_INVAL).
int env_remove(env_t* e, env_entity_t kind, uint32_t id, err_msg_t* msg) CHECKRET;

//---------------- Time

// Packed state at time t: poses 7 per body (px py pz qx qy qz qw, wire order), velocities 6 per
// body (vx vy vz wx wy wz, nullable = unchanged). All or nothing: unknown or repeated ids,
// non-finite numbers, positions beyond ENV_MAX_COORD, zero quaternions, non-increasing time
// are rejected.
typedef struct env_state_update {
  double time;
  uint32_t nbody;
  const uint32_t* body_ids;
  const double* body_poses;
  const double* body_velocities;  // nullable
  uint32_t njoint;
  const uint32_t* joint_ids;
  const double* joint_positions;
} env_state_update_t;

// Besides the state itself, the interval the next step will cover, (t_prev, time], must be
// one every sensor can step (sensor_ops_t.bound: at most 2^26 rays of a lidar, 10^6 samples
// of a fixed-rate IMU, records of at most max_output_bytes per sensor): otherwise ERR_LIMIT naming the sensor, so that a step is
// refused here and the client can send a nearer time, instead of at every Step from then on.
int env_update_state(env_t* e, const env_state_update_t* u, err_msg_t* msg) CHECKRET;

// Step to time t: commits the scene, evaluates every sensor over (t_prev, t]. ERR_STATE when
// no state was set or t differs from the last state's time (exact comparison) or does not
// exceed the previous step's. Non-increasing update times are ERR_STATE as well.
// Thread: owner or one worker.
int env_step(env_t* e, double t, err_msg_t* msg) CHECKRET;

// The same, stoppable: sensors poll cancelled(ctx) between chunks of work; once it returns
// non-zero the step fails with ERR_STATE and changes nothing.
int env_step_cancellable(env_t* e, double t, int (*cancelled)(void* ctx), void* cancel_ctx,
                         err_msg_t* msg) CHECKRET;

// What a caller may add to a step. cancelled (nullable): as env_step_cancellable. accept
// (nullable): called with the step's records once every sensor succeeded and before anything
// is committed; a negative code (with msg) refuses the step, which then changes nothing.
typedef struct env_step_hooks {
  int (*cancelled)(void* ctx);
  int (*accept)(void* ctx, const sensor_out_t* records, err_msg_t* msg);
  void* ctx;
} env_step_hooks_t;

// env_step with hooks (nullable: none).
int env_step_with(env_t* e, double t, const env_step_hooks_t* hooks, err_msg_t* msg) CHECKRET;

// Times: the interval of the current step. Before any state: has_time = 0.
typedef struct env_time {
  int has_time;
  double t_prev;                // start of the interval (time of the previous step)
  double t_cur;                 // time of the last state
  uint64_t steps;               // steps done
} env_time_t;

void env_get_time(const env_t* e, env_time_t* out);

//---------------- Raycast

// Rays in world coordinates. times: absolute s in [t_prev, t_cur], the interval of the state not
// yet stepped (after env_step it is the instant t_cur until the next update), with a relative
// tolerance of 1e-12, and refused before any state (ntime = 0: t_cur; ntime = 1: one time for
// all; else ntime = nray). max_range <= 0 means +inf. cancelled (nullable) is polled between
// batches of rays from tracing threads; once it returns non-zero the call stops early and
// returns ERR_STATE.
typedef struct env_raycast {
  uint32_t nray;
  const double* origins;        // 3 per ray, |x| <= ENV_MAX_COORD; NULL with origin
  const double* origin;         // nullable: x y z every ray starts at, instead of origins
  const double* directions;     // 3 per ray, non-zero, normalised here
  double max_range;
  uint32_t ntime;
  const double* times;
  int (*cancelled)(void* ctx);  // nullable; Thread: any tracing thread
  void* cancel_ctx;
  const uint32_t* exclude_bodies;   // (nexclude_body) the rays pass through these bodies' objects
  uint32_t nexclude_body;       // at most ENV_MAX_EXCLUDED_BODIES
  uint32_t group_mask;          // object groups the rays see (bit g = CreateObject group g);
                                // 0 = all
  int hit_records;              // out is the reply's hit records: primitive written as 0
  // nullable: called by the tracing thread as soon as rays [first, first + n) are traced into
  // out + first, while their hits are still in its cache (first is a multiple of
  // ENV_RAYCAST_BATCH, n at most that, each batch once; batches run on any thread in any
  // order). It may rewrite those hits in place (a reply packing its records). Thread: any
  // tracing thread.
  void (*traced)(void* ctx, uint32_t first, uint32_t n, scene_hit_t* hits);
  void* traced_ctx;
} env_raycast_t;

// Rays of one batch of env_raycast_t.traced.
#define ENV_RAYCAST_BATCH 256

#define ENV_MAX_EXCLUDED_BODIES 1024

// The number of changes counted so far: the owner calls env_count_change after every call
// that changed the environment (a create, set, remove, state update or step that succeeded;
// a refused one changes nothing), so that two raycasts made when it had the same value saw the
// same world and the same time interval.
uint64_t env_changes(const env_t* e);
void env_count_change(env_t* e);

// Validate, commit the scene if needed, and trace. out: nray hits, provided by the caller.
// Uses the environment's pool when it has one; must not be called from inside a job of
// that pool. Thread: owner or one worker.
int env_raycast(env_t* e, const env_raycast_t* r, scene_hit_t* out, err_msg_t* msg) CHECKRET;

//---------------- Sensors

// A sensor built by its model's constructor (lidar/, imu/, joint/, cone/), mounted at `mount`
// (any non-zero quaternion, normalised here) on body `body_id` (0 = the world).
// What a client may learn of a sensor's outputs without its configuration (a lidar's cloud
// layout, frame and pattern), told by whoever built the sensor: kept for env_list_sensors.
typedef struct env_sensor_brief {
  sensor_field_t fields[SENSOR_MAX_FIELDS];   // (nfield) static names
  uint32_t nfield;
  uint32_t point_step;          // bytes per point; 0 = not a point cloud sensor
  int world_frame;              // points in the world frame
  int layout;                   // the wire's PointLayout it was created with
  const char* pattern;          // static: "vlp16", ...; nullable
} env_sensor_brief_t;

typedef struct sensor_desc {
  uint32_t id;                  // > 0
  uint32_t body_id;
  pose_t mount;
  const char* name;             // nullable
  sensor_t sensor;              // kind, ops, model state; joint_id when it reads a joint
  const env_sensor_brief_t* brief;  // nullable: copied
} sensor_desc_t;

// Add a sensor. Checks: id > 0 and free, room (max_sensors), body known, mount valid, the
// joint it reads known. On success the environment owns d->sensor.self (destroyed by
// env_remove or env_destroy); on failure the caller still owns it.
int env_create_sensor(env_t* e, const sensor_desc_t* d, err_msg_t* msg) CHECKRET;

// Records of the last successful env_step, in sensor id order (empty before the first step
// and after a failed one). Valid until the next env_step or env_destroy.
const sensor_out_t* env_outputs(const env_t* e);

// Move the records of the last successful step to the end of dst (with their clouds' buffers:
// nothing is copied), leaving env_outputs empty. ERR_NOMEM (nothing moved).
int env_take_outputs(env_t* e, sensor_out_t* dst) CHECKRET;

// Hand back what env_take_outputs moved out, once the caller is done with the records (their
// clouds' buffers are released here): their array holds the next step's records instead of a
// new one being allocated each step. spent is left empty, without an array.
void env_return_outputs(env_t* e, sensor_out_t* spent);

// Kind of sensor `id`, 0 when there is none.
sensor_kind_t env_sensor_kind(const env_t* e, uint32_t id);

//---------------- Introspection

typedef struct env_info {
  uint32_t geometries;
  uint32_t materials;
  uint32_t media;
  uint32_t bodies;
  uint32_t objects;
  uint32_t joints;
  uint32_t sensors;
  env_time_t time;
  scene_counters_t scene;
} env_info_t;

void env_get_info(const env_t* e, env_info_t* out);

// A sensor as created (env_list_sensors); name and brief valid until the next mutating call.
typedef struct env_sensor_info {
  uint32_t id;
  sensor_kind_t kind;
  const char* name;             // nullable
  uint32_t body_id;             // 0 = the world
  pose_t mount;                 // normalised
  uint32_t joint_id;            // 0 = none
  const env_sensor_brief_t* brief;
} env_sensor_info_t;

// A body at the last state (its pose at t_cur; before any state, its pose at creation).
typedef struct env_body_info {
  uint32_t id;
  const char* name;             // nullable; valid until the next mutating call
  pose_t pose;
} env_body_info_t;

// The sensors (bodies) with ids above `after`, in id order, at most max of them into out
// (max entries). Returns how many were written, or ERR_NOMEM; *more is set when ids above
// the last one written remain. Reads only.
int env_list_sensors(const env_t* e, uint32_t after, env_sensor_info_t* out, uint32_t max,
                     int* more) CHECKRET;
int env_list_bodies(const env_t* e, uint32_t after, env_body_info_t* out, uint32_t max,
                    int* more) CHECKRET;

//---------------- Lookups (for sensors; read-only)

// Surface material at a hit: the mesh's per-triangle material when it is non-zero, else the
// object's. NULL for an unknown object. Valid until the next mutating call.
// Thread: any, while the owner does not mutate the environment.
const surface_material_t* env_hit_material(const env_t* e, uint32_t object_id,
                                           uint32_t primitive);

// Medium `id` (0 = the environment's ambient), or NULL. Valid until the next mutating call.
const ambient_material_t* env_get_medium(const env_t* e, uint32_t id);

// World pose of a body at fraction s in [0, 1] of the current interval (lerp + slerp between
// the states at t_prev and t_cur); body 0 is the identity. ERR_NOTFOUND for an unknown body.
int env_body_pose(const env_t* e, uint32_t body_id, double s, pose_t* out) CHECKRET;

#endif  // SENSIM_WORLD_ENV_H_
