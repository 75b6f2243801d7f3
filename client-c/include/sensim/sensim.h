// SPDX-License-Identifier: MIT
// sensim.h: the public C client of sensimd (protocol v1): the whole protocol behind opaque
// handles. Every call returns a sensim_status_t and keeps its detail message on the handle.
//
// Conventions (client-c/README.md has the long form):
// - Units SI, frames right-handed x forward y left z up, quaternions x y z w, angles in rad.
// - Description structs (options, bodies, sensor configurations, ...) begin with struct_size
//   and are initialised by their sensim_*_init macro, which records the size the program was
//   compiled with: a newer library reads an older program's struct and gives the fields it does
//   not have their defaults, so the structs can grow without breaking the ABI. The
//   sensim_*_init_sized functions do nothing with a NULL struct.
// - Pointers passed in are borrowed for the call unless a function says otherwise; bulk arrays
//   (mesh data, poses, velocities, joint positions, rays) are sent from the caller's memory
//   without being copied.
// - Results a call returns by pointer ("views": info, step outputs, sensor data) are owned by
//   the handle and stay valid until the next call on the handle that returns views (each such
//   call says "Returns views") or sensim_client_close. Raycast hits go into the caller's
//   buffer.
// - Thread: one thread at a time per handle; separate handles are independent. Functions
//   without a handle (status names, *_init, decoding) may be called from any thread.
#ifndef SENSIM_SENSIM_H
#define SENSIM_SENSIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define SENSIM_API __attribute__((visibility("default")))
#else
#define SENSIM_API
#endif

#define SENSIM_PROTOCOL_VERSION 1

//---------------------------------------------------------------- Status

// The status table: name, value, description. Values up to 100 equal sensim.v1.StatusCode on
// the wire (the daemon's codes) and never change; values above 100 are raised by the client.
// A daemon's code this table does not have is never handed through: it reads SENSIM_EUNKNOWN.
// Recoverable: the handle can go on (fix the input, or retry). Not recoverable: the
// connection is closed; make a new one.
// clang-format off
#define SENSIM_STATUS_MAP(X)                                                                     \
  X(OK,                   0, "success")                                                          \
  /* recoverable: fix the argument or field named in the message */                             \
  X(INVALID_ARGUMENT,     3, "invalid argument")                                                 \
  /* recoverable: the request ran out of time in the daemon (--max-request-seconds) and      */ \
  /* changed nothing; not recoverable when the daemon closed the connection for a deadline   */ \
  X(DEADLINE_EXCEEDED,    4, "deadline exceeded")                                                \
  /* recoverable: an id does not exist */                                                        \
  X(NOT_FOUND,            5, "not found")                                                        \
  /* recoverable: an id is taken */                                                              \
  X(ALREADY_EXISTS,       6, "already exists")                                                   \
  /* recoverable unless the daemon closed the connection (frame size, client count) */          \
  X(RESOURCE_EXHAUSTED,   8, "resource exhausted")                                               \
  /* recoverable, except in the handshake: valid but not now */                                  \
  X(FAILED_PRECONDITION,  9, "failed precondition")                                              \
  /* recoverable: defined by the protocol, not served by this daemon */                          \
  X(UNIMPLEMENTED,       12, "not implemented by the daemon")                                    \
  /* not recoverable: a daemon bug or a backend failure */                                       \
  X(INTERNAL,            13, "internal error in the daemon")                                     \
  /* not recoverable: token missing or wrong (connection closed) */                              \
  X(UNAUTHENTICATED,     16, "unauthenticated")                                                  \
  /* not recoverable: socket error (connection closed) */                                        \
  X(EIO,                101, "input/output error on the connection")                             \
  /* not recoverable: the connection is closed (by the daemon, or after an earlier failure) */  \
  X(ECLOSED,            102, "connection closed")                                                \
  /* not recoverable: the handle's timeout passed in a blocking call (connection closed) */      \
  X(ETIMEDOUT,          103, "timed out")                                                        \
  /* not recoverable: the daemon sent something undecodable (connection closed); also a    */   \
  /* malformed point cloud given to a decoder (then recoverable)                            */   \
  X(EPROTO,             104, "protocol error")                                                   \
  /* recoverable if memory is freed */                                                           \
  X(ENOMEM,             105, "out of memory")                                                    \
  /* retry with a new sensim_client_connect: name resolution or TCP connect failed */            \
  X(ECONNECT,           106, "cannot connect")                                                   \
  /* recoverable: nothing arrived within a wait's own timeout; the request stays in flight */    \
  X(EAGAIN,             107, "not ready yet")                                                    \
  /* the daemon refused the request with a status code this client does not know (a newer   */   \
  /* daemon); the message gives its number. Recoverable unless the handle is closed          */   \
  X(EUNKNOWN,           108, "status code unknown to this client")
// clang-format on

// Result of every client call.
typedef enum sensim_status {
#define SENSIM_STATUS_ENUM_(name, value, text) SENSIM_##name = value,
  SENSIM_STATUS_MAP(SENSIM_STATUS_ENUM_)
#undef SENSIM_STATUS_ENUM_
} sensim_status_t;

// Return the name of a status, e.g. "INVALID_ARGUMENT"; "UNKNOWN" for other values.
// Ownership: static text. Thread: any.
SENSIM_API const char* sensim_status_name(sensim_status_t status);

// Return the description of a status, e.g. "invalid argument"; "unknown status" otherwise.
// Ownership: static text. Thread: any.
SENSIM_API const char* sensim_status_str(sensim_status_t status);

//---------------------------------------------------------------- Common types

// A frame relative to its parent: position (m) and unit quaternion x y z w (Hamilton, active,
// local -> parent). 56 bytes, the layout of one body in sensim_state_t.body_poses, so an array
// of poses can be passed there as it is.
typedef struct sensim_pose {
  double position[3];               // m
  double orientation[4];            // x y z w; the identity is 0 0 0 1
} sensim_pose_t;

// The identity pose (origin, no rotation). Thread: any.
SENSIM_API sensim_pose_t sensim_pose_identity(void);

// Role of a session (sensim.v1.Role).
typedef enum sensim_role {
  SENSIM_ROLE_CONTROLLER = 0,       // may describe the world, update state and step
  SENSIM_ROLE_OBSERVER = 1,         // may only read: info, raycast, subscribe
} sensim_role_t;

// What happens to an environment when its last client leaves (sensim.v1.Retention).
typedef enum sensim_retention {
  SENSIM_RETENTION_DEFAULT = 0,     // the daemon's --retention
  SENSIM_RETENTION_DESTROY = 1,     // destroyed with everything in it
  SENSIM_RETENTION_KEEP = 2,        // kept until a controller releases it or the daemon stops
} sensim_retention_t;

//---------------------------------------------------------------- Connection

// An open connection to sensimd. Opaque; create with sensim_client_connect.
typedef struct sensim_client sensim_client_t;

// Connection options. Initialise with sensim_options_init, then change what you need.
typedef struct sensim_options {
  uint32_t struct_size;             // set by sensim_options_init
  const char* environment;          // environment to join or create; NULL or "" = "default"
  const char* token;                // shared token of a daemon run with --token; NULL = none
  const char* client_name;          // free text shown in the daemon's logs; NULL = "sensim-c"
  sensim_role_t role;               // default SENSIM_ROLE_CONTROLLER
  sensim_retention_t retention;     // for the Hello that creates the environment; default
                                    //   SENSIM_RETENTION_DEFAULT
  int timeout_ms;                   // limit of every blocking call (connect, a request and its
                                    //   reply, large frames included); <= 0 = wait forever.
                                    //   Default 10000
  uint32_t max_frame_bytes;         // largest frame accepted from the daemon; default 64 MiB
  bool nonblocking;                 // *_send never waits: bytes the socket does not take at
                                    //   once are copied and sent by later calls. Default false
  uint32_t pushed_max_frames;       // pushed frames kept until read; the oldest are dropped
                                    //   past it (default 1024)
  uint64_t pushed_max_bytes;        // bytes of pushed frames kept (default 256 MiB)
} sensim_options_t;

