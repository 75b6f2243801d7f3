// SPDX-License-Identifier: MIT
// test_sweep.c: sweep time stepping: every ray fires in exactly one step whatever the steps,
// batches stop at sweep ends, and the sensor pose at a ray's time is the body's interpolated
// pose with the mount composed (known answers of docs/time.md, "Interpolation inside a step");
// a chunk's packets made from its tables are the pattern's rays bit for bit.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "base/simd.h"
#include "check.h"
#include "lidar/model.h"
#include "lidar/sweep.h"

#define DEG (M_PI / 180.0)


// Cut [0, t_end] into steps at the given times and take rays in batches of `max`; check every
// ray fires once, in its step, in order, and no batch crosses a sweep.
static int cover(const lidar_pattern_t* p, double t_s, const double* cuts, int ncut, size_t max,
                 uint64_t* out_total) {
  lidar_cursor_t c = lidar_sweep_seek(p, t_s, t_s);
  ASSERT_EQ(c, 0);
  double t0 = t_s;
  for (int k = 0; k < ncut; k++) {
    double t1 = cuts[k];
    for (;;) {
      size_t n = lidar_sweep_take(p, t_s, c, t1, max);
      if (n == 0) {
        break;
      }
      ASSERT_TRUE(n <= max);
      uint64_t sweep = lidar_sweep_of(p, c);
      ASSERT_EQ(lidar_sweep_of(p, c + n - 1), sweep);
      for (size_t i = 0; i < n; i++) {
        lidar_pattern_ray_t r;
        lidar_sweep_ray(p, c + i, &r);
        double t = t_s + r.time;
        ASSERT_TRUE(t <= t1);
        ASSERT_TRUE(k == 0 ? t >= t0 : t > t0);
      }
      c += n;
    }
    // the next ray is after the step
    ASSERT_TRUE(!lidar_sweep_fired(p, t_s, c, t1));
    t0 = t1;
  }
  *out_total = c;
  return 0;
}



TEST(sweep_every_ray_fires_once_whatever_the_steps) {
  lidar_pattern_t p;
  err_msg_t msg = {0};
  lidar_vlp16_desc_t d = {.frequency = 10.0};
  ASSERT_OK(lidar_pattern_vlp16_init(&p, &d, "lidar.vlp16", &msg));
  const double t_s = 12.5;

  // one step, uneven steps, 1 kHz steps: the same rays up to t_s + 0.35
  double one[1] = {t_s + 0.35};
  double uneven[5] = {t_s + 0.001, t_s + 0.1, t_s + 0.1000001, t_s + 0.27, t_s + 0.35};
  double* khz = malloc(350 * sizeof(double));
  ASSERT_TRUE(khz != NULL);
  for (int k = 0; k < 350; k++) {
    khz[k] = t_s + 0.001 * (k + 1);
  }
  khz[349] = t_s + 0.35;
  uint64_t a, b, c, e;
  ASSERT_OK(cover(&p, t_s, one, 1, 100000, &a));
  ASSERT_OK(cover(&p, t_s, uneven, 5, 777, &b));
  ASSERT_OK(cover(&p, t_s, khz, 350, 4096, &c));
  ASSERT_OK(cover(&p, t_s, one, 1, 1, &e));
  free(khz);
  ASSERT_EQ(a, b);
  ASSERT_EQ(a, c);
  ASSERT_EQ(a, e);
  // sequences starting in [0, 0.35]: 6330 (0.35 / 55.296 us = 6329.57), all 16 lasers of the
  // last one fire by 0.35 only if it started 34.56 us before
  uint64_t seq = (uint64_t)floor(0.35 / 55.296e-6) + 1;
  uint64_t expect = seq * 16;
  double last = (seq - 1) * 55.296e-6;
  for (int j = 15; j >= 0 && last + j * 2.304e-6 > 0.35; j--) {
    expect--;
  }
  ASSERT_EQ(a, expect);
  lidar_pattern_close(&p);
  return 0;
}


TEST(sweep_seek_finds_the_first_ray_at_or_after) {
  lidar_pattern_t p;
  err_msg_t msg = {0};
  double el[1] = {0.0};
  lidar_spinning_desc_t d = {.frequency = 10.0, .columns = 1000, .elevations = el, .nchannel = 1};
  ASSERT_OK(lidar_pattern_spinning_init(&p, &d, "lidar.spinning", &msg));
  ASSERT_EQ(lidar_sweep_seek(&p, 1.0, 0.5), 0);
  ASSERT_EQ(lidar_sweep_seek(&p, 1.0, 1.0), 0);
  ASSERT_EQ(lidar_sweep_seek(&p, 1.0, 1.00005), 1);   // columns every 100 us
  ASSERT_EQ(lidar_sweep_seek(&p, 1.0, 1.2500001), 2501);
  ASSERT_EQ(lidar_sweep_seek(&p, 0.0, 7.0), 70000);
  lidar_pattern_close(&p);
  return 0;
}


