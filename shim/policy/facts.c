/*
 * facts.c: see facts.h.
 *
 * World size: WORLD_SIZE, then OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_SIZE,
 * SLURM_NTASKS, SLURM_NPROCS. Nodes: WORLD_SIZE / LOCAL_WORLD_SIZE (rounded
 * up) when both are set, then SLURM_NNODES, SLURM_JOB_NUM_NODES, then
 * OMPI_COMM_WORLD_SIZE / OMPI_COMM_WORLD_LOCAL_SIZE. Job name: SLURM_JOB_NAME,
 * then PBS_JOBNAME, then LSB_JOBNAME.
 */
#include "policy/facts.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "policy/testswitch.h"

static struct ng_facts facts;

void ncclguard_facts_reset(void)
{
    memset(&facts, 0, sizeof facts);
}

static char root_dir[256]; /* ncclguard_facts_set_root: the command's --root */

void ncclguard_facts_set_root(const char *root)
{
    snprintf(root_dir, sizeof root_dir, "%s", root ? root : "");
}

/* root + path, with root from ncclguard_facts_set_root, else the test switch
 * NCCLGUARD_TEST_SYSROOT (never where a site file exists: a job could fake
 * the facts its conditional sections match on), else none. */
static void sys_path(char *buf, size_t len, const char *path)
{
    const char *root = root_dir[0] ? root_dir : ncclguard_test_switch("NCCLGUARD_TEST_SYSROOT");
    snprintf(buf, len, "%s%s", root ? root : "", path);
}

/* A positive integer from the first variable of names that has one, else -1. */
static long env_long(const char *const *names)
{
    for (; *names; names++) {
        const char *v = getenv(*names);
        if (!v || !*v) continue;
        char *end;
        long n = strtol(v, &end, 10);
        if (*end == '\0' && n > 0 && n < (1L << 40)) return n;
    }
    return -1;
}

static void read_job(void)
{
    static const char *const world[] = {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
                                        "PMIX_SIZE",  "SLURM_NTASKS",         "SLURM_NPROCS",
                                        NULL};
    static const char *const ws[] = {"WORLD_SIZE", NULL}, *const lws[] = {"LOCAL_WORLD_SIZE", NULL};
    static const char *const slurm[] = {"SLURM_NNODES", "SLURM_JOB_NUM_NODES", NULL};
    static const char *const ompi[] = {"OMPI_COMM_WORLD_SIZE", NULL},
                             *const ompi_local[] = {"OMPI_COMM_WORLD_LOCAL_SIZE", NULL};
    static const char *const names[] = {"SLURM_JOB_NAME", "PBS_JOBNAME", "LSB_JOBNAME"};
    facts.world_size = env_long(world);
    long w = env_long(ws), l = env_long(lws);
    facts.nodes = w > 0 && l > 0 ? (w + l - 1) / l : env_long(slurm);
    if (facts.nodes < 0) {
        w = env_long(ompi);
        l = env_long(ompi_local);
        if (w > 0 && l > 0) facts.nodes = (w + l - 1) / l;
    }
    facts.job_name[0] = '\0';
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *v = getenv(names[i]);
        if (v && *v) {
            snprintf(facts.job_name, sizeof facts.job_name, "%s", v);
            break;
        }
    }
}

/* Copies the value of the "Model:" line of an information file into model. */
static void read_model(const char *path, char *model, size_t len)
{
    char buf[4096];
    model[0] = '\0';
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) return;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return;
    buf[n] = '\0';
    for (char *line = buf, *next; line; line = next ? next + 1 : NULL) {
        next = strchr(line, '\n');
        if (strncasecmp(line, "Model:", 6)) continue;
        char *v = line + 6;
        v += strspn(v, " \t");
        size_t w = strcspn(v, "\r\n");
        while (w > 0 && (v[w - 1] == ' ' || v[w - 1] == '\t')) w--;
        if (w >= len) w = len - 1;
        memcpy(model, v, w);
        model[w] = '\0';
        return;
    }
}

static void read_gpus(void)
{
    char dir[512], path[1024], model[96];
    sys_path(dir, sizeof dir, "/proc/driver/nvidia/gpus");
    facts.ngpus = 0;
    facts.nmodels = 0;
    DIR *d = opendir(dir);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.') continue;
        facts.ngpus++;
        snprintf(path, sizeof path, "%s/%s/information", dir, e->d_name);
        read_model(path, model, sizeof model);
        int seen = !model[0];
        for (int i = 0; i < facts.nmodels && !seen; i++) seen = !strcmp(facts.gpu_model[i], model);
        if (!seen && facts.nmodels < NG_FACTS_MAX_MODELS)
            memcpy(facts.gpu_model[facts.nmodels++], model, sizeof model);
    }
    closedir(d);
}

static void read_ib(void)
{
    char dir[512];
    sys_path(dir, sizeof dir, "/sys/class/infiniband");
    facts.ib = 0;
    DIR *d = opendir(dir);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (e->d_name[0] != '.') {
            facts.ib = 1;
            break;
        }
    closedir(d);
}

const struct ng_facts *ncclguard_facts(unsigned want)
{
    unsigned missing = want & ~facts.have;
    if (missing & NG_FACT_HOST) {
        if (gethostname(facts.host, sizeof facts.host) != 0) facts.host[0] = '\0';
        facts.host[sizeof facts.host - 1] = '\0';
    }
    if (missing & NG_FACT_GPU) read_gpus();
    if (missing & NG_FACT_IB) read_ib();
    if (missing & NG_FACT_JOB) read_job();
    facts.have |= missing;
    return &facts;
}
