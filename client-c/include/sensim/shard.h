// SPDX-License-Identifier: MIT
// sensim/shard.h: sensors sharded over several daemons (docs/sharding.md), a layer over the
// C client of sensim.h: one sensim_client_t per daemon (a *shard*), behind one handle.
//
// Every shard holds the whole scene (geometry, materials, media, settings, bodies, objects,
// joints) and receives every state, so that each sees the same world; each sensor lives on
// one shard, placed with sensim_shards_place or else at sensim_shard_for(id, n), a stable hash
// of its id (the Python client's ShardedClient places the same way). A request for every shard
// is sent to all of them before any reply is awaited, and the replies are awaited within one
// deadline (the options' timeout_ms). A step completes when every shard has answered; its
// records are merged in sensor id order, as one daemon lists them. Raycasts are split across
// the shards.
//
// Failures: the call returns the status of the first shard that failed; the last error names
// it, "shard 1 (127.0.0.1:7701): ECLOSED: <what happened>" (then "; also shard ..." for any
// other failed shard, and " (shards 0, 2 accepted it)": those are now ahead of it), and
// sensim_shards_failed() gives its index. A transport failure or a timeout closes that shard's
// connection, never the others'.
//
// Restart: nothing is re-sent on its own. sensim_shards_reconnect(sh, i, address) connects a
// new handle to the restarted daemon; between sensim_shards_focus(sh, i) and
// sensim_shards_focus(sh, -1) the scene and state calls go to shard i alone (sensors placed
// elsewhere are skipped), so that the caller rebuilds it by running its scene code and its
// last state again.
//
// Thread: a handle is used by one thread at a time, like sensim_client_t.
#ifndef SENSIM_SHARD_H
#define SENSIM_SHARD_H

#include "sensim/sensim.h"

