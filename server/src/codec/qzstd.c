// SPDX-License-Identifier: MIT
// qzstd.c: positions as a range image. Each valid point becomes three integers, range
// R = round(r / range_step), azimuth A = round(atan2(y, x) / angle_step) and elevation
// E = round(atan2(z, |xy|) / angle_step), with angle_step = precision / (2 r_max) so that an
// angle's rounding moves a point by at most a quarter of the precision. Each integer is
// predicted from the same channel in the previous columns (the points `stride` and 2 `stride`
// back: 2 v1 - v2, a straight line, leaves zero for a regular pattern), and the residual is
// zigzagged; all arithmetic wraps in uint32, so decoding is exact whatever the values. A miss
// (a zero point, NaN or any non-finite coordinate) codes R = 0 and its kind in A, and takes the
// predictions as its values so the image stays smooth across it. The residual planes and the
// other bytes of the points (each less the same byte `stride` points back) are byte-shuffled
// (byte k of every value together), then zstd. Encoder and decoder keep per-channel state
// (the last two values of each channel, its last angles and their cosines and sines) and work
// a block of points at a time, so that nothing but the zstd input (kept by the thread, work_t)
// is the size of the cloud; angles are found without atan2 from near references (pos_enc_t),
// a point's azimuth first from the sensor's own when the cloud has it. The stride is the
// sensor's when it says, else detected from the elevations.
#include "codec/qzstd.h"

#include <math.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "base/kept.h"
#include "base/mem.h"
#include "base/simd.h"
#include "codec/compress.h"

#define NO_POSITIONS 0xFFFFFFFFu
#define KIND_ZERO 0u               // the point is (+0, +0, +0)
#define KIND_NAN 1u                // x, y, z are the quiet NaN 0x7FC00000
#define KIND_RAW 2u                // the 12 bytes follow in the exception list
#define VALUE_LIMIT (1u << 29)     // |R|, |A|, |E| below it: a residual never reaches 2^31
#define STRIDE_SEARCH 512u         // largest stride detected
#define STRIDE_SAMPLE 256u         // points compared per candidate stride
#define CODE_BLOCK 256u            // points whose codes are byte-shuffled together


static inline uint32_t zigzag(uint32_t v) {
  return (v << 1) ^ (0u - (v >> 31));
}


static inline uint32_t unzigzag(uint32_t c) {
  return (c >> 1) ^ (0u - (c & 1u));
}


static inline int32_t as_i32(uint32_t v) {
  return v < 0x80000000u ? (int32_t)v : -(int32_t)(~v) - 1;
}


// Nearest integer of |v| < 2^31, inline and without a branch (lrint is a library call under
// errno rules; a sign test mispredicts on residuals of random sign).
static inline int32_t round_i32(double v) {
#if defined(__SSE2__)
  return _mm_cvtsd_si32(_mm_set_sd(v));  // the current rounding mode: to nearest, ties even
#else
  return (int32_t)(v + copysign(0.5, v));
#endif
}


static void put_u32(uint8_t* p, uint32_t v) {
  for (int k = 0; k < 4; k++) {
    p[k] = (uint8_t)(v >> (8 * k));
  }
}


static uint32_t get_u32(const uint8_t* p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}


static void put_f64(uint8_t* p, double v) {
  uint64_t u;
  memcpy(&u, &v, 8);
  put_u32(p, (uint32_t)u);
  put_u32(p + 4, (uint32_t)(u >> 32));
}


