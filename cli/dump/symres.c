/*
 * dump/symres.c: see dump/symres.h.
 *
 * Each module is reported alone to a Dwfl of its own, with dwfl_report_elf at
 * its link-time addresses: a frame's offset (pc minus the load address, as
 * the shim writes it) is then an address of the module, plus the bias libdwfl
 * reports. Debug files are looked for by our own callback, in the debug
 * directories only: never debuginfod, never the network.
 */
#include "dump/symres.h"

#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <gelf.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dump/dump.h"
#include "dump/stack.h"

#define MAX_OPEN 512 /* files held open at once; past that, modules get no names */

struct module {
    struct module *next; /* in its hash chain */
    char *path, *build_id;
    Dwfl *dwfl; /* NULL: no file with this build-id */
    Dwfl_Module *mod;
    Dwarf_Addr bias;
};

struct answer {
    struct answer *next;
    const struct module *m;
    uint64_t offset;
    int exact;
    const char *function, *file; /* owned by the module's Dwfl, or by the answer */
    char unversioned[128];       /* the function without its symbol version */
    int64_t function_offset, line;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct module **modules;
static size_t nmodule_slots, nmodules, nopen;
static struct answer **answers;
static size_t nanswer_slots, nanswers;

static uint64_t hash_str(uint64_t h, const char *s)
{
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return (h ^ 0xff) * 1099511628211ull;
}

/* Doubles a chained table when it holds as many entries as slots. */
static int grow(void ***slots, size_t *n, size_t used, size_t next_off,
                uint64_t (*hash)(const void *))
{
    if (used < *n) return 0;
    size_t m = *n ? *n * 2 : 256;
    void **t = calloc(m, sizeof *t);
    if (!t) return -1;
    for (size_t i = 0; i < *n; i++)
        for (void *e = (*slots)[i], *nx; e; e = nx) {
            nx = *(void **)((char *)e + next_off);
            size_t k = hash(e) & (m - 1);
            *(void **)((char *)e + next_off) = t[k];
            t[k] = e;
        }
    free(*slots);
    *slots = t;
    *n = m;
    return 0;
}

static uint64_t module_hash_of(const char *path, const char *build_id)
{
    return hash_str(hash_str(1469598103934665603ull, path), build_id);
}

static uint64_t module_hash(const void *e)
{
    const struct module *m = e;
    return module_hash_of(m->path, m->build_id);
}

static uint64_t answer_hash_of(const struct module *m, uint64_t offset, int exact)
{
    uint64_t h = (uint64_t)(uintptr_t)m * 0x9e3779b97f4a7c15ull;
    h ^= (offset + (uint64_t)exact) * 0xc2b2ae3d27d4eb4full;
    return h ^ h >> 29;
}

static uint64_t answer_hash(const void *e)
{
    const struct answer *a = e;
    return answer_hash_of(a->m, a->offset, a->exact);
}

/* The GNU build-id of the open file fd in lowercase hex, "" when none. */
static void file_build_id(int fd, char *out, size_t n)
{
    static const char digits[] = "0123456789abcdef";
    out[0] = '\0';
    Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    if (!e) return;
    const void *id = NULL;
    ssize_t len = dwelf_elf_gnu_build_id(e, &id);
    if (len > 0 && (size_t)len * 2 < n) {
        for (ssize_t i = 0; i < len; i++) {
            out[2 * i] = digits[((const unsigned char *)id)[i] >> 4];
            out[2 * i + 1] = digits[((const unsigned char *)id)[i] & 15];
        }
        out[2 * len] = '\0';
    }
    elf_end(e);
}

/* fd of the regular file at path when its build-id is build_id, else -1. */
static int open_matching(const char *path, const char *build_id)
{
    char got[130];
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO must not block us */
    if (fd < 0) return -1;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        close(fd);
        return -1;
    }
    file_build_id(fd, got, sizeof got);
    if (!got[0] || strcmp(got, build_id)) {
        close(fd);
        return -1;
    }
    return fd;
}

/* <dir>/.build-id/xx/rest.debug of the i-th debug directory, with a matching
 * build-id; -1 when there is none (or no i-th directory). */
static int open_debug_file(int i, const char *build_id, char *path, size_t n)
{
    const char *dirs = getenv("NCCLGUARD_DEBUG_DIRS");
    if (!dirs || !*dirs) dirs = "/usr/lib/debug";
    for (; i > 0 && dirs; i--) {
        dirs = strchr(dirs, ':');
        if (dirs) dirs++;
    }
    if (!dirs || strlen(build_id) < 3) return -1;
    size_t len = strcspn(dirs, ":");
    int w = snprintf(path, n, "%.*s/.build-id/%.2s/%s.debug", (int)len, dirs, build_id,
                     build_id + 2);
    return w > 0 && (size_t)w < n ? open_matching(path, build_id) : -1;
}

#define MAX_DEBUG_DIRS 16

/* libdwfl's find_debuginfo: the debug file of a module whose own file has no
 * DWARF, from the debug directories; never the network. */
static int find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
                          const char *file_name, const char *debuglink_file,
                          GElf_Word debuglink_crc, char **debuginfo_file_name)
{
    (void)userdata, (void)modname, (void)base, (void)file_name, (void)debuglink_file;
    (void)debuglink_crc;
    const unsigned char *bits;
    GElf_Addr vaddr;
    int len = dwfl_module_build_id(mod, &bits, &vaddr);
    if (len <= 0 || len > 64) return -1;
    char id[130], path[4096];
    for (int i = 0; i < len; i++) snprintf(id + 2 * i, 3, "%02x", bits[i]);
    for (int i = 0; i < MAX_DEBUG_DIRS; i++) {
        int fd = open_debug_file(i, id, path, sizeof path);
        if (fd >= 0) {
            *debuginfo_file_name = strdup(path);
            return fd;
        }
    }
    return -1;
}

