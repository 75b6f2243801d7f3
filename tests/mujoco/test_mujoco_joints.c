// SPDX-License-Identifier: MIT
// test_mujoco_joints.c: the joint sensors of the shipped vehicle against MuJoCo: each wheel
// encoder (absolute, no binning) reads its hinge's qpos, the odometer reads the rear left
// wheel's angle times the radius the bridge took from the wheel's cylinder, binned to its
// 1024 pulses per revolution (docs/models/joint_sensors.md: res = 2 pi R / PPR, floor).
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mjtest.h"

#define STEPS 1500


TEST(mujoco_encoders_and_odometer_follow_the_wheels) {
  char* xml = mjt_scene_text("vehicle.xml");
  ASSERT_TRUE(xml);
  static const char* const kFiles[] = {"terrain.png", NULL};
  mjModel* m = mjt_load(xml, kFiles);
  free(xml);
  ASSERT_TRUE(m);
  mjData* d = mj_makeData(m);
  mj_resetDataKeyframe(m, d, 0);
  mj_forward(m, d);

  static const char* const kWheels[4] = {"wheel_fl", "wheel_fr", "wheel_rl", "wheel_rr"};
  static const char* const kEncoders[4] = {"encoder_fl", "encoder_fr", "encoder_rl",
                                           "encoder_rr"};
  int qadr[4];
  for (int i = 0; i < 4; i++) {
    int j = mj_name2id(m, mjOBJ_JOINT, kWheels[i]);
    ASSERT_TRUE(j >= 0);
    qadr[i] = m->jnt_qposadr[j];
  }
  double radius = m->geom_size[3 * mj_name2id(m, mjOBJ_GEOM, "wheel_rl")];
  ASSERT_NEAR(radius, 0.3, 1e-12);

  mjt_rig_t rig;
  ASSERT_OK(mjt_rig_start(&rig, m, d, "sensim.sensor.vlp16 none\nsensim.sensor.os1 none\n",
                          NULL));
  uint32_t enc[4];
  for (int i = 0; i < 4; i++) {
    enc[i] = mjt_subscribe(&rig, kEncoders[i]);
    ASSERT_TRUE(enc[i] != 0);
  }
  uint32_t odo = mjt_subscribe(&rig, "odometer");
  ASSERT_TRUE(odo != 0);

  // the wheels' angles at every step
  double(*q)[4] = calloc(STEPS + 1, sizeof(*q));
  mjt_sample_t* got = calloc(5 * (STEPS + 4), sizeof(*got));
  ASSERT_TRUE(q && got);
  mjbridge_state(rig.mirror, m, d, rig.bridge);
  ASSERT_OK_ST(rig.controller, bridge_begin(rig.bridge, d->time));
  for (int k = 1; k <= STEPS; k++) {
    mjt_physics_step(m, d, NULL);
    for (int i = 0; i < 4; i++) {
      q[k][i] = d->qpos[qadr[i]];
    }
    mjbridge_state(rig.mirror, m, d, rig.bridge);
    ASSERT_OK_ST(rig.controller, bridge_tick(rig.bridge, d->time));
  }
  ASSERT_OK_ST(rig.controller, bridge_end(rig.bridge));
  size_t n = mjt_drain(&rig, got, 5 * (STEPS + 4), 5000);
  ASSERT_EQ(n, 5 * STEPS);

  // every record: step k's encoder reads q_k exactly, the odometer R q_k binned
  double res = 2 * M_PI * radius / 1024, enc_err = 0, odo_err = 0;
  size_t counted[5] = {0};
  for (size_t i = 0; i < n; i++) {
    const mjt_sample_t* s = &got[i];
    int k = (int)lround(s->time / m->opt.timestep);
    ASSERT_TRUE(k >= 1 && k <= STEPS);
    if (s->sensor_id == odo) {
      double dist = radius * q[k][2];
      ASSERT_TRUE(s->v[0] <= dist + 1e-12 && s->v[0] > dist - res);
      double edge = dist / res - floor(dist / res);
      if (edge > 1e-9 && edge < 1 - 1e-9) {   // off a bin edge, the bin is known exactly
        ASSERT_NEAR(s->v[0], res * floor(dist / res), 1e-12);
      }
      odo_err = fmax(odo_err, fabs(s->v[0] - dist));
      counted[4]++;
      continue;
    }
    int w = 0;
    while (w < 4 && enc[w] != s->sensor_id) {
      w++;
    }
    ASSERT_TRUE(w < 4);
    ASSERT_NEAR(s->v[0], q[k][w], 1e-12);
    enc_err = fmax(enc_err, fabs(s->v[0] - q[k][w]));
    counted[w]++;
  }
  for (int i = 0; i < 5; i++) {
    ASSERT_EQ(counted[i], STEPS);
  }

  // the wheels did turn: the vehicle drove about 3 m/s for 1.5 s
  ASSERT_TRUE(radius * q[STEPS][2] > 2.5);
  fprintf(stderr, "# encoders: max |reading - qpos| %.3g rad; odometer: max |reading - R q| "
                  "%.3g m (one pulse %.4g m); the rear left wheel rolled %.3f m\n",
          enc_err, odo_err, res, radius * q[STEPS][2]);
  free(q);
  free(got);
  mjt_rig_stop(&rig);
  mj_deleteData(d);
  mj_deleteModel(m);
  return 0;
}
