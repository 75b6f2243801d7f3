// SPDX-License-Identifier: MIT
// rng.h: counter-based random numbers. Every draw is a pure function of a key (environment seed,
// sensor id, frame or step index, ray or sample index) and a draw number, so results do not
// depend on the order in which threads evaluate rays, nor on the number of threads
// (docs/time.md, "Determinism"). No state, no locks.
//
// The generator is Philox-4x32 with 10 rounds (Salmon et al., "Parallel random numbers: as easy
// as 1, 2, 3", SC 2011): the Philox key is the seed mixed with a hash of (sensor, frame), the
// counter (index, draw, sensor) is enciphered: one Philox evaluation per draw. Thread: any.
#ifndef SENSIM_BASE_RNG_H_
#define SENSIM_BASE_RNG_H_

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct rng_key {
  uint64_t seed;      // environment seed
  uint32_t stream;    // sensor id (or another independent stream)
  uint64_t frame;     // frame (lidar) or step/sample index
  uint64_t index;     // ray or sample index within the frame
} rng_key_t;

// The bare Philox-4x32-10 bijection: enciphers ctr in place under key (k0, k1).
void rng_philox(uint32_t ctr[4], uint32_t k0, uint32_t k1);

// Four independent 32-bit words for draw number `draw` (each draw is a new counter).
void rng_words(const rng_key_t* k, uint32_t draw, uint32_t out[4]);

// rng_words of draw `draw` for n keys that differ only in their index (index[i]): out[i] equals
// rng_words({k->seed, k->stream, k->frame, index[i]}, draw). The key hash is computed once and
// the rounds run sixteen rays at a time where the CPU has AVX2 (thirty-two with AVX-512).
void rng_words_n(const rng_key_t* k, const uint64_t* index, uint32_t draw, uint32_t (*out)[4],
                 size_t n);

// Uniform in the open interval (0, 1), 52 bits. Uses draw `draw`.
double rng_uniform(const rng_key_t* k, uint32_t draw);

// The 52 bits a uniform takes from two words: the top 52 of hi:lo.
static inline uint64_t rng_bits52(uint32_t hi, uint32_t lo) {
  return (((uint64_t)hi << 32) | lo) >> 12;
}

// The uniform of 52 bits b, (b + 1/2) / 2^52: in the open interval (0, 1) and growing with b.
// The top value, 1 - 2^-53, is a double exactly (53 bits would round it to 1.0). Every uniform
// of the project (rng_uniform, the lidar's noise) is this one function of the bits.
// (double)b is formed as 2^52 + b (b as the mantissa under 2^52's exponent, exactly) less
// 2^52, the same value: AVX2 has no vector conversion from a 64-bit integer, and with the cast
// the compiler left loops over uniforms scalar.
static inline double rng_unit_of_bits(uint64_t b) {
  const double two52 = 4503599627370496.0;
  const uint64_t bits = b | UINT64_C(0x4330000000000000);   // b < 2^52
  double d;
  memcpy(&d, &bits, sizeof d);
  return ((d - two52) + 0.5) * (1.0 / two52);
}

// Standard normal N(0, 1) by the Box-Muller transform of one draw (two 52-bit uniforms).
double rng_normal(const rng_key_t* k, uint32_t draw);

// rng_normal of draws draws[0..n) under one key, into out[0..n): the same values bit for bit,
// the key hashed once and the Philox rounds run eight draws at a time where the CPU has AVX2
// (an IMU sample's noise terms: a dozen draws of one key).
void rng_normal_n(const rng_key_t* k, const uint32_t* draws, double* out, size_t n);

// Gamma(shape k > 0, scale theta > 0) by Marsaglia and Tsang ("A simple method for generating
// gamma variables", ACM TOMS 2000), shape < 1 boosted by U^(1/k). Uses draws from `draw` on
// (each attempt takes the next draw numbers, up to draw + 64; the last attempt's candidate is
// returned if all are rejected, which has probability far below 1e-30).
double rng_gamma(const rng_key_t* k, uint32_t draw, double shape, double scale);

#endif  // SENSIM_BASE_RNG_H_
