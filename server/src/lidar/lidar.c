// SPDX-License-Identifier: MIT
// lidar.c: the lidar sensor: sweep stepping, batched tracing on the pool, point assembly and
// publishing (see lidar.h).
#include "lidar/lidar.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "base/mem.h"
#include "base/pool.h"
#include "base/rng.h"
#include "lidar/config.h"
#include "lidar/sweep.h"

// Rays per pool task: 32 packets of 16 rays, or up to 64 for a pattern traced in tiles (8
// groups of up to 128 rays).
#define CHUNK 512u
#define CHUNK_MAX 1024u

// A tile (one packet of 16 rays): TILE_RAYS consecutive rays of TILE_GROUPS consecutive groups
// (2 channels x 8 columns of a spinning lidar). On bench_lidar's scene raw rtcIntersect16 runs
// about 5 % faster on these than on tiles of 4 x 4 of the same angular size, and 1.4x faster
// than in firing order.
#define TILE_GROUPS 8u
#define TILE_RAYS 2u

// Patterns with fewer rays per firing group are traced ray by ray across the groups (a VLP-16
// fires 16 lasers at 16 elevations in a row).
#define REGROUP_BELOW 32u

// Rays per batch (times the returns per ray, bounded; at least one chunk): the scratch is
// allocated once, about 1.2 MB of it for 4 chunks, one per worker of a 4-worker pool.
#define BATCH_RETURNS 4096u

// Most rays one lidar fires in one step (24 s of an OS1-128 2048 x 10, 230 s of a VLP-16): a
// longer step is refused (step more often).
#define MAX_STEP_RAYS ((uint64_t)1 << 26)

// A step's rays per box of the scene's horizon bounds (scene_horizon_boxes) from which its
// rays are culled against a horizon: building one costs about as much as tracing a ray per
// box, culling saves most of a trace per ray above it.
#define HORIZON_RAYS_PER_BOX 32u

// Most bytes a lidar may accumulate for one cloud (the wire's 4 GiB limit of a cloud).
#define MAX_CLOUD_BYTES ((uint64_t)UINT32_MAX)

// The sweep state carried from step to step.
typedef struct saved {
  int started;
  double t_s;
  lidar_cursor_t cursor;
  uint64_t acc_sweep;
  int acc_complete;
  uint64_t frame;
  blob_t* acc;                  // nullable: the buffer of the open sweep's points
  size_t acc_n;
} saved_t;

typedef struct lidar {
  // model (const after create)
  lidar_pattern_t pat;
  lidar_returns_t ret;
  lidar_angle_noise_t angle;
  lidar_points_t points;        // the point writer: layout, misses, rings, organisation
  int world_frame;
  int per_step;
  int has_start_time;
  double start_time;
  int see_own_body;
  uint32_t exclude_bodies[LIDAR_MAX_EXCLUDED_BODIES];
  uint32_t nexclude_body;
  uint32_t group_mask;
  int rows;                     // world rays also in rows (for the segment heap or write_chunk)
  uint32_t maxret;              // returns per ray
  uint32_t boundret;            // returns per ray counted by the up-front output bounds: maxret,
                                //   1 for RETURN_ALL (checked as the points come instead)
  double origin_reach;          // m, farthest a ray's origin is from the sensor's (pattern)
  scene_horizon_t* horizon;     // the step's horizon (depth 1)
  int horizon_on;               // the step culls against it
  size_t chunk;                 // rays per pool task (CHUNK, or a tile row of groups)
  size_t batch;                 // rays per batch (multiple of chunk)

  // sweep state: committed (after the last committed step), staged (by the last step, until
  // its commit), and the working copy a step runs on (equal to the committed one between steps)
  saved_t committed;            // owns a reference to committed.acc
  saved_t staged;               // owns staged.acc when it is not committed.acc
  int has_staged;
  int started;
  double t_s;                   // s, start of sweep 0
  lidar_cursor_t cursor;        // next ray to fire
  uint64_t acc_sweep;           // sweep being accumulated
  int acc_complete;             // its first ray was fired by this lidar
  uint64_t frame;               // records published

  // accumulated points of the current sweep (point_step bytes each), written once: the buffer
  // is handed whole to the sweep's record (or the step's, per step) when it is published, and
  // the next points go to another buffer; nothing is copied out or moved within it
  blob_t* acc;                  // nullable (none yet); owned when it is not committed.acc
  size_t acc_n;                 // points
  blob_t* spare[2];             // nullable: buffers published before (oldest first), taken
                                //   again for a new sweep once their readers have let them go
                                //   (no allocation then; two, so that one is free whether a
                                //   sweep ends inside a step or at its end)
  size_t frame_points;          // most points of one frame (per-revolution publishing), capped
                                //   (organised: the points of every pixel of a revolution)
  uint64_t grid_group0;         // organised per step: the step's first group (its column 0)
  uint32_t grid_width;          //   and its columns
  size_t last_points;           // points of the last cloud published: a new buffer's first size

  // scratch of one batch (batch rays)
  scene_packet_t* packets;      // (batch / SCENE_PACKET) world rays in trace order, in columns
  scene_ray_t* rays;            // (batch) the same in rows (depth > 1, world frame or normals)
  uint64_t* ray_index;          // (batch) index within the sweep (rng key)
  lidar_pattern_ray_t* pr;      // (batch) the pattern's rays in firing order, their direction
                                //   after the angle noise
  lidar_return_t* returns;      // (batch x maxret)
  uint8_t* nret;                // (batch)
  uint32_t* slot;               // (batch) trace position of each ray within its chunk
  uint32_t* tile_slot;          // (chunk) slot of a whole chunk from a group's first ray (tiled
                                //   patterns; NULL otherwise)
  size_t* chunk_points;         // (batch / chunk) points of each chunk, then their offsets

  // objects not seen in the current step (on the lidar's own body, on excluded bodies)
  uint32_t* excluded;           // (nexcluded) sorted object ids
  uint32_t nexcluded;
  uint32_t excluded_cap;
} lidar_t;

static void state_save(const lidar_t* l, saved_t* s);
static void state_load(lidar_t* l, const saved_t* s);


//---------------- Creation

