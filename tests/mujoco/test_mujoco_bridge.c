// SPDX-License-Identifier: MIT
// test_mujoco_bridge.c: the bridge's own behaviour against a real sensimd: the vehicle
// mirrored entity by entity as the daemon counts them; every mistake in a spec, a name or a
// value refused with a message naming it (the daemon's own message for values it refuses);
// ticks in order; a sensor step every k ticks; pacing never ahead of the wall clock.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mjtest.h"


static mjModel* vehicle(void) {
  char* xml = mjt_scene_text("vehicle.xml");
  static const char* const kFiles[] = {"terrain.png", NULL};
  mjModel* m = xml ? mjt_load(xml, kFiles) : NULL;
  free(xml);
  return m;
}


static const sensim_environment_info_t* env_info(sensim_client_t* cli, const char* name) {
  const sensim_info_t* info = NULL;
  if (sensim_get_info(cli, &info) != SENSIM_OK) {
    return NULL;
  }
  for (uint32_t i = 0; i < info->nenvironments; i++) {
    if (strcmp(info->environments[i].name, name) == 0) {
      return &info->environments[i];
    }
  }
  return NULL;
}


TEST(mujoco_bridge_mirrors_the_vehicle) {
  mjModel* m = vehicle();
  ASSERT_TRUE(m);
  mjData* d = mj_makeData(m);
  mj_resetDataKeyframe(m, d, 0);
  mj_forward(m, d);
  mjt_rig_t rig;
  ASSERT_OK(mjt_rig_start(&rig, m, d, NULL, NULL));
  mjbridge_counts_t n;
  mjbridge_counts(rig.mirror, &n);

  // every body but the world moves (none is welded to it); hinge and slide joints; every
  // geom visible; the ramp's mesh and the terrain's height field made once
  ASSERT_EQ(n.bodies, m->nbody - 1);
  ASSERT_EQ(n.joints, m->njnt - 1);   // the free joint has no scalar position
  ASSERT_EQ(n.objects, m->ngeom);
  ASSERT_EQ(n.skipped_geoms, 0);
  ASSERT_EQ(n.meshes, 1);
  ASSERT_EQ(n.height_fields, 1);
  ASSERT_EQ(n.primitives, m->ngeom - 2);
  ASSERT_EQ(n.materials, 8);
  ASSERT_EQ(n.sensors, 8);
  const sensim_environment_info_t* e = env_info(rig.controller, "mujoco");
  ASSERT_TRUE(e);
  ASSERT_EQ(e->bodies, n.bodies);
  ASSERT_EQ(e->joints, n.joints);
  ASSERT_EQ(e->objects, n.objects);
  ASSERT_EQ(e->geometries, n.primitives + n.meshes + n.height_fields);
  ASSERT_EQ(e->sensors, n.sensors);
  ASSERT_EQ(mjbridge_sensor_id(rig.mirror, "vlp16"), 1);
  ASSERT_EQ(mjbridge_sensor_id(rig.mirror, "odometer"), 8);
  ASSERT_EQ(mjbridge_sensor_id(rig.mirror, "nothing"), 0);

  // removing the sensors at the end ends their streams
  ASSERT_OK_ST(rig.controller, bridge_remove_sensors(rig.bridge));
  ASSERT_EQ(env_info(rig.controller, "mujoco")->sensors, 0);
  mjt_rig_stop(&rig);
  mj_deleteData(d);
  mj_deleteModel(m);
  return 0;
}


// Mirror the vehicle with `side`; the reason it was refused ("" if it was not).
static const char* refused(const mjModel* m, const mjData* d, const td_daemon_t* daemon,
                           const char* side) {
  static char err[1024];
  err[0] = '\0';
  sensim_client_t* cli = td_connect(daemon, "refusals");
  bridge_t* b = cli ? bridge_create(cli, NULL) : NULL;
  mjbridge_t* mb = b ? mjbridge_create(b, m, d, side, err, sizeof(err)) : NULL;
  mjbridge_destroy(mb);
  bridge_destroy(b);
  sensim_client_close(cli);
  return err;
}


