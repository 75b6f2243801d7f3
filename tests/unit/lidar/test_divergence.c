// SPDX-License-Identifier: MIT
// test_divergence.c: beam divergence attenuation against the known-answer tables of
// docs/models/lidar.md (coaxial, wide beam, biaxial, point emitter), and its configuration.
#include <math.h>

#include "check.h"
#include "lidar/divergence.h"

#define REL 2e-8
#define FLOOR 1e-3

static const double xs[11] = {0, 0.1, 0.5, 1, 2, 5, 10, 20, 50, 100, 200};

static int check_table(double theta, double e, double r, double rd, const double w[11],
                       const double bd[11]) {
  lidar_beam_desc_t d = {.enabled = 1, .divergence = theta, .exit_radius = e,
                         .detector_radius = r, .detector_offset = rd};
  lidar_beam_t b;
  err_msg_t msg;
  ASSERT_OK(lidar_divergence_init(&b, &d, "lidar.beam", &msg));
  for (int i = 0; i < 11; i++) {
    // w(x) is printed to 7 significant digits in the table
    ASSERT_KAT(lidar_divergence_width(&b, xs[i]), w[i], 1e-6, 0.0);

    // BD: tiny values of the biaxial near field are compared relative to themselves
    ASSERT_KAT(lidar_divergence_factor(&b, xs[i]), bd[i], REL, bd[i] < 1e-3 ? 0.0 : FLOOR);
  }
  return 0;
}


TEST(divergence_coaxial_known_answers) {
  static const double w[11] = {0.005, 0.00515, 0.005750001, 0.006500001, 0.008000002, 0.01250001,
                               0.02000001, 0.03500002, 0.08000006, 0.1550001, 0.3050002};
  static const double bd[11] = {1, 0.980958321, 0.901614995, 0.802361749, 0.62702505,
                                0.316713228, 0.135894262, 0.0462543545, 0.00900007909,
                                0.00240439823, 0.000621448635};
  return check_table(1.5e-3, 0.005, 0.005, 0.0, w, bd);
}


TEST(divergence_wide_beam_known_answers) {
  static const double w[11] = {0.005, 0.005300001, 0.006500005, 0.008000009, 0.01100002,
                               0.02000005, 0.03500009, 0.06500018, 0.1550005, 0.3050009,
                               0.6050018};
  static const double bd[11] = {1, 0.961483144, 0.802361314, 0.627024352, 0.391463238,
                                0.135893831, 0.0462541797, 0.0136058571, 0.00240438777,
                                0.000621445885, 0.000157971692};
  return check_table(3e-3, 0.005, 0.005, 0.0, w, bd);
}


TEST(divergence_biaxial_known_answers) {
  static const double w[11] = {0.005, 0.00515, 0.005750001, 0.006500001, 0.008000002, 0.01250001,
                               0.02000001, 0.03500002, 0.08000006, 0.1550001, 0.3050002};
  static const double bd[11] = {1.46414176e-14, 9.1889884e-14, 3.57832281e-11, 6.85475157e-09,
                                4.12060323e-06, 0.00498977639, 0.0615849788, 0.0906681521,
                                0.0314012379, 0.00927364385, 0.00246252307};
  return check_table(1.5e-3, 0.005, 0.010, 0.020, w, bd);
}


