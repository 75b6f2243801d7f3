// SPDX-License-Identifier: MIT
// material.h: surface materials (MODELS.md 2) and ambient media (MODELS.md 3): parameter
// structs, defaults, validation with field-naming errors, and the ambient presets.
#ifndef SENSIM_MATERIAL_MATERIAL_H_
#define SENSIM_MATERIAL_MATERIAL_H_

#include "base/err.h"

// Upper bounds of the roughnesses (MODELS.md 2.4.1 and 2.5 only say >= 0). An RMS facet slope
// of 10 (GGX alpha 14) is far rougher than any real surface, and a facet-angle standard
// deviation cannot exceed 90 degrees; beyond them the formulas overflow to NaN.
#define MATERIAL_MAX_SPECULAR_ROUGHNESS 10.0
// Upper bound of both parts of the complex refractive index: real materials stay below about 10
// at lidar wavelengths (aluminium 2.05 + 8.26i at 905 nm, MODELS.md 2.3).
#define MATERIAL_MAX_INDEX 100.0
#define MATERIAL_MAX_DIFFUSE_ROUGHNESS 1.5707963267948966

typedef enum material_kind {
  MATERIAL_LAMBERTIAN = 1,
  MATERIAL_TWO_LAYER,
} material_kind_t;

typedef struct surface_material {
  material_kind_t kind;
  double reflectance;        // C: Lambertian reflectance, or diffuse reflectance of two-layer
  double n_re;               // Re(n2) of the top layer (two-layer)
  double n_im;               // Im(n2) >= 0
  double sigma_b;            // specular RMS slope (GGX alpha = sqrt(2) sigma_b)
  double sigma_on;           // Oren-Nayar roughness, rad
} surface_material_t;

typedef struct ambient_material {
  double attenuation;        // alpha, 1/m
  double refractive_index;   // n_amb >= 1
  double gamma_shape;        // k > 0
  double gamma_scale;        // theta > 0, m
  double return_scaling;     // s in [0, 1]
  double backscatter;        // rho_atm, 1/sr
} ambient_material_t;

// Defaults: Lambertian C = 0.8; two-layer (1.4517 + 0i, 0.3, 0.8, 0.3) ([AGXU]).
surface_material_t material_default_lambertian(void);
surface_material_t material_default_two_layer(void);

// Check every parameter range of MODELS.md 2; ERR_INVAL naming the field (e.g.
// "two_layer.diffuse_reflectance = 1.2 is outside [0, 1]").
int material_validate(const surface_material_t* m, err_msg_t* msg) CHECKRET;

// AGXUnity "Air" defaults (MODELS.md 3.4).
ambient_material_t ambient_default_air(void);

int ambient_validate(const ambient_material_t* a, err_msg_t* msg) CHECKRET;

// Presets; each returns ERR_INVAL naming the field for a non-positive or non-finite input.
// Formulas and sources are documented in ambient.c.
int ambient_clear_air(double visibility_m, ambient_material_t* out, err_msg_t* msg) CHECKRET;
int ambient_fog(double visibility_m, ambient_material_t* out, err_msg_t* msg) CHECKRET;
int ambient_rain(double rate_mm_h, ambient_material_t* out, err_msg_t* msg) CHECKRET;
int ambient_snow(double rate_mm_h, ambient_material_t* out, err_msg_t* msg) CHECKRET;

// Koschmieder relation with a 5 % contrast threshold: alpha = ln(20) / MOR.
double ambient_koschmieder(double visibility_m);

#endif  // SENSIM_MATERIAL_MATERIAL_H_
