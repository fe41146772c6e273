/*
 * stack_sites.c: call sites for test_shim_stacks, in a library of their own
 * (libstacksites.so): the stack table leaves out the frames of the object that
 * holds the shim, which in a unit test is the test program itself, as a job's
 * frames are outside libncclguard.so.
 *
 * Built with -fno-optimize-sibling-calls, and every function is noinline, so
 * that each level is a frame of its own.
 */
#include <stdint.h>

typedef int64_t (*ng_capture_fn)(void);

int64_t stack_sites_path(unsigned path, int levels, ng_capture_fn capture);
int64_t stack_sites_rec(int d, ng_capture_fn capture);

/* Two call sites for each level: the return addresses tell the paths apart. */
__attribute__((noinline)) static int64_t site_a(unsigned path, int levels, ng_capture_fn capture)
{
    int64_t r = stack_sites_path(path, levels, capture);
    __asm__ volatile("" ::: "memory");
    return r;
}

__attribute__((noinline)) static int64_t site_b(unsigned path, int levels, ng_capture_fn capture)
{
    int64_t r = stack_sites_path(path, levels, capture);
    __asm__ volatile("" ::: "memory");
    return r;
}

/* capture() from one of 2^levels stacks: bit i of path picks the call site of
 * level i. */
__attribute__((noinline)) int64_t stack_sites_path(unsigned path, int levels, ng_capture_fn capture)
{
    if (levels == 0) return capture();
    return path & 1 ? site_a(path >> 1, levels - 1, capture)
                    : site_b(path >> 1, levels - 1, capture);
}

/* capture() d calls deep into a recursion: the same return address d times. */
__attribute__((noinline)) int64_t stack_sites_rec(int d, ng_capture_fn capture)
{
    if (d == 0) return capture();
    int64_t r = stack_sites_rec(d - 1, capture);
    __asm__ volatile("" ::: "memory");
    return r;
}
