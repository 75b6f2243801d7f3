// SPDX-License-Identifier: MIT
// brdf.h: reflectance of the surface materials (docs/models/materials.md): the Lambertian
// surface, the Fresnel equations with a complex refractive index, and the two-layer material
// (GGX microfacet top layer with height-correlated Smith masking, Oren-Nayar bottom layer with
// Fujii's improvement). Every function is a BRDF f(l, v) without the cosine, except the
// "backscatter" ones, which return the monostatic product f(w, w) cos(theta) in 1/sr that a
// lidar needs, evaluated in closed form (finite at grazing incidence).
//
// Conventions: unit vectors l (surface -> light), v (surface -> viewer), n (normal on their
// side); n1 = real refractive index of the medium the light arrives in; n2 = n + ik of the top
// layer (k >= 0). Cosines at or below BRDF_EPS_COS count as grazing or back-facing (f = 0).
//
// Thread: any (pure functions).
#ifndef SENSIM_MATERIAL_BRDF_H_
#define SENSIM_MATERIAL_BRDF_H_

#include "material/material.h"

#define BRDF_EPS_COS 1e-6       // cosines at or below: grazing or back-facing
#define BRDF_ALPHA_MIN 1e-3     // smallest GGX width (a mirror, sigma_B = 0, uses this)

//---------------- Fresnel

typedef struct brdf_fresnel {
  double rs, rp;                // reflectances of the s and p polarisations, |r|^2
  double ts, tp;                // transmittances (Poynting form, real parts)
  double r;                     // unpolarised reflectance (rs + rp) / 2
  double t;                     // unpolarised transmittance (ts + tp) / 2
} brdf_fresnel_t;

// Fresnel equations from a medium of real index n1 into n2 = n2_re + i n2_im at incidence
// cosine cos_i (clamped to [0, 1]). Grazing incidence (cos_i = 0): r = 1, t = 0. Total internal
// reflection (n1 > n2 real, beyond the critical angle) gives r = 1, t = 0.
brdf_fresnel_t brdf_fresnel(double n1, double n2_re, double n2_im, double cos_i);

// Unpolarised reflectance only (the same value as brdf_fresnel().r).
double brdf_fresnel_r(double n1, double n2_re, double n2_im, double cos_i);

//---------------- GGX top layer

// GGX width alpha = sqrt(2) sigma_B (sigma_B = RMS facet slope), not yet bounded below.
double brdf_ggx_alpha(double sigma_b);

// Normal distribution D(h) for cos_h = n.h: alpha^2 / (pi ((alpha^2 - 1) cos_h^2 + 1)^2);
// 0 when cos_h <= 0.
double brdf_ggx_d(double cos_h, double alpha);

// Smith Lambda of a direction at cosine c to the macro normal: (-1 + sqrt(1 + alpha^2 tan^2))/2;
// +inf when c <= 0.
double brdf_ggx_lambda(double c, double alpha);

// Height-correlated masking-shadowing 1 / (1 + Lambda(l) + Lambda(v)), 0 unless all four
// cosines are positive.
double brdf_ggx_g(double nl, double nv, double lh, double vh, double alpha);

// Specular lobe f_spec = R(n1, n2, l.h) G D / (4 (n.l)(n.v)) with width alpha (bounded below by
// BRDF_ALPHA_MIN here).
double brdf_specular(const double l[3], const double v[3], const double n[3], double n1,
                     double n2_re, double n2_im, double alpha);

//---------------- Oren-Nayar (Fujii) bottom layer

// Coefficients A and B for reflectance c and roughness sigma (rad).
void brdf_oren_nayar_ab(double c, double sigma, double* out_a, double* out_b);

// f_diff = (C / pi)(A + B s / t), s = l.v - (n.l)(n.v), t = 1 if s <= 0 else max(n.l, n.v).
double brdf_oren_nayar(const double l[3], const double v[3], const double n[3], double c,
                       double sigma);

//---------------- Materials

// Full BRDF of a material: Lambertian C/pi; two-layer f_spec + T(n1, n2, l.h) f_diff.
double brdf_eval(const surface_material_t* m, double n1, const double l[3], const double v[3],
                 const double n[3]);

// Monostatic backscatter f(w, w) cos(theta), 1/sr, in closed form, split in its parts.
typedef struct brdf_backscatter_parts {
  double specular;              // R0 G D / (4 cos)
  double diffuse;               // T0 (C / pi)(A cos + B sin^2) (Lambertian: C cos / pi)
  double total;
} brdf_backscatter_parts_t;

brdf_backscatter_parts_t brdf_backscatter_parts(const surface_material_t* m, double n1,
                                                double cos_theta);

// The total of brdf_backscatter_parts (the lidar's rho_bs): 0 when cos_theta <= BRDF_EPS_COS.
double brdf_backscatter(const surface_material_t* m, double n1, double cos_theta);

// Fraction of the power continuing along the mirror direction (the smooth-interface limit):
// two-layer R(n1, n2, cos_theta) at the macro normal, Lambertian 0.
double brdf_reflection_weight(const surface_material_t* m, double n1, double cos_theta);

#endif  // SENSIM_MATERIAL_BRDF_H_
