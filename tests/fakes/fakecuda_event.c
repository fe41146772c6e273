/*
 * fakecuda_event.c: events.
 *
 * An event belongs to the context current at creation. Each cuEventRecord issues the next
 * generation and pushes a RECORD op; the worker that passes it stores the host clock and
 * raises done_gen. The event is complete when done_gen >= rec_gen, so an event never
 * recorded is complete, and re-recording moves it to the new position. cuStreamWaitEvent
 * waits for the stream position of the latest record (its stream and ticket), not for the
 * event object, which may be re-recorded or destroyed meanwhile.
 *
 * Recorded into a capturing stream, an event becomes a graph node: until it is recorded
 * again outside capture, query, synchronize and elapsed time fail with
 * CUDA_ERROR_CAPTURED_EVENT, and a stream that waits on it joins the capture.
 *
 * Cost: cuEventQuery takes no lock (atomics only); cuEventRecord takes the event's own lock
 * and the stream's queue lock, neither of which a worker holds while it runs an op, and
 * allocates nothing once the stream's op pool has grown.
 *
 * FAKECUDA_INSTANT_EVENTS=1 (benchmarks of the shim on streams without work, such as
 * FAKENCCL_NOOP=1 runs): an event recorded outside capture completes at once, with no
 * queue op and a coarse clock (times have its resolution, a few ms), so that the driver's
 * own cost does not hide the caller's.
 */
#include "fakecuda_internal.h"

#define FC_EVENT_FLAGS (CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS)

CUresult fc_event_lookup(CUevent h, const char *call, struct fc_event **out)
{
    FC_TRY(fc_handle_check(h, FC_KIND_EVENT, call, "event"));
    struct fc_event *ev = (struct fc_event *)h;
    if (!fc_ctx_usable(ev->ctx, ev->ctx_gen)) {
        fc_complain(call, "the context of event %p was destroyed", (void *)h);
        return CUDA_ERROR_INVALID_HANDLE;
    }
    *out = ev;
    return CUDA_SUCCESS;
}

/* Called by the worker that reaches a RECORD op. */
void fc_event_passed(struct fc_event *ev, uint64_t gen)
{
    uint64_t now = fc_now_ns();
    pthread_mutex_lock(&ev->lock);
    if (gen > atomic_load(&ev->done_gen)) {
        ev->done_ns = now;
        atomic_store(&ev->done_gen, gen);
    }
    pthread_mutex_unlock(&ev->lock);
}

FC_API CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
    FC_TRY(fc_enter("cuEventCreate"));
    if (!phEvent) return CUDA_ERROR_INVALID_VALUE;
    if ((Flags & ~(unsigned)FC_EVENT_FLAGS) ||
        ((Flags & CU_EVENT_INTERPROCESS) && !(Flags & CU_EVENT_DISABLE_TIMING))) {
        fc_complain("cuEventCreate", "invalid flags 0x%x", Flags);
        return CUDA_ERROR_INVALID_VALUE;
    }
    struct fc_ctx *ctx;
    FC_TRY(fc_ctx_current("cuEventCreate", &ctx));
    struct fc_event *ev = fc_handle_new(FC_KIND_EVENT, sizeof *ev);
    if (!ev) return CUDA_ERROR_OUT_OF_MEMORY;
    ev->flags = Flags;
    ev->ctx = ctx;
    ev->ctx_gen = atomic_load(&ctx->gen);
    pthread_mutex_init(&ev->lock, NULL);
    *phEvent = (CUevent)ev;
    return CUDA_SUCCESS;
}

static CUresult event_destroy(CUevent h, const char *call)
{
    FC_TRY(fc_enter(call));
    struct fc_event *ev;
    FC_TRY(fc_event_lookup(h, call, &ev));
    fc_handle_kill(ev); /* a queued RECORD op still finds the slot: nothing is freed */
    return CUDA_SUCCESS;
}

FC_API CUresult cuEventDestroy(CUevent hEvent)
{
    return event_destroy(hEvent, "cuEventDestroy");
}
FC_API CUresult cuEventDestroy_v2(CUevent hEvent)
{
    return event_destroy(hEvent, "cuEventDestroy_v2");
}

