// SPDX-License-Identifier: MIT
// test_brdf.c: surface reflectance against the known-answer values of docs/models/materials.md
// (Fresnel, Lambert, GGX building blocks, two-layer backscatter, bistatic BRDF, Oren-Nayar,
// edge cases), to |got - expected| <= 2e-8 max(|expected|, 1e-3).
#include <math.h>

#include "check.h"
#include "material/brdf.h"

#define REL 2e-8
#define FLOOR 1e-3
#define D2R (M_PI / 180.0)

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


static surface_material_t lambert(double c) {
  surface_material_t m = material_default_lambertian();
  m.reflectance = c;
  return m;
}


// Unit vector at polar angle theta and azimuth phi (degrees) about n = +z.
static void dir_deg(double theta, double phi, double out[3]) {
  out[0] = sin(theta * D2R) * cos(phi * D2R);
  out[1] = sin(theta * D2R) * sin(phi * D2R);
  out[2] = cos(theta * D2R);
}


TEST(brdf_fresnel_known_answers) {
  static const struct {
    double n1, n2_re, n2_im, theta, rs, rp, r, t;
  } k[] = {
      {1, 1.5, 0, 0, 0.04, 0.04, 0.04, 0.96},
      {1, 1.5, 0, 45, 0.092013363, 0.00846645898, 0.050239911, 0.949760089},
      {1, 1.5, 0, 60, 0.176571488, 0.00180193752, 0.0891867128, 0.910813287},
      {1, 1.5, 0, 56.30993247, 0.147928994, 0, 0.073964497, 0.926035503},
      {1, 1.5, 0, 89, 0.939472161, 0.868897738, 0.90418495, 0.0958150502},
      {1, 1.4517, 0, 0, 0.033944196, 0.033944196, 0.033944196, 0.966055804},
      {1.000273, 1.4517, 0, 0, 0.0338956288, 0.0338956288, 0.0338956288, 0.966104371},
      {1, 2.05, 8.26, 0, 0.894234626, 0.894234626, 0.894234626, 0.105765374},
      {1, 2.05, 8.26, 45, 0.924229823, 0.854200765, 0.889215294, 0.110784706},
      {1, 2.05, 8.26, 80, 0.980892312, 0.63014889, 0.805520601, 0.194479399},
      {1, 1.4517, 0.01, 30, 0.0497126832, 0.0210319906, 0.0353723369, 0.964627663},
      {1, 1.5, 0.5, 60, 0.270227931, 0.0137265796, 0.141977255, 0.858022745},
      {1.5, 1, 0, 30, 0.105772791, 0.00460754345, 0.0551901673, 0.944809833},
      {1.5, 1, 0, 45, 1, 1, 1, 0},
      {1.33, 1, 0, 48, 0.501632575, 0.287280082, 0.394456328, 0.605543672},
  };
  for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
    brdf_fresnel_t f = brdf_fresnel(k[i].n1, k[i].n2_re, k[i].n2_im, cos(k[i].theta * D2R));
    fprintf(stderr, "# F%zu\n", i + 1);
    ASSERT_KAT(f.rs, k[i].rs, REL, FLOOR);
    ASSERT_KAT(f.rp, k[i].rp, REL, FLOOR);
    ASSERT_KAT(f.r, k[i].r, REL, FLOOR);
    ASSERT_KAT(f.t, k[i].t, REL, FLOOR);
    ASSERT_NEAR(f.r + f.t, 1.0, 1e-12);
    ASSERT_KAT(brdf_fresnel_r(k[i].n1, k[i].n2_re, k[i].n2_im, cos(k[i].theta * D2R)), k[i].r,
               REL, FLOOR);
  }
  return 0;
}


