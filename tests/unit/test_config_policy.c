/*
 * test_config_policy.c: applying [env.default], [env.force] and [env.forbid] to
 * the process environment: outcomes, provenance in the log lines, logging once
 * per node, NCCLGUARD_DISABLE, and idempotence between a parent and its child
 * (including a child whose conditions differ from its parent's).
 *
 * Each test runs in its own forked process, so setenv calls do not leak.
 */
#include <check.h>

#include "check_main.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/identity.h"
#include "base/log.h"
#include "policy/config.h"
#include "policy/config_json.h"
#include "policy/config_load.h"
#include "policy/facts.h"
#include "log_capture.h"
#include "policy/policy.h"

static char dir[64];

static void setup(void)
{
    ng_check_tmpdir(dir, sizeof dir, "policy");
    capture_reset();
    ncclguard_facts_reset();
    unsetenv("LOCAL_RANK");
    unsetenv("NCCLGUARD_VERBOSE");
    unsetenv("NCCLGUARD_POLICY_APPLIED");
    ncclguard_identity_init();
}

static void teardown(void)
{
    ck_assert(ng_check_rmtree(dir));
}

static const char *write_conf(const char *name, const char *text)
{
    return ng_check_write(dir, name, text);
}

/* Loads a site file (no user file) from the current environment and applies it. */
static const char *apply(const char *site_text)
{
    const char *site = write_conf("site.conf", site_text);
    struct ng_config_paths p = {.site = site, .user = ""};
    ncclguard_config_load(&p, environ, 1);
    ncclguard_policy_apply(0, ncclguard_policy_talks());
    return site;
}

static const struct ng_env_change *change(const char *name)
{
    const struct ng_env_change *c = ncclguard_policy_change_of(name);
    ck_assert_msg(c != NULL, "no change recorded for %s", name);
    return c;
}

NG_TEST(default_sets_unset_variable)
{
    unsetenv("NCCL_IB_TIMEOUT");
    const char *site = apply("[env.default]\nNCCL_IB_TIMEOUT = 22\n");
    ck_assert_str_eq(getenv("NCCL_IB_TIMEOUT"), "22");
    ck_assert_int_eq(change("NCCL_IB_TIMEOUT")->outcome, NG_OUT_SET);
    char want[256];
    snprintf(want, sizeof want, "NCCL_IB_TIMEOUT=22 (site default, %s:2; was unset)", site);
    ck_assert_int_eq(capture_count(NG_LOG_INFO, want), 1);
    ck_assert_int_eq(capture_count(-1, ""), 1);
    ck_assert_ptr_nonnull(getenv("NCCLGUARD_POLICY_APPLIED"));
    ck_assert_ptr_nonnull(strstr(getenv("NCCLGUARD_POLICY_APPLIED"), "NCCL_IB_TIMEOUT="));
}
END_TEST

NG_TEST(default_keeps_user_value)
{
    setenv("NCCL_IB_TIMEOUT", "18", 1);
    apply("[env.default]\nNCCL_IB_TIMEOUT = 22\n");
    ck_assert_str_eq(getenv("NCCL_IB_TIMEOUT"), "18");
    const struct ng_env_change *c = change("NCCL_IB_TIMEOUT");
    ck_assert_int_eq(c->outcome, NG_OUT_KEPT);
    ck_assert_str_eq(c->was, "18");
    ck_assert_int_eq(capture_count(NG_LOG_INFO, "") + capture_count(NG_LOG_WARN, ""), 0);
    ck_assert_ptr_null(getenv("NCCLGUARD_POLICY_APPLIED"));
}
END_TEST

NG_TEST(force_overrides_user_value)
{
    setenv("NCCL_DEBUG", "INFO", 1);
    unsetenv("NCCL_SOCKET_IFNAME");
    apply("[env.force]\nNCCL_DEBUG = WARN\nNCCL_SOCKET_IFNAME = ib0\n");
    ck_assert_str_eq(getenv("NCCL_DEBUG"), "WARN");
    ck_assert_str_eq(getenv("NCCL_SOCKET_IFNAME"), "ib0");
    ck_assert_int_eq(change("NCCL_DEBUG")->outcome, NG_OUT_FORCED);
    ck_assert_str_eq(change("NCCL_DEBUG")->was, "INFO");
    ck_assert_int_eq(capture_count(NG_LOG_WARN, "NCCL_DEBUG=WARN (site force, "), 1);
    ck_assert_int_eq(capture_count(NG_LOG_WARN, "was 'INFO'): the site policy overrides"), 1);
    ck_assert_int_eq(capture_count(NG_LOG_INFO, "NCCL_SOCKET_IFNAME=ib0 (site force, "), 1);
}
END_TEST