static void lidar_destroy(void* self) {
  lidar_t* l = self;
  if (!l) {
    return;
  }
  lidar_pattern_close(&l->pat);
  lidar_points_close(&l->points);
  if (l->has_staged && l->staged.acc != l->committed.acc) {
    blob_release(l->staged.acc);
  }
  blob_release(l->committed.acc);
  blob_release(l->spare[0]);
  blob_release(l->spare[1]);
  mem_free(l->rays);
  mem_free(l->packets);
  mem_free(l->ray_index);
  mem_free(l->pr);
  mem_free(l->returns);
  mem_free(l->nret);
  mem_free(l->slot);
  mem_free(l->tile_slot);
  mem_free(l->chunk_points);
  mem_free(l->excluded);
  mem_free(l->horizon);
  mem_free(l);
}


// Most rays of one frame (sweep) of pattern p.
static double frame_rays(const lidar_pattern_t* p) {
  if (p->groups_per_sweep) {
    return (double)p->groups_per_sweep * p->nray;
  }
  return (floor(p->sweep_period / p->group_period) + 1.0) * p->nray;
}


// Most rays of pattern p that fire at one instant (equal time offsets in a group; groups do not
// overlap in time).
static double instant_rays(const lidar_pattern_t* p) {
  uint32_t most = 0, run = 0;
  for (uint32_t k = 0; k < p->nray; k++) {
    run = k > 0 && p->time_offset[k] == p->time_offset[k - 1] ? run + 1 : 1;
    most = run > most ? run : most;
  }
  return (double)most;
}


// Whether a pattern with K rays per group is traced in tiles of TILE_GROUPS x TILE_RAYS (a
// column of 32 to 128 channels), each chunk then holding whole rows of tiles.
static int tiled(uint32_t K) {
  return K >= REGROUP_BELOW && K <= CHUNK_MAX / TILE_GROUPS && K % TILE_RAYS == 0;
}


// The trace positions of the m rays of a tiled chunk whose first ray is ray k0 of its group:
// ray j is ray (k0 + j) % K of the chunk's group (k0 + j) / K. Output: slot (m).
static void tile_slots(uint32_t K, size_t k0, size_t m, uint32_t* slot) {
  size_t ng = (k0 + m + K - 1) / K;
  uint32_t pos = 0;
  for (size_t gb = 0; gb < ng; gb += TILE_GROUPS) {
    size_t ge = gb + TILE_GROUPS < ng ? gb + TILE_GROUPS : ng;
    for (size_t kb = 0; kb < K; kb += TILE_RAYS) {
      for (size_t g = gb; g < ge; g++) {
        for (size_t k = kb; k < kb + TILE_RAYS; k++) {
          size_t lin = g * K + k;
          if (lin >= k0 && lin - k0 < m) {
            slot[lin - k0] = pos++;
          }
        }
      }
    }
  }
}


int lidar_create(lidar_desc_t* d, sensor_t* out, err_msg_t* msg) {
  // options
  lidar_t tmp;
  memset(&tmp, 0, sizeof tmp);
  int rc;
  if (d->pattern.nray == 0) {
    return err_set(msg, ERR_INVAL, "lidar: a scan pattern is required (spinning, vlp16, ouster, "
                   "bpearl, hdl64e, flash, custom or livox)");
  }
  const char* pfield = d->pattern_field ? d->pattern_field : "lidar";
  if ((rc = lidar_desc_check(d, msg)) < 0 ||
      (rc = lidar_returns_init(&tmp.ret, &d->returns, msg)) < 0 ||
      (rc = lidar_noise_angle_init(&tmp.angle, &d->angle_noise, "lidar.angle_noise", msg)) < 0) {
    return rc;
  }
  uint32_t maxret = lidar_returns_max(&tmp.ret);
  lidar_points_desc_t pd = {.layout = d->layout, .fields = d->fields, .nfield = d->nfield,
                            .misses = d->misses, .world_frame = d->world_frame,
                            .maxret = maxret, .pattern = &d->pattern};
  if ((rc = lidar_points_init(&tmp.points, &pd, msg)) < 0) {
    return rc;
  }

  // one frame must fit in a step's output (per-revolution publishing); per step, the rays of
  // one firing instant, which no step can split (a flash frame, a custom list's rays of one
  // time offset); an organised cloud has every pixel of every return
  uint32_t boundret = tmp.ret.mode == LIDAR_RETURN_ALL && !tmp.points.organised ? 1 : maxret;
  if (d->max_frame_bytes) {
    double rays = d->publish_per_step ? instant_rays(&d->pattern) : frame_rays(&d->pattern);
    double bytes = rays * boundret * tmp.points.layout.point_step + 512.0;
    const char* reduce = d->frame_field ? d->frame_field : pfield;
    unsigned long long limit = (unsigned long long)d->max_frame_bytes;
    uint32_t step = tmp.points.layout.point_step;
    if (!(bytes <= (double)d->max_frame_bytes)) {
      lidar_points_close(&tmp.points);
      if (d->publish_per_step) {
        return err_set(msg, ERR_INVAL, "%s: %.0f rays fire at one instant; x %u returns x %u "
                       "bytes (%.4g bytes) they exceed the largest step output (%llu bytes), "
                       "and no step can split them; reduce %s, the returns or the fields",
                       pfield, rays, boundret, step, bytes, limit, reduce);
      }
      return err_set(msg, ERR_INVAL, "%s: one frame of %.0f rays x %u returns x %u bytes "
                     "(%.4g bytes) exceeds the largest step output (%llu bytes); reduce %s, "
                     "the returns or the fields, or publish per step",
                     pfield, rays, boundret, step, bytes, limit, reduce);
    }
  }

  // the sensor and its scratch
  lidar_t* l = mem_calloc(1, sizeof *l);
  if (!l) {
    lidar_points_close(&tmp.points);
    return err_set(msg, ERR_NOMEM, "lidar: out of memory");
  }
  *l = tmp;
  l->world_frame = d->world_frame ? 1 : 0;
  l->per_step = d->publish_per_step ? 1 : 0;
  l->has_start_time = d->has_start_time ? 1 : 0;
  l->start_time = d->start_time;
  l->see_own_body = d->see_own_body ? 1 : 0;
  l->nexclude_body = d->nexclude_body;
  if (d->nexclude_body) {
    memcpy(l->exclude_bodies, d->exclude_bodies, d->nexclude_body * sizeof(uint32_t));
  }
  l->group_mask = d->group_mask;
  l->maxret = maxret;
  l->boundret = boundret;
  if (!l->per_step) {
    double fp = frame_rays(&d->pattern) * maxret;
    l->frame_points = fp < (double)(MAX_CLOUD_BYTES / l->points.layout.point_step)
                          ? (size_t)fp : (size_t)(MAX_CLOUD_BYTES / l->points.layout.point_step);
  }
  l->rows = l->world_frame || l->points.has_normal || l->ret.depth > 1;
  uint32_t K = d->pattern.nray;
  int tiles = tiled(K);
  size_t chunk = tiles && (size_t)TILE_GROUPS * K > CHUNK ? (size_t)TILE_GROUPS * K : CHUNK;
  size_t batch = BATCH_RETURNS / l->maxret;
  batch = (batch < chunk ? chunk : batch) / chunk * chunk;
  l->chunk = chunk;
  l->batch = batch;
  l->rays = mem_alloc(batch * sizeof *l->rays);
  l->packets = mem_alloc(batch / SCENE_PACKET * sizeof *l->packets);
  l->ray_index = mem_alloc(batch * sizeof *l->ray_index);
  l->pr = mem_alloc(batch * sizeof *l->pr);
  l->returns = mem_alloc(batch * l->maxret * sizeof *l->returns);
  l->nret = mem_alloc(batch * sizeof *l->nret);
  l->slot = mem_alloc(batch * sizeof *l->slot);
  l->chunk_points = mem_alloc((batch / chunk + 1) * sizeof *l->chunk_points);
  l->excluded_cap = 16;
  l->excluded = mem_alloc(l->excluded_cap * sizeof *l->excluded);
  l->horizon = l->ret.depth == 1 ? mem_alloc(sizeof *l->horizon) : NULL;
  l->tile_slot = tiles ? mem_alloc(chunk * sizeof *l->tile_slot) : NULL;
  if (l->tile_slot) {
    tile_slots(K, 0, chunk, l->tile_slot);
  }
  if (!l->rays || !l->packets || !l->ray_index || !l->pr || !l->returns || !l->nret ||
      !l->slot || !l->chunk_points || !l->excluded || (tiles && !l->tile_slot) ||
      (l->ret.depth == 1 && !l->horizon)) {
    lidar_destroy(l);
    return err_set(msg, ERR_NOMEM, "lidar: out of memory for %zu rays of scratch", batch);
  }

  // the pattern moves in last: nothing can fail any more
  l->pat = d->pattern;
  l->origin_reach = lidar_pattern_origin_reach(&l->pat);
  memset(&d->pattern, 0, sizeof d->pattern);
  out->kind = SENSOR_LIDAR;
  out->ops = &lidar_ops;
  out->self = l;
  out->joint_id = 0;
  return 0;
}


