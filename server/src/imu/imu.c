// SPDX-License-Identifier: MIT
// imu.c: the IMU container: configuration, validation and the per-step sampling of its
// sub-sensors (see imu.h).
#include "imu/imu.h"

#include <math.h>
#include <string.h>

#include "base/mem.h"
#include "base/rng.h"

// Samples one step may produce at a fixed rate; a longer step fails rather than allocate
// without bound.
#define IMU_MAX_SAMPLES_PER_STEP 1000000u

// Bytes the world counts for each record of a step against max_output_bytes (sensor/sensor.h).
#define IMU_RECORD_BYTES 512u

// Highest fixed sample rate, Hz.
#define IMU_MAX_RATE 1e6

// Draw numbers: 16 per sub-sensor and sample (white 0-2, spectral 3-5, drift 6-14).
#define IMU_DRAWS_PER_SUB 16u

enum { SUB_ACC = 0, SUB_GYR = 1, SUB_MAG = 2 };

// The state carried from one step to the next.
typedef struct imu_state {
  imu_motion_t motion;          // velocity estimate at the end of the last step
  triax_drift_t drift[3];       // per sub-sensor
  int have_sample;
  double last_sample_time;      // s
  uint64_t frame;               // records produced
} imu_state_t;

// `st` is the committed state every step starts from; `next` the one staged by the last
// successful step, applied by imu_commit (sensor.h: two phases).
typedef struct imu_sensor {
  imu_config_t c;
  imu_state_t st;
  imu_state_t next;
  int staged;
} imu_sensor_t;

void imu_config_default(imu_config_t* c) {
  memset(c, 0, sizeof(*c));
  c->accelerometer_mount = xform_identity();
  c->gyroscope_mount = xform_identity();
  c->magnetometer_mount = xform_identity();
  triax_config_default(&c->accelerometer);
  triax_config_default(&c->gyroscope);
  triax_config_default(&c->magnetometer);
}

static int check_mount(const pose_t* p, const char* name, err_msg_t* msg) {
  static const char* const kPos[3] = {"x", "y", "z"};
  static const char* const kQuat[4] = {"w", "x", "y", "z"};
  for (int i = 0; i < 3; i++) {
    if (!isfinite(p->p[i])) {
      return err_set(msg, ERR_INVAL, "%s.mount.position.%s = %g is not finite", name, kPos[i],
                     p->p[i]);
    }
  }
  double n = 0.0;
  for (int i = 0; i < 4; i++) {
    if (!isfinite(p->q[i])) {
      return err_set(msg, ERR_INVAL, "%s.mount.orientation.%s = %g is not finite", name,
                     kQuat[i], p->q[i]);
    }
    n = fmax(n, fabs(p->q[i]));
  }
  if (n == 0.0) {
    return err_set(msg, ERR_INVAL, "%s.mount.orientation is the zero quaternion", name);
  }
  return 0;
}

int imu_config_check(const imu_config_t* c, err_msg_t* msg) {
  int rc;
  if (!c->has_accelerometer && !c->has_gyroscope && !c->has_magnetometer) {
    return err_set(msg, ERR_INVAL,
                   "imu has no accelerometer, gyroscope or magnetometer (set at least one)");
  }
  if (!isfinite(c->sample_rate) || c->sample_rate < 0.0 || c->sample_rate > IMU_MAX_RATE) {
    return err_set(msg, ERR_INVAL, "imu.sample_rate = %g must be in [0, %g] Hz (0 = per step)",
                   c->sample_rate, IMU_MAX_RATE);
  }
  if (c->has_accelerometer) {
    if ((rc = check_mount(&c->accelerometer_mount, "imu.accelerometer.chain", msg)) != 0 ||
        (rc = triax_config_check(&c->accelerometer, "imu.accelerometer.chain", msg)) != 0) {
      return rc;
    }
  }
  if (c->has_gyroscope) {
    if ((rc = check_mount(&c->gyroscope_mount, "imu.gyroscope.chain", msg)) != 0 ||
        (rc = triax_config_check(&c->gyroscope, "imu.gyroscope.chain", msg)) != 0) {
      return rc;
    }
    for (int i = 0; i < 9; i++) {
      if (isfinite(c->lae[i]) && fabs(c->lae[i]) <= SENSOR_MAX_VALUE) {
        continue;
      }
      if (c->lae_is_diagonal && i % 4 == 0) {
        static const char* const kAxis[3] = {"x", "y", "z"};
        return err_set(msg, ERR_INVAL,
                       "imu.gyroscope.lae_diagonal.%s = %g must be finite and at most %g in "
                       "magnitude", kAxis[i / 4], c->lae[i], SENSOR_MAX_VALUE);
      }
      return err_set(msg, ERR_INVAL,
                     "imu.gyroscope.lae_matrix.m[%d] = %g must be finite and at most %g in "
                     "magnitude", i, c->lae[i], SENSOR_MAX_VALUE);
    }
  }
  if (c->has_magnetometer) {
    if ((rc = check_mount(&c->magnetometer_mount, "imu.magnetometer.chain", msg)) != 0 ||
        (rc = triax_config_check(&c->magnetometer, "imu.magnetometer.chain", msg)) != 0) {
      return rc;
    }
  }
  return 0;
}