static double get_f64(const uint8_t* p) {
  uint64_t u = (uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32;
  double v;
  memcpy(&v, &u, 8);
  return v;
}


static inline float get_f32(const uint8_t* p) {
  float v;
  memcpy(&v, p, 4);  // little-endian host (x86-64, aarch64)
  return v;
}


// A measured point: x, y, z (their bits) finite and not all zero (+0 or -0).
static inline int measured(uint32_t bx, uint32_t by, uint32_t bz) {
  return ((bx & 0x7F800000u) != 0x7F800000u) & ((by & 0x7F800000u) != 0x7F800000u) &
         ((bz & 0x7F800000u) != 0x7F800000u) & (((bx | by | bz) & 0x7FFFFFFFu) != 0u);
}


// Cosines and sines of the angles met so far, by integer angle: a scan has few distinct
// azimuths (one per column) and elevations (one per channel), so most points find theirs.
#define TRIG_CACHE 4096u

typedef struct trig_cache {
  int32_t key[TRIG_CACHE];
  uint8_t used[TRIG_CACHE];
  double c[TRIG_CACHE];
  double s[TRIG_CACHE];
} trig_cache_t;


static inline void trig(trig_cache_t* t, int32_t k, double step, double* c, double* s) {
  uint32_t h = ((uint32_t)k * 2654435761u) >> 20;
  if (!t->used[h] || t->key[h] != k) {
    double a = (double)k * step;
    t->key[h] = k;
    t->used[h] = 1;
    t->c[h] = cos(a);
    t->s[h] = sin(a);
  }
  *c = t->c[h];
  *s = t->s[h];
}


// Byte offsets of a point that are not positions, in increasing order; returns their number.
static uint32_t rest_offsets(uint32_t step, const uint32_t xyz[3], int has_pos, uint32_t* off) {
  uint32_t n = 0;
  for (uint32_t b = 0; b < step; b++) {
    int pos = 0;
    for (int k = 0; has_pos && k < 3; k++) {
      pos |= b >= xyz[k] && b < xyz[k] + 4;
    }
    if (!pos) {
      off[n++] = b;
    }
  }
  return n;
}

// The angle of (u, v) in steps, found from a reference angle `ref` (steps) of cosine c and
// sine s, the last angle of the point's channel: the sine of the angle between the two is
// t = (v c - u s) / |(u, v)| (inv: 1 / |(u, v)|), and asin t = t + t^3/6 + 3 t^5/40 to within
// 5 t^7/112 (3.5e-11 rad at |t| <= 0.05, a few millionths of a step). Returns 0 (*q not set)
// when the point is not within 0.05 rad of the reference, when |(u, v)| is 0, or when the
// result leaves [-lim, lim] (the range atan2 gives): the caller then uses atan2.
static inline int near_angle(double u, double v, double inv, int32_t ref, double c, double s,
                             double inv_step, int32_t lim, int32_t* q) {
  double cc = u * c + v * s, t = (v * c - u * s) * inv;
  if (!(cc > 0.0 && fabs(t) <= 0.05)) {
    return 0;
  }
  double t2 = t * t;
  double d = t + t * t2 * ((1.0 / 6.0) + t2 * (3.0 / 40.0));
  int32_t r = ref + round_i32(d * inv_step);
  if (r > lim || r < -lim) {
    return 0;
  }
  *q = r;
  return 1;
}


// Whether the angle of (u, v) (its length len) rounds to a reference angle of cosine c and sine
// s (inv_step: steps per radian): within a quarter turn of it, and the sine of the angle between
// the two below 0.49 steps. The SIMD forms of the encoder test the same, in the same order.
static inline int rounds_to(double u, double v, double len, double c, double s,
                            double inv_step) {
  return u * c + v * s > 0.0 && fabs(v * c - u * s) * inv_step < 0.49 * len;
}


// The position a decoder rebuilds from range rq (steps of range_step), the cosine and sine of
// the azimuth (ca, sa) and of the elevation (ce, se). The encoder measures its error on it.
static inline void rebuild(int32_t rq, double range_step, double ca, double sa, double ce,
                           double se, float v[3]) {
  double range = (double)rq * range_step, rc = range * ce;
  v[0] = (float)(rc * ca);
  v[1] = (float)(rc * sa);
  v[2] = (float)(range * se);
}


// The squared distance from (x, y, z) to v.
static inline double dist2(const float v[3], double x, double y, double z) {
  double dx = v[0] - x, dy = v[1] - y, dz = v[2] - z;
  return dx * dx + dy * dy + dz * dz;
}


// Byte k (k = 0..3) of codes[i] into planes[k n + i], i < m.
static void shuffle_codes(const uint32_t* codes, size_t m, uint8_t* planes, size_t n) {
  size_t i = 0;
#if defined(__SSE2__)
  const __m128i lo = _mm_set1_epi32(0xFF);
  for (; i + 16 <= m; i += 16) {
    __m128i v[4];
    for (int j = 0; j < 4; j++) {
      v[j] = _mm_loadu_si128((const __m128i*)(const void*)(codes + i + 4 * j));
    }
    for (int k = 0; k < 4; k++) {
      __m128i sh = _mm_cvtsi32_si128(8 * k);
      __m128i a = _mm_packs_epi32(_mm_and_si128(_mm_srl_epi32(v[0], sh), lo),
                                  _mm_and_si128(_mm_srl_epi32(v[1], sh), lo));
      __m128i b = _mm_packs_epi32(_mm_and_si128(_mm_srl_epi32(v[2], sh), lo),
                                  _mm_and_si128(_mm_srl_epi32(v[3], sh), lo));
      _mm_storeu_si128((__m128i*)(void*)(planes + (size_t)k * n + i), _mm_packus_epi16(a, b));
    }
  }
#endif
  for (; i < m; i++) {
    for (int k = 0; k < 4; k++) {
      planes[(size_t)k * n + i] = (uint8_t)(codes[i] >> (8 * k));
    }
  }
}


// A code stream of the body being written: its plane (a byte per point: the code, or 255 for a
// code of 255 or more) and its overflow values (such codes less 255, in point order; room
// for one per point).
typedef struct code_out {
  uint8_t* plane;
  uint32_t* ovf;
  uint32_t m;
} code_out_t;


// The codes[j] whose bit j is set in `over` (codes of 255 or more) onto the stream's overflow
// values.
static inline void take_overflows(code_out_t* s, const uint32_t* codes, uint32_t over) {
  while (over) {
    s->ovf[s->m++] = codes[__builtin_ctz(over)] - 255u;
    over &= over - 1u;
  }
}


// The codes of the points at .. at + m - 1 into the stream s.
static void narrow_codes(const uint32_t* codes, size_t m, code_out_t* s, size_t at) {
  uint8_t* plane = s->plane + at;
  size_t i = 0;
#if defined(__SSE2__)
  const __m128i lo = _mm_set1_epi32(0xFF), bias = _mm_set1_epi32(INT32_MIN);
  const __m128i big = _mm_set1_epi32(254 ^ INT32_MIN), ff = _mm_set1_epi8(-1);
  for (; i + 16 <= m; i += 16) {
    __m128i v[4];
    for (int j = 0; j < 4; j++) {
      __m128i c = _mm_loadu_si128((const __m128i*)(const void*)(codes + i + 4 * j));
      // the low byte, all ones where the code is 255 or more (unsigned compare)
      v[j] = _mm_or_si128(_mm_and_si128(c, lo),
                          _mm_and_si128(_mm_cmpgt_epi32(_mm_xor_si128(c, bias), big), lo));
    }
    __m128i b = _mm_packus_epi16(_mm_packs_epi32(v[0], v[1]), _mm_packs_epi32(v[2], v[3]));
    _mm_storeu_si128((__m128i*)(void*)(plane + i), b);
    take_overflows(s, codes + i, (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(b, ff)));
  }
#endif
  for (; i < m; i++) {
    uint32_t c = codes[i];
    plane[i] = (uint8_t)(c < 255u ? c : 255u);
    if (c >= 255u) {
      s->ovf[s->m++] = c - 255u;
    }
  }
}


// A code stream of the body being read: its plane, its overflow values (4 planes of m bytes)
// and how many of them were read.
typedef struct code_in {
  const uint8_t* plane;
  const uint8_t* ovf;
  uint32_t m, used;
} code_in_t;


// The codes of the points at .. at + m - 1 of the stream s into codes; -1 when the stream
// has fewer overflow values than its plane needs, or one that makes a code of 2^32 or more.
static int read_codes(code_in_t* s, size_t at, size_t m, uint32_t* codes) {
  const uint8_t* plane = s->plane + at;
  const size_t om = s->m;
  size_t i = 0;
  while (i < m) {
    size_t end = m - i < 16 ? m : i + 16;
#if defined(__SSE2__)
    if (end == i + 16) {
      const __m128i zero = _mm_setzero_si128();
      __m128i b = _mm_loadu_si128((const __m128i*)(const void*)(plane + i));
      if (_mm_movemask_epi8(_mm_cmpeq_epi8(b, _mm_set1_epi8(-1))) == 0) {
        __m128i l = _mm_unpacklo_epi8(b, zero), h = _mm_unpackhi_epi8(b, zero);
        _mm_storeu_si128((__m128i*)(void*)(codes + i), _mm_unpacklo_epi16(l, zero));
        _mm_storeu_si128((__m128i*)(void*)(codes + i + 4), _mm_unpackhi_epi16(l, zero));
        _mm_storeu_si128((__m128i*)(void*)(codes + i + 8), _mm_unpacklo_epi16(h, zero));
        _mm_storeu_si128((__m128i*)(void*)(codes + i + 12), _mm_unpackhi_epi16(h, zero));
        i = end;
        continue;
      }
    }
#endif
    for (; i < end; i++) {
      uint32_t c = plane[i];
      if (c == 255u) {
        if (s->used >= om) {
          return -1;
        }
        const uint8_t* o = s->ovf + s->used++;
        uint32_t v = (uint32_t)o[0] | (uint32_t)o[om] << 8 | (uint32_t)o[2 * om] << 16 |
                     (uint32_t)o[3 * om] << 24;
        if (v > UINT32_MAX - 255u) {
          return -1;  // no code is 2^32 or more
        }
        c += v;
      }
      codes[i] = c;
    }
  }
  return 0;
}


// The channel state of the decoder (the points i = k mod stride): the channel's last two
// values of R, A, E (the second last equal to the last one after the channel's first point, so
// that 2 last - second last is always the prediction), and its last elevation (once set) with
// its cosine and sine. The encoder keeps the same values by channel in arrays (pos_enc_t).
typedef struct chan_ref {
  uint32_t h1[3], h2[3];
  int32_t e;
  int set;
  double ce, se;
} chan_ref_t;


// Split the other bytes into uint32 words (4 offsets in a row starting at a multiple of 4: a
// float32 or uint32 field) and single bytes; returns the number of words.
static uint32_t rest_words(const uint32_t* off, uint32_t nrest, uint32_t* woff, uint32_t* boff,
                           uint32_t* nbyte) {
  uint32_t nw = 0, nb = 0;
  for (uint32_t j = 0; j < nrest;) {
    if (off[j] % 4 == 0 && j + 3 < nrest && off[j + 3] == off[j] + 3) {
      woff[nw++] = off[j];
      j += 4;
    } else {
      boff[nb++] = off[j++];
    }
  }
  *nbyte = nb;
  return nw;
}


// The layout of a body (docs/streams.md): the bytes of a point other than positions as words
// (offsets woff) and single bytes (offsets boff), the code streams (R, A, E with positions,
// then one per word), and where the planes of the single bytes and the points kept raw start.
typedef struct body_layout {
  uint32_t* off;                   // 3 step entries: the other offsets, woff, boff (mem_free)
  uint32_t* woff;
  uint32_t* boff;
  uint32_t nword, nbyte, nstream;
  size_t single_at, exc_at;
} body_layout_t;


// The layout of a body of n points of `step` bytes. ERR_NOMEM.
static int body_layout(uint32_t step, const uint32_t xyz[3], int has_pos, uint32_t n,
                       body_layout_t* b) {
  b->off = mem_alloc(3u * (size_t)step * sizeof(uint32_t) + 1);
  if (!b->off) {
    return ERR_NOMEM;
  }
  uint32_t nrest = rest_offsets(step, xyz, has_pos, b->off);
  b->woff = b->off + step;
  b->boff = b->off + 2u * step;
  b->nword = rest_words(b->off, nrest, b->woff, b->boff, &b->nbyte);
  b->nstream = (has_pos ? 3u : 0u) + b->nword;
  b->single_at = 4u * (size_t)b->nstream + (size_t)b->nstream * n;
  b->exc_at = b->single_at + (size_t)b->nbyte * n;
  return 0;
}


// The prediction of a word of point i from the points before it (at p, `step` bytes apart):
// the column prediction (predict) plus the previous point's miss of its own, so that a field
// smooth along both the channel and the column leaves small residuals. *col: the column
// prediction of point i, which the caller keeps as `prev_col` for point i + 1.
static inline uint32_t predict_word(const uint8_t* p, uint32_t i, uint32_t s, size_t step,
                                    uint32_t prev_col, uint32_t* col) {
  uint32_t c = 0;
  if (i >= 2u * (uint64_t)s) {   // 64 bits: a hostile header's stride may be past 2^31
    c = 2u * get_u32(p + (size_t)(i - s) * step) - get_u32(p + (size_t)(i - 2 * s) * step);
  } else if (i >= s) {
    c = get_u32(p + (size_t)(i - s) * step);
  }
  *col = c;
  return i ? c + (get_u32(p + (size_t)(i - 1) * step) - prev_col) : c;
}


// The codes of a word (at base, `step` bytes apart) for the points i0 .. i0 + m - 1 into cb: the
// word less its prediction (predict_word), zigzagged; *prev_col carries the column prediction
// of the point before.
static void word_codes(const uint8_t* base, uint32_t i0, uint32_t m, uint32_t stride,
                       size_t step, uint32_t* prev_col, uint32_t* cb) {
  uint32_t j = 0, pc = *prev_col, col;
  for (; j < m && i0 + j < 2u * (uint64_t)stride; j++) {
    uint32_t i = i0 + j;
    cb[j] = zigzag(get_u32(base + (size_t)i * step) - predict_word(base, i, stride, step, pc,
                                                                    &col));
    pc = col;
  }
  // past the first two columns, without a branch: w[i] less its column prediction and the
  // previous point's miss
  const uint8_t* q = base + (size_t)(i0 + j) * step;
  const size_t back = (size_t)stride * step;
  for (; j < m; j++, q += step) {
    col = 2u * get_u32(q - back) - get_u32(q - 2 * back);
    cb[j] = zigzag(get_u32(q) - col - (get_u32(q - step) - pc));
    pc = col;
  }
  *prev_col = pc;
}


// The encoder of positions (qzstd_encode). The points are taken a block at a time, a block
// being points of distinct channels (consecutive points within one column-to-column run of
// `stride`), so that each step over a block (loading and ranges, azimuths, elevations, codes,
// errors) is a loop whose points depend on each other only through the last azimuth found; the
// channel states are arrays by channel. The arithmetic is that of a point taken alone.
#define POS_BLOCK 128u             // points of a block of the encoder (at most CODE_BLOCK)
#define AZ_CHUNK 16u               // points tested at once against the last azimuth
#define POS_MIN_STRIDE 8u          // smaller strides: a point at a time (pos_one)

typedef struct pos_enc {
  const uint8_t* data;             // the cloud, its point step and position offsets
  size_t step;
  uint32_t xyz[3];
  int packed;                      // x, y, z in a row and 16 bytes readable from x (packed_xyz)
  uint32_t stride;
  double range_step, angle_step, inv_range, inv_angle;
  int32_t lim;                     // the largest |angle| in steps (pi)
  // the channels' states (the points i = k mod stride): the last two values of R, A, E (see
  // chan_ref_t), the last measured angles with their cosines and sines, whether an elevation
  // was found (an unset channel has a zero cosine and sine)
  uint32_t* h1[3];
  uint32_t* h2[3];
  int32_t* ch_a;
  int32_t* ch_e;
  uint8_t* ch_set;
  double* ch_ca;
  double* ch_sa;
  double* ch_ce;
  double* ch_se;
  int32_t last_a;                  // the last azimuth found, its cosine and sine
  double last_ca, last_sa;
  trig_cache_t tc[2];              // azimuths, elevations
  const float* haz;                // (n) the sensor's azimuth of each point, or NULL
  uint32_t i0;                     // the block's first point
  uint8_t* exc;                    // the misses kept raw (12 bytes each) and their number
  uint32_t nexc;
  // the other words of a point (rest_words), coded with the positions: their number, offsets,
  // last value and column prediction (2 each; word_codes keeps its column prediction in the
  // first), codes (CODE_BLOCK each), last two values in each channel (2 nchan each)
  uint32_t nword;
  const uint32_t* woff;
  uint32_t* wlast;
  uint32_t* wcodes;
  uint32_t* whist;
  uint32_t nchan;
  code_out_t* out;                 // the code streams: R, A, E, then the words
  double err2;                     // the largest squared error so far
  int avx2;                        // simd_level() is AVX2 or above
  // the points of the block: coordinates (float32, float64), |xy|, range, measured (~0u) or
  // a miss (0), the misses as bits, range, azimuth and elevation in steps, the cosine and sine
  // of the azimuth
  float xf[POS_BLOCK], yf[POS_BLOCK], zf[POS_BLOCK];
  double x[POS_BLOCK], y[POS_BLOCK], z[POS_BLOCK], rxy[POS_BLOCK], r[POS_BLOCK];
  double pca[POS_BLOCK], psa[POS_BLOCK];
  uint32_t meas[POS_BLOCK];
  uint64_t miss[POS_BLOCK / 64];   // bit j % 64 of word j / 64: the point j is a miss
  int32_t rq[POS_BLOCK], aq[POS_BLOCK], eq[POS_BLOCK];
} pos_enc_t;


// The index of the lowest set bit of v (v != 0).
static inline uint32_t lowest_bit64(uint64_t v) {
#if defined(__GNUC__)
  return (uint32_t)__builtin_ctzll(v);
#else
  uint32_t b = 0;
  while (!(v & 1u)) {
    v >>= 1;
    b++;
  }
  return b;
#endif
}


static inline uint32_t lowest_bit(uint32_t v) {
  return lowest_bit64(v);
}


#if defined(__SSE2__)
// 16 bytes at p as 4 float32.
static inline __m128 load_ps(const uint8_t* p) {
  __m128 v;
  memcpy(&v, p, sizeof(v));
  return v;
}
#endif


// AVX2 forms of the encoder's loops over a block (4 doubles, 8 integers at a time), used when
// simd_level() is AVX2 or above (base/simd.h): the same operations in the same order on each
// point as the SSE2 and scalar forms (no fused multiply-add), so the bytes are the same. Each
// returns the number of points it did, a multiple of 4 (8 for the codes); the caller does the
// rest.
#if SIMD_X86
#include <immintrin.h>


SIMD_AVX2_FN static uint32_t ranges_avx2(pos_enc_t* e, uint32_t m, uint64_t* miss) {
  const __m256d zero = _mm256_setzero_pd(), inf = _mm256_set1_pd(INFINITY),
                ir = _mm256_set1_pd(e->inv_range);
  const __m256i low = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6);
  uint64_t bits = 0;
  uint32_t j = 0;
  for (; j + 4 <= m; j += 4) {
    __m256d x = _mm256_cvtps_pd(_mm_loadu_ps(e->xf + j));
    __m256d y = _mm256_cvtps_pd(_mm_loadu_ps(e->yf + j));
    __m256d z = _mm256_cvtps_pd(_mm_loadu_ps(e->zf + j));
    _mm256_storeu_pd(e->x + j, x);
    _mm256_storeu_pd(e->y + j, y);
    _mm256_storeu_pd(e->z + j, z);
    __m256d rxy2 = _mm256_add_pd(_mm256_mul_pd(x, x), _mm256_mul_pd(y, y));
    __m256d r2 = _mm256_add_pd(rxy2, _mm256_mul_pd(z, z));
    __m256d ok = _mm256_and_pd(_mm256_cmp_pd(r2, zero, _CMP_GT_OQ),
                               _mm256_cmp_pd(r2, inf, _CMP_LT_OQ));
    __m256d r = _mm256_sqrt_pd(r2);
    _mm256_storeu_pd(e->rxy + j, _mm256_sqrt_pd(rxy2));
    _mm256_storeu_pd(e->r + j, r);
    _mm_storeu_si128((__m128i*)(void*)(e->rq + j), _mm256_cvtpd_epi32(_mm256_mul_pd(r, ir)));
    _mm_storeu_si128((__m128i*)(void*)(e->meas + j),
                     _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(_mm256_castpd_si256(ok),
                                                                        low)));
    bits |= (uint64_t)((uint32_t)_mm256_movemask_pd(ok) ^ 15u) << (j % 64);
    if (j % 64 == 60) {
      miss[j / 64] = bits;
      bits = 0;
    }
  }
  if (j % 64) {
    miss[j / 64] = bits;
  }
  return j;
}


