// SPDX-License-Identifier: MIT
// clock.h: monotonic time.
#ifndef SENSIM_BASE_CLOCK_H_
#define SENSIM_BASE_CLOCK_H_

#include <stdint.h>

// Monotonic nanoseconds since an arbitrary origin. Thread: any.
uint64_t clock_now_ns(void);

// The same clock as the kernel last ticked it (CLOCK_MONOTONIC_COARSE): never ahead of
// clock_now_ns, behind it by at most a scheduler tick (a few ms), about a quarter of its
// cost. For deadlines of seconds polled often. Thread: any.
uint64_t clock_coarse_ns(void);

#endif  // SENSIM_BASE_CLOCK_H_