TEST(mujoco_bridge_refusals_name_what_is_wrong) {
  mjModel* m = vehicle();
  ASSERT_TRUE(m);
  mjData* d = mj_makeData(m);
  mj_forward(m, d);
  td_daemon_t daemon;
  ASSERT_OK(td_start(&daemon, NULL));
  ASSERT_CONTAINS(refused(m, d, &daemon, "sensim.sensor.x lidar site=nowhere pattern=vlp16"),
                  "sensim.sensor.x: sensor 'x': site 'nowhere' not found");
  ASSERT_CONTAINS(refused(m, d, &daemon, "sensim.sensor.x odometer joint=steer_fl"),
                  "wheel_radius= is needed: joint 'steer_fl' turns no round geometry");
  ASSERT_CONTAINS(refused(m, d, &daemon, "sensim.sensor.x encoder joint=car"),
                  "joint 'car' not found (a hinge or slide joint)");
  ASSERT_CONTAINS(refused(m, d, &daemon, "sensim.sensor.x lidar site=vlp16 pattern=vlp16 "
                                         "exclude=nobody"),
                  "exclude: body 'nobody' not found");
  ASSERT_CONTAINS(refused(m, d, &daemon, "sensim.sensor.x lidar site=vlp16 pattern=vlp16 "
                                         "frequency=3"),
                  "lidar.vlp16.frequency = 3");   // the daemon's own words
  ASSERT_CONTAINS(refused(m, d, &daemon, "sensim.sensor.x lidar site=vlp16 pattern=vlp16 "
                                         "frequency=3"),
                  "(INVALID_ARGUMENT)");
  ASSERT_CONTAINS(refused(m, d, &daemon, "sensim.sensor.x imu site=imu accel_noise=-1"),
                  "accelerometer");
  ASSERT_CONTAINS(refused(m, d, &daemon, "sensim.thing whatever"),
                  "sensim.thing: unknown kind (sensim.sensor.NAME");
  ASSERT_CONTAINS(refused(m, d, &daemon, "sensim.material.plastic lambertian"),
                  "the model has no material 'plastic'");
  ASSERT_CONTAINS(refused(m, d, &daemon, "sensim.material.ground lambertian reflectance=2"),
                  "material 'ground'");
  ASSERT_CONTAINS(refused(m, d, &daemon, "sensim.geom.wall geom label=x"),
                  "sensim.geom.wall: label = 'x' is not an integer");
  ASSERT_CONTAINS(refused(m, d, &daemon, "sensim.geom.ghost geom skip"),
                  "the model has no geom 'ghost'");
  ASSERT_CONTAINS(refused(m, d, &daemon, "sensim.geom.wall geom material=wood2"),
                  "material 'wood2' has no sensim.material entry");
  ASSERT_CONTAINS(refused(m, d, &daemon, "sensor.x imu site=imu"),
                  "side file: 'sensor.x' does not start with sensim.");
  ASSERT_CONTAINS(refused(m, d, &daemon, "sensim.medium fog visibility=-5"), "medium");
  ASSERT_CONTAINS(refused(m, d, &daemon, "sensim.sensor.imu imu site=imu id=4294967295\n"
                                         "sensim.sensor.vlp16 none\nsensim.sensor.os1 none\n"
                                         "sensim.sensor.x imu site=imu\n"),
                  "sensim.sensor.x: sensor 'x': no free id after 4294967295 (give it id=)");

  // comments, blank lines, replaced and removed sensors are fine
  ASSERT_STREQ(refused(m, d, &daemon, "# a side file\n\nsensim.sensor.imu imu site=vlp16  # "
                                      "moved\nsensim.sensor.os1 none\n"), "");
  td_stop(&daemon);
  mj_deleteData(d);
  mj_deleteModel(m);
  return 0;
}


TEST(mujoco_bridge_ticks_ratio_and_pacing) {
  mjModel* m = vehicle();
  ASSERT_TRUE(m);
  mjData* d = mj_makeData(m);
  mj_resetDataKeyframe(m, d, 0);
  mj_forward(m, d);

  // a sensor step every 5 ticks, paced at real time
  bridge_options_t opts;
  bridge_options_init(&opts);
  opts.sensor_ratio = 5;
  opts.realtime = 1.0;
  mjt_rig_t rig;
  ASSERT_OK(mjt_rig_start(&rig, m, d, "sensim.sensor.vlp16 none\nsensim.sensor.os1 none\n",
                          &opts));
  uint32_t imu = mjt_subscribe(&rig, "imu");
  ASSERT_TRUE(imu);
  ASSERT_STATUS(rig.controller, bridge_tick(rig.bridge, 1.0), SENSIM_FAILED_PRECONDITION,
                NULL);
  ASSERT_CONTAINS(bridge_last_error(rig.bridge), "outside begin/end");
  mjbridge_state(rig.mirror, m, d, rig.bridge);
  ASSERT_OK_ST(rig.controller, bridge_begin(rig.bridge, d->time));
  for (int k = 1; k <= 300; k++) {
    mjt_physics_step(m, d, NULL);
    mjbridge_state(rig.mirror, m, d, rig.bridge);
    ASSERT_OK_ST(rig.controller, bridge_tick(rig.bridge, d->time));
  }
  ASSERT_STATUS(rig.controller, bridge_tick(rig.bridge, d->time), SENSIM_INVALID_ARGUMENT, NULL);
  ASSERT_CONTAINS(bridge_last_error(rig.bridge), "is not after");
  ASSERT_OK_ST(rig.controller, bridge_end(rig.bridge));
  bridge_stats_t s;
  bridge_stats(rig.bridge, &s);
  ASSERT_EQ(s.ticks, 300);
  ASSERT_EQ(s.steps, 60);
  ASSERT_NEAR(s.sim_seconds, 0.3, 1e-9);
  ASSERT_TRUE(s.wall_seconds >= 0.3 - 1e-3);   // never ahead of the wall clock
  ASSERT_TRUE(s.sleep_seconds > 0.0);

  // the IMU sampled at the end of every fifth physics step
  mjt_sample_t got[80];
  size_t n = mjt_drain(&rig, got, 80, 5000);
  ASSERT_EQ(n, 60);
  for (size_t i = 0; i < n; i++) {
    ASSERT_NEAR(got[i].time, 0.005 * (double)(i + 1), 1e-9);
  }
  mjt_rig_stop(&rig);
  mj_deleteData(d);
  mj_deleteModel(m);
  return 0;
}


