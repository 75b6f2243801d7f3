// SPDX-License-Identifier: MIT
// clones.h: SENSIM_CLONES, for a loop the compiler vectorises: the function is built for the
// baseline ISA and, where the compiler can, AVX2 and AVX-512, and the version the CPU runs is
// picked at load time. Each lane does the scalar operations (ISO C: no contraction into fused
// multiply-adds), so every version gives the same bits. Not with sanitizers (their runtime and
// ifuncs do not mix) nor with compilers other than GCC.
#ifndef SENSIM_BASE_CLONES_H_
#define SENSIM_BASE_CLONES_H_

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define SENSIM_CLONES __attribute__((target_clones("default", "avx2", "arch=x86-64-v4")))
#else
#define SENSIM_CLONES
#endif

#endif  // SENSIM_BASE_CLONES_H_
