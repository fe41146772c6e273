/*
 * fakecuda_queue.c: the "GPU". Each stream is a FIFO of ops run in order by its own host
 * worker thread, started at the first push and ended when the stream is destroyed and its
 * queue has drained (queued work finishes, as in CUDA).
 *
 * Ordering between streams uses tickets: every op pushed to a stream of a context takes the
 * next ticket of that context, and each stream publishes head_ticket, the ticket of its
 * oldest unfinished op (FC_TICKET_NONE when idle). "Stream X has finished everything up to
 * ticket T" is then head_ticket(X) > T. This gives the legacy-stream rules without any list
 * per op:
 *   - an op on the legacy stream waits until every blocking stream of the context has
 *     finished the ops it had before it (all tickets below its own);
 *   - an op on a blocking stream waits until the legacy stream has finished its earlier ops;
 *   - cuStreamWaitEvent pushes a WAIT op for (stream of the record, ticket of the record).
 * Tickets only grow, so every wait is on a smaller ticket and the waits cannot form a cycle.
 *
 * Waiting (workers at barriers, and API calls that synchronise) uses one process-wide
 * condition variable that workers broadcast after each op, only while someone waits. No lock
 * is held while an op runs, so a host function that blocks holds up its own stream only.
 * Ops are recycled per stream: pushing allocates nothing once the pool has grown.
 */
#include "fakecuda_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FC_SPIN_STEP_NS 100000

static pthread_mutex_t g_prog_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_prog_cv = PTHREAD_COND_INITIALIZER;
static _Atomic int g_prog_waiters;
static _Atomic int g_live_workers;
static _Atomic long long g_ops_run;

int fc_queue_live_workers(void)
{
    return atomic_load(&g_live_workers);
}

void fc_queue_atfork_child(void)
{
    pthread_mutex_init(&g_prog_mu, NULL);
    pthread_cond_init(&g_prog_cv, NULL);
    atomic_store(&g_prog_waiters, 0);
    atomic_store(&g_live_workers, 0); /* the parent's workers do not exist here */
}

/* Wakes every waiter so it re-evaluates its condition. Called by workers, no lock held. */
void fc_progress_notify(void)
{
    if (atomic_load(&g_prog_waiters) == 0) return;
    pthread_mutex_lock(&g_prog_mu);
    pthread_cond_broadcast(&g_prog_cv);
    pthread_mutex_unlock(&g_prog_mu);
}

/*
 * Blocks until ready(arg). The waiter count is raised before the condition is checked
 * under g_prog_mu, and workers publish progress before reading the count (both seq_cst),
 * so a wake-up cannot be lost.
 */
void fc_progress_wait(bool (*ready)(void *), void *arg)
{
    if (ready(arg)) return;
    pthread_mutex_lock(&g_prog_mu);
    atomic_fetch_add(&g_prog_waiters, 1);
    while (!ready(arg)) pthread_cond_wait(&g_prog_cv, &g_prog_mu);
    atomic_fetch_sub(&g_prog_waiters, 1);
    pthread_mutex_unlock(&g_prog_mu);
}

static void sleep_ns(uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* ------------------------------- stream lifetime ------------------------------- */

static void unlist(struct fc_stream *s)
{
    struct fc_stream **pp = &s->ctx->streams;
    while (*pp && *pp != s) pp = &(*pp)->ctx_next;
    if (*pp) *pp = s->ctx_next;
    s->listed = false;
}

static void free_pool(struct fc_stream *s)
{
    while (s->pool) {
        struct fc_op *op = s->pool;
        s->pool = op->next;
        free(op);
    }
}

struct fc_stream *fc_stream_alloc(struct fc_ctx *ctx, enum fc_stream_kind kind, unsigned flags,
                                  int priority)
{
    struct fc_stream *s = fc_handle_new(FC_KIND_STREAM, sizeof *s);
    if (!s) return NULL;
    s->kind = kind;
    s->flags = flags;
    s->priority = priority;
    s->id = fc_next_id();
    s->ctx = ctx;
    s->legacy = kind == FC_STREAM_LEGACY ? NULL : ctx->legacy;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->wake, NULL);
    atomic_store(&s->head_ticket, FC_TICKET_NONE);
    atomic_store(&s->wait_ticket, FC_TICKET_NONE);
    s->cap_last_node = s->cap_joined_upto = -1;
    pthread_mutex_lock(&ctx->lock);
    s->ctx_next = ctx->streams;
    ctx->streams = s;
    s->listed = true;
    pthread_mutex_unlock(&ctx->lock);
    return s;
}

