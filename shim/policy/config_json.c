/*
 * config_json.c: the dump's "config" object (see config.h and
 * docs/dump-format.md): sources, effective settings with their origin, and the
 * environment changes of the policy.
 *
 * Async-signal-safe on purpose: a dump may be written from a fatal-signal
 * handler. So no stdio, no allocation and no locale: numbers and strings are
 * formatted by hand into the caller's buffer, and all data read is immutable
 * after the constructor.
 */
#include <string.h>

#include "policy/config.h"
#include "policy/confvalue.h"
#include "policy/policy.h"

struct jw {
    char *buf;
    size_t len, cap;
    int full;
};

static void put(struct jw *w, const char *s, size_t n)
{
    if (!w->buf) { /* counting only */
        w->len += n;
        return;
    }
    if (w->full || n >= w->cap - w->len) {
        w->full = 1;
        return;
    }
    memcpy(w->buf + w->len, s, n);
    w->len += n;
}

static void lit(struct jw *w, const char *s)
{
    put(w, s, strlen(s));
}

/* The characters of s, escaped for a JSON string, without the quotes. */
static void str_body(struct jw *w, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char esc[6] = {'\\', 'u', '0', '0', hex[*p >> 4], hex[*p & 15]};
        if (*p == '"' || *p == '\\') {
            char two[2] = {'\\', (char)*p};
            put(w, two, 2);
        } else if (*p < 0x20 || *p == 0x7f) {
            put(w, esc, 6);
        } else {
            put(w, (const char *)p, 1);
        }
    }
}

static void str(struct jw *w, const char *s)
{
    if (!s) {
        lit(w, "null");
        return;
    }
    put(w, "\"", 1);
    str_body(w, s);
    put(w, "\"", 1);
}

static void num_u(struct jw *w, unsigned long long v)
{
    char d[24];
    int n = 0;
    do {
        d[sizeof d - 1 - n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    put(w, d + sizeof d - n, (size_t)n);
}

static void num_ll(struct jw *w, long long v)
{
    if (v < 0) {
        lit(w, "-");
        num_u(w, (unsigned long long)(-(v + 1)) + 1);
    } else {
        num_u(w, (unsigned long long)v);
    }
}

/* A number with at most three decimals, e.g. 300, 0.5, 1000000000. */
static void num_d(struct jw *w, double v)
{
    if (v != v || v > 1e18 || v < -1e18) {
        lit(w, "null");
        return;
    }
    if (v < 0) {
        lit(w, "-");
        v = -v;
    }
    unsigned long long milli = (unsigned long long)(v * 1000 + 0.5);
    num_u(w, milli / 1000);
    unsigned frac = (unsigned)(milli % 1000);
    if (!frac) return;
    char d[4] = {'.', (char)('0' + frac / 100), (char)('0' + frac / 10 % 10),
                 (char)('0' + frac % 10)};
    size_t n = 4;
    while (d[n - 1] == '0') n--;
    put(w, d, n);
}

static void origin(struct jw *w, const struct ng_origin *o, int key)
{
    lit(w, "\"");
    lit(w, ncclguard_source_name(o->source));
    if (o->source == NG_SRC_ENV) {
        lit(w, " NCCLGUARD_");
        lit(w, ncclguard_setting_info(key)->id);
    } else if (o->source == NG_SRC_SITE || o->source == NG_SRC_USER) {
        lit(w, " ");
        str_body(w, ncclguard_config_file(o->source)->path);
        lit(w, ":");
        num_u(w, o->line);
    }
    lit(w, "\"");
}

static void value(struct jw *w, const struct ng_settings *s, int key)
{
    const struct ng_setting_info *in = ncclguard_setting_info(key);
    const char *field = (const char *)s + in->offset;
    int i;
    long long ll;
    double d;
    char word[32];
    memcpy(&i, field, sizeof i);
    switch (in->type) {
    case NG_T_BOOL: lit(w, i ? "true" : "false"); return;
    case NG_T_SIGNAL: num_ll(w, i); return;
    case NG_T_ENUM: str(w, ncclguard_choice_name(in->choices, i, word, sizeof word)); return;
    case NG_T_STRING: str(w, field); return;
    case NG_T_INT:
        memcpy(&ll, field, sizeof ll);
        num_ll(w, ll);
        return;
    default: break;
    }
    memcpy(&d, field, sizeof d);
    if (in->type == NG_T_OPT_DURATION && d < 0)
        lit(w, "null");
    else
        num_d(w, d);
}

static void sources(struct jw *w)
{
    static const char *const status[] = {"none", "absent", "refused", "loaded"};
    lit(w, "\"sources\":[");
    for (int src = NG_SRC_SITE; src <= NG_SRC_USER; src++) {
        const struct ng_file_source *f = ncclguard_config_file(src);
        if (src > NG_SRC_SITE) lit(w, ",");
        lit(w, "{\"source\":");
        str(w, ncclguard_source_name(src));
        lit(w, ",\"path\":");
        str(w, f->status == NG_FILE_NONE ? NULL : f->path);
        lit(w, ",\"status\":");
        str(w, status[f->status]);
        if (f->status == NG_FILE_REFUSED) {
            lit(w, ",\"why\":");
            str(w, f->why);
        }
        if (f->status == NG_FILE_LOADED) {
            lit(w, ",\"lines\":");
            num_u(w, f->lines);
            lit(w, ",\"problems\":");
            num_u(w, f->problems);
        }
        lit(w, "}");
    }
    lit(w, "]");
}

static void settings(struct jw *w)
{
    const struct ng_settings *s = ncclguard_settings();
    lit(w, ",\"settings\":{");
    for (int k = 0; k < NG_KEY_COUNT; k++) {
        if (k) lit(w, ",");
        str(w, ncclguard_setting_info(k)->key);
        lit(w, ":{\"value\":");
        value(w, s, k);
        lit(w, ",\"origin\":");
        origin(w, &s->origin[k], k);
        if (s->origin[k].locked) lit(w, ",\"locked\":true");
        lit(w, "}");
    }
    lit(w, "}");
}

static void env_changes(struct jw *w)
{
    static const char *const action[] = {"default", "force", "forbid"};
    size_t n;
    const struct ng_env_change *c = ncclguard_policy_changes(&n);
    lit(w, ",\"env\":[");
    for (size_t i = 0; i < n; i++) {
        const struct ng_env_rule *r = c[i].rule;
        if (i) lit(w, ",");
        lit(w, "{\"name\":");
        str(w, c[i].name);
        lit(w, ",\"action\":");
        str(w, action[r->action]);
        lit(w, r->action == NG_ENV_FORBID ? ",\"reason\":" : ",\"value\":");
        str(w, r->value);
        lit(w, ",\"origin\":");
        struct ng_origin o = r->origin;
        origin(w, &o, -1);
        lit(w, ",\"outcome\":");
        str(w, ncclguard_policy_outcome_name(c[i].outcome));
        lit(w, ",\"was\":");
        str(w, c[i].was);
        if (c[i].was_parent) lit(w, ",\"was_from_parent\":true");
        lit(w, "}");
    }
    lit(w, "]");
}

long ncclguard_config_json(char *buf, size_t len)
{
    if (!buf) len = 0;
    else if (len < 3) return -1;
    struct jw w = {.buf = buf, .cap = len};
    lit(&w, "{");
    sources(&w);
    settings(&w);
    env_changes(&w);
    lit(&w, "}");
    if (!buf) return (long)w.len;
    if (w.full) {
        memcpy(buf, "{}", 3);
        return -1;
    }
    buf[w.len] = '\0';
    return (long)w.len;
}
