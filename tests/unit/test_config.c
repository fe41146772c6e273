/*
 * test_config.c: the configuration model: value parsers, bounded reading,
 * the file grammar, conditions, the precedence of every pair of sources,
 * locks, and the JSON of the dump's "config" object.
 *
 * Each test runs in its own forked process (Check's default), so the static
 * state of config.c and the environment start fresh every time.
 */
#include <check.h>

#include "check_main.h"
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "base/ops.h"
#include "policy/condition.h"
#include "policy/config.h"
#include "policy/config_json.h"
#include "policy/config_load.h"
#include "policy/confread.h"
#include "policy/confvalue.h"
#include "policy/facts.h"
#include "policy/timeouts.h"
#include "log_capture.h"

static char dir[64];

static void setup(void)
{
    ng_check_tmpdir(dir, sizeof dir, "config");
    capture_reset();
    ncclguard_facts_reset();
}

static void teardown(void)
{
    ck_assert(ng_check_rmtree(dir));
}

/* Writes text to dir/name with mode; returns the path (static storage per name slot). */
static const char *file(const char *name, const char *text, mode_t mode)
{
    const char *p = ng_check_write(dir, name, text);
    ck_assert_int_eq(chmod(p, mode), 0);
    return p;
}

/* Loads site, user and job text (NULL: no such file) with the given environment. */
static void load_job(const char *site, const char *user, const char *job, char **envp)
{
    struct ng_config_paths p = {
        .site = site ? file("site.conf", site, 0644) : "",
        .user = user ? file("user.conf", user, 0644) : "",
        .job = job ? file("job.conf", job, 0644) : "",
    };
    ncclguard_config_load(&p, envp, 1);
}

static void load(const char *site, const char *user, char **envp)
{
    load_job(site, user, NULL, envp);
}

/* --- values ------------------------------------------------------------------------- */

NG_TEST(values_parse)
{
    double d;
    int i;
    long long ll;
    ck_assert_int_eq(ncclguard_parse_duration("300", &d), 0);
    ck_assert(d == 300);
    ck_assert_int_eq(ncclguard_parse_duration("10m", &d), 0);
    ck_assert(d == 600);
    ck_assert_int_eq(ncclguard_parse_duration("1.5h", &d), 0);
    ck_assert(d == 5400);
    ck_assert_int_eq(ncclguard_parse_duration("250ms", &d), 0);
    ck_assert(fabs(d - 0.25) < 1e-9);
    ck_assert_int_eq(ncclguard_parse_duration("off", &d), 0);
    ck_assert(d == 0);
    ck_assert_int_eq(ncclguard_parse_duration("10 m", &d), 0);
    ck_assert_int_eq(ncclguard_parse_duration("1e3", &d), -1);
    ck_assert_int_eq(ncclguard_parse_duration("-5", &d), -1);
    ck_assert_int_eq(ncclguard_parse_duration("5 minutes", &d), -1);
    ck_assert_int_eq(ncclguard_parse_duration("", &d), -1);
    ck_assert_int_eq(ncclguard_parse_factor("1.5x", &d), 0);
    ck_assert(d == 1.5);
    ck_assert_int_eq(ncclguard_parse_factor("2", &d), 0);
    ck_assert_int_eq(ncclguard_parse_factor("2y", &d), -1);
    ck_assert_int_eq(ncclguard_parse_bandwidth("1GB/s", &d), 0);
    ck_assert(d == 1e9);
    ck_assert_int_eq(ncclguard_parse_bandwidth("2GiB/s", &d), 0);
    ck_assert(d == 2.0 * 1024 * 1024 * 1024);
    ck_assert_int_eq(ncclguard_parse_bandwidth("500M", &d), 0);
    ck_assert(d == 5e8);
    ck_assert_int_eq(ncclguard_parse_bandwidth("5 furlongs", &d), -1);
    ck_assert_int_eq(ncclguard_parse_bool("Yes", &i), 0);
    ck_assert_int_eq(i, 1);
    ck_assert_int_eq(ncclguard_parse_bool("off", &i), 0);
    ck_assert_int_eq(i, 0);
    ck_assert_int_eq(ncclguard_parse_bool("2", &i), -1);
    ck_assert_int_eq(ncclguard_parse_int("-42", &ll), 0);
    ck_assert_int_eq(ll, -42);
    ck_assert_int_eq(ncclguard_parse_int("42x", &ll), -1);
    ck_assert_int_eq(ncclguard_parse_int("99999999999999999999999", &ll), -1);
    /* blanks: one between a number and its unit, for every type with units; none at
     * either end, for every type (a single trailing space was accepted for durations
     * and bandwidths only) */
    ck_assert_int_eq(ncclguard_parse_duration("10 m", &d), 0);
    ck_assert(d == 600);
    ck_assert_int_eq(ncclguard_parse_bandwidth("1 GB/s", &d), 0);
    ck_assert(d == 1e9);
    ck_assert_int_eq(ncclguard_parse_factor("1.5 x", &d), 0);
    ck_assert(d == 1.5);
    static const char *const blank_ended[] = {"300 ", " 300", "10 m ", "10  m"};
    for (size_t k = 0; k < sizeof blank_ended / sizeof blank_ended[0]; k++) {
        ck_assert_int_eq(ncclguard_parse_duration(blank_ended[k], &d), -1);
        ck_assert_int_eq(ncclguard_parse_bandwidth(blank_ended[k], &d), -1);
        ck_assert_int_eq(ncclguard_parse_factor(blank_ended[k], &d), -1);
        ck_assert_int_eq(ncclguard_parse_decimal(blank_ended[k], &d), -1);
        ck_assert_int_eq(ncclguard_parse_int(blank_ended[k], &ll), -1);
    }
    /* 2^64 + 16 and 2^64 + 10 once wrapped to 16 and 10 (SIGUSR1) */
    ck_assert_int_eq(ncclguard_parse_int("18446744073709551632", &ll), -1);
    ck_assert_int_eq(ncclguard_parse_int("18446744073709551626", &ll), -1);
    ck_assert_int_eq(ncclguard_parse_signal("18446744073709551626", &i), -1);
    ck_assert_int_eq(ncclguard_parse_signal("RTMIN+18446744073709551618", &i), -1);
    ck_assert_int_eq(ncclguard_parse_int("9223372036854775807", &ll), -1); /* > 2^62 */
    ck_assert_int_eq(ncclguard_parse_int("4611686018427387904", &ll), 0);  /* 2^62 */
    ck_assert(ll == 4611686018427387904LL);
    ck_assert_int_eq(ncclguard_parse_signal("SIGUSR2", &i), 0);
    ck_assert_int_eq(i, SIGUSR2);
    ck_assert_int_eq(ncclguard_parse_signal("usr1", &i), 0);
    ck_assert_int_eq(i, SIGUSR1);
    ck_assert_int_eq(ncclguard_parse_signal("RTMIN+2", &i), 0);
    ck_assert_int_eq(i, SIGRTMIN + 2);
    ck_assert_int_eq(ncclguard_parse_signal("SIGKILL", &i), -1);
    ck_assert_int_eq(ncclguard_parse_signal("11", &i), -1);
    ck_assert_int_eq(ncclguard_parse_signal("off", &i), 0);
    ck_assert_int_eq(i, 0);
    ck_assert_int_eq(ncclguard_parse_choice("END", "off|end|full"), 1);
    ck_assert_int_eq(ncclguard_parse_choice("ful", "off|end|full"), -1);
    ck_assert(ncclguard_glob_match("gpu-a*", "GPU-A12"));
    ck_assert(!ncclguard_glob_match("gpu-a*", "gpu-b12"));
}
END_TEST