static const Dwfl_Callbacks callbacks = {
    .find_elf = NULL,
    .find_debuginfo = find_debuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = NULL,
};

/* Opens the module's file: its path, else its debug file; no Dwfl when none
 * has its build-id. */
static void open_module(struct module *m)
{
    char path[4096];
    if (nopen >= MAX_OPEN) return;
    const char *used = m->path;
    int fd = m->path[0] == '/' ? open_matching(m->path, m->build_id) : -1;
    for (int i = 0; fd < 0 && i < MAX_DEBUG_DIRS; i++) {
        fd = open_debug_file(i, m->build_id, path, sizeof path);
        used = path;
    }
    if (fd < 0) return;
    m->dwfl = dwfl_begin(&callbacks);
    if (m->dwfl) m->mod = dwfl_report_elf(m->dwfl, m->path, used, fd, 0, false);
    if (!m->mod) { /* fd is ours still */
        close(fd);
        if (m->dwfl) dwfl_end(m->dwfl);
        m->dwfl = NULL;
        return;
    }
    dwfl_report_end(m->dwfl, NULL, NULL);
    if (!dwfl_module_getelf(m->mod, &m->bias)) {
        dwfl_end(m->dwfl);
        m->dwfl = NULL;
        m->mod = NULL;
        return;
    }
    nopen++;
}

static struct module *module_of(const char *path, const char *build_id)
{
    uint64_t h = module_hash_of(path, build_id);
    for (struct module *m = nmodule_slots ? modules[h & (nmodule_slots - 1)] : NULL; m; m = m->next)
        if (!strcmp(m->path, path) && !strcmp(m->build_id, build_id)) return m;
    if (grow((void ***)&modules, &nmodule_slots, nmodules, offsetof(struct module, next),
             module_hash))
        return NULL;
    struct module *m = calloc(1, sizeof *m);
    if (!m || !(m->path = strdup(path)) || !(m->build_id = strdup(build_id))) {
        if (m) free(m->path);
        free(m);
        return NULL;
    }
    open_module(m);
    size_t k = h & (nmodule_slots - 1);
    m->next = modules[k];
    modules[k] = m;
    nmodules++;
    return m;
}

/* What the module's file says of the address; function NULL when no symbol
 * holds it. */
static void look_up(const struct module *m, struct answer *a)
{
    a->function = a->file = NULL;
    a->line = DR_NONE;
    a->function_offset = DR_NONE;
    if (!m->mod || (!a->exact && a->offset == 0)) return;
    uint64_t at = a->offset - (a->exact ? 0 : 1);
    Dwarf_Addr addr = at + m->bias;
    GElf_Off off = 0;
    GElf_Sym sym;
    const char *name = dwfl_module_addrinfo(m->mod, addr, &off, &sym, NULL, NULL, NULL);
    int type = name ? GELF_ST_TYPE(sym.st_info) : STT_NOTYPE;
    /* libdwfl may answer with the nearest sizeless symbol below: not a name */
    if (name && (type == STT_FUNC || type == STT_GNU_IFUNC) && sym.st_size > 0 &&
        off < sym.st_size) {
        /* a debug file's .symtab spells versioned names "pthread_cond_wait@@GLIBC_2.3.2" */
        const char *at_sign = strchr(name, '@');
        if (at_sign && (size_t)(at_sign - name) < sizeof a->unversioned) {
            memcpy(a->unversioned, name, (size_t)(at_sign - name));
            a->unversioned[at_sign - name] = '\0';
            name = a->unversioned;
        }
        a->function = name;
        a->function_offset = (int64_t)off + (a->exact ? 0 : 1);
        Dwfl_Line *l = dwfl_module_getsrc(m->mod, addr);
        int line = 0;
        const char *file = l ? dwfl_lineinfo(l, NULL, &line, NULL, NULL, NULL) : NULL;
        if (file && line > 0) {
            a->file = file;
            a->line = line;
        }
    }
}

void dr_symres_frame(struct dr_frame *f, int exact)
{
    if (!f->module || !f->module[0] || !f->build_id || !f->build_id[0]) return;
    exact = exact != 0;
    pthread_mutex_lock(&lock);
    struct module *m = module_of(f->module, f->build_id);
    const struct answer *got = NULL;
    if (m && m->mod) {
        uint64_t h = answer_hash_of(m, f->offset, exact);
        for (struct answer *a = nanswer_slots ? answers[h & (nanswer_slots - 1)] : NULL; a && !got;
             a = a->next)
            if (a->m == m && a->offset == f->offset && a->exact == exact) got = a;
        if (!got && !grow((void ***)&answers, &nanswer_slots, nanswers,
                          offsetof(struct answer, next), answer_hash)) {
            struct answer *a = calloc(1, sizeof *a);
            if (a) {
                *a = (struct answer){.m = m, .offset = f->offset, .exact = exact};
                look_up(m, a);
                size_t k = h & (nanswer_slots - 1);
                a->next = answers[k];
                answers[k] = a;
                nanswers++;
                got = a;
            }
        }
    }
    if (got && got->function) {
        f->function = got->function;
        f->function_offset = got->function_offset;
        f->file = got->file;
        f->line = got->line;
    }
    pthread_mutex_unlock(&lock);
}

void dr_symres_install(void)
{
    elf_version(EV_CURRENT);
    dr_set_resolver(dr_symres_frame);
}
