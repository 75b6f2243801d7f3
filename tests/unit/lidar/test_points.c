// SPDX-License-Identifier: MIT
// test_points.c: point layouts byte-compatible with the ROS drivers' point types
// (velodyne_pointcloud PointXYZIRT: x y z intensity ring time at 0 4 8 12 16 18, 22 bytes;
// ouster_ros Point: x y z at 0 4 8, intensity 16, t 20, reflectivity 24, ring 26, ambient 28,
// range 32, 48 bytes), field lists packed with alignment, and packing of every field.
#include <math.h>
#include <string.h>

#include "check.h"
#include "lidar/points.h"


static const sensor_field_t* find(const lidar_layout_t* l, const char* name) {
  for (uint32_t i = 0; i < l->nfield; i++) {
    if (strcmp(l->field[i].name, name) == 0) {
      return &l->field[i];
    }
  }
  return NULL;
}


#define ASSERT_FIELD(l, name, off, type)            \
  do {                                              \
    const sensor_field_t* f_ = find(l, name);       \
    ASSERT_TRUE(f_ != NULL);                        \
    ASSERT_EQ(f_->offset, off);                     \
    ASSERT_EQ(f_->datatype, type);                  \
  } while (0)


TEST(points_presets_match_the_ros_drivers) {
  lidar_layout_t l;
  err_msg_t msg = {0};
  ASSERT_OK(lidar_layout_init(&l, LIDAR_LAYOUT_VELODYNE, NULL, 0, &msg));
  ASSERT_EQ(l.point_step, 22);
  ASSERT_EQ(l.nfield, 6);
  ASSERT_FIELD(&l, "x", 0, SENSOR_FLOAT32);
  ASSERT_FIELD(&l, "y", 4, SENSOR_FLOAT32);
  ASSERT_FIELD(&l, "z", 8, SENSOR_FLOAT32);
  ASSERT_FIELD(&l, "intensity", 12, SENSOR_FLOAT32);
  ASSERT_FIELD(&l, "ring", 16, SENSOR_UINT16);
  ASSERT_FIELD(&l, "time", 18, SENSOR_FLOAT32);

  ASSERT_OK(lidar_layout_init(&l, LIDAR_LAYOUT_OUSTER, NULL, 0, &msg));
  ASSERT_EQ(l.point_step, 48);
  ASSERT_EQ(l.nfield, 9);
  ASSERT_FIELD(&l, "intensity", 16, SENSOR_FLOAT32);
  ASSERT_FIELD(&l, "t", 20, SENSOR_UINT32);
  ASSERT_FIELD(&l, "reflectivity", 24, SENSOR_UINT16);
  ASSERT_FIELD(&l, "ring", 26, SENSOR_UINT16);
  ASSERT_FIELD(&l, "ambient", 28, SENSOR_UINT16);
  ASSERT_FIELD(&l, "range", 32, SENSOR_UINT32);

  ASSERT_OK(lidar_layout_init(&l, LIDAR_LAYOUT_XYZI, NULL, 0, &msg));
  ASSERT_EQ(l.point_step, 16);
  lidar_layout_t e;
  ASSERT_OK(lidar_layout_init(&e, LIDAR_LAYOUT_FIELDS, NULL, 0, &msg));   // default = xyzi
  ASSERT_EQ(e.point_step, 16);
  ASSERT_EQ(e.nfield, 4);
  return 0;
}


