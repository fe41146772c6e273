/*
 * pluginlib.c: opening a plugin as NCCL does (see pluginlib.h).
 */
#include "intercept/pluginlib.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static bool global_scope(const char *name)
{
    return !strncasecmp(name, "STATIC_PLUGIN", strlen(name));
}

void *ncclguard_plugin_open(const char *prefix, const char *name)
{
    if (global_scope(name)) return dlopen(NULL, RTLD_NOW | RTLD_LOCAL);
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    size_t n = strlen(name);
    if (!h && !strchr(name, '/') &&
        !(n >= 6 && !strncmp(name, "lib", 3) && !strcmp(name + n - 3, ".so"))) {
        char buf[300];
        snprintf(buf, sizeof buf, "%s-%s.so", prefix, name);
        h = dlopen(buf, RTLD_NOW | RTLD_LOCAL);
    }
    return h;
}

bool ncclguard_plugin_names_self(const char *v, const char *self)
{
    if (global_scope(v)) return true;
    char a[PATH_MAX], b[PATH_MAX];
    return strchr(v, '/') && realpath(v, a) && realpath(self, b) && !strcmp(a, b);
}

bool ncclguard_plugin_names_ncclguard(const char *v)
{
    const char *base = strrchr(v, '/');
    return strstr(base ? base + 1 : v, "ncclguard") != NULL;
}

bool ncclguard_plugin_preloaded(const char *self)
{
    const char *list = getenv("LD_PRELOAD"), *base = strrchr(self, '/');
    base = base ? base + 1 : self;
    size_t n = strlen(base);
    for (const char *p = list; p && (p = strstr(p, base)); p += n) /* a whole entry's end */
        if (p[n] == '\0' || p[n] == ':' || p[n] == ' ') return true;
    return false;
}
