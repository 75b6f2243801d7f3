// SPDX-License-Identifier: MIT
// test_pattern.c: scan patterns against the known answers of docs/models/lidar.md (VLP-16
// firing table, Ouster beam elevations and column periods, flash pixel centres) and against
// analytic geometry; bad configurations name their field.
#include <math.h>

#include "base/mem.h"
#include "check.h"
#include "lidar/pattern.h"

#define DEG (M_PI / 180.0)

static const double kVlpAzimuthSeq1[16] = {
    -0.1990656, -0.20736,  -0.2156544, -0.2239488, -0.2322432, -0.2405376,
    -0.248832,  -0.2571264, -0.2654208, -0.2737152, -0.2820096, -0.290304,
    -0.2985984, -0.3068928, -0.3151872, -0.3234816};
static const double kVlpDirSeq1[16][3] = {
    {0.96592, -0.0033559578, -0.25881905},    {0.99984115, -0.0036185556, 0.017452406},
    {0.97436316, -0.0036674027, -0.22495105}, {0.99862191, -0.0039032773, 0.052335956},
    {0.98161912, -0.0039789251, -0.190809},   {0.99618592, -0.0041821855, 0.087155743},
    {0.98767903, -0.0042894554, -0.15643447}, {0.99253616, -0.0044542367, 0.12186934},
    {0.9925355, -0.0045979207, -0.12186934},  {0.98767707, -0.0047183979, 0.15643447},
    {0.99618263, -0.0049032466, -0.087155743}, {0.98161458, -0.0049736487, 0.190809},
    {0.99861597, -0.0052043594, -0.052335956}, {0.97435609, -0.0052189835, 0.22495105},
    {0.99983257, -0.0055001888, -0.017452406}, {0.96591043, -0.0054534134, 0.25881905}};
static const double kVlpElevation[16] = {-15, 1, -13, 3, -11, 5, -9, 7,
                                         -7,  9, -5, 11, -3, 13, -1, 15};


TEST(pattern_vlp16_firing_table) {
  lidar_pattern_t p;
  err_msg_t msg = {0};
  lidar_vlp16_desc_t d = {.frequency = 10.0};
  ASSERT_OK(lidar_pattern_vlp16_init(&p, &d, "lidar.vlp16", &msg));
  ASSERT_EQ(p.nray, 16);
  for (uint32_t k = 0; k < 16; k++) {
    lidar_pattern_ray_t r0, r1;
    lidar_pattern_ray(&p, 0, k, &r0);
    lidar_pattern_ray(&p, 1, k, &r1);
    ASSERT_NEAR(r0.time * 1e6, 2.304 * k, 1e-9);
    ASSERT_NEAR(r1.time * 1e6, 55.296 + 2.304 * k, 1e-9);
    ASSERT_NEAR(r1.elevation / DEG, kVlpElevation[k], 1e-12);
    ASSERT_KAT(r1.azimuth / DEG, kVlpAzimuthSeq1[k], 1e-7, 1e-6);
    for (int i = 0; i < 3; i++) {
      ASSERT_KAT(r1.dir[i], kVlpDirSeq1[k][i], 2e-7, 1e-6);
    }
    ASSERT_EQ(r1.ring, k);
    ASSERT_EQ(r1.sweep, 0);
    ASSERT_EQ(r1.index, 16 + k);
  }
  lidar_pattern_close(&p);
  return 0;
}


TEST(pattern_vlp16_continuous_time) {
  // 1808.449 sequences per revolution at 10 Hz: whole sequences per revolution alternate
  // between 1809 and 1808, and over many revolutions the rate is 16 / 55.296 us
  lidar_pattern_t p;
  err_msg_t msg = {0};
  lidar_vlp16_desc_t d = {.frequency = 10.0};
  ASSERT_OK(lidar_pattern_vlp16_init(&p, &d, "lidar.vlp16", &msg));
  for (uint64_t n = 0; n < 200; n++) {
    uint64_t count = lidar_pattern_first_group(&p, n + 1) - lidar_pattern_first_group(&p, n);
    ASSERT_TRUE(count == 1808 || count == 1809);
    // the first sequence of a revolution starts inside it, the one before it does not
    uint64_t g = lidar_pattern_first_group(&p, n);
    ASSERT_TRUE(g * 55.296e-6 >= n * 0.1 - 1e-12);
    ASSERT_TRUE(g == 0 || (g - 1) * 55.296e-6 < n * 0.1);
  }
  uint64_t groups = lidar_pattern_first_group(&p, 100);   // 10 s
  ASSERT_EQ(groups * 16 / 10, 289352);
  ASSERT_EQ(lidar_pattern_first_group(&p, 1), 1809);

  // azimuth keeps turning across revolution boundaries: the first ray of a revolution is at
  // phi_0 - 2 pi f (t - t_s)
  for (uint64_t n = 1; n < 50; n += 7) {
    uint64_t g = lidar_pattern_first_group(&p, n);
    lidar_pattern_ray_t r;
    lidar_pattern_ray(&p, g, 3, &r);
    ASSERT_EQ(r.sweep, n);
    ASSERT_EQ(r.index, 3);
    double t = g * 55.296e-6 + 3 * 2.304e-6;
    ASSERT_NEAR(r.time, t, 1e-12);
    ASSERT_NEAR(r.time_offset, t - n * 0.1, 1e-12);
    double expect = remainder(-2.0 * M_PI * 10.0 * t, 2.0 * M_PI);
    ASSERT_NEAR(remainder(r.azimuth - expect, 2.0 * M_PI), 0.0, 1e-9);
  }
  lidar_pattern_close(&p);
  return 0;
}


