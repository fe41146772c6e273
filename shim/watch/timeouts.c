/*
 * timeouts.c: the timeout of an op and the thresholds of the escalation ladder,
 * computed from the settings (see config.h). Pure functions of the settings,
 * cheap enough for every watchdog poll.
 */
#include <string.h>

#include "policy/config.h"

/* The NCCL op names and the key of their timeout. */
static const struct {
    const char *nccl_name;
    int key;
} per_op[] = {
    {"AllReduce", NG_KEY_TIMEOUT_ALLREDUCE},
    {"Broadcast", NG_KEY_TIMEOUT_BROADCAST},
    {"Bcast", NG_KEY_TIMEOUT_BROADCAST},
    {"Reduce", NG_KEY_TIMEOUT_REDUCE},
    {"AllGather", NG_KEY_TIMEOUT_ALLGATHER},
    {"ReduceScatter", NG_KEY_TIMEOUT_REDUCESCATTER},
    {"AlltoAll", NG_KEY_TIMEOUT_ALLTOALL},
    {"Gather", NG_KEY_TIMEOUT_GATHER},
    {"Scatter", NG_KEY_TIMEOUT_SCATTER},
    {"Send", NG_KEY_TIMEOUT_SEND},
    {"Recv", NG_KEY_TIMEOUT_RECV},
};

/* The per-op keys are consecutive in settings.def; an op's index is its key's offset. */
#define NOPS (NG_KEY_TIMEOUT_RECV - NG_KEY_TIMEOUT_ALLREDUCE + 1)

int ncclguard_timeout_op(const char *nccl_op_name)
{
    for (size_t i = 0; i < sizeof per_op / sizeof per_op[0]; i++)
        if (!strcmp(nccl_op_name, per_op[i].nccl_name))
            return per_op[i].key - NG_KEY_TIMEOUT_ALLREDUCE;
    return -1;
}

/* The value of an OPT_DURATION setting by key (< 0 = inherit). */
static double opt_duration(const struct ng_settings *s, int key)
{
    double d;
    memcpy(&d, (const char *)s + ncclguard_setting_info(key)->offset, sizeof d);
    return d;
}

double ncclguard_timeout_s(const struct ng_settings *s, enum ng_timeout_kind kind, int op,
                           uint64_t bytes)
{
    if (kind == NG_TIMEOUT_INIT) return s->init_timeout;
    double base = s->timeout;
    if (op >= 0 && op < NOPS) {
        double d = opt_duration(s, NG_KEY_TIMEOUT_ALLREDUCE + op);
        if (d >= 0) base = d;
    }
    if (kind == NG_TIMEOUT_FIRST_OP && s->first_timeout > base) base = s->first_timeout;
    if (base == 0) return 0; /* off: no size can turn it on */
    if (s->floor_bandwidth > 0) base += (double)bytes / s->floor_bandwidth;
    return base;
}

double ncclguard_action_after_s(const struct ng_settings *s, enum ng_action a, double timeout_s)
{
    double factor = a == NG_ACTION_WARN    ? s->warn_at
                    : a == NG_ACTION_DUMP  ? s->dump_at
                    : a == NG_ACTION_ABORT ? s->abort_at
                                           : s->kill_at;
    return factor * timeout_s;
}
