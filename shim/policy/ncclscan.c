/*
 * ncclscan.c: see ncclscan.h.
 *
 * The file is read with pread in 16 KiB chunks into a stack buffer: libnccl.so.2
 * is 200+ MB (mostly GPU code), but its .rodata is a few hundred KB, and the
 * section headers say where it is. Without section headers (a stripped-to-the-
 * bone file), the read-only, non-executable PT_LOAD segments are scanned
 * instead, up to NG_SCAN_MAX_BYTES.
 */
#include "policy/ncclscan.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define CHUNK 16384 /* on the stack of whichever thread creates the first communicator */
#define NAME_MAX_LEN 127

int ncclguard_known_has(const struct ng_known *k, const char *name)
{
    size_t lo = 0, hi = k->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(k->pool + k->off[mid], name);
        if (c == 0) return 1;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0;
}

const char *ncclguard_known_at(const struct ng_known *k, size_t i)
{
    return i < k->n ? k->pool + k->off[i] : NULL;
}

int ncclguard_known_add(struct ng_known *k, const char *name, size_t len)
{
    char tmp[NAME_MAX_LEN + 1];
    if (len > NAME_MAX_LEN) return -1;
    memcpy(tmp, name, len);
    tmp[len] = '\0';
    size_t lo = 0, hi = k->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(k->pool + k->off[mid], tmp);
        if (c == 0) return 0;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (k->n == NG_KNOWN_MAX || len + 1 > sizeof k->pool - k->used) return -1;
    memmove(&k->off[lo + 1], &k->off[lo], (k->n - lo) * sizeof k->off[0]);
    k->off[lo] = (uint32_t)k->used;
    memcpy(k->pool + k->used, tmp, len + 1);
    k->used += len + 1;
    k->n++;
    return 0;
}

/* The state of the string scanner across chunks. */
struct scan {
    char cand[NAME_MAX_LEN + 1];
    size_t len;
    int alive; /* the current string may still be a name */
};