// Bit l of the result: ok is false for the point j + l (l from *l, advanced by 4s).
SIMD_AVX2_FN static uint32_t az_far_avx2(const pos_enc_t* e, uint32_t j, uint32_t end,
                                         uint32_t* l) {
  const __m256d lc = _mm256_set1_pd(e->last_ca), ls = _mm256_set1_pd(e->last_sa),
                ia = _mm256_set1_pd(e->inv_angle), zero = _mm256_setzero_pd(),
                lim49 = _mm256_set1_pd(0.49),
                abs = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7FFFFFFFFFFFFFFF));
  uint32_t far = 0, k = *l;
  for (; j + k + 4 <= end; k += 4) {
    __m256d x = _mm256_loadu_pd(e->x + j + k), y = _mm256_loadu_pd(e->y + j + k);
    __m256d ua = _mm256_add_pd(_mm256_mul_pd(x, lc), _mm256_mul_pd(y, ls));
    __m256d ta = _mm256_sub_pd(_mm256_mul_pd(y, lc), _mm256_mul_pd(x, ls));
    __m256d ok = _mm256_and_pd(_mm256_cmp_pd(ua, zero, _CMP_GT_OQ),
                               _mm256_cmp_pd(_mm256_mul_pd(_mm256_and_pd(ta, abs), ia),
                                             _mm256_mul_pd(lim49,
                                                           _mm256_loadu_pd(e->rxy + j + k)),
                                             _CMP_LT_OQ));
    far |= ((uint32_t)_mm256_movemask_pd(ok) ^ 15u) << k;
  }
  *l = k;
  return far;
}


SIMD_AVX2_FN static uint32_t el_far_avx2(const pos_enc_t* e, const double* ce, const double* se,
                                         uint32_t j, uint32_t end, uint32_t* l) {
  const __m256d ia = _mm256_set1_pd(e->inv_angle), zero = _mm256_setzero_pd(),
                lim49 = _mm256_set1_pd(0.49),
                abs = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7FFFFFFFFFFFFFFF));
  uint32_t far = 0, k = *l;
  for (; j + k + 4 <= end; k += 4) {
    uint32_t i = j + k;
    __m256d rxy = _mm256_loadu_pd(e->rxy + i), z = _mm256_loadu_pd(e->z + i);
    __m256d c = _mm256_loadu_pd(ce + i), s = _mm256_loadu_pd(se + i);
    __m256d ue = _mm256_add_pd(_mm256_mul_pd(rxy, c), _mm256_mul_pd(z, s));
    __m256d te = _mm256_sub_pd(_mm256_mul_pd(z, c), _mm256_mul_pd(rxy, s));
    __m256d ok = _mm256_and_pd(_mm256_cmp_pd(ue, zero, _CMP_GT_OQ),
                               _mm256_cmp_pd(_mm256_mul_pd(_mm256_and_pd(te, abs), ia),
                                             _mm256_mul_pd(lim49, _mm256_loadu_pd(e->r + i)),
                                             _CMP_LT_OQ));
    far |= ((uint32_t)_mm256_movemask_pd(ok) ^ 15u) << k;
  }
  *l = k;
  return far;
}


SIMD_AVX2_FN static uint32_t codes_avx2(pos_enc_t* e, uint32_t k0, uint32_t m, uint32_t first,
                                        uint32_t* cr, uint32_t* ca, uint32_t* ce) {
#define LOAD(p) _mm256_loadu_si256((const __m256i*)(const void*)(p))
#define STORE(p, v) _mm256_storeu_si256((__m256i*)(void*)(p), (v))
#define ZIGZAG(v) _mm256_xor_si256(_mm256_slli_epi32((v), 1), _mm256_srai_epi32((v), 31))
#define SELECT(msk, a, b) \
  _mm256_or_si256(_mm256_and_si256((msk), (a)), _mm256_andnot_si256((msk), (b)))
  const __m256i one = _mm256_set1_epi32(1), vfirst = _mm256_set1_epi32((int32_t)first);
  uint32_t* h1r = e->h1[0] + k0;
  uint32_t* h1a = e->h1[1] + k0;
  uint32_t* h1e = e->h1[2] + k0;
  uint32_t* h2r = e->h2[0] + k0;
  uint32_t* h2a = e->h2[1] + k0;
  uint32_t* h2e = e->h2[2] + k0;
  uint32_t j = 0;
  for (; j + 8 <= m; j += 8) {
    __m256i msk = LOAD(e->meas + j);
    __m256i g1r = LOAD(h1r + j), g1a = LOAD(h1a + j), g1e = LOAD(h1e + j);
    __m256i pr = _mm256_sub_epi32(_mm256_add_epi32(g1r, g1r), LOAD(h2r + j));
    __m256i pa = _mm256_sub_epi32(_mm256_add_epi32(g1a, g1a), LOAD(h2a + j));
    __m256i pe = _mm256_sub_epi32(_mm256_add_epi32(g1e, g1e), LOAD(h2e + j));
    __m256i vr = SELECT(msk, LOAD(e->rq + j), pr);
    __m256i va = SELECT(msk, LOAD(e->aq + j), pa);
    __m256i ve = SELECT(msk, LOAD(e->eq + j), pe);
    STORE(cr + j, _mm256_and_si256(_mm256_add_epi32(ZIGZAG(_mm256_sub_epi32(vr, pr)), one), msk));
    STORE(ca + j, ZIGZAG(_mm256_sub_epi32(va, pa)));
    STORE(ce + j, ZIGZAG(_mm256_sub_epi32(ve, pe)));
    STORE(h2r + j, SELECT(vfirst, vr, g1r));
    STORE(h2a + j, SELECT(vfirst, va, g1a));
    STORE(h2e + j, SELECT(vfirst, ve, g1e));
    STORE(h1r + j, vr);
    STORE(h1a + j, va);
    STORE(h1e + j, ve);
  }
#undef LOAD
#undef STORE
#undef ZIGZAG
#undef SELECT
  return j;
}


SIMD_AVX2_FN static uint32_t error_avx2(const pos_enc_t* e, const double* ce, const double* se,
                                        uint32_t m, double* worst) {
  const __m256d rs = _mm256_set1_pd(e->range_step);
  __m256d err2 = _mm256_setzero_pd();
  uint32_t j = 0;
  for (; j + 4 <= m; j += 4) {
    __m256d range = _mm256_mul_pd(
        _mm256_cvtepi32_pd(_mm_loadu_si128((const __m128i*)(const void*)(e->rq + j))), rs);
    __m256d rc = _mm256_mul_pd(range, _mm256_loadu_pd(ce + j));
    __m256d dx = _mm256_sub_pd(
        _mm256_cvtps_pd(_mm256_cvtpd_ps(_mm256_mul_pd(rc, _mm256_loadu_pd(e->pca + j)))),
        _mm256_loadu_pd(e->x + j));
    __m256d dy = _mm256_sub_pd(
        _mm256_cvtps_pd(_mm256_cvtpd_ps(_mm256_mul_pd(rc, _mm256_loadu_pd(e->psa + j)))),
        _mm256_loadu_pd(e->y + j));
    __m256d dz = _mm256_sub_pd(
        _mm256_cvtps_pd(_mm256_cvtpd_ps(_mm256_mul_pd(range, _mm256_loadu_pd(se + j)))),
        _mm256_loadu_pd(e->z + j));
    __m256d d2 = _mm256_add_pd(_mm256_add_pd(_mm256_mul_pd(dx, dx), _mm256_mul_pd(dy, dy)),
                               _mm256_mul_pd(dz, dz));
    __m256i mk = _mm256_cvtepi32_epi64(_mm_loadu_si128((const __m128i*)(const void*)
                                                       (e->meas + j)));
    err2 = _mm256_max_pd(err2, _mm256_and_pd(d2, _mm256_castsi256_pd(mk)));
  }
  double e4[4];
  _mm256_storeu_pd(e4, err2);
  for (int l = 0; l < 4; l++) {
    *worst = e4[l] > *worst ? e4[l] : *worst;
  }
  return j;
}


// The channels (from k0) keep the azimuths of the block's measured points.
SIMD_AVX2_FN static uint32_t chan_az_avx2(pos_enc_t* e, uint32_t k0, uint32_t m) {
  int32_t* cha = e->ch_a + k0;
  double* chc = e->ch_ca + k0;
  double* chs = e->ch_sa + k0;
  uint32_t j = 0;
  for (; j + 4 <= m; j += 4) {
    __m128i mk = _mm_loadu_si128((const __m128i*)(const void*)(e->meas + j));
    __m128i old = _mm_loadu_si128((const __m128i*)(const void*)(cha + j));
    __m128i now = _mm_loadu_si128((const __m128i*)(const void*)(e->aq + j));
    _mm_storeu_si128((__m128i*)(void*)(cha + j), _mm_blendv_epi8(old, now, mk));
    __m256d m4 = _mm256_castsi256_pd(_mm256_cvtepi32_epi64(mk));
    _mm256_storeu_pd(chc + j, _mm256_blendv_pd(_mm256_loadu_pd(chc + j),
                                               _mm256_loadu_pd(e->pca + j), m4));
    _mm256_storeu_pd(chs + j, _mm256_blendv_pd(_mm256_loadu_pd(chs + j),
                                               _mm256_loadu_pd(e->psa + j), m4));
  }
  return j;
}


// largest_r2 of packed points (x at p), 4 at a time: *r2max and *nmiss from them; returns how
// many it did.
SIMD_AVX2_FN static uint32_t largest_r2_avx2(const uint8_t* p, uint32_t n, size_t step,
                                             double* r2max, uint32_t* nmiss) {
  const __m256d zero = _mm256_setzero_pd(), inf = _mm256_set1_pd(INFINITY);
  __m256d best = zero;
  __m256i measured = _mm256_setzero_si256();  // per lane: measured points (as -1 each)
  uint32_t i = 0;
  for (; i + 4 <= n; i += 4, p += 4 * step) {
    __m128 a = load_ps(p), b = load_ps(p + step), c = load_ps(p + 2 * step),
           d = load_ps(p + 3 * step);
    _MM_TRANSPOSE4_PS(a, b, c, d);
    __m256d x = _mm256_cvtps_pd(a), y = _mm256_cvtps_pd(b), z = _mm256_cvtps_pd(c);
    __m256d r2 = _mm256_add_pd(_mm256_add_pd(_mm256_mul_pd(x, x), _mm256_mul_pd(y, y)),
                               _mm256_mul_pd(z, z));
    __m256d ok = _mm256_and_pd(_mm256_cmp_pd(r2, zero, _CMP_GT_OQ),
                               _mm256_cmp_pd(r2, inf, _CMP_LT_OQ));
    best = _mm256_max_pd(best, _mm256_and_pd(r2, ok));
    measured = _mm256_add_epi64(measured, _mm256_castpd_si256(ok));
  }
  double b4[4];
  int64_t m4[4];
  _mm256_storeu_pd(b4, best);
  _mm256_storeu_si256((__m256i*)(void*)m4, measured);
  for (int l = 0; l < 4; l++) {
    *r2max = b4[l] > *r2max ? b4[l] : *r2max;
  }
  *nmiss += i + (uint32_t)(m4[0] + m4[1] + m4[2] + m4[3]);
  return i;
}