// Seeking across the whole range of state times (start time -1e9 s, time 1e9 s) and beyond it
// (times where firing times no longer resolve a group) returns, and what it returns is the first
// ray at or after t wherever firing times resolve.
TEST(sweep_seek_is_bounded_at_extreme_times) {
  lidar_pattern_t p;
  err_msg_t msg = {0};
  lidar_vlp16_desc_t d = {.frequency = 10.0};
  ASSERT_OK(lidar_pattern_vlp16_init(&p, &d, "lidar.vlp16", &msg));
  double t_s = -1e9, t = 1e9;
  lidar_cursor_t c = lidar_sweep_seek(&p, t_s, t);
  ASSERT_TRUE(lidar_sweep_fired(&p, t_s, c - 1, nextafter(t, -INFINITY)));
  ASSERT_TRUE(!lidar_sweep_fired(&p, t_s, c, nextafter(t, -INFINITY)));
  // 2e9 s of 16 lasers every 55.296 us
  double expect = 2e9 / 55.296e-6 * 16.0;
  ASSERT_TRUE(fabs((double)c - expect) < 1e-6 * expect);
  // far outside the bounds: an answer, not an endless loop (the values no longer mean much)
  (void)lidar_sweep_seek(&p, -1e300, 0.0);
  (void)lidar_sweep_seek(&p, 0.0, 1e300);
  (void)lidar_sweep_seek(&p, 1e300, nextafter(1e300, INFINITY));
  (void)lidar_sweep_seek(&p, -1e16, 1e16);
  lidar_pattern_close(&p);
  return 0;
}


TEST(sweep_pose_interpolation_kat) {
  // lerp p0 = (0, 0, 1) -> p1 = (0.1, 0, 1) at s = 0.4 -> (0.04, 0, 1); yaw 0 -> 90 degrees at
  // s = 0.4: local +x points to (0.809016994, 0.587785252, 0)
  view_body_t b = {.id = 1};
  b.at[0].pose = xform_identity();
  b.at[0].pose.p[2] = 1.0;
  b.at[1].pose = b.at[0].pose;
  b.at[1].pose.p[0] = 0.1;
  b.at[1].pose.q[0] = cos(45 * DEG);
  b.at[1].pose.q[3] = sin(45 * DEG);
  pose_t mount = xform_identity();
  lidar_sweep_pose_t ps;
  lidar_sweep_pose(&b, &mount, 0.4, &ps);
  ASSERT_NEAR(ps.pose.p[0], 0.04, 1e-15);
  ASSERT_NEAR(ps.pose.p[1], 0.0, 1e-15);
  ASSERT_NEAR(ps.pose.p[2], 1.0, 1e-15);
  double o[3] = {0, 0, 0}, x[3] = {1, 0, 0};
  scene_ray_t r;
  lidar_sweep_world_ray(&ps, o, x, &r);
  ASSERT_KAT(r.dir[0], 0.809016994, 1e-8, 1e-6);
  ASSERT_KAT(r.dir[1], 0.587785252, 1e-8, 1e-6);
  ASSERT_NEAR(r.dir[2], 0.0, 1e-15);
  ASSERT_NEAR(r.origin[0], 0.04, 1e-15);
  ASSERT_NEAR(r.time, 0.4, 0.0);

  // slerp(identity, Rz(90), 0.5) = Rz(45); a mount 1 m ahead swings on the arc, not the chord
  mount.p[0] = 1.0;
  b.at[1].pose.p[0] = 0.0;
  lidar_sweep_pose(&b, &mount, 0.5, &ps);
  ASSERT_KAT(ps.pose.q[0], 0.923879533, 1e-8, 1e-6);
  ASSERT_KAT(ps.pose.q[3], 0.382683432, 1e-8, 1e-6);
  ASSERT_NEAR(ps.pose.p[0], 0.7071067812, 1e-9);
  ASSERT_NEAR(ps.pose.p[1], 0.7071067812, 1e-9);
  return 0;
}


