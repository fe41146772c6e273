/*
 * test_envaudit.c: the scan of a library's read-only data for the NCCL_* names
 * it reads, and each check of the NCCL environment audit, against synthetic
 * known lists, against the real NVIDIA libnccl.so.2 when it is installed, and
 * through the first-communicator hook of the shim.
 */
#include <check.h>

#include "check_main.h"
#include <dlfcn.h>
#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/identity.h"
#include "base/log.h"
#include "policy/config.h"
#include "policy/config_load.h"
#include "policy/envaudit.h"
#include "log_capture.h"
#include "policy/ncclscan.h"
#include "policy/policy.h"

#define REAL_NCCL "/usr/local/cuda/lib/libnccl.so.2"

/* Names that this test binary's own .rodata holds as whole strings, and one that it
 * holds only inside a longer string. */
const char *const test_names[] = {"NCCL_SELFTEST_ALPHA", "NCCL_SELFTEST_BETA",
                                  "not NCCL_SELFTEST_GAMMA"};

static struct ng_known known;
static struct ng_audit audit;

/* A known list like NCCL 2.28.9's, restricted to what these tests use. */
static void known_like_2_28(void)
{
    static const char *const names[] = {
        "NCCL_BUFFSIZE",      "NCCL_IB_TC",         "NCCL_MIN_NRINGS",
        "NCCL_MAX_NRINGS",    "NCCL_MAX_NCHANNELS", "NCCL_MIN_NCHANNELS",
        "NCCL_MIN_CTAS",      "NCCL_MAX_CTAS",      "NCCL_DEBUG",
        "NCCL_IB_DISABLE",    "NCCL_IB_HCA",        "NCCL_P2P_DISABLE",
        "NCCL_P2P_LEVEL",     "NCCL_LAUNCH_MODE",   "NCCL_PROXY_DUMP_SIGNAL",
        "NCCL_NTHREADS",      "NCCL_COMM_ID",       "NCCL_SOCKET_IFNAME",
        "NCCL_NET_GDR_LEVEL", "NCCL_IB_TIMEOUT",
    };
    memset(&known, 0, sizeof known);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        ck_assert_int_eq(ncclguard_known_add(&known, names[i], strlen(names[i])), 0);
}

static void setup(void)
{
    capture_reset();
    known_like_2_28();
}

/* The finding about var, or NULL; fails when there are several about it. */
static const struct ng_finding *about(const char *var)
{
    const struct ng_finding *hit = NULL;
    for (size_t i = 0; i < audit.nfindings; i++)
        if (!strcmp(audit.f[i].var, var)) {
            ck_assert_msg(!hit, "two findings about %s", var);
            hit = &audit.f[i];
        }
    return hit;
}

static void expect(const char *var, int kind, int sev, const char *text)
{
    const struct ng_finding *f = about(var);
    ck_assert_msg(f != NULL, "no finding about %s", var);
    ck_assert_msg(f->kind == kind, "%s: kind %s", var, ncclguard_finding_kind_name(f->kind));
    ck_assert_int_eq(f->severity, sev);
    ck_assert_msg(strstr(f->message, text), "%s: '%s' not in '%s'", var, text, f->message);
}

static char *recipe[] = {"NCCL_IBEXT_DISABLE=1", "NCCL_TIMEOUT=1800", "NCCL_BUFFSIZE=1048576",
                         "NCCL_IB_TC=106",       "NCCL_IB_MTU=4096",  "NCCL_MAX_RINGS=8",
                         "NCCL_MIN_NRINGS=4",    "PATH=/bin",         NULL};

/* The recipe's findings that do not depend on the library beyond the known list. */
static void expect_recipe_common(const char *v)
{
    char what[128];
    ck_assert_int_eq(audit.nvars, 7);
    expect("NCCL_IBEXT_DISABLE", NG_FIND_PLUGIN, NG_SEV_NOTE, "nccl-rdma-sharp-plugins");
    expect("NCCL_TIMEOUT", NG_FIND_MYTH, NG_SEV_WARNING,
           "NCCL_TIMEOUT=1800 is not an NCCL variable (environment): NCCL has no timeout");
    expect("NCCL_BUFFSIZE", NG_FIND_VALUE, NG_SEV_WARNING,
           "NCCL_BUFFSIZE=1048576 (1 MiB) is below NCCL's default of 4194304 (4 MiB)");
    ck_assert_ptr_null(about("NCCL_IB_TC"));
    snprintf(what, sizeof what,
             "NCCL_IB_MTU=4096 is not read by NCCL %s (environment): NCCL "
             "uses the active MTU",
             v);
    expect("NCCL_IB_MTU", NG_FIND_MYTH, NG_SEV_WARNING, what);
    snprintf(what, sizeof what,
             "NCCL_MAX_RINGS=8 is not read by NCCL %s (environment): did "
             "you mean NCCL_MAX_NCHANNELS?",
             v);
    expect("NCCL_MAX_RINGS", NG_FIND_UNKNOWN, NG_SEV_WARNING, what);
}