//---------------- Batches

typedef struct batch_ctx {
  lidar_t* l;
  const sensor_ctx_t* ctx;
  const step_view_t* v;
  const view_body_t* body;
  const lidar_sweep_pose_t* fixed;   // the pose of every ray when the body does not move
  lidar_cursor_t first;         // cursor of ray 0 of the batch
  size_t n;                     // rays
  uint64_t sweep;
  double tau_origin;            // s after t_s that time offsets are measured from; NAN = the
                                //   start of the ray's sweep
  const scene_filter_t* filter; // objects the rays do not see
  const scene_horizon_t* horizon;   // nullable: rays above it are misses (depth 1)
  double inv_dt;                // 1 / (t1 - t0), 0 for an empty step (every ray at s = 0)
  atomic_int stop;              // the request was cancelled: the remaining chunks are skipped
  lidar_points_dest_t dest;     // where the points go (at: per chunk)
} batch_ctx_t;


// The world rays of a chunk's rays [i0, i0 + m) in trace order (trace_chunk's pr and slot):
// each ray's emission angle noise (in place in pr: the points take the direction from there),
// its rng index, the sensor pose at its firing time and the ray at that time, into the
// packets of columns, and also into rows when write_chunk needs them (world frame, normals) or
// the segment heap does (depth > 1).
static void chunk_rays(batch_ctx_t* b, size_t i0, size_t m) {
  lidar_t* l = b->l;
  const uint32_t* slot = l->slot + i0;
  scene_packet_t* pks = &l->packets[i0 / SCENE_PACKET];
  lidar_sweep_pose_t pose;
  if (b->fixed) {
    pose = *b->fixed;
  } else {
    pose.s = -1.0;
  }
  const int fixed = b->fixed != NULL;
  const double tmax = lidar_returns_primary_tmax(&l->ret, b->v);
  const double s_origin = l->t_s - b->v->t0;
  const double inv_dt = b->inv_dt;
  if (m % SCENE_PACKET) {
    memset(&pks[m / SCENE_PACKET], 0, sizeof *pks);   // the unused lanes of the last packet
  }

  // in firing order (rays of a column share a pose): a still sensor's rays in the sensor frame
  // for now, a moving one's in the world at their own pose
  for (size_t j = 0; j < m; j++) {
    lidar_pattern_ray_t* p = &l->pr[i0 + j];
    size_t i = slot[j];
    scene_packet_t* pk = &pks[i / SCENE_PACKET];
    unsigned k = (unsigned)(i % SCENE_PACKET);
    if (l->angle.enabled) {
      rng_key_t key = {.seed = b->v->seed, .stream = b->ctx->id, .frame = b->sweep,
                       .index = p->index};
      double nominal[3] = {p->dir[0], p->dir[1], p->dir[2]};
      lidar_noise_angle(&l->angle, &key, nominal, p->dir);
    }
    l->ray_index[i0 + i] = p->index;
    double s = inv_dt * (s_origin + p->time);
    s = s > 0.0 ? (s < 1.0 ? s : 1.0) : 0.0;
    pk->time[k] = s;
    pk->tmax[k] = tmax;
    const double* o = p->origin;
    const double* d = p->dir;
    scene_ray_t w;
    if (!fixed) {
      if (s != pose.s) {
        lidar_sweep_pose(b->body, &b->ctx->mount, s, &pose);
      }
      lidar_sweep_world_ray(&pose, p->origin, p->dir, &w);
      o = w.origin;
      d = w.dir;
    }
    pk->ox[k] = o[0];
    pk->oy[k] = o[1];
    pk->oz[k] = o[2];
    pk->dx[k] = d[0];
    pk->dy[k] = d[1];
    pk->dz[k] = d[2];
  }

  // a still sensor's rays to the world, packet by packet
  for (size_t q = 0; fixed && q < m; q += SCENE_PACKET) {
    lidar_sweep_world_packet(&pose, &pks[q / SCENE_PACKET]);
  }
  for (size_t i = 0; l->rows && i < m; i++) {
    const scene_packet_t* pk = &pks[i / SCENE_PACKET];
    size_t k = i % SCENE_PACKET;
    l->rays[i0 + i] = (scene_ray_t){.origin = {pk->ox[k], pk->oy[k], pk->oz[k]},
                                    .dir = {pk->dx[k], pk->dy[k], pk->dz[k]},
                                    .tmax = tmax, .time = pk->time[k]};
  }
}


