/* config_load.c: see config_load.h. */
#include "policy/config_load.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "policy/condition.h"
#include "policy/confread.h"
#include "policy/testswitch.h"

enum section { SEC_MAIN, SEC_DEFAULT, SEC_FORCE, SEC_FORBID, SEC_SKIP };

static void section_problem(struct ng_conf_ctx *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void section_problem(struct ng_conf_ctx *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ncclguard_conf_vproblem(c, "section ignored", fmt, ap);
    va_end(ap);
}

static int blank(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\v' || ch == '\f' || ch == '\r';
}

static char *trim(char *s)
{
    while (blank(*s)) s++;
    size_t n = strlen(s);
    while (n > 0 && blank(s[n - 1])) s[--n] = '\0';
    return s;
}

/* Cuts a comment: '#' or ';' at the start or after a blank, outside quotes. */
static void cut_comment(char *s)
{
    char quote = 0;
    for (char *p = s; *p; p++) {
        if (quote) {
            if (*p == '\\' && quote == '"' && p[1])
                p++;
            else if (*p == quote)
                quote = 0;
        } else if (*p == '"' || *p == '\'') {
            quote = *p;
        } else if ((*p == '#' || *p == ';') && (p == s || blank(p[-1]))) {
            *p = '\0';
            return;
        }
    }
}

/* Removes the quotes of a "double" (with \" and \\) or 'single' quoted value in
 * place; -1 when a quote is not closed or text follows it. */
static int unquote(char *v)
{
    char q = v[0];
    if (q != '"' && q != '\'') return 0;
    char *out = v;
    for (char *p = v + 1; *p; p++) {
        if (*p == q) {
            if (*trim(p + 1)) return -1;
            *out = '\0';
            return 0;
        }
        if (q == '"' && *p == '\\' && (p[1] == '"' || p[1] == '\\')) p++;
        *out++ = *p;
    }
    return -1;
}

static void header(struct ng_conf_ctx *c, char *s)
{
    size_t n = strlen(s);
    if (s[n - 1] != ']') {
        section_problem(c, "a section header must end with ']'");
        c->section = SEC_SKIP;
        return;
    }
    s[n - 1] = '\0';
    s = trim(s + 1);
    static const struct {
        const char *name;
        enum section sec;
    } plain[] = {{"ncclguard", SEC_MAIN},
                 {"env.default", SEC_DEFAULT},
                 {"env.force", SEC_FORCE},
                 {"env.forbid", SEC_FORBID}};
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++)
        if (!strcasecmp(s, plain[i].name)) {
            c->section = plain[i].sec;
            return;
        }
    if (!strncasecmp(s, "when", 4) && (s[4] == '\0' || blank(s[4]))) {
        char why[300];
        if (++c->whens > NG_CONF_WHEN_MAX) { /* bounds the work of any file */
            section_problem(c, "more than %d [when] sections", NG_CONF_WHEN_MAX);
            c->section = SEC_SKIP;
            return;
        }
        int r = ncclguard_condition_eval(s + 4, why, sizeof why);
        if (r < 0) section_problem(c, "%s", why);
        c->section = r == 1 ? SEC_MAIN : SEC_SKIP;
        return;
    }
    section_problem(c,
                    "unknown section [%.64s] (known: [ncclguard], [env.default], "
                    "[env.force], [env.forbid], [when ...])",
                    s);
    c->section = SEC_SKIP;
}

/* "env.default.NAME" and friends: the action, and the name in *rest. */
static int env_prefix(const char *key, const char **rest)
{
    static const char *const prefixes[] = {"env.default.", "env.force.", "env.forbid."};
    for (int a = 0; a < 3; a++) {
        size_t n = strlen(prefixes[a]);
        if (!strncasecmp(key, prefixes[a], n)) {
            *rest = key + n;
            return a;
        }
    }
    return -1;
}

static void entry(struct ng_conf_ctx *c, char *s)
{
    char *eq = strchr(s, '='), *value = NULL;
    if (eq) {
        *eq = '\0';
        value = trim(eq + 1);
        if (unquote(value) != 0) {
            ncclguard_conf_problem(c, "a quoted value must end with its quote");
            return;
        }
    }
    char *key = trim(s);
    if (!*key) {
        ncclguard_conf_problem(c, "a line must look like 'key = value'");
        return;
    }
    const char *name;
    int a = env_prefix(key, &name);
    if (a < 0 && c->section >= SEC_DEFAULT && c->section <= SEC_FORBID) {
        a = c->section - SEC_DEFAULT;
        name = key;
    }
    if (a >= 0) {
        if (++c->envs > NG_CONF_ENV_LINES) /* bounds the work of any file */
            ncclguard_conf_problem(c, "more than %d [env.*] lines in one file", NG_CONF_ENV_LINES);
        else
            ncclguard_conf_env(c, (enum ng_env_action)a, name, value);
        return;
    }
    if (!value) {
        ncclguard_conf_problem(c, "'%.64s' needs a value ('key = value')", key);
        return;
    }
    if (!strcasecmp(key, "lock"))
        ncclguard_conf_lock(c, value);
    else
        ncclguard_conf_set(c, key, value);
}

