// SPDX-License-Identifier: MIT
// rng.c: Philox-4x32-10 and the distributions drawn from it (see rng.h).
#include "base/rng.h"

#include <math.h>

#include "base/simd.h"

#if SIMD_X86
#include <immintrin.h>
#endif

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


// The words of counter (index, draw, stream) under Philox key `key`.
static void words_of(uint64_t key, uint64_t index, uint32_t draw, uint32_t stream,
                     uint32_t out[4]) {
  out[0] = (uint32_t)index;
  out[1] = (uint32_t)(index >> 32);
  out[2] = draw;
  out[3] = stream;
  rng_philox(out, (uint32_t)key, (uint32_t)(key >> 32));
}


void rng_words(const rng_key_t* k, uint32_t draw, uint32_t out[4]) {
  words_of(philox_key(k), k->index, draw, k->stream, out);
}


// rng_words_n's AVX2 form: eight counters per vector, two vectors at a time, each round's two
// 32 x 32 -> 64-bit products per lane as two pmuludq (the even lanes, then the odd ones shifted
// down), the high and low halves blended back into lanes. Integer arithmetic: the scalar words
// exactly.
#if SIMD_X86
SIMD_AVX2_FN static inline void mul_hilo8(__m256i a, __m256i m, __m256i* hi, __m256i* lo) {
  __m256i even = _mm256_mul_epu32(a, m);
  __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
  *hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
  *lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
}


// The counters of eight rays index[0..8) as vectors of words 0 to 3.
SIMD_AVX2_FN static inline void counters8(const uint64_t* index, uint32_t draw, uint32_t stream,
                                          __m256i c[4]) {
  __m256i i0 = _mm256_loadu_si256((const __m256i*)index);        // rays 0-3
  __m256i i1 = _mm256_loadu_si256((const __m256i*)(index + 4));  // rays 4-7
  const __m256i perm = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
  __m256i a = _mm256_permutevar8x32_epi32(i0, perm);   // lo0..lo3 hi0..hi3
  __m256i b = _mm256_permutevar8x32_epi32(i1, perm);   // lo4..lo7 hi4..hi7
  c[0] = _mm256_permute2x128_si256(a, b, 0x20);
  c[1] = _mm256_permute2x128_si256(a, b, 0x31);
  c[2] = _mm256_set1_epi32((int)draw);
  c[3] = _mm256_set1_epi32((int)stream);
}


// One Philox round of eight counters under round key (k0, k1).
SIMD_AVX2_FN static inline void round8(__m256i c[4], __m256i k0, __m256i k1) {
  const __m256i m0 = _mm256_set1_epi32((int)PHILOX_M0), m1 = _mm256_set1_epi32((int)PHILOX_M1);
  __m256i hi0, lo0, hi1, lo1;
  mul_hilo8(c[0], m0, &hi0, &lo0);
  mul_hilo8(c[2], m1, &hi1, &lo1);
  c[0] = _mm256_xor_si256(_mm256_xor_si256(hi1, c[1]), k0);
  c[2] = _mm256_xor_si256(_mm256_xor_si256(hi0, c[3]), k1);
  c[1] = lo1;
  c[3] = lo0;
}


// Eight enciphered counters back to four words per ray, into out[0..8).
SIMD_AVX2_FN static inline void store8(const __m256i c[4], uint32_t (*out)[4]) {
  __m256i t0 = _mm256_unpacklo_epi32(c[0], c[1]);   // r0w0 r0w1 r1w0 r1w1 | r4.. r5..
  __m256i t1 = _mm256_unpackhi_epi32(c[0], c[1]);   // r2.. r3.. | r6.. r7..
  __m256i t2 = _mm256_unpacklo_epi32(c[2], c[3]);
  __m256i t3 = _mm256_unpackhi_epi32(c[2], c[3]);
  __m256i r0 = _mm256_unpacklo_epi64(t0, t2);       // r0 | r4
  __m256i r1 = _mm256_unpackhi_epi64(t0, t2);       // r1 | r5
  __m256i r2 = _mm256_unpacklo_epi64(t1, t3);       // r2 | r6
  __m256i r3 = _mm256_unpackhi_epi64(t1, t3);       // r3 | r7
  _mm256_storeu_si256((__m256i*)out[0], _mm256_permute2x128_si256(r0, r1, 0x20));
  _mm256_storeu_si256((__m256i*)out[2], _mm256_permute2x128_si256(r2, r3, 0x20));
  _mm256_storeu_si256((__m256i*)out[4], _mm256_permute2x128_si256(r0, r1, 0x31));
  _mm256_storeu_si256((__m256i*)out[6], _mm256_permute2x128_si256(r2, r3, 0x31));
}