/* --- bounded reading ------------------------------------------------------------------- */

NG_TEST(lines_limits)
{
    static char big[3 * NG_CONF_LINE_MAX];
    struct ng_lines r;
    const char *line;
    size_t len;
    int flag;
    memset(big, 'a', sizeof big);
    memcpy(big, "x = 1\r\n", 7);
    big[7 + NG_CONF_LINE_MAX + 10] = '\n'; /* the second line is too long */
    memcpy(big + sizeof big - 6, "\ny = 2", 6);
    ncclguard_lines_mem(&r, big, sizeof big);
    ck_assert_int_eq(ncclguard_lines_next(&r, &line, &len, &flag), 1);
    ck_assert_int_eq(len, 5); /* CR removed */
    ck_assert_int_eq(flag, NG_LINE_OK);
    ck_assert_int_eq(ncclguard_lines_next(&r, &line, &len, &flag), 1);
    ck_assert_int_eq(flag, NG_LINE_TOO_LONG);
    ck_assert_int_eq(ncclguard_lines_next(&r, &line, &len, &flag), 1);
    ck_assert_int_eq(flag, NG_LINE_TOO_LONG); /* the third line, too, has no '\n' in time */
    ck_assert_int_eq(ncclguard_lines_next(&r, &line, &len, &flag), 1);
    ck_assert_int_eq(r.lineno, 4);
    ck_assert(len == 5 && !memcmp(line, "y = 2", 5));
    ck_assert_int_eq(ncclguard_lines_next(&r, &line, &len, &flag), 0);
    ck_assert_int_eq(r.stop, NG_STOP_NONE);

    const char nul[] = "a = 1\nb\0c\n";
    ncclguard_lines_mem(&r, nul, sizeof nul - 1);
    ck_assert_int_eq(ncclguard_lines_next(&r, &line, &len, &flag), 1);
    ck_assert_int_eq(ncclguard_lines_next(&r, &line, &len, &flag), 1);
    ck_assert_int_eq(flag, NG_LINE_NUL);

    static char many[(NG_CONF_MAX_LINES + 5) * 2];
    for (size_t i = 0; i < sizeof many; i += 2) memcpy(many + i, "#\n", 2);
    ncclguard_lines_mem(&r, many, sizeof many);
    int n = 0;
    while (ncclguard_lines_next(&r, &line, &len, &flag)) n++;
    ck_assert_int_eq(n, NG_CONF_MAX_LINES);
    ck_assert_int_eq(r.stop, NG_STOP_LINES);
}
END_TEST