// Phase 1 of a chunk: rays (pattern, angle noise, pose at the firing time), their returns, and
// the number of points they give. Rays are stored in trace order, in which every 16 rays make a
// packet: firing order, except that a pattern with small firing groups (a VLP-16 fires 16
// lasers at 16 elevations in a row) is traced laser by laser across the groups of the chunk,
// and one with groups of 32 to 128 rays (a column of an OS1-128) in tiles of TILE_RAYS rays of
// TILE_GROUPS consecutive groups (2 channels x 8 columns), so that each packet holds
// neighbouring rays.
// Each ray's result is a function of the ray alone, so the order changes only the speed. At
// depth 1 the rays stay in packets of columns from the pose to the returns.
static void trace_chunk(void* arg, size_t begin, size_t end) {
  batch_ctx_t* b = arg;
  lidar_t* l = b->l;
  uint32_t K = l->pat.nray;
  int regroup = K > 1 && K < REGROUP_BELOW;
  int tiles = l->tile_slot != NULL;
  for (size_t c = begin; c < end; c++) {
    size_t i0 = c * l->chunk;
    size_t m = i0 + l->chunk < b->n ? l->chunk : b->n - i0;
    if (atomic_load_explicit(&b->stop, memory_order_relaxed) || view_cancelled(b->v)) {
      atomic_store_explicit(&b->stop, 1, memory_order_relaxed);
      l->chunk_points[c] = 0;
      continue;
    }
    lidar_pattern_ray_t* pr = l->pr + i0;
    if (l->points.lean) {
      lidar_sweep_rays_lean(&l->pat, b->first + i0, m, pr);
    } else {
      lidar_sweep_rays(&l->pat, b->first + i0, m, pr);
    }

    // trace order: by position in the group, then group (a counting sort)
    uint32_t* slot = l->slot + i0;
    if (regroup) {
      uint32_t count[REGROUP_BELOW + 1] = {0};
      uint32_t k0 = (uint32_t)((b->first + i0) % K);
      for (size_t j = 0; j < m; j++) {
        count[(k0 + j) % K + 1]++;
      }
      for (uint32_t k = 1; k <= K; k++) {
        count[k] += count[k - 1];
      }
      for (size_t j = 0; j < m; j++) {
        slot[j] = count[(k0 + j) % K]++;
      }
    } else if (tiles) {
      size_t k0 = (size_t)((b->first + i0) % K);
      if (k0 == 0 && m == l->chunk) {
        memcpy(slot, l->tile_slot, m * sizeof *slot);   // a whole row of tiles: the usual chunk
      } else {
        tile_slots(K, k0, m, slot);
      }
    } else {
      for (size_t j = 0; j < m; j++) {
        slot[j] = (uint32_t)j;
      }
    }

    // the world rays, then their returns: in packets of columns at depth 1, else in rows
    chunk_rays(b, i0, m);
    if (l->ret.depth == 1) {
      lidar_returns_packets_t pk = {.view = b->v, .sensor_id = b->ctx->id, .frame = b->sweep,
                                    .rays = &l->packets[i0 / SCENE_PACKET],
                                    .ray_index = l->ray_index + i0, .n = m, .filter = b->filter,
                                    .horizon = b->horizon};
      lidar_returns_packets(&l->ret, &pk, l->returns + i0 * l->maxret, l->nret + i0);
    } else {
      lidar_returns_batch_t rb = {.view = b->v, .sensor_id = b->ctx->id, .frame = b->sweep,
                                  .rays = l->rays + i0, .ray_index = l->ray_index + i0, .n = m,
                                  .filter = b->filter};
      lidar_returns_trace(&l->ret, &rb, l->returns + i0 * l->maxret, l->nret + i0);
    }
    l->chunk_points[c] = lidar_points_count(&l->points, l->nret + i0, m);
  }
}


// Phase 2 of a chunk: its points, appended at their offsets in the accumulator in firing
// order, or (organised) at their pixels of the cloud.
static void write_chunk(void* arg, size_t begin, size_t end) {
  batch_ctx_t* b = arg;
  lidar_t* l = b->l;
  for (size_t c = begin; c < end; c++) {
    size_t i0 = c * l->chunk;
    size_t m = i0 + l->chunk < b->n ? l->chunk : b->n - i0;
    lidar_points_chunk_t ck = {.rays = l->pr + i0, .slot = l->slot + i0, .nret = l->nret + i0,
                               .returns = l->returns + i0 * l->maxret, .world = l->rays + i0,
                               .n = m, .first = b->first + i0, .tau_origin = b->tau_origin,
                               .body = b->body, .mount = &b->ctx->mount, .fixed = b->fixed};
    lidar_points_dest_t d = b->dest;
    d.at = l->acc_n + l->chunk_points[c];
    lidar_points_write(&l->points, &ck, &d);
  }
}


// The accumulator of n points: their points, then (when the writer gives azimuths) from the
// next multiple of 4 their azimuths (float32).
static size_t acc_bytes(const lidar_t* l, size_t n) {
  return n * l->points.layout.point_step + (l->points.azimuths ? 3 + 4 * n : 0);
}


// Points buffer b holds (the inverse of acc_bytes).
static size_t acc_cap(const lidar_t* l, const blob_t* b) {
  size_t bytes = blob_cap(b), step = l->points.layout.point_step;
  if (!l->points.azimuths) {
    return bytes / step;
  }
  return bytes < 3 ? 0 : (bytes - 3) / (step + 4);
}


// The azimuths of a buffer of cap points.
static float* acc_azimuths(const lidar_t* l, blob_t* b, size_t cap) {
  size_t at = (cap * l->points.layout.point_step + 3) & ~(size_t)3;
  return (float*)(void*)(blob_data(b) + at);
}


// Move the first n azimuths of buffer b from where a buffer of `from` points holds them to
// where one of `to` points does.
static void acc_move_azimuths(const lidar_t* l, blob_t* b, size_t from, size_t to, size_t n) {
  if (l->points.azimuths) {
    memmove(acc_azimuths(l, b, to), acc_azimuths(l, b, from), n * sizeof(float));
  }
}


