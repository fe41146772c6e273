/*
 * json/jansson.c: the jansson backend of json/json.h. json_loadb builds the
 * whole tree (duplicate member names rejected), which is then walked in document
 * order (jansson keeps the members of an object in insertion order).
 */
#include "json/jansson.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "json/json.h"
#include "json/record.h"

struct jv {
    ng_jv base;
    json_t *j;
};

static const struct ng_jv_ops jv_ops;

static int jv_kind(ng_jv *v)
{
    json_t *j = ((struct jv *)v)->j;
    switch (json_typeof(j)) {
    case JSON_OBJECT: return NG_J_OBJECT;
    case JSON_ARRAY: return NG_J_ARRAY;
    case JSON_STRING: return NG_J_STRING;
    case JSON_INTEGER:
    case JSON_REAL: return NG_J_NUMBER;
    case JSON_TRUE:
    case JSON_FALSE: return NG_J_BOOL;
    default: return NG_J_NULL;
    }
}

static int jv_integer(ng_jv *v, int64_t *out)
{
    json_t *j = ((struct jv *)v)->j;
    if (!json_is_integer(j)) return -1;
    *out = (int64_t)json_integer_value(j);
    return 0;
}

static int jv_boolean(ng_jv *v, int *out)
{
    json_t *j = ((struct jv *)v)->j;
    if (!json_is_boolean(j)) return -1;
    *out = json_is_true(j);
    return 0;
}

static int jv_string(ng_jv *v, const char **s, size_t *len)
{
    json_t *j = ((struct jv *)v)->j;
    if (!json_is_string(j)) return -1;
    *s = json_string_value(j);
    *len = json_string_length(j);
    return 0;
}

static int jv_object(ng_jv *v, const struct ng_jkeys *keys, ng_jmember_fn fn, void *ctx)
{
    json_t *j = ((struct jv *)v)->j;
    if (!json_is_object(j)) return -1;
    int hint = -1;
    for (void *it = json_object_iter(j); it; it = json_object_iter_next(j, it)) {
        int k = ng_jkeys_find(keys, json_object_iter_key(it), json_object_iter_key_len(it), &hint);
        if (k < 0) continue;
        struct jv child = {{&jv_ops}, json_object_iter_value(it)};
        int rc = fn(ctx, k, &child.base);
        if (rc) return rc;
    }
    return 0;
}

static int jv_array(ng_jv *v, ng_jelem_fn fn, void *ctx)
{
    json_t *j = ((struct jv *)v)->j;
    if (!json_is_array(j)) return -1;
    size_t n = json_array_size(j);
    for (size_t i = 0; i < n; i++) {
        struct jv child = {{&jv_ops}, json_array_get(j, i)};
        int rc = fn(ctx, i, &child.base);
        if (rc) return rc;
    }
    return 0;
}

static int jv_member(const struct ng_jfield *f, void *out, json_t *j)
{
    if (f->kind == NG_JF_SKIP) return 0;
    switch (json_typeof(j)) {
    case JSON_INTEGER: return ng_jf_int(f, out, (int64_t)json_integer_value(j));
    case JSON_NULL: return ng_jf_null(f, out);
    case JSON_STRING: return ng_jf_str(f, out, json_string_value(j), json_string_length(j));
    case JSON_ARRAY:
        if (f->kind != NG_JF_FLAGS) return -1;
        *(uint32_t *)ng_jf_at(f, out) = 0;
        for (size_t i = 0; i < json_array_size(j); i++) {
            json_t *e = json_array_get(j, i);
            if (!json_is_string(e) ||
                ng_jf_flag(f, out, json_string_value(e), json_string_length(e)))
                return -1;
        }
        return 0;
    default: return -1;
    }
}

static int jv_record(ng_jv *v, const struct ng_jrecord *rec, void *out, uint64_t *seen, int *bad)
{
    json_t *j = ((struct jv *)v)->j;
    *bad = -1;
    if (!json_is_object(j)) return -1;
    int hint = -1;
    for (void *it = json_object_iter(j); it; it = json_object_iter_next(j, it)) {
        int k = ng_jrecord_find(rec, json_object_iter_key(it), json_object_iter_key_len(it), &hint);
        if (k < 0) continue;
        *seen |= 1ull << k;
        if (jv_member(&rec->fields[k], out, json_object_iter_value(it))) {
            *bad = k;
            return -1;
        }
    }
    return 0;
}

static const struct ng_jv_ops jv_ops = {jv_kind,   jv_integer, jv_boolean, jv_string,
                                        jv_object, jv_array,   jv_record};

static void jp_free(ng_jparser *p)
{
    free(p);
}

static int jp_parse(ng_jparser *p, const char *buf, size_t len, int (*root)(void *, ng_jv *),
                    void *ctx, char *err, size_t errlen)
{
    (void)p;
    json_error_t e;
    json_t *doc = json_loadb(buf, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &e);
    if (!doc) {
        snprintf(err, errlen, "not valid JSON (truncated or corrupt): %s (byte %d)", e.text,
                 e.position);
        return -1;
    }
    struct jv v = {{&jv_ops}, doc};
    int rc = root(ctx, &v.base);
    json_decref(doc);
    return rc;
}

ng_jparser *ng_jparser_new_jansson(void)
{
    ng_jparser *p = malloc(sizeof *p);
    if (p) *p = (ng_jparser){jp_free, jp_parse};
    return p;
}