/* Records ev at the current end of s, or into the capture of s. */
CUresult fc_event_record(struct fc_event *ev, struct fc_stream *s, unsigned flags, const char *call)
{
    if (ev->ctx != s->ctx || !fc_ctx_usable(s->ctx, ev->ctx_gen)) {
        fc_complain(call, "event %p belongs to context %p but stream %p to context %p", (void *)ev,
                    (void *)ev->ctx, (void *)s, (void *)s->ctx);
        return CUDA_ERROR_INVALID_HANDLE;
    }
    if (fc_stream_capturing(s)) {
        struct fc_work w = {.kind = FC_WORK_NODE_RECORD,
                            .u.node = {ev, (flags & CU_EVENT_RECORD_EXTERNAL) != 0}};
        bool captured;
        uint64_t cap_id;
        int64_t node;
        FC_TRY(fc_capture_add(s, &w, call, &captured, &cap_id, &node));
        if (captured) {
            pthread_mutex_lock(&ev->lock);
            ev->cap_id = cap_id;
            ev->cap_stream = s;
            ev->cap_node = node;
            atomic_store(&ev->captured, true);
            pthread_mutex_unlock(&ev->lock);
            return CUDA_SUCCESS;
        }
    }
    if (flags & CU_EVENT_RECORD_EXTERNAL) {
        fc_complain(call, "CU_EVENT_RECORD_EXTERNAL is only valid during stream capture");
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (s->kind == FC_STREAM_LEGACY) FC_TRY(fc_capture_check_legacy(s, true, call));
    if (!(ev->flags & CU_EVENT_DISABLE_TIMING)) fc_count_timed_record();
    fc_queue_wait_room(s); /* not under ev->lock: the worker passing ev's last record needs it */
    pthread_mutex_lock(&ev->lock);
    uint64_t gen = atomic_load(&ev->rec_gen) + 1, ticket;
    if (fc_cfg.instant_events) { /* cheap: a coarse clock, no full barriers */
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
        ev->done_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
        atomic_store_explicit(&ev->captured, false, memory_order_relaxed);
        atomic_store_explicit(&ev->rec_gen, gen, memory_order_relaxed);
        atomic_store_explicit(&ev->done_gen, gen, memory_order_release);
        pthread_mutex_unlock(&ev->lock);
        return CUDA_SUCCESS;
    }
    struct fc_work w = {.kind = FC_WORK_RECORD, .u.record = {ev, gen}};
    CUresult r = fc_queue_push_now(s, &w, call, &ticket);
    if (r == CUDA_SUCCESS) {
        ev->rec_stream = s;
        ev->rec_ticket = ticket;
        atomic_store(&ev->captured, false);
        atomic_store(&ev->rec_gen, gen);
    }
    pthread_mutex_unlock(&ev->lock);
    return r;
}

static CUresult event_record(CUevent h, CUstream hs, unsigned flags, bool ptds, const char *call)
{
    FC_TRY(fc_enter(call));
    struct fc_event *ev;
    FC_TRY(fc_event_lookup(h, call, &ev));
    if (flags & ~(unsigned)CU_EVENT_RECORD_EXTERNAL) {
        fc_complain(call, "invalid flags 0x%x", flags);
        return CUDA_ERROR_INVALID_VALUE;
    }
    struct fc_stream *s;
    FC_TRY(fc_stream_resolve(hs, ptds, call, &s));
    return fc_event_record(ev, s, flags, call);
}

FC_API CUresult cuEventRecord(CUevent hEvent, CUstream hStream)
{
    return event_record(hEvent, hStream, 0, false, "cuEventRecord");
}

FC_API CUresult cuEventRecord_ptsz(CUevent hEvent, CUstream hStream)
{
    return event_record(hEvent, hStream, 0, true, "cuEventRecord_ptsz");
}

FC_API CUresult cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags)
{
    return event_record(hEvent, hStream, flags, false, "cuEventRecordWithFlags");
}

FC_API CUresult cuEventRecordWithFlags_ptsz(CUevent hEvent, CUstream hStream, unsigned int flags)
{
    return event_record(hEvent, hStream, flags, true, "cuEventRecordWithFlags_ptsz");
}

/* Common checks of query and synchronize; *ev is the event when SUCCESS. */
static CUresult event_probe(CUevent h, const char *call, struct fc_event **out)
{
    FC_TRY(fc_enter(call));
    FC_TRY(fc_event_lookup(h, call, out));
    FC_TRY(fc_capture_check_unsafe(call));
    if (atomic_load(&(*out)->captured)) {
        fc_complain(call, "event %p was last recorded in a capturing stream", (void *)h);
        return CUDA_ERROR_CAPTURED_EVENT;
    }
    return CUDA_SUCCESS;
}

static bool event_complete(struct fc_event *ev)
{
    uint64_t rec = atomic_load_explicit(&ev->rec_gen, memory_order_acquire);
    return atomic_load_explicit(&ev->done_gen, memory_order_acquire) >= rec;
}