/*
 * Destroys s: the handle is dead at once, queued work still runs, then the worker exits and
 * takes the stream off its context's list. Any thread.
 */
void fc_stream_retire(struct fc_stream *s)
{
    fc_handle_kill(s);
    pthread_mutex_lock(&s->ctx->lock);
    pthread_mutex_lock(&s->lock);
    s->stopping = true;
    if (!s->worker_started) {
        if (s->listed) unlist(s);
        free_pool(s);
    }
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->lock);
    pthread_mutex_unlock(&s->ctx->lock);
}

/* ---------------------------------- barriers ---------------------------------- */

struct fc_pos {
    struct fc_stream *s;
    uint64_t ticket;
};

/* Stream p->s has finished every op up to ticket p->ticket. */
static bool pos_reached(void *arg)
{
    struct fc_pos *p = arg;
    return atomic_load(&p->s->head_ticket) > p->ticket;
}

/* Every blocking stream of the legacy stream's context has finished its ops before ticket. */
static bool blocking_streams_reached(void *arg)
{
    struct fc_pos *p = arg;
    struct fc_ctx *ctx = p->s->ctx;
    bool ok = true;
    pthread_mutex_lock(&ctx->lock);
    for (struct fc_stream *x = ctx->streams; x && ok; x = x->ctx_next)
        if (fc_stream_blocking(x) && atomic_load(&x->head_ticket) < p->ticket) ok = false;
    pthread_mutex_unlock(&ctx->lock);
    return ok;
}

/* Waits for the implicit legacy-stream ordering that op has on stream s. */
static void wait_barrier(struct fc_stream *s, const struct fc_op *op)
{
    struct fc_pos p = {s, op->ticket};
    if (s->kind == FC_STREAM_LEGACY) {
        fc_progress_wait(blocking_streams_reached, &p);
    } else if (fc_stream_blocking(s) && s->legacy) {
        p.s = s->legacy;
        p.ticket = op->ticket - 1;
        fc_progress_wait(pos_reached, &p);
    }
}

/* -------------------------- hardware queues (connections) -------------------------- */

/*
 * CUDA_DEVICE_MAX_CONNECTIONS: the streams of a context feed a few hardware queues, and a
 * queue hands its items to the GPU in the order they were pushed. With
 * FAKECUDA_MAX_CONNECTIONS=N the streams of a context share N queues (by stream id, as
 * CUDA spreads streams over its connections); unset, each stream has its own. An item
 * therefore starts only once every item pushed before it to its queue has started: an item
 * that waits (behind a stalled kernel of its stream, or for an event) holds up everything
 * pushed after it to the same queue, whatever the stream.
 */
static bool same_queue(const struct fc_stream *a, const struct fc_stream *b)
{
    long long n = fc_cfg.max_connections;
    return a == b || (n > 0 && a->ctx == b->ctx &&
                      a->id % (unsigned long long)n == b->id % (unsigned long long)n);
}

/* Every item pushed before ticket p->ticket to the queue of stream p->s has started. */
static bool queue_turn(void *arg)
{
    struct fc_pos *p = arg;
    struct fc_ctx *ctx = p->s->ctx;
    bool ok = true;
    pthread_mutex_lock(&ctx->lock);
    for (struct fc_stream *x = ctx->streams; x && ok; x = x->ctx_next)
        if (x != p->s && same_queue(x, p->s) && atomic_load(&x->wait_ticket) < p->ticket)
            ok = false;
    pthread_mutex_unlock(&ctx->lock);
    return ok;
}

/* Items in the queue that s feeds: its own, or with shared queues those of its queue. */
static uint64_t queue_items(struct fc_stream *s)
{
    if (fc_cfg.max_connections <= 0)
        return atomic_load(&s->enq_count) - atomic_load(&s->done_count);
    uint64_t n = 0;
    pthread_mutex_lock(&s->ctx->lock);
    for (struct fc_stream *x = s->ctx->streams; x; x = x->ctx_next)
        if (same_queue(x, s)) n += atomic_load(&x->enq_count) - atomic_load(&x->done_count);
    pthread_mutex_unlock(&s->ctx->lock);
    return n;
}

static bool queue_has_room(void *arg)
{
    return queue_items(arg) < (uint64_t)fc_cfg.queue_depth;
}

/*
 * FAKECUDA_QUEUE_DEPTH: a push (launch, record, copy, wait) blocks the host while the
 * queue holds that many items, as a real launch blocks behind a full hardware queue.
 */
void fc_queue_wait_room(struct fc_stream *s)
{
    if (fc_cfg.queue_depth > 0) fc_progress_wait(queue_has_room, s);
}

