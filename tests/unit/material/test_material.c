// SPDX-License-Identifier: MIT
// test_material.c: surface-material and ambient-medium defaults, every range check with its
// message, the Koschmieder reference values (docs/models/materials.md) and the weather presets.
#include "material/material.h"

#include <math.h>
#include <string.h>

#include "check.h"


TEST(material_defaults_match_agxunity) {
  surface_material_t l = material_default_lambertian();
  ASSERT_EQ(l.kind, MATERIAL_LAMBERTIAN);
  ASSERT_NEAR(l.reflectance, 0.8, 0.0);
  ASSERT_OK(material_validate(&l, NULL));

  surface_material_t t = material_default_two_layer();
  ASSERT_EQ(t.kind, MATERIAL_TWO_LAYER);
  ASSERT_NEAR(t.n_re, 1.4517, 0.0);
  ASSERT_NEAR(t.n_im, 0.0, 0.0);
  ASSERT_NEAR(t.sigma_b, 0.3, 0.0);
  ASSERT_NEAR(t.reflectance, 0.8, 0.0);
  ASSERT_NEAR(t.sigma_on, 0.3, 0.0);
  ASSERT_OK(material_validate(&t, NULL));

  ambient_material_t a = ambient_default_air();
  ASSERT_NEAR(a.attenuation, 0.000402272, 0.0);
  ASSERT_NEAR(a.refractive_index, 1.000273, 0.0);
  ASSERT_NEAR(a.gamma_shape, 9.5, 0.0);
  ASSERT_NEAR(a.gamma_scale, 0.52, 0.0);
  ASSERT_NEAR(a.return_scaling, 1.58899e-5, 0.0);
  ASSERT_NEAR(a.backscatter, 1.0 / M_PI, 0.0);
  ASSERT_OK(ambient_validate(&a, NULL));
  return 0;
}


typedef struct surface_case {
  material_kind_t kind;
  int field;                 // 0 reflectance, 1 n_re, 2 n_im, 3 sigma_b, 4 sigma_on
  double value;
  const char* message;       // NULL: accepted
} surface_case_t;


static void set_surface_field(surface_material_t* m, int field, double v) {
  double* f[5] = {&m->reflectance, &m->n_re, &m->n_im, &m->sigma_b, &m->sigma_on};
  *f[field] = v;
}


