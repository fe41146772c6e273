/*
 * analyze/rank.c: the causes that one rank's dump shows by itself: a crash, and
 * an asynchronous NCCL error; and whether the job is stuck at all.
 */
#include "analyze/rank.h"

#include <stdio.h>
#include <string.h>

#include "analyze/intern.h"
#include "analyze/model.h"
#include "dump/dump.h"

#define NCCL_REMOTE_ERROR 6

void an_add_finding(struct an *a, const struct an_finding *f)
{
    a->findings = an_grow(a->findings, &a->nfindings, &a->capfindings, sizeof *a->findings);
    a->findings[a->nfindings - 1] = *f;
}

static struct an_finding finding(const struct an *a, int cause, int32_t r)
{
    struct an_finding f = {.cause = cause,
                           .rank = r,
                           .comm = AN_NONE,
                           .peer = -1,
                           .grank = r >= 0 ? a->ranks[r].rank : -1,
                           .comm_rank = -1,
                           .op = DR_OP_UNKNOWN};
    f.blocker.comm = AN_NONE;
    return f;
}

/* Something is stuck: an op timed out, a rank crashed or was stopped, or an op
 * has been in flight for AN_STUCK_NS, or a Flight Recorder dump has one in flight.
 * A snapshot of a healthy job (a dump on
 * request) has ops in flight too, and then nobody is blamed for them. */
int an_stuck(const struct an *a)
{
    static const char *const reasons[] = {"timeout", "init_timeout", "crash", "sigterm"};
    for (size_t i = 0; i < a->nranks; i++) {
        const struct an_rank *r = &a->ranks[i];
        if (r->timeouts || r->crashed || r->failed_result) return 1;
        const char *why = an_intern_get(&a->strs, r->reason);
        for (size_t k = 0; why && k < sizeof reasons / sizeof reasons[0]; k++)
            if (!strcmp(why, reasons[k])) return 1;
        /* torch writes a Flight Recorder dump when a collective timed out or failed,
         * or when asked because the job hangs: one with a collective in flight is
         * taken for a hang (docs/analysis.md) */
        if (why && !strcmp(why, "torch_fr") && r->ninflight) return 1;
        if (r->oldest_ns && r->time_ns - r->oldest_ns >= AN_STUCK_NS) return 1;
        for (uint32_t c = 0; c < r->nrc; c++)
            if (a->rcomms[r->rc0 + c].async_error) return 1;
    }
    return 0;
}

void an_detect_crashed(struct an *a)
{
    for (size_t i = 0; i < a->nranks; i++) {
        if (!a->ranks[i].crashed) continue;
        struct an_finding f = finding(a, AN_CRASHED, (int32_t)i);
        f.detail = an_intern_str(&a->strs,
                                 "died of a signal (its dump was written by the crash handler)");
        an_add_finding(a, &f);
    }
}

/* Ranks whose communicators report an asynchronous error, or whose ops failed.
 * A remote error on a peer is often the echo of the first rank's own: when
 * some ranks have another error, they are the ones named. */
void an_detect_async_error(struct an *a)
{
    size_t nerr = 0, nlocal = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < a->nranks; i++) {
            const struct an_rank *r = &a->ranks[i];
            int64_t err = 0;
            uint32_t comm = AN_NONE;
            for (uint32_t c = 0; c < r->nrc && !err; c++)
                if (a->rcomms[r->rc0 + c].async_error) {
                    err = a->rcomms[r->rc0 + c].async_error;
                    comm = a->rcomms[r->rc0 + c].comm;
                }
            if (!err) err = r->failed_result;
            if (!err) continue;
            if (pass == 0) {
                nerr++;
                nlocal += err != NCCL_REMOTE_ERROR;
                continue;
            }
            if (nlocal && err == NCCL_REMOTE_ERROR) continue;
            if (!nlocal && nerr * 2 > a->nranks && nerr > 1) continue; /* everyone: no culprit */
            struct an_finding f = finding(a, AN_ASYNC_ERROR, (int32_t)i);
            f.comm = comm;
            char buf[256], ras[160] = "";
            if (r->ras) snprintf(ras, sizeof ras, "; RAS: %.120s", an_intern_get(&a->strs, r->ras));
            snprintf(buf, sizeof buf, "NCCL reported error %lld (%s)%s%s", (long long)err,
                     err == NCCL_REMOTE_ERROR ? "ncclRemoteError"
                     : err == 2               ? "ncclSystemError"
                     : err == 3               ? "ncclInternalError"
                                              : "ncclResult_t",
                     comm == AN_NONE ? " on a failed op" : " through ncclCommGetAsyncError", ras);
            f.detail = an_intern_str(&a->strs, buf);
            an_add_finding(a, &f);
        }
        if (pass == 0 && !nlocal && nerr * 2 > a->nranks && nerr > 1)
            an_note(a,
                    "%zu of %zu ranks report an NCCL error, all ncclRemoteError: the first "
                    "failure is not in these dumps",
                    nerr, a->nranks);
    }
}
