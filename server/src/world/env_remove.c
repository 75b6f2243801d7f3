// SPDX-License-Identifier: MIT
// env_remove.c: removal of entities. An entity still referenced (a geometry or material used
// by an object or a mesh, a body carrying objects or dipoles) is refused with ERR_STATE naming
// one user; id 0 (the defaults material 0 and medium 0, the world frame body 0, and no entity of
// the other kinds) is refused with ERR_INVAL.
#include "world/env.h"

#include <stddef.h>
#include <string.h>

#include "base/mem.h"
#include "world/env_impl.h"

//---------------- Removal


// First object whose uint32 field at `offset` equals id (0 if none). A scan: used only to name
// the user in an error message.
static uint32_t object_using(const env_t* e, size_t offset, uint32_t id) {
  for (uint32_t s = 0; s < e->objects.used; s++) {
    uint32_t oid = table_slot_id(&e->objects, s);
    uint32_t v;
    if (oid != 0) {
      memcpy(&v, (const uint8_t*)table_at(&e->objects, s) + offset, sizeof(v));
      if (v == id) {
        return oid;
      }
    }
  }
  return 0;
}


// Drop slot from a list of slots (order not kept).
static void drop_slot(uint32_t* list, uint32_t* n, uint32_t slot) {
  for (uint32_t i = 0; i < *n; i++) {
    if (list[i] == slot) {
      list[i] = list[--*n];
      return;
    }
  }
}


static int remove_geometry(env_t* e, uint32_t id, err_msg_t* msg) {
  env_geometry_t* g = table_get(&e->geometries, id);
  if (!g) {
    return err_set(msg, ERR_NOTFOUND, "geometry %u not found", id);
  }
  if (g->nuser > 0) {
    return err_set(msg, ERR_STATE, "geometry %u is used by object %u", id,
                   object_using(e, offsetof(env_object_t, geometry_id), id));
  }
  scene_remove_geometry(e->scene, g->handle);
  env_ref_materials(e, g->material_ids, g->material_ids ? g->ntriangle : 0, -1);
  mem_free(g->material_ids);
  mem_free(g->name);
  table_remove(&e->geometries, id);
  e->dirty = 1;
  return 0;
}


// First mesh with a triangle of material id (0 if none); error messages only.
static uint32_t geometry_using(const env_t* e, uint32_t id) {
  for (uint32_t s = 0; s < e->geometries.used; s++) {
    uint32_t gid = table_slot_id(&e->geometries, s);
    const env_geometry_t* g = table_at(&e->geometries, s);
    for (uint32_t i = 0; gid != 0 && g->material_ids && i < g->ntriangle; i++) {
      if (g->material_ids[i] == id) {
        return gid;
      }
    }
  }
  return 0;
}


static int remove_material(env_t* e, uint32_t id, err_msg_t* msg) {
  if (id == 0) {
    return err_set(msg, ERR_INVAL, "material 0 is the default material and cannot be removed");
  }
  env_material_t* m = table_get(&e->materials, id);
  if (!m) {
    return err_set(msg, ERR_NOTFOUND, "material %u not found", id);
  }
  if (m->nuser > 0) {
    uint32_t oid = object_using(e, offsetof(env_object_t, material_id), id);
    if (oid != 0) {
      return err_set(msg, ERR_STATE, "material %u is used by object %u", id, oid);
    }
    return err_set(msg, ERR_STATE, "material %u is used by geometry %u", id,
                   geometry_using(e, id));
  }
  mem_free(m->name);
  table_remove(&e->materials, id);
  return 0;
}


static int remove_medium(env_t* e, uint32_t id, err_msg_t* msg) {
  if (id == 0) {
    return err_set(msg, ERR_INVAL, "medium 0 is the environment's ambient and cannot be removed");
  }
  env_medium_t* m = table_get(&e->media, id);
  if (!m) {
    return err_set(msg, ERR_NOTFOUND, "medium %u not found", id);
  }
  if (m->nuser > 0) {
    return err_set(msg, ERR_STATE, "medium %u is used by object %u", id,
                   object_using(e, offsetof(env_object_t, medium_id), id));
  }
  table_remove(&e->media, id);
  return 0;
}


