/*
 * dumpread_mem.h: the memory of one struct ng_dump (dumpread.h), and the read
 * context of dumpread_map.c's member readers. Internal to the dump reader.
 */
#ifndef NCCLGUARD_DUMPREAD_MEM_H
#define NCCLGUARD_DUMPREAD_MEM_H

#include <stddef.h>
#include <stdint.h>

#include "dumpread.h"
#include "jsonread.h"

struct ng_dump_mem {
    struct mem_block *blocks;   /* strings and small arrays */
    void **vecs;                /* growable arrays (ops, comms, ...) */
    size_t nvecs, capvecs;
};

/* A copy of s[0..len) with a NUL, owned by m; NULL when out of memory. */
char *ng_mem_strdup(struct ng_dump_mem *m, const char *s, size_t len);
/* A growable array owned by m: *vec grows to hold n + 1 elements of size el
 * (cap counts them). Returns the new element (zeroed), or NULL. */
void *ng_mem_push(struct ng_dump_mem *m, void **vec, size_t *n, size_t *cap, size_t el);
void ng_mem_free(struct ng_dump_mem *m);

/* The bytes of the regular file at path, with NG_JSON_PADDING zero bytes after them,
 * read into b->buf, which is kept (and grown) from one file to the next: a reader
 * thread reuses one buffer. (Mapping the files instead costs more: each unmap
 * interrupts the other CPUs to flush their TLBs.) 0, or -1 with the reason in err. */
struct ng_dump_bytes {
    char *buf;
    size_t len, cap;
};
int ng_dump_slurp(const char *path, struct ng_dump_bytes *b, char *err, size_t errlen);
void ng_dump_unslurp(struct ng_dump_bytes *b); /* frees the buffer */

/* Where the reader is, for messages: "ops[12].seq". */
#define NG_RD_DEPTH 6
struct ng_rd {
    struct ng_dump *d;
    struct ng_dump_mem *m;
    char *err;
    size_t errlen;
    struct {
        const char *name;
        long index;     /* -1: a member, not an element */
    } path[NG_RD_DEPTH];
    int depth;
    size_t ops_cap, comms_cap, threads_cap, pythreads_cap; /* of the arrays of d */
    int brief;            /* NG_DUMP_BRIEF */
    int tail, no_tail;    /* brief: past the ops in flight (unless no_tail) */
    int order_broken;     /* an op in flight among the tail: read again without it */
};

static inline void rd_enter(struct ng_rd *r, const char *name, long index)
{
    if (r->depth < NG_RD_DEPTH) {
        r->path[r->depth].name = name;
        r->path[r->depth].index = index;
    }
    r->depth++;
}

static inline void rd_leave(struct ng_rd *r) { r->depth--; }

/* Sets the message "<path>.<member>: <what>" and returns -1. */
int ng_rd_fail(struct ng_rd *r, const char *member, const char *what);

#endif
