/*
 * altstack.c: see altstack.h.
 *
 * The stack is mmap'ed (not malloc'ed: the allocator may be what failed) with
 * a guard page below it, so that a handler that overruns it faults instead of
 * writing into whatever lies below. It is unmapped by a thread-specific
 * destructor at the thread's exit, after sigaltstack has switched it off (or
 * back to the application's): a signal that comes between the two runs on the
 * thread's own stack, never on unmapped memory.
 */
#include "base/altstack.h"

#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/atomic.h"

struct mine {
    void *map; /* the mapping, guard page first */
    size_t map_size;
    stack_t before; /* the thread's alternate stack before ours (SS_DISABLE: none) */
};

static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static pthread_key_t key;
static ng_atomic(int) key_ok;
static NG_TLS struct mine own; /* this thread's, map NULL when none */

static void at_thread_exit(void *arg)
{
    struct mine *m = arg;
    if (!m || !m->map) return;
    stack_t cur;
    /* switched off, or the application's back, unless the thread is on it */
    if (sigaltstack(&m->before, &cur) != 0) return;
    munmap(m->map, m->map_size);
    m->map = NULL;
}

static void make_key(void)
{
    if (pthread_key_create(&key, at_thread_exit) == 0) ng_atomic_store_release(&key_ok, 1);
}

static size_t needed(void)
{
    long min = sysconf(_SC_MINSIGSTKSZ);
    return NG_ALTSTACK_SIZE + (min > 0 ? (size_t)min : (size_t)MINSIGSTKSZ);
}

int ncclguard_altstack_ensure(void)
{
    if (own.map) return 0;
    stack_t cur;
    if (sigaltstack(NULL, &cur) != 0) return -1;
    size_t want = needed();
    if (!(cur.ss_flags & SS_DISABLE) && cur.ss_size >= want) return 0; /* big enough */
    if (cur.ss_flags & SS_ONSTACK) return -1; /* in a handler on it: not now */
    pthread_once(&key_once, make_key);
    if (!ng_atomic_load_acquire(&key_ok)) return -1; /* no exit hook: it would leak */
    long page = sysconf(_SC_PAGESIZE);
    size_t pg = page > 0 ? (size_t)page : 4096;
    size_t size = (want + pg - 1) / pg * pg + pg;
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1,
                   0);
    if (p == MAP_FAILED) return -1;
    mprotect(p, pg, PROT_NONE); /* the guard page */
    stack_t ss = {.ss_sp = (char *)p + pg, .ss_size = size - pg, .ss_flags = 0};
    if (sigaltstack(&ss, NULL) != 0) {
        munmap(p, size);
        return -1;
    }
    own.before = cur;
    own.before.ss_flags &= SS_DISABLE; /* as handed back to sigaltstack */
    own.map = p;
    own.map_size = size;
    pthread_setspecific(key, &own);
    return 0;
}

size_t ncclguard_altstack_size(void)
{
    stack_t cur;
    if (sigaltstack(NULL, &cur) != 0 || (cur.ss_flags & SS_DISABLE)) return 0;
    return cur.ss_size;
}