FC_API CUresult cuEventQuery(CUevent hEvent)
{
    struct fc_event *ev;
    FC_TRY(event_probe(hEvent, "cuEventQuery", &ev));
    return event_complete(ev) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

struct gen_wait {
    struct fc_event *ev;
    uint64_t target;
};

static bool gen_reached(void *arg)
{
    struct gen_wait *g = arg;
    return atomic_load(&g->ev->done_gen) >= g->target;
}

FC_API CUresult cuEventSynchronize(CUevent hEvent)
{
    struct fc_event *ev;
    FC_TRY(event_probe(hEvent, "cuEventSynchronize", &ev));
    struct gen_wait g = {ev, atomic_load(&ev->rec_gen)};
    fc_progress_wait(gen_reached, &g);
    return CUDA_SUCCESS;
}

/* Host-clock time at which a worker passed ev, after the checks of cuEventElapsedTime. */
static CUresult event_time(struct fc_event *ev, const char *call, uint64_t *ns)
{
    if (ev->flags & CU_EVENT_DISABLE_TIMING) {
        fc_complain(call, "event %p was created with CU_EVENT_DISABLE_TIMING", (void *)ev);
        return CUDA_ERROR_INVALID_HANDLE;
    }
    if (atomic_load(&ev->captured)) {
        fc_complain(call, "event %p was last recorded in a capturing stream", (void *)ev);
        return CUDA_ERROR_CAPTURED_EVENT;
    }
    if (atomic_load(&ev->rec_gen) == 0) {
        fc_complain(call, "event %p was never recorded", (void *)ev);
        return CUDA_ERROR_INVALID_HANDLE;
    }
    pthread_mutex_lock(&ev->lock);
    bool done = atomic_load(&ev->done_gen) >= atomic_load(&ev->rec_gen);
    *ns = ev->done_ns;
    pthread_mutex_unlock(&ev->lock);
    return done ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

static CUresult elapsed(float *ms, CUevent hstart, CUevent hend, const char *call)
{
    FC_TRY(fc_enter(call));
    struct fc_event *a, *b;
    FC_TRY(fc_event_lookup(hstart, call, &a));
    FC_TRY(fc_event_lookup(hend, call, &b));
    if (!ms) return CUDA_ERROR_INVALID_VALUE;
    uint64_t ta, tb;
    FC_TRY(event_time(a, call, &ta));
    FC_TRY(event_time(b, call, &tb));
    *ms = (float)((double)((int64_t)(tb - ta)) / 1e6);
    return CUDA_SUCCESS;
}

FC_API CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    return elapsed(pMilliseconds, hStart, hEnd, "cuEventElapsedTime");
}

FC_API CUresult cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    return elapsed(pMilliseconds, hStart, hEnd, "cuEventElapsedTime_v2");
}

/* ------------------------------- cuStreamWaitEvent ------------------------------- */

/* Makes s wait for the latest record of ev (see the file comment for captured events). */
CUresult fc_event_wait(struct fc_stream *s, struct fc_event *ev, unsigned flags, const char *call)
{
    if (flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL) {
        fc_complain(call, "invalid flags 0x%x", flags);
        return CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_lock(&ev->lock);
    bool captured = atomic_load(&ev->captured);
    uint64_t cap_id = ev->cap_id, rec_gen = atomic_load(&ev->rec_gen), ticket = ev->rec_ticket;
    struct fc_stream *cap_stream = ev->cap_stream, *rec_stream = ev->rec_stream;
    int64_t cap_node = ev->cap_node;
    pthread_mutex_unlock(&ev->lock);
    if (captured) {
        bool handled;
        FC_TRY(fc_capture_wait_event(s, cap_id, cap_stream, cap_node, &handled, call));
        if (handled) return CUDA_SUCCESS;
        fc_complain(call, "event %p was last recorded in a capture that has ended", (void *)ev);
        return CUDA_ERROR_CAPTURED_EVENT;
    }
    if (rec_gen == 0 && !(flags & CU_EVENT_WAIT_EXTERNAL))
        return CUDA_SUCCESS; /* never recorded: complete, nothing to wait for */
    if (fc_cfg.instant_events && !fc_stream_capturing(s))
        return CUDA_SUCCESS; /* recorded complete: nothing to wait for */
    if (fc_stream_capturing(s)) {
        if (!(flags & CU_EVENT_WAIT_EXTERNAL)) {
            /* a wait on work outside the capture crosses its boundary: invalidates it */
            if (fc_capture_invalidate(s)) {
                fc_complain(call,
                            "capturing stream %p waits on event %p recorded outside "
                            "the capture",
                            (void *)s, (void *)ev);
                return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
            }
        } else {
            struct fc_work w = {.kind = FC_WORK_NODE_WAIT, .u.node = {ev, true}};
            bool in_capture;
            FC_TRY(fc_capture_add(s, &w, call, &in_capture, NULL, NULL));
            if (in_capture) return CUDA_SUCCESS;
        }
    }
    if (flags & CU_EVENT_WAIT_EXTERNAL) {
        fc_complain(call, "CU_EVENT_WAIT_EXTERNAL is only valid during stream capture");
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (rec_gen == 0) return CUDA_SUCCESS;
    struct fc_work w = {.kind = FC_WORK_WAIT, .u.wait = {rec_stream, ticket}};
    return fc_submit(s, &w, call);
}

static CUresult stream_wait_event(CUstream hs, CUevent h, unsigned flags, bool ptds,
                                  const char *call)
{
    FC_TRY(fc_enter(call));
    struct fc_stream *s;
    struct fc_event *ev;
    FC_TRY(fc_stream_resolve(hs, ptds, call, &s));
    FC_TRY(fc_event_lookup(h, call, &ev));
    return fc_event_wait(s, ev, flags, call);
}

FC_API CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
    return stream_wait_event(hStream, hEvent, Flags, false, "cuStreamWaitEvent");
}

FC_API CUresult cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
    return stream_wait_event(hStream, hEvent, Flags, true, "cuStreamWaitEvent_ptsz");
}
