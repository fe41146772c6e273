/* describe.c: see describe.h. */
#include "watch/describe.h"

#include <stdio.h>

#include "base/ops.h"
#include "track/comm.h"

const char *ncclguard_short_id(uint64_t id, char buf[8])
{
    snprintf(buf, 8, "%04llx", (unsigned long long)(id >> 48));
    return buf;
}

long long ncclguard_record_comm_size(const struct ng_op_record *r)
{
    struct ng_comm *c = ncclguard_comm_at((int)r->comm_slot);
    int n = c ? ng_comm_nranks(c) : -1;
    return r->comm_nranks > 0 ? r->comm_nranks : n;
}

const char *ncclguard_describe_op(const struct ng_op_record *r, char *buf, size_t len)
{
    const char *name = ng_op_name((int)r->op);
    if (ng_op_is_p2p((int)r->op))
        snprintf(buf, len, "%s #%llu %s peer %lld", name, (unsigned long long)r->p2p_seq,
                 r->op == NG_OP_SEND ? "to" : "from", (long long)r->peer);
    else
        snprintf(buf, len, "%s #%llu", name, (unsigned long long)r->seq);
    return buf;
}
