// SPDX-License-Identifier: MIT
// test_returns.c: the lidar raytrace process in real scenes against the known answers of
// docs/models/lidar.md (end-to-end intensity of a primary return, the segment heap behind a
// glass coat and an aluminium mirror with its ghost point, a fog return), analytic geometry
// (refraction through a slab, a hollow sphere), the return modes and filters, atmospheric
// return statistics, distance noise statistics, determinism, and configuration errors.
#include "lidar/returns.h"

#include <stdlib.h>

#include "base/mem.h"
#include "base/pool.h"
#include "check.h"
#include "material/atmosphere.h"
#include "material/brdf.h"

#define REL 2e-8
#define FLOOR 1e-3
#define D2R (M_PI / 180.0)

// Embree holds instance transforms and rays in single precision: a plane placed at a distance
// that is not a float, or rotated, and every secondary segment's origin, are off by a few float
// ulps (~1e-7 relative), which moves distances and intensities by about as much. Known answers
// that depend on them are checked to 1e-6 relative; those with float-exact placements of a
// primary return to the 2e-8 of the tables.
#define GEOM_REL 1e-6

#define MAX_OBJECTS 8

typedef struct world {
  scene_device_t* dev;
  scene_t* s;
  uint32_t nobj;
  surface_material_t mat[MAX_OBJECTS + 1];          // by object id
  const ambient_material_t* medium[MAX_OBJECTS + 1]; // by object id; NULL = opaque surface
  int per_triangle[MAX_OBJECTS + 1];                // by object id: tri_mat by triangle parity
  surface_material_t tri_mat[2];
  ambient_material_t air;                            // medium 0
  step_view_t view;
  int64_t live;
} world_t;


static const surface_material_t* lookup_material(const void* ctx, uint32_t id, uint32_t prim) {
  const world_t* w = ctx;
  return w->per_triangle[id] ? &w->tri_mat[prim % 2] : &w->mat[id];
}


// The object's medium, and its material when it is the same for every primitive (NULL for a
// mesh with a material per triangle).
static void lookup_optics(const void* ctx, uint32_t id, const ambient_material_t** medium,
                          const surface_material_t** material) {
  const world_t* w = ctx;
  *medium = w->medium[id];
  *material = w->per_triangle[id] ? NULL : lookup_material(ctx, id, 0);
}


// Clear medium without atmospheric returns: attenuation alpha, index n.
static ambient_material_t medium(double alpha, double n) {
  ambient_material_t m = ambient_default_air();
  m.attenuation = alpha;
  m.refractive_index = n;
  m.return_scaling = 0.0;
  return m;
}


static int world_init(world_t* w, ambient_material_t air) {
  err_msg_t msg = {{0}};
  memset(w, 0, sizeof *w);
  w->live = mem_live_count();
  w->dev = scene_device_create(&msg);
  w->s = w->dev ? scene_create(w->dev, &msg) : NULL;
  if (!w->s) {
    fprintf(stderr, "# scene: %s\n", msg.text);
    return 1;
  }
  w->air = air;
  w->view = (step_view_t){
      .t0 = 0.0,
      .t1 = 0.1,
      .step = 1,
      .seed = 0x5eed,
      .scene = w->s,
      .ambient = &w->air,
      .lookup_ctx = w,
      .hit_material = lookup_material,
      .object_optics = lookup_optics,
  };
  return 0;
}


static int world_close(world_t* w) {
  scene_destroy(w->s);
  scene_device_destroy(w->dev);
  return mem_live_count() != w->live;
}


// Quaternion turning +z onto the unit vector n.
static void quat_z_to(const double n[3], double q[4]) {
  double c = n[2];
  if (c < -1.0 + 1e-12) {
    q[0] = 0.0, q[1] = 1.0, q[2] = 0.0, q[3] = 0.0;
    return;
  }
  // half-angle form: q = (1 + c, z x n) normalised
  double v[3] = {-n[1], n[0], 0.0};
  double w = 1.0 + c;
  double len = sqrt(w * w + v[0] * v[0] + v[1] * v[1]);
  q[0] = w / len;
  q[1] = v[0] / len;
  q[2] = v[1] / len;
  q[3] = 0.0;
}


// Add a static primitive centred at c, its local +z along n; returns its object id (0 on
// failure). medium_ptr: the medium filling it (NULL: an opaque surface of material m).
static uint32_t add_object(world_t* w, scene_prim_kind_t kind, double a, double b, double cc,
                           const double c[3], const double n[3], surface_material_t m,
                           const ambient_material_t* medium_ptr) {
  err_msg_t msg = {{0}};
  double size[3] = {a, b, cc};
  int g = scene_add_primitive(w->s, kind, size, &msg);
  uint32_t id = ++w->nobj;
  static const double unit[3] = {1, 1, 1};
  int h = g >= 0 ? scene_add_instance(w->s, g, unit, id, 100 + id, &msg) : -1;
  if (h < 0 || id > MAX_OBJECTS) {
    fprintf(stderr, "# add_object: %s\n", msg.text);
    return 0;
  }
  pose_t p = xform_identity();
  memcpy(p.p, c, sizeof p.p);
  quat_z_to(n, p.q);
  scene_set_instance_pose(w->s, h, &p, NULL, NULL);
  w->mat[id] = m;
  w->medium[id] = medium_ptr;
  return id;
}


static int commit(world_t* w) {
  err_msg_t msg = {{0}};
  int rc = scene_commit(w->s, &msg);
  if (rc < 0) {
    fprintf(stderr, "# commit: %s\n", msg.text);
  }
  return rc;
}


static surface_material_t lambert(double c) {
  surface_material_t m = material_default_lambertian();
  m.reflectance = c;
  return m;
}


static surface_material_t two_layer(double n_re, double n_im, double sigma_b, double c,
                                    double sigma_on) {
  surface_material_t m = material_default_two_layer();
  m.n_re = n_re;
  m.n_im = n_im;
  m.sigma_b = sigma_b;
  m.reflectance = c;
  m.sigma_on = sigma_on;
  return m;
}


// Default configuration: depth D, mode, range [0.1, inf), no beam, no noise.
static lidar_returns_desc_t desc(uint32_t depth, lidar_return_mode_t mode) {
  lidar_returns_desc_t d = {
      .depth = depth,
      .mode = mode,
      .range_min = 0.1,
      .range_max = INFINITY,
  };
  return d;
}


// The coaxial beam of the tables: theta_D = 1.5 mrad, E = R = 5 mm.
static lidar_beam_desc_t beam_a(void) {
  return (lidar_beam_desc_t){.enabled = 1, .divergence = 1.5e-3, .exit_radius = 0.005,
                             .detector_radius = 0.005};
}


static scene_ray_t ray(double ox, double oy, double oz, double dx, double dy, double dz) {
  double n = sqrt(dx * dx + dy * dy + dz * dz);
  return (scene_ray_t){{ox, oy, oz}, {dx / n, dy / n, dz / n}, INFINITY, 0.5};
}


