// SPDX-License-Identifier: MIT
// test_client_step.c: state updates and steps through the C client against the real sensimd:
// the state's arrays are read from the caller's memory (an array of sensim_pose_t included),
// results carry every record, steps pipeline in order, the lock-step call reports a refused
// state first, and every refusal names its argument or field.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

#define NBODY 40


// A sphere of radius 0.5 on each of n bodies (body i + 1, object i + 1, label i + 1).
static sensim_status_t balls(sensim_client_t* cli, uint32_t n) {
  sensim_primitive_t p;
  sensim_primitive_init(&p);
  p.id = 1;
  p.shape = SENSIM_SHAPE_SPHERE;
  p.radius = 0.5;
  sensim_status_t st = sensim_create_primitive(cli, &p);
  for (uint32_t i = 0; i < n && st == SENSIM_OK; i++) {
    sensim_body_t b;
    sensim_body_init(&b);
    b.id = i + 1;
    st = sensim_create_body(cli, &b);
    if (st == SENSIM_OK) {
      sensim_object_t o;
      sensim_object_init(&o);
      o.id = i + 1;
      o.geometry_id = 1;
      o.body_id = i + 1;
      o.label = i + 1;
      st = sensim_create_object(cli, &o);
    }
  }
  return st;
}


TEST(step_state_arrays_are_read_from_the_callers_memory) {
  td_daemon_t d;
  ASSERT_OK(td_start(&d, NULL));
  sensim_client_t* cli = td_connect(&d, "state");
  ASSERT_TRUE(cli != NULL);
  ASSERT_OK_ST(cli, balls(cli, NBODY));

  // body i at (10 + i, 2 i, 0): an array of sensim_pose_t is the 7 doubles per body
  uint32_t ids[NBODY];
  sensim_pose_t poses[NBODY];
  double vel[NBODY][6];
  for (uint32_t i = 0; i < NBODY; i++) {
    ids[i] = i + 1;
    poses[i] = sensim_pose_identity();
    poses[i].position[0] = 10.0 + i;
    poses[i].position[1] = 2.0 * i;
    memset(vel[i], 0, sizeof(vel[i]));
  }
  sensim_state_t state;
  sensim_state_init(&state);
  state.time = 0.5;
  state.nbodies = NBODY;
  state.body_ids = ids;
  state.body_poses = poses[0].position;
  state.body_velocities = &vel[0][0];
  ASSERT_OK_ST(cli, sensim_update_state(cli, &state));

  // a ray along +x at y = 2 i meets ball i at 10 + i - 0.5
  double org[NBODY][3], dir[NBODY][3];
  for (uint32_t i = 0; i < NBODY; i++) {
    org[i][0] = 0;
    org[i][1] = 2.0 * i;
    org[i][2] = 0;
    dir[i][0] = 1;
    dir[i][1] = dir[i][2] = 0;
  }
  sensim_hit_t hits[NBODY];
  sensim_raycast_t r;
  sensim_raycast_init(&r);
  r.nrays = NBODY;
  r.origins = &org[0][0];
  r.directions = &dir[0][0];
  ASSERT_OK_ST(cli, sensim_raycast(cli, &r, hits, NULL));
  for (uint32_t i = 0; i < NBODY; i++) {
    ASSERT_NEAR(hits[i].distance, 9.5 + i, 1e-6);
    ASSERT_EQ(hits[i].label, i + 1);
  }
  sensim_client_close(cli);
  ASSERT_EQ(td_stop(&d), 0);
  return 0;
}


