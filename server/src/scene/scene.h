// SPDX-License-Identifier: MIT
// scene.h: the ray-tracing backend's interface, the one the sensors, the raycasts and the
// environment use; its contract is written out in docs/backend.md. A scene holds geometries
// (triangle meshes, analytic primitives) built once, and objects: instances of a geometry,
// still or moving rigidly with a body over the step, so that a ray at time s in [0, 1] of the
// step sees each object where its body puts it at s. Rays are traced through one entry point,
// scene_trace, in the layout the caller holds them in.
//
// The backend here is Embree 3 on the CPU (the files of scene/ that include scene/embree.h);
// nothing of Embree shows in this header, so another backend could implement it without a
// change to a sensor.
//
// Thread: creation, geometry/instance edits and scene_commit on one thread (the environment's
// owner); scene_trace on any number of threads at once after a commit, never concurrently
// with edits or commits.
#ifndef SENSIM_SCENE_SCENE_H_
#define SENSIM_SCENE_SCENE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "base/xform.h"
#include "scene/horizon.h"

// Every ray's tnear, m: the smallest distance of a hit. A hit is the first surface within
// (0, tmax] (docs/backend.md): a ray starting exactly on a surface does not meet it at its
// origin. 2^-100 m is a normal float, far below any distance the tracer resolves, and Embree's
// tests against it (scaled by a triangle's determinant, or in the primitives' double
// arithmetic) stay exact under flush-to-zero, where zero would accept a hit at 0.
#define SCENE_RAY_TNEAR 0x1p-100f

// Half side of an "unbounded" plane, m: far beyond any lidar range, small enough for a BVH.
#define SCENE_PLANE_UNBOUNDED_HALF 1e5

typedef struct scene_device scene_device_t;
typedef struct scene scene_t;

// Counters of a scene (monotonic except backend_bytes).
typedef struct scene_counters {
  uint64_t geometry_builds;   // bottom-level BVH builds
  uint64_t instance_updates;  // instance transform updates
  uint64_t commits;           // top-level commits
  uint64_t flat_builds;       // builds of the flat scene (the world-fixed meshes, flat.c)
  uint64_t flat_objects;      // objects traced in the flat scene now
  uint64_t rays_traced;       // rays handed to the backend's traversal
  uint64_t rays_culled;       // rays above a horizon, missed without tracing (scene_trace)
  uint64_t rays_invalid;      // rays the backend must not be handed, missed (scene_trace)
  uint64_t backend_errors;    // errors reported by Embree for this device
  int64_t backend_bytes;      // memory held by Embree for this device (device-wide)
} scene_counters_t;

// The environment variable that configures every device a process creates: Embree's device
// configuration (rtcNewDevice), e.g. "isa=avx2" to run the AVX2 kernels on a CPU that has
// AVX-512 (docs/backend.md). Unset or empty: the best instruction set of the CPU.
#define SCENE_DEVICE_CONFIG_ENV "SENSIM_EMBREE_CONFIG"

// One device per process (or per test), with the backend's default thread count, configured by
// SCENE_DEVICE_CONFIG_ENV. Returns NULL and fills msg on failure (ERR_INVAL: a configuration of
// 128 characters or more, or a SIMD_LEVEL_ENV naming no level (base/simd.h); ERR_BACKEND:
// Embree refused it).
scene_device_t* scene_device_create(err_msg_t* msg);
void scene_device_destroy(scene_device_t* dev);

// The widest ray packet the device traces natively: 16 (AVX-512), 8 (AVX2 or AVX), 4 (SSE).
// Thread: any.
unsigned scene_device_native_width(const scene_device_t* dev);

// What the device runs, for a log line (e.g. "Embree 3.13.5, AVX-512 (native 16-ray packets),
// the CPU's best ISA; core kernels avx512"), into buf (cap bytes, truncated). Returns whether
// SCENE_DEVICE_CONFIG_ENV configured it or SIMD_LEVEL_ENV lowered the core kernels' level
// below the CPU's. Thread: any.
bool scene_device_describe(const scene_device_t* dev, char* buf, size_t cap);

// Bound the memory the backend may hold (bytes; 0 = unlimited). Builds and commits that would
// exceed it fail with ERR_LIMIT. Thread: any.
void scene_device_set_budget(scene_device_t* dev, int64_t bytes);

