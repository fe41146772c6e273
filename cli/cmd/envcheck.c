/*
 * cmd/envcheck.c: `ncclguard envcheck`, the NCCL environment audit of envaudit.c run
 * offline, with no GPU: it finds the libnccl.so.2 that a job would load (--nccl,
 * NCCL_HOME, CUDA_HOME, /usr/local/cuda, then the loader's search path), scans
 * its read-only data for the variables it reads, and audits this environment.
 */
#include "cmd/envcheck.h"

#include <dlfcn.h>
#include <getopt.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/identity.h"
#include "base/log.h"
#include "cmd/cmd.h"
#include "envcheck.h"
#include "policy/config.h"
#include "policy/config_load.h"
#include "policy/envaudit.h"
#include "policy/policy.h"

#define EXIT_NO_NCCL 2

static void envcheck_usage(FILE *out)
{
    fprintf(out, "usage: ncclguard envcheck [--nccl PATH] [--json] [--strict] [--policy]\n"
                 "                          [--site FILE]\n\n"
                 "Audits the NCCL_* variables of this environment against the NCCL library that\n"
                 "a job would load, using the names that library itself reads. No GPU needed.\n\n"
                 "  --nccl PATH  the libnccl.so.2 to use (a file, or a directory holding it);\n"
                 "               default: $NCCL_HOME/lib, $CUDA_HOME/lib, /usr/local/cuda/lib,\n"
                 "               then the loader's search path (LD_LIBRARY_PATH, ldconfig)\n"
                 "  --json       print one JSON document instead of lines\n"
                 "  --strict     exit 1 when there is any warning\n"
                 "  --policy     apply the policy first, as the preloaded library would: the\n"
                 "               site file " NG_SITE_CONFIG ", the user file, then\n"
                 "               the job file $NCCLGUARD_CONFIG\n"
                 "  --site FILE  read FILE as the site file instead (to check a site file\n"
                 "               before installing it; the jobs themselves always read\n"
                 "               " NG_SITE_CONFIG ")\n\n"
                 "Exit status: 0, 1 (--strict and warnings), 2 (no NCCL found), 64 (usage).\n");
}

static int is_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static int try_file(struct ng_nccl_found *f, const char *path)
{
    if (!is_file(path)) return -1;
    snprintf(f->path, sizeof f->path, "%s", path);
    f->handle = dlopen(path, RTLD_LAZY | RTLD_LOCAL);
    if (!f->handle) snprintf(f->load_error, sizeof f->load_error, "%s", dlerror());
    return 0;
}

