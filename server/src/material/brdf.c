// SPDX-License-Identifier: MIT
// brdf.c: reflectance of the surface materials. Sources: Fresnel equations in the
// per-polarisation Poynting form for complex indices (cross-checked against pbrt-v4
// `FrComplex`); GGX distribution and height-correlated Smith masking after B. Walter et al.,
// "Microfacet Models for Refraction through Rough Surfaces" (EGSR 2007) and E. Heitz,
// "Understanding the Masking-Shadowing Function in Microfacet-Based BRDFs" (JCGT 2014);
// Oren-Nayar with Y. Fujii's "A tiny improvement of Oren-Nayar reflectance model". The
// two-layer assembly and the GGX width alpha = sqrt(2) sigma_B follow the AGX Sensor technical
// description (docs/models/materials.md).
#include "material/brdf.h"

#include <complex.h>
#include <math.h>

// glibc defines the C11 CMPLX only for compilers that report GCC 4.7 or later; clang (the fuzz
// build) reports GCC 4.2 but has the same builtin.
#ifndef CMPLX
#define CMPLX(x, y) __builtin_complex((double)(x), (double)(y))
#endif


static double dot3(const double a[3], const double b[3]) {
  return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}


static double clamp_unit(double c) {
  return c < 0.0 ? 0.0 : (c > 1.0 ? 1.0 : c);
}


brdf_fresnel_t brdf_fresnel(double n1, double n2_re, double n2_im, double cos_i) {
  brdf_fresnel_t f = {.rs = 1.0, .rp = 1.0, .ts = 0.0, .tp = 0.0, .r = 1.0, .t = 0.0};
  double ci = clamp_unit(cos_i);

  // grazing incidence reflects everything (and would divide 0 by 0 when n1 = n2)
  if (ci == 0.0) {
    return f;
  }

  // refracted cosine cos_t = sqrt(1 - (n1/n2)^2 sin^2) on the branch with Im(n2 cos_t) >= 0 (a
  // decaying transmitted wave); real arithmetic except the square root, since only squared
  // magnitudes of the amplitude ratios are needed (no complex division)
  double m2 = n2_re * n2_re + n2_im * n2_im;
  double qr = n1 * n2_re / m2;
  double qi = -n1 * n2_im / m2;
  double sin2 = 1.0 - ci * ci;
  double complex ct = csqrt(CMPLX(1.0 - (qr * qr - qi * qi) * sin2, -2.0 * qr * qi * sin2 + 0.0));
  double cr = creal(ct);
  double cm = cimag(ct);
  double wr = n2_re * cr - n2_im * cm;   // n2 cos_t
  double wi = n2_re * cm + n2_im * cr;
  if (wi < 0.0 || (wi == 0.0 && wr < 0.0)) {
    cr = -cr, cm = -cm, wr = -wr, wi = -wi;
  }

  // |r_s|^2 = |n1 ci - n2 ct|^2 / |n1 ci + n2 ct|^2, |r_p|^2 likewise with n2 ci and n1 ct;
  // transmittances |t|^2 Re(..) / (n1 ci) with |t|^2 = (2 n1 ci)^2 / |denominator|^2
  double a = n1 * ci;
  double den_s = (a + wr) * (a + wr) + wi * wi;
  double pr = n2_re * ci, pi = n2_im * ci;
  double tr = n1 * cr, ti = n1 * cm;
  double den_p = (pr + tr) * (pr + tr) + (pi + ti) * (pi + ti);
  f.rs = ((a - wr) * (a - wr) + wi * wi) / den_s;
  f.rp = ((pr - tr) * (pr - tr) + (pi - ti) * (pi - ti)) / den_p;
  f.ts = 4.0 * a * wr / den_s;
  f.tp = 4.0 * a * (n2_re * cr + n2_im * cm) / den_p;
  f.r = 0.5 * (f.rs + f.rp);
  f.t = 0.5 * (f.ts + f.tp);
  return f;
}


double brdf_fresnel_r(double n1, double n2_re, double n2_im, double cos_i) {
  return brdf_fresnel(n1, n2_re, n2_im, cos_i).r;
}


// Normal incidence reflectance |(n1 - n2) / (n1 + n2)|^2 (equals brdf_fresnel(.., 1).r).
static double fresnel_r0(double n1, double n2_re, double n2_im) {
  double dm = n1 - n2_re;
  double dp = n1 + n2_re;
  double k2 = n2_im * n2_im;
  return (dm * dm + k2) / (dp * dp + k2);
}


double brdf_ggx_alpha(double sigma_b) {
  return M_SQRT2 * sigma_b;
}


double brdf_ggx_d(double cos_h, double alpha) {
  if (cos_h <= 0.0) {
    return 0.0;
  }
  double a2 = alpha * alpha;
  double d = (a2 - 1.0) * cos_h * cos_h + 1.0;
  return a2 / (M_PI * d * d);
}


double brdf_ggx_lambda(double c, double alpha) {
  if (c <= 0.0) {
    return INFINITY;
  }
  double c2 = c * c;
  double tan2 = fmax(0.0, 1.0 - c2) / c2;
  return 0.5 * (sqrt(1.0 + alpha * alpha * tan2) - 1.0);
}


double brdf_ggx_g(double nl, double nv, double lh, double vh, double alpha) {
  if (nl <= 0.0 || nv <= 0.0 || lh <= 0.0 || vh <= 0.0) {
    return 0.0;
  }
  return 1.0 / (1.0 + brdf_ggx_lambda(nl, alpha) + brdf_ggx_lambda(nv, alpha));
}