// A mocap body and a body fixed under it (no joint): MuJoCo gives both body_weldid 0, yet
// both follow mocap_pos, so both are mirrored as bodies, their geoms on them.
static const char kMocapModel[] =
    "<mujoco><worldbody>"
    "<geom name='floor' type='plane' size='5 5 0.1'/>"
    "<body name='hand' mocap='true' pos='0 0 1'><geom name='palm' type='box' size='.1 .1 .1'/>"
    "<body name='finger' pos='0.5 0 0'><geom name='tip' type='sphere' size='.05'/>"
    "<site name='nail' pos='0 0 0.05'/></body></body>"
    "</worldbody></mujoco>";


TEST(mujoco_bridge_bodies_under_a_mocap_body_move) {
  mjModel* m = mjt_load(kMocapModel, NULL);
  ASSERT_TRUE(m);
  mjData* d = mj_makeData(m);
  mj_forward(m, d);
  mjt_rig_t rig;
  ASSERT_OK(mjt_rig_start(&rig, m, d, "sensim.sensor.imu imu site=nail\n", NULL));
  mjbridge_counts_t n;
  mjbridge_counts(rig.mirror, &n);
  ASSERT_EQ(n.bodies, 2);
  ASSERT_EQ(n.objects, 3);
  const sensim_environment_info_t* e = env_info(rig.controller, "mujoco");
  ASSERT_TRUE(e);
  ASSERT_EQ(e->bodies, 2);

  // the site is mounted on the finger, not on the world
  uint32_t body_id = 0;
  sensim_pose_t mount;
  ASSERT_TRUE(mjbridge_frame(rig.mirror, "nail", &body_id, &mount));
  ASSERT_EQ(body_id, (uint32_t)mj_name2id(m, mjOBJ_BODY, "finger"));
  ASSERT_NEAR(mount.position[2], 0.05, 1e-12);

  // move the hand: the finger's slot follows it
  d->mocap_pos[0] = 2.0;
  mj_forward(m, d);
  mjbridge_state(rig.mirror, m, d, rig.bridge);
  ASSERT_OK_ST(rig.controller, bridge_begin(rig.bridge, d->time));
  const double* pose = bridge_poses(rig.bridge);
  int finger = mj_name2id(m, mjOBJ_BODY, "finger");
  ASSERT_NEAR(pose[7 * 1 + 0], d->xpos[3 * finger + 0], 0.0);
  ASSERT_NEAR(pose[7 * 1 + 0], 2.5, 1e-12);
  ASSERT_OK_ST(rig.controller, bridge_end(rig.bridge));
  mjt_rig_stop(&rig);
  mj_deleteData(d);
  mj_deleteModel(m);
  return 0;
}


// Names MuJoCo allows that the spec entries must still find or refuse: an empty one (which
// mj_name2id would take for the first unnamed geom) and one longer than a spec name.
TEST(mujoco_bridge_geom_entries_with_empty_and_long_names) {
  char name[200];
  memset(name, 'g', sizeof(name) - 1);
  name[sizeof(name) - 1] = '\0';
  char xml[1024];
  snprintf(xml, sizeof(xml),
           "<mujoco><worldbody><geom type='sphere' size='1'/>"
           "<geom name='%s' type='box' pos='3 0 0' size='.5 .5 .5'/>"
           "</worldbody></mujoco>", name);
  mjModel* m = mjt_load(xml, NULL);
  ASSERT_TRUE(m);
  mjData* d = mj_makeData(m);
  mj_forward(m, d);
  td_daemon_t daemon;
  ASSERT_OK(td_start(&daemon, NULL));
  ASSERT_CONTAINS(refused(m, d, &daemon, "sensim.geom. geom skip"),
                  "sensim.geom.: the model has no geom ''");
  td_stop(&daemon);

  char side[512];
  snprintf(side, sizeof(side), "sensim.geom.%s geom skip\n", name);
  mjt_rig_t rig;
  ASSERT_OK(mjt_rig_start(&rig, m, d, side, NULL));
  mjbridge_counts_t n;
  mjbridge_counts(rig.mirror, &n);
  ASSERT_EQ(n.skipped_geoms, 1);
  ASSERT_EQ(n.objects, 1);
  mjt_rig_stop(&rig);
  mj_deleteData(d);
  mj_deleteModel(m);
  return 0;
}