// Resize the accumulator (exclusive) to cap points, its azimuths with it (before shrinking,
// after growing). 0, or -1 when memory is short (nothing changed).
static int acc_resize(lidar_t* l, size_t cap) {
  size_t old = acc_cap(l, l->acc), n = cap < old ? cap : old;
  if (cap < old) {
    acc_move_azimuths(l, l->acc, old, cap, n);
  }
  if (blob_resize(&l->acc, acc_bytes(l, cap)) != 0) {
    acc_move_azimuths(l, l->acc, cap, old, n);
    return -1;
  }
  if (cap > old) {
    acc_move_azimuths(l, l->acc, old, cap, n);
  }
  return 0;
}


// A buffer for a new cloud of at least `need` points, with room for all of it so that it never
// grows (growing would move the points): a frame's worth when that is known and bounded, else
// the last cloud's size and an eighth more. The spare one when nobody reads it any more and it
// is about that size, else a new one.
static blob_t* acc_take(lidar_t* l, size_t need) {
  uint32_t step = l->points.layout.point_step;
  size_t guess = l->last_points + l->last_points / 8 + 4096;
  size_t points = l->frame_points && l->frame_points < guess ? l->frame_points : guess;
  points = points > need ? points : need;
  if ((uint64_t)points * step > MAX_CLOUD_BYTES) {
    points = (size_t)(MAX_CLOUD_BYTES / step);
  }
  for (int i = 0; i < 2;) {
    blob_t* b = l->spare[i];
    if (!b || !blob_is_exclusive(b)) {
      i++;
      continue;
    }
    if (i == 0) {
      l->spare[0] = l->spare[1];
    }
    l->spare[1] = NULL;
    size_t cap = acc_cap(l, b);
    if (cap >= points && cap / 4 <= points) {
      return b;
    }
    blob_release(b);   // the wrong size: its bytes are not needed
  }
  return blob_create(acc_bytes(l, points));
}


// Make room for `more` points in the accumulator (a buffer is taken for the first points).
static int acc_reserve(lidar_t* l, size_t more, err_msg_t* msg) {
  size_t need = l->acc_n + more;
  uint32_t step = l->points.layout.point_step;
  int revolution_grid = l->points.organised && !l->per_step;
  if (revolution_grid && need < l->frame_points) {
    need = l->frame_points;   // the pixels of a whole revolution from its first points
  }
  if ((uint64_t)need * step > MAX_CLOUD_BYTES) {
    return err_set(msg, ERR_LIMIT, "lidar: a cloud of %zu points of %u bytes exceeds 4 GiB "
                   "(publish per step, or step more often)", need, step);
  }
  if (!l->acc) {
    l->acc = acc_take(l, need);
    l->acc_n = 0;
    if (!l->acc) {
      return err_set(msg, ERR_NOMEM, "lidar: out of memory for %zu points", need);
    }

    // an organised revolution the lidar joined after its start: the pixels of the rays before
    // the cursor never fire, and count as written
    lidar_cursor_t first = lidar_pattern_first_group(&l->pat, l->acc_sweep) * l->pat.nray;
    if (revolution_grid && l->cursor > first) {
      size_t cap = acc_cap(l, l->acc);
      lidar_points_dest_t d = {.base = blob_data(l->acc), .width = l->points.columns,
                               .azimuth = acc_azimuths(l, l->acc, cap)};
      lidar_points_fill_unfired(&l->points, &d, l->frame_points);
      l->acc_n = (size_t)(l->cursor - first) * l->maxret;
    }
  }
  size_t cap = acc_cap(l, l->acc);
  if (need <= cap) {
    return 0;
  }
  cap = cap ? cap : 4096;
  while (cap < need) {
    cap *= 2;
  }
  if ((uint64_t)cap * step > MAX_CLOUD_BYTES) {
    cap = (size_t)(MAX_CLOUD_BYTES / step);
  }

  // The accumulator is never shared while points are added to it (a published buffer is
  // replaced by another), so it can grow in place; the committed state follows it.
  blob_t* old = l->acc;
  if (!blob_is_exclusive(old) || acc_resize(l, cap) != 0) {
    return err_set(msg, ERR_NOMEM, "lidar: out of memory for %zu points", need);
  }
  if (l->committed.acc == old) {
    l->committed.acc = l->acc;
  }
  return 0;
}


// Trace n rays from the cursor (all of one sweep) and append their points.
static int run_batch(lidar_t* l, const sensor_ctx_t* ctx, const step_view_t* v,
                     const view_body_t* body, const lidar_sweep_pose_t* fixed, size_t n,
                     double tau_origin, const scene_filter_t* filter, err_msg_t* msg) {
  batch_ctx_t b = {.l = l, .ctx = ctx, .v = v, .body = body, .fixed = fixed,
                   .first = l->cursor, .n = n, .sweep = lidar_sweep_of(&l->pat, l->cursor),
                   .tau_origin = tau_origin, .filter = filter,
                   .horizon = l->horizon_on ? l->horizon : NULL,
                   .inv_dt = v->t1 > v->t0 ? 1.0 / (v->t1 - v->t0) : 0.0};
  atomic_init(&b.stop, 0);
  if (l->points.organised) {
    b.dest.group0 = l->per_step ? l->grid_group0 : lidar_pattern_first_group(&l->pat, b.sweep);
    b.dest.width = l->per_step ? l->grid_width : l->points.columns;
    b.dest.destagger = !l->per_step;
  }
  size_t nchunk = (n + l->chunk - 1) / l->chunk;
  pool_parallel_for(v->pool, nchunk, 1, trace_chunk, &b);
  if (atomic_load(&b.stop)) {
    return err_set(msg, ERR_STATE, "lidar %u: cancelled (the daemon is stopping, the client "
                   "left or the request ran out of time)", ctx->id);
  }

  // offsets of the chunks' points, room for them, then the points
  size_t total = 0;
  for (size_t c = 0; c < nchunk; c++) {
    size_t np = l->chunk_points[c];
    l->chunk_points[c] = total;
    total += np;
  }
  int rc = acc_reserve(l, total, msg);
  if (rc < 0) {
    return rc;
  }
  size_t cap = acc_cap(l, l->acc);
  b.dest.base = blob_data(l->acc);
  b.dest.azimuth = acc_azimuths(l, l->acc, cap);
  pool_parallel_for(v->pool, nchunk, 1, write_chunk, &b);
  l->acc_n += total;
  return 0;
}