// Trace n copies of r (ray indices 0..n-1) or the rays of `rays`; out has n * max slots.
static void trace(const lidar_returns_t* p, const world_t* w, const scene_ray_t* rays, size_t n,
                  lidar_return_t* out, uint8_t* nret) {
  uint64_t* idx = malloc(n * sizeof *idx);
  for (size_t i = 0; i < n; i++) {
    idx[i] = i;
  }
  lidar_returns_batch_t b = {
      .view = &w->view, .sensor_id = 3, .frame = 1, .rays = rays, .ray_index = idx, .n = n};
  lidar_returns_trace(p, &b, out, nret);
  free(idx);
}


// One ray, one configuration: its returns in out (up to 8), their number.
static uint32_t trace_one(const lidar_returns_desc_t* d, const world_t* w, scene_ray_t r,
                          lidar_return_t out[8]) {
  lidar_returns_t p;
  err_msg_t msg = {{0}};
  if (lidar_returns_init(&p, d, &msg) != 0) {
    fprintf(stderr, "# init: %s\n", msg.text);
    return 99;
  }
  uint8_t n = 0;
  trace(&p, w, &r, 1, out, &n);
  return n;
}


//---------------- Known answers

TEST(returns_intensity_of_a_primary_return) {
  static const double x_axis[3] = {1, 0, 0};
  static const double normal_30[3] = {-0.8660254037844386, 0.5, 0};
  lidar_return_t out[8];
  lidar_returns_desc_t d = desc(1, LIDAR_RETURN_STRONGEST);
  d.beam = beam_a();

  // I1: Lambert C = 0.8 at OPL 10 m, normal incidence, air attenuation (index 1: the plane's
  // float position is the OPL exactly)
  world_t w;
  ASSERT_OK(world_init(&w, medium(0.000402272, 1.0)));
  double c10[3] = {10, 0, 0};
  ASSERT_TRUE(add_object(&w, SCENE_PRIM_PLANE, 0, 0, 0, c10, x_axis, lambert(0.8), NULL));
  ASSERT_OK(commit(&w));
  ASSERT_EQ(trace_one(&d, &w, ray(0, 0, 0, 1, 0, 0), out), 1);
  ASSERT_KAT(out[0].distance, 10.0, 1e-12, 0.0);
  ASSERT_KAT(out[0].intensity, 0.0344662622, REL, FLOOR);
  ASSERT_NEAR(out[0].normal[0], -1.0, 1e-12);
  ASSERT_EQ(out[0].object_id, 1);
  ASSERT_EQ(out[0].label, 101);
  ASSERT_EQ(out[0].atmospheric, 0);
  ASSERT_EQ(out[0].index, 0);
  ASSERT_EQ(out[0].count, 1);

  // round trip: tau squared
  d.round_trip = 1;
  ASSERT_EQ(trace_one(&d, &w, ray(0, 0, 0, 1, 0, 0), out), 1);
  ASSERT_KAT(out[0].intensity, 0.0343278926, REL, FLOOR);
  d.round_trip = 0;
  ASSERT_OK(world_close(&w));

  // I2: the same plane turned to 30 degrees incidence about the hit point
  ASSERT_OK(world_init(&w, medium(0.000402272, 1.0)));
  ASSERT_TRUE(add_object(&w, SCENE_PRIM_PLANE, 0, 0, 0, c10, normal_30, lambert(0.8), NULL));
  ASSERT_OK(commit(&w));
  ASSERT_EQ(trace_one(&d, &w, ray(0, 0, 0, 1, 0, 0), out), 1);
  ASSERT_KAT(out[0].distance, 10.0, 1e-12, 0.0);
  ASSERT_KAT(out[0].intensity, 0.0298486587, GEOM_REL, FLOOR);
  ASSERT_OK(world_close(&w));

  // I3: 50 m
  ASSERT_OK(world_init(&w, medium(0.000402272, 1.0)));
  double c50[3] = {0, 50, 0};
  double y_axis[3] = {0, 1, 0};
  ASSERT_TRUE(add_object(&w, SCENE_PRIM_PLANE, 0, 0, 0, c50, y_axis, lambert(0.8), NULL));
  ASSERT_OK(commit(&w));
  ASSERT_EQ(trace_one(&d, &w, ray(0, 0, 0, 0, 1, 0), out), 1);
  ASSERT_KAT(out[0].intensity, 0.00224621444, REL, FLOOR);
  ASSERT_OK(world_close(&w));

  // I4: two-layer (1.4517, sigma_B 0.3, C 0.8, sigma_ON 0.3) in air of index 1.000273 at OPL
  // 20 m, 30 degrees
  ASSERT_OK(world_init(&w, medium(0.000402272, 1.000273)));
  double c20[3] = {20.0 / 1.000273, 0, 0};
  ASSERT_TRUE(add_object(&w, SCENE_PRIM_PLANE, 0, 0, 0, c20, normal_30,
                         two_layer(1.4517, 0.0, 0.3, 0.8, 0.3), NULL));
  ASSERT_OK(commit(&w));
  ASSERT_EQ(trace_one(&d, &w, ray(0, 0, 0, 1, 0, 0), out), 1);
  ASSERT_KAT(out[0].distance, 20.0, GEOM_REL, 0.0);
  ASSERT_KAT(out[0].intensity, 0.010075825, GEOM_REL, FLOOR);
  return world_close(&w);
}


// The heap scene: a coated surface at OPL 5 m, 20 degrees incidence, reflecting onto a white
// Lambertian wall 3 m further at normal incidence; air of index 1.000273.
static int heap_scene(world_t* w, surface_material_t coat) {
  const double n_amb = 1.000273;
  double th = 20 * D2R;
  double nrm[3] = {-cos(th), sin(th), 0};
  double refl[3] = {-cos(2 * th), sin(2 * th), 0};
  double p0[3] = {5.0 / n_amb, 0, 0};
  double p1[3], back[3];
  for (int k = 0; k < 3; k++) {
    p1[k] = p0[k] + refl[k] * 3.0 / n_amb;
    back[k] = -refl[k];
  }
  ASSERT_OK(world_init(w, medium(0.000402272, n_amb)));
  ASSERT_EQ(add_object(w, SCENE_PRIM_PLANE, 1.0, 0, 0, p0, nrm, coat, NULL), 1);
  ASSERT_EQ(add_object(w, SCENE_PRIM_PLANE, 1.0, 0, 0, p1, back, lambert(0.8), NULL), 2);
  return commit(w);
}


TEST(returns_heap_glass_coat_keeps_the_first_surface) {
  world_t w;
  ASSERT_OK(heap_scene(&w, two_layer(1.5, 0.0, 0.1, 0.2, 0.3)));
  lidar_return_t out[8];
  lidar_returns_desc_t d = desc(2, LIDAR_RETURN_ALL);
  d.beam = beam_a();

  // both candidates: the coat (node 0) and the wall through the reflection (node 1)
  ASSERT_EQ(trace_one(&d, &w, ray(0, 0, 0, 1, 0, 0), out), 2);
  ASSERT_KAT(out[0].distance, 5.0, GEOM_REL, 0.0);
  ASSERT_KAT(out[0].intensity, 0.0181473447, GEOM_REL, FLOOR);
  ASSERT_EQ(out[0].object_id, 1);
  ASSERT_KAT(out[1].distance, 8.0, GEOM_REL, 0.0);
  ASSERT_KAT(out[1].intensity, 0.00187548248, GEOM_REL, FLOOR);
  ASSERT_EQ(out[1].object_id, 2);
  ASSERT_EQ(out[1].index, 1);
  ASSERT_EQ(out[1].count, 2);

  // strongest: the coat at 5 m
  d.mode = LIDAR_RETURN_STRONGEST;
  ASSERT_EQ(trace_one(&d, &w, ray(0, 0, 0, 1, 0, 0), out), 1);
  ASSERT_KAT(out[0].distance, 5.0, GEOM_REL, 0.0);
  ASSERT_EQ(out[0].object_id, 1);

  // depth 1 never sees the wall
  d.depth = 1;
  d.mode = LIDAR_RETURN_ALL;
  ASSERT_EQ(trace_one(&d, &w, ray(0, 0, 0, 1, 0, 0), out), 1);
  ASSERT_EQ(out[0].object_id, 1);
  return world_close(&w);
}