TEST(brdf_fresnel_grazing_and_critical_angle) {
  // grazing: everything reflected, also between equal media (no 0/0)
  brdf_fresnel_t f = brdf_fresnel(1.0, 1.0, 0.0, 0.0);
  ASSERT_TRUE(f.r == 1.0 && f.t == 0.0);
  f = brdf_fresnel(1.0, 2.05, 8.26, -0.5);
  ASSERT_TRUE(f.r == 1.0 && f.t == 0.0);

  // critical angle glass -> air 41.8103149 deg: just beyond reflects totally
  f = brdf_fresnel(1.5, 1.0, 0.0, cos(41.82 * D2R));
  ASSERT_NEAR(f.r, 1.0, 1e-12);
  f = brdf_fresnel(1.5, 1.0, 0.0, cos(41.80 * D2R));
  ASSERT_TRUE(f.r < 1.0);

  // equal media: no reflection
  f = brdf_fresnel(1.3, 1.3, 0.0, cos(30 * D2R));
  ASSERT_NEAR(f.r, 0.0, 1e-15);
  ASSERT_NEAR(f.t, 1.0, 1e-15);
  return 0;
}


TEST(brdf_lambert_backscatter_known_answers) {
  static const double c[] = {1.0, 0.8, 0.1};
  static const double th[] = {0, 30, 60, 89};
  static const double v[3][4] = {
      {0.318309886, 0.275664448, 0.159154943, 0.00555527351},
      {0.254647909, 0.220531558, 0.127323954, 0.00444421881},
      {0.0318309886, 0.0275664448, 0.0159154943, 0.000555527351},
  };
  for (int i = 0; i < 3; i++) {
    surface_material_t m = lambert(c[i]);
    for (int j = 0; j < 4; j++) {
      ASSERT_KAT(brdf_backscatter(&m, 1.0, cos(th[j] * D2R)), v[i][j], REL, FLOOR);
    }

    // back-facing: exactly 0
    ASSERT_TRUE(brdf_backscatter(&m, 1.0, 0.0) == 0.0);
    ASSERT_TRUE(brdf_backscatter(&m, 1.0, -0.5) == 0.0);
    ASSERT_DEQ(brdf_reflection_weight(&m, 1.0, 1.0), 0);
  }
  return 0;
}


TEST(brdf_ggx_building_blocks_known_answers) {
  static const double sb[] = {0.05, 0.1, 0.3, 0.5};
  static const double alpha[] = {0.0707106781, 0.141421356, 0.424264069, 0.707106781};
  static const double th[] = {0, 30, 60, 80};
  static const double d[4][4] = {
      {63.6619772, 0.0247176985, 0.00282001333, 0.00169152834},
      {15.9154943, 0.090654293, 0.0111682781, 0.00675980776},
      {1.76838826, 0.386545991, 0.090654293, 0.0602378361},
      {0.636619772, 0.407436654, 0.207875844, 0.164064809},
  };
  static const double lam[4][4] = {
      {0, 0.0004164932, 0.00373604199, 0.0387061322},
      {0, 0.00166389811, 0.014781507, 0.140950222},
      {0, 0.014781507, 0.120483682, 0.802825655},
      {0, 0.0400617249, 0.290569415, 1.5665018},
  };
  static const double g[4][4] = {
      {1, 0.999167707, 0.992583334, 0.928149821},
      {1, 0.996683241, 0.971285862, 0.78009178},
      {1, 0.971285862, 0.805822964, 0.383781205},
      {1, 0.9258201, 0.632455532, 0.241954786},
  };
  for (int i = 0; i < 4; i++) {
    double a = brdf_ggx_alpha(sb[i]);
    ASSERT_KAT(a, alpha[i], REL, FLOOR);
    for (int j = 0; j < 4; j++) {
      double c = cos(th[j] * D2R);
      ASSERT_KAT(brdf_ggx_d(c, a), d[i][j], REL, FLOOR);
      ASSERT_KAT(brdf_ggx_lambda(c, a), lam[i][j], REL, FLOOR);

      // backscatter: l = v = h, so G = 1 / (1 + 2 Lambda)
      ASSERT_KAT(brdf_ggx_g(c, c, 1.0, 1.0, a), g[i][j], REL, FLOOR);
    }
  }
  ASSERT_TRUE(brdf_ggx_d(0.0, 0.3) == 0.0);
  ASSERT_TRUE(isinf(brdf_ggx_lambda(0.0, 0.3)));
  ASSERT_TRUE(brdf_ggx_g(0.5, 0.5, -0.1, 0.5, 0.3) == 0.0);
  return 0;
}


