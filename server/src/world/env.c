// SPDX-License-Identifier: MIT
// env.c: the Sensor Environment's entities: geometries, materials, media, settings, bodies,
// objects, joints, introspection. Every call validates all of its input before it changes
// anything, and reserves all memory before the first mutation, so a failure leaves the
// environment exactly as it was. Removal is in env_remove.c; states, steps and raycasts are in
// env_time.c.
#include "world/env.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "base/mem.h"
#include "scene/hfield.h"
#include "scene/prim.h"
#include "world/env_impl.h"


static const char* const kAxis[3] = {"x", "y", "z"};


env_limits_t env_default_limits(void) {
  env_limits_t l = {
      .max_mesh_vertices = 1u << 24,
      .max_mesh_triangles = 1u << 24,
      .max_geometries = 1u << 16,
      .max_materials = 1u << 16,
      .max_media = 1u << 10,
      .max_bodies = 1u << 20,
      .max_objects = 1u << 20,
      .max_joints = 1u << 20,
      .max_sensors = 1u << 10,
      .max_raycast_rays = 1u << 22,
      .max_output_bytes = 64ull << 20,
      .max_dipoles = 1u << 10,
  };
  return l;
}


const env_limits_t* env_get_limits(const env_t* e) {
  return &e->limits;
}


//---------------- Helpers


// Every component finite and at most `bound` in magnitude (unit: for the message).
static int check_vec3(const char* field, const double v[3], double bound, const char* unit,
                      err_msg_t* msg) {
  for (int i = 0; i < 3; i++) {
    if (!isfinite(v[i])) {
      return err_set(msg, ERR_INVAL, "%s.%s = %g is not finite", field, kAxis[i], v[i]);
    }
    if (fabs(v[i]) > bound) {
      return err_set(msg, ERR_INVAL, "%s.%s = %g exceeds %g %s in magnitude", field, kAxis[i],
                     v[i], bound, unit);
    }
  }
  return 0;
}


// Validate a pose (quaternion stored w, x, y, z) and write it with a unit quaternion to dest.
static int check_pose(const char* field, const pose_t* p, pose_t* dest, err_msg_t* msg) {
  static const char* const kQuat[4] = {"w", "x", "y", "z"};
  char sub[96];
  snprintf(sub, sizeof(sub), "%s.position", field);
  int rc = check_vec3(sub, p->p, ENV_MAX_COORD, "m", msg);
  if (rc < 0) {
    return rc;
  }
  for (int i = 0; i < 4; i++) {
    if (!isfinite(p->q[i])) {
      return err_set(msg, ERR_INVAL, "%s.orientation.%s = %g is not finite", field, kQuat[i],
                     p->q[i]);
    }
  }
  pose_t out = *p;
  double norm = xform_quat_normalize(out.q);
  if (norm < ENV_QUAT_MIN_NORM) {
    return err_set(msg, ERR_INVAL, "%s.orientation has norm %g (must be >= %g)", field, norm,
                   ENV_QUAT_MIN_NORM);
  }
  *dest = out;
  return 0;
}


// Id of a new entity: > 0 and unused.
static int check_new_id(const table_t* t, const char* what, uint32_t id, err_msg_t* msg) {
  if (id == 0) {
    return err_set(msg, ERR_INVAL, "id = 0 is reserved (%s ids are > 0)", what);
  }
  if (table_find(t, id) != TABLE_NONE) {
    return err_set(msg, ERR_EXISTS, "%s %u already exists", what, id);
  }
  return 0;
}


static int check_room(const table_t* t, uint32_t limit, const char* limit_name, err_msg_t* msg) {
  if (t->count >= limit) {
    return err_set(msg, ERR_LIMIT, "limit %s = %u reached", limit_name, limit);
  }
  return 0;
}


// Duplicate a nullable name; ERR_NOMEM only when name is non-NULL and the copy fails.
static int dup_name(const char* name, char** dest) {
  *dest = NULL;
  if (name && !(*dest = mem_strdup(name))) {
    return ERR_NOMEM;
  }
  return 0;
}


// Grow a uint32 array to hold at least `need` entries.
static int grow_u32(uint32_t** arr, uint32_t* cap, uint32_t need) {
  if (need <= *cap) {
    return 0;
  }
  uint64_t n = *cap ? *cap : 4;
  while (n < need) {
    n *= 2;
  }
  uint32_t* p = mem_realloc(*arr, (size_t)n * sizeof(uint32_t));
  if (!p) {
    return ERR_NOMEM;
  }
  *arr = p;
  *cap = (uint32_t)n;
  return 0;
}