NG_TEST(recipe_against_2_28_names)
{
    ncclguard_envaudit(&known, "2.28.9", recipe, &audit);
    expect_recipe_common("2.28.9");
    expect("NCCL_MIN_NRINGS", NG_FIND_DEPRECATED, NG_SEV_WARNING,
           "NCCL_MIN_NRINGS=4 is a deprecated alias of NCCL_MIN_NCHANNELS in NCCL 2.28.9 "
           "(environment): use NCCL_MIN_NCHANNELS instead (or NCCL_MIN_CTAS");
    ck_assert_int_eq(audit.warnings, 5);
    ck_assert_int_eq(audit.notes, 1);
    ck_assert_int_eq(audit.nfindings, 6);
}
END_TEST

/* A library that reads fewer names gives other answers: the list is not built in. */
NG_TEST(recipe_against_a_smaller_library)
{
    memset(&known, 0, sizeof known);
    ncclguard_known_add(&known, "NCCL_COMM_BLOCKING", 18);
    ncclguard_known_add(&known, "NCCL_BUFFSIZE", 13);
    ncclguard_envaudit(&known, "9.9.9", recipe, &audit);
    expect("NCCL_MIN_NRINGS", NG_FIND_REMOVED, NG_SEV_WARNING,
           "NCCL_MIN_NRINGS=4 is no longer read by NCCL 9.9.9 (environment): remove it");
    expect("NCCL_IB_TC", NG_FIND_UNKNOWN, NG_SEV_WARNING, "is not read by NCCL 9.9.9");
    const struct ng_finding *f = about("NCCL_MAX_RINGS");
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_null(strstr(f->message, "NCCL_MAX_NCHANNELS"));
}
END_TEST

NG_TEST(misparsed_values)
{
    char *env[] = {"NCCL_NTHREADS=08",
                   "NCCL_BUFFSIZE=1e6",
                   "NCCL_IB_TIMEOUT=010",
                   "NCCL_MAX_NCHANNELS=4M",
                   "NCCL_MIN_NCHANNELS=0x10",
                   "NCCL_IB_TC=-1",
                   "NCCL_MIN_CTAS=99999999999999999999",
                   "NCCL_COMM_ID=10.0.0.1:1234",
                   "NCCL_MAX_CTAS=1.5",
                   NULL};
    ncclguard_envaudit(&known, "2.28.9", env, &audit);
    expect("NCCL_NTHREADS", NG_FIND_MISPARSE, NG_SEV_WARNING,
           "NCCL_NTHREADS=08 is read by NCCL as 0 (environment): NCCL reads a leading 0 as "
           "octal and stops at '8'; write 8");
    expect("NCCL_BUFFSIZE", NG_FIND_MISPARSE, NG_SEV_WARNING,
           "is read by NCCL as 1 (environment): NCCL parses integers with strtoll and ignores "
           "'e6'; write 1000000");
    expect("NCCL_IB_TIMEOUT", NG_FIND_MISPARSE, NG_SEV_WARNING,
           "is read by NCCL as 8 (environment): NCCL reads a leading 0 as octal; write 10");
    expect("NCCL_MAX_NCHANNELS", NG_FIND_MISPARSE, NG_SEV_WARNING, "as 4 (environment)");
    expect("NCCL_MAX_NCHANNELS", NG_FIND_MISPARSE, NG_SEV_WARNING, "write 4194304");
    ck_assert_ptr_null(about("NCCL_MIN_NCHANNELS"));
    ck_assert_ptr_null(about("NCCL_IB_TC"));
    expect("NCCL_MIN_CTAS", NG_FIND_MISPARSE, NG_SEV_WARNING, "out of range");
    ck_assert_ptr_null(about("NCCL_COMM_ID"));
    expect("NCCL_MAX_CTAS", NG_FIND_MISPARSE, NG_SEV_WARNING, "as 1 (environment)");
    ck_assert_int_eq(audit.nfindings, 6);
}
END_TEST