TEST(step_refusals_name_the_argument_or_field) {
  td_daemon_t d;
  ASSERT_OK(td_start(&d, NULL));
  sensim_client_t* cli = td_connect(&d, "step_refusals");
  ASSERT_TRUE(cli != NULL);
  ASSERT_OK_ST(cli, balls(cli, 1));
  uint32_t ids[2] = {1, 7};
  double pose[14] = {0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1};
  sensim_state_t state;
  sensim_state_init(&state);
  state.time = 1.0;
  state.nbodies = 1;
  ASSERT_STATUS(cli, sensim_update_state(cli, NULL), SENSIM_INVALID_ARGUMENT, "state: NULL");
  ASSERT_STATUS(cli, sensim_update_state(cli, &state), SENSIM_INVALID_ARGUMENT,
                "state.body_ids");
  state.body_ids = ids;
  ASSERT_STATUS(cli, sensim_update_state(cli, &state), SENSIM_INVALID_ARGUMENT,
                "state.body_poses");
  state.body_poses = pose;
  state.njoints = 1;
  ASSERT_STATUS(cli, sensim_update_state(cli, &state), SENSIM_INVALID_ARGUMENT,
                "state.joint_ids");
  state.joint_ids = ids;
  ASSERT_STATUS(cli, sensim_update_state(cli, &state), SENSIM_INVALID_ARGUMENT,
                "state.joint_positions");
  state.njoints = 0;
  state.struct_size = 3;
  ASSERT_STATUS(cli, sensim_update_state(cli, &state), SENSIM_INVALID_ARGUMENT,
                "state.struct_size");
  sensim_state_init(&state);
  state.time = 1.0;
  state.nbodies = 2;
  state.body_ids = ids;
  state.body_poses = pose;
  ASSERT_STATUS(cli, sensim_update_state(cli, &state), SENSIM_NOT_FOUND, "7");
  state.nbodies = 1;
  pose[3] = NAN;
  ASSERT_STATUS(cli, sensim_update_state(cli, &state), SENSIM_INVALID_ARGUMENT, "body_poses");
  pose[3] = 0;
  ASSERT_OK_ST(cli, sensim_update_state(cli, &state));
  ASSERT_STATUS(cli, sensim_update_state(cli, &state), SENSIM_FAILED_PRECONDITION, "time");

  // steps
  sensim_step_t step;
  sensim_step_init(&step);
  const sensim_step_result_t* r;
  ASSERT_STATUS(cli, sensim_step(cli, NULL, &r), SENSIM_INVALID_ARGUMENT, "step: NULL");
  step.time = 1.0;
  step.outputs = (sensim_step_outputs_t)3;
  ASSERT_STATUS(cli, sensim_step(cli, &step, &r), SENSIM_INVALID_ARGUMENT, "step.outputs");
  step.outputs = SENSIM_STEP_OUTPUTS_ALL;
  step.noutput_sensors = 1;
  ASSERT_STATUS(cli, sensim_step(cli, &step, &r), SENSIM_INVALID_ARGUMENT,
                "step.output_sensors");
  step.outputs = SENSIM_STEP_OUTPUTS_LISTED;
  ASSERT_STATUS(cli, sensim_step(cli, &step, &r), SENSIM_INVALID_ARGUMENT,
                "step.output_sensors");
  // more ids than the daemon has sensors: refused before they are read (the array holds one;
  // the client read 2^32 - 1 of them to size the request)
  static const uint32_t one_sensor = 1;
  step.output_sensors = &one_sensor;
  step.noutput_sensors = UINT32_MAX;
  ASSERT_STATUS(cli, sensim_step(cli, &step, &r), SENSIM_INVALID_ARGUMENT,
                "step.noutput_sensors = 4294967295: more than the daemon's max_sensors");
  step.output_sensors = NULL;
  step.outputs = SENSIM_STEP_OUTPUTS_ALL;
  step.noutput_sensors = 0;
  ASSERT_STATUS(cli, sensim_step(cli, &step, NULL), SENSIM_INVALID_ARGUMENT, "out");
  step.time = 2.0;
  ASSERT_STATUS(cli, sensim_step(cli, &step, &r), SENSIM_FAILED_PRECONDITION, "time");
  ASSERT_TRUE(r == NULL);
  step.time = 1.0;
  ASSERT_OK_ST(cli, sensim_step(cli, &step, &r));
  ASSERT_EQ(r->step, 1);
  ASSERT_EQ(sensim_step(NULL, &step, &r), SENSIM_INVALID_ARGUMENT);
  ASSERT_EQ(sensim_update_state(NULL, &state), SENSIM_INVALID_ARGUMENT);
  ASSERT_EQ(sensim_step_send(NULL, &step, NULL), SENSIM_INVALID_ARGUMENT);
  ASSERT_EQ(sensim_step_wait(NULL, 1, 0, &r), SENSIM_INVALID_ARGUMENT);
  ASSERT_EQ(sensim_update_and_step(NULL, &state, &step, &r), SENSIM_INVALID_ARGUMENT);
  sensim_client_close(cli);
  ASSERT_EQ(td_stop(&d), 0);
  return 0;
}