TEST(material_validate_names_every_field) {
  // clang-format off
  static const surface_case_t cases[] = {
    {MATERIAL_LAMBERTIAN, 0, 1.2, "lambertian.reflectance = 1.2 is outside [0, 1]"},
    {MATERIAL_LAMBERTIAN, 0, -0.1, "lambertian.reflectance = -0.1 is outside [0, 1]"},
    {MATERIAL_LAMBERTIAN, 0, NAN, "lambertian.reflectance = nan is not finite"},
    {MATERIAL_LAMBERTIAN, 0, INFINITY, "lambertian.reflectance = inf is not finite"},
    {MATERIAL_LAMBERTIAN, 0, 0.0, NULL},
    {MATERIAL_LAMBERTIAN, 0, 1.0, NULL},
    {MATERIAL_TWO_LAYER, 0, 1.2, "two_layer.diffuse_reflectance = 1.2 is outside [0, 1]"},
    {MATERIAL_TWO_LAYER, 0, -1e-9, "two_layer.diffuse_reflectance = -1e-09 is outside [0, 1]"},
    {MATERIAL_TWO_LAYER, 0, NAN, "two_layer.diffuse_reflectance = nan is not finite"},
    {MATERIAL_TWO_LAYER, 0, 0.0, NULL},
    {MATERIAL_TWO_LAYER, 0, 1.0, NULL},
    {MATERIAL_TWO_LAYER, 1, 0.0, "two_layer.refractive_index = 0 must be > 0"},
    {MATERIAL_TWO_LAYER, 1, -1.5, "two_layer.refractive_index = -1.5 must be > 0"},
    {MATERIAL_TWO_LAYER, 1, INFINITY, "two_layer.refractive_index = inf is not finite"},
    {MATERIAL_TWO_LAYER, 1, 1e-6, NULL},
    {MATERIAL_TWO_LAYER, 2, -0.1, "two_layer.extinction_coefficient = -0.1 is outside [0, 100]"},
    {MATERIAL_TWO_LAYER, 2, 1e300, "two_layer.extinction_coefficient = 1e+300 is outside [0, 100]"},
    {MATERIAL_TWO_LAYER, 1, 1e300, "two_layer.refractive_index = 1e+300 is outside [0, 100]"},
    {MATERIAL_TWO_LAYER, 2, NAN, "two_layer.extinction_coefficient = nan is not finite"},
    {MATERIAL_TWO_LAYER, 2, 8.26, NULL},
    {MATERIAL_TWO_LAYER, 3, -0.3, "two_layer.specular_roughness = -0.3 is outside [0, 10]"},
    {MATERIAL_TWO_LAYER, 3, -INFINITY, "two_layer.specular_roughness = -inf is not finite"},
    {MATERIAL_TWO_LAYER, 3, 1e200, "two_layer.specular_roughness = 1e+200 is outside [0, 10]"},
    {MATERIAL_TWO_LAYER, 3, 0.0, NULL},
    {MATERIAL_TWO_LAYER, 3, 10.0, NULL},
    {MATERIAL_TWO_LAYER, 4, -0.3, "two_layer.diffuse_roughness = -0.3 is outside [0, 1.5708]"},
    {MATERIAL_TWO_LAYER, 4, NAN, "two_layer.diffuse_roughness = nan is not finite"},
    {MATERIAL_TWO_LAYER, 4, 1.6, "two_layer.diffuse_roughness = 1.6 is outside [0, 1.5708]"},
    {MATERIAL_TWO_LAYER, 4, 0.0, NULL},
    {MATERIAL_TWO_LAYER, 4, 1.5, NULL},
  };
  // clang-format on
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    const surface_case_t* c = &cases[i];
    surface_material_t m = c->kind == MATERIAL_LAMBERTIAN ? material_default_lambertian()
                                                          : material_default_two_layer();
    set_surface_field(&m, c->field, c->value);
    err_msg_t msg = {{0}};
    int rc = material_validate(&m, &msg);
    if (c->message) {
      ASSERT_EQ(rc, ERR_INVAL);
      ASSERT_STREQ(msg.text, c->message);
    } else {
      ASSERT_OK(rc);
    }
  }

  // a Lambertian ignores the two-layer fields; an unknown kind is refused
  surface_material_t m = material_default_lambertian();
  m.n_re = NAN;
  m.sigma_b = -1.0;
  ASSERT_OK(material_validate(&m, NULL));
  m.kind = (material_kind_t)7;
  err_msg_t msg;
  ASSERT_EQ(material_validate(&m, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "material.kind = 7");
  return 0;
}


typedef struct ambient_case {
  int field;  // 0 alpha, 1 n_amb, 2 k, 3 theta, 4 s, 5 rho_atm
  double value;
  const char* message;
} ambient_case_t;


