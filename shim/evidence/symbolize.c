/*
 * symbolize.c: see symbolize.h.
 *
 * dladdr only knows exported symbols, and a training binary or a framework
 * library rarely exports the function the user is looking for (a static data
 * loader routine, trainloop_host_stall). So the module's file is mapped and
 * its .symtab searched; a stripped object falls back to .dynsym. Every offset
 * read from the file is checked against its size: a file replaced or damaged
 * since it was loaded must give no name, never a fault. dladdr, the last
 * resort, names a frame only when the pc lies inside the symbol it returns
 * (its st_size, from dladdr1): a pc past the end of the nearest exported
 * symbol is module + offset, no name.
 */
#include "evidence/symbolize.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <limits.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_MODULES 32
#define MAX_CACHED 1024

struct module {
    char path[PATH_MAX];
    uintptr_t base;   /* dlpi_addr */
    uintptr_t lo, hi; /* its PT_LOAD range in memory */
    char build_id[41];
    const unsigned char *map; /* the file, MAP_FAILED when unreadable */
    size_t len;
    const Elf64_Sym *syms;
    size_t nsyms;
    const char *strs;
    size_t strs_len;
};

struct cached {
    uintptr_t pc;
    int exact;
    struct ng_symbol sym;
};

static struct module modules[MAX_MODULES];
static int nmodules;
static struct cached cache[MAX_CACHED];
static int ncached;

/* The cache is one: a dump and the watchdog's log lines take turns. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

void ncclguard_symbolize_begin(void)
{
    pthread_mutex_lock(&lock);
    nmodules = 0;
    ncached = 0;
}

int ncclguard_symbolize_try_begin(void)
{
    if (pthread_mutex_trylock(&lock) != 0) return -1;
    nmodules = 0; /* what the last holder left: nothing, as after begin */
    ncached = 0;
    return 0;
}

void ncclguard_symbolize_end(void)
{
    for (int i = 0; i < nmodules; i++)
        if (modules[i].map != MAP_FAILED) munmap((void *)modules[i].map, modules[i].len);
    nmodules = 0;
    ncached = 0;
    pthread_mutex_unlock(&lock);
}

void ncclguard_symbolize_atfork_child(void)
{
    pthread_mutex_init(&lock, NULL);
    nmodules = 0; /* the parent's maps are the child's too: left to the parent */
    ncached = 0;
}

static void hex_id(const unsigned char *id, size_t n, char out[41])
{
    static const char digits[] = "0123456789abcdef";
    size_t i = 0;
    for (; i < n && i < 20; i++) {
        out[2 * i] = digits[id[i] >> 4];
        out[2 * i + 1] = digits[id[i] & 15];
    }
    out[2 * i] = '\0';
}

void ncclguard_build_id_note(const unsigned char *buf, size_t len, char out[41])
{
    size_t at = 0;
    while (len - at >= sizeof(ElfW(Nhdr))) {
        ElfW(Nhdr) nh;
        memcpy(&nh, buf + at, sizeof nh);
        size_t name = ((size_t)nh.n_namesz + 3) & ~(size_t)3;
        size_t desc = ((size_t)nh.n_descsz + 3) & ~(size_t)3;
        size_t d = at + sizeof nh + name;
        if (name > len || d > len || nh.n_descsz > len - d) return;
        if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
            !memcmp(buf + at + sizeof nh, "GNU", 4)) {
            hex_id(buf + d, nh.n_descsz, out);
            return;
        }
        if (desc > len - d) return;
        at = d + desc;
    }
}

/* The NT_GNU_BUILD_ID note of a loaded object, from its PT_NOTE segments. */
static void find_build_id(const struct dl_phdr_info *info, char out[41])
{
    out[0] = '\0';
    for (int i = 0; i < info->dlpi_phnum && !out[0]; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_NOTE)
            ncclguard_build_id_note((const unsigned char *)(info->dlpi_addr + ph->p_vaddr),
                                    ph->p_memsz, out);
    }
}

struct find {
    uintptr_t pc;
    struct module *m;
};

static int find_object(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct find *f = arg;
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    int hit = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD) continue;
        uintptr_t a = info->dlpi_addr + ph->p_vaddr, b = a + ph->p_memsz;
        if (a < lo) lo = a;
        if (b > hi) hi = b;
        if (f->pc >= a && f->pc < b) hit = 1;
    }
    if (!hit) return 0;
    struct module *m = f->m;
    m->base = info->dlpi_addr;
    m->lo = lo;
    m->hi = hi;
    const char *name = info->dlpi_name;
    if (!name || !name[0]) { /* the main program */
        ssize_t n = readlink("/proc/self/exe", m->path, sizeof m->path - 1);
        m->path[n > 0 ? n : 0] = '\0';
    } else {
        strncpy(m->path, name, sizeof m->path - 1);
        m->path[sizeof m->path - 1] = '\0';
    }
    find_build_id(info, m->build_id);
    return 1;
}