static void parse_line(struct ng_conf_ctx *c, const char *line, size_t len, int flag)
{
    char buf[NG_CONF_LINE_MAX + 1];
    if (flag == NG_LINE_TOO_LONG) {
        ncclguard_conf_problem(c, "line longer than %d bytes", NG_CONF_LINE_MAX);
        return;
    }
    if (flag == NG_LINE_NUL) {
        ncclguard_conf_problem(c, "line contains a NUL byte");
        return;
    }
    memcpy(buf, line, len);
    buf[len] = '\0';
    char *s = buf;
    if (c->line == 1 && !strncmp(s, "\xef\xbb\xbf", 3)) s += 3; /* UTF-8 byte order mark */
    cut_comment(s);
    s = trim(s);
    if (!*s) return;
    if (*s == '[')
        header(c, s);
    else if (c->section != SEC_SKIP)
        entry(c, s);
}

/* Reads every line of r into the model; reports binary files and limits. */
static void parse_lines(enum ng_source src, struct ng_lines *r)
{
    struct ng_conf_ctx c = {.src = src, .file = ncclguard_conf_file_slot(src), .section = SEC_MAIN};
    size_t off;
    if (ncclguard_lines_binary(r, &off)) {
        c.file->status = NG_FILE_REFUSED;
        snprintf(c.file->why, sizeof c.file->why, "not a text file (byte 0x%02x at offset %zu)",
                 (unsigned char)r->buf[r->start + off], off);
        ncclguard_conf_say("%s config file ignored (%s): %s; starting without it",
                           ncclguard_source_name(src), c.file->path, c.file->why);
        return;
    }
    c.file->status = NG_FILE_LOADED;
    const char *line;
    size_t len;
    int flag;
    while (ncclguard_lines_next(r, &line, &len, &flag)) {
        c.line = r->lineno;
        parse_line(&c, line, len, flag);
    }
    c.file->lines = r->lineno > NG_CONF_MAX_LINES ? NG_CONF_MAX_LINES : r->lineno;
    if (c.file->problems > NG_CONF_MSGS_MAX)
        ncclguard_conf_say("%s: %u more problems not shown (those lines were ignored)",
                           c.file->path, c.file->problems - NG_CONF_MSGS_MAX);
    if (r->stop == NG_STOP_LINES)
        ncclguard_conf_say("%s: more than %d lines; the rest is ignored", c.file->path,
                           NG_CONF_MAX_LINES);
    else if (r->stop == NG_STOP_BYTES)
        ncclguard_conf_say("%s: longer than %d bytes; the rest is ignored", c.file->path,
                           NG_CONF_MAX_BYTES);
    else if (r->stop == NG_STOP_ERROR)
        ncclguard_conf_say("%s: read error (%s); the rest is ignored", c.file->path,
                           strerror(r->err));
}

static void set_path(struct ng_file_source *f, const char *path)
{
    memset(f, 0, sizeof *f);
    snprintf(f->path, sizeof f->path, "%s", path);
}

void ncclguard_config_add_file(enum ng_source src, const char *path)
{
    struct ng_file_source *f = ncclguard_conf_file_slot(src);
    set_path(f, path);
    int fd;
    int rc = ncclguard_conf_open(path, &fd, f->why, sizeof f->why);
    if (rc == NG_CONF_ABSENT) {
        f->status = NG_FILE_ABSENT;
        return;
    }
    if (rc == NG_CONF_REFUSED) {
        f->status = NG_FILE_REFUSED;
        ncclguard_conf_say("%s config file ignored (%s): %s; starting without it",
                           ncclguard_source_name(src), path, f->why);
        return;
    }
    struct ng_lines r;
    ncclguard_lines_fd(&r, fd);
    parse_lines(src, &r);
    close(fd);
}

void ncclguard_config_add_buffer(enum ng_source src, const char *name, const char *data, size_t len)
{
    struct ng_lines r;
    set_path(ncclguard_conf_file_slot(src), name);
    ncclguard_lines_mem(&r, data, len);
    parse_lines(src, &r);
}

/* The site file: NG_SITE_CONFIG, or in tests NCCLGUARD_TEST_SITE_CONFIG while
 * NG_SITE_CONFIG does not exist (config_load.h says why that is safe). */
static const char *site_path(void)
{
    const char *test = ncclguard_test_switch("NCCLGUARD_TEST_SITE_CONFIG");
    return test ? test : NG_SITE_CONFIG;
}

void ncclguard_config_default_paths(struct ng_config_paths *p, char *user_buf, size_t len)
{
    p->site = site_path();
    const char *job = getenv("NCCLGUARD_CONFIG");
    p->job = job ? job : "";
    const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
    if (xdg && xdg[0] == '/')
        snprintf(user_buf, len, "%s/ncclguard.conf", xdg);
    else if (home && home[0] == '/')
        snprintf(user_buf, len, "%s/.config/ncclguard.conf", home);
    else if (len)
        user_buf[0] = '\0';
    p->user = user_buf;
}

void ncclguard_config_load(const struct ng_config_paths *paths, char *const *envp, int talk_)
{
    struct ng_config_paths def;
    char user[NG_STR_MAX];
    ncclguard_config_default_paths(&def, user, sizeof user);
    const char *path[NG_SRC_COUNT] = {
        [NG_SRC_SITE] = paths && paths->site ? paths->site : def.site,
        [NG_SRC_USER] = paths && paths->user ? paths->user : def.user,
        [NG_SRC_JOB] = paths && paths->job ? paths->job : def.job,
    };
    ncclguard_config_begin(talk_);
    for (int src = NG_SRC_FIRST_FILE; src <= NG_SRC_LAST_FILE; src++) /* "/dev/null": none */
        if (*path[src] && strcmp(path[src], "/dev/null"))
            ncclguard_config_add_file((enum ng_source)src, path[src]);
    ncclguard_config_finish(envp);
}