TEST(divergence_point_emitter_known_answers) {
  static const double w[11] = {0, 0.0001500001, 0.0007500006, 0.001500001, 0.003000002,
                               0.007500006, 0.01500001, 0.03000002, 0.07500006, 0.1500001,
                               0.3000002};
  static const double bd[11] = {1.15651764, 1.15651764, 1.15651764, 1.15651764, 1.1520466,
                                0.681058392, 0.2304504, 0.0624987365, 0.010234587,
                                0.00256718187, 0.000642330396};
  lidar_beam_desc_t d = {.enabled = 1, .divergence = 1.5e-3, .exit_radius = 0.0,
                         .detector_radius = 0.005};
  lidar_beam_t b;
  ASSERT_OK(lidar_divergence_init(&b, &d, "lidar.beam", NULL));
  for (int i = 0; i < 11; i++) {
    ASSERT_NEAR(lidar_divergence_width(&b, xs[i]), w[i], 1e-6 * w[i]);
    ASSERT_KAT(lidar_divergence_factor(&b, xs[i]), bd[i], REL, FLOOR);
  }

  // the normalisation constant is the limit at x = 0; an offset detector sees nothing there
  ASSERT_KAT(lidar_divergence_factor(&b, 0.0), 1.15651764275, 1e-11, 0.0);
  d.detector_offset = 0.01;
  ASSERT_OK(lidar_divergence_init(&b, &d, "lidar.beam", NULL));
  ASSERT_TRUE(lidar_divergence_factor(&b, 0.0) == 0.0);

  // clamp (off by default) caps the factor at 1
  d.detector_offset = 0.0;
  d.clamp = 1;
  ASSERT_OK(lidar_divergence_init(&b, &d, "lidar.beam", NULL));
  ASSERT_TRUE(lidar_divergence_factor(&b, 0.5) == 1.0);
  ASSERT_KAT(lidar_divergence_factor(&b, 10.0), 0.2304504, REL, FLOOR);
  return 0;
}


TEST(divergence_disabled_is_one) {
  lidar_beam_desc_t d = {.enabled = 0, .divergence = NAN};
  lidar_beam_t b;
  ASSERT_OK(lidar_divergence_init(&b, &d, "lidar.beam", NULL));
  ASSERT_TRUE(lidar_divergence_factor(&b, 0.0) == 1.0);
  ASSERT_TRUE(lidar_divergence_factor(&b, 1e4) == 1.0);
  return 0;
}


TEST(divergence_rejects_bad_configuration) {
  static const struct {
    lidar_beam_desc_t d;
    const char* field;
  } bad[] = {
      {{1, 0.0, 0.005, 0.005, 0, 0}, "lidar.beam.divergence = 0"},
      {{1, 0.1, 0.005, 0.005, 0, 0}, "lidar.beam.divergence = 0.1"},
      {{1, NAN, 0.005, 0.005, 0, 0}, "lidar.beam.divergence = nan"},
      {{1, -1e-3, 0.005, 0.005, 0, 0}, "lidar.beam.divergence"},
      {{1, 1e-3, -0.005, 0.005, 0, 0}, "lidar.beam.exit_radius = -0.005"},
      {{1, 1e-3, INFINITY, 0.005, 0, 0}, "lidar.beam.exit_radius = inf"},
      {{1, 1e-3, 0.005, 0.0, 0, 0}, "lidar.beam.detector_radius = 0"},
      {{1, 1e-3, 0.005, NAN, 0, 0}, "lidar.beam.detector_radius = nan"},
      {{1, 1e-3, 0.005, 0.005, -1, 0}, "lidar.beam.detector_offset = -1"},
      // a lidar's apertures and offsets are at most a metre (1e308 overflowed R^2 / w^2)
      {{1, 1e-3, 1e308, 0.005, 0, 0}, "lidar.beam.exit_radius = 1e+308 is outside [0, 1] m"},
      {{1, 1e-3, 0.005, 1.5, 0, 0}, "lidar.beam.detector_radius = 1.5 is outside (0, 1] m"},
      {{1, 1e-3, 0.005, 0.005, 2, 0}, "lidar.beam.detector_offset = 2 is outside [0, 1] m"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    lidar_beam_t b = {.enabled = 7};
    err_msg_t msg = {{0}};
    ASSERT_EQ(lidar_divergence_init(&b, &bad[i].d, "lidar.beam", &msg), ERR_INVAL);
    ASSERT_CONTAINS(msg.text, bad[i].field);
    ASSERT_EQ(b.enabled, 7);
  }
  return 0;
}
