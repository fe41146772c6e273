/*
 * fakenccl plugin loading and the env plugin (docs/harness.md, "Env plugin").
 *
 * fn_plugin_open follows NVIDIA/nccl src/plugin/plugin_open.cc (tryOpenLib,
 * openPluginLib). fn_getenv follows src/misc/param.cc (ncclGetEnv) and
 * src/plugin/env.cc of v2.28.9-1: at the first NCCL variable read, once per
 * process, NCCL_ENV_PLUGIN (read with getenv) names the library ("none": no
 * plugin), ncclEnvPlugin_v1 is its only symbol in 2.28.9, init gets NCCL's
 * version, and every read from then on is the plugin's getEnv; finalize
 * runs at exit. Any thread; the first read takes a once-lock.
 */
#include "fakenccl_core.h"

#include <dlfcn.h>
#include <nccl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* NCCL's tryOpenLib: STATIC_PLUGIN (any prefix of it, any case) is the global scope. */
static void *try_open(const char *name)
{
    if (!name || !*name) return NULL;
    if (!strncasecmp(name, "STATIC_PLUGIN", strlen(name)))
        return dlopen(NULL, RTLD_NOW | RTLD_LOCAL);
    return dlopen(name, RTLD_NOW | RTLD_LOCAL);
}

void *fn_plugin_open(const char *prefix, const char *name)
{
    char buf[256];
    if (!name || !*name) {
        snprintf(buf, sizeof buf, "%s.so", prefix);
        return try_open(buf);
    }
    void *h = try_open(name);
    size_t n = strlen(name);
    bool libso = !strncmp(name, "lib", 3) && n >= 3 && !strcmp(name + n - 3, ".so");
    if (!h && !strchr(name, '/') && !libso) {
        snprintf(buf, sizeof buf, "%s-%s.so", prefix, name);
        h = try_open(buf);
    }
    return h;
}

/* ncclEnv_v1_t (src/include/plugin/env/env_v1.h), declared here from its fields. */
struct env_v1 {
    const char *name;
    ncclResult_t (*init)(uint8_t major, uint8_t minor, uint8_t patch, const char *suffix);
    ncclResult_t (*finalize)(void);
    const char *(*get_env)(const char *name);
};

static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static const struct env_v1 *env_plugin;

static void env_fini(void)
{
    if (env_plugin && env_plugin->finalize) env_plugin->finalize();
}

static void env_load(void)
{
    const char *name = getenv("NCCL_ENV_PLUGIN"); /* read before any plugin: plain getenv */
    if (name && !strcasecmp(name, "none")) return;
    void *h = fn_plugin_open("libnccl-env", name);
    const struct env_v1 *p = h ? dlsym(h, "ncclEnvPlugin_v1") : NULL;
    if (!p) return; /* "unsupported": NCCL goes on with its own getenv */
    if (p->init(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, NCCL_SUFFIX) != ncclSuccess) return;
    env_plugin = p;
    atexit(env_fini);
}

const char *fn_getenv(const char *name)
{
    pthread_once(&env_once, env_load);
    return env_plugin ? env_plugin->get_env(name) : getenv(name);
}
