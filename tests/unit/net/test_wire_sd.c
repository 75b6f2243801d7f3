// SPDX-License-Identifier: MIT
// test_wire_sd.c: a SensorData written by hand (wire_sd.c) is protobuf-c's encoding to the
// byte, and measures what it writes: every payload without a cloud (IMU sample, scalar, cone
// reading, none), each optional field present or absent, vectors absent or partly set, 0 to 9
// packed values, ids and frames of every varint length; a cloud still goes through protobuf-c.
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "net/wire_sensor.h"

// A message's protobuf-c bytes against wire_sd's: the same size, the same bytes, the size
// written the size measured. Returns 0 when they agree.
static int agree(const Sensim__V1__SensorData* sd, const char* what, unsigned round) {
  size_t n = protobuf_c_message_get_packed_size(&sd->base);
  size_t m = wire_sd_packed_size(sd);
  uint8_t* a = calloc(1, n + 1);
  uint8_t* b = calloc(1, m + 64);
  size_t na = protobuf_c_message_pack(&sd->base, a);
  size_t nb = wire_sd_pack(sd, b);
  int bad = n != m || na != nb || nb != m || memcmp(a, b, n) != 0;
  if (bad) {
    fprintf(stderr, "%s (round %u): protobuf-c %zu bytes, wire_sd measures %zu, writes %zu\n",
            what, round, n, m, nb);
    for (size_t i = 0; i < n || i < nb; i++) {
      if (i >= n || i >= nb || a[i] != b[i]) {
        fprintf(stderr, "  first difference at byte %zu\n", i);
        break;
      }
    }
  }
  free(a);
  free(b);
  return bad;
}


static uint64_t g_state = 0x9E3779B97F4A7C15ull;

static uint64_t next(void) {
  g_state ^= g_state << 13;
  g_state ^= g_state >> 7;
  g_state ^= g_state << 17;
  return g_state;
}

static int coin(void) { return (int)(next() & 1u); }

// A value of 1 to 10 varint bytes (bits up to 64).
static uint64_t varint_value(void) {
  unsigned bits = (unsigned)(next() % 65u);
  return bits == 0 ? 0 : next() >> (64 - bits);
}

// A double of any bits: ordinary values, zeros of both signs, infinities, NaNs.
static double any_double(void) {
  static const double special[] = {0.0, -0.0, 1.0, -9.81, 1e300, 5e-324};
  if (next() % 4u == 0) {
    return special[next() % (sizeof(special) / sizeof(special[0]))];
  }
  uint64_t u = next();
  double d;
  memcpy(&d, &u, sizeof(d));
  return d;
}

// An optional double: set or not, any value.
static void any_optional(protobuf_c_boolean* has, double* v) {
  *has = coin();
  *v = any_double();
}

static Sensim__V1__Vec3* any_vec3(Sensim__V1__Vec3* v) {
  if (next() % 4u == 0) {
    return NULL;
  }
  sensim__v1__vec3__init(v);
  v->has_x = coin() || coin();
  v->has_y = coin() || coin();
  v->has_z = coin() || coin();
  v->x = any_double();
  v->y = any_double();
  v->z = any_double();
  return v;
}

static void any_head(Sensim__V1__SensorData* sd) {
  sensim__v1__sensor_data__init(sd);
  sd->has_sensor_id = coin() || coin();
  sd->sensor_id = (uint32_t)varint_value();
  sd->has_time = coin() || coin();
  sd->time = any_double();
  sd->has_frame = coin() || coin();
  sd->frame = varint_value();
  sd->has_sequence = coin() && coin();
  sd->sequence = varint_value();
  sd->has_start_time = coin();
  sd->start_time = any_double();
  sd->has_end_of_stream = coin() && coin();
  sd->end_of_stream = coin();
}


