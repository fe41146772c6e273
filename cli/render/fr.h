/*
 * render/fr.h: ncclguard's dumps written as PyTorch Flight Recorder dumps (the
 * pickle torch writes per rank, version RN_FR_VERSION), which torchfrtrace and
 * dump/fr.h read. Two passes over the dumps of a job: rn_fr_learn sees every
 * dump first, to learn who the members of each communicator are (FR names a
 * group's members by global rank; each dump knows only its own place) and which
 * dump is each rank's newest; rn_fr_write then writes one rank's dump.
 *
 * The mapping (docs/analysis.md): a communicator is a process group named by its
 * id in hex, described by its commName ("undefined" when none); each op an entry
 * with profiling_name "nccl:<op>" ("nccl:send 0->1" names the comm ranks), its
 * seq as collective_seq_id (a send or receive: the last collective's, as torch
 * does, and its own p2p_seq as p2p_seq_id), its count as the tensor sizes, its
 * state as scheduled, started or completed (a failed or aborted op stays in
 * flight, as started), in the order of the ring (record_id: its index).
 * Ops recorded into a CUDA graph, and ops FR has no name for, are left out.
 *
 * Called from one thread.
 */
#ifndef NCCLGUARD_CLI_RENDER_FR_H
#define NCCLGUARD_CLI_RENDER_FR_H

#include <stddef.h>

#include "dump/dump.h"
#include "render/pickle.h"

#define RN_FR_VERSION "2.10" /* the newest torchfrtrace reads (torch 2.15 writes it) */

struct rn_fr;

/* NULL when out of memory. */
struct rn_fr *rn_fr_new(void);
void rn_fr_free(struct rn_fr *f);

/* The first pass: learns d's communicators and whether d is its rank's newest
 * dump. 0, or -1 when out of memory. */
int rn_fr_learn(struct rn_fr *f, const struct dr_dump *d);

/* 1 when d is the dump rn_fr_write writes for its rank (its rank's newest,
 * by time, then by path); 0 for an older one or a dump of no known rank. */
int rn_fr_chosen(const struct rn_fr *f, const struct dr_dump *d);

struct rn_fr_counts {
    size_t entries;    /* written */
    size_t left_out;   /* ops FR cannot hold (captured, unknown to FR) */
    size_t no_members; /* groups some of whose members no dump names */
};

/* The second pass: d as one FR dump, into p (a fresh writer, rn_pk_init'ed).
 * 0, or -1 when out of memory. */
int rn_fr_write(const struct rn_fr *f, const struct dr_dump *d, struct rn_pk *p,
                struct rn_fr_counts *n);

#endif
