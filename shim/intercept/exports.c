/*
 * exports.c: see exports.h.
 *
 * The dynamic section of a loaded object is read where ld.so left it: glibc
 * relocates DT_SYMTAB, DT_STRTAB and the hash tables' addresses in place on
 * x86-64 and aarch64, but an address below the load base is taken as
 * unrelocated and the base added. The symbol count comes from DT_HASH's nchain,
 * else from DT_GNU_HASH's buckets and chains (the highest symbol index any
 * bucket starts a chain at, then that chain to its end bit).
 */
#include "intercept/exports.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdint.h>
#include <string.h>

#include "base/log.h"
#include "intercept/real.h"

#define MAX_SYMS (1u << 20) /* a bound for a damaged table, not a limit of NCCL's */

static const char *const wrapped[] = {
#define NCCL_API(ret, fail, name, params, args, hook) "nccl" #name,
#define NCCL_API_VOID(name, params, args) "nccl" #name,
#include "intercept/nccl_api.def"
#undef NCCL_API
#undef NCCL_API_VOID
};

static int is_wrapped(const char *name)
{
    for (size_t i = 0; i < sizeof wrapped / sizeof wrapped[0]; i++)
        if (!strcmp(wrapped[i], name)) return 1;
    return 0;
}

static uintptr_t at(const struct link_map *lm, ElfW(Addr) a)
{
    return a < lm->l_addr ? lm->l_addr + a : a;
}

/* Symbols in the table: DT_HASH's nchain, else counted through DT_GNU_HASH. */
static uint32_t symbol_count(const uint32_t *hash, const uint32_t *gnu)
{
    if (hash) return hash[1] < MAX_SYMS ? hash[1] : MAX_SYMS;
    if (!gnu) return 0;
    uint32_t nbuckets = gnu[0], symoffset = gnu[1], bloom = gnu[2];
    const uint32_t *buckets = gnu + 4 + bloom * (sizeof(ElfW(Addr)) / 4);
    const uint32_t *chain = buckets + nbuckets;
    uint32_t last = 0;
    for (uint32_t i = 0; i < nbuckets && i < MAX_SYMS; i++)
        if (buckets[i] > last) last = buckets[i];
    if (last < symoffset) return symoffset;
    while (last - symoffset < MAX_SYMS && !(chain[last - symoffset] & 1)) last++;
    return last + 1;
}

int ncclguard_exports_unwrapped(char *buf, size_t len)
{
    const struct ng_real *r = ncclguard_real();
    Dl_info info;
    struct link_map *lm = NULL;
    if (len) buf[0] = '\0';
    if (!r->GetVersion ||
        !dladdr1((void *)(uintptr_t)r->GetVersion, &info, (void **)&lm, RTLD_DL_LINKMAP) || !lm ||
        !lm->l_ld)
        return -1;
    const ElfW(Sym) *syms = NULL;
    const char *strs = NULL;
    const uint32_t *hash = NULL, *gnu = NULL;
    size_t strsz = 0;
    for (const ElfW(Dyn) *d = lm->l_ld; d->d_tag != DT_NULL; d++) {
        switch (d->d_tag) {
        case DT_SYMTAB: syms = (const ElfW(Sym) *)at(lm, d->d_un.d_ptr); break;
        case DT_STRTAB: strs = (const char *)at(lm, d->d_un.d_ptr); break;
        case DT_STRSZ: strsz = d->d_un.d_val; break;
        case DT_HASH: hash = (const uint32_t *)at(lm, d->d_un.d_ptr); break;
        case DT_GNU_HASH: gnu = (const uint32_t *)at(lm, d->d_un.d_ptr); break;
        default: break;
        }
    }
    if (!syms || !strs || !strsz) return -1;
    uint32_t n = symbol_count(hash, gnu);
    int found = 0, cut = 0;
    size_t used = 0;
    for (uint32_t i = 1; i < n; i++) {
        const ElfW(Sym) *s = &syms[i];
        if (s->st_name >= strsz || s->st_shndx == SHN_UNDEF ||
            ELF64_ST_TYPE(s->st_info) != STT_FUNC)
            continue;
        const char *name = strs + s->st_name;
        size_t l = strnlen(name, strsz - s->st_name);
        if (l == strsz - s->st_name || strncmp(name, "nccl", 4) || name[4] < 'A' || name[4] > 'Z' ||
            is_wrapped(name))
            continue;
        /* room for ", ", the name, and "..." with its NUL should a later one not fit */
        if (!cut && used + 2 + l + 4 <= len) {
            if (found) memcpy(buf + used, ", ", 2), used += 2;
            memcpy(buf + used, name, l);
            used += l;
        } else {
            cut = 1;
        }
        found++;
    }
    if (len) memcpy(buf + used, cut ? "...\0" : "\0", cut ? 4 : 1);
    return found;
}

/* Names per line: a log line holds 1,023 bytes. */
#define LINE_NAMES 700

void ncclguard_exports_report(void)
{
    static char names[16384];
    int n = ncclguard_exports_unwrapped(names, sizeof names);
    if (n <= 0) return;
    int lines = 0;
    for (const char *p = names; *p; lines++) { /* count the lines first, to number them */
        size_t l = strlen(p);
        const char *cut = l > LINE_NAMES ? strstr(p + LINE_NAMES - 40, ", ") : NULL;
        p = cut ? cut + 2 : p + l;
    }
    const char *p = names;
    for (int i = 1; *p; i++) {
        size_t l = strlen(p);
        const char *cut = l > LINE_NAMES ? strstr(p + LINE_NAMES - 40, ", ") : NULL;
        int len = (int)(cut ? (size_t)(cut - p) : l);
        if (lines == 1)
            NG_INFO("the loaded NCCL exports %d entry point%s that ncclguard does not follow "
                    "(newer than its headers); their calls reach NCCL untracked: %.*s",
                    n, n == 1 ? "" : "s", len, p);
        else
            NG_INFO("the loaded NCCL exports %d entry points that ncclguard does not follow "
                    "(newer than its headers); their calls reach NCCL untracked (%d/%d): %.*s",
                    n, i, lines, len, p);
        p = cut ? cut + 2 : p + l;
    }
}