NG_TEST(forbid_removes_names_and_patterns)
{
    setenv("NCCL_TIMEOUT", "1800", 1);
    setenv("NCCL_LL_THRESHOLD", "0", 1);
    setenv("NCCL_LL128_BUFFSIZE", "1", 1);
    setenv("NCCL_KEEP", "1", 1);
    unsetenv("NCCL_IB_MTU");
    apply("[env.forbid]\n"
          "NCCL_TIMEOUT = not an NCCL variable; set timeout in [ncclguard]\n"
          "NCCL_LL*\n"
          "NCCL_IB_MTU\n");
    ck_assert_ptr_null(getenv("NCCL_TIMEOUT"));
    ck_assert_ptr_null(getenv("NCCL_LL_THRESHOLD"));
    ck_assert_ptr_null(getenv("NCCL_LL128_BUFFSIZE"));
    ck_assert_str_eq(getenv("NCCL_KEEP"), "1");
    ck_assert_int_eq(change("NCCL_TIMEOUT")->outcome, NG_OUT_REMOVED);
    ck_assert_int_eq(change("NCCL_LL128_BUFFSIZE")->outcome, NG_OUT_REMOVED);
    ck_assert_int_eq(change("NCCL_IB_MTU")->outcome, NG_OUT_ABSENT);
    ck_assert_int_eq(capture_count(NG_LOG_WARN, "NCCL_TIMEOUT removed (site forbid, "), 1);
    ck_assert_int_eq(capture_count(NG_LOG_WARN, "was '1800'): not an NCCL variable; set "
                                                "timeout in [ncclguard]"),
                     1);
    ck_assert_int_eq(capture_count(NG_LOG_WARN, "removed"), 3);
}
END_TEST

/* More matches than the change list holds: every one is removed, later rules still apply. */
NG_TEST(forbid_pattern_beyond_the_change_list)
{
    char name[64];
    for (int i = 0; i < NG_POLICY_CHANGES_MAX + 50; i++) {
        snprintf(name, sizeof name, "NCCL_JUNK_%d", i);
        setenv(name, "x", 1);
    }
    unsetenv("NCCL_AFTER");
    apply("[env.forbid]\nNCCL_JUNK_*\n[env.default]\nNCCL_AFTER = 1\n");
    for (char **e = environ; *e; e++) ck_assert_msg(strncmp(*e, "NCCL_JUNK_", 10), "%s", *e);
    ck_assert_str_eq(getenv("NCCL_AFTER"), "1");
    size_t n;
    ncclguard_policy_changes(&n);
    ck_assert_int_eq(n, NG_POLICY_CHANGES_MAX);
    ck_assert_int_eq(capture_count(NG_LOG_WARN, "51 environment changes beyond the first 256"), 1);
}
END_TEST

NG_TEST(second_application_changes_nothing)
{
    const char *text = "[env.default]\nNCCL_IB_TIMEOUT = 22\n[env.force]\nNCCL_DEBUG = WARN\n"
                       "[env.forbid]\nNCCL_TIMEOUT\n";
    unsetenv("NCCL_IB_TIMEOUT");
    setenv("NCCL_DEBUG", "INFO", 1);
    setenv("NCCL_TIMEOUT", "1", 1);
    apply(text);
    ck_assert_int_eq(capture_count(NG_LOG_INFO, "") + capture_count(NG_LOG_WARN, ""), 3);
    char *marker = strdup(getenv("NCCLGUARD_POLICY_APPLIED"));
    /* the child: same policy, the environment the parent left */
    capture_reset();
    apply(text);
    ck_assert_int_eq(capture_count(NG_LOG_INFO, "") + capture_count(NG_LOG_WARN, ""), 0);
    ck_assert_int_eq(change("NCCL_IB_TIMEOUT")->outcome, NG_OUT_ALREADY);
    ck_assert_int_eq(change("NCCL_IB_TIMEOUT")->was_parent, 1);
    ck_assert_int_eq(change("NCCL_DEBUG")->outcome, NG_OUT_ALREADY);
    ck_assert_int_eq(change("NCCL_TIMEOUT")->outcome, NG_OUT_ABSENT);
    ck_assert_str_eq(getenv("NCCL_IB_TIMEOUT"), "22");
    ck_assert_str_eq(getenv("NCCL_DEBUG"), "WARN");
    ck_assert_str_eq(getenv("NCCLGUARD_POLICY_APPLIED"), marker);
    free(marker);
}
END_TEST

