// SPDX-License-Identifier: MIT
// test_wire_env.c: the wire -> core translation puts every field where it belongs. Requests are
// built with protobuf-c, packed, decoded and run by wire_env_execute against a real
// environment; the result is read back through the core API (materials, media, magnetic field,
// raycasts, body poses), with values chosen distinct so that a swapped field shows.
#include "net/wire.h"

#include <math.h>
#include <string.h>

#include "base/mem.h"
#include "base/pool.h"
#include "check.h"
#include "net/wire_pb.h"
#include "world/env.h"
#include "world/env_impl.h"  // gravity, seed and freeze_objects have no getter in env.h

//---------------- Fixture

typedef struct fixture {
  scene_device_t* dev;
  env_t* e;
} fixture_t;


static int setup(fixture_t* f) {
  err_msg_t msg;
  f->dev = scene_device_create(&msg);
  if (!f->dev) {
    CHECK_FAIL("scene_device_create: %s", msg.text);
  }
  env_limits_t limits = env_default_limits();
  f->e = env_create("wire_env", &limits, f->dev, NULL, &msg);
  if (!f->e) {
    CHECK_FAIL("env_create: %s", msg.text);
  }
  return 0;
}


static void teardown(fixture_t* f) {
  env_destroy(f->e);
  scene_device_destroy(f->dev);
}


// Pack the request, decode it as the daemon does, execute it against e, and check that the
// reply decodes with the request's id and status OK.
static int execute_ok(env_t* e, Sensim__V1__Envelope* req) {
  static uint64_t next_id = 100;
  req->has_id = 1;
  req->id = next_id++;
  uint8_t* buf;
  size_t len;
  ASSERT_OK(wire_pack(req, &buf, &len));
  wire_request_t* r;
  err_msg_t msg;
  int rc = wire_decode(buf, len, &r, &msg);
  if (rc) {
    CHECK_FAIL("wire_decode: %s", msg.text);
  }
  uint8_t* out = NULL;
  size_t out_len = 0;
  int code = -1;
  ASSERT_OK(wire_env_execute(r, e, &out, &out_len, &code));
  Sensim__V1__Envelope* reply = sensim__v1__envelope__unpack(NULL, out_len, out);
  ASSERT_TRUE(reply != NULL);
  ASSERT_TRUE(reply->has_id);
  ASSERT_EQ(reply->id, req->id);
  ASSERT_TRUE(reply->status != NULL);
  if (reply->status->code != SENSIM__V1__STATUS_CODE__OK || code != 0) {
    CHECK_FAIL("%s: status %d (code %d): %s", wire_body_name(r), (int)reply->status->code,
               code, reply->status->message ? reply->status->message : "");
  }
  sensim__v1__envelope__free_unpacked(reply, NULL);
  mem_free(out);
  wire_free(r);
  mem_free(buf);
  return 0;
}


static Sensim__V1__Vec3 vec3(double x, double y, double z) {
  Sensim__V1__Vec3 v = SENSIM__V1__VEC3__INIT;
  v.has_x = v.has_y = v.has_z = 1;
  v.x = x;
  v.y = y;
  v.z = z;
  return v;
}


// Quaternion message from (w, x, y, z).
static Sensim__V1__Quat quat_wxyz(const double q[4]) {
  Sensim__V1__Quat m = SENSIM__V1__QUAT__INIT;
  m.has_w = m.has_x = m.has_y = m.has_z = 1;
  m.w = q[0];
  m.x = q[1];
  m.y = q[2];
  m.z = q[3];
  return m;
}


static int create_sphere(env_t* e, uint32_t id, double radius) {
  Sensim__V1__Sphere s = SENSIM__V1__SPHERE__INIT;
  s.has_radius = 1;
  s.radius = radius;
  Sensim__V1__CreatePrimitive p = SENSIM__V1__CREATE_PRIMITIVE__INIT;
  p.has_id = 1;
  p.id = id;
  p.shape_case = SENSIM__V1__CREATE_PRIMITIVE__SHAPE_SPHERE;
  p.sphere = &s;
  Sensim__V1__Envelope env = SENSIM__V1__ENVELOPE__INIT;
  env.body_case = SENSIM__V1__ENVELOPE__BODY_CREATE_PRIMITIVE;
  env.create_primitive = &p;
  return execute_ok(e, &env);
}


static int create_box(env_t* e, uint32_t id, double hx, double hy, double hz) {
  Sensim__V1__Vec3 h = vec3(hx, hy, hz);
  Sensim__V1__Box b = SENSIM__V1__BOX__INIT;
  b.half_extents = &h;
  Sensim__V1__CreatePrimitive p = SENSIM__V1__CREATE_PRIMITIVE__INIT;
  p.has_id = 1;
  p.id = id;
  p.shape_case = SENSIM__V1__CREATE_PRIMITIVE__SHAPE_BOX;
  p.box = &b;
  Sensim__V1__Envelope env = SENSIM__V1__ENVELOPE__INIT;
  env.body_case = SENSIM__V1__ENVELOPE__BODY_CREATE_PRIMITIVE;
  env.create_primitive = &p;
  return execute_ok(e, &env);
}


// A static object of geometry `geometry` with a material, everything else default.
static int create_object_with_material(env_t* e, uint32_t id, uint32_t geometry,
                                       uint32_t material) {
  Sensim__V1__CreateObject o = SENSIM__V1__CREATE_OBJECT__INIT;
  o.has_id = 1;
  o.id = id;
  o.has_geometry_id = 1;
  o.geometry_id = geometry;
  o.has_material_id = 1;
  o.material_id = material;
  Sensim__V1__Envelope env = SENSIM__V1__ENVELOPE__INIT;
  env.body_case = SENSIM__V1__ENVELOPE__BODY_CREATE_OBJECT;
  env.create_object = &o;
  return execute_ok(e, &env);
}

//---------------- Reference geometry (independent of the core's xform)

// Rotation matrix of the unit quaternion (w, x, y, z), row-major, active rotation.
static void ref_quat_mat(const double q[4], double r[9]) {
  double w = q[0], x = q[1], y = q[2], z = q[3];
  r[0] = 1 - 2 * (y * y + z * z);
  r[1] = 2 * (x * y - w * z);
  r[2] = 2 * (x * z + w * y);
  r[3] = 2 * (x * y + w * z);
  r[4] = 1 - 2 * (x * x + z * z);
  r[5] = 2 * (y * z - w * x);
  r[6] = 2 * (x * z - w * y);
  r[7] = 2 * (y * z + w * x);
  r[8] = 1 - 2 * (x * x + y * y);
}


// An oriented box: centre p, orientation q (w, x, y, z), half extents h (after scale).
typedef struct ref_box {
  double p[3];
  double q[4];
  double h[3];
} ref_box_t;


// Entry distance of the ray (o, unit d) into the box with half extents scaled by `grow`, or
// +inf. Origins are outside the box.
static double ref_box_hit(const ref_box_t* b, const double o[3], const double d[3],
                          double grow) {
  double r[9];
  ref_quat_mat(b->q, r);
  double ol[3], dl[3];
  for (int i = 0; i < 3; i++) {
    // local = R^T (world - p)
    ol[i] = r[i] * (o[0] - b->p[0]) + r[3 + i] * (o[1] - b->p[1]) + r[6 + i] * (o[2] - b->p[2]);
    dl[i] = r[i] * d[0] + r[3 + i] * d[1] + r[6 + i] * d[2];
  }
  double t0 = 0.0, t1 = INFINITY;
  for (int i = 0; i < 3; i++) {
    double h = b->h[i] * grow;
    if (fabs(dl[i]) < 1e-15) {
      if (fabs(ol[i]) > h) {
        return INFINITY;
      }
      continue;
    }
    double a = (-h - ol[i]) / dl[i];
    double c = (h - ol[i]) / dl[i];
    if (a > c) {
      double t = a;
      a = c;
      c = t;
    }
    t0 = fmax(t0, a);
    t1 = fmin(t1, c);
  }
  return t0 <= t1 ? t0 : INFINITY;
}


#define PROBE_MAX (7 * 81)

typedef struct probes {
  int n;
  double o[3 * PROBE_MAX];
  double d[3 * PROBE_MAX];
} probes_t;


// Rays at the box centre c from six sides (+-x, +-y, +-z) and along one diagonal, on a 9 x 9
// grid of offsets across [-span, span] in the two perpendicular axes, starting 20 m away.
static void make_probes(const double c[3], double span, probes_t* pr) {
  static const double dirs[7][3] = {{1, 0, 0}, {-1, 0, 0}, {0, 1, 0}, {0, -1, 0},
                                    {0, 0, 1}, {0, 0, -1}, {0.48, 0.6, 0.64}};
  pr->n = 0;
  for (int k = 0; k < 7; k++) {
    double d[3] = {dirs[k][0], dirs[k][1], dirs[k][2]};
    double dn = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
    for (int i = 0; i < 3; i++) {
      d[i] /= dn;
    }
    // two unit vectors perpendicular to d
    double a[3] = {fabs(d[0]) < 0.9 ? 1.0 : 0.0, fabs(d[0]) < 0.9 ? 0.0 : 1.0, 0.0};
    double u[3] = {d[1] * a[2] - d[2] * a[1], d[2] * a[0] - d[0] * a[2],
                   d[0] * a[1] - d[1] * a[0]};
    double un = sqrt(u[0] * u[0] + u[1] * u[1] + u[2] * u[2]);
    for (int i = 0; i < 3; i++) {
      u[i] /= un;
    }
    double v[3] = {d[1] * u[2] - d[2] * u[1], d[2] * u[0] - d[0] * u[2],
                   d[0] * u[1] - d[1] * u[0]};
    for (int i = 0; i < 9; i++) {
      for (int j = 0; j < 9; j++) {
        double s = span * (i - 4) / 4.0 + 0.013;
        double t = span * (j - 4) / 4.0 - 0.029;
        double* o = pr->o + 3 * pr->n;
        for (int m = 0; m < 3; m++) {
          o[m] = c[m] - 20.0 * d[m] + s * u[m] + t * v[m];
          pr->d[3 * pr->n + m] = d[m];
        }
        pr->n++;
      }
    }
  }
}


// Compare what env_raycast sees with the reference box: every ray whose outcome does not
// depend on a 0.1 % change of the box must agree (hit or miss, distance, object id, label).
// Returns the number of such hits in *nhit and of misses in *nmiss.
static int check_against_ref(env_t* e, const ref_box_t* b, uint32_t object_id, uint32_t label,
                             int* nhit, int* nmiss) {
  static probes_t pr;
  make_probes(b->p, 1.2 * fmax(b->h[0], fmax(b->h[1], b->h[2])), &pr);
  static scene_hit_t hits[PROBE_MAX];
  env_raycast_t rc = {.nray = (uint32_t)pr.n, .origins = pr.o, .directions = pr.d};
  err_msg_t msg;
  int r = env_raycast(e, &rc, hits, &msg);
  if (r) {
    CHECK_FAIL("env_raycast: %s", msg.text);
  }
  *nhit = *nmiss = 0;
  for (int i = 0; i < pr.n; i++) {
    const double* o = pr.o + 3 * i;
    const double* d = pr.d + 3 * i;
    double lo = ref_box_hit(b, o, d, 0.999);
    double hi = ref_box_hit(b, o, d, 1.001);
    if (isinf(lo) != isinf(hi)) {
      continue;  // grazes an edge
    }
    if (isinf(hi)) {
      if (!isinf(hits[i].distance)) {
        CHECK_FAIL("ray %d (%g %g %g)->(%g %g %g): expected a miss, got object %u at %g", i,
                   o[0], o[1], o[2], d[0], d[1], d[2], hits[i].object_id, hits[i].distance);
      }
      ++*nmiss;
      continue;
    }
    double t = ref_box_hit(b, o, d, 1.0);
    if (!(fabs(hits[i].distance - t) <= 1e-4 * fmax(1.0, t)) ||
        hits[i].object_id != object_id || hits[i].label != label) {
      CHECK_FAIL("ray %d (%g %g %g)->(%g %g %g): expected object %u label %u at %.9g, got "
                 "object %u label %u at %.9g", i, o[0], o[1], o[2], d[0], d[1], d[2],
                 object_id, label, t, hits[i].object_id, hits[i].label, hits[i].distance);
    }
    ++*nhit;
  }
  return 0;
}