NG_TEST(open_refuses_unsafe_files)
{
    int fd;
    char why[200];
    ck_assert_int_eq(ncclguard_conf_open("/nonexistent/ncclguard.conf", &fd, why, sizeof why),
                     NG_CONF_ABSENT);
    const char *ok = file("ok.conf", "timeout = 1\n", 0644);
    ck_assert_int_eq(ncclguard_conf_open(ok, &fd, why, sizeof why), NG_CONF_OPENED);
    close(fd);
    const char *ww = file("ww.conf", "timeout = 1\n", 0666);
    ck_assert_int_eq(ncclguard_conf_open(ww, &fd, why, sizeof why), NG_CONF_REFUSED);
    ck_assert_ptr_nonnull(strstr(why, "world-writable"));
    ck_assert_int_eq(fd, -1);
    ck_assert_int_eq(ncclguard_conf_open(dir, &fd, why, sizeof why), NG_CONF_REFUSED);
    ck_assert_ptr_nonnull(strstr(why, "directory"));
    ck_assert_int_eq(ncclguard_conf_open("/dev/zero", &fd, why, sizeof why), NG_CONF_REFUSED);
    ck_assert_ptr_nonnull(strstr(why, "character device"));
    char fifo[128];
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    ck_assert_int_eq(mkfifo(fifo, 0644), 0);
    ck_assert_int_eq(ncclguard_conf_open(fifo, &fd, why, sizeof why), NG_CONF_REFUSED);
    ck_assert_ptr_nonnull(strstr(why, "FIFO"));
    const char *other = file("other.conf", "timeout = 1\n", 0644);
    if (chown(other, 12345, 12345) == 0 && geteuid() != 12345) {
        ck_assert_int_eq(ncclguard_conf_open(other, &fd, why, sizeof why), NG_CONF_REFUSED);
        ck_assert_ptr_nonnull(strstr(why, "uid 12345"));
    }
    char big[128];
    snprintf(big, sizeof big, "%s/big.conf", dir);
    int b = open(big, O_CREAT | O_WRONLY, 0644);
    ck_assert_int_ge(b, 0);
    ck_assert_int_eq(ftruncate(b, NG_CONF_MAX_BYTES + 1), 0);
    close(b);
    ck_assert_int_eq(ncclguard_conf_open(big, &fd, why, sizeof why), NG_CONF_REFUSED);
    ck_assert_ptr_nonnull(strstr(why, "too large"));
}
END_TEST

/* --- the file grammar ------------------------------------------------------------------ */

NG_TEST(grammar_entries_and_comments)
{
    load("# site policy\n"
         "[ncclguard]\n"
         "timeout = 10m   # ten minutes\n"
         "  Dump_Dir = \"/tmp/a #b\"  ; quoted, with a hash\n"
         "NCCLGUARD_POLL_MS = 50\n"
         "track=end\n"
         "[env.default]\n"
         "NCCL_IB_TIMEOUT = 22\n"
         "NCCL_NET_FORCE_MERGE = mlx5_0,mlx5_1;mlx5_2\n"
         "[env.force]\n"
         "NCCL_DEBUG = WARN\n"
         "[env.forbid]\n"
         "NCCL_TIMEOUT\n"
         "NCCL_LL_* = removed long ago\n",
         NULL, NULL);
    const struct ng_settings *s = ncclguard_settings();
    ck_assert(s->timeout == 600);
    ck_assert_str_eq(s->dump_dir, "/tmp/a #b");
    ck_assert_int_eq(s->poll_ms, 50);
    ck_assert_int_eq(s->track, NG_TRACK_END);
    ck_assert_int_eq(s->origin[NG_KEY_TIMEOUT].source, NG_SRC_SITE);
    ck_assert_int_eq(s->origin[NG_KEY_TIMEOUT].line, 3);
    ck_assert_int_eq(s->origin[NG_KEY_RING].source, NG_SRC_BUILTIN);
    size_t n;
    const struct ng_env_rule *r = ncclguard_config_env_rules(&n);
    ck_assert_int_eq(n, 5);
    ck_assert_str_eq(r[0].name, "NCCL_IB_TIMEOUT");
    ck_assert_str_eq(r[0].value, "22");
    ck_assert_int_eq(r[0].action, NG_ENV_DEFAULT);
    ck_assert_int_eq(r[0].origin.line, 8);
    ck_assert_str_eq(r[1].value, "mlx5_0,mlx5_1;mlx5_2");
    ck_assert_int_eq(r[2].action, NG_ENV_FORCE);
    ck_assert_int_eq(r[3].action, NG_ENV_FORBID);
    ck_assert_str_eq(r[3].value, "");
    ck_assert_str_eq(r[4].name, "NCCL_LL_*");
    ck_assert_str_eq(r[4].value, "removed long ago");
    ck_assert_int_eq(ncclguard_config_file(NG_SRC_SITE)->problems, 0);
    ck_assert_int_eq(capture_count(-1, ""), 0);
}
END_TEST

NG_TEST(grammar_bad_lines_are_reported_and_skipped)
{
    load("timeout = 100\n"         /* 1: fine */
         "timeout = soon\n"        /* 2: bad value */
         "timout = 5\n"            /* 3: typo */
         "just words\n"            /* 4: no '=' */
         "[env.default]\n"         /* 5 */
         "NCCL IB = 1\n"           /* 6: bad name */
         "NCCLGUARD_TIMEOUT = 9\n" /* 7: a setting in env */
         "NCCL_X = \"open\n"       /* 8: unterminated quote */
         "[nonsense]\n"            /* 9: unknown section */
         "anything = goes\n"       /* 10: skipped silently */
         "[ncclguard\n"            /* 11: bad header */
         "ring = 3\n"              /* 12: skipped (section ignored), no message */
         "[ncclguard]\n"           /* 13 */
         "ring = 3\n"              /* 14: out of range */
         "kill_exit = 7\n",        /* 15: fine */
         NULL, NULL);
    const struct ng_settings *s = ncclguard_settings();
    ck_assert(s->timeout == 100);
    ck_assert_int_eq(s->kill_exit, 7);
    ck_assert_int_eq(s->ring, 4096);
    ck_assert_int_eq(ncclguard_config_file(NG_SRC_SITE)->problems, 9);
    ck_assert_int_eq(capture_count(NG_LOG_WARN, "line ignored"), 7);
    ck_assert_int_eq(capture_count(NG_LOG_WARN, "section ignored"), 2);
    ck_assert_int_eq(capture_count(-1, "site.conf:2: timeout: 'soon' is not a duration"), 1);
    ck_assert_int_eq(capture_count(-1, "site.conf:3: unknown setting 'timout'; did you mean "
                                       "'timeout'?; line ignored"),
                     1);
    ck_assert_int_eq(capture_count(-1, "site.conf:6:"), 1);
    ck_assert_int_eq(capture_count(-1, "site.conf:7: NCCLGUARD_TIMEOUT is a setting"), 1);
    ck_assert_int_eq(capture_count(-1, "site.conf:8: a quoted value"), 1);
    ck_assert_int_eq(capture_count(-1, "site.conf:9: unknown section [nonsense]"), 1);
    ck_assert_int_eq(capture_count(-1, "site.conf:11:"), 1);
    ck_assert_int_eq(capture_count(-1, "site.conf:14: ring: '3' is not an integer from 16"), 1);
    ck_assert_int_eq(capture_count(-1, ":10:"), 0);
    ck_assert_int_eq(capture_count(-1, ":12:"), 0);
    size_t n;
    ncclguard_config_env_rules(&n);
    ck_assert_int_eq(n, 0);
}
END_TEST

