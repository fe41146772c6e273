/*
 * json/json.h: reading one JSON document by walking it, over one of two libraries:
 * simdjson (json/simdjson.cc, its On-Demand API: nothing is built, values are
 * parsed as they are visited and skipped members cost only the structural scan)
 * and jansson (json/jansson.c: the document is loaded into a tree, then
 * walked the same way). The dump reader (dump/map.c) is written once against
 * this interface; the analyzer uses simdjson, and the tests and the fuzzer check
 * that both read every dump alike.
 *
 * Values are visited in document order, and each only inside the callback that
 * received it: a value, and any string it gave, is gone when the callback returns.
 */
#ifndef NCCLGUARD_CLI_JSON_JSON_H
#define NCCLGUARD_CLI_JSON_JSON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes that must be readable (any value) after the end of the buffer given to
 * ng_json_parse: simdjson reads ahead in blocks. */
#define NG_JSON_PADDING 64

enum ng_json_backend { NG_JSON_SIMDJSON, NG_JSON_JANSSON };

enum ng_jkind { NG_J_NULL, NG_J_BOOL, NG_J_NUMBER, NG_J_STRING, NG_J_ARRAY, NG_J_OBJECT };

typedef struct ng_jv ng_jv; /* one value, valid during the callback that got it */

/* The member names an object reader wants; the others are skipped. Filled by
 * the reader; `hint` is the backend's guess at the next key (members usually
 * come in the writer's order). */
struct ng_jkeys {
    const char *const *names;
    int n;
    unsigned char len[64]; /* strlen of each name, set by ng_jkeys_init */
};
void ng_jkeys_init(struct ng_jkeys *k, const char *const *names, int n);

/* Each returns 0, or -1 when the value is not of that kind (numbers: not an
 * integer within int64_t). Strings are unescaped, NUL-free or not: `len` counts. */
int ng_jv_kind(ng_jv *v);
int ng_jv_int(ng_jv *v, int64_t *out);
int ng_jv_bool(ng_jv *v, int *out);
int ng_jv_string(ng_jv *v, const char **s, size_t *len);

/* Calls fn(ctx, i, value) for each member whose name is keys->names[i], in
 * document order; skips the others. -1 when v is not an object or the
 * document is malformed; fn's nonzero return ends the walk and is returned. */
typedef int (*ng_jmember_fn)(void *ctx, int key, ng_jv *v);
int ng_jv_object(ng_jv *v, const struct ng_jkeys *keys, ng_jmember_fn fn, void *ctx);

/* Calls fn(ctx, index, value) for each element of the array v. */
typedef int (*ng_jelem_fn)(void *ctx, size_t i, ng_jv *v);
int ng_jv_array(ng_jv *v, ng_jelem_fn fn, void *ctx);

/* A flat object read into a C struct by a table: each member of the table is
 * converted by its kind and stored at its offset; members not in the table are
 * skipped. The bulk path of the dump reader. */
enum ng_jfkind {
    NG_JF_I64,         /* int64_t */
    NG_JF_I32,         /* int32_t, range-checked */
    NG_JF_U64,         /* uint64_t, not negative */
    NG_JF_U64_OR_NULL, /* the same, null reads as 0 */
    NG_JF_HEX,         /* uint64_t from 1 to 16 hexadecimal digits */
    NG_JF_CHARS,       /* char[size], cut to fit */
    NG_JF_ENUM,        /* uint8_t: the index among names (size of them), else null_as */
    NG_JF_FLAGS,       /* uint32_t: bit i for each string names[i] (or "bit<i>") */
    NG_JF_SKIP,        /* a member known and not wanted: skipped, any value */
};

struct ng_jfield {
    const char *name;
    uint8_t kind, nullable; /* nullable: null reads as null_as (0, "" for strings) */
    uint16_t offset, size;
    int64_t null_as;
    const char *const *names;
};

struct ng_jrecord {
    const struct ng_jfield *fields;
    int n; /* at most 64 */
    unsigned char len[64];
    const char *names[64];
    uint64_t word[64][2], mask[64][2]; /* name and closing quote as two words, len < 16 */
};
void ng_jrecord_init(struct ng_jrecord *r, const struct ng_jfield *fields, int n);

/* Reads the object v into out. *seen gets bit i for each member fields[i] found.
 * 0; -1 when v is not an object or the document is malformed (*bad = -1), or a
 * member's value is not of its kind (*bad = its index). */
int ng_jv_record(ng_jv *v, const struct ng_jrecord *rec, void *out, uint64_t *seen, int *bad);

/* A parser, reused across documents (it keeps its buffers); one per thread
 * (json/parser.h makes one). */
typedef struct ng_jparser ng_jparser;
void ng_jparser_free(ng_jparser *p);

/* Parses buf[0..len) (NG_JSON_PADDING readable bytes after it) and calls
 * root(ctx, value) on the document's value. Returns 0; root's nonzero return;
 * or -1 with a one-line reason in err (malformed or truncated JSON, trailing
 * content, and so on). */
int ng_json_parse(ng_jparser *p, const char *buf, size_t len, int (*root)(void *ctx, ng_jv *v),
                  void *ctx, char *err, size_t errlen);

/* For the back ends (json/jansson.c, json/simdjson.cc): a value and a parser
 * start with a table of the back end's functions, which json.c calls. */
struct ng_jv_ops {
    int (*kind)(ng_jv *v);
    int (*integer)(ng_jv *v, int64_t *out);
    int (*boolean)(ng_jv *v, int *out);
    int (*string)(ng_jv *v, const char **s, size_t *len);
    int (*object)(ng_jv *v, const struct ng_jkeys *keys, ng_jmember_fn fn, void *ctx);
    int (*array)(ng_jv *v, ng_jelem_fn fn, void *ctx);
    int (*record)(ng_jv *v, const struct ng_jrecord *rec, void *out, uint64_t *seen, int *bad);
};

struct ng_jv {
    const struct ng_jv_ops *ops;
};

struct ng_jparser {
    void (*free)(ng_jparser *p);
    int (*parse)(ng_jparser *p, const char *buf, size_t len, int (*root)(void *, ng_jv *),
                 void *ctx, char *err, size_t errlen);
};

/* The index of the name s[0..len) in k, or -1; *hint is the last index found. */
int ng_jkeys_find(const struct ng_jkeys *k, const char *s, size_t len, int *hint);

/* The index of the member named s[0..len) in rec, or -1; *hint as above. */
int ng_jrecord_find(const struct ng_jrecord *rec, const char *s, size_t len, int *hint);

#ifdef __cplusplus
}
#endif

#endif