// Number of probe rays whose outcome differs (definitely) between boxes a and b: shows that
// the probes tell a wrong orientation from the right one.
static int ref_disagreements(const ref_box_t* a, const ref_box_t* b) {
  static probes_t pr;
  make_probes(a->p, 1.2 * fmax(a->h[0], fmax(a->h[1], a->h[2])), &pr);
  int n = 0;
  for (int i = 0; i < pr.n; i++) {
    const double* o = pr.o + 3 * i;
    const double* d = pr.d + 3 * i;
    double ta = ref_box_hit(a, o, d, 1.0), tb = ref_box_hit(b, o, d, 1.0);
    if (isinf(ta) != isinf(tb) || (!isinf(ta) && fabs(ta - tb) > 1e-2)) {
      n++;
    }
  }
  return n;
}


static void normalize4(double q[4]) {
  double n = sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]);
  for (int i = 0; i < 4; i++) {
    q[i] /= n;
  }
}

//---------------- Materials

TEST(wire_env_two_layer_fields_reach_the_material) {
  fixture_t f;
  ASSERT_OK(setup(&f));
  Sensim__V1__TwoLayer t = SENSIM__V1__TWO_LAYER__INIT;
  t.has_refractive_index = 1;
  t.refractive_index = 1.7;          // n
  t.has_extinction_coefficient = 1;
  t.extinction_coefficient = 0.3;    // k
  t.has_specular_roughness = 1;
  t.specular_roughness = 0.21;       // sigma_B
  t.has_diffuse_reflectance = 1;
  t.diffuse_reflectance = 0.55;      // C
  t.has_diffuse_roughness = 1;
  t.diffuse_roughness = 0.42;        // sigma_ON
  Sensim__V1__SetMaterial m = SENSIM__V1__SET_MATERIAL__INIT;
  m.has_id = 1;
  m.id = 5;
  m.model_case = SENSIM__V1__SET_MATERIAL__MODEL_TWO_LAYER;
  m.two_layer = &t;
  m.name = "paint";
  Sensim__V1__Envelope env = SENSIM__V1__ENVELOPE__INIT;
  env.body_case = SENSIM__V1__ENVELOPE__BODY_SET_MATERIAL;
  env.set_material = &m;
  ASSERT_OK(execute_ok(f.e, &env));

  ASSERT_OK(create_sphere(f.e, 1, 1.0));
  ASSERT_OK(create_object_with_material(f.e, 50, 1, 5));
  const surface_material_t* s = env_hit_material(f.e, 50, 0);
  ASSERT_TRUE(s != NULL);
  ASSERT_EQ(s->kind, MATERIAL_TWO_LAYER);
  ASSERT_DEQ(s->n_re, 1.7);
  ASSERT_DEQ(s->n_im, 0.3);
  ASSERT_DEQ(s->sigma_b, 0.21);
  ASSERT_DEQ(s->reflectance, 0.55);
  ASSERT_DEQ(s->sigma_on, 0.42);

  // the default material is untouched
  ASSERT_OK(create_object_with_material(f.e, 51, 1, 0));
  s = env_hit_material(f.e, 51, 0);
  ASSERT_EQ(s->kind, MATERIAL_LAMBERTIAN);
  ASSERT_DEQ(s->reflectance, 0.8);
  teardown(&f);
  return 0;
}


TEST(wire_env_two_layer_absent_fields_take_the_documented_defaults) {
  fixture_t f;
  ASSERT_OK(setup(&f));
  Sensim__V1__TwoLayer t = SENSIM__V1__TWO_LAYER__INIT;
  t.has_diffuse_reflectance = 1;
  t.diffuse_reflectance = 0.25;
  Sensim__V1__SetMaterial m = SENSIM__V1__SET_MATERIAL__INIT;
  m.has_id = 1;
  m.id = 8;
  m.model_case = SENSIM__V1__SET_MATERIAL__MODEL_TWO_LAYER;
  m.two_layer = &t;
  Sensim__V1__Envelope env = SENSIM__V1__ENVELOPE__INIT;
  env.body_case = SENSIM__V1__ENVELOPE__BODY_SET_MATERIAL;
  env.set_material = &m;
  ASSERT_OK(execute_ok(f.e, &env));
  ASSERT_OK(create_sphere(f.e, 1, 1.0));
  ASSERT_OK(create_object_with_material(f.e, 50, 1, 8));
  const surface_material_t* s = env_hit_material(f.e, 50, 0);
  ASSERT_TRUE(s != NULL);
  ASSERT_EQ(s->kind, MATERIAL_TWO_LAYER);
  ASSERT_DEQ(s->n_re, 1.4517);
  ASSERT_DEQ(s->n_im, 0.0);
  ASSERT_DEQ(s->sigma_b, 0.3);
  ASSERT_DEQ(s->reflectance, 0.25);
  ASSERT_DEQ(s->sigma_on, 0.3);
  teardown(&f);
  return 0;
}


TEST(wire_env_lambertian_reflectance_reaches_the_material) {
  fixture_t f;
  ASSERT_OK(setup(&f));
  ASSERT_OK(create_sphere(f.e, 1, 1.0));
  const double values[2][2] = {{6, 0.37}, {0, 0.61}};  // material 6, and the default 0
  for (int i = 0; i < 2; i++) {
    Sensim__V1__Lambertian l = SENSIM__V1__LAMBERTIAN__INIT;
    l.has_reflectance = 1;
    l.reflectance = values[i][1];
    Sensim__V1__SetMaterial m = SENSIM__V1__SET_MATERIAL__INIT;
    m.has_id = 1;
    m.id = (uint32_t)values[i][0];
    m.model_case = SENSIM__V1__SET_MATERIAL__MODEL_LAMBERTIAN;
    m.lambertian = &l;
    Sensim__V1__Envelope env = SENSIM__V1__ENVELOPE__INIT;
    env.body_case = SENSIM__V1__ENVELOPE__BODY_SET_MATERIAL;
    env.set_material = &m;
    ASSERT_OK(execute_ok(f.e, &env));
  }
  ASSERT_OK(create_object_with_material(f.e, 60, 1, 6));
  ASSERT_OK(create_object_with_material(f.e, 61, 1, 0));
  const surface_material_t* s = env_hit_material(f.e, 60, 0);
  ASSERT_TRUE(s != NULL);
  ASSERT_EQ(s->kind, MATERIAL_LAMBERTIAN);
  ASSERT_DEQ(s->reflectance, 0.37);
  s = env_hit_material(f.e, 61, 0);
  ASSERT_TRUE(s != NULL);
  ASSERT_EQ(s->kind, MATERIAL_LAMBERTIAN);
  ASSERT_DEQ(s->reflectance, 0.61);
  teardown(&f);
  return 0;
}

//---------------- Media

static int set_custom_ambient(env_t* e, uint32_t id, const double v[6]) {
  Sensim__V1__AmbientMaterial a = SENSIM__V1__AMBIENT_MATERIAL__INIT;
  a.has_attenuation = 1;
  a.attenuation = v[0];
  a.has_refractive_index = 1;
  a.refractive_index = v[1];
  a.has_return_gamma_shape = 1;
  a.return_gamma_shape = v[2];
  a.has_return_gamma_scale = 1;
  a.return_gamma_scale = v[3];
  a.has_return_probability_scaling = 1;
  a.return_probability_scaling = v[4];
  a.has_atmospheric_backscatter = 1;
  a.atmospheric_backscatter = v[5];
  Sensim__V1__SetAmbient s = SENSIM__V1__SET_AMBIENT__INIT;
  s.has_id = 1;
  s.id = id;
  s.medium_case = SENSIM__V1__SET_AMBIENT__MEDIUM_CUSTOM;
  s.custom = &a;
  Sensim__V1__Envelope env = SENSIM__V1__ENVELOPE__INIT;
  env.body_case = SENSIM__V1__ENVELOPE__BODY_SET_AMBIENT;
  env.set_ambient = &s;
  return execute_ok(e, &env);
}


static int same_medium(const ambient_material_t* got, const ambient_material_t* want) {
  ASSERT_TRUE(got != NULL);
  ASSERT_DEQ(got->attenuation, want->attenuation);
  ASSERT_DEQ(got->refractive_index, want->refractive_index);
  ASSERT_DEQ(got->gamma_shape, want->gamma_shape);
  ASSERT_DEQ(got->gamma_scale, want->gamma_scale);
  ASSERT_DEQ(got->return_scaling, want->return_scaling);
  ASSERT_DEQ(got->backscatter, want->backscatter);
  return 0;
}


TEST(wire_env_custom_ambient_fields_reach_the_medium) {
  fixture_t f;
  ASSERT_OK(setup(&f));
  // attenuation, refractive index, gamma shape, gamma scale, return scaling, backscatter
  const double v0[6] = {0.011, 1.0123, 7.25, 0.61, 0.043, 0.27};
  const double v4[6] = {0.052, 1.33, 3.5, 0.18, 0.71, 0.09};
  ASSERT_OK(set_custom_ambient(f.e, 0, v0));
  ASSERT_OK(set_custom_ambient(f.e, 4, v4));
  ambient_material_t w0 = {.attenuation = 0.011, .refractive_index = 1.0123,
                           .gamma_shape = 7.25, .gamma_scale = 0.61, .return_scaling = 0.043,
                           .backscatter = 0.27};
  ambient_material_t w4 = {.attenuation = 0.052, .refractive_index = 1.33, .gamma_shape = 3.5,
                           .gamma_scale = 0.18, .return_scaling = 0.71, .backscatter = 0.09};
  ASSERT_OK(same_medium(env_get_medium(f.e, 0), &w0));
  ASSERT_OK(same_medium(env_get_medium(f.e, 4), &w4));
  teardown(&f);
  return 0;
}


TEST(wire_env_ambient_presets_use_their_own_formula_and_input) {
  fixture_t f;
  ASSERT_OK(setup(&f));
  err_msg_t msg;
  // Pairs with the same input, so that a preset sent to the wrong formula shows. (Fog below
  // 500 m visibility equals clear air: its wavelength exponent is 0 there.)
  ambient_material_t want[4], fog200;
  ASSERT_OK(ambient_clear_air(2000.0, &want[0], &msg));
  ASSERT_OK(ambient_fog(2000.0, &want[1], &msg));
  ASSERT_OK(ambient_rain(3.0, &want[2], &msg));
  ASSERT_OK(ambient_snow(3.0, &want[3], &msg));
  ASSERT_OK(ambient_fog(200.0, &fog200, &msg));

  Sensim__V1__ClearAir clear = SENSIM__V1__CLEAR_AIR__INIT;
  clear.has_visibility = 1;
  clear.visibility = 2000.0;
  Sensim__V1__Fog fog = SENSIM__V1__FOG__INIT;
  fog.has_visibility = 1;
  fog.visibility = 2000.0;
  Sensim__V1__Rain rain = SENSIM__V1__RAIN__INIT;
  rain.has_rate = 1;
  rain.rate = 3.0;
  Sensim__V1__Snow snow = SENSIM__V1__SNOW__INIT;
  snow.has_rate = 1;
  snow.rate = 3.0;
  for (uint32_t i = 0; i < 4; i++) {
    Sensim__V1__SetAmbient s = SENSIM__V1__SET_AMBIENT__INIT;
    s.has_id = 1;
    s.id = 10 + i;
    switch (i) {
      case 0:
        s.medium_case = SENSIM__V1__SET_AMBIENT__MEDIUM_CLEAR_AIR;
        s.clear_air = &clear;
        break;
      case 1:
        s.medium_case = SENSIM__V1__SET_AMBIENT__MEDIUM_FOG;
        s.fog = &fog;
        break;
      case 2:
        s.medium_case = SENSIM__V1__SET_AMBIENT__MEDIUM_RAIN;
        s.rain = &rain;
        break;
      default:
        s.medium_case = SENSIM__V1__SET_AMBIENT__MEDIUM_SNOW;
        s.snow = &snow;
        break;
    }
    Sensim__V1__Envelope env = SENSIM__V1__ENVELOPE__INIT;
    env.body_case = SENSIM__V1__ENVELOPE__BODY_SET_AMBIENT;
    env.set_ambient = &s;
    ASSERT_OK(execute_ok(f.e, &env));
  }
  for (uint32_t i = 0; i < 4; i++) {
    if (same_medium(env_get_medium(f.e, 10 + i), &want[i])) {
      CHECK_FAIL("medium %u (preset %u) differs from its preset", 10 + i, i);
    }
  }
  // the four presets differ from each other
  for (int i = 0; i < 4; i++) {
    for (int j = i + 1; j < 4; j++) {
      ASSERT_TRUE(want[i].attenuation != want[j].attenuation);
    }
  }

  // fog of visibility 200 m as the ambient medium (id 0)
  fog.visibility = 200.0;
  Sensim__V1__SetAmbient s = SENSIM__V1__SET_AMBIENT__INIT;
  s.medium_case = SENSIM__V1__SET_AMBIENT__MEDIUM_FOG;
  s.fog = &fog;
  Sensim__V1__Envelope env = SENSIM__V1__ENVELOPE__INIT;
  env.body_case = SENSIM__V1__ENVELOPE__BODY_SET_AMBIENT;
  env.set_ambient = &s;
  ASSERT_OK(execute_ok(f.e, &env));
  ASSERT_OK(same_medium(env_get_medium(f.e, 0), &fog200));
  ASSERT_OK(same_medium(env_get_medium(f.e, 11), &want[1]));  // medium 11 unchanged
  teardown(&f);
  return 0;
}

