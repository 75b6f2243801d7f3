// SPDX-License-Identifier: MIT
// header_c11.c: compile-only check that sensim/sensim.h and sensim/shard.h are self-contained,
// clean C11 under -pedantic-errors, and that their declarations have the documented types.
#include <sensim/sensim.h>
#include <sensim/shard.h>

// Every public function, referenced through a pointer of the documented type.
// clang-format off
static uint32_t (*const fn_shard_for)(uint32_t, uint32_t) = sensim_shard_for;
static sensim_status_t (*const fn_shards_connect)(const char* const*, uint32_t, const sensim_options_t*, sensim_shards_t**) = sensim_shards_connect;
static void (*const fn_shards_close)(sensim_shards_t*) = sensim_shards_close;
static const char* (*const fn_shards_last_error)(const sensim_shards_t*) = sensim_shards_last_error;
static int (*const fn_shards_failed)(const sensim_shards_t*) = sensim_shards_failed;
static uint32_t (*const fn_shards_count)(const sensim_shards_t*) = sensim_shards_count;
static sensim_client_t* (*const fn_shards_client)(sensim_shards_t*, uint32_t) = sensim_shards_client;
static sensim_status_t (*const fn_shards_place)(sensim_shards_t*, uint32_t, uint32_t) = sensim_shards_place;
static uint32_t (*const fn_shards_owner)(const sensim_shards_t*, uint32_t) = sensim_shards_owner;
static sensim_status_t (*const fn_shards_create_mesh)(sensim_shards_t*, const sensim_mesh_t*) = sensim_shards_create_mesh;
static sensim_status_t (*const fn_shards_create_primitive)(sensim_shards_t*, const sensim_primitive_t*) = sensim_shards_create_primitive;
static sensim_status_t (*const fn_shards_set_material)(sensim_shards_t*, const sensim_material_t*) = sensim_shards_set_material;
static sensim_status_t (*const fn_shards_set_ambient)(sensim_shards_t*, const sensim_ambient_t*) = sensim_shards_set_ambient;
static sensim_status_t (*const fn_shards_set_environment)(sensim_shards_t*, const sensim_environment_t*) = sensim_shards_set_environment;
static sensim_status_t (*const fn_shards_create_body)(sensim_shards_t*, const sensim_body_t*) = sensim_shards_create_body;
static sensim_status_t (*const fn_shards_create_object)(sensim_shards_t*, const sensim_object_t*) = sensim_shards_create_object;
static sensim_status_t (*const fn_shards_create_joint)(sensim_shards_t*, const sensim_joint_t*) = sensim_shards_create_joint;
static sensim_status_t (*const fn_shards_remove)(sensim_shards_t*, sensim_entity_t, uint32_t) = sensim_shards_remove;
static sensim_status_t (*const fn_shards_create_lidar)(sensim_shards_t*, const sensim_sensor_t*, const sensim_lidar_config_t*) = sensim_shards_create_lidar;
static sensim_status_t (*const fn_shards_create_imu)(sensim_shards_t*, const sensim_sensor_t*, const sensim_imu_config_t*) = sensim_shards_create_imu;
static sensim_status_t (*const fn_shards_create_encoder)(sensim_shards_t*, const sensim_sensor_t*, const sensim_encoder_config_t*) = sensim_shards_create_encoder;
static sensim_status_t (*const fn_shards_create_odometer)(sensim_shards_t*, const sensim_sensor_t*, const sensim_odometer_config_t*) = sensim_shards_create_odometer;
static sensim_status_t (*const fn_shards_create_cone)(sensim_shards_t*, const sensim_sensor_t*, const sensim_cone_config_t*) = sensim_shards_create_cone;
static sensim_status_t (*const fn_shards_subscribe)(sensim_shards_t*, const sensim_subscription_t*) = sensim_shards_subscribe;
static sensim_status_t (*const fn_shards_unsubscribe)(sensim_shards_t*, uint32_t) = sensim_shards_unsubscribe;
static sensim_status_t (*const fn_shards_next_sensor_data)(sensim_shards_t*, int, const sensim_sensor_data_t**) = sensim_shards_next_sensor_data;
static sensim_status_t (*const fn_shards_update_state)(sensim_shards_t*, const sensim_state_t*) = sensim_shards_update_state;
static sensim_status_t (*const fn_shards_step)(sensim_shards_t*, const sensim_step_t*, const sensim_step_result_t**) = sensim_shards_step;
static sensim_status_t (*const fn_shards_update_and_step)(sensim_shards_t*, const sensim_state_t*, const sensim_step_t*, const sensim_step_result_t**) = sensim_shards_update_and_step;
static sensim_status_t (*const fn_shards_raycast)(sensim_shards_t*, const sensim_raycast_t*, sensim_hit_t*) = sensim_shards_raycast;
static sensim_status_t (*const fn_shards_reconnect)(sensim_shards_t*, uint32_t, const char*) = sensim_shards_reconnect;
static sensim_status_t (*const fn_shards_focus)(sensim_shards_t*, int) = sensim_shards_focus;
static const char* (*const fn_status_name)(sensim_status_t) = sensim_status_name;
static const char* (*const fn_status_str)(sensim_status_t) = sensim_status_str;
static sensim_pose_t (*const fn_pose_identity)(void) = sensim_pose_identity;
static void (*const fn_options_init_sized)(sensim_options_t*, size_t) = sensim_options_init_sized;
static sensim_status_t (*const fn_client_connect)(const char*, uint16_t, const sensim_options_t*, sensim_client_t**) = sensim_client_connect;
static void (*const fn_client_close)(sensim_client_t*) = sensim_client_close;
static const char* (*const fn_client_last_error)(const sensim_client_t*) = sensim_client_last_error;
static const char* (*const fn_client_server_version)(const sensim_client_t*) = sensim_client_server_version;
static const sensim_session_t* (*const fn_client_session)(const sensim_client_t*) = sensim_client_session;
static int (*const fn_client_fd)(const sensim_client_t*) = sensim_client_fd;
static bool (*const fn_client_want_write)(const sensim_client_t*) = sensim_client_want_write;
static sensim_status_t (*const fn_client_pump)(sensim_client_t*, int) = sensim_client_pump;
static sensim_status_t (*const fn_wait)(sensim_client_t*, uint64_t, int) = sensim_wait;
static sensim_status_t (*const fn_discard)(sensim_client_t*, uint64_t) = sensim_discard;
static sensim_status_t (*const fn_ping)(sensim_client_t*, const void*, size_t, uint64_t*) = sensim_ping;
static const char* (*const fn_counter_name)(unsigned) = sensim_counter_name;
static sensim_status_t (*const fn_get_info)(sensim_client_t*, const sensim_info_t**) = sensim_get_info;
static void (*const fn_mesh_init_sized)(sensim_mesh_t*, size_t) = sensim_mesh_init_sized;
static sensim_status_t (*const fn_create_mesh)(sensim_client_t*, const sensim_mesh_t*) = sensim_create_mesh;
static void (*const fn_primitive_init_sized)(sensim_primitive_t*, size_t) = sensim_primitive_init_sized;
static sensim_status_t (*const fn_create_primitive)(sensim_client_t*, const sensim_primitive_t*) = sensim_create_primitive;
static void (*const fn_material_init_sized)(sensim_material_t*, size_t) = sensim_material_init_sized;
static sensim_status_t (*const fn_set_material)(sensim_client_t*, const sensim_material_t*) = sensim_set_material;
static void (*const fn_ambient_init_sized)(sensim_ambient_t*, size_t) = sensim_ambient_init_sized;
static sensim_status_t (*const fn_set_ambient)(sensim_client_t*, const sensim_ambient_t*) = sensim_set_ambient;
static void (*const fn_environment_init_sized)(sensim_environment_t*, size_t) = sensim_environment_init_sized;
static sensim_status_t (*const fn_set_environment)(sensim_client_t*, const sensim_environment_t*) = sensim_set_environment;
static void (*const fn_body_init_sized)(sensim_body_t*, size_t) = sensim_body_init_sized;
static sensim_status_t (*const fn_create_body)(sensim_client_t*, const sensim_body_t*) = sensim_create_body;
static void (*const fn_object_init_sized)(sensim_object_t*, size_t) = sensim_object_init_sized;
static sensim_status_t (*const fn_create_object)(sensim_client_t*, const sensim_object_t*) = sensim_create_object;
static void (*const fn_joint_init_sized)(sensim_joint_t*, size_t) = sensim_joint_init_sized;
static sensim_status_t (*const fn_create_joint)(sensim_client_t*, const sensim_joint_t*) = sensim_create_joint;
static sensim_status_t (*const fn_remove)(sensim_client_t*, sensim_entity_t, uint32_t) = sensim_remove;
static void (*const fn_sensor_init_sized)(sensim_sensor_t*, size_t) = sensim_sensor_init_sized;
static void (*const fn_lidar_config_init_sized)(sensim_lidar_config_t*, size_t, sensim_lidar_pattern_t) = sensim_lidar_config_init_sized;
static sensim_status_t (*const fn_create_lidar)(sensim_client_t*, const sensim_sensor_t*, const sensim_lidar_config_t*) = sensim_create_lidar;
static void (*const fn_imu_config_init_sized)(sensim_imu_config_t*, size_t) = sensim_imu_config_init_sized;
static sensim_status_t (*const fn_create_imu)(sensim_client_t*, const sensim_sensor_t*, const sensim_imu_config_t*) = sensim_create_imu;
static void (*const fn_encoder_config_init_sized)(sensim_encoder_config_t*, size_t) = sensim_encoder_config_init_sized;
static sensim_status_t (*const fn_create_encoder)(sensim_client_t*, const sensim_sensor_t*, const sensim_encoder_config_t*) = sensim_create_encoder;
static void (*const fn_odometer_config_init_sized)(sensim_odometer_config_t*, size_t) = sensim_odometer_config_init_sized;
static sensim_status_t (*const fn_create_odometer)(sensim_client_t*, const sensim_sensor_t*, const sensim_odometer_config_t*) = sensim_create_odometer;
static void (*const fn_cone_config_init_sized)(sensim_cone_config_t*, size_t) = sensim_cone_config_init_sized;
static sensim_status_t (*const fn_create_cone)(sensim_client_t*, const sensim_sensor_t*, const sensim_cone_config_t*) = sensim_create_cone;
static sensim_status_t (*const fn_point_cloud_decode)(sensim_encoding_t, const void*, size_t, uint32_t, uint32_t, void*, size_t) = sensim_point_cloud_decode;
static sensim_status_t (*const fn_point_cloud_read)(const sensim_point_cloud_t*, void*, size_t) = sensim_point_cloud_read;
static const sensim_point_field_t* (*const fn_point_cloud_field)(const sensim_point_cloud_t*, const char*) = sensim_point_cloud_field;
static void (*const fn_state_init_sized)(sensim_state_t*, size_t) = sensim_state_init_sized;
static sensim_status_t (*const fn_update_state)(sensim_client_t*, const sensim_state_t*) = sensim_update_state;
static sensim_status_t (*const fn_update_state_send)(sensim_client_t*, const sensim_state_t*, uint64_t*) = sensim_update_state_send;
static void (*const fn_step_init_sized)(sensim_step_t*, size_t) = sensim_step_init_sized;
static sensim_status_t (*const fn_step)(sensim_client_t*, const sensim_step_t*, const sensim_step_result_t**) = sensim_step;
static sensim_status_t (*const fn_step_send)(sensim_client_t*, const sensim_step_t*, uint64_t*) = sensim_step_send;
static sensim_status_t (*const fn_step_wait)(sensim_client_t*, uint64_t, int, const sensim_step_result_t**) = sensim_step_wait;
static sensim_status_t (*const fn_update_and_step_send)(sensim_client_t*, const sensim_state_t*, const sensim_step_t*, uint64_t*, uint64_t*) = sensim_update_and_step_send;
static sensim_status_t (*const fn_update_and_step)(sensim_client_t*, const sensim_state_t*, const sensim_step_t*, const sensim_step_result_t**) = sensim_update_and_step;
static void (*const fn_raycast_init_sized)(sensim_raycast_t*, size_t) = sensim_raycast_init_sized;
static sensim_status_t (*const fn_raycast)(sensim_client_t*, const sensim_raycast_t*, sensim_hit_t*, uint64_t*) = sensim_raycast;
static sensim_status_t (*const fn_raycast_send)(sensim_client_t*, const sensim_raycast_t*, sensim_hit_t*, uint64_t*) = sensim_raycast_send;
static sensim_status_t (*const fn_raycast_wait)(sensim_client_t*, uint64_t, int, uint64_t*) = sensim_raycast_wait;
static void (*const fn_subscription_init_sized)(sensim_subscription_t*, size_t) = sensim_subscription_init_sized;
static sensim_status_t (*const fn_subscribe)(sensim_client_t*, const sensim_subscription_t*) = sensim_subscribe;
static sensim_status_t (*const fn_unsubscribe)(sensim_client_t*, uint32_t) = sensim_unsubscribe;
static sensim_status_t (*const fn_next_sensor_data)(sensim_client_t*, int, const sensim_sensor_data_t**) = sensim_next_sensor_data;
static uint64_t (*const fn_client_pushed_dropped)(const sensim_client_t*) = sensim_client_pushed_dropped;
static uint32_t (*const fn_client_pushed_queued)(const sensim_client_t*) = sensim_client_pushed_queued;
// clang-format on