TEST(pattern_vlp16_vertical_offsets) {
  lidar_pattern_t p;
  err_msg_t msg = {0};
  lidar_vlp16_desc_t d = {.frequency = 10.0, .vertical_offsets = 1};
  ASSERT_OK(lidar_pattern_vlp16_init(&p, &d, "lidar.vlp16", &msg));
  lidar_pattern_ray_t r;
  lidar_pattern_ray(&p, 0, 0, &r);   // laser 0: -15 deg, offset 0.0112 m
  double rr = 10.0, el = -15 * DEG, o = 0.0112;
  double pt[3] = {r.origin[0] + rr * r.dir[0], r.origin[1] + rr * r.dir[1],
                  r.origin[2] + rr * r.dir[2]};
  ASSERT_NEAR(hypot(pt[0], pt[1]), rr * cos(el) - o * sin(el), 1e-12);
  ASSERT_NEAR(pt[2], rr * sin(el) + o * cos(el), 1e-12);
  lidar_pattern_close(&p);
  return 0;
}


TEST(pattern_ouster_uniform_beams) {
  struct {
    uint32_t n;
    int beam[3];
    double deg[3];
  } cases[] = {
      {64, {1, 32, 63}, {16.073016, -0.26349206, -16.6}},
      {128, {1, 64, 127}, {22.145669, -0.17716535, -22.5}},
      {32, {1, 16, 31}, {21.048387, -0.72580645, -22.5}},
  };
  for (size_t c = 0; c < 3; c++) {
    lidar_pattern_t p;
    err_msg_t msg = {0};
    lidar_ouster_desc_t d = {.channels = cases[c].n, .columns = 1024, .frequency = 10.0,
                             .elevation_max = NAN, .elevation_min = NAN};
    ASSERT_OK(lidar_pattern_ouster_init(&p, &d, "lidar.ouster", &msg));
    for (int i = 0; i < 3; i++) {
      ASSERT_KAT(p.elevation[cases[c].beam[i]] / DEG, cases[c].deg[i], 1e-7, 1e-6);
    }
    ASSERT_NEAR(p.group_period * 1e6, 97.65625, 1e-9);

    // column j looks at pi - 2 pi j / W; beams of a column share its time
    for (uint64_t j = 0; j < 1024; j += 97) {
      lidar_pattern_ray_t r;
      lidar_pattern_ray(&p, j, 5, &r);
      double expect = remainder(M_PI - 2.0 * M_PI * (double)j / 1024.0, 2.0 * M_PI);
      ASSERT_NEAR(remainder(r.azimuth - expect, 2.0 * M_PI), 0.0, 1e-12);
      ASSERT_NEAR(r.time_offset, j * 97.65625e-6, 1e-15);
    }
    lidar_pattern_close(&p);
  }

  // 2048 columns at 20 Hz
  lidar_pattern_t p;
  err_msg_t msg = {0};
  lidar_ouster_desc_t d = {.channels = 128, .columns = 2048, .frequency = 20.0,
                           .elevation_max = NAN, .elevation_min = NAN};
  ASSERT_OK(lidar_pattern_ouster_init(&p, &d, "lidar.ouster", &msg));
  ASSERT_NEAR(p.group_period * 1e6, 24.414062, 1e-6);
  ASSERT_NEAR(lidar_pattern_rate(&p), 128.0 * 2048 * 20, 1e-6);
  lidar_pattern_close(&p);
  return 0;
}


