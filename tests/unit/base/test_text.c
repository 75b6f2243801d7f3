// SPDX-License-Identifier: MIT
// test_text.c: strings from the outside: clean-text checks, the constant-time comparison of
// secrets, and log escaping.
#include "base/text.h"

#include <string.h>

#include "check.h"


TEST(text_clean_refuses_nul_c0_del_and_c1_controls) {
  size_t at = 99;
  ASSERT_TRUE(text_is_clean("plain name", 10, &at));
  ASSERT_TRUE(text_is_clean("caf\xc3\xa9 \xe2\x82\xac", 9, &at));  // é and € are fine
  ASSERT_TRUE(!text_is_clean("ab\0cd", 5, &at));
  ASSERT_EQ(at, 2);
  ASSERT_TRUE(!text_is_clean("a\nb", 3, &at));
  ASSERT_EQ(at, 1);
  ASSERT_TRUE(!text_is_clean("\x1b[31m", 5, &at));
  ASSERT_EQ(at, 0);
  ASSERT_TRUE(!text_is_clean("x\x7f", 2, &at));
  ASSERT_EQ(at, 1);
  ASSERT_TRUE(!text_is_clean("c1\xc2\x9b", 4, &at));  // U+009B, the 8-bit CSI
  ASSERT_EQ(at, 2);
  ASSERT_TRUE(text_is_clean("\xc2\xa0", 2, NULL));     // U+00A0 is not a control
  ASSERT_TRUE(text_is_clean("", 0, NULL));
  // invalid UTF-8 (a protobuf string must be valid): stray continuation, truncated sequence,
  // overlong form, surrogate, beyond U+10FFFF
  ASSERT_TRUE(!text_is_clean("ab\x80", 3, &at));
  ASSERT_EQ(at, 2);
  ASSERT_TRUE(!text_is_clean("\xff\xfe\x80Q", 4, &at));
  ASSERT_EQ(at, 0);
  ASSERT_TRUE(!text_is_clean("x\xe2\x82", 3, &at));
  ASSERT_EQ(at, 1);
  ASSERT_TRUE(!text_is_clean("\xc0\xaf", 2, NULL));
  ASSERT_TRUE(!text_is_clean("\xed\xa0\x80", 3, NULL));
  ASSERT_TRUE(!text_is_clean("\xf4\x90\x80\x80", 4, NULL));
  ASSERT_TRUE(text_is_clean("\xf0\x9f\x98\x80", 4, NULL));  // U+1F600
  return 0;
}


TEST(text_secrets_are_equal_only_over_their_full_length) {
  ASSERT_TRUE(text_equal_secret("s3cret", 6, "s3cret", 6));
  ASSERT_TRUE(!text_equal_secret("s3cret\0junk", 11, "s3cret", 6));
  ASSERT_TRUE(!text_equal_secret("s3cre", 5, "s3cret", 6));
  ASSERT_TRUE(!text_equal_secret("s3cret", 6, "s3creT", 6));
  ASSERT_TRUE(!text_equal_secret("", 0, "x", 1));
  ASSERT_TRUE(text_equal_secret("", 0, "", 0));
  // equal prefixes padded with what the shorter string does not have still differ
  ASSERT_TRUE(!text_equal_secret("ab", 2, "ab\0", 3));
  return 0;
}


TEST(text_escape_keeps_one_line_and_no_control_bytes) {
  char out[64];
  ASSERT_EQ(text_escape(out, sizeof(out), "ok caf\xc3\xa9", 8), 8);
  ASSERT_STREQ(out, "ok caf\xc3\xa9");
  text_escape(out, sizeof(out), "a\nb\rc\td\\e", 9);
  ASSERT_STREQ(out, "a\\nb\\rc\\td\\\\e");
  text_escape(out, sizeof(out), "\x1b[2J\x7f", 5);
  ASSERT_STREQ(out, "\\x1b[2J\\x7f");
  text_escape(out, sizeof(out), "bad\xff\xfe\xc2", 6);
  ASSERT_STREQ(out, "bad\\xff\\xfe\\xc2");
  text_escape(out, sizeof(out), "c1\xc2\x9bx", 5);                  // C1 CSI: one code point
  ASSERT_STREQ(out, "c1\\u009bx");
  text_escape(out, sizeof(out), "\xed\xa0\x80", 3);                 // a surrogate is not UTF-8
  ASSERT_STREQ(out, "\\xed\\xa0\\x80");
  text_escape(out, sizeof(out), "\xe0\x80\x80", 3);                 // nor an overlong form
  ASSERT_STREQ(out, "\\xe0\\x80\\x80");
  ASSERT_EQ(text_escape(out, sizeof(out), "nul\0x", 5), 8);
  ASSERT_STREQ(out, "nul\\x00x");
  return 0;
}


// U+00A0, U+00AC, U+2027, U+202F, U+205F, U+2070, U+FEFE, U+1F600: printable neighbours of
// the escaped ranges.
static const char k_neighbours[] =
    "\xc2\xa0\xc2\xac\xe2\x80\xa7\xe2\x80\xaf\xe2\x81\x9f\xe2\x81\xb0\xef\xbb\xbe\xf0\x9f\x98\x80";


