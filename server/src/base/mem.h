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

// Bytes of memory the block p (from mem_alloc/mem_calloc/mem_realloc) takes: what the
// allocator made usable plus its own header, which for small blocks is most of the cost
// (a 20-byte block takes 32). 0 for NULL. Thread: any.
size_t mem_footprint(const void* p);

// What a block of n bytes would take, by the same rule, for memory allocated outside this
// module (a library's own blocks) whose pointer is not at hand. Thread: any.
size_t mem_footprint_of(size_t n);

// Give free memory the allocator keeps back to the system (all of it, whatever the trim
// threshold set with mallopt in main.c). Takes time in proportion to the heap: call it
// rarely, after a large amount was freed. Thread: any.
void mem_trim(void);

// Test hook: the nth allocation from now fails (1 = the next one); 0 disables.
void mem_fail_after(int64_t nth);

#endif  // SENSIM_BASE_MEM_H_