// narrow_codes, 32 codes at a time; returns how many it did.
SIMD_AVX2_FN static size_t narrow_avx2(const uint32_t* codes, size_t m, code_out_t* s, size_t at) {
  const __m256i lo = _mm256_set1_epi32(0xFF), bias = _mm256_set1_epi32(INT32_MIN);
  const __m256i big = _mm256_set1_epi32(254 ^ INT32_MIN), ff = _mm256_set1_epi8(-1);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  uint8_t* plane = s->plane + at;
  size_t i = 0;
  for (; i + 32 <= m; i += 32) {
    __m256i v[4];
    for (int j = 0; j < 4; j++) {
      __m256i c = _mm256_loadu_si256((const __m256i*)(const void*)(codes + i + 8 * j));
      v[j] = _mm256_or_si256(
          _mm256_and_si256(c, lo),
          _mm256_and_si256(_mm256_cmpgt_epi32(_mm256_xor_si256(c, bias), big), lo));
    }
    // the packs work within 128-bit lanes: 4-byte groups come out as codes 0-3, 8-11, 16-19,
    // 24-27, 4-7, 12-15, 20-23, 28-31
    __m256i b = _mm256_packus_epi16(_mm256_packs_epi32(v[0], v[1]),
                                    _mm256_packs_epi32(v[2], v[3]));
    b = _mm256_permutevar8x32_epi32(b, order);
    _mm256_storeu_si256((__m256i*)(void*)(plane + i), b);
    take_overflows(s, codes + i, (uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(b, ff)));
  }
  return i;
}
#endif


// narrow_codes, with AVX2 when avx2.
static void narrow_block(int avx2, const uint32_t* codes, size_t m, code_out_t* s, size_t at) {
  size_t i = 0;
#if SIMD_X86
  if (avx2) {
    i = narrow_avx2(codes, m, s, at);
  }
#else
  (void)avx2;
#endif
  narrow_codes(codes + i, m - i, s, at + i);
}



// Bits j .. j + len - 1 (len <= 32) of the bit array w.
static inline uint32_t bits_at(const uint64_t* w, uint32_t j, uint32_t len) {
  uint64_t v = w[j / 64] >> (j % 64);
  if (j % 64 + len > 64) {
    v |= w[j / 64 + 1] << (64 - j % 64);
  }
  return (uint32_t)v & (uint32_t)((1ull << len) - 1u);
}


// The points i0 .. i0 + m - 1: coordinates, |xy| and range, measured or not (0 < r^2 <
// infinity: the squares of float32 neither underflow nor overflow in float64), range in steps.
static void pos_load(pos_enc_t* e, uint32_t i0, uint32_t m) {
  uint64_t miss[POS_BLOCK / 64] = {0};
  const size_t step = e->step;
  const uint32_t ox = e->xyz[0], oy = e->xyz[1], oz = e->xyz[2];
  const uint8_t* pt = e->data + (size_t)i0 * step;
  uint32_t j0 = 0;
#if defined(__SSE2__)
  for (; e->packed && j0 + 4 <= m; j0 += 4, pt += 4 * step) {
    __m128 a = load_ps(pt + ox), b = load_ps(pt + step + ox), c = load_ps(pt + 2 * step + ox),
           d = load_ps(pt + 3 * step + ox);
    _MM_TRANSPOSE4_PS(a, b, c, d);
    _mm_storeu_ps(e->xf + j0, a);
    _mm_storeu_ps(e->yf + j0, b);
    _mm_storeu_ps(e->zf + j0, c);
  }
#endif
  for (uint32_t j = j0; j < m; j++, pt += step) {
    e->xf[j] = get_f32(pt + ox);
    e->yf[j] = get_f32(pt + oy);
    e->zf[j] = get_f32(pt + oz);
  }
  uint32_t j = 0;
#if SIMD_X86
  if (e->avx2) {
    j = ranges_avx2(e, m, miss);
  }
#endif
#if defined(__SSE2__)
  const __m128d zero = _mm_setzero_pd(), inf = _mm_set1_pd(INFINITY),
                ir = _mm_set1_pd(e->inv_range);
  for (; j + 2 <= m; j += 2) {
    __m128d x = _mm_cvtps_pd(_mm_castsi128_ps(_mm_loadl_epi64((const __m128i*)(const void*)
                                                              (e->xf + j))));
    __m128d y = _mm_cvtps_pd(_mm_castsi128_ps(_mm_loadl_epi64((const __m128i*)(const void*)
                                                              (e->yf + j))));
    __m128d z = _mm_cvtps_pd(_mm_castsi128_ps(_mm_loadl_epi64((const __m128i*)(const void*)
                                                              (e->zf + j))));
    _mm_storeu_pd(e->x + j, x);
    _mm_storeu_pd(e->y + j, y);
    _mm_storeu_pd(e->z + j, z);
    __m128d rxy2 = _mm_add_pd(_mm_mul_pd(x, x), _mm_mul_pd(y, y));
    __m128d r2 = _mm_add_pd(rxy2, _mm_mul_pd(z, z));
    __m128d ok = _mm_and_pd(_mm_cmpgt_pd(r2, zero), _mm_cmplt_pd(r2, inf));
    __m128d r = _mm_sqrt_pd(r2);
    _mm_storeu_pd(e->rxy + j, _mm_sqrt_pd(rxy2));
    _mm_storeu_pd(e->r + j, r);
    _mm_storel_epi64((__m128i*)(void*)(e->rq + j), _mm_cvtpd_epi32(_mm_mul_pd(r, ir)));
    _mm_storel_epi64((__m128i*)(void*)(e->meas + j),
                     _mm_shuffle_epi32(_mm_castpd_si128(ok), _MM_SHUFFLE(2, 0, 2, 0)));
    miss[j / 64] |= (uint64_t)((uint32_t)_mm_movemask_pd(ok) ^ 3u) << (j % 64);
  }
#endif
  for (; j < m; j++) {
    double x = e->xf[j], y = e->yf[j], z = e->zf[j];
    e->x[j] = x;
    e->y[j] = y;
    e->z[j] = z;
    double rxy2 = x * x + y * y, r2 = rxy2 + z * z;
    e->rxy[j] = sqrt(rxy2);
    e->r[j] = sqrt(r2);
    e->rq[j] = round_i32(e->r[j] * e->inv_range);
    int ok = r2 > 0.0 && r2 < INFINITY;
    e->meas[j] = ok ? ~0u : 0u;
    miss[j / 64] |= (uint64_t)!ok << (j % 64);
  }
  memcpy(e->miss, miss, sizeof(miss));
}


// Bit l set: the point j + l (l < end - j <= 32) is measured and its azimuth does not round to
// the last one (the sine of the angle between the two 0.49 steps or more, or not within a
// quarter turn).
static uint32_t az_far(const pos_enc_t* e, uint32_t j, uint32_t end) {
  uint32_t far = 0, l = 0;
  const double lc = e->last_ca, ls = e->last_sa, ia = e->inv_angle;
#if SIMD_X86
  if (e->avx2) {
    far = az_far_avx2(e, j, end, &l);
  }
#endif
#if defined(__SSE2__)
  const __m128d vlc = _mm_set1_pd(lc), vls = _mm_set1_pd(ls), via = _mm_set1_pd(ia),
                zero = _mm_setzero_pd(), lim49 = _mm_set1_pd(0.49),
                abs = _mm_castsi128_pd(_mm_set1_epi64x(0x7FFFFFFFFFFFFFFF));
  for (; j + l + 2 <= end; l += 2) {
    __m128d x = _mm_loadu_pd(e->x + j + l), y = _mm_loadu_pd(e->y + j + l);
    __m128d ua = _mm_add_pd(_mm_mul_pd(x, vlc), _mm_mul_pd(y, vls));
    __m128d ta = _mm_sub_pd(_mm_mul_pd(y, vlc), _mm_mul_pd(x, vls));
    __m128d ok = _mm_and_pd(_mm_cmpgt_pd(ua, zero),
                            _mm_cmplt_pd(_mm_mul_pd(_mm_and_pd(ta, abs), via),
                                         _mm_mul_pd(lim49, _mm_loadu_pd(e->rxy + j + l))));
    far |= ((uint32_t)_mm_movemask_pd(ok) ^ 3u) << l;
  }
#endif
  for (; j + l < end; l++) {
    far |= (uint32_t)!rounds_to(e->x[j + l], e->y[j + l], e->rxy[j + l], lc, ls, ia) << l;
  }
  return far & ~bits_at(e->miss, j, end - j);
}


// The azimuth (in steps) of (x, y) (|xy| rxy) from the sensor's azimuth h of the point, into
// *q with its cosine and sine (*c, *s; written whatever the outcome): when the point rounds to
// h in steps (rounds_to: within 0.49 steps), which is then the integer any search finds
// (near_angle or atan2, both within a few millionths of a step), and h is not within a step of
// the half-turn, where atan2 changes sign. Else 0: the caller searches.
static inline int hinted(pos_enc_t* e, float h, double x, double y, double rxy, int32_t* q,
                         double* c, double* s) {
  double hq = (double)h * e->inv_angle;
  if (!(fabs(hq) < (double)e->lim - 1.0)) {
    return 0;   // also NaN
  }
  int32_t r = round_i32(hq);
  trig(&e->tc[0], r, e->angle_step, c, s);
  if (!rounds_to(x, y, rxy, *c, *s, e->inv_angle)) {
    return 0;
  }
  *q = r;
  return 1;
}


// The azimuth of the point j (channel k) that does not round to the last one: the sensor's when
// it has it and the point rounds to it, else from its channel's last one when near it, else by
// atan2; it becomes the last azimuth.
static void az_find(pos_enc_t* e, uint32_t k, uint32_t j) {
  double x = e->x[j], y = e->y[j], inv = 1.0 / e->rxy[j];
  int32_t aq;
  double c, s;
  if (e->haz && hinted(e, e->haz[e->i0 + j], x, y, e->rxy[j], &aq, &c, &s)) {
    e->last_a = aq;
    e->last_ca = c;
    e->last_sa = s;
    return;
  }
  if (!(e->ch_set[k] && near_angle(x, y, inv, e->ch_a[k], e->ch_ca[k], e->ch_sa[k],
                                   e->inv_angle, e->lim, &aq))) {
    aq = round_i32(atan2(y, x) * e->inv_angle);
  }
  if (aq != e->last_a) {
    trig(&e->tc[0], aq, e->angle_step, &e->last_ca, &e->last_sa);
    e->last_a = aq;
  }
}


// The azimuths of the block (channels k0 ..): the last one found (the points of a column share
// theirs) when the point rounds to it, else found from the channel's; the channels keep those of
// their measured points.
static void pos_azimuth(pos_enc_t* e, uint32_t k0, uint32_t m) {
  int32_t* restrict aq = e->aq;
  double* restrict pca = e->pca;
  double* restrict psa = e->psa;
  for (uint32_t j = 0; j < m;) {
    uint32_t end = j + AZ_CHUNK < m ? j + AZ_CHUNK : m;
    uint32_t bad = az_far(e, j, end);
    const int32_t a = e->last_a;
    const double ca = e->last_ca, sa = e->last_sa;
    uint32_t run = bad ? lowest_bit(bad) : end - j;
    for (uint32_t l = j; l < j + run; l++) {
      aq[l] = a;
      pca[l] = ca;
      psa[l] = sa;
    }
    j += run;
    if (j < end) {
      az_find(e, k0 + j, j);  // the rest of the chunk is tested again against its azimuth
      aq[j] = e->last_a;
      pca[j] = e->last_ca;
      psa[j] = e->last_sa;
      j++;
    }
  }
  // the channels keep the azimuths of their measured points
  int32_t* restrict cha = e->ch_a + k0;
  double* restrict chc = e->ch_ca + k0;
  double* restrict chs = e->ch_sa + k0;
  const uint32_t* restrict meas = e->meas;
  uint32_t j = 0;
#if SIMD_X86
  if (e->avx2) {
    j = chan_az_avx2(e, k0, m);
  }
#endif
#if defined(__SSE2__)
  for (; j + 4 <= m; j += 4) {
    __m128i mk = _mm_loadu_si128((const __m128i*)(const void*)(meas + j));
    __m128i old = _mm_loadu_si128((const __m128i*)(const void*)(cha + j));
    __m128i now = _mm_loadu_si128((const __m128i*)(const void*)(aq + j));
    _mm_storeu_si128((__m128i*)(void*)(cha + j),
                     _mm_or_si128(_mm_and_si128(mk, now), _mm_andnot_si128(mk, old)));
    __m128d lo = _mm_castsi128_pd(_mm_unpacklo_epi32(mk, mk));
    __m128d hi = _mm_castsi128_pd(_mm_unpackhi_epi32(mk, mk));
    _mm_storeu_pd(chc + j, _mm_or_pd(_mm_and_pd(lo, _mm_loadu_pd(pca + j)),
                                     _mm_andnot_pd(lo, _mm_loadu_pd(chc + j))));
    _mm_storeu_pd(chc + j + 2, _mm_or_pd(_mm_and_pd(hi, _mm_loadu_pd(pca + j + 2)),
                                         _mm_andnot_pd(hi, _mm_loadu_pd(chc + j + 2))));
    _mm_storeu_pd(chs + j, _mm_or_pd(_mm_and_pd(lo, _mm_loadu_pd(psa + j)),
                                     _mm_andnot_pd(lo, _mm_loadu_pd(chs + j))));
    _mm_storeu_pd(chs + j + 2, _mm_or_pd(_mm_and_pd(hi, _mm_loadu_pd(psa + j + 2)),
                                         _mm_andnot_pd(hi, _mm_loadu_pd(chs + j + 2))));
  }
#endif
  for (; j < m; j++) {
    if (meas[j]) {
      cha[j] = aq[j];
      chc[j] = pca[j];
      chs[j] = psa[j];
    }
  }
}