void env_sync_object(env_t* e, const env_object_t* o, const env_body_t* b) {
  // the scene moves the object rigidly with its interpolated body; frozen objects stand at
  // the end of the step
  const pose_t* start = b ? (e->freeze_objects ? &b->pose_cur : &b->pose_prev) : NULL;
  const pose_t* end = b ? &b->pose_cur : NULL;
  scene_set_instance_pose(e->scene, o->instance, &o->local_pose, start, end);
  e->dirty = 1;
}


void env_sync_body(env_t* e, const env_body_t* b) {
  for (uint32_t i = 0; i < b->nobject; i++) {
    env_sync_object(e, table_at(&e->objects, b->objects[i]), b);
  }
}


uint64_t env_changes(const env_t* e) {
  return e->changes;
}


void env_count_change(env_t* e) {
  e->changes++;
}


int env_commit(env_t* e, err_msg_t* msg) {
  env_sync_moved(e);
  if (!e->dirty) {
    return 0;
  }
  int rc = scene_commit(e->scene, msg);
  if (rc == 0) {
    e->dirty = 0;
  }
  return rc;
}

//---------------- Lifecycle


env_t* env_create(const char* name, const env_limits_t* limits, scene_device_t* dev,
                  pool_t* pool, err_msg_t* msg) {
  if (!dev) {
    err_set(msg, ERR_INVAL, "no scene device");
    return NULL;
  }
  env_t* e = mem_calloc(1, sizeof(*e));
  if (!e) {
    err_set(msg, ERR_NOMEM, "out of memory creating environment");
    return NULL;
  }
  e->limits = limits ? *limits : env_default_limits();
  e->dev = dev;
  e->pool = pool;
  table_init(&e->geometries, sizeof(env_geometry_t));
  table_init(&e->materials, sizeof(env_material_t));
  table_init(&e->media, sizeof(env_medium_t));
  table_init(&e->bodies, sizeof(env_body_t));
  table_init(&e->objects, sizeof(env_object_t));
  table_init(&e->joints, sizeof(env_joint_t));
  env_sensors_init(e);
  e->gravity[2] = -9.80665;
  e->material0.m = material_default_lambertian();
  e->medium0.a = ambient_default_air();

  // name, then the scene
  if (dup_name(name ? name : "", &e->name) < 0) {
    err_set(msg, ERR_NOMEM, "out of memory creating environment");
    env_destroy(e);
    return NULL;
  }
  e->scene = scene_create(dev, msg);
  if (!e->scene) {
    env_destroy(e);
    return NULL;
  }
  return e;
}


static void free_records(table_t* t, size_t name_offset) {
  for (uint32_t s = 0; s < t->used; s++) {
    if (table_slot_id(t, s) != 0 && name_offset != (size_t)-1) {
      char* name;
      memcpy(&name, (uint8_t*)table_at(t, s) + name_offset, sizeof(name));
      mem_free(name);
    }
  }
  table_close(t);
}


void env_destroy(env_t* e) {
  if (!e) {
    return;
  }
  for (uint32_t s = 0; s < e->geometries.used; s++) {
    if (table_slot_id(&e->geometries, s) != 0) {
      mem_free(((env_geometry_t*)table_at(&e->geometries, s))->material_ids);
    }
  }
  for (uint32_t s = 0; s < e->bodies.used; s++) {
    if (table_slot_id(&e->bodies, s) != 0) {
      mem_free(((env_body_t*)table_at(&e->bodies, s))->objects);
    }
  }
  free_records(&e->geometries, offsetof(env_geometry_t, name));
  free_records(&e->materials, offsetof(env_material_t, name));
  free_records(&e->media, (size_t)-1);
  free_records(&e->bodies, offsetof(env_body_t, name));
  free_records(&e->objects, offsetof(env_object_t, name));
  free_records(&e->joints, offsetof(env_joint_t, name));
  env_sensors_close(e);
  mem_free(e->material0.name);
  scene_destroy(e->scene);
  mem_free(e->dipoles);
  mem_free(e->moved_bodies);
  mem_free(e->update_slots);
  mem_free(e->moved_joints);
  mem_free(e->name);
  mem_free(e);
}


const char* env_name(const env_t* e) {
  return e->name;
}

//---------------- Geometry


// Little-endian loads from possibly unaligned bytes.
static uint32_t load_u32(const uint8_t* p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}


static float load_f32(const uint8_t* p) {
  uint32_t u = load_u32(p);
  float f;
  memcpy(&f, &u, sizeof(f));
  return f;
}


env_material_t* env_find_material(const env_t* e, uint32_t id) {
  if (id == 0) {
    return (env_material_t*)&e->material0;
  }
  return table_get(&e->materials, id);
}


env_medium_t* env_find_medium(const env_t* e, uint32_t id) {
  if (id == 0) {
    return (env_medium_t*)&e->medium0;
  }
  return table_get(&e->media, id);
}


