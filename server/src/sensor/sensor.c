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

void sensor_out_truncate(sensor_out_t* out, uint32_t n) {
  while (out->n > n) {
    sensor_record_t* r = &out->rec[--out->n];
    if (r->kind == SENSOR_REC_CLOUD) {
      mem_free(r->u.cloud.data);
      r->u.cloud.data = NULL;
    }
  }
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
  size_t n = size ? (size_t)size : 1;
  uint8_t* data = zero ? mem_calloc(n, 1) : mem_alloc(n);
  if (!data) {
    return err_set(msg, ERR_NOMEM, "out of memory for a point cloud of %u points", count);
  }
  mem_free(cloud->data);
  cloud->data = data;
  cloud->count = count;
  return 0;
}


int sensor_cloud_alloc(sensor_cloud_t* cloud, uint32_t count, err_msg_t* msg) {
  return cloud_alloc(cloud, count, 1, msg);
}


int sensor_cloud_alloc_unset(sensor_cloud_t* cloud, uint32_t count, err_msg_t* msg) {
  return cloud_alloc(cloud, count, 0, msg);
}