TEST(returns_heap_mirror_gives_a_ghost_point) {
  world_t w;
  ASSERT_OK(heap_scene(&w, two_layer(2.05, 8.26, 0.05, 0.0, 0.0)));
  lidar_return_t out[8];
  lidar_returns_desc_t d = desc(2, LIDAR_RETURN_ALL);
  d.beam = beam_a();
  ASSERT_EQ(trace_one(&d, &w, ray(0, 0, 0, 1, 0, 0), out), 2);
  ASSERT_KAT(out[0].intensity, 0.00811849046, GEOM_REL, FLOOR);
  ASSERT_KAT(out[1].intensity, 0.0416962964, GEOM_REL, FLOOR);

  // strongest: the wall seen in the mirror, reported along the emission direction at OPL 8 m
  // (the ghost behind the mirror), with the wall's id and normal (towards the mirror)
  d.mode = LIDAR_RETURN_STRONGEST;
  ASSERT_EQ(trace_one(&d, &w, ray(0, 0, 0, 1, 0, 0), out), 1);
  ASSERT_KAT(out[0].distance, 8.0, GEOM_REL, 0.0);
  ASSERT_EQ(out[0].object_id, 2);
  ASSERT_NEAR(out[0].normal[0], cos(40 * D2R), 1e-6);
  ASSERT_NEAR(out[0].normal[1], -sin(40 * D2R), 1e-6);
  ASSERT_EQ(out[0].index, 1);
  ASSERT_EQ(out[0].count, 2);

  // the modes over the same two candidates
  d.mode = LIDAR_RETURN_FIRST;
  ASSERT_EQ(trace_one(&d, &w, ray(0, 0, 0, 1, 0, 0), out), 1);
  ASSERT_EQ(out[0].object_id, 1);
  d.mode = LIDAR_RETURN_LAST;
  ASSERT_EQ(trace_one(&d, &w, ray(0, 0, 0, 1, 0, 0), out), 1);
  ASSERT_EQ(out[0].object_id, 2);
  d.mode = LIDAR_RETURN_DUAL;
  ASSERT_EQ(trace_one(&d, &w, ray(0, 0, 0, 1, 0, 0), out), 2);
  ASSERT_EQ(out[0].object_id, 1);
  ASSERT_EQ(out[1].object_id, 2);

  // a threshold between the two keeps the ghost only; a maximum range of 6 m only the mirror
  d.mode = LIDAR_RETURN_ALL;
  d.intensity_threshold = 0.01;
  ASSERT_EQ(trace_one(&d, &w, ray(0, 0, 0, 1, 0, 0), out), 1);
  ASSERT_EQ(out[0].object_id, 2);
  ASSERT_EQ(out[0].count, 1);
  d.intensity_threshold = 0.0;
  d.range_max = 6.0;
  ASSERT_EQ(trace_one(&d, &w, ray(0, 0, 0, 1, 0, 0), out), 1);
  ASSERT_EQ(out[0].object_id, 1);

  // round trip squares tau and w_R (not BD): the ghost's intensity scales by tau(8) w_R
  d.range_max = INFINITY;
  d.round_trip = 1;
  ASSERT_EQ(trace_one(&d, &w, ray(0, 0, 0, 1, 0, 0), out), 2);
  double w_r = brdf_fresnel_r(1.000273, 2.05, 8.26, cos(20 * D2R));
  ASSERT_KAT(out[1].intensity, 0.0416962964 * w_r * exp(-0.000402272 * 8.0), GEOM_REL, FLOOR);
  ASSERT_KAT(out[0].intensity, 0.00811849046 * exp(-0.000402272 * 5.0), GEOM_REL, FLOOR);
  return world_close(&w);
}


TEST(returns_fog_return_beats_the_wall) {
  // alpha = 0.03, white wall at 5 m; the medium returns at 2 m (a gamma law so narrow that its
  // samples are 2 m to 1e-5): I_atm = 0.187965156 > I_wall = 0.0694164093
  ambient_material_t fog = medium(0.03, 1.0);
  fog.return_scaling = 1.0;
  fog.gamma_shape = 1e12;
  fog.gamma_scale = 2e-12;
  world_t w;
  ASSERT_OK(world_init(&w, fog));
  double c5[3] = {5, 0, 0};
  double nx[3] = {1, 0, 0};
  ASSERT_TRUE(add_object(&w, SCENE_PRIM_PLANE, 0, 0, 0, c5, nx, lambert(0.8), NULL));
  ASSERT_OK(commit(&w));
  lidar_return_t out[8];
  lidar_returns_desc_t d = desc(1, LIDAR_RETURN_ALL);
  d.beam = beam_a();
  ASSERT_EQ(trace_one(&d, &w, ray(0, 0, 0, 1, 0, 0), out), 2);
  ASSERT_EQ(out[0].atmospheric, 1);
  ASSERT_NEAR(out[0].distance, 2.0, 1e-4);
  ASSERT_KAT(out[0].intensity, 0.187965156, 1e-4, FLOOR);
  ASSERT_EQ(out[0].object_id, 0);
  ASSERT_TRUE(out[0].normal[0] == 0.0 && out[0].normal[1] == 0.0 && out[0].normal[2] == 0.0);
  ASSERT_KAT(out[1].intensity, 0.0694164093, REL, FLOOR);

  d.mode = LIDAR_RETURN_STRONGEST;
  ASSERT_EQ(trace_one(&d, &w, ray(0, 0, 0, 1, 0, 0), out), 1);
  ASSERT_EQ(out[0].atmospheric, 1);
  return world_close(&w);
}


//---------------- Geometry

