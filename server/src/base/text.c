// SPDX-License-Identifier: MIT
// text.c: checks, constant-time comparison and log escaping of strings from the outside.
#include "base/text.h"

#include <stdint.h>


// Length of the valid UTF-8 sequence at p (n bytes available), or 0 when it is not one.
// Overlong forms, surrogates and code points above U+10FFFF are invalid.
static size_t utf8_len(const unsigned char* p, size_t n) {
  unsigned c = p[0];
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
  return k;
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
    char tmp[4];
    size_t k = utf8_len(p + i, len - i);
    size_t w;
    if (k == 0 || is_control(p + i, len - i) || p[i] == '\\') {
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