// Give memory back when the accumulator is far larger than what it must hold: `keep` points
// now, and a frame (per revolution) or `typical` points (a step's, per step) later. Growth
// doubles, so a steady state never shrinks and regrows. Only a buffer nobody else reads.
static void acc_trim(lidar_t* l, size_t keep, size_t typical) {
  size_t target = keep > typical ? keep : typical;
  target = target > l->frame_points ? target : l->frame_points;
  target = target > 4096 ? target : 4096;
  if (!l->acc || acc_cap(l, l->acc) / 4 <= target || !blob_is_exclusive(l->acc)) {
    return;
  }
  blob_t* old = l->acc;
  if (acc_resize(l, target) == 0 && l->committed.acc == old) {
    l->committed.acc = l->acc;
  }
}


//---------------- Publishing

// A record of the accumulated points, holding their buffer itself: the points are not copied.
// The next points go to another buffer (acc_reserve takes one).
static int publish(lidar_t* l, const sensor_ctx_t* ctx, const step_view_t* v, double frame_start,
                   int complete, sensor_out_t* out, err_msg_t* msg) {
  sensor_record_t* r = sensor_out_push(out, ctx->id, SENSOR_REC_CLOUD);
  if (!r) {
    return err_set(msg, ERR_NOMEM, "lidar: out of memory for a record");
  }
  r->time = v->t1;
  r->frame = l->frame;
  sensor_cloud_t* c = &r->u.cloud;
  lidar_layout_describe(&l->points.layout, c);
  c->frame_start_time = frame_start;
  c->complete = complete;
  c->world_frame = l->world_frame;
  int rc = l->acc ? sensor_cloud_share(c, l->acc, 0, (uint32_t)l->acc_n, msg)
                  : sensor_cloud_alloc_unset(c, 0, msg);
  if (rc < 0) {
    return rc;
  }
  lidar_points_shape(&l->points, c->count, &c->height, &c->width);

  // for the encoders: the channels' stride and the azimuths the points were aimed at
  c->stride = l->points.stride;
  if (l->acc && l->points.azimuths) {
    c->azimuth = acc_azimuths(l, l->acc, acc_cap(l, l->acc));
  }

  // the record keeps the buffer; the lidar keeps its own reference only while the committed
  // state still needs it (a step that is not committed goes back to it)
  if (l->acc && l->acc != l->committed.acc) {
    blob_release(l->acc);
  }
  l->last_points = l->acc_n;
  l->acc = NULL;
  l->acc_n = 0;
  l->frame++;
  return 0;
}


//---------------- Step

// The objects this lidar does not see in this step: those on its own body (unless it sees
// it; the world is never its own body), on the excluded bodies, and outside its group mask.
static int exclusions(lidar_t* l, const sensor_ctx_t* ctx, const step_view_t* v,
                      scene_filter_t* f, err_msg_t* msg) {
  uint32_t bodies[LIDAR_MAX_EXCLUDED_BODIES + 1];
  uint32_t nb = 0;
  if (!l->see_own_body && ctx->body_id != 0) {
    bodies[nb++] = ctx->body_id;
  }
  for (uint32_t i = 0; i < l->nexclude_body; i++) {
    bodies[nb++] = l->exclude_bodies[i];
  }
  f->exclude_objects = NULL;
  f->nexclude = 0;
  if (nb == 0 && l->group_mask == 0) {
    return 0;   // sees everything
  }
  uint32_t n = scene_objects_hidden(v->scene, bodies, nb, l->group_mask, l->excluded,
                                    l->excluded_cap);
  if (n > l->excluded_cap) {
    uint32_t* e = mem_realloc(l->excluded, (size_t)n * sizeof *e);
    if (!e) {
      return err_set(msg, ERR_NOMEM, "lidar: out of memory for %u excluded objects", n);
    }
    l->excluded = e;
    l->excluded_cap = n;
    n = scene_objects_hidden(v->scene, bodies, nb, l->group_mask, l->excluded, l->excluded_cap);
  }
  l->nexcluded = n;
  f->exclude_objects = l->excluded;
  f->nexclude = n;
  return 0;
}


// Samples of the sensor's path in a step, for the box of its ray origins.
#define PATH_SAMPLES 16

// A box that holds every ray origin of the step. The sensor sits at p(s) + R(s) m: its body's
// origin p lerped, the mount offset m turned by the body's slerped orientation at a steady
// rate through the angle theta between the body's two ends. Between two of PATH_SAMPLES + 1
// samples of that path the sensor strays from their chord by at most |m| theta / PATH_SAMPLES;
// a ray starts up to `reach` from the sensor; a millimetre more for rounding.
static void origin_box(const view_body_t* body, int still, const pose_t* mount, double reach,
                       double lo[3], double hi[3]) {
  const pose_t* p0 = &body->at[0].pose;
  const pose_t* p1 = &body->at[1].pose;
  double c = fabs(p0->q[0] * p1->q[0] + p0->q[1] * p1->q[1] + p0->q[2] * p1->q[2] +
                  p0->q[3] * p1->q[3]);
  double theta = 2.0 * acos(c < 1.0 ? c : 1.0);
  for (int k = 0; k < 3; k++) {
    lo[k] = INFINITY;
    hi[k] = -INFINITY;
  }
  for (int i = 0; i <= (still ? 0 : PATH_SAMPLES); i++) {
    pose_t x = view_mount_pose(body, mount, still ? 1.0 : (double)i / PATH_SAMPLES);
    for (int k = 0; k < 3; k++) {
      lo[k] = x.p[k] < lo[k] ? x.p[k] : lo[k];
      hi[k] = x.p[k] > hi[k] ? x.p[k] : hi[k];
    }
  }
  double pad = xform_norm3(mount->p) * theta / PATH_SAMPLES + reach + 1e-3;
  for (int k = 0; k < 3; k++) {
    lo[k] -= pad;
    hi[k] += pad;
  }
}


// Where the sweeps stand before a step over (t0, t1] starting from state `s` (the first step
// places sweep 0 and the cursor), the rays the step fires, and the most bytes of records it
// can publish (every ray with the returns counted by boundret, per record 512 more).
typedef struct step_plan {
  saved_t s;                    // the state the step starts from
  lidar_cursor_t last;          // first ray after the step
  uint64_t rays;                // fired in (t0, t1]
  double pub_bytes;             // records it can publish, at most
  double one_bytes;             // per revolution: the sweep being gathered when it completes
} step_plan_t;

