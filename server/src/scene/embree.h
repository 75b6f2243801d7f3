// SPDX-License-Identifier: MIT
// embree.h: the private header of the Embree 3 backend behind scene/scene.h: the records behind
// scene_device_t and scene_t, and the functions its files share. Embree is confined to the
// files that include this header (device.c, scene.c, geom.c, inst.c, flat.c, bounds.c,
// trace.c, rays.c, simd.c; the packet kernels in packet.h); nothing outside scene/ includes it.
#ifndef SENSIM_SCENE_EMBREE_H_
#define SENSIM_SCENE_EMBREE_H_

#include <embree3/rtcore.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/err.h"
#include "scene/horizon.h"
#include "scene/prim.h"
#include "scene/scene.h"

struct scene_device {
  RTCDevice rtc;
  atomic_uint_fast64_t nerror;   // errors reported through the error callback
  atomic_int_fast64_t bytes;     // bytes Embree holds, from the memory monitor
  atomic_int_fast64_t budget;    // most bytes Embree may hold; 0 = unlimited
  atomic_uint_fast64_t refused;  // allocations refused for the budget
  unsigned width;                // the widest packet Embree runs natively: 16, 8 or 4
  char config[128];              // its configuration (SCENE_DEVICE_CONFIG_ENV), "" if none

  // The error callback may run on any thread (TBB build threads included); this lock guards
  // last_error only and is never held while calling into Embree.
  pthread_mutex_t lock;
  char last_error[256];
};

// One bottom-level scene. Heap-allocated and never moved: prim is the Embree user pointer.
typedef struct geom {
  RTCScene rtc;      // NULL: free slot
  bool is_prim;      // analytic primitive (else triangle mesh)
  prim_t prim;       // the shape, when is_prim
  uint32_t nvertex;  // a mesh's vertices and triangles
  uint32_t ntriangle;
  horizon_box_t* parts;   // object-space bounds of its parts (clusters of nearby triangles, or
                          //   the primitive), for the horizon
  uint32_t nparts;
  horizon_box_t bounds;   // all of it
  int next_free;     // free-list link while the slot is free
} geom_t;

// One object: an instance in the top-level scene whose Embree geometry ID is its handle.
typedef struct inst {
  RTCGeometry rtc;   // NULL: free slot; a reference held by this table
  int geometry;      // handle of the instanced geometry
  int next_free;     // free-list link while the slot is free
  uint32_t object_id;
  uint32_t label;
  uint32_t body_id;  // body it is mounted on (filtered tracing), 0 = the world
  uint32_t group;    // 0..31, for sensors' group masks
  double scale[3];   // per-axis scale
  bool is_prim;      // the geometry is an analytic primitive (hits report primitive 0)
  double nmat[9];    // R(q1) S^-1, object-space normals to world (row-major): a static
                     //   instance's, and a moving one's that does not turn (q0 == q1)
  double q0[4];      // world orientation at s = 0 (on the same hemisphere as q1)
  double q1[4];      // world orientation at s = 1
  int moving;        // two time steps (motion blur); 0: one, start and end poses are equal
  int turning;       // q0 != q1
  double world[12];  // a static instance's object-to-world matrix R S | p (row-major 3 x 4);
                     //   a moving one's at the end of the step (not turning)
  double world0[12]; // a moving one's at the start of the step (not turning)
  double t0[3], t1[3];   // a turning one's origin at the start and end of the step
  double shift_len;  // and how far its object origin is from that
  bool flat;         // traced in the flat scene (its own instance disabled)
  bool flat_never;   // posed again after it was flattened: stays an instance from then on
  bool flat_root;    // this slot is the flat scene's instance, not an object
} inst_t;

struct scene {
  scene_device_t* dev;
  RTCScene top;

  geom_t** geoms;    // (cap_geom) records, NULL beyond the used prefix
  int ngeom;         // used prefix of geoms
  int cap_geom;
  int free_geom;     // head of the free list, -1: none

  inst_t* insts;     // (cap_inst)
  int ninst;         // used prefix of insts
  int cap_inst;
  int free_inst;     // head of the free list, -1: none

  // The flat scene: the triangles of the objects fixed in the world (on no body), in world
  // coordinates, in one bottom-level scene under one identity instance of the top level (slot
  // flat_slot). A ray then finds them in one hierarchy instead of entering an instance per
  // object: the terrain and buildings of a typical scene are found ~10 % faster. Each object
  // keeps its own instance, disabled while it is flat.
  RTCScene flat;          // NULL: no object is flat
  int flat_slot;          // the flat scene's instance slot, -1: none yet
  uint64_t flat_tris;     // triangles in flat
  bool flat_dirty;        // a flat object was removed: rebuild at the commit
  uint32_t flat_wait;     // commits that new static objects have waited to be flattened
  uint64_t flat_refused;  // flat_set() of the objects a build failed for (0: none): not
                          //   tried again until the set or the memory budget changes
  int64_t flat_refused_budget;

  // World bounds of the committed geometry over the step, for horizons: the static instances'
  // parts (rebuilt when a static instance changed) and the moving instances (every commit).
  horizon_box_t* still_boxes;
  size_t nstill, cap_still;
  bool still_dirty;
  horizon_box_t* moving_boxes;
  size_t nmoving, cap_moving;
  bool boxes_ok;          // false: out of memory for them (horizons then cull nothing)

  // counters: written by the owner thread, except the rays_* ones (any tracing thread)
  uint64_t geometry_builds;
  uint64_t instance_updates;
  uint64_t commits;
  uint64_t flat_builds;
  uint64_t flat_objects;
  atomic_uint_fast64_t rays_traced;
  atomic_uint_fast64_t rays_culled;
  atomic_uint_fast64_t rays_invalid;
};


//---------------- Shared by the backend's files

// ERR_BACKEND (or ERR_LIMIT, for the memory budget) with the device's last message if Embree
// reported an error since `before` (dev->nerror then). device.c
int device_check(scene_device_t* dev, uint64_t before, const char* what, err_msg_t* msg);

// Whether h is a live geometry of s. geom.c
bool geom_valid(const scene_t* s, int h);

// Whether h is a live object's instance (not the flat scene's). inst.c
bool inst_valid(const scene_t* s, int h);

// A free instance record, zeroed (allocating one if needed); its handle or ERR_NOMEM. inst.c
int inst_slot(scene_t* s);

// Before a commit: rebuild the flat scene when a flat object left it, or when new static
// objects have come. flat.c
void flat_update(scene_t* s);

// Before a commit: the world boxes of the instances for horizons. bounds.c
void bounds_update(scene_t* s);

#endif  // SENSIM_SCENE_EMBREE_H_