/* torchrun's case: the launcher has no WORLD_SIZE, its children do. */
NG_TEST(child_with_other_conditions_replaces_parent_default)
{
    const char *text = "[env.default]\nNCCL_IB_TIMEOUT = 22\nNCCL_USER_SET = policy\n"
                       "[when world_size>=64]\nenv.default.NCCL_IB_TIMEOUT = 23\n"
                       "env.default.NCCL_USER_SET = big\n";
    unsetenv("WORLD_SIZE");
    unsetenv("NCCL_IB_TIMEOUT");
    setenv("NCCL_USER_SET", "mine", 1);
    apply(text);
    ck_assert_str_eq(getenv("NCCL_IB_TIMEOUT"), "22");
    capture_reset();
    setenv("WORLD_SIZE", "64", 1);
    ncclguard_facts_reset();
    apply(text);
    ck_assert_str_eq(getenv("NCCL_IB_TIMEOUT"), "23");
    ck_assert_int_eq(change("NCCL_IB_TIMEOUT")->outcome, NG_OUT_REPLACED);
    ck_assert_int_eq(capture_count(NG_LOG_INFO, "NCCL_IB_TIMEOUT=23 (site default, "), 1);
    ck_assert_int_eq(capture_count(NG_LOG_INFO, "was '22', from the parent process's policy"), 1);
    ck_assert_str_eq(getenv("NCCL_USER_SET"), "mine"); /* the user's own value stays */
    ck_assert_int_eq(change("NCCL_USER_SET")->outcome, NG_OUT_KEPT);
}
END_TEST

NG_TEST(user_change_after_parent_is_respected)
{
    unsetenv("NCCL_IB_TIMEOUT");
    apply("[env.default]\nNCCL_IB_TIMEOUT = 22\n");
    setenv("NCCL_IB_TIMEOUT", "19", 1); /* a wrapper script between parent and child */
    apply("[env.default]\nNCCL_IB_TIMEOUT = 23\n");
    ck_assert_str_eq(getenv("NCCL_IB_TIMEOUT"), "19");
    ck_assert_int_eq(change("NCCL_IB_TIMEOUT")->outcome, NG_OUT_KEPT);
    ck_assert_ptr_null(getenv("NCCLGUARD_POLICY_APPLIED"));
}
END_TEST

NG_TEST(only_local_rank_zero_talks)
{
    const char *site = write_conf("site.conf", "[env.default]\nNCCL_IB_TIMEOUT = 22\nbogus\n");
    setenv("NCCLGUARD_TEST_SITE_CONFIG", site, 1);
    setenv("HOME", dir, 1);
    unsetenv("XDG_CONFIG_HOME");
    unsetenv("NCCL_IB_TIMEOUT");
    setenv("LOCAL_RANK", "3", 1);
    ncclguard_identity_init();
    ncclguard_policy_apply_at_start();
    ck_assert_str_eq(getenv("NCCL_IB_TIMEOUT"), "22"); /* applied everywhere... */
    ck_assert_int_eq(capture_count(NG_LOG_INFO, "") + capture_count(NG_LOG_WARN, ""), 0);
    ck_assert_int_eq(capture_count(NG_LOG_DEBUG, "NCCL_IB_TIMEOUT=22"), 1); /* ...said once */
    ck_assert_int_eq(capture_count(NG_LOG_DEBUG, "line ignored"), 1);
    capture_reset();
    unsetenv("NCCL_IB_TIMEOUT");
    setenv("NCCLGUARD_VERBOSE", "1", 1);
    ncclguard_policy_apply_at_start();
    ck_assert_int_eq(capture_count(NG_LOG_INFO, "NCCL_IB_TIMEOUT=22"), 1);
    ck_assert_int_eq(capture_count(NG_LOG_WARN, "line ignored"), 1);
    capture_reset();
    unsetenv("NCCL_IB_TIMEOUT");
    unsetenv("NCCLGUARD_VERBOSE");
    setenv("LOCAL_RANK", "0", 1);
    ncclguard_identity_init();
    ncclguard_policy_apply_at_start();
    ck_assert_int_eq(capture_count(NG_LOG_INFO, "NCCL_IB_TIMEOUT=22"), 1);
}
END_TEST