NG_TEST(buffsize_values)
{
    char *env[] = {"NCCL_BUFFSIZE=6000000", NULL};
    ncclguard_envaudit(&known, "2.28.9", env, &audit);
    expect("NCCL_BUFFSIZE", NG_FIND_VALUE, NG_SEV_WARNING, "is not a power of two");
    char *good[] = {"NCCL_BUFFSIZE=8388608", NULL};
    ncclguard_envaudit(&known, "2.28.9", good, &audit);
    ck_assert_int_eq(audit.nfindings, 0);
    char *both[] = {"NCCL_BUFFSIZE=1000000", NULL};
    ncclguard_envaudit(&known, "2.28.9", both, &audit);
    ck_assert_int_eq(audit.nfindings, 2);
}
END_TEST

NG_TEST(contradictions)
{
    char *env[] = {"NCCL_IB_DISABLE=1",  "NCCL_IB_HCA=mlx5_0",        "NCCL_P2P_DISABLE=1",
                   "NCCL_P2P_LEVEL=NVL", "NCCL_PROXY_DUMP_SIGNAL=12", NULL};
    ncclguard_envaudit(&known, "2.28.9", env, &audit);
    expect("NCCL_IB_HCA", NG_FIND_CONFLICT, NG_SEV_WARNING,
           "NCCL_IB_HCA=mlx5_0 has no effect because NCCL_IB_DISABLE=1");
    expect("NCCL_P2P_LEVEL", NG_FIND_CONFLICT, NG_SEV_WARNING,
           "has no effect because NCCL_P2P_DISABLE=1");
    expect("NCCL_PROXY_DUMP_SIGNAL", NG_FIND_CONFLICT, NG_SEV_WARNING, "dump signal");
    char *fine[] = {"NCCL_IB_DISABLE=0", "NCCL_IB_HCA=mlx5_0", "NCCL_P2P_LEVEL=NVL",
                    "NCCL_PROXY_DUMP_SIGNAL=10", NULL};
    ncclguard_envaudit(&known, "2.28.9", fine, &audit);
    ck_assert_int_eq(audit.nfindings, 0);
}
END_TEST

NG_TEST(debug_settings_and_retired_names)
{
    ncclguard_known_add(&known, "NCCL_CHECKS_DISABLE", 19);
    char *env[] = {"NCCL_DEBUG=info",
                   "NCCL_LAUNCH_MODE=GROUP",
                   "NCCL_CHECKS_DISABLE=1",
                   "NCCL_LL_THRESHOLD=0",
                   "NCCL_IB_GDR_LEVEL=2",
                   "NCCL_SOCKET_IFNAME=",
                   NULL};
    ncclguard_envaudit(&known, "2.28.9", env, &audit);
    expect("NCCL_DEBUG", NG_FIND_DEBUG, NG_SEV_WARNING, "use WARN in production");
    expect("NCCL_LAUNCH_MODE", NG_FIND_DEBUG, NG_SEV_WARNING, "PARALLEL");
    expect("NCCL_CHECKS_DISABLE", NG_FIND_DEBUG, NG_SEV_WARNING, "argument checks off");
    expect("NCCL_LL_THRESHOLD", NG_FIND_REMOVED, NG_SEV_WARNING, "NCCL_PROTO");
    expect("NCCL_IB_GDR_LEVEL", NG_FIND_REMOVED, NG_SEV_WARNING, "use NCCL_NET_GDR_LEVEL instead");
    expect("NCCL_SOCKET_IFNAME", NG_FIND_EMPTY, NG_SEV_NOTE, "NCCL_SOCKET_IFNAME=\"\" is set");
    char *quiet[] = {"NCCL_DEBUG=WARN", "NCCL_LAUNCH_MODE=PARALLEL", NULL};
    ncclguard_envaudit(&known, "2.28.9", quiet, &audit);
    ck_assert_int_eq(audit.nfindings, 0);
}
END_TEST

NG_TEST(typos_get_suggestions)
{
    char *env[] = {"NCCL_SOCKET_IFNAM=eth0", "NCCL_IB_TIMEOTU=22", "NCCL_COMPLETELY_MADE_UP=1",
                   "NCCL_FASTRAK_IFNAME=eth1", NULL};
    ncclguard_envaudit(&known, "2.28.9", env, &audit);
    expect("NCCL_SOCKET_IFNAM", NG_FIND_UNKNOWN, NG_SEV_WARNING,
           "did you mean NCCL_SOCKET_IFNAME?");
    expect("NCCL_IB_TIMEOTU", NG_FIND_UNKNOWN, NG_SEV_WARNING, "did you mean NCCL_IB_TIMEOUT?");
    expect("NCCL_COMPLETELY_MADE_UP", NG_FIND_UNKNOWN, NG_SEV_WARNING, "check the spelling");
    expect("NCCL_FASTRAK_IFNAME", NG_FIND_PLUGIN, NG_SEV_NOTE, "TCPXO");
}
END_TEST

