/*
 * fakecuda_handle.c: the arena every handle (context, stream, event, graph, graph exec)
 * lives in.
 *
 * Why an arena: the real driver rejects a destroyed or foreign handle with an error, and a
 * worker may still reference an event or stream that was destroyed under it. Handles are
 * fixed-size slots of one large anonymous mapping (reserved, not committed: MAP_NORESERVE),
 * handed out with a lock-free bump counter and never freed or reused. A pointer is
 * classified by arithmetic alone (inside the used part, at a slot boundary) before it is
 * dereferenced, so garbage never crashes the fake, and a stale pointer still shows its
 * kind with alive == 0. The cost is one slot per handle ever created (FC_SLOT bytes).
 *
 * Thread safety: all functions are lock-free and callable from any thread.
 */
#include "fakecuda_internal.h"

#include <string.h>
#include <sys/mman.h>

#define FC_SLOT 512
#define FC_CHUNK_SLOTS 2048 /* 1 MiB: the unit in which the arena is shown to LeakSanitizer */

/*
 * Under LeakSanitizer the arena must be a root region: handles own heap memory (op pools,
 * graph nodes) that is reachable only from them. Weak, so it is NULL without a sanitizer.
 */
void __lsan_register_root_region(const void *p, size_t size) __attribute__((weak));

static char *g_base;          /* start of the mapping, set once */
static size_t g_slots;        /* capacity of the mapping in slots */
static _Atomic size_t g_used; /* slots handed out */
static pthread_mutex_t g_map_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(char *) g_base_pub;

_Static_assert(sizeof(struct fc_stream) <= FC_SLOT, "stream does not fit a handle slot");
_Static_assert(sizeof(struct fc_event) <= FC_SLOT, "event does not fit a handle slot");
_Static_assert(sizeof(struct fc_ctx) <= FC_SLOT, "context does not fit a handle slot");
_Static_assert(sizeof(struct fc_graph) <= FC_SLOT, "graph does not fit a handle slot");

/* Maps the arena on first use: 1 GiB of address space, halving on failure. */
static char *arena(void)
{
    char *b = atomic_load_explicit(&g_base_pub, memory_order_acquire);
    if (b) return b;
    pthread_mutex_lock(&g_map_lock);
    if (!g_base) {
        for (size_t bytes = (size_t)1 << 30; bytes >= ((size_t)1 << 22); bytes /= 2) {
            void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (p != MAP_FAILED) {
                g_base = p;
                g_slots = bytes / FC_SLOT;
                break;
            }
        }
        atomic_store_explicit(&g_base_pub, g_base, memory_order_release);
    }
    pthread_mutex_unlock(&g_map_lock);
    return g_base;
}

void *fc_handle_new(uint32_t kind, size_t size)
{
    if (size > FC_SLOT || !arena()) return NULL;
    size_t i = atomic_fetch_add(&g_used, 1);
    if (i >= g_slots) {
        atomic_fetch_sub(&g_used, 1);
        fc_complain("handle arena", "all %zu handle slots are used (handles are never reused)",
                    g_slots);
        return NULL;
    }
    struct fc_hdr *h = (struct fc_hdr *)(g_base + i * FC_SLOT);
    if (i % FC_CHUNK_SLOTS == 0 && __lsan_register_root_region)
        __lsan_register_root_region(h, (size_t)FC_CHUNK_SLOTS * FC_SLOT);
    memset(h, 0, FC_SLOT); /* a fresh anonymous page is zero already; keep it explicit */
    h->kind = kind;
    atomic_store_explicit(&h->alive, 1, memory_order_release);
    return h;
}

enum fc_handle_state fc_handle_state(const void *p, uint32_t kind)
{
    char *b = atomic_load_explicit(&g_base_pub, memory_order_acquire);
    if (!b || !p) return FC_HANDLE_FOREIGN;
    uintptr_t off = (uintptr_t)p - (uintptr_t)b;
    if ((uintptr_t)p < (uintptr_t)b || off % FC_SLOT ||
        off / FC_SLOT >= atomic_load_explicit(&g_used, memory_order_acquire))
        return FC_HANDLE_FOREIGN;
    const struct fc_hdr *h = p;
    if (h->kind != kind) return FC_HANDLE_FOREIGN;
    return atomic_load_explicit(&((struct fc_hdr *)h)->alive, memory_order_acquire)
               ? FC_HANDLE_ALIVE
               : FC_HANDLE_DEAD;
}

CUresult fc_handle_check(const void *p, uint32_t kind, const char *call, const char *what)
{
    enum fc_handle_state st = fc_handle_state(p, kind);
    if (st == FC_HANDLE_ALIVE) return CUDA_SUCCESS;
    if (st == FC_HANDLE_DEAD)
        fc_complain(call, "%s %p was destroyed", what, p);
    else
        fc_complain(call, "%p is not %s %s", p, strchr("aeiou", what[0]) ? "an" : "a", what);
    return CUDA_ERROR_INVALID_HANDLE;
}

bool fc_handle_kill(void *p)
{
    struct fc_hdr *h = p;
    return atomic_exchange(&h->alive, 0) == 1;
}
