// SPDX-License-Identifier: MIT
// model.c: a lidar's model (model.h): validated and built once at create, the pipeline's
// constants derived from the configuration, the tile table of a tiled pattern.
#include "lidar/model.h"

#include <math.h>
#include <string.h>

#include "base/mem.h"
#include "lidar/config.h"

// Rays per batch (times the returns per ray, bounded; at least one chunk): the scratch is
// allocated once, about 1.2 MB of it for 4 chunks, one per worker of a 4-worker pool.
#define BATCH_RETURNS 4096u


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


int lidar_model_tiled(uint32_t K) {
  return K >= LIDAR_REGROUP_BELOW && K <= LIDAR_CHUNK_MAX / LIDAR_TILE_GROUPS &&
         K % LIDAR_TILE_RAYS == 0;
}


void lidar_model_tile_slots(uint32_t K, size_t k0, size_t m, uint32_t* slot) {
  size_t ng = (k0 + m + K - 1) / K;
  uint32_t pos = 0;
  for (size_t gb = 0; gb < ng; gb += LIDAR_TILE_GROUPS) {
    size_t ge = gb + LIDAR_TILE_GROUPS < ng ? gb + LIDAR_TILE_GROUPS : ng;
    for (size_t kb = 0; kb < K; kb += LIDAR_TILE_RAYS) {
      for (size_t g = gb; g < ge; g++) {
        for (size_t k = kb; k < kb + LIDAR_TILE_RAYS; k++) {
          size_t lin = g * K + k;
          if (lin >= k0 && lin - k0 < m) {
            slot[lin - k0] = pos++;
          }
        }
      }
    }
  }
}


// One frame must fit in a step's output (per-revolution publishing); per step, the rays of one
// firing instant, which no step can split (a flash frame, a custom list's rays of one time
// offset); an organised cloud has every pixel of every return.
static int check_frame(const lidar_desc_t* d, const lidar_model_t* m, err_msg_t* msg) {
  if (!d->max_frame_bytes) {
    return 0;
  }
  const char* pfield = d->pattern_field ? d->pattern_field : "lidar";
  double rays = d->publish_per_step ? instant_rays(&d->pattern) : frame_rays(&d->pattern);
  uint32_t step = m->points.layout.point_step;
  double bytes = rays * m->boundret * step + 512.0;
  const char* reduce = d->frame_field ? d->frame_field : pfield;
  unsigned long long limit = (unsigned long long)d->max_frame_bytes;
  if (bytes <= (double)d->max_frame_bytes) {
    return 0;
  }
  if (d->publish_per_step) {
    return err_set(msg, ERR_INVAL, "%s: %.0f rays fire at one instant; x %u returns x %u "
                   "bytes (%.4g bytes) they exceed the largest step output (%llu bytes), "
                   "and no step can split them; reduce %s, the returns or the fields",
                   pfield, rays, m->boundret, step, bytes, limit, reduce);
  }
  return err_set(msg, ERR_INVAL, "%s: one frame of %.0f rays x %u returns x %u bytes "
                 "(%.4g bytes) exceeds the largest step output (%llu bytes); reduce %s, "
                 "the returns or the fields, or publish per step",
                 pfield, rays, m->boundret, step, bytes, limit, reduce);
}