NG_TEST(no_config_file_changes_nothing)
{
    setenv("NCCLGUARD_TEST_SITE_CONFIG", "/nonexistent/ncclguard.conf", 1);
    setenv("HOME", dir, 1);
    unsetenv("XDG_CONFIG_HOME");
    size_t before = 0;
    for (char **e = environ; *e; e++) before++;
    ncclguard_policy_apply_at_start();
    size_t after = 0, n;
    for (char **e = environ; *e; e++) after++;
    ck_assert_int_eq(before, after);
    ck_assert_int_eq(capture_count(-1, ""), 0);
    ncclguard_policy_changes(&n);
    ck_assert_int_eq(n, 0);
    ck_assert_int_eq(ncclguard_config_file(NG_SRC_SITE)->status, NG_FILE_ABSENT);
    ck_assert_int_eq(ncclguard_config_file(NG_SRC_USER)->status, NG_FILE_ABSENT);
}
END_TEST

NG_TEST(user_file_from_xdg)
{
    char cfg[128];
    snprintf(cfg, sizeof cfg, "%s/xdg", dir);
    mkdir(cfg, 0755);
    write_conf("xdg/ncclguard.conf", "timeout = 123\n[env.default]\nNCCL_X_FROM_USER = 1\n");
    setenv("XDG_CONFIG_HOME", cfg, 1);
    setenv("NCCLGUARD_TEST_SITE_CONFIG", write_conf("site.conf", "timeout = 50\nslow_ms = 7\n"), 1);
    unsetenv("NCCL_X_FROM_USER");
    ncclguard_policy_apply_at_start();
    const struct ng_settings *s = ncclguard_settings();
    ck_assert(s->timeout == 123);
    ck_assert_int_eq(s->origin[NG_KEY_TIMEOUT].source, NG_SRC_USER);
    ck_assert_int_eq(s->slow_ms, 7);
    ck_assert_str_eq(getenv("NCCL_X_FROM_USER"), "1");
    ck_assert_int_eq(capture_count(NG_LOG_INFO, "(user default, "), 1);
}
END_TEST

NG_TEST(disable_applies_nothing)
{
    setenv("NCCLGUARD_DISABLE", "1", 1);
    unsetenv("NCCL_IB_TIMEOUT");
    apply("[env.default]\nNCCL_IB_TIMEOUT = 22\n");
    ck_assert_ptr_null(getenv("NCCL_IB_TIMEOUT"));
    ck_assert_int_eq(change("NCCL_IB_TIMEOUT")->outcome, NG_OUT_DISABLED);
    ck_assert_int_eq(capture_count(NG_LOG_INFO, "NCCLGUARD_DISABLE is on (env NCCLGUARD_DISABLE)"),
                     1);
}
END_TEST

NG_TEST(dry_run_leaves_environment)
{
    unsetenv("NCCL_IB_TIMEOUT");
    setenv("NCCL_TIMEOUT", "5", 1);
    struct ng_config_paths p = {
        .site = write_conf("s.conf", "[env.default]\nNCCL_IB_TIMEOUT=22\n[env.forbid]\n"
                                     "NCCL_TIMEOUT\n"),
        .user = ""};
    ncclguard_config_load(&p, environ, 1);
    ncclguard_policy_apply(1, 1);
    ck_assert_ptr_null(getenv("NCCL_IB_TIMEOUT"));
    ck_assert_str_eq(getenv("NCCL_TIMEOUT"), "5");
    ck_assert_int_eq(change("NCCL_IB_TIMEOUT")->outcome, NG_OUT_SET);
    ck_assert_int_eq(change("NCCL_TIMEOUT")->outcome, NG_OUT_REMOVED);
    ck_assert_ptr_null(getenv("NCCLGUARD_POLICY_APPLIED"));
}
END_TEST

NG_TEST(json_lists_changes)
{
    unsetenv("NCCL_IB_TIMEOUT");
    setenv("NCCL_TIMEOUT", "1800", 1);
    apply("[env.default]\nNCCL_IB_TIMEOUT = 22\n[env.forbid]\nNCCL_TIMEOUT = myth\n");
    static char buf[65536];
    ck_assert_int_gt(ncclguard_config_json(buf, sizeof buf), 0);
    ck_assert_ptr_nonnull(strstr(buf, "{\"name\":\"NCCL_TIMEOUT\",\"action\":\"forbid\","
                                      "\"reason\":\"myth\",\"origin\":\"site "));
    ck_assert_ptr_nonnull(strstr(buf, "\"outcome\":\"removed\",\"was\":\"1800\"}"));
    ck_assert_ptr_nonnull(strstr(buf, "{\"name\":\"NCCL_IB_TIMEOUT\",\"action\":\"default\","
                                      "\"value\":\"22\""));
    ck_assert_ptr_nonnull(strstr(buf, "\"outcome\":\"set\",\"was\":null}"));
}
END_TEST

int main(void)
{
    return ng_check_run(
        ng_check_fixture_suite("config_policy", "policy", 0, setup, teardown, NULL));
}