/* Marks op, the head of s, as started: the next item of its queue may start too. */
static void mark_started(struct fc_stream *s, const struct fc_op *op)
{
    if (fc_cfg.max_connections <= 0) return;
    pthread_mutex_lock(&s->lock);
    atomic_store(&s->wait_ticket, op->next ? op->next->ticket : FC_TICKET_NONE);
    pthread_mutex_unlock(&s->lock);
    fc_progress_notify();
}

/* ------------------------------------ worker ------------------------------------ */

static bool is_kernel_like(enum fc_work_kind k)
{
    return k == FC_WORK_HOST || k == FC_WORK_SLEEP || k == FC_WORK_SPIN || k == FC_WORK_COPY ||
           k == FC_WORK_SET8 || k == FC_WORK_SET32;
}

/* Fault injection: FAKECUDA_OP_DELAY_US and FAKECUDA_STALL_AFTER_OPS. */
static void inject_faults(void)
{
    if (fc_cfg.op_delay_ns) sleep_ns(fc_cfg.op_delay_ns);
    if (fc_cfg.stall_after_ops >= 0 && atomic_fetch_add(&g_ops_run, 1) >= fc_cfg.stall_after_ops)
        for (;;) sleep_ns(1000000000ull); /* a hung GPU: this stream never moves again */
}

static void run_op(struct fc_op *op)
{
    struct fc_work *w = &op->w;
    if (is_kernel_like(w->kind)) inject_faults();
    switch (w->kind) {
    case FC_WORK_HOST: w->u.host.fn(w->u.host.arg); break;
    case FC_WORK_SLEEP: {
        uint64_t end = fc_now_ns() + w->u.sleep_ns, now;
        while ((now = fc_now_ns()) < end) sleep_ns(end - now);
        break;
    }
    case FC_WORK_SPIN:
        while (!__atomic_load_n(w->u.spin_flag, __ATOMIC_ACQUIRE)) sleep_ns(FC_SPIN_STEP_NS);
        break;
    case FC_WORK_COPY: memmove(w->u.copy.dst, w->u.copy.src, w->u.copy.n); break;
    case FC_WORK_SET8: memset(w->u.set.dst, (int)(w->u.set.value & 0xFF), w->u.set.n); break;
    case FC_WORK_SET32:
        for (size_t i = 0; i < w->u.set.n; i++) ((uint32_t *)w->u.set.dst)[i] = w->u.set.value;
        break;
    case FC_WORK_RECORD: fc_event_passed(w->u.record.ev, w->u.record.gen); break;
    case FC_WORK_WAIT: {
        struct fc_pos p = {w->u.wait.s, w->u.wait.ticket};
        fc_progress_wait(pos_reached, &p);
        break;
    }
    default: /* NOP; graph nodes never reach a queue */ break;
    }
}

static void *worker_main(void *arg)
{
    struct fc_stream *s = arg;
    char name[16];
    snprintf(name, sizeof name, "fakecuda-s%llu", s->id % 100000);
    pthread_setname_np(pthread_self(), name);
    fc_mark_worker_thread();
    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (!s->head && !s->stopping) pthread_cond_wait(&s->wake, &s->lock);
        struct fc_op *op = s->head;
        if (!op) break; /* destroyed and drained */
        pthread_mutex_unlock(&s->lock);
        wait_barrier(s, op);
        if (fc_cfg.max_connections > 0) {
            struct fc_pos turn = {s, op->ticket};
            fc_progress_wait(queue_turn, &turn);
            if (op->w.kind == FC_WORK_WAIT) run_op(op); /* a wait holds its queue until met */
            mark_started(s, op);
            if (op->w.kind != FC_WORK_WAIT) run_op(op);
        } else {
            run_op(op);
        }
        pthread_mutex_lock(&s->lock);
        s->head = op->next;
        if (!s->head) s->tail = NULL;
        atomic_store(&s->head_ticket, s->head ? s->head->ticket : FC_TICKET_NONE);
        atomic_fetch_add(&s->done_count, 1);
        op->next = s->pool;
        s->pool = op;
        pthread_mutex_unlock(&s->lock);
        fc_progress_notify();
        pthread_mutex_lock(&s->lock);
    }
    free_pool(s);
    pthread_mutex_unlock(&s->lock);
    pthread_mutex_lock(&s->ctx->lock);
    if (s->listed) unlist(s);
    pthread_mutex_unlock(&s->ctx->lock);
    atomic_fetch_sub(&g_live_workers, 1);
    return NULL;
}