TEST(returns_refraction_through_a_slab) {
  // a slab of index 1.33 (x in [2, 3]) between the lidar and a white wall at x = 6; every
  // medium clear (no attenuation), no beam. A ray at 25 degrees to the slab normal refracts to
  // theta_t (sin theta_t = sin 25 / 1.33) inside and leaves parallel to itself; its OPL is
  // 2 / cos 25 + 1.33 / cos theta_t + 3 / cos 25, and its weight T_in T_out.
  ambient_material_t water = medium(0.0, 1.33);
  world_t w;
  ASSERT_OK(world_init(&w, medium(0.0, 1.0)));
  double cslab[3] = {2.5, 0, 0};
  double up[3] = {0, 0, 1};
  double cwall[3] = {6, 0, 0};
  double nx[3] = {1, 0, 0};
  ASSERT_EQ(add_object(&w, SCENE_PRIM_BOX, 0.5, 50, 50, cslab, up, lambert(0.5), &water), 1);
  ASSERT_EQ(add_object(&w, SCENE_PRIM_PLANE, 0, 0, 0, cwall, nx, lambert(0.8), NULL), 2);
  ASSERT_OK(commit(&w));

  double th = 25 * D2R;
  double tt = asin(sin(th) / 1.33);
  double opl = 2 / cos(th) + 1.33 / cos(tt) + 3 / cos(th);
  double t_in = brdf_fresnel(1.0, 1.33, 0.0, cos(th)).t;
  double t_out = brdf_fresnel(1.33, 1.0, 0.0, cos(tt)).t;
  double expect = t_in * t_out * 0.8 / M_PI * cos(th);
  lidar_return_t out[8];

  // depth 3: root (enter), transmission (leave), transmission (the wall)
  lidar_returns_desc_t d = desc(3, LIDAR_RETURN_ALL);
  ASSERT_EQ(trace_one(&d, &w, ray(0, 0, 0, cos(th), sin(th), 0), out), 1);
  ASSERT_KAT(out[0].distance, opl, GEOM_REL, 0.0);
  ASSERT_KAT(out[0].intensity, expect, GEOM_REL, 0.0);
  ASSERT_EQ(out[0].object_id, 2);

  // depth 2 stops inside the slab: the boundary itself returns nothing
  d.depth = 2;
  ASSERT_EQ(trace_one(&d, &w, ray(0, 0, 0, cos(th), sin(th), 0), out), 0);

  // round trip squares both transmittances
  d.depth = 3;
  d.round_trip = 1;
  ASSERT_EQ(trace_one(&d, &w, ray(0, 0, 0, cos(th), sin(th), 0), out), 1);
  ASSERT_KAT(out[0].intensity, expect * t_in * t_out, GEOM_REL, 0.0);
  return world_close(&w);
}


TEST(returns_total_internal_reflection_inside_a_volume) {
  // a glass cube [-1, 1]^3 (index 1.5) and a white wall x = 3 (half side 2). A ray enters the
  // face x = -1 at z = 0 with 50 degrees incidence, refracts to theta_t = asin(sin 50 / 1.5)
  // = 30.7 degrees, meets the top face at 59.3 degrees (beyond the critical 41.8 degrees) and
  // is totally reflected (weight 1, no transmission), leaves through x = 1 and reaches the wall
  // at 50 degrees incidence: node 0 (enter), 2 (top), 5 (reflected), 12 (out), depth 4.
  ambient_material_t glass = medium(0.0, 1.5);
  world_t w;
  ASSERT_OK(world_init(&w, medium(0.0, 1.0)));
  double cblock[3] = {0, 0, 0};
  double up[3] = {0, 0, 1};
  ASSERT_EQ(add_object(&w, SCENE_PRIM_BOX, 1, 1, 1, cblock, up, lambert(0.5), &glass), 1);
  double cwall[3] = {3, 0, 0};
  double nx[3] = {1, 0, 0};
  ASSERT_EQ(add_object(&w, SCENE_PRIM_PLANE, 2.0, 0, 0, cwall, nx, lambert(0.8), NULL), 2);
  ASSERT_OK(commit(&w));

  double th = 50 * D2R;
  double tt = asin(sin(th) / 1.5);
  double x_top = -1.0 + 1.0 / tan(tt);
  double inside = 1.0 / sin(tt) + (1.0 - x_top) / cos(tt);
  double opl = 2.0 + 1.5 * inside + 2.0 / cos(th);
  double expect = brdf_fresnel(1.0, 1.5, 0.0, cos(th)).t * brdf_fresnel(1.5, 1.0, 0.0, cos(tt)).t *
                  0.8 / M_PI * cos(th);
  scene_ray_t r = ray(-1.0 - 2.0 * cos(th), 0, -2.0 * sin(th), cos(th), 0, sin(th));
  lidar_return_t out[8];
  lidar_returns_desc_t d = desc(4, LIDAR_RETURN_ALL);
  ASSERT_EQ(trace_one(&d, &w, r, out), 1);
  ASSERT_EQ(out[0].object_id, 2);
  ASSERT_KAT(out[0].distance, opl, GEOM_REL, 0.0);
  ASSERT_KAT(out[0].intensity, expect, GEOM_REL, 0.0);

  // one level less ends inside the cube
  d.depth = 3;
  ASSERT_EQ(trace_one(&d, &w, r, out), 0);
  return world_close(&w);
}


TEST(returns_hollow_sphere_exact_and_noisy) {
  // a lidar inside a sphere of radius 7.5 m sees 7.5 m on every ray: exactly without noise;
  // with sigma = 0.02 + 0.001 x the mean and the spread are within 4 sigma of their sampling
  // errors
  world_t w;
  ASSERT_OK(world_init(&w, medium(0.0, 1.0)));
  double c[3] = {0, 0, 0};
  double up[3] = {0, 0, 1};
  ASSERT_TRUE(add_object(&w, SCENE_PRIM_SPHERE, 7.5, 0, 0, c, up, lambert(0.8), NULL));
  ASSERT_OK(commit(&w));

  const size_t n = 20000;
  scene_ray_t* rays = malloc(n * sizeof *rays);
  for (size_t i = 0; i < n; i++) {
    // directions on a spiral over the sphere
    double z = 1.0 - (2.0 * i + 1.0) / n;
    double r = sqrt(1.0 - z * z);
    double phi = 2.399963229728653 * i;
    rays[i] = ray(0, 0, 0, r * cos(phi), r * sin(phi), z);
  }
  lidar_return_t* out = malloc(n * sizeof *out);
  uint8_t* nret = malloc(n);
  lidar_returns_desc_t d = desc(1, LIDAR_RETURN_STRONGEST);
  lidar_returns_t p;
  ASSERT_OK(lidar_returns_init(&p, &d, NULL));
  trace(&p, &w, rays, n, out, nret);
  for (size_t i = 0; i < n; i++) {
    ASSERT_EQ(nret[i], 1);
    ASSERT_NEAR(out[i].distance, 7.5, 1e-5);
    ASSERT_KAT(out[i].intensity, 0.8 / M_PI, 1e-9, 0.0);
  }

  d.distance_noise = (lidar_distance_noise_desc_t){.stddev_base = 0.02, .stddev_slope = 0.001};
  ASSERT_OK(lidar_returns_init(&p, &d, NULL));
  trace(&p, &w, rays, n, out, nret);
  double sum = 0.0, s2 = 0.0;
  for (size_t i = 0; i < n; i++) {
    ASSERT_EQ(nret[i], 1);
    double e = out[i].distance - 7.5;
    sum += e;
    s2 += e * e;
  }
  double sigma = 0.02 + 0.001 * 7.5;
  double mean = sum / n;
  ASSERT_NEAR(mean, 0.0, 4 * sigma / sqrt((double)n));
  ASSERT_NEAR(sqrt(s2 / n - mean * mean), sigma, 4 * sigma / sqrt(2.0 * n));
  free(rays);
  free(out);
  free(nret);
  return world_close(&w);
}


//---------------- Filters, atmosphere, determinism