#ifdef __cplusplus
extern "C" {
#endif

// Several daemons behind one handle. Opaque; create with sensim_shards_connect.
typedef struct sensim_shards sensim_shards_t;

// The shard (0 .. nshards - 1) of a sensor without an explicit placement: Lamping and Veach's
// jump consistent hash of the id mixed by SplitMix64's finaliser, so that going from n to n + 1
// shards moves only about 1 / (n + 1) of the sensors. nshards 0 is read as 1. Thread: any.
SENSIM_API uint32_t sensim_shard_for(uint32_t sensor_id, uint32_t nshards);

// Connect to n daemons, addresses[i] = "host:port", "[v6 address]:port" or "host" (port
// 7700), each with opts (NULL: defaults). On return *out is a handle even on failure (then
// every shard closed, the reason in sensim_shards_last_error naming the shard; a handle whose
// addresses were refused has no shard, and every call on it returns SENSIM_ECLOSED), or NULL
// only when memory ran out; release it with sensim_shards_close in every case.
// Returns SENSIM_OK, SENSIM_INVALID_ARGUMENT (no address, or a malformed one, named; options
// whose struct_size is not this library's), or the first failed connection's status
// (sensim_client_connect). Steps and raycasts refuse structs of another size the same way.
SENSIM_API sensim_status_t sensim_shards_connect(const char* const* addresses, uint32_t n,
                                                 const sensim_options_t* opts,
                                                 sensim_shards_t** out);

// Close every connection and free the handle. NULL is a no-op.
SENSIM_API void sensim_shards_close(sensim_shards_t* sh);

// The detail message of the last failed call ("" if none), naming the shard.
// Ownership: owned by the handle; valid until the next call on it.
SENSIM_API const char* sensim_shards_last_error(const sensim_shards_t* sh);

// The index of the shard that made the last call fail, or -1 (none, or an argument the
// handle refused before sending anything).
SENSIM_API int sensim_shards_failed(const sensim_shards_t* sh);

// The number of shards.
SENSIM_API uint32_t sensim_shards_count(const sensim_shards_t* sh);

// The connection to shard `index` (NULL when out of range), e.g. for sensim_get_info. Owned
// by the handle; replaced by sensim_shards_reconnect.
SENSIM_API sensim_client_t* sensim_shards_client(sensim_shards_t* sh, uint32_t index);

// Place sensor `sensor_id` on shard `shard` for its creation (before it). INVALID_ARGUMENT
// naming the shard index and its range, or a sensor already created elsewhere.
SENSIM_API sensim_status_t sensim_shards_place(sensim_shards_t* sh, uint32_t sensor_id,
                                               uint32_t shard);

// The shard that holds (or will hold) sensor `sensor_id`.
SENSIM_API uint32_t sensim_shards_owner(const sensim_shards_t* sh, uint32_t sensor_id);

//---------------- The scene: every shard (the focused one only, while focused)

SENSIM_API sensim_status_t sensim_shards_create_mesh(sensim_shards_t* sh, const sensim_mesh_t* mesh);
SENSIM_API sensim_status_t sensim_shards_create_primitive(sensim_shards_t* sh,
                                                          const sensim_primitive_t* prim);
SENSIM_API sensim_status_t sensim_shards_set_material(sensim_shards_t* sh,
                                                      const sensim_material_t* mat);
SENSIM_API sensim_status_t sensim_shards_set_ambient(sensim_shards_t* sh,
                                                     const sensim_ambient_t* amb);
SENSIM_API sensim_status_t sensim_shards_set_environment(sensim_shards_t* sh,
                                                         const sensim_environment_t* env);
SENSIM_API sensim_status_t sensim_shards_create_body(sensim_shards_t* sh, const sensim_body_t* body);
SENSIM_API sensim_status_t sensim_shards_create_object(sensim_shards_t* sh,
                                                       const sensim_object_t* obj);
SENSIM_API sensim_status_t sensim_shards_create_joint(sensim_shards_t* sh,
                                                      const sensim_joint_t* joint);

// Remove an entity: a sensor from its shard, anything else from every shard.
SENSIM_API sensim_status_t sensim_shards_remove(sensim_shards_t* sh, sensim_entity_t kind,
                                                uint32_t id);

//---------------- Sensors: their own shard

SENSIM_API sensim_status_t sensim_shards_create_lidar(sensim_shards_t* sh,
                                                      const sensim_sensor_t* sensor,
                                                      const sensim_lidar_config_t* cfg);
SENSIM_API sensim_status_t sensim_shards_create_imu(sensim_shards_t* sh,
                                                    const sensim_sensor_t* sensor,
                                                    const sensim_imu_config_t* cfg);
SENSIM_API sensim_status_t sensim_shards_create_encoder(sensim_shards_t* sh,
                                                        const sensim_sensor_t* sensor,
                                                        const sensim_encoder_config_t* cfg);
SENSIM_API sensim_status_t sensim_shards_create_odometer(sensim_shards_t* sh,
                                                         const sensim_sensor_t* sensor,
                                                         const sensim_odometer_config_t* cfg);
SENSIM_API sensim_status_t sensim_shards_create_cone(sensim_shards_t* sh,
                                                     const sensim_sensor_t* sensor,
                                                     const sensim_cone_config_t* cfg);

// Subscribe on the sensor's shard; read with sensim_shards_next_sensor_data.
SENSIM_API sensim_status_t sensim_shards_subscribe(sensim_shards_t* sh,
                                                   const sensim_subscription_t* sub);
SENSIM_API sensim_status_t sensim_shards_unsubscribe(sensim_shards_t* sh, uint32_t sensor_id);

// The next pushed record of any shard (the shards take turns), waiting up to timeout_ms (0 =
// only what has arrived; < 0 = the options' timeout). SENSIM_EAGAIN when none came. Returns a
// view, valid until the next call on the handle.
SENSIM_API sensim_status_t sensim_shards_next_sensor_data(sensim_shards_t* sh, int timeout_ms,
                                                          const sensim_sensor_data_t** out);

//---------------- Time: every shard

// The state to every shard (the focused one only, while focused), pipelined.
SENSIM_API sensim_status_t sensim_shards_update_state(sensim_shards_t* sh,
                                                      const sensim_state_t* state);

// Step every shard, each asked (SENSIM_STEP_OUTPUTS_LISTED) for the listed sensors it holds;
// the listed ids must be sensors created through this handle. *out: the records of every
// shard in sensor id order (step: the largest index a shard reported). Views, valid until the
// next call on the handle. INVALID_ARGUMENT while focused.
SENSIM_API sensim_status_t sensim_shards_step(sensim_shards_t* sh, const sensim_step_t* step,
                                              const sensim_step_result_t** out);

// The state and the step in one write to every shard, then every reply (a refused state is
// reported first). Views as sensim_shards_step.
SENSIM_API sensim_status_t sensim_shards_update_and_step(sensim_shards_t* sh,
                                                         const sensim_state_t* state,
                                                         const sensim_step_t* step,
                                                         const sensim_step_result_t** out);

//---------------- Queries

// Trace rays (sensim_raycast): from 4096 rays on, in contiguous parts, one per shard, sent
// before any reply is read and written into hits in place; fewer go whole to one shard (the
// shards take turns). Every shard holds the same scene and state, so the hits are one
// daemon's. Nullable: none.
SENSIM_API sensim_status_t sensim_shards_raycast(sensim_shards_t* sh, const sensim_raycast_t* rays,
                                                 sensim_hit_t* hits);

//---------------- Restart

// Close shard `index` and connect it again, at `address` (NULL: where it was), with the
// handle's options. The new daemon is empty: rebuild it under sensim_shards_focus.
SENSIM_API sensim_status_t sensim_shards_reconnect(sensim_shards_t* sh, uint32_t index,
                                                   const char* address);

// index >= 0: until sensim_shards_focus(sh, -1), scene, sensor, subscription and state calls
// go to shard `index` alone (a sensor placed on another shard is skipped, returning OK);
// steps, raycasts and reads are refused. -1: every shard again.
SENSIM_API sensim_status_t sensim_shards_focus(sensim_shards_t* sh, int index);

#ifdef __cplusplus
}
#endif

#endif  // SENSIM_SHARD_H
