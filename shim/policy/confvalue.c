/* confvalue.c: see confvalue.h. */
#include "policy/confvalue.h"

#include <fnmatch.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static int is_off(const char *s)
{
    return !strcasecmp(s, "off") || !strcasecmp(s, "none") || !strcasecmp(s, "disabled");
}

int ncclguard_parse_bool(const char *s, int *out)
{
    static const char *const yes[] = {"1", "yes", "true", "on"};
    static const char *const no[] = {"0", "no", "false", "off"};
    for (int i = 0; i < 4; i++) {
        if (!strcasecmp(s, yes[i])) return *out = 1, 0;
        if (!strcasecmp(s, no[i])) return *out = 0, 0;
    }
    return -1;
}

int ncclguard_parse_int(const char *s, long long *out)
{
    int neg = 0;
    if (*s == '+' || *s == '-') neg = *s++ == '-';
    if (*s < '0' || *s > '9') return -1;
    /* The bound is checked before each step, so v * 10 + 9 never wraps: 2^64 + 16
     * must be refused, not read as 16. */
    const unsigned long long max = 1ULL << 62;
    unsigned long long v = 0;
    for (; *s >= '0' && *s <= '9'; s++) {
        if (v > (max - (unsigned)(*s - '0')) / 10) return -1;
        v = v * 10 + (unsigned)(*s - '0');
    }
    if (*s) return -1;
    *out = neg ? -(long long)v : (long long)v;
    return 0;
}

/* Reads a decimal prefix; returns the rest of the string, or NULL when none. */
static const char *decimal_prefix(const char *s, double *out)
{
    double v = 0;
    int digits = 0;
    for (; *s >= '0' && *s <= '9'; s++, digits++) v = v * 10 + (*s - '0');
    if (*s == '.') {
        double scale = 0.1;
        s++;
        for (; *s >= '0' && *s <= '9'; s++, digits++, scale /= 10) v += (*s - '0') * scale;
    }
    if (!digits || !isfinite(v) || v > 1e18) return NULL;
    *out = v;
    return s;
}

int ncclguard_parse_decimal(const char *s, double *out)
{
    const char *rest = decimal_prefix(s, out);
    return rest && !*rest ? 0 : -1;
}

/* Skips one space between a number and its unit ("10 m", "1 GB/s", "1.5 x"), but
 * only when a unit follows: no typed value has a blank at its end ("300 " is
 * refused like "300x"). */
static const char *unit_start(const char *s)
{
    return s[0] == ' ' && s[1] && s[1] != ' ' ? s + 1 : s;
}

int ncclguard_parse_duration(const char *s, double *out)
{
    static const struct {
        const char *unit;
        double seconds;
    } units[] = {{"", 1},   {"s", 1},    {"sec", 1},  {"ms", 0.001},
                 {"m", 60}, {"min", 60}, {"h", 3600}, {"d", 86400}};
    if (is_off(s)) return *out = 0, 0;
    double v;
    const char *rest = decimal_prefix(s, &v);
    if (!rest) return -1;
    rest = unit_start(rest);
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (!strcasecmp(rest, units[i].unit)) return *out = v * units[i].seconds, 0;
    return -1;
}

int ncclguard_parse_factor(const char *s, double *out)
{
    if (is_off(s)) return *out = 0, 0;
    double v;
    const char *rest = decimal_prefix(s, &v);
    if (!rest) return -1;
    rest = unit_start(rest);
    if (*rest == 'x' || *rest == 'X') rest++;
    if (*rest) return -1;
    *out = v;
    return 0;
}

int ncclguard_parse_bandwidth(const char *s, double *out)
{
    if (is_off(s)) return *out = 0, 0;
    double v;
    const char *p = decimal_prefix(s, &v);
    if (!p) return -1;
    p = unit_start(p);
    static const char prefixes[] = "KMGT";
    char c = (char)(*p & ~0x20);
    const char *hit = c ? strchr(prefixes, c) : NULL;
    if (hit) {
        int power = (int)(hit - prefixes) + 1;
        double base = 1000;
        p++;
        if (*p == 'i') base = 1024, p++;
        for (int i = 0; i < power; i++) v *= base;
    }
    if (*p == 'B') p++;
    if (!strcmp(p, "/s")) p += 2;
    if (*p) return -1;
    *out = v;
    return 0;
}

static const struct {
    const char *name;
    int sig;
} sig_names[] = {
    {"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT}, {"USR1", SIGUSR1},   {"USR2", SIGUSR2},
    {"ALRM", SIGALRM}, {"TERM", SIGTERM}, {"URG", SIGURG},   {"WINCH", SIGWINCH}, {"PWR", SIGPWR},
};

static int refused_signal(int sig)
{
    return sig == SIGKILL || sig == SIGSTOP || sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE ||
           sig == SIGILL || sig == SIGABRT || sig == SIGTRAP || sig == SIGSYS;
}

int ncclguard_parse_signal(const char *s, int *out)
{
    if (is_off(s) || !strcmp(s, "0")) return *out = 0, 0;
    long long n;
    int sig = -1;
    if (ncclguard_parse_int(s, &n) == 0) {
        sig = n > 0 && n <= SIGRTMAX ? (int)n : -1;
    } else {
        const char *name = strncasecmp(s, "SIG", 3) ? s : s + 3;
        for (size_t i = 0; i < sizeof sig_names / sizeof sig_names[0]; i++)
            if (!strcasecmp(name, sig_names[i].name)) sig = sig_names[i].sig;
        if (sig < 0 && !strncasecmp(name, "RTMIN", 5)) {
            n = 0;
            if (name[5] == '\0' || (name[5] == '+' && ncclguard_parse_int(name + 6, &n) == 0))
                sig = n >= 0 && SIGRTMIN + n <= SIGRTMAX ? SIGRTMIN + (int)n : -1;
        }
    }
    if (sig <= 0 || refused_signal(sig)) return -1;
    *out = sig;
    return 0;
}

const char *ncclguard_signal_name(int sig, char *buf, size_t len)
{
    if (sig == 0) return "off";
    for (size_t i = 0; i < sizeof sig_names / sizeof sig_names[0]; i++)
        if (sig_names[i].sig == sig) {
            snprintf(buf, len, "SIG%s", sig_names[i].name);
            return buf;
        }
    if (sig >= SIGRTMIN && sig <= SIGRTMAX)
        snprintf(buf, len, "SIGRTMIN+%d", sig - SIGRTMIN);
    else
        snprintf(buf, len, "SIG%d", sig);
    return buf;
}

int ncclguard_parse_choice(const char *s, const char *choices)
{
    size_t n = strlen(s);
    int idx = 0;
    for (const char *c = choices; *c; idx++) {
        const char *bar = strchr(c, '|');
        size_t w = bar ? (size_t)(bar - c) : strlen(c);
        if (w == n && !strncasecmp(c, s, n)) return idx;
        if (!bar) break;
        c = bar + 1;
    }
    return -1;
}

const char *ncclguard_choice_name(const char *choices, int n, char *buf, size_t len)
{
    const char *c = choices;
    for (int i = 0; i < n && c; i++) {
        c = strchr(c, '|');
        if (c) c++;
    }
    if (!c || len == 0) return "?";
    size_t w = strcspn(c, "|");
    if (w >= len) w = len - 1;
    memcpy(buf, c, w);
    buf[w] = '\0';
    return buf;
}

int ncclguard_glob_match(const char *pattern, const char *text)
{
    return fnmatch(pattern, text, FNM_CASEFOLD) == 0;
}
