/*
 * stackscan.c: see stackscan.h.
 */
#include "evidence/stackscan.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include "base/json.h"
#include "base/log.h"
#include "base/peek.h"

#define MAX_RANGES 2048
#define SCAN_BYTES (32 << 10) /* deep enough for a dozen frames of real code */

struct range {
    uintptr_t lo, hi;
};

static struct range ranges[MAX_RANGES];
static int nranges;
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

static int executable(uintptr_t a)
{
    for (int i = 0; i < nranges; i++)
        if (a >= ranges[i].lo && a < ranges[i].hi) return 1;
    return 0;
}

/* ---- memory, through a small cache (for the CFI unwind) ---- */

#if defined(__x86_64__)
/* Lines of 256 bytes never cross a page: a line reads whole or not at all. */
#define LINE 256
#define NLINES 64
static struct {
    uintptr_t base; /* 0: empty */
    unsigned char bytes[LINE];
} cache[NLINES];

static void cache_clear(void)
{
    for (int i = 0; i < NLINES; i++) cache[i].base = 0;
}

/* 8 bytes at a; 0, or -1 when they cannot be read. */
static int read_word(uintptr_t a, uint64_t *v)
{
    unsigned char b[8];
    for (int i = 0; i < 8; i++) {
        uintptr_t base = (a + (uintptr_t)i) & ~(uintptr_t)(LINE - 1);
        int slot = (int)(base / LINE % NLINES);
        if (!base) return -1;
        if (cache[slot].base != base) {
            if (ncclguard_peek_all(base, cache[slot].bytes, LINE) != 0) return -1;
            cache[slot].base = base;
        }
        b[i] = cache[slot].bytes[(a + (uintptr_t)i) - base];
    }
    memcpy(v, b, 8);
    return 0;
}
#endif

/* ---- calls ---- */

/* What ends just before ret: 1 a direct call (*target set), 2 an indirect
 * call, 0 no call (x86-64 forms: call rel32, call through a register or
 * through memory addressed in one of the usual ways). */
static int call_before(uintptr_t ret, uintptr_t *target)
{
#if defined(__x86_64__)
    unsigned char b[8];
    if (ret < 8 || ncclguard_peek_all(ret - 8, b, 8) != 0) return 0;
    if (b[3] == 0xe8) {
        int32_t rel;
        memcpy(&rel, b + 4, 4);
        *target = ret + (uintptr_t)(intptr_t)rel;
        return 1;
    }
    if (b[6] == 0xff && (b[7] & 0xf8) == 0xd0) return 2; /* ff /2 reg */
    for (int len = 2; len <= 7; len++) {                 /* ff /2 mem */
        unsigned char op = b[8 - len], modrm = b[9 - len];
        if (op != 0xff || ((modrm >> 3) & 7) != 2) continue;
        int mod = modrm >> 6, rm = modrm & 7;
        int want = 2 + (rm == 4) + (mod == 1 ? 1 : mod == 2 ? 4 : mod == 0 && rm == 5 ? 4 : 0);
        if (mod != 3 && want == len) return 2;
    }
    return 0;
#else
    (void)ret;
    (void)target;
    return 2;
#endif
}

#if defined(__x86_64__)
/* Where a PLT entry at a jumps to (the value of its GOT slot), else a itself:
 * jmp *rel32(%rip), with an endbr64 and a bnd prefix where the PLT has them. */
static uintptr_t through_plt(uintptr_t a)
{
    unsigned char b[12];
    if (ncclguard_peek_all(a, b, sizeof b) != 0) return a;
    int at = 0;
    if (b[0] == 0xf3 && b[1] == 0x0f && b[2] == 0x1e && b[3] == 0xfa) at = 4;
    if (b[at] == 0xf2) at++;
    if (b[at] != 0xff || b[at + 1] != 0x25) return a;
    int32_t rel;
    memcpy(&rel, b + at + 2, 4);
    uint64_t got;
    if (read_word(a + (uintptr_t)at + 6 + (uintptr_t)(intptr_t)rel, &got) != 0) return a;
    return (uintptr_t)got;
}
#endif

/* ---- libunwind's remote API, declared here (no libunwind header is a build
 * dependency): the generic x86-64 build, libunwind 1.6 ---- */

