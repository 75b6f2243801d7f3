// SPDX-License-Identifier: MIT
// encoder.c: position encoder on a joint (see encoder.h).
#include "joint/encoder.h"

#include <math.h>
#include <string.h>

#include "base/mem.h"
#include "base/rng.h"

// speed/frame: the committed state each step starts from; next_*: staged by the last
// successful step, applied by encoder_commit (sensor.h: two phases).
typedef struct encoder_sensor {
  encoder_config_t c;
  encoder_speed_t speed;
  uint64_t frame;
  encoder_speed_t next_speed;
  int staged;
} encoder_sensor_t;

void encoder_config_default(encoder_config_t* c, encoder_mode_t mode) {
  memset(c, 0, sizeof(*c));
  c->scaling = 1.0;
  c->mode = mode;
  if (mode == ENCODER_MODE_INCREMENTAL) {
    c->lower = 0.0;
    c->upper = 2.0 * M_PI;
  } else {
    c->lower = -INFINITY;
    c->upper = INFINITY;
  }
}

int encoder_config_check(const encoder_config_t* c, err_msg_t* msg) {
  if (c->joint_id == 0) {
    return err_set(msg, ERR_INVAL, "encoder.joint_id = 0 must name a joint (> 0)");
  }
  if (!(c->noise_stddev >= 0.0 && c->noise_stddev <= SENSOR_MAX_VALUE)) {
    return err_set(msg, ERR_INVAL, "encoder.noise_stddev = %g must be in [0, %g]",
                   c->noise_stddev, SENSOR_MAX_VALUE);
  }
  if (!(c->resolution >= 0.0 && c->resolution <= SENSOR_MAX_VALUE)) {
    return err_set(msg, ERR_INVAL, "encoder.resolution = %g must be in [0, %g] (0 = off)",
                   c->resolution, SENSOR_MAX_VALUE);
  }
  if (!(fabs(c->scaling) <= SENSOR_MAX_VALUE)) {
    return err_set(msg, ERR_INVAL, "encoder.scaling = %g must be finite and at most %g in "
                   "magnitude", c->scaling, SENSOR_MAX_VALUE);
  }
  if (c->mode != ENCODER_MODE_ABSOLUTE && c->mode != ENCODER_MODE_INCREMENTAL) {
    return err_set(msg, ERR_INVAL, "encoder.mode = %d is not ENCODER_ABSOLUTE or "
                   "ENCODER_INCREMENTAL", (int)c->mode);
  }
  if (isnan(c->lower) || isnan(c->upper) || !(c->lower < c->upper)) {
    return err_set(msg, ERR_INVAL,
                   "encoder.range_lower = %g must be below encoder.range_upper = %g", c->lower,
                   c->upper);
  }
  if (c->mode == ENCODER_MODE_INCREMENTAL &&
      (!isfinite(c->lower) || !isfinite(c->upper) || !isfinite(c->upper - c->lower))) {
    return err_set(msg, ERR_INVAL,
                   "encoder.range_lower = %g and encoder.range_upper = %g must be finite in "
                   "incremental mode",
                   c->lower, c->upper);
  }
  if (!isfinite(c->speed_timeout) || c->speed_timeout < 0.0) {
    return err_set(msg, ERR_INVAL, "encoder.speed_timeout = %g must be finite and >= 0 (0 = off)",
                   c->speed_timeout);
  }
  return 0;
}

double encoder_wrap(double u, double lower, double upper) {
  double span = upper - lower;
  double k = floor((u - lower) / span);
  if (!isfinite(k)) {
    // a span so small against u that the turn count overflows (a range of 5e-324): fmod is
    // exact, where u - span * inf would be -inf
    double r = fmod(u - lower, span);
    return lower + (r < 0.0 ? r + span : r);
  }
  double m = u - span * k;
  // rounding can land exactly on U; the range is half-open
  return m >= upper ? lower : m;
}

double encoder_bin(double u, double res) {
  // a step finer than u's own resolution (5e-324, or a bin width that underflowed to 0) bins
  // nothing: u / res would overflow and the bin be infinite or NaN
  double k = floor(u / res);
  return isfinite(k) ? res * k : u;
}