TEST(returns_range_and_threshold_filters) {
  world_t w;
  ASSERT_OK(world_init(&w, medium(0.0, 1.0)));
  double c[3] = {4, 0, 0};
  double nx[3] = {1, 0, 0};
  ASSERT_TRUE(add_object(&w, SCENE_PRIM_PLANE, 0, 0, 0, c, nx, lambert(0.5), NULL));
  ASSERT_OK(commit(&w));
  lidar_return_t out[8];
  lidar_returns_desc_t d = desc(1, LIDAR_RETURN_STRONGEST);
  ASSERT_EQ(trace_one(&d, &w, ray(0, 0, 0, 1, 0, 0), out), 1);

  // closer than range_min: a miss (and it hides what is behind it)
  d.range_min = 4.5;
  ASSERT_EQ(trace_one(&d, &w, ray(0, 0, 0, 1, 0, 0), out), 0);

  // beyond range_max: a miss
  d.range_min = 0.1;
  d.range_max = 3.9;
  ASSERT_EQ(trace_one(&d, &w, ray(0, 0, 0, 1, 0, 0), out), 0);
  d.range_max = 4.1;
  ASSERT_EQ(trace_one(&d, &w, ray(0, 0, 0, 1, 0, 0), out), 1);

  // intensity must exceed the threshold: 0.5 / pi = 0.159
  d.intensity_threshold = 0.16;
  ASSERT_EQ(trace_one(&d, &w, ray(0, 0, 0, 1, 0, 0), out), 0);
  d.intensity_threshold = 0.15;
  ASSERT_EQ(trace_one(&d, &w, ray(0, 0, 0, 1, 0, 0), out), 1);

  // nothing there
  ASSERT_EQ(trace_one(&d, &w, ray(0, 0, 0, -1, 0, 0), out), 0);
  return world_close(&w);
}


TEST(returns_fog_fraction_matches_the_gamma_cdf) {
  // s = 0.3, k = 9.5, theta = 0.52, a wall at L = 5 m: the fraction of rays with an
  // atmospheric return is s F(5) = 0.167362677 within 4 sigma; without the wall it is s
  ambient_material_t fog = medium(0.03, 1.0);
  fog.return_scaling = 0.3;
  world_t w;
  ASSERT_OK(world_init(&w, fog));
  double c[3] = {5, 0, 0};
  double nx[3] = {1, 0, 0};
  ASSERT_TRUE(add_object(&w, SCENE_PRIM_PLANE, 0, 0, 0, c, nx, lambert(0.8), NULL));
  ASSERT_OK(commit(&w));

  const size_t n = 40000;
  scene_ray_t* rays = malloc(n * sizeof *rays);
  for (size_t i = 0; i < n; i++) {
    rays[i] = ray(0, 0, 0, i % 2 ? 1 : -1, 0, 0);   // even rays miss, odd rays see the wall
  }
  lidar_returns_desc_t d = desc(1, LIDAR_RETURN_ALL);
  lidar_returns_t p;
  ASSERT_OK(lidar_returns_init(&p, &d, NULL));
  uint32_t maxr = lidar_returns_max(&p);
  lidar_return_t* out = malloc(n * maxr * sizeof *out);
  uint8_t* nret = malloc(n);
  trace(&p, &w, rays, n, out, nret);
  size_t atm[2] = {0, 0};
  for (size_t i = 0; i < n; i++) {
    for (uint32_t k = 0; k < nret[i]; k++) {
      const lidar_return_t* r = &out[i * maxr + k];
      if (r->atmospheric) {
        atm[i % 2]++;
        ASSERT_TRUE(i % 2 == 0 || r->distance < 5.0);

        // each atmospheric return has I = tau(X) rho_atm (no beam)
        ASSERT_KAT(r->intensity, exp(-0.03 * r->distance) / M_PI, 1e-12, 0.0);
      }
    }
  }
  double half = n / 2.0;
  double pw = 0.3 * atmosphere_gamma_cdf(5.0, 9.5, 0.52);
  ASSERT_KAT(pw, 0.167362677, REL, FLOOR);
  ASSERT_NEAR(atm[1] / half, pw, 4 * sqrt(pw * (1 - pw) / half));
  ASSERT_NEAR(atm[0] / half, 0.3, 4 * sqrt(0.3 * 0.7 / half));
  free(rays);
  free(out);
  free(nret);
  return world_close(&w);
}


TEST(returns_identical_whatever_the_batches) {
  // fog, noise and a reflecting surface: tracing all rays at once, one at a time, or in a
  // shuffled order of batches gives bit-identical returns (each ray keyed by its index)
  ambient_material_t fog = medium(0.01, 1.000273);
  fog.return_scaling = 0.5;
  world_t w;
  ASSERT_OK(world_init(&w, fog));
  double c[3] = {6, 0, 0};
  double n1[3] = {-0.9, 0.3, 0.3};
  double l = sqrt(0.99);
  n1[0] /= l, n1[1] /= l, n1[2] /= l;
  double c2[3] = {0, 0, -2};
  double up[3] = {0, 0, 1};
  ASSERT_TRUE(add_object(&w, SCENE_PRIM_PLANE, 0, 0, 0, c, n1, two_layer(1.6, 0.1, 0.2, 0.5, 0.3),
                         NULL));
  ASSERT_TRUE(add_object(&w, SCENE_PRIM_PLANE, 0, 0, 0, c2, up, two_layer(1.5, 0, 0.05, 0.3, 0.2),
                         NULL));
  ASSERT_OK(commit(&w));

  const size_t n = 1000;
  scene_ray_t* rays = malloc(n * sizeof *rays);
  uint64_t* idx = malloc(n * sizeof *idx);
  for (size_t i = 0; i < n; i++) {
    double az = (double)i / n * 2 * M_PI;
    rays[i] = ray(0, 0, 0, cos(az), sin(az), -0.2);
    idx[i] = 1000 + 7 * i;
  }
  lidar_returns_desc_t d = desc(3, LIDAR_RETURN_ALL);
  d.distance_noise.stddev_base = 0.03;
  d.beam = beam_a();
  lidar_returns_t p;
  ASSERT_OK(lidar_returns_init(&p, &d, NULL));
  uint32_t maxr = lidar_returns_max(&p);
  lidar_return_t* a = calloc(n * maxr, sizeof *a);
  lidar_return_t* b = calloc(n * maxr, sizeof *b);
  uint8_t* na = calloc(n, 1);
  uint8_t* nb = calloc(n, 1);
  lidar_returns_batch_t all = {&w.view, 4, 77, rays, idx, n, NULL};
  lidar_returns_trace(&p, &all, a, na);

  // backwards in odd-sized batches
  for (size_t end = n; end > 0;) {
    size_t m = end >= 37 ? 37 : end;
    size_t start = end - m;
    lidar_returns_batch_t part = {&w.view, 4, 77, rays + start, idx + start, m, NULL};
    lidar_returns_trace(&p, &part, b + start * maxr, nb + start);
    end = start;
  }
  ASSERT_MEM_EQ(na, nb, n);
  size_t atm = 0, multi = 0;
  for (size_t i = 0; i < n; i++) {
    ASSERT_MEM_EQ(a + i * maxr, b + i * maxr, na[i] * sizeof *a);
    multi += na[i] > 1;
    for (uint32_t k = 0; k < na[i]; k++) {
      atm += a[i * maxr + k].atmospheric;
    }
  }

  // the scene does what it should: atmospheric returns and several returns per ray exist
  ASSERT_TRUE(atm > 0);
  ASSERT_TRUE(multi > 0);

  // another frame draws other noise
  lidar_returns_batch_t other = {&w.view, 4, 78, rays, idx, n, NULL};
  lidar_returns_trace(&p, &other, b, nb);
  ASSERT_TRUE(memcmp(a, b, n * maxr * sizeof *a) != 0);
  free(rays);
  free(idx);
  free(a);
  free(b);
  free(na);
  free(nb);
  return world_close(&w);
}