#if defined(__x86_64__)
typedef uint64_t unw_word;
typedef struct {
    uint64_t opaque[127]; /* UNW_TDEP_CURSOR_LEN */
} unw_cursor;
struct unw_proc_info {
    unw_word start_ip, end_ip, lsda, handler, gp, flags;
    int format, unwind_info_size;
    void *unwind_info;
    char extra[8];
};
typedef struct unw_addr_space *unw_as;
struct unw_accessors {
    int (*find_proc_info)(unw_as, unw_word, struct unw_proc_info *, int, void *);
    void (*put_unwind_info)(unw_as, struct unw_proc_info *, void *);
    int (*get_dyn_info_list_addr)(unw_as, unw_word *, void *);
    int (*access_mem)(unw_as, unw_word, unw_word *, int, void *);
    int (*access_reg)(unw_as, int, unw_word *, int, void *);
    int (*access_fpreg)(unw_as, int, void *, int, void *);
    int (*resume)(unw_as, unw_cursor *, void *);
    int (*get_proc_name)(unw_as, unw_word, char *, size_t, unw_word *, void *);
};
enum { UNW_EBADREG = 3, UNW_EREADONLYREG = 4, UNW_EINVAL = 8 };
enum { REG_RBP = 6, REG_RSP = 7, REG_RIP = 16 };

static unw_as (*unw_create_addr_space)(struct unw_accessors *, int);
static struct unw_accessors *(*unw_get_accessors)(unw_as);
static int (*unw_init_remote)(unw_cursor *, unw_as, void *);
static int (*unw_step)(unw_cursor *);
static int (*unw_get_reg)(unw_cursor *, int, unw_word *);
static int (*unw_get_proc_info)(unw_cursor *, struct unw_proc_info *);
static unw_as space; /* NULL: no CFI unwinder */

/* The registers of one unwind: rip and rsp from the syscall file; rbp only
 * where the confirmed scan derived it. */
struct regs {
    uint64_t rip, rsp, rbp;
    int have_rbp;
};

static int acc_mem(unw_as as, unw_word addr, unw_word *val, int write, void *arg)
{
    (void)as;
    (void)arg;
    if (write) return -UNW_EINVAL;
    return read_word((uintptr_t)addr, val) == 0 ? 0 : -UNW_EINVAL;
}

static int acc_reg(unw_as as, int reg, unw_word *val, int write, void *arg)
{
    (void)as;
    const struct regs *r = arg;
    if (write) return -UNW_EREADONLYREG;
    if (reg == REG_RIP)
        *val = r->rip;
    else if (reg == REG_RSP)
        *val = r->rsp;
    else if (reg == REG_RBP && r->have_rbp)
        *val = r->rbp;
    else
        return -UNW_EBADREG; /* not known: never guessed */
    return 0;
}

static int acc_fpreg(unw_as as, int reg, void *val, int write, void *arg)
{
    (void)as, (void)reg, (void)val, (void)write, (void)arg;
    return -UNW_EBADREG;
}

static int acc_resume(unw_as as, unw_cursor *c, void *arg)
{
    (void)as, (void)c, (void)arg;
    return -UNW_EINVAL;
}
#endif

int ncclguard_stackscan_open(void)
{
#if defined(__x86_64__)
    if (space) return 0;
    void *lib = dlopen("libunwind-x86_64.so.8", RTLD_LAZY | RTLD_LOCAL);
    if (!lib) {
        NG_DEBUG("libunwind-x86_64.so.8 not loaded: stacks of threads in calls that a signal "
                 "would cut short are bare scans");
        return -1;
    }
    unw_create_addr_space = (unw_as(*)(struct unw_accessors *,
                                       int))dlsym(lib, "_Ux86_64_create_addr_space");
    unw_get_accessors = (struct unw_accessors * (*)(unw_as)) dlsym(lib, "_Ux86_64_get_accessors");
    unw_init_remote = (int (*)(unw_cursor *, unw_as, void *))dlsym(lib, "_Ux86_64_init_remote");
    unw_step = (int (*)(unw_cursor *))dlsym(lib, "_Ux86_64_step");
    unw_get_reg = (int (*)(unw_cursor *, int, unw_word *))dlsym(lib, "_Ux86_64_get_reg");
    unw_get_proc_info = (int (*)(unw_cursor *,
                                 struct unw_proc_info *))dlsym(lib, "_Ux86_64_get_proc_info");
    unw_as *local = (unw_as *)dlsym(lib, "_Ux86_64_local_addr_space");
    if (!unw_create_addr_space || !unw_get_accessors || !unw_init_remote || !unw_step ||
        !unw_get_reg || !unw_get_proc_info || !local || !*local)
        return -1;
    struct unw_accessors *l = unw_get_accessors(*local), acc;
    memset(&acc, 0, sizeof acc);
    acc.find_proc_info = l->find_proc_info; /* the tables of the loaded objects */
    acc.put_unwind_info = l->put_unwind_info;
    acc.get_dyn_info_list_addr = l->get_dyn_info_list_addr;
    acc.access_mem = acc_mem;
    acc.access_reg = acc_reg;
    acc.access_fpreg = acc_fpreg;
    acc.resume = acc_resume;
    space = unw_create_addr_space(&acc, 0);
    return space ? 0 : -1;
#else
    return -1;
#endif
}

