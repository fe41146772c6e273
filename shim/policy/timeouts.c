/* timeouts.c: see timeouts.h. */
#include "policy/timeouts.h"

#include "base/ops.h"

/* The settings key of each op's own timeout, from the vocabulary. */
static const int op_timeout_key[] = {
#define NG_OP_KEY(id, name, timeout, shape) NG_KEY_##timeout,
    NG_OPS(NG_OP_KEY)
#undef NG_OP_KEY
};

double ncclguard_timeout_s(const struct ng_settings *s, enum ng_timeout_kind kind, int op,
                           uint64_t bytes)
{
    if (kind == NG_TIMEOUT_INIT) return s->init_timeout;
    double base = s->timeout;
    if (op >= 0 && op < NG_OP_NTYPES) {
        double own = ncclguard_setting_number(s, op_timeout_key[op]);
        if (own >= 0) base = own; /* < 0: inherit */
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