int lidar_model_init(lidar_model_t* out, lidar_desc_t* d, err_msg_t* msg) {
  // the configuration, validated
  lidar_model_t m;
  memset(&m, 0, sizeof m);
  int rc;
  if (d->pattern.nray == 0) {
    return err_set(msg, ERR_INVAL, "lidar: a scan pattern is required (spinning, vlp16, ouster, "
                   "bpearl, hdl64e, flash, custom or livox)");
  }
  if ((rc = lidar_desc_check(d, msg)) < 0 ||
      (rc = lidar_returns_init(&m.ret, &d->returns, msg)) < 0 ||
      (rc = lidar_noise_angle_init(&m.angle, &d->angle_noise, "lidar.angle_noise", msg)) < 0) {
    return rc;
  }
  m.maxret = lidar_returns_max(&m.ret);
  lidar_points_desc_t pd = {.layout = d->layout, .fields = d->fields, .nfield = d->nfield,
                            .misses = d->misses, .world_frame = d->world_frame,
                            .maxret = m.maxret, .pattern = &d->pattern};
  if ((rc = lidar_points_init(&m.points, &pd, msg)) < 0) {
    return rc;
  }
  m.world_frame = d->world_frame ? 1 : 0;
  m.per_step = d->publish_per_step ? 1 : 0;
  m.has_start_time = d->has_start_time ? 1 : 0;
  m.start_time = d->start_time;
  m.see_own_body = d->see_own_body ? 1 : 0;
  m.nexclude_body = d->nexclude_body;
  if (d->nexclude_body) {
    memcpy(m.exclude_bodies, d->exclude_bodies, d->nexclude_body * sizeof(uint32_t));
  }
  m.group_mask = d->group_mask;

  // returns per ray, and what the output bounds count
  m.boundret = m.ret.mode == LIDAR_RETURN_ALL && !m.points.organised ? 1 : m.maxret;
  if ((rc = check_frame(d, &m, msg)) < 0) {
    lidar_points_close(&m.points);
    return rc;
  }
  if (!m.per_step) {
    // the buffer of a frame: every return of every ray, but never more points than a step's
    // output may hold (RETURN_ALL's bound counts one return a ray: a sweep whose points pass
    // the output's bytes refuses the step as they come, so more room would never be used)
    uint32_t step = m.points.layout.point_step;
    double fp = frame_rays(&d->pattern) * m.maxret;
    double most = (double)(LIDAR_MAX_CLOUD_BYTES / step);
    if (d->max_frame_bytes > 512 && (double)((d->max_frame_bytes - 512) / step) < most) {
      most = (double)((d->max_frame_bytes - 512) / step);
    }
    m.frame_points = fp < most ? (size_t)fp : (size_t)most;
  }

  // what the pipeline does: rows of world rays, the trace order, chunks and batches
  m.rows = m.world_frame || m.points.has_normal || m.ret.depth > 1;
  m.lean_returns = m.ret.depth == 1 && m.maxret == 1 && m.points.lean;
  uint32_t K = d->pattern.nray;
  int tiles = lidar_model_tiled(K);
  m.regroup = K > 1 && K < LIDAR_REGROUP_BELOW;
  m.chunk = tiles && (size_t)LIDAR_TILE_GROUPS * K > LIDAR_CHUNK ? (size_t)LIDAR_TILE_GROUPS * K
                                                                 : LIDAR_CHUNK;
  size_t batch = BATCH_RETURNS / m.maxret;
  m.batch = (batch < m.chunk ? m.chunk : batch) / m.chunk * m.chunk;
  if (tiles) {
    uint32_t* slot = mem_alloc(m.chunk * sizeof *slot);
    if (!slot) {
      lidar_points_close(&m.points);
      return err_set(msg, ERR_NOMEM, "lidar: out of memory for its tiles");
    }
    lidar_model_tile_slots(K, 0, m.chunk, slot);
    m.tile_slot = slot;
    if ((rc = lidar_sweep_lanes_init(&m.lanes, &d->pattern, slot, m.chunk, msg)) < 0) {
      mem_free(slot);
      lidar_points_close(&m.points);
      return rc;
    }
  }

  // the pattern moves in last: nothing can fail any more
  m.pat = d->pattern;
  m.origin_reach = lidar_pattern_origin_reach(&m.pat);
  memset(&d->pattern, 0, sizeof d->pattern);
  *out = m;
  return 0;
}


void lidar_model_close(lidar_model_t* m) {
  lidar_pattern_close(&m->pat);
  lidar_points_close(&m->points);
  mem_free(m->tile_slot);
  m->tile_slot = NULL;
  lidar_sweep_lanes_close(&m->lanes);
}
