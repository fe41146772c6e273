/*
 * modmap.c: see modmap.h.
 *
 * A module is the run of consecutive lines of /proc/self/maps that map one
 * file. Its ELF header is at the start of its mapping of file offset 0 (the
 * loader maps the first PT_LOAD, of offset 0, first and lowest); the load
 * address is that start minus the p_vaddr of the PT_LOAD of offset 0, as
 * dl_iterate_phdr's dlpi_addr would say, so that offsets agree with those of
 * the frames symbolized in the process (symbolize.c). Only the executable
 * mappings are kept: a return address lies in code. The headers are read
 * when a frame first needs them.
 */
#include "evidence/modmap.h"

#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <string.h>
#include <unistd.h>

#include "base/atomic.h"
#include "base/peek.h"

#define MAX_RANGES 4096
#define MAX_MODULES 2048
#define POOL_BYTES (256 * 1024)
#define LINE_BYTES 8192
#define MAX_PHDRS 64
#define NOTE_BYTES 2048

struct range {
    uintptr_t lo, hi;
    int module;
};

struct module {
    uint32_t path;  /* offset into pool */
    uintptr_t head; /* where its ELF header should be */
    uintptr_t base; /* load address, valid once read */
    int read;       /* headers read (base and build_id set) */
    char build_id[41];
};

static struct range ranges[MAX_RANGES];
static int nranges = -1; /* -1: not loaded */
static struct module modules[MAX_MODULES];
static int nmodules;
static char pool[POOL_BYTES];
static uint32_t pool_used;
static char line[LINE_BYTES];
static ng_atomic(int) loading;

/* The file being read: its path (a line's last field) and where it starts. */
static char cur_path[LINE_BYTES];
static uintptr_t cur_head;
static int cur_module; /* its module, -1 until one of its mappings is executable */

static int load(void);

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* A hex number at *p, which is moved past it; -1 when there is none. */
static int parse_hex(const char **p, uintptr_t *out)
{
    uintptr_t v = 0;
    int n = 0, d;
    while ((d = hex_digit(**p)) >= 0) {
        v = v << 4 | (uintptr_t)d;
        (*p)++;
        n++;
    }
    *out = v;
    return n ? 0 : -1;
}

static const char *skip_field(const char *p)
{
    while (*p && *p != ' ') p++;
    while (*p == ' ') p++;
    return p;
}

/* One line: "lo-hi perms offset dev inode   path". */
static void take_line(const char *p)
{
    uintptr_t lo, hi, off;
    if (parse_hex(&p, &lo) || *p++ != '-' || parse_hex(&p, &hi) || *p++ != ' ') return;
    int exec = p[0] && p[1] && p[2] == 'x';
    p = skip_field(p);
    if (parse_hex(&p, &off)) return;
    p = skip_field(skip_field(skip_field(p))); /* dev, inode */
    if (p[0] != '/') return;                   /* anonymous, [stack], [vdso]: no file */
    size_t len = strlen(p);
    if (off == 0 || strcmp(p, cur_path)) { /* another file, or another copy, begins */
        memcpy(cur_path, p, len + 1);
        cur_head = lo - off;
        cur_module = -1;
    }
    if (!exec || nranges >= MAX_RANGES) return;
    if (cur_module < 0) {
        if (nmodules >= MAX_MODULES || pool_used >= POOL_BYTES - 1 ||
            len + 1 > POOL_BYTES - 1 - pool_used) /* the last byte stays NUL */
            return;
        struct module *m = &modules[nmodules];
        m->path = pool_used;
        memcpy(pool + pool_used, p, len + 1);
        pool_used += (uint32_t)len + 1;
        m->head = cur_head;
        m->base = cur_head;
        m->read = 0;
        m->build_id[0] = '\0';
        cur_module = nmodules++;
    }
    ranges[nranges++] = (struct range){lo, hi, cur_module};
}

int ncclguard_modmap_load(void)
{
    /* A crash while a SIGTERM dump reads the table (or the reverse): the
     * second handler finds the table as the first one left it. */
    if (ng_atomic_exchange_acq_rel(&loading, 1)) return -1;
    int n = load();
    ng_atomic_store_release(&loading, 0);
    return n;
}

static int load(void)
{
    nranges = -1;
    nmodules = 0;
    pool_used = 0;
    cur_path[0] = '\0';
    cur_module = -1;
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    nranges = 0;
    size_t have = 0;
    int skipping = 0; /* in a line longer than the buffer: dropped */
    for (;;) {
        ssize_t n = read(fd, line + have, sizeof line - 1 - have);
        if (n <= 0) break;
        have += (size_t)n;
        line[have] = '\0';
        char *start = line, *nl;
        while ((nl = memchr(start, '\n', have - (size_t)(start - line)))) {
            *nl = '\0';
            if (!skipping) take_line(start);
            skipping = 0;
            start = nl + 1;
        }
        have -= (size_t)(start - line);
        memmove(line, start, have);
        if (have == sizeof line - 1) { /* no newline in a full buffer */
            skipping = 1;
            have = 0;
        }
    }
    close(fd);
    return nranges;
}

/* The module's load address and build-id, from its headers in memory. */
static void read_headers(struct module *m)
{
    static ElfW(Phdr) ph[MAX_PHDRS];
    static unsigned char note[NOTE_BYTES];
    ElfW(Ehdr) eh;
    m->read = 1;
    if (ncclguard_peek_all(m->head, &eh, sizeof eh) || memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
        eh.e_ident[EI_CLASS] != (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32) ||
        eh.e_phentsize != sizeof(ElfW(Phdr)) || eh.e_phnum == 0 || eh.e_phnum > MAX_PHDRS ||
        ncclguard_peek_all(m->head + eh.e_phoff, ph, eh.e_phnum * sizeof ph[0]))
        return; /* no ELF there: base stays the mapping's start minus its offset */
    for (int i = 0; i < eh.e_phnum; i++)
        if (ph[i].p_type == PT_LOAD && ph[i].p_offset == 0) {
            m->base = m->head - ph[i].p_vaddr;
            break;
        }
    for (int i = 0; i < eh.e_phnum && !m->build_id[0]; i++) {
        if (ph[i].p_type != PT_NOTE) continue;
        size_t len = ph[i].p_memsz < NOTE_BYTES ? ph[i].p_memsz : NOTE_BYTES;
        if (!ncclguard_peek_all(m->base + ph[i].p_vaddr, note, len))
            ncclguard_build_id_note(note, len, m->build_id);
    }
}

int ncclguard_modmap_find(uintptr_t pc, int exact, struct ng_symbol *out)
{
    int n = nranges; /* read once, bounded: see load */
    if (n <= 0 || n > MAX_RANGES || !pc) return -1;
    uintptr_t at = exact ? pc : pc - 1;
    int lo = 0, hi = n; /* /proc/self/maps is sorted by address */
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (ranges[mid].hi <= at)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == n || at < ranges[lo].lo || ranges[lo].module < 0 ||
        ranges[lo].module >= MAX_MODULES || modules[ranges[lo].module].path >= POOL_BYTES)
        return -1;
    struct module *m = &modules[ranges[lo].module];
    if (!m->read) read_headers(m);
    out->module = pool + m->path;
    out->offset = pc - m->base;
    out->function = NULL;
    out->function_offset = 0;
    out->build_id = m->build_id[0] ? m->build_id : NULL;
    return 0;
}