/* Both ends of a range are accepted, one past either end is not. */
NG_TEST(range_bounds_are_inclusive)
{
    static const struct {
        const char *text;
        long long want;
    } cases[] = {{"kill_exit = 1\n", 1},
                 {"kill_exit = 255\n", 255},
                 {"kill_exit = 0\n", 124},
                 {"kill_exit = 256\n", 124}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        load(cases[i].text, NULL, NULL);
        ck_assert_int_eq(ncclguard_settings()->kill_exit, cases[i].want);
        ck_assert_int_eq(ncclguard_config_file(NG_SRC_SITE)->problems, cases[i].want == 124);
    }
}
END_TEST

NG_TEST(grammar_messages_are_capped)
{
    char text[4096] = "";
    for (int i = 0; i < 30; i++) strcat(text, "bogus line\n");
    strcat(text, "timeout = 42\n");
    load(text, NULL, NULL);
    ck_assert(ncclguard_settings()->timeout == 42);
    ck_assert_int_eq(capture_count(-1, "line ignored"), NG_CONF_MSGS_MAX);
    ck_assert_int_eq(capture_count(-1, "20 more problems not shown"), 1);
}
END_TEST

NG_TEST(binary_file_refused_whole)
{
    char garbage[512];
    for (size_t i = 0; i < sizeof garbage; i++) garbage[i] = (char)(i * 7 + 3);
    memcpy(garbage, "timeout = 5\n", 12);
    ncclguard_config_begin(1);
    ncclguard_config_add_buffer(NG_SRC_SITE, "garbage", garbage, sizeof garbage);
    ncclguard_config_finish(NULL);
    ck_assert(ncclguard_settings()->timeout == 300);
    ck_assert_int_eq(ncclguard_config_file(NG_SRC_SITE)->status, NG_FILE_REFUSED);
    ck_assert_int_eq(capture_count(NG_LOG_WARN, ""), 1);
    ck_assert_int_eq(capture_count(NG_LOG_WARN, "not a text file"), 1);
}
END_TEST

NG_TEST(refused_file_gives_one_message_and_defaults)
{
    struct ng_config_paths p = {.site = file("ww.conf", "timeout = 5\n", 0666), .user = ""};
    ncclguard_config_load(&p, NULL, 1);
    ck_assert(ncclguard_settings()->timeout == 300);
    ck_assert_int_eq(capture_count(-1, ""), 1);
    ck_assert_int_eq(capture_count(NG_LOG_WARN, "site config file ignored ("), 1);
    ck_assert_int_eq(capture_count(NG_LOG_WARN, "world-writable"), 1);
}
END_TEST

NG_TEST(quiet_processes_log_at_debug)
{
    struct ng_config_paths p = {.site = file("s.conf", "bogus\n", 0644), .user = ""};
    ncclguard_config_load(&p, NULL, 0);
    ck_assert_int_eq(capture_count(NG_LOG_WARN, ""), 0);
    ck_assert_int_eq(capture_count(NG_LOG_DEBUG, "line ignored"), 1);
}
END_TEST

/* --- conditions ---------------------------------------------------------------------- */

/* A fake /proc and /sys: n GPUs of one model, and InfiniBand when ib. */
static void fake_sysroot(int n, const char *model, int ib)
{
    char path[256], cmd[1024];
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/root/proc/driver/nvidia/gpus/0000:%02x:00.0", dir, i);
        snprintf(cmd, sizeof cmd,
                 "mkdir -p %s && printf 'Model: \\t\\t %s\\nIRQ: 1\\n' > "
                 "%s/information",
                 path, model, path);
        ck_assert_int_eq(system(cmd), 0);
    }
    snprintf(cmd, sizeof cmd, "mkdir -p %s/root/sys/class/infiniband%s", dir, ib ? "/mlx5_0" : "");
    ck_assert_int_eq(system(cmd), 0);
    snprintf(path, sizeof path, "%s/root", dir);
    setenv("NCCLGUARD_TEST_SYSROOT", path, 1);
    ncclguard_facts_reset();
}

static int cond(const char *text)
{
    char why[256];
    int r = ncclguard_condition_eval(text, why, sizeof why);
    return r;
}