TEST(brdf_two_layer_backscatter_known_answers) {
  // n1 = 1, n2 = 1.4517, C = 0.8, sigma_ON = 0.3: specular, diffuse and total, and the full
  // vector BRDF times cos at l = v agrees
  static const double sb[] = {0.05, 0.1, 0.3, 0.5};
  static const double th[] = {0, 10, 30, 60, 80};
  static const double spec[4][5] = {
      {0.540238659, 0.011192623, 0.000242003319, 4.75065696e-05, 7.67242532e-05},
      {0.135059665, 0.0223357789, 0.000885361097, 0.000184106371, 0.000257700554},
      {0.0150066294, 0.0117467774, 0.00367894373, 0.00123983401, 0.00112976566},
      {0.00540238659, 0.00512956385, 0.00369625229, 0.00223135953, 0.00193992508},
  };
  static const double diff[5] = {0.233333282, 0.23145746, 0.21591028, 0.158179831,
                                 0.0941997851};
  static const double total[4][5] = {
      {0.773571941, 0.242650083, 0.216152283, 0.158227338, 0.0942765094},
      {0.368392947, 0.253793239, 0.216795641, 0.158363938, 0.0944574857},
      {0.248339912, 0.243204237, 0.219589224, 0.159419665, 0.0953295508},
      {0.238735669, 0.236587024, 0.219606532, 0.160411191, 0.0961397102},
  };
  static const double n[3] = {0, 0, 1};
  for (int i = 0; i < 4; i++) {
    surface_material_t m = two_layer(1.4517, 0.0, sb[i], 0.8, 0.3);
    for (int j = 0; j < 5; j++) {
      double c = cos(th[j] * D2R);
      brdf_backscatter_parts_t p = brdf_backscatter_parts(&m, 1.0, c);
      ASSERT_KAT(p.specular, spec[i][j], REL, FLOOR);
      ASSERT_KAT(p.diffuse, diff[j], REL, FLOOR);
      ASSERT_KAT(p.total, total[i][j], REL, FLOOR);
      ASSERT_KAT(brdf_backscatter(&m, 1.0, c), total[i][j], REL, FLOOR);
      double w[3];
      dir_deg(th[j], 0.0, w);
      ASSERT_KAT(brdf_eval(&m, 1.0, w, w, n) * c, total[i][j], REL, FLOOR);
    }
  }
  return 0;
}


TEST(brdf_specular_backscatter_glass_and_aluminium) {
  static const double th[] = {0, 10, 30, 60};
  static const struct {
    double n_re, n_im, sb, v[4];
  } k[] = {
      {1.5, 0, 0.05, {0.636619772, 0.0131894395, 0.000285177848, 5.59819647e-05}},
      {1.5, 0, 0.1, {0.159154943, 0.0263205867, 0.00104331367, 0.000216951812}},
      {1.5, 0, 0.3, {0.0176838826, 0.0138424577, 0.00433528456, 0.00146102622}},
      {2.05, 8.26, 0.05, {14.2321861, 0.294861337, 0.00637539766, 0.00125152528}},
      {2.05, 8.26, 0.1, {3.55804653, 0.588419501, 0.0233241803, 0.00485014557}},
      {2.05, 8.26, 0.3, {0.395338503, 0.309460124, 0.0969190392, 0.0326625059}},
  };
  for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
    surface_material_t m = two_layer(k[i].n_re, k[i].n_im, k[i].sb, 0.0, 0.0);
    for (int j = 0; j < 4; j++) {
      double c = cos(th[j] * D2R);
      ASSERT_KAT(brdf_backscatter_parts(&m, 1.0, c).specular, k[i].v[j], REL, FLOOR);
      ASSERT_KAT(brdf_backscatter(&m, 1.0, c), k[i].v[j], REL, FLOOR);
    }
  }
  return 0;
}