// Fill opts with the defaults documented on sensim_options_t. Thread: any.
#define sensim_options_init(opts) sensim_options_init_sized((opts), sizeof(*(opts)))
SENSIM_API void sensim_options_init_sized(sensim_options_t* opts, size_t size);

// Connect to sensimd at host:port and perform the Hello handshake. On return *out is a handle
// even on failure (then closed, holding the reason in sensim_client_last_error), or NULL only
// when memory ran out; release it with sensim_client_close in every case.
// Returns SENSIM_OK, SENSIM_ECONNECT, SENSIM_ETIMEDOUT, SENSIM_UNAUTHENTICATED (token),
// SENSIM_FAILED_PRECONDITION (protocol version), SENSIM_RESOURCE_EXHAUSTED (too many clients),
// SENSIM_INVALID_ARGUMENT (an option), SENSIM_EIO, SENSIM_EPROTO or SENSIM_ENOMEM.
// Nullable: host ("127.0.0.1"), opts (defaults).
// Ownership: strings in opts are copied; *out is owned by the caller.
// Thread: any; the returned handle is used by one thread at a time.
SENSIM_API sensim_status_t sensim_client_connect(const char* host, uint16_t port,
                                                 const sensim_options_t* opts,
                                                 sensim_client_t** out);

// Close the connection and free the handle (requests in flight are dropped). NULL is a no-op.
SENSIM_API void sensim_client_close(sensim_client_t* cli);

// Return the detail message of the last failed call on this handle ("" if none): the daemon's
// status message naming the offending field, or the argument the client refused.
// Ownership: owned by the handle; valid until the next call on it.
SENSIM_API const char* sensim_client_last_error(const sensim_client_t* cli);

// Return the daemon's version string from the handshake ("" before it completed).
// Ownership: owned by the handle; valid until sensim_client_close.
SENSIM_API const char* sensim_client_server_version(const sensim_client_t* cli);

// The daemon's limits (sensim.v1.Limits); 0 where the daemon does not report one.
typedef struct sensim_limits {
  uint32_t max_frame_bytes;         // largest frame either way
  uint32_t max_clients;
  uint32_t max_environments;
  uint32_t max_mesh_vertices;
  uint32_t max_mesh_triangles;
  uint32_t max_geometries;
  uint32_t max_materials;
  uint32_t max_bodies;
  uint32_t max_objects;
  uint32_t max_joints;
  uint32_t max_sensors;
  uint32_t max_rays_per_step;
  uint32_t max_raycast_rays;
  uint64_t max_queue_bytes;
  uint64_t max_scene_bytes;
  uint64_t max_held_bytes;
  uint32_t max_name_bytes;
  uint32_t handshake_timeout_ms;
  uint32_t idle_timeout_ms;
  uint32_t io_timeout_ms;
  uint32_t max_request_ms;
  uint32_t max_hello_bytes;
  uint64_t subscriber_max_bytes;
  uint64_t subscriber_soft_bytes;
  uint32_t subscriber_soft_ms;
} sensim_limits_t;

// The handshake's outcome (HelloReply).
typedef struct sensim_session {
  const char* server_version;
  uint32_t protocol_version;
  uint64_t session_id;
  const char* environment;          // the environment joined
  bool environment_created;         // this connection's Hello created it
  uint32_t threads;                 // the daemon's worker threads
  sensim_limits_t limits;
  uint64_t features;                // SENSIM_FEATURE_* bits: forms the daemon takes (0: none)
} sensim_session_t;

// Bits of sensim_session_t.features (HelloReply.features).
#define SENSIM_FEATURE_RAYCAST_ORIGIN 1u   // Raycast.origin: one origin sent for every ray
#define SENSIM_FEATURE_RAYCAST_HIT_MASK 2u // Raycast.omit_misses: replies without the misses

// Return the handshake's outcome (fields zero and strings "" before it completed).
// Ownership: owned by the handle; valid until sensim_client_close.
SENSIM_API const sensim_session_t* sensim_client_session(const sensim_client_t* cli);

//---------------------------------------------------------------- Engine loop

// Every request has an id (> 0, increasing). The *_send functions send a request and return
// its id without waiting for the reply; a wait collects it later. Replies arrive in request
// order; any number up to 4096 may be in flight. Every id must be collected by its wait (or
// given up with sensim_discard), else it keeps its place in the 4096.

// The connection's socket, for the caller's own poll/select/epoll loop: wait for POLLIN
// (replies, pushed data) and, while sensim_client_want_write is true, POLLOUT; then call
// sensim_client_pump(cli, 0). Do not read, write or close it yourself. -1 when closed.
SENSIM_API int sensim_client_fd(const sensim_client_t* cli);

// True while request bytes wait in the handle's output queue (nonblocking mode).
SENSIM_API bool sensim_client_want_write(const sensim_client_t* cli);

// Send queued request bytes and receive what has arrived, waiting up to timeout_ms for
// something to move (0 = not at all; < 0 = the handle's timeout). Received replies are kept
// for their waits and pushed data for sensim_next_sensor_data. Returns SENSIM_OK (also when
// nothing moved) or a transport status (the connection is then closed).
SENSIM_API sensim_status_t sensim_client_pump(sensim_client_t* cli, int timeout_ms);

// Wait for the reply to request `id` (any kind that answers with a status alone: scene,
// sensors, update_state, subscribe, ...) and return its status; the daemon's message is the
// last error. timeout_ms: >= 0 waits at most that long and returns SENSIM_EAGAIN if the reply
// has not arrived (it stays in flight: wait again); < 0 waits up to the handle's timeout
// (SENSIM_ETIMEDOUT, connection closed). SENSIM_INVALID_ARGUMENT for an id not in flight or
// of another kind (use that kind's wait).
SENSIM_API sensim_status_t sensim_wait(sensim_client_t* cli, uint64_t id, int timeout_ms);

// Give up request `id`: its reply is dropped when it arrives (a raycast's hits buffer is not
// written any more once this returns). SENSIM_INVALID_ARGUMENT for an id not in flight.
SENSIM_API sensim_status_t sensim_discard(sensim_client_t* cli, uint64_t id);

//---------------------------------------------------------------- Session requests

// Send a Ping carrying len bytes of payload (at most 256) and wait for the echo. On SENSIM_OK
// the echo matched and *server_time_ns, if given, is the daemon's monotonic clock.
// Returns SENSIM_INVALID_ARGUMENT for a payload over 256 bytes, SENSIM_EPROTO if the echo
// differs, or a transport status.
// Nullable: payload (when len is 0), server_time_ns.
SENSIM_API sensim_status_t sensim_ping(sensim_client_t* cli, const void* payload, size_t len,
                                       uint64_t* server_time_ns);

// Counters are read generically: every counter the daemon sends is kept by its field number
// in sensim.v1.Counters (below 64), including counters newer than this header.
#define SENSIM_COUNTERS_MAX 64

