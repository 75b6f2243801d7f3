// SPDX-License-Identifier: MIT
// data.c: a lidar's data (data.h): its scratch, and the buffers of its clouds (the points, then
// their azimuths when the writer gives them): taken for a new sweep (a spare one when its
// readers have let it go), grown only while nobody reads it, given back when far too large.
#include "lidar/data.h"

#include <string.h>

#include "base/mem.h"


int lidar_data_init(lidar_data_t* d, const lidar_model_t* m, err_msg_t* msg) {
  memset(d, 0, sizeof *d);
  size_t batch = m->batch;
  d->rays = mem_alloc(batch * sizeof *d->rays);
  d->packets = mem_alloc(batch / SCENE_PACKET * sizeof *d->packets);
  d->ray_index = mem_alloc(batch * sizeof *d->ray_index);
  d->pr = mem_alloc(batch * sizeof *d->pr);
  d->local = m->lanes.n ? mem_calloc(batch / SCENE_PACKET, sizeof *d->local) : NULL;
  if (m->lean_returns) {
    d->distance = mem_alloc(batch * sizeof *d->distance);
    d->intensity = mem_alloc(batch * sizeof *d->intensity);
  } else {
    d->returns = mem_alloc(batch * m->maxret * sizeof *d->returns);
  }
  d->nret = mem_alloc(batch * sizeof *d->nret);
  d->slot = mem_alloc(batch * sizeof *d->slot);
  d->chunk_points = mem_alloc((batch / m->chunk + 1) * sizeof *d->chunk_points);
  d->excluded_cap = 16;
  d->excluded = mem_alloc(d->excluded_cap * sizeof *d->excluded);
  d->horizon = m->ret.depth == 1 ? mem_alloc(sizeof *d->horizon) : NULL;
  if (!d->rays || !d->packets || !d->ray_index || !d->pr || (m->lanes.n && !d->local) ||
      (m->lean_returns ? !d->distance || !d->intensity : !d->returns) || !d->nret || !d->slot || !d->chunk_points || !d->excluded ||
      (m->ret.depth == 1 && !d->horizon)) {
    lidar_data_close(d);
    return err_set(msg, ERR_NOMEM, "lidar: out of memory for %zu rays of scratch", batch);
  }
  return 0;
}


void lidar_data_close(lidar_data_t* d) {
  if (d->has_staged && d->staged.acc != d->committed.acc) {
    blob_release(d->staged.acc);
  }
  blob_release(d->committed.acc);
  blob_release(d->spare[0]);
  blob_release(d->spare[1]);
  mem_free(d->rays);
  mem_free(d->packets);
  mem_free(d->ray_index);
  mem_free(d->pr);
  mem_free(d->local);
  mem_free(d->returns);
  mem_free(d->distance);
  mem_free(d->intensity);
  mem_free(d->nret);
  mem_free(d->slot);
  mem_free(d->chunk_points);
  mem_free(d->excluded);
  mem_free(d->horizon);
  memset(d, 0, sizeof *d);
}


void lidar_data_keep_spare(lidar_data_t* d, blob_t* b) {
  if (!b || b == d->spare[0] || b == d->spare[1]) {
    return;
  }
  if (d->spare[0] && d->spare[1]) {
    blob_release(d->spare[0]);
    d->spare[0] = d->spare[1];
    d->spare[1] = NULL;
  }
  d->spare[d->spare[0] ? 1 : 0] = b;
}


// A buffer of n points: their points, then (when the writer gives azimuths) from the next
// multiple of 4 their azimuths (float32).
static size_t acc_bytes(const lidar_model_t* m, size_t n) {
  return n * m->points.layout.point_step + (m->points.azimuths ? 3 + 4 * n : 0);
}


// Points buffer b holds (the inverse of acc_bytes).
static size_t acc_cap(const lidar_model_t* m, const blob_t* b) {
  size_t bytes = blob_cap(b), step = m->points.layout.point_step;
  if (!m->points.azimuths) {
    return bytes / step;
  }
  return bytes < 3 ? 0 : (bytes - 3) / (step + 4);
}


// The azimuths of a buffer of cap points.
static float* acc_azimuths(const lidar_model_t* m, blob_t* b, size_t cap) {
  size_t at = (cap * m->points.layout.point_step + 3) & ~(size_t)3;
  return (float*)(void*)(blob_data(b) + at);
}


// Move the first n azimuths of buffer b from where a buffer of `from` points holds them to
// where one of `to` points does.
static void acc_move_azimuths(const lidar_model_t* m, blob_t* b, size_t from, size_t to,
                              size_t n) {
  if (m->points.azimuths) {
    memmove(acc_azimuths(m, b, to), acc_azimuths(m, b, from), n * sizeof(float));
  }
}


// Resize buffer *b (exclusive) to cap points, its azimuths with it (before shrinking, after
// growing). 0, or -1 when memory is short (nothing changed).
static int acc_resize(const lidar_model_t* m, blob_t** b, size_t cap) {
  size_t old = acc_cap(m, *b), n = cap < old ? cap : old;
  if (cap < old) {
    acc_move_azimuths(m, *b, old, cap, n);
  }
  if (blob_resize(b, acc_bytes(m, cap)) != 0) {
    acc_move_azimuths(m, *b, cap, old, n);
    return -1;
  }
  if (cap > old) {
    acc_move_azimuths(m, *b, old, cap, n);
  }
  return 0;
}


