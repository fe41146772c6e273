/* log_capture.c: see log_capture.h; implements the API of shim/base/log.h. */
#include "log_capture.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"

#define MAX_MSGS 512

static char msgs[MAX_MSGS][1024];
static int levels[MAX_MSGS];
static int nmsgs;
static char text[MAX_MSGS * 64];

void ncclguard_log_init(void)
{
}

void ncclguard_log_set_level(int level)
{
    (void)level;
}

int ncclguard_log_enabled(enum ng_level lvl)
{
    (void)lvl;
    return 1;
}

void ncclguard_log(enum ng_level lvl, const char *fmt, ...)
{
    if (nmsgs == MAX_MSGS) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msgs[nmsgs], sizeof msgs[0], fmt, ap);
    va_end(ap);
    levels[nmsgs++] = lvl;
}

void capture_reset(void)
{
    nmsgs = 0;
}

int capture_count(int lvl, const char *needle)
{
    int n = 0;
    for (int i = 0; i < nmsgs; i++)
        if ((lvl < 0 || levels[i] == lvl) && strstr(msgs[i], needle)) n++;
    return n;
}

const char *capture_text(void)
{
    static const char *const names[] = {"error", "warn", "info", "debug"};
    size_t len = 0;
    text[0] = '\0';
    for (int i = 0; i < nmsgs && len < sizeof text; i++)
        len += (size_t)snprintf(text + len, sizeof text - len, "%s: %s\n", names[levels[i] & 3],
                                msgs[i]);
    return text;
}