TEST(pattern_ouster_beam_origin_offset) {
  // p = (r - n) d + n (cos enc, sin enc, 0): the emission point is n out along the encoder
  lidar_pattern_t p;
  err_msg_t msg = {0};
  double az[16] = {0};
  az[2] = 3.0 * DEG;   // lidar frame, positive clockwise
  lidar_ouster_desc_t d = {.channels = 16, .columns = 512, .frequency = 10.0,
                           .elevation_max = NAN, .elevation_min = NAN, .azimuths = az,
                           .nazimuth = 16, .beam_origin = 0.015806};
  ASSERT_OK(lidar_pattern_ouster_init(&p, &d, "lidar.ouster", &msg));
  lidar_pattern_ray_t r;
  lidar_pattern_ray(&p, 128, 2, &r);  // a quarter turn clockwise from the rear: azimuth +pi/2
  ASSERT_NEAR(r.origin[0], 0.0, 1e-12);
  ASSERT_NEAR(r.origin[1], 0.015806, 1e-12);
  ASSERT_NEAR(r.azimuth, M_PI / 2 - 3.0 * DEG, 1e-12);
  lidar_pattern_close(&p);
  return 0;
}


TEST(pattern_flash_grid_kat) {
  lidar_pattern_t p;
  err_msg_t msg = {0};
  lidar_flash_desc_t d = {.columns = 8, .rows = 4, .fov_horizontal = 40 * DEG,
                          .fov_vertical = 20 * DEG, .frame_rate = 10.0};
  ASSERT_OK(lidar_pattern_flash_init(&p, &d, "lidar.flash", &msg));
  ASSERT_EQ(p.nray, 32);
  const double az[8] = {17.5, 12.5, 7.5, 2.5, -2.5, -7.5, -12.5, -17.5};
  const double el[4] = {7.5, 2.5, -2.5, -7.5};
  for (uint32_t i = 0; i < 4; i++) {
    for (uint32_t j = 0; j < 8; j++) {
      lidar_pattern_ray_t r;
      lidar_pattern_ray(&p, 3, i * 8 + j, &r);
      ASSERT_NEAR(r.azimuth / DEG, az[j], 1e-12);
      ASSERT_NEAR(r.elevation / DEG, el[i], 1e-12);
      ASSERT_EQ(r.ring, i);
      ASSERT_EQ(r.sweep, 3);
      ASSERT_DEQ(r.time_offset, 0.0);
      ASSERT_NEAR(r.time, 0.3, 1e-15);
    }
  }
  lidar_pattern_ray_t r;
  lidar_pattern_ray(&p, 0, 0, &r);
  ASSERT_KAT(r.dir[0], 0.94555777, 1e-7, 1e-6);
  ASSERT_KAT(r.dir[1], 0.29813322, 1e-7, 1e-6);
  ASSERT_KAT(r.dir[2], 0.130526192, 1e-7, 1e-6);
  lidar_pattern_ray(&p, 0, 31, &r);
  ASSERT_KAT(r.dir[0], 0.94555777, 1e-7, 1e-6);
  ASSERT_KAT(r.dir[1], -0.29813322, 1e-7, 1e-6);
  ASSERT_KAT(r.dir[2], -0.130526192, 1e-7, 1e-6);
  lidar_pattern_close(&p);

  // projective: d = normalize(1, u tan(FOV_h/2), v tan(FOV_v/2))
  d.projective = 1;
  ASSERT_OK(lidar_pattern_flash_init(&p, &d, "lidar.flash", &msg));
  lidar_pattern_ray(&p, 0, 1 * 8 + 6, &r);   // i = 1, j = 6
  double u = 1.0 - 2.0 * 6.5 / 8.0, v = 1.0 - 2.0 * 1.5 / 4.0;
  double e[3] = {1.0, u * tan(20 * DEG), v * tan(10 * DEG)};
  double n = sqrt(e[0] * e[0] + e[1] * e[1] + e[2] * e[2]);
  for (int i = 0; i < 3; i++) {
    ASSERT_NEAR(r.dir[i], e[i] / n, 1e-14);
  }
  lidar_pattern_close(&p);
  return 0;
}