// Field numbers of the counters this header knows (sensim.v1.Counters).
typedef enum sensim_counter {
  SENSIM_COUNTER_FRAMES_IN = 1,             // frames received
  SENSIM_COUNTER_FRAMES_OUT = 2,            // frames sent
  SENSIM_COUNTER_BYTES_IN = 3,
  SENSIM_COUNTER_BYTES_OUT = 4,
  SENSIM_COUNTER_REQUESTS_FAILED = 5,       // replies with a status other than OK
  SENSIM_COUNTER_CONNECTIONS_TOTAL = 6,
  SENSIM_COUNTER_CONNECTIONS_REJECTED = 7,  // over --max-clients
  SENSIM_COUNTER_FRAMES_REJECTED = 8,       // oversize, zero length or undecodable
  SENSIM_COUNTER_STEPS = 9,
  SENSIM_COUNTER_RAYS_TRACED = 10,
  SENSIM_COUNTER_MESH_BUILDS = 11,          // bottom-level builds
  SENSIM_COUNTER_INSTANCE_UPDATES = 12,
  SENSIM_COUNTER_SCENE_COMMITS = 13,        // top-level commits
  SENSIM_COUNTER_BACKEND_ERRORS = 14,
  SENSIM_COUNTER_BACKEND_BYTES = 15,        // memory held by the ray-tracing backend now
  SENSIM_COUNTER_FRAMES_DROPPED = 16,       // sensor frames dropped for slow subscribers
  SENSIM_COUNTER_HELD_BYTES = 17,           // bytes queued now for all connections
  SENSIM_COUNTER_CONNECTIONS_TIMED_OUT = 18,
  SENSIM_COUNTER_REQUESTS_TIMED_OUT = 19,   // answered DEADLINE_EXCEEDED
  SENSIM_COUNTER_BYTES_DROPPED = 20,
  SENSIM_COUNTER_SUBSCRIBERS_CLOSED = 21,
  SENSIM_COUNTER_RAYS_CULLED = 22,          // lidar rays above the step's horizon
  SENSIM_COUNTER_RAYS_INVALID = 23,
} sensim_counter_t;

typedef struct sensim_counters {
  uint64_t value[SENSIM_COUNTERS_MAX];      // by field number; 0 when not sent
  uint64_t present;                         // bit f set: field f was sent
} sensim_counters_t;

// Return the name of counter field `field` as in the protocol ("rays_traced"), or NULL for a
// field this library does not know. Thread: any.
SENSIM_API const char* sensim_counter_name(unsigned field);

typedef struct sensim_environment_info {
  const char* name;
  uint32_t clients, geometries, materials, bodies, objects, joints, sensors;
  bool has_time;
  double time;                      // s, of the last applied state
  uint64_t steps;
  sensim_counters_t counters;       // this environment's steps, rays, builds, updates, commits
  sensim_retention_t retention;
} sensim_environment_info_t;

// PointCloud.encoding (sensim.v1.Encoding).
typedef enum sensim_encoding {
  SENSIM_ENCODING_RAW = 0,
  SENSIM_ENCODING_ZSTD = 1,
  SENSIM_ENCODING_QUANTIZED_ZSTD = 2,
} sensim_encoding_t;

typedef struct sensim_subscriber_info {
  uint64_t session_id;
  const char* environment;
  uint32_t sensor_id;
  sensim_encoding_t encoding;
  double precision;                 // m, QUANTIZED_ZSTD
  uint64_t queued_bytes;
  uint32_t queued_frames;
  uint64_t frames_sent, bytes_sent, frames_dropped, bytes_dropped;
  const char* closed_reason;        // "" for a live subscription
  const char* peer;
} sensim_subscriber_info_t;

// What sensim_get_info reports (sensim.v1.Info).
typedef struct sensim_info {
  const char* server_version;
  uint32_t protocol_version;
  double uptime_s;
  uint32_t connections;             // open client connections, this one included
  uint32_t threads;
  sensim_counters_t counters;       // daemon totals
  uint32_t nenvironments;
  const sensim_environment_info_t* environments;
  sensim_limits_t limits;
  uint32_t nsubscribers;
  const sensim_subscriber_info_t* subscribers;
} sensim_info_t;

// Ask the daemon for its state and counters (GetInfo). On SENSIM_OK *out points at the info.
// Returns views.
SENSIM_API sensim_status_t sensim_get_info(sensim_client_t* cli, const sensim_info_t** out);

//---------------------------------------------------------------- Scene

// A triangle mesh (CreateMesh): float32 vertices and uint32 indices, sent from these arrays.
typedef struct sensim_mesh {
  uint32_t struct_size;
  uint32_t id;                      // geometry id, > 0, shared with primitives
  const float* vertices;            // x y z per vertex
  uint32_t nvertices;
  const uint32_t* indices;          // a b c per triangle
  uint32_t ntriangles;
  const uint32_t* material_ids;     // NULL, or one per triangle (overrides the object's)
  const char* name;                 // NULL = none
} sensim_mesh_t;
#define sensim_mesh_init(m) sensim_mesh_init_sized((m), sizeof(*(m)))
SENSIM_API void sensim_mesh_init_sized(sensim_mesh_t* mesh, size_t size);
SENSIM_API sensim_status_t sensim_create_mesh(sensim_client_t* cli, const sensim_mesh_t* mesh);

typedef enum sensim_shape {
  SENSIM_SHAPE_BOX = 1,             // half_extents
  SENSIM_SHAPE_SPHERE = 2,          // radius
  SENSIM_SHAPE_CYLINDER = 3,        // radius, half_length; axis along local z
  SENSIM_SHAPE_CAPSULE = 4,         // radius, half_length of the cylindrical part (0: sphere)
  SENSIM_SHAPE_PLANE = 5,           // half_size of the square z = 0 (0: effectively infinite)
  SENSIM_SHAPE_ELLIPSOID = 6,       // radii along local x, y, z
  SENSIM_SHAPE_RECTANGLE = 7,       // half_size_x, half_size_y of z = 0 (0: unbounded), one_sided
  SENSIM_SHAPE_HEIGHT_FIELD = 8,    // rows x columns heights over half_size_x, half_size_y; base
} sensim_shape_t;

// An analytic primitive (CreatePrimitive). Sizes in [1e-6, 1e9] m (see sensim.proto; the
// shapes and their frames: docs/frames.md, "Primitives").
typedef struct sensim_primitive {
  uint32_t struct_size;
  uint32_t id;                      // geometry id, > 0
  sensim_shape_t shape;             // default SENSIM_SHAPE_BOX
  double half_extents[3];           // box; default 0.5 0.5 0.5
  double radius;                    // default 0.5
  double half_length;               // default 0.5
  double half_size;                 // default 0
  const char* name;
  double radii[3];                  // ellipsoid; default 0.5 0.5 0.5
  double half_size_x, half_size_y;  // rectangle (0 = unbounded), height field; default 0
  bool one_sided;                   // rectangle: seen only by rays going towards -z; default
                                    //   false
  uint32_t rows, columns;           // height field: samples along y and x, each >= 2
  const float* heights;             // height field: rows x columns heights (m), row-major,
                                    //   row r at y = -half_size_y + r * 2 half_size_y /
                                    //   (rows - 1); sent from this array
  double base_depth;                // height field: depth of the solid below z = 0, m
} sensim_primitive_t;
#define sensim_primitive_init(p) sensim_primitive_init_sized((p), sizeof(*(p)))
SENSIM_API void sensim_primitive_init_sized(sensim_primitive_t* prim, size_t size);
SENSIM_API sensim_status_t sensim_create_primitive(sensim_client_t* cli,
                                                   const sensim_primitive_t* prim);

typedef enum sensim_material_model {
  SENSIM_MATERIAL_LAMBERTIAN = 1,   // reflectance
  SENSIM_MATERIAL_TWO_LAYER = 2,    // GGX specular over Oren-Nayar diffuse
} sensim_material_model_t;

// A surface material (SetMaterial; docs/models/materials.md). Id 0 is the built-in default.
typedef struct sensim_material {
  uint32_t struct_size;
  uint32_t id;
  sensim_material_model_t model;    // default LAMBERTIAN
  double reflectance;               // Lambertian C in [0, 1]; default 0.8
  double refractive_index;          // two-layer Re(n2) > 0; default 1.4517
  double extinction_coefficient;    // Im(n2) >= 0; default 0
  double specular_roughness;        // sigma_B >= 0; default 0.3
  double diffuse_reflectance;       // C in [0, 1]; default 0.8
  double diffuse_roughness;         // sigma_ON >= 0, rad; default 0.3
  const char* name;
} sensim_material_t;
#define sensim_material_init(m) sensim_material_init_sized((m), sizeof(*(m)))
SENSIM_API void sensim_material_init_sized(sensim_material_t* mat, size_t size);
SENSIM_API sensim_status_t sensim_set_material(sensim_client_t* cli,
                                               const sensim_material_t* mat);

