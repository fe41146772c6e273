/*
 * dump/pickle.h: a bounded reader of the data subset of Python's pickle format (the
 * opcodes of protocols 0 to 5 that build None, booleans, integers, floats,
 * strings, bytes, lists, tuples and dicts), enough for the files PyTorch's C++
 * pickler writes (its Flight Recorder dumps, cli/dump/fr.h).
 *
 * Nothing is executed: an opcode that names or calls Python code (GLOBAL,
 * STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ, NEWOBJ_EX, the extension
 * registry, persistent ids) or builds another kind of object (sets, buffers)
 * makes the whole file unusable, with a one-line reason; no object of it is
 * built. Everything is bounded: each length against the bytes left, the stack,
 * the marks, the memo, the number of values and the nesting of containers.
 * A container cannot change once it is inside another, so that the result is a
 * tree (shared subtrees allowed, never a cycle) of known depth.
 *
 * Called from any thread; one document per call, nothing shared.
 */
#ifndef NCCLGUARD_CLI_DUMP_PICKLE_H
#define NCCLGUARD_CLI_DUMP_PICKLE_H

#include <stddef.h>
#include <stdint.h>

enum dr_pk_kind {
    DR_PK_NONE,
    DR_PK_BOOL,
    DR_PK_INT,
    DR_PK_FLOAT,
    DR_PK_STR,
    DR_PK_BYTES,
    DR_PK_LIST,
    DR_PK_TUPLE,
    DR_PK_DICT
};

/* Bounds (a Flight Recorder dump of 20000 entries has about 10^6 values). */
#define DR_PK_MAX_DEPTH 64          /* containers inside containers */
#define DR_PK_MAX_MARKS 1024        /* open marks */
#define DR_PK_MAX_STACK (1u << 22)  /* values on the stack */
#define DR_PK_MAX_VALUES (1u << 24) /* values built */
#define DR_PK_MAX_MEMO (1u << 24)   /* memo slots */

struct dr_pk_val {
    uint8_t kind;   /* enum dr_pk_kind */
    uint8_t frozen; /* inside another container: no longer changes */
    uint16_t depth; /* 0 for a scalar, 1 + its deepest item's for a container */
    size_t n;       /* items (a dict: 2 a pair, key at 2i, value at 2i + 1); str, bytes:
                           the length */
    size_t cap;
    union {
        int64_t i; /* int, bool */
        double f;
        const char *s; /* str (UTF-8, NUL-terminated) and bytes */
        struct dr_pk_val **items;
    } u;
};

struct dr_pk_doc;

/* Reads the pickle in buf[0..len). Returns the document, or NULL with a one-line
 * reason in err ("opcode REDUCE (0x52) at byte 1234: pickle code is never run"). */
struct dr_pk_doc *dr_pk_parse(const void *buf, size_t len, char *err, size_t errlen);
const struct dr_pk_val *dr_pk_root(const struct dr_pk_doc *d);
void dr_pk_free(struct dr_pk_doc *d);

/* The value of key (a str) in dict d, the last one when it appears twice as in
 * Python; NULL when d is not a dict or has no such key. */
const struct dr_pk_val *dr_pk_get(const struct dr_pk_val *d, const char *key);
/* Item i of a list or tuple; NULL out of range or another kind. */
const struct dr_pk_val *dr_pk_item(const struct dr_pk_val *v, size_t i);
/* The number of items of a list or tuple, 0 for anything else. */
size_t dr_pk_len(const struct dr_pk_val *v);
/* v as an integer (an int or a bool): 0, or -1 when it is not one. */
int dr_pk_int(const struct dr_pk_val *v, int64_t *out);
/* v as a string: NULL when it is not a str. */
const char *dr_pk_str(const struct dr_pk_val *v);

#endif