// The elevation of the measured point j (channel k) that does not round to its channel's last
// one: from it when near, else by atan2; it becomes the channel's.
static void el_find(pos_enc_t* e, uint32_t k, uint32_t j) {
  int32_t eq;
  if (!(e->ch_set[k] && near_angle(e->rxy[j], e->z[j], 1.0 / e->r[j], e->ch_e[k], e->ch_ce[k],
                                   e->ch_se[k], e->inv_angle, e->lim, &eq))) {
    eq = round_i32(atan2(e->z[j], e->rxy[j]) * e->inv_angle);
  }
  if (!(e->ch_set[k] && eq == e->ch_e[k])) {
    trig(&e->tc[1], eq, e->angle_step, &e->ch_ce[k], &e->ch_se[k]);
    e->ch_e[k] = eq;
  }
  e->ch_set[k] = 1;
  e->eq[j] = eq;
}


// The elevations of the block (channels k0 ..): the channel's last one when the point rounds to
// it (an unset channel's zero cosine and sine never do), else found from it.
static void pos_elevation(pos_enc_t* e, uint32_t k0, uint32_t m) {
  memcpy(e->eq, e->ch_e + k0, (size_t)m * sizeof(int32_t));
  const double* ce = e->ch_ce + k0;
  const double* se = e->ch_se + k0;
  const double ia = e->inv_angle;
  for (uint32_t j0 = 0; j0 < m; j0 += 32) {
    uint32_t end = j0 + 32 < m ? j0 + 32 : m, far = 0, l = 0;
#if SIMD_X86
    if (e->avx2) {
      far = el_far_avx2(e, ce, se, j0, end, &l);
    }
#endif
#if defined(__SSE2__)
    const __m128d via = _mm_set1_pd(ia), zero = _mm_setzero_pd(), lim49 = _mm_set1_pd(0.49),
                  abs = _mm_castsi128_pd(_mm_set1_epi64x(0x7FFFFFFFFFFFFFFF));
    for (; j0 + l + 2 <= end; l += 2) {
      uint32_t j = j0 + l;
      __m128d rxy = _mm_loadu_pd(e->rxy + j), z = _mm_loadu_pd(e->z + j);
      __m128d c = _mm_loadu_pd(ce + j), s = _mm_loadu_pd(se + j);
      __m128d ue = _mm_add_pd(_mm_mul_pd(rxy, c), _mm_mul_pd(z, s));
      __m128d te = _mm_sub_pd(_mm_mul_pd(z, c), _mm_mul_pd(rxy, s));
      __m128d ok = _mm_and_pd(_mm_cmpgt_pd(ue, zero),
                              _mm_cmplt_pd(_mm_mul_pd(_mm_and_pd(te, abs), via),
                                           _mm_mul_pd(lim49, _mm_loadu_pd(e->r + j))));
      far |= ((uint32_t)_mm_movemask_pd(ok) ^ 3u) << l;
    }
#endif
    for (; j0 + l < end; l++) {
      uint32_t j = j0 + l;
      far |= (uint32_t)!rounds_to(e->rxy[j], e->z[j], e->r[j], ce[j], se[j], ia) << l;
    }
    uint32_t bad = far & ~bits_at(e->miss, j0, end - j0);
    while (bad) {
      uint32_t l1 = lowest_bit(bad);
      bad &= bad - 1u;
      el_find(e, k0 + j0 + l1, j0 + l1);
    }
  }
}


// The kind of the miss i; its 12 bytes are appended to the exceptions when kept raw.
static uint32_t miss_kind(pos_enc_t* e, uint32_t i) {
  const uint8_t* pt = e->data + (size_t)i * e->step;
  uint32_t bx = get_u32(pt + e->xyz[0]), by = get_u32(pt + e->xyz[1]), bz = get_u32(pt + e->xyz[2]);
  if ((bx | by | bz) == 0u) {
    return KIND_ZERO;
  }
  if (bx == 0x7FC00000u && by == 0x7FC00000u && bz == 0x7FC00000u) {
    return KIND_NAN;
  }
  uint8_t* ex = e->exc + 12u * (size_t)e->nexc++;
  put_u32(ex, bx);
  put_u32(ex + 4, by);
  put_u32(ex + 8, bz);
  return KIND_RAW;
}


// The codes of the block (points i0 .., channels k0 ..) into cr, ca, ce: residuals against the
// channels' predictions, zigzagged (the range's plus one); a miss codes 0, its kind, 0 and takes
// the predictions as its values. The misses kept raw are appended to the exceptions.
static void pos_codes(pos_enc_t* e, uint32_t i0, uint32_t k0, uint32_t m, uint32_t* restrict cr,
                      uint32_t* restrict ca, uint32_t* restrict ce) {
  const uint32_t first = i0 < e->stride ? ~0u : 0u;
  uint32_t* restrict h1r = e->h1[0] + k0;
  uint32_t* restrict h1a = e->h1[1] + k0;
  uint32_t* restrict h1e = e->h1[2] + k0;
  uint32_t* restrict h2r = e->h2[0] + k0;
  uint32_t* restrict h2a = e->h2[1] + k0;
  uint32_t* restrict h2e = e->h2[2] + k0;
  const uint32_t* restrict meas = e->meas;
  const int32_t* restrict rq = e->rq;
  const int32_t* restrict aq = e->aq;
  const int32_t* restrict eq = e->eq;
  uint32_t j = 0;
#if SIMD_X86
  if (e->avx2) {
    j = codes_avx2(e, k0, m, first, cr, ca, ce);
  }
#endif
#if defined(__SSE2__)
  const __m128i one = _mm_set1_epi32(1), vfirst = _mm_set1_epi32((int32_t)first);
#define LOAD(p) _mm_loadu_si128((const __m128i*)(const void*)(p))
#define STORE(p, v) _mm_storeu_si128((__m128i*)(void*)(p), (v))
#define ZIGZAG(v) _mm_xor_si128(_mm_slli_epi32((v), 1), _mm_srai_epi32((v), 31))
#define SELECT(msk, a, b) _mm_or_si128(_mm_and_si128((msk), (a)), _mm_andnot_si128((msk), (b)))
  for (; j + 4 <= m; j += 4) {
    __m128i msk = LOAD(meas + j);
    __m128i g1r = LOAD(h1r + j), g1a = LOAD(h1a + j), g1e = LOAD(h1e + j);
    __m128i pr = _mm_sub_epi32(_mm_add_epi32(g1r, g1r), LOAD(h2r + j));
    __m128i pa = _mm_sub_epi32(_mm_add_epi32(g1a, g1a), LOAD(h2a + j));
    __m128i pe = _mm_sub_epi32(_mm_add_epi32(g1e, g1e), LOAD(h2e + j));
    __m128i vr = SELECT(msk, LOAD(rq + j), pr);
    __m128i va = SELECT(msk, LOAD(aq + j), pa);
    __m128i ve = SELECT(msk, LOAD(eq + j), pe);
    __m128i dr = _mm_sub_epi32(vr, pr), da = _mm_sub_epi32(va, pa), de = _mm_sub_epi32(ve, pe);
    STORE(cr + j, _mm_and_si128(_mm_add_epi32(ZIGZAG(dr), one), msk));
    STORE(ca + j, ZIGZAG(da));
    STORE(ce + j, ZIGZAG(de));
    STORE(h2r + j, SELECT(vfirst, vr, g1r));
    STORE(h2a + j, SELECT(vfirst, va, g1a));
    STORE(h2e + j, SELECT(vfirst, ve, g1e));
    STORE(h1r + j, vr);
    STORE(h1a + j, va);
    STORE(h1e + j, ve);
  }
#undef LOAD
#undef STORE
#undef ZIGZAG
#undef SELECT
#endif
  for (; j < m; j++) {
    uint32_t msk = meas[j];
    uint32_t pr = 2u * h1r[j] - h2r[j], pa = 2u * h1a[j] - h2a[j], pe = 2u * h1e[j] - h2e[j];
    uint32_t vr = ((uint32_t)rq[j] & msk) | (pr & ~msk);
    uint32_t va = ((uint32_t)aq[j] & msk) | (pa & ~msk);
    uint32_t ve = ((uint32_t)eq[j] & msk) | (pe & ~msk);
    cr[j] = (zigzag(vr - pr) + 1u) & msk;
    ca[j] = zigzag(va - pa);
    ce[j] = zigzag(ve - pe);
    h2r[j] = (vr & first) | (h1r[j] & ~first);
    h2a[j] = (va & first) | (h1a[j] & ~first);
    h2e[j] = (ve & first) | (h1e[j] & ~first);
    h1r[j] = vr;
    h1a[j] = va;
    h1e[j] = ve;
  }
  // a miss codes its kind in place of the azimuth (its residuals are 0)
  for (uint32_t w = 0; w < POS_BLOCK / 64; w++) {
    for (uint64_t bits = e->miss[w]; bits; bits &= bits - 1u) {
      uint32_t l = 64u * w + lowest_bit64(bits);
      ca[l] = miss_kind(e, i0 + l);
    }
  }
}


// The largest squared distance between a measured point of the block (channels k0 ..) and what
// a decoder rebuilds of it (float32 coordinates).
static void pos_error(pos_enc_t* e, uint32_t k0, uint32_t m) {
  const double* ce = e->ch_ce + k0;
  const double* se = e->ch_se + k0;
  const double rs = e->range_step;
  uint32_t j = 0;
  double worst = e->err2;
#if SIMD_X86
  if (e->avx2) {
    j = error_avx2(e, ce, se, m, &worst);
  }
#endif
#if defined(__SSE2__)
  __m128d err2 = _mm_setzero_pd();
  const __m128d vrs = _mm_set1_pd(rs);
  for (; j + 2 <= m; j += 2) {
    __m128d range = _mm_mul_pd(_mm_cvtepi32_pd(_mm_loadl_epi64((const __m128i*)(const void*)
                                                               (e->rq + j))), vrs);
    __m128d rc = _mm_mul_pd(range, _mm_loadu_pd(ce + j));
    __m128d dx = _mm_sub_pd(_mm_cvtps_pd(_mm_cvtpd_ps(_mm_mul_pd(rc, _mm_loadu_pd(e->pca + j)))),
                            _mm_loadu_pd(e->x + j));
    __m128d dy = _mm_sub_pd(_mm_cvtps_pd(_mm_cvtpd_ps(_mm_mul_pd(rc, _mm_loadu_pd(e->psa + j)))),
                            _mm_loadu_pd(e->y + j));
    __m128d dz = _mm_sub_pd(_mm_cvtps_pd(_mm_cvtpd_ps(_mm_mul_pd(range, _mm_loadu_pd(se + j)))),
                            _mm_loadu_pd(e->z + j));
    __m128d d2 = _mm_add_pd(_mm_add_pd(_mm_mul_pd(dx, dx), _mm_mul_pd(dy, dy)),
                            _mm_mul_pd(dz, dz));
    __m128i mk = _mm_loadl_epi64((const __m128i*)(const void*)(e->meas + j));
    err2 = _mm_max_pd(err2, _mm_and_pd(d2, _mm_castsi128_pd(_mm_unpacklo_epi32(mk, mk))));
  }
  double e2[2];
  _mm_storeu_pd(e2, err2);
  for (int l = 0; l < 2; l++) {
    worst = e2[l] > worst ? e2[l] : worst;
  }
#endif
  for (; j < m; j++) {
    if (e->meas[j]) {
      float v[3];
      rebuild(e->rq[j], rs, e->pca[j], e->psa[j], ce[j], se[j], v);
      double d2 = dist2(v, e->x[j], e->y[j], e->z[j]);
      worst = d2 > worst ? d2 : worst;
    }
  }
  e->err2 = worst;
}