typedef enum sensim_medium_kind {
  SENSIM_MEDIUM_CUSTOM = 1,         // the AmbientMaterial parameters below
  SENSIM_MEDIUM_CLEAR_AIR = 2,      // visibility
  SENSIM_MEDIUM_FOG = 3,            // visibility
  SENSIM_MEDIUM_RAIN = 4,           // rate
  SENSIM_MEDIUM_SNOW = 5,           // rate
} sensim_medium_kind_t;

// The environment's medium (id 0) or a medium objects can fill (SetAmbient).
typedef struct sensim_ambient {
  uint32_t struct_size;
  uint32_t id;                      // 0 = the environment's medium
  sensim_medium_kind_t kind;        // default CUSTOM
  double attenuation;               // 1/m >= 0; default 0.000402272 (air)
  double refractive_index;          // >= 1; default 1.000273
  double return_gamma_shape;        // > 0; default 9.5
  double return_gamma_scale;        // m > 0; default 0.52
  double return_probability_scaling;  // [0, 1]; default 1.58899e-5
  double atmospheric_backscatter;   // 1/sr >= 0; default 1/pi
  double visibility;                // m > 0, CLEAR_AIR and FOG; default 1000
  double rate;                      // mm/h > 0, RAIN and SNOW; default 1
} sensim_ambient_t;
#define sensim_ambient_init(a) sensim_ambient_init_sized((a), sizeof(*(a)))
SENSIM_API void sensim_ambient_init_sized(sensim_ambient_t* amb, size_t size);
SENSIM_API sensim_status_t sensim_set_ambient(sensim_client_t* cli, const sensim_ambient_t* amb);

// A point magnetic dipole (docs/models/imu.md).
typedef struct sensim_dipole {
  double moment[3];                 // A m^2
  double position[3];               // m, in the frame of body_id (world if 0)
  uint32_t body_id;
} sensim_dipole_t;

// Environment-wide settings (SetEnvironment); only the fields marked set are changed.
typedef struct sensim_environment {
  uint32_t struct_size;
  bool set_gravity;
  double gravity[3];                // m/s^2; the daemon's default (0, 0, -9.80665)
  bool set_magnetic_field;
  double magnetic_field[3];         // uniform B0, T
  bool set_dipoles;                 // replace the dipole list with these (none clears it)
  const sensim_dipole_t* dipoles;
  uint32_t ndipoles;
  bool set_seed;
  uint64_t seed;                    // random seed of every sensor
  bool set_freeze_objects;
  bool freeze_objects;              // objects at their end-of-step pose for every ray
} sensim_environment_t;
#define sensim_environment_init(e) sensim_environment_init_sized((e), sizeof(*(e)))
SENSIM_API void sensim_environment_init_sized(sensim_environment_t* env, size_t size);
SENSIM_API sensim_status_t sensim_set_environment(sensim_client_t* cli,
                                                  const sensim_environment_t* env);

// A rigid body (CreateBody). Velocities are of the body origin (the pose's position), world.
typedef struct sensim_body {
  uint32_t struct_size;
  uint32_t id;                      // > 0; 0 is the static world
  sensim_pose_t pose;               // model frame in world; default identity
  double linear_velocity[3];        // m/s
  double angular_velocity[3];       // rad/s
  double center_of_mass[3];         // m, in the body frame
  const char* name;
} sensim_body_t;
#define sensim_body_init(b) sensim_body_init_sized((b), sizeof(*(b)))
SENSIM_API void sensim_body_init_sized(sensim_body_t* body, size_t size);
SENSIM_API sensim_status_t sensim_create_body(sensim_client_t* cli, const sensim_body_t* body);

// A geometry placed on a body (CreateObject).
typedef struct sensim_object {
  uint32_t struct_size;
  uint32_t id;                      // > 0; reported as object_id by sensors
  uint32_t geometry_id;             // a mesh or primitive
  uint32_t body_id;                 // 0 = static
  sensim_pose_t local_pose;         // relative to the body; default identity
  double scale[3];                  // per axis, before local_pose; default 1 1 1
  uint32_t material_id;             // 0 = default
  uint32_t label;                   // semantic class reported by sensors
  uint32_t medium_id;               // > 0: a volume filled with this medium
  uint32_t group;                   // 0..31: its bit in sensors' group masks
  const char* name;
} sensim_object_t;
#define sensim_object_init(o) sensim_object_init_sized((o), sizeof(*(o)))
SENSIM_API void sensim_object_init_sized(sensim_object_t* obj, size_t size);
SENSIM_API sensim_status_t sensim_create_object(sensim_client_t* cli, const sensim_object_t* obj);

typedef enum sensim_joint_type {
  SENSIM_JOINT_REVOLUTE = 0,        // position in rad, continuous
  SENSIM_JOINT_PRISMATIC = 1,       // position in m
} sensim_joint_type_t;

typedef struct sensim_joint {
  uint32_t struct_size;
  uint32_t id;                      // > 0
  sensim_joint_type_t type;         // default REVOLUTE
  double position;                  // initial position
  const char* name;
} sensim_joint_t;
#define sensim_joint_init(j) sensim_joint_init_sized((j), sizeof(*(j)))
SENSIM_API void sensim_joint_init_sized(sensim_joint_t* joint, size_t size);
SENSIM_API sensim_status_t sensim_create_joint(sensim_client_t* cli, const sensim_joint_t* joint);

typedef enum sensim_entity {
  SENSIM_ENTITY_GEOMETRY = 1,
  SENSIM_ENTITY_MATERIAL = 2,
  SENSIM_ENTITY_MEDIUM = 3,
  SENSIM_ENTITY_BODY = 4,
  SENSIM_ENTITY_OBJECT = 5,
  SENSIM_ENTITY_JOINT = 6,
  SENSIM_ENTITY_SENSOR = 7,
  SENSIM_ENTITY_ENVIRONMENT = 8,    // this connection's environment (id ignored): no longer
                                    //   kept; destroyed when its last client leaves
} sensim_entity_t;

// Remove one entity (Remove). Removing something still referenced is FAILED_PRECONDITION; id 0
// is INVALID_ARGUMENT (body 0 is the world frame, material 0 and medium 0 the defaults).
SENSIM_API sensim_status_t sensim_remove(sensim_client_t* cli, sensim_entity_t kind, uint32_t id);

//---------------------------------------------------------------- Sensors

// What every sensor has (CreateSensor): its id, name and mount.
typedef struct sensim_sensor {
  uint32_t struct_size;
  uint32_t id;                      // > 0
  const char* name;
  uint32_t body_id;                 // 0 = world
  sensim_pose_t mount;              // relative to the body; default identity
} sensim_sensor_t;
#define sensim_sensor_init(s) sensim_sensor_init_sized((s), sizeof(*(s)))
SENSIM_API void sensim_sensor_init_sized(sensim_sensor_t* sensor, size_t size);

// Lidar scan patterns (docs/models/lidar.md, "Scan patterns and timing").
typedef enum sensim_lidar_pattern {
  SENSIM_PATTERN_SPINNING = 1,      // generic rotating lidar: channels x columns
  SENSIM_PATTERN_VLP16 = 2,         // Velodyne VLP-16 firing sequence
  SENSIM_PATTERN_OUSTER = 3,        // Ouster OS1-style uniform beams
  SENSIM_PATTERN_FLASH = 4,         // flash lidar pixel grid
  SENSIM_PATTERN_HDL64E = 5,        // Velodyne HDL-64E
  SENSIM_PATTERN_BPEARL = 6,        // RoboSense RS-Bpearl
  SENSIM_PATTERN_CUSTOM = 7,        // a ray list fired every 1 / frame_rate
  SENSIM_PATTERN_LIVOX = 8,         // Livox-style non-repetitive rosette
} sensim_lidar_pattern_t;

typedef enum sensim_spin {
  SENSIM_SPIN_CLOCKWISE = 0,        // seen from +z (Velodyne, Ouster)
  SENSIM_SPIN_COUNTER_CLOCKWISE = 1,
} sensim_spin_t;