// Device-wide counters of backend errors and memory.
void scene_device_counters(const scene_device_t* dev, uint64_t* out_errors, int64_t* out_bytes);

// Copy the device's last backend error message into dest ("" if none yet).
// Thread: any.
void scene_device_last_error(scene_device_t* dev, err_msg_t* dest);

scene_t* scene_create(scene_device_t* dev, err_msg_t* msg);
void scene_destroy(scene_t* s);

// Analytic primitive shapes, centred on their local origin (axis of cylinder/capsule = +z).
typedef enum scene_prim_kind {
  SCENE_PRIM_BOX = 1,       // size[0..2] = half extents
  SCENE_PRIM_SPHERE,        // size[0] = radius
  SCENE_PRIM_CYLINDER,      // size[0] = radius, size[1] = half length (capped)
  SCENE_PRIM_CAPSULE,       // size[0] = radius, size[1] = half length of the cylinder part
  SCENE_PRIM_PLANE,         // z = 0, size[0] = half side of the square; 0 = unbounded (a square
                            //   of half side SCENE_PLANE_UNBOUNDED_HALF)
  SCENE_PRIM_ELLIPSOID,     // size[0..2] = semi-axes along x, y, z
  SCENE_PRIM_RECTANGLE,     // z = 0, size[0], size[1] = half sides along x, y (0 = unbounded:
                            //   SCENE_PLANE_UNBOUNDED_HALF); size[2] = 1: one-sided, hit only
                            //   by rays going towards -z (MuJoCo's plane); 0: two-sided
} scene_prim_kind_t;

// Add a triangle mesh geometry (copied; validated by the caller). Returns a geometry handle
// >= 0, or a negative code. Builds its BVH now (counted in geometry_builds).
int scene_add_mesh(scene_t* s, const float* vertices, uint32_t nvertex, const uint32_t* indices,
                   uint32_t ntriangle, err_msg_t* msg) CHECKRET;

// Add an analytic primitive geometry (exact intersection, not tessellated). Same contract.
int scene_add_primitive(scene_t* s, scene_prim_kind_t kind, const double size[3],
                        err_msg_t* msg) CHECKRET;

// A geometry's shape, for sensors that need more than rays (the cone sensor's closest point):
// a mesh's vertices (3 floats each) and indices (3 per triangle), owned by the backend and valid
// while the geometry lives; or a primitive's kind and size (after defaults). prim = 0 for a
// mesh. Thread: any, never concurrently with edits of that geometry.
typedef struct scene_shape {
  int prim;
  double size[3];
  const float* vertices;
  uint32_t nvertex;
  const uint32_t* indices;
  uint32_t ntriangle;
} scene_shape_t;

void scene_geometry_shape(const scene_t* s, int geometry, scene_shape_t* out);

// Release a geometry handle; the caller guarantees no instance uses it.
void scene_remove_geometry(scene_t* s, int geometry);

// Add an instance of a geometry with a per-axis scale and user data reported on hits.
// Returns an instance handle >= 0 or a negative code.
int scene_add_instance(scene_t* s, int geometry, const double scale[3], uint32_t object_id,
                       uint32_t label, err_msg_t* msg) CHECKRET;

void scene_remove_instance(scene_t* s, int instance);

// Place an instance: its local pose on a body (scale applied first, then local) and the body's
// world pose at the start (s = 0) and end (s = 1) of the step, all orientations unit
// quaternions. A ray at time s sees the object rigidly mounted on the body interpolated to s
// (lerp of the body origin, slerp of its orientation; xform_mounted is the same pose in
// double), so a point away from the body's origin moves along the arc, not the chord. NULL
// body poses: a static object whose world pose is `local`. Counted in instance_updates.
void scene_set_instance_pose(scene_t* s, int instance, const pose_t* local,
                             const pose_t* body_start, const pose_t* body_end);

// Commit pending changes (top level only, unless a geometry was added). Returns 0 or
// ERR_BACKEND with the backend's message.
int scene_commit(scene_t* s, err_msg_t* msg) CHECKRET;

//---------------- Rays and hits