static int remove_body(env_t* e, uint32_t id, err_msg_t* msg) {
  if (id == 0) {
    return err_set(msg, ERR_INVAL, "body 0 is the world frame and cannot be removed");
  }
  uint32_t slot = table_find(&e->bodies, id);
  if (slot == TABLE_NONE) {
    return err_set(msg, ERR_NOTFOUND, "body %u not found", id);
  }
  env_body_t* b = table_at(&e->bodies, slot);
  if (b->nobject > 0) {
    return err_set(msg, ERR_STATE, "body %u carries object %u", id,
                   table_slot_id(&e->objects, b->objects[0]));
  }
  if (b->nsensor > 0) {
    return err_set(msg, ERR_STATE, "body %u carries %u sensor(s)", id, b->nsensor);
  }
  for (uint32_t i = 0; i < e->ndipole; i++) {
    if (e->dipoles[i].body_id == id) {
      return err_set(msg, ERR_STATE, "body %u carries magnetic dipole %u (dipoles[%u])", id, i,
                     i);
    }
  }
  if (b->moved) {
    drop_slot(e->moved_bodies, &e->nmoved_body, slot);
  }
  mem_free(b->objects);
  mem_free(b->name);
  table_remove(&e->bodies, id);
  e->view_stale = 1;
  return 0;
}


static int remove_object(env_t* e, uint32_t id, err_msg_t* msg) {
  uint32_t slot = table_find(&e->objects, id);
  if (slot == TABLE_NONE) {
    return err_set(msg, ERR_NOTFOUND, "object %u not found", id);
  }
  env_object_t* o = table_at(&e->objects, slot);
  scene_remove_instance(e->scene, o->instance);

  // drop the references it held
  ((env_geometry_t*)table_get(&e->geometries, o->geometry_id))->nuser--;
  env_find_material(e, o->material_id)->nuser--;
  if (o->medium_id != 0) {
    env_find_medium(e, o->medium_id)->nuser--;
  }
  if (o->body_id != 0) {
    env_body_t* b = table_get(&e->bodies, o->body_id);
    drop_slot(b->objects, &b->nobject, slot);
  }
  mem_free(o->name);
  table_remove(&e->objects, id);
  e->dirty = 1;
  return 0;
}


static int remove_joint(env_t* e, uint32_t id, err_msg_t* msg) {
  uint32_t slot = table_find(&e->joints, id);
  if (slot == TABLE_NONE) {
    return err_set(msg, ERR_NOTFOUND, "joint %u not found", id);
  }
  env_joint_t* j = table_at(&e->joints, slot);
  if (j->nsensor > 0) {
    return err_set(msg, ERR_STATE, "joint %u is read by %u sensor(s)", id, j->nsensor);
  }
  if (j->moved) {
    drop_slot(e->moved_joints, &e->nmoved_joint, slot);
  }
  mem_free(j->name);
  table_remove(&e->joints, id);
  e->view_stale = 1;
  return 0;
}


int env_remove(env_t* e, env_entity_t kind, uint32_t id, err_msg_t* msg) {
  // id 0 is no geometry, object, joint or sensor (their creation refuses it): a caller's
  // mistake, not a missing entity. Material 0, medium 0 and body 0 say what they are below.
  static const char* const kReserved[] = {
      [ENV_ENTITY_GEOMETRY] = "geometry", [ENV_ENTITY_OBJECT] = "object",
      [ENV_ENTITY_JOINT] = "joint", [ENV_ENTITY_SENSOR] = "sensor"};
  if (id == 0 && (unsigned)kind < sizeof(kReserved) / sizeof(kReserved[0]) && kReserved[kind]) {
    return err_set(msg, ERR_INVAL, "id = 0 is reserved (%s ids are > 0)", kReserved[kind]);
  }
  switch (kind) {
    case ENV_ENTITY_GEOMETRY:
      return remove_geometry(e, id, msg);
    case ENV_ENTITY_MATERIAL:
      return remove_material(e, id, msg);
    case ENV_ENTITY_MEDIUM:
      return remove_medium(e, id, msg);
    case ENV_ENTITY_BODY:
      return remove_body(e, id, msg);
    case ENV_ENTITY_OBJECT:
      return remove_object(e, id, msg);
    case ENV_ENTITY_JOINT:
      return remove_joint(e, id, msg);
    case ENV_ENTITY_SENSOR:
      return env_remove_sensor(e, id, msg);
    default:
      return err_set(msg, ERR_INVAL, "kind = %d is not an entity kind", (int)kind);
  }
}
