// SPDX-License-Identifier: MIT
// rng.c: Philox-4x32-10 and the distributions drawn from it (see rng.h).
#include "base/rng.h"

#include <math.h>

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

static void mulhilo(uint32_t a, uint32_t b, uint32_t* hi, uint32_t* lo) {
  uint64_t p = (uint64_t)a * b;
  *hi = (uint32_t)(p >> 32);
  *lo = (uint32_t)p;
}

void rng_philox(uint32_t ctr[4], uint32_t key0, uint32_t key1) {
  for (int r = 0; r < 10; r++) {
    uint32_t hi0, lo0, hi1, lo1;
    mulhilo(PHILOX_M0, ctr[0], &hi0, &lo0);
    mulhilo(PHILOX_M1, ctr[2], &hi1, &lo1);
    uint32_t c0 = hi1 ^ ctr[1] ^ key0;
    uint32_t c1 = lo1;
    uint32_t c2 = hi0 ^ ctr[3] ^ key1;
    uint32_t c3 = lo0;
    ctr[0] = c0;
    ctr[1] = c1;
    ctr[2] = c2;
    ctr[3] = c3;
    key0 += PHILOX_W0;
    key1 += PHILOX_W1;
  }
}

// The splitmix64 finaliser (Steele, Lea, Flood, "Fast splittable pseudorandom number
// generators", OOPSLA 2014): a bijection of 64 bits with full avalanche.
static uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}


// Philox key: the seed mixed with a hash of (stream, frame); counter: (index, draw, the
// stream). Distinct (stream, frame) pairs give unrelated keys (a 64-bit hash: collisions have
// probability 2^-64 per pair), distinct (index, draw) distinct counters.
static uint64_t philox_key(const rng_key_t* k) {
  return k->seed ^ mix64(k->frame + mix64(((uint64_t)k->stream << 1) | 1u));
}


void rng_words(const rng_key_t* k, uint32_t draw, uint32_t out[4]) {
  uint64_t key = philox_key(k);
  out[0] = (uint32_t)k->index;
  out[1] = (uint32_t)(k->index >> 32);
  out[2] = draw;
  out[3] = k->stream;
  rng_philox(out, (uint32_t)key, (uint32_t)(key >> 32));
}


// Lanes of rng_words_n: the four counter words of RNG_LANES rays side by side, so that each
// round is a few vector instructions for all of them (32 x 32 -> 64-bit products: pmuludq).
#define RNG_LANES 16

// Built for the baseline ISA and, where the compiler can, for AVX2 and AVX-512 too, picked at
// load time by the CPU: integer arithmetic, so every version gives the same words.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_ADDRESS__)
#define RNG_CLONES __attribute__((target_clones("default", "avx2", "arch=x86-64-v4")))
#else
#define RNG_CLONES
#endif

RNG_CLONES
void rng_words_n(const rng_key_t* k, const uint64_t* index, uint32_t draw, uint32_t (*out)[4],
                 size_t n) {
  uint64_t key = philox_key(k);
  uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
  for (size_t base = 0; base < n; base += RNG_LANES) {
    size_t m = n - base < RNG_LANES ? n - base : RNG_LANES;
    uint32_t c0[RNG_LANES], c1[RNG_LANES], c2[RNG_LANES], c3[RNG_LANES];
    for (size_t l = 0; l < RNG_LANES; l++) {
      uint64_t ix = index[base + (l < m ? l : 0)];
      c0[l] = (uint32_t)ix;
      c1[l] = (uint32_t)(ix >> 32);
      c2[l] = draw;
      c3[l] = k->stream;
    }
    uint32_t r0 = k0, r1 = k1;
    for (int r = 0; r < 10; r++) {
      for (size_t l = 0; l < RNG_LANES; l++) {
        uint64_t p0 = (uint64_t)PHILOX_M0 * c0[l];
        uint64_t p1 = (uint64_t)PHILOX_M1 * c2[l];
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1[l] ^ r0;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3[l] ^ r1;
        c1[l] = (uint32_t)p1;
        c3[l] = (uint32_t)p0;
        c0[l] = n0;
        c2[l] = n2;
      }
      r0 += PHILOX_W0;
      r1 += PHILOX_W1;
    }
    for (size_t l = 0; l < m; l++) {
      out[base + l][0] = c0[l];
      out[base + l][1] = c1[l];
      out[base + l][2] = c2[l];
      out[base + l][3] = c3[l];
    }
  }
}


// 52 random bits to the open interval (0, 1): (n + 1/2) / 2^52 is at most 1 - 2^-53, which a
// double represents exactly (53 bits would round the top value to 1.0).
static double to_open_unit(uint32_t hi, uint32_t lo) {
  uint64_t bits = (((uint64_t)hi << 32) | lo) >> 12;
  return ((double)bits + 0.5) * (1.0 / 4503599627370496.0);
}


double rng_uniform(const rng_key_t* k, uint32_t draw) {
  uint32_t w[4];
  rng_words(k, draw, w);
  return to_open_unit(w[0], w[1]);
}

double rng_normal(const rng_key_t* k, uint32_t draw) {
  uint32_t w[4];
  rng_words(k, draw, w);
  double u1 = to_open_unit(w[0], w[1]);
  double u2 = to_open_unit(w[2], w[3]);
  return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

double rng_gamma(const rng_key_t* k, uint32_t draw, double shape, double scale) {
  double boost = 1.0;
  uint32_t d0 = draw;
  if (shape < 1.0) {
    boost = pow(rng_uniform(k, d0++), 1.0 / shape);
    shape += 1.0;
  }
  double d = shape - 1.0 / 3.0;
  double c = 1.0 / sqrt(9.0 * d);
  double v = 1.0;
  for (uint32_t attempt = 0; attempt < 32; attempt++) {
    uint32_t w[4];
    rng_words(k, d0 + 2 * attempt, w);
    double u1 = to_open_unit(w[0], w[1]);
    double u2 = to_open_unit(w[2], w[3]);
    double x = sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
    double t = 1.0 + c * x;
    if (t <= 0.0) {
      continue;
    }
    v = t * t * t;
    double u = rng_uniform(k, d0 + 2 * attempt + 1);
    if (log(u) < 0.5 * x * x + d - d * v + d * log(v)) {
      break;
    }
  }
  return d * v * scale * boost;
}
