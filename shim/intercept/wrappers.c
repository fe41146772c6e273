/*
 * wrappers.c: the exported ncclX wrappers, generated from nccl_api.def.
 *
 * Each wrapper resolves the real symbol table once (real.c), passes arguments,
 * results and out-parameters through untouched, and calls the hooks of track/
 * around the real call, as named by the hook column of its nccl_api.def line.
 * Every creation first makes sure the shim has started (start.c). With
 * NCCLGUARD_DISABLE=1, or after an internal error turned tracking off, a
 * wrapper is a plain forwarder.
 */
#include <stdint.h>

#include "base/atomic.h"
#include "base/log.h"
#include "intercept/real.h"
#include "intercept/start.h"
#include "track/comm.h"
#include "track/lifecycle.h"
#include "track/ops.h"
#include "track/track.h"

#define NG_EXPORT __attribute__((visibility("default")))

/* Returned by the const char * entry points when NCCL lacks them. */
static const ng_cstr ng_missing_error_string = "ncclguard: this NCCL lacks the function";

/* Hook kinds named in nccl_api.def: a PRE part before the real call and a POST
 * part after it, which sees the result as `ng_r`. */
#define NG_PRE(kind, ...) NG_PRE_##kind(__VA_ARGS__)
#define NG_POST(kind, ...) NG_POST_##kind(__VA_ARGS__)

#define NG_PRE_PLAIN()
#define NG_POST_PLAIN()
/* Calls on a communicator enter it (nonblocking ones: track/comm.h). */
#define NG_PRE_COMM(comm)                                         \
    if (ncclguard_fenced(comm)) return ncclguard_fenced_result(); \
    struct ng_comm *ng_in = ncclguard_comm_enter(ncclguard_comm_find(comm));
#define NG_POST_COMM(comm) ncclguard_comm_leave(ng_in);
#define NG_PRE_LAST_ERROR(comm)                               \
    const char *ng_fence = ncclguard_fenced_last_error(comm); \
    if (ng_fence) return ng_fence;                            \
    struct ng_comm *ng_in = ncclguard_comm_enter(ncclguard_comm_find(comm));
#define NG_POST_LAST_ERROR(comm) ncclguard_comm_leave(ng_in);
#define NG_PRE_OP(type, comm, stream, count, dtype, redop, root)                       \
    struct ng_op_ticket ng_t;                                                          \
    if (ncclguard_op_pre(&ng_t, type, comm, stream, count, dtype, (int)(redop), root)) \
        return ncclguard_fenced_result();
#define NG_POST_OP(...) ncclguard_op_post(&ng_t, ng_r);
#define NG_PRE_GROUP_START()
#define NG_POST_GROUP_START() ncclguard_group_start_post(ng_r);
#define NG_PRE_GROUP_END() ncclguard_group_end_pre();
#define NG_POST_GROUP_END() ncclguard_group_end_post(ng_r);
#define NG_PRE_GROUP_SIMULATE_END(info) ncclguard_group_simulate_end_pre();
#define NG_POST_GROUP_SIMULATE_END(info) ncclguard_group_simulate_end_post(ng_r);
#define NG_PRE_INIT(out, nranks, rank, nids, ids, config) \
    ncclguard_start();                                    \
    struct ng_init_ticket ng_t;                           \
    ncclguard_init_pre(&ng_t, out, nranks, rank, nids, ids, config);
#define NG_POST_INIT(...) ncclguard_init_post(&ng_t, ng_r);
#define NG_PRE_INIT_ALL(out, ndev, devlist) \
    ncclguard_start();                      \
    struct ng_init_ticket ng_t;             \
    ncclguard_init_all_pre(&ng_t, out, ndev);
#define NG_POST_INIT_ALL(out, ndev, devlist) ncclguard_init_all_post(&ng_t, ndev, devlist, ng_r);
#define NG_PRE_SPLIT(parent, color, out, config)                               \
    if (ncclguard_fenced(parent)) return ncclguard_fenced_result();            \
    ncclguard_start();                                                         \
    struct ng_comm *ng_in = ncclguard_comm_enter(ncclguard_comm_find(parent)); \
    struct ng_init_ticket ng_t;                                                \
    ncclguard_split_pre(&ng_t, parent, color, out, config);
#define NG_POST_SPLIT(...)       \
    ncclguard_comm_leave(ng_in); \
    ncclguard_init_post(&ng_t, ng_r);
#define NG_PRE_SHRINK(parent, excluded, nexcluded, out, config)                \
    if (ncclguard_fenced(parent)) return ncclguard_fenced_result();            \
    ncclguard_start();                                                         \
    struct ng_comm *ng_in = ncclguard_comm_enter(ncclguard_comm_find(parent)); \
    struct ng_init_ticket ng_t;                                                \
    ncclguard_shrink_pre(&ng_t, parent, excluded, nexcluded, out, config);
#define NG_POST_SHRINK(...)      \
    ncclguard_comm_leave(ng_in); \
    ncclguard_init_post(&ng_t, ng_r);
#define NG_PRE_COMM_END(comm, kind)       \
    struct ng_end_ticket ng_t;            \
    ncclguard_end_pre(&ng_t, comm, kind); \
    if (ng_t.fenced) return ncclguard_end_fenced(&ng_t);
#define NG_POST_COMM_END(...) ncclguard_end_post(&ng_t, ng_r);
#define NG_PRE_ASYNC_ERR(comm, err)                                       \
    if (ncclguard_fenced(comm)) return ncclguard_async_error_fenced(err); \
    struct ng_comm *ng_in = ncclguard_comm_enter(ncclguard_comm_find(comm));
#define NG_POST_ASYNC_ERR(comm, err) \
    ncclguard_comm_leave(ng_in);     \
    ncclguard_async_error_post(comm, err, ng_r);

/* nccl.h declares these with "()", which is no prototype in C. */
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);
void ncclResetDebugInit(void);

#define NCCL_API(ret, fail, name, params, args, hook)                           \
    NG_EXPORT ret nccl##name params                                             \
    {                                                                           \
        const struct ng_real *r_ = ncclguard_real();                            \
        if (__builtin_expect(!r_->name, 0)) {                                   \
            NG_WARN_ONCE("nccl" #name " is missing from the loaded NCCL; "      \
                         "the call fails (update NCCL or stop calling it)");    \
            return fail;                                                        \
        }                                                                       \
        if (!ng_atomic_load_relaxed(&ncclguard_tracking)) return r_->name args; \
        NG_PRE hook;                                                            \
        ret ng_r = r_->name args;                                               \
        NG_POST hook;                                                           \
        return ng_r;                                                            \
    }
#define NCCL_API_VOID(name, params, args)                                                \
    NG_EXPORT void nccl##name params                                                     \
    {                                                                                    \
        const struct ng_real *r_ = ncclguard_real();                                     \
        if (r_->name)                                                                    \
            r_->name args;                                                               \
        else                                                                             \
            NG_WARN_ONCE("nccl" #name " is missing from the loaded NCCL; call ignored"); \
    }
#include "intercept/nccl_api.def"
#undef NCCL_API
#undef NCCL_API_VOID
