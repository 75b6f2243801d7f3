// SPDX-License-Identifier: MIT
// lidar.c: the lidar sensor's step (see lidar.h): sweep stepping, batched tracing on the pool,
// point assembly and publishing, reading its model (model.h) and writing its data (data.h).
#include "lidar/lidar.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "base/mem.h"
#include "base/pool.h"
#include "base/rng.h"
#include "lidar/data.h"
#include "lidar/model.h"
#include "lidar/sweep.h"

// Most rays one lidar fires in one step (24 s of an OS1-128 2048 x 10, 230 s of a VLP-16): a
// longer step is refused (step more often).
#define MAX_STEP_RAYS ((uint64_t)1 << 26)

// A step's rays per box of the scene's horizon bounds (scene_horizon_boxes) from which its
// rays are culled against a horizon: building one costs about as much as tracing a ray per
// box, culling saves most of a trace per ray above it.
#define HORIZON_RAYS_PER_BOX 32u

// The sensor: its model, const after create, and its data.
typedef struct lidar {
  lidar_model_t model;
  lidar_data_t data;
} lidar_t;


//---------------- Creation

static void lidar_destroy(void* self) {
  lidar_t* l = self;
  if (!l) {
    return;
  }
  lidar_data_close(&l->data);
  lidar_model_close(&l->model);
  mem_free(l);
}


int lidar_create(lidar_desc_t* d, sensor_t* out, err_msg_t* msg) {
  lidar_t* l = mem_calloc(1, sizeof *l);
  if (!l) {
    return err_set(msg, ERR_NOMEM, "lidar: out of memory");
  }

  // the model (it takes the pattern's tables), then the data sized from it; on failure the
  // tables go back to the caller
  int rc = lidar_model_init(&l->model, d, msg);
  if (rc < 0) {
    mem_free(l);
    return rc;
  }
  if ((rc = lidar_data_init(&l->data, &l->model, msg)) < 0) {
    d->pattern = l->model.pat;
    memset(&l->model.pat, 0, sizeof l->model.pat);
    lidar_destroy(l);
    return rc;
  }
  out->kind = SENSOR_LIDAR;
  out->ops = &lidar_ops;
  out->self = l;
  out->joint_id = 0;
  return 0;
}


//---------------- Batches

