/*
 * fakenccl shared-memory transport: one POSIX shared-memory segment per
 * communicator, named after a 16-byte key derived from the ncclUniqueId
 * (or, for split and shrink, from the parent's key). Every rank of the
 * communicator, in whatever process, maps it.
 *
 * Layout (all offsets 128-byte aligned):
 *   header   magic, sizes, join counters, abort/revoke flags, the doorbell
 *   ranks    one fn_rank_info per rank (present, pid, device)
 *   ctrl     one fn_ctrl_slot per rank: small all-gathers for split/shrink
 *   coll     one fn_coll_slot + coll_bytes of staging per rank
 *   p2p      one fn_p2p_chan + ring_bytes per ordered (sender, receiver) pair
 *
 * Synchronisation is lock-free: monotonic 64-bit counters published with
 * release stores and read with acquire loads (address-free C11 atomics work
 * across processes), plus one futex doorbell per segment that waiters sleep
 * on. Any state change rings the doorbell; waiters always use a timeout, so
 * a lost wake-up only costs latency. Nothing in the segment is a lock, so a
 * rank that dies never leaves a lock held (the "robust" requirement).
 *
 * Lifetime: the first rank to arrive creates the segment (O_EXCL) and
 * initialises it; the others wait for its magic. The rank that completes the
 * join unlinks the name, so a finished or crashed job leaves nothing in
 * /dev/shm; a segment abandoned before every rank joined is unlinked by the
 * last rank that detaches, and one whose ranks were all killed before the
 * join completed is swept by the next process that creates a segment.
 */
#ifndef FAKENCCL_SHM_H
#define FAKENCCL_SHM_H

#include "fakenccl_core.h"

#include <stdatomic.h>

#define FN_KEY_BYTES 16
#define FN_MAX_RANKS 1024

struct fn_seg_hdr {
    _Atomic uint64_t magic; /* FN_SEG_MAGIC once initialised */
    uint32_t version, nranks;
    uint64_t total_bytes, coll_bytes, ring_bytes;
    uint64_t off_ranks, off_ctrl, off_coll, coll_stride, off_p2p, chan_stride;
    _Atomic uint32_t bell;      /* doorbell: incremented on every state change */
    _Atomic uint32_t waiters;   /* threads sleeping on the doorbell */
    _Atomic uint32_t joined;    /* ranks that joined, ever */
    _Atomic uint32_t attached;  /* ranks still mapped */
    _Atomic int32_t unlinked;   /* the name was removed */
    _Atomic int32_t aborted_by; /* first rank that called ncclCommAbort, or -1 */
    _Atomic int32_t revoked_by; /* first rank that called ncclCommRevoke, or -1 */
    _Atomic uint64_t failed_ns; /* CLOCK_MONOTONIC time of the first abort or revoke */
};

struct fn_rank_info {
    _Atomic int32_t present;
    int32_t pid, dev;
    _Atomic int32_t connected; /* reached its first nonblocking launch */
};

/* One record of a control all-gather (split: color/key; shrink: exclusion hash). */
struct fn_ctrl_rec {
    uint32_t kind;
    int32_t a, b;
    uint32_t pad;
    uint64_t ordinal, tag;
};

struct fn_ctrl_slot {
    _Atomic uint64_t posted; /* epoch whose record is in `rec` */
    _Atomic uint64_t done;   /* last epoch this rank finished reading */
    struct fn_ctrl_rec rec;
};

/* What a rank says about the collective it is executing, checked by every peer. */
struct fn_coll_desc {
    uint64_t seq;
    uint64_t count;
    int32_t kind, dtype, redop, root;
};

struct fn_coll_slot {
    _Atomic uint64_t posted; /* last step whose chunk is staged here */
    _Atomic uint64_t done;   /* last step this rank finished reading from all slots */
    struct fn_coll_desc desc;
};

