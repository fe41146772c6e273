/*
 * json/simdjson.cc: the simdjson backend of json/json.h, the only C++ of the
 * ncclguard command. It uses the On-Demand API: parser.iterate indexes the
 * document's structure (and validates its UTF-8) in one pass; then each value is
 * parsed when it is visited, and a member nobody asked for is skipped without
 * being parsed. Built with -fno-exceptions: every call returns an error code.
 *
 * Errors of the document itself (truncation, a bad token) are kept in the parser
 * and reported by ng_json_parse; a value of the wrong kind is the caller's to
 * report (it says which member).
 */
#include "json/simdjson.h"

#include <simdjson.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

#include "json/json.h"
#include "json/record.h"

using namespace simdjson;

namespace
{

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

sval *S(ng_jv *v)
{
    return reinterpret_cast<sval *>(v);
}

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

/* The raw key (after its opening quote) is name: its bytes, then the closing quote. */
inline bool same(const char *raw, const char *name, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (raw[i] != name[i]) return false;
    return raw[len] == '"';
}

/* The index of field f's name among names (lengths len), or -1. The raw key is
 * compared first (the names need no escapes; the closing quote ends a match),
 * the one after *hint first of all; only a key that matches none is unescaped. */
int find_key(ondemand::field &f, const char *const *names, const unsigned char *len, int n,
             int *hint, sparser *p, error_code *e)
{
    const char *raw = f.key().raw();
    int h = *hint + 1;
    if (h < n && same(raw, names[h], len[h])) return *hint = h;
    for (int i = 0; i < n; i++)
        if (same(raw, names[i], len[i])) return *hint = i;
    std::string_view key;
    if ((*e = f.unescaped_key().get(key))) return fail(p, *e) - 1;
    for (int i = 0; i < n; i++)
        if (len[i] == key.size() && !memcmp(key.data(), names[i], len[i])) return *hint = i;
    return -1;
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
        e = SUCCESS;
        int k = find_key(f, keys->names, keys->len, keys->n, &hint, p, &e);
        if (e) return -1;
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

/* One member of a record: read as its kind asks, then converted. */
int sv_member(const ng_jfield *fd, void *out, ondemand::value &val, sparser *p)
{
    error_code e;
    switch (fd->kind) {
    case NG_JF_SKIP: return 0; /* the iteration skips it */
    case NG_JF_I64:
    case NG_JF_I32:
    case NG_JF_U64:
    case NG_JF_U64_OR_NULL: {
        int64_t x;
        if (!(e = val.get_int64().get(x))) return ng_jf_int(fd, out, x);
        break;
    }
    case NG_JF_FLAGS: {
        ondemand::array arr;
        if ((e = val.get_array().get(arr))) break;
        *(uint32_t *)ng_jf_at(fd, out) = 0;
        for (auto elem : arr) {
            std::string_view sv;
            if ((e = std::move(elem).get_string().get(sv))) return fail(p, e);
            if (ng_jf_flag(fd, out, sv.data(), sv.size())) return -1;
        }
        return 0;
    }
    default: {
        std::string_view sv;
        if (!(e = val.get_string().get(sv))) return ng_jf_str(fd, out, sv.data(), sv.size());
    }
    }
    if (e != INCORRECT_TYPE) return fail(p, e);
    bool null;
    if ((e = val.is_null().get(null))) return fail(p, e);
    return null ? ng_jf_null(fd, out) : -1;
}

/* find_key for a record: names shorter than 16 bytes are compared as two words
 * (the padding after the document makes the reads safe). */
inline int record_key(ondemand::field &f, const ng_jrecord *rec, int *hint, sparser *p,
                      error_code *e)
{
    const char *raw = f.key().raw();
    __builtin_prefetch(raw + 1024); /* the walk is sequential, and 2 MB fall out of L2 */
    uint64_t w[2];
    memcpy(w, raw, 16);
    int h = *hint + 1;
    if (h < rec->n && rec->mask[h][0] && ((w[0] & rec->mask[h][0]) == rec->word[h][0]) &&
        ((w[1] & rec->mask[h][1]) == rec->word[h][1]))
        return *hint = h;
    return find_key(f, rec->names, rec->len, rec->n, hint, p, e);
}

int sv_record(ng_jv *v, const ng_jrecord *rec, void *out, uint64_t *seen, int *bad)
{
    sparser *p = S(v)->p;
    *bad = -1;
    ondemand::object obj;
    error_code e = S(v)->v->get_object().get(obj);
    if (e) return fail(p, e);
    int hint = -1;
    for (auto member : obj) {
        ondemand::field f;
        if ((e = std::move(member).get(f))) return fail(p, e);
        e = SUCCESS;
        int k = record_key(f, rec, &hint, p, &e);
        if (e) return -1;
        if (k < 0) continue;
        *seen |= 1ull << k;
        if (sv_member(&rec->fields[k], out, f.value(), p)) {
            if (p->error == SUCCESS) *bad = k;
            return -1;
        }
    }
    return 0;
}

const ng_jv_ops sval_ops = {sv_kind,   sv_integer, sv_boolean, sv_string,
                            sv_object, sv_array,   sv_record};

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
    ondemand::value val;
    if (!e) e = doc.get_value().get(val);
    if (e) {
        snprintf(err, errlen, "not valid JSON (truncated or corrupt): %s", error_message(e));
        return -1;
    }
    sval v{{&sval_ops}, &val, p};
    int rc = root(ctx, &v.base);
    const char *rest; /* a location when tokens are left after the root value */
    if (rc == 0 && p->error == SUCCESS && doc.current_location().get(rest) == SUCCESS)
        p->error = TRAILING_CONTENT;
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
