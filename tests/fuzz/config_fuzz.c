/*
 * config_fuzz.c: libFuzzer target for everything that reads untrusted text at
 * start-up: the config file reader and grammar, the values, the [when]
 * conditions, precedence and locks (the input is read as the site file and,
 * after a "\n[[user]]\n" separator, as the user file), the dry-run of the
 * environment policy, the dump's JSON, and the NCCL environment audit (every
 * line of the input that looks like NCCL_X=value is audited).
 *
 * Run: make fuzz-smoke (20 s from the corpus in tests/fuzz/corpus/config).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "policy/config.h"
#include "policy/config_json.h"
#include "policy/config_load.h"
#include "policy/envaudit.h"
#include "policy/facts.h"
#include "policy/ncclscan.h"
#include "policy/policy.h"
#include "policy/timeouts.h"

static struct ng_known known;
static struct ng_audit audit;
static char json[1 << 16];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    /* facts from a root that does not exist: the same answers on every machine */
    setenv("NCCLGUARD_TEST_SYSROOT", "/nonexistent-ncclguard-fuzz", 1);
    setenv("WORLD_SIZE", "64", 1);
    setenv("LOCAL_WORLD_SIZE", "8", 1);
    setenv("SLURM_JOB_NAME", "train-fuzz", 1);
    static const char *const names[] = {"NCCL_BUFFSIZE",      "NCCL_IB_TC",     "NCCL_MIN_NRINGS",
                                        "NCCL_MAX_NCHANNELS", "NCCL_DEBUG",     "NCCL_IB_HCA",
                                        "NCCL_IB_DISABLE",    "NCCL_P2P_LEVEL", "NCCL_MIN_CTAS"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        ncclguard_known_add(&known, names[i], strlen(names[i]));
    return 0;
}

/* Lines of data that look like NCCL_X=value, as an envp (copied, NUL-terminated). */
static void audit_lines(const uint8_t *data, size_t size)
{
    static char store[8192];
    static char *envp[65];
    size_t used = 0, n = 0;
    for (size_t i = 0; i < size && n < 64;) {
        size_t j = i;
        while (j < size && data[j] != '\n') j++;
        size_t len = j - i;
        if (len > 5 && !memcmp(data + i, "NCCL_", 5) && memchr(data + i, '=', len) &&
            !memchr(data + i, '\0', len) && used + len + 1 <= sizeof store) {
            memcpy(store + used, data + i, len);
            store[used + len] = '\0';
            envp[n++] = store + used;
            used += len + 1;
        }
        i = j + 1;
    }
    envp[n] = NULL;
    ncclguard_envaudit(&known, "2.28.9", envp, &audit);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char sep[] = "\n[[user]]\n";
    const char *text = (const char *)data;
    const char *user = size >= sizeof sep - 1 ? memmem(text, size, sep, sizeof sep - 1) : NULL;
    size_t site_len = user ? (size_t)(user - text) : size;
    char *envp[] = {"NCCLGUARD_TIMEOUT=90", "NCCLGUARD_RING=abc", "NCCLGUARD_TIMOUT=1", NULL};

    ncclguard_facts_reset();
    ncclguard_config_begin(1);
    ncclguard_config_add_buffer(NG_SRC_SITE, "site.conf", text, site_len);
    if (user)
        ncclguard_config_add_buffer(NG_SRC_USER, "user.conf", user + sizeof sep - 1,
                                    size - site_len - (sizeof sep - 1));
    ncclguard_config_finish(envp);
    ncclguard_policy_apply(1, 1);
    long need = ncclguard_config_json(NULL, 0), got = ncclguard_config_json(json, sizeof json);
    if (got < 0 ? strcmp(json, "{}") != 0 : got != need || strlen(json) != (size_t)got) abort();
    const struct ng_settings *s = ncclguard_settings();
    double t = ncclguard_timeout_s(s, NG_TIMEOUT_FIRST_OP, NG_OP_ALLGATHER, (uint64_t)size << 20);
    if (t < 0 || ncclguard_action_after_s(s, NG_ACTION_KILL, t) < 0) abort();
    audit_lines(data, size);
    return 0;
}
