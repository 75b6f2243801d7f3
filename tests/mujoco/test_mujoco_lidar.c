// SPDX-License-Identifier: MIT
// test_mujoco_lidar.c: sensimd's lidar, on a model mirrored by the bridge, against MuJoCo's
// mj_ray on the same rays, for every geom type: plane (bounded, unbounded, one seen from
// behind), height field, sphere, capsule, ellipsoid, cylinder, box and mesh. The lidar fires a
// custom list of rays (azimuth x elevation grid) from a turned site, noise off, in a vacuum of
// refractive index 1 (its distance is then the geometric one); the shapes stand on the world
// and on a turned mocap body. For every ray both must agree on hit or miss and on the geom,
// and the distance:
//
//   analytic shapes (intersected in double by both):  |d_sensim - d_mujoco| <= 1e-4 m
//   meshes and height fields (float32 vertices):      <= 16 u L (1 + tan theta) + 1e-6 m
//
// with u = 2^-24, L the ray's origin distance from the world origin plus its length, theta
// the incidence angle (docs/backend.md, "Precision": the float32 traversal and vertices move
// a triangle's hit by a few u L, more at grazing incidence), within the lidar's 200 m range
// (mj_ray's hits beyond it count as misses). A ray on which the two disagree
// about hit, miss or geom is excused only where MuJoCo itself changes its answer when the ray
// turns by 1e-6 rad (it grazes an edge); there may be at most a handful of those. Rays above
// the step's horizon are misses without tracing (the shapes' bounds decide): they are
// compared like the others.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mjtest.h"

#define NAZ 1440                    // azimuths, 0.25 deg apart
#define NEL 121                     // elevations, 0.5 deg apart from -40 deg
#define NRAYS (NAZ * NEL)
#define EDGE_TURN 1e-6              // rad
#define RANGE 200.0                 // m, the lidar's range_max: its float32 distance keeps
                                    //   1e-4 m to there (half an ulp of 200 is 7.6e-6)

static const char kModel[] =
    "<mujoco><compiler angle='degree'/>"
    "<asset>"
    "  <hfield name='bumps' nrow='21' ncol='21' size='4 4 0.8 0.3'/>"
    "  <mesh name='wedge' vertex='-1.5 -1 0  1.5 -1 0  1.5 1 0  -1.5 1 0  1.5 -1 0.9  1.5 1 0.9'"
    "        face='0 2 1  0 3 2  0 1 4  3 5 2  1 2 5  1 5 4  0 4 5  0 5 3'/>"
    "  <mesh name='tetra' vertex='0 0 0  1.2 0 0  0 1.2 0  0 0 1.5'/>"
    "</asset>"
    "<worldbody>"
    "  <geom name='ground' type='plane' size='0 0 1'/>"
    "  <geom name='wall' type='plane' size='3 2 0.1' pos='-13 0 2' zaxis='1 0 0'/>"
    "  <geom name='backward' type='plane' size='4 4 0.1' pos='15 3 2' zaxis='1 0 0'/>"
    "  <geom name='behind' type='box' size='0.2 3 2' pos='17 3 2'/>"
    "  <geom name='terrain' type='hfield' hfield='bumps' pos='10 -9 0.02' euler='0 0 20'/>"
    "  <geom name='wedge' type='mesh' mesh='wedge' pos='-3 -9 0' euler='0 0 -30'/>"
    "  <site name='lidar' pos='0.3 -0.2 1.4' euler='4 -3 25'/>"
    "  <body name='rig' mocap='true' pos='0.5 -0.3 0.2' euler='3 -2 20'>"
    "    <geom name='ball' type='sphere' size='0.8' pos='6 3 1'/>"
    "    <geom name='pill' type='capsule' size='0.4 0.8' pos='5 -4 1' euler='30 20 0'/>"
    "    <geom name='egg' type='ellipsoid' size='1.2 0.6 0.4' pos='-5 5 1.2' euler='0 0 40'/>"
    "    <geom name='drum' type='cylinder' size='0.7 0.9' pos='-6 -3 1' euler='60 0 0'/>"
    "    <geom name='crate' type='box' size='0.6 1 0.8' pos='3 7 0.8' euler='0 15 25'/>"
    "    <geom name='tetra' type='mesh' mesh='tetra' pos='-8 1 0.3' euler='10 20 30'/>"
    "  </body>"
    "</worldbody></mujoco>";


