// SPDX-License-Identifier: MIT
// test_mujoco_imu.c: sensimd's IMU, fed by the bridge, against MuJoCo's own accelerometer and
// gyro sensors on the same site.
//
// The bound. sensimd evaluates the step (t_k, t_k+1] at its end: the gyroscope reads
// F_k+1^T w_k+1, MuJoCo's gyro at state k+1 exactly (both the site's angular velocity in its
// axes), so they agree to rounding. The accelerometer reads F^T (a_s - g) with the body
// origin's acceleration (v_k+1 - v_k) / dt and the angular acceleration (w_k+1 - w_k) / dt
// of the step, the rotation terms at t_k+1. MuJoCo's semi-implicit Euler step moves the
// velocities by dt times the acceleration of state k (qvel_k+1 = qvel_k + dt qacc_k), so
// sensimd's specific force is MuJoCo's accelerometer at state k, up to what the rotation
// changes in one step: the frame turns by |w| dt (|w| |u| dt on the reading u), the lever
// arm r turns, and the angular terms take w and alpha one step later. Over the step:
//
//   |u_sensim(k+1) - u_mujoco(k)| <= dt (|w| |u| + 3 |w| |alpha| |r| + |w|^3 |r|
//                                       + |r| |d alpha / dt|)  +  1e-9 (1 + |u|)
//
// with every magnitude the larger of states k and k+1 (d alpha / dt from alpha_k, alpha_k+1).
// One more term where the model has joint damping: MuJoCo's Euler integrates it implicitly,
// moving the velocities by dt qacc' with qacc' = (M + dt B)^-1 M qacc instead of dt qacc, so
// the site's acceleration over the step differs from the accelerometer by J_site (qacc -
// qacc'), computed here from MuJoCo's own Jacobian and its velocities before and after.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mjtest.h"

#define STEPS 2000


static double norm3(const double* v) {
  return sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
}


// What MuJoCo knows of the IMU site at state k, read between mj_step2 (which computed its
// accelerations and integrated) and mj_step1: its angular velocity and acceleration (world
// axes), its lever arm from the body origin, and the acceleration the implicit damping took
// from it (J_site (qacc - qacc'), qvel0 the velocities before the step).
typedef struct site_motion {
  double w[3], alpha[3], r[3];
  double damping;                   // m/s^2
} site_motion_t;


static void site_motion(const mjModel* m, const mjData* d, int site, const mjtNum* qvel0,
                        mjtNum* work, site_motion_t* out) {
  int b = m->site_bodyid[site];
  mjtNum v[6], a[6];
  mj_objectVelocity(m, d, mjOBJ_XBODY, b, v, 0);
  mj_objectAcceleration(m, d, mjOBJ_XBODY, b, a, 0);
  for (int i = 0; i < 3; i++) {
    out->w[i] = v[i];
    out->alpha[i] = a[i];
    out->r[i] = d->site_xpos[3 * site + i] - d->xpos[3 * b + i];
  }
  int nv = m->nv;
  mjtNum* jacp = work;
  mjtNum* dq = work + 3 * nv;
  mj_jacSite(m, d, jacp, NULL, site);
  for (int i = 0; i < nv; i++) {
    dq[i] = d->qacc[i] - (d->qvel[i] - qvel0[i]) / m->opt.timestep;
  }
  double lin[3] = {0, 0, 0};
  for (int r = 0; r < 3; r++) {
    for (int i = 0; i < nv; i++) {
      lin[r] += jacp[r * nv + i] * dq[i];
    }
  }
  out->damping = sqrt(lin[0] * lin[0] + lin[1] * lin[1] + lin[2] * lin[2]);
}