// Every code point that does not print, or changes how the text around it is shown, is
// written as \uXXXX; the printable neighbours of each stay as they are.
TEST(text_escape_shows_bidirectional_format_and_invisible_code_points_escaped) {
  static const struct {
    const char* in;
    const char* out;
  } cases[] = {
      {"a\xe2\x80\xaez", "a\\u202ez"},          // right-to-left override
      {"a\xe2\x80\xaaz", "a\\u202az"},          // left-to-right embedding
      {"a\xe2\x80\xacz", "a\\u202cz"},          // pop directional formatting
      {"a\xe2\x80\xa8z", "a\\u2028z"},          // line separator
      {"a\xe2\x80\xa9z", "a\\u2029z"},          // paragraph separator
      {"a\xe2\x80\x8ez", "a\\u200ez"},          // left-to-right mark
      {"a\xe2\x80\x8fz", "a\\u200fz"},          // right-to-left mark
      {"a\xe2\x81\xa6z", "a\\u2066z"},          // left-to-right isolate
      {"a\xe2\x81\xa9z", "a\\u2069z"},          // pop directional isolate
      {"a\xd8\x9cz", "a\\u061cz"},              // Arabic letter mark
      {"a\xe2\x80\x8bz", "a\\u200bz"},          // zero-width space
      {"a\xe2\x81\xa0z", "a\\u2060z"},          // word joiner
      {"a\xef\xbb\xbfz", "a\\ufeffz"},          // byte order mark
      {"a\xc2\xadz", "a\\u00adz"},              // soft hyphen
      {"a\xc2\x85z", "a\\u0085z"},              // next line (C1)
      {"a\xef\xbf\xbez", "a\\ufffez"},          // noncharacter
      {"a\xf3\xa0\x81\x81z", "a\\U000e0041z"},  // tag latin capital A
      {"a\xf0\x9d\x85\xb3z", "a\\U0001d173z"},  // musical symbol begin beam
      {k_neighbours, k_neighbours},  // the printable neighbours of the ranges stay
  };
  char out[64];
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    text_escape(out, sizeof(out), cases[i].in, strlen(cases[i].in));
    ASSERT_STREQ(out, cases[i].out);
  }

  // every code point of the bidirectional controls and separators, and nothing between them
  for (unsigned cp = 0x2000; cp < 0x2100; cp++) {
    char in[3] = {(char)(0xe0 | cp >> 12), (char)(0x80 | ((cp >> 6) & 0x3f)),
                  (char)(0x80 | (cp & 0x3f))};
    int hidden = (cp >= 0x200b && cp <= 0x200f) || (cp >= 0x2028 && cp <= 0x202e) ||
                 (cp >= 0x2060 && cp <= 0x206f);
    ASSERT_EQ(text_escape(out, sizeof(out), in, 3), hidden ? 6 : 3);
  }

  // a cut never splits an escape
  char small[6];
  ASSERT_EQ(text_escape(small, sizeof(small), "ab\xe2\x80\xae", 5), 2);
  ASSERT_STREQ(small, "ab");
  return 0;
}


TEST(text_escape_cuts_at_a_character_boundary) {
  char out[6];
  // "\n" needs two bytes: "abc" + "\n" would be 5 + NUL = 6, so it fits; the rest does not
  ASSERT_EQ(text_escape(out, sizeof(out), "abc\ndef", 7), 5);
  ASSERT_STREQ(out, "abc\\n");
  ASSERT_EQ(text_escape(out, sizeof(out), "abcd\x01", 5), 4);       // "\x01" would not fit
  ASSERT_STREQ(out, "abcd");
  ASSERT_EQ(text_escape(out, sizeof(out), "ab\xe2\x82\xac\xe2\x82\xac", 8), 5);
  ASSERT_STREQ(out, "ab\xe2\x82\xac");
  char one[1];
  ASSERT_EQ(text_escape(one, sizeof(one), "x", 1), 0);
  ASSERT_STREQ(one, "");
  return 0;
}


TEST(text_copy_cuts_at_a_character_boundary) {
  char d[6];
  ASSERT_EQ(text_copy(d, sizeof(d), "abc"), 3);
  ASSERT_STREQ(d, "abc");
  ASSERT_EQ(text_copy(d, sizeof(d), "abcdefg"), 5);
  ASSERT_STREQ(d, "abcde");
  // "abcd" then U+20AC (3 bytes): only 1 of its bytes would fit, so it goes whole
  ASSERT_EQ(text_copy(d, sizeof(d), "abcd\xe2\x82\xac"), 4);
  ASSERT_STREQ(d, "abcd");
  ASSERT_TRUE(text_is_clean(d, strlen(d), NULL));
  // U+1F600 (4 bytes) at the start of a 5-byte buffer fits exactly
  ASSERT_EQ(text_copy(d, sizeof(d), "\xf0\x9f\x98\x80z"), 5);
  ASSERT_TRUE(text_is_clean(d, strlen(d), NULL));
  ASSERT_EQ(text_copy(d, sizeof(d), "\xf0\x9f\x98\x80\xc3\xa9"), 4);  // é does not fit
  ASSERT_STREQ(d, "\xf0\x9f\x98\x80");
  char one[1];
  ASSERT_EQ(text_copy(one, sizeof(one), "x"), 0);
  ASSERT_STREQ(one, "");
  return 0;
}
