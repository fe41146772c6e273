/* identity.c: see identity.h. */
#include "base/identity.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct ng_identity me = {.rank = -1, .local_rank = -1};
static char tag[128];

/* First variable of the list that holds a non-negative integer, else -1. */
static int first_int(const char *const *names)
{
    for (; *names; names++) {
        const char *v = getenv(*names);
        if (!v || !*v) continue;
        char *end;
        long n = strtol(v, &end, 10);
        if (*end == '\0' && n >= 0 && n < (1L << 30)) return (int)n;
    }
    return -1;
}

void ncclguard_identity_init(void)
{
    static const char *const rank_vars[] = {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK",
                                            "PMIX_RANK", "SLURM_PROCID", NULL};
    static const char *const local_vars[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                                             "SLURM_LOCALID", NULL};
    me.rank = first_int(rank_vars);
    me.local_rank = first_int(local_vars);
    if (gethostname(me.host, sizeof me.host) != 0) strcpy(me.host, "unknown");
    me.host[sizeof me.host - 1] = '\0';
    char *dot = strchr(me.host, '.');
    if (dot) *dot = '\0';
    const char *job = getenv("SLURM_JOB_ID");
    if (!job || !*job) job = getenv("TORCHELASTIC_RUN_ID");
    if (!job || !*job) job = "local";
    snprintf(me.job, sizeof me.job, "%s", job);
    if (me.rank >= 0)
        snprintf(tag, sizeof tag, "[rank %d host %s] ", me.rank, me.host);
    else
        snprintf(tag, sizeof tag, "[host %s] ", me.host);
}

const struct ng_identity *ncclguard_identity(void)
{
    return &me;
}

const char *ncclguard_identity_tag(void)
{
    return tag;
}
