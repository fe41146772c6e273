/*
 * test_shim_symbolize: frame names in the process (evidence/symbolize.h) never
 * name a function the address is not in. libsymsites.so (sym_sites.c) holds an
 * exported function, a static one after it, and an exported label of size 0;
 * libsymsites-stripped.so is the same without .symtab, so that only .dynsym
 * and dladdr can name its frames.
 */
#include <dlfcn.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

#include "check_main.h"
#include "evidence/symbolize.h"

/* The library beside the test program, opened. */
static void *open_sites(const char *name, char *path)
{
    ssize_t n = readlink("/proc/self/exe", path, PATH_MAX - 64);
    ck_assert_int_gt(n, 0);
    path[n] = '\0';
    strcpy(strrchr(path, '/') + 1, name);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg(h, "%s", dlerror());
    return h;
}

static uintptr_t sym(void *h, const char *name)
{
    void *p = dlsym(h, name);
    ck_assert_msg(p, "%s", name);
    return (uintptr_t)p;
}

NG_TEST(static_function_named_from_symtab)
{
    char path[PATH_MAX];
    void *h = open_sites("libsymsites.so", path);
    uintptr_t at = ((uintptr_t(*)(void))sym(h, "sym_sites_static_at"))();
    struct ng_symbol s;
    ncclguard_symbolize_begin();
    ncclguard_symbolize_at(at, 1, &s);
    ck_assert_str_eq(s.module, path);
    ck_assert_ptr_nonnull(s.function);
    ck_assert_str_eq(s.function, "sym_sites_hidden");
    ck_assert_int_eq((int)s.function_offset, 2);
    ncclguard_symbolize_end();
}
END_TEST

NG_TEST(stripped_gives_module_and_offset_only)
{
    char path[PATH_MAX];
    void *h = open_sites("libsymsites-stripped.so", path);
    uintptr_t at = ((uintptr_t(*)(void))sym(h, "sym_sites_static_at"))();
    uintptr_t exported = sym(h, "sym_sites_exported");
    ck_assert(exported < at); /* the nearest exported function below */
    Dl_info info;
    ck_assert(dladdr((void *)exported, &info));
    struct ng_symbol s;
    ncclguard_symbolize_begin();
    for (int exact = 0; exact < 2; exact++) {
        ncclguard_symbolize_at(at, exact, &s);
        ck_assert_str_eq(s.module, path);
        ck_assert_uint_eq(s.offset, at - (uintptr_t)info.dli_fbase);
        ck_assert_msg(!s.function, "named %s", s.function);
        ck_assert_ptr_nonnull(s.build_id);
    }
    ncclguard_symbolize_end();
}
END_TEST

/* dladdr answers a size-0 symbol for its own address: no name. */
NG_TEST(sizeless_symbol_names_nothing)
{
    char path[PATH_MAX];
    void *h = open_sites("libsymsites-stripped.so", path);
    uintptr_t label = sym(h, "sym_sites_sizeless");
    struct ng_symbol s;
    ncclguard_symbolize_begin();
    ncclguard_symbolize_at(label, 1, &s);
    ck_assert_str_eq(s.module, path);
    ck_assert_msg(!s.function, "named %s", s.function);
    ncclguard_symbolize_at(label + 1, 0, &s); /* a return address just after it */
    ck_assert_msg(!s.function, "named %s", s.function);
    ncclguard_symbolize_end();
}
END_TEST

int main(void)
{
    return ng_check_run(ng_check_suite("symbolize", "names", 0, ng_check_tests(), NULL));
}
