/* describe.c: see describe.h. */
#include "watch/describe.h"

#include <stdio.h>
#include <string.h>

#include "base/ops.h"
#include "evidence/symbolize.h"
#include "track/stacks.h"

#define WHERE_FRAMES 3

const char *ncclguard_short_id(uint64_t id, char buf[8])
{
    snprintf(buf, 8, "%04llx", (unsigned long long)(id >> 48));
    return buf;
}

const char *ncclguard_describe_op(const struct ng_op_record *r, char *buf, size_t len)
{
    const char *name = ng_op_name(r->op);
    /* ng_op_shape trusts its type (the hot path's is); a record's is checked */
    if (r->op >= 0 && r->op < NG_OP_NTYPES && ng_op_is_p2p(r->op))
        snprintf(buf, len, "%s #%llu %s peer %lld", name, (unsigned long long)r->p2p_seq,
                 r->op == NG_OP_SEND ? "to" : "from", (long long)r->peer);
    else
        snprintf(buf, len, "%s #%llu", name, (unsigned long long)r->seq);
    return buf;
}

const char *ncclguard_describe_where(const struct ng_op_record *r, char *buf, size_t len)
{
    const uint64_t *pcs;
    int n = r->stack == NG_NO_STACK ? 0 : ncclguard_stack_frames(r->stack, &pcs);
    buf[0] = '\0';
    if (n == 0) return buf;
    size_t used = 0;
    if (ncclguard_symbolize_try_begin() == 0) {
        for (int i = 0; i < n && i < WHERE_FRAMES && used < len; i++) {
            struct ng_symbol s = {.module = ""};
            ncclguard_symbolize((uintptr_t)pcs[i], &s);
            const char *base = strrchr(s.module, '/');
            const char *sep = i ? " ← " : " at ";
            if (s.function)
                used += (size_t)snprintf(buf + used, len - used, "%s%s", sep, s.function);
            else
                used += (size_t)snprintf(buf + used, len - used, "%s%s+0x%llx", sep,
                                         base ? base + 1 : s.module, (unsigned long long)s.offset);
        }
        ncclguard_symbolize_end();
    }
    if (used < len) snprintf(buf + used, len - used, " (stack %lld)", (long long)r->stack);
    return buf;
}
