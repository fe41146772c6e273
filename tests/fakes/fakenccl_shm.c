/*
 * fakenccl shared-memory segments: creation, join, doorbell, detach.
 * See fakenccl_shm.h for the layout and the protocol.
 */
#include "fakenccl_shm.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define FN_SEG_MAGIC 0x666b6e63636c7631ULL /* "fkncclv1" */
#define FN_SEG_VERSION 2
#define FN_SEG_OPEN_WAIT_S 60

_Static_assert(sizeof(struct fn_coll_slot) <= 128, "coll slot header must fit 128 bytes");
_Static_assert(sizeof(struct fn_p2p_chan) <= 128, "p2p channel header must fit 128 bytes");

static uint64_t align_up(uint64_t v, uint64_t a)
{
    return (v + a - 1) / a * a;
}

static uint64_t clamp_page(uint64_t v, uint64_t lo, uint64_t hi)
{
    v = v < lo ? lo : v > hi ? hi : v;
    return v / 4096 * 4096;
}

/* Fills the size and offset fields of a header for `nranks` ranks. */
static void layout(struct fn_seg_hdr *h, int nranks)
{
    uint64_t n = (uint64_t)nranks;
    h->nranks = (uint32_t)nranks;
    h->coll_bytes = clamp_page((4u << 20) / n, 64u << 10, 1u << 20);
    h->ring_bytes = clamp_page((8u << 20) / (n * n), 4u << 10, 256u << 10);
    h->off_ranks = align_up(sizeof *h, 128);
    h->off_ctrl = align_up(h->off_ranks + n * sizeof(struct fn_rank_info), 128);
    h->off_coll = align_up(h->off_ctrl + n * sizeof(struct fn_ctrl_slot), 128);
    h->coll_stride = 128 + h->coll_bytes;
    h->off_p2p = h->off_coll + n * h->coll_stride;
    h->chan_stride = 128 + h->ring_bytes;
    h->total_bytes = align_up(h->off_p2p + n * n * h->chan_stride, 4096);
}

void fn_seg_name(const uint8_t key[FN_KEY_BYTES], char *buf, size_t cap)
{
    int n = snprintf(buf, cap, "/fakenccl-");
    for (int i = 0; i < FN_KEY_BYTES && n + 3 <= (int)cap; i++)
        n += snprintf(buf + n, cap - (size_t)n, "%02x", key[i]);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void nap_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/*
 * True when the segment behind fd was abandoned: every rank that claimed a
 * slot is a dead process (or, with none claimed, it is older than the open
 * wait), while not every rank joined. Nobody can complete such a
 * communicator any more, so its name may go. Reads the segment without
 * writing it; a segment of another layout version is left alone.
 */
static bool abandoned(int fd)
{
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size < (off_t)sizeof(struct fn_seg_hdr)) return false;
    size_t len = (size_t)st.st_size < (size_t)(1u << 20) ? (size_t)st.st_size : (1u << 20);
    const struct fn_seg_hdr *h = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
    if (h == MAP_FAILED) return false;
    bool dead = false;
    if (atomic_load(&h->magic) == FN_SEG_MAGIC && h->version == FN_SEG_VERSION &&
        h->off_ranks + (uint64_t)h->nranks * sizeof(struct fn_rank_info) <= len &&
        atomic_load(&h->joined) < h->nranks) {
        const struct fn_rank_info *ri = (const void *)((const char *)h + h->off_ranks);
        int claimed = 0, alive = 0;
        for (uint32_t r = 0; r < h->nranks; r++) {
            if (!atomic_load(&((struct fn_rank_info *)&ri[r])->present)) continue;
            claimed++;
            alive += kill(ri[r].pid, 0) == 0 || errno != ESRCH;
        }
        dead = claimed ? alive == 0 : time(NULL) - st.st_mtime > FN_SEG_OPEN_WAIT_S;
    }
    munmap((void *)h, len);
    return dead;
}

/*
 * Removes the names of abandoned segments (ranks killed before every rank
 * joined), so that jobs killed by tests or launchers do not pile up in
 * /dev/shm. Runs whenever this process creates a segment.
 */
