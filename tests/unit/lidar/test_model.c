// SPDX-License-Identifier: MIT
// test_model.c: a lidar's model (lidar/model.h) built once from its configuration: the trace
// order of a tiled pattern (every 16-ray packet 2 neighbouring channels of 8 consecutive
// columns, rebuilt here from the firing order), small firing groups regrouped, the writers and
// rows the options call for, a frame's points, the batch of the data (lidar/data.h) sized from
// it; the lanes of a whole chunk of an OS1-128; the pattern's tables owned by the model.
#include "lidar/model.h"

#include <math.h>
#include <string.h>

#include "base/mem.h"
#include "check.h"
#include "lidar/data.h"


static lidar_desc_t base_desc(void) {
  lidar_desc_t d;
  memset(&d, 0, sizeof d);
  d.returns.range_min = 0.1;
  d.returns.range_max = INFINITY;
  return d;
}


static int ouster(uint32_t channels, uint32_t columns, lidar_desc_t* d) {
  *d = base_desc();
  lidar_ouster_desc_t o = {.channels = channels, .columns = columns, .frequency = 10.0,
                           .elevation_max = NAN, .elevation_min = NAN};
  err_msg_t msg = {0};
  ASSERT_OK(lidar_pattern_ouster_init(&d->pattern, &o, "lidar.ouster", &msg));
  return 0;
}


TEST(model_tiles_an_os1_128_in_packets_of_2_channels_by_8_columns) {
  int64_t live = mem_live_count();
  lidar_desc_t d;
  ASSERT_OK(ouster(128, 2048, &d));
  lidar_model_t m;
  err_msg_t msg = {0};
  ASSERT_OK(lidar_model_init(&m, &d, &msg));
  ASSERT_EQ(d.pattern.nray, 0);   // the model owns the tables now
  ASSERT_EQ(m.pat.nray, 128);
  ASSERT_EQ(m.chunk, 8 * 128);
  ASSERT_TRUE(m.batch >= m.chunk && m.batch % m.chunk == 0);
  ASSERT_TRUE(m.tile_slot != NULL && !m.regroup);

  // the chunk's trace order: a permutation whose every packet holds the rays of channels
  // {c, c + 1} in columns {0 .. 7}, column by column
  uint32_t ray_at[8 * 128];
  memset(ray_at, 0xff, sizeof ray_at);
  for (uint32_t j = 0; j < m.chunk; j++) {
    ASSERT_TRUE(m.tile_slot[j] < m.chunk);
    ASSERT_EQ(ray_at[m.tile_slot[j]], 0xffffffffu);
    ray_at[m.tile_slot[j]] = j;
  }
  for (uint32_t pk = 0; pk < m.chunk / 16; pk++) {
    for (uint32_t lane = 0; lane < 16; lane++) {
      uint32_t j = ray_at[16 * pk + lane];
      ASSERT_EQ(j / 128, lane / 2);                 // column
      ASSERT_EQ(j % 128, 2 * pk + lane % 2);        // channel
    }
  }

  // a chunk that starts inside a column (a step ends anywhere): the same tiles, cut
  uint32_t part[300];
  lidar_model_tile_slots(128, 37, 300, part);
  for (uint32_t j = 0; j < 300; j++) {
    for (uint32_t i = 0; i < j; i++) {
      ASSERT_TRUE(part[i] != part[j]);
    }
    ASSERT_TRUE(part[j] < 300);
  }

  // the default cloud: the lean writer, no rows; a frame of 2048 x 128 points
  ASSERT_TRUE(m.points.lean && !m.rows && m.maxret == 1);
  ASSERT_EQ(m.frame_points, 2048 * 128);

  // a whole chunk's rays come from its lanes: every packet's lane holds the same column
  ASSERT_EQ(m.lanes.n, m.chunk);
  ASSERT_EQ(m.lanes.ngroup, 8);
  for (uint32_t lane = 0; lane < 16; lane++) {
    ASSERT_EQ(m.lanes.group[lane], lane / 2);
  }

  // the data's scratch is one batch, and its sensor-frame packets for the lanes
  lidar_data_t data;
  ASSERT_OK(lidar_data_init(&data, &m, &msg));
  ASSERT_TRUE(data.horizon != NULL && data.now.acc == NULL && data.local != NULL);
  lidar_data_close(&data);
  lidar_model_close(&m);
  ASSERT_EQ(mem_live_count(), live);
  return 0;
}


TEST(model_regroups_a_vlp16_and_follows_its_options) {
  int64_t live = mem_live_count();
  err_msg_t msg = {0};
  for (int variant = 0; variant < 4; variant++) {
    lidar_desc_t d = base_desc();
    lidar_vlp16_desc_t v = {.frequency = 10.0};
    ASSERT_OK(lidar_pattern_vlp16_init(&d.pattern, &v, "lidar.vlp16", &msg));
    d.world_frame = variant == 1;
    d.returns.depth = variant == 2 ? 3 : 1;
    d.returns.mode = variant == 3 ? LIDAR_RETURN_DUAL : LIDAR_RETURN_STRONGEST;
    d.misses = variant == 3 ? LIDAR_MISS_ZERO : LIDAR_MISS_REMOVE;
    lidar_model_t m;
    ASSERT_OK(lidar_model_init(&m, &d, &msg));
    ASSERT_TRUE(m.regroup && m.tile_slot == NULL && m.chunk == LIDAR_CHUNK && m.lanes.n == 0);
    ASSERT_EQ(m.points.lean, variant == 0 || variant == 2);   // x y z intensity, sensor frame
    ASSERT_EQ(m.rows, variant == 1 || variant == 2);
    ASSERT_EQ(m.maxret, variant == 3 ? 2u : 1u);

    // a revolution: ceil(0.1 s / 55.296 us) = 1809 firing sequences of 16 rays
    ASSERT_EQ(m.frame_points, 1809u * 16u * m.maxret);
    lidar_data_t data;
    ASSERT_OK(lidar_data_init(&data, &m, &msg));
    ASSERT_EQ(data.horizon != NULL, variant != 2);   // depth 1 only
    ASSERT_TRUE(data.local == NULL);                  // no lanes
    lidar_data_close(&data);
    lidar_model_close(&m);
  }
  ASSERT_EQ(mem_live_count(), live);
  return 0;
}


TEST(model_refusal_leaves_the_pattern_to_the_caller) {
  int64_t live = mem_live_count();
  lidar_desc_t d;
  ASSERT_OK(ouster(128, 2048, &d));
  d.max_frame_bytes = 1u << 20;   // a 4 MiB frame does not fit
  lidar_model_t m;
  err_msg_t msg = {0};
  ASSERT_EQ(lidar_model_init(&m, &d, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "exceeds the largest step output");
  ASSERT_EQ(d.pattern.nray, 128);
  lidar_pattern_close(&d.pattern);
  ASSERT_EQ(mem_live_count(), live);
  return 0;
}