// The codes of word w of the block (points i0 .., channels k0 ..) into cw: as word_codes, with
// the column predictions from the channels' last two values (after the first column the second
// last equals the last, so that 2 last - second last is the value one column back).
static void pos_word(pos_enc_t* e, uint32_t w, uint32_t i0, uint32_t k0, uint32_t m,
                     uint32_t* restrict cw) {
  uint32_t val[POS_BLOCK + 1], col[POS_BLOCK + 1];
  uint32_t* restrict h1 = e->whist + 2u * (size_t)w * e->nchan + k0;
  uint32_t* restrict h2 = h1 + e->nchan;
  const uint8_t* p = e->data + e->woff[w] + (size_t)i0 * e->step;
  val[0] = e->wlast[2 * w];
  col[0] = e->wlast[2 * w + 1];
  for (uint32_t j = 0; j < m; j++, p += e->step) {
    val[j + 1] = get_u32(p);
  }
  // the column predictions, the channels' last values, then the codes
  const uint32_t first = i0 < e->stride ? ~0u : 0u;
  uint32_t j = 0;
#if defined(__SSE2__)
  const __m128i f = _mm_set1_epi32((int32_t)first);
  for (; j + 4 <= m; j += 4) {
    __m128i v = _mm_loadu_si128((const __m128i*)(const void*)(val + j + 1));
    __m128i g1 = _mm_loadu_si128((const __m128i*)(const void*)(h1 + j));
    _mm_storeu_si128((__m128i*)(void*)(col + j + 1),
                     _mm_sub_epi32(_mm_add_epi32(g1, g1),
                                   _mm_loadu_si128((const __m128i*)(const void*)(h2 + j))));
    _mm_storeu_si128((__m128i*)(void*)(h2 + j),
                     _mm_or_si128(_mm_and_si128(f, v), _mm_andnot_si128(f, g1)));
    _mm_storeu_si128((__m128i*)(void*)(h1 + j), v);
  }
#endif
  for (; j < m; j++) {
    col[j + 1] = 2u * h1[j] - h2[j];
    h2[j] = (val[j + 1] & first) | (h1[j] & ~first);
    h1[j] = val[j + 1];
  }
  j = 0;
#if defined(__SSE2__)
  for (; j + 4 <= m; j += 4) {
    __m128i d = _mm_sub_epi32(
        _mm_sub_epi32(_mm_loadu_si128((const __m128i*)(const void*)(val + j + 1)),
                      _mm_loadu_si128((const __m128i*)(const void*)(col + j + 1))),
        _mm_sub_epi32(_mm_loadu_si128((const __m128i*)(const void*)(val + j)),
                      _mm_loadu_si128((const __m128i*)(const void*)(col + j))));
    _mm_storeu_si128((__m128i*)(void*)(cw + j),
                     _mm_xor_si128(_mm_slli_epi32(d, 1), _mm_srai_epi32(d, 31)));
  }
#endif
  for (; j < m; j++) {
    cw[j] = zigzag((val[j + 1] - col[j + 1]) - (val[j] - col[j]));
  }
  e->wlast[2 * w] = val[m];
  e->wlast[2 * w + 1] = col[m];
}


// The point i (channel k) as a block of one, without the blocks' loops (for strides below
// POS_MIN_STRIDE, whose blocks would be short; their words are coded by word_codes): its
// codes into *cr, *ca, *ce.
static void pos_one(pos_enc_t* e, uint32_t i, uint32_t k, uint32_t* cr, uint32_t* ca,
                    uint32_t* ce) {
  const uint8_t* pt = e->data + (size_t)i * e->step;
  double x = get_f32(pt + e->xyz[0]), y = get_f32(pt + e->xyz[1]), z = get_f32(pt + e->xyz[2]);
  double rxy2 = x * x + y * y, r2 = rxy2 + z * z, rxy = sqrt(rxy2), r = sqrt(r2);
  e->i0 = i;
  uint32_t pred[3], val[3];
  for (int t = 0; t < 3; t++) {
    pred[t] = 2u * e->h1[t][k] - e->h2[t][k];
    val[t] = pred[t];
  }
  *cr = *ce = 0u;
  if (r2 > 0.0 && r2 < INFINITY) {
    const double ia = e->inv_angle;
    int32_t rq = round_i32(r * e->inv_range);
    e->x[0] = x;
    e->y[0] = y;
    e->z[0] = z;
    e->rxy[0] = rxy;
    e->r[0] = r;
    if (!rounds_to(x, y, rxy, e->last_ca, e->last_sa, ia)) {
      az_find(e, k, 0);
    }
    e->ch_a[k] = e->last_a;
    e->ch_ca[k] = e->last_ca;
    e->ch_sa[k] = e->last_sa;
    if (rounds_to(rxy, z, r, e->ch_ce[k], e->ch_se[k], ia)) {
      e->eq[0] = e->ch_e[k];
    } else {
      el_find(e, k, 0);
    }
    float v[3];
    rebuild(rq, e->range_step, e->last_ca, e->last_sa, e->ch_ce[k], e->ch_se[k], v);
    double d2 = dist2(v, x, y, z);
    e->err2 = d2 > e->err2 ? d2 : e->err2;
    val[0] = (uint32_t)rq;
    val[1] = (uint32_t)e->last_a;
    val[2] = (uint32_t)e->eq[0];
    *cr = zigzag(val[0] - pred[0]) + 1u;
    *ca = zigzag(val[1] - pred[1]);
    *ce = zigzag(val[2] - pred[2]);
  } else {
    *ca = miss_kind(e, i);
  }
  int first = i < e->stride;
  for (int t = 0; t < 3; t++) {
    e->h2[t][k] = first ? val[t] : e->h1[t][k];
    e->h1[t][k] = val[t];
  }
}


// Code the positions of the n points into the code streams R, A, E, and the other words into
// the streams that follow.
static void pos_code(pos_enc_t* e, uint32_t n) {
  uint32_t cb[3][CODE_BLOCK];  // the codes of a block of points
  uint32_t fill = 0, start = 0, k = 0;
  for (uint32_t i = 0; i < n;) {
    uint32_t m;
    if (e->stride < POS_MIN_STRIDE) {
      m = n - i < CODE_BLOCK - fill ? n - i : CODE_BLOCK - fill;
      for (uint32_t j = 0, kj = k; j < m; j++, kj = kj + 1 == e->stride ? 0 : kj + 1) {
        pos_one(e, i + j, kj, cb[0] + fill + j, cb[1] + fill + j, cb[2] + fill + j);
      }
      for (uint32_t w = 0; w < e->nword; w++) {
        word_codes(e->data + e->woff[w], i, m, e->stride, e->step, &e->wlast[2 * w],
                   e->wcodes + (size_t)w * CODE_BLOCK + fill);
      }
    } else {
      m = n - i < POS_BLOCK ? n - i : POS_BLOCK;
      m = e->stride - k < m ? e->stride - k : m;
      m = CODE_BLOCK - fill < m ? CODE_BLOCK - fill : m;
      e->i0 = i;
      pos_load(e, i, m);
      pos_azimuth(e, k, m);
      pos_elevation(e, k, m);
      pos_codes(e, i, k, m, cb[0] + fill, cb[1] + fill, cb[2] + fill);
      pos_error(e, k, m);
      for (uint32_t w = 0; w < e->nword; w++) {
        pos_word(e, w, i, k, m, e->wcodes + (size_t)w * CODE_BLOCK + fill);
      }
    }
    fill += m;
    i += m;
    k = (uint32_t)(((uint64_t)k + m) % e->stride);
    if (fill == CODE_BLOCK || i == n) {
      for (int t = 0; t < 3; t++) {
        narrow_block(e->avx2, cb[t], fill, &e->out[t], start);
      }
      for (uint32_t w = 0; w < e->nword; w++) {
        narrow_block(e->avx2, e->wcodes + (size_t)w * CODE_BLOCK, fill, &e->out[3 + w], start);
      }
      start = i;
      fill = 0;
    }
  }
}



// The channel states of the encoder in `chan` (nchan * CHAN_BYTES zeroed bytes).
#define CHAN_BYTES (4u * sizeof(double) + 8u * sizeof(uint32_t) + 1u)

static void chan_arrays(pos_enc_t* e, uint8_t* chan, uint32_t nchan) {
  double* d = (double*)(void*)chan;
  e->ch_ca = d;
  e->ch_sa = d + nchan;
  e->ch_ce = d + 2u * (size_t)nchan;
  e->ch_se = d + 3u * (size_t)nchan;
  uint32_t* u = (uint32_t*)(void*)(d + 4u * (size_t)nchan);
  for (int t = 0; t < 3; t++) {
    e->h1[t] = u + (size_t)t * nchan;
    e->h2[t] = u + (size_t)(3 + t) * nchan;
  }
  e->ch_a = (int32_t*)(void*)(u + 6u * (size_t)nchan);
  e->ch_e = (int32_t*)(void*)(u + 7u * (size_t)nchan);
  e->ch_set = (uint8_t*)(u + 8u * (size_t)nchan);
}


// Whether x, y, z are in a row with 16 bytes of the point readable from x (4 points are then
// loaded and transposed).
static int packed_xyz(const uint32_t xyz[3], size_t step) {
  return xyz[1] == xyz[0] + 4u && xyz[2] == xyz[0] + 8u && xyz[0] + 16u <= step;
}


// The largest r^2 of a measured point (0 < r^2 < infinity: the squares of float32 neither
// underflow nor overflow in float64); *nmiss: the number of the others.
static double largest_r2(const uint8_t* data, uint32_t n, size_t step, const uint32_t xyz[3],
                         uint32_t* nmiss) {
  double r2max = 0.0;
  uint32_t i = 0, miss = 0;
#if SIMD_X86
  if (packed_xyz(xyz, step) && simd_level() >= SIMD_AVX2) {
    i = largest_r2_avx2(data + xyz[0], n, step, &r2max, &miss);
  }
#endif
#if defined(__SSE2__)
  const __m128d zero = _mm_setzero_pd(), inf = _mm_set1_pd(INFINITY);
  __m128d best = zero;
  for (; i + 2 <= n; i += 2) {
    const uint8_t* p0 = data + (size_t)i * step;
    const uint8_t* p1 = p0 + step;
    __m128d x = _mm_set_pd(get_f32(p1 + xyz[0]), get_f32(p0 + xyz[0]));
    __m128d y = _mm_set_pd(get_f32(p1 + xyz[1]), get_f32(p0 + xyz[1]));
    __m128d z = _mm_set_pd(get_f32(p1 + xyz[2]), get_f32(p0 + xyz[2]));
    __m128d r2 = _mm_add_pd(_mm_add_pd(_mm_mul_pd(x, x), _mm_mul_pd(y, y)), _mm_mul_pd(z, z));
    __m128d ok = _mm_and_pd(_mm_cmpgt_pd(r2, zero), _mm_cmplt_pd(r2, inf));
    best = _mm_max_pd(best, _mm_and_pd(r2, ok));
    uint32_t bits = (uint32_t)_mm_movemask_pd(ok);
    miss += 2u - (bits & 1u) - (bits >> 1);
  }
  double b[2];
  _mm_storeu_pd(b, best);
  for (int l = 0; l < 2; l++) {
    r2max = b[l] > r2max ? b[l] : r2max;
  }
#endif
  for (; i < n; i++) {
    const uint8_t* pt = data + (size_t)i * step;
    double x = get_f32(pt + xyz[0]), y = get_f32(pt + xyz[1]), z = get_f32(pt + xyz[2]);
    double r2 = x * x + y * y + z * z;
    int ok = r2 > 0.0 && r2 < INFINITY;
    r2max = ok && r2 > r2max ? r2 : r2max;
    miss += !ok;
  }
  *nmiss = miss;
  return r2max;
}