static void sweep_abandoned(void)
{
    DIR *d = opendir("/dev/shm");
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        char name[sizeof e->d_name + 1];
        if (strncmp(e->d_name, "fakenccl-", 9)) continue;
        snprintf(name, sizeof name, "/%s", e->d_name);
        int fd = shm_open(name, O_RDONLY, 0);
        if (fd < 0) continue;
        if (abandoned(fd)) shm_unlink(name);
        close(fd);
    }
    closedir(d);
}

/* Creates the segment (we arrived first): size it, map it, initialise, publish the magic. */
static ncclResult_t create_seg(struct fn_seg *seg, int fd, int nranks)
{
    struct fn_seg_hdr tmpl;
    memset(&tmpl, 0, sizeof tmpl);
    layout(&tmpl, nranks);
    if (ftruncate(fd, (off_t)tmpl.total_bytes) != 0) {
        fn_warn("fakenccl: ftruncate of %s to %llu bytes failed: %s", seg->name,
                (unsigned long long)tmpl.total_bytes, strerror(errno));
        shm_unlink(seg->name);
        return ncclSystemError;
    }
    void *p = mmap(NULL, tmpl.total_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        fn_warn("fakenccl: mmap of %s failed: %s", seg->name, strerror(errno));
        shm_unlink(seg->name);
        return ncclSystemError;
    }
    struct fn_seg_hdr *h = p;
    h->version = FN_SEG_VERSION;
    layout(h, nranks);
    atomic_init(&h->aborted_by, -1);
    atomic_init(&h->revoked_by, -1);
    seg->hdr = h;
    seg->size = tmpl.total_bytes;
    atomic_store_explicit(&h->magic, FN_SEG_MAGIC, memory_order_release);
    return ncclSuccess;
}

/* Opens a segment that another rank created, waiting for it to be sized and initialised. */
static ncclResult_t open_seg(struct fn_seg *seg, int fd, int nranks, double deadline)
{
    struct stat st;
    for (;;) {
        if (fstat(fd, &st) != 0) {
            fn_warn("fakenccl: fstat of %s failed: %s", seg->name, strerror(errno));
            return ncclSystemError;
        }
        if (st.st_size >= (off_t)sizeof(struct fn_seg_hdr)) break;
        if (now_s() > deadline) goto timeout;
        nap_ms(1);
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        fn_warn("fakenccl: mmap of %s failed: %s", seg->name, strerror(errno));
        return ncclSystemError;
    }
    struct fn_seg_hdr *h = p;
    while (atomic_load_explicit(&h->magic, memory_order_acquire) != FN_SEG_MAGIC) {
        if (now_s() > deadline) {
            munmap(p, (size_t)st.st_size);
            goto timeout;
        }
        nap_ms(1);
    }
    if (h->version != FN_SEG_VERSION || h->nranks != (uint32_t)nranks ||
        h->total_bytes != (uint64_t)st.st_size) {
        fn_warn("fakenccl: communicator %s has %u ranks but this rank was told %d", seg->name,
                h->nranks, nranks);
        munmap(p, (size_t)st.st_size);
        return ncclInvalidUsage;
    }
    seg->hdr = h;
    seg->size = (size_t)st.st_size;
    return ncclSuccess;
timeout:
    fn_warn("fakenccl: %s was created but not initialised within %d s", seg->name,
            FN_SEG_OPEN_WAIT_S);
    return ncclSystemError;
}

