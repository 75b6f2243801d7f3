// SPDX-License-Identifier: MIT
// sensor.c: the output list of a step (see sensor.h).
#include "sensor/sensor.h"

#include <string.h>

#include "base/mem.h"

uint32_t sensor_datatype_size(sensor_datatype_t t) {
  switch (t) {
    case SENSOR_INT8:
    case SENSOR_UINT8:
      return 1;
    case SENSOR_INT16:
    case SENSOR_UINT16:
      return 2;
    case SENSOR_FLOAT64:
      return 8;
    default:
      return 4;
  }
}

sensor_record_t* sensor_out_push(sensor_out_t* out, uint32_t sensor_id,
                                 sensor_record_kind_t kind) {
  if (out->n == out->cap) {
    uint32_t cap = out->cap ? out->cap * 2 : 8;
    sensor_record_t* rec = mem_realloc(out->rec, (size_t)cap * sizeof(*rec));
    if (!rec) {
      return NULL;
    }
    out->rec = rec;
    out->cap = cap;
  }
  sensor_record_t* r = &out->rec[out->n++];
  memset(r, 0, sizeof(*r));
  r->sensor_id = sensor_id;
  r->kind = kind;
  return r;
}

void sensor_record_release(sensor_record_t* r) {
  if (r && r->kind == SENSOR_REC_CLOUD) {
    blob_release(r->u.cloud.blob);
    r->u.cloud.blob = NULL;
    r->u.cloud.data = NULL;
  }
}


void sensor_record_copy(sensor_record_t* dst, const sensor_record_t* src) {
  *dst = *src;
  if (src->kind == SENSOR_REC_CLOUD && src->u.cloud.blob) {
    blob_retain(src->u.cloud.blob);
  }
}


void sensor_out_truncate(sensor_out_t* out, uint32_t n) {
  while (out->n > n) {
    sensor_record_release(&out->rec[--out->n]);
  }
}


int sensor_out_move(sensor_out_t* src, sensor_out_t* dst) {
  if (src->n == 0) {
    return 0;
  }
  if (dst->n == 0 && dst->cap <= src->cap) {
    // the usual case: dst takes src's array whole
    sensor_record_t* rec = dst->rec;
    uint32_t cap = dst->cap;
    *dst = *src;
    src->rec = rec;
    src->cap = cap;
    src->n = 0;
    return 0;
  }
  if ((uint64_t)dst->n + src->n > UINT32_MAX / 2) {
    return ERR_NOMEM;
  }
  if (dst->n + src->n > dst->cap) {
    uint32_t cap = dst->n + src->n;
    sensor_record_t* rec = mem_realloc(dst->rec, (size_t)cap * sizeof(*rec));
    if (!rec) {
      return ERR_NOMEM;
    }
    dst->rec = rec;
    dst->cap = cap;
  }
  memcpy(dst->rec + dst->n, src->rec, (size_t)src->n * sizeof(*src->rec));
  dst->n += src->n;
  src->n = 0;
  return 0;
}

void sensor_out_clear(sensor_out_t* out) { sensor_out_truncate(out, 0); }

void sensor_out_free(sensor_out_t* out) {
  sensor_out_clear(out);
  mem_free(out->rec);
  out->rec = NULL;
  out->cap = 0;
}

static int cloud_alloc(sensor_cloud_t* cloud, uint32_t count, int zero, err_msg_t* msg) {
  uint64_t size = (uint64_t)count * cloud->point_step;
  if (size > UINT32_MAX) {
    return err_set(msg, ERR_LIMIT, "point cloud of %u points of %u bytes exceeds 4 GiB", count,
                   cloud->point_step);
  }
  blob_t* b = blob_create(size ? (size_t)size : 1);
  if (!b) {
    return err_set(msg, ERR_NOMEM, "out of memory for a point cloud of %u points", count);
  }
  if (zero) {
    memset(blob_data(b), 0, blob_cap(b));
  }
  blob_release(cloud->blob);
  cloud->blob = b;
  cloud->data = blob_data(b);
  cloud->count = count;
  return 0;
}


int sensor_cloud_share(sensor_cloud_t* cloud, blob_t* blob, size_t offset, uint32_t count,
                       err_msg_t* msg) {
  uint64_t size = (uint64_t)count * cloud->point_step;
  if (size > UINT32_MAX || offset > blob_cap(blob) || size > blob_cap(blob) - offset) {
    return err_set(msg, ERR_LIMIT, "point cloud of %u points of %u bytes exceeds 4 GiB or its "
                   "buffer", count, cloud->point_step);
  }
  blob_retain(blob);
  blob_release(cloud->blob);
  cloud->blob = blob;
  cloud->data = blob_data(blob) + offset;
  cloud->count = count;
  return 0;
}


int sensor_cloud_alloc(sensor_cloud_t* cloud, uint32_t count, err_msg_t* msg) {
  return cloud_alloc(cloud, count, 1, msg);
}


int sensor_cloud_alloc_unset(sensor_cloud_t* cloud, uint32_t count, err_msg_t* msg) {
  return cloud_alloc(cloud, count, 0, msg);
}
