// SPDX-License-Identifier: MIT
// check.h: range checks shared by material.c and ambient.c (private to material/). Each
// returns 0, or ERR_INVAL with "<field> = <value> ..." written to msg.
#ifndef SENSIM_MATERIAL_CHECK_H_
#define SENSIM_MATERIAL_CHECK_H_

#include <math.h>

#include "base/err.h"


static inline int check_finite(const char* field, double v, err_msg_t* msg) {
  if (!isfinite(v)) {
    return err_set(msg, ERR_INVAL, "%s = %g is not finite", field, v);
  }
  return 0;
}


// v in [0, 1].
static inline int check_unit_interval(const char* field, double v, err_msg_t* msg) {
  int rc = check_finite(field, v, msg);
  if (rc == 0 && !(v >= 0.0 && v <= 1.0)) {
    rc = err_set(msg, ERR_INVAL, "%s = %g is outside [0, 1]", field, v);
  }
  return rc;
}


// v > 0.
static inline int check_positive(const char* field, double v, err_msg_t* msg) {
  int rc = check_finite(field, v, msg);
  if (rc == 0 && !(v > 0.0)) {
    rc = err_set(msg, ERR_INVAL, "%s = %g must be > 0", field, v);
  }
  return rc;
}


// v >= lo.
static inline int check_at_least(const char* field, double v, double lo, err_msg_t* msg) {
  int rc = check_finite(field, v, msg);
  if (rc == 0 && !(v >= lo)) {
    rc = err_set(msg, ERR_INVAL, "%s = %g must be >= %g", field, v, lo);
  }
  return rc;
}


// v in [lo, hi].
static inline int check_range(const char* field, double v, double lo, double hi,
                              err_msg_t* msg) {
  int rc = check_finite(field, v, msg);
  if (rc == 0 && !(v >= lo && v <= hi)) {
    rc = err_set(msg, ERR_INVAL, "%s = %g is outside [%g, %g]", field, v, lo, hi);
  }
  return rc;
}


// v >= 0.
static inline int check_nonnegative(const char* field, double v, err_msg_t* msg) {
  return check_at_least(field, v, 0.0, msg);
}

#endif  // SENSIM_MATERIAL_CHECK_H_
