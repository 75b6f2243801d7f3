// SPDX-License-Identifier: MIT
// imu.h: the inertial measurement unit (docs/models/imu.md): a container of up to three
// triaxial sub-sensors (accelerometer, gyroscope, magnetometer), each at its own mount relative
// to the IMU frame, which is mounted on a body. The ideal signals of the sub-sensors are pure
// functions (accelerometer.c, gyroscope.c, magnetometer.c); the body's velocities and
// accelerations at a sample come from motion.c; imu.c samples them and runs the chain of
// triaxial.h.
//
// Sampling: by default one sample per step, at the step's end t1. With a fixed sample rate,
// one sample at every multiple of 1/rate in (t0, t1] (none in a short step, several in a long
// one), the body state interpolated between the two ends of the step.
#ifndef SENSIM_IMU_IMU_H_
#define SENSIM_IMU_IMU_H_

#include "base/err.h"
#include "base/xform.h"
#include "imu/triaxial.h"
#include "sensor/field.h"
#include "sensor/sensor.h"
#include "sensor/view.h"

//---------------- Ideal signals (sensor frame; q = world <- sensor orientation)

// Specific force: F^T (a - g) (literal_sign: F^T (a + g), the sign as printed in the AGX text),
// with the point acceleration a = a_origin + alpha x r + omega x (omega x r), r = sensor position
// minus body origin (world). Reads (0, 0, +9.80665) level at rest under g = (0, 0, -9.80665).
void accel_ideal(const double q[4], const double a_origin[3], const double alpha[3],
                 const double omega[3], const double r[3], const double g[3], int literal_sign,
                 double dest[3]);

// Angular velocity in the sensor frame: F^T omega.
void gyro_ideal(const double q[4], const double omega[3], double dest[3]);

// Linear-acceleration effect: u += A a (A row-major, (rad/s)/(m/s^2), a = ideal specific force
// in the gyroscope frame).
void gyro_lae(const double lae[9], const double a[3], double u[3]);

// Flux density at the sensor, sensor frame: F^T B(p).
void mag_ideal(const double q[4], const field_magnetic_t* f, const double p[3], double dest[3]);

//---------------- Body motion at a sample (motion.c)

// Velocity estimate of a body at the end of the previous step.
typedef struct imu_motion {
  int have;                     // an estimate exists (false before the first step)
  double t;                     // its time, s
  double v[3];                  // body-origin velocity, m/s, world
  double w[3];                  // angular velocity, rad/s, world
} imu_motion_t;

// The body's motion over one step: velocities at both ends and the (constant) accelerations.
typedef struct imu_step_motion {
  double v0[3], w0[3];          // at t0
  double v1[3], w1[3];          // at t1
  double a[3];                  // body-origin acceleration (v1 - v0) / dt, 0 without history
  double alpha[3];              // angular acceleration (w1 - w0) / dt
} imu_step_motion_t;

// Angular velocity that turns q0 into q1 in dt seconds (world frame, shortest arc).
void imu_angular_rate(const double q0[4], const double q1[4], double dt, double dest[3]);

// Velocities at the end t1 of the step: the ones the client sent with that state
// (has_velocity), else backward differences of the poses over the step: (p1 - p0) / dt and the
// rotation q1 q0^-1 / dt (zero when dt = 0). Velocities at t0: the client's when sent, else the
// previous step's estimate at t0 (*prev), else those at t1 (no acceleration on the first
// step). Accelerations: (end - start) / dt. *next receives the estimate at t1 for the next step.
void imu_motion_step(const view_body_t* body, double t0, double t1, const imu_motion_t* prev,
                     imu_step_motion_t* m, imu_motion_t* next);

//---------------- The IMU sensor

typedef struct imu_config {
  int has_accelerometer, has_gyroscope, has_magnetometer;
  pose_t accelerometer_mount;   // relative to the IMU frame
  pose_t gyroscope_mount;
  pose_t magnetometer_mount;
  triax_config_t accelerometer, gyroscope, magnetometer;
  int literal_gravity_sign;     // accelerometer: F^T (a + g)
  double lae[9];                // gyroscope linear-acceleration effect, row-major (0 = off)
  int lae_is_diagonal;          // lae came as its diagonal (errors name lae_diagonal.<axis>)
  double sample_rate;           // Hz; 0 = one sample per step at its end
} imu_config_t;

// No sub-sensor, identity mounts, ideal chains, no LAE, one sample per step.
void imu_config_default(imu_config_t* c);

// Validate (errors name the field: "imu.gyroscope.noise_stddev.x = -1 must be >= 0").
int imu_config_check(const imu_config_t* c, err_msg_t* msg) CHECKRET;

// Build the sensor (validated; mounts normalised, scalar cross-axis sensitivities expanded).
// ERR_INVAL or ERR_NOMEM.
int imu_create(const imu_config_t* c, sensor_t* out, err_msg_t* msg) CHECKRET;

#endif  // SENSIM_IMU_IMU_H_