TEST(sweep_world_packet_equals_world_ray_in_every_form) {
  // a packet of rays to the world at a turned, shifted pose: each lane bit for bit the ray that
  // lidar_sweep_world_ray gives, in each form of the packet's loop this CPU runs (base/simd.h)
  view_body_t b = {.id = 1};
  b.at[0].pose = xform_identity();
  b.at[1].pose = b.at[0].pose;
  b.at[1].pose.p[0] = 3.25;
  b.at[1].pose.p[1] = -1.5;
  b.at[1].pose.q[0] = cos(0.61);
  b.at[1].pose.q[1] = 0.3 * sin(0.61);
  b.at[1].pose.q[3] = sqrt(0.91) * sin(0.61);
  pose_t mount = xform_identity();
  mount.p[2] = 0.4;
  lidar_sweep_pose_t ps;
  lidar_sweep_pose(&b, &mount, 0.37, &ps);
  scene_packet_t in;
  for (unsigned k = 0; k < SCENE_PACKET; k++) {
    double az = 0.7 * k, el = 0.05 * k - 0.3;
    in.ox[k] = 0.01 * cos(az);
    in.oy[k] = 0.01 * sin(az);
    in.oz[k] = 0.002 * k;
    in.dx[k] = cos(el) * cos(az);
    in.dy[k] = cos(el) * sin(az);
    in.dz[k] = sin(el);
    in.tmax[k] = 7.0;
    in.time[k] = 0.37;
  }
  int differs = 0;
  for (int level = 0; level <= (int)simd_allowed_level(); level++) {
    simd_set_max((simd_level_t)level);
    ASSERT_EQ(simd_level(), level);
    scene_packet_t pk = in;
    lidar_sweep_world_packet(&ps, &pk);
    for (unsigned k = 0; k < SCENE_PACKET; k++) {
      scene_ray_t w;
      lidar_sweep_world_ray(&ps, (const double[3]){in.ox[k], in.oy[k], in.oz[k]},
                            (const double[3]){in.dx[k], in.dy[k], in.dz[k]}, &w);
      const double got[6] = {pk.ox[k], pk.oy[k], pk.oz[k], pk.dx[k], pk.dy[k], pk.dz[k]};
      const double want[6] = {w.origin[0], w.origin[1], w.origin[2], w.dir[0], w.dir[1],
                              w.dir[2]};
      ASSERT_MEM_EQ(got, want, sizeof got);
      ASSERT_TRUE(pk.tmax[k] == 7.0 && pk.time[k] == 0.37);
      differs += got[0] != in.ox[k] && got[3] != in.dx[k];
    }
  }

  // the pose moved every ray
  ASSERT_EQ(differs, (int)((simd_allowed_level() + 1) * SCENE_PACKET));
  return 0;
}