static double norm3(const double* v) {
  return sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
}


// mj_ray from p along unit v within the lidar's range: distance (-1 = miss) and geom (-1).
static double mj_cast(const mjModel* m, const mjData* d, const double p[3], const double v[3],
                      int* geom) {
  double x = mj_ray(m, d, p, v, NULL, 1, -1, geom);
  if (x > RANGE) {
    *geom = -1;
    return -1.0;
  }
  return x;
}


// True when turning v by EDGE_TURN in any of four directions changes MuJoCo's answer (geom, or
// hit against miss): the ray grazes an edge or a silhouette.
static bool at_edge(const mjModel* m, const mjData* d, const double p[3], const double v[3]) {
  int g0;
  mj_cast(m, d, p, v, &g0);
  double a[3] = {-v[1], v[0], 0.0};
  if (norm3(a) < 1e-9) {
    a[0] = 1.0;
    a[1] = 0.0;
  }
  double b[3] = {v[1] * a[2] - v[2] * a[1], v[2] * a[0] - v[0] * a[2], v[0] * a[1] - v[1] * a[0]};
  double la = norm3(a), lb = norm3(b);
  for (int k = 0; k < 4; k++) {
    const double* e = k < 2 ? a : b;
    double len = k < 2 ? la : lb, sgn = k % 2 ? -1.0 : 1.0, w[3];
    for (int i = 0; i < 3; i++) {
      w[i] = v[i] + sgn * EDGE_TURN * e[i] / len;
    }
    double lw = norm3(w);
    for (int i = 0; i < 3; i++) {
      w[i] /= lw;
    }
    int g;
    mj_cast(m, d, p, w, &g);
    if (g != g0) {
      return true;
    }
  }
  return false;
}


static float f32_at(const uint8_t* p) {
  float v;
  memcpy(&v, p, 4);
  return v;
}


static uint32_t u32_at(const uint8_t* p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}


