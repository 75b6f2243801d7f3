// SPDX-License-Identifier: MIT
// mjbridge.c: MuJoCo's model and state onto bridge.h. The traps it takes care of: MuJoCo's
// quaternions are scalar first (sensimd's scalar last); mj_objectVelocity gives (angular,
// linear) and, for mjOBJ_BODY, at the centre of mass (mjOBJ_XBODY is the body frame, the point
// whose pose is sent); planes are rectangles seen from their front only; height fields keep
// their elevation normalised to [0, 1] (scaled here by size[2]); bodies welded to the world
// are static, mocap bodies and the bodies fixed under them are not.
#include "mjbridge.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PREFIX "sensim."

// One spec text: from the model's <custom><text> elements, or a side file's line.
typedef struct entry {
  const char* name;                 // without the "sensim." prefix: "sensor.lidar", "medium"
  const char* text;
} entry_t;

struct mjbridge {
  const mjModel* m;
  const mjData* d;
  bool* dynamic;                    // per MuJoCo body: a sensimd body of its own
  int* slot_body;                   // MuJoCo body of each bridge body slot
  int nslots;
  int* slot_qpos;                   // qpos address of each bridge joint slot
  int njslots;
  mjbridge_counts_t counts;
  uint32_t nsensors;
  char (*sensor_names)[SPEC_NAME_MAX];
  uint32_t* sensor_ids;

  // the specs, with the side file's copy they point into
  entry_t* entries;
  int nentries;
  char* side;
};


__attribute__((format(printf, 3, 4))) static void say(char* err, size_t cap, const char* fmt,
                                                     ...) {
  if (cap > 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
  }
}


static const char* name_of(const mjModel* m, int type, int id) {
  const char* n = mj_id2name(m, type, id);
  return n ? n : "";
}


// The id of a named object, or -1. An empty name is no name: mj_name2id would answer the
// first unnamed object of the type.
static int id_of(const mjModel* m, int type, const char* name) {
  return name[0] ? mj_name2id(m, type, name) : -1;
}


// MuJoCo's (w, x, y, z) into sensimd's (x, y, z, w).
static void quat_wlast(const mjtNum wxyz[4], double xyzw[4]) {
  xyzw[0] = wxyz[1];
  xyzw[1] = wxyz[2];
  xyzw[2] = wxyz[3];
  xyzw[3] = wxyz[0];
}


static void pose_from(const mjtNum pos[3], const mjtNum wxyz[4], sensim_pose_t* out) {
  memcpy(out->position, pos, 3 * sizeof(double));
  quat_wlast(wxyz, out->orientation);
}


// A world pose from a position and a rotation matrix (static geoms and sites).
static void pose_from_mat(const mjtNum pos[3], const mjtNum mat[9], sensim_pose_t* out) {
  mjtNum q[4];
  mju_mat2Quat(q, mat);
  pose_from(pos, q, out);
}

//---------------- Spec entries

static const entry_t* find_entry(const mjbridge_t* mb, const char* name) {
  for (int i = mb->nentries - 1; i >= 0; i--) {   // the side file's come last and win
    if (strcmp(mb->entries[i].name, name) == 0) {
      return &mb->entries[i];
    }
  }
  return NULL;
}


// The entry "KIND.NAME" (kind with its dot), without building the key: MuJoCo's names have no
// length limit.
static const entry_t* find_named(const mjbridge_t* mb, const char* kind, const char* name) {
  size_t nk = strlen(kind);
  for (int i = mb->nentries - 1; i >= 0; i--) {
    const char* n = mb->entries[i].name;
    if (strncmp(n, kind, nk) == 0 && strcmp(n + nk, name) == 0) {
      return &mb->entries[i];
    }
  }
  return NULL;
}