// The wire codes are part of the contract (sensim.v1.StatusCode).
_Static_assert(SENSIM_OK == 0, "OK");
_Static_assert(SENSIM_INVALID_ARGUMENT == 3, "INVALID_ARGUMENT");
_Static_assert(SENSIM_DEADLINE_EXCEEDED == 4, "DEADLINE_EXCEEDED");
_Static_assert(SENSIM_NOT_FOUND == 5, "NOT_FOUND");
_Static_assert(SENSIM_ALREADY_EXISTS == 6, "ALREADY_EXISTS");
_Static_assert(SENSIM_RESOURCE_EXHAUSTED == 8, "RESOURCE_EXHAUSTED");
_Static_assert(SENSIM_FAILED_PRECONDITION == 9, "FAILED_PRECONDITION");
_Static_assert(SENSIM_UNIMPLEMENTED == 12, "UNIMPLEMENTED");
_Static_assert(SENSIM_INTERNAL == 13, "INTERNAL");
_Static_assert(SENSIM_UNAUTHENTICATED == 16, "UNAUTHENTICATED");
_Static_assert(SENSIM_EIO > 100 && SENSIM_ECLOSED > 100 && SENSIM_ETIMEDOUT > 100 &&
                   SENSIM_EPROTO > 100 && SENSIM_ENOMEM > 100 && SENSIM_ECONNECT > 100 &&
                   SENSIM_EAGAIN > 100 && SENSIM_EUNKNOWN > 100,
               "client codes above 100");