// An IMU, an encoder and a cone on body 1 (with a ball in front of the cone) and joint 1.
static sensim_status_t three_sensors(sensim_client_t* cli) {
  sensim_status_t st = balls(cli, 1);
  if (st != SENSIM_OK || (st = td_box(cli, 50, 0.5, 0.5, 0.5, 5, 0, 0, 0)) != SENSIM_OK) {
    return st;
  }
  sensim_joint_t j;
  sensim_joint_init(&j);
  j.id = 1;
  if ((st = sensim_create_joint(cli, &j)) != SENSIM_OK) {
    return st;
  }
  sensim_sensor_t s;
  sensim_sensor_init(&s);
  s.id = 1;
  s.body_id = 1;
  sensim_imu_config_t imu;
  sensim_imu_config_init(&imu);
  if ((st = sensim_create_imu(cli, &s, &imu)) != SENSIM_OK) {
    return st;
  }
  sensim_encoder_config_t e;
  sensim_encoder_config_init(&e);
  e.joint_id = 1;
  s.id = 2;
  s.body_id = 0;
  if ((st = sensim_create_encoder(cli, &s, &e)) != SENSIM_OK) {
    return st;
  }
  sensim_cone_config_t c;
  sensim_cone_config_init(&c);
  s.id = 3;
  return sensim_create_cone(cli, &s, &c);
}


TEST(step_pipelined_in_order_with_every_record) {
  td_daemon_t d;
  ASSERT_OK(td_start(&d, NULL));
  sensim_client_t* cli = td_connect(&d, "pipeline");
  ASSERT_TRUE(cli != NULL);
  ASSERT_OK_ST(cli, three_sensors(cli));

  // 12 ticks, four in flight: the joint at 0.1 k rad, the body (and its ball) still behind
  // the cone
  uint32_t one[1] = {1};
  double pose[7] = {-10, 0, 0, 0, 0, 0, 1}, q[12];
  sensim_state_t state;
  sensim_state_init(&state);
  state.nbodies = 1;
  state.body_ids = one;
  state.body_poses = pose;
  state.njoints = 1;
  state.joint_ids = one;
  sensim_step_t step;
  sensim_step_init(&step);
  uint64_t ids[12][2];
  for (int k = 0; k < 12 + 4; k++) {
    if (k < 12) {
      q[k] = 0.1 * k;
      state.time = step.time = 0.01 * k;
      state.joint_positions = &q[k];
      ASSERT_OK_ST(cli, sensim_update_state_send(cli, &state, &ids[k][0]));
      ASSERT_OK_ST(cli, sensim_step_send(cli, &step, &ids[k][1]));
    }
    int done = k - 4;
    if (done < 0 || done >= 12) {
      continue;
    }
    const sensim_step_result_t* r;
    ASSERT_OK_ST(cli, sensim_wait(cli, ids[done][0], -1));
    ASSERT_OK_ST(cli, sensim_step_wait(cli, ids[done][1], -1, &r));
    ASSERT_EQ(r->step, done + 1);
    ASSERT_NEAR(r->time, 0.01 * done, 0);
    ASSERT_EQ(r->noutputs, 3);
    ASSERT_EQ(r->outputs_in_parts, 0);
    int kinds = 0;
    for (uint32_t i = 0; i < 3; i++) {
      const sensim_sensor_data_t* o = &r->outputs[i];
      ASSERT_NEAR(o->time, 0.01 * done, 0);
      ASSERT_EQ(o->frame, done);  // each sensor counts its records from 0
      if (o->kind == SENSIM_PAYLOAD_IMU) {
        kinds |= 1;
        ASSERT_NEAR(o->imu.acceleration[2], 9.80665, 1e-9);
      } else if (o->kind == SENSIM_PAYLOAD_SCALAR) {
        kinds |= 2;
        ASSERT_NEAR(o->scalar.position, 0.1 * done, 1e-12);
      } else if (o->kind == SENSIM_PAYLOAD_CONE) {
        kinds |= 4;
        ASSERT_TRUE(o->cone.detected);
        ASSERT_NEAR(o->cone.range, 4.5, 1e-6);
        ASSERT_EQ(o->cone.object_id, 50);
      }
    }
    ASSERT_EQ(kinds, 7);
  }
  sensim_client_close(cli);
  ASSERT_EQ(td_stop(&d), 0);
  return 0;
}