// Check the packed arrays of a mesh; on success the counts are written.
static int check_mesh(const env_t* e, const mesh_desc_t* d, uint32_t* out_nvertex,
                      uint32_t* out_ntriangle, uint32_t* out_nmat, double* out_extent,
                      err_msg_t* msg) {
  // byte lengths and counts
  if (d->vertices_len % 12 != 0) {
    return err_set(msg, ERR_INVAL, "vertices length %zu is not a multiple of 12",
                   d->vertices_len);
  }
  if (d->indices_len % 12 != 0) {
    return err_set(msg, ERR_INVAL, "indices length %zu is not a multiple of 12", d->indices_len);
  }
  size_t nvertex = d->vertices ? d->vertices_len / 12 : 0;
  size_t ntriangle = d->indices ? d->indices_len / 12 : 0;
  if (nvertex == 0) {
    return err_set(msg, ERR_INVAL, "vertices is empty");
  }
  if (ntriangle == 0) {
    return err_set(msg, ERR_INVAL, "indices is empty");
  }
  if (nvertex > e->limits.max_mesh_vertices) {
    return err_set(msg, ERR_LIMIT, "vertices: %zu vertices exceed the limit max_mesh_vertices = %u",
                   nvertex, e->limits.max_mesh_vertices);
  }
  if (ntriangle > e->limits.max_mesh_triangles) {
    return err_set(msg, ERR_LIMIT,
                   "indices: %zu triangles exceed the limit max_mesh_triangles = %u", ntriangle,
                   e->limits.max_mesh_triangles);
  }
  size_t nmat = 0;
  if (d->material_ids && d->material_ids_len > 0) {
    if (d->material_ids_len % 4 != 0) {
      return err_set(msg, ERR_INVAL, "material_ids length %zu is not a multiple of 4",
                     d->material_ids_len);
    }
    nmat = d->material_ids_len / 4;
    if (nmat != ntriangle) {
      return err_set(msg, ERR_INVAL, "material_ids has %zu entries for %zu triangles", nmat,
                     ntriangle);
    }
  }

  // every vertex finite and within ENV_MAX_COORD; the extent bounds the objects' scale
  double extent2 = 0.0;
  for (size_t i = 0; i < nvertex * 3; i += 3) {
    double r2 = 0.0;
    for (size_t a = 0; a < 3; a++) {
      float v = load_f32(d->vertices + 4 * (i + a));
      if (!isfinite(v)) {
        return err_set(msg, ERR_INVAL, "vertices[%zu].%s = %g is not finite", i / 3, kAxis[a],
                       (double)v);
      }
      if (fabs(v) > ENV_MAX_COORD) {
        return err_set(msg, ERR_INVAL, "vertices[%zu].%s = %g exceeds %g in magnitude", i / 3,
                       kAxis[a], (double)v, ENV_MAX_COORD);
      }
      r2 += (double)v * (double)v;
    }
    extent2 = fmax(extent2, r2);
  }
  *out_extent = sqrt(extent2);

  // every index in range
  for (size_t i = 0; i < ntriangle * 3; i++) {
    uint32_t k = load_u32(d->indices + 4 * i);
    if (k >= nvertex) {
      return err_set(msg, ERR_INVAL, "indices[%zu] = %u is out of range (%zu vertices)", i, k,
                     nvertex);
    }
  }

  // every material known (0 = the object's material)
  uint32_t last = 0;
  for (size_t i = 0; i < nmat; i++) {
    uint32_t id = load_u32(d->material_ids + 4 * i);
    if (id != 0 && id != last && !env_find_material(e, id)) {
      return err_set(msg, ERR_NOTFOUND, "material_ids[%zu] = %u is not a known material", i, id);
    }
    last = id;
  }
  *out_nvertex = (uint32_t)nvertex;
  *out_ntriangle = (uint32_t)ntriangle;
  *out_nmat = (uint32_t)nmat;
  return 0;
}


void env_ref_materials(env_t* e, const uint32_t* ids, uint32_t n, int delta) {
  uint32_t last = 0;
  env_material_t* m = NULL;
  for (uint32_t i = 0; i < n; i++) {
    if (ids[i] == 0) {
      continue;
    }
    if (ids[i] != last) {
      last = ids[i];
      m = env_find_material(e, last);
    }
    m->nuser = delta > 0 ? m->nuser + 1 : m->nuser - 1;
  }
}