typedef struct par_ctx {
  const lidar_returns_t* p;
  const world_t* w;
  const scene_ray_t* rays;
  const uint64_t* idx;
  lidar_return_t* out;
  uint8_t* nret;
} par_ctx_t;


static void par_trace(void* arg, size_t begin, size_t end) {
  par_ctx_t* c = arg;
  uint32_t maxr = lidar_returns_max(c->p);
  lidar_returns_batch_t b = {&c->w->view, 4, 5, c->rays + begin, c->idx + begin, end - begin,
                              NULL};
  lidar_returns_trace(c->p, &b, c->out + begin * maxr, c->nret + begin);
}


TEST(returns_identical_on_one_and_two_workers) {
  // the same rays traced serially and on a pool of two threads, in grains of 7
  ambient_material_t fog = medium(0.02, 1.000273);
  fog.return_scaling = 0.4;
  world_t w;
  ASSERT_OK(world_init(&w, fog));
  double c[3] = {0, 0, 0};
  double up[3] = {0, 0, 1};
  ASSERT_TRUE(add_object(&w, SCENE_PRIM_SPHERE, 9.0, 0, 0, c, up, two_layer(1.5, 0, 0.1, 0.6, 0.3),
                         NULL));
  ASSERT_OK(commit(&w));
  const size_t n = 3000;
  scene_ray_t* rays = malloc(n * sizeof *rays);
  uint64_t* idx = malloc(n * sizeof *idx);
  for (size_t i = 0; i < n; i++) {
    double z = 1.0 - (2.0 * i + 1.0) / n;
    double r = sqrt(1.0 - z * z);
    rays[i] = ray(0.5, 0.2, 0, r * cos(2.4 * i), r * sin(2.4 * i), z);
    idx[i] = i;
  }
  lidar_returns_desc_t d = desc(3, LIDAR_RETURN_DUAL);
  d.distance_noise.stddev_slope = 0.002;
  lidar_returns_t p;
  ASSERT_OK(lidar_returns_init(&p, &d, NULL));
  lidar_return_t* a = calloc(n * 2, sizeof *a);
  lidar_return_t* b = calloc(n * 2, sizeof *b);
  uint8_t* na = calloc(n, 1);
  uint8_t* nb = calloc(n, 1);
  par_ctx_t serial = {&p, &w, rays, idx, a, na};
  par_trace(&serial, 0, n);
  pool_t* pool = pool_create(2);
  ASSERT_TRUE(pool != NULL);
  par_ctx_t par = {&p, &w, rays, idx, b, nb};
  pool_parallel_for(pool, n, 7, par_trace, &par);
  pool_destroy(pool);
  ASSERT_MEM_EQ(na, nb, n);
  ASSERT_MEM_EQ(a, b, n * 2 * sizeof *a);
  free(rays);
  free(idx);
  free(a);
  free(b);
  free(na);
  free(nb);
  return world_close(&w);
}


TEST(returns_depth_one_equals_the_segment_heap) {
  // Where no segment has children (Lambertian surfaces, no volumes), depth 1 (its packets of
  // columns, and a fast path for the rays without an atmospheric candidate) and depth 3 (the
  // segment heap in rows) must give the same returns bit for bit: surfaces of several
  // reflectances (one black), fog returns, attenuation, the beam, a detection threshold, range
  // limits and distance noise, in every mode, with and without round-trip attenuation
  ambient_material_t fog = medium(0.02, 1.000273);
  fog.return_scaling = 0.3;
  world_t w;
  ASSERT_OK(world_init(&w, fog));
  static const double up[3] = {0, 0, 1}, down[3] = {0, 0, -1}, x_axis[3] = {1, 0, 0};
  static const double ground[3] = {0, 0, -1.5}, roof[3] = {0, 0, 12}, wall[3] = {-9, 0, 0};
  static const double ball[3] = {6, 1, 0};
  ASSERT_TRUE(add_object(&w, SCENE_PRIM_PLANE, 0, 0, 0, ground, up, lambert(0.3), NULL));
  ASSERT_TRUE(add_object(&w, SCENE_PRIM_PLANE, 0, 0, 0, roof, down, lambert(0.0), NULL));
  ASSERT_TRUE(add_object(&w, SCENE_PRIM_PLANE, 0, 0, 0, wall, x_axis, lambert(0.05), NULL));
  ASSERT_TRUE(add_object(&w, SCENE_PRIM_SPHERE, 2.0, 0, 0, ball, up, lambert(0.9), NULL));
  ASSERT_OK(commit(&w));

  // directions spread over the sphere (a Fibonacci lattice)
  const size_t n = 4000;
  scene_ray_t* rays = malloc(n * sizeof *rays);
  for (size_t i = 0; i < n; i++) {
    double z = 1.0 - (2.0 * i + 1.0) / n;
    double r = sqrt(1.0 - z * z);
    rays[i] = ray(0.3, -0.2, 0.1, r * cos(2.39996 * i), r * sin(2.39996 * i), z);
  }
  lidar_return_t* a = calloc(n * 14, sizeof *a);
  lidar_return_t* b = calloc(n * 14, sizeof *b);
  uint8_t* na = calloc(n, 1);
  uint8_t* nb = calloc(n, 1);
  static const lidar_return_mode_t modes[] = {LIDAR_RETURN_STRONGEST, LIDAR_RETURN_FIRST,
                                              LIDAR_RETURN_LAST, LIDAR_RETURN_DUAL,
                                              LIDAR_RETURN_ALL};
  size_t surface = 0, atm = 0, two = 0, miss = 0;
  for (size_t c = 0; c < 2 * sizeof modes / sizeof modes[0]; c++) {
    lidar_returns_desc_t d = desc(1, modes[c / 2]);
    d.range_max = 25.0;
    d.intensity_threshold = 2e-4;
    d.round_trip = (int)(c % 2);
    d.beam = beam_a();
    d.distance_noise.stddev_base = 0.02;
    d.distance_noise.stddev_slope = 0.001;
    lidar_returns_t p1, p3;
    ASSERT_OK(lidar_returns_init(&p1, &d, NULL));
    d.depth = 3;
    ASSERT_OK(lidar_returns_init(&p3, &d, NULL));
    uint32_t m1 = lidar_returns_max(&p1), m3 = lidar_returns_max(&p3);
    trace(&p1, &w, rays, n, a, na);
    trace(&p3, &w, rays, n, b, nb);
    ASSERT_MEM_EQ(na, nb, n);
    for (size_t i = 0; i < n; i++) {
      ASSERT_MEM_EQ(a + i * m1, b + i * m3, na[i] * sizeof *a);
      miss += na[i] == 0;
      two += na[i] == 2;
      for (uint32_t k = 0; k < na[i]; k++) {
        atm += a[i * m1 + k].atmospheric;
        surface += !a[i * m1 + k].atmospheric;
      }
    }
  }

  // the scene gives every kind of ray
  ASSERT_TRUE(surface > 1000 && atm > 1000 && two > 100 && miss > 1000);
  free(rays);
  free(a);
  free(b);
  free(na);
  free(nb);
  return world_close(&w);
}