typedef enum sensim_return_mode {
  SENSIM_RETURN_STRONGEST = 0,
  SENSIM_RETURN_FIRST = 1,
  SENSIM_RETURN_LAST = 2,
  SENSIM_RETURN_DUAL = 3,
  SENSIM_RETURN_ALL = 4,
} sensim_return_mode_t;

typedef enum sensim_output_frame {
  SENSIM_FRAME_SENSOR = 0,
  SENSIM_FRAME_WORLD = 1,
} sensim_output_frame_t;

typedef enum sensim_publish {
  SENSIM_PUBLISH_PER_REVOLUTION = 0,  // a cloud when a sweep completes (flash: per frame)
  SENSIM_PUBLISH_PER_STEP = 1,        // the part of the sweep inside each step
} sensim_publish_t;

typedef enum sensim_misses {
  SENSIM_MISSES_REMOVE = 0,         // no point for a ray without a return
  SENSIM_MISSES_ZERO = 1,           // a point at (0, 0, 0), distance 0 (the older keep_misses)
  SENSIM_MISSES_NAN = 2,            // a point at (NaN, NaN, NaN)
} sensim_misses_t;

typedef enum sensim_layout {
  SENSIM_LAYOUT_FIELDS = 0,         // the names in sensim_lidar_config_t.fields
  SENSIM_LAYOUT_VELODYNE = 1,       // x y z intensity ring time (velodyne_pointcloud)
  SENSIM_LAYOUT_OUSTER = 2,         // x y z intensity t reflectivity ring ambient range
  SENSIM_LAYOUT_XYZI = 3,           // x y z intensity
} sensim_layout_t;

typedef enum sensim_noise_axis {
  SENSIM_NOISE_AXIS_ELEVATION = 0,
  SENSIM_NOISE_AXIS_AZIMUTH = 1,
} sensim_noise_axis_t;

// A lidar (LidarConfig; docs/models/lidar.md). Initialise with sensim_lidar_config_init for a
// pattern: the struct of that pattern gets the defaults shown, and only it is sent. Arrays are
// borrowed for the call. A start_time of NAN means the start of the lidar's first step.
typedef struct sensim_lidar_config {
  uint32_t struct_size;
  sensim_lidar_pattern_t pattern;

  // patterns (the one selected by `pattern` is sent)
  struct {
    double frequency;               // Hz, (0, 1000]; default 10
    uint32_t columns;               // per revolution; default 1024
    const double* channel_elevations;     // rad, one per channel (required)
    uint32_t nchannels;
    const double* channel_azimuth_offsets;  // NULL or nchannels values, rad
    const double* channel_time_offsets;     // NULL or nchannels values, s
    sensim_spin_t spin;
    double start_azimuth;           // rad
    double start_time;              // s; NAN = the start of the lidar's first step
  } spinning;
  struct {
    double frequency;               // Hz, 5..20; default 10
    bool vertical_offsets;          // apply the per-laser origin offsets
    double start_azimuth, start_time;
  } vlp16;
  struct {
    uint32_t channels;              // 16, 32, 64 or 128; default 64
    uint32_t columns;               // 512, 1024 or 2048; default 1024
    double frequency;               // 10 or 20 Hz; default 10
    double elevation_max, elevation_min;  // rad; NAN = the datasheet's
    const double* beam_altitude_angles;   // NULL or one per channel, rad
    uint32_t nbeam_altitude_angles;
    const double* beam_azimuth_angles;    // NULL or one per channel, rad
    uint32_t nbeam_azimuth_angles;
    double lidar_origin_to_beam_origin;   // m, [0, 1]
    double start_time;
  } ouster;
  struct {
    uint32_t columns, rows;         // N_h x N_v <= 4194304; default 64 x 32
    double fov_horizontal;          // full angle, rad; default 1.0
    double fov_vertical;            // full angle, rad; default 0.5
    double frame_rate;              // Hz, (0, 10000]; default 10
    bool projective;                // pinhole grid instead of equi-angular
    double start_time;
  } flash;
  struct {
    double frequency;               // Hz, 5..20; default 10
    uint32_t columns;               // 0 = the datasheet point rate
    double start_azimuth, start_time;
  } hdl64e;
  struct {
    double frequency;               // 10 or 20 Hz; default 10
    double start_azimuth, start_time;
  } bpearl;
  struct {
    const double* azimuths;         // rad, one per ray (required)
    const double* elevations;       // rad, one per ray (required)
    const double* time_offsets;     // NULL or one per ray, s in [0, 1 / frame_rate)
    const uint32_t* channels;       // NULL or one per ray, 0..65535, reported as ring
    uint32_t nrays;
    double frame_rate;              // Hz, (0, 10000]; default 10
    double start_time;
  } custom;
  struct {
    double fov;                     // full cone angle, rad; default 38.4 deg
    double point_rate;              // rays per second; default 100000
    double frame_rate;              // Hz; default 10
    double prism_rates[2];          // rev/s; default 7294/60, -4664/60
    double start_time;
  } livox;

  // returns
  double range_min;                 // m; default 0.1
  double range_max;                 // m; INFINITY (default) = unlimited
  uint32_t raytrace_depth;          // 1..8; 0 = 1
  sensim_return_mode_t return_mode; // default STRONGEST
  uint32_t max_returns;             // RETURN_ALL; 0 = every candidate
  double intensity_threshold;       // 1/sr
  bool round_trip_attenuation;
  struct {                          // beam divergence attenuation (docs: "Beam divergence")
    bool enabled;                   // default false: no divergence loss
    double divergence;              // theta_D, 1/e^2 half angle, rad, (0, 0.1); default 0.001
    double exit_radius;             // m; default 0.005
    double detector_radius;         // m; NAN (default) = exit_radius
    double detector_offset;         // m
    bool clamp;
  } beam;
  struct {                          // distance noise; zeros = none
    double stddev_base;             // m
    double stddev_slope;            // m per m
    double mean;                    // m
  } distance_noise;
  struct {                          // ray angle noise; zeros = none
    sensim_noise_axis_t axis;
    double mean, stddev;            // rad
  } angle_noise;

  // output
  sensim_output_frame_t frame;      // default SENSOR
  sensim_publish_t publish;         // default PER_REVOLUTION
  const char* const* fields;        // point field names; NULL/0 = x y z intensity
  uint32_t nfields;                 //   (at most 16); not with a layout other than FIELDS
  sensim_misses_t misses;           // default REMOVE
  sensim_layout_t layout;           // default FIELDS

  // what it sees
  bool see_own_body;                // see the objects of the body it is mounted on
  const uint32_t* exclude_bodies;   // bodies whose objects it does not see (at most 64)
  uint32_t nexclude_bodies;
  uint32_t group_mask;              // object groups it sees (bit g = group g); 0 = all
} sensim_lidar_config_t;
#define sensim_lidar_config_init(c, pattern) \
  sensim_lidar_config_init_sized((c), sizeof(*(c)), (pattern))
SENSIM_API void sensim_lidar_config_init_sized(sensim_lidar_config_t* cfg, size_t size,
                                               sensim_lidar_pattern_t pattern);

// Create a lidar (CreateSensor{lidar}). Returns the daemon's status (INVALID_ARGUMENT naming
// e.g. "lidar.spinning.columns"), or SENSIM_INVALID_ARGUMENT for arguments the client refuses
// (among them more than 16 fields or 64 excluded bodies, before those arrays are read).
SENSIM_API sensim_status_t sensim_create_lidar(sensim_client_t* cli, const sensim_sensor_t* sensor,
                                               const sensim_lidar_config_t* cfg);

typedef enum sensim_cross_axis {
  SENSIM_CROSS_AXIS_NONE = 0,
  SENSIM_CROSS_AXIS_SCALAR = 1,     // every off-diagonal element
  SENSIM_CROSS_AXIS_MATRIX = 2,     // row-major 3x3
} sensim_cross_axis_t;