//---------------- Settings

// B0 + the analytic field of a dipole m at c, at point p (mu0 / 4 pi = 1e-7).
static void ref_field(const double b0[3], const double m[3], const double c[3],
                      const double p[3], double dest[3]) {
  double r[3] = {p[0] - c[0], p[1] - c[1], p[2] - c[2]};
  double rn = sqrt(r[0] * r[0] + r[1] * r[1] + r[2] * r[2]);
  double mu = (m[0] * r[0] + m[1] * r[1] + m[2] * r[2]) / rn;
  for (int i = 0; i < 3; i++) {
    dest[i] = b0[i] + 1e-7 * (3.0 * r[i] / rn * mu - m[i]) / (rn * rn * rn);
  }
}


static int field_is(env_t* e, const double p[3], const double want[3]) {
  double b[3];
  env_magnetic_field(e, p, b);
  for (int i = 0; i < 3; i++) {
    if (!(fabs(b[i] - want[i]) <= 1e-12 * fabs(want[i]) + 1e-20)) {
      CHECK_FAIL("field at (%g %g %g): component %d is %.17g, expected %.17g", p[0], p[1], p[2],
                 i, b[i], want[i]);
    }
  }
  return 0;
}


TEST(wire_env_settings_reach_gravity_field_and_dipoles) {
  fixture_t f;
  ASSERT_OK(setup(&f));
  const double b0[3] = {2.0e-5, -3.0e-6, 4.5e-5};
  const double m1[3] = {3.0, -4.0, 12.0};   // |m| = 13 A m^2
  const double c1[3] = {1.0, 2.0, 3.0};

  Sensim__V1__Vec3 g = vec3(1.5, -2.5, -9.1);
  Sensim__V1__Vec3 b = vec3(b0[0], b0[1], b0[2]);
  Sensim__V1__Vec3 dm = vec3(m1[0], m1[1], m1[2]);
  Sensim__V1__Vec3 dp = vec3(c1[0], c1[1], c1[2]);
  Sensim__V1__MagneticDipole d1 = SENSIM__V1__MAGNETIC_DIPOLE__INIT;
  d1.moment = &dm;
  d1.position = &dp;
  Sensim__V1__MagneticDipole* dips[1] = {&d1};
  Sensim__V1__SetEnvironment s = SENSIM__V1__SET_ENVIRONMENT__INIT;
  s.gravity = &g;
  s.magnetic_field = &b;
  s.n_dipoles = 1;
  s.dipoles = dips;
  s.has_replace_dipoles = 1;
  s.replace_dipoles = 1;
  s.has_seed = 1;
  s.seed = 0x123456789abcull;
  s.has_freeze_objects = 1;
  s.freeze_objects = 1;
  Sensim__V1__Envelope env = SENSIM__V1__ENVELOPE__INIT;
  env.body_case = SENSIM__V1__ENVELOPE__BODY_SET_ENVIRONMENT;
  env.set_environment = &s;
  ASSERT_OK(execute_ok(f.e, &env));

  ASSERT_DEQ(f.e->gravity[0], 1.5);
  ASSERT_DEQ(f.e->gravity[1], -2.5);
  ASSERT_DEQ(f.e->gravity[2], -9.1);
  ASSERT_TRUE(f.e->seed == 0x123456789abcull);
  ASSERT_EQ(f.e->freeze_objects, 1);

  // on the dipole's axis, r = 2 m: B = B0 + 2 m 1e-7 / r^3
  const double r = 2.0;
  double p[3], want[3];
  for (int i = 0; i < 3; i++) {
    p[i] = c1[i] + r * m1[i] / 13.0;
    want[i] = b0[i] + 2.0 * m1[i] * 1e-7 / (r * r * r);
  }
  ASSERT_OK(field_is(f.e, p, want));
  // on its equator (u = (4, 3, 0) / 5 is perpendicular to m): B = B0 - m 1e-7 / r^3
  for (int i = 0; i < 3; i++) {
    const double u[3] = {0.8, 0.6, 0.0};
    p[i] = c1[i] + r * u[i];
    want[i] = b0[i] - m1[i] * 1e-7 / (r * r * r);
  }
  ASSERT_OK(field_is(f.e, p, want));
  // anywhere else, the general formula
  const double q[3] = {-0.7, 3.1, 5.3};
  ref_field(b0, m1, c1, q, want);
  ASSERT_OK(field_is(f.e, q, want));

  // a dipole on a body: its position is in the body frame. The uniform field and gravity
  // stay, since this request does not set them.
  Sensim__V1__Vec3 bp = vec3(10.0, -5.0, 1.0);
  Sensim__V1__Pose bpose = SENSIM__V1__POSE__INIT;
  bpose.position = &bp;
  Sensim__V1__CreateBody cb = SENSIM__V1__CREATE_BODY__INIT;
  cb.has_id = 1;
  cb.id = 7;
  cb.pose = &bpose;
  Sensim__V1__Envelope envb = SENSIM__V1__ENVELOPE__INIT;
  envb.body_case = SENSIM__V1__ENVELOPE__BODY_CREATE_BODY;
  envb.create_body = &cb;
  ASSERT_OK(execute_ok(f.e, &envb));

  const double m2[3] = {0.0, 0.0, -8.0};
  Sensim__V1__Vec3 dm2 = vec3(m2[0], m2[1], m2[2]);
  Sensim__V1__Vec3 dp2 = vec3(0.0, 0.0, 1.0);
  Sensim__V1__MagneticDipole d2 = SENSIM__V1__MAGNETIC_DIPOLE__INIT;
  d2.moment = &dm2;
  d2.position = &dp2;
  d2.has_body_id = 1;
  d2.body_id = 7;
  Sensim__V1__MagneticDipole* dips2[1] = {&d2};
  Sensim__V1__SetEnvironment s2 = SENSIM__V1__SET_ENVIRONMENT__INIT;
  s2.n_dipoles = 1;
  s2.dipoles = dips2;
  s2.has_replace_dipoles = 1;
  s2.replace_dipoles = 1;
  env.set_environment = &s2;
  ASSERT_OK(execute_ok(f.e, &env));
  ASSERT_DEQ(f.e->gravity[0], 1.5);
  ASSERT_DEQ(f.e->gravity[2], -9.1);

  // the dipole is at (10, -5, 2) in the world; on its axis 2 m above
  const double p2[3] = {10.0, -5.0, 4.0};
  for (int i = 0; i < 3; i++) {
    want[i] = b0[i] + 2.0 * m2[i] * 1e-7 / 8.0;
  }
  ASSERT_OK(field_is(f.e, p2, want));
  // dipole 1 is gone: at its axis point only B0 and dipole 2 remain
  for (int i = 0; i < 3; i++) {
    p[i] = c1[i] + r * m1[i] / 13.0;
  }
  const double c2[3] = {10.0, -5.0, 2.0};
  ref_field(b0, m2, c2, p, want);
  ASSERT_OK(field_is(f.e, p, want));
  teardown(&f);
  return 0;
}

//---------------- Objects and state

TEST(wire_env_object_scale_pose_and_label_reach_the_scene) {
  fixture_t f;
  ASSERT_OK(setup(&f));
  ASSERT_OK(create_box(f.e, 1, 0.5, 0.5, 0.5));

  // object 9: unit box scaled (4, 1, 2) -> half extents (2, 0.5, 1), at (3, -1, 2), label 77
  Sensim__V1__Vec3 pos = vec3(3.0, -1.0, 2.0);
  Sensim__V1__Pose pose = SENSIM__V1__POSE__INIT;
  pose.position = &pos;
  Sensim__V1__Vec3 scale = vec3(4.0, 1.0, 2.0);
  Sensim__V1__CreateObject o = SENSIM__V1__CREATE_OBJECT__INIT;
  o.has_id = 1;
  o.id = 9;
  o.has_geometry_id = 1;
  o.geometry_id = 1;
  o.local_pose = &pose;
  o.scale = &scale;
  o.has_label = 1;
  o.label = 77;
  Sensim__V1__Envelope env = SENSIM__V1__ENVELOPE__INIT;
  env.body_case = SENSIM__V1__ENVELOPE__BODY_CREATE_OBJECT;
  env.create_object = &o;
  ASSERT_OK(execute_ok(f.e, &env));

  // box x in [1, 5], y in [-1.5, -0.5], z in [1, 3]
  const double orig[3][3] = {{3, -1, 10}, {-10, -1, 2}, {3, -10, 2}};
  const double dir[3][3] = {{0, 0, -1}, {1, 0, 0}, {0, 1, 0}};
  const double want[3] = {7.0, 11.0, 8.5};
  scene_hit_t hits[3];
  env_raycast_t rc = {.nray = 3, .origins = &orig[0][0], .directions = &dir[0][0]};
  err_msg_t msg;
  ASSERT_OK(env_raycast(f.e, &rc, hits, &msg));
  for (int i = 0; i < 3; i++) {
    ASSERT_NEAR(hits[i].distance, want[i], 1e-4);
    ASSERT_EQ(hits[i].object_id, 9);
    ASSERT_EQ(hits[i].label, 77);
  }

  // object 12: the same box turned by an orientation with four distinct components, far away
  double q[4] = {0.8, 0.1, -0.3, 0.5};  // (w, x, y, z)
  normalize4(q);
  Sensim__V1__Vec3 pos2 = vec3(-30.0, 20.0, 6.0);
  Sensim__V1__Quat ori2 = quat_wxyz(q);
  Sensim__V1__Pose pose2 = SENSIM__V1__POSE__INIT;
  pose2.position = &pos2;
  pose2.orientation = &ori2;
  o.id = 12;
  o.local_pose = &pose2;
  o.label = 31;
  ASSERT_OK(execute_ok(f.e, &env));
  ref_box_t box = {.p = {-30.0, 20.0, 6.0}, .q = {q[0], q[1], q[2], q[3]}, .h = {2, 0.5, 1}};
  int nhit, nmiss;
  ASSERT_OK(check_against_ref(f.e, &box, 12, 31, &nhit, &nmiss));
  ASSERT_TRUE(nhit >= 50);
  ASSERT_TRUE(nmiss >= 50);

  // the probes would notice a quaternion read in another order or the scale axes swapped
  ref_box_t wrong = box;
  const double xyzw_as_wxyz[4] = {q[1], q[2], q[3], q[0]};
  memcpy(wrong.q, xyzw_as_wxyz, sizeof(wrong.q));
  ASSERT_TRUE(ref_disagreements(&box, &wrong) >= 10);
  const double w_z_swapped[4] = {q[3], q[1], q[2], q[0]};
  memcpy(wrong.q, w_z_swapped, sizeof(wrong.q));
  ASSERT_TRUE(ref_disagreements(&box, &wrong) >= 10);
  wrong = box;
  wrong.h[0] = 0.5;
  wrong.h[1] = 2.0;
  ASSERT_TRUE(ref_disagreements(&box, &wrong) >= 10);
  teardown(&f);
  return 0;
}


