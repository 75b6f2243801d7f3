// SPDX-License-Identifier: MIT
// points.c: point layouts and packing (see points.h).
#include "lidar/points.h"

#include <math.h>
#include <string.h>

#include "base/text.h"

// Field names and types of the selectable fields, in enum order.
static const struct {
  const char* name;
  sensor_datatype_t type;
  uint32_t count;
} kFields[LIDAR_FIELD_COUNT] = {
    [LIDAR_FIELD_X] = {"x", SENSOR_FLOAT32, 1},
    [LIDAR_FIELD_Y] = {"y", SENSOR_FLOAT32, 1},
    [LIDAR_FIELD_Z] = {"z", SENSOR_FLOAT32, 1},
    [LIDAR_FIELD_INTENSITY] = {"intensity", SENSOR_FLOAT32, 1},
    [LIDAR_FIELD_RING] = {"ring", SENSOR_UINT16, 1},
    [LIDAR_FIELD_AZIMUTH] = {"azimuth", SENSOR_FLOAT32, 1},
    [LIDAR_FIELD_ELEVATION] = {"elevation", SENSOR_FLOAT32, 1},
    [LIDAR_FIELD_DISTANCE] = {"distance", SENSOR_FLOAT32, 1},
    [LIDAR_FIELD_TIME_OFFSET] = {"time_offset", SENSOR_FLOAT32, 1},
    [LIDAR_FIELD_OBJECT_ID] = {"object_id", SENSOR_UINT32, 1},
    [LIDAR_FIELD_LABEL] = {"label", SENSOR_UINT32, 1},
    [LIDAR_FIELD_RETURN_INDEX] = {"return_index", SENSOR_UINT8, 1},
    [LIDAR_FIELD_RETURN_COUNT] = {"return_count", SENSOR_UINT8, 1},
    [LIDAR_FIELD_NORMAL] = {"normal", SENSOR_FLOAT32, 3},
    [LIDAR_FIELD_TIME] = {"time", SENSOR_FLOAT32, 1},
    [LIDAR_FIELD_T_NS] = {"t", SENSOR_UINT32, 1},
    [LIDAR_FIELD_REFLECTIVITY] = {"reflectivity", SENSOR_UINT16, 1},
    [LIDAR_FIELD_AMBIENT] = {"ambient", SENSOR_UINT16, 1},
    [LIDAR_FIELD_RANGE_MM] = {"range", SENSOR_UINT32, 1},
};

#define NSELECTABLE (LIDAR_FIELD_NORMAL + 1)


static void add_field(lidar_layout_t* l, lidar_point_field_t id, uint32_t offset) {
  uint32_t i = l->nfield++;
  l->id[i] = id;
  l->field[i] = (sensor_field_t){.name = kFields[id].name, .offset = offset,
                                 .datatype = kFields[id].type, .count = kFields[id].count};
}


static int layout_build(lidar_layout_t* out_, lidar_layout_preset_t preset,
                        const char* const* names, uint32_t n, err_msg_t* msg);


int lidar_layout_init(lidar_layout_t* l, lidar_layout_preset_t preset, const char* const* names,
                      uint32_t n, err_msg_t* msg) {
  lidar_layout_t out;
  memset(&out, 0, sizeof out);
  int rc = layout_build(&out, preset, names, n, msg);
  if (rc < 0) {
    return rc;
  }
  out.is_xyzi = out.point_step == 16 && out.nfield == 4;
  for (uint32_t i = 0; i < out.nfield && out.is_xyzi; i++) {
    out.is_xyzi = out.id[i] == (lidar_point_field_t)i && out.field[i].offset == 4 * i;
  }
  *l = out;
  return 0;
}