TEST(pattern_spinning_firing_offsets) {
  // channel 1 fires 10 us into each column, channel 0 at its start: order by time, azimuth
  // shifted by sigma 2 pi f dt
  lidar_pattern_t p;
  err_msg_t msg = {0};
  double el[3] = {0.1, -0.1, 0.0};
  double dt[3] = {20e-6, 0.0, 10e-6};
  lidar_spinning_desc_t d = {.frequency = 10.0, .columns = 360, .elevations = el, .nchannel = 3,
                             .time_offsets = dt, .ntime_offset = 3, .start_azimuth = 0.5};
  ASSERT_OK(lidar_pattern_spinning_init(&p, &d, "lidar.spinning", &msg));
  const uint32_t order[3] = {1, 2, 0};
  for (uint32_t k = 0; k < 3; k++) {
    lidar_pattern_ray_t r;
    lidar_pattern_ray(&p, 361, k, &r);
    uint32_t c = order[k];
    ASSERT_EQ(r.ring, c);
    ASSERT_NEAR(r.elevation, el[c], 0.0);
    ASSERT_EQ(r.sweep, 1);
    ASSERT_NEAR(r.time_offset, 1.0 / 3600.0 + dt[c], 1e-15);
    double expect = 0.5 - 2.0 * M_PI * 10.0 * (1.0 / 3600.0 + dt[c]);
    ASSERT_NEAR(r.azimuth, expect, 1e-12);
  }
  lidar_pattern_close(&p);

  // counter-clockwise
  d.counter_clockwise = 1;
  d.ntime_offset = 0;
  ASSERT_OK(lidar_pattern_spinning_init(&p, &d, "lidar.spinning", &msg));
  lidar_pattern_ray_t r;
  lidar_pattern_ray(&p, 90, 0, &r);
  ASSERT_NEAR(r.azimuth, 0.5 + M_PI / 2, 1e-12);
  lidar_pattern_close(&p);
  return 0;
}


TEST(pattern_presets_bpearl_hdl64e) {
  lidar_pattern_t p;
  err_msg_t msg = {0};
  lidar_bpearl_desc_t b = {.frequency = 10.0};
  ASSERT_OK(lidar_pattern_bpearl_init(&p, &b, "lidar.bpearl", &msg));
  ASSERT_EQ(p.nray, 32);
  ASSERT_NEAR(lidar_pattern_rate(&p), 576000.0, 1e-6);
  double lo = 1e9, hi = -1e9;
  for (uint32_t k = 0; k < p.nray; k++) {
    lo = fmin(lo, p.elevation[k]);
    hi = fmax(hi, p.elevation[k]);
  }
  ASSERT_NEAR(lo, 0.0, 1e-15);
  ASSERT_NEAR((hi - lo) / DEG, 90.0 * 31 / 32, 1e-12);   // 2.8125 degree steps
  lidar_pattern_close(&p);
  b.frequency = 15.0;
  ASSERT_NE(lidar_pattern_bpearl_init(&p, &b, "lidar.bpearl", &msg), 0);
  ASSERT_CONTAINS(msg.text, "lidar.bpearl.frequency");

  lidar_hdl64e_desc_t h = {.frequency = 10.0};
  ASSERT_OK(lidar_pattern_hdl64e_init(&p, &h, "lidar.hdl64e", &msg));
  ASSERT_EQ(p.nray, 64);
  lo = 1e9;
  hi = -1e9;
  for (uint32_t k = 0; k < p.nray; k++) {
    lo = fmin(lo, p.elevation[k]);
    hi = fmax(hi, p.elevation[k]);
  }
  ASSERT_NEAR(hi / DEG, 2.0, 1e-12);
  ASSERT_NEAR(lo / DEG, -24.8, 1e-12);
  ASSERT_NEAR(lidar_pattern_rate(&p), 1.3333e6, 1e3);
  lidar_pattern_close(&p);
  return 0;
}


TEST(pattern_custom_ray_list) {
  lidar_pattern_t p;
  err_msg_t msg = {0};
  double az[3] = {0.1, 0.2, 0.3}, el[3] = {0.0, 0.1, -0.1}, t[3] = {0.02, 0.0, 0.01};
  uint32_t ch[3] = {7, 8, 9};
  lidar_custom_desc_t d = {.azimuths = az, .elevations = el, .time_offsets = t,
                           .ntime_offset = 3, .channels = ch, .nchannel = 3, .nray = 3,
                           .frame_rate = 20.0};
  ASSERT_OK(lidar_pattern_custom_init(&p, &d, "lidar.custom", &msg));
  const uint32_t order[3] = {1, 2, 0};
  for (uint32_t k = 0; k < 3; k++) {
    lidar_pattern_ray_t r;
    lidar_pattern_ray(&p, 2, k, &r);
    ASSERT_NEAR(r.azimuth, az[order[k]], 0.0);
    ASSERT_NEAR(r.elevation, el[order[k]], 0.0);
    ASSERT_EQ(r.ring, ch[order[k]]);
    ASSERT_NEAR(r.time, 0.1 + t[order[k]], 1e-15);
    ASSERT_EQ(r.sweep, 2);
  }
  lidar_pattern_close(&p);

  t[2] = 0.05;   // = one frame
  ASSERT_NE(lidar_pattern_custom_init(&p, &d, "lidar.custom", &msg), 0);
  ASSERT_CONTAINS(msg.text, "lidar.custom.time_offsets[2]");
  return 0;
}