// One ray in world coordinates.
typedef struct scene_ray {
  double origin[3];   // m
  double dir[3];      // unit length
  double tmax;        // m, > 0 (may be +inf); <= 0: nothing to trace, a miss
  double time;        // in [0, 1] within the step (clamped; NaN counts as 0)
} scene_ray_t;

// The first surface a ray meets within (0, tmax], or a miss.
typedef struct scene_hit {
  double distance;    // m along the ray; +inf on a miss
  double normal[3];   // unit, world frame, facing against the ray; 0 on a miss
  uint32_t object_id; // 0 on a miss
  uint32_t label;     // the object's label
  uint32_t primitive; // triangle index within the mesh (0 for analytic primitives, a miss, and
                      //   in records)
} scene_hit_t;

//---------------- Filtered tracing (what a sensor does not see)

// Record the body an instance is mounted on (0 = the world; the default) and its group
// (0..31, default 0).
void scene_set_instance_body(scene_t* s, int instance, uint32_t body_id, uint32_t group);

// Write the object ids of the instances that a sensor does not see to dest (at most cap),
// sorted ascending: those mounted on any of the nbody bodies, and (group_mask != 0) those whose
// group bit is not in group_mask. Returns how many there are (may exceed cap). Thread: any,
// after scene_commit, not concurrently with edits.
uint32_t scene_objects_hidden(const scene_t* s, const uint32_t* bodies, uint32_t nbody,
                              uint32_t group_mask, uint32_t* dest, uint32_t cap);

// Objects that rays pass through as if absent: ids sorted ascending.
typedef struct scene_filter {
  const uint32_t* exclude_objects;
  uint32_t nexclude;
} scene_filter_t;

//---------------- One packet in columns

// Lanes of a packet in columns.
#define SCENE_PACKET 16

// Up to SCENE_PACKET rays in columns (structure of arrays), as a caller that builds its rays
// packet by packet (a lidar's tile) holds them: origin, unit direction (dx, dy, dz follow each
// other), tmax (> 0, may be +inf), time in [0, 1] within the step.
typedef struct scene_packet {
  double ox[SCENE_PACKET], oy[SCENE_PACKET], oz[SCENE_PACKET];
  double dx[SCENE_PACKET], dy[SCENE_PACKET], dz[SCENE_PACKET];
  double tmax[SCENE_PACKET], time[SCENE_PACKET];
} scene_packet_t;

// Their hits in columns: the fields of scene_hit_t.
typedef struct scene_packet_hits {
  double distance[SCENE_PACKET];
  double nx[SCENE_PACKET], ny[SCENE_PACKET], nz[SCENE_PACKET];
  uint32_t object_id[SCENE_PACKET], label[SCENE_PACKET], primitive[SCENE_PACKET];
} scene_packet_hits_t;

//---------------- Horizons (scene/horizon.h)

// The horizon of the committed scene (every instance, hidden or not, over the whole step) seen
// from ray origins in the box lo..hi. Costs about 0.1 us per box (scene_horizon_boxes: a part
// of up to 256 triangles of each static mesh instance, each primitive instance, each moving
// instance). Thread: as scene_trace.
void scene_horizon(const scene_t* s, const double lo[3], const double hi[3],
                   scene_horizon_t* out);
size_t scene_horizon_boxes(const scene_t* s);

//---------------- Rays as a request carries them

// Rays in arrays of doubles, as a Raycast request carries them: directions of any usable
// length (normalised here), absolute times mapped onto the step.
typedef struct scene_rays {
  const double* origins;     // 3 per ray, m
  const double* directions;  // 3 per ray, any length >= min_direction
  const double* times;       // nullable: every ray at s = 1
  int time_per_ray;          // times holds one time per ray (else times[0] is every ray's)
  double t0, dt;             // s = (t - t0) / dt clamped to [0, 1]; dt <= 0: s = 1
  double tmax;               // m, > 0 (may be +inf)
  double max_coord;          // an origin coordinate must be finite and within +-max_coord
  double min_direction;      // a direction must be finite and at least this long
  int records;               // hits are wire records: primitive and the padding written as 0
} scene_rays_t;

