// SPDX-License-Identifier: MIT
// data.c: a lidar's data (data.h): its scratch, and the buffers of its clouds: taken for a new
// sweep (a spare one when its readers have let it go), grown only while nobody reads it, given
// back when far too large.
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
  d->returns = mem_alloc(batch * m->maxret * sizeof *d->returns);
  d->nret = mem_alloc(batch * sizeof *d->nret);
  d->slot = mem_alloc(batch * sizeof *d->slot);
  d->chunk_points = mem_alloc((batch / m->chunk + 1) * sizeof *d->chunk_points);
  d->excluded_cap = 16;
  d->excluded = mem_alloc(d->excluded_cap * sizeof *d->excluded);
  d->horizon = m->ret.depth == 1 ? mem_alloc(sizeof *d->horizon) : NULL;
  if (!d->rays || !d->packets || !d->ray_index || !d->pr || !d->returns || !d->nret ||
      !d->slot || !d->chunk_points || !d->excluded || (m->ret.depth == 1 && !d->horizon)) {
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
  mem_free(d->returns);
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


// A buffer for a new cloud of at least `need` points, with room for all of it so that it never
// grows (growing would move the points): a frame's worth when that is known and bounded, else
// the last cloud's size and an eighth more. The spare one when nobody reads it any more and it
// is about that size, else a new one.
static blob_t* take(lidar_data_t* d, const lidar_model_t* m, size_t need) {
  uint32_t step = m->layout.point_step;
  size_t guess = d->last_points + d->last_points / 8 + 4096;
  size_t points = m->frame_points && m->frame_points < guess ? m->frame_points : guess;
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
    size_t cap = blob_cap(b) / step;
    if (cap >= points && cap / 4 <= points) {
      return b;
    }
    blob_release(b);   // the wrong size: its bytes are not needed
  }
  return blob_create(points * step);
}


int lidar_data_reserve(lidar_data_t* d, const lidar_model_t* m, size_t more, err_msg_t* msg) {
  lidar_state_t* s = &d->now;
  size_t need = s->acc_n + more;
  uint32_t step = m->layout.point_step;
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
  }
  size_t cap = blob_cap(s->acc) / step;
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
  if (!blob_is_exclusive(old) || blob_resize(&s->acc, cap * step) != 0) {
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
  uint32_t step = m->layout.point_step;
  if (!s->acc || blob_cap(s->acc) / step / 4 <= target || !blob_is_exclusive(s->acc)) {
    return;
  }
  blob_t* old = s->acc;
  if (blob_resize(&s->acc, target * step) == 0 && d->committed.acc == old) {
    d->committed.acc = s->acc;
  }
}


size_t lidar_data_bytes(const lidar_data_t* d) {
  return (d->committed.acc ? blob_cap(d->committed.acc) : 0) +
         (d->spare[0] ? blob_cap(d->spare[0]) : 0) + (d->spare[1] ? blob_cap(d->spare[1]) : 0);
}