// The rank of each channel by elevation counted directly (the channels with a lower mean
// elevation, or an equal one and a lower number): velodyne_pointcloud's ring of each laser.
static int check_elevation_rings(const lidar_pattern_t* p) {
  uint32_t* got = mem_alloc(p->nray * sizeof *got);
  err_msg_t msg = {0};
  ASSERT_OK(lidar_pattern_elevation_rings(p, got, &msg));
  for (uint32_t k = 0; k < p->nray; k++) {
    double sum_k = 0.0, n_k = 0.0;
    for (uint32_t j = 0; j < p->nray; j++) {
      if (p->ring[j] == p->ring[k]) {
        sum_k += p->elevation[j];
        n_k += 1.0;
      }
    }
    uint32_t below = 0;
    for (uint32_t c = 0; c < p->nray; c++) {   // each other channel once: at its first ray
      int first = 1;
      double sum_c = 0.0, n_c = 0.0;
      for (uint32_t j = 0; j < p->nray; j++) {
        if (p->ring[j] == p->ring[c]) {
          first &= j >= c;
          sum_c += p->elevation[j];
          n_c += 1.0;
        }
      }
      double ec = sum_c / n_c, ek = sum_k / n_k;
      below += first && (ec < ek || (ec == ek && p->ring[c] < p->ring[k]));
    }
    ASSERT_EQ(got[k], below);
  }
  mem_free(got);
  return 0;
}


TEST(pattern_rings_by_elevation_as_the_velodyne_driver) {
  lidar_pattern_t p;
  err_msg_t msg = {0};
  uint32_t ring[128];

  // VLP-16: laser 0 (-15 degrees) is ring 0, laser 1 (+1) ring 8, laser 2 (-13) ring 1, ...
  lidar_vlp16_desc_t v = {.frequency = 10.0};
  ASSERT_OK(lidar_pattern_vlp16_init(&p, &v, "lidar.vlp16", &msg));
  ASSERT_OK(lidar_pattern_elevation_rings(&p, ring, &msg));
  for (uint32_t k = 0; k < 16; k++) {
    ASSERT_EQ(ring[k], (uint32_t)(kVlpElevation[k] + 15.0) / 2u);
  }
  ASSERT_EQ(ring[1], 8);
  ASSERT_EQ(ring[2], 1);
  ASSERT_OK(check_elevation_rings(&p));
  lidar_pattern_close(&p);

  // HDL-64E and Ouster number their lasers from the top: the rings run the other way
  lidar_hdl64e_desc_t h = {.frequency = 10.0};
  ASSERT_OK(lidar_pattern_hdl64e_init(&p, &h, "lidar.hdl64e", &msg));
  ASSERT_OK(lidar_pattern_elevation_rings(&p, ring, &msg));
  for (uint32_t k = 0; k < 64; k++) {
    ASSERT_EQ(ring[k], 63 - k);
  }
  lidar_pattern_close(&p);
  lidar_ouster_desc_t o = {.channels = 128, .columns = 512, .frequency = 10.0,
                           .elevation_max = NAN, .elevation_min = NAN};
  ASSERT_OK(lidar_pattern_ouster_init(&p, &o, "lidar.ouster", &msg));
  ASSERT_OK(lidar_pattern_elevation_rings(&p, ring, &msg));
  for (uint32_t k = 0; k < 128; k++) {
    ASSERT_EQ(ring[k], 127 - k);
  }
  lidar_pattern_close(&p);
  lidar_bpearl_desc_t b = {.frequency = 10.0};
  ASSERT_OK(lidar_pattern_bpearl_init(&p, &b, "lidar.bpearl", &msg));
  ASSERT_OK(check_elevation_rings(&p));
  lidar_pattern_close(&p);

  // a spinning table fired out of channel order, two channels at one elevation
  double el[5] = {0.1, -0.2, 0.1, 0.3, -0.05}, dt[5] = {4e-5, 3e-5, 2e-5, 1e-5, 0.0};
  lidar_spinning_desc_t s = {.frequency = 10.0, .columns = 100, .elevations = el, .nchannel = 5,
                             .time_offsets = dt, .ntime_offset = 5};
  ASSERT_OK(lidar_pattern_spinning_init(&p, &s, "lidar.spinning", &msg));
  ASSERT_EQ(p.ring[0], 4);   // fired first
  ASSERT_OK(lidar_pattern_elevation_rings(&p, ring, &msg));
  const uint32_t by_channel[5] = {2, 0, 3, 4, 1};
  for (uint32_t k = 0; k < 5; k++) {
    ASSERT_EQ(ring[k], by_channel[p.ring[k]]);
  }
  ASSERT_OK(check_elevation_rings(&p));
  lidar_pattern_close(&p);

  // a custom list: a channel of several rays at their mean elevation
  double az[4] = {0.0, 0.1, 0.2, 0.3}, cel[4] = {0.1, 0.3, 0.0, 0.05};
  uint32_t ch[4] = {5, 5, 2, 9};
  lidar_custom_desc_t c = {.azimuths = az, .elevations = cel, .channels = ch, .nchannel = 4,
                           .nray = 4, .frame_rate = 10.0};
  ASSERT_OK(lidar_pattern_custom_init(&p, &c, "lidar.custom", &msg));
  ASSERT_OK(lidar_pattern_elevation_rings(&p, ring, &msg));
  for (uint32_t k = 0; k < 4; k++) {
    ASSERT_EQ(ring[k], p.ring[k] == 5 ? 2u : p.ring[k] == 9 ? 1u : 0u);
  }
  ASSERT_OK(check_elevation_rings(&p));
  lidar_pattern_close(&p);
  return 0;
}