typedef struct batch_ctx {
  const lidar_model_t* m;
  lidar_data_t* d;
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


// Whether chunk [i0, i0 + nc) is made from the model's lanes (lidar_sweep_lane_packets): a whole
// chunk from a group's first ray, without emission angle noise (its draws are per ray).
static int lane_chunk(const batch_ctx_t* b, size_t i0, size_t nc) {
  const lidar_model_t* m = b->m;
  return m->lanes.n == nc && (b->first + i0) % m->pat.nray == 0 && !m->angle.enabled;
}


// The world rays of a lane chunk (lane_chunk) in trace order, their sensor-frame rays in
// d->local for the points: a still sensor's turned by the kernel with the table read, a moving
// one's here at the pose of each ray's time (its lanes of one group share it when their
// rays fire together, an Ouster column).
static void lane_rays(batch_ctx_t* b, size_t i0, double tmax, double s_origin) {
  const lidar_model_t* m = b->m;
  lidar_data_t* d = b->d;
  const size_t npk = m->lanes.n / SCENE_PACKET;
  scene_packet_t* pks = &d->packets[i0 / SCENE_PACKET];
  scene_packet_t* local = &d->local[i0 / SCENE_PACKET];
  lidar_sweep_frame_t f = {.inv_dt = b->inv_dt, .s_origin = s_origin, .tmax = tmax,
                           .fixed = b->fixed};
  // a still sensor's lean points aim their rays again from the tables (write_chunk): no
  // sensor-frame copy is stored
  lidar_sweep_lane_packets(&m->pat, &m->lanes, (b->first + i0) / m->pat.nray, &f,
                           b->fixed && m->points.lean ? NULL : local, pks, d->ray_index + i0);
  if (b->fixed) {
    return;
  }
  // each lane at the pose of its ray's time: the pose of its group's last time, when the time
  // is the same, or a new one (an Ouster column fires at once: 8 poses a chunk)
  lidar_sweep_pose_t pose[SCENE_PACKET];   // by the lane's group
  double lane_s[SCENE_PACKET];             // time of each lane's pose in lp
  lidar_sweep_lane_poses_t lp;
  for (unsigned c = 0; c < SCENE_PACKET; c++) {
    pose[c].s = -1.0;
    lane_s[c] = -1.0;
  }
  for (size_t q = 0; q < npk; q++) {
    const scene_packet_t* lo = &local[q];
    for (unsigned k = 0; k < SCENE_PACKET; k++) {
      const double s = lo->time[k];
      if (s == lane_s[k]) {
        continue;
      }
      lidar_sweep_pose_t* ps = &pose[m->lanes.group[k]];
      if (s != ps->s) {
        lidar_sweep_pose(b->body, &b->ctx->mount, s, ps);
      }
      lidar_sweep_lane_pose(&lp, k, ps);
      lane_s[k] = s;
    }
    lidar_sweep_turn_lanes(&lp, lo, &pks[q]);
  }
}


// The world rays of a chunk's rays [i0, i0 + nc) in trace order: a lane chunk's from the
// model's tables (lane_rays), any other's from trace_chunk's pr and slot:
// each ray's emission angle noise (in place in pr: the points take the direction from there),
// its rng index, the sensor pose at its firing time and the ray at that time, into the
// packets of columns, and also into rows when write_chunk needs them (world frame, normals) or
// the segment heap does (depth > 1).
static void chunk_rays(batch_ctx_t* b, size_t i0, size_t nc) {
  const lidar_model_t* m = b->m;
  lidar_data_t* d = b->d;
  const uint32_t* slot = d->slot + i0;
  scene_packet_t* pks = &d->packets[i0 / SCENE_PACKET];
  lidar_sweep_pose_t pose;
  if (b->fixed) {
    pose = *b->fixed;
  } else {
    pose.s = -1.0;
  }
  const int fixed = b->fixed != NULL;
  const double tmax = lidar_returns_primary_tmax(&m->ret, b->v);
  const double s_origin = d->now.t_s - b->v->t0;
  const double inv_dt = b->inv_dt;
  if (nc % SCENE_PACKET) {
    memset(&pks[nc / SCENE_PACKET], 0, sizeof *pks);   // the unused lanes of the last packet
  }
  const int lanes = lane_chunk(b, i0, nc);
  if (lanes) {
    lane_rays(b, i0, tmax, s_origin);
  }

  // a still sensor's rays without emission angle noise: copied in trace order, each packet's
  // lanes one after the other, every ray read from its firing position (slot is a permutation
  // of the chunk), and each packet taken to the world as soon as it is full, while the cache
  // still holds it. Written in firing order instead, the stores of consecutive rays land in 64
  // packets' rows, 64 KB of a tiled chunk that the cache does not hold: that loop cost about
  // 10 % of an OS1-128's revolution.
  const int in_order = !lanes && fixed && !m->angle.enabled;
  const int firing = !lanes && !in_order;   // the loop below, in firing order
  if (in_order) {
    uint32_t at[LIDAR_CHUNK_MAX];   // firing position (in the chunk) of each trace position
    for (size_t j = 0; j < nc; j++) {
      at[slot[j]] = (uint32_t)j;
    }
    const lidar_pattern_ray_t* pr = d->pr + i0;
    uint64_t* index = d->ray_index + i0;
    for (size_t q = 0; q < nc; q += SCENE_PACKET) {
      scene_packet_t* pk = &pks[q / SCENE_PACKET];
      const size_t end = q + SCENE_PACKET < nc ? q + SCENE_PACKET : nc;
      for (size_t i = q; i < end; i++) {
        const lidar_pattern_ray_t* p = &pr[at[i]];
        const unsigned k = (unsigned)(i - q);
        const double s = inv_dt * (s_origin + p->time);
        index[i] = p->index;
        pk->time[k] = s > 0.0 ? (s < 1.0 ? s : 1.0) : 0.0;
        pk->tmax[k] = tmax;
        lidar_sweep_packet_put(pk, k, p->origin, p->dir);
      }
      lidar_sweep_world_packet(&pose, pk);
    }
  }

  // else in firing order (rays of a column share a pose): a still sensor's rays in the sensor
  // frame for now, a moving one's in the world at their own pose
  for (size_t j = 0; firing && j < nc; j++) {
    lidar_pattern_ray_t* p = &d->pr[i0 + j];
    size_t i = slot[j];
    scene_packet_t* pk = &pks[i / SCENE_PACKET];
    unsigned k = (unsigned)(i % SCENE_PACKET);
    if (m->angle.enabled) {
      rng_key_t key = {.seed = b->v->seed, .stream = b->ctx->id, .frame = b->sweep,
                       .index = p->index};
      double nominal[3] = {p->dir[0], p->dir[1], p->dir[2]};
      lidar_noise_angle(&m->angle, &key, nominal, p->dir);
    }
    d->ray_index[i0 + i] = p->index;
    double s = inv_dt * (s_origin + p->time);
    s = s > 0.0 ? (s < 1.0 ? s : 1.0) : 0.0;
    pk->time[k] = s;
    pk->tmax[k] = tmax;
    const double* o = p->origin;
    const double* dir = p->dir;
    scene_ray_t w;
    if (!fixed) {
      if (s != pose.s) {
        lidar_sweep_pose(b->body, &b->ctx->mount, s, &pose);
      }
      lidar_sweep_world_ray(&pose, p->origin, p->dir, &w);
      o = w.origin;
      dir = w.dir;
    }
    lidar_sweep_packet_put(pk, (unsigned)k, o, dir);
  }

  // a still sensor's rays to the world, packet by packet
  for (size_t q = 0; firing && fixed && q < nc; q += SCENE_PACKET) {
    lidar_sweep_world_packet(&pose, &pks[q / SCENE_PACKET]);
  }
  for (size_t i = 0; m->rows && i < nc; i++) {
    const scene_packet_t* pk = &pks[i / SCENE_PACKET];
    size_t k = i % SCENE_PACKET;
    d->rays[i0 + i] = (scene_ray_t){.origin = {pk->ox[k], pk->oy[k], pk->oz[k]},
                                    .dir = {pk->dx[k], pk->dy[k], pk->dz[k]},
                                    .tmax = tmax, .time = pk->time[k]};
  }
}


// Phase 1 of a chunk: rays (pattern, angle noise, pose at the firing time), their returns, and
// the number of points they give. Rays are stored in trace order, in which every 16 rays make a
// packet: firing order, except that a pattern with small firing groups (a VLP-16 fires 16
// lasers at 16 elevations in a row) is traced laser by laser across the groups of the chunk,
// and one with groups of 32 to 128 rays (a column of an OS1-128) in tiles of LIDAR_TILE_RAYS
// rays of LIDAR_TILE_GROUPS consecutive groups (2 channels x 8 columns), so that each packet
// holds neighbouring rays.
// Each ray's result is a function of the ray alone, so the order changes only the speed. At
// depth 1 the rays stay in packets of columns from the pose to the returns.
static void trace_chunk(void* arg, size_t begin, size_t end) {
  batch_ctx_t* b = arg;
  const lidar_model_t* m = b->m;
  lidar_data_t* d = b->d;
  uint32_t K = m->pat.nray;
  for (size_t c = begin; c < end; c++) {
    size_t i0 = c * m->chunk;
    size_t nc = i0 + m->chunk < b->n ? m->chunk : b->n - i0;
    if (atomic_load_explicit(&b->stop, memory_order_relaxed) || view_cancelled(b->v)) {
      atomic_store_explicit(&b->stop, 1, memory_order_relaxed);
      d->chunk_points[c] = 0;
      continue;
    }
    // the pattern's rays in firing order, unless the lanes make them and the points take
    // them from there (a lean writer reads only directions and origins)
    lidar_pattern_ray_t* pr = d->pr + i0;
    const int lanes = lane_chunk(b, i0, nc);
    if (m->points.lean && !lanes) {
      lidar_sweep_rays_lean(&m->pat, b->first + i0, nc, pr);
    } else if (!m->points.lean) {
      lidar_sweep_rays(&m->pat, b->first + i0, nc, pr);
    }

    // trace order: by position in the group, then group (a counting sort)
    uint32_t* slot = d->slot + i0;
    if (m->regroup) {
      uint32_t count[LIDAR_REGROUP_BELOW + 1] = {0};
      uint32_t k0 = (uint32_t)((b->first + i0) % K);
      for (size_t j = 0; j < nc; j++) {
        count[(k0 + j) % K + 1]++;
      }
      for (uint32_t k = 1; k <= K; k++) {
        count[k] += count[k - 1];
      }
      for (size_t j = 0; j < nc; j++) {
        slot[j] = count[(k0 + j) % K]++;
      }
    } else if (m->tile_slot) {
      size_t k0 = (size_t)((b->first + i0) % K);
      if (k0 == 0 && nc == m->chunk) {
        memcpy(slot, m->tile_slot, nc * sizeof *slot);   // a whole row of tiles: the usual chunk
      } else {
        lidar_model_tile_slots(K, k0, nc, slot);
      }
    } else {
      for (size_t j = 0; j < nc; j++) {
        slot[j] = (uint32_t)j;
      }
    }

    // the world rays, then their returns: in packets of columns at depth 1, else in rows
    chunk_rays(b, i0, nc);
    if (m->ret.depth == 1) {
      lidar_returns_packets_t pk = {.view = b->v, .sensor_id = b->ctx->id, .frame = b->sweep,
                                    .rays = &d->packets[i0 / SCENE_PACKET],
                                    .ray_index = d->ray_index + i0, .n = nc, .filter = b->filter,
                                    .horizon = b->horizon,
                                    .distance = m->lean_returns ? d->distance + i0 : NULL,
                                    .intensity = m->lean_returns ? d->intensity + i0 : NULL};
      lidar_returns_packets(&m->ret, &pk, m->lean_returns ? NULL : d->returns + i0 * m->maxret,
                            d->nret + i0);
    } else {
      lidar_returns_batch_t rb = {.view = b->v, .sensor_id = b->ctx->id, .frame = b->sweep,
                                  .rays = d->rays + i0, .ray_index = d->ray_index + i0, .n = nc,
                                  .filter = b->filter};
      lidar_returns_trace(&m->ret, &rb, d->returns + i0 * m->maxret, d->nret + i0);
    }
    d->chunk_points[c] = lidar_points_count(&m->points, d->nret + i0, nc);
  }
}


// Phase 2 of a chunk: its points, appended at their offsets in the open sweep's buffer in
// firing order, or (organised) at their pixels of the cloud.
static void write_chunk(void* arg, size_t begin, size_t end) {
  batch_ctx_t* b = arg;
  const lidar_model_t* m = b->m;
  const lidar_data_t* d = b->d;
  for (size_t c = begin; c < end; c++) {
    size_t i0 = c * m->chunk;
    size_t nc = i0 + m->chunk < b->n ? m->chunk : b->n - i0;
    // a lane chunk's sensor-frame rays: stored in d->local, or (a still sensor's lean points,
    // lane_rays) aimed again from the tables
    const int lanes = lane_chunk(b, i0, nc), aim = lanes && b->fixed && m->points.lean;
    lidar_points_chunk_t ck = {.rays = d->pr + i0, .slot = d->slot + i0, .nret = d->nret + i0,
                               .returns = m->lean_returns ? NULL : d->returns + i0 * m->maxret,
                               .distance = m->lean_returns ? d->distance + i0 : NULL,
                               .intensity = m->lean_returns ? d->intensity + i0 : NULL,
                               .world = d->rays + i0,
                               .local = lanes && !aim ? &d->local[i0 / SCENE_PACKET] : NULL,
                               .lanes = aim ? &m->lanes : NULL, .pattern = &m->pat,
                               .n = nc, .first = b->first + i0, .tau_origin = b->tau_origin,
                               .body = b->body, .mount = &b->ctx->mount, .fixed = b->fixed};
    lidar_points_dest_t dest = b->dest;
    dest.at = d->now.acc_n + d->chunk_points[c];
    lidar_points_write(&m->points, &ck, &dest);
  }
}


// The refusal of a step whose request was cancelled while the lidar ran.
static int cancelled(const sensor_ctx_t* ctx, err_msg_t* msg) {
  return err_set(msg, ERR_STATE, "lidar %u: cancelled (the daemon is stopping, the client left "
                 "or the request ran out of time)", ctx->id);
}


// Trace n rays from the cursor (all of one sweep) and append their points.
static int run_batch(const lidar_model_t* m, lidar_data_t* d, const sensor_ctx_t* ctx,
                     const step_view_t* v, const view_body_t* body,
                     const lidar_sweep_pose_t* fixed, size_t n, double tau_origin,
                     const scene_filter_t* filter, err_msg_t* msg) {
  batch_ctx_t b = {.m = m, .d = d, .ctx = ctx, .v = v, .body = body, .fixed = fixed,
                   .first = d->now.cursor, .n = n,
                   .sweep = lidar_sweep_of(&m->pat, d->now.cursor),
                   .tau_origin = tau_origin, .filter = filter,
                   .horizon = d->horizon_on ? d->horizon : NULL,
                   .inv_dt = v->t1 > v->t0 ? 1.0 / (v->t1 - v->t0) : 0.0};
  atomic_init(&b.stop, 0);
  if (m->points.organised) {
    b.dest.group0 = m->per_step ? d->grid_group0 : lidar_pattern_first_group(&m->pat, b.sweep);
    b.dest.width = m->per_step ? d->grid_width : m->points.columns;
    b.dest.destagger = !m->per_step;
  }
  size_t nchunk = (n + m->chunk - 1) / m->chunk;
  pool_parallel_for(v->pool, nchunk, 1, trace_chunk, &b);
  if (atomic_load(&b.stop)) {
    return cancelled(ctx, msg);
  }

  // offsets of the chunks' points, room for them, then the points
  size_t total = 0;
  for (size_t c = 0; c < nchunk; c++) {
    size_t np = d->chunk_points[c];
    d->chunk_points[c] = total;
    total += np;
  }
  int rc = lidar_data_reserve(d, m, total, msg);
  if (rc < 0) {
    return rc;
  }
  b.dest.base = blob_data(d->now.acc);
  b.dest.azimuth = lidar_data_azimuths(m, d->now.acc);
  pool_parallel_for(v->pool, nchunk, 1, write_chunk, &b);
  d->now.acc_n += total;
  return 0;
}


//---------------- Publishing

// A record of the accumulated points, holding their buffer itself: the points are not copied.
// The next points go to another buffer (lidar_data_reserve takes one).
static int publish(const lidar_model_t* m, lidar_data_t* d, const sensor_ctx_t* ctx,
                   const step_view_t* v, double frame_start, int complete, sensor_out_t* out,
                   err_msg_t* msg) {
  sensor_record_t* r = sensor_out_push(out, ctx->id, SENSOR_REC_CLOUD);
  if (!r) {
    return err_set(msg, ERR_NOMEM, "lidar: out of memory for a record");
  }
  r->time = v->t1;
  r->frame = d->now.frame;
  sensor_cloud_t* c = &r->u.cloud;
  lidar_layout_describe(&m->points.layout, c);
  c->frame_start_time = frame_start;
  c->complete = complete;
  c->world_frame = m->world_frame;
  int rc = d->now.acc ? sensor_cloud_share(c, d->now.acc, 0, (uint32_t)d->now.acc_n, msg)
                      : sensor_cloud_alloc_unset(c, 0, msg);
  if (rc < 0) {
    return rc;
  }
  lidar_points_shape(&m->points, c->count, &c->height, &c->width);

  // for the encoders: the channels' stride and the azimuths the points were aimed at
  c->stride = m->points.stride;
  if (d->now.acc && m->points.azimuths) {
    c->azimuth = lidar_data_azimuths(m, d->now.acc);
  }

  // the record keeps the buffer; the lidar keeps its own reference only while the committed
  // state still needs it (a step that is not committed goes back to it)
  if (d->now.acc && d->now.acc != d->committed.acc) {
    blob_release(d->now.acc);
  }
  d->last_points = d->now.acc_n;
  d->now.acc = NULL;
  d->now.acc_n = 0;
  d->now.frame++;
  return 0;
}


//---------------- Step

// The objects this lidar does not see in this step: those on its own body (unless it sees
// it; the world is never its own body), on the excluded bodies, and outside its group mask.
static int exclusions(const lidar_model_t* m, lidar_data_t* d, const sensor_ctx_t* ctx,
                      const step_view_t* v, scene_filter_t* f, err_msg_t* msg) {
  uint32_t bodies[LIDAR_MAX_EXCLUDED_BODIES + 1];
  uint32_t nb = 0;
  if (!m->see_own_body && ctx->body_id != 0) {
    bodies[nb++] = ctx->body_id;
  }
  for (uint32_t i = 0; i < m->nexclude_body; i++) {
    bodies[nb++] = m->exclude_bodies[i];
  }
  f->exclude_objects = NULL;
  f->nexclude = 0;
  if (nb == 0 && m->group_mask == 0) {
    return 0;   // sees everything
  }
  uint32_t n = scene_objects_hidden(v->scene, bodies, nb, m->group_mask, d->excluded,
                                    d->excluded_cap);
  if (n > d->excluded_cap) {
    uint32_t* e = mem_realloc(d->excluded, (size_t)n * sizeof *e);
    if (!e) {
      return err_set(msg, ERR_NOMEM, "lidar: out of memory for %u excluded objects", n);
    }
    d->excluded = e;
    d->excluded_cap = n;
    n = scene_objects_hidden(v->scene, bodies, nb, m->group_mask, d->excluded, d->excluded_cap);
  }
  d->nexcluded = n;
  f->exclude_objects = d->excluded;
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
  lidar_state_t s;              // the state the step starts from
  lidar_cursor_t last;          // first ray after the step
  uint64_t rays;                // fired in (t0, t1]
  double pub_bytes;             // records it can publish, at most
  double one_bytes;             // per revolution: the sweep being gathered when it completes
} step_plan_t;

static void plan_step(const lidar_model_t* m, const lidar_state_t* from, double t0, double t1,
                      step_plan_t* p) {
  p->s = *from;
  if (!p->s.started) {
    p->s.t_s = m->has_start_time ? m->start_time : t0;
    p->s.cursor = lidar_sweep_seek(&m->pat, p->s.t_s, t0);
    p->s.acc_sweep = lidar_sweep_of(&m->pat, p->s.cursor);
    p->s.acc_complete =
        p->s.cursor == lidar_pattern_first_group(&m->pat, p->s.acc_sweep) * m->pat.nray;
    p->s.acc_n = 0;
    p->s.started = 1;
  }
  p->last = lidar_sweep_seek(&m->pat, p->s.t_s, nextafter(t1, INFINITY));
  p->rays = p->last > p->s.cursor ? p->last - p->s.cursor : 0;
  uint64_t pub_points = 0, nrec = 0;
  p->one_bytes = 0.0;
  uint64_t acc_n = p->s.acc_n;
  if (m->points.organised && !m->per_step) {
    // every pixel before the cursor counts as written (lidar_points_fill_unfired)
    acc_n = (p->s.cursor - lidar_pattern_first_group(&m->pat, p->s.acc_sweep) * m->pat.nray) *
            m->maxret;
  }
  if (m->per_step) {
    pub_points = p->rays * (uint64_t)m->boundret;
    nrec = 1;
  } else {
    uint64_t last_sweep = lidar_sweep_of(&m->pat, p->last);
    lidar_cursor_t first = lidar_pattern_first_group(&m->pat, last_sweep) * m->pat.nray;
    if (first > p->s.cursor) {
      pub_points = acc_n + (first - p->s.cursor) * (uint64_t)m->boundret;
      nrec = last_sweep - p->s.acc_sweep;
      lidar_cursor_t end =
          lidar_pattern_first_group(&m->pat, p->s.acc_sweep + 1) * m->pat.nray;
      p->one_bytes = (double)(acc_n + (end - p->s.cursor) * (uint64_t)m->boundret) *
                     m->points.layout.point_step + 512.0;
    }
  }
  p->pub_bytes = (double)pub_points * m->points.layout.point_step + 512.0 * (double)nrec;
}


// Why a step over (t0, t1] cannot run (ERR_LIMIT with msg), or 0: too many rays, or records
// larger than `budget` (the environment's max_output_bytes for one sensor's step).
static int check_plan(const lidar_model_t* m, const sensor_ctx_t* ctx, const step_plan_t* p,
                      double t0, double t1, uint64_t budget, err_msg_t* msg) {
  if (p->rays > MAX_STEP_RAYS) {
    return err_set(msg, ERR_LIMIT, "lidar %u: the step (%.17g, %.17g] fires %llu rays, more "
                   "than %llu; step more often", ctx->id, t0, t1,
                   (unsigned long long)p->rays, (unsigned long long)MAX_STEP_RAYS);
  }
  if (p->pub_bytes > (double)budget && !m->per_step && p->one_bytes > (double)budget) {
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


static int step_run(const lidar_model_t* m, lidar_data_t* d, const sensor_ctx_t* ctx,
                    const step_view_t* v, sensor_out_t* out, err_msg_t* msg) {
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
  int rc = exclusions(m, d, ctx, v, &filter, msg);
  if (rc < 0) {
    return rc;
  }

  // a bounded amount of work and output: the rays fired in (t0, t1] are counted first, and
  // the records this step can publish at most (every ray with every return) must fit the
  // sensor's share of the step's output; the first step places sweep 0 and the cursor
  step_plan_t plan;
  plan_step(m, &d->now, v->t0, v->t1, &plan);
  if ((rc = check_plan(m, ctx, &plan, v->t0, v->t1, v->output_budget, msg)) < 0) {
    return rc;
  }
  d->now = plan.s;

  // an organised cloud per step: its columns are the step's groups (an Ouster column fires at
  // once: no step splits one), its pixels reserved at once (the buffer never moves while they
  // are written)
  if (m->points.organised && m->per_step) {
    d->grid_group0 = d->now.cursor / m->pat.nray;
    d->grid_width = (uint32_t)(plan.rays / m->pat.nray);
    if (plan.rays && (rc = lidar_data_reserve(d, m, (size_t)plan.rays * m->maxret, msg)) < 0) {
      return rc;
    }
  }

  // the horizon of the step's ray origins, when it repays its cost (depth 1 only: deeper
  // segments start anywhere)
  uint64_t nrays = plan.rays;
  d->horizon_on = d->horizon != NULL &&
                  nrays >= HORIZON_RAYS_PER_BOX * (scene_horizon_boxes(v->scene) + 1);
  if (d->horizon_on) {
    double lo[3], hi[3];
    origin_box(body, is_fixed, &ctx->mount, m->origin_reach, lo, hi);
    scene_horizon(v->scene, lo, hi, d->horizon);
  }

  // batches of the rays fired in (t0, t1], a sweep's cloud as soon as its last ray is in; the
  // clouds' actual bytes are checked as they grow (RETURN_ALL's bound counts one return a ray)
  uint64_t frame0 = d->now.frame;
  double published = 0.0;       // bytes of the clouds this step published
  for (;;) {
    if (view_cancelled(v)) {
      return cancelled(ctx, msg);
    }
    size_t n = lidar_sweep_take(&m->pat, d->now.t_s, d->now.cursor, v->t1, m->batch);
    if (n == 0) {
      break;
    }
    double tau_origin = m->per_step ? v->t0 - d->now.t_s : NAN;   // NAN: the sweep's offsets
    rc = run_batch(m, d, ctx, v, body, is_fixed ? &fixed : NULL, n, tau_origin, &filter, msg);
    if (rc < 0) {
      return rc;
    }
    d->now.cursor += n;
    uint64_t next = lidar_sweep_of(&m->pat, d->now.cursor);
    if (!m->per_step && next != d->now.acc_sweep) {
      double start = d->now.t_s + lidar_pattern_sweep_start(&m->pat, d->now.acc_sweep);
      published += (double)d->now.acc_n * m->points.layout.point_step;
      if ((rc = publish(m, d, ctx, v, start, d->now.acc_complete, out, msg)) < 0) {
        return rc;
      }
      d->now.acc_sweep = next;
      d->now.acc_complete = 1;
    }
    // what this step publishes, and (per revolution) the open sweep, which must fit one day
    double open_bytes = (double)d->now.acc_n * m->points.layout.point_step + 512.0;
    double out_bytes = (m->per_step ? open_bytes : published) +
                       512.0 * (double)(d->now.frame - frame0);
    if (!m->per_step && open_bytes > out_bytes) {
      out_bytes = open_bytes;
    }
    if (out_bytes > (double)v->output_budget) {
      return err_set(msg, ERR_LIMIT, "lidar %u: Step.time = %.17g: the clouds of the rays fired "
                     "since %.17g take over %.4g bytes, more than the %llu bytes one sensor's "
                     "records may take in a step (max_output_bytes); step in shorter intervals",
                     ctx->id, v->t1, v->t0, out_bytes, (unsigned long long)v->output_budget);
    }
  }
  if (m->per_step) {
    rc = publish(m, d, ctx, v, v->t0, 0, out, msg);
    if (rc < 0) {
      return rc;
    }
  }
  return 0;
}


// Two phases (sensor.h): a step starts from the committed state and only appends to the
// committed buffer past its points (a sweep completed in the step goes out in its own buffer,
// and the next one starts in another), so a step that is not committed (it failed, or another
// sensor of the step did) leaves everything as it was.
static int lidar_step(void* self, const sensor_ctx_t* ctx, const step_view_t* v,
                      sensor_out_t* out, err_msg_t* msg) {
  lidar_t* l = self;
  const lidar_model_t* m = &l->model;
  lidar_data_t* d = &l->data;

  // a step staged and never committed (another sensor failed) gives back its buffer
  if (d->has_staged && d->staged.acc != d->committed.acc) {
    lidar_data_keep_spare(d, d->staged.acc);
  }
  d->has_staged = 0;
  d->now = d->committed;
  int rc = step_run(m, d, ctx, v, out, msg);
  if (rc < 0) {
    if (d->now.acc != d->committed.acc) {
      lidar_data_keep_spare(d, d->now.acc);
    }
    d->now = d->committed;
    lidar_data_trim(d, m, d->now.acc_n, 0);
    return rc;
  }
  d->staged = d->now;
  d->has_staged = 1;
  d->now = d->committed;
  return 0;
}


// Apply the staged step: its buffer (the open sweep) becomes the committed one; the one it
// replaces went out with a record and is kept as a spare.
static void lidar_commit(void* self) {
  lidar_t* l = self;
  const lidar_model_t* m = &l->model;
  lidar_data_t* d = &l->data;
  if (!d->has_staged) {
    return;
  }
  if (d->staged.acc != d->committed.acc) {
    lidar_data_keep_spare(d, d->committed.acc);
  }
  size_t typical = m->per_step ? d->last_points : 0;
  d->committed = d->staged;
  d->has_staged = 0;
  d->now = d->committed;
  lidar_data_trim(d, m, d->now.acc_n, typical);
}


// sensor_ops_t.bound: the most bytes of records a step over (t0, t1] can give from the
// committed state, or why no step can cover that interval.
static int lidar_bound(const void* self, const sensor_ctx_t* ctx, double t0, double t1,
                       uint64_t budget, uint64_t* bytes, err_msg_t* msg) {
  const lidar_t* l = self;
  step_plan_t plan;
  plan_step(&l->model, &l->data.committed, t0, t1, &plan);
  *bytes = plan.pub_bytes < 1.8e19 ? (uint64_t)plan.pub_bytes : UINT64_MAX;
  return check_plan(&l->model, ctx, &plan, t0, t1, budget, msg);
}


size_t lidar_accumulator_bytes(const void* self) {
  return lidar_data_bytes(&((const lidar_t*)self)->data);
}


const sensor_ops_t lidar_ops = {
    .kind_name = "lidar",
    .step = lidar_step,
    .commit = lidar_commit,
    .bound = lidar_bound,
    .destroy = lidar_destroy,
};