int env_create_mesh(env_t* e, const mesh_desc_t* d, err_msg_t* msg) {
  // id, room and contents
  uint32_t nvertex = 0, ntriangle = 0, nmat = 0;
  double extent = 0.0;
  int rc = check_new_id(&e->geometries, "geometry", d->id, msg);
  if (rc == 0) {
    rc = check_room(&e->geometries, e->limits.max_geometries, "max_geometries", msg);
  }
  if (rc == 0) {
    rc = check_mesh(e, d, &nvertex, &ntriangle, &nmat, &extent, msg);
  }
  if (rc < 0) {
    return rc;
  }

  // all memory before the first change
  float* vertices = mem_alloc((size_t)nvertex * 3 * sizeof(float));
  uint32_t* indices = mem_alloc((size_t)ntriangle * 3 * sizeof(uint32_t));
  uint32_t* mats = nmat ? mem_alloc((size_t)nmat * sizeof(uint32_t)) : NULL;
  char* name = NULL;
  if (!vertices || !indices || (nmat && !mats) || dup_name(d->name, &name) < 0 ||
      table_reserve(&e->geometries, 1) < 0) {
    mem_free(vertices);
    mem_free(indices);
    mem_free(mats);
    mem_free(name);
    return err_set(msg, ERR_NOMEM, "out of memory for mesh %u", d->id);
  }

  // unpack and hand to the scene, which copies and builds the BVH
  for (size_t i = 0; i < (size_t)nvertex * 3; i++) {
    vertices[i] = load_f32(d->vertices + 4 * i);
  }
  for (size_t i = 0; i < (size_t)ntriangle * 3; i++) {
    indices[i] = load_u32(d->indices + 4 * i);
  }
  for (size_t i = 0; i < nmat; i++) {
    mats[i] = load_u32(d->material_ids + 4 * i);
  }
  int handle = scene_add_mesh(e->scene, vertices, nvertex, indices, ntriangle, msg);
  mem_free(vertices);
  mem_free(indices);
  if (handle < 0) {
    mem_free(mats);
    mem_free(name);
    return handle;
  }

  // record
  env_geometry_t* g = table_at(&e->geometries, table_insert(&e->geometries, d->id));
  g->handle = handle;
  g->is_mesh = 1;
  g->extent = extent;
  g->nvertex = nvertex;
  g->ntriangle = ntriangle;
  g->material_ids = mats;
  g->name = name;
  env_ref_materials(e, mats, nmat, +1);
  e->dirty = 1;
  return 0;
}


int env_create_primitive(env_t* e, const prim_desc_t* d, err_msg_t* msg) {
  // id, room and size (the primitive rules are the scene's)
  int rc = check_new_id(&e->geometries, "geometry", d->id, msg);
  if (rc == 0) {
    rc = check_room(&e->geometries, e->limits.max_geometries, "max_geometries", msg);
  }
  if (rc == 0) {
    rc = prim_check(d->kind, d->size, msg);
  }
  if (rc < 0) {
    return rc;
  }

  // memory, then the scene
  char* name = NULL;
  if (dup_name(d->name, &name) < 0 || table_reserve(&e->geometries, 1) < 0) {
    mem_free(name);
    return err_set(msg, ERR_NOMEM, "out of memory for primitive %u", d->id);
  }
  int handle = scene_add_primitive(e->scene, d->kind, d->size, msg);
  if (handle < 0) {
    mem_free(name);
    return handle;
  }

  // record
  env_geometry_t* g = table_at(&e->geometries, table_insert(&e->geometries, d->id));
  g->handle = handle;
  g->prim = d->kind;
  g->extent = prim_extent(d->kind, d->size);
  g->name = name;
  e->dirty = 1;
  return 0;
}