// A sub-sensor's standard normal draws for one sample, zero where its noise terms use none.
typedef struct sub_normals {
  double white[3], spectral[3], drift[9];
} sub_normals_t;

// Lists the draws of one sub-sensor for one sample, only those its configured noise terms use
// (each term has fixed draw numbers, so the others do not shift): draw numbers into draws,
// their destinations in dest. Returns how many.
static uint32_t list_draws(const triax_config_t* c, uint32_t sub, int started,
                           sub_normals_t* to, uint32_t* draws, double** dest) {
  uint32_t base = sub * IMU_DRAWS_PER_SUB;
  uint32_t n = 0;
  for (uint32_t i = 0; i < 3; i++) {
    if (c->noise_stddev[i] > 0.0) {
      draws[n] = base + i;
      dest[n++] = &to->white[i];
    }
    if (c->spectral_density[i] > 0.0) {
      draws[n] = base + 3 + i;
      dest[n++] = &to->spectral[i];
    }
  }
  // the turn-on bias is drawn once, when the drift starts
  const int used[3] = {!started && c->turn_on_stddev > 0.0, c->bias_instability > 0.0,
                       c->random_walk > 0.0};
  for (uint32_t i = 0; i < 9; i++) {
    if (used[i / 3]) {
      draws[n] = base + 6 + i;
      dest[n++] = &to->drift[i];
    }
  }
  return n;
}

// Every configured sub-sensor's draws for one sample, all at once: one key hash, the rounds of
// up to eight draws together. A draw's value depends on its number alone, not on the others
// computed beside it.
static void draw_normals(const imu_config_t* c, const rng_key_t* key,
                         const triax_drift_t drift[3], sub_normals_t to[3]) {
  uint32_t draws[3 * 15];
  double* dest[3 * 15];
  double value[3 * 15];
  uint32_t n = 0;
  memset(to, 0, 3 * sizeof(*to));
  if (c->has_accelerometer) {
    n += list_draws(&c->accelerometer, SUB_ACC, drift[SUB_ACC].started, &to[SUB_ACC],
                    draws + n, dest + n);
  }
  if (c->has_gyroscope) {
    n += list_draws(&c->gyroscope, SUB_GYR, drift[SUB_GYR].started, &to[SUB_GYR], draws + n,
                    dest + n);
  }
  if (c->has_magnetometer) {
    n += list_draws(&c->magnetometer, SUB_MAG, drift[SUB_MAG].started, &to[SUB_MAG],
                    draws + n, dest + n);
  }
  rng_normal_n(key, draws, value, n);
  for (uint32_t i = 0; i < n; i++) {
    *dest[i] = value[i];
  }
}

// Steps 1-6 and the drift of one sub-sensor from its draws; `lae` (nullable) is added before
// the drift.
static void run_chain(const triax_config_t* c, const sub_normals_t* dn, const double ideal[3],
                      double nu, double dt, const double* lae_add, triax_drift_t* drift,
                      double dest[3]) {
  triax_chain(c, ideal, dn->white, dn->spectral, nu, dest);
  if (lae_add) {
    for (int i = 0; i < 3; i++) {
      dest[i] += lae_add[i];
    }
  }
  double add[3];
  triax_drift_advance(c, drift, dt, dn->drift, drift, add);
  for (int i = 0; i < 3; i++) {
    dest[i] += add[i];
  }
  triax_quantize(c, dest, dest);
}

