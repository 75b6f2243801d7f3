// SPDX-License-Identifier: MIT
// spec.h: the small text language a bridge reads sensors, materials, the medium and geometry
// overrides from (an MJCF <custom><text> element's data, or a line of a side file): a kind
// word, then key=value pairs separated by blanks, e.g.
//
//   lidar site=roof pattern=vlp16 frequency=10 range_max=100 layout=velodyne
//   imu site=imu accel_noise=0.01
//   odometer joint=rear_left wheel_radius=0.3
//   lambertian reflectance=0.2 label=3
//
// Numbers are SI (m, s, rad, Hz); an angle may be written in degrees with the suffix "deg"
// (fov_horizontal=60deg). Lists are comma-separated without blanks. docs/mujoco.md lists every
// key. Parsing is pure: names (sites, joints, bodies) are kept as text for the caller to
// resolve. Thread: any.
#ifndef SENSIM_BRIDGE_SPEC_H
#define SENSIM_BRIDGE_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sensim/sensim.h>

#define SPEC_NAME_MAX 128                 // bytes of a name, NUL included
#define SPEC_MAX_FIELDS 16                // point fields of a lidar
#define SPEC_MAX_CHANNELS 128             // channel elevations of a spinning lidar
#define SPEC_MAX_EXCLUDE 64               // bodies a lidar does not see

typedef enum spec_kind {
  SPEC_LIDAR = 1,
  SPEC_IMU = 2,
  SPEC_ENCODER = 3,
  SPEC_ODOMETER = 4,
  SPEC_CONE = 5,
} spec_kind_t;

// A parsed sensor. The configurations point into the struct's own arrays (fields, channel
// elevations, excluded bodies): do not copy it; pass it by pointer.
typedef struct spec_sensor {
  spec_kind_t kind;
  uint32_t id;                            // id=; 0 = the bridge's next free id
  char site[SPEC_NAME_MAX];               // site= (lidar, imu, cone): the mount frame
  char joint[SPEC_NAME_MAX];              // joint= (encoder, odometer)
  bool has_wheel_radius;                  // odometer: wheel_radius= was given
  sensim_sensor_t sensor;                 // body_id and mount: filled by the resolver
  sensim_lidar_config_t lidar;
  sensim_imu_config_t imu;
  sensim_encoder_config_t encoder;
  sensim_odometer_config_t odometer;
  sensim_cone_config_t cone;

  // storage behind the configurations' pointers
  char field_names[SPEC_MAX_FIELDS][32];
  const char* fields[SPEC_MAX_FIELDS];
  double elevations[SPEC_MAX_CHANNELS];
  char exclude_names[SPEC_MAX_EXCLUDE][SPEC_NAME_MAX];
  uint32_t nexclude;
  uint32_t exclude_ids[SPEC_MAX_EXCLUDE]; // filled by the resolver
} spec_sensor_t;

// Parse a sensor spec into *spec (initialised here). Returns 0, or -1 with a message in err
// naming the key and what it accepts.
int spec_sensor_parse(const char* text, spec_sensor_t* spec, char* err, size_t err_cap);

// A surface material: "lambertian reflectance=R" or "two_layer refractive_index=...
// extinction_coefficient=... specular_roughness=... diffuse_reflectance=...
// diffuse_roughness=...", plus label=N for the objects that use it (*has_label set).
int spec_material_parse(const char* text, sensim_material_t* mat, uint32_t* label,
                        bool* has_label, char* err, size_t err_cap);

// The environment's medium: "clear_air visibility=V", "fog visibility=V", "rain rate=R",
// "snow rate=R" or "custom attenuation=... refractive_index=... ...".
int spec_ambient_parse(const char* text, sensim_ambient_t* amb, char* err, size_t err_cap);

// Overrides for one geometry: "geom label=N material=NAME group=G" or "geom skip".
typedef struct spec_geom {
  bool skip;                              // not mirrored
  bool has_label;
  uint32_t label;
  bool has_group;
  uint32_t group;
  char material[SPEC_NAME_MAX];           // "" = the engine's own material
} spec_geom_t;

int spec_geom_parse(const char* text, spec_geom_t* geom, char* err, size_t err_cap);

#endif  // SENSIM_BRIDGE_SPEC_H