ncclResult_t fn_seg_attach(struct fn_seg *seg, const uint8_t key[FN_KEY_BYTES], int nranks,
                           int rank, int dev)
{
    ncclResult_t res;
    double deadline = now_s() + FN_SEG_OPEN_WAIT_S;
    memset(seg, 0, sizeof *seg);
    fn_seg_name(key, seg->name, sizeof seg->name);
    for (;;) {
        int fd = shm_open(seg->name, O_RDWR | O_CREAT | O_EXCL, 0600);
        if (fd >= 0) {
            sweep_abandoned();
            res = create_seg(seg, fd, nranks);
            close(fd);
            break;
        }
        if (errno != EEXIST) goto sys_fail;
        fd = shm_open(seg->name, O_RDWR, 0);
        if (fd < 0 && errno == ENOENT)
            continue; /* unlinked between our two opens: try to create it again */
        if (fd < 0) goto sys_fail;
        res = open_seg(seg, fd, nranks, deadline);
        close(fd);
        break;
    }
    if (res != ncclSuccess) return res;
    struct fn_seg_hdr *h = seg->hdr;
    struct fn_rank_info *ri = fn_seg_rank(seg, rank);
    int32_t expected = 0;
    if (!atomic_compare_exchange_strong(&ri->present, &expected, 1)) {
        fn_warn("fakenccl: rank %d of %s joined twice", rank, seg->name);
        munmap(h, seg->size);
        seg->hdr = NULL;
        return ncclInvalidUsage;
    }
    ri->pid = (int32_t)getpid();
    ri->dev = dev;
    atomic_fetch_add(&h->attached, 1);
    if (atomic_fetch_add(&h->joined, 1) + 1 == (uint32_t)nranks) {
        int32_t zero = 0;
        if (atomic_compare_exchange_strong(&h->unlinked, &zero, 1)) shm_unlink(seg->name);
    }
    fn_seg_ring(seg);
    return ncclSuccess;
sys_fail:
    fn_warn("fakenccl: shm_open %s failed: %s", seg->name, strerror(errno));
    return ncclSystemError;
}

void fn_seg_detach(struct fn_seg *seg)
{
    struct fn_seg_hdr *h = seg->hdr;
    if (!h) return;
    fn_seg_ring(seg);
    if (atomic_fetch_sub(&h->attached, 1) == 1) {
        int32_t zero = 0;
        if (atomic_compare_exchange_strong(&h->unlinked, &zero, 1)) shm_unlink(seg->name);
    }
    munmap(h, seg->size);
    seg->hdr = NULL;
}

void fn_seg_forget(struct fn_seg *seg)
{
    if (seg->hdr) munmap(seg->hdr, seg->size);
    seg->hdr = NULL;
}

uint32_t fn_seg_bell(const struct fn_seg *seg)
{
    return atomic_load(&seg->hdr->bell);
}

void fn_seg_ring(const struct fn_seg *seg)
{
    struct fn_seg_hdr *h = seg->hdr;
    atomic_fetch_add(&h->bell, 1);
    if (atomic_load(&h->waiters) > 0)
        syscall(SYS_futex, (uint32_t *)&h->bell, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

void fn_seg_sleep(const struct fn_seg *seg, uint32_t seen, int timeout_ms)
{
    struct fn_seg_hdr *h = seg->hdr;
    struct timespec ts = {timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000L};
    atomic_fetch_add(&h->waiters, 1);
    if (atomic_load(&h->bell) == seen)
        syscall(SYS_futex, (uint32_t *)&h->bell, FUTEX_WAIT, seen, &ts, NULL, 0);
    atomic_fetch_sub(&h->waiters, 1);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts); /* one clock for every process of the machine */
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void fn_seg_mark_failed(const struct fn_seg *seg, int rank, bool revoke)
{
    struct fn_seg_hdr *h = seg->hdr;
    if (!h) return;
    uint64_t none_ns = 0;
    atomic_compare_exchange_strong(&h->failed_ns, &none_ns, now_ns());
    int32_t none = -1;
    atomic_compare_exchange_strong(revoke ? &h->revoked_by : &h->aborted_by, &none, rank);
    fn_seg_ring(seg);
}

int32_t fn_seg_peer_failed(const struct fn_seg *seg, int self, bool revokes)
{
    struct fn_seg_hdr *h = seg->hdr;
    if (!h || !fn_cfg()->abort_notify) return -1;
    uint64_t t = atomic_load(&h->failed_ns);
    if (t == 0 || now_ns() - t < (uint64_t)FN_ABORT_NOTIFY_MS * 1000000u) return -1;
    int32_t by = atomic_load(&h->aborted_by);
    if ((by < 0 || by == self) && revokes) by = atomic_load(&h->revoked_by);
    return by == self ? -1 : by;
}