// The chain of every triaxial sensor (TriaxialConfig; docs/models/imu.md).
typedef struct sensim_triaxial {
  sensim_pose_t mount;              // relative to the IMU frame; default identity
  double range_lower[3];            // clamp per axis; -INFINITY (default) = none
  double range_upper[3];            // INFINITY (default) = none
  double bias[3];                   // zero-g / zero-rate / zero-flux bias
  sensim_cross_axis_t cross_axis;
  double cross_axis_scalar;         // [0, 1]
  double cross_axis_matrix[9];
  double noise_stddev[3];           // total RMS noise per axis
  double scaling[3];                // default 1 1 1
  double spectral_noise_density[3]; // per sqrt(Hz)
  uint32_t axes;                    // bit mask x=1 y=2 z=4; 0 = all three
  struct {                          // drift (TriaxialDrift), per axis; zeros = none
    double turn_on_bias_mean, turn_on_bias_stddev;
    double bias_instability;        // stationary std of the Gauss-Markov bias
    double bias_correlation_time;   // tau, s
    double random_walk;             // unit / sqrt(s)
    double precision;               // quantization step; 0 = off
  } drift;
} sensim_triaxial_t;

typedef enum sensim_lae {
  SENSIM_LAE_NONE = 0,              // no linear acceleration effect
  SENSIM_LAE_DIAGONAL = 1,          // lae_diagonal, (rad/s)/(m/s^2)
  SENSIM_LAE_MATRIX = 2,            // lae_matrix, row-major 3x3
} sensim_lae_t;

// An IMU (ImuConfig): the sub-sensors marked present.
typedef struct sensim_imu_config {
  uint32_t struct_size;
  bool has_accelerometer;           // default true
  sensim_triaxial_t accelerometer;
  bool literal_gravity_sign;        // F^T (a + g) as printed in the AGX text
  bool has_gyroscope;               // default true
  sensim_triaxial_t gyroscope;
  sensim_lae_t lae;
  double lae_diagonal[3];
  double lae_matrix[9];
  bool has_magnetometer;            // default false
  sensim_triaxial_t magnetometer;
  double sample_rate;               // Hz; 0 = one sample per step at its end
} sensim_imu_config_t;
#define sensim_imu_config_init(c) sensim_imu_config_init_sized((c), sizeof(*(c)))
SENSIM_API void sensim_imu_config_init_sized(sensim_imu_config_t* cfg, size_t size);
SENSIM_API sensim_status_t sensim_create_imu(sensim_client_t* cli, const sensim_sensor_t* sensor,
                                             const sensim_imu_config_t* cfg);

typedef enum sensim_encoder_mode {
  SENSIM_ENCODER_ABSOLUTE = 0,
  SENSIM_ENCODER_INCREMENTAL = 1,
} sensim_encoder_mode_t;

// An encoder on a joint (EncoderConfig; docs/models/joint_sensors.md).
typedef struct sensim_encoder_config {
  uint32_t struct_size;
  uint32_t joint_id;
  double noise_stddev;
  double resolution;                // bin width; 0 = none
  double scaling;                   // default 1
  sensim_encoder_mode_t mode;
  double range_lower;               // NAN (default) = -inf (absolute) / 0 (incremental)
  double range_upper;               // NAN (default) = +inf (absolute) / 2 pi (incremental)
  double speed_timeout;             // s; 0 = off
} sensim_encoder_config_t;
#define sensim_encoder_config_init(c) sensim_encoder_config_init_sized((c), sizeof(*(c)))
SENSIM_API void sensim_encoder_config_init_sized(sensim_encoder_config_t* cfg, size_t size);
SENSIM_API sensim_status_t sensim_create_encoder(sensim_client_t* cli,
                                                 const sensim_sensor_t* sensor,
                                                 const sensim_encoder_config_t* cfg);

// An odometer on a revolute joint (OdometerConfig).
typedef struct sensim_odometer_config {
  uint32_t struct_size;
  uint32_t joint_id;
  double wheel_radius;              // m; default 0.5
  uint32_t pulses_per_revolution;   // default 1024; 0 = no binning
  double noise_stddev;              // m
  double scaling;                   // default 1
} sensim_odometer_config_t;
#define sensim_odometer_config_init(c) sensim_odometer_config_init_sized((c), sizeof(*(c)))
SENSIM_API void sensim_odometer_config_init_sized(sensim_odometer_config_t* cfg, size_t size);
SENSIM_API sensim_status_t sensim_create_odometer(sensim_client_t* cli,
                                                  const sensim_sensor_t* sensor,
                                                  const sensim_odometer_config_t* cfg);

typedef enum sensim_cone_mode {
  SENSIM_CONE_EXACT = 0,            // true closest point inside the cone
  SENSIM_CONE_LINES = 1,            // line sampling of each face
} sensim_cone_mode_t;

// A cone proximity sensor (ConeConfig; docs/models/cone.md).
typedef struct sensim_cone_config {
  uint32_t struct_size;
  double fov_horizontal;            // full angle, rad, (0, pi); default 45 deg
  double fov_vertical;              // full angle, rad, (0, pi); default 30 deg
  double range;                     // m > 0; default 20
  sensim_cone_mode_t mode;
  uint32_t lines_per_face;          // [2, 100000] for LINES; default 10
} sensim_cone_config_t;
#define sensim_cone_config_init(c) sensim_cone_config_init_sized((c), sizeof(*(c)))
SENSIM_API void sensim_cone_config_init_sized(sensim_cone_config_t* cfg, size_t size);
SENSIM_API sensim_status_t sensim_create_cone(sensim_client_t* cli, const sensim_sensor_t* sensor,
                                              const sensim_cone_config_t* cfg);

//---------------------------------------------------------------- Sensor data

typedef enum sensim_datatype {
  SENSIM_DATATYPE_INT8 = 1,
  SENSIM_DATATYPE_UINT8 = 2,
  SENSIM_DATATYPE_INT16 = 3,
  SENSIM_DATATYPE_UINT16 = 4,
  SENSIM_DATATYPE_INT32 = 5,
  SENSIM_DATATYPE_UINT32 = 6,
  SENSIM_DATATYPE_FLOAT32 = 7,
  SENSIM_DATATYPE_FLOAT64 = 8,
} sensim_datatype_t;

// One field of a point, like sensor_msgs/PointField.
typedef struct sensim_point_field {
  const char* name;                 // "x", "intensity", "ring", ...
  uint32_t offset;                  // bytes from the start of a point
  sensim_datatype_t datatype;
  uint32_t count;
} sensim_point_field_t;

// A point cloud as the daemon sent it (PointCloud), like sensor_msgs/PointCloud2. `data` is a
// view of the received frame: RAW points can be read there directly; other encodings decode
// with sensim_point_cloud_decode.
typedef struct sensim_point_cloud {
  const sensim_point_field_t* fields;
  uint32_t nfields;
  uint32_t point_step;              // bytes per point
  uint32_t count;                   // points
  uint32_t height, width;           // height x width = count (1 x count unless organised)
  sensim_encoding_t encoding;
  const void* data;                 // encoded points, `size` bytes (not aligned)
  size_t size;
  double precision;                 // m, QUANTIZED_ZSTD
  double max_error;                 // m, bound of the position error of the encoding
  double frame_start_time;          // s; a point's time offset is relative to it
  bool complete;                    // a whole revolution (or flash frame)
  sensim_output_frame_t frame;
} sensim_point_cloud_t;

typedef struct sensim_imu_sample {
  bool has_acceleration;
  double acceleration[3];           // m/s^2
  bool has_angular_velocity;
  double angular_velocity[3];       // rad/s
  bool has_magnetic_field;
  double magnetic_field[3];         // T
  uint32_t nvalues;
  double values[9];                 // the selected axes, accelerometer first
} sensim_imu_sample_t;