TEST(pattern_livox_rosette) {
  lidar_pattern_t p;
  err_msg_t msg = {0};
  lidar_livox_desc_t d = {.fov = 38.4 * DEG, .point_rate = 100000, .frame_rate = 10,
                          .prism_rate = {7294.0 / 60.0, -4664.0 / 60.0}};
  ASSERT_OK(lidar_pattern_livox_init(&p, &d, "lidar.livox", &msg));
  ASSERT_EQ(p.groups_per_sweep, 10000);

  // every ray inside the cone; the field is covered out to its edge; frames differ
  double maxang = 0.0;
  int differ = 0;
  for (uint64_t g = 0; g < 10000; g++) {
    lidar_pattern_ray_t r, r2;
    lidar_pattern_ray(&p, g, 0, &r);
    lidar_pattern_ray(&p, g + 10000, 0, &r2);
    double ang = acos(fmin(1.0, r.dir[0]));
    ASSERT_TRUE(ang <= 19.2 * DEG + 1e-12);
    maxang = fmax(maxang, ang);
    ASSERT_NEAR(r.dir[0] * r.dir[0] + r.dir[1] * r.dir[1] + r.dir[2] * r.dir[2], 1.0, 1e-12);
    differ += fabs(r.dir[1] - r2.dir[1]) > 1e-6;
    ASSERT_EQ(r2.sweep, 1);
  }
  ASSERT_TRUE(maxang > 19.0 * DEG);
  ASSERT_TRUE(differ > 9000);
  lidar_pattern_close(&p);
  return 0;
}