/* Finds the library; 0, or -1 after saying why on stderr. */
static int locate(const char *explicit_path, struct ng_nccl_found *f)
{
    char buf[PATH_MAX];
    if (explicit_path) {
        struct stat st;
        if (stat(explicit_path, &st) == 0 && S_ISDIR(st.st_mode))
            snprintf(buf, sizeof buf, "%s/libnccl.so.2", explicit_path);
        else
            snprintf(buf, sizeof buf, "%s", explicit_path);
        if (try_file(f, buf) == 0) return 0;
        fprintf(stderr,
                "ncclguard: no NCCL library at %s (--nccl): give the path of a "
                "libnccl.so.2\n",
                buf);
        return -1;
    }
    const char *roots[] = {getenv("NCCL_HOME"), getenv("CUDA_HOME"), "/usr/local/cuda"};
    for (size_t i = 0; i < sizeof roots / sizeof roots[0]; i++) {
        if (!roots[i] || !*roots[i]) continue;
        for (int lib64 = 0; lib64 < 2; lib64++) {
            snprintf(buf, sizeof buf, "%s/%s/libnccl.so.2", roots[i], lib64 ? "lib64" : "lib");
            if (try_file(f, buf) == 0) return 0;
        }
    }
    f->handle = dlopen("libnccl.so.2", RTLD_LAZY | RTLD_LOCAL);
    struct link_map *lm = NULL;
    if (f->handle && dlinfo(f->handle, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name[0]) {
        snprintf(f->path, sizeof f->path, "%s", lm->l_name);
        return 0;
    }
    fprintf(stderr, "ncclguard: no libnccl.so.2 found (NCCL_HOME, CUDA_HOME, /usr/local/cuda, "
                    "the loader's search path): give one with --nccl PATH\n");
    return -1;
}

int cmd_nccl_audit(const char *nccl, struct ng_nccl_found *f, struct ng_known *known,
                   struct ng_audit *audit, int *code)
{
    char why[PATH_MAX + 128], version[32];
    if (locate(nccl, f) != 0) return -1;
    if (ncclguard_known_scan(f->path, known, why, sizeof why) != 0) {
        fprintf(stderr, "ncclguard: cannot audit against %s: %s\n", f->path, why);
        return -1;
    }
    *code = ncclguard_nccl_version(f->handle, version, sizeof version);
    if (!f->handle)
        fprintf(stderr,
                "ncclguard: %s could not be loaded (%s): its version is unknown, the "
                "audit still uses the names it contains\n",
                f->path, f->load_error);
    if (!known->n)
        fprintf(stderr,
                "ncclguard: no NCCL_* names found in %s: is it NCCL? Unknown variables "
                "are not reported\n",
                f->path);
    ncclguard_envaudit(known, version, environ, audit);
    return 0;
}

static void json_str(const char *s)
{
    putchar('"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            printf("\\%c", *p);
        else if (*p < 0x20 || *p == 0x7f)
            printf("\\u%04x", *p);
        else
            putchar(*p);
    }
    putchar('"');
}

static void print_json(const struct ng_nccl_found *f, int code, const struct ng_known *k,
                       const struct ng_audit *a)
{
    printf("{\"schema\":\"ncclguard.envcheck/1\",\"nccl\":{\"path\":");
    json_str(f->path);
    printf(",\"version\":");
    json_str(a->nccl_version);
    printf(",\"version_code\":%d,\"known_variables\":%zu,\"scanned\":\"%s\"}", code, k->n,
           k->whole_segments ? "segments" : "rodata");
    printf(",\"variables\":%zu,\"warnings\":%zu,\"notes\":%zu,\"not_shown\":%zu,\"findings\":[",
           a->nvars, a->warnings, a->notes, a->dropped);
    for (size_t i = 0; i < a->nfindings; i++) {
        const struct ng_finding *x = &a->f[i];
        printf("%s{\"severity\":\"%s\",\"kind\":\"%s\",\"variable\":", i ? "," : "",
               x->severity == NG_SEV_WARNING ? "warning" : "note",
               ncclguard_finding_kind_name(x->kind));
        json_str(x->var);
        printf(",\"value\":");
        json_str(x->value);
        printf(",\"message\":");
        json_str(x->message);
        printf("}");
    }
    printf("]}\n");
}

static void print_text(const struct ng_nccl_found *f, const struct ng_known *k,
                       const struct ng_audit *a)
{
    for (size_t i = 0; i < a->nfindings; i++)
        printf("%s: %s\n", a->f[i].severity == NG_SEV_WARNING ? "warning" : "note",
               a->f[i].message);
    if (a->dropped) printf("(%zu more findings not shown)\n", a->dropped);
    printf("ncclguard envcheck: NCCL %s at %s (%zu variable names known): %zu NCCL_* "
           "variable%s, %zu warning%s, %zu note%s\n",
           a->nccl_version, f->path, k->n, a->nvars, a->nvars == 1 ? "" : "s", a->warnings,
           a->warnings == 1 ? "" : "s", a->notes, a->notes == 1 ? "" : "s");
}

int cmd_envcheck(int argc, char **argv)
{
    static const struct option opts[] = {{"nccl", required_argument, 0, 'n'},
                                         {"json", no_argument, 0, 'j'},
                                         {"strict", no_argument, 0, 's'},
                                         {"policy", no_argument, 0, 'p'},
                                         {"site", required_argument, 0, 'S'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *nccl = NULL, *site = NULL;
    int json = 0, strict = 0, policy = 0, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
        switch (c) {
        case 'n': nccl = optarg; break;
        case 'j': json = 1; break;
        case 's': strict = 1; break;
        case 'p': policy = 1; break;
        case 'S': site = optarg; break;
        case 'h': envcheck_usage(stdout); return 0;
        default: envcheck_usage(stderr); return CMD_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "ncclguard: envcheck takes no argument '%s'\n", argv[optind]);
        envcheck_usage(stderr);
        return CMD_EXIT_USAGE;
    }
    ncclguard_identity_init();
    ncclguard_log_init();
    /* the settings (e.g. timeout) appear in advice; --policy also changes our environment */
    ncclguard_config_load(&(struct ng_config_paths){.site = site}, environ, 1);
    if (policy) ncclguard_policy_apply(0, 1);

    static struct ng_nccl_found f;
    static struct ng_known known;
    static struct ng_audit audit;
    int code;
    if (cmd_nccl_audit(nccl, &f, &known, &audit, &code) != 0) return EXIT_NO_NCCL;
    if (json)
        print_json(&f, code, &known, &audit);
    else
        print_text(&f, &known, &audit);
    return strict && audit.warnings ? 1 : 0;
}