TEST(points_field_list_is_packed_with_alignment) {
  lidar_layout_t l;
  err_msg_t msg = {0};
  const char* names[] = {"return_index", "x", "ring", "normal", "return_count", "object_id"};
  ASSERT_OK(lidar_layout_init(&l, LIDAR_LAYOUT_FIELDS, names, 6, &msg));
  ASSERT_FIELD(&l, "return_index", 0, SENSOR_UINT8);
  ASSERT_FIELD(&l, "x", 4, SENSOR_FLOAT32);
  ASSERT_FIELD(&l, "ring", 8, SENSOR_UINT16);
  ASSERT_FIELD(&l, "normal", 12, SENSOR_FLOAT32);
  ASSERT_EQ(find(&l, "normal")->count, 3);
  ASSERT_FIELD(&l, "return_count", 24, SENSOR_UINT8);
  ASSERT_FIELD(&l, "object_id", 28, SENSOR_UINT32);
  ASSERT_EQ(l.point_step, 32);

  const char* bad[] = {"x", "rgb"};
  ASSERT_EQ(lidar_layout_init(&l, LIDAR_LAYOUT_FIELDS, bad, 2, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "lidar.fields[1] = \"rgb\" is not a point field");
  return 0;
}


TEST(points_write_every_field) {
  lidar_layout_t l;
  err_msg_t msg = {0};
  ASSERT_OK(lidar_layout_init(&l, LIDAR_LAYOUT_OUSTER, NULL, 0, &msg));
  lidar_point_t pt = {.xyz = {1.5, -2.0, 0.25}, .intensity = 0.8 / M_PI, .distance = 12.3456,
                      .time_offset = 0.0123456789, .ring = 77};
  uint8_t buf[48];
  memset(buf, 0xAB, sizeof buf);
  lidar_points_pack(&l, &pt, buf);
  float f;
  uint32_t u = 0;
  uint16_t h;
  memcpy(&f, buf + 4, 4);
  ASSERT_DEQ(f, -2.0f);
  memcpy(&u, buf + 20, 4);
  ASSERT_EQ(u, 12345679);   // ns
  memcpy(&h, buf + 24, 2);
  ASSERT_EQ(h, 80);         // Lambertian 0.8 at normal incidence: 80 %
  memcpy(&h, buf + 26, 2);
  ASSERT_EQ(h, 77);
  memcpy(&u, buf + 32, 4);
  ASSERT_EQ(u, 12346);      // mm
  ASSERT_EQ(buf[12], 0);    // padding zeroed
  ASSERT_EQ(buf[47], 0);

  // the Ouster range counts the beam-origin offset n: r = distance + n
  pt.range_offset = 0.015806;
  lidar_points_pack(&l, &pt, buf);
  memcpy(&u, buf + 32, 4);
  ASSERT_EQ(u, 12361);      // mm

  // a NaN distance packs as range 0
  pt.distance = NAN;
  lidar_points_pack(&l, &pt, buf);
  memcpy(&u, buf + 32, 4);
  ASSERT_EQ(u, 0);
  return 0;
}


// The points of n rays against the sum of their returns ray by ray (the plain definition),
// for counts that cross the summing blocks and end in a part of a vector, with returns up to
// 255 a ray (the most a 32-bit block sum meets).
TEST(points_count_is_the_sum_of_the_returns) {
  enum { N = 9011 };
  static uint8_t nret[N];
  uint64_t s = 12345;
  for (size_t i = 0; i < N; i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    nret[i] = (uint8_t)((s >> 60) < 6 ? 0 : (s >> 60) < 15 ? 1 : (s >> 33) & 0xff);
  }
  static const size_t ns[] = {0, 1, 31, 1024, 4095, 4096, 4097, 8192, 8193, N};
  for (size_t c = 0; c < sizeof ns / sizeof ns[0]; c++) {
    size_t removed = 0, kept = 0;
    for (size_t i = 0; i < ns[c]; i++) {
      removed += nret[i];
      kept += nret[i] ? nret[i] : 1u;
    }
    lidar_points_t w = {.misses = LIDAR_MISS_REMOVE, .maxret = 255};
    ASSERT_EQ(lidar_points_count(&w, nret, ns[c]), removed);
    w.misses = LIDAR_MISS_ZERO;
    ASSERT_EQ(lidar_points_count(&w, nret, ns[c]), kept);
  }
  return 0;
}


TEST(points_xyzi_packs_four_floats) {
  // the default layout (x y z intensity, float32 at 0 4 8 12), by preset or by names
  const char* names[4] = {"x", "y", "z", "intensity"};
  lidar_layout_t a, b, c;
  err_msg_t msg = {0};
  ASSERT_OK(lidar_layout_init(&a, LIDAR_LAYOUT_XYZI, NULL, 0, &msg));
  ASSERT_OK(lidar_layout_init(&b, LIDAR_LAYOUT_FIELDS, names, 4, &msg));
  const char* other[4] = {"y", "x", "z", "intensity"};
  ASSERT_OK(lidar_layout_init(&c, LIDAR_LAYOUT_FIELDS, other, 4, &msg));
  lidar_point_t pt = {.xyz = {1.25, -2.5, 3.75}, .intensity = 0.125};
  float fa[4], fb[4], fc[4];
  lidar_points_pack(&a, &pt, (uint8_t*)fa);
  lidar_points_pack(&b, &pt, (uint8_t*)fb);
  lidar_points_pack(&c, &pt, (uint8_t*)fc);
  const float expect[4] = {1.25f, -2.5f, 3.75f, 0.125f};
  ASSERT_MEM_EQ(fa, expect, sizeof expect);
  ASSERT_MEM_EQ(fb, expect, sizeof expect);
  const float swapped[4] = {-2.5f, 1.25f, 3.75f, 0.125f};
  ASSERT_MEM_EQ(fc, swapped, sizeof swapped);
  return 0;
}


TEST(points_unknown_field_name_is_quoted_as_utf8) {
  // a client's bytes that are not UTF-8 are quoted escaped (replies carry UTF-8 text only),
  // and a long name is cut
  lidar_layout_t l;
  err_msg_t msg = {0};
  const char* names[1] = {"\xff\xfe\x80Q"};
  ASSERT_EQ(lidar_layout_init(&l, LIDAR_LAYOUT_FIELDS, names, 1, &msg), ERR_INVAL);
  ASSERT_CONTAINS(msg.text, "lidar.fields[0] = \"\\xff\\xfe\\x80Q\" is not a point field");
  char longname[300];
  memset(longname, 'a', sizeof longname - 1);
  longname[sizeof longname - 1] = '\0';
  names[0] = longname;
  ASSERT_EQ(lidar_layout_init(&l, LIDAR_LAYOUT_FIELDS, names, 1, &msg), ERR_INVAL);
  ASSERT_TRUE(strstr(msg.text, "is not a point field") != NULL);
  return 0;
}