typedef struct sensim_scalar_sample {
  double position;                  // encoder: rad or m; odometer: m
  bool has_speed;
  double speed;
} sensim_scalar_sample_t;

typedef struct sensim_cone_reading {
  bool detected;
  double range;                     // m
  double azimuth, elevation;        // rad
  bool has_speed;
  double speed;                     // m/s
  double point[3];                  // closest point, world frame
  uint32_t object_id;
} sensim_cone_reading_t;

typedef enum sensim_payload {
  SENSIM_PAYLOAD_NONE = 0,          // end_of_stream, or a kind newer than this header
  SENSIM_PAYLOAD_POINT_CLOUD = 10,
  SENSIM_PAYLOAD_IMU = 11,
  SENSIM_PAYLOAD_SCALAR = 12,
  SENSIM_PAYLOAD_CONE = 13,
} sensim_payload_t;

// One record of a sensor (SensorData): in a step's result or pushed to a subscriber.
typedef struct sensim_sensor_data {
  uint32_t sensor_id;
  double time;                      // s, end of the step (an IMU at a fixed rate: the sample's)
  double start_time;                // s, start of the step interval
  uint64_t frame;                   // the sensor's record counter
  uint64_t sequence;                // pushed: the subscription's frame number (a gap = drops)
  bool end_of_stream;               // pushed last when the sensor was removed; no payload
  sensim_payload_t kind;
  sensim_point_cloud_t point_cloud; // kind POINT_CLOUD
  sensim_imu_sample_t imu;          // kind IMU
  sensim_scalar_sample_t scalar;    // kind SCALAR (encoder, odometer)
  sensim_cone_reading_t cone;       // kind CONE
} sensim_sensor_data_t;

// Decode the `len` bytes of a PointCloud's data, in `encoding`, into `count` points of
// `point_step` bytes (out: at least count * point_step bytes, out_cap its size). Every
// encoding of docs/streams.md; QUANTIZED_ZSTD (byte format SQZ2, any other is refused)
// rebuilds positions exactly as the daemon's encoder measured them. Returns SENSIM_OK,
// SENSIM_INVALID_ARGUMENT when out_cap is too small, SENSIM_EPROTO when the bytes are not a
// valid encoding of such a cloud, SENSIM_ENOMEM.
// Nullable: data and out when count * point_step is 0.
// Thread: any (no client handle).
SENSIM_API sensim_status_t sensim_point_cloud_decode(sensim_encoding_t encoding, const void* data,
                                                     size_t len, uint32_t count,
                                                     uint32_t point_step, void* out,
                                                     size_t out_cap);

// Decode a received cloud into out (count * point_step bytes, out_cap its size); as
// sensim_point_cloud_decode. Thread: any.
SENSIM_API sensim_status_t sensim_point_cloud_read(const sensim_point_cloud_t* cloud, void* out,
                                                   size_t out_cap);

// Return the field called name, or NULL. Thread: any.
SENSIM_API const sensim_point_field_t* sensim_point_cloud_field(const sensim_point_cloud_t* cloud,
                                                                const char* name);

//---------------------------------------------------------------- Describe

typedef enum sensim_sensor_kind {
  SENSIM_SENSOR_UNSPECIFIED = 0,    // a kind newer than this library
  SENSIM_SENSOR_LIDAR = 1,
  SENSIM_SENSOR_IMU = 2,
  SENSIM_SENSOR_ENCODER = 3,
  SENSIM_SENSOR_ODOMETER = 4,
  SENSIM_SENSOR_CONE = 5,
} sensim_sensor_kind_t;

// One sensor of the environment (SensorDescription).
typedef struct sensim_sensor_description {
  uint32_t id;
  sensim_sensor_kind_t kind;
  const char* name;                 // "" when it has none
  uint32_t body_id;                 // 0 = the world
  sensim_pose_t mount;              // on its body, normalised quaternion
  uint32_t joint_id;                // an encoder's or odometer's joint, else 0
  // a lidar's clouds (kind LIDAR): their point fields, as its SensorData will carry them
  uint32_t nfields;
  const sensim_point_field_t* fields;
  uint32_t point_step;              // bytes per point
  sensim_output_frame_t frame;
  sensim_layout_t layout;
  const char* pattern;              // "vlp16", "ouster", ...; "" for other kinds
} sensim_sensor_description_t;

// One body at the last state (BodyDescription).
typedef struct sensim_body_description {
  uint32_t id;
  const char* name;                 // "" when it has none
  sensim_pose_t pose;               // in the world, at sensim_description_t.time
} sensim_body_description_t;

// What sensim_describe reports (Description): every sensor and body, in id order.
typedef struct sensim_description {
  const char* environment;
  bool has_time;                    // a state was applied
  double time;                      // s, of the last applied state
  uint64_t steps;
  uint32_t nsensors;
  const sensim_sensor_description_t* sensors;
  uint32_t nbodies;
  const sensim_body_description_t* bodies;
} sensim_description_t;

// List the sensors and bodies of this connection's environment (Describe; any role). The
// daemon answers in pages (256 sensors, 1024 bodies); this call asks for every page and joins
// them. Ids out of increasing order (a page that does not move on) are SENSIM_EPROTO. On
// SENSIM_OK *out points at the description. Returns views.
SENSIM_API sensim_status_t sensim_describe(sensim_client_t* cli,
                                           const sensim_description_t** out);

//---------------------------------------------------------------- Time and stepping

// The state at `time` (UpdateState): arrays read straight from the caller's memory.
typedef struct sensim_state {
  uint32_t struct_size;
  double time;                      // s; must exceed the previous state's time
  uint32_t nbodies;
  const uint32_t* body_ids;         // nbodies
  const double* body_poses;         // 7 per body: px py pz qx qy qz qw (sensim_pose_t[])
  const double* body_velocities;    // NULL, or 6 per body: vx vy vz wx wy wz, world, of the
                                    //   body origin
  uint32_t njoints;
  const uint32_t* joint_ids;        // njoints
  const double* joint_positions;    // njoints
} sensim_state_t;
#define sensim_state_init(s) sensim_state_init_sized((s), sizeof(*(s)))
SENSIM_API void sensim_state_init_sized(sensim_state_t* state, size_t size);

// Send the state and wait for the reply. Returns the daemon's status.
SENSIM_API sensim_status_t sensim_update_state(sensim_client_t* cli, const sensim_state_t* state);

// Send the state without waiting; *id is the request to wait for with sensim_wait. In
// blocking mode the arrays are sent from the caller's memory before this returns; in
// nonblocking mode what the socket did not take is copied (the arrays are free on return
// either way).
SENSIM_API sensim_status_t sensim_update_state_send(sensim_client_t* cli,
                                                    const sensim_state_t* state, uint64_t* id);

// What a step's reply carries (sensim.v1.StepOutputs; docs/streams.md, "Outputs of a step").
typedef enum sensim_step_outputs {
  SENSIM_STEP_OUTPUTS_ALL = 0,      // every sensor's records of the step (default)
  SENSIM_STEP_OUTPUTS_NONE = 1,     // the acknowledgement only: outputs go to subscribers
  SENSIM_STEP_OUTPUTS_LISTED = 2,   // the records of the sensors in output_sensors
} sensim_step_outputs_t;

// A step (Step): evaluate every sensor over (t_prev, time].
typedef struct sensim_step {
  uint32_t struct_size;
  double time;                      // must be the time of the last state
  sensim_step_outputs_t outputs;
  const uint32_t* output_sensors;   // LISTED: sensor ids, distinct (at most max_sensors)
  uint32_t noutput_sensors;
} sensim_step_t;
#define sensim_step_init(s) sensim_step_init_sized((s), sizeof(*(s)))
SENSIM_API void sensim_step_init_sized(sensim_step_t* step, size_t size);

// A step's reply (StepDone, with its records sent ahead in parts if there were).
typedef struct sensim_step_result {
  double time;
  uint64_t step;                    // index of this step, from 1
  uint32_t noutputs;
  const sensim_sensor_data_t* outputs;  // the records, in the daemon's order
  uint32_t outputs_in_parts;        // how many of them came ahead in frames of their own
} sensim_step_result_t;