// The chunks of groups g0 of pattern p (tiled, LIDAR_TILE_GROUPS groups a chunk) made from its
// lanes against lidar_pattern_rays in firing order: each trace position holds the ray the
// tiles put there, its origin, direction, index and clamped step fraction bit for bit, and its
// world ray lidar_sweep_world_ray's, in every form this CPU runs, still and moving. The
// direction also points at the azimuth and elevation the pattern reports. Still, without
// `local`: the same world packets, and lidar_sweep_lane_aim gives the sensor-frame rays.
static int lanes_match(const lidar_pattern_t* p, const uint64_t* g0, int ng) {
  const uint32_t K = p->nray;
  const size_t n = (size_t)LIDAR_TILE_GROUPS * K;
  uint32_t* slot = mem_alloc(n * sizeof *slot);
  uint32_t* at = mem_alloc(n * sizeof *at);
  lidar_pattern_ray_t* pr = mem_alloc(n * sizeof *pr);
  scene_packet_t* local = mem_alloc(n / SCENE_PACKET * sizeof *local);
  scene_packet_t* world = mem_alloc(n / SCENE_PACKET * sizeof *world);
  scene_packet_t* bare = mem_alloc(n / SCENE_PACKET * sizeof *bare);   // without local
  uint64_t* index = mem_alloc(n * sizeof *index);
  ASSERT_TRUE(slot && at && pr && local && world && bare && index);
  lidar_model_tile_slots(K, 0, n, slot);
  for (size_t j = 0; j < n; j++) {
    at[slot[j]] = (uint32_t)j;
  }
  lidar_sweep_lanes_t l;
  err_msg_t msg = {0};
  ASSERT_OK(lidar_sweep_lanes_init(&l, p, slot, n, &msg));
  ASSERT_EQ(l.n, n);

  view_body_t b = {.id = 1};
  b.at[0].pose = xform_identity();
  b.at[1].pose = b.at[0].pose;
  b.at[1].pose.p[0] = -2.5;
  b.at[1].pose.q[0] = cos(0.4);
  b.at[1].pose.q[2] = sin(0.4);
  lidar_sweep_pose_t ps;
  lidar_sweep_pose(&b, &b.at[0].pose, 1.0, &ps);
  for (int c = 0; c < ng; c++) {
    lidar_pattern_rays(p, g0[c], 0, n, pr);

    // the step starts 2 groups into the chunk and lasts 4: step fractions below 0 and above 1;
    // an empty step (inv_dt 0: fractions -0 and 0, both 0) and a NaN origin (0)
    const double dt = 4.0 * p->group_period;
    const double origin = -lidar_pattern_time(p, g0[c] + 2, 0);
    int clamped = 0;
    for (int run = 0; run < 6 * ((int)simd_allowed_level() + 1); run++) {
      const int level = run / 6, still = run % 2, frame = run / 2 % 3;
      simd_set_max((simd_level_t)level);
      const double s_origin = frame == 2 ? NAN : origin;
      lidar_sweep_frame_t f = {.inv_dt = frame == 1 ? 0.0 : 1.0 / dt, .s_origin = s_origin,
                               .tmax = 42.0, .fixed = still ? &ps : NULL};
      memset(local, 0xff, n / SCENE_PACKET * sizeof *local);
      memset(world, 0xff, n / SCENE_PACKET * sizeof *world);
      for (size_t q = 0; p->beam_origin_radius == 0.0 && q < n / SCENE_PACKET; q++) {
        // origins 0 are not written: the lidar's packets start zeroed
        memset(local[q].ox, 0, sizeof local[q].ox);
        memset(local[q].oy, 0, sizeof local[q].oy);
        memset(local[q].oz, 0, sizeof local[q].oz);
      }
      lidar_sweep_lane_packets(p, &l, g0[c], &f, local, world, index);
      lidar_pattern_group_t gr[SCENE_PACKET];
      for (uint32_t g = 0; g < l.ngroup; g++) {
        lidar_pattern_group(p, g0[c] + g, &gr[g]);
      }
      if (still) {
        memset(bare, 0xff, n / SCENE_PACKET * sizeof *bare);
        lidar_sweep_lane_packets(p, &l, g0[c], &f, NULL, bare, index);
        ASSERT_MEM_EQ(bare, world, n / SCENE_PACKET * sizeof *bare);
      }
      for (size_t i = 0; i < n; i++) {
        const lidar_pattern_ray_t* r = &pr[at[i]];
        const scene_packet_t* lo = &local[i / SCENE_PACKET];
        const scene_packet_t* wp = &world[i / SCENE_PACKET];
        const size_t k = i % SCENE_PACKET;
        const double got[6] = {lo->ox[k], lo->oy[k], lo->oz[k], lo->dx[k], lo->dy[k],
                               lo->dz[k]};
        const double want[6] = {r->origin[0], r->origin[1], r->origin[2], r->dir[0],
                                r->dir[1], r->dir[2]};
        ASSERT_MEM_EQ(got, want, sizeof got);
        double aimed[6];
        lidar_sweep_lane_aim(&l, gr, p->beam_origin_radius, i, aimed + 3, aimed);
        ASSERT_MEM_EQ(aimed, want, sizeof aimed);
        ASSERT_EQ(index[i], r->index);
        double s = f.inv_dt * (s_origin + r->time);   // as lidar.c clamps it
        s = s > 0.0 ? (s < 1.0 ? s : 1.0) : 0.0;
        ASSERT_TRUE(still || memcmp(&lo->time[k], &s, sizeof s) == 0);   // for the poses
        ASSERT_TRUE(still || lo->tmax[k] == 42.0);
        clamped += frame == 0 && (s == 0.0 || s == 1.0);
        ASSERT_NEAR(atan2(r->dir[1], r->dir[0]), r->azimuth, 1e-12);
        ASSERT_NEAR(asin(r->dir[2]), r->elevation, 1e-12);
        if (still) {
          scene_ray_t w;
          lidar_sweep_world_ray(&ps, r->origin, r->dir, &w);
          const double wgot[6] = {wp->ox[k], wp->oy[k], wp->oz[k], wp->dx[k], wp->dy[k],
                                  wp->dz[k]};
          const double wwant[6] = {w.origin[0], w.origin[1], w.origin[2], w.dir[0], w.dir[1],
                                   w.dir[2]};
          ASSERT_MEM_EQ(wgot, wwant, sizeof wgot);
          ASSERT_MEM_EQ(&wp->time[k], &s, sizeof s);
          ASSERT_TRUE(wp->tmax[k] == 42.0);
        }
      }
    }
    ASSERT_TRUE(clamped > 0 && clamped < (int)(2 * n * (simd_allowed_level() + 1)));
  }
  lidar_sweep_lanes_close(&l);
  mem_free(slot);
  mem_free(at);
  mem_free(pr);
  mem_free(local);
  mem_free(world);
  mem_free(bare);
  mem_free(index);
  return 0;
}