// The stride of an organised scan: the smallest shift at which elevations repeat best.
static uint32_t detect_stride(const uint32_t* e, const uint8_t* valid, uint32_t n) {
  uint32_t smax = n / 2 < STRIDE_SEARCH ? n / 2 : STRIDE_SEARCH;
  if (smax < 2) {
    return 1;
  }
  uint32_t end = n < smax + STRIDE_SAMPLE ? n : smax + STRIDE_SAMPLE;
  double cost[STRIDE_SEARCH + 1];
  double best = INFINITY;
  for (uint32_t s = 1; s <= smax; s++) {
    // |elevations| are at most pi in steps (below 2^28): their differences fit an int32
    uint64_t sum = 0;
    uint32_t cnt = 0;
    for (uint32_t i = smax; i < end; i++) {
      uint32_t both = (uint32_t)(valid[i] & valid[i - s]);
      int32_t d = as_i32(e[i] - e[i - s]);
      sum += (uint32_t)(d < 0 ? -d : d) & (0u - both);
      cnt += both;
    }
    cost[s] = cnt ? (double)sum / (double)cnt : INFINITY;
    best = cost[s] < best ? cost[s] : best;
  }
  for (uint32_t s = 1; s <= smax; s++) {
    if (cost[s] <= best + 1.0) {
      return s;
    }
  }
  return 1;
}


// The calling thread's work memory, kept from one encoding to the next and freed when the thread
// ends, so that a frame's buffers are not mapped (and their pages faulted in) again for each
// frame: the zstd input (`cap` bytes) and the encoder of positions.
typedef struct work {
  uint8_t* body;
  size_t cap;
  pos_enc_t* pe;
} work_t;


static void* work_make(void) {
  return mem_calloc(1, sizeof(work_t));
}


static void work_free(void* p) {
  work_t* w = p;
  mem_free(w->body);
  mem_free(w->pe);
  mem_free(w);
}


// The thread's work memory (kept_get: NULL when none can be kept; the caller then uses its
// own).
static kept_t g_work = KEPT_INIT(work_make, work_free);


// A body of at least `size` bytes, and an encoder of positions when `pos`. ERR_NOMEM.
static int work_reserve(work_t* w, size_t size, int pos) {
  if (w->cap < size || !w->body) {
    mem_free(w->body);
    w->cap = 0;
    w->body = mem_alloc(size ? size : 1);
    if (!w->body) {
      return ERR_NOMEM;
    }
    w->cap = size;
  }
  if (pos && !w->pe) {
    w->pe = mem_alloc(sizeof(pos_enc_t));
  }
  return pos && !w->pe ? ERR_NOMEM : 0;
}


// The body is at most step + (step + step / 4) n + 12 n bytes: each code stream takes at least
// 4 bytes of a point (the 12 of the positions make 3 streams, a word 4), so there are K <=
// step / 4 streams, whose planes and overflows (5 bytes a point at most) and the single bytes'
// planes hold at most step + K bytes a point; the table takes 4 K <= step bytes, and no more
// than n points are kept raw (12 bytes each).
size_t qzstd_max_size(const codec_cloud_t* c) {
  size_t n = c->count, step = c->point_step;
  return CODEC_QZSTD_HEADER_BYTES + compress_bound(step + (step + step / 4u) * n + 12u * n);
}


int qzstd_encode(const codec_params_t* p, const codec_cloud_t* c, uint8_t* out, size_t cap,
                 size_t* out_len, double* max_error, err_msg_t* msg) {
  double prec = p->precision;
  if (!(prec >= CODEC_MIN_PRECISION && prec <= CODEC_MAX_PRECISION)) {
    return err_set(msg, ERR_INVAL, "precision = %g must be in [%g, %g] m", prec,
                   CODEC_MIN_PRECISION, CODEC_MAX_PRECISION);
  }
  if (cap < qzstd_max_size(c)) {
    return err_set(msg, ERR_LIMIT, "output of %zu bytes is below the bound %zu", cap,
                   qzstd_max_size(c));
  }
  const uint32_t n = c->count, step = c->point_step;
  int has_pos = c->xyz_offset[0] >= 0 && c->xyz_offset[1] >= 0 && c->xyz_offset[2] >= 0 &&
                step >= 12;
  uint32_t xyz[3] = {NO_POSITIONS, NO_POSITIONS, NO_POSITIONS};
  if (has_pos) {
    for (int k = 0; k < 3; k++) {
      xyz[k] = (uint32_t)c->xyz_offset[k];
    }
  }
  // the stride asked for, the sensor's, or one detected (at most STRIDE_SEARCH: the channel
  // states are allocated for it)
  uint32_t given = p->stride ? p->stride : c->stride;
  uint32_t nchan = given ? given : STRIDE_SEARCH;
  nchan = nchan < n ? nchan : (n ? n : 1);
  uint32_t nsample = n < STRIDE_SEARCH + STRIDE_SAMPLE ? n : STRIDE_SEARCH + STRIDE_SAMPLE;

  // the largest range of a measured point and the number of misses (an upper bound of those
  // kept raw)
  uint32_t nmiss = 0;
  double r2max = has_pos ? largest_r2(c->data, n, step, xyz, &nmiss) : 0.0;
  double rmax = sqrt(r2max);
  double range_step = prec;
  // a range beyond 2^29 steps cannot be coded: positions are then kept losslessly
  if (has_pos && rmax / range_step >= (double)(VALUE_LIMIT - 1)) {
    has_pos = 0;
    nmiss = 0;
    for (int k = 0; k < 3; k++) {
      xyz[k] = NO_POSITIONS;
    }
  }

  // the body: the table of overflow counts, the planes of the code streams (R, A, E, the
  // words) and of the single bytes, the points kept raw, the overflow values; past its largest
  // size, the overflow values of each stream as they are found (room for n each)
  body_layout_t lay;
  if (body_layout(step, xyz, has_pos, n, &lay) != 0) {
    return err_set(msg, ERR_NOMEM, "out of memory encoding %u points", n);
  }
  const size_t body_max = lay.exc_at + 12u * (size_t)nmiss + 4u * (size_t)lay.nstream * n;
  const size_t scratch_at = (body_max + 7u) & ~(size_t)7u;
  work_t call = {0};  // this call's memory when the thread keeps none
  work_t* work = kept_get(&g_work);
  work = work ? work : &call;
  int nomem = work_reserve(work, scratch_at + 4u * (size_t)lay.nstream * n, has_pos);
  uint8_t* body = work->body;
  pos_enc_t* pe = has_pos ? work->pe : NULL;
  code_out_t* streams = mem_alloc(sizeof(code_out_t) * lay.nstream + 1);
  uint8_t* chan = has_pos ? mem_calloc(nchan, CHAN_BYTES) : NULL;
  uint32_t* sample = has_pos ? mem_alloc((size_t)nsample * 5u + 1) : NULL;
  uint32_t* wbuf = has_pos ? mem_calloc(step / 4u + 1u, (CODE_BLOCK + 2u + 2u * (size_t)nchan) *
                                                          sizeof(uint32_t))
                           : NULL;
  if (nomem || (has_pos && (!chan || !sample || !wbuf)) || !streams) {
    mem_free(call.body);
    mem_free(call.pe);
    mem_free(lay.off);
    mem_free(streams);
    mem_free(chan);
    mem_free(sample);
    mem_free(wbuf);
    return err_set(msg, ERR_NOMEM, "out of memory encoding %u points", n);
  }
  for (uint32_t k = 0; k < lay.nstream; k++) {
    streams[k].plane = body + 4u * (size_t)lay.nstream + (size_t)k * n;
    streams[k].ovf = (uint32_t*)(void*)(body + scratch_at) + (size_t)k * n;
    streams[k].m = 0;
  }
  double angle_step = 0.0, err_max = 0.0;
  uint32_t stride = 1, nexc = 0;
  uint32_t cb[CODE_BLOCK];  // the codes of a block of words

  if (has_pos) {
    angle_step = rmax > 0.0 ? prec / (2.0 * rmax) : prec;
    if (angle_step < M_PI / (double)(VALUE_LIMIT / 2)) {
      angle_step = M_PI / (double)(VALUE_LIMIT / 2);
    }

    const double inv_range = 1.0 / range_step, inv_angle = 1.0 / angle_step;
    const int32_t lim = round_i32(M_PI * inv_angle);

    // the stride, given or from the elevations of the first points
    if (given) {
      stride = given;
    } else {
      uint8_t* valid = (uint8_t*)(sample + nsample);
      for (uint32_t i = 0; i < nsample; i++) {
        const uint8_t* pt = c->data + (size_t)i * step;
        double x = get_f32(pt + xyz[0]), y = get_f32(pt + xyz[1]), z = get_f32(pt + xyz[2]);
        valid[i] = (uint8_t)measured(get_u32(pt + xyz[0]), get_u32(pt + xyz[1]),
                                     get_u32(pt + xyz[2]));
        sample[i] = valid[i] ? (uint32_t)round_i32(atan2(z, sqrt(x * x + y * y)) * inv_angle)
                             : 0u;
      }
      stride = detect_stride(sample, valid, nsample);
    }
    // quantize each measured point: the range by rounding, its angles from the last ones
    // (atan2 for the first of a channel or a point far from it); then the residuals against
    // the prediction (a miss takes the prediction as its values) and the error of what a
    // decoder rebuilds
    memset(pe, 0, sizeof(*pe));  // field by field: no temporary of its size on the stack
    pe->data = c->data;
    pe->step = step;
    memcpy(pe->xyz, xyz, sizeof(pe->xyz));
    pe->packed = packed_xyz(xyz, step);
    pe->stride = stride;
    pe->range_step = range_step;
    pe->angle_step = angle_step;
    pe->inv_range = inv_range;
    pe->inv_angle = inv_angle;
    pe->lim = lim;
    pe->last_ca = 1.0;
    pe->exc = body + lay.exc_at;
    pe->nword = lay.nword;
    pe->woff = lay.woff;
    pe->wlast = wbuf;
    pe->wcodes = wbuf + 2u * lay.nword;
    pe->whist = wbuf + (2u + CODE_BLOCK) * (size_t)lay.nword;
    pe->nchan = nchan;
    pe->out = streams;
    pe->haz = c->azimuth;
    chan_arrays(pe, chan, nchan);
#if SIMD_X86
    pe->avx2 = simd_level() >= SIMD_AVX2;
#endif
    pos_code(pe, n);
    nexc = pe->nexc;
    err_max = sqrt(pe->err2);
  }

  // every other byte: words predicted like positions (coded with them when there are
  // positions) and zigzagged; single bytes less the same byte `stride` points back (mod 256)
  if (!has_pos) {
    stride = p->stride ? p->stride : 1;   // not the sensor's: the bytes stay those without it
  }
  for (uint32_t w = 0; !has_pos && w < lay.nword; w++) {
    uint32_t prev_col = 0;
    for (uint32_t i0 = 0; i0 < n; i0 += CODE_BLOCK) {
      uint32_t m = n - i0 < CODE_BLOCK ? n - i0 : CODE_BLOCK;
      word_codes(c->data + lay.woff[w], i0, m, stride, step, &prev_col, cb);
      narrow_codes(cb, m, &streams[w], i0);
    }
  }
  uint8_t* bp = body + lay.single_at;
  for (uint32_t i = 0; lay.nbyte && i < n; i++) {
    const uint8_t* pt = c->data + (size_t)i * step;
    const uint8_t* back = i >= stride ? pt - (size_t)stride * step : NULL;
    for (uint32_t j = 0; j < lay.nbyte; j++) {
      bp[(size_t)j * n + i] = (uint8_t)(pt[lay.boff[j]] - (back ? back[lay.boff[j]] : 0u));
    }
  }

  // header, then one zstd frame
  memcpy(out, CODEC_QZSTD_MAGIC, 4);
  put_u32(out + 4, n);
  put_u32(out + 8, step);
  put_u32(out + 12, stride);
  put_u32(out + 16, xyz[0]);
  put_u32(out + 20, xyz[1]);
  put_u32(out + 24, xyz[2]);
  put_u32(out + 28, nexc);
  put_f64(out + 32, has_pos ? range_step : 0.0);
  put_f64(out + 40, has_pos ? angle_step : 0.0);
  put_f64(out + 48, err_max);
  // the overflow counts, and the values byte-shuffled after the points kept raw
  size_t len = lay.exc_at + 12u * (size_t)nexc;
  for (uint32_t k = 0; k < lay.nstream; k++) {
    put_u32(body + 4u * k, streams[k].m);
    shuffle_codes(streams[k].ovf, streams[k].m, body + len, streams[k].m);
    len += 4u * (size_t)streams[k].m;
  }
  size_t zlen;
  int rc = compress_zstd(p->level, body, len, out + CODEC_QZSTD_HEADER_BYTES,
                         cap - CODEC_QZSTD_HEADER_BYTES, &zlen);
  mem_free(call.body);
  mem_free(call.pe);
  mem_free(lay.off);
  mem_free(streams);
  mem_free(chan);
  mem_free(sample);
  mem_free(wbuf);
  if (rc) {
    return err_set(msg, rc, "zstd compression failed (%s)", err_str(rc));
  }
  *out_len = CODEC_QZSTD_HEADER_BYTES + zlen;
  *max_error = err_max;
  return 0;
}


