// SPDX-License-Identifier: MIT
// points.c: point layouts, packing, and the writer of a chunk's points (see points.h).
#include "lidar/points.h"

#include <math.h>
#include <string.h>

#include "base/mem.h"
#include "base/simd.h"
#include "base/text.h"
#include "base/xform.h"

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


void lidar_points_pack(const lidar_layout_t* l, const lidar_point_t* pt, uint8_t* dest) {
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


//---------------- The writer

int lidar_points_init(lidar_points_t* w, const lidar_points_desc_t* d, err_msg_t* msg) {
  lidar_points_t out;
  memset(&out, 0, sizeof out);
  int rc = lidar_layout_init(&out.layout, d->layout, d->fields, d->nfield, msg);
  if (rc < 0) {
    return rc;
  }
  const lidar_pattern_t* p = d->pattern;
  out.misses = d->misses;
  out.world_frame = d->world_frame ? 1 : 0;
  for (uint32_t i = 0; i < out.layout.nfield; i++) {
    out.has_normal |= out.layout.id[i] == LIDAR_FIELD_NORMAL;
  }
  out.lean = out.layout.is_xyzi && !out.world_frame && out.misses == LIDAR_MISS_REMOVE;
  out.nray = p->nray;
  out.maxret = d->maxret ? d->maxret : 1;
  out.range_offset = p->beam_origin_radius;

  // rings: by elevation for the Velodyne point type (its driver's numbering), else the
  // pattern's channels
  out.ring = mem_alloc((size_t)p->nray * sizeof *out.ring);
  if (!out.ring) {
    return err_set(msg, ERR_NOMEM, "lidar: out of memory for the rings of %u rays", p->nray);
  }
  if (d->layout == LIDAR_LAYOUT_VELODYNE) {
    if ((rc = lidar_pattern_elevation_rings(p, out.ring, msg)) < 0) {
      lidar_points_close(&out);
      return rc;
    }
  } else {
    memcpy(out.ring, p->ring, (size_t)p->nray * sizeof *out.ring);
  }

  // the organised Ouster cloud: a pixel per beam and column (each column fires at once), the
  // beams destaggered by their azimuth angles
  out.organised = d->layout == LIDAR_LAYOUT_OUSTER && p->kind == LIDAR_PATTERN_OUSTER &&
                  out.misses != LIDAR_MISS_REMOVE;
  if (out.organised) {
    out.columns = (uint32_t)p->groups_per_sweep;
    out.shift = mem_alloc((size_t)p->nray * sizeof *out.shift);
    if (!out.shift) {
      lidar_points_close(&out);
      return err_set(msg, ERR_NOMEM, "lidar: out of memory for %u beams", p->nray);
    }
    lidar_pattern_ouster_pixel_shifts(p, out.shift);
  }

  // for the encoders: the aimed azimuths (sensor frame, records that have them) and the stride
  // of the points' channels: with one point a ray, a spinning lidar's ray has its predecessor
  // in its channel a group (a column) back; an organised row runs along one beam. Not for the
  // patterns whose group is not a column (a flash frame, a custom list, a Livox ray): a stride
  // of a whole frame would predict nothing, and the encoder finds a better one itself.
  out.azimuths = !out.world_frame && !out.lean;
  int columns = p->kind == LIDAR_PATTERN_SPINNING || p->kind == LIDAR_PATTERN_VLP16 ||
                p->kind == LIDAR_PATTERN_OUSTER || p->kind == LIDAR_PATTERN_BPEARL ||
                p->kind == LIDAR_PATTERN_HDL64E;
  if (out.organised) {
    out.stride = 1;
  } else if (columns && out.maxret == 1 && out.misses != LIDAR_MISS_REMOVE) {
    out.stride = p->nray;
  }
  *w = out;
  return 0;
}


void lidar_points_close(lidar_points_t* w) {
  if (!w) {
    return;
  }
  mem_free(w->ring);
  mem_free(w->shift);
  memset(w, 0, sizeof *w);
}


void lidar_points_shape(const lidar_points_t* w, uint32_t count, uint32_t* height,
                        uint32_t* width) {
  if (w->organised) {
    *height = w->nray * w->maxret;
    *width = count / *height;
  } else {
    *height = 1;
    *width = count;
  }
}


// The sum of nret[0, n), n <= COUNT_BLOCK, across SIMD lanes (its forms: base/simd.h): in 32
// bits, which a block cannot overflow (summed into a size_t lane by lane, the bytes were
// widened twice, about 2 instructions a ray).
#define COUNT_BLOCK 4096
static inline SIMD_BODY void sum_bytes(const uint8_t* nret, size_t n, size_t* sum) {
  uint32_t s = 0;
  for (size_t i = 0; i < n; i++) {
    s += nret[i];
  }
  *sum = s;
}

SIMD_FORMS(sum_bytes, (const uint8_t* nret, size_t n, size_t* sum), (nret, n, sum))


size_t lidar_points_count(const lidar_points_t* w, const uint8_t* nret, size_t n) {
  if (w->organised) {
    return n * w->maxret;
  }
  size_t np = 0;
  if (w->misses == LIDAR_MISS_REMOVE) {
    for (size_t b = 0; b < n; b += COUNT_BLOCK) {
      size_t s;
      SIMD_CALL(sum_bytes, (nret + b, n - b < COUNT_BLOCK ? n - b : COUNT_BLOCK, &s));
      np += s;
    }
    return np;
  }
  for (size_t i = 0; i < n; i++) {
    np += nret[i] ? nret[i] : 1u;
  }
  return np;
}


// A miss kept: at the origin or NaN (distance too), intensity 0 and no return.
static void as_miss(const lidar_points_t* w, lidar_point_t* pt) {
  double v = w->misses == LIDAR_MISS_NAN ? NAN : 0.0;
  pt->xyz[0] = pt->xyz[1] = pt->xyz[2] = v;
  pt->distance = v;
  pt->intensity = 0.0;
  pt->normal[0] = pt->normal[1] = pt->normal[2] = 0.0;
  pt->object_id = pt->label = pt->return_index = pt->return_count = 0;
}


// The default cloud (x y z intensity of the returns, sensor frame, misses removed) packed from
// lean pattern records without a lidar_point_t per point: the same bytes as the general path,
// about 5 % of a revolution of an OS1-128 faster.
// The chunk's arrays are read through locals: the stores through dest may alias anything, and
// the compiler would load each pointer again after every point.
static void write_lean(const lidar_points_t* w, const lidar_points_chunk_t* c, uint8_t* dest) {
  const lidar_pattern_ray_t* rays = c->rays;
  const scene_packet_t* local = c->local;
  const lidar_sweep_lanes_t* lanes = local ? NULL : c->lanes;
  lidar_pattern_group_t gr[SCENE_PACKET];   // a lane chunk's groups (at most SCENE_PACKET)
  double radius = 0.0;
  if (lanes) {
    radius = c->pattern->beam_origin_radius;
    for (uint32_t g = 0; g < lanes->ngroup; g++) {
      lidar_pattern_group(c->pattern, c->first / c->pattern->nray + g, &gr[g]);
    }
  }
  const uint32_t* slot = c->slot;
  const uint8_t* nret = c->nret;
  const lidar_return_t* returns = c->returns;
  const double* distance = c->distance;
  const double* intensity = c->intensity;
  const size_t maxret = w->maxret, nc = c->n;
  for (size_t j = 0; j < nc; j++) {
    size_t i = slot[j];
    uint32_t n = nret[i];
    if (n == 0) {
      continue;
    }
    double o[3], dir[3];
    if (lanes) {
      lidar_sweep_lane_aim(lanes, gr, radius, i, dir, o);
    } else if (local) {
      const scene_packet_t* pk = &local[i / SCENE_PACKET];
      const size_t l = i % SCENE_PACKET;
      o[0] = pk->ox[l], o[1] = pk->oy[l], o[2] = pk->oz[l];
      dir[0] = pk->dx[l], dir[1] = pk->dy[l], dir[2] = pk->dz[l];
    } else {
      memcpy(o, rays[j].origin, sizeof o);
      memcpy(dir, rays[j].dir, sizeof dir);
    }
    if (distance) {
      const double x = distance[i];
      float f[4] = {(float)(o[0] + dir[0] * x), (float)(o[1] + dir[1] * x),
                    (float)(o[2] + dir[2] * x), (float)intensity[i]};
      memcpy(dest, f, sizeof f);
      dest += sizeof f;
      continue;
    }
    const lidar_return_t* r = &returns[i * maxret];
    for (uint32_t k = 0; k < n; k++, r++) {
      double x = r->distance;
      float f[4] = {(float)(o[0] + dir[0] * x), (float)(o[1] + dir[1] * x),
                    (float)(o[2] + dir[2] * x), (float)r->intensity};
      memcpy(dest, f, sizeof f);
      dest += sizeof f;
    }
  }
}


// Four floats (GCC's and Clang's vector extensions: at any ISA) and a shuffle of two of them
// (indices 0-3: a's elements, 4-7: b's).
typedef float f4_t __attribute__((vector_size(16)));
#if defined(__clang__)
#define F4_SHUFFLE(a, b, i, j, k, l) __builtin_shufflevector((a), (b), i, j, k, l)
#else
typedef int32_t i4_t __attribute__((vector_size(16)));
#define F4_SHUFFLE(a, b, i, j, k, l) __builtin_shuffle((a), (b), (i4_t){i, j, k, l})
#endif


// The lean points of a chunk of n rays in packets (one return a ray, its distance x[i] and
// intensity in[i], 0 for a ray without one), every trace position's whether it has a return or
// not (write_lean_packets keeps those of the rays that have one): the operations of write_lean
// on the same inputs, the lanes of a packet at once. From the lanes' tables (has_lanes: aimed
// again as write_lean does, at the groups' rotors cr, sr) or from the rays in the sensor frame
// (local). Its forms: base/simd.h.
static inline SIMD_BODY void lean_packets(const lidar_sweep_lanes_t* restrict lanes,
                                          const double* cr, const double* sr, double radius,
                                          const scene_packet_t* restrict local,
                                          const double* restrict x, const double* restrict in,
                                          size_t n, float (*restrict pts)[4],
                                          const int has_lanes, const int has_radius) {
  double gc[SCENE_PACKET], gs[SCENE_PACKET];   // copies: the stores cannot change them
  memcpy(gc, cr, sizeof gc);
  memcpy(gs, sr, sizeof gs);
  for (size_t q = 0; q < n; q += SCENE_PACKET) {
    const scene_packet_t* pk = has_lanes ? NULL : &local[q / SCENE_PACKET];
    // the points' coordinates in lanes, then each point's four values together (so that the
    // compiler vectorises both)
    float px[SCENE_PACKET], py[SCENE_PACKET], pz[SCENE_PACKET], pi[SCENE_PACKET];
    for (unsigned k = 0; k < SCENE_PACKET; k++) {
      const size_t i = q + k;
      double o[3], dir[3];
      if (has_lanes) {
        lidar_pattern_aim(gc[k], gs[k], lanes->ce[i], lanes->se[i], lanes->coff[i],
                          lanes->soff[i], lanes->cdt[i], lanes->sdt[i], 0.0, 0, radius,
                          has_radius, dir, o);
      } else {
        o[0] = pk->ox[k], o[1] = pk->oy[k], o[2] = pk->oz[k];
        dir[0] = pk->dx[k], dir[1] = pk->dy[k], dir[2] = pk->dz[k];
      }
      px[k] = (float)(o[0] + dir[0] * x[i]);
      py[k] = (float)(o[1] + dir[1] * x[i]);
      pz[k] = (float)(o[2] + dir[2] * x[i]);
      pi[k] = (float)in[i];
    }
    for (unsigned k = 0; k < SCENE_PACKET; k += 4) {
      // four points' x, y, z and intensity to the four points (a 4 x 4 transpose in 8
      // shuffles; element by element, the compiler's shuffles took most of the kernel's time)
      f4_t x4, y4, z4, i4;
      memcpy(&x4, &px[k], sizeof x4);
      memcpy(&y4, &py[k], sizeof y4);
      memcpy(&z4, &pz[k], sizeof z4);
      memcpy(&i4, &pi[k], sizeof i4);
      const f4_t xy01 = F4_SHUFFLE(x4, y4, 0, 4, 1, 5), xy23 = F4_SHUFFLE(x4, y4, 2, 6, 3, 7);
      const f4_t zi01 = F4_SHUFFLE(z4, i4, 0, 4, 1, 5), zi23 = F4_SHUFFLE(z4, i4, 2, 6, 3, 7);
      const f4_t p0 = F4_SHUFFLE(xy01, zi01, 0, 1, 4, 5), p1 = F4_SHUFFLE(xy01, zi01, 2, 3, 6, 7);
      const f4_t p2 = F4_SHUFFLE(xy23, zi23, 0, 1, 4, 5), p3 = F4_SHUFFLE(xy23, zi23, 2, 3, 6, 7);
      memcpy(pts[q + k], &p0, sizeof p0);
      memcpy(pts[q + k + 1], &p1, sizeof p1);
      memcpy(pts[q + k + 2], &p2, sizeof p2);
      memcpy(pts[q + k + 3], &p3, sizeof p3);
    }
  }
}

#define LEAN_PARAMS                                                                           \
  (const lidar_sweep_lanes_t* restrict lanes, const double* cr, const double* sr, double radius, \
   const scene_packet_t* restrict local, const double* restrict x, const double* restrict in,  \
   size_t n, float (*restrict pts)[4])
#define LEAN_ARGS (lanes, cr, sr, radius, local, x, in, n, pts)
#define LEAN_KERNEL(name, has_lanes, has_radius)                                        \
  static inline SIMD_BODY void name LEAN_PARAMS {                                       \
    lean_packets(lanes, cr, sr, radius, local, x, in, n, pts, has_lanes, has_radius);   \
  }                                                                                     \
  SIMD_FORMS(name, LEAN_PARAMS, LEAN_ARGS)
LEAN_KERNEL(lean_local, 0, 0)
LEAN_KERNEL(lean_aimed, 1, 0)
LEAN_KERNEL(lean_aimed_radius, 1, 1)


// write_lean for a chunk of whole packets (rays from the lanes' tables or in the sensor frame,
// in trace order) with one return a ray: every ray's point in trace order first (lean_packets,
// across the lanes: one by one in firing order, aiming and packing each ray cost twice the
// instructions), then those of the rays with a return in firing order. The returns' distances
// and intensities are read from c->distance, or out of c->returns.
#define LEAN_PACKETS_MAX 1024u    // rays of a chunk for write_lean_packets (LIDAR_CHUNK_MAX)

static void write_lean_packets(const lidar_points_chunk_t* c, uint8_t* dest) {
  float pts[LEAN_PACKETS_MAX][4];
  const size_t nc = c->n;
  const uint32_t* slot = c->slot;
  const uint8_t* nret = c->nret;
  const double* x = c->distance;
  const double* in = c->intensity;
  double xs[LEAN_PACKETS_MAX], is[LEAN_PACKETS_MAX];
  if (!x) {
    for (size_t i = 0; i < nc; i++) {
      xs[i] = nret[i] ? c->returns[i].distance : 0.0;
      is[i] = nret[i] ? c->returns[i].intensity : 0.0;
    }
    x = xs;
    in = is;
  }
  const lidar_sweep_lanes_t* lanes = c->local ? NULL : c->lanes;
  double cr[SCENE_PACKET] = {0}, sr[SCENE_PACKET] = {0}, radius = 0.0;
  if (lanes) {
    lidar_pattern_group_t gr[SCENE_PACKET];
    for (uint32_t g = 0; g < lanes->ngroup; g++) {
      lidar_pattern_group(c->pattern, c->first / c->pattern->nray + g, &gr[g]);
    }
    for (unsigned k = 0; k < SCENE_PACKET; k++) {
      cr[k] = gr[lanes->group[k]].cr;
      sr[k] = gr[lanes->group[k]].sr;
    }
    radius = c->pattern->beam_origin_radius;
  }
  if (!lanes) {
    SIMD_CALL(lean_local, (NULL, cr, sr, radius, c->local, x, in, nc, pts));
  } else if (radius > 0.0) {
    SIMD_CALL(lean_aimed_radius, (lanes, cr, sr, radius, NULL, x, in, nc, pts));
  } else {
    SIMD_CALL(lean_aimed, (lanes, cr, sr, radius, NULL, x, in, nc, pts));
  }
  for (size_t j = 0; j < nc; j++) {
    const size_t i = slot[j];
    if (nret[i]) {
      memcpy(dest, pts[i], sizeof pts[i]);
      dest += sizeof pts[i];
    }
  }
}


// Point p of the cloud at d, and its azimuth.
static inline void put(const lidar_points_t* w, const lidar_points_dest_t* d, size_t p,
                       const lidar_point_t* pt) {
  lidar_points_pack(&w->layout, pt, d->base + p * w->layout.point_step);
  if (w->azimuths) {
    d->azimuth[p] = (float)pt->azimuth;
  }
}


void lidar_points_write(const lidar_points_t* w, const lidar_points_chunk_t* c,
                        const lidar_points_dest_t* d) {
  if (w->lean && w->maxret == 1 && (c->local || c->lanes) && c->n <= LEAN_PACKETS_MAX &&
      c->n % SCENE_PACKET == 0) {
    write_lean_packets(c, d->base + d->at * w->layout.point_step);
    return;
  }
  if (w->lean) {
    write_lean(w, c, d->base + d->at * w->layout.point_step);
    return;
  }
  size_t at = d->at;
  const int own_offsets = isnan(c->tau_origin);
  lidar_sweep_pose_t pose;   // for normals in the sensor frame: the sensor's pose at ray time
  if (c->fixed) {
    pose = *c->fixed;
  } else {
    pose.s = -1.0;
  }
  for (size_t j = 0; j < c->n; j++) {
    size_t i = c->slot[j];
    uint32_t n = c->nret[i];
    if (n == 0 && w->misses == LIDAR_MISS_REMOVE) {
      continue;
    }
    const lidar_pattern_ray_t* mt = &c->rays[j];
    const scene_ray_t* wr = c->world ? &c->world[i] : NULL;   // read in the world frame and
                                                             //   for normals only
    lidar_point_t pt;
    memset(&pt, 0, sizeof pt);
    pt.time_offset = own_offsets ? mt->time_offset : mt->time - c->tau_origin;
    pt.azimuth = (float)mt->azimuth;
    pt.elevation = (float)mt->elevation;
    uint32_t k = (uint32_t)((c->first + j) % w->nray);
    pt.ring = w->ring[k];

    // where its points go: the next ones, or its pixels (a row per return, each `apart`)
    size_t p0 = at, apart = 1;
    if (w->organised) {
      uint64_t col = (c->first + j) / w->nray - d->group0;
      if (d->destagger) {
        int64_t s = (int64_t)w->shift[k] % (int64_t)d->width;
        col = (col + (uint64_t)(s < 0 ? s + (int64_t)d->width : s)) % d->width;
      }
      apart = (size_t)w->nray * d->width;
      p0 = (size_t)k * d->width + (size_t)col;
    }

    // a miss, kept; organised, every return the ray lacks
    if (n == 0 || w->organised) {
      as_miss(w, &pt);
      for (uint32_t r = w->organised ? n : 0; r < (w->organised ? w->maxret : 1u); r++) {
        put(w, d, p0 + r * apart, &pt);
      }
      if (n == 0) {
        at += w->organised ? 0 : 1;
        continue;
      }
    }

    // each return along the emission direction, in the chosen frame
    double qc[4] = {1.0, 0.0, 0.0, 0.0};
    if (w->has_normal && !w->world_frame && n) {
      if (!c->fixed && wr->time != pose.s) {
        lidar_sweep_pose(c->body, c->mount, wr->time, &pose);
      }
      xform_quat_conj(pose.pose.q, qc);
    }
    for (uint32_t r = 0; r < n; r++) {
      const lidar_return_t* ret = &c->returns[i * w->maxret + r];
      double x = ret->distance;
      for (int a = 0; a < 3; a++) {
        pt.xyz[a] = w->world_frame ? wr->origin[a] + wr->dir[a] * x
                                   : mt->origin[a] + mt->dir[a] * x;
      }
      if (!w->has_normal) {
        // not packed
      } else if (w->world_frame) {
        memcpy(pt.normal, ret->normal, sizeof pt.normal);
      } else {
        xform_quat_rotate(qc, ret->normal, pt.normal);
      }
      pt.distance = x;
      pt.range_offset = w->range_offset;
      pt.intensity = ret->intensity;
      pt.object_id = ret->object_id;
      pt.label = ret->label;
      pt.return_index = ret->index;
      pt.return_count = ret->count;
      put(w, d, p0 + r * apart, &pt);
      at += w->organised ? 0 : 1;
    }
  }
}


void lidar_points_fill_unfired(const lidar_points_t* w, const lidar_points_dest_t* d,
                               size_t count) {
  lidar_point_t pt;
  memset(&pt, 0, sizeof pt);
  as_miss(w, &pt);
  pt.azimuth = NAN;
  for (size_t p = 0; p < count; p++) {
    pt.ring = w->ring[(p / d->width) % w->nray];
    put(w, d, p, &pt);
  }
}