TEST(wire_env_update_state_body_poses_are_px_py_pz_qx_qy_qz_qw) {
  fixture_t f;
  ASSERT_OK(setup(&f));
  ASSERT_OK(create_box(f.e, 1, 2.0, 0.5, 1.0));
  Sensim__V1__CreateBody cb = SENSIM__V1__CREATE_BODY__INIT;
  cb.has_id = 1;
  cb.id = 10;
  Sensim__V1__Envelope env = SENSIM__V1__ENVELOPE__INIT;
  env.body_case = SENSIM__V1__ENVELOPE__BODY_CREATE_BODY;
  env.create_body = &cb;
  ASSERT_OK(execute_ok(f.e, &env));
  Sensim__V1__CreateObject o = SENSIM__V1__CREATE_OBJECT__INIT;
  o.has_id = 1;
  o.id = 40;
  o.has_geometry_id = 1;
  o.geometry_id = 1;
  o.has_body_id = 1;
  o.body_id = 10;
  o.has_label = 1;
  o.label = 4;
  env.body_case = SENSIM__V1__ENVELOPE__BODY_CREATE_OBJECT;
  env.create_object = &o;
  ASSERT_OK(execute_ok(f.e, &env));

  double q[4] = {0.7, -0.2, 0.4, 0.55};  // (w, x, y, z), four distinct components
  normalize4(q);
  const double p[3] = {1.5, -2.0, 3.25};
  uint32_t ids[1] = {10};
  double poses[7] = {p[0], p[1], p[2], q[1], q[2], q[3], q[0]};  // wire: px py pz qx qy qz qw
  Sensim__V1__UpdateState u = SENSIM__V1__UPDATE_STATE__INIT;
  u.has_time = 1;
  u.time = 0.5;
  u.n_body_ids = 1;
  u.body_ids = ids;
  u.n_body_poses = 7;
  u.body_poses = poses;
  env.body_case = SENSIM__V1__ENVELOPE__BODY_UPDATE_STATE;
  env.update_state = &u;
  ASSERT_OK(execute_ok(f.e, &env));

  // the core holds (w, x, y, z)
  pose_t got;
  ASSERT_OK(env_body_pose(f.e, 10, 1.0, &got));
  for (int i = 0; i < 3; i++) {
    ASSERT_NEAR(got.p[i], p[i], 1e-12);
  }
  double sign = got.q[0] * q[0] >= 0 ? 1.0 : -1.0;
  for (int i = 0; i < 4; i++) {
    ASSERT_NEAR(sign * got.q[i], q[i], 1e-12);
  }

  // and rays see the box turned that way
  ref_box_t box = {.p = {p[0], p[1], p[2]}, .q = {q[0], q[1], q[2], q[3]}, .h = {2, 0.5, 1}};
  int nhit, nmiss;
  ASSERT_OK(check_against_ref(f.e, &box, 40, 4, &nhit, &nmiss));
  ASSERT_TRUE(nhit >= 50);
  ASSERT_TRUE(nmiss >= 50);
  ref_box_t wrong = box;
  const double wire_read_as_wxyz[4] = {q[1], q[2], q[3], q[0]};
  memcpy(wrong.q, wire_read_as_wxyz, sizeof(wrong.q));
  ASSERT_TRUE(ref_disagreements(&box, &wrong) >= 10);
  teardown(&f);
  return 0;
}

//---------------- Bulk arrays in the bytes form

// Pack, decode and execute req against e; *reply receives the decoded reply (free with
// sensim__v1__envelope__free_unpacked) and *code the internal outcome.
static int execute_reply(env_t* e, Sensim__V1__Envelope* req, Sensim__V1__Envelope** reply,
                         int* code) {
  static uint64_t next_id = 5000;
  req->has_id = 1;
  req->id = next_id++;
  uint8_t* buf;
  size_t len;
  ASSERT_OK(wire_pack(req, &buf, &len));
  wire_request_t* r;
  err_msg_t msg;
  if (wire_decode(buf, len, &r, &msg)) {
    CHECK_FAIL("wire_decode: %s", msg.text);
  }
  uint8_t* out = NULL;
  size_t out_len = 0;
  ASSERT_OK(wire_env_execute(r, e, &out, &out_len, code));
  *reply = sensim__v1__envelope__unpack(NULL, out_len, out);
  ASSERT_TRUE(*reply != NULL);
  ASSERT_EQ((*reply)->id, req->id);
  ASSERT_TRUE((*reply)->status != NULL);
  mem_free(out);
  wire_free(r);
  mem_free(buf);
  return 0;
}


// execute_reply for a request that must succeed (internal code 0).
static int execute_reply_ok(env_t* e, Sensim__V1__Envelope* req, Sensim__V1__Envelope** reply) {
  int code;
  ASSERT_OK(execute_reply(e, req, reply, &code));
  ASSERT_EQ(code, 0);
  return 0;
}


// Execute req and expect INVALID_ARGUMENT whose message contains want.
static int execute_refused(env_t* e, Sensim__V1__Envelope* req, const char* want) {
  Sensim__V1__Envelope* reply;
  int code;
  ASSERT_OK(execute_reply(e, req, &reply, &code));
  ASSERT_EQ(code, ERR_INVAL);
  ASSERT_EQ(reply->status->code, SENSIM__V1__STATUS_CODE__INVALID_ARGUMENT);
  ASSERT_EQ(reply->body_case, SENSIM__V1__ENVELOPE__BODY__NOT_SET);
  ASSERT_CONTAINS(reply->status->message, want);
  sensim__v1__envelope__free_unpacked(reply, NULL);
  return 0;
}


static ProtobufCBinaryData bin(const void* data, size_t len) {
  ProtobufCBinaryData b = {len, (uint8_t*)data};
  return b;
}


// A sphere of radius 2 at the origin as object 5 with label 23.
static int sphere_scene(env_t* e) {
  ASSERT_OK(create_sphere(e, 1, 2.0));
  Sensim__V1__CreateObject o = SENSIM__V1__CREATE_OBJECT__INIT;
  o.has_id = o.has_geometry_id = o.has_label = 1;
  o.id = 5;
  o.geometry_id = 1;
  o.label = 23;
  Sensim__V1__Envelope env = SENSIM__V1__ENVELOPE__INIT;
  env.body_case = SENSIM__V1__ENVELOPE__BODY_CREATE_OBJECT;
  env.create_object = &o;
  return execute_ok(e, &env);
}


// Three rays at the sphere of radius 2: along x through the centre (distance 8, normal -x), along
// y at height 0.5 (distance 10 - sqrt(3.75), normal (0, -sqrt(3.75), 0.5) / 2), and a miss.
#define NRAY 3
static const double g_org[NRAY][3] = {{-10, 0, 0}, {0, -10, 0.5}, {0, 0, 10}};
static const double g_dir[NRAY][3] = {{1, 0, 0}, {0, 1, 0}, {1, 0, 0}};


static int check_sphere_hit(double distance, const double normal[3], uint32_t object_id,
                            uint32_t label, int i) {
  const double s = sqrt(3.75);
  const double want_d[NRAY] = {8.0, 10.0 - s, INFINITY};
  const double want_n[NRAY][3] = {{-1, 0, 0}, {0, -s / 2, 0.25}, {0, 0, 0}};
  if (i == 2) {
    ASSERT_TRUE(isinf(distance) && distance > 0);
    ASSERT_EQ(object_id, 0);
  } else {
    ASSERT_NEAR(distance, want_d[i], 1e-5);
    ASSERT_EQ(object_id, 5);
    ASSERT_EQ(label, 23);
  }
  for (int k = 0; k < 3; k++) {
    ASSERT_NEAR(normal[k], want_n[i][k], 1e-5);
  }
  return 0;
}


TEST(wire_env_raycast_bytes_form_answers_hit_records_equal_to_the_arrays) {
  fixture_t f;
  ASSERT_OK(setup(&f));
  ASSERT_OK(sphere_scene(f.e));

  // the packed form: four arrays, no records
  Sensim__V1__Raycast rc = SENSIM__V1__RAYCAST__INIT;
  rc.n_origins = rc.n_directions = 3 * NRAY;
  rc.origins = (double*)&g_org[0][0];
  rc.directions = (double*)&g_dir[0][0];
  Sensim__V1__Envelope env = SENSIM__V1__ENVELOPE__INIT;
  env.body_case = SENSIM__V1__ENVELOPE__BODY_RAYCAST;
  env.raycast = &rc;
  Sensim__V1__Envelope* arrays;
  ASSERT_OK(execute_reply_ok(f.e, &env, &arrays));
  const Sensim__V1__RaycastResult* a = arrays->raycast_result;
  ASSERT_TRUE(a != NULL);
  ASSERT_TRUE(!a->has_hits_bytes);
  ASSERT_EQ(a->n_distances, NRAY);
  ASSERT_EQ(a->n_normals, 3 * NRAY);

  // the bytes form (built from a buffer at an odd address: the bytes carry no alignment)
  uint8_t raw[2 * sizeof(g_org) + 1];
  memcpy(raw + 1, g_org, sizeof(g_org));
  memcpy(raw + 1 + sizeof(g_org), g_dir, sizeof(g_dir));
  Sensim__V1__Raycast rb = SENSIM__V1__RAYCAST__INIT;
  rb.has_origins_bytes = rb.has_directions_bytes = 1;
  rb.origins_bytes = bin(raw + 1, sizeof(g_org));
  rb.directions_bytes = bin(raw + 1 + sizeof(g_org), sizeof(g_dir));
  env.raycast = &rb;
  Sensim__V1__Envelope* records;
  ASSERT_OK(execute_reply_ok(f.e, &env, &records));
  const Sensim__V1__RaycastResult* b = records->raycast_result;
  ASSERT_TRUE(b != NULL);
  ASSERT_EQ(b->n_distances, 0);
  ASSERT_EQ(b->n_object_ids, 0);
  ASSERT_EQ(b->n_labels, 0);
  ASSERT_EQ(b->n_normals, 0);
  ASSERT_TRUE(b->has_hits_bytes);
  ASSERT_EQ(b->hits_bytes.len, 48 * NRAY);

  // each record: analytic truth, and the same bits as the arrays
  static const uint8_t zero[8];
  for (int i = 0; i < NRAY; i++) {
    const uint8_t* rec = b->hits_bytes.data + 48 * i;
    double distance, normal[3];
    uint32_t ids[2];
    memcpy(&distance, rec, 8);
    memcpy(normal, rec + 8, 24);
    memcpy(ids, rec + 32, 8);
    ASSERT_OK(check_sphere_hit(distance, normal, ids[0], ids[1], i));
    ASSERT_MEM_EQ(rec, &a->distances[i], 8);
    ASSERT_MEM_EQ(rec + 8, &a->normals[3 * i], 24);
    ASSERT_MEM_EQ(rec + 32, &a->object_ids[i], 4);
    ASSERT_MEM_EQ(rec + 36, &a->labels[i], 4);
    ASSERT_MEM_EQ(rec + 40, zero, 8);
  }
  sensim__v1__envelope__free_unpacked(arrays, NULL);
  sensim__v1__envelope__free_unpacked(records, NULL);

  // one array in each form is the bytes form too
  Sensim__V1__Raycast rm = SENSIM__V1__RAYCAST__INIT;
  rm.n_origins = 3 * NRAY;
  rm.origins = (double*)&g_org[0][0];
  rm.has_directions_bytes = 1;
  rm.directions_bytes = bin(g_dir, sizeof(g_dir));
  env.raycast = &rm;
  Sensim__V1__Envelope* mixed;
  ASSERT_OK(execute_reply_ok(f.e, &env, &mixed));
  ASSERT_TRUE(mixed->raycast_result->has_hits_bytes);
  ASSERT_EQ(mixed->raycast_result->hits_bytes.len, 48 * NRAY);
  ASSERT_EQ(mixed->raycast_result->n_distances, 0);
  sensim__v1__envelope__free_unpacked(mixed, NULL);

  // no rays in the bytes form: an empty record array
  Sensim__V1__Raycast r0 = SENSIM__V1__RAYCAST__INIT;
  r0.has_origins_bytes = r0.has_directions_bytes = 1;
  env.raycast = &r0;
  Sensim__V1__Envelope* none;
  ASSERT_OK(execute_reply_ok(f.e, &env, &none));
  ASSERT_TRUE(none->raycast_result->has_hits_bytes);
  ASSERT_EQ(none->raycast_result->hits_bytes.len, 0);
  sensim__v1__envelope__free_unpacked(none, NULL);
  teardown(&f);
  return 0;
}