// What the client keeps of the records sent ahead of one StepDone: at most
// SENSIM_STEP_MAX_PARTS frames, together at most SENSIM_STEP_MAX_PART_BYTES. The daemon sends
// one such frame per sensor (max_sensors, 1024) and keeps a whole reply within its
// max_queue_bytes (256 MiB); a peer that sends more does not speak the protocol, and the
// step's wait ends with SENSIM_EPROTO naming the limit, the connection closed.
#define SENSIM_STEP_MAX_PARTS 65536u
#define SENSIM_STEP_MAX_PART_BYTES ((uint64_t)256 << 20)

// Step and wait for the result. Returns views (the result and its records).
SENSIM_API sensim_status_t sensim_step(sensim_client_t* cli, const sensim_step_t* step,
                                       const sensim_step_result_t** out);

// Send a step without waiting; collect it with sensim_step_wait.
SENSIM_API sensim_status_t sensim_step_send(sensim_client_t* cli, const sensim_step_t* step,
                                            uint64_t* id);

// Wait for step `id` (timeouts as sensim_wait). Returns views.
SENSIM_API sensim_status_t sensim_step_wait(sensim_client_t* cli, uint64_t id, int timeout_ms,
                                            const sensim_step_result_t** out);

// The lock-step tick in one round trip: UpdateState and Step written together, both replies
// awaited. A refused state is reported (its status and message) before the step's.
// Returns views.
SENSIM_API sensim_status_t sensim_update_and_step(sensim_client_t* cli,
                                                  const sensim_state_t* state,
                                                  const sensim_step_t* step,
                                                  const sensim_step_result_t** out);

// The same tick sent in one write without waiting: collect the state's reply with
// sensim_wait(*state_id) and the step's with sensim_step_wait(*step_id). An engine keeps
// several ticks in flight this way and computes its next physics step meanwhile.
SENSIM_API sensim_status_t sensim_update_and_step_send(sensim_client_t* cli,
                                                       const sensim_state_t* state,
                                                       const sensim_step_t* step,
                                                       uint64_t* state_id, uint64_t* step_id);

//---------------------------------------------------------------- Raycast

// One ray's hit: the wire's 48-byte record (RaycastResult.hits_bytes), received in place.
typedef struct sensim_hit {
  double distance;                  // m; +inf on a miss
  double normal[3];                 // world frame, facing the ray; 0 on a miss
  uint32_t object_id;               // 0 on a miss
  uint32_t label;
  uint32_t reserved[2];             // zero
} sensim_hit_t;

// Rays to trace (Raycast), read straight from the caller's arrays.
typedef struct sensim_raycast {
  uint32_t struct_size;
  uint32_t nrays;
  const double* origins;            // x y z per ray, world, m
  const double* directions;         // x y z per ray, world; normalised by the daemon
  const double* times;              // NULL (end of the step), or ntimes absolute s
  uint32_t ntimes;                  //   inside the current interval: 1 for all rays, or nrays
  double max_range;                 // m; 0 = unlimited
  const uint32_t* exclude_bodies;   // rays pass through these bodies' objects
  uint32_t nexclude_bodies;         //   (at most 1024)
  uint32_t group_mask;              // object groups the rays see; 0 = all
  const double* origin;             // x y z every ray starts at, instead of origins (NULL)
} sensim_raycast_t;
#define sensim_raycast_init(r) sensim_raycast_init_sized((r), sizeof(*(r)))
SENSIM_API void sensim_raycast_init_sized(sensim_raycast_t* rays, size_t size);

// Trace rays and write one hit per ray into hits (nrays records), received straight into it.
// From 32,768 rays on, the rays go as requests of about 16,384 rays back to back (four in
// flight) so that the daemon traces one part while the next arrives; their replies must
// report one world_serial (nothing changed the environment in between), else the rays are
// sent again as one request. *world_serial, if given, is the environment's change count the
// rays saw. Rays that cannot fit in one request (the daemon's max_frame_bytes) are refused
// up front with SENSIM_RESOURCE_EXHAUSTED. Nullable: world_serial.
// One origin: rays that all start at one point (`origin` given, or the origins of a request
// or part all equal, bit for bit) send it once (Raycast.origin, 24 bytes a ray fewer) to a
// daemon with SENSIM_FEATURE_RAYCAST_ORIGIN; the hits are the same bit for bit. An older
// daemon gets the origin once per ray. A ray refused for its origin is then named `origin`.
// Misses left out: a daemon with SENSIM_FEATURE_RAYCAST_HIT_MASK is asked for the hits alone
// (Raycast.omit_misses: a hit mask and 40-byte records), received into the start of `hits`
// and spread over their rays in place, the misses written as distance +inf and the other
// fields 0: `hits` holds the same records, bit for bit, as from an older daemon.
SENSIM_API sensim_status_t sensim_raycast(sensim_client_t* cli, const sensim_raycast_t* rays,
                                          sensim_hit_t* hits, uint64_t* world_serial);

// Send one raycast request without waiting. The hits are written into `hits` when the reply
// arrives (during any later call on the handle), so it must stay valid until sensim_raycast_wait
// has returned for this id.
SENSIM_API sensim_status_t sensim_raycast_send(sensim_client_t* cli, const sensim_raycast_t* rays,
                                               sensim_hit_t* hits, uint64_t* id);

// Wait for raycast `id` (timeouts as sensim_wait). Nullable: world_serial.
SENSIM_API sensim_status_t sensim_raycast_wait(sensim_client_t* cli, uint64_t id, int timeout_ms,
                                               uint64_t* world_serial);

//---------------------------------------------------------------- Streams

// A subscription (Subscribe; docs/streams.md).
typedef struct sensim_subscription {
  uint32_t struct_size;
  uint32_t sensor_id;
  sensim_encoding_t encoding;       // default RAW
  double precision;                 // m, QUANTIZED_ZSTD; [1e-6, 1] whatever the encoding; 0.001
  int32_t level;                    // zstd level 1..19 (0: 1); default 1
  const char* const* fields;        // point fields wanted, in this order; NULL/0 = all
  uint32_t nfields;                 //   (at most 16)
} sensim_subscription_t;
#define sensim_subscription_init(s) sensim_subscription_init_sized((s), sizeof(*(s)))
SENSIM_API void sensim_subscription_init_sized(sensim_subscription_t* sub, size_t size);

// Receive a sensor's records as pushed data from the next step on. An unknown encoding, a
// level or a precision outside its range, or more than 16 fields is refused before sending
// (INVALID_ARGUMENT naming the member; no more of the fields is read than that).
SENSIM_API sensim_status_t sensim_subscribe(sensim_client_t* cli, const sensim_subscription_t* sub);

// End a subscription; no record of it arrives after this returns (earlier ones already
// received are still delivered by sensim_next_sensor_data).
SENSIM_API sensim_status_t sensim_unsubscribe(sensim_client_t* cli, uint32_t sensor_id);

// Return the next pushed record, waiting up to timeout_ms (0 = only what has arrived; < 0 =
// the handle's timeout, then SENSIM_EAGAIN too). SENSIM_EAGAIN when none came. Records that
// arrived while other calls waited are kept (pushed_max_frames, pushed_max_bytes; the oldest
// are dropped past them, counted by sensim_client_pushed_dropped). Returns views.
SENSIM_API sensim_status_t sensim_next_sensor_data(sensim_client_t* cli, int timeout_ms,
                                                   const sensim_sensor_data_t** out);

// Pushed frames the handle dropped because its queue was full.
SENSIM_API uint64_t sensim_client_pushed_dropped(const sensim_client_t* cli);

// Pushed frames received and not handed out yet (sensim_client_pump receives them).
SENSIM_API uint32_t sensim_client_pushed_queued(const sensim_client_t* cli);

#ifdef __cplusplus
}
#endif

#endif  // SENSIM_SENSIM_H
