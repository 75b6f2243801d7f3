// SPDX-License-Identifier: MIT
// simd.h: the one way the core runs instructions beyond the x86-64 baseline (SSE2).
//
// A kernel has a baseline form and, in the same file, a form per instruction set it gains
// from; the caller picks one at run time from simd_level():
//
//   #if SIMD_X86
//     if (simd_level() >= SIMD_AVX2) {
//       return kernel_avx2(...);       // SIMD_AVX2_FN
//     }
//   #endif
//     return kernel(...);             // the baseline form, on every CPU
//
// A form is either written with intrinsics under SIMD_AVX2_FN (the scene backend's packet kernels,
// the random numbers' Philox rounds, the quantized codec's encoder loops), or it is the baseline's
// plain C loop compiled again for the compiler to vectorise (noise quantiles, rays to the world):
//
//   static inline SIMD_BODY void kernel(double* x, size_t n) { ...a loop... }
//   SIMD_FORMS(kernel, (double* x, size_t n), (x, n))    // kernel_avx2, kernel_avx512
//   ...
//   SIMD_CALL(kernel, (x, n));                           // the form of simd_level()
//
// Every form does the same operations on each element in the same order, without fused
// multiply-adds (the core builds with -ffp-contract=off), so every form gives the same bits,
// and clouds do not depend on the CPU.
//
// The level is the CPU's best, read once, lowered by the environment variable SENSIM_SIMD
// ("baseline", "avx2", "avx512": the other forms run on this machine, as on an older CPU) and
// by simd_set_max (tests compare the forms in one process). Why not ifunc-based target_clones:
// their resolvers run before a sanitizer's runtime is up (so sanitized builds ran only the
// baseline), and nothing can choose another form at run time.
//
// Thread: any.
#ifndef SENSIM_BASE_SIMD_H_
#define SENSIM_BASE_SIMD_H_

#include "base/err.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define SIMD_X86 1
#define SIMD_AVX2_FN __attribute__((target("avx2")))
#define SIMD_AVX512_FN __attribute__((target("arch=x86-64-v4")))
#else
#define SIMD_X86 0
#endif

// A plain C loop body that the forms of a kernel share (inlined into each form).
#define SIMD_BODY __attribute__((always_inline))

// The AVX2 and AVX-512 forms of a SIMD_BODY kernel returning void (static functions
// kernel_avx2 and kernel_avx512), and the call of the form of simd_level().
#if SIMD_X86
#define SIMD_FORMS(kernel, params, args)                    \
  SIMD_AVX2_FN static void kernel##_avx2 params {           \
    kernel args;                                            \
  }                                                         \
  SIMD_AVX512_FN static void kernel##_avx512 params {       \
    kernel args;                                            \
  }
#define SIMD_CALL(kernel, args)       \
  do {                                \
    switch (simd_level()) {           \
      case SIMD_AVX512:               \
        kernel##_avx512 args;         \
        break;                        \
      case SIMD_AVX2:                 \
        kernel##_avx2 args;           \
        break;                        \
      default:                        \
        kernel args;                  \
    }                                 \
  } while (0)
#else
#define SIMD_FORMS(kernel, params, args)
#define SIMD_CALL(kernel, args) kernel args
#endif

typedef enum simd_level {
  SIMD_BASELINE = 0,            // x86-64 (SSE2), or any other processor
  SIMD_AVX2,                    // AVX2 (256-bit integer and double vectors)
  SIMD_AVX512,                  // x86-64-v4 (AVX-512 F, BW, CD, DQ, VL)
  SIMD_LEVEL_COUNT
} simd_level_t;

#define SIMD_LEVEL_ENV "SENSIM_SIMD"

// The level kernels run at: the CPU's best, at most SENSIM_SIMD's and simd_set_max's.
simd_level_t simd_level(void);

// The processor's best level (not lowered).
simd_level_t simd_cpu_level(void);

// The highest level this process may run: the CPU's, lowered by SENSIM_SIMD (not by
// simd_set_max). Tests comparing every form go up to it.
simd_level_t simd_allowed_level(void);

// Run at most `max` from now on (SIMD_LEVEL_COUNT: no bound but the CPU's and SENSIM_SIMD's);
// returns the previous bound. For tests and benchmarks that compare the forms: not while
// another thread runs kernels whose forms must agree within one result.
simd_level_t simd_set_max(simd_level_t max);

// "baseline", "avx2", "avx512".
const char* simd_level_name(simd_level_t level);

// 0 when SENSIM_SIMD is unset or names a level; else ERR_INVAL naming the variable and the
// levels. simd_level ignores a bad value; the scene device refuses it (every process that
// traces rays makes one first).
int simd_check_env(err_msg_t* msg) CHECKRET;

#endif  // SENSIM_BASE_SIMD_H_