/* Starts the worker of s. Caller holds s->lock. */
static CUresult start_worker(struct fc_stream *s, const char *call)
{
    pthread_attr_t attr;
    pthread_t t;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    atomic_fetch_add(&g_live_workers, 1);
    int rc = pthread_create(&t, &attr, worker_main, s);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        atomic_fetch_sub(&g_live_workers, 1);
        fc_complain(call, "cannot start a stream worker thread: %s", strerror(rc));
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    s->worker_started = true;
    return CUDA_SUCCESS;
}

/*
 * Appends w to the queue of s (no capture handling: see fc_submit) and returns its ticket.
 * Any thread; takes s->lock only, after waiting for room (FAKECUDA_QUEUE_DEPTH) with no
 * lock held. Fails when s was destroyed meanwhile.
 */
CUresult fc_queue_push(struct fc_stream *s, const struct fc_work *w, const char *call,
                       uint64_t *ticket)
{
    fc_queue_wait_room(s);
    return fc_queue_push_now(s, w, call, ticket);
}

CUresult fc_queue_push_now(struct fc_stream *s, const struct fc_work *w, const char *call,
                           uint64_t *ticket)
{
    pthread_mutex_lock(&s->lock);
    if (s->stopping) {
        pthread_mutex_unlock(&s->lock);
        fc_complain(call, "stream %p was destroyed", (void *)s);
        return CUDA_ERROR_INVALID_HANDLE;
    }
    if (!s->worker_started) {
        CUresult r = start_worker(s, call);
        if (r != CUDA_SUCCESS) {
            pthread_mutex_unlock(&s->lock);
            return r;
        }
    }
    struct fc_op *op = s->pool;
    if (op) {
        s->pool = op->next;
    } else if (!(op = malloc(sizeof *op))) {
        pthread_mutex_unlock(&s->lock);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    op->w = *w;
    op->next = NULL;
    op->ticket = atomic_fetch_add(&s->ctx->next_ticket, 1);
    if (s->tail) {
        s->tail->next = op;
    } else {
        s->head = op;
        atomic_store(&s->head_ticket, op->ticket);
    }
    if (atomic_load(&s->wait_ticket) == FC_TICKET_NONE) atomic_store(&s->wait_ticket, op->ticket);
    s->tail = op;
    atomic_fetch_add(&s->enq_count, 1);
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->lock);
    if (ticket) *ticket = op->ticket;
    return CUDA_SUCCESS;
}

/* --------------------------------- synchronising --------------------------------- */

bool fc_stream_idle(struct fc_stream *s)
{
    uint64_t enq = atomic_load(&s->enq_count);
    return atomic_load(&s->done_count) >= enq;
}

struct fc_count {
    struct fc_stream *s;
    uint64_t target;
};

static bool count_reached(void *arg)
{
    struct fc_count *c = arg;
    return atomic_load(&c->s->done_count) >= c->target;
}

CUresult fc_stream_wait_done(struct fc_stream *s, uint64_t target)
{
    struct fc_count c = {s, target};
    fc_progress_wait(count_reached, &c);
    return CUDA_SUCCESS;
}

/* Waits until s has finished the op with this ticket (and so everything before it). */
void fc_stream_wait_ticket(struct fc_stream *s, uint64_t ticket)
{
    struct fc_pos p = {s, ticket};
    fc_progress_wait(pos_reached, &p);
}

/* True when the legacy stream of ctx and every blocking stream of ctx are idle. */
bool fc_legacy_idle(struct fc_ctx *ctx)
{
    bool idle = true;
    pthread_mutex_lock(&ctx->lock);
    for (struct fc_stream *s = ctx->streams; s && idle; s = s->ctx_next)
        if (s->kind == FC_STREAM_LEGACY || fc_stream_blocking(s)) idle = fc_stream_idle(s);
    pthread_mutex_unlock(&ctx->lock);
    return idle;
}

/* Waits until every stream of ctx has finished the work it had when called. */
CUresult fc_ctx_drain(struct fc_ctx *ctx)
{
    size_t n = 0, i = 0;
    pthread_mutex_lock(&ctx->lock);
    for (struct fc_stream *s = ctx->streams; s; s = s->ctx_next) n++;
    struct fc_count *snap = calloc(n ? n : 1, sizeof *snap);
    if (snap)
        for (struct fc_stream *s = ctx->streams; s; s = s->ctx_next)
            snap[i++] = (struct fc_count){s, atomic_load(&s->enq_count)};
    pthread_mutex_unlock(&ctx->lock);
    if (!snap) return CUDA_ERROR_OUT_OF_MEMORY;
    for (i = 0; i < n; i++) fc_progress_wait(count_reached, &snap[i]);
    free(snap);
    return CUDA_SUCCESS;
}