/* The symbol table of the file: .symtab, else .dynsym; all bounds checked. */
static void load_symbols(struct module *m)
{
    m->map = MAP_FAILED;
    m->syms = NULL;
    m->nsyms = 0;
    int fd = m->path[0] == '/' ? open(m->path, O_RDONLY | O_CLOEXEC) : -1;
    struct stat st;
    if (fd < 0) return;
    if (fstat(fd, &st) == 0 && st.st_size >= (off_t)sizeof(Elf64_Ehdr))
        m->map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m->map == MAP_FAILED) return;
    m->len = (size_t)st.st_size;
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)m->map;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
        eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shoff > m->len ||
        (m->len - eh->e_shoff) / sizeof(Elf64_Shdr) < eh->e_shnum)
        return;
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(m->map + eh->e_shoff);
    for (int want = SHT_SYMTAB; want; want = want == SHT_SYMTAB ? SHT_DYNSYM : 0) {
        for (int i = 0; i < eh->e_shnum; i++) {
            if (sh[i].sh_type != (Elf64_Word)want || sh[i].sh_link >= eh->e_shnum) continue;
            const Elf64_Shdr *str = &sh[sh[i].sh_link];
            if (sh[i].sh_offset > m->len || sh[i].sh_size > m->len - sh[i].sh_offset ||
                str->sh_offset > m->len || str->sh_size > m->len - str->sh_offset)
                continue;
            m->syms = (const Elf64_Sym *)(m->map + sh[i].sh_offset);
            m->nsyms = sh[i].sh_size / sizeof(Elf64_Sym);
            m->strs = (const char *)(m->map + str->sh_offset);
            m->strs_len = str->sh_size;
            return;
        }
    }
}

static struct module *module_of(uintptr_t pc)
{
    for (int i = 0; i < nmodules; i++)
        if (pc >= modules[i].lo && pc < modules[i].hi) return &modules[i];
    if (nmodules == MAX_MODULES) return NULL;
    struct find f = {pc, &modules[nmodules]};
    if (!dl_iterate_phdr(find_object, &f)) return NULL;
    load_symbols(f.m);
    return &modules[nmodules++];
}

/* The function symbol that contains addr (an address in the file's terms). */
static const Elf64_Sym *symbol_at(const struct module *m, uint64_t addr)
{
    for (size_t i = 0; i < m->nsyms; i++) {
        const Elf64_Sym *s = &m->syms[i];
        if (ELF64_ST_TYPE(s->st_info) == STT_FUNC && s->st_shndx != SHN_UNDEF &&
            s->st_name < m->strs_len && s->st_value <= addr && addr - s->st_value < s->st_size)
            return s;
    }
    return NULL;
}

void ncclguard_symbolize(uintptr_t pc, struct ng_symbol *out)
{
    ncclguard_symbolize_at(pc, 0, out);
}

void ncclguard_symbolize_at(uintptr_t pc, int exact, struct ng_symbol *out)
{
    exact = exact != 0;
    for (int i = 0; i < ncached; i++)
        if (cache[i].pc == pc && cache[i].exact == exact) {
            *out = cache[i].sym;
            return;
        }
    uintptr_t at = pc && !exact ? pc - 1 : pc;
    struct module *m = module_of(at);
    *out = (struct ng_symbol){.module = "", .offset = pc};
    if (m) {
        out->module = m->path;
        out->offset = pc - m->base;
        out->build_id = m->build_id[0] ? m->build_id : NULL;
        const Elf64_Sym *s = m->map != MAP_FAILED ? symbol_at(m, at - m->base) : NULL;
        if (s && memchr(m->strs + s->st_name, '\0', m->strs_len - s->st_name)) {
            out->function = m->strs + s->st_name;
            out->function_offset = (pc - m->base) - s->st_value;
        }
    }
    /* dladdr's symbol need not hold the pc: glibc's answers a symbol of size 0
     * for its own address, other C libraries the nearest exported one below,
     * wherever it ends. A name only when the pc lies inside it (a static
     * function after an exported one is not that function). */
    Dl_info info;
    const ElfW(Sym) *ds = NULL;
    if (!out->function && dladdr1((void *)at, &info, (void **)&ds, RTLD_DL_SYMENT) &&
        info.dli_sname && info.dli_saddr && ds && at - (uintptr_t)info.dli_saddr < ds->st_size) {
        out->function = info.dli_sname;
        out->function_offset = pc - (uintptr_t)info.dli_saddr;
    }
    if (ncached < MAX_CACHED) cache[ncached++] = (struct cached){pc, exact, *out};
}