// The fields and offsets of a preset or a name list into out (zeroed).
static int layout_build(lidar_layout_t* out_, lidar_layout_preset_t preset,
                        const char* const* names, uint32_t n, err_msg_t* msg) {
  lidar_layout_t out;
  memset(&out, 0, sizeof out);

  // presets: the drivers' own offsets
  switch (preset) {
    case LIDAR_LAYOUT_VELODYNE:
      add_field(&out, LIDAR_FIELD_X, 0);
      add_field(&out, LIDAR_FIELD_Y, 4);
      add_field(&out, LIDAR_FIELD_Z, 8);
      add_field(&out, LIDAR_FIELD_INTENSITY, 12);
      add_field(&out, LIDAR_FIELD_RING, 16);
      add_field(&out, LIDAR_FIELD_TIME, 18);
      out.point_step = 22;
      *out_ = out;
      return 0;
    case LIDAR_LAYOUT_OUSTER:
      add_field(&out, LIDAR_FIELD_X, 0);
      add_field(&out, LIDAR_FIELD_Y, 4);
      add_field(&out, LIDAR_FIELD_Z, 8);
      add_field(&out, LIDAR_FIELD_INTENSITY, 16);
      add_field(&out, LIDAR_FIELD_T_NS, 20);
      add_field(&out, LIDAR_FIELD_REFLECTIVITY, 24);
      add_field(&out, LIDAR_FIELD_RING, 26);
      add_field(&out, LIDAR_FIELD_AMBIENT, 28);
      add_field(&out, LIDAR_FIELD_RANGE_MM, 32);
      out.point_step = 48;
      *out_ = out;
      return 0;
    case LIDAR_LAYOUT_FIELDS:
      if (n > 0) {
        break;
      }
      __attribute__((fallthrough));   // no names: xyzi
    case LIDAR_LAYOUT_XYZI:
      add_field(&out, LIDAR_FIELD_X, 0);
      add_field(&out, LIDAR_FIELD_Y, 4);
      add_field(&out, LIDAR_FIELD_Z, 8);
      add_field(&out, LIDAR_FIELD_INTENSITY, 12);
      out.point_step = 16;
      *out_ = out;
      return 0;
    default:
      return err_set(msg, ERR_INVAL, "lidar.layout = %d is not a layout preset", (int)preset);
  }

  // named fields, packed in order, each aligned to its element size
  if (n > NSELECTABLE) {
    return err_set(msg, ERR_INVAL, "lidar.fields has %u names; there are %d fields", n,
                   NSELECTABLE);
  }
  uint32_t offset = 0, align = 1;
  for (uint32_t i = 0; i < n; i++) {
    int id = -1;
    for (int f = 0; f < NSELECTABLE; f++) {
      if (names[i] && strcmp(names[i], kFields[f].name) == 0) {
        id = f;
      }
    }
    if (id < 0) {
      // the client's bytes, escaped (replies carry UTF-8 text only) and cut
      char shown[64];
      text_escape(shown, sizeof shown, names[i] ? names[i] : "",
                  names[i] ? strnlen(names[i], 48) : 0);
      return err_set(msg, ERR_INVAL, "lidar.fields[%u] = \"%s\" is not a point field (x y z "
                     "intensity ring azimuth elevation distance time_offset object_id label "
                     "return_index return_count normal)", i, shown);
    }
    for (uint32_t j = 0; j < out.nfield; j++) {
      if (out.id[j] == (lidar_point_field_t)id) {
        return err_set(msg, ERR_INVAL, "lidar.fields[%u] = \"%s\" is listed twice", i, names[i]);
      }
    }
    uint32_t size = sensor_datatype_size(kFields[id].type);
    offset = (offset + size - 1) / size * size;
    add_field(&out, (lidar_point_field_t)id, offset);
    offset += size * kFields[id].count;
    align = size > align ? size : align;
  }
  out.point_step = (offset + align - 1) / align * align;
  *out_ = out;
  return 0;
}


void lidar_layout_describe(const lidar_layout_t* l, sensor_cloud_t* cloud) {
  cloud->nfield = l->nfield;
  memcpy(cloud->fields, l->field, (size_t)l->nfield * sizeof l->field[0]);
  cloud->point_step = l->point_step;
}


