/*
 * dumpread_scalar.h: the readers of one member's value, for dumpread_*.c. Each
 * returns 0, or -1 after ng_rd_fail says which member is not of its kind.
 */
#ifndef NCCLGUARD_DUMPREAD_SCALAR_H
#define NCCLGUARD_DUMPREAD_SCALAR_H

#include <stddef.h>
#include <stdint.h>

#include "dumpread_mem.h"
#include "jsonread.h"

/* integers; null reads as `null_as` */
int rd_i64(struct ng_rd *r, const char *key, ng_jv *v, int64_t *out, int64_t null_as);
int rd_i32(struct ng_rd *r, const char *key, ng_jv *v, int32_t *out, int32_t null_as);
/* a non-negative integer; rd_u64_or_null: null reads as 0 */
int rd_u64(struct ng_rd *r, const char *key, ng_jv *v, uint64_t *out);
int rd_u64_or_null(struct ng_rd *r, const char *key, ng_jv *v, uint64_t *out);
/* 1 to 16 hexadecimal digits; with nullable, null reads as 0 */
int rd_hex(struct ng_rd *r, const char *key, ng_jv *v, uint64_t *out, int nullable);
int rd_bool(struct ng_rd *r, const char *key, ng_jv *v, int *out);
/* a string copied into the dump (null: NULL) */
int rd_str(struct ng_rd *r, const char *key, ng_jv *v, const char **out);
/* a string into buf, cut to fit (null: "") */
int rd_chars(struct ng_rd *r, const char *key, ng_jv *v, char *buf, size_t size);
/* a string among the names name(0..n-1); another string reads as `other` */
int rd_enum(struct ng_rd *r, const char *key, ng_jv *v, const char *(*name)(int), int n, int other,
            uint8_t *out);
/* an object, its members handed to fn */
int rd_object(struct ng_rd *r, ng_jv *v, const struct ng_jkeys *keys, ng_jmember_fn fn, void *ctx);
/* the first of the `need` members (bits of keys[]) that `seen` lacks */
int rd_missing(struct ng_rd *r, const char *const *keys, int n, uint32_t seen, uint32_t need);

/* dumpread_map.c, dumpread_stack.c: the arrays of the top level */
int ng_rd_ops(struct ng_rd *r, ng_jv *v);
int ng_rd_comms(struct ng_rd *r, ng_jv *v);
int ng_rd_threads(struct ng_rd *r, ng_jv *v);
int ng_rd_python(struct ng_rd *r, ng_jv *v);
/* dumpread_stack.c: every C frame of a dump just read, through the resolver
 * (ng_dump_set_resolver), if one is set */
void ng_rd_resolve_frames(struct ng_dump *d);

#endif