// Sphere 1 (radius 2) as object 5 on body 3, which moves along +x from x = 0 at t = 1 to
// x = 2 at t = 3 (the state after a step at t = 1 and an update at t = 3).
static int moving_sphere(env_t* e) {
  ASSERT_OK(create_sphere(e, 1, 2.0));
  Sensim__V1__CreateBody cb = SENSIM__V1__CREATE_BODY__INIT;
  cb.has_id = 1;
  cb.id = 3;
  Sensim__V1__Envelope env = SENSIM__V1__ENVELOPE__INIT;
  env.body_case = SENSIM__V1__ENVELOPE__BODY_CREATE_BODY;
  env.create_body = &cb;
  ASSERT_OK(execute_ok(e, &env));
  Sensim__V1__CreateObject o = SENSIM__V1__CREATE_OBJECT__INIT;
  o.has_id = o.has_geometry_id = o.has_body_id = 1;
  o.id = 5;
  o.geometry_id = 1;
  o.body_id = 3;
  env.body_case = SENSIM__V1__ENVELOPE__BODY_CREATE_OBJECT;
  env.create_object = &o;
  ASSERT_OK(execute_ok(e, &env));

  const uint32_t ids[1] = {3};
  const double p0[7] = {0, 0, 0, 0, 0, 0, 1}, p1[7] = {2, 0, 0, 0, 0, 0, 1};
  Sensim__V1__UpdateState u = SENSIM__V1__UPDATE_STATE__INIT;
  u.has_time = u.has_body_ids_bytes = u.has_body_poses_bytes = 1;
  u.time = 1.0;
  u.body_ids_bytes = bin(ids, sizeof(ids));
  u.body_poses_bytes = bin(p0, sizeof(p0));
  env.body_case = SENSIM__V1__ENVELOPE__BODY_UPDATE_STATE;
  env.update_state = &u;
  ASSERT_OK(execute_ok(e, &env));
  Sensim__V1__Step st = SENSIM__V1__STEP__INIT;
  st.has_time = 1;
  st.time = 1.0;
  env.body_case = SENSIM__V1__ENVELOPE__BODY_STEP;
  env.step = &st;
  ASSERT_OK(execute_ok(e, &env));
  u.time = 3.0;
  u.body_poses_bytes = bin(p1, sizeof(p1));
  env.body_case = SENSIM__V1__ENVELOPE__BODY_UPDATE_STATE;
  env.update_state = &u;  // the body is a union: the step took its place
  ASSERT_OK(execute_ok(e, &env));
  return 0;
}


TEST(wire_env_raycast_bytes_times_select_the_instant) {
  // a body moving along +x from x = 0 at t = 1 to x = 2 at t = 3 carries the sphere
  fixture_t f;
  ASSERT_OK(setup(&f));
  ASSERT_OK(moving_sphere(f.e));
  Sensim__V1__Envelope env = SENSIM__V1__ENVELOPE__INIT;
  // two rays from x = -10 along +x at t = 1.5 and t = 2.5: the sphere's centre is at
  // x = t - 1, its near side 2 m before
  const double org[2][3] = {{-10, 0, 0}, {-10, 0, 0}}, dir[2][3] = {{1, 0, 0}, {1, 0, 0}};
  const double times[2] = {1.5, 2.5};
  Sensim__V1__Raycast rb = SENSIM__V1__RAYCAST__INIT;
  rb.has_origins_bytes = rb.has_directions_bytes = rb.has_times_bytes = 1;
  rb.origins_bytes = bin(org, sizeof(org));
  rb.directions_bytes = bin(dir, sizeof(dir));
  rb.times_bytes = bin(times, sizeof(times));
  env.body_case = SENSIM__V1__ENVELOPE__BODY_RAYCAST;
  env.raycast = &rb;
  Sensim__V1__Envelope* reply;
  ASSERT_OK(execute_reply_ok(f.e, &env, &reply));
  ASSERT_EQ(reply->raycast_result->hits_bytes.len, 96);
  for (int i = 0; i < 2; i++) {
    double d;
    memcpy(&d, reply->raycast_result->hits_bytes.data + 48 * i, 8);
    ASSERT_NEAR(d, 10.0 + (times[i] - 1.0) - 2.0, 1e-5);
  }
  sensim__v1__envelope__free_unpacked(reply, NULL);
  teardown(&f);
  return 0;
}


// A reply's hits_bytes, checked to hold n records.
static const uint8_t* reply_hits(const Sensim__V1__Envelope* reply, size_t n) {
  const Sensim__V1__RaycastResult* r = reply->raycast_result;
  return r && r->has_hits_bytes && r->hits_bytes.len == 48 * n ? r->hits_bytes.data : NULL;
}


TEST(wire_env_raycast_one_origin_answers_the_hits_of_the_origin_per_ray_bit_for_bit) {
  fixture_t f;
  ASSERT_OK(setup(&f));
  ASSERT_OK(moving_sphere(f.e));

  // 3001 rays (the tracer's batches and work items end inside them) in a fan around +x from
  // one point, each at its own time in [1, 3]
  enum { N = 3001, COLS = 61 };
  static double org[N][3], dir[N][3], times[N];
  const double at[3] = {-10.0, 0.25, -0.125};
  for (int i = 0; i < N; i++) {
    memcpy(org[i], at, sizeof(at));
    dir[i][0] = 1.0;
    dir[i][1] = 0.01 * (i % COLS - COLS / 2);
    dir[i][2] = 0.01 * (i / COLS - 25);
    times[i] = 1.0 + 2.0 * i / (N - 1);
  }
  Sensim__V1__Raycast per_ray = SENSIM__V1__RAYCAST__INIT;
  per_ray.has_origins_bytes = per_ray.has_directions_bytes = per_ray.has_times_bytes = 1;
  per_ray.origins_bytes = bin(org, sizeof(org));
  per_ray.directions_bytes = bin(dir, sizeof(dir));
  per_ray.times_bytes = bin(times, sizeof(times));
  Sensim__V1__Vec3 origin = SENSIM__V1__VEC3__INIT;
  origin.has_x = origin.has_y = origin.has_z = 1;
  origin.x = at[0];
  origin.y = at[1];
  origin.z = at[2];
  Sensim__V1__Raycast shared = per_ray;
  shared.has_origins_bytes = 0;
  shared.origins_bytes = bin(NULL, 0);
  shared.origin = &origin;
  Sensim__V1__Envelope env = SENSIM__V1__ENVELOPE__INIT;
  env.body_case = SENSIM__V1__ENVELOPE__BODY_RAYCAST;
  Sensim__V1__Envelope *a, *b;
  int code_a, code_b;
  env.raycast = &per_ray;
  ASSERT_OK(execute_reply(f.e, &env, &a, &code_a));
  env.raycast = &shared;
  ASSERT_OK(execute_reply(f.e, &env, &b, &code_b));
  ASSERT_EQ(code_a, 0);
  ASSERT_EQ(code_b, 0);
  const uint8_t* ha = reply_hits(a, N);
  const uint8_t* hb = reply_hits(b, N);
  ASSERT_TRUE(ha && hb);
  ASSERT_MEM_EQ(ha, hb, 48 * (size_t)N);

  // truth: the fan's central ray meets the sphere (centre x = t - 1) at its near side; about
  // a third of the fan meets the sphere
  const int mid = 25 * COLS + COLS / 2;
  double d;
  memcpy(&d, hb + 48 * mid, 8);
  ASSERT_NEAR(d, 10.0 + (times[mid] - 1.0) - sqrt(4.0 - at[1] * at[1] - at[2] * at[2]), 1e-5);
  int hit = 0;
  for (int i = 0; i < N; i++) {
    memcpy(&d, hb + 48 * i, 8);
    hit += isfinite(d) != 0;
  }
  ASSERT_TRUE(hit > N / 5 && hit < N / 2);
  sensim__v1__envelope__free_unpacked(a, NULL);
  sensim__v1__envelope__free_unpacked(b, NULL);

  // the packed directions with one origin: the four arrays, the same values
  Sensim__V1__Raycast packed = SENSIM__V1__RAYCAST__INIT;
  packed.n_directions = 3 * 4;
  packed.directions = &dir[mid][0];
  packed.origin = &origin;
  env.raycast = &packed;
  ASSERT_OK(execute_reply(f.e, &env, &a, &code_a));
  ASSERT_EQ(code_a, 0);
  ASSERT_EQ(a->raycast_result->n_distances, 4);
  ASSERT_NEAR(a->raycast_result->distances[0], 10.0 - sqrt(4.0 - at[1] * at[1] - at[2] * at[2]) +
                                                   2.0, 1e-5);  // at t = 3, x = 2
  sensim__v1__envelope__free_unpacked(a, NULL);

  // refusals name the fields
  shared.has_origins_bytes = 1;
  shared.origins_bytes = bin(org, sizeof(org));
  env.raycast = &shared;
  ASSERT_OK(execute_refused(f.e, &env, "origin and origins_bytes are both set"));
  shared.has_origins_bytes = 0;
  packed.n_origins = 3 * 4;
  packed.origins = &org[0][0];
  env.raycast = &packed;
  ASSERT_OK(execute_refused(f.e, &env, "origin and origins are both set"));
  packed.n_origins = 0;
  packed.n_directions = 4;
  ASSERT_OK(execute_refused(f.e, &env, "directions has 4 values, not a multiple of 3"));
  packed.n_directions = 3;
  origin.y = NAN;
  ASSERT_OK(execute_refused(f.e, &env, "origin.y = nan is not finite"));
  origin.y = -2e9;
  ASSERT_OK(execute_refused(f.e, &env, "origin.y = -2e+09 exceeds"));
  teardown(&f);
  return 0;
}


TEST(wire_env_bulk_arrays_in_both_forms_or_of_wrong_length_are_refused_by_name) {
  fixture_t f;
  ASSERT_OK(setup(&f));
  ASSERT_OK(sphere_scene(f.e));
  Sensim__V1__CreateBody cb = SENSIM__V1__CREATE_BODY__INIT;
  cb.has_id = 1;
  cb.id = 3;
  Sensim__V1__Envelope env = SENSIM__V1__ENVELOPE__INIT;
  env.body_case = SENSIM__V1__ENVELOPE__BODY_CREATE_BODY;
  env.create_body = &cb;
  ASSERT_OK(execute_ok(f.e, &env));

  // raycasts
  double org[2][3] = {{-10, 0, 0}, {-10, 0, 0.5}}, dir[2][3] = {{1, 0, 0}, {1, 0, 0}};
  uint8_t raw[64] = {0};
  env.body_case = SENSIM__V1__ENVELOPE__BODY_RAYCAST;
  Sensim__V1__Raycast r = SENSIM__V1__RAYCAST__INIT;
  env.raycast = &r;
  r.n_origins = 6;
  r.origins = &org[0][0];
  r.has_origins_bytes = 1;
  r.origins_bytes = bin(org, sizeof(org));
  r.has_directions_bytes = 1;
  r.directions_bytes = bin(dir, sizeof(dir));
  ASSERT_OK(execute_refused(f.e, &env, "origins and origins_bytes are both set"));
  r.n_origins = 0;
  r.origins_bytes = bin(raw, 25);
  ASSERT_OK(execute_refused(f.e, &env,
                            "raycast: origins_bytes has 25 bytes, not a multiple of 24"));
  r.origins_bytes = bin(org, sizeof(org));
  r.directions_bytes = bin(dir, 24);
  ASSERT_OK(execute_refused(f.e, &env,
                            "directions_bytes has 24 bytes, expected 48 (24 per ray, 2 rays"));
  r.directions_bytes = bin(dir, sizeof(dir));
  r.n_directions = 6;
  r.directions = &dir[0][0];
  ASSERT_OK(execute_refused(f.e, &env, "directions and directions_bytes are both set"));
  r.n_directions = 0;
  r.has_times_bytes = 1;
  r.times_bytes = bin(raw, 12);
  ASSERT_OK(execute_refused(f.e, &env, "times_bytes has 12 bytes, not a multiple of 8"));
  r.times_bytes = bin(raw, 24);
  ASSERT_OK(execute_refused(f.e, &env, "times_bytes has 24 bytes, expected 0, 8 or 16"));
  double t1 = 0.0;
  r.n_times = 1;
  r.times = &t1;
  ASSERT_OK(execute_refused(f.e, &env, "times and times_bytes are both set"));

  // state updates: each refusal changes nothing (no state yet afterwards)
  const uint32_t ids[2] = {3, 3};
  const double poses[14] = {0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1};
  const double vels[6] = {0};
  Sensim__V1__UpdateState u = SENSIM__V1__UPDATE_STATE__INIT;
  u.has_time = 1;
  u.time = 1.0;
  env.body_case = SENSIM__V1__ENVELOPE__BODY_UPDATE_STATE;
  env.update_state = &u;
  u.n_body_ids = 1;
  u.body_ids = (uint32_t*)ids;
  u.has_body_ids_bytes = 1;
  u.body_ids_bytes = bin(ids, 4);
  u.has_body_poses_bytes = 1;
  u.body_poses_bytes = bin(poses, 56);
  ASSERT_OK(execute_refused(f.e, &env, "body_ids and body_ids_bytes are both set"));
  u.n_body_ids = 0;
  u.body_ids_bytes = bin(raw, 6);
  ASSERT_OK(execute_refused(f.e, &env,
                            "update_state: body_ids_bytes has 6 bytes, not a multiple of 4"));
  u.body_ids_bytes = bin(ids, 4);
  u.body_poses_bytes = bin(poses, 55);
  ASSERT_OK(execute_refused(f.e, &env, "body_poses_bytes has 55 bytes, not a multiple of 56"));
  u.body_poses_bytes = bin(poses, 112);
  ASSERT_OK(execute_refused(f.e, &env,
                            "body_poses_bytes has 112 bytes, expected 56 per body (1 "
                            "body_ids_bytes)"));
  u.body_poses_bytes = bin(poses, 56);
  u.has_body_velocities_bytes = 1;
  u.body_velocities_bytes = bin(vels, 40);
  ASSERT_OK(execute_refused(f.e, &env,
                            "body_velocities_bytes has 40 bytes, not a multiple of 48"));
  u.body_velocities_bytes = bin(vels, 48);
  u.n_body_velocities = 6;
  u.body_velocities = (double*)vels;
  ASSERT_OK(execute_refused(f.e, &env,
                            "body_velocities and body_velocities_bytes are both set"));
  u.n_body_velocities = 0;
  u.has_joint_ids_bytes = 1;
  u.joint_ids_bytes = bin(ids, 8);
  u.has_joint_positions_bytes = 1;
  u.joint_positions_bytes = bin(vels, 8);
  ASSERT_OK(execute_refused(f.e, &env,
                            "joint_positions_bytes has 8 bytes for 2 joint_ids_bytes"));
  u.joint_positions_bytes = bin(vels, 12);
  ASSERT_OK(execute_refused(f.e, &env,
                            "joint_positions_bytes has 12 bytes, not a multiple of 8"));
  env_time_t t;
  env_get_time(f.e, &t);
  ASSERT_EQ(t.has_time, 0);

  // the same update without the joints is accepted
  u.has_joint_ids_bytes = u.has_joint_positions_bytes = 0;
  ASSERT_OK(execute_ok(f.e, &env));
  env_get_time(f.e, &t);
  ASSERT_EQ(t.has_time, 1);
  ASSERT_DEQ(t.t_cur, 1.0);
  teardown(&f);
  return 0;
}