double encoder_measure(const encoder_config_t* c, double q, double n) {
  double u = q;
  if (c->noise_stddev > 0.0) {
    u += c->noise_stddev * n;
  }
  if (c->resolution > 0.0) {
    u = encoder_bin(u, c->resolution);
  }
  u *= c->scaling;
  if (c->mode == ENCODER_MODE_INCREMENTAL) {
    return encoder_wrap(u, c->lower, c->upper);
  }
  return fmax(c->lower, fmin(u, c->upper));
}

double encoder_speed_update(const encoder_config_t* c, encoder_speed_t* s, double m, double t) {
  if (!s->started) {
    s->started = 1;
    s->m_ref = m;
    s->t_ref = t;
    s->speed = 0.0;
    return 0.0;
  }
  // a change since the reference (m_ref is the previous reading whenever every change was
  // taken); over less than SENSOR_MIN_INTERVAL the reference stays, and the speed is measured
  // over a longer interval at a later step (a quotient over 1e-300 s could overflow)
  if (m != s->m_ref && t - s->t_ref >= SENSOR_MIN_INTERVAL) {
    double delta = m - s->m_ref;
    if (c->mode == ENCODER_MODE_INCREMENTAL) {
      double span = c->upper - c->lower;
      double turns = round(delta / span);
      // remainder is exact where the turn count overflows (a tiny span); it may round a half
      // turn the other way, which only the degenerate ranges reach
      delta = isfinite(turns) ? delta - span * turns : remainder(delta, span);
    }
    s->speed = delta / (t - s->t_ref);
    s->m_ref = m;
    s->t_ref = t;
  }
  if (c->speed_timeout > 0.0 && t - s->t_ref > c->speed_timeout) {
    return 0.0;
  }
  return s->speed;
}

static int encoder_step(void* opaque, const sensor_ctx_t* ctx, const step_view_t* v,
                        sensor_out_t* out, err_msg_t* msg) {
  encoder_sensor_t* self = opaque;
  self->staged = 0;
  const view_joint_t* j = view_find_joint(v, self->c.joint_id);
  if (!j) {
    return err_set(msg, ERR_NOTFOUND, "encoder %u: joint %u is not in the environment", ctx->id,
                   self->c.joint_id);
  }
  double n = 0.0;
  if (self->c.noise_stddev > 0.0) {
    rng_key_t key = {.seed = v->seed, .stream = ctx->id, .frame = v->step, .index = 0};
    n = rng_normal(&key, 0);
  }
  double m = encoder_measure(&self->c, j->position[1], n);
  encoder_speed_t sp = self->speed;
  double speed = encoder_speed_update(&self->c, &sp, m, v->t1);
  sensor_record_t* r = sensor_out_push(out, ctx->id, SENSOR_REC_SCALAR);
  if (!r) {
    return err_set(msg, ERR_NOMEM, "encoder %u: out of memory for its sample", ctx->id);
  }
  r->time = v->t1;
  r->frame = self->frame;
  r->u.scalar.position = m;
  r->u.scalar.has_speed = 1;
  r->u.scalar.speed = speed;
  self->next_speed = sp;
  self->staged = 1;
  return 0;
}

static void encoder_commit(void* opaque) {
  encoder_sensor_t* self = opaque;
  if (self->staged) {
    self->speed = self->next_speed;
    self->frame++;
    self->staged = 0;
  }
}

static void encoder_destroy(void* opaque) { mem_free(opaque); }

static const sensor_ops_t kEncoderOps = {
    .kind_name = "encoder",
    .step = encoder_step,
    .commit = encoder_commit,
    .destroy = encoder_destroy,
};

int encoder_create(const encoder_config_t* c, sensor_t* out, err_msg_t* msg) {
  int rc = encoder_config_check(c, msg);
  if (rc != 0) {
    return rc;
  }
  encoder_sensor_t* self = mem_calloc(1, sizeof(*self));
  if (!self) {
    return err_set(msg, ERR_NOMEM, "out of memory for an encoder");
  }
  self->c = *c;
  memset(out, 0, sizeof(*out));
  out->kind = SENSOR_ENCODER;
  out->ops = &kEncoderOps;
  out->self = self;
  out->joint_id = c->joint_id;
  return 0;
}