// One sample at fraction s of the step. Fills rec; advances the drift copies.
static void sample(const imu_sensor_t* self, const sensor_ctx_t* ctx, const step_view_t* v,
                   const view_body_t* body, const imu_step_motion_t* m, double s, double nu,
                   double dt_sample, const rng_key_t* key, triax_drift_t drift[3],
                   sensor_imu_t* rec) {
  const imu_config_t* c = &self->c;
  pose_t bpose = xform_interpolate(&body->at[0].pose, &body->at[1].pose, s);
  pose_t imu_pose = xform_compose(&bpose, &ctx->mount);
  double omega[3];
  for (int i = 0; i < 3; i++) {
    omega[i] = (1.0 - s) * m->w0[i] + s * m->w1[i];
  }
  uint32_t nv = 0;
  sub_normals_t dn[3];
  draw_normals(c, key, drift, dn);

  if (c->has_accelerometer) {
    pose_t p = xform_compose(&imu_pose, &c->accelerometer_mount);
    double r[3], ideal[3];
    for (int i = 0; i < 3; i++) {
      r[i] = p.p[i] - bpose.p[i];
    }
    accel_ideal(p.q, m->a, m->alpha, omega, r, v->gravity, c->literal_gravity_sign, ideal);
    run_chain(&c->accelerometer, &dn[SUB_ACC], ideal, nu, dt_sample, NULL, &drift[SUB_ACC],
              rec->acceleration);
    rec->has_acceleration = 1;
    nv += triax_select(&c->accelerometer, rec->acceleration, rec->values + nv);
  }
  if (c->has_gyroscope) {
    pose_t p = xform_compose(&imu_pose, &c->gyroscope_mount);
    double ideal[3], lae[3] = {0, 0, 0};
    gyro_ideal(p.q, omega, ideal);
    int any_lae = 0;
    for (int i = 0; i < 9; i++) {
      any_lae |= c->lae[i] != 0.0;
    }
    if (any_lae) {
      // ideal specific force at the gyroscope, in its frame (same gravity sign)
      double r[3], a[3];
      for (int i = 0; i < 3; i++) {
        r[i] = p.p[i] - bpose.p[i];
      }
      accel_ideal(p.q, m->a, m->alpha, omega, r, v->gravity, c->literal_gravity_sign, a);
      gyro_lae(c->lae, a, lae);
    }
    run_chain(&c->gyroscope, &dn[SUB_GYR], ideal, nu, dt_sample, lae, &drift[SUB_GYR],
              rec->angular_velocity);
    rec->has_angular_velocity = 1;
    nv += triax_select(&c->gyroscope, rec->angular_velocity, rec->values + nv);
  }
  if (c->has_magnetometer) {
    pose_t p = xform_compose(&imu_pose, &c->magnetometer_mount);
    double ideal[3];
    mag_ideal(p.q, &v->magnetic, p.p, ideal);
    run_chain(&c->magnetometer, &dn[SUB_MAG], ideal, nu, dt_sample, NULL, &drift[SUB_MAG],
              rec->magnetic_field);
    rec->has_magnetic_field = 1;
    nv += triax_select(&c->magnetometer, rec->magnetic_field, rec->values + nv);
  }
  rec->nvalues = nv;
}

// The samples of a step over (t0, t1]: the first grid index j0 (fixed rate) and the count, or
// ERR_LIMIT with msg when the step would hold more than IMU_MAX_SAMPLES_PER_STEP or take more
// than `budget` bytes of records (512 a sample, as the world counts them: sensor/view.h).
// Shared by the step and the bound, so that what UpdateState accepts a step always takes.
static int plan_samples(const imu_sensor_t* self, const sensor_ctx_t* ctx, double t0, double t1,
                        uint64_t budget, int64_t* j0_out, int64_t* count_out, err_msg_t* msg) {
  double rate = self->c.sample_rate;
  int64_t count = 1;
  *j0_out = 0;
  if (rate > 0.0) {
    // a time within 1e-9 s of a grid point counts as on it (so steps of exactly 1/rate give
    // one sample each despite rounding)
    const double tol = 1e-9;
    if (!(fabs(t0) * rate < 4e18 && fabs(t1) * rate < 4e18)) {
      return err_set(msg, ERR_LIMIT, "imu %u: time %g s is too large for imu.sample_rate = %g Hz",
                     ctx->id, t1, rate);
    }
    int64_t j0 = (int64_t)floor((t0 + tol) * rate) + 1;
    int64_t j1 = (int64_t)floor((t1 + tol) * rate);
    count = j1 >= j0 ? j1 - j0 + 1 : 0;
    if ((uint64_t)count > IMU_MAX_SAMPLES_PER_STEP) {
      return err_set(msg, ERR_LIMIT,
                     "imu %u: the step (%.17g, %.17g] at imu.sample_rate = %g Hz holds %lld "
                     "samples, more than %u; step more often", ctx->id, t0, t1, rate,
                     (long long)count, IMU_MAX_SAMPLES_PER_STEP);
    }
    *j0_out = j0;
  }
  if ((uint64_t)count > budget / IMU_RECORD_BYTES) {
    return err_set(msg, ERR_LIMIT,
                   "imu %u: the step (%.17g, %.17g] holds %lld samples (imu.sample_rate = %g Hz), "
                   "%llu bytes of records, more than max_output_bytes = %llu; step more often",
                   ctx->id, t0, t1, (long long)count, rate,
                   (unsigned long long)count * IMU_RECORD_BYTES, (unsigned long long)budget);
  }
  *count_out = count;
  return 0;
}


