/*
 * dump/scalar.h: the reader's context, and the readers of one member's value. Each
 * returns 0, or -1 after dr_fail says which member is not of its kind.
 */
#ifndef NCCLGUARD_CLI_DUMP_SCALAR_H
#define NCCLGUARD_CLI_DUMP_SCALAR_H

#include <stddef.h>
#include <stdint.h>

#include "dump/dump.h"
#include "dump/mem.h"
#include "json/json.h"

/* Where the reader is, for messages: "ops[12].seq". */
#define DR_DEPTH 6
struct dr_reader {
    struct dr_dump *d;
    struct dr_mem *m;
    char *err;
    size_t errlen;
    struct {
        const char *name;
        long index; /* -1: a member, not an element */
    } path[DR_DEPTH];
    int depth;
    size_t ops_cap, comms_cap, threads_cap, pythreads_cap; /* of the arrays of d */
    int brief;                                             /* DR_BRIEF */
    int tail, no_tail; /* brief: past the ops in flight (unless no_tail) */
    int order_broken;  /* an op in flight among the tail: read again without it */
};

static inline void dr_enter(struct dr_reader *r, const char *name, long index)
{
    if (r->depth < DR_DEPTH) {
        r->path[r->depth].name = name;
        r->path[r->depth].index = index;
    }
    r->depth++;
}

static inline void dr_leave(struct dr_reader *r)
{
    r->depth--;
}

/* Sets the message "<path>.<member>: <what>" and returns -1. */
int dr_fail(struct dr_reader *r, const char *member, const char *what);

/* integers; null reads as `null_as` */
int dr_i64(struct dr_reader *r, const char *key, ng_jv *v, int64_t *out, int64_t null_as);
int dr_i32(struct dr_reader *r, const char *key, ng_jv *v, int32_t *out, int32_t null_as);
/* a non-negative integer; dr_u64_or_null: null reads as 0 */
int dr_u64(struct dr_reader *r, const char *key, ng_jv *v, uint64_t *out);
int dr_u64_or_null(struct dr_reader *r, const char *key, ng_jv *v, uint64_t *out);
/* 1 to 16 hexadecimal digits; with nullable, null reads as 0 */
int dr_hex(struct dr_reader *r, const char *key, ng_jv *v, uint64_t *out, int nullable);
int dr_bool(struct dr_reader *r, const char *key, ng_jv *v, int *out);
/* a string copied into the dump (null: NULL) */
int dr_str(struct dr_reader *r, const char *key, ng_jv *v, const char **out);
/* a string into buf, cut to fit (null: "") */
int dr_chars(struct dr_reader *r, const char *key, ng_jv *v, char *buf, size_t size);
/* a string among the names name(0..n-1); another string reads as `other` */
int dr_enum(struct dr_reader *r, const char *key, ng_jv *v, const char *(*name)(int), int n,
            int other, uint8_t *out);
/* an object, its members handed to fn */
int dr_object(struct dr_reader *r, ng_jv *v, const struct ng_jkeys *keys, ng_jmember_fn fn,
              void *ctx);
/* the first of the `need` members (bits of keys[]) that `seen` lacks */
int dr_missing(struct dr_reader *r, const char *const *keys, int n, uint32_t seen, uint32_t need);

#endif