static bool add_entry(mjbridge_t* mb, int* cap, const char* name, const char* text) {
  if (mb->nentries == *cap) {
    int c = *cap ? 2 * *cap : 32;
    entry_t* e = realloc(mb->entries, (size_t)c * sizeof(*e));
    if (!e) {
      return false;
    }
    mb->entries = e;
    *cap = c;
  }
  mb->entries[mb->nentries++] = (entry_t){name, text};
  return true;
}


// Gather the sensim.* texts of the model, then the side file's lines.
static bool gather_entries(mjbridge_t* mb, const char* side, char* err, size_t err_cap) {
  const mjModel* m = mb->m;
  int cap = 0;
  size_t np = strlen(PREFIX);
  for (int i = 0; i < m->ntext; i++) {
    const char* name = m->names + m->name_textadr[i];
    if (strncmp(name, PREFIX, np) == 0 &&
        !add_entry(mb, &cap, name + np, m->text_data + m->text_adr[i])) {
      say(err, err_cap, "out of memory");
      return false;
    }
  }
  if (!side) {
    return true;
  }
  mb->side = strdup(side);
  if (!mb->side) {
    say(err, err_cap, "out of memory");
    return false;
  }
  char* save = NULL;
  for (char* line = strtok_r(mb->side, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    char* hash = strchr(line, '#');
    if (hash) {
      *hash = '\0';
    }
    char* name = line + strspn(line, " \t\r");
    if (!*name) {
      continue;
    }
    char* text = name + strcspn(name, " \t\r");
    if (*text) {
      *text++ = '\0';
    }
    if (strncmp(name, PREFIX, np) != 0) {
      say(err, err_cap, "side file: '%s' does not start with %s", name, PREFIX);
      return false;
    }
    if (!add_entry(mb, &cap, name + np, text)) {
      say(err, err_cap, "out of memory");
      return false;
    }
  }
  return true;
}


// Every entry is of a known kind and names something that exists.
static bool check_entries(const mjbridge_t* mb, char* err, size_t err_cap) {
  const mjModel* m = mb->m;
  for (int i = 0; i < mb->nentries; i++) {
    const char* n = mb->entries[i].name;
    if (strncmp(n, "sensor.", 7) == 0 && n[7]) {
      continue;
    }
    if (strcmp(n, "medium") == 0) {
      continue;
    }
    if (strncmp(n, "material.", 9) == 0) {
      if (id_of(m, mjOBJ_MATERIAL, n + 9) < 0) {
        say(err, err_cap, PREFIX "%s: the model has no material '%s'", n, n + 9);
        return false;
      }
      continue;
    }
    if (strncmp(n, "geom.", 5) == 0) {
      if (id_of(m, mjOBJ_GEOM, n + 5) < 0) {
        say(err, err_cap, PREFIX "%s: the model has no geom '%s'", n, n + 5);
        return false;
      }
      continue;
    }
    say(err, err_cap, PREFIX "%s: unknown kind (sensim.sensor.NAME, sensim.material.MATERIAL, "
                      "sensim.geom.GEOM, sensim.medium)", n);
    return false;
  }
  return true;
}

//---------------- The resolver of sensor specs

static bool resolve_frame(void* ctx, const char* name, uint32_t* body_id, sensim_pose_t* mount) {
  const mjbridge_t* mb = ctx;
  const mjModel* m = mb->m;
  int s = id_of(m, mjOBJ_SITE, name);
  if (s < 0) {
    return false;
  }
  int b = m->site_bodyid[s];
  if (mb->dynamic[b]) {
    *body_id = (uint32_t)b;
    pose_from(m->site_pos + 3 * s, m->site_quat + 4 * s, mount);
  } else {
    *body_id = 0;
    pose_from_mat(mb->d->site_xpos + 3 * s, mb->d->site_xmat + 9 * s, mount);
  }
  return true;
}


static bool resolve_joint(void* ctx, const char* name, uint32_t* joint_id, double* radius) {
  const mjbridge_t* mb = ctx;
  const mjModel* m = mb->m;
  int j = id_of(m, mjOBJ_JOINT, name);
  if (j < 0 || (m->jnt_type[j] != mjJNT_HINGE && m->jnt_type[j] != mjJNT_SLIDE)) {
    return false;
  }
  *joint_id = mjbridge_joint_id(j);

  // the wheel: the first round geom of the body the joint turns
  *radius = 0.0;
  int b = m->jnt_bodyid[j];
  for (int g = m->body_geomadr[b]; g >= 0 && g < m->body_geomadr[b] + m->body_geomnum[b];
       g++) {
    int t = m->geom_type[g];
    if (t == mjGEOM_CYLINDER || t == mjGEOM_SPHERE || t == mjGEOM_ELLIPSOID ||
        t == mjGEOM_CAPSULE) {
      *radius = m->geom_size[3 * g];
      break;
    }
  }
  return true;
}


static bool resolve_body(void* ctx, const char* name, uint32_t* body_id) {
  const mjbridge_t* mb = ctx;
  int b = id_of(mb->m, mjOBJ_BODY, name);
  if (b < 0 || !mb->dynamic[b]) {
    return false;
  }
  *body_id = (uint32_t)b;
  return true;
}

//---------------- Geometry

// The same rule as mj_ray: a geom whose colour (its material's, else its own) has alpha 0 is
// invisible.
static bool geom_visible(const mjModel* m, int g) {
  int mat = m->geom_matid[g];
  return mat >= 0 ? m->mat_rgba[4 * mat + 3] != 0.0f : m->geom_rgba[4 * g + 3] != 0.0f;
}


// The geometry of geom g: a primitive of its own, or the mesh or height field it shares, made
// once (*made: whether it exists, for a mesh or height field; NULL for the others).
static sensim_status_t geometry(mjbridge_t* mb, bridge_t* b, int g, bool* made,
                                uint32_t* geometry_id) {
  const mjModel* m = mb->m;
  const mjtNum* size = m->geom_size + 3 * g;
  sensim_primitive_t p;
  sensim_primitive_init(&p);
  p.id = (uint32_t)g + 1;
  p.name = name_of(m, mjOBJ_GEOM, g);
  *geometry_id = p.id;
  switch (m->geom_type[g]) {
    case mjGEOM_PLANE:
      p.shape = SENSIM_SHAPE_RECTANGLE;
      p.half_size_x = size[0];
      p.half_size_y = size[1];
      p.one_sided = true;
      break;
    case mjGEOM_SPHERE:
      p.shape = SENSIM_SHAPE_SPHERE;
      p.radius = size[0];
      break;
    case mjGEOM_CAPSULE:
      p.shape = SENSIM_SHAPE_CAPSULE;
      p.radius = size[0];
      p.half_length = size[1];
      break;
    case mjGEOM_ELLIPSOID:
      p.shape = SENSIM_SHAPE_ELLIPSOID;
      memcpy(p.radii, size, sizeof(p.radii));
      break;
    case mjGEOM_CYLINDER:
      p.shape = SENSIM_SHAPE_CYLINDER;
      p.radius = size[0];
      p.half_length = size[1];
      break;
    case mjGEOM_BOX:
      p.shape = SENSIM_SHAPE_BOX;
      memcpy(p.half_extents, size, sizeof(p.half_extents));
      break;
    case mjGEOM_MESH: {
      int k = m->geom_dataid[g];
      *geometry_id = (uint32_t)(m->ngeom + 1 + k);
      if (*made) {
        return SENSIM_OK;
      }
      int nface = m->mesh_facenum[k];
      uint32_t* idx = malloc((size_t)nface * 3 * sizeof(*idx));
      if (!idx) {
        return SENSIM_ENOMEM;
      }
      const int* face = m->mesh_face + 3 * m->mesh_faceadr[k];
      for (int i = 0; i < 3 * nface; i++) {
        idx[i] = (uint32_t)face[i];
      }
      sensim_mesh_t mesh;
      sensim_mesh_init(&mesh);
      mesh.id = *geometry_id;
      mesh.vertices = m->mesh_vert + 3 * m->mesh_vertadr[k];   // the geom frame: MuJoCo
      mesh.nvertices = (uint32_t)m->mesh_vertnum[k];          // moved them there
      mesh.indices = idx;
      mesh.ntriangles = (uint32_t)nface;
      mesh.name = name_of(m, mjOBJ_MESH, k);
      sensim_status_t st = bridge_mesh(b, &mesh);
      free(idx);
      if (st == SENSIM_OK) {
        *made = true;
        mb->counts.meshes++;
      }
      return st;
    }
    case mjGEOM_HFIELD: {
      int h = m->geom_dataid[g];
      *geometry_id = (uint32_t)(m->ngeom + m->nmesh + 1 + h);
      if (*made) {
        return SENSIM_OK;
      }
      const mjtNum* hs = m->hfield_size + 4 * h;
      int n = m->hfield_nrow[h] * m->hfield_ncol[h];
      float* z = malloc((size_t)n * sizeof(*z));
      if (!z) {
        return SENSIM_ENOMEM;
      }
      const float* data = m->hfield_data + m->hfield_adr[h];
      for (int i = 0; i < n; i++) {
        z[i] = (float)(data[i] * hs[2]);   // elevation: normalised data times size[2]
      }
      p.id = *geometry_id;
      p.name = name_of(m, mjOBJ_HFIELD, h);
      p.shape = SENSIM_SHAPE_HEIGHT_FIELD;
      p.rows = (uint32_t)m->hfield_nrow[h];
      p.columns = (uint32_t)m->hfield_ncol[h];
      p.heights = z;
      p.half_size_x = hs[0];
      p.half_size_y = hs[1];
      p.base_depth = hs[3];
      sensim_status_t st = bridge_primitive(b, &p);
      free(z);
      if (st == SENSIM_OK) {
        *made = true;
        mb->counts.height_fields++;
      }
      return st;
    }
    default:
      return SENSIM_UNIMPLEMENTED;   // MuJoCo's decorative types (arrows, lines) are no geoms
  }
  sensim_status_t st = bridge_primitive(b, &p);
  if (st == SENSIM_OK) {
    mb->counts.primitives++;
  }
  return st;
}


// Materials named by sensim.material.* entries: sensimd material id = MuJoCo's + 1.
static sensim_status_t materials(mjbridge_t* mb, bridge_t* b, uint32_t* labels, bool* labelled) {
  const mjModel* m = mb->m;
  for (int k = 0; k < m->nmat; k++) {
    const entry_t* e = find_named(mb, "material.", name_of(m, mjOBJ_MATERIAL, k));
    if (!e) {
      continue;
    }
    sensim_material_t mat;
    char err[256];
    if (spec_material_parse(e->text, &mat, &labels[k], &labelled[k], err, sizeof(err))) {
      labelled[k] = false;   // reported by bridge_material below
    }
    sensim_status_t st = bridge_material(b, (uint32_t)k + 1, name_of(m, mjOBJ_MATERIAL, k),
                                         e->text);
    if (st != SENSIM_OK) {
      return st;
    }
    mb->counts.materials++;
  }
  return SENSIM_OK;
}


static sensim_status_t objects(mjbridge_t* mb, bridge_t* b, char* err, size_t err_cap) {
  const mjModel* m = mb->m;
  const mjData* d = mb->d;
  sensim_status_t st = SENSIM_OK;
  bool* made = calloc((size_t)(m->nmesh + m->nhfield + 1), sizeof(*made));
  uint32_t* labels = calloc((size_t)m->nmat + 1, sizeof(*labels));
  bool* labelled = calloc((size_t)m->nmat + 1, sizeof(*labelled));
  bool* mapped = calloc((size_t)m->nmat + 1, sizeof(*mapped));
  if (!made || !labels || !labelled || !mapped) {
    st = SENSIM_ENOMEM;
    say(err, err_cap, "out of memory");
    goto done;
  }
  if ((st = materials(mb, b, labels, labelled)) != SENSIM_OK) {
    say(err, err_cap, "%s", bridge_last_error(b));
    goto done;
  }
  for (int k = 0; k < m->nmat; k++) {
    mapped[k] = find_named(mb, "material.", name_of(m, mjOBJ_MATERIAL, k)) != NULL;
  }

  for (int g = 0; g < m->ngeom; g++) {
    const char* gname = name_of(m, mjOBJ_GEOM, g);
    spec_geom_t over;
    memset(&over, 0, sizeof(over));
    if (gname[0]) {
      const entry_t* e = find_named(mb, "geom.", gname);
      char perr[256];
      if (e && spec_geom_parse(e->text, &over, perr, sizeof(perr))) {
        st = SENSIM_INVALID_ARGUMENT;
        say(err, err_cap, PREFIX "geom.%s: %s", gname, perr);
        goto done;
      }
    }
    if (over.skip || !geom_visible(m, g)) {
      mb->counts.skipped_geoms++;
      continue;
    }

    // the geometry: a primitive of its own, or its mesh or height field, made once
    int type = m->geom_type[g];
    bool* made_shared = type == mjGEOM_MESH     ? &made[m->geom_dataid[g]]
                      : type == mjGEOM_HFIELD   ? &made[m->nmesh + m->geom_dataid[g]]
                                                : NULL;
    uint32_t geometry_id = 0;
    st = geometry(mb, b, g, made_shared, &geometry_id);
    if (st == SENSIM_UNIMPLEMENTED) {
      mb->counts.skipped_geoms++;
      st = SENSIM_OK;
      continue;
    }
    if (st != SENSIM_OK) {
      say(err, err_cap, "geom %s: %s", gname[0] ? gname : "(unnamed)",
          st == SENSIM_ENOMEM ? "out of memory" : bridge_last_error(b));
      goto done;
    }

    // the object: on its body, or at its world pose on the static world
    sensim_object_t obj;
    sensim_object_init(&obj);
    obj.id = mjbridge_object_id(g);
    obj.geometry_id = geometry_id;
    obj.name = gname[0] ? gname : NULL;
    int body = m->geom_bodyid[g];
    if (mb->dynamic[body]) {
      obj.body_id = (uint32_t)body;
      pose_from(m->geom_pos + 3 * g, m->geom_quat + 4 * g, &obj.local_pose);
    } else {
      pose_from_mat(d->geom_xpos + 3 * g, d->geom_xmat + 9 * g, &obj.local_pose);
    }

    // material and label: the override's, else the MuJoCo material's mapping
    int mat = m->geom_matid[g];
    if (over.material[0]) {
      mat = id_of(m, mjOBJ_MATERIAL, over.material);
      if (mat < 0 || !mapped[mat]) {
        st = SENSIM_NOT_FOUND;
        say(err, err_cap, PREFIX "geom.%s: material '%s' has no sensim.material entry", gname,
            over.material);
        goto done;
      }
    }
    if (mat >= 0 && mapped[mat]) {
      obj.material_id = (uint32_t)mat + 1;
      obj.label = labelled[mat] ? labels[mat] : 0;
    }
    if (over.has_label) {
      obj.label = over.label;
    }
    int group = m->geom_group[g];
    obj.group = over.has_group ? over.group : (uint32_t)(group < 0 ? 0 : group > 31 ? 31 : group);
    if ((st = bridge_object(b, &obj)) != SENSIM_OK) {
      say(err, err_cap, "%s", bridge_last_error(b));
      goto done;
    }
    mb->counts.objects++;
  }
done:
  free(made);
  free(labels);
  free(labelled);
  free(mapped);
  return st;
}

//---------------- The mirror

mjbridge_t* mjbridge_create(bridge_t* b, const mjModel* m, const mjData* d, const char* side,
                            char* err, size_t err_cap) {
  mjbridge_t* mb = calloc(1, sizeof(*mb));
  if (!mb) {
    say(err, err_cap, "out of memory");
    return NULL;
  }
  mb->m = m;
  mb->d = d;
  mb->dynamic = calloc((size_t)m->nbody, sizeof(*mb->dynamic));
  mb->slot_body = calloc((size_t)m->nbody, sizeof(*mb->slot_body));
  mb->slot_qpos = calloc((size_t)m->njnt + 1, sizeof(*mb->slot_qpos));
  if (!mb->dynamic || !mb->slot_body || !mb->slot_qpos) {
    say(err, err_cap, "out of memory");
    goto fail;
  }
  if (!gather_entries(mb, side, err, err_cap) || !check_entries(mb, err, err_cap)) {
    goto fail;
  }

  // the environment: gravity and magnetic field from the model's options
  if (bridge_environment(b, m->opt.gravity, m->opt.magnetic) != SENSIM_OK) {
    say(err, err_cap, "%s", bridge_last_error(b));
    goto fail;
  }
  const entry_t* medium = find_entry(mb, "medium");
  if (medium && bridge_ambient(b, medium->text) != SENSIM_OK) {
    say(err, err_cap, "%s", bridge_last_error(b));
    goto fail;
  }

  // bodies: those welded to the world are static, the others move. MuJoCo counts a mocap
  // body and the bodies fixed under it as welded to the world (body_weldid 0), yet they
  // follow mocap_pos: a body moves if it has a joint, is mocap, or its parent moves (parents
  // come before their children)
  for (int k = 1; k < m->nbody; k++) {
    mb->dynamic[k] = m->body_weldid[k] != 0 || m->body_mocapid[k] >= 0 ||
                     mb->dynamic[m->body_parentid[k]];
    if (!mb->dynamic[k]) {
      continue;
    }
    sensim_body_t body;
    sensim_body_init(&body);
    body.id = (uint32_t)k;
    body.name = name_of(m, mjOBJ_BODY, k);
    pose_from(d->xpos + 3 * k, d->xquat + 4 * k, &body.pose);
    mjtNum v[6];
    mj_objectVelocity(m, d, mjOBJ_XBODY, k, v, 0);   // (angular, linear), world axes
    memcpy(body.linear_velocity, v + 3, sizeof(body.linear_velocity));
    memcpy(body.angular_velocity, v, sizeof(body.angular_velocity));
    memcpy(body.center_of_mass, m->body_ipos + 3 * k, sizeof(body.center_of_mass));
    if (bridge_body(b, &body, NULL) != SENSIM_OK) {
      say(err, err_cap, "%s", bridge_last_error(b));
      goto fail;
    }
    mb->slot_body[mb->nslots++] = k;
  }
  mb->counts.bodies = (uint32_t)mb->nslots;

  // hinge and slide joints (ball and free joints have no scalar position)
  for (int j = 0; j < m->njnt; j++) {
    int t = m->jnt_type[j];
    if (t != mjJNT_HINGE && t != mjJNT_SLIDE) {
      continue;
    }
    sensim_joint_t joint;
    sensim_joint_init(&joint);
    joint.id = mjbridge_joint_id(j);
    joint.type = t == mjJNT_HINGE ? SENSIM_JOINT_REVOLUTE : SENSIM_JOINT_PRISMATIC;
    joint.position = d->qpos[m->jnt_qposadr[j]];
    joint.name = name_of(m, mjOBJ_JOINT, j);
    if (bridge_joint(b, &joint, NULL) != SENSIM_OK) {
      say(err, err_cap, "%s", bridge_last_error(b));
      goto fail;
    }
    mb->slot_qpos[mb->njslots++] = m->jnt_qposadr[j];
  }
  mb->counts.joints = (uint32_t)mb->njslots;

  if (objects(mb, b, err, err_cap) != SENSIM_OK) {
    goto fail;
  }

  // sensors, in the order of their entries
  bridge_resolver_t res = {mb, resolve_frame, resolve_joint, resolve_body};
  for (int i = 0; i < mb->nentries; i++) {
    const entry_t* e = &mb->entries[i];
    if (strncmp(e->name, "sensor.", 7) != 0 || find_entry(mb, e->name) != e) {
      continue;   // not a sensor, or replaced by a later entry of the same name
    }
    const char* word = e->text + strspn(e->text, " \t\r\n");
    if (strncmp(word, "none", 4) == 0 && word[4 + strspn(word + 4, " \t\r\n")] == '\0') {
      continue;   // a side file's "sensim.sensor.NAME none" turns the model's sensor off
    }
    if (mb->nsensors % 16 == 0) {
      uint32_t c = mb->nsensors + 16;
      void* names = realloc(mb->sensor_names, c * sizeof(*mb->sensor_names));
      if (names) {
        mb->sensor_names = names;
      }
      uint32_t* ids = names ? realloc(mb->sensor_ids, c * sizeof(*ids)) : NULL;
      if (!ids) {
        say(err, err_cap, "out of memory");
        goto fail;
      }
      mb->sensor_ids = ids;
    }
    uint32_t id = 0;
    if (bridge_sensor(b, e->name + 7, e->text, &res, &id) != SENSIM_OK) {
      say(err, err_cap, PREFIX "%s: %s", e->name, bridge_last_error(b));
      goto fail;
    }
    snprintf(mb->sensor_names[mb->nsensors], SPEC_NAME_MAX, "%s", e->name + 7);
    mb->sensor_ids[mb->nsensors++] = id;
  }
  mb->counts.sensors = mb->nsensors;
  return mb;

fail:
  mjbridge_destroy(mb);
  return NULL;
}


void mjbridge_destroy(mjbridge_t* mb) {
  if (!mb) {
    return;
  }
  free(mb->dynamic);
  free(mb->slot_body);
  free(mb->slot_qpos);
  free(mb->sensor_names);
  free(mb->sensor_ids);
  free(mb->entries);
  free(mb->side);
  free(mb);
}


void mjbridge_state(const mjbridge_t* mb, const mjModel* m, const mjData* d, bridge_t* b) {
  double* pose = bridge_poses(b);
  double* vel = bridge_velocities(b);
  for (int i = 0; i < mb->nslots; i++) {
    int k = mb->slot_body[i];
    memcpy(pose + 7 * i, d->xpos + 3 * k, 3 * sizeof(double));
    quat_wlast(d->xquat + 4 * k, pose + 7 * i + 3);
    mjtNum v[6];
    mj_objectVelocity(m, d, mjOBJ_XBODY, k, v, 0);   // (angular, linear) at the body frame
    memcpy(vel + 6 * i, v + 3, 3 * sizeof(double));
    memcpy(vel + 6 * i + 3, v, 3 * sizeof(double));
  }
  double* q = bridge_joint_positions(b);
  for (int i = 0; i < mb->njslots; i++) {
    q[i] = d->qpos[mb->slot_qpos[i]];
  }
}


void mjbridge_counts(const mjbridge_t* mb, mjbridge_counts_t* out) {
  *out = mb->counts;
}


uint32_t mjbridge_sensor_id(const mjbridge_t* mb, const char* name) {
  for (uint32_t i = 0; i < mb->nsensors; i++) {
    if (strcmp(mb->sensor_names[i], name) == 0) {
      return mb->sensor_ids[i];
    }
  }
  return 0;
}


const char* mjbridge_sensor(const mjbridge_t* mb, uint32_t i, uint32_t* id) {
  *id = mb->sensor_ids[i];
  return mb->sensor_names[i];
}


bool mjbridge_frame(const mjbridge_t* mb, const char* site, uint32_t* body_id,
                    sensim_pose_t* mount) {
  return resolve_frame((void*)mb, site, body_id, mount);
}