static int name_char(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* Feeds bytes; a NUL-terminated string that is exactly NCCL_[A-Z0-9_]+ is kept. */
static void feed(struct scan *s, struct ng_known *k, const unsigned char *p, size_t n)
{
    static const char prefix[] = "NCCL_";
    for (size_t i = 0; i < n; i++) {
        unsigned char c = p[i];
        if (c == 0) {
            if (s->alive && s->len > 5) ncclguard_known_add(k, s->cand, s->len);
            s->len = 0;
            s->alive = 1;
        } else if (s->alive) {
            if (s->len < NAME_MAX_LEN &&
                (s->len < 5 ? c == (unsigned char)prefix[s->len] : name_char(c)))
                s->cand[s->len++] = (char)c;
            else
                s->alive = 0;
        }
    }
}

/* Scans [off, off+size) of the file; the region starts a fresh string. */
static int scan_region(int fd, uint64_t off, uint64_t size, struct ng_known *k)
{
    unsigned char buf[CHUNK];
    struct scan s = {.alive = 1};
    while (size > 0) {
        if (k->scanned >= NG_SCAN_MAX_BYTES) return 0;
        size_t want = size < CHUNK ? (size_t)size : CHUNK;
        ssize_t got = pread(fd, buf, want, (off_t)off);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return -1;
        feed(&s, k, buf, (size_t)got);
        off += (uint64_t)got;
        size -= (uint64_t)got;
        k->scanned += (size_t)got;
    }
    return 0;
}

static int read_at(int fd, void *dst, size_t n, uint64_t off)
{
    return pread(fd, dst, n, (off_t)off) == (ssize_t)n ? 0 : -1;
}

/* Scans every allocated, read-only, non-executable section named .rodata*. */
static int scan_sections(int fd, const Elf64_Ehdr *eh, struct ng_known *k)
{
    Elf64_Shdr sh, strsh;
    uint64_t shnum = eh->e_shnum, stridx = eh->e_shstrndx;
    if (!eh->e_shoff || eh->e_shentsize != sizeof sh) return 0;
    if (shnum == 0 || stridx == SHN_XINDEX) { /* extended numbering lives in section 0 */
        if (read_at(fd, &sh, sizeof sh, eh->e_shoff)) return -1;
        if (shnum == 0) shnum = sh.sh_size;
        if (stridx == SHN_XINDEX) stridx = sh.sh_link;
    }
    if (shnum > 65536 || stridx >= shnum) return 0;
    if (read_at(fd, &strsh, sizeof strsh, eh->e_shoff + stridx * sizeof sh)) return -1;
    int found = 0;
    for (uint64_t i = 1; i < shnum; i++) {
        if (read_at(fd, &sh, sizeof sh, eh->e_shoff + i * sizeof sh)) return -1;
        if (sh.sh_type != SHT_PROGBITS || !(sh.sh_flags & SHF_ALLOC) ||
            (sh.sh_flags & (SHF_WRITE | SHF_EXECINSTR)))
            continue;
        char name[16] = {0};
        if (sh.sh_name >= strsh.sh_size) continue;
        if (pread(fd, name, sizeof name - 1, (off_t)(strsh.sh_offset + sh.sh_name)) <= 0) continue;
        if (strncmp(name, ".rodata", 7) || (name[7] && name[7] != '.')) continue;
        found = 1;
        if (scan_region(fd, sh.sh_offset, sh.sh_size, k)) return -1;
    }
    return found;
}

/* Fallback: every PT_LOAD segment that is readable but neither writable nor executable. */
static int scan_segments(int fd, const Elf64_Ehdr *eh, struct ng_known *k)
{
    Elf64_Phdr ph;
    if (eh->e_phentsize != sizeof ph) return -1;
    for (unsigned i = 0; i < eh->e_phnum; i++) {
        if (read_at(fd, &ph, sizeof ph, eh->e_phoff + (uint64_t)i * sizeof ph)) return -1;
        if (ph.p_type == PT_LOAD && (ph.p_flags & (PF_R | PF_W | PF_X)) == PF_R &&
            scan_region(fd, ph.p_offset, ph.p_filesz, k))
            return -1;
    }
    k->whole_segments = 1;
    return 0;
}

int ncclguard_known_scan(const char *path, struct ng_known *k, char *why, size_t whylen)
{
    memset(k, 0, offsetof(struct ng_known, pool));
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        snprintf(why, whylen, "cannot open %s (%s)", path, strerror(errno));
        return -1;
    }
    Elf64_Ehdr eh;
    int rc = -1;
    if (read_at(fd, &eh, sizeof eh, 0) || memcmp(eh.e_ident, ELFMAG, SELFMAG)) {
        snprintf(why, whylen, "%s is not an ELF file", path);
    } else if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB) {
        snprintf(why, whylen, "%s is not a 64-bit little-endian ELF file", path);
    } else {
        int found = scan_sections(fd, &eh, k);
        if (found == 0) found = scan_segments(fd, &eh, k) == 0;
        if (found > 0)
            rc = 0;
        else
            snprintf(why, whylen, "cannot read the read-only data of %s", path);
    }
    close(fd);
    return rc;
}

static int find_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    char **out = data;
    const char *name = info->dlpi_name, *base = name ? strrchr(name, '/') : NULL;
    base = base ? base + 1 : name;
    if (base && !strncmp(base, "libnccl.so", 10)) {
        *out = (char *)name;
        return 1;
    }
    return 0;
}

int ncclguard_mapped_nccl(char *path, size_t len)
{
    char *found = NULL;
    dl_iterate_phdr(find_cb, &found);
    if (found && *found) {
        snprintf(path, len, "%s", found);
        return 0;
    }
    /* a library under another name: whoever defines pncclGetVersion */
    Dl_info info;
    void *sym = dlsym(RTLD_DEFAULT, "pncclGetVersion");
    if (sym && dladdr(sym, &info) && info.dli_fname && *info.dli_fname) {
        snprintf(path, len, "%s", info.dli_fname);
        return 0;
    }
    return -1;
}

int ncclguard_nccl_version(void *handle, char *text, size_t len)
{
    typedef int (*get_version_fn)(int *);
    get_version_fn fn = NULL;
    int v = -1;
    if (handle) {
        void *sym = dlsym(handle, "ncclGetVersion");
        if (!sym) sym = dlsym(handle, "pncclGetVersion");
        memcpy(&fn, &sym, sizeof fn);
    }
    if (!fn || fn(&v) != 0 || v <= 0) {
        snprintf(text, len, "unknown");
        return -1;
    }
    if (v >= 10000)
        snprintf(text, len, "%d.%d.%d", v / 10000, v % 10000 / 100, v % 100);
    else
        snprintf(text, len, "%d.%d.%d", v / 1000, v % 1000 / 100, v % 100);
    return v;
}