// Layouts the documentation promises: a pose is the 56 bytes of one body in
// sensim_state_t.body_poses, a hit the wire's 48-byte record.
_Static_assert(sizeof(sensim_pose_t) == 56, "sensim_pose_t is 7 doubles");
_Static_assert(sizeof(sensim_hit_t) == 48, "sensim_hit_t is 48 bytes");

int header_c11_uses(void);


int header_c11_uses(void) {
  sensim_options_t opts;
  sensim_options_init(&opts);
  sensim_lidar_config_t lidar;
  sensim_lidar_config_init(&lidar, SENSIM_PATTERN_VLP16);
  sensim_state_t state;
  sensim_state_init(&state);
  sensim_role_t role = SENSIM_ROLE_OBSERVER;
  opts.role = role;
  const void* fns[] = {
      (const void*)&fn_status_name,
      (const void*)&fn_status_str,
      (const void*)&fn_pose_identity,
      (const void*)&fn_options_init_sized,
      (const void*)&fn_client_connect,
      (const void*)&fn_client_close,
      (const void*)&fn_client_last_error,
      (const void*)&fn_client_server_version,
      (const void*)&fn_client_session,
      (const void*)&fn_client_fd,
      (const void*)&fn_client_want_write,
      (const void*)&fn_client_pump,
      (const void*)&fn_wait,
      (const void*)&fn_discard,
      (const void*)&fn_ping,
      (const void*)&fn_counter_name,
      (const void*)&fn_get_info,
      (const void*)&fn_mesh_init_sized,
      (const void*)&fn_create_mesh,
      (const void*)&fn_primitive_init_sized,
      (const void*)&fn_create_primitive,
      (const void*)&fn_material_init_sized,
      (const void*)&fn_set_material,
      (const void*)&fn_ambient_init_sized,
      (const void*)&fn_set_ambient,
      (const void*)&fn_environment_init_sized,
      (const void*)&fn_set_environment,
      (const void*)&fn_body_init_sized,
      (const void*)&fn_create_body,
      (const void*)&fn_object_init_sized,
      (const void*)&fn_create_object,
      (const void*)&fn_joint_init_sized,
      (const void*)&fn_create_joint,
      (const void*)&fn_remove,
      (const void*)&fn_sensor_init_sized,
      (const void*)&fn_lidar_config_init_sized,
      (const void*)&fn_create_lidar,
      (const void*)&fn_imu_config_init_sized,
      (const void*)&fn_create_imu,
      (const void*)&fn_encoder_config_init_sized,
      (const void*)&fn_create_encoder,
      (const void*)&fn_odometer_config_init_sized,
      (const void*)&fn_create_odometer,
      (const void*)&fn_cone_config_init_sized,
      (const void*)&fn_create_cone,
      (const void*)&fn_point_cloud_decode,
      (const void*)&fn_point_cloud_read,
      (const void*)&fn_point_cloud_field,
      (const void*)&fn_state_init_sized,
      (const void*)&fn_update_state,
      (const void*)&fn_update_state_send,
      (const void*)&fn_step_init_sized,
      (const void*)&fn_step,
      (const void*)&fn_step_send,
      (const void*)&fn_step_wait,
      (const void*)&fn_update_and_step,
      (const void*)&fn_update_and_step_send,
      (const void*)&fn_raycast_init_sized,
      (const void*)&fn_raycast,
      (const void*)&fn_raycast_send,
      (const void*)&fn_raycast_wait,
      (const void*)&fn_subscription_init_sized,
      (const void*)&fn_subscribe,
      (const void*)&fn_unsubscribe,
      (const void*)&fn_next_sensor_data,
      (const void*)&fn_client_pushed_dropped,
      (const void*)&fn_client_pushed_queued,
      (const void*)&fn_shard_for,
      (const void*)&fn_shards_connect,
      (const void*)&fn_shards_close,
      (const void*)&fn_shards_last_error,
      (const void*)&fn_shards_failed,
      (const void*)&fn_shards_count,
      (const void*)&fn_shards_client,
      (const void*)&fn_shards_place,
      (const void*)&fn_shards_owner,
      (const void*)&fn_shards_create_mesh,
      (const void*)&fn_shards_create_primitive,
      (const void*)&fn_shards_set_material,
      (const void*)&fn_shards_set_ambient,
      (const void*)&fn_shards_set_environment,
      (const void*)&fn_shards_create_body,
      (const void*)&fn_shards_create_object,
      (const void*)&fn_shards_create_joint,
      (const void*)&fn_shards_remove,
      (const void*)&fn_shards_create_lidar,
      (const void*)&fn_shards_create_imu,
      (const void*)&fn_shards_create_encoder,
      (const void*)&fn_shards_create_odometer,
      (const void*)&fn_shards_create_cone,
      (const void*)&fn_shards_subscribe,
      (const void*)&fn_shards_unsubscribe,
      (const void*)&fn_shards_next_sensor_data,
      (const void*)&fn_shards_update_state,
      (const void*)&fn_shards_step,
      (const void*)&fn_shards_update_and_step,
      (const void*)&fn_shards_raycast,
      (const void*)&fn_shards_reconnect,
      (const void*)&fn_shards_focus};
  return (int)(sizeof(fns) / sizeof(fns[0])) + (int)opts.role + (int)lidar.pattern +
         (int)state.nbodies;
}