NG_TEST(conditions_match_facts)
{
    fake_sysroot(8, "NVIDIA H100 80GB HBM3", 1);
    setenv("WORLD_SIZE", "64", 1);
    setenv("LOCAL_WORLD_SIZE", "8", 1);
    setenv("SLURM_JOB_NAME", "train-llm", 1);
    char host[256], text[600];
    gethostname(host, sizeof host);
    ck_assert_int_eq(cond("gpu=H100*"), 1);
    ck_assert_int_eq(cond("gpu=\"NVIDIA H100 80GB HBM3\""), 1);
    ck_assert_int_eq(cond("gpu=*A100*"), 0);
    ck_assert_int_eq(cond("gpu!=*A100*"), 1);
    ck_assert_int_eq(cond("gpus>=8 gpus<=8 gpus=8 gpus>7 gpus<9"), 1);
    ck_assert_int_eq(cond("gpus>8"), 0);
    ck_assert_int_eq(cond("ib=yes"), 1);
    ck_assert_int_eq(cond("ib=no"), 0);
    ck_assert_int_eq(cond("world_size=64..1024"), 1);
    ck_assert_int_eq(cond("world_size=65.."), 0);
    ck_assert_int_eq(cond("world_size=..64"), 1);
    ck_assert_int_eq(cond("world_size!=1..63"), 1);
    ck_assert_int_eq(cond("nodes=8"), 1);
    ck_assert_int_eq(cond("nodes >= 2"), 1);
    ck_assert_int_eq(cond("job=train-*"), 1);
    ck_assert_int_eq(cond("job=eval-*,train-*"), 1);
    ck_assert_int_eq(cond("job=eval-*"), 0);
    snprintf(text, sizeof text, "host=%s", host);
    ck_assert_int_eq(cond(text), 1);
    ck_assert_int_eq(cond("host=no-such-host-*"), 0);
    snprintf(text, sizeof text, "host=%s gpus>=8 ib=yes job=train-*", host);
    ck_assert_int_eq(cond(text), 1);
    snprintf(text, sizeof text, "host=%s gpus>=16", host);
    ck_assert_int_eq(cond(text), 0);
}
END_TEST

NG_TEST(conditions_unknown_facts_and_errors)
{
    fake_sysroot(0, "", 0);
    unsetenv("WORLD_SIZE");
    unsetenv("OMPI_COMM_WORLD_SIZE");
    unsetenv("PMI_SIZE");
    unsetenv("PMIX_SIZE");
    unsetenv("SLURM_NTASKS");
    unsetenv("SLURM_NPROCS");
    unsetenv("SLURM_JOB_NAME");
    ck_assert_int_eq(cond("world_size>=1"), 0); /* unknown: false, whatever the operator */
    ck_assert_int_eq(cond("world_size<1"), 0);
    ck_assert_int_eq(cond("gpu!=H100*"), 0);
    ck_assert_int_eq(cond("job!=x"), 0);
    ck_assert_int_eq(cond("gpus=0"), 1);
    ck_assert_int_eq(cond("ib=no"), 1);
    ck_assert_int_eq(cond(""), -1);
    ck_assert_int_eq(cond("colour=red"), -1);
    ck_assert_int_eq(cond("gpus"), -1);
    ck_assert_int_eq(cond("gpus>=lots"), -1);
    ck_assert_int_eq(cond("host>=a"), -1);
    ck_assert_int_eq(cond("gpu=\"unterminated"), -1);
    ck_assert_int_eq(cond("ib=maybe"), -1);
}
END_TEST

NG_TEST(conditional_sections_in_files)
{
    fake_sysroot(8, "NVIDIA H100 80GB HBM3", 1);
    load("timeout = 100\n"
         "[when gpus>=8 ib=yes]\n"
         "timeout = 200\n"
         "env.default.NCCL_IB_TIMEOUT = 22\n"
         "[when gpu=*A100*]\n"
         "timeout = 999\n"
         "env.force.NCCL_ALGO = Ring\n"
         "[when bogus=1]\n"
         "timeout = 777\n"
         "[env.default]\n"
         "NCCL_IB_RETRY_CNT = 10\n",
         NULL, NULL);
    const struct ng_settings *s = ncclguard_settings();
    ck_assert(s->timeout == 200);
    ck_assert_int_eq(s->origin[NG_KEY_TIMEOUT].line, 3);
    size_t n;
    const struct ng_env_rule *r = ncclguard_config_env_rules(&n);
    ck_assert_int_eq(n, 2);
    ck_assert_str_eq(r[0].name, "NCCL_IB_TIMEOUT");
    ck_assert_str_eq(r[1].name, "NCCL_IB_RETRY_CNT");
    ck_assert_int_eq(capture_count(NG_LOG_WARN, "site.conf:8: unknown condition 'bogus'"), 1);
}
END_TEST

/* --- precedence: built-in < site < user < job < env < site lock ------------------------ */

/* Case i: bit 0 site sets timeout=101, bit 1 user 102, bit 2 env 103, bit 3 site locks it,
 * bit 4 the job file (NCCLGUARD_CONFIG) 104. */
START_TEST(precedence_matrix)
{
    int site = _i & 1, user = _i & 2, env = _i & 4, lock = _i & 8, job = _i & 16;
    char stext[128];
    snprintf(stext, sizeof stext, "%s%s", lock ? "lock = timeout\n" : "",
             site ? "timeout = 101\n" : "");
    char *envp[] = {env ? "NCCLGUARD_TIMEOUT=103" : "OTHER=1", NULL};
    load_job(stext, user ? "timeout = 102\n" : "", job ? "timeout = 104\n" : "", envp);
    const struct ng_settings *s = ncclguard_settings();
    double want = 300;
    int src = NG_SRC_BUILTIN;
    if (site) want = 101, src = NG_SRC_SITE;
    if (user && !lock) want = 102, src = NG_SRC_USER;
    if (job && !lock) want = 104, src = NG_SRC_JOB;
    if (env && !lock) want = 103, src = NG_SRC_ENV;
    ck_assert_msg(s->timeout == want, "case %d: timeout %g, expected %g", _i, s->timeout, want);
    ck_assert_int_eq(s->origin[NG_KEY_TIMEOUT].source, src);
    ck_assert_int_eq(s->origin[NG_KEY_TIMEOUT].locked, lock ? 1 : 0);
    /* every override refused by a lock says so, once */
    int refused = lock ? (user ? 1 : 0) + (env ? 1 : 0) + (job ? 1 : 0) : 0;
    ck_assert_int_eq(capture_count(NG_LOG_WARN, "locked"), refused);
}
END_TEST

