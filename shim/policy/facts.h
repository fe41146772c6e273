/*
 * facts.h: what conditional sections of a config file can match on.
 *
 * Owns: the host name, the GPU models and count (from
 * /proc/driver/nvidia/gpus/<bus id>/information, never through CUDA), the
 * presence of InfiniBand devices (/sys/class/infiniband), the world size, the
 * node count and the job name (from the launcher's environment). Each group of
 * facts is read on first use only, so a config file without conditions costs
 * nothing here. NCCLGUARD_TEST_SYSROOT=<dir> makes the /proc and /sys paths
 * relative to <dir> (for tests, and only on a machine without a site file:
 * ncclguard_test_switch); the command's --root does it with
 * ncclguard_facts_set_root.
 *
 * Threads: the constructor and the CLI; not thread-safe (facts are cached in
 * static storage without a lock).
 */
#ifndef NCCLGUARD_FACTS_H
#define NCCLGUARD_FACTS_H

#define NG_FACTS_MAX_MODELS 4

enum ng_fact_group {
    NG_FACT_HOST = 1 << 0,
    NG_FACT_GPU = 1 << 1,
    NG_FACT_IB = 1 << 2,
    NG_FACT_JOB = 1 << 3, /* world size, nodes, job name: launcher variables */
};

struct ng_facts {
    unsigned have;                           /* groups read so far */
    char host[256];                          /* gethostname() */
    int ngpus;                               /* entries under /proc/driver/nvidia/gpus; 0 without */
    int nmodels;                             /* distinct models in gpu_model */
    char gpu_model[NG_FACTS_MAX_MODELS][96]; /* "NVIDIA H100 80GB HBM3" */
    int ib;                                  /* 1 when /sys/class/infiniband has a device */
    long world_size;                         /* -1 when unknown */
    long nodes;                              /* -1 when unknown */
    char job_name[256];                      /* "" when unknown */
};

/* Reads /proc and /sys under `root` ("" or NULL: the real ones), before the
 * first ncclguard_facts (the command's diagnose --root). */
void ncclguard_facts_set_root(const char *root);

/* The facts, with at least the groups in `want` read. */
const struct ng_facts *ncclguard_facts(unsigned want);

/* Forgets every cached fact (tests; the start-up benchmark). */
void ncclguard_facts_reset(void);

#endif
