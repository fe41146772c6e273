/*
 * stackscan.c: see stackscan.h.
 */
#include "evidence/stackscan.h"

#include <fcntl.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define MAX_RANGES 2048
#define SCAN_BYTES (32 << 10) /* deep enough for a dozen frames of real code */

struct range {
    uintptr_t lo, hi;
};

static struct range ranges[MAX_RANGES];
static int nranges;
static pid_t self; /* getpid() is a system call: asked once per dump, not per read */
static uintptr_t stack_copy[SCAN_BYTES / sizeof(uintptr_t)];

static uintptr_t parse_hex(const char **p)
{
    uintptr_t v = 0;
    for (;; (*p)++) {
        char c = **p;
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return v;
        v = v << 4 | (uintptr_t)d;
    }
}

/* One line of /proc/self/maps: "lo-hi perms ..."; keeps the executable ones. */
static void take_line(const char *line)
{
    const char *p = line;
    uintptr_t lo = parse_hex(&p);
    if (*p++ != '-') return;
    uintptr_t hi = parse_hex(&p);
    if (*p++ != ' ' || strlen(p) < 4 || p[2] != 'x' || nranges == MAX_RANGES) return;
    ranges[nranges++] = (struct range){lo, hi};
}

void ncclguard_stackscan_begin(void)
{
    nranges = 0;
    self = getpid();
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    char buf[4096], line[512];
    size_t len = 0;
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) {
        for (ssize_t i = 0; i < n; i++) {
            if (buf[i] != '\n') {
                if (len < sizeof line - 1) line[len++] = buf[i];
                continue;
            }
            line[len] = '\0';
            take_line(line);
            len = 0;
        }
    }
    close(fd);
}

static int executable(uintptr_t a)
{
    for (int i = 0; i < nranges; i++)
        if (a >= ranges[i].lo && a < ranges[i].hi) return 1;
    return 0;
}

static ssize_t read_own(void *dst, uintptr_t src, size_t len)
{
    struct iovec local = {dst, len}, remote = {(void *)src, len};
    return process_vm_readv(self, &local, 1, &remote, 1, 0);
}

/* True when the bytes before ret end in a call instruction (x86-64 forms:
 * call rel32, call through a register or through memory addressed in one of
 * the usual ways). Elsewhere any executable address is taken. */
static int after_call(uintptr_t ret)
{
#if defined(__x86_64__)
    unsigned char b[8];
    if (ret < 8 || read_own(b, ret - 8, 8) != 8) return 0;
    int reg2 = 0;
    if (b[3] == 0xe8) return 1;                                       /* e8 rel32 */
    if (b[6] == 0xff && (b[7] & 0xf8) == 0xd0) return 1;              /* ff /2 reg */
    for (int len = 2; len <= 7; len++) {                              /* ff /2 mem */
        unsigned char op = b[8 - len], modrm = b[9 - len];
        if (op != 0xff || ((modrm >> 3) & 7) != 2) continue;
        int mod = modrm >> 6, rm = modrm & 7;
        int want = 2 + (rm == 4) + (mod == 1 ? 1 : mod == 2 ? 4 : mod == 0 && rm == 5 ? 4 : 0);
        if (mod != 3 && want == len) reg2 = 1;
    }
    return reg2;
#else
    (void)ret;
    return 1;
#endif
}

int ncclguard_stackscan(uintptr_t pc, uintptr_t sp, void **pcs, int max)
{
    if (max <= 0) return 0;
    int n = 0;
    pcs[n++] = (void *)pc;
    if (!sp) return n;
    size_t want = sizeof stack_copy;
    ssize_t got = read_own(stack_copy, sp, want);
    /* A stack shorter than the copy ends at its mapping: read what there is. */
    while (got < 0 && want > 4096) {
        want /= 2;
        got = read_own(stack_copy, sp, want);
    }
    for (ssize_t i = 0; got > 0 && i < got / (ssize_t)sizeof(uintptr_t) && n < max; i++) {
        uintptr_t w = stack_copy[i];
        if (executable(w) && after_call(w)) pcs[n++] = (void *)w;
    }
    return n;
}