// The words of eight draws draws[0..8) of one index (counter words 0, 1 and 3 alike) into
// out[0..8): rng_normal_n's rounds, those of philox16 on one set.
SIMD_AVX2_FN static void philox8_draws(uint64_t index, const uint32_t* draws, uint32_t stream,
                                       uint32_t k0, uint32_t k1, uint32_t (*out)[4]) {
  __m256i c[4];
  c[0] = _mm256_set1_epi32((int)(uint32_t)index);
  c[1] = _mm256_set1_epi32((int)(uint32_t)(index >> 32));
  c[2] = _mm256_loadu_si256((const __m256i*)draws);
  c[3] = _mm256_set1_epi32((int)stream);
  for (int r = 0; r < 10; r++) {
    round8(c, _mm256_set1_epi32((int)k0), _mm256_set1_epi32((int)k1));
    k0 += PHILOX_W0;
    k1 += PHILOX_W1;
  }
  store8(c, out);
}


// Sixteen rays' words from index[0..16) into out[0..16): two independent sets of eight
// interleaved, so that one set's products overlap the other's.
SIMD_AVX2_FN static void philox16(const uint64_t* index, uint32_t draw, uint32_t stream,
                                  uint32_t k0, uint32_t k1, uint32_t (*out)[4]) {
  __m256i a[4], b[4];
  counters8(index, draw, stream, a);
  counters8(index + 8, draw, stream, b);
  for (int r = 0; r < 10; r++) {
    __m256i r0 = _mm256_set1_epi32((int)k0), r1 = _mm256_set1_epi32((int)k1);
    round8(a, r0, r1);
    round8(b, r0, r1);
    k0 += PHILOX_W0;
    k1 += PHILOX_W1;
  }
  store8(a, out);
  store8(b, out + 8);
}


// rng_words_n's AVX-512 form: the AVX2 form's steps on sixteen counters per vector, two
// vectors (32 rays) at a time; the same integer operations, so the same words.
// The products' halves are picked out of the even and odd words' 64-bit products by one
// two-source permutation each (the AVX2 form's shift and blend are two instructions).
SIMD_AVX512_FN static inline void mul_hilo16(__m512i a, __m512i m, __m512i* hi, __m512i* lo) {
  const __m512i pick_hi =
      _mm512_setr_epi32(1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
  const __m512i pick_lo =
      _mm512_setr_epi32(0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30);
  __m512i even = _mm512_mul_epu32(a, m);
  __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), m);
  *hi = _mm512_permutex2var_epi32(even, pick_hi, odd);
  *lo = _mm512_permutex2var_epi32(even, pick_lo, odd);
}


// The counters of sixteen rays index[0..16) as vectors of words 0 to 3.
SIMD_AVX512_FN static inline void counters16(const uint64_t* index, uint32_t draw,
                                             uint32_t stream, __m512i c[4]) {
  __m512i i0 = _mm512_loadu_si512((const void*)index);         // rays 0-7
  __m512i i1 = _mm512_loadu_si512((const void*)(index + 8));   // rays 8-15
  const __m512i lo =
      _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  c[0] = _mm512_permutex2var_epi32(i0, lo, i1);
  c[1] = _mm512_permutex2var_epi32(i0, _mm512_add_epi32(lo, _mm512_set1_epi32(1)), i1);
  c[2] = _mm512_set1_epi32((int)draw);
  c[3] = _mm512_set1_epi32((int)stream);
}


// One Philox round of sixteen counters under round key (k0, k1).
SIMD_AVX512_FN static inline void round16(__m512i c[4], __m512i k0, __m512i k1) {
  const __m512i m0 = _mm512_set1_epi32((int)PHILOX_M0), m1 = _mm512_set1_epi32((int)PHILOX_M1);
  __m512i hi0, lo0, hi1, lo1;
  mul_hilo16(c[0], m0, &hi0, &lo0);
  mul_hilo16(c[2], m1, &hi1, &lo1);
  c[0] = _mm512_xor_si512(_mm512_xor_si512(hi1, c[1]), k0);
  c[2] = _mm512_xor_si512(_mm512_xor_si512(hi0, c[3]), k1);
  c[1] = lo1;
  c[3] = lo0;
}