int env_create_height_field(env_t* e, const hfield_desc_t* d, err_msg_t* msg) {
  // id, room, the samples' byte count, then their values (the rules are hfield_check's)
  int rc = check_new_id(&e->geometries, "geometry", d->id, msg);
  if (rc == 0) {
    rc = check_room(&e->geometries, e->limits.max_geometries, "max_geometries", msg);
  }
  if (rc < 0) {
    return rc;
  }
  hfield_t h = {.rows = d->rows, .columns = d->columns, .half_x = d->half_x,
                .half_y = d->half_y, .base_depth = d->base_depth};
  rc = hfield_check(&h, msg);   // the grid (no heights yet)
  size_t n = (size_t)d->rows * d->columns;
  if (rc == 0 && (d->heights ? d->heights_len : 0) != 4 * n) {
    rc = err_set(msg, ERR_INVAL, "height_field.heights: %zu bytes for rows x columns = %u x %u "
                 "samples of 4 bytes", d->heights ? d->heights_len : 0, d->rows, d->columns);
  }
  uint32_t nvertex = rc ? 0 : hfield_max_vertices(&h);
  uint32_t ntriangle = rc ? 0 : hfield_max_triangles(&h);
  if (rc == 0 && nvertex > e->limits.max_mesh_vertices) {
    rc = err_set(msg, ERR_LIMIT, "height_field: %u vertices exceed the limit "
                 "max_mesh_vertices = %u", nvertex, e->limits.max_mesh_vertices);
  }
  if (rc == 0 && ntriangle > e->limits.max_mesh_triangles) {
    rc = err_set(msg, ERR_LIMIT, "height_field: %u triangles exceed the limit "
                 "max_mesh_triangles = %u", ntriangle, e->limits.max_mesh_triangles);
  }
  if (rc < 0) {
    return rc;
  }
  float* heights = mem_alloc(n * sizeof(float));
  if (!heights) {
    return err_set(msg, ERR_NOMEM, "out of memory for height field %u", d->id);
  }
  for (size_t i = 0; i < n; i++) {
    heights[i] = load_f32(d->heights + 4 * i);
  }
  h.heights = heights;
  if ((rc = hfield_check(&h, msg)) < 0) {
    mem_free(heights);
    return rc;
  }

  // all memory before the first change, then the mesh to the scene (which copies it)
  float* vertices = mem_alloc((size_t)nvertex * 3 * sizeof(float));
  uint32_t* indices = mem_alloc((size_t)ntriangle * 3 * sizeof(uint32_t));
  char* name = NULL;
  if (!vertices || !indices || dup_name(d->name, &name) < 0 ||
      table_reserve(&e->geometries, 1) < 0) {
    mem_free(heights);
    mem_free(vertices);
    mem_free(indices);
    mem_free(name);
    return err_set(msg, ERR_NOMEM, "out of memory for height field %u", d->id);
  }
  ntriangle = hfield_mesh(&h, vertices, indices);
  double extent = hfield_extent(&h);
  mem_free(heights);
  int handle = scene_add_mesh(e->scene, vertices, nvertex, indices, ntriangle, msg);
  mem_free(vertices);
  mem_free(indices);
  if (handle < 0) {
    mem_free(name);
    return handle;
  }

  // record: a mesh for everything that reads geometries (the cone's closest point included)
  env_geometry_t* g = table_at(&e->geometries, table_insert(&e->geometries, d->id));
  g->handle = handle;
  g->is_mesh = 1;
  g->extent = extent;
  g->nvertex = nvertex;
  g->ntriangle = ntriangle;
  g->name = name;
  e->dirty = 1;
  return 0;
}

//---------------- Materials, media, settings


int env_set_material(env_t* e, uint32_t id, const surface_material_t* m, const char* name,
                     err_msg_t* msg) {
  // parameters and room (the limit counts material 0)
  int rc = material_validate(m, msg);
  if (rc < 0) {
    return rc;
  }
  env_material_t* rec = env_find_material(e, id);
  if (!rec && e->materials.count + 1 >= e->limits.max_materials) {
    return err_set(msg, ERR_LIMIT, "limit max_materials = %u reached", e->limits.max_materials);
  }

  // memory
  char* copy = NULL;
  if (dup_name(name, &copy) < 0 || (!rec && table_reserve(&e->materials, 1) < 0)) {
    mem_free(copy);
    return err_set(msg, ERR_NOMEM, "out of memory for material %u", id);
  }

  // create or replace; users keep referring to the id
  if (!rec) {
    rec = table_at(&e->materials, table_insert(&e->materials, id));
  }
  rec->m = *m;
  mem_free(rec->name);
  rec->name = copy;
  return 0;
}


int env_set_medium(env_t* e, uint32_t id, const ambient_material_t* a, err_msg_t* msg) {
  // parameters and room (the limit counts medium 0)
  int rc = ambient_validate(a, msg);
  if (rc < 0) {
    return rc;
  }
  env_medium_t* rec = env_find_medium(e, id);
  if (!rec && e->media.count + 1 >= e->limits.max_media) {
    return err_set(msg, ERR_LIMIT, "limit max_media = %u reached", e->limits.max_media);
  }
  if (!rec && table_reserve(&e->media, 1) < 0) {
    return err_set(msg, ERR_NOMEM, "out of memory for medium %u", id);
  }

  // create or replace
  if (!rec) {
    rec = table_at(&e->media, table_insert(&e->media, id));
  }
  rec->a = *a;
  return 0;
}


static void sync_all_objects(env_t* e) {
  for (uint32_t s = 0; s < e->objects.used; s++) {
    if (table_slot_id(&e->objects, s) != 0) {
      const env_object_t* o = table_at(&e->objects, s);
      env_sync_object(e, o, o->body_id ? table_get(&e->bodies, o->body_id) : NULL);
    }
  }
}