/* The job file adds to the site and user files: it replaces their defaults, and it can
 * neither lock nor undo a site force or forbid. */
NG_TEST(job_file_adds_never_removes)
{
    load_job("[env.default]\nA = site\n[env.force]\nB = site\n[env.forbid]\nC_*\n",
             "[env.default]\nA = user\nD = user\n",
             "lock = timeout\n[env.default]\nA = job\nB = job\nC_X = job\nD = job\n", NULL);
    size_t n;
    const struct ng_env_rule *r = ncclguard_config_env_rules(&n);
    ck_assert_int_eq(n, 4);
    ck_assert_str_eq(r[0].name, "A");
    ck_assert_str_eq(r[0].value, "job");
    ck_assert_int_eq(r[0].origin.source, NG_SRC_JOB);
    ck_assert_str_eq(r[1].value, "site");
    ck_assert_int_eq(r[1].action, NG_ENV_FORCE);
    ck_assert_str_eq(r[3].name, "D");
    ck_assert_str_eq(r[3].value, "job");
    ck_assert_int_eq(capture_count(NG_LOG_WARN, "job.conf:1: 'lock' is only allowed"), 1);
    ck_assert_int_eq(capture_count(NG_LOG_WARN, "job.conf:4: B is forced by the site"), 1);
    ck_assert_int_eq(capture_count(NG_LOG_WARN, "job.conf:5: C_X is forbidden by the site"), 1);
    ck_assert_int_eq(ncclguard_settings()->origin[NG_KEY_TIMEOUT].locked, 0);
    char origin[200];
    ncclguard_origin_text(&r[0].origin, -1, origin, sizeof origin);
    ck_assert_ptr_nonnull(strstr(origin, "job "));
    ck_assert_ptr_nonnull(strstr(origin, "/job.conf:3"));
}
END_TEST

NG_TEST(env_rules_precedence)
{
    load("[env.default]\n"
         "A_DEF = site\n"
         "B_DEF = site\n"
         "[env.force]\n"
         "C_FORCE = site\n"
         "[env.forbid]\n"
         "D_FORBID\n"
         "E_* = no E\n",
         "[env.default]\n"
         "A_DEF = user\n"    /* user beats a site default */
         "C_FORCE = user\n"  /* refused: the site forces C */
         "D_FORBID = user\n" /* refused: the site forbids D */
         "E_X = user\n"      /* refused: matches the site's E_* */
         "F_USER = user\n"
         "[env.force]\n"
         "B_DEF = user-force\n", /* user force replaces a site default */
         NULL);
    size_t n;
    const struct ng_env_rule *r = ncclguard_config_env_rules(&n);
    ck_assert_int_eq(n, 6);
    ck_assert_str_eq(r[0].name, "A_DEF");
    ck_assert_str_eq(r[0].value, "user");
    ck_assert_int_eq(r[0].origin.source, NG_SRC_USER);
    ck_assert_str_eq(r[1].value, "user-force");
    ck_assert_int_eq(r[1].action, NG_ENV_FORCE);
    ck_assert_str_eq(r[2].value, "site");
    ck_assert_int_eq(r[2].origin.source, NG_SRC_SITE);
    ck_assert_str_eq(r[5].name, "F_USER");
    ck_assert_int_eq(capture_count(NG_LOG_WARN, "user.conf:3: C_FORCE is forced by the site"), 1);
    ck_assert_int_eq(capture_count(NG_LOG_WARN, "user.conf:4: D_FORBID is forbidden"), 1);
    ck_assert_int_eq(capture_count(NG_LOG_WARN, "user.conf:5: E_X is forbidden"), 1);
}
END_TEST

NG_TEST(lock_rules)
{
    char *envp[] = {"NCCLGUARD_KILL_AT=3", "NCCLGUARD_WARN_AT=2", NULL};
    load("lock = kill_at, NCCLGUARD_ABORT_AT, nosuchkey\n"
         "kill_at = 2\n",
         "lock = warn_at\n"
         "abort_at = 1.5\n",
         envp);
    const struct ng_settings *s = ncclguard_settings();
    ck_assert(s->kill_at == 2);
    ck_assert(s->abort_at == 0); /* locked at its built-in value */
    ck_assert(s->warn_at == 2);  /* a user file cannot lock */
    ck_assert_int_eq(s->origin[NG_KEY_ABORT_AT].locked, 1);
    ck_assert_int_eq(capture_count(NG_LOG_WARN, "lock: unknown setting 'nosuchkey'"), 1);
    ck_assert_int_eq(capture_count(NG_LOG_WARN, "'lock' is only allowed in the site file"), 1);
    ck_assert_int_eq(capture_count(NG_LOG_WARN, "NCCLGUARD_KILL_AT=3 ignored (environment): "
                                                "the site locked kill_at"),
                     1);
}
END_TEST

/* An unknown name first in a lock list locks nothing less: the known names after it are
 * locked, by the line that names them, and the unknown one gets one message. A name after
 * a known one, and one beside another unknown, are read as well. */