// Sixteen enciphered counters back to four words per ray, into out[0..16): words interleaved
// within each 128-bit lane (rays 4l + 0..3 of lane l), then the lanes regrouped.
SIMD_AVX512_FN static inline void store16(const __m512i c[4], uint32_t (*out)[4]) {
  __m512i t0 = _mm512_unpacklo_epi32(c[0], c[1]);
  __m512i t1 = _mm512_unpackhi_epi32(c[0], c[1]);
  __m512i t2 = _mm512_unpacklo_epi32(c[2], c[3]);
  __m512i t3 = _mm512_unpackhi_epi32(c[2], c[3]);
  __m512i r0 = _mm512_unpacklo_epi64(t0, t2);       // rays 0 | 4 | 8 | 12
  __m512i r1 = _mm512_unpackhi_epi64(t0, t2);       // rays 1 | 5 | 9 | 13
  __m512i r2 = _mm512_unpacklo_epi64(t1, t3);       // rays 2 | 6 | 10 | 14
  __m512i r3 = _mm512_unpackhi_epi64(t1, t3);       // rays 3 | 7 | 11 | 15
  __m512i s0 = _mm512_shuffle_i64x2(r0, r1, 0x88);  // rays 0 | 8 | 1 | 9
  __m512i s1 = _mm512_shuffle_i64x2(r0, r1, 0xDD);  // rays 4 | 12 | 5 | 13
  __m512i s2 = _mm512_shuffle_i64x2(r2, r3, 0x88);  // rays 2 | 10 | 3 | 11
  __m512i s3 = _mm512_shuffle_i64x2(r2, r3, 0xDD);  // rays 6 | 14 | 7 | 15
  _mm512_storeu_si512((void*)out[0], _mm512_shuffle_i64x2(s0, s2, 0x88));
  _mm512_storeu_si512((void*)out[4], _mm512_shuffle_i64x2(s1, s3, 0x88));
  _mm512_storeu_si512((void*)out[8], _mm512_shuffle_i64x2(s0, s2, 0xDD));
  _mm512_storeu_si512((void*)out[12], _mm512_shuffle_i64x2(s1, s3, 0xDD));
}


// Thirty-two rays' words from index[0..32) into out[0..32): two sets of sixteen interleaved.
SIMD_AVX512_FN static void philox32(const uint64_t* index, uint32_t draw, uint32_t stream,
                                    uint32_t k0, uint32_t k1, uint32_t (*out)[4]) {
  __m512i a[4], b[4];
  counters16(index, draw, stream, a);
  counters16(index + 16, draw, stream, b);
  for (int r = 0; r < 10; r++) {
    __m512i r0 = _mm512_set1_epi32((int)k0), r1 = _mm512_set1_epi32((int)k1);
    round16(a, r0, r1);
    round16(b, r0, r1);
    k0 += PHILOX_W0;
    k1 += PHILOX_W1;
  }
  store16(a, out);
  store16(b, out + 16);
}
#endif


void rng_words_n(const rng_key_t* k, const uint64_t* index, uint32_t draw, uint32_t (*out)[4],
                 size_t n) {
  uint64_t key = philox_key(k);
  size_t i = 0;
#if SIMD_X86
  if (simd_level() >= SIMD_AVX512) {
    for (; i + 32 <= n; i += 32) {
      philox32(index + i, draw, k->stream, (uint32_t)key, (uint32_t)(key >> 32), out + i);
    }
  }
  if (simd_level() >= SIMD_AVX2) {
    for (; i + 16 <= n; i += 16) {
      philox16(index + i, draw, k->stream, (uint32_t)key, (uint32_t)(key >> 32), out + i);
    }
  }
#endif
  for (; i < n; i++) {
    words_of(key, index[i], draw, k->stream, out[i]);
  }
}


// Two words to the open interval (0, 1).
static double to_open_unit(uint32_t hi, uint32_t lo) {
  return rng_unit_of_bits(rng_bits52(hi, lo));
}


double rng_uniform(const rng_key_t* k, uint32_t draw) {
  uint32_t w[4];
  rng_words(k, draw, w);
  return to_open_unit(w[0], w[1]);
}

// Box-Muller of one draw's words: the one expression of every standard normal here.
static double normal_of_words(const uint32_t w[4]) {
  double u1 = to_open_unit(w[0], w[1]);
  double u2 = to_open_unit(w[2], w[3]);
  return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

double rng_normal(const rng_key_t* k, uint32_t draw) {
  uint32_t w[4];
  rng_words(k, draw, w);
  return normal_of_words(w);
}

void rng_normal_n(const rng_key_t* k, const uint32_t* draws, double* out, size_t n) {
  uint64_t key = philox_key(k);
  uint32_t w[8][4];
  size_t i = 0;
#if SIMD_X86
  if (simd_level() >= SIMD_AVX2) {
    while (n - i >= 2) {
      // a last block of fewer than eight repeats its last draw in the lanes past the end
      size_t m = n - i < 8 ? n - i : 8;
      uint32_t d[8];
      for (size_t j = 0; j < 8; j++) {
        d[j] = draws[i + (j < m ? j : m - 1)];
      }
      philox8_draws(k->index, d, k->stream, (uint32_t)key, (uint32_t)(key >> 32), w);
      for (size_t j = 0; j < m; j++) {
        out[i + j] = normal_of_words(w[j]);
      }
      i += m;
    }
  }
#endif
  for (; i < n; i++) {
    words_of(key, k->index, draws[i], k->stream, w[0]);
    out[i] = normal_of_words(w[0]);
  }
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
    double x = normal_of_words(w);
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
