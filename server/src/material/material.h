// SPDX-License-Identifier: MIT
// material.h: surface materials (docs/models/materials.md, "Surface materials"): the parameter
// struct, defaults, and validation with field-naming errors. Media are in ambient.h, included
// here because both describe what a ray meets.
#ifndef SENSIM_MATERIAL_MATERIAL_H_
#define SENSIM_MATERIAL_MATERIAL_H_

#include "base/err.h"
#include "material/ambient.h"

// Upper bounds of the roughnesses (the sources only say >= 0; docs/models/materials.md,
// "Parameters and ranges"). An RMS facet slope
// of 10 (GGX alpha 14) is far rougher than any real surface, and a facet-angle standard
// deviation cannot exceed 90 degrees; beyond them the formulas overflow to NaN.
#define MATERIAL_MAX_SPECULAR_ROUGHNESS 10.0
// Upper bound of both parts of the complex refractive index: real materials stay below about 10
// at lidar wavelengths (aluminium 2.05 + 8.26i at 905 nm, Rakic 1995).
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

// Defaults: Lambertian C = 0.8; two-layer (1.4517 + 0i, 0.3, 0.8, 0.3) ([AGXU]).
surface_material_t material_default_lambertian(void);
surface_material_t material_default_two_layer(void);

// Check every parameter range of docs/models/materials.md; ERR_INVAL naming the field (e.g.
// "two_layer.diffuse_reflectance = 1.2 is outside [0, 1]").
int material_validate(const surface_material_t* m, err_msg_t* msg) CHECKRET;

#endif  // SENSIM_MATERIAL_MATERIAL_H_