int qzstd_decode(const uint8_t* in, size_t len, uint32_t count, uint32_t point_step,
                 uint8_t* out, err_msg_t* msg) {
  if (len < CODEC_QZSTD_HEADER_BYTES || memcmp(in, CODEC_QZSTD_MAGIC, 3) != 0) {
    return err_set(msg, ERR_PROTO, "data does not start with a quantized_zstd header");
  }
  if (memcmp(in, CODEC_QZSTD_MAGIC, 4) != 0) {
    return err_set(msg, ERR_PROTO, "quantized_zstd format %.4s: this decoder reads %s", in,
                   CODEC_QZSTD_MAGIC);
  }
  const uint32_t n = get_u32(in + 4), step = get_u32(in + 8), stride = get_u32(in + 12);
  uint32_t xyz[3] = {get_u32(in + 16), get_u32(in + 20), get_u32(in + 24)};
  const uint32_t nexc = get_u32(in + 28);
  const double range_step = get_f64(in + 32), angle_step = get_f64(in + 40);
  if (n != count || step != point_step) {
    return err_set(msg, ERR_PROTO, "header says %u points of %u bytes, the message %u of %u", n,
                   step, count, point_step);
  }
  // any offset set means positions (as the clients read it): the checks below then need all
  int has_pos = xyz[0] != NO_POSITIONS || xyz[1] != NO_POSITIONS || xyz[2] != NO_POSITIONS;
  if (has_pos) {
    for (int k = 0; k < 3; k++) {
      for (int m = 0; m < k; m++) {
        if ((xyz[k] > xyz[m] ? xyz[k] - xyz[m] : xyz[m] - xyz[k]) < 4u) {
          return err_set(msg, ERR_PROTO, "header: position offsets overlap");
        }
      }
      if (xyz[k] == NO_POSITIONS || (uint64_t)xyz[k] + 4u > step) {
        return err_set(msg, ERR_PROTO, "header: offset of %c is %u in a point of %u bytes",
                       "xyz"[k], xyz[k], step);
      }
    }
    if (!(range_step > 0.0) || !(angle_step > 0.0) || !isfinite(range_step) ||
        !isfinite(angle_step)) {
      return err_set(msg, ERR_PROTO, "header: stride, range_step or angle_step is not valid");
    }
  }
  if (stride == 0) {
    return err_set(msg, ERR_PROTO, "header: stride is 0");
  }
  if (nexc > n || (!has_pos && nexc)) {
    return err_set(msg, ERR_PROTO, "header: %u exceptions for %u points", nexc, n);
  }
  body_layout_t lay;
  if (body_layout(step, xyz, has_pos, n, &lay) != 0) {
    return err_set(msg, ERR_NOMEM, "out of memory decoding %u points", n);
  }
  const size_t fixed = lay.exc_at + 12u * (size_t)nexc;  // the body without overflow values
  size_t body_len = 0;
  int rc = decompressed_size(in + CODEC_QZSTD_HEADER_BYTES, len - CODEC_QZSTD_HEADER_BYTES,
                             fixed + 4u * (size_t)lay.nstream * n, &body_len, msg);
  if (rc) {
    mem_free(lay.off);
    return rc;
  }
  if (body_len < fixed) {
    mem_free(lay.off);
    return err_set(msg, ERR_PROTO, "body of %zu bytes, at least %zu expected", body_len, fixed);
  }
  uint32_t nchan = stride < n ? stride : (n ? n : 1);
  work_t call = {0};  // this call's memory when the thread keeps none
  work_t* work = kept_get(&g_work);
  work = work ? work : &call;
  int nomem = work_reserve(work, body_len, 0);
  uint8_t* body = work->body;
  trig_cache_t* tc = has_pos ? mem_calloc(2, sizeof(trig_cache_t)) : NULL;
  chan_ref_t* chan = has_pos ? mem_calloc(nchan, sizeof(chan_ref_t)) : NULL;
  code_in_t* streams = mem_alloc(sizeof(code_in_t) * lay.nstream + 1);
  if (nomem || (has_pos && (!tc || !chan)) || !streams) {
    mem_free(call.body);
    mem_free(lay.off);
    mem_free(tc);
    mem_free(chan);
    mem_free(streams);
    return err_set(msg, ERR_NOMEM, "out of memory decoding %u points", n);
  }
  rc = decompress_zstd(in + CODEC_QZSTD_HEADER_BYTES, len - CODEC_QZSTD_HEADER_BYTES, body,
                       body_len, msg);
  // the code streams: overflow counts, planes and values
  size_t at = fixed;
  for (uint32_t k = 0; rc == 0 && k < lay.nstream; k++) {
    uint32_t m = get_u32(body + 4u * k);
    if (m > n || 4u * (size_t)m > body_len - at) {
      rc = err_set(msg, ERR_PROTO, "code stream %u: %u overflow values do not fit the body", k,
                   m);
      break;
    }
    streams[k] = (code_in_t){body + 4u * (size_t)lay.nstream + (size_t)k * n, body + at, m, 0};
    at += 4u * (size_t)m;
  }
  if (rc == 0 && at != body_len) {
    rc = err_set(msg, ERR_PROTO, "body of %zu bytes, %zu expected from its overflow counts",
                 body_len, at);
  }
  uint32_t used = 0;
  uint32_t cb[3][CODE_BLOCK];
  if (rc == 0 && has_pos) {
    uint32_t k = 0;                          // channel of point i: i mod stride (below nchan)
    int32_t last_a = 0;                      // the last azimuth looked up, its cosine and sine
    double last_ca = 1.0, last_sa = 0.0;
    for (uint32_t i0 = 0; i0 < n && rc == 0; i0 += CODE_BLOCK) {
      uint32_t m = n - i0 < CODE_BLOCK ? n - i0 : CODE_BLOCK;
      for (int t = 0; t < 3 && rc == 0; t++) {
        if (read_codes(&streams[t], i0, m, cb[t]) != 0) {
          rc = err_set(msg, ERR_PROTO,
                       "code stream %d: more codes of 255 than overflow values, or a value "
                       "past 2^32 - 256", t);
        }
      }
      for (uint32_t j = 0; j < m && rc == 0; j++) {
        const uint32_t i = i0 + j;
        chan_ref_t* ch = &chan[k];
        uint32_t val[3];
        for (int t = 0; t < 3; t++) {
          val[t] = 2u * ch->h1[t] - ch->h2[t];
        }
        uint8_t* pt = out + (size_t)i * step;
        uint32_t ca = cb[1][j];
        if (cb[0][j] != 0u) {
          val[0] += unzigzag(cb[0][j] - 1u);
          val[1] += unzigzag(ca);
          val[2] += unzigzag(cb[2][j]);
          int32_t a = as_i32(val[1]), e = as_i32(val[2]);
          if (a != last_a) {
            trig(tc, a, angle_step, &last_ca, &last_sa);
            last_a = a;
          }
          if (!(ch->set && e == ch->e)) {
            trig(tc + 1, e, angle_step, &ch->ce, &ch->se);
            ch->e = e;
            ch->set = 1;
          }
          float v[3];
          rebuild(as_i32(val[0]), range_step, last_ca, last_sa, ch->ce, ch->se, v);
          for (int t = 0; t < 3; t++) {
            memcpy(pt + xyz[t], &v[t], 4);
          }
        } else {
          uint32_t bits[3] = {0, 0, 0};
          if (ca == KIND_NAN) {
            bits[0] = bits[1] = bits[2] = 0x7FC00000u;
          } else if (ca == KIND_RAW && used < nexc) {
            const uint8_t* ex = body + lay.exc_at + 12u * (size_t)used++;
            for (int t = 0; t < 3; t++) {
              bits[t] = get_u32(ex + 4 * t);
            }
          } else if (ca != KIND_ZERO) {
            rc = err_set(msg, ERR_PROTO, "point %u: miss kind %u is not valid", i, ca);
          }
          for (int t = 0; t < 3; t++) {
            put_u32(pt + xyz[t], bits[t]);
          }
        }
        int first = i < stride;
        for (int t = 0; t < 3; t++) {
          ch->h2[t] = first ? val[t] : ch->h1[t];
          ch->h1[t] = val[t];
        }
        k = k + 1 == stride ? 0 : k + 1;
      }
    }
    if (rc == 0 && used != nexc) {
      rc = err_set(msg, ERR_PROTO, "%u exceptions announced, %u used", nexc, used);
    }
  }
  if (rc == 0) {
    for (uint32_t w = 0; w < lay.nword && rc == 0; w++) {
      uint8_t* base = out + lay.woff[w];
      uint32_t prev_col = 0, col;
      for (uint32_t i0 = 0; i0 < n; i0 += CODE_BLOCK) {
        uint32_t m = n - i0 < CODE_BLOCK ? n - i0 : CODE_BLOCK;
        if (read_codes(&streams[lay.nstream - lay.nword + w], i0, m, cb[0]) != 0) {
          rc = err_set(msg, ERR_PROTO,
                       "code stream %u: more codes of 255 than overflow values, or a value "
                       "past 2^32 - 256", lay.nstream - lay.nword + w);
          break;
        }
        uint32_t j = 0;
        for (; j < m && i0 + j < 2u * (uint64_t)stride; j++) {
          uint32_t i = i0 + j;
          uint32_t pred = predict_word(base, i, stride, step, prev_col, &col);
          prev_col = col;
          put_u32(base + (size_t)i * step, pred + unzigzag(cb[0][j]));
        }
        uint8_t* q = base + (size_t)(i0 + j) * step;
        const size_t back = (size_t)stride * step;
        for (; j < m; j++, q += step) {
          col = 2u * get_u32(q - back) - get_u32(q - 2 * back);
          put_u32(q, col + (get_u32(q - step) - prev_col) + unzigzag(cb[0][j]));
          prev_col = col;
        }
      }
    }
    const uint8_t* bp = body + lay.single_at;
    for (uint32_t i = 0; rc == 0 && lay.nbyte && i < n; i++) {
      uint8_t* pt = out + (size_t)i * step;
      const uint8_t* back = i >= stride ? pt - (size_t)stride * step : NULL;
      for (uint32_t j = 0; j < lay.nbyte; j++) {
        pt[lay.boff[j]] = (uint8_t)(bp[(size_t)j * n + i] + (back ? back[lay.boff[j]] : 0u));
      }
    }
  }
  for (uint32_t k = 0; rc == 0 && k < lay.nstream; k++) {
    if (streams[k].used != streams[k].m) {
      rc = err_set(msg, ERR_PROTO, "code stream %u: %u overflow values, %u codes of 255", k,
                   streams[k].m, streams[k].used);
    }
  }
  mem_free(call.body);
  mem_free(lay.off);
  mem_free(tc);
  mem_free(chan);
  mem_free(streams);
  return rc;
}