TEST(brdf_bistatic_known_answers) {
  static const struct {
    double lt, lp, vt, vp, n_re, n_im, sb, c, son;
    double f_spec, t_lh, f_diff, f_total;
  } k[] = {
      {30, 0, 45, 120, 1.4517, 0, 0.3, 0.8, 0.3, 0.00922020532, 0.964145469, 0.23140333,
       0.232326677},
      {40, 0, 40, 180, 1.5, 0, 0.1, 0.5, 0.5, 0.307929659, 0.954266357, 0.111995932,
       0.414803609},
      {60, 0, 20, 90, 2.05, 8.26, 0.2, 0.3, 0.0, 0.0925538678, 0.106771887, 0.0954929659,
       0.102749832},
      {10, 0, 70, 0, 1.4517, 0, 0.3, 0.8, 0.8, 0.00440093342, 0.964644281, 0.216071657,
       0.212833221},
  };
  static const double n[3] = {0, 0, 1};
  for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
    double l[3], v[3], h[3];
    dir_deg(k[i].lt, k[i].lp, l);
    dir_deg(k[i].vt, k[i].vp, v);
    double len = sqrt((l[0] + v[0]) * (l[0] + v[0]) + (l[1] + v[1]) * (l[1] + v[1]) +
                      (l[2] + v[2]) * (l[2] + v[2]));
    for (int j = 0; j < 3; j++) {
      h[j] = (l[j] + v[j]) / len;
    }
    double lh = l[0] * h[0] + l[1] * h[1] + l[2] * h[2];
    surface_material_t m = two_layer(k[i].n_re, k[i].n_im, k[i].sb, k[i].c, k[i].son);
    fprintf(stderr, "# B%zu\n", i + 1);
    ASSERT_KAT(brdf_specular(l, v, n, 1.0, k[i].n_re, k[i].n_im, brdf_ggx_alpha(k[i].sb)),
               k[i].f_spec, REL, FLOOR);
    ASSERT_KAT(brdf_fresnel(1.0, k[i].n_re, k[i].n_im, lh).t, k[i].t_lh, REL, FLOOR);
    ASSERT_KAT(brdf_oren_nayar(l, v, n, k[i].c, k[i].son), k[i].f_diff, REL, FLOOR);
    ASSERT_KAT(brdf_eval(&m, 1.0, l, v, n), k[i].f_total, REL, FLOOR);
  }
  return 0;
}


TEST(brdf_oren_nayar_known_answers) {
  static const double c[] = {0.8, 0.5};
  static const double sig[] = {0.0, 0.1, 0.3, 0.5, 1.0};
  static const double th[] = {0, 30, 60, 85};
  static const double a[2][5] = {{1, 0.995008403, 0.948493506, 0.873956443, 0.744414133},
                                 {1, 0.991365546, 0.92762987, 0.840403811, 0.699281389}};
  static const double b[5] = {0, 0.045, 0.225, 0.330882353, 0.412844037};
  static const double bs[2][5][4] = {
      {{0.254647909, 0.220531558, 0.127323954, 0.0221940276},
       {0.253376809, 0.222295543, 0.135282772, 0.0334553547},
       {0.241531888, 0.223496696, 0.163737779, 0.0779114448},
       {0.222551181, 0.213799601, 0.174469465, 0.103015075},
       {0.189563502, 0.190449276, 0.173629154, 0.120852839}},
      {{0.159154943, 0.137832224, 0.0795774715, 0.0138712673},
       {0.157780727, 0.138432611, 0.0842618429, 0.0208590657},
       {0.147636879, 0.136809753, 0.100675836, 0.0484052479},
       {0.133754421, 0.129000117, 0.106373382, 0.0639190042},
       {0.11129409, 0.112810051, 0.104926672, 0.074906976}},
  };
  static const double n[3] = {0, 0, 1};
  for (int i = 0; i < 2; i++) {
    for (int j = 0; j < 5; j++) {
      double ga, gb;
      brdf_oren_nayar_ab(c[i], sig[j], &ga, &gb);
      ASSERT_KAT(ga, a[i][j], REL, FLOOR);
      ASSERT_KAT(gb, b[j], REL, FLOOR);
      for (int k = 0; k < 4; k++) {
        double w[3];
        dir_deg(th[k], 0.0, w);
        ASSERT_KAT(brdf_oren_nayar(w, w, n, c[i], sig[j]) * cos(th[k] * D2R), bs[i][j][k], REL,
                   FLOOR);
      }
    }
  }

  // bistatic: C = 0.8, sigma_ON = 0.5
  double l[3], v[3];
  dir_deg(30, 0, l);
  dir_deg(60, 0, v);
  ASSERT_KAT(brdf_oren_nayar(l, v, n, 0.8, 0.5), 0.26468043, REL, FLOOR);
  dir_deg(60, 180, v);
  ASSERT_KAT(brdf_oren_nayar(l, v, n, 0.8, 0.5), 0.18606618, REL, FLOOR);
  dir_deg(45, 0, l);
  dir_deg(45, 90, v);
  ASSERT_KAT(brdf_oren_nayar(l, v, n, 0.8, 0.5), 0.222551181, REL, FLOOR);

  // sigma_ON = 0 is Lambertian for any geometry
  dir_deg(20, 10, l);
  dir_deg(70, 200, v);
  ASSERT_KAT(brdf_oren_nayar(l, v, n, 0.6, 0.0), 0.6 / M_PI, 1e-15, 0.0);
  return 0;
}