// Body 10 in a fresh environment, given pose (wire order) by one update in the packed form or
// the bytes form (built from an odd address); *out its pose at the end of the step.
static int pose_through(int bytes, const double pose[7], pose_t* out) {
  fixture_t f;
  ASSERT_OK(setup(&f));
  Sensim__V1__CreateBody cb = SENSIM__V1__CREATE_BODY__INIT;
  cb.has_id = 1;
  cb.id = 10;
  Sensim__V1__Envelope env = SENSIM__V1__ENVELOPE__INIT;
  env.body_case = SENSIM__V1__ENVELOPE__BODY_CREATE_BODY;
  env.create_body = &cb;
  ASSERT_OK(execute_ok(f.e, &env));
  uint32_t id = 10;
  uint8_t raw[57];
  memcpy(raw + 1, pose, 56);
  Sensim__V1__UpdateState u = SENSIM__V1__UPDATE_STATE__INIT;
  u.has_time = 1;
  u.time = 0.5;
  if (bytes) {
    u.has_body_ids_bytes = u.has_body_poses_bytes = 1;
    u.body_ids_bytes = bin(&id, 4);
    u.body_poses_bytes = bin(raw + 1, 56);
  } else {
    u.n_body_ids = 1;
    u.body_ids = &id;
    u.n_body_poses = 7;
    u.body_poses = (double*)pose;
  }
  env.body_case = SENSIM__V1__ENVELOPE__BODY_UPDATE_STATE;
  env.update_state = &u;
  ASSERT_OK(execute_ok(f.e, &env));
  ASSERT_OK(env_body_pose(f.e, 10, 1.0, out));
  teardown(&f);
  return 0;
}


TEST(wire_env_update_state_bytes_form_sets_the_same_pose_as_the_packed_form) {
  double q[4] = {0.7, -0.2, 0.4, 0.55};  // (w, x, y, z)
  normalize4(q);
  const double pose[7] = {1.5, -2.0, 3.25, q[1], q[2], q[3], q[0]};
  pose_t a, b;
  ASSERT_OK(pose_through(0, pose, &a));
  ASSERT_OK(pose_through(1, pose, &b));
  ASSERT_MEM_EQ(a.p, b.p, sizeof(a.p));
  ASSERT_MEM_EQ(a.q, b.q, sizeof(a.q));
  for (int i = 0; i < 3; i++) {
    ASSERT_NEAR(b.p[i], pose[i], 1e-12);
  }
  double sign = b.q[0] * q[0] >= 0 ? 1.0 : -1.0;
  for (int i = 0; i < 4; i++) {
    ASSERT_NEAR(sign * b.q[i], q[i], 1e-12);
  }
  return 0;
}


TEST(wire_hit_records_lay_out_distance_normal_ids_and_zero_reserved_bytes) {
  scene_hit_t hits[2];
  memset(hits, 0xA5, sizeof(hits));  // padding and the primitive index must not leak
  hits[0].distance = 12.5;
  hits[0].normal[0] = -0.6;
  hits[0].normal[1] = 0.0;
  hits[0].normal[2] = 0.8;
  hits[0].object_id = 0x01020304u;
  hits[0].label = 0xA0B0C0D0u;
  hits[1].distance = INFINITY;
  memset(hits[1].normal, 0, sizeof(hits[1].normal));
  hits[1].object_id = 0;
  hits[1].label = 0;
  uint8_t out[2 * WIRE_HIT_RECORD_BYTES];
  memset(out, 0xFF, sizeof(out));
  wire_hit_records(hits, 2, out);

  // little-endian bytes written out by hand
  const uint8_t d0[8] = {0, 0, 0, 0, 0, 0, 0x29, 0x40};                 // 12.5
  const uint8_t n0[8] = {0x33, 0x33, 0x33, 0x33, 0x33, 0x33, 0xE3, 0xBF};  // -0.6
  const uint8_t ids0[8] = {0x04, 0x03, 0x02, 0x01, 0xD0, 0xC0, 0xB0, 0xA0};
  const uint8_t inf[8] = {0, 0, 0, 0, 0, 0, 0xF0, 0x7F};
  static const uint8_t zero[24];
  ASSERT_MEM_EQ(out, d0, 8);
  ASSERT_MEM_EQ(out + 8, n0, 8);
  ASSERT_MEM_EQ(out + 16, zero, 8);
  double z;
  memcpy(&z, out + 24, 8);
  ASSERT_DEQ(z, 0.8);
  ASSERT_MEM_EQ(out + 32, ids0, 8);
  ASSERT_MEM_EQ(out + 40, zero, 8);
  ASSERT_MEM_EQ(out + 48, inf, 8);
  ASSERT_MEM_EQ(out + 56, zero, 24);
  ASSERT_MEM_EQ(out + 80, zero, 16);
  return 0;
}


TEST(wire_hit_mask_records_leave_out_exactly_the_miss_records) {
  // 11 rays (the mask's second byte half used): misses but for rays 0, 3, 8 and 10, where 3,
  // 8 and 10 differ from the miss record by a single field: a -0 normal, a label, a distance
  scene_hit_t hits[11];
  for (int i = 0; i < 11; i++) {
    memset(&hits[i], 0xA5, sizeof(hits[i]));   // padding and primitive must not matter
    hits[i].distance = INFINITY;
    memset(hits[i].normal, 0, sizeof(hits[i].normal));
    hits[i].object_id = 0;
    hits[i].label = 0;
  }
  hits[0].distance = 12.5;
  hits[0].normal[2] = 1.0;
  hits[0].object_id = 0x01020304u;
  hits[0].label = 9;
  hits[3].normal[1] = -0.0;
  hits[8].label = 5;
  hits[10].distance = 1e300;
  uint8_t mask[3], out[5 * WIRE_HIT_MASKED_RECORD_BYTES];
  memset(mask, 0xEE, sizeof(mask));
  memset(out, 0xEE, sizeof(out));
  wire_hit_mask_records(hits, 11, mask, out);
  ASSERT_EQ(mask[0], 0x09);                 // rays 0 and 3, least significant bit first
  ASSERT_EQ(mask[1], 0x05);                 // rays 8 and 10; bits 11 to 15 zero
  ASSERT_EQ(mask[2], 0xEE);                 // ceil(11 / 8) = 2 bytes written, no more
  uint8_t full[11 * WIRE_HIT_RECORD_BYTES];
  wire_hit_records(hits, 11, full);
  static const int at[4] = {0, 3, 8, 10};
  for (int k = 0; k < 4; k++) {
    ASSERT_MEM_EQ(out + k * WIRE_HIT_MASKED_RECORD_BYTES, full + at[k] * WIRE_HIT_RECORD_BYTES,
                  WIRE_HIT_MASKED_RECORD_BYTES);
  }
  ASSERT_EQ(out[4 * WIRE_HIT_MASKED_RECORD_BYTES], 0xEE);   // four records, no more
  return 0;
}


// Varint at *p (below end); advances *p. Returns -1 when it runs past end.
static int read_varint(const uint8_t** p, const uint8_t* end, uint64_t* v) {
  *v = 0;
  for (int shift = 0; *p < end && shift < 64; shift += 7) {
    uint8_t b = *(*p)++;
    *v |= (uint64_t)(b & 0x7F) << shift;
    if (!(b & 0x80)) {
      return 0;
    }
  }
  return -1;
}


// Offset of the value of length-delimited field `number` among the fields in [p, end), and its
// length; -1 when absent. Other fields are skipped by wire type.
static long find_len_field(const uint8_t* base, const uint8_t* p, const uint8_t* end,
                           uint64_t number, size_t* len) {
  while (p < end) {
    uint64_t tag, v;
    if (read_varint(&p, end, &tag)) {
      return -1;
    }
    switch (tag & 7) {
      case 0:
        if (read_varint(&p, end, &v)) {
          return -1;
        }
        break;
      case 1:
        p += 8;
        break;
      case 5:
        p += 4;
        break;
      case 2:
        if (read_varint(&p, end, &v) || v > (uint64_t)(end - p)) {
          return -1;
        }
        if (tag >> 3 == number) {
          *len = (size_t)v;
          return (long)(p - base);
        }
        p += v;
        break;
      default:
        return -1;
    }
  }
  return -1;
}


// Pack env, decode it as the daemon does and execute it: the reply's bytes as they would
// leave (*out, mem_free'd by the caller).
static int execute_raw(env_t* e, Sensim__V1__Envelope* env, uint8_t** out, size_t* out_len,
                       int* code) {
  uint8_t* buf;
  size_t len;
  ASSERT_OK(wire_pack(env, &buf, &len));
  wire_request_t* r;
  err_msg_t msg;
  ASSERT_OK(wire_decode(buf, len, &r, &msg));
  *out = NULL;
  *out_len = 0;
  *code = -1;
  int rc = wire_env_execute(r, e, out, out_len, code);
  wire_free(r);
  mem_free(buf);
  return rc;
}