NG_TEST(lock_list_unknown_name_first)
{
    char *envp[] = {"NCCLGUARD_TIMEOUT=9", "NCCLGUARD_ABORT_AT=4", NULL};
    load("lock = nosuchkey, timeout\n"
         "lock = alsonot,notthis abort_at\n",
         "timeout = 8\n"
         "abort_at = 3\n",
         envp);
    const struct ng_settings *s = ncclguard_settings();
    ck_assert(s->timeout == 300 && s->abort_at == 0); /* their built-in values, locked */
    ck_assert_int_eq(s->origin[NG_KEY_TIMEOUT].locked, 1);
    ck_assert_int_eq(s->origin[NG_KEY_ABORT_AT].locked, 1);
    ck_assert_int_eq(s->origin[NG_KEY_KILL_AT].locked, 0);
    ck_assert_int_eq(capture_count(NG_LOG_WARN, "site.conf:1: lock: unknown setting "
                                                "'nosuchkey' (the others are locked)"),
                     1);
    ck_assert_int_eq(capture_count(NG_LOG_WARN, "site.conf:2: lock: unknown setting "
                                                "'alsonot'"),
                     1);
    ck_assert_int_eq(capture_count(NG_LOG_WARN, "site.conf:2: lock: unknown setting "
                                                "'notthis'"),
                     1);
    ck_assert_int_eq(capture_count(NG_LOG_WARN, "lock: unknown setting"), 3);
    ck_assert_int_eq(capture_count(NG_LOG_WARN, "timeout is locked by the site file"), 1);
    ck_assert_int_eq(capture_count(NG_LOG_WARN, "abort_at is locked by the site file"), 1);
    ck_assert_int_eq(capture_count(NG_LOG_WARN, "NCCLGUARD_TIMEOUT=9 ignored (environment): "
                                                "the site locked timeout"),
                     1);
    ck_assert_int_eq(capture_count(NG_LOG_WARN, "NCCLGUARD_ABORT_AT=4 ignored (environment): "
                                                "the site locked abort_at"),
                     1);
}
END_TEST

NG_TEST(env_variables_checked)
{
    char *envp[] = {"NCCLGUARD_TIMOUT=5",
                    "NCCLGUARD_RING=abc",
                    "NCCLGUARD_SLOW_MS=250",
                    "NCCLGUARD_CONFIG=/x",
                    "NCCLGUARD_TEST_ANYTHING=1",
                    "NCCLGUARD_DUMP_DIR=",
                    NULL};
    load(NULL, NULL, envp);
    const struct ng_settings *s = ncclguard_settings();
    ck_assert_int_eq(s->slow_ms, 250);
    ck_assert_int_eq(s->origin[NG_KEY_SLOW_MS].source, NG_SRC_ENV);
    ck_assert_int_eq(s->ring, 4096);
    ck_assert_int_eq(capture_count(NG_LOG_WARN, "NCCLGUARD_TIMOUT is not a setting of ncclguard "
                                                "(environment): did you mean NCCLGUARD_TIMEOUT?"),
                     1);
    ck_assert_int_eq(capture_count(NG_LOG_WARN, "NCCLGUARD_RING=abc ignored (environment)"), 1);
    ck_assert_int_eq(capture_count(NG_LOG_WARN, ""), 2);
}
END_TEST

NG_TEST(defaults_and_derived_values)
{
    setenv("SLURM_JOB_ID", "4242", 1);
    load(NULL, NULL, NULL);
    const struct ng_settings *s = ncclguard_settings();
    ck_assert(s->timeout == 300 && s->first_timeout == 900 && s->init_timeout == 600);
    ck_assert(s->warn_at == 1 && s->dump_at == 1 && s->abort_at == 0 && s->kill_at == 0);
    ck_assert_int_eq(s->dump_signal, SIGUSR2);
    ck_assert_int_eq(s->kill_exit, 124);
    ck_assert_int_eq(s->track, NG_TRACK_FULL);
    ck_assert_int_eq(s->audit, NG_AUDIT_NODE);
    ck_assert_int_eq(s->log_level, NG_LOG_INFO);
    ck_assert_str_eq(s->dump_dir, "./ncclguard-4242");
    ck_assert(s->timeout_allreduce < 0);
    ck_assert_int_eq(ncclguard_setting_key("NCCLGUARD_Dump_Dir"), NG_KEY_DUMP_DIR);
    ck_assert_int_eq(ncclguard_setting_key("nope"), -1);
}
END_TEST

/* --- timeouts and the ladder ------------------------------------------------------------ */

NG_TEST(timeouts_scale_with_size)
{
    load("timeout = 100\n"
         "first_timeout = 50\n"
         "init_timeout = 20m\n"
         "timeout_allgather = 400\n"
         "timeout_broadcast = 70\n"
         "floor_bandwidth = 1GB/s\n"
         "dump_at = 1.5\n"
         "abort_at = 2\n"
         "kill_at = 3x\n",
         NULL, NULL);
    const struct ng_settings *s = ncclguard_settings();
    int ar = NG_OP_ALLREDUCE, ag = NG_OP_ALLGATHER;
    /* Bcast is Broadcast under its old name: the same timeout */
    ck_assert(ncclguard_timeout_s(s, NG_TIMEOUT_OP, NG_OP_BCAST, 0) == 70);
    ck_assert(ncclguard_timeout_s(s, NG_TIMEOUT_OP, NG_OP_BROADCAST, 0) == 70);
    ck_assert(ncclguard_timeout_s(s, NG_TIMEOUT_OP, -1, 0) == 100);
    ck_assert(ncclguard_timeout_s(s, NG_TIMEOUT_OP, ar, 0) == 100);
    ck_assert(ncclguard_timeout_s(s, NG_TIMEOUT_OP, ar, 10000000000ULL) == 110);
    ck_assert(ncclguard_timeout_s(s, NG_TIMEOUT_OP, ag, 10000000000ULL) == 410);
    ck_assert(ncclguard_timeout_s(s, NG_TIMEOUT_FIRST_OP, ar, 0) == 100); /* max(50, 100) */
    ck_assert(ncclguard_timeout_s(s, NG_TIMEOUT_INIT, -1, 0) == 1200);
    ck_assert(ncclguard_action_after_s(s, NG_ACTION_WARN, 110) == 110);
    ck_assert(ncclguard_action_after_s(s, NG_ACTION_DUMP, 110) == 165);
    ck_assert(ncclguard_action_after_s(s, NG_ACTION_ABORT, 110) == 220);
    ck_assert(ncclguard_action_after_s(s, NG_ACTION_KILL, 110) == 330);
    load("timeout = off\nfloor_bandwidth = 1GB/s\n", NULL, NULL); /* no size turns it on */
    s = ncclguard_settings();
    ck_assert(ncclguard_timeout_s(s, NG_TIMEOUT_OP, ar, 1 << 30) == 0);
    ck_assert(ncclguard_timeout_s(s, NG_TIMEOUT_FIRST_OP, ar, 0) == 900);
}
END_TEST