// Run `steps` physics steps of m through the bridge with the IMU spec `imu` subscribed, and
// compare. Prints the largest differences and the largest ratio to the bound.
static int compare(const mjModel* m, mjData* d, const char* side, int steps,
                   double* max_acc_err, double* max_gyro_err, double* max_ratio) {
  int site = mj_name2id(m, mjOBJ_SITE, "imu");
  int acc = mj_name2id(m, mjOBJ_SENSOR, "acc"), gyro = mj_name2id(m, mjOBJ_SENSOR, "gyro");
  ASSERT_TRUE(site >= 0 && acc >= 0 && gyro >= 0);
  int acc_adr = m->sensor_adr[acc], gyro_adr = m->sensor_adr[gyro];
  double dt = m->opt.timestep;

  mjt_rig_t rig;
  ASSERT_OK(mjt_rig_start(&rig, m, d, side, NULL));
  uint32_t imu = mjt_subscribe(&rig, "imu");
  ASSERT_TRUE(imu != 0);

  // MuJoCo's accelerometer of each state (read when mj_step2 leaves it), its gyro, the motion
  double(*mj_acc)[3] = calloc((size_t)steps + 1, sizeof(*mj_acc));
  double(*mj_gyro)[3] = calloc((size_t)steps + 1, sizeof(*mj_gyro));
  site_motion_t* mo = calloc((size_t)steps + 1, sizeof(*mo));
  mjt_sample_t* got = calloc((size_t)steps + 16, sizeof(*got));
  mjtNum* qvel0 = calloc((size_t)m->nv, sizeof(*qvel0));
  mjtNum* work = calloc(4 * (size_t)m->nv, sizeof(*work));
  ASSERT_TRUE(mj_acc && mj_gyro && mo && got && qvel0 && work);

  mjbridge_state(rig.mirror, m, d, rig.bridge);
  ASSERT_OK_ST(rig.controller, bridge_begin(rig.bridge, d->time));
  memcpy(mj_gyro[0], d->sensordata + gyro_adr, sizeof(mj_gyro[0]));
  for (int k = 0; k < steps; k++) {
    // mj_step2 computes state k's accelerations and sensors, then integrates: until mj_step1
    // the kinematics are still those of state k
    memcpy(qvel0, d->qvel, (size_t)m->nv * sizeof(*qvel0));
    mj_step2(m, d);
    memcpy(mj_acc[k], d->sensordata + acc_adr, sizeof(mj_acc[k]));
    site_motion(m, d, site, qvel0, work, &mo[k]);
    mj_step1(m, d);
    memcpy(mj_gyro[k + 1], d->sensordata + gyro_adr, sizeof(mj_gyro[k + 1]));
    mjbridge_state(rig.mirror, m, d, rig.bridge);
    ASSERT_OK_ST(rig.controller, bridge_tick(rig.bridge, d->time));
  }
  ASSERT_OK_ST(rig.controller, bridge_end(rig.bridge));
  size_t n = mjt_drain(&rig, got, (size_t)steps + 16, 5000);

  // every step's sample, in order: got[k] is the step (t_k, t_k+1]; the first has no
  // acceleration (no velocity before the first state)
  ASSERT_EQ(n, steps);
  *max_acc_err = *max_gyro_err = *max_ratio = 0.0;
  double residual = 0.0;   // what the implicit damping does not account for
  int worst = 0;
  for (int k = 1; k < steps - 1; k++) {
    const mjt_sample_t* s = &got[k];
    ASSERT_NEAR(s->time, d->time - (steps - k - 1) * dt, 1e-9);
    double de[3], dg[3];
    for (int i = 0; i < 3; i++) {
      de[i] = s->v[i] - mj_acc[k][i];
      dg[i] = s->v[3 + i] - mj_gyro[k + 1][i];
    }
    const site_motion_t *a = &mo[k], *b = &mo[k + 1];
    double w = fmax(norm3(a->w), norm3(b->w)), al = fmax(norm3(a->alpha), norm3(b->alpha));
    double r = fmax(norm3(a->r), norm3(b->r)), u = norm3(mj_acc[k]);
    double dal[3] = {(b->alpha[0] - a->alpha[0]) / dt, (b->alpha[1] - a->alpha[1]) / dt,
                     (b->alpha[2] - a->alpha[2]) / dt};
    double bound = dt * (w * u + 3 * w * al * r + w * w * w * r + r * norm3(dal)) +
                   a->damping * (1 + 1e-6) + 1e-9 * (1 + u);
    double e = norm3(de), g = norm3(dg);
    *max_acc_err = fmax(*max_acc_err, e);
    residual = fmax(residual, e - a->damping);
    *max_gyro_err = fmax(*max_gyro_err, g);
    if (e / bound > *max_ratio) {
      *max_ratio = e / bound;
      worst = k;
    }
  }
  fprintf(stderr, "# accelerometer: max |diff| %.3g m/s^2 (%.3g beyond the implicit damping's "
                  "share), max diff/bound %.3g (step %d: sensim %.6f %.6f %.6f, MuJoCo %.6f "
                  "%.6f %.6f); gyro max |diff| %.3g rad/s\n",
          *max_acc_err, residual, *max_ratio, worst, got[worst].v[0], got[worst].v[1],
          got[worst].v[2], mj_acc[worst][0], mj_acc[worst][1], mj_acc[worst][2],
          *max_gyro_err);
  free(qvel0);
  free(work);
  free(mj_acc);
  free(mj_gyro);
  free(mo);
  free(got);
  mjt_rig_stop(&rig);
  return 0;
}