// sensor_ops_t.bound: the bytes of the samples a step over (t0, t1] takes, or why no step can
// cover that interval (too many samples at the fixed rate). Without it a long step was
// accepted at UpdateState and then refused at every Step, which could never shorten it.
static int imu_bound(const void* opaque, const sensor_ctx_t* ctx, double t0, double t1,
                     uint64_t budget, uint64_t* bytes, err_msg_t* msg) {
  int64_t j0 = 0, count = 0;
  int rc = plan_samples(opaque, ctx, t0, t1, budget, &j0, &count, msg);
  *bytes = rc == 0 ? (uint64_t)count * IMU_RECORD_BYTES : 0;
  return rc;
}


static int imu_step(void* opaque, const sensor_ctx_t* ctx, const step_view_t* v,
                    sensor_out_t* out, err_msg_t* msg) {
  imu_sensor_t* self = opaque;
  self->staged = 0;
  const view_body_t* body = view_find_body(v, ctx->body_id);
  if (!body) {
    return err_set(msg, ERR_NOTFOUND, "imu %u: body %u is not in the environment", ctx->id,
                   ctx->body_id);
  }
  imu_step_motion_t m;
  imu_motion_t motion;
  imu_motion_step(body, v->t0, v->t1, &self->st.motion, &m, &motion);

  // the sample times: the step's end, or every multiple of 1/rate in (t0, t1]; imu_bound
  // refused the interval at UpdateState if it holds too many, so this check is only a guard
  double dt = v->t1 - v->t0;
  int64_t j0 = 0, count = 0;
  double rate = self->c.sample_rate;
  int rc = plan_samples(self, ctx, v->t0, v->t1, v->output_budget, &j0, &count, msg);
  if (rc < 0) {
    return rc;
  }

  uint32_t n0 = out->n;
  imu_state_t* nx = &self->next;
  *nx = self->st;
  nx->motion = motion;
  for (int64_t k = 0; k < count; k++) {
    if ((k & 4095) == 4095 && view_cancelled(v)) {
      sensor_out_truncate(out, n0);
      return err_set(msg, ERR_STATE, "imu %u: cancelled after %lld of %lld samples", ctx->id,
                     (long long)k, (long long)count);
    }
    double t, nu;
    if (rate > 0.0) {
      t = fmin((double)(j0 + k) / rate, v->t1);
      nu = rate;
    } else {
      t = v->t1;
      nu = dt > 0.0 ? 1.0 / dt : 0.0;
    }
    double s = view_fraction(v, t);
    double dts = nx->have_sample ? t - nx->last_sample_time : 0.0;
    rng_key_t key = {.seed = v->seed, .stream = ctx->id, .frame = v->step, .index = (uint64_t)k};
    sensor_record_t* r = sensor_out_push(out, ctx->id, SENSOR_REC_IMU);
    if (!r) {
      sensor_out_truncate(out, n0);
      return err_set(msg, ERR_NOMEM, "imu %u: out of memory for its samples", ctx->id);
    }
    r->time = t;
    r->frame = nx->frame++;
    sample(self, ctx, v, body, &m, s, nu, dts, &key, nx->drift, &r->u.imu);
    nx->have_sample = 1;
    nx->last_sample_time = t;
  }
  self->staged = 1;
  return 0;
}

static void imu_commit(void* opaque) {
  imu_sensor_t* self = opaque;
  if (self->staged) {
    self->st = self->next;
    self->staged = 0;
  }
}

static void imu_destroy(void* opaque) { mem_free(opaque); }

static const sensor_ops_t kImuOps = {
    .kind_name = "imu",
    .step = imu_step,
    .commit = imu_commit,
    .bound = imu_bound,
    .destroy = imu_destroy,
};

int imu_create(const imu_config_t* c, sensor_t* out, err_msg_t* msg) {
  int rc = imu_config_check(c, msg);
  if (rc != 0) {
    return rc;
  }
  imu_sensor_t* self = mem_calloc(1, sizeof(*self));
  if (!self) {
    return err_set(msg, ERR_NOMEM, "out of memory for an imu");
  }
  self->c = *c;
  xform_quat_normalize(self->c.accelerometer_mount.q);
  xform_quat_normalize(self->c.gyroscope_mount.q);
  xform_quat_normalize(self->c.magnetometer_mount.q);
  triax_config_resolve(&self->c.accelerometer);
  triax_config_resolve(&self->c.gyroscope);
  triax_config_resolve(&self->c.magnetometer);
  memset(out, 0, sizeof(*out));
  out->kind = SENSOR_IMU;
  out->ops = &kImuOps;
  out->self = self;
  return 0;
}