NG_TEST(empty_known_list_skips_unknown_checks)
{
    memset(&known, 0, sizeof known);
    ncclguard_envaudit(&known, "unknown", recipe, &audit);
    ck_assert_ptr_null(about("NCCL_MAX_RINGS"));
    expect("NCCL_BUFFSIZE", NG_FIND_VALUE, NG_SEV_WARNING, "below");
}
END_TEST

NG_TEST(findings_are_bounded)
{
    static char vars[200][40];
    static char *env[201];
    for (int i = 0; i < 200; i++) {
        snprintf(vars[i], sizeof vars[i], "NCCL_ZZ_NOPE_%d=1", i);
        env[i] = vars[i];
    }
    ncclguard_envaudit(&known, "2.28.9", env, &audit);
    ck_assert_int_eq(audit.nvars, 200);
    ck_assert_int_eq(audit.nfindings, NG_FINDINGS_MAX);
    ck_assert_int_eq(audit.dropped, 200 - NG_FINDINGS_MAX);
    ck_assert_int_eq(audit.warnings, 200);
}
END_TEST

NG_TEST(provenance_of_policy_values)
{
    char path[] = "/tmp/ng-audit-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    const char text[] = "[env.default]\nNCCL_MIN_NRINGS = 4\n";
    ck_assert_int_eq(write(fd, text, sizeof text - 1), (ssize_t)(sizeof text - 1));
    close(fd);
    unsetenv("NCCL_MIN_NRINGS");
    struct ng_config_paths p = {.site = path, .user = ""};
    ncclguard_config_load(&p, environ, 1);
    ncclguard_policy_apply(0, 1);
    unlink(path);
    ncclguard_envaudit(&known, "2.28.9", environ, &audit);
    char want[128];
    snprintf(want, sizeof want,
             "NCCL_MIN_NRINGS=4 is a deprecated alias of NCCL_MIN_NCHANNELS "
             "in NCCL 2.28.9 (site default, %s:2)",
             path);
    expect("NCCL_MIN_NRINGS", NG_FIND_DEPRECATED, NG_SEV_WARNING, want);
}
END_TEST

/* --- the scanner ------------------------------------------------------------------------ */

NG_TEST(scan_own_binary)
{
    char why[256];
    ck_assert_int_eq(ncclguard_known_scan("/proc/self/exe", &known, why, sizeof why), 0);
    ck_assert(ncclguard_known_has(&known, "NCCL_SELFTEST_ALPHA"));
    ck_assert(ncclguard_known_has(&known, "NCCL_SELFTEST_BETA"));
    ck_assert(!ncclguard_known_has(&known, test_names[2] + 4)); /* only inside a string */
    ck_assert_int_eq(known.whole_segments, 0);
    for (size_t i = 1; i < known.n; i++)
        ck_assert_int_lt(strcmp(ncclguard_known_at(&known, i - 1), ncclguard_known_at(&known, i)),
                         0);
    ck_assert_int_eq(ncclguard_known_scan("/etc/hostname", &known, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "not an ELF file"));
    ck_assert_int_eq(ncclguard_known_scan("/nonexistent.so", &known, why, sizeof why), -1);
}
END_TEST

/* An ELF file without section headers: its read-only segment is scanned instead. */
NG_TEST(scan_without_section_headers)
{
    char path[] = "/tmp/ng-elf-XXXXXX", why[256];
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    const char data[] = "\0NCCL_SEGMENT_NAME\0xNCCL_NOT_WHOLE\0NCCL_lower\0NCCL_TAIL";
    Elf64_Ehdr eh = {.e_type = ET_DYN,
                     .e_machine = EM_X86_64,
                     .e_version = EV_CURRENT,
                     .e_phoff = sizeof eh,
                     .e_ehsize = sizeof eh,
                     .e_phentsize = sizeof(Elf64_Phdr),
                     .e_phnum = 2};
    memcpy(eh.e_ident, ELFMAG, SELFMAG);
    eh.e_ident[EI_CLASS] = ELFCLASS64;
    eh.e_ident[EI_DATA] = ELFDATA2LSB;
    eh.e_ident[EI_VERSION] = EV_CURRENT;
    size_t off = sizeof eh + 2 * sizeof(Elf64_Phdr);
    Elf64_Phdr ph[2] = {
        {.p_type = PT_LOAD, .p_flags = PF_R, .p_offset = off, .p_filesz = sizeof data - 1},
        {.p_type = PT_LOAD, .p_flags = PF_R | PF_X, .p_offset = off, .p_filesz = sizeof data - 1}};
    ck_assert_int_eq(write(fd, &eh, sizeof eh), (ssize_t)sizeof eh);
    ck_assert_int_eq(write(fd, ph, sizeof ph), (ssize_t)sizeof ph);
    ck_assert_int_eq(write(fd, data, sizeof data - 1), (ssize_t)(sizeof data - 1));
    close(fd);
    int rc = ncclguard_known_scan(path, &known, why, sizeof why);
    unlink(path);
    ck_assert_int_eq(rc, 0);
    ck_assert_int_eq(known.whole_segments, 1);
    ck_assert_int_eq(known.n, 1); /* the unterminated tail does not count either */
    ck_assert_str_eq(ncclguard_known_at(&known, 0), "NCCL_SEGMENT_NAME");
}
END_TEST