TEST(step_lock_step_call_reports_a_refused_state_first) {
  td_daemon_t d;
  ASSERT_OK(td_start(&d, NULL));
  sensim_client_t* cli = td_connect(&d, "lockstep_refused");
  ASSERT_TRUE(cli != NULL);
  ASSERT_OK_ST(cli, three_sensors(cli));
  uint32_t bad[1] = {99};
  double pose[7] = {0, 0, 0, 0, 0, 0, 1};
  sensim_state_t state;
  sensim_state_init(&state);
  state.nbodies = 1;
  state.body_ids = bad;
  state.body_poses = pose;
  sensim_step_t step;
  sensim_step_init(&step);
  const sensim_step_result_t* r = NULL;
  ASSERT_STATUS(cli, sensim_update_and_step(cli, &state, &step, &r), SENSIM_NOT_FOUND, "99");
  ASSERT_TRUE(r == NULL);

  // the step's own reply (refused too) was dropped: the next tick is clean
  state.nbodies = 0;
  ASSERT_OK_ST(cli, sensim_update_and_step(cli, &state, &step, &r));
  ASSERT_EQ(r->step, 1);
  ASSERT_EQ(r->noutputs, 3);
  state.time = step.time = 0.5;
  step.noutput_sensors = 2;
  ASSERT_STATUS(cli, sensim_update_and_step(cli, &state, &step, &r), SENSIM_INVALID_ARGUMENT,
                "step.output_sensors");
  step.noutput_sensors = 0;
  ASSERT_OK_ST(cli, sensim_update_and_step(cli, &state, &step, &r));  // nothing was sent
  ASSERT_EQ(r->step, 2);
  ASSERT_STATUS(cli, sensim_update_and_step(cli, &state, &step, NULL), SENSIM_INVALID_ARGUMENT,
                "out");
  sensim_client_close(cli);
  ASSERT_EQ(td_stop(&d), 0);
  return 0;
}


TEST(step_outputs_chosen_by_the_step) {
  td_daemon_t d;
  ASSERT_OK(td_start(&d, NULL));
  sensim_client_t* cli = td_connect(&d, "outputs");
  ASSERT_TRUE(cli != NULL);
  ASSERT_OK_ST(cli, three_sensors(cli));  // IMU 1, encoder 2, cone 3
  sensim_subscription_t sub;
  sensim_subscription_init(&sub);
  sub.sensor_id = 1;
  ASSERT_OK_ST(cli, sensim_subscribe(cli, &sub));
  sensim_state_t state;
  sensim_state_init(&state);
  sensim_step_t step;
  sensim_step_init(&step);
  const sensim_step_result_t* r;

  // all (the default), in sensor id order
  ASSERT_OK_ST(cli, sensim_update_and_step(cli, &state, &step, &r));
  ASSERT_EQ(r->noutputs, 3);
  for (uint32_t i = 0; i < 3; i++) {
    ASSERT_EQ(r->outputs[i].sensor_id, i + 1);
  }

  // none: the acknowledgement alone; the subscriber still gets its record
  step.outputs = SENSIM_STEP_OUTPUTS_NONE;
  state.time = step.time = 0.01;
  ASSERT_OK_ST(cli, sensim_update_and_step(cli, &state, &step, &r));
  if (r->noutputs == 3) {
    printf("# SKIP a daemon older than Step.outputs (it ignores the field)\n");
    sensim_client_close(cli);
    ASSERT_EQ(td_stop(&d), 0);
    return 0;
  }
  ASSERT_EQ(r->noutputs, 0);
  ASSERT_EQ(r->step, 2);
  const sensim_sensor_data_t* dd;
  for (uint64_t seq = 1; seq <= 2; seq++) {
    ASSERT_OK_ST(cli, sensim_next_sensor_data(cli, 5000, &dd));
    ASSERT_EQ(dd->sequence, seq);
    ASSERT_EQ(dd->kind, SENSIM_PAYLOAD_IMU);
  }

  // listed: those sensors' records, in sensor id order whatever the list's
  uint32_t listed[2] = {3, 1};
  step.outputs = SENSIM_STEP_OUTPUTS_LISTED;
  step.output_sensors = listed;
  step.noutput_sensors = 2;
  state.time = step.time = 0.02;
  ASSERT_OK_ST(cli, sensim_update_and_step(cli, &state, &step, &r));
  ASSERT_EQ(r->noutputs, 2);
  ASSERT_EQ(r->outputs[0].sensor_id, 1);
  ASSERT_EQ(r->outputs[0].kind, SENSIM_PAYLOAD_IMU);
  ASSERT_EQ(r->outputs[1].sensor_id, 3);
  ASSERT_EQ(r->outputs[1].kind, SENSIM_PAYLOAD_CONE);

  // the daemon's refusals name the list's entry
  listed[1] = 99;
  state.time = step.time = 0.03;
  ASSERT_STATUS(cli, sensim_update_and_step(cli, &state, &step, &r), SENSIM_INVALID_ARGUMENT,
                "output_sensors[1] = 99");
  listed[1] = 3;
  step.time = 0.03;  // the state went through: step it
  ASSERT_STATUS(cli, sensim_step(cli, &step, &r), SENSIM_INVALID_ARGUMENT,
                "output_sensors[1] = 3 is repeated");
  step.noutput_sensors = 1;
  ASSERT_OK_ST(cli, sensim_step(cli, &step, &r));
  ASSERT_EQ(r->noutputs, 1);
  ASSERT_EQ(r->outputs[0].sensor_id, 3);
  sensim_client_close(cli);
  ASSERT_EQ(td_stop(&d), 0);
  return 0;
}


