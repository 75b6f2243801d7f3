// SPDX-License-Identifier: MIT
// text.h: strings that come from the outside: checks for names and secrets (bytes with a
// length, no NUL or control characters, bounded), a comparison of secrets whose time does not
// depend on where they differ, and the escaping that keeps such strings from forging log lines.
#ifndef SENSIM_BASE_TEXT_H_
#define SENSIM_BASE_TEXT_H_

#include <stddef.h>

// Longest name (environment, client, entity and sensor names) in bytes.
#define TEXT_NAME_MAX 256u

// 1 when s[0..len) is valid UTF-8 (protobuf's rule for a string) and contains no byte below
// 0x20, no 0x7f (DEL), and no C1 control character (U+0080..U+009F); else 0 and *at
// (nullable) is the offset of the first offending byte. NUL counts as a control character.
int text_is_clean(const char* s, size_t len, size_t* at);

// Compare two secrets over their full lengths; the time taken depends on the lengths only,
// not on the contents. Returns 1 when equal.
int text_equal_secret(const char* a, size_t alen, const char* b, size_t blen);

// Copy src[0..len) into dest (capacity cap >= 1, always NUL-terminated) with every C0 control
// character, DEL, backslash and byte that is not part of valid UTF-8 written as \xNN (\n, \r,
// \t as themselves escaped: "\\n"), and every code point that does not print or changes how
// the text around it is shown written as \uXXXX (\UXXXXXXXX above U+FFFF): C1 controls, the
// line and paragraph separators U+2028/U+2029, bidirectional controls (U+061C, U+200E/F,
// U+202A..U+202E, U+2066..U+2069), the other format characters and invisible ones (Unicode's
// Cf and Default_Ignorable_Code_Point) and noncharacters. What is left prints as itself on
// one line. Output that does not fit is cut at a character boundary. Returns the length
// written.
size_t text_escape(char* dest, size_t cap, const char* src, size_t len);

// Copy the valid UTF-8 string src (NUL-terminated) into dest (capacity cap >= 1, always
// NUL-terminated); when it does not fit, it is cut at the last character boundary that does,
// never inside a multi-byte sequence. Returns the length written.
size_t text_copy(char* dest, size_t cap, const char* src);

#endif  // SENSIM_BASE_TEXT_H_
