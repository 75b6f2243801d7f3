// SPDX-License-Identifier: MIT
// mem.h: the one allocator of the server. Counts live bytes and can be told to fail the Nth
// allocation, so that out-of-memory paths are testable everywhere.
#ifndef SENSIM_BASE_MEM_H_
#define SENSIM_BASE_MEM_H_

#include <stddef.h>
#include <stdint.h>

// Allocate; NULL on failure (never aborts). Thread: any.
void* mem_alloc(size_t size);
void* mem_calloc(size_t count, size_t size);
void* mem_realloc(void* ptr, size_t size);
void mem_free(void* ptr);

// Duplicate a NUL-terminated string; NULL on failure or when s is NULL.
char* mem_strdup(const char* s);

// Allocations currently live (count of mem_alloc without mem_free). Thread: any (atomic).
int64_t mem_live_count(void);

// Test hook: the nth allocation from now fails (1 = the next one); 0 disables.
void mem_fail_after(int64_t nth);

#endif  // SENSIM_BASE_MEM_H_