static void plan_step(const lidar_t* l, const saved_t* from, double t0, double t1,
                      step_plan_t* p) {
  p->s = *from;
  if (!p->s.started) {
    p->s.t_s = l->has_start_time ? l->start_time : t0;
    p->s.cursor = lidar_sweep_seek(&l->pat, p->s.t_s, t0);
    p->s.acc_sweep = lidar_sweep_of(&l->pat, p->s.cursor);
    p->s.acc_complete =
        p->s.cursor == lidar_pattern_first_group(&l->pat, p->s.acc_sweep) * l->pat.nray;
    p->s.acc_n = 0;
    p->s.started = 1;
  }
  p->last = lidar_sweep_seek(&l->pat, p->s.t_s, nextafter(t1, INFINITY));
  p->rays = p->last > p->s.cursor ? p->last - p->s.cursor : 0;
  uint64_t pub_points = 0, nrec = 0;
  p->one_bytes = 0.0;
  uint64_t acc_n = p->s.acc_n;
  if (l->points.organised && !l->per_step) {
    // every pixel before the cursor counts as written (lidar_points_fill_unfired)
    acc_n = (p->s.cursor - lidar_pattern_first_group(&l->pat, p->s.acc_sweep) * l->pat.nray) *
            l->maxret;
  }
  if (l->per_step) {
    pub_points = p->rays * (uint64_t)l->boundret;
    nrec = 1;
  } else {
    uint64_t last_sweep = lidar_sweep_of(&l->pat, p->last);
    lidar_cursor_t first = lidar_pattern_first_group(&l->pat, last_sweep) * l->pat.nray;
    if (first > p->s.cursor) {
      pub_points = acc_n + (first - p->s.cursor) * (uint64_t)l->boundret;
      nrec = last_sweep - p->s.acc_sweep;
      lidar_cursor_t end =
          lidar_pattern_first_group(&l->pat, p->s.acc_sweep + 1) * l->pat.nray;
      p->one_bytes = (double)(acc_n + (end - p->s.cursor) * (uint64_t)l->boundret) *
                     l->points.layout.point_step + 512.0;
    }
  }
  p->pub_bytes = (double)pub_points * l->points.layout.point_step + 512.0 * (double)nrec;
}


// Why a step over (t0, t1] cannot run (ERR_LIMIT with msg), or 0: too many rays, or records
// larger than `budget` (the environment's max_output_bytes for one sensor's step).
static int check_plan(const lidar_t* l, const sensor_ctx_t* ctx, const step_plan_t* p,
                      double t0, double t1, uint64_t budget, err_msg_t* msg) {
  if (p->rays > MAX_STEP_RAYS) {
    return err_set(msg, ERR_LIMIT, "lidar %u: the step (%.17g, %.17g] fires %llu rays, more "
                   "than %llu; step more often", ctx->id, t0, t1,
                   (unsigned long long)p->rays, (unsigned long long)MAX_STEP_RAYS);
  }
  if (p->pub_bytes > (double)budget && !l->per_step && p->one_bytes > (double)budget) {
    // shorter steps do not help when the sweep being gathered cannot fit by itself
    return err_set(msg, ERR_LIMIT, "lidar %u: its cloud of up to %.4g bytes, due at %.17g, "
                   "exceeds the %llu bytes one sensor's records may take in a step "
                   "(max_output_bytes) whatever the step; publish per step, use fewer fields, "
                   "or raise --max-frame-bytes", ctx->id, p->one_bytes, t1,
                   (unsigned long long)budget);
  }
  if (p->pub_bytes > (double)budget) {
    return err_set(msg, ERR_LIMIT, "lidar %u: the rays fired over (%.17g, %.17g] can give up "
                   "to %.4g bytes of point clouds, more than the %llu bytes one sensor's "
                   "records may take in a step (max_output_bytes); step in shorter intervals",
                   ctx->id, t0, t1, p->pub_bytes, (unsigned long long)budget);
  }
  return 0;
}


static int step_run(lidar_t* l, const sensor_ctx_t* ctx, const step_view_t* v, sensor_out_t* out,
                    err_msg_t* msg) {
  // the sensor's body; a pose shared by every ray when the body does not move in this step
  const view_body_t* body = view_find_body(v, ctx->body_id);
  if (!body) {
    return err_set(msg, ERR_STATE, "lidar %u: body %u is not in the step", ctx->id, ctx->body_id);
  }
  lidar_sweep_pose_t fixed;
  int is_fixed = memcmp(&body->at[0].pose, &body->at[1].pose, sizeof(pose_t)) == 0;
  if (is_fixed) {
    lidar_sweep_pose(body, &ctx->mount, 1.0, &fixed);
  }

  scene_filter_t filter;
  int rc = exclusions(l, ctx, v, &filter, msg);
  if (rc < 0) {
    return rc;
  }

  // a bounded amount of work and output: the rays fired in (t0, t1] are counted first, and
  // the records this step can publish at most (every ray with every return) must fit the
  // sensor's share of the step's output; the first step places sweep 0 and the cursor
  step_plan_t plan;
  saved_t now;
  state_save(l, &now);
  plan_step(l, &now, v->t0, v->t1, &plan);
  if ((rc = check_plan(l, ctx, &plan, v->t0, v->t1, v->output_budget, msg)) < 0) {
    return rc;
  }
  if (!l->started) {
    state_load(l, &plan.s);
  }

  // an organised cloud per step: its columns are the step's groups (an Ouster column fires at
  // once: no step splits one), its pixels reserved at once (the buffer never moves while they
  // are written)
  if (l->points.organised && l->per_step) {
    l->grid_group0 = l->cursor / l->pat.nray;
    l->grid_width = (uint32_t)(plan.rays / l->pat.nray);
    if (plan.rays && (rc = acc_reserve(l, (size_t)plan.rays * l->maxret, msg)) < 0) {
      return rc;
    }
  }

  // the horizon of the step's ray origins, when it repays its cost (depth 1 only: deeper
  // segments start anywhere)
  uint64_t nrays = plan.rays;
  l->horizon_on = l->horizon != NULL &&
                  nrays >= HORIZON_RAYS_PER_BOX * (scene_horizon_boxes(v->scene) + 1);
  if (l->horizon_on) {
    double lo[3], hi[3];
    origin_box(body, is_fixed, &ctx->mount, l->origin_reach, lo, hi);
    scene_horizon(v->scene, lo, hi, l->horizon);
  }

  // batches of the rays fired in (t0, t1], a sweep's cloud as soon as its last ray is in; the
  // clouds' actual bytes are checked as they grow (RETURN_ALL's bound counts one return a ray)
  uint64_t frame0 = l->frame;
  double published = 0.0;       // bytes of the clouds this step published
  for (;;) {
    if (view_cancelled(v)) {
      return err_set(msg, ERR_STATE, "lidar %u: cancelled (the daemon is stopping, the client "
                     "left or the request ran out of time)", ctx->id);
    }
    size_t n = lidar_sweep_take(&l->pat, l->t_s, l->cursor, v->t1, l->batch);
    if (n == 0) {
      break;
    }
    double tau_origin = l->per_step ? v->t0 - l->t_s : NAN;   // NAN: the sweep's own offsets
    rc = run_batch(l, ctx, v, body, is_fixed ? &fixed : NULL, n, tau_origin, &filter, msg);
    if (rc < 0) {
      return rc;
    }
    l->cursor += n;
    uint64_t next = lidar_sweep_of(&l->pat, l->cursor);
    if (!l->per_step && next != l->acc_sweep) {
      double start = l->t_s + lidar_pattern_sweep_start(&l->pat, l->acc_sweep);
      published += (double)l->acc_n * l->points.layout.point_step;
      if ((rc = publish(l, ctx, v, start, l->acc_complete, out, msg)) < 0) {
        return rc;
      }
      l->acc_sweep = next;
      l->acc_complete = 1;
    }
    // what this step publishes, and (per revolution) the open sweep, which must fit one day
    double open_bytes = (double)l->acc_n * l->points.layout.point_step + 512.0;
    double out_bytes = (l->per_step ? open_bytes : published) +
                       512.0 * (double)(l->frame - frame0);
    if (!l->per_step && open_bytes > out_bytes) {
      out_bytes = open_bytes;
    }
    if (out_bytes > (double)v->output_budget) {
      return err_set(msg, ERR_LIMIT, "lidar %u: Step.time = %.17g: the clouds of the rays fired "
                     "since %.17g take over %.4g bytes, more than the %llu bytes one sensor's "
                     "records may take in a step (max_output_bytes); step in shorter intervals",
                     ctx->id, v->t1, v->t0, out_bytes, (unsigned long long)v->output_budget);
    }
  }
  if (l->per_step) {
    rc = publish(l, ctx, v, v->t0, 0, out, msg);
    if (rc < 0) {
      return rc;
    }
  }
  return 0;
}


