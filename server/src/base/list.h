// SPDX-License-Identifier: MIT
// list.h: intrusive doubly linked list with a sentinel head, and container_of.
#ifndef SENSIM_BASE_LIST_H_
#define SENSIM_BASE_LIST_H_

#include <stddef.h>

#define container_of(ptr, type, member) ((type*)((char*)(ptr) - offsetof(type, member)))

typedef struct list_node {
  struct list_node* prev;
  struct list_node* next;
} list_node_t;

typedef struct list {
  list_node_t head;  // sentinel: head.next is the first node, head.prev the last
} list_t;

static inline void list_init(list_t* l) {
  l->head.prev = &l->head;
  l->head.next = &l->head;
}

static inline int list_is_empty(const list_t* l) {
  return l->head.next == &l->head;
}

// Link n in just before `at` (a node of the list, or its head: then n goes last).
static inline void list_insert_before(list_node_t* at, list_node_t* n) {
  n->prev = at->prev;
  n->next = at;
  at->prev->next = n;
  at->prev = n;
}

static inline void list_push_back(list_t* l, list_node_t* n) {
  list_insert_before(&l->head, n);
}

static inline void list_remove(list_node_t* n) {
  n->prev->next = n->next;
  n->next->prev = n->prev;
  n->prev = n->next = n;
}

// First node, or NULL when empty.
static inline list_node_t* list_front(const list_t* l) {
  return list_is_empty(l) ? NULL : l->head.next;
}

#endif  // SENSIM_BASE_LIST_H_
