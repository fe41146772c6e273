/*
 * cfi.c: see cfi.h.
 *
 * _Unwind_Find_FDE (libgcc) finds the frame description entry (FDE) of an
 * address, through dl_iterate_phdr or _dl_find_object, and hands the start
 * of its function in bases.func. The FDE's instructions, after those of its
 * common information entry (CIE), are then run up to the call instruction
 * (ra - 1), keeping the rules of the CFA, rbp (6), rsp (7) and the return
 * address (16) only. The format is the one of the System V x86-64 psABI,
 * section 3.7 (DWARF 4, section 6.4, with the GNU .eh_frame augmentations).
 */
#include "track/cfi.h"

#include <dlfcn.h>
#include <stddef.h>
#include <string.h>

#include "base/atomic.h"

#define REG_RBP 6
#define REG_RSP 7
#define REG_RA 16
#define MAX_REMEMBER 4

struct eh_bases {
    void *tbase, *dbase, *func;
};
typedef const void *(*find_fde_fn)(void *pc, struct eh_bases *bases);
static ng_atomic(find_fde_fn) find_fde;

int ncclguard_cfi_open(void)
{
#if defined(__x86_64__)
    if (ng_atomic_load_acquire(&find_fde)) return 0;
    void *lib = dlopen("libgcc_s.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!lib) return -1;
    find_fde_fn f = (find_fde_fn)dlsym(lib, "_Unwind_Find_FDE");
    if (!f) return -1;
    ng_atomic_store_release(&find_fde, f);
    return 0;
#else
    return -1;
#endif
}

struct cursor {
    const uint8_t *p, *end;
    int bad;
};

static uint64_t uleb(struct cursor *c)
{
    uint64_t v = 0;
    for (int shift = 0; c->p < c->end && shift < 64; shift += 7) {
        uint8_t b = *c->p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) return v;
    }
    c->bad = 1;
    return 0;
}

static int64_t sleb(struct cursor *c)
{
    int64_t v = 0;
    int shift = 0;
    while (c->p < c->end && shift < 64) {
        uint8_t b = *c->p++;
        v |= (int64_t)((uint64_t)(b & 0x7f) << shift);
        shift += 7;
        if (!(b & 0x80)) {
            if (shift < 64 && (b & 0x40)) v |= -((int64_t)1 << shift);
            return v;
        }
    }
    c->bad = 1;
    return 0;
}

static uint64_t fixed(struct cursor *c, int n)
{
    if (c->end - c->p < n) {
        c->bad = 1;
        return 0;
    }
    uint64_t v = 0;
    memcpy(&v, c->p, (size_t)n); /* little endian */
    c->p += n;
    return v;
}

/* Skips one encoded pointer of encoding enc (its value is not needed). */
static void skip_encoded(struct cursor *c, uint8_t enc)
{
    if (enc == 0xff) return; /* DW_EH_PE_omit */
    switch (enc & 0x0f) {
    case 0x00:
    case 0x04:
    case 0x0c: fixed(c, 8); break;
    case 0x02:
    case 0x0a: fixed(c, 2); break;
    case 0x03:
    case 0x0b: fixed(c, 4); break;
    case 0x01: uleb(c); break;
    case 0x09: sleb(c); break;
    default: c->bad = 1;
    }
    if ((enc & 0x70) == 0x50) c->bad = 1; /* aligned: not emitted for x86-64 */
}

struct rules {
    int cfa_reg;
    int64_t cfa_off;
    int rbp; /* 0: unsaved, 1: at CFA + rbp_off, 2: anything else */
    int64_t rbp_off;
    int ra;  /* 0: at CFA - 8, 1: undefined, 2: anything else */
    int bad; /* a rule this reader does not follow */
};

static void set_offset(struct rules *r, uint64_t reg, int64_t off)
{
    if (reg == REG_RBP) {
        r->rbp = 1;
        r->rbp_off = off;
    } else if (reg == REG_RA) {
        r->ra = off == -8 ? 0 : 2;
    } else if (reg == REG_RSP) {
        r->bad = 1;
    }
}

/* Any rule but an offset for reg: same_value keeps it usable for rbp. */
static void set_other(struct rules *r, uint64_t reg, int undefined, int same)
{
    if (reg == REG_RBP)
        r->rbp = same ? 0 : 2;
    else if (reg == REG_RA)
        r->ra = undefined ? 1 : 2;
    else if (reg == REG_RSP)
        r->bad = 1;
}

static void restore(struct rules *r, const struct rules *init, uint64_t reg)
{
    if (reg == REG_RBP) {
        r->rbp = init->rbp;
        r->rbp_off = init->rbp_off;
    } else if (reg == REG_RA) {
        r->ra = init->ra;
    } else if (reg == REG_RSP) {
        r->bad = 1;
    }
}

/* Runs the instructions of c from loc until past target; init holds the rules
 * after the CIE's (for DW_CFA_restore), NULL while running those. */