// The sweep state of a step: loaded from the committed state before it runs, staged after it.
static void state_save(const lidar_t* l, saved_t* s) {
  *s = (saved_t){.started = l->started, .t_s = l->t_s, .cursor = l->cursor,
                 .acc_sweep = l->acc_sweep, .acc_complete = l->acc_complete, .frame = l->frame,
                 .acc = l->acc, .acc_n = l->acc_n};
}


static void state_load(lidar_t* l, const saved_t* s) {
  l->started = s->started;
  l->t_s = s->t_s;
  l->cursor = s->cursor;
  l->acc_sweep = s->acc_sweep;
  l->acc_complete = s->acc_complete;
  l->frame = s->frame;
  l->acc = s->acc;
  l->acc_n = s->acc_n;
}


// A buffer the lidar no longer writes to (b, owned): kept as the newest spare, the oldest let
// go when both are taken.
static void keep_spare(lidar_t* l, blob_t* b) {
  if (!b || b == l->spare[0] || b == l->spare[1]) {
    return;
  }
  if (l->spare[0] && l->spare[1]) {
    blob_release(l->spare[0]);
    l->spare[0] = l->spare[1];
    l->spare[1] = NULL;
  }
  l->spare[l->spare[0] ? 1 : 0] = b;
}


// Two phases (sensor.h): a step starts from the committed state and only appends to the
// committed accumulator past its points (a sweep completed in the step goes out in its own
// buffer, and the next one starts in another), so a step that is not committed (it failed, or
// another sensor of the step did) leaves everything as it was.
static int lidar_step(void* self, const sensor_ctx_t* ctx, const step_view_t* v,
                      sensor_out_t* out, err_msg_t* msg) {
  lidar_t* l = self;

  // a step staged and never committed (another sensor failed) gives back its buffer
  if (l->has_staged && l->staged.acc != l->committed.acc) {
    keep_spare(l, l->staged.acc);
  }
  l->has_staged = 0;
  state_load(l, &l->committed);
  int rc = step_run(l, ctx, v, out, msg);
  if (rc < 0) {
    if (l->acc != l->committed.acc) {
      keep_spare(l, l->acc);
    }
    state_load(l, &l->committed);
    acc_trim(l, l->acc_n, 0);
    return rc;
  }
  state_save(l, &l->staged);
  l->has_staged = 1;
  state_load(l, &l->committed);
  return 0;
}


// Apply the staged step: its accumulator (the open sweep) becomes the committed one; the one it
// replaces went out with a record and is kept as the spare.
static void lidar_commit(void* self) {
  lidar_t* l = self;
  if (!l->has_staged) {
    return;
  }
  if (l->staged.acc != l->committed.acc) {
    keep_spare(l, l->committed.acc);
  }
  size_t typical = l->per_step ? l->last_points : 0;
  l->committed = l->staged;
  l->has_staged = 0;
  state_load(l, &l->committed);
  acc_trim(l, l->acc_n, typical);
}


// sensor_ops_t.bound: the most bytes of records a step over (t0, t1] can give from the
// committed state, or why no step can cover that interval.
static int lidar_bound(const void* self, const sensor_ctx_t* ctx, double t0, double t1,
                       uint64_t budget, uint64_t* bytes, err_msg_t* msg) {
  const lidar_t* l = self;
  step_plan_t plan;
  plan_step(l, &l->committed, t0, t1, &plan);
  *bytes = plan.pub_bytes < 1.8e19 ? (uint64_t)plan.pub_bytes : UINT64_MAX;
  return check_plan(l, ctx, &plan, t0, t1, budget, msg);
}


size_t lidar_accumulator_bytes(const void* self) {
  const lidar_t* l = self;
  return (l->committed.acc ? blob_cap(l->committed.acc) : 0) +
         (l->spare[0] ? blob_cap(l->spare[0]) : 0) + (l->spare[1] ? blob_cap(l->spare[1]) : 0);
}


const sensor_ops_t lidar_ops = {
    .kind_name = "lidar",
    .step = lidar_step,
    .commit = lidar_commit,
    .bound = lidar_bound,
    .destroy = lidar_destroy,
};