// A free body tumbling in free fall: asymmetric inertia (its angular velocity changes), its
// centre of mass off the body frame's origin, the IMU off both and turned.
TEST(mujoco_imu_free_tumbling_body) {
  static const char kModel[] =
      "<mujoco><option timestep='0.001' integrator='Euler'/><worldbody>"
      "<body name='brick' pos='0 0 50'><freejoint/>"
      "<geom type='box' pos='0.15 -0.05 0.02' size='0.4 0.2 0.1' mass='5' rgba='1 1 1 1'/>"
      "<site name='imu' pos='0.3 0.15 -0.05' euler='20 -30 45'/></body></worldbody>"
      "<sensor><accelerometer name='acc' site='imu'/><gyro name='gyro' site='imu'/></sensor>"
      "<custom><text name='sensim.sensor.imu' data='imu site=imu'/></custom></mujoco>";
  mjModel* m = mjt_load(kModel, NULL);
  ASSERT_TRUE(m);
  mjData* d = mj_makeData(m);
  d->qvel[0] = 1.0;    // m/s, world
  d->qvel[3] = 2.0;    // rad/s, body axes: mostly about the intermediate axis (unstable)
  d->qvel[4] = 0.5;
  d->qvel[5] = -1.5;
  mj_forward(m, d);
  double acc_err, gyro_err, ratio;
  int rc = compare(m, d, NULL, STEPS, &acc_err, &gyro_err, &ratio);
  mj_deleteData(d);
  mj_deleteModel(m);
  ASSERT_OK(rc);
  ASSERT_TRUE(gyro_err < 1e-9);
  ASSERT_TRUE(ratio <= 1.0);
  return 0;
}


// The shipped vehicle: contacts with the height field, steering, the IMU at the chassis
// centre. The lidars are left out (side file), the rest as shipped.
TEST(mujoco_imu_vehicle) {
  char* scene = mjt_scene_text("vehicle.xml");
  ASSERT_TRUE(scene);
  char* xml = mjt_insert(scene, "</mujoco>",
                         "<sensor><accelerometer name='acc' site='imu'/>"
                         "<gyro name='gyro' site='imu'/></sensor>\n");
  free(scene);
  ASSERT_TRUE(xml);
  static const char* const kFiles[] = {"terrain.png", NULL};
  mjModel* m = mjt_load(xml, kFiles);
  free(xml);
  ASSERT_TRUE(m);
  mjData* d = mj_makeData(m);
  mj_resetDataKeyframe(m, d, 0);
  mj_forward(m, d);
  double acc_err, gyro_err, ratio;
  int rc = compare(m, d, "sensim.sensor.vlp16 none\nsensim.sensor.os1 none\n", STEPS, &acc_err,
                   &gyro_err, &ratio);
  mj_deleteData(d);
  mj_deleteModel(m);
  ASSERT_OK(rc);
  ASSERT_TRUE(gyro_err < 1e-9);
  ASSERT_TRUE(ratio <= 1.0);
  return 0;
}
