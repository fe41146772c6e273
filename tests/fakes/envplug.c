/*
 * envplug: an env plugin for tests (NCCL 2.28.9's ncclEnvPlugin_v1, declared
 * here from src/include/plugin/env/env_v1.h). getEnv answers VALUE for the
 * name of $ENVPLUG_FORCE=NAME=VALUE, whatever the environment says, and
 * getenv otherwise. Each call appends a line to $ENVPLUG_LOG:
 *   <pid> init 2.28.9      <pid> get NAME      <pid> finalize
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

static void out(const char *what, const char *arg)
{
    const char *log = getenv("ENVPLUG_LOG");
    if (!log) return;
    char line[256];
    int n = snprintf(line, sizeof line, "%d %s%s%s\n", (int)getpid(), what, arg ? " " : "",
                     arg ? arg : "");
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return;
    if (n > 0 && write(fd, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1) < 0) n = 0;
    close(fd);
}

static int init(uint8_t major, uint8_t minor, uint8_t patch, const char *suffix)
{
    char v[64];
    snprintf(v, sizeof v, "%u.%u.%u%s", major, minor, patch, suffix ? suffix : "");
    out("init", v);
    return 0;
}

static int finalize(void)
{
    out("finalize", NULL);
    return 0;
}

static const char *get_env(const char *name)
{
    out("get", name);
    const char *f = getenv("ENVPLUG_FORCE");
    size_t n = strlen(name);
    if (f && !strncmp(f, name, n) && f[n] == '=') return f + n + 1;
    return getenv(name);
}

struct env_v1 {
    const char *name;
    int (*init)(uint8_t, uint8_t, uint8_t, const char *);
    int (*finalize)(void);
    const char *(*get_env)(const char *);
};
EXPORT const struct env_v1 ncclEnvPlugin_v1 = {"envplug", init, finalize, get_env};