int env_set_settings(env_t* e, const env_settings_t* s, err_msg_t* msg) {
  // vectors
  int rc = 0;
  if (s->has_gravity && (rc = check_vec3("gravity", s->gravity, ENV_MAX_VALUE, "m/s^2", msg)) < 0) {
    return rc;
  }
  if (s->has_magnetic_field && (rc = check_vec3("magnetic_field", s->magnetic_field, ENV_MAX_VALUE, "T",
                                                 msg)) < 0) {
    return rc;
  }

  // dipoles: replace the list, or append to it
  uint64_t ndipole = (uint64_t)(s->replace_dipoles ? 0 : e->ndipole) + s->ndipole;
  if (ndipole > e->limits.max_dipoles) {
    return err_set(msg, ERR_LIMIT, "dipoles: %llu dipoles exceed the limit max_dipoles = %u",
                   (unsigned long long)ndipole, e->limits.max_dipoles);
  }
  if (s->ndipole > 0 && !s->dipoles) {
    return err_set(msg, ERR_INVAL, "dipoles is missing (ndipole = %u)", s->ndipole);
  }
  for (uint32_t i = 0; i < s->ndipole; i++) {
    const env_dipole_t* d = &s->dipoles[i];
    char field[48];
    snprintf(field, sizeof(field), "dipoles[%u].moment", i);
    if ((rc = check_vec3(field, d->moment, ENV_MAX_VALUE, "A m^2", msg)) < 0) {
      return rc;
    }
    snprintf(field, sizeof(field), "dipoles[%u].position", i);
    if ((rc = check_vec3(field, d->position, ENV_MAX_COORD, "m", msg)) < 0) {
      return rc;
    }
    if (d->body_id != 0 && !table_get(&e->bodies, d->body_id)) {
      return err_set(msg, ERR_NOTFOUND, "dipoles[%u].body_id = %u is not a known body", i,
                     d->body_id);
    }
  }
  int change_dipoles = s->replace_dipoles || s->ndipole > 0;
  env_dipole_t* list = NULL;
  if (change_dipoles && ndipole > 0) {
    list = mem_alloc((size_t)ndipole * sizeof(env_dipole_t));
    if (!list) {
      return err_set(msg, ERR_NOMEM, "out of memory for %llu dipoles",
                     (unsigned long long)ndipole);
    }
    uint32_t keep = s->replace_dipoles ? 0 : e->ndipole;
    if (keep > 0) {
      memcpy(list, e->dipoles, keep * sizeof(env_dipole_t));
    }
    memcpy(list + keep, s->dipoles, s->ndipole * sizeof(env_dipole_t));
  }

  // apply
  if (s->has_gravity) {
    memcpy(e->gravity, s->gravity, sizeof(e->gravity));
  }
  if (s->has_magnetic_field) {
    memcpy(e->magnetic_field, s->magnetic_field, sizeof(e->magnetic_field));
  }
  if (change_dipoles) {
    mem_free(e->dipoles);
    e->dipoles = list;
    e->ndipole = (uint32_t)ndipole;
  }
  if (s->has_seed) {
    e->seed = s->seed;
  }
  if (s->has_freeze_objects && (s->freeze_objects != 0) != e->freeze_objects) {
    e->freeze_objects = s->freeze_objects != 0;
    sync_all_objects(e);
  }
  return 0;
}


void env_dipole_world(const env_t* e, const env_dipole_t* d, field_dipole_t* out) {
  // a dipole on a body moves and turns with it (its state at t_cur)
  const env_body_t* body = d->body_id ? table_get(&e->bodies, d->body_id) : NULL;
  if (body) {
    xform_apply(&body->pose_cur, d->position, out->position);
    xform_quat_rotate(body->pose_cur.q, d->moment, out->moment);
  } else {
    memcpy(out->position, d->position, sizeof(out->position));
    memcpy(out->moment, d->moment, sizeof(out->moment));
  }
}


void env_magnetic_field(const env_t* e, const double p[3], double dest[3]) {
  double b[3] = {e->magnetic_field[0], e->magnetic_field[1], e->magnetic_field[2]};
  for (uint32_t i = 0; i < e->ndipole; i++) {
    field_dipole_t d;
    env_dipole_world(e, &e->dipoles[i], &d);
    field_dipole_add(&d, p, b);
  }
  memcpy(dest, b, sizeof(b));
}

//---------------- Bodies, objects, joints