NG_TEST(scan_real_nccl)
{
    char why[256];
    if (access(REAL_NCCL, R_OK) != 0) {
        fprintf(stderr, "note: %s not installed; scan_real_nccl checks nothing\n", REAL_NCCL);
        return;
    }
    ck_assert_int_eq(ncclguard_known_scan(REAL_NCCL, &known, why, sizeof why), 0);
    /* 2.28.9: 219 names for `strings`, of which 32 enumerators in .debug_str */
    ck_assert_int_ge(known.n, 150);
    ck_assert(ncclguard_known_has(&known, "NCCL_IB_TC"));
    ck_assert(ncclguard_known_has(&known, "NCCL_MIN_NRINGS"));
    ck_assert(ncclguard_known_has(&known, "NCCL_MAX_NCHANNELS"));
    ck_assert(!ncclguard_known_has(&known, "NCCL_TIMEOUT"));
    ck_assert(!ncclguard_known_has(&known, "NCCL_IB_MTU"));
    ck_assert(!ncclguard_known_has(&known, "NCCL_MAX_RINGS"));
    ck_assert(!ncclguard_known_has(&known, "NCCL_INIT")); /* an enumerator, not a variable */
    ck_assert_int_lt(known.scanned, 4 << 20);             /* .rodata only, not 200 MB */
    void *h = dlopen(REAL_NCCL, RTLD_LAZY | RTLD_LOCAL);
    char version[32];
    int code = ncclguard_nccl_version(h, version, sizeof version);
    ck_assert_int_ge(code, 22800);
    ncclguard_envaudit(&known, version, recipe, &audit);
    expect_recipe_common(version);
    expect("NCCL_MIN_NRINGS", NG_FIND_DEPRECATED, NG_SEV_WARNING, "deprecated alias");
}
END_TEST

/* The shim's hook: once, on local rank 0 only (unless audit = all), one line per finding. */
START_TEST(first_comm_hook)
{
    if (access(REAL_NCCL, R_OK) != 0) return;
    ck_assert_ptr_nonnull(dlopen(REAL_NCCL, RTLD_LAZY | RTLD_GLOBAL));
    clearenv(); /* only the recipe's NCCL_* variables */
    for (char **e = recipe; *e && strncmp(*e, "PATH", 4); e++) putenv(*e);
    char *site_env = _i == 2 ? "NCCLGUARD_AUDIT=all" : _i == 3 ? "NCCLGUARD_AUDIT=off" : "X=1";
    char *envp[] = {site_env, NULL};
    ncclguard_config_load(&(struct ng_config_paths){.site = "", .user = ""}, envp, 1);
    setenv("LOCAL_RANK", _i == 0 ? "0" : "1", 1);
    ncclguard_identity_init();
    char path[4096];
    ck_assert_int_eq(ncclguard_mapped_nccl(path, sizeof path), 0);
    ck_assert_ptr_nonnull(strstr(path, "libnccl.so"));
    ncclguard_envaudit_at_first_comm();
    int runs = _i == 0 || _i == 2;
    ck_assert_int_eq(capture_count(NG_LOG_WARN, "NCCL_MAX_RINGS=8 is not read by NCCL 2.28"), runs);
    ck_assert_int_eq(capture_count(NG_LOG_WARN, ""), runs ? 5 : 0);
    ck_assert_int_eq(capture_count(NG_LOG_INFO, "NCCL_IBEXT_DISABLE=1"), runs);
    capture_reset();
    ncclguard_envaudit_at_first_comm(); /* once per process */
    ck_assert_int_eq(capture_count(-1, ""), 0);
}
END_TEST

int main(void)
{
    TCase *t;
    Suite *s = ng_check_fixture_suite("envaudit", "envaudit", 60, setup, NULL, &t);
    tcase_add_loop_test(t, first_comm_hook, 0, 4);
    return ng_check_run(s);
}