struct fn_p2p_chan {
    _Atomic uint64_t hdr_seq;  /* p2p seq of the message announced below */
    _Atomic uint64_t head;     /* bytes ever written by the sender */
    _Atomic uint64_t tail;     /* bytes ever consumed by the receiver */
    _Atomic uint64_t acked;    /* last p2p seq fully received */
    _Atomic uint64_t mismatch; /* p2p seq the receiver found mismatched, or 0 */
    uint64_t count;
    int32_t dtype, pad;
};

/* A process's mapping of one segment. */
struct fn_seg {
    struct fn_seg_hdr *hdr;
    size_t size;
    char name[48];
};

/* The shm name of a key: "/fakenccl-" and 32 hex digits. */
void fn_seg_name(const uint8_t key[FN_KEY_BYTES], char *buf, size_t cap);

/*
 * Creates or opens the segment of `key`, checks that it is for `nranks`
 * ranks and claims `rank` in it. Waits (60 s at most) for another process
 * that is still initialising the segment. Blocking, any thread.
 */
ncclResult_t fn_seg_attach(struct fn_seg *seg, const uint8_t key[FN_KEY_BYTES], int nranks,
                           int rank, int dev);
/* Unmaps; the last rank out unlinks a name that is still there. */
void fn_seg_detach(struct fn_seg *seg);
/* Forgets a mapping inherited across fork() without touching the shared counters. */
void fn_seg_forget(struct fn_seg *seg);

/*
 * Abort and revoke are local in NCCL (init.cc sets this rank's abort flags
 * only): fn_seg_mark_failed writes down that `rank` stopped taking part, as
 * the state a network transport would see, and wakes this process's own
 * waiters. Peers learn of it only through fn_seg_peer_failed.
 */
void fn_seg_mark_failed(const struct fn_seg *seg, int rank, bool revoke);
/*
 * The peer whose abort (or, with `revokes`, revoke) rank `self` sees as a
 * failed connection now, or -1. Always -1 unless FAKENCCL_ABORT_NOTIFY=1,
 * and then only once FN_ABORT_NOTIFY_MS have passed since the first abort
 * or revoke. A revoked peer still answers the bootstrap exchanges of split
 * and shrink, so those pass revokes = false.
 */
int32_t fn_seg_peer_failed(const struct fn_seg *seg, int self, bool revokes);
#define FN_ABORT_NOTIFY_MS 1000

/* Doorbell: read the bell before checking a condition, then sleep if nothing changed. */
uint32_t fn_seg_bell(const struct fn_seg *seg);
void fn_seg_ring(const struct fn_seg *seg);
void fn_seg_sleep(const struct fn_seg *seg, uint32_t seen, int timeout_ms);

static inline char *fn_seg_at(const struct fn_seg *seg, uint64_t off)
{
    return (char *)seg->hdr + off;
}
static inline struct fn_rank_info *fn_seg_rank(const struct fn_seg *seg, int r)
{
    return (struct fn_rank_info *)fn_seg_at(seg, seg->hdr->off_ranks) + r;
}
static inline struct fn_ctrl_slot *fn_seg_ctrl(const struct fn_seg *seg, int r)
{
    return (struct fn_ctrl_slot *)fn_seg_at(seg, seg->hdr->off_ctrl) + r;
}
static inline struct fn_coll_slot *fn_seg_coll(const struct fn_seg *seg, int r)
{
    return (struct fn_coll_slot *)fn_seg_at(seg, seg->hdr->off_coll +
                                                     (uint64_t)r * seg->hdr->coll_stride);
}
/* The staging bytes that follow a coll slot. */
static inline char *fn_seg_coll_data(const struct fn_seg *seg, int r)
{
    return (char *)fn_seg_coll(seg, r) + 128;
}
static inline struct fn_p2p_chan *fn_seg_chan(const struct fn_seg *seg, int from, int to)
{
    uint64_t i = (uint64_t)from * seg->hdr->nranks + (uint64_t)to;
    return (struct fn_p2p_chan *)fn_seg_at(seg, seg->hdr->off_p2p + i * seg->hdr->chan_stride);
}
static inline char *fn_seg_chan_ring(const struct fn_seg *seg, int from, int to)
{
    return (char *)fn_seg_chan(seg, from, to) + 128;
}

#endif
