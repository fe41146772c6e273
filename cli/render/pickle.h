/*
 * render/pickle.h: a small writer of Python pickles (protocol 2), enough for the
 * Flight Recorder dumps of render/fr.h: None, booleans, integers, floats,
 * strings, lists, tuples and dicts. Containers are written as they are filled
 * (MARK ... APPENDS / SETITEMS / TUPLE), so that nothing is held but the bytes,
 * and no memo is used: every value is written once.
 *
 * The bytes grow in memory; a failed allocation is remembered, and rn_pk_done
 * reports it. Only data opcodes are written: the result loads with
 * `pickle.loads` and with dump/pickle.h, and runs nothing.
 *
 * Called from any thread; one writer per document, nothing shared.
 */
#ifndef NCCLGUARD_CLI_RENDER_PICKLE_H
#define NCCLGUARD_CLI_RENDER_PICKLE_H

#include <stddef.h>
#include <stdint.h>

struct rn_pk {
    unsigned char *buf;
    size_t len, cap;
    int failed; /* out of memory, or a container closed that was not open */
    int depth;  /* containers open */
};

/* Starts a document (the PROTO 2 header). */
void rn_pk_init(struct rn_pk *p);
/* Ends it (STOP): 0, or -1 when out of memory or the containers do not nest. */
int rn_pk_done(struct rn_pk *p);
void rn_pk_free(struct rn_pk *p);

void rn_pk_none(struct rn_pk *p);
void rn_pk_bool(struct rn_pk *p, int v);
void rn_pk_int(struct rn_pk *p, int64_t v);
void rn_pk_float(struct rn_pk *p, double v);
/* A str of the NUL-terminated s (UTF-8, as it is); rn_pk_strn of s[0..len). */
void rn_pk_str(struct rn_pk *p, const char *s);
void rn_pk_strn(struct rn_pk *p, const char *s, size_t len);

/* A container: begin, its items (a dict: key, value, key, value...), end. */
void rn_pk_dict_begin(struct rn_pk *p);
void rn_pk_dict_end(struct rn_pk *p);
void rn_pk_list_begin(struct rn_pk *p);
void rn_pk_list_end(struct rn_pk *p);
void rn_pk_tuple_begin(struct rn_pk *p);
void rn_pk_tuple_end(struct rn_pk *p);

#endif
