// SPDX-License-Identifier: MIT
// odometer.c: wheel odometer on a revolute joint (see odometer.h).
#include "joint/odometer.h"

#include <math.h>
#include <string.h>

#include "base/mem.h"
#include "base/rng.h"
#include "joint/encoder.h"

// frame: records committed; a step stages one more, applied by odometer_commit (sensor.h).
typedef struct odometer_sensor {
  odometer_config_t c;
  uint64_t frame;
  int staged;
} odometer_sensor_t;

void odometer_config_default(odometer_config_t* c) {
  memset(c, 0, sizeof(*c));
  c->wheel_radius = 0.5;
  c->pulses_per_revolution = 1024;
  c->scaling = 1.0;
}

int odometer_config_check(const odometer_config_t* c, err_msg_t* msg) {
  if (c->joint_id == 0) {
    return err_set(msg, ERR_INVAL, "odometer.joint_id = 0 must name a joint (> 0)");
  }
  if (!(c->wheel_radius > 0.0 && c->wheel_radius <= SENSOR_MAX_VALUE)) {
    return err_set(msg, ERR_INVAL, "odometer.wheel_radius = %g must be > 0 and at most %g",
                   c->wheel_radius, SENSOR_MAX_VALUE);
  }
  if (!(c->noise_stddev >= 0.0 && c->noise_stddev <= SENSOR_MAX_VALUE)) {
    return err_set(msg, ERR_INVAL, "odometer.noise_stddev = %g must be in [0, %g]",
                   c->noise_stddev, SENSOR_MAX_VALUE);
  }
  if (!(fabs(c->scaling) <= SENSOR_MAX_VALUE)) {
    return err_set(msg, ERR_INVAL, "odometer.scaling = %g must be finite and at most %g in "
                   "magnitude", c->scaling, SENSOR_MAX_VALUE);
  }
  return 0;
}

double odometer_measure(const odometer_config_t* c, double theta, double n) {
  double d = c->wheel_radius * theta;
  if (c->noise_stddev > 0.0) {
    d += c->noise_stddev * n;
  }
  if (c->pulses_per_revolution > 0) {
    d = encoder_bin(d, 2.0 * M_PI * c->wheel_radius / c->pulses_per_revolution);
  }
  return c->scaling * d;
}

static int odometer_step(void* opaque, const sensor_ctx_t* ctx, const step_view_t* v,
                         sensor_out_t* out, err_msg_t* msg) {
  odometer_sensor_t* self = opaque;
  self->staged = 0;
  const view_joint_t* j = view_find_joint(v, self->c.joint_id);
  if (!j) {
    return err_set(msg, ERR_NOTFOUND, "odometer %u: joint %u is not in the environment", ctx->id,
                   self->c.joint_id);
  }
  double n = 0.0;
  if (self->c.noise_stddev > 0.0) {
    rng_key_t key = {.seed = v->seed, .stream = ctx->id, .frame = v->step, .index = 0};
    n = rng_normal(&key, 0);
  }
  sensor_record_t* r = sensor_out_push(out, ctx->id, SENSOR_REC_SCALAR);
  if (!r) {
    return err_set(msg, ERR_NOMEM, "odometer %u: out of memory for its sample", ctx->id);
  }
  r->time = v->t1;
  r->frame = self->frame;
  r->u.scalar.position = odometer_measure(&self->c, j->position[1], n);
  self->staged = 1;
  return 0;
}

static void odometer_commit(void* opaque) {
  odometer_sensor_t* self = opaque;
  if (self->staged) {
    self->frame++;
    self->staged = 0;
  }
}

static void odometer_destroy(void* opaque) { mem_free(opaque); }

static const sensor_ops_t kOdometerOps = {
    .kind_name = "odometer",
    .step = odometer_step,
    .commit = odometer_commit,
    .destroy = odometer_destroy,
};

int odometer_create(const odometer_config_t* c, sensor_t* out, err_msg_t* msg) {
  int rc = odometer_config_check(c, msg);
  if (rc != 0) {
    return rc;
  }
  odometer_sensor_t* self = mem_calloc(1, sizeof(*self));
  if (!self) {
    return err_set(msg, ERR_NOMEM, "out of memory for an odometer");
  }
  self->c = *c;
  memset(out, 0, sizeof(*out));
  out->kind = SENSOR_ODOMETER;
  out->ops = &kOdometerOps;
  out->self = self;
  out->joint_id = c->joint_id;
  out->revolute_joint = 1;
  return 0;
}