TEST(wire_sd_small_records_are_protobuf_c_bytes) {
  Sensim__V1__SensorData sd;
  Sensim__V1__ImuSample imu;
  Sensim__V1__ScalarSample scalar;
  Sensim__V1__ConeReading cone;
  Sensim__V1__Vec3 v[4];
  double values[9];
  unsigned failed = 0;
  for (unsigned round = 0; round < 20000; round++) {
    const char* what;
    any_head(&sd);
    switch (round % 4) {
      case 0:
        sensim__v1__imu_sample__init(&imu);
        imu.acceleration = any_vec3(&v[0]);
        imu.angular_velocity = any_vec3(&v[1]);
        imu.magnetic_field = any_vec3(&v[2]);
        imu.n_values = (size_t)(next() % 10u);
        for (size_t i = 0; i < imu.n_values; i++) {
          values[i] = any_double();
        }
        imu.values = values;
        sd.payload_case = SENSIM__V1__SENSOR_DATA__PAYLOAD_IMU;
        sd.imu = &imu;
        what = "imu";
        break;
      case 1:
        sensim__v1__scalar_sample__init(&scalar);
        scalar.has_position = coin() || coin();
        scalar.position = any_double();
        any_optional(&scalar.has_speed, &scalar.speed);
        sd.payload_case = SENSIM__V1__SENSOR_DATA__PAYLOAD_SCALAR;
        sd.scalar = &scalar;
        what = "scalar";
        break;
      case 2:
        sensim__v1__cone_reading__init(&cone);
        cone.has_detected = coin() || coin();
        cone.detected = coin();
        any_optional(&cone.has_range, &cone.range);
        any_optional(&cone.has_azimuth, &cone.azimuth);
        any_optional(&cone.has_elevation, &cone.elevation);
        any_optional(&cone.has_speed, &cone.speed);
        cone.point = any_vec3(&v[3]);
        cone.has_object_id = coin();
        cone.object_id = (uint32_t)varint_value();
        sd.payload_case = SENSIM__V1__SENSOR_DATA__PAYLOAD_CONE;
        sd.cone = &cone;
        what = "cone";
        break;
      default:
        what = "no payload";
        break;
    }
    failed += (unsigned)agree(&sd, what, round);
    if (failed > 5) {
      break;
    }
  }
  ASSERT_EQ(failed, 0);
  return 0;
}


TEST(wire_sd_a_cloud_goes_through_protobuf_c) {
  Sensim__V1__SensorData sd;
  any_head(&sd);
  Sensim__V1__PointCloud pc = SENSIM__V1__POINT_CLOUD__INIT;
  uint8_t data[48];
  for (size_t i = 0; i < sizeof(data); i++) {
    data[i] = (uint8_t)(7 * i + 1);
  }
  pc.has_data = pc.has_count = pc.has_point_step = 1;
  pc.count = 3;
  pc.point_step = 16;
  pc.data.data = data;
  pc.data.len = sizeof(data);
  sd.payload_case = SENSIM__V1__SENSOR_DATA__PAYLOAD_POINT_CLOUD;
  sd.point_cloud = &pc;
  ASSERT_EQ(agree(&sd, "cloud", 0), 0);
  return 0;
}


// A StepDone's own fields by hand against protobuf-c, with and without each field, steps of
// every varint length; with its outputs attached it goes through protobuf-c.
TEST(wire_step_done_head_is_protobuf_c_bytes) {
  unsigned failed = 0;
  for (unsigned round = 0; round < 5000; round++) {
    Sensim__V1__StepDone m = SENSIM__V1__STEP_DONE__INIT;
    m.has_time = coin() || coin();
    m.time = any_double();
    m.has_step = coin() || coin();
    m.step = varint_value();
    m.has_outputs_in_parts = coin();
    m.outputs_in_parts = (uint32_t)varint_value();
    Sensim__V1__SensorData sd;
    Sensim__V1__SensorData* ptr = &sd;
    if (round % 8 == 7) {
      any_head(&sd);
      m.n_outputs = 1;
      m.outputs = &ptr;
    }
    size_t n = protobuf_c_message_get_packed_size(&m.base);
    uint8_t a[128], b[128];
    memset(a, 0, sizeof(a));
    memset(b, 0xee, sizeof(b));
    size_t na = protobuf_c_message_pack(&m.base, a);
    size_t nb = wire_step_done_pack(&m, b);
    if (wire_step_done_packed_size(&m) != n || na != nb || nb != n || memcmp(a, b, n) != 0) {
      fprintf(stderr, "StepDone (round %u): protobuf-c %zu bytes, by hand %zu measured, %zu "
              "written\n", round, n, wire_step_done_packed_size(&m), nb);
      failed++;
    }
  }
  ASSERT_EQ(failed, 0);
  return 0;
}
