/*
 * policy_probe.c: a stand-in for a preloaded process in tests/e2e/policy.sh. Its
 * constructor does what the library constructor does for the policy (identity,
 * log, ncclguard_policy_apply_at_start), before main; main then reports.
 *
 * usage: policy_probe [--env NAME] [--setting KEY] [--changes] [--json]
 *                     [--audit LIBNCCL] [--exec PROG ARGS...]
 *   --env NAME      print "NAME=value" or "NAME unset"
 *   --setting KEY   print "KEY=value (origin)"
 *   --changes       print "NAME outcome" for each environment rule
 *   --json          print the dump's config object
 *   --audit LIB     load LIB and run the first-communicator audit
 *   --exec PROG...  then exec PROG with the (policy-applied) environment
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/identity.h"
#include "base/log.h"
#include "policy/config.h"
#include "policy/config_json.h"
#include "policy/envaudit.h"
#include "policy/policy.h"

__attribute__((constructor)) static void probe_start(void)
{
    ncclguard_identity_init();
    ncclguard_log_init();
    ncclguard_policy_apply_at_start();
}

static void print_setting(const char *name)
{
    int k = ncclguard_setting_key(name);
    char value[256], origin[1200];
    if (k < 0) {
        printf("%s unknown\n", name);
        return;
    }
    const struct ng_settings *s = ncclguard_settings();
    printf("%s=%s (%s)\n", name, ncclguard_setting_text(s, k, value, sizeof value),
           ncclguard_origin_text(&s->origin[k], k, origin, sizeof origin));
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *next = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--env") && next) {
            const char *v = getenv(next);
            v ? printf("%s=%s\n", next, v) : printf("%s unset\n", next);
            i++;
        } else if (!strcmp(a, "--setting") && next) {
            print_setting(next);
            i++;
        } else if (!strcmp(a, "--changes")) {
            size_t n;
            const struct ng_env_change *c = ncclguard_policy_changes(&n);
            for (size_t j = 0; j < n; j++)
                printf("%s %s\n", c[j].name, ncclguard_policy_outcome_name(c[j].outcome));
        } else if (!strcmp(a, "--json")) {
            static char buf[1 << 16];
            if (ncclguard_config_json(buf, sizeof buf) < 0) return 3;
            printf("%s\n", buf);
        } else if (!strcmp(a, "--audit") && next) {
            if (!dlopen(next, RTLD_NOW | RTLD_GLOBAL)) {
                fprintf(stderr, "policy_probe: %s\n", dlerror());
                return 2;
            }
            ncclguard_envaudit_at_first_comm();
            i++;
        } else if (!strcmp(a, "--exec") && next) {
            fflush(stdout);
            execv(next, argv + i + 1);
            perror("policy_probe: exec");
            return 2;
        } else {
            fprintf(stderr, "policy_probe: bad argument '%s'\n", a);
            return 64;
        }
    }
    return 0;
}
