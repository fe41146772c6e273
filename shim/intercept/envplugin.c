/*
 * envplugin.c: the env plugin entry point (see envplugin.h).
 */
#include "intercept/envplugin.h"

#include <dlfcn.h>
#include <nccl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/log.h"
#include "intercept/pluginlib.h"
#include "policy/config.h"
#include "policy/policy.h"
#include "track/track.h"

extern char **environ;

struct env_v1 {
    const char *name;
    ncclResult_t (*init)(uint8_t major, uint8_t minor, uint8_t patch, const char *suffix);
    ncclResult_t (*finalize)(void);
    const char *(*get_env)(const char *name);
};

#define MAX_READ 512
#define NAME_MAX_LEN 64
static char names_read[MAX_READ][NAME_MAX_LEN];
static int nread;
static pthread_mutex_t read_lock = PTHREAD_MUTEX_INITIALIZER;

static void note_read(const char *name)
{
    if (strncmp(name, "NCCL_", 5) || strlen(name) >= NAME_MAX_LEN) return;
    pthread_mutex_lock(&read_lock);
    int i = 0;
    while (i < nread && strcmp(names_read[i], name)) i++;
    if (i == nread && nread < MAX_READ) snprintf(names_read[nread++], NAME_MAX_LEN, "%s", name);
    pthread_mutex_unlock(&read_lock);
}

/* The env plugin chained behind this one: the env_chain setting, else the one the job
 * named in NCCL_ENV_PLUGIN before the constructor named this library there. */
static const struct env_v1 *chain;
static char job_plugin[256];
extern const struct env_v1 ncclEnvPlugin_v1;

static const char *e_get(const char *name)
{
    note_read(name);
    const struct ng_env_change *ch = ncclguard_policy_change_of(name);
    if (ch && ch->rule && ch->rule->action == NG_ENV_FORCE && ch->outcome != NG_OUT_FAILED &&
        ch->outcome != NG_OUT_DISABLED)
        return ch->rule->value; /* the forced value holds at NCCL's read time */
    if (ch && ch->rule && ch->rule->action == NG_ENV_FORBID &&
        (ch->outcome == NG_OUT_REMOVED || ch->outcome == NG_OUT_ABSENT))
        return NULL;
    return chain ? chain->get_env(name) : getenv(name);
}

/* Loads the chained plugin (NCCL's rule for its name), or says in one line why not. */
static void load_chain(uint8_t major, uint8_t minor, uint8_t patch, const char *suffix)
{
    const char *name = ncclguard_settings()->env_chain[0] ? ncclguard_settings()->env_chain
                                                          : job_plugin;
    if (!name[0]) return;
    void *h = ncclguard_plugin_open("libnccl-env", name);
    const struct env_v1 *p = h ? dlsym(h, "ncclEnvPlugin_v1") : NULL;
    if (!p || p == &ncclEnvPlugin_v1 || !p->get_env ||
        (p->init && p->init(major, minor, patch, suffix) != ncclSuccess)) {
        NG_WARN("env plugin %s: %s; NCCL's reads get the environment's values behind ncclguard's",
                name,
                !h                       ? "cannot be opened"
                : !p                     ? "has no ncclEnvPlugin_v1"
                : p == &ncclEnvPlugin_v1 ? "is ncclguard itself"
                                         : "failed its init");
        return;
    }
    chain = p;
    NG_INFO("env plugin %s chained behind ncclguard's", p->name ? p->name : name);
}

static ncclResult_t e_init(uint8_t major, uint8_t minor, uint8_t patch, const char *suffix)
{
    load_chain(major, minor, patch, suffix);
    if (ng_atomic_load_acquire(&ncclguard_tracking) && ncclguard_policy_talks())
        atexit(ncclguard_envplugin_report); /* disabled: silent */
    return ncclSuccess;
}

static ncclResult_t e_finalize(void)
{
    if (chain && chain->finalize) chain->finalize();
    return ncclSuccess;
}

__attribute__((visibility("default")))
const struct env_v1 ncclEnvPlugin_v1 = {"ncclguard", e_init, e_finalize, e_get};

void ncclguard_envplugin_take_env(void)
{
    Dl_info info;
    if (!ncclguard_settings()->env_plugin || ncclguard_policy_change_of("NCCL_ENV_PLUGIN") ||
        !dladdr((const void *)&ncclEnvPlugin_v1, &info) || !info.dli_fname || !info.dli_fname[0] ||
        !ncclguard_plugin_preloaded(info.dli_fname))
        return; /* off, the site decided the variable, or not preloaded (too late) */
    const char *v = getenv("NCCL_ENV_PLUGIN");
    if (v && (!strcasecmp(v, "none") || ncclguard_plugin_names_self(v, info.dli_fname))) return;
    if (v && !ncclguard_plugin_names_ncclguard(v) && !ncclguard_settings()->env_chain[0]) {
        snprintf(job_plugin, sizeof job_plugin, "%s", v);
        setenv("NCCLGUARD_ENV_CHAIN", job_plugin, 0); /* a child chains it too */
        if (ncclguard_policy_talks())
            NG_INFO("NCCL_ENV_PLUGIN=%s (ncclguard as NCCL's env plugin, so that the site's "
                    "forced values hold at NCCL's read time; the job's plugin %s is chained "
                    "behind it)",
                    info.dli_fname, v);
    }
    setenv("NCCL_ENV_PLUGIN", info.dli_fname, 1);
}

void ncclguard_envplugin_report(void)
{
    char unread[1024];
    size_t len = 0;
    int n = 0;
    unread[0] = '\0';
    pthread_mutex_lock(&read_lock);
    for (char **e = environ; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        size_t k = eq ? (size_t)(eq - *e) : 0;
        if (k <= 5 || strncmp(*e, "NCCL_", 5) || k >= NAME_MAX_LEN ||
            !strncmp(*e, "NCCL_ENV_PLUGIN=", 16)) /* NCCL reads that one with getenv */
            continue;
        int seen = 0;
        for (int i = 0; i < nread && !seen; i++)
            seen = strlen(names_read[i]) == k && !strncmp(names_read[i], *e, k);
        if (seen) continue;
        n++;
        if (len + k + 3 < sizeof unread)
            len += (size_t)snprintf(unread + len, sizeof unread - len, "%s%.*s", len ? ", " : "",
                                    (int)k, *e);
    }
    int reads = nread;
    pthread_mutex_unlock(&read_lock);
    if (n)
        NG_WARN("NCCL read %d NCCL_* variables through the env plugin; %d set and never read: %s",
                reads, n, unread);
    else
        NG_INFO("NCCL read %d NCCL_* variables through the env plugin; none set is unread", reads);
}