// Half vector of l and v; returns 0 when l = -v (no half vector).
static int half_vector(const double l[3], const double v[3], double h[3]) {
  double s[3] = {l[0] + v[0], l[1] + v[1], l[2] + v[2]};
  double len = sqrt(dot3(s, s));
  if (!(len >= 1e-12)) {
    return 0;
  }
  for (int i = 0; i < 3; i++) {
    h[i] = s[i] / len;
  }
  return 1;
}


double brdf_specular(const double l[3], const double v[3], const double n[3], double n1,
                     double n2_re, double n2_im, double alpha) {
  double nl = dot3(n, l);
  double nv = dot3(n, v);
  double h[3];
  if (nl <= BRDF_EPS_COS || nv <= BRDF_EPS_COS || !half_vector(l, v, h)) {
    return 0.0;
  }
  double a = fmax(alpha, BRDF_ALPHA_MIN);
  double lh = dot3(l, h);
  double fr = brdf_fresnel_r(n1, n2_re, n2_im, lh);
  double g = brdf_ggx_g(nl, nv, lh, dot3(v, h), a);
  return fr * g * brdf_ggx_d(dot3(n, h), a) / (4.0 * nl * nv);
}


void brdf_oren_nayar_ab(double c, double sigma, double* out_a, double* out_b) {
  double s2 = sigma * sigma;
  *out_a = 1.0 - 0.5 * s2 / (s2 + 0.33) + 0.17 * c * s2 / (s2 + 0.13);
  *out_b = 0.45 * s2 / (s2 + 0.09);
}


double brdf_oren_nayar(const double l[3], const double v[3], const double n[3], double c,
                       double sigma) {
  double nl = dot3(n, l);
  double nv = dot3(n, v);
  if (nl <= 0.0 || nv <= 0.0) {
    return 0.0;
  }
  double a, b;
  brdf_oren_nayar_ab(c, sigma, &a, &b);
  double s = dot3(l, v) - nl * nv;
  double t = s <= 0.0 ? 1.0 : fmax(nl, nv);
  return c / M_PI * (a + b * s / t);
}


double brdf_eval(const surface_material_t* m, double n1, const double l[3], const double v[3],
                 const double n[3]) {
  if (dot3(n, l) <= 0.0 || dot3(n, v) <= 0.0) {
    return 0.0;
  }
  if (m->kind == MATERIAL_LAMBERTIAN) {
    return m->reflectance / M_PI;
  }

  // two-layer: specular lobe plus the diffuse layer seen through the top interface (T at l.h)
  double h[3];
  if (!half_vector(l, v, h)) {
    return 0.0;
  }
  double alpha = brdf_ggx_alpha(m->sigma_b);
  double spec = brdf_specular(l, v, n, n1, m->n_re, m->n_im, alpha);
  double t = brdf_fresnel(n1, m->n_re, m->n_im, dot3(l, h)).t;
  return spec + t * brdf_oren_nayar(l, v, n, m->reflectance, m->sigma_on);
}


brdf_backscatter_parts_t brdf_backscatter_parts(const surface_material_t* m, double n1,
                                                double cos_theta) {
  brdf_backscatter_parts_t p = {0.0, 0.0, 0.0};
  double c = cos_theta;
  if (!(c > BRDF_EPS_COS)) {
    return p;
  }
  if (c > 1.0) {
    c = 1.0;
  }
  if (m->kind == MATERIAL_LAMBERTIAN) {
    p.diffuse = m->reflectance / M_PI * c;
    p.total = p.diffuse;
    return p;
  }

  // specular: l = v = h, so l.h = 1 (Fresnel at normal incidence) and both Lambdas are equal;
  // written as R0 G D / (4 c) so that grazing incidence stays finite (G D ~ c)
  double alpha = fmax(brdf_ggx_alpha(m->sigma_b), BRDF_ALPHA_MIN);
  double r0 = fresnel_r0(n1, m->n_re, m->n_im);
  double g = 1.0 / (1.0 + 2.0 * brdf_ggx_lambda(c, alpha));
  p.specular = r0 * g * brdf_ggx_d(c, alpha) / (4.0 * c);

  // diffuse: s = 1 - c^2 >= 0 and t = c, so (A + B s / t) c = A c + B (1 - c^2)
  double a, b;
  brdf_oren_nayar_ab(m->reflectance, m->sigma_on, &a, &b);
  p.diffuse = (1.0 - r0) * m->reflectance / M_PI * (a * c + b * (1.0 - c * c));
  p.total = p.specular + p.diffuse;
  return p;
}


double brdf_backscatter(const surface_material_t* m, double n1, double cos_theta) {
  if (m->kind == MATERIAL_LAMBERTIAN) {
    if (!(cos_theta > BRDF_EPS_COS)) {
      return 0.0;
    }
    return m->reflectance / M_PI * (cos_theta < 1.0 ? cos_theta : 1.0);
  }
  return brdf_backscatter_parts(m, n1, cos_theta).total;
}


double brdf_reflection_weight(const surface_material_t* m, double n1, double cos_theta) {
  if (m->kind == MATERIAL_LAMBERTIAN) {
    return 0.0;
  }
  return brdf_fresnel_r(n1, m->n_re, m->n_im, cos_theta);
}