TEST(ambient_validate_names_every_field) {
  // clang-format off
  static const ambient_case_t cases[] = {
    {0, -1e-3, "ambient.attenuation = -0.001 must be >= 0"},
    {0, NAN, "ambient.attenuation = nan is not finite"},
    {0, INFINITY, "ambient.attenuation = inf is not finite"},
    {0, 0.0, NULL},
    {1, 0.99, "ambient.refractive_index = 0.99 must be >= 1"},
    {1, NAN, "ambient.refractive_index = nan is not finite"},
    {1, 1.0, NULL},
    {2, 0.0, "ambient.return_gamma_shape = 0 must be > 0"},
    {2, -2.0, "ambient.return_gamma_shape = -2 must be > 0"},
    {2, INFINITY, "ambient.return_gamma_shape = inf is not finite"},
    {2, 0.5, NULL},
    {3, 0.0, "ambient.return_gamma_scale = 0 must be > 0"},
    {3, NAN, "ambient.return_gamma_scale = nan is not finite"},
    {3, 1e-9, NULL},
    {4, 1.5, "ambient.return_probability_scaling = 1.5 is outside [0, 1]"},
    {4, -0.5, "ambient.return_probability_scaling = -0.5 is outside [0, 1]"},
    {4, NAN, "ambient.return_probability_scaling = nan is not finite"},
    {4, 0.0, NULL},
    {4, 1.0, NULL},
    {5, -1.0, "ambient.atmospheric_backscatter = -1 must be >= 0"},
    {5, INFINITY, "ambient.atmospheric_backscatter = inf is not finite"},
    {5, 0.0, NULL},
  };
  // clang-format on
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    ambient_material_t a = ambient_default_air();
    double* f[6] = {&a.attenuation, &a.refractive_index, &a.gamma_shape,
                    &a.gamma_scale, &a.return_scaling,   &a.backscatter};
    *f[cases[i].field] = cases[i].value;
    err_msg_t msg = {{0}};
    int rc = ambient_validate(&a, &msg);
    if (cases[i].message) {
      ASSERT_EQ(rc, ERR_INVAL);
      ASSERT_STREQ(msg.text, cases[i].message);
    } else {
      ASSERT_OK(rc);
    }
  }
  return 0;
}


TEST(ambient_koschmieder_matches_kat_a) {
  // docs/models/materials.md, "Known-answer values" (KAT-A), with their pass criterion
  ASSERT_KAT(ambient_koschmieder(7447.03), 0.000402272083, 2e-8, 1e-3);
  ASSERT_KAT(ambient_koschmieder(50.0), 0.0599146455, 2e-8, 1e-3);

  // the clear-air preset at the AGX default visibility reproduces the air default
  ambient_material_t a;
  ambient_material_t air = ambient_default_air();
  ASSERT_OK(ambient_clear_air(7447.03, &a, NULL));
  ASSERT_KAT(a.attenuation, 0.000402272083, 2e-8, 1e-3);
  ASSERT_NEAR(a.gamma_shape, air.gamma_shape, 0.0);
  ASSERT_NEAR(a.gamma_scale, air.gamma_scale, 1e-9);
  ASSERT_NEAR(a.return_scaling, air.return_scaling, 1e-11);
  ASSERT_NEAR(a.refractive_index, air.refractive_index, 0.0);
  ASSERT_NEAR(a.backscatter, air.backscatter, 0.0);
  return 0;
}


TEST(ambient_presets_follow_their_formulas) {
  ambient_material_t a;
  const double db_km = log(10.0) / 1e4;

  // dense fog: q = 0, plain Koschmieder; s near the project's calibration point 0.3 at 50 m
  // (ambient.c: a choice, not a published value)
  ASSERT_OK(ambient_fog(50.0, &a, NULL));
  ASSERT_NEAR(a.attenuation, log(20.0) / 50.0, 1e-15);
  ASSERT_TRUE(a.return_scaling > 0.28 && a.return_scaling < 0.31);
  ASSERT_NEAR(a.gamma_scale, 0.52 / (1.0 + 1.04 * (log(20.0) / 50.0 - 0.000402272)), 1e-12);

  // light fog, 2 km: Kim q = 0.16 * 2 + 0.34
  ASSERT_OK(ambient_fog(2000.0, &a, NULL));
  ASSERT_NEAR(a.attenuation, log(20.0) / 2000.0 * pow(905.0 / 550.0, -0.66), 1e-15);

  // rain: 1.076 R^0.67 dB/km
  ASSERT_OK(ambient_rain(10.0, &a, NULL));
  ASSERT_NEAR(a.attenuation, 1.076 * pow(10.0, 0.67) * db_km, 1e-15);

  // dry snow at 905 nm: (5.42e-5 * 905 + 5.4958776) S^1.38 dB/km
  ASSERT_OK(ambient_snow(2.0, &a, NULL));
  ASSERT_NEAR(a.attenuation, 5.5449286 * pow(2.0, 1.38) * db_km, 1e-12);
  ASSERT_OK(ambient_validate(&a, NULL));
  return 0;
}