TEST(mujoco_lidar_against_mj_ray_on_every_geom_type) {
  mjModel* m = mjt_load(kModel, NULL);
  ASSERT_TRUE(m);

  // the height field's samples: bumps in [0.1, 1] (set after compiling, as MuJoCo allows)
  int hf = mj_name2id(m, mjOBJ_HFIELD, "bumps");
  int nr = m->hfield_nrow[hf], nc = m->hfield_ncol[hf];
  for (int r = 0; r < nr; r++) {
    for (int c = 0; c < nc; c++) {
      m->hfield_data[m->hfield_adr[hf] + r * nc + c] =
          (float)(0.55 + 0.45 * sin(0.9 * c) * cos(0.7 * r));
    }
  }
  mjData* d = mj_makeData(m);
  mj_forward(m, d);

  // the mirror, in a vacuum of refractive index 1, and the lidar: every ray at the frame's
  // start, each kept (NaN for a miss) in ray order
  mjt_rig_t rig;
  ASSERT_OK(mjt_rig_start(&rig, m, d,
                          "sensim.medium custom attenuation=0 refractive_index=1 "
                          "return_probability_scaling=0\n", NULL));
  static double az[NRAYS], el[NRAYS];
  for (int i = 0; i < NAZ; i++) {
    for (int j = 0; j < NEL; j++) {
      az[i * NEL + j] = (-180.0 + 0.25 * i + 0.123) * M_PI / 180.0;
      el[i * NEL + j] = (-40.0 + 0.5 * j + 0.0371) * M_PI / 180.0;
    }
  }
  spec_sensor_t* s = calloc(1, sizeof(*s));
  ASSERT_TRUE(s);
  s->kind = SPEC_LIDAR;
  sensim_sensor_init(&s->sensor);
  ASSERT_TRUE(mjbridge_frame(rig.mirror, "lidar", &s->sensor.body_id, &s->sensor.mount));
  ASSERT_EQ(s->sensor.body_id, 0);
  sensim_lidar_config_init(&s->lidar, SENSIM_PATTERN_CUSTOM);
  s->lidar.custom.azimuths = az;
  s->lidar.custom.elevations = el;
  s->lidar.custom.nrays = NRAYS;
  s->lidar.custom.frame_rate = 10.0;
  s->lidar.misses = SENSIM_MISSES_NAN;
  s->lidar.publish = SENSIM_PUBLISH_PER_STEP;
  s->lidar.range_min = 0.0;
  s->lidar.range_max = RANGE;
  static const char* const kFields[] = {"distance", "object_id", "normal"};
  s->lidar.fields = kFields;
  s->lidar.nfields = 3;
  uint32_t id = 0;
  ASSERT_OK_ST(rig.controller, bridge_sensor_spec(rig.bridge, "probe", s, &id));
  free(s);
  sensim_subscription_t sub;
  sensim_subscription_init(&sub);
  sub.sensor_id = id;
  ASSERT_OK_ST(rig.observer, sensim_subscribe(rig.observer, &sub));

  // one step
  mjbridge_state(rig.mirror, m, d, rig.bridge);
  ASSERT_OK_ST(rig.controller, bridge_begin(rig.bridge, d->time));
  mjt_physics_step(m, d, NULL);
  mjbridge_state(rig.mirror, m, d, rig.bridge);
  ASSERT_OK_ST(rig.controller, bridge_tick(rig.bridge, d->time));
  ASSERT_OK_ST(rig.controller, bridge_end(rig.bridge));
  const sensim_info_t* info = NULL;
  ASSERT_OK_ST(rig.controller, sensim_get_info(rig.controller, &info));
  uint64_t culled = 0;
  for (uint32_t i = 0; i < info->nenvironments; i++) {
    if (strcmp(info->environments[i].name, "mujoco") == 0) {
      culled = info->environments[i].counters.value[SENSIM_COUNTER_RAYS_CULLED];
    }
  }
  const sensim_sensor_data_t* rec = NULL;
  ASSERT_OK_ST(rig.observer, sensim_next_sensor_data(rig.observer, 20000, &rec));
  ASSERT_EQ(rec->kind, SENSIM_PAYLOAD_POINT_CLOUD);
  const sensim_point_cloud_t* pc = &rec->point_cloud;
  ASSERT_EQ(pc->count, NRAYS);
  ASSERT_EQ(pc->encoding, SENSIM_ENCODING_RAW);
  const sensim_point_field_t* fd = sensim_point_cloud_field(pc, "distance");
  const sensim_point_field_t* fo = sensim_point_cloud_field(pc, "object_id");
  const sensim_point_field_t* fn = sensim_point_cloud_field(pc, "normal");
  ASSERT_TRUE(fd && fo && fn);

  // the rays in the world: the site's pose from MuJoCo
  int site = mj_name2id(m, mjOBJ_SITE, "lidar");
  const double* p = d->site_xpos + 3 * site;
  const double* R = d->site_xmat + 9 * site;
  double origin_r = norm3(p);
  static const char* const kTypes[8] = {"plane",    "hfield",   "sphere", "capsule",
                                        "ellipsoid", "cylinder", "box",    "mesh"};
  int hits[8] = {0}, edges = 0, misses = 0;
  double worst[8] = {0}, worst_ratio[8] = {0};
  for (int k = 0; k < NRAYS; k++) {
    double dl[3] = {cos(el[k]) * cos(az[k]), cos(el[k]) * sin(az[k]), sin(el[k])}, v[3];
    for (int i = 0; i < 3; i++) {
      v[i] = R[3 * i] * dl[0] + R[3 * i + 1] * dl[1] + R[3 * i + 2] * dl[2];
    }
    int g = -1;
    double want = mj_cast(m, d, p, v, &g);
    const uint8_t* pt = (const uint8_t*)pc->data + (size_t)k * pc->point_step;
    double got = f32_at(pt + fd->offset);
    uint32_t obj = u32_at(pt + fo->offset);
    bool agree = (g < 0 && isnan(got) && obj == 0) ||
                 (g >= 0 && !isnan(got) && obj == mjbridge_object_id(g));
    if (!agree) {
      if (!at_edge(m, d, p, v)) {
        CHECK_FAIL("ray %d (az %.4f el %.4f): MuJoCo %s %d at %.9g, sensimd object %u at %.9g",
                   k, az[k], el[k], g >= 0 ? mj_id2name(m, mjOBJ_GEOM, g) : "miss", g, want,
                   obj, got);
      }
      edges++;
      continue;
    }
    if (g < 0) {
      misses++;
      continue;
    }

    // the tolerance of the geom's type
    int type = m->geom_type[g];
    double tol = 1e-4;
    if (type == mjGEOM_MESH || type == mjGEOM_HFIELD) {
      double nrm[3] = {f32_at(pt + fn->offset), f32_at(pt + fn->offset + 4),
                       f32_at(pt + fn->offset + 8)};
      double c = fabs(nrm[0] * dl[0] + nrm[1] * dl[1] + nrm[2] * dl[2]);   // sensor frame
      double tan_theta = c > 1e-3 ? sqrt(fmax(0.0, 1.0 - c * c)) / c : 1e3;
      tol = 16.0 * ldexp(1.0, -24) * (origin_r + want) * (1.0 + tan_theta) + 1e-6;
    }
    double err = fabs(got - want);
    if (err > tol) {
      CHECK_FAIL("ray %d on %s (%s): sensimd %.9g m, mj_ray %.9g m, |diff| %.3g > %.3g", k,
                 mj_id2name(m, mjOBJ_GEOM, g), kTypes[type], got, want, err, tol);
    }
    hits[type]++;
    worst[type] = fmax(worst[type], err);
    worst_ratio[type] = fmax(worst_ratio[type], err / tol);
  }

  // every type seen by many rays, few edges
  for (int t = 0; t < 8; t++) {
    fprintf(stderr, "# %-9s %6d rays, max |diff| %.3g m (%.2f of the tolerance)\n", kTypes[t],
            hits[t], worst[t], worst_ratio[t]);
    ASSERT_TRUE(hits[t] >= 500);
  }
  fprintf(stderr, "# %d misses, %d rays at edges (MuJoCo's answer changes within %g rad), "
                  "%llu rays culled above the horizon\n",
          misses, edges, EDGE_TURN, (unsigned long long)culled);
  ASSERT_TRUE(edges <= 50);
  ASSERT_TRUE(culled > 0);   // the horizon's bounds of these shapes were used, and held
  ASSERT_TRUE(misses > 10000);

  // the plane seen from behind is not seen: the box behind it is
  int behind = mj_name2id(m, mjOBJ_GEOM, "behind");
  double to_box[3] = {17.0 - p[0], 3.0 - p[1], 2.0 - p[2]};
  double lb = norm3(to_box);
  for (int i = 0; i < 3; i++) {
    to_box[i] /= lb;
  }
  int g = -1;
  mj_cast(m, d, p, to_box, &g);
  ASSERT_EQ(g, behind);
  mjt_rig_stop(&rig);
  mj_deleteData(d);
  mj_deleteModel(m);
  return 0;
}