TEST(pattern_bad_configurations_name_the_field) {
  lidar_pattern_t p;
  err_msg_t msg = {0};
  double el[2] = {0.0, 0.1};
  lidar_spinning_desc_t d = {.frequency = 10.0, .columns = 100, .elevations = el, .nchannel = 0};
  ASSERT_EQ(lidar_pattern_spinning_init(&p, &d, "lidar.spinning", &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "lidar.spinning.channel_elevations is empty");
  d.nchannel = 2;
  d.columns = 0;
  ASSERT_EQ(lidar_pattern_spinning_init(&p, &d, "lidar.spinning", &msg), ERR_INVAL);
  ASSERT_STREQ(msg.text, "lidar.spinning.columns = 0 must be > 0");
  d.columns = 100;
  d.frequency = NAN;
  ASSERT_EQ(lidar_pattern_spinning_init(&p, &d, "lidar.spinning", &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "lidar.spinning.frequency = nan");
  d.frequency = 10.0;
  el[1] = NAN;
  ASSERT_EQ(lidar_pattern_spinning_init(&p, &d, "lidar.spinning", &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "lidar.spinning.channel_elevations[1]");
  el[1] = 0.1;
  double dt[2] = {0.0, 1e-3};   // a column lasts 1 ms
  d.time_offsets = dt;
  d.ntime_offset = 2;
  ASSERT_EQ(lidar_pattern_spinning_init(&p, &d, "lidar.spinning", &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "lidar.spinning.channel_time_offsets[1]");

  lidar_vlp16_desc_t v = {.frequency = 25.0};
  ASSERT_EQ(lidar_pattern_vlp16_init(&p, &v, "lidar.vlp16", &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "lidar.vlp16.frequency = 25");
  lidar_ouster_desc_t o = {.channels = 48, .columns = 1024, .frequency = 10.0,
                           .elevation_max = NAN, .elevation_min = NAN};
  ASSERT_EQ(lidar_pattern_ouster_init(&p, &o, "lidar.ouster", &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "lidar.ouster.channels = 48");
  lidar_flash_desc_t f = {.columns = 8, .rows = 0, .fov_horizontal = 1, .fov_vertical = 1,
                          .frame_rate = 10};
  ASSERT_EQ(lidar_pattern_flash_init(&p, &f, "lidar.flash", &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "lidar.flash.rows = 0");
  return 0;
}


TEST(pattern_rates_and_angles_are_bounded) {
  // rates near 0 made sweeps infinite, a frame of 1e20 rays overflowed the sweep count, and
  // rays per second past 1e9 outrun the cursor's 2^62 over the time line: each names its field
  lidar_pattern_t p;
  err_msg_t msg = {0};
  double el[4] = {0, 0.1, 0.2, 0.3};
  lidar_spinning_desc_t s = {.frequency = 5e-324, .columns = 10, .elevations = el, .nchannel = 4};
  ASSERT_EQ(lidar_pattern_spinning_init(&p, &s, "lidar.spinning", &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "lidar.spinning.frequency = 4.94066e-324 must be in [0.0001, 1000]");
  s.frequency = 1e-4;                                  // the slowest: 10^4 s a revolution
  ASSERT_OK(lidar_pattern_spinning_check(&s, "lidar.spinning", &msg));
  s = (lidar_spinning_desc_t){.frequency = 1000, .columns = 1u << 20, .elevations = el,
                              .nchannel = 4};          // 4.2e9 rays per second
  ASSERT_EQ(lidar_pattern_spinning_init(&p, &s, "lidar.spinning", &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "lidar.spinning.frequency x lidar.spinning.columns x "
                  "channel_elevations = 1000 Hz x 4194304 rays = 4.194e+09 rays per second");
  s.frequency = 200;                                   // 8.4e8
  ASSERT_OK(lidar_pattern_spinning_check(&s, "lidar.spinning", &msg));
  s.start_azimuth = 7.0;
  ASSERT_EQ(lidar_pattern_spinning_check(&s, "lidar.spinning", &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "lidar.spinning.start_azimuth = 7 is outside [-2 pi, 2 pi] rad");

  lidar_livox_desc_t l = {.fov = 0.6, .point_rate = 1e5, .frame_rate = 5e-324,
                          .prism_rate = {121.0, -77.0}};
  ASSERT_EQ(lidar_pattern_livox_init(&p, &l, "lidar.livox", &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "lidar.livox.frame_rate");
  l.point_rate = 1e8;
  l.frame_rate = 1e-2;                                 // 1e10 rays a frame
  ASSERT_EQ(lidar_pattern_livox_init(&p, &l, "lidar.livox", &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "lidar.livox.frame_rate = 0.01: a frame of 10000000000 rays");
  l.frame_rate = 0.05;                                 // 2e9 rays
  ASSERT_OK(lidar_pattern_livox_check(&l, "lidar.livox", &msg));
  l = (lidar_livox_desc_t){.fov = 0.6, .point_rate = 1.9e-4, .frame_rate = 1e-4,
                           .prism_rate = {121.0, -77.0}};   // 2 rays over 10,526 s
  ASSERT_EQ(lidar_pattern_livox_check(&l, "lidar.livox", &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "lidar.livox.frame_rate = 0.0001: a frame of 2 rays lasts 10526.3 s");

  lidar_flash_desc_t f = {.columns = 2048, .rows = 2048, .fov_horizontal = 1,
                          .fov_vertical = 1, .frame_rate = 1000};
  ASSERT_EQ(lidar_pattern_flash_check(&f, "lidar.flash", &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "lidar.flash.frame_rate x lidar.flash.columns x rows = 1000 Hz");
  f.frame_rate = 1e-5;
  ASSERT_EQ(lidar_pattern_flash_check(&f, "lidar.flash", &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "lidar.flash.frame_rate = 1e-05 must be in [0.0001, 10000] Hz");
  double az[1] = {-1e308}, one[1] = {0};
  lidar_custom_desc_t c = {.azimuths = az, .elevations = one, .nray = 1, .frame_rate = 10};
  ASSERT_EQ(lidar_pattern_custom_check(&c, "lidar.custom", &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "lidar.custom.azimuths[0] = -1e+308 is outside [-2 pi, 2 pi]");
  lidar_vlp16_desc_t v = {.frequency = 10, .start_azimuth = 1e300};
  ASSERT_EQ(lidar_pattern_vlp16_check(&v, "lidar.vlp16", &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "lidar.vlp16.start_azimuth");
  return 0;
}


TEST(pattern_prepare_refuses_a_pattern_outside_the_bounds) {
  // the backstop behind the models' checks: a pattern built by hand with a sweep of 0 s (the
  // rates that hung a step) or 1e10 rays per second is refused, and closed
  lidar_pattern_t p;
  err_msg_t msg = {0};
  const struct {
    double group_period, sweep_period;
    uint64_t groups_per_sweep;
  } bad[] = {{1e-5, 0.0, 0}, {1e-10, 1.0, 0}, {1e-5, 2e4, 0},
             {1e-5, 1e-5 * 9e18, 9000000000000000000ull}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ASSERT_OK(lidar_pattern_alloc(&p, 1, 0, "lidar.test", &msg));
    p.group_period = bad[i].group_period;
    p.sweep_period = bad[i].sweep_period;
    p.groups_per_sweep = bad[i].groups_per_sweep;
    ASSERT_EQ(lidar_pattern_prepare(&p, "lidar.test", &msg), ERR_INVAL);
    ASSERT_CONTAINS(msg.text, "lidar.test: a sweep of");
    ASSERT_TRUE(p.elevation == NULL && p.nray == 0);
  }
  return 0;
}


TEST(pattern_first_group_is_bounded_whatever_the_periods) {
  // sweeps by start time: the first group of a sweep is the first g whose sweep_of is that sweep
  lidar_pattern_t p;
  memset(&p, 0, sizeof p);
  p.nray = 1;
  p.group_period = 1e-3;
  p.sweep_period = 0.1;
  for (uint64_t sweep = 0; sweep < 50; sweep++) {
    uint64_t g = lidar_pattern_first_group(&p, sweep);
    ASSERT_EQ(lidar_pattern_sweep_of(&p, g), sweep);
    ASSERT_TRUE(g == 0 || lidar_pattern_sweep_of(&p, g - 1) < sweep);
  }
  // periods that defeat the estimate (a sweep of 0 s, of NaN s): an answer, not an endless loop
  p.sweep_period = 0.0;
  (void)lidar_pattern_first_group(&p, 1);
  ASSERT_EQ(lidar_pattern_sweep_of(&p, 5), 4611686018427387904ull);
  p.sweep_period = NAN;
  (void)lidar_pattern_first_group(&p, 3);
  p.sweep_period = 1e300;
  ASSERT_EQ(lidar_pattern_first_group(&p, 1), 4611686018427387904ull);
  return 0;
}


TEST(pattern_init_out_of_memory_is_clean) {
  // every allocation of every model's init failing in turn: ERR_NOMEM and nothing leaked
  double el[3] = {0.1, -0.1, 0.0}, dt[3] = {2e-6, 0.0, 1e-6};
  double az[2] = {0.1, 0.2}, cel[2] = {0.0, 0.1};
  for (int model = 0; model < 6; model++) {
    int64_t live = mem_live_count();
    for (int64_t n = 1;; n++) {
      lidar_pattern_t p;
      err_msg_t msg = {0};
      mem_fail_after(n);
      int rc;
      switch (model) {
        case 0: {
          lidar_spinning_desc_t d = {.frequency = 10, .columns = 100, .elevations = el,
                                     .nchannel = 3, .time_offsets = dt, .ntime_offset = 3};
          rc = lidar_pattern_spinning_init(&p, &d, "s", &msg);
          break;
        }
        case 1: {
          lidar_vlp16_desc_t d = {.frequency = 10, .vertical_offsets = 1};
          rc = lidar_pattern_vlp16_init(&p, &d, "v", &msg);
          break;
        }
        case 2: {
          lidar_ouster_desc_t d = {.channels = 16, .columns = 512, .frequency = 10,
                                   .elevation_max = NAN, .elevation_min = NAN};
          rc = lidar_pattern_ouster_init(&p, &d, "o", &msg);
          break;
        }
        case 3: {
          lidar_flash_desc_t d = {.columns = 4, .rows = 2, .fov_horizontal = 1,
                                  .fov_vertical = 1, .frame_rate = 10};
          rc = lidar_pattern_flash_init(&p, &d, "f", &msg);
          break;
        }
        case 4: {
          lidar_custom_desc_t d = {.azimuths = az, .elevations = cel, .nray = 2,
                                   .frame_rate = 10};
          rc = lidar_pattern_custom_init(&p, &d, "c", &msg);
          break;
        }
        default: {
          lidar_livox_desc_t d = {.fov = 0.5, .point_rate = 1000, .frame_rate = 10,
                                  .prism_rate = {1.0, -0.7}};
          rc = lidar_pattern_livox_init(&p, &d, "l", &msg);
          break;
        }
      }
      mem_fail_after(0);
      if (rc == 0) {
        lidar_pattern_close(&p);
        break;
      }
      ASSERT_EQ(rc, ERR_NOMEM);
      ASSERT_EQ(mem_live_count(), live);
      ASSERT_TRUE(n < 100);
    }
    ASSERT_EQ(mem_live_count(), live);
  }
  return 0;
}