int env_create_body(env_t* e, const body_desc_t* d, err_msg_t* msg) {
  // id, room, numbers
  pose_t pose;
  int rc = check_new_id(&e->bodies, "body", d->id, msg);
  if (rc == 0) {
    rc = check_room(&e->bodies, e->limits.max_bodies, "max_bodies", msg);
  }
  if (rc == 0) {
    rc = check_pose("pose", &d->pose, &pose, msg);
  }
  if (rc == 0) {
    rc = check_vec3("linear_velocity", d->linear_velocity, ENV_MAX_VALUE, "m/s", msg);
  }
  if (rc == 0) {
    rc = check_vec3("angular_velocity", d->angular_velocity, ENV_MAX_VALUE, "rad/s", msg);
  }
  if (rc == 0) {
    rc = check_vec3("center_of_mass", d->center_of_mass, ENV_MAX_COORD, "m", msg);
  }
  if (rc < 0) {
    return rc;
  }

  // memory: the record, and room in the moved list and the update slots so that updates never
  // allocate
  char* name = NULL;
  uint32_t guesses = e->update_slot_cap;
  if (dup_name(d->name, &name) < 0 || table_reserve(&e->bodies, 1) < 0 ||
      grow_u32(&e->moved_bodies, &e->moved_body_cap, e->bodies.count + 1) < 0 ||
      grow_u32(&e->update_slots, &e->update_slot_cap, e->bodies.count + 1) < 0) {
    mem_free(name);
    return err_set(msg, ERR_NOMEM, "out of memory for body %u", d->id);
  }
  for (uint32_t i = guesses; i < e->update_slot_cap; i++) {
    e->update_slots[i] = TABLE_NONE;   // no guess yet for an update's i-th body
  }

  // record: at rest at its pose until a state moves it
  env_body_t* b = table_at(&e->bodies, table_insert(&e->bodies, d->id));
  b->pose_prev = pose;
  b->pose_cur = pose;
  memcpy(b->linear_velocity, d->linear_velocity, sizeof(b->linear_velocity));
  memcpy(b->angular_velocity, d->angular_velocity, sizeof(b->angular_velocity));
  memcpy(b->center_of_mass, d->center_of_mass, sizeof(b->center_of_mass));
  memcpy(b->linear_velocity_prev, d->linear_velocity, sizeof(b->linear_velocity_prev));
  memcpy(b->angular_velocity_prev, d->angular_velocity, sizeof(b->angular_velocity_prev));
  b->has_velocity = 1;
  b->has_velocity_prev = 1;
  b->name = name;
  e->view_stale = 1;
  return 0;
}


// References of a new object; pointers returned on success.
static int check_object(const env_t* e, const object_desc_t* d, env_geometry_t** out_geometry,
                        env_body_t** out_body, pose_t* out_pose, err_msg_t* msg) {
  *out_geometry = table_get(&e->geometries, d->geometry_id);
  if (!*out_geometry && d->geometry_id == 0) {   // not set, rather than not found
    return err_set(msg, ERR_INVAL, "geometry_id = 0 must name a geometry (> 0)");
  }
  if (!*out_geometry) {
    return err_set(msg, ERR_NOTFOUND, "geometry_id = %u is not a known geometry",
                   d->geometry_id);
  }
  *out_body = NULL;
  if (d->body_id != 0 && !(*out_body = table_get(&e->bodies, d->body_id))) {
    return err_set(msg, ERR_NOTFOUND, "body_id = %u is not a known body", d->body_id);
  }
  int rc = check_pose("local_pose", &d->local_pose, out_pose, msg);
  if (rc < 0) {
    return rc;
  }

  // scale: finite and non-zero; negative values mirror the geometry
  for (int i = 0; i < 3; i++) {
    if (!isfinite(d->scale[i])) {
      return err_set(msg, ERR_INVAL, "scale.%s = %g is not finite", kAxis[i], d->scale[i]);
    }
    if (d->scale[i] == 0.0) {
      return err_set(msg, ERR_INVAL, "scale.%s = 0 must be non-zero", kAxis[i]);
    }
    if (fabs(d->scale[i]) < ENV_MIN_SCALE) {
      return err_set(msg, ERR_INVAL, "scale.%s = %g is below %g in magnitude", kAxis[i],
                     d->scale[i], ENV_MIN_SCALE);
    }
  }

  // the scaled geometry stays inside the traceable range, or it would silently vanish
  double smax = fmax(fabs(d->scale[0]), fmax(fabs(d->scale[1]), fabs(d->scale[2])));
  if ((*out_geometry)->extent * smax > ENV_MAX_COORD) {
    return err_set(msg, ERR_INVAL,
                   "scale = (%g, %g, %g) makes geometry %u reach %g m from its origin, beyond %g",
                   d->scale[0], d->scale[1], d->scale[2], d->geometry_id,
                   (*out_geometry)->extent * smax, ENV_MAX_COORD);
  }
  if (!env_find_material(e, d->material_id)) {
    return err_set(msg, ERR_NOTFOUND, "material_id = %u is not a known material",
                   d->material_id);
  }
  if (d->group > 31) {
    return err_set(msg, ERR_INVAL, "group = %u is outside [0, 31]", d->group);
  }
  if (d->medium_id != 0 && !env_find_medium(e, d->medium_id)) {
    return err_set(msg, ERR_NOTFOUND, "medium_id = %u is not a known medium", d->medium_id);
  }
  return 0;
}