TEST(sweep_lane_packets_are_the_patterns_rays) {
  err_msg_t msg = {0};
  lidar_pattern_t p;

  // an OS1-128 2048 with its beam-origin offset: the first chunk, one inside the sweep, the
  // sweep's last and one of a later sweep
  lidar_ouster_desc_t o = {.channels = 128, .columns = 2048, .frequency = 10.0,
                           .elevation_max = NAN, .elevation_min = NAN, .beam_origin = 0.015806};
  ASSERT_OK(lidar_pattern_ouster_init(&p, &o, "lidar.ouster", &msg));
  const uint64_t os1[4] = {0, 13, 2040, 3 * 2048 + 5};
  ASSERT_EQ(lanes_match(&p, os1, 4), 0);
  lidar_pattern_close(&p);

  // an OS1-64 1024 without it
  o.channels = 64;
  o.columns = 1024;
  o.beam_origin = 0.0;
  ASSERT_OK(lidar_pattern_ouster_init(&p, &o, "lidar.ouster", &msg));
  const uint64_t os64[2] = {8, 1017};
  ASSERT_EQ(lanes_match(&p, os64, 2), 0);
  lidar_pattern_close(&p);

  // an HDL-64E, whose lasers fire at their own times
  lidar_hdl64e_desc_t h = {.frequency = 10.0, .start_azimuth = 0.3};
  ASSERT_OK(lidar_pattern_hdl64e_init(&p, &h, "lidar.hdl64e", &msg));
  const uint64_t hdl[2] = {1, 5 * p.groups_per_sweep - 8};
  ASSERT_EQ(lanes_match(&p, hdl, 2), 0);
  lidar_pattern_close(&p);

  // a generic spinning lidar of 96 channels, each at its own time, counter-clockwise
  double el[96], dt[96];
  for (int k = 0; k < 96; k++) {
    el[k] = (0.3 - 0.006 * k) * (k % 2 ? 1.0 : -1.0);
    dt[k] = 1e-7 * (k % 7);
  }
  lidar_spinning_desc_t sd = {.frequency = 15.0, .columns = 900, .elevations = el,
                              .nchannel = 96, .time_offsets = dt, .ntime_offset = 96,
                              .counter_clockwise = 1, .start_azimuth = -1.0};
  ASSERT_OK(lidar_pattern_spinning_init(&p, &sd, "lidar.spinning", &msg));
  const uint64_t spin[2] = {0, 7 * 900 + 892};
  ASSERT_EQ(lanes_match(&p, spin, 2), 0);
  lidar_pattern_close(&p);
  return 0;
}


TEST(sweep_lanes_only_where_every_packet_holds_the_same_groups) {
  // 48 channels: a chunk of 512 rays is 10 2/3 groups in two rows of tiles, whose packets hold
  // different groups: no tables. A VLP-16 (vertical offsets) has none either.
  err_msg_t msg = {0};
  lidar_pattern_t p;
  double el[48] = {0};
  for (int k = 0; k < 48; k++) {
    el[k] = 0.01 * k;
  }
  lidar_spinning_desc_t sd = {.frequency = 10.0, .columns = 1000, .elevations = el,
                              .nchannel = 48};
  ASSERT_OK(lidar_pattern_spinning_init(&p, &sd, "lidar.spinning", &msg));
  uint32_t slot[LIDAR_CHUNK];
  lidar_model_tile_slots(48, 0, LIDAR_CHUNK, slot);
  lidar_sweep_lanes_t l;
  ASSERT_OK(lidar_sweep_lanes_init(&l, &p, slot, LIDAR_CHUNK, &msg));
  ASSERT_EQ(l.n, 0);
  lidar_sweep_lanes_close(&l);
  lidar_pattern_close(&p);

  lidar_vlp16_desc_t v = {.frequency = 10.0, .vertical_offsets = 1};
  ASSERT_OK(lidar_pattern_vlp16_init(&p, &v, "lidar.vlp16", &msg));
  for (uint32_t j = 0; j < 16; j++) {
    slot[j] = j;   // one group in one packet: only its vertical offsets forbid the tables
  }
  ASSERT_OK(lidar_sweep_lanes_init(&l, &p, slot, 16, &msg));
  ASSERT_EQ(l.n, 0);
  lidar_sweep_lanes_close(&l);
  lidar_pattern_close(&p);
  return 0;
}
