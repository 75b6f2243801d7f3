// SPDX-License-Identifier: MIT
// ambient.h: ambient media (docs/models/materials.md, "Ambient media"): the parameter struct,
// the AGXUnity "Air" defaults, validation with field-naming errors, and the weather presets that
// derive a medium from a visibility or a precipitation rate (ambient.c).
#ifndef SENSIM_MATERIAL_AMBIENT_H_
#define SENSIM_MATERIAL_AMBIENT_H_

#include "base/err.h"

typedef struct ambient_material {
  double attenuation;        // alpha, 1/m
  double refractive_index;   // n_amb >= 1
  double gamma_shape;        // k > 0
  double gamma_scale;        // theta > 0, m
  double return_scaling;     // s in [0, 1]
  double backscatter;        // rho_atm, 1/sr
} ambient_material_t;

// AGXUnity "Air" defaults (docs/models/materials.md, "Ambient media").
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

#endif  // SENSIM_MATERIAL_AMBIENT_H_