TEST(brdf_edge_cases) {
  // mirror (sigma_B = 0): alpha bounded to 1e-3
  surface_material_t m = two_layer(1.4517, 0.0, 0.0, 0.0, 0.0);
  ASSERT_KAT(brdf_backscatter(&m, 1.0, 1.0), 2701.19329, REL, FLOOR);
  ASSERT_KAT(brdf_backscatter(&m, 1.0, cos(1.0 * D2R)), 0.0289303959, REL, FLOOR);

  // grazing specular stays finite and approaches R0 alpha / (4 pi sin)
  m = two_layer(1.4517, 0.0, 0.3, 0.0, 0.0);
  ASSERT_KAT(brdf_backscatter_parts(&m, 1.0, cos(89.9 * D2R)).specular, 0.00114601703, REL,
             FLOOR);
  double g = brdf_backscatter(&m, 1.0, 2e-6);
  ASSERT_TRUE(isfinite(g) && g > 0.0);
  ASSERT_TRUE(brdf_backscatter(&m, 1.0, 1e-7) == 0.0);

  // Oren-Nayar backscatter at 89.9 deg is finite
  double n[3] = {0, 0, 1};
  double w[3];
  dir_deg(89.9, 0, w);
  ASSERT_KAT(brdf_oren_nayar(w, w, n, 0.8, 0.3) * cos(89.9 * D2R), 0.0577171574, REL, FLOOR);

  // l = -v, or either below the horizon: f = 0
  double l[3] = {0.6, 0, 0.8};
  double v[3] = {-0.6, 0, -0.8};
  m = material_default_two_layer();
  ASSERT_TRUE(brdf_eval(&m, 1.0, l, v, n) == 0.0);
  ASSERT_TRUE(brdf_specular(l, v, n, 1.0, 1.5, 0.0, 0.3) == 0.0);
  double below[3] = {0.6, 0, -0.8};
  ASSERT_TRUE(brdf_eval(&m, 1.0, l, below, n) == 0.0);
  m = lambert(0.8);
  ASSERT_TRUE(brdf_eval(&m, 1.0, below, l, n) == 0.0);
  ASSERT_KAT(brdf_eval(&m, 1.0, l, l, n), 0.8 / M_PI, 1e-15, 0.0);

  // reflection weight of a two-layer surface: Fresnel R at the macro normal
  m = two_layer(2.05, 8.26, 0.05, 0.0, 0.0);
  ASSERT_KAT(brdf_reflection_weight(&m, 1.000273, cos(20 * D2R)), 0.894042601, REL, FLOOR);
  return 0;
}
