/*
 * json/json.c: see json/json.h. The member-name tables, and the dispatch to the
 * backend that made a value or a parser.
 */
#include "json/json.h"

#include <string.h>

void ng_jkeys_init(struct ng_jkeys *k, const char *const *names, int n)
{
    k->names = names;
    k->n = n < 64 ? n : 64;
    for (int i = 0; i < k->n; i++) {
        size_t len = strlen(names[i]);
        k->len[i] = (unsigned char)(len < 255 ? len : 255);
    }
}

/* Members usually come in the table's order, so the one after *hint goes first. */
int ng_jkeys_find(const struct ng_jkeys *k, const char *s, size_t len, int *hint)
{
    int h = *hint + 1;
    if (h >= 0 && h < k->n && k->len[h] == len && !memcmp(k->names[h], s, len)) return *hint = h;
    for (int i = 0; i < k->n; i++)
        if (k->len[i] == len && !memcmp(k->names[i], s, len)) return *hint = i;
    return -1;
}

void ng_jrecord_init(struct ng_jrecord *r, const struct ng_jfield *fields, int n)
{
    r->fields = fields;
    r->n = n < 64 ? n : 64;
    for (int i = 0; i < r->n; i++) {
        size_t len = strlen(fields[i].name);
        r->len[i] = (unsigned char)(len < 255 ? len : 255);
        r->names[i] = fields[i].name;
        unsigned char b[16] = {0}, m[16] = {0};
        if (len < 16) {
            memcpy(b, fields[i].name, len);
            b[len] = '"';
            memset(m, 0xff, len + 1);
        }
        memcpy(r->word[i], b, 16);
        memcpy(r->mask[i], m, 16);
    }
}

int ng_jrecord_find(const struct ng_jrecord *r, const char *s, size_t len, int *hint)
{
    int h = *hint + 1;
    if (h >= 0 && h < r->n && r->len[h] == len && !memcmp(r->fields[h].name, s, len))
        return *hint = h;
    for (int i = 0; i < r->n; i++)
        if (r->len[i] == len && !memcmp(r->fields[i].name, s, len)) return *hint = i;
    return -1;
}

int ng_jv_record(ng_jv *v, const struct ng_jrecord *rec, void *out, uint64_t *seen, int *bad)
{
    return v->ops->record(v, rec, out, seen, bad);
}

int ng_jv_kind(ng_jv *v)
{
    return v->ops->kind(v);
}
int ng_jv_int(ng_jv *v, int64_t *out)
{
    return v->ops->integer(v, out);
}
int ng_jv_bool(ng_jv *v, int *out)
{
    return v->ops->boolean(v, out);
}
int ng_jv_string(ng_jv *v, const char **s, size_t *len)
{
    return v->ops->string(v, s, len);
}

int ng_jv_object(ng_jv *v, const struct ng_jkeys *keys, ng_jmember_fn fn, void *ctx)
{
    return v->ops->object(v, keys, fn, ctx);
}

int ng_jv_array(ng_jv *v, ng_jelem_fn fn, void *ctx)
{
    return v->ops->array(v, fn, ctx);
}

void ng_jparser_free(ng_jparser *p)
{
    if (p) p->free(p);
}

int ng_json_parse(ng_jparser *p, const char *buf, size_t len, int (*root)(void *ctx, ng_jv *v),
                  void *ctx, char *err, size_t errlen)
{
    if (errlen) err[0] = '\0';
    return p->parse(p, buf, len, root, ctx, err, errlen);
}