float* lidar_data_azimuths(const lidar_model_t* m, blob_t* b) {
  return acc_azimuths(m, b, acc_cap(m, b));
}


// A buffer for a new cloud of at least `need` points, with room for all of it so that it never
// grows (growing would move the points, and their azimuths behind them): a frame's worth when
// that is known and bounded and either nothing was published yet or the last cloud came near
// it, else the last cloud's size and an eighth more. The spare one when nobody reads it any
// more and it is about that size, else a new one.
static blob_t* take(lidar_data_t* d, const lidar_model_t* m, size_t need) {
  uint32_t step = m->points.layout.point_step;
  size_t guess = d->last_points + d->last_points / 8 + 4096;
  size_t points = m->frame_points && (d->last_points == 0 || m->frame_points < guess)
                      ? m->frame_points
                      : guess;
  points = points > need ? points : need;
  if ((uint64_t)points * step > LIDAR_MAX_CLOUD_BYTES) {
    points = (size_t)(LIDAR_MAX_CLOUD_BYTES / step);
  }
  for (int i = 0; i < 2;) {
    blob_t* b = d->spare[i];
    if (!b || !blob_is_exclusive(b)) {
      i++;
      continue;
    }
    if (i == 0) {
      d->spare[0] = d->spare[1];
    }
    d->spare[1] = NULL;
    size_t cap = acc_cap(m, b);
    if (cap >= points && cap / 4 <= points) {
      return b;
    }
    blob_release(b);   // the wrong size: its bytes are not needed
  }
  return blob_create(acc_bytes(m, points));
}


int lidar_data_reserve(lidar_data_t* d, const lidar_model_t* m, size_t more, err_msg_t* msg) {
  lidar_state_t* s = &d->now;
  size_t need = s->acc_n + more;
  uint32_t step = m->points.layout.point_step;
  int revolution_grid = m->points.organised && !m->per_step;
  if (revolution_grid && need < m->frame_points) {
    need = m->frame_points;   // the pixels of a whole revolution from its first points
  }
  if ((uint64_t)need * step > LIDAR_MAX_CLOUD_BYTES) {
    return err_set(msg, ERR_LIMIT, "lidar: a cloud of %zu points of %u bytes exceeds 4 GiB "
                   "(publish per step, or step more often)", need, step);
  }
  if (!s->acc) {
    s->acc = take(d, m, need);
    s->acc_n = 0;
    if (!s->acc) {
      return err_set(msg, ERR_NOMEM, "lidar: out of memory for %zu points", need);
    }

    // an organised revolution the lidar joined after its start: the pixels of the rays before
    // the cursor never fire, and count as written
    lidar_cursor_t first = lidar_pattern_first_group(&m->pat, s->acc_sweep) * m->pat.nray;
    if (revolution_grid && s->cursor > first) {
      lidar_points_dest_t dest = {.base = blob_data(s->acc), .width = m->points.columns,
                                  .azimuth = lidar_data_azimuths(m, s->acc)};
      lidar_points_fill_unfired(&m->points, &dest, m->frame_points);
      s->acc_n = (size_t)(s->cursor - first) * m->maxret;
    }
  }
  size_t cap = acc_cap(m, s->acc);
  if (need <= cap) {
    return 0;
  }
  cap = cap ? cap : 4096;
  while (cap < need) {
    cap *= 2;
  }
  if ((uint64_t)cap * step > LIDAR_MAX_CLOUD_BYTES) {
    cap = (size_t)(LIDAR_MAX_CLOUD_BYTES / step);
  }

  // The open sweep's buffer is never shared while points are added to it (a published buffer
  // is replaced by another), so it can grow in place; the committed state follows it.
  blob_t* old = s->acc;
  if (!blob_is_exclusive(old) || acc_resize(m, &s->acc, cap) != 0) {
    return err_set(msg, ERR_NOMEM, "lidar: out of memory for %zu points", need);
  }
  if (d->committed.acc == old) {
    d->committed.acc = s->acc;
  }
  return 0;
}


// Growth doubles, so a steady state never shrinks and regrows. Only a buffer nobody else reads.
void lidar_data_trim(lidar_data_t* d, const lidar_model_t* m, size_t keep, size_t typical) {
  lidar_state_t* s = &d->now;
  size_t target = keep > typical ? keep : typical;
  target = target > m->frame_points ? target : m->frame_points;
  target = target > 4096 ? target : 4096;
  if (!s->acc || acc_cap(m, s->acc) / 4 <= target || !blob_is_exclusive(s->acc)) {
    return;
  }
  blob_t* old = s->acc;
  if (acc_resize(m, &s->acc, target) == 0 && d->committed.acc == old) {
    d->committed.acc = s->acc;
  }
}


size_t lidar_data_bytes(const lidar_data_t* d) {
  return (d->committed.acc ? blob_cap(d->committed.acc) : 0) +
         (d->spare[0] ? blob_cap(d->spare[0]) : 0) + (d->spare[1] ? blob_cap(d->spare[1]) : 0);
}