TEST(wire_env_bytes_reply_places_the_records_8_byte_aligned_after_zero_padding) {
  fixture_t f;
  ASSERT_OK(setup(&f));
  ASSERT_OK(sphere_scene(f.e));
  const size_t counts[] = {0, 1, 2, 3, 5, 8, 100, 2731, 2732, 40000};
  size_t most = counts[sizeof(counts) / sizeof(counts[0]) - 1];
  double* org = mem_alloc(3 * sizeof(double) * most);
  double* dir = mem_alloc(3 * sizeof(double) * most);
  ASSERT_TRUE(org && dir);
  for (size_t i = 0; i < most; i++) {
    // from x = -10 towards the sphere, spread over y in [-1, 1): all hit
    org[3 * i] = -10.0;
    org[3 * i + 1] = -1.0 + 2.0 * (double)i / (double)most;
    org[3 * i + 2] = 0.0;
    dir[3 * i] = 1.0;
    dir[3 * i + 1] = dir[3 * i + 2] = 0.0;
  }
  for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
    size_t n = counts[k];
    Sensim__V1__Raycast rb = SENSIM__V1__RAYCAST__INIT;
    rb.has_origins_bytes = rb.has_directions_bytes = 1;
    rb.origins_bytes = bin(org, 24 * n);
    rb.directions_bytes = bin(dir, 24 * n);
    Sensim__V1__Envelope env = SENSIM__V1__ENVELOPE__INIT;
    env.body_case = SENSIM__V1__ENVELOPE__BODY_RAYCAST;
    env.raycast = &rb;
    env.has_id = 1;
    env.id = 1 + (uint64_t)k * 1000003u;  // ids of different varint lengths
    uint8_t* out;
    size_t out_len;
    int code;
    ASSERT_OK(execute_raw(f.e, &env, &out, &out_len, &code));
    ASSERT_EQ(code, 0);

    // raycast_result (44) holds padding (6), all zero, then hits_bytes (5) at a multiple of 8
    size_t rlen = 0, plen = 0, hlen = 0;
    long at = find_len_field(out, out, out + out_len, 44, &rlen);
    ASSERT_TRUE(at >= 0);
    const uint8_t* inner = out + at;
    long pad = find_len_field(out, inner, inner + rlen, 6, &plen);
    long hits = find_len_field(out, inner, inner + rlen, 5, &hlen);
    ASSERT_TRUE(pad >= 0 && hits > pad);
    ASSERT_TRUE(plen < 16);
    for (size_t i = 0; i < plen; i++) {
      ASSERT_EQ(out[pad + (long)i], 0);
    }
    ASSERT_EQ(hits % 8, 0);
    ASSERT_EQ(hlen, 48 * n);
    ASSERT_EQ((size_t)hits + hlen, out_len);

    // and protobuf-c reads the same Envelope: id, status OK, the records
    Sensim__V1__Envelope* reply = sensim__v1__envelope__unpack(NULL, out_len, out);
    ASSERT_TRUE(reply != NULL);
    ASSERT_EQ(reply->id, env.id);
    ASSERT_TRUE(reply->status && reply->status->code == SENSIM__V1__STATUS_CODE__OK);
    ASSERT_EQ(reply->body_case, SENSIM__V1__ENVELOPE__BODY_RAYCAST_RESULT);
    ASSERT_EQ(reply->raycast_result->hits_bytes.len, 48 * n);
    if (n) {
      ASSERT_MEM_EQ(reply->raycast_result->hits_bytes.data, out + hits, 48 * n);
    }
    for (size_t i = 0; i < n; i++) {
      double d, y = org[3 * i + 1];
      memcpy(&d, out + hits + 48 * (long)i, 8);
      ASSERT_NEAR(d, 10.0 - sqrt(4.0 - y * y), 1e-5);
    }
    sensim__v1__envelope__free_unpacked(reply, NULL);
    mem_free(out);
  }
  mem_free(org);
  mem_free(dir);
  teardown(&f);
  return 0;
}


TEST(wire_hit_pack_in_place_equals_the_mask_and_records_written_apart) {
  // 700 records (the last mask byte half used): runs of hits, runs of misses, single ones, and
  // records one field away from the miss record (a -0 normal, a label, a finite distance)
  enum { N = 700 };
  static scene_hit_t hits[N];
  uint64_t x = 12345;
  for (int i = 0; i < N; i++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    unsigned r = (unsigned)(x >> 33);
    memset(&hits[i], 0, sizeof(hits[i]));
    hits[i].distance = INFINITY;
    int hit = (i / 64) % 3 == 0 ? 1 : (i / 64) % 3 == 1 ? 0 : (int)(r & 1);
    if (hit) {
      hits[i].distance = 1.0 + (r % 1000) * 0.01;
      hits[i].normal[r % 3] = (r & 8) ? -1.0 : 1.0;
      hits[i].object_id = 1 + r % 7;
      hits[i].label = r % 5;
    } else if (r % 17 == 0) {
      hits[i].normal[1] = -0.0;
    } else if (r % 19 == 0) {
      hits[i].label = 2;
    } else if (r % 23 == 0) {
      hits[i].distance = 1e300;
    }
  }
  static uint8_t records[N * WIRE_HIT_RECORD_BYTES], apart[N * WIRE_HIT_MASKED_RECORD_BYTES];
  uint8_t mask[(N + 7) / 8 + 1], mask_apart[(N + 7) / 8 + 1];
  wire_hit_records(hits, N, records);
  memset(mask, 0xEE, sizeof(mask));
  memset(apart, 0xEE, sizeof(apart));
  wire_hit_mask_records(hits, N, mask_apart, apart);
  size_t kept = wire_hit_pack(records, N, mask);
  size_t set = 0;
  for (int k = 0; k < (N + 7) / 8; k++) {
    set += (size_t)__builtin_popcount(mask_apart[k]);
  }
  ASSERT_TRUE(set > N / 3 && set < 2 * N / 3);
  ASSERT_EQ(kept, set);
  ASSERT_MEM_EQ(mask, mask_apart, (N + 7) / 8);
  ASSERT_EQ(mask[(N + 7) / 8], 0xEE);   // no byte past the mask
  ASSERT_MEM_EQ(records, apart, kept * WIRE_HIT_MASKED_RECORD_BYTES);

  // packed from records placed later in the buffer to its start, as a batch packed straight
  // behind those before it: the same records and mask
  enum { SHIFT = 3 * N / 4 };
  static uint8_t later[(SHIFT + N) * WIRE_HIT_RECORD_BYTES];
  memset(later, 0xEE, sizeof(later));
  wire_hit_records(hits, N, later + SHIFT * WIRE_HIT_RECORD_BYTES);
  memset(mask, 0xEE, sizeof(mask));
  size_t kept_to = wire_hit_pack_to(later + SHIFT * WIRE_HIT_RECORD_BYTES, N, mask, later);
  ASSERT_EQ(kept_to, set);
  ASSERT_MEM_EQ(mask, mask_apart, (N + 7) / 8);
  ASSERT_MEM_EQ(later, apart, kept_to * WIRE_HIT_MASKED_RECORD_BYTES);
  return 0;
}


// Which of the rays of omit_misses_check hit (from x = -10 towards the unit sphere, or away).
typedef int (*ray_hits_fn)(size_t i, size_t n);


// Trace n rays (hit says which hit the sphere) in e both ways: the masked reply as it leaves
// must hold the full form's records of the hits alone, in ray order, at a multiple of 8 as the
// frame's last bytes, after zero padding.
static int omit_misses_check(env_t* e, size_t n, ray_hits_fn hit_of, uint64_t id) {
  double* org = mem_alloc(3 * sizeof(double) * n);
  double* dir = mem_alloc(3 * sizeof(double) * n);
  ASSERT_TRUE(org && dir);
  for (size_t i = 0; i < n; i++) {
    org[3 * i] = -10.0;
    org[3 * i + 1] = -1.5 + 3.0 * (double)i / (double)n;
    org[3 * i + 2] = 0.0;
    dir[3 * i] = hit_of(i, n) ? 1.0 : -1.0;
    dir[3 * i + 1] = dir[3 * i + 2] = 0.0;
  }
  Sensim__V1__Raycast rb = SENSIM__V1__RAYCAST__INIT;
  rb.has_origins_bytes = rb.has_directions_bytes = 1;
  rb.origins_bytes = bin(org, 24 * n);
  rb.directions_bytes = bin(dir, 24 * n);
  Sensim__V1__Envelope env = SENSIM__V1__ENVELOPE__INIT;
  env.body_case = SENSIM__V1__ENVELOPE__BODY_RAYCAST;
  env.raycast = &rb;
  Sensim__V1__Envelope* full;
  int code;
  ASSERT_OK(execute_reply_ok(e, &env, &full));
  const uint8_t* all = reply_hits(full, n);
  ASSERT_TRUE(all != NULL);

  // the masked reply as it leaves: records at a multiple of 8, the last bytes of the frame
  rb.has_omit_misses = rb.omit_misses = 1;
  env.has_id = 1;
  env.id = id;
  uint8_t* out;
  size_t out_len;
  ASSERT_OK(execute_raw(e, &env, &out, &out_len, &code));
  ASSERT_EQ(code, 0);
  size_t rlen = 0, hlen = 0, mlen = 0, plen = 0;
  long at = find_len_field(out, out, out + out_len, 44, &rlen);
  ASSERT_TRUE(at >= 0);
  long hits = find_len_field(out, out + at, out + at + rlen, 5, &hlen);
  long maskat = find_len_field(out, out + at, out + at + rlen, 8, &mlen);
  long pad = find_len_field(out, out + at, out + at + rlen, 6, &plen);
  ASSERT_TRUE(hits >= 0 && maskat >= 0 && pad >= 0);
  ASSERT_EQ(hits % 8, 0);
  ASSERT_EQ((size_t)hits + hlen, out_len);
  ASSERT_EQ(mlen, (n + 7) / 8);
  for (size_t i = 0; i < plen; i++) {
    ASSERT_EQ(out[pad + (long)i], 0);
  }

  // the mask and records, from the full form's records by hand
  static const uint8_t miss[40] = {0, 0, 0, 0, 0, 0, 0xF0, 0x7F};
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    const uint8_t* rec = all + 48 * i;
    int bit = out[maskat + (long)(i / 8)] >> (i % 8) & 1;
    int hit = memcmp(rec, miss, 40) != 0;
    ASSERT_EQ(bit, hit);
    ASSERT_EQ(hit, hit_of(i, n));
    if (hit) {
      ASSERT_TRUE(40 * (k + 1) <= hlen);
      ASSERT_MEM_EQ(out + hits + 40 * (long)k, rec, 40);
      k++;
    }
  }
  ASSERT_EQ(40 * k, hlen);

  // protobuf-c reads the same
  Sensim__V1__Envelope* reply = sensim__v1__envelope__unpack(NULL, out_len, out);
  ASSERT_TRUE(reply != NULL && reply->id == id && reply->raycast_result);
  ASSERT_TRUE(reply->raycast_result->has_world_serial);
  ASSERT_EQ(reply->raycast_result->world_serial, full->raycast_result->world_serial);
  ASSERT_EQ(reply->raycast_result->hits_bytes.len, hlen);
  sensim__v1__envelope__free_unpacked(reply, NULL);
  sensim__v1__envelope__free_unpacked(full, NULL);
  mem_free(out);
  mem_free(org);
  mem_free(dir);
  return 0;
}


// Batches that all hit, all miss, and alternate.
static int batch_kinds(size_t i, size_t n) {
  (void)n;
  int kind = (int)(i / ENV_RAYCAST_BATCH % 3);
  return kind == 0 || (kind == 2 && i % 2 == 0);
}


TEST(wire_env_omit_misses_reply_holds_the_full_forms_hits_and_nothing_else) {
  fixture_t f;
  ASSERT_OK(setup(&f));
  ASSERT_OK(sphere_scene(f.e));
  // 5000 rays: the tracer's batches of ENV_RAYCAST_BATCH end inside, the last one partial
  ASSERT_OK(omit_misses_check(f.e, 5000, batch_kinds, 77));
  teardown(&f);
  return 0;
}


// All rays but the last 20 hit.
static int all_but_20(size_t i, size_t n) {
  return i + 20 < n;
}


TEST(wire_env_omit_misses_reply_sizes_its_head_across_a_varint_boundary) {
  // 400 to 439 hits of 420 to 459 rays: the records (16,000 to 17,560 bytes) and the result
  // around them cross 16,384, where their lengths take a third byte; the records are traced
  // after the head that the reply of every ray hitting would have, and the padding takes up
  // what the shorter lengths of the hits alone leave
  fixture_t f;
  ASSERT_OK(setup(&f));
  ASSERT_OK(sphere_scene(f.e));
  for (size_t n = 420; n < 460; n++) {
    ASSERT_OK(omit_misses_check(f.e, n, all_but_20, 500 + n));
  }
  teardown(&f);
  return 0;
}


// Batches of every kind in a scrambled order, a tenth of them with no hit at all: each batch's
// hits are moved behind the earlier ones by whichever thread finds them in order.
static int scrambled_batches(size_t i, size_t n) {
  (void)n;
  uint64_t x = (i / ENV_RAYCAST_BATCH + 1) * 0x9E3779B97F4A7C15ull;
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 32;
  switch (x % 10) {
    case 0:
      return 0;
    case 1:
    case 2:
      return 1;
    case 3:
      return i % 2 == 0;
    default:
      return (x >> (8 + i % 48) & 1) != 0;
  }
}


