// SPDX-License-Identifier: MIT
// clock.h: monotonic time.
#ifndef SENSIM_BASE_CLOCK_H_
#define SENSIM_BASE_CLOCK_H_

#include <stdint.h>

// Monotonic nanoseconds since an arbitrary origin. Thread: any.
uint64_t clock_now_ns(void);

#endif  // SENSIM_BASE_CLOCK_H_