TEST(returns_depth_one_per_triangle_materials) {
  // A ground of small triangles whose materials alternate (Lambertian, reflectances 0.2 and
  // 0.7, looked up per hit): the packets of depth 1, whose neighbouring lanes hit the same
  // object but not the same triangle, must give the segment heap's returns bit for bit, and
  // each triangle's own reflectance (intensity c cos / pi)
  world_t w;
  ASSERT_OK(world_init(&w, medium(0.0, 1.0)));
  enum { CELLS = 40 };
  const double side = 0.5;   // m per cell, the grid centred on the origin at z = -2
  float* v = malloc(3 * sizeof(float) * (CELLS + 1) * (CELLS + 1));
  uint32_t* idx = malloc(6 * sizeof(uint32_t) * CELLS * CELLS);
  for (uint32_t i = 0; i <= CELLS; i++) {
    for (uint32_t j = 0; j <= CELLS; j++) {
      float* p = &v[3 * (i * (CELLS + 1) + j)];
      p[0] = (float)((i - CELLS / 2.0) * side);
      p[1] = (float)((j - CELLS / 2.0) * side);
      p[2] = -2.0f;
    }
  }
  for (uint32_t i = 0; i < CELLS; i++) {
    for (uint32_t j = 0; j < CELLS; j++) {
      uint32_t a = i * (CELLS + 1) + j, b = a + 1, c = a + CELLS + 1, d = c + 1;
      uint32_t* t = &idx[6 * (i * CELLS + j)];
      t[0] = a, t[1] = c, t[2] = b;   // counter-clockwise seen from above
      t[3] = b, t[4] = c, t[5] = d;
    }
  }
  err_msg_t msg = {{0}};
  int g = scene_add_mesh(w.s, v, (CELLS + 1) * (CELLS + 1), idx, 2 * CELLS * CELLS, &msg);
  ASSERT_TRUE(g >= 0);
  static const double unit[3] = {1, 1, 1};
  uint32_t id = ++w.nobj;
  ASSERT_TRUE(scene_add_instance(w.s, g, unit, id, 7, &msg) >= 0);
  w.per_triangle[id] = 1;
  w.tri_mat[0] = lambert(0.2);
  w.tri_mat[1] = lambert(0.7);
  ASSERT_OK(commit(&w));

  // a fan of rays down onto the grid, consecutive rays a few centimetres apart
  const size_t n = 1600;
  scene_ray_t* rays = malloc(n * sizeof *rays);
  for (size_t i = 0; i < n; i++) {
    double a = 0.013 * (double)i, r = 0.2 + 0.0025 * (double)i;
    rays[i] = ray(0.01, 0.02, 0.0, r * cos(a), r * sin(a), -1.0);
  }
  lidar_return_t* a1 = calloc(n, sizeof *a1);
  lidar_return_t* a3 = calloc(n, sizeof *a3);
  uint8_t* n1 = calloc(n, 1);
  uint8_t* n3 = calloc(n, 1);
  lidar_returns_desc_t d = desc(1, LIDAR_RETURN_STRONGEST);
  lidar_returns_t p1, p3;
  ASSERT_OK(lidar_returns_init(&p1, &d, NULL));
  d.depth = 3;
  ASSERT_OK(lidar_returns_init(&p3, &d, NULL));
  trace(&p1, &w, rays, n, a1, n1);
  trace(&p3, &w, rays, n, a3, n3);
  ASSERT_MEM_EQ(n1, n3, n);
  size_t seen[2] = {0, 0};
  for (size_t i = 0; i < n; i++) {
    ASSERT_EQ(n1[i], 1);
    ASSERT_MEM_EQ(&a1[i], &a3[i], sizeof a1[i]);

    // the triangle under the hit: cell (ci, cj), the lower one where its local u + w < 1
    const double* o = rays[i].origin;
    const double* dir = rays[i].dir;
    double x = (o[0] + dir[0] * a1[i].distance) / side + CELLS / 2.0;
    double y = (o[1] + dir[1] * a1[i].distance) / side + CELLS / 2.0;
    double ci = floor(x), cj = floor(y), uw = (x - ci) + (y - cj);
    if (fabs(uw - 1.0) < 1e-6 || x - ci < 1e-6 || y - cj < 1e-6) {
      continue;   // on an edge
    }
    int upper = uw > 1.0;
    double expect = (upper ? 0.7 : 0.2) * M_1_PI * -dir[2];
    ASSERT_NEAR(a1[i].intensity, expect, 1e-9 * expect);
    seen[upper]++;
  }
  ASSERT_TRUE(seen[0] > 300 && seen[1] > 300);
  free(v);
  free(idx);
  free(rays);
  free(a1);
  free(a3);
  free(n1);
  free(n3);
  return world_close(&w);
}


//---------------- Selection

static lidar_candidate_t cand(double x, double i, uint32_t node, uint8_t atm) {
  lidar_candidate_t c = {.distance = x, .intensity = i, .node = node, .atmospheric = atm,
                         .object_id = atm ? 0 : node + 1};
  return c;
}


