/*
 * stack_dl.c: one call site, built twice (libstackdl1.so, libstackdl2.so)
 * with frames of different sizes and otherwise the same code, so that the
 * second, loaded where the first was, has its call at the same address but
 * its caller's return address elsewhere. test_shim_stacks loads one, then
 * the other (dl_site_after_reload). The frame is filled with `fill`: a word
 * where the first library's frame held its return address.
 */
#include <stdint.h>

#ifndef PAD
#define PAD 40
#endif

typedef int64_t (*ng_capture_fn)(void);

int64_t stack_dl_site(ng_capture_fn capture, uint64_t fill);

__attribute__((noinline)) int64_t stack_dl_site(ng_capture_fn capture, uint64_t fill)
{
    volatile uint64_t pad[PAD];
    for (int i = 0; i < PAD; i++) pad[i] = fill;
    int64_t r = capture();
    __asm__ volatile("" ::"r"(pad) : "memory");
    return r;
}
