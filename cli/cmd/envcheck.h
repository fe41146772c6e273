/*
 * cmd/envcheck.h: `ncclguard envcheck`; the NCCL library a job would load, and the audit of this
 * environment against it: shared by `ncclguard envcheck` and `ncclguard diagnose`.
 */
#ifndef NCCLGUARD_CLI_CMD_ENVCHECK_H
#define NCCLGUARD_CLI_CMD_ENVCHECK_H

#include <limits.h>

#include "policy/envaudit.h"
#include "policy/ncclscan.h"

/* ncclguard envcheck [--nccl PATH] [--json] [--strict] [--policy]:
 * 0, 1 (--strict and warnings), 2 (no NCCL found), 64 (usage). */
int cmd_envcheck(int argc, char **argv);

struct ng_nccl_found {
    char path[PATH_MAX];
    void *handle; /* NULL when the file could not be loaded */
    char load_error[512];
};

/* Finds libnccl.so.2 (nccl: --nccl, or NULL for the job's search order), scans
 * the names it reads, and audits environ against them. 0, or -1 after saying
 * why on stderr. *code is NCCL_VERSION_CODE, or 0 when unknown. */
int cmd_nccl_audit(const char *nccl, struct ng_nccl_found *f, struct ng_known *known,
                   struct ng_audit *audit, int *code);

#endif