/* Each op's own timeout replaces `timeout` for that op alone, the first op of the list
 * (AllReduce, whose enum value is 0) and the last as well; "off" turns that op's timeout
 * off rather than inheriting. Bcast and Broadcast share their key. */
NG_TEST(each_op_has_its_own_timeout)
{
    static const char *const vars[] = {
#define OP_VAR(id, name, timeout, shape) "NCCLGUARD_" #timeout,
        NG_OPS(OP_VAR)
#undef OP_VAR
    };
    static const int keys[] = {
#define OP_KEY(id, name, timeout, shape) NG_KEY_##timeout,
        NG_OPS(OP_KEY)
#undef OP_KEY
    };
    ck_assert_int_eq(NG_OP_ALLREDUCE, 0);
    for (int op = 0; op < NG_OP_NTYPES; op++) {
        for (int off = 0; off < 2; off++) {
            char var[64];
            snprintf(var, sizeof var, "%s=%s", vars[op], off ? "off" : "7");
            char *envp[] = {var, NULL};
            capture_reset();
            load("timeout = 100\nfirst_timeout = 5\n", NULL, envp);
            const struct ng_settings *s = ncclguard_settings();
            ck_assert_int_eq(capture_count(NG_LOG_WARN, ""), 0);
            for (int other = 0; other < NG_OP_NTYPES; other++) {
                double want = keys[other] != keys[op] ? 100 : off ? 0 : 7;
                ck_assert_msg(ncclguard_timeout_s(s, NG_TIMEOUT_OP, other, 0) == want,
                              "%s: %s's timeout is %g, not %g", var, ng_op_name(other),
                              ncclguard_timeout_s(s, NG_TIMEOUT_OP, other, 0), want);
                /* the first op's: the larger of first_timeout and the op's own */
                ck_assert(ncclguard_timeout_s(s, NG_TIMEOUT_FIRST_OP, other, 0) ==
                          (want > 5 ? want : 5));
            }
        }
    }
}
END_TEST

/* --- the dump's config object ----------------------------------------------------------- */

NG_TEST(json_object)
{
    char *envp[] = {"NCCLGUARD_SLOW_MS=250", NULL};
    load("lock = kill_at\n"
         "timeout = 1.5m\n"
         "dump_dir = \"/tmp/with \\\"quote\"\n",
         NULL, envp);
    static char buf[65536];
    long n = ncclguard_config_json(buf, sizeof buf);
    ck_assert_int_gt(n, 0);
    ck_assert_int_eq((long)strlen(buf), n);
    ck_assert_msg(buf[0] == '{' && buf[n - 1] == '}', "%s", buf);
    ck_assert_ptr_nonnull(strstr(buf, "\"timeout\":{\"value\":90,\"origin\":\"site "));
    ck_assert_ptr_nonnull(strstr(buf, "site.conf:2\"}"));
    ck_assert_ptr_nonnull(strstr(buf, "\"slow_ms\":{\"value\":250,\"origin\":\"env "
                                      "NCCLGUARD_SLOW_MS\"}"));
    ck_assert_ptr_nonnull(strstr(buf, "\"kill_at\":{\"value\":0,\"origin\":\"built-in\","
                                      "\"locked\":true}"));
    ck_assert_ptr_nonnull(strstr(buf, "\"dump_dir\":{\"value\":\"/tmp/with \\\"quote\""));
    ck_assert_ptr_nonnull(strstr(buf, "\"timeout_allreduce\":{\"value\":null"));
    ck_assert_ptr_nonnull(strstr(buf, "\"track\":{\"value\":\"full\""));
    ck_assert_ptr_nonnull(strstr(buf, "\"disable\":{\"value\":false"));
    ck_assert_ptr_nonnull(strstr(buf, "\"status\":\"loaded\",\"lines\":3,\"problems\":0"));
    ck_assert_ptr_nonnull(strstr(buf, "\"env\":[]"));
    /* too small: -1, and a valid empty object */
    char small[64];
    ck_assert_int_eq(ncclguard_config_json(small, sizeof small), -1);
    ck_assert_str_eq(small, "{}");
    ck_assert_int_eq(ncclguard_config_json(NULL, 0), n);
    ck_assert_int_eq(ncclguard_config_json(buf, (size_t)n + 1), n);
    ck_assert_int_eq(ncclguard_config_json(buf, (size_t)n), -1);
}
END_TEST

int main(void)
{
    TCase *t;
    Suite *s = ng_check_fixture_suite("config", "config", 0, setup, teardown, &t);
    tcase_add_loop_test(t, precedence_matrix, 0, 32);
    return ng_check_run(s);
}
