/*
 * sym_sites.c: functions for test_shim_symbolize, in a library of their own
 * (libsymsites.so, and libsymsites-stripped.so without .symtab): an exported
 * function, then a static one, then an exported label without a size.
 */
#include <stdint.h>

volatile int sym_sites_sink;

uintptr_t sym_sites_static_at(void);
void sym_sites_exported(int n);

__attribute__((noinline)) void sym_sites_exported(int n)
{
    for (int i = 0; i < n; i++) sym_sites_sink += i;
}

__attribute__((noinline)) static void sym_sites_hidden(int n)
{
    for (int i = 0; i < n; i++) sym_sites_sink ^= i * 3;
}

/* An address inside sym_sites_hidden, past its first byte. */
uintptr_t sym_sites_static_at(void)
{
    sym_sites_hidden(sym_sites_sink & 1);
    return (uintptr_t)&sym_sites_hidden + 2;
}

/* A symbol of size 0 (no .size): it holds no address, not even its own. */
__asm__(".text\n"
        ".globl sym_sites_sizeless\n"
        ".type sym_sites_sizeless, %function\n"
        "sym_sites_sizeless:\n"
        "\tret\n");