TEST(wire_env_omit_misses_reply_is_the_same_traced_by_a_pool) {
  // the tracing threads pack their batches as they finish them, in any order: 150 batches
  // (the last one partial) over 4 threads, several times, each reply checked whole
  fixture_t f;
  err_msg_t msg;
  f.dev = scene_device_create(&msg);
  ASSERT_TRUE(f.dev != NULL);
  pool_t* pool = pool_create(4);
  ASSERT_TRUE(pool != NULL);
  env_limits_t limits = env_default_limits();
  f.e = env_create("wire_env_pool", &limits, f.dev, pool, &msg);
  ASSERT_TRUE(f.e != NULL);
  ASSERT_OK(sphere_scene(f.e));
  for (uint64_t k = 0; k < 6; k++) {
    ASSERT_OK(omit_misses_check(f.e, 150 * ENV_RAYCAST_BATCH - 77 * k, scrambled_batches, 90 + k));
  }
  teardown(&f);
  pool_destroy(pool);
  return 0;
}


// Execute the decoded request r with the nth allocation from now failing, until it succeeds:
// each failure is a clean reply (or ERR_NOMEM without one) and leaks nothing. *tries receives
// the number of runs.
static int execute_under_oom(env_t* e, const wire_request_t* r, int* tries) {
  for (int nth = 1; nth < 1000; nth++) {
    int64_t live = mem_live_count();
    uint8_t* out = NULL;
    size_t out_len = 0;
    int code = -1;
    mem_fail_after(nth);
    int rc = wire_env_execute(r, e, &out, &out_len, &code);
    mem_fail_after(0);
    if (rc) {
      ASSERT_EQ(rc, ERR_NOMEM);
      ASSERT_TRUE(out == NULL);
    } else {
      Sensim__V1__Envelope* reply = sensim__v1__envelope__unpack(NULL, out_len, out);
      ASSERT_TRUE(reply != NULL && reply->status != NULL);
      if (code == 0) {
        ASSERT_EQ(reply->status->code, SENSIM__V1__STATUS_CODE__OK);
      } else {
        if (code != ERR_NOMEM) {
          CHECK_FAIL("allocation %d: code %d: %s", nth, code, reply->status->message);
        }
        ASSERT_EQ(reply->body_case, SENSIM__V1__ENVELOPE__BODY__NOT_SET);
        ASSERT_CONTAINS(reply->status->message, "out of memory");
      }
      sensim__v1__envelope__free_unpacked(reply, NULL);
      mem_free(out);
    }
    ASSERT_EQ(mem_live_count(), live);
    if (!rc && code == 0) {
      *tries = nth;
      return 0;
    }
  }
  CHECK_FAIL("no success within 1000 allocations");
}


TEST(wire_env_bytes_form_fails_cleanly_when_memory_runs_out) {
  fixture_t f;
  ASSERT_OK(setup(&f));
  ASSERT_OK(sphere_scene(f.e));
  Sensim__V1__CreateBody cb = SENSIM__V1__CREATE_BODY__INIT;
  cb.has_id = 1;
  cb.id = 3;
  Sensim__V1__Envelope env = SENSIM__V1__ENVELOPE__INIT;
  env.body_case = SENSIM__V1__ENVELOPE__BODY_CREATE_BODY;
  env.create_body = &cb;
  ASSERT_OK(execute_ok(f.e, &env));

  // a raycast, after one that commits the scene so that the runs allocate only for the
  // request
  uint8_t raw[1 + sizeof(g_org) + sizeof(g_dir)];
  memcpy(raw + 1, g_org, sizeof(g_org));
  memcpy(raw + 1 + sizeof(g_org), g_dir, sizeof(g_dir));
  Sensim__V1__Raycast rb = SENSIM__V1__RAYCAST__INIT;
  rb.has_origins_bytes = rb.has_directions_bytes = 1;
  rb.origins_bytes = bin(raw + 1, sizeof(g_org));
  rb.directions_bytes = bin(raw + 1 + sizeof(g_org), sizeof(g_dir));
  env.body_case = SENSIM__V1__ENVELOPE__BODY_RAYCAST;
  env.raycast = &rb;
  Sensim__V1__Envelope* warm;
  int code;
  ASSERT_OK(execute_reply_ok(f.e, &env, &warm));
  sensim__v1__envelope__free_unpacked(warm, NULL);
  uint8_t* buf;
  size_t len;
  ASSERT_OK(wire_pack(&env, &buf, &len));
  wire_request_t* r;
  err_msg_t msg;
  ASSERT_OK(wire_decode(buf, len, &r, &msg));
  int tries = 0;
  ASSERT_OK(execute_under_oom(f.e, r, &tries));
  ASSERT_TRUE(tries >= 2);  // at least the reply and the tracing could fail
  wire_free(r);
  mem_free(buf);

  // the same with the misses left out: the reply, its mask and counts, the tracing
  rb.has_omit_misses = rb.omit_misses = 1;
  ASSERT_OK(wire_pack(&env, &buf, &len));
  ASSERT_OK(wire_decode(buf, len, &r, &msg));
  tries = 0;
  ASSERT_OK(execute_under_oom(f.e, r, &tries));
  ASSERT_TRUE(tries >= 4);
  wire_free(r);
  mem_free(buf);
  rb.has_omit_misses = rb.omit_misses = 0;

  // a state update: a refusal changes nothing (a run whose reply itself could not be
  // allocated may have applied it; the next run is later)
  const uint32_t id = 3;
  const double pose[7] = {0.5, 0, 0, 0, 0, 0, 1};
  uint8_t praw[57];
  memcpy(praw + 1, pose, sizeof(pose));
  Sensim__V1__UpdateState u = SENSIM__V1__UPDATE_STATE__INIT;
  u.has_time = u.has_body_ids_bytes = u.has_body_poses_bytes = 1;
  u.body_ids_bytes = bin(&id, 4);
  u.body_poses_bytes = bin(praw + 1, 56);
  env.body_case = SENSIM__V1__ENVELOPE__BODY_UPDATE_STATE;
  env.update_state = &u;
  int done = 0;
  for (int nth = 1; nth < 1000 && !done; nth++) {
    u.time = nth;
    int64_t live = mem_live_count();
    ASSERT_OK(wire_pack(&env, &buf, &len));
    ASSERT_OK(wire_decode(buf, len, &r, &msg));
    env_time_t before, after;
    env_get_time(f.e, &before);
    uint8_t* out = NULL;
    size_t out_len = 0;
    mem_fail_after(nth);
    int rc = wire_env_execute(r, f.e, &out, &out_len, &code);
    mem_fail_after(0);
    env_get_time(f.e, &after);
    if (!rc && code == ERR_NOMEM) {
      ASSERT_EQ(after.has_time, before.has_time);
      ASSERT_DEQ(after.t_cur, before.t_cur);
    } else if (!rc) {
      ASSERT_EQ(code, 0);
      ASSERT_EQ(after.has_time, 1);
      ASSERT_DEQ(after.t_cur, (double)nth);
      done = 1;
    } else {
      ASSERT_EQ(rc, ERR_NOMEM);
    }
    mem_free(out);
    wire_free(r);
    mem_free(buf);
    ASSERT_EQ(mem_live_count(), live);
  }
  ASSERT_TRUE(done);
  teardown(&f);
  return 0;
}

//---------------- A step's records, few or many

// n encoders (sensors 100 + i on joints 1 + i at positions 0.25 i + 0.125, exact in binary),
// one state and one step at t = 1 selecting `outputs` (every third sensor when LISTED): the
// reply carries each selected reading, in sensor order, with its own id and position. A step
// of a few records keeps them on the stack and a larger one on the heap; this checks both and
// the sizes around the bound (4 records fit beside their selection, 15 selected fit alone).
static int step_of_encoders(uint32_t n, Sensim__V1__StepOutputs outputs) {
  fixture_t f;
  ASSERT_OK(setup(&f));
  Sensim__V1__Envelope env = SENSIM__V1__ENVELOPE__INIT;
  uint32_t ids[64], listed[64], nlisted = 0;
  double pos[64];
  ASSERT_TRUE(n <= 64);
  for (uint32_t i = 0; i < n; i++) {
    Sensim__V1__CreateJoint j = SENSIM__V1__CREATE_JOINT__INIT;
    j.has_id = 1;
    j.id = 1 + i;
    env.body_case = SENSIM__V1__ENVELOPE__BODY_CREATE_JOINT;
    env.create_joint = &j;
    ASSERT_OK(execute_ok(f.e, &env));
    Sensim__V1__EncoderConfig ec = SENSIM__V1__ENCODER_CONFIG__INIT;
    ec.has_joint_id = 1;
    ec.joint_id = 1 + i;
    Sensim__V1__CreateSensor cs = SENSIM__V1__CREATE_SENSOR__INIT;
    cs.has_id = 1;
    cs.id = 100 + i;
    cs.config_case = SENSIM__V1__CREATE_SENSOR__CONFIG_ENCODER;
    cs.encoder = &ec;
    env.body_case = SENSIM__V1__ENVELOPE__BODY_CREATE_SENSOR;
    env.create_sensor = &cs;
    ASSERT_OK(execute_ok(f.e, &env));
    ids[i] = 1 + i;
    pos[i] = 0.25 * i + 0.125;
    if (i % 3 == 0) {
      listed[nlisted++] = 100 + i;
    }
  }
  Sensim__V1__UpdateState u = SENSIM__V1__UPDATE_STATE__INIT;
  u.has_time = u.has_joint_ids_bytes = u.has_joint_positions_bytes = 1;
  u.time = 1.0;
  u.joint_ids_bytes = bin(ids, n * sizeof(ids[0]));
  u.joint_positions_bytes = bin(pos, n * sizeof(pos[0]));
  env.body_case = SENSIM__V1__ENVELOPE__BODY_UPDATE_STATE;
  env.update_state = &u;
  ASSERT_OK(execute_ok(f.e, &env));

  Sensim__V1__Step st = SENSIM__V1__STEP__INIT;
  st.has_time = st.has_outputs = 1;
  st.time = 1.0;
  st.outputs = outputs;
  if (outputs == SENSIM__V1__STEP_OUTPUTS__STEP_OUTPUTS_LISTED) {
    st.n_output_sensors = nlisted;
    st.output_sensors = listed;
  }
  env.body_case = SENSIM__V1__ENVELOPE__BODY_STEP;
  env.step = &st;
  Sensim__V1__Envelope* reply;
  ASSERT_OK(execute_reply_ok(f.e, &env, &reply));
  ASSERT_EQ(reply->body_case, SENSIM__V1__ENVELOPE__BODY_STEP_DONE);
  const Sensim__V1__StepDone* d = reply->step_done;
  uint32_t want = outputs == SENSIM__V1__STEP_OUTPUTS__STEP_OUTPUTS_LISTED ? nlisted : n;
  ASSERT_EQ(d->n_outputs, want);
  for (uint32_t k = 0; k < want; k++) {
    uint32_t i = outputs == SENSIM__V1__STEP_OUTPUTS__STEP_OUTPUTS_LISTED ? 3 * k : k;
    const Sensim__V1__SensorData* sd = d->outputs[k];
    ASSERT_EQ(sd->sensor_id, 100 + i);
    ASSERT_DEQ(sd->time, 1.0);
    ASSERT_EQ(sd->payload_case, SENSIM__V1__SENSOR_DATA__PAYLOAD_SCALAR);
    ASSERT_TRUE(sd->scalar->has_position);
    ASSERT_DEQ(sd->scalar->position, pos[i]);
  }
  sensim__v1__envelope__free_unpacked(reply, NULL);
  teardown(&f);
  return 0;
}


TEST(wire_env_step_reply_carries_each_selected_record_few_or_many) {
  static const uint32_t counts[] = {1, 3, 4, 5, 8, 15, 16, 17, 40, 64};
  for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
    ASSERT_OK(step_of_encoders(counts[c], SENSIM__V1__STEP_OUTPUTS__STEP_OUTPUTS_ALL));
    ASSERT_OK(step_of_encoders(counts[c], SENSIM__V1__STEP_OUTPUTS__STEP_OUTPUTS_LISTED));
  }
  return 0;
}