// Denser input -> larger alpha, no fewer returns, returns no farther away.
static int check_denser(const ambient_material_t* thin, const ambient_material_t* dense) {
  ASSERT_OK(ambient_validate(thin, NULL));
  ASSERT_OK(ambient_validate(dense, NULL));
  ASSERT_TRUE(dense->attenuation > thin->attenuation);
  ASSERT_TRUE(dense->return_scaling >= thin->return_scaling);
  ASSERT_TRUE(dense->gamma_scale <= thin->gamma_scale);
  return 0;
}


TEST(ambient_presets_are_monotonic) {
  static const double vis[] = {100e3, 50e3, 20e3, 6e3, 3e3, 1e3, 800, 500, 200, 50, 10, 1};
  static const double rate[] = {0.01, 0.1, 1, 2.5, 5, 10, 25, 50, 100, 300};
  typedef int (*preset_fn)(double, ambient_material_t*, err_msg_t*);
  const preset_fn by_vis[2] = {ambient_clear_air, ambient_fog};
  const preset_fn by_rate[2] = {ambient_rain, ambient_snow};
  for (int p = 0; p < 2; p++) {
    for (size_t i = 1; i < sizeof(vis) / sizeof(vis[0]); i++) {
      ambient_material_t a, b;
      ASSERT_OK(by_vis[p](vis[i - 1], &a, NULL));
      ASSERT_OK(by_vis[p](vis[i], &b, NULL));
      if (check_denser(&a, &b)) {
        CHECK_FAIL("preset %d, visibility %g -> %g", p, vis[i - 1], vis[i]);
      }
    }
    for (size_t i = 1; i < sizeof(rate) / sizeof(rate[0]); i++) {
      ambient_material_t a, b;
      ASSERT_OK(by_rate[p](rate[i - 1], &a, NULL));
      ASSERT_OK(by_rate[p](rate[i], &b, NULL));
      if (check_denser(&a, &b)) {
        CHECK_FAIL("preset %d, rate %g -> %g", p, rate[i - 1], rate[i]);
      }
    }
  }

  // in dense fog (Kim q = 0) both visibility presets give the same extinction
  ambient_material_t fog, air;
  ASSERT_OK(ambient_fog(100.0, &fog, NULL));
  ASSERT_OK(ambient_clear_air(100.0, &air, NULL));
  ASSERT_NEAR(fog.attenuation, air.attenuation, 1e-15);
  return 0;
}


TEST(ambient_presets_reject_bad_input_and_leave_output) {
  ambient_material_t sentinel;
  memset(&sentinel, 0xab, sizeof(sentinel));
  struct {
    int (*fn)(double, ambient_material_t*, err_msg_t*);
    double value;
    const char* message;
  } cases[] = {
      {ambient_clear_air, 0.0, "clear_air.visibility = 0 must be > 0"},
      {ambient_clear_air, -5.0, "clear_air.visibility = -5 must be > 0"},
      {ambient_clear_air, INFINITY, "clear_air.visibility = inf is not finite"},
      {ambient_fog, NAN, "fog.visibility = nan is not finite"},
      {ambient_fog, -1.0, "fog.visibility = -1 must be > 0"},
      {ambient_rain, 0.0, "rain.rate = 0 must be > 0"},
      {ambient_rain, NAN, "rain.rate = nan is not finite"},
      {ambient_snow, -2.0, "snow.rate = -2 must be > 0"},
      {ambient_snow, 1e300, "snow.rate = 1e+300 is too large"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    ambient_material_t out = sentinel;
    err_msg_t msg = {{0}};
    ASSERT_EQ(cases[i].fn(cases[i].value, &out, &msg), ERR_INVAL);
    ASSERT_CONTAINS(msg.text, cases[i].message);
    ASSERT_MEM_EQ(&out, &sentinel, sizeof(out));
  }
  return 0;
}
