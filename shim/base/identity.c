/* identity.c: see identity.h. */
#include "base/identity.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/atomic.h"

static struct ng_identity me = {.rank = -1, .local_rank = -1};
static char tag[128];
static ng_atomic(int) nccl_version;

long ncclguard_env_long(const char *const *names, long lo, long hi)
{
    for (; *names; names++) {
        const char *v = getenv(*names);
        if (!v || !*v) continue;
        char *end;
        long n = strtol(v, &end, 10);
        if (*end == '\0' && n >= lo && n <= hi) return n;
    }
    return -1;
}

void ncclguard_name_part(const char *src, char *dst)
{
    size_t n = 0;
    for (; src && src[n] && n < NG_NAME_PART_MAX; n++) {
        unsigned char c = (unsigned char)src[n];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '.' || c == '_' || c == '-';
        dst[n] = ok ? (char)c : '_';
    }
    dst[n] = '\0';
    if (n == 0) strcpy(dst, "unknown");
    if (dst[0] == '.') dst[0] = '_';
}

/* The job id: SLURM_JOB_ID, then TORCHELASTIC_RUN_ID, then "local". */
static const char *job_from_env(void)
{
    const char *job = getenv("SLURM_JOB_ID");
    if (!job || !*job) job = getenv("TORCHELASTIC_RUN_ID");
    return job && *job ? job : "local";
}

void ncclguard_default_dump_dir(char *buf, size_t len)
{
    char part[NG_NAME_PART_MAX + 1];
    ncclguard_name_part(job_from_env(), part);
    snprintf(buf, len, "./ncclguard-%s", part);
}

void ncclguard_identity_init(void)
{
    static const char *const rank_vars[] = {"RANK",      "OMPI_COMM_WORLD_RANK", "PMI_RANK",
                                            "PMIX_RANK", "SLURM_PROCID",         NULL};
    static const char *const local_vars[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                                             "SLURM_LOCALID", NULL};
    me.rank = (int)ncclguard_env_long(rank_vars, 0, (1L << 30) - 1);
    me.local_rank = (int)ncclguard_env_long(local_vars, 0, (1L << 30) - 1);
    if (gethostname(me.host, sizeof me.host) != 0) strcpy(me.host, "unknown");
    me.host[sizeof me.host - 1] = '\0';
    char *dot = strchr(me.host, '.');
    if (dot) *dot = '\0';
    snprintf(me.job, sizeof me.job, "%s", job_from_env());
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

int ncclguard_identity_nccl_version(void)
{
    return ng_atomic_load_relaxed(&nccl_version);
}

void ncclguard_identity_set_nccl_version(int code)
{
    ng_atomic_store_relaxed(&nccl_version, code);
}

unsigned long long ncclguard_process_start_time(int pid)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "/proc/%d/stat", pid);
    int fd = open(buf, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the command name may hold blanks and ')' */
    unsigned long long t = 0;
    for (int field = 2; p && field < 22; field++) p = strchr(p + 1, ' ');
    if (p && sscanf(p + 1, "%llu", &t) != 1) t = 0;
    return t;
}
