// SPDX-License-Identifier: MIT
// header_cxx.cc: compile-only check that sensim/sensim.h is usable from C++17 (extern "C", no
// C-only constructs, the init macros), as physics engines written in C++ include it.
#include <sensim/sensim.h>
#include <sensim/shard.h>

#include <array>
#include <cstdint>

static_assert(SENSIM_OK == 0, "status codes are the protocol's numbers");
static_assert(SENSIM_DEADLINE_EXCEEDED == 4, "DEADLINE_EXCEEDED is the wire's 4");
static_assert(sizeof(sensim_pose_t) == 7 * sizeof(double), "a pose is 7 doubles");
static_assert(sizeof(sensim_hit_t) == 48, "a hit is the wire's record");

int sensim_header_cxx_check(void);

int sensim_header_cxx_check(void) {
  sensim_options_t opts;
  sensim_options_init(&opts);
  opts.environment = "cxx";
  sensim_client_t* cli = nullptr;
  sensim_status_t st = sensim_client_connect("127.0.0.1", 0, &opts, &cli);
  if (st == SENSIM_OK) {
    sensim_sensor_t sensor;
    sensim_sensor_init(&sensor);
    sensor.id = 1;
    sensim_lidar_config_t lidar;
    sensim_lidar_config_init(&lidar, SENSIM_PATTERN_VLP16);
    st = sensim_create_lidar(cli, &sensor, &lidar);

    std::array<std::uint32_t, 1> ids{{1}};
    std::array<sensim_pose_t, 1> poses{{sensim_pose_identity()}};
    sensim_state_t state;
    sensim_state_init(&state);
    state.time = 0.001;
    state.nbodies = static_cast<std::uint32_t>(ids.size());
    state.body_ids = ids.data();
    state.body_poses = &poses[0].position[0];
    sensim_step_t step;
    sensim_step_init(&step);
    step.time = state.time;
    step.outputs = SENSIM_STEP_OUTPUTS_NONE;
    const sensim_step_result_t* result = nullptr;
    st = sensim_update_and_step(cli, &state, &step, &result);
  }
  sensim_client_close(cli);
  return st == SENSIM_OK ? 0 : static_cast<int>(st);
}
