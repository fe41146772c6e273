/*
 * jsonread_simdjson.cc: the simdjson backend of jsonread.h, the only C++ of the
 * ncclguard command. It uses the On-Demand API: parser.iterate indexes the
 * document's structure (and validates its UTF-8) in one pass; then each value is
 * parsed when it is visited, and a member nobody asked for is skipped without
 * being parsed. Built with -fno-exceptions: every call returns an error code.
 *
 * Errors of the document itself (truncation, a bad token) are kept in the parser
 * and reported by ng_json_parse; a value of the wrong kind is the caller's to
 * report (it says which member).
 */
#include <simdjson.h>

#include <cstdio>
#include <cstdlib>
#include <new>
#include <utility>

#include "jsonread.h"
#include "jsonread_impl.h"

using namespace simdjson;

namespace {

struct sparser {
    ng_jparser base;
    ondemand::parser parser;
    error_code error; /* the first error of the document, SUCCESS if none */
};

struct sval {
    ng_jv base;
    ondemand::value *v;
    sparser *p;
};

extern const ng_jv_ops sval_ops;

/* Keeps the first error that says the document is malformed; a value of
 * another kind than asked is not one. Returns -1 for the caller's convenience. */
int fail(sparser *p, error_code e)
{
    if (e != INCORRECT_TYPE && e != NUMBER_OUT_OF_RANGE && p->error == SUCCESS) p->error = e;
    return -1;
}

sval *S(ng_jv *v) { return reinterpret_cast<sval *>(v); }

int sv_kind(ng_jv *v)
{
    ondemand::json_type t;
    error_code e = S(v)->v->type().get(t);
    if (e) return fail(S(v)->p, e);
    switch (t) {
    case ondemand::json_type::object: return NG_J_OBJECT;
    case ondemand::json_type::array: return NG_J_ARRAY;
    case ondemand::json_type::string: return NG_J_STRING;
    case ondemand::json_type::number: return NG_J_NUMBER;
    case ondemand::json_type::boolean: return NG_J_BOOL;
    default: return NG_J_NULL;
    }
}

int sv_integer(ng_jv *v, int64_t *out)
{
    int64_t x;
    error_code e = S(v)->v->get_int64().get(x);
    if (e) return fail(S(v)->p, e);
    *out = x;
    return 0;
}

int sv_boolean(ng_jv *v, int *out)
{
    bool b;
    error_code e = S(v)->v->get_bool().get(b);
    if (e) return fail(S(v)->p, e);
    *out = b;
    return 0;
}

int sv_string(ng_jv *v, const char **s, size_t *len)
{
    std::string_view sv;
    error_code e = S(v)->v->get_string().get(sv);
    if (e) return fail(S(v)->p, e);
    *s = sv.data();
    *len = sv.size();
    return 0;
}

int sv_object(ng_jv *v, const ng_jkeys *keys, ng_jmember_fn fn, void *ctx)
{
    sparser *p = S(v)->p;
    ondemand::object obj;
    error_code e = S(v)->v->get_object().get(obj);
    if (e) return fail(p, e);
    int hint = -1;
    for (auto member : obj) {
        ondemand::field f;
        if ((e = std::move(member).get(f))) return fail(p, e);
        std::string_view key;
        if ((e = f.unescaped_key().get(key))) return fail(p, e);
        int k = ng_jkeys_find(keys, key.data(), key.size(), &hint);
        if (k < 0) continue; /* skipped by the next step of the iteration */
        sval child{{&sval_ops}, &f.value(), p};
        int rc = fn(ctx, k, &child.base);
        if (rc) return rc;
    }
    return 0;
}

int sv_array(ng_jv *v, ng_jelem_fn fn, void *ctx)
{
    sparser *p = S(v)->p;
    ondemand::array arr;
    error_code e = S(v)->v->get_array().get(arr);
    if (e) return fail(p, e);
    size_t i = 0;
    for (auto elem : arr) {
        ondemand::value val;
        if ((e = std::move(elem).get(val))) return fail(p, e);
        sval child{{&sval_ops}, &val, p};
        int rc = fn(ctx, i++, &child.base);
        if (rc) return rc;
    }
    return 0;
}

const ng_jv_ops sval_ops = {sv_kind, sv_integer, sv_boolean, sv_string, sv_object, sv_array};

void sp_free(ng_jparser *jp)
{
    sparser *p = reinterpret_cast<sparser *>(jp);
    p->~sparser();
    free(p);
}

int sp_parse(ng_jparser *jp, const char *buf, size_t len, int (*root)(void *, ng_jv *), void *ctx,
             char *err, size_t errlen)
{
    sparser *p = reinterpret_cast<sparser *>(jp);
    p->error = SUCCESS;
    ondemand::document doc;
    error_code e = p->parser.iterate(padded_string_view(buf, len, len + NG_JSON_PADDING)).get(doc);
    /* One pass over the structure first, so that a truncated or unbalanced document
     * is refused as such, before any member is read. */
    std::string_view whole;
    if (!e) e = doc.raw_json().get(whole);
    const char *rest; /* a location when tokens are left after the root value */
    if (!e && doc.current_location().get(rest) == SUCCESS) e = TRAILING_CONTENT;
    if (!e) doc.rewind();
    ondemand::value val;
    if (!e) e = doc.get_value().get(val);
    if (e) {
        snprintf(err, errlen, "not valid JSON (truncated or corrupt): %s", error_message(e));
        return -1;
    }
    sval v{{&sval_ops}, &val, p};
    int rc = root(ctx, &v.base);
    if (p->error != SUCCESS) {
        snprintf(err, errlen, "not valid JSON (truncated or corrupt): %s", error_message(p->error));
        return -1;
    }
    return rc;
}

} // namespace

extern "C" ng_jparser *ng_jparser_new_simdjson(void)
{
    void *mem = malloc(sizeof(sparser));
    if (!mem) return nullptr;
    sparser *p = new (mem) sparser();
    p->base.free = sp_free;
    p->base.parse = sp_parse;
    return &p->base;
}