//---------------- Packing (x86-64 and every target we build for is little-endian)

static void put_f32(uint8_t* d, double v) {
  float f = (float)v;
  memcpy(d, &f, 4);
}


static void put_u32(uint8_t* d, uint32_t v) { memcpy(d, &v, 4); }


static void put_u16(uint8_t* d, uint32_t v) {
  uint16_t u = v > UINT16_MAX ? UINT16_MAX : (uint16_t)v;
  memcpy(d, &u, 2);
}


static void put_u8(uint8_t* d, uint32_t v) { *d = v > UINT8_MAX ? UINT8_MAX : (uint8_t)v; }


// Round and clamp a non-negative quantity to [0, max]; NaN gives 0.
static uint32_t to_uint(double v, double max) {
  if (!(v > 0.0)) {
    return 0;
  }
  return v >= max ? (uint32_t)max : (uint32_t)llround(v);
}


void lidar_points_write(const lidar_layout_t* l, const lidar_point_t* pt, uint8_t* dest) {
  // the plain x y z intensity layout, the common case, packed directly
  if (l->is_xyzi) {
    float f[4] = {(float)pt->xyz[0], (float)pt->xyz[1], (float)pt->xyz[2], (float)pt->intensity};
    memcpy(dest, f, sizeof f);
    return;
  }

  // padding bytes are zero: clouds are compared and hashed byte for byte
  memset(dest, 0, l->point_step);
  for (uint32_t i = 0; i < l->nfield; i++) {
    uint8_t* d = dest + l->field[i].offset;
    switch (l->id[i]) {
      case LIDAR_FIELD_X:
        put_f32(d, pt->xyz[0]);
        break;
      case LIDAR_FIELD_Y:
        put_f32(d, pt->xyz[1]);
        break;
      case LIDAR_FIELD_Z:
        put_f32(d, pt->xyz[2]);
        break;
      case LIDAR_FIELD_INTENSITY:
        put_f32(d, pt->intensity);
        break;
      case LIDAR_FIELD_RING:
        put_u16(d, pt->ring);
        break;
      case LIDAR_FIELD_AZIMUTH:
        put_f32(d, pt->azimuth);
        break;
      case LIDAR_FIELD_ELEVATION:
        put_f32(d, pt->elevation);
        break;
      case LIDAR_FIELD_DISTANCE:
        put_f32(d, pt->distance);
        break;
      case LIDAR_FIELD_TIME_OFFSET:
      case LIDAR_FIELD_TIME:
        put_f32(d, pt->time_offset);
        break;
      case LIDAR_FIELD_OBJECT_ID:
        put_u32(d, pt->object_id);
        break;
      case LIDAR_FIELD_LABEL:
        put_u32(d, pt->label);
        break;
      case LIDAR_FIELD_RETURN_INDEX:
        put_u8(d, pt->return_index);
        break;
      case LIDAR_FIELD_RETURN_COUNT:
        put_u8(d, pt->return_count);
        break;
      case LIDAR_FIELD_NORMAL:
        put_f32(d, pt->normal[0]);
        put_f32(d + 4, pt->normal[1]);
        put_f32(d + 8, pt->normal[2]);
        break;
      case LIDAR_FIELD_T_NS:
        put_u32(d, to_uint(pt->time_offset * 1e9, UINT32_MAX));
        break;
      case LIDAR_FIELD_REFLECTIVITY:
        put_u16(d, to_uint(100.0 * M_PI * pt->intensity, UINT16_MAX));
        break;
      case LIDAR_FIELD_AMBIENT:
        put_u16(d, 0);
        break;
      case LIDAR_FIELD_RANGE_MM:
        put_u32(d, to_uint((pt->distance + pt->range_offset) * 1e3, UINT32_MAX));
        break;
      default:
        break;
    }
  }
}
