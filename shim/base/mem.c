/*
 * mem.c: the count of mem.h.
 */
#include "base/mem.h"

ng_atomic(uint64_t) ncclguard_mem_total;
