// SPDX-License-Identifier: MIT
// text.c: checks, constant-time comparison and log escaping of strings from the outside.
#include "base/text.h"

#include <stdint.h>
#include <string.h>


// Length of the valid UTF-8 sequence at p (n bytes available) and its code point, or 0 when
// it is not one. Overlong forms, surrogates and code points above U+10FFFF are invalid.
static size_t utf8_next(const unsigned char* p, size_t n, uint32_t* out) {
  unsigned c = p[0];
  *out = c;
  if (c < 0x80) {
    return 1;
  }
  size_t k;
  uint32_t cp;
  if (c >= 0xc2 && c <= 0xdf) {
    k = 2;
    cp = c & 0x1f;
  } else if (c >= 0xe0 && c <= 0xef) {
    k = 3;
    cp = c & 0x0f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    k = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (n < k) {
    return 0;
  }
  for (size_t i = 1; i < k; i++) {
    if ((p[i] & 0xc0) != 0x80) {
      return 0;
    }
    cp = cp << 6 | (p[i] & 0x3f);
  }
  if ((k == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
      (k == 4 && (cp < 0x10000 || cp > 0x10ffff))) {
    return 0;
  }
  *out = cp;
  return k;
}


// Code points beyond ASCII that the log shows escaped although they are valid text: the C1
// controls; the line and paragraph separators (a new line to many viewers); the bidirectional
// marks, embeddings, overrides and isolates, which reorder what a terminal or an editor shows
// (a name can make the rest of its line read backwards); and every other format character or
// invisible one (Unicode's Cf category and Default_Ignorable_Code_Point property, as of Unicode
// 15), which can hide or fake text. Sorted, for a binary search.
static const struct {
  uint32_t lo, hi;
} k_hidden[] = {
    {0x0080, 0x009f},    // C1 controls
    {0x00ad, 0x00ad},    // soft hyphen
    {0x034f, 0x034f},    // combining grapheme joiner
    {0x0600, 0x0605},    // Arabic number signs (prepended concatenation marks)
    {0x061c, 0x061c},    // Arabic letter mark (bidirectional)
    {0x06dd, 0x06dd},    // Arabic end of ayah
    {0x070f, 0x070f},    // Syriac abbreviation mark
    {0x0890, 0x0891},    // Arabic pound and piastre marks above
    {0x08e2, 0x08e2},    // Arabic disputed end of ayah
    {0x115f, 0x1160},    // Hangul fillers
    {0x17b4, 0x17b5},    // Khmer inherent vowels
    {0x180b, 0x180f},    // Mongolian variation selectors and vowel separator
    {0x200b, 0x200f},    // zero-width space, non-joiner, joiner; left-to-right, right-to-left marks
    {0x2028, 0x202e},    // line and paragraph separators; embeddings, pop, overrides
    {0x2060, 0x206f},    // word joiner, invisible operators, isolates, deprecated format
    {0x3164, 0x3164},    // Hangul filler
    {0xfe00, 0xfe0f},    // variation selectors
    {0xfeff, 0xfeff},    // zero-width no-break space (byte order mark)
    {0xffa0, 0xffa0},    // halfwidth Hangul filler
    {0xfff0, 0xfffb},    // reserved default-ignorables, interlinear annotation controls
    {0x110bd, 0x110bd},  // Kaithi number sign
    {0x110cd, 0x110cd},  // Kaithi number sign above
    {0x13430, 0x1343f},  // Egyptian hieroglyph format controls
    {0x1bca0, 0x1bca3},  // shorthand format controls
    {0x1d173, 0x1d17a},  // musical symbol format controls
    {0xe0000, 0xe0fff},  // tags, variation selectors supplement, reserved default-ignorables
};


// 1 when the code point cp (>= 0x80) is shown escaped in the log: k_hidden or a noncharacter.
static int is_hidden(uint32_t cp) {
  if ((cp & 0xfffe) == 0xfffe || (cp >= 0xfdd0 && cp <= 0xfdef)) {
    return 1;  // noncharacters (U+FDD0..U+FDEF, the last two of every plane)
  }
  size_t lo = 0, hi = sizeof(k_hidden) / sizeof(k_hidden[0]);
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (cp < k_hidden[mid].lo) {
      hi = mid;
    } else if (cp > k_hidden[mid].hi) {
      lo = mid + 1;
    } else {
      return 1;
    }
  }
  return 0;
}


// Length of the valid UTF-8 sequence at p, or 0.
static size_t utf8_len(const unsigned char* p, size_t n) {
  uint32_t cp;
  return utf8_next(p, n, &cp);
}


// A C0 control, DEL, or the first byte of a C1 control encoded in UTF-8.
static int is_control(const unsigned char* p, size_t n) {
  return p[0] < 0x20 || p[0] == 0x7f || (p[0] == 0xc2 && n >= 2 && p[1] >= 0x80 && p[1] <= 0x9f);
}


int text_is_clean(const char* s, size_t len, size_t* at) {
  const unsigned char* p = (const unsigned char*)s;
  size_t i = 0;
  while (i < len) {
    size_t k = utf8_len(p + i, len - i);
    if (k == 0 || is_control(p + i, len - i)) {
      if (at) {
        *at = i;
      }
      return 0;
    }
    i += k;
  }
  return 1;
}


int text_equal_secret(const char* a, size_t alen, const char* b, size_t blen) {
  // every byte of the longer string is visited; a differing length alone makes them unequal
  size_t n = alen > blen ? alen : blen;
  volatile unsigned char diff = (unsigned char)(alen != blen);
  for (size_t i = 0; i < n; i++) {
    unsigned char x = i < alen ? (unsigned char)a[i] : 0;
    unsigned char y = i < blen ? (unsigned char)b[i] : 0;
    diff |= (unsigned char)(x ^ y);
  }
  return diff == 0;
}


size_t text_escape(char* dest, size_t cap, const char* src, size_t len) {
  static const char hex[] = "0123456789abcdef";
  const unsigned char* p = (const unsigned char*)src;
  size_t o = 0;
  for (size_t i = 0; i < len;) {
    char tmp[12];
    uint32_t cp;
    size_t k = utf8_next(p + i, len - i, &cp);
    size_t w;
    if (k == 0 || cp < 0x20 || cp == 0x7f || cp == '\\') {
      // one escaped byte
      tmp[0] = '\\';
      if (p[i] == '\n' || p[i] == '\r' || p[i] == '\t' || p[i] == '\\') {
        tmp[1] = p[i] == '\n' ? 'n' : p[i] == '\r' ? 'r' : p[i] == '\t' ? 't' : '\\';
        w = 2;
      } else {
        tmp[1] = 'x';
        tmp[2] = hex[p[i] >> 4];
        tmp[3] = hex[p[i] & 15];
        w = 4;
      }
      k = 1;
    } else if (k > 1 && is_hidden(cp)) {
      // one escaped code point: \u202e, \U000e0041
      int digits = cp > 0xffff ? 8 : 4;
      tmp[0] = '\\';
      tmp[1] = digits == 8 ? 'U' : 'u';
      for (int d = 0; d < digits; d++) {
        tmp[2 + d] = hex[(cp >> (4 * (digits - 1 - d))) & 15];
      }
      w = 2 + (size_t)digits;
    } else {
      for (size_t j = 0; j < k; j++) {
        tmp[j] = (char)p[i + j];
      }
      w = k;
    }
    if (o + w + 1 > cap) {
      break;
    }
    for (size_t j = 0; j < w; j++) {
      dest[o++] = tmp[j];
    }
    i += k;
  }
  dest[o] = '\0';
  return o;
}


size_t text_copy(char* dest, size_t cap, const char* src) {
  size_t n = strlen(src);
  if (n >= cap) {
    n = cap - 1;
    // back to the first byte of the character at the cut: continuation bytes are 10xxxxxx
    while (n > 0 && ((unsigned char)src[n] & 0xc0u) == 0x80u) {
      n--;
    }
  }
  memcpy(dest, src, n);
  dest[n] = '\0';
  return n;
}