// The world ray traced for ray i of `in` (SCENE_REQUEST): the origin, the direction divided
// by its length (computed as xform_norm3), tmax and the time s. Returns false (and fills
// nothing) when the ray is refused: a non-finite origin coordinate or one beyond max_coord (or
// SCENE_RAY_MAX, the smaller), a non-finite direction, one shorter than min_direction or whose
// inverse length overflows, or a NaN tmax.
bool scene_ray_from(const scene_rays_t* in, size_t i, scene_ray_t* out);

//---------------- Tracing: the one entry point

// Largest magnitude of a traced ray's origin and direction components (m; a direction in any
// unit): well inside the range in which Embree's traversal stays finite (about 1.8e18).
#define SCENE_RAY_MAX 1e18

// How a batch holds its rays and where their hits go.
typedef enum scene_layout {
  SCENE_ROWS = 0,    // rays[0, n) -> hits[0, n)
  SCENE_COLUMNS,     // ray i is lane i % SCENE_PACKET of packets[i / SCENE_PACKET] -> the same
                     //   lane of packet_hits (lanes past n in the last packet are left as they are)
  SCENE_REQUEST,     // rays [first, first + n) of request, as scene_ray_from builds them ->
                     //   hits[0, n) (records: primitive and the padding written as 0)
} scene_layout_t;

// A batch of rays: the fields of its layout, the others NULL (or 0).
typedef struct scene_batch {
  scene_layout_t layout;
  size_t n;                          // rays
  unsigned group;                    // SCENE_ROWS: rays per group, 16 for a caller's coherent
                                     //   tiles (a lidar's 2 channels x 8 columns), else 8
  const scene_ray_t* rays;           // SCENE_ROWS
  const scene_packet_t* packets;     // SCENE_COLUMNS
  const scene_rays_t* request;       // SCENE_REQUEST, from its ray `first` on
  size_t first;
  scene_hit_t* hits;                 // SCENE_ROWS, SCENE_REQUEST
  scene_packet_hits_t* packet_hits;  // SCENE_COLUMNS
  const scene_filter_t* filter;      // nullable: objects the rays pass through as if absent
  const scene_horizon_t* horizon;    // nullable: the rays above it may be missed untraced
} scene_batch_t;

// Trace a batch against the committed scene; every ray's hit is written (scene_hit_t).
//
// Groups and determinism: the rays are traced in groups of consecutive rays counted from the
// batch's first (SCENE_ROWS: `group`; SCENE_COLUMNS: each packet of 16; SCENE_REQUEST: 8). A
// ray's hit depends on the ray and on the rays of its group, bit for bit, never on the thread,
// the number of threads or the other groups of the batch; rays traced in groups of another
// size (or alone) may differ in the last float bit. SCENE_COLUMNS gives the hits SCENE_ROWS
// with group 16 gives for the same rays, and SCENE_REQUEST those SCENE_ROWS with group 8
// gives for the rays scene_ray_from builds.
//
// Filter: a ray that meets an object of filter->exclude_objects goes on past it (re-traced
// from just beyond the hit, up to 16 times; distances stay those along the original ray); a
// ray still on an excluded object after that is a miss.
//
// Invalid rays: a ray whose origin or direction, rounded to the backend's float, has a
// component that is not finite or beyond SCENE_RAY_MAX, whose direction is zero (subnormal
// floats count as zero), or whose tmax is NaN, is a miss, counted in rays_invalid and never
// handed to the backend's traversal, whatever the caller computed; the other rays of its group
// get the hits they get when it has nothing to trace (tmax <= 0). SCENE_REQUEST refuses such
// rays instead (scene_ray_from; a request whose tmax is NaN refuses its first ray).
//
// Horizon: a ray that starts inside the horizon's region and points above it meets nothing
// (scene/horizon.h); the backend may report it as a miss without tracing it (counted in
// rays_culled rather than rays_traced): the hits are the same. The Embree backend culls the
// full packets of SCENE_COLUMNS.
//
// Returns the rays taken: n, or (SCENE_REQUEST) the batch index of the first ray scene_ray_from
// refuses (the hits from there on are not written). Counts rays_traced, rays_culled and
// rays_invalid.
// Thread: any, concurrently, after scene_commit.
size_t scene_trace(const scene_t* s, const scene_batch_t* b);

//---------------- Counters

void scene_counters(const scene_t* s, scene_counters_t* out);

#endif  // SENSIM_SCENE_SCENE_H_