TEST(step_outputs_too_large_for_one_frame_come_in_parts) {
  td_daemon_t d;
  ASSERT_OK(td_start(&d, (const char* const[]){"--max-frame-bytes", "4194304", NULL}));
  sensim_client_t* cli = td_connect(&d, "parts");
  ASSERT_TRUE(cli != NULL);
  ASSERT_OK_ST(cli, td_sphere(cli, 1, 20.0, 0, 0, 0, 1));
  sensim_ambient_t vacuum;
  sensim_ambient_init(&vacuum);
  vacuum.refractive_index = 1.0;             // geometric ranges
  vacuum.return_probability_scaling = 0.0;  // no returns from the air
  ASSERT_OK_ST(cli, sensim_set_ambient(cli, &vacuum));

  // an IMU, and a first step without outputs: a daemon older than Step.outputs sends one
  sensim_sensor_t s;
  sensim_sensor_init(&s);
  sensim_imu_config_t imu;
  sensim_imu_config_init(&imu);
  s.id = 2;
  ASSERT_OK_ST(cli, sensim_create_imu(cli, &s, &imu));
  sensim_state_t state;
  sensim_state_init(&state);
  sensim_step_t step;
  sensim_step_init(&step);
  step.outputs = SENSIM_STEP_OUTPUTS_NONE;
  const sensim_step_result_t* r;
  ASSERT_OK_ST(cli, sensim_update_and_step(cli, &state, &step, &r));
  if (r->noutputs != 0) {
    printf("# SKIP a daemon older than Step.outputs (it sends every record in one frame)\n");
    sensim_client_close(cli);
    ASSERT_EQ(td_stop(&d), 0);
    return 0;
  }

  // two flash lidars of 400 x 400 pixels (2.56 MB a frame each) with the IMU: together more
  // than a frame of 4 MiB
  sensim_lidar_config_t c;
  sensim_lidar_config_init(&c, SENSIM_PATTERN_FLASH);
  c.flash.columns = c.flash.rows = 400;
  for (uint32_t id = 5; id <= 6; id++) {
    s.id = id;
    ASSERT_OK_ST(cli, sensim_create_lidar(cli, &s, &c));
  }
  step.outputs = SENSIM_STEP_OUTPUTS_ALL;
  state.time = step.time = 0.05;  // the flashes' first frame: at the start of their first step
  ASSERT_OK_ST(cli, sensim_update_and_step(cli, &state, &step, &r));
  ASSERT_EQ(r->noutputs, 3);
  ASSERT_EQ(r->outputs_in_parts, 3);
  ASSERT_EQ(r->outputs[0].sensor_id, 2);
  ASSERT_EQ(r->outputs[0].kind, SENSIM_PAYLOAD_IMU);
  for (uint32_t i = 1; i < 3; i++) {
    const sensim_point_cloud_t* pc = &r->outputs[i].point_cloud;
    ASSERT_EQ(r->outputs[i].sensor_id, 4 + i);
    ASSERT_EQ(pc->count, 160000);
    ASSERT_EQ(pc->size, (size_t)160000 * pc->point_step);
    const uint8_t* p = pc->data;
    for (uint32_t k = 0; k < pc->count; k++, p += pc->point_step) {
      float v[3];
      memcpy(v, p, sizeof(v));
      double rr = sqrt((double)v[0] * v[0] + (double)v[1] * v[1] + (double)v[2] * v[2]);
      if (fabs(rr - 20.0) > 2e-4) {
        CHECK_FAIL("lidar %u point %u at %.7g m", 4 + i, k, rr);
      }
    }
  }

  // one of them fits a frame with the StepDone
  uint32_t one[1] = {6};
  step.outputs = SENSIM_STEP_OUTPUTS_LISTED;
  step.output_sensors = one;
  step.noutput_sensors = 1;
  state.time = step.time = 0.1;  // their second frame
  ASSERT_OK_ST(cli, sensim_update_and_step(cli, &state, &step, &r));
  ASSERT_EQ(r->noutputs, 1);
  ASSERT_EQ(r->outputs_in_parts, 0);
  ASSERT_EQ(r->outputs[0].point_cloud.count, 160000);
  sensim_client_close(cli);
  ASSERT_EQ(td_stop(&d), 0);
  return 0;
}
