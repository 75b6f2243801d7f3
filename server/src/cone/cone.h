// SPDX-License-Identifier: MIT
// cone.h: the cone proximity sensor (docs/models/cone.md): the closest point of the scene inside
// a truncated elliptic cone (boresight +x of the sensor frame, full angles fov_h and fov_v,
// planar cap at x = range), with its range, azimuth atan2(y, x), projected elevation
// atan2(z, x), object id, world point and the displacement speed of that point between steps.
//
// Two modes. LINES reproduces the line method of Kallin's thesis ("Sensor simulation", Umea
// 2018): each quad face is sampled by N lines, each line clipped to the cone, and the closest
// point of the lines is reported. EXACT (the default) reports the true closest point of the
// scene inside the cone (cone_exact.c).
//
// World interface: the sensor reads the scene's objects from step_view_t.objects (view.h):
// kind, size or triangles, scale and world pose at t1. Without them it detects nothing.
#ifndef SENSIM_CONE_CONE_H_
#define SENSIM_CONE_CONE_H_

#include <stdint.h>

#include "base/err.h"
#include "base/xform.h"
#include "sensor/sensor.h"

typedef enum cone_mode {
  CONE_MODE_EXACT = 0,
  CONE_MODE_LINES = 1,
} cone_mode_t;

typedef struct cone_config {
  double fov_horizontal;        // full angle, rad, in (0, pi)
  double fov_vertical;          // full angle, rad, in (0, pi)
  double range;                 // m, > 0
  cone_mode_t mode;
  uint32_t lines_per_face;      // N >= 2 (LINES)
} cone_config_t;

// Generatrices sampled around the lateral surface in EXACT mode (cone_exact.c).
#define CONE_LATERAL_SAMPLES 256

// The cone in the sensor frame: tangents of the half angles and the cap; and, when `sampled`,
// the sampled generatrices g_i = (1, a cos theta_i, b sin theta_i), theta_i = 2 pi i / SAMPLES,
// built once (cone_shape_init) instead of two sines per sample and triangle on every step.
// A shape made without them (sampled 0) computes them where needed, to the same bits.
// With `window` (and the table), a search first bounds where a piece can be seen from the
// apex and evaluates only the samples whose generatrix passes there: the others are proven
// misses, so the readings are the same bits as with window 0 (every sample evaluated, the
// reference path of the tests).
typedef struct cone_shape {
  double a, b;                  // tan(fov_h / 2), tan(fov_v / 2)
  double range;
  double na, nb;                // sqrt(1 + a^2), sqrt(1 + b^2): the pyramid's side normals
  int sampled;
  int window;
  double gy[CONE_LATERAL_SAMPLES];     // a cos theta_i (apart from gz: scanned on their own)
  double gz[CONE_LATERAL_SAMPLES];     // b sin theta_i
} cone_shape_t;

// The shape of full angles fov_h, fov_v (rad) and cap `range`, with its sampled generatrices.
void cone_shape_init(cone_shape_t* k, double fov_h, double fov_v, double range);

// The closest point found so far (sensor frame).
typedef struct cone_best {
  int found;
  double d2;                    // |q|^2
  double q[3];
  uint32_t object_id;
  // EXACT mode in two passes over the scene: 1 offers only the pieces whose own closest point
  // is inside the cone (cheap), so that pass 2 (the boundary searches) can skip every piece
  // that cannot come closer; 0 = one full pass.
  int pass;
  // Set in pass 1 by a piece that left its boundary search to pass 2. Without one, pass 2 would
  // offer nothing new (every piece would repeat what it offered in pass 1), and is skipped.
  int deferred;
  // Nullable: polled between chunks of a mesh's faces; once view_cancelled says so, the
  // evaluation stops and sets `cancelled`.
  const step_view_t* view;
  int cancelled;
} cone_best_t;

// Lines one step may trace in LINES mode (faces x lines_per_face over every object the sensor
// considers); over it, the step samples each face with fewer lines (the most that fit, at
// least 2), and a scene where 2 lines a face pass it refuses the step.
#define CONE_MAX_LINES_PER_STEP 10000000ull

// Faces of an object in LINES mode (triangles of a mesh, 6 for a box, 1 for a plane, the
// tessellation of a curved primitive).
uint64_t cone_object_faces(const view_object_t* obj);

// Defaults: 45 x 30 degrees, range 20 m, EXACT, 10 lines per face.
void cone_config_default(cone_config_t* c);

int cone_config_check(const cone_config_t* c, err_msg_t* msg) CHECKRET;

// p inside the truncated cone: 0 < x <= range and (y / (x a))^2 + (z / (x b))^2 <= 1.
int cone_inside(const cone_shape_t* k, const double p[3]);

// Clip the segment q0 + t (q1 - q0), t in [0, 1], to the cone: 1 and [*tin, *tout] when a
// piece is inside, else 0.
int cone_clip_segment(const cone_shape_t* k, const double q0[3], const double q1[3], double* tin,
                      double* tout);

// Closest point to the origin of the part of segment q0-q1 inside the cone; offered to best.
void cone_offer_segment(const cone_shape_t* k, const double q0[3], const double q1[3],
                        uint32_t object_id, cone_best_t* best);

// Offer point q (inside the cone) to best.
void cone_offer_point(const double q[3], uint32_t object_id, cone_best_t* best);

// LINES mode on one quad face v0 v1 v2 v3 (sensor frame; v0-v1 and v3-v2 opposite edges):
// lines m = 0..n-1 from v0 + (v3 - v0) m/(n-1) to v1 + (v2 - v1) m/(n-1).
void cone_lines_quad(const cone_shape_t* k, const double v[4][3], uint32_t n, uint32_t object_id,
                     cone_best_t* best);

// EXACT mode on one triangle (sensor frame).
void cone_exact_triangle(const cone_shape_t* k, const double v[3][3], uint32_t object_id,
                         cone_best_t* best);

// A view object (view.h) in the sensor frame: sensor <- object pose and scale.
typedef struct cone_object {
  const view_object_t* obj;
  pose_t pose;                  // sensor <- object
} cone_object_t;

// Point of the object frame (scale applied first) in the sensor frame.
void cone_object_point(const cone_object_t* o, const double x[3], double dest[3]);

// Evaluate one object in `mode` (lines per face n for LINES); offers to best.
void cone_object_eval(const cone_shape_t* k, const cone_object_t* o, cone_mode_t mode, uint32_t n,
                      cone_best_t* best);

// EXACT mode on a curved analytic primitive (sphere, cylinder, capsule).
void cone_exact_curved(const cone_shape_t* k, const cone_object_t* o, cone_best_t* best);

int cone_create(const cone_config_t* c, sensor_t* out, err_msg_t* msg) CHECKRET;

#endif  // SENSIM_CONE_CONE_H_
