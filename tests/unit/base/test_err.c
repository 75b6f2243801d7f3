// SPDX-License-Identifier: MIT
// test_err.c: error names, texts and detail messages.
#include "base/err.h"

#include "base/buf.h"
#include "base/mem.h"
#include "check.h"


TEST(err_names_and_texts) {
  ASSERT_STREQ(err_name(ERR_INVAL), "ERR_INVAL");
  ASSERT_STREQ(err_name(ERR_OK), "ERR_OK");
  ASSERT_STREQ(err_name(12345), "ERR_UNKNOWN");
  ASSERT_STREQ(err_str(ERR_NOTFOUND), "not found");
  return 0;
}


TEST(err_set_and_prefix_build_a_field_path) {
  err_msg_t m;
  ASSERT_EQ(err_set(&m, ERR_INVAL, "indices[%d] out of range", 7), ERR_INVAL);
  err_prefix(&m, "create_mesh");
  ASSERT_STREQ(m.text, "create_mesh.indices[7] out of range");
  ASSERT_EQ(err_set(NULL, ERR_LIMIT, "ignored"), ERR_LIMIT);
  return 0;
}


TEST(buf_append_fails_cleanly_when_allocation_fails) {
  buf_t b;
  buf_init(&b);
  int64_t live = mem_live_count();
  mem_fail_after(1);
  ASSERT_EQ(buf_append(&b, "abc", 3), ERR_NOMEM);
  ASSERT_EQ(b.len, 0);
  mem_fail_after(0);
  ASSERT_OK(buf_append(&b, "abc", 3));
  ASSERT_OK(buf_append(&b, "def", 3));
  buf_consume(&b, 2);
  ASSERT_MEM_EQ(b.data, "cdef", 4);
  buf_close(&b);
  ASSERT_EQ(mem_live_count(), live);
  return 0;
}