void ncclguard_stackscan_begin(void)
{
    nranges = 0;
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

/* ---- the bare scan ---- */

/* Appends text to the note, cut at its end. */
static void note_add(struct ng_scan_result *out, const char *text)
{
    size_t at = strlen(out->note), n = strlen(text);
    if (n > sizeof out->note - 1 - at) n = sizeof out->note - 1 - at;
    memcpy(out->note + at, text, n);
    out->note[at + n] = '\0';
}

static int bare_scan(uintptr_t pc, uintptr_t sp, void **pcs, int max)
{
    int n = 0;
    pcs[n++] = (void *)pc;
    if (!sp) return n;
    /* a stack shorter than the copy ends at its mapping: what there is */
    size_t got = ncclguard_peek(sp, stack_copy, sizeof stack_copy);
    uintptr_t target;
    for (size_t i = 0; i < got / sizeof(uintptr_t) && n < max; i++) {
        uintptr_t w = stack_copy[i];
        if (executable(w) && call_before(w, &target)) pcs[n++] = (void *)w;
    }
    return n;
}

/* ---- CFI ---- */

#if defined(__x86_64__)
/* A cursor at (rip, rsp[, rbp]); ret is 1 when rip is a return address, whose
 * rules are those of the call before it (rip - 1), as libunwind does for every
 * frame but the innermost. */
static int cursor_at(unw_cursor *c, struct regs *r, uint64_t pc, uint64_t sp, int ret)
{
    r->rip = ret ? pc - 1 : pc;
    r->rsp = sp;
    return unw_init_remote(c, space, r);
}

/* Steps a cursor started with rbp = h at the frame (pc, sp): 0 with the
 * caller's (ip, cfa) set, -1 when CFI cannot step. With next, the caller must
 * step too (to a return address or to the outermost frame's end). */
static int step_with_rbp(uint64_t pc, uint64_t sp, int ret, uint64_t h, uint64_t *ip, uint64_t *cfa,
                         int next)
{
    unw_cursor c;
    struct regs r = {.rbp = h, .have_rbp = 1};
    if (cursor_at(&c, &r, pc, sp, ret) != 0 || unw_step(&c) <= 0) return -1;
    if (unw_get_reg(&c, REG_RIP, ip) != 0 || unw_get_reg(&c, REG_RSP, cfa) != 0) return -1;
    if (!next) return 0;
    uint64_t nip = 0, target;
    int step = unw_step(&c);
    if (step == 0) return 0;
    return step > 0 && unw_get_reg(&c, REG_RIP, &nip) == 0 && executable((uintptr_t)nip) &&
                   call_before((uintptr_t)nip, (uintptr_t *)&target)
               ? 0
               : -1;
}

/* The slot above the frame (pc, sp) whose word is confirmed as that frame's
 * return address (stackscan.h); 0 when none is. start is the frame's function
 * (its CFI), 0 when it has none. */
static uintptr_t confirmed_slot(uint64_t pc, uint64_t sp, int ret, uint64_t start)
{
    for (uintptr_t s = (uintptr_t)sp; s < (uintptr_t)sp + SCAN_BYTES; s += 8) {
        uint64_t w, ip, cfa;
        if (read_word(s, &w) != 0) return 0;
        uintptr_t target = 0;
        int kind = executable(w) ? call_before(w, &target) : 0;
        if (kind == 1 && start && (target == start || through_plt(target) == start)) return s;
        /* Indirect: the frame's CFI finds its return address through rbp (two
         * values of rbp give two places), here at s, and the caller's CFI, with
         * the registers the frame's CFI restores, steps on to a return address. */
        if (kind == 2 && start && s >= sp + 8 && step_with_rbp(pc, sp, ret, s, &ip, &cfa, 0) == 0 &&
            cfa == s + 16 && step_with_rbp(pc, sp, ret, s - 8, &ip, &cfa, 1) == 0 && ip == w &&
            cfa == s + 8)
            return s;
    }
    return 0;
}

static void note_guess(struct ng_scan_result *out, int frame, const char *why)
{
    if (out->note[0]) return;
    char digits[24];
    ncclguard_fmt_int64(digits, frame);
    note_add(out, "CFI stopped at frame ");
    note_add(out, digits);
    note_add(out, " (");
    note_add(out, why);
    note_add(out, "): the frames above are guesses, each confirmed by the frame below");
}

static void cfi_unwind(uintptr_t pc, uintptr_t sp, void **pcs, int max, struct ng_scan_result *out)
{
    unw_cursor c;
    struct regs r = {0};
    int ret = 0; /* the cursor's pc is a return address */
    out->n = 0;
    if (cursor_at(&c, &r, pc, sp, 0) != 0) {
        pcs[out->n++] = (void *)pc;
        note_add(out, "CFI could not start from the syscall's registers");
        return;
    }
    uint64_t ip = pc, cfa = sp;
    while (out->n < max) {
        pcs[out->n++] = (void *)(uintptr_t)ip;
        struct unw_proc_info pi;
        memset(&pi, 0, sizeof pi);
        int has_cfi = unw_get_proc_info(&c, &pi) == 0 && pi.start_ip;
        int step = has_cfi ? unw_step(&c) : -1;
        if (step == 0) return; /* the outermost frame: the stack is whole */
        uint64_t nip = 0, ncfa = 0;
        if (step > 0 && unw_get_reg(&c, REG_RIP, &nip) == 0 &&
            unw_get_reg(&c, REG_RSP, &ncfa) == 0 && nip && ncfa > cfa) {
            ip = nip;
            cfa = ncfa;
            ret = 1;
            continue;
        }
        if (step > 0 && !nip) return;
        /* CFI cannot go on: find the return address by the confirmed scan. */
        int frame = out->n - 1;
        uintptr_t s = confirmed_slot(ip, cfa, ret, has_cfi ? pi.start_ip : 0);
        if (!s) {
            if (!out->note[0]) {
                note_add(out, has_cfi ? "CFI needs a register not in the syscall file"
                                      : "no CFI for a pc");
                note_add(out, ", and no return address above is confirmed: stack cut short");
            }
            return;
        }
        note_guess(out, frame, has_cfi ? "needs a register not in the syscall file" : "no CFI");
        if (out->first_guess > out->n) out->first_guess = out->n;
        uint64_t w;
        read_word(s, &w);
        /* On with CFI from the kept frame: rbp as its own CFI restores it when
         * its return address is at s (the caller's rbp saved at s - 8). */
        uint64_t hip, hcfa;
        if (has_cfi && step_with_rbp(ip, cfa, ret, s - 8, &hip, &hcfa, 0) == 0 && hip == w &&
            hcfa == s + 8) {
            r = (struct regs){.rbp = s - 8, .have_rbp = 1};
            if (cursor_at(&c, &r, ip, cfa, ret) != 0 || unw_step(&c) <= 0) return;
        } else {
            r = (struct regs){0};
            if (cursor_at(&c, &r, w, s + 8, 1) != 0) return;
        }
        ip = w;
        cfa = s + 8;
        ret = 1;
    }
}
#endif

void ncclguard_stackscan(uintptr_t pc, uintptr_t sp, void **pcs, int max,
                         struct ng_scan_result *out)
{
    out->n = 0;
    out->first_guess = max;
    out->cfi = 0;
    out->note[0] = '\0';
    if (max <= 0) return;
#if defined(__x86_64__)
    cache_clear();
    if (space && sp) {
        out->cfi = 1;
        cfi_unwind(pc, sp, pcs, max, out);
        if (out->first_guess > out->n) out->first_guess = out->n;
        return;
    }
#endif
    out->n = bare_scan(pc, sp, pcs, max);
    out->first_guess = out->n > 1 ? 1 : out->n;
    if (out->n > 1)
        note_add(out, "no CFI unwinder (libunwind-x86_64.so.8): the frames above the pc are "
                      "return addresses found on the stack, unconfirmed");
}