static void run(struct cursor *c, struct rules *r, const struct rules *init, uint64_t caf,
                int64_t daf, uintptr_t loc, uintptr_t target)
{
    struct rules saved[MAX_REMEMBER];
    int nsaved = 0;
    while (c->p < c->end && !c->bad && !r->bad) {
        uint8_t op = *c->p++;
        uint64_t reg, delta = 0;
        switch (op >> 6) {
        case 1: delta = (op & 0x3f) * caf; goto advance;
        case 2: set_offset(r, op & 0x3f, (int64_t)uleb(c) * daf); continue;
        case 3:
            if (init)
                restore(r, init, op & 0x3f);
            else
                r->bad = 1;
            continue;
        default: break;
        }
        switch (op) {
        case 0x00: continue; /* nop */
        case 0x02: delta = fixed(c, 1) * caf; goto advance;
        case 0x03: delta = fixed(c, 2) * caf; goto advance;
        case 0x04: delta = fixed(c, 4) * caf; goto advance;
        case 0x05:
            reg = uleb(c);
            set_offset(r, reg, (int64_t)uleb(c) * daf);
            continue;
        case 0x06:
            reg = uleb(c);
            if (init)
                restore(r, init, reg);
            else
                r->bad = 1;
            continue;
        case 0x07: set_other(r, uleb(c), 1, 0); continue;
        case 0x08: set_other(r, uleb(c), 0, 1); continue;
        case 0x09:
            reg = uleb(c);
            uleb(c);
            set_other(r, reg, 0, 0);
            continue;
        case 0x0a:
            if (nsaved == MAX_REMEMBER)
                r->bad = 1;
            else
                saved[nsaved++] = *r;
            continue;
        case 0x0b:
            if (nsaved == 0)
                r->bad = 1;
            else
                *r = saved[--nsaved]; /* the CFA too, as GCC's and LLVM's unwinders do */
            continue;
        case 0x0c:
            r->cfa_reg = (int)uleb(c);
            r->cfa_off = (int64_t)uleb(c);
            continue;
        case 0x0d: r->cfa_reg = (int)uleb(c); continue;
        case 0x0e: r->cfa_off = (int64_t)uleb(c); continue;
        case 0x11:
            reg = uleb(c);
            set_offset(r, reg, sleb(c) * daf);
            continue;
        case 0x12:
            r->cfa_reg = (int)uleb(c);
            r->cfa_off = sleb(c) * daf;
            continue;
        case 0x13: r->cfa_off = sleb(c) * daf; continue;
        case 0x2e: uleb(c); continue; /* GNU_args_size */
        case 0x2f:
            reg = uleb(c);
            set_offset(r, reg, -(int64_t)uleb(c) * daf);
            continue;
        default: r->bad = 1; continue; /* expressions, set_loc, val_*: not followed */
        }
    advance:
        if (!init) {
            r->bad = 1; /* a CIE does not advance */
            continue;
        }
        loc += delta;
        if (loc > target) return;
    }
    if (c->bad) r->bad = 1;
}

int ncclguard_cfi_rule(uintptr_t ra, struct ng_cfi_rule *out)
{
    find_fde_fn find = ng_atomic_load_acquire(&find_fde);
    if (!find || ra == 0) return -1;
    uintptr_t target = ra - 1; /* inside the call instruction */
    struct eh_bases bases;
    const uint8_t *fde = find((void *)target, &bases);
    if (!fde) return -1;
    uint32_t flen, cie_delta, clen;
    memcpy(&flen, fde, 4);
    memcpy(&cie_delta, fde + 4, 4);
    if (flen == 0xffffffffu || flen < 8 || cie_delta == 0) return -1;
    const uint8_t *cie = fde + 4 - cie_delta;
    memcpy(&clen, cie, 4);
    if (clen == 0xffffffffu || clen < 8) return -1;

    struct cursor c = {cie + 9, cie + 4 + clen, 0}; /* after length, id, version */
    uint8_t version = cie[8];
    const char *aug = (const char *)c.p;
    size_t auglen = strnlen(aug, (size_t)(c.end - c.p));
    c.p += auglen + 1;
    if (version != 1 && version != 3) return -1;
    if (auglen && aug[0] != 'z') return -1; /* "eh" and other old forms */
    uint64_t caf = uleb(&c);
    int64_t daf = sleb(&c);
    uint64_t ra_reg = version == 1 ? fixed(&c, 1) : uleb(&c);
    uint8_t fde_enc = 0; /* absptr */
    if (auglen) {
        uint64_t n = uleb(&c);
        struct cursor a = {c.p, c.p + n, 0};
        if (a.end > c.end) return -1;
        for (size_t i = 1; i < auglen; i++) {
            switch (aug[i]) {
            case 'R': fde_enc = (uint8_t)fixed(&a, 1); break;
            case 'P': skip_encoded(&a, (uint8_t)fixed(&a, 1)); break;
            case 'L': fixed(&a, 1); break;
            default: return -1; /* 'S' (a signal frame) and anything unknown */
            }
        }
        if (a.bad) return -1;
        c.p += n;
    }
    if (c.bad || ra_reg != REG_RA) return -1;
    struct rules r = {REG_RSP, 8, 0, 0, 2, 0};
    run(&c, &r, NULL, caf, daf, 0, 0);
    if (r.bad) return -1;
    struct rules init = r;

    struct cursor f = {fde + 8, fde + 4 + flen, 0};
    skip_encoded(&f, fde_enc);        /* pc_begin: bases.func has it */
    skip_encoded(&f, fde_enc & 0x0f); /* pc_range */
    if (auglen) f.p += uleb(&f);
    if (f.bad || f.p > f.end) return -1;
    run(&f, &r, &init, caf, daf, (uintptr_t)bases.func, target);
    if (r.bad || r.rbp == 2 || r.ra == 2) return -1;
    if (r.cfa_reg != REG_RSP && r.cfa_reg != REG_RBP) return -1;
    if (r.cfa_off <= 0 || (r.cfa_off & 7)) return -1;
    out->cfa_is_rbp = r.cfa_reg == REG_RBP;
    out->cfa_off = r.cfa_off;
    out->rbp_saved = r.rbp == 1;
    out->rbp_off = r.rbp_off;
    out->last = r.ra == 1;
    return 0;
}
