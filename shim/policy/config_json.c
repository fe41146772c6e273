/* config_json.c: see config_json.h. */
#include "policy/config_json.h"

#include <string.h>

#include "policy/config.h"
#include "policy/confvalue.h"
#include "policy/policy.h"

static void key_string(struct ng_json *j, const char *key, const char *value)
{
    ncclguard_json_key(j, key);
    ncclguard_json_string(j, value);
}

/* Appends s to out[cap] (always NUL-terminated, cut when full). */
static void append(char *out, size_t cap, size_t *len, const char *s)
{
    for (; *s && *len + 1 < cap; s++) out[(*len)++] = *s;
    out[*len] = '\0';
}

/* "site /etc/ncclguard.conf:7", "env NCCLGUARD_TIMEOUT", "built-in". */
static void put_origin(struct ng_json *j, const struct ng_origin *o, int key)
{
    char text[NG_STR_MAX + 64], num[24];
    size_t len = 0;
    append(text, sizeof text, &len, ncclguard_source_name(o->source));
    if (o->source == NG_SRC_ENV) {
        append(text, sizeof text, &len, " NCCLGUARD_");
        append(text, sizeof text, &len, ncclguard_setting_info(key)->id);
    } else if (o->source >= NG_SRC_FIRST_FILE && o->source <= NG_SRC_LAST_FILE) {
        append(text, sizeof text, &len, " ");
        append(text, sizeof text, &len, ncclguard_config_file(o->source)->path);
        append(text, sizeof text, &len, ":");
        ncclguard_fmt_uint64(num, o->line);
        append(text, sizeof text, &len, num);
    }
    key_string(j, "origin", text);
}

static void put_value(struct ng_json *j, const struct ng_settings *s, int key)
{
    const struct ng_setting_info *in = ncclguard_setting_info(key);
    double v = ncclguard_setting_number(s, key);
    char word[32];
    ncclguard_json_key(j, "value");
    switch (in->type) {
    case NG_T_BOOL: ncclguard_json_bool(j, v != 0); break;
    case NG_T_SIGNAL:
    case NG_T_INT: ncclguard_json_int64(j, (int64_t)v); break;
    case NG_T_ENUM:
        ncclguard_json_string(j, ncclguard_choice_name(in->choices, (int)v, word, sizeof word));
        break;
    case NG_T_STRING: ncclguard_json_string(j, ncclguard_setting_string(s, key)); break;
    default:
        if (in->type == NG_T_OPT_DURATION && v < 0)
            ncclguard_json_null(j);
        else
            ncclguard_json_number(j, v, 3);
        break;
    }
}

static void put_sources(struct ng_json *j)
{
    static const char *const status[] = {"none", "absent", "refused", "loaded"};
    ncclguard_json_key(j, "sources");
    ncclguard_json_begin_array(j);
    for (int src = NG_SRC_FIRST_FILE; src <= NG_SRC_LAST_FILE; src++) {
        const struct ng_file_source *f = ncclguard_config_file(src);
        ncclguard_json_begin_object(j);
        key_string(j, "source", ncclguard_source_name(src));
        key_string(j, "path", f->status == NG_FILE_NONE ? NULL : f->path);
        key_string(j, "status", status[f->status]);
        if (f->status == NG_FILE_REFUSED) key_string(j, "why", f->why);
        if (f->status == NG_FILE_LOADED) {
            ncclguard_json_key(j, "lines");
            ncclguard_json_uint64(j, f->lines);
            ncclguard_json_key(j, "problems");
            ncclguard_json_uint64(j, f->problems);
        }
        ncclguard_json_end_object(j);
    }
    ncclguard_json_end_array(j);
}

static void put_settings(struct ng_json *j)
{
    const struct ng_settings *s = ncclguard_settings();
    ncclguard_json_key(j, "settings");
    ncclguard_json_begin_object(j);
    for (int k = 0; k < NG_KEY_COUNT; k++) {
        ncclguard_json_key(j, ncclguard_setting_info(k)->key);
        ncclguard_json_begin_object(j);
        put_value(j, s, k);
        put_origin(j, &s->origin[k], k);
        if (s->origin[k].locked) {
            ncclguard_json_key(j, "locked");
            ncclguard_json_bool(j, 1);
        }
        ncclguard_json_end_object(j);
    }
    ncclguard_json_end_object(j);
}

static void put_env_changes(struct ng_json *j)
{
    static const char *const action[] = {"default", "force", "forbid"};
    size_t n;
    const struct ng_env_change *c = ncclguard_policy_changes(&n);
    ncclguard_json_key(j, "env");
    ncclguard_json_begin_array(j);
    for (size_t i = 0; i < n; i++) {
        const struct ng_env_rule *r = c[i].rule;
        ncclguard_json_begin_object(j);
        key_string(j, "name", c[i].name);
        key_string(j, "action", action[r->action]);
        if (r->action == NG_ENV_FORBID)
            key_string(j, "reason", r->value);
        else
            key_string(j, "value", c[i].value); /* as shown: policy.h */
        struct ng_origin o = r->origin;
        put_origin(j, &o, -1);
        key_string(j, "outcome", ncclguard_policy_outcome_name(c[i].outcome));
        key_string(j, "was", c[i].was);
        if (c[i].was_parent) {
            ncclguard_json_key(j, "was_from_parent");
            ncclguard_json_bool(j, 1);
        }
        ncclguard_json_end_object(j);
    }
    ncclguard_json_end_array(j);
}

void ncclguard_config_write_json(struct ng_json *j)
{
    ncclguard_json_begin_object(j);
    put_sources(j);
    put_settings(j);
    put_env_changes(j);
    ncclguard_json_end_object(j);
}

long ncclguard_config_json(char *buf, size_t len)
{
    char scratch[256];
    struct ng_json j;
    if (!buf)
        ncclguard_json_init(&j, NG_JSON_COUNT, scratch, sizeof scratch);
    else if (len < 3)
        return -1;
    else
        ncclguard_json_init(&j, NG_JSON_MEMORY, buf, len); /* the NUL takes the newline's place */
    ncclguard_config_write_json(&j);
    if (ncclguard_json_finish(&j) != 0) {
        if (buf) memcpy(buf, "{}", 3);
        return -1;
    }
    long n = (long)ncclguard_json_length(&j) - 1; /* without finish's newline */
    if (buf) buf[n] = '\0';
    return n;
}