int env_create_object(env_t* e, const object_desc_t* d, err_msg_t* msg) {
  // id, room, references, numbers
  env_geometry_t* g = NULL;
  env_body_t* b = NULL;
  pose_t local;
  int rc = check_new_id(&e->objects, "object", d->id, msg);
  if (rc == 0) {
    rc = check_room(&e->objects, e->limits.max_objects, "max_objects", msg);
  }
  if (rc == 0) {
    rc = check_object(e, d, &g, &b, &local, msg);
  }
  if (rc < 0) {
    return rc;
  }

  // memory (other tables' records do not move), then the scene instance
  char* name = NULL;
  if (dup_name(d->name, &name) < 0 || table_reserve(&e->objects, 1) < 0 ||
      (b && grow_u32(&b->objects, &b->object_cap, b->nobject + 1) < 0)) {
    mem_free(name);
    return err_set(msg, ERR_NOMEM, "out of memory for object %u", d->id);
  }
  int instance = scene_add_instance(e->scene, g->handle, d->scale, d->id, d->label, msg);
  if (instance < 0) {
    mem_free(name);
    return instance;
  }
  scene_set_instance_body(e->scene, instance, d->body_id, d->group);

  // record, references, pose
  uint32_t slot = table_insert(&e->objects, d->id);
  env_object_t* o = table_at(&e->objects, slot);
  o->geometry_id = d->geometry_id;
  o->body_id = d->body_id;
  o->material_id = d->material_id;
  o->medium_id = d->medium_id;
  o->label = d->label;
  o->local_pose = local;
  memcpy(o->scale, d->scale, sizeof(o->scale));
  o->instance = instance;
  o->name = name;
  g->nuser++;
  env_find_material(e, d->material_id)->nuser++;
  if (d->medium_id != 0) {
    env_find_medium(e, d->medium_id)->nuser++;
  }
  if (b) {
    b->objects[b->nobject++] = slot;
  }
  env_sync_object(e, o, b);
  return 0;
}


int env_create_joint(env_t* e, const joint_desc_t* d, err_msg_t* msg) {
  // id, room, type, position
  int rc = check_new_id(&e->joints, "joint", d->id, msg);
  if (rc == 0) {
    rc = check_room(&e->joints, e->limits.max_joints, "max_joints", msg);
  }
  if (rc < 0) {
    return rc;
  }
  if (d->type != JOINT_TYPE_REVOLUTE && d->type != JOINT_TYPE_PRISMATIC) {
    return err_set(msg, ERR_INVAL, "type = %d is not REVOLUTE (0) or PRISMATIC (1)",
                   (int)d->type);
  }
  if (!isfinite(d->position) || fabs(d->position) > ENV_MAX_VALUE) {
    return err_set(msg, ERR_INVAL, "position = %g must be finite and at most %g in magnitude",
                   d->position, ENV_MAX_VALUE);
  }

  // memory, including room in the moved list
  char* name = NULL;
  if (dup_name(d->name, &name) < 0 || table_reserve(&e->joints, 1) < 0 ||
      grow_u32(&e->moved_joints, &e->moved_joint_cap, e->joints.count + 1) < 0) {
    mem_free(name);
    return err_set(msg, ERR_NOMEM, "out of memory for joint %u", d->id);
  }

  // record
  env_joint_t* j = table_at(&e->joints, table_insert(&e->joints, d->id));
  j->type = d->type;
  j->position_prev = d->position;
  j->position = d->position;
  j->name = name;
  e->view_stale = 1;
  return 0;
}

//---------------- Introspection and lookups


void env_get_info(const env_t* e, env_info_t* out) {
  memset(out, 0, sizeof(*out));
  out->geometries = e->geometries.count;
  out->materials = e->materials.count + 1;
  out->media = e->media.count + 1;
  out->bodies = e->bodies.count;
  out->objects = e->objects.count;
  out->joints = e->joints.count;
  out->sensors = e->sensors.count;
  env_get_time(e, &out->time);
  scene_counters(e->scene, &out->scene);
}


const surface_material_t* env_hit_material(const env_t* e, uint32_t object_id,
                                           uint32_t primitive) {
  const env_object_t* o = table_get(&e->objects, object_id);
  if (!o) {
    return NULL;
  }
  const env_geometry_t* g = table_get(&e->geometries, o->geometry_id);
  uint32_t id = o->material_id;
  if (g->material_ids && primitive < g->ntriangle && g->material_ids[primitive] != 0) {
    id = g->material_ids[primitive];
  }
  return &env_find_material(e, id)->m;
}


const ambient_material_t* env_get_medium(const env_t* e, uint32_t id) {
  const env_medium_t* m = env_find_medium(e, id);
  return m ? &m->a : NULL;
}


int env_body_pose(const env_t* e, uint32_t body_id, double s, pose_t* out) {
  if (body_id == 0) {
    *out = xform_identity();
    return 0;
  }
  const env_body_t* b = table_get(&e->bodies, body_id);
  if (!b) {
    return ERR_NOTFOUND;
  }
  *out = xform_interpolate(&b->pose_prev, &b->pose_cur, s);
  return 0;
}