TEST(returns_select_modes_and_ties) {
  lidar_returns_t p;
  lidar_returns_desc_t d = desc(4, LIDAR_RETURN_STRONGEST);
  ASSERT_OK(lidar_returns_init(&p, &d, NULL));
  lidar_return_t out[16];
  lidar_candidate_t c[8];

  // strongest, ties broken by the smaller distance
  c[0] = cand(9.0, 0.5, 2, 0);
  c[1] = cand(3.0, 0.5, 1, 0);
  c[2] = cand(5.0, 0.2, 0, 0);
  ASSERT_EQ(lidar_returns_select(&p, c, 3, out), 1);
  ASSERT_NEAR(out[0].distance, 3.0, 0);
  ASSERT_EQ(out[0].index, 0);
  ASSERT_EQ(out[0].count, 3);

  // equal distance and intensity: the smaller node
  c[0] = cand(4.0, 0.5, 6, 0);
  c[1] = cand(4.0, 0.5, 2, 0);
  ASSERT_EQ(lidar_returns_select(&p, c, 2, out), 1);
  ASSERT_EQ(out[0].object_id, 3);

  // first and last
  d.mode = LIDAR_RETURN_FIRST;
  ASSERT_OK(lidar_returns_init(&p, &d, NULL));
  c[0] = cand(9.0, 0.5, 2, 0);
  c[1] = cand(3.0, 0.1, 1, 0);
  c[2] = cand(5.0, 0.2, 0, 1);
  ASSERT_EQ(lidar_returns_select(&p, c, 3, out), 1);
  ASSERT_NEAR(out[0].distance, 3.0, 0);
  d.mode = LIDAR_RETURN_LAST;
  ASSERT_OK(lidar_returns_init(&p, &d, NULL));
  c[0] = cand(9.0, 0.5, 2, 0);
  c[1] = cand(3.0, 0.1, 1, 0);
  c[2] = cand(5.0, 0.2, 0, 1);
  ASSERT_EQ(lidar_returns_select(&p, c, 3, out), 1);
  ASSERT_NEAR(out[0].distance, 9.0, 0);
  ASSERT_EQ(out[0].index, 2);

  // dual: strongest and last; when the last is the strongest, the second strongest with it
  d.mode = LIDAR_RETURN_DUAL;
  ASSERT_OK(lidar_returns_init(&p, &d, NULL));
  ASSERT_EQ(lidar_returns_max(&p), 2);
  c[0] = cand(9.0, 0.1, 2, 0);
  c[1] = cand(3.0, 0.5, 1, 0);
  c[2] = cand(5.0, 0.2, 0, 1);
  ASSERT_EQ(lidar_returns_select(&p, c, 3, out), 2);
  ASSERT_NEAR(out[0].distance, 3.0, 0);
  ASSERT_NEAR(out[1].distance, 9.0, 0);
  c[0] = cand(9.0, 0.9, 2, 0);
  c[1] = cand(3.0, 0.1, 1, 0);
  c[2] = cand(5.0, 0.2, 0, 1);
  ASSERT_EQ(lidar_returns_select(&p, c, 3, out), 2);
  ASSERT_NEAR(out[0].distance, 5.0, 0);
  ASSERT_EQ(out[0].atmospheric, 1);
  ASSERT_EQ(out[0].index, 1);
  ASSERT_NEAR(out[1].distance, 9.0, 0);
  c[0] = cand(9.0, 0.9, 2, 0);
  ASSERT_EQ(lidar_returns_select(&p, c, 1, out), 1);

  // all, capped: the two strongest, in distance order
  d.mode = LIDAR_RETURN_ALL;
  d.max_returns = 2;
  ASSERT_OK(lidar_returns_init(&p, &d, NULL));
  c[0] = cand(9.0, 0.3, 2, 0);
  c[1] = cand(3.0, 0.1, 1, 0);
  c[2] = cand(5.0, 0.2, 0, 1);
  c[3] = cand(7.0, 0.05, 3, 0);
  ASSERT_EQ(lidar_returns_select(&p, c, 4, out), 2);
  ASSERT_NEAR(out[0].distance, 5.0, 0);
  ASSERT_EQ(out[0].index, 1);
  ASSERT_NEAR(out[1].distance, 9.0, 0);
  ASSERT_EQ(out[1].index, 3);
  ASSERT_EQ(out[1].count, 4);

  // all, uncapped (default): every candidate
  d.max_returns = 0;
  ASSERT_OK(lidar_returns_init(&p, &d, NULL));
  ASSERT_EQ(lidar_returns_max(&p), 2 * 15);
  c[0] = cand(9.0, 0.3, 2, 0);
  c[1] = cand(3.0, 0.1, 1, 0);
  c[2] = cand(5.0, 0.2, 0, 1);
  c[3] = cand(7.0, 0.05, 3, 0);
  ASSERT_EQ(lidar_returns_select(&p, c, 4, out), 4);
  ASSERT_NEAR(out[3].distance, 9.0, 0);

  // filters: zero intensity (threshold 0 is exclusive), below range_min, above range_max
  d.range_max = 8.0;
  ASSERT_OK(lidar_returns_init(&p, &d, NULL));
  c[0] = cand(9.0, 0.3, 2, 0);
  c[1] = cand(3.0, 0.0, 1, 0);
  c[2] = cand(0.05, 0.2, 0, 1);
  c[3] = cand(7.0, 0.05, 3, 0);
  ASSERT_EQ(lidar_returns_select(&p, c, 4, out), 1);
  ASSERT_NEAR(out[0].distance, 7.0, 0);
  ASSERT_EQ(out[0].count, 1);
  ASSERT_EQ(lidar_returns_select(&p, c, 0, out), 0);
  return 0;
}


//---------------- Configuration

TEST(returns_init_defaults) {
  lidar_returns_desc_t d = desc(0, LIDAR_RETURN_STRONGEST);
  lidar_returns_t p;
  ASSERT_OK(lidar_returns_init(&p, &d, NULL));
  ASSERT_EQ(p.depth, 1);
  ASSERT_EQ(lidar_returns_max(&p), 1);
  ASSERT_EQ(p.beam.enabled, 0);
  ASSERT_EQ(p.distance_noise.enabled, 0);
  d.depth = LIDAR_MAX_DEPTH;
  d.mode = LIDAR_RETURN_ALL;
  ASSERT_OK(lidar_returns_init(&p, &d, NULL));
  ASSERT_EQ(lidar_returns_max(&p), LIDAR_MAX_RETURNS);
  return 0;
}


TEST(returns_init_rejects_bad_configuration_naming_the_field) {
  static const struct {
    int what;
    double value;
    const char* field;
  } bad[] = {
      {0, 9, "lidar.raytrace_depth = 9"},
      {1, 7, "lidar.return_mode = 7"},
      {2, 256, "lidar.max_returns = 256"},
      {3, -0.1, "lidar.intensity_threshold = -0.1"},
      {3, NAN, "lidar.intensity_threshold = nan"},
      {4, -1, "lidar.range_min = -1"},
      {4, NAN, "lidar.range_min = nan"},
      {4, INFINITY, "lidar.range_min = inf"},
      {5, 0.1, "lidar.range_max = 0.1"},
      {5, -5, "lidar.range_max = -5"},
      {5, NAN, "lidar.range_max = nan"},
      {6, 0.5, "lidar.beam.divergence = 0.5"},
      {7, NAN, "lidar.beam.detector_radius = nan"},
      {8, -0.01, "lidar.distance_noise.stddev_base = -0.01"},
      {9, INFINITY, "lidar.distance_noise.mean = inf"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    lidar_returns_desc_t d = desc(2, LIDAR_RETURN_ALL);
    d.beam = beam_a();
    switch (bad[i].what) {
      case 0: d.depth = (uint32_t)bad[i].value; break;
      case 1: d.mode = (lidar_return_mode_t)bad[i].value; break;
      case 2: d.max_returns = (uint32_t)bad[i].value; break;
      case 3: d.intensity_threshold = bad[i].value; break;
      case 4: d.range_min = bad[i].value; break;
      case 5: d.range_max = bad[i].value; break;
      case 6: d.beam.divergence = bad[i].value; break;
      case 7: d.beam.detector_radius = bad[i].value; break;
      case 8: d.distance_noise.stddev_base = bad[i].value; break;
      default: d.distance_noise.mean = bad[i].value; break;
    }
    lidar_returns_t p;
    memset(&p, 0xab, sizeof p);
    lidar_returns_t before = p;
    err_msg_t msg = {{0}};
    ASSERT_EQ(lidar_returns_init(&p, &d, &msg), ERR_INVAL);
    ASSERT_CONTAINS(msg.text, bad[i].field);
    ASSERT_MEM_EQ(&p, &before, sizeof p);
  }
  return 0;
}
