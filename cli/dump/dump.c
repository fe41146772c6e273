/*
 * dump/dump.c: see dump/dump.h.
 */
#include "dump/dump.h"

#include <stdlib.h>

#include "dump/mem.h"

const char *dr_op_name(int op)
{
    return op >= 0 && op < NG_OP_NTYPES ? ng_op_name(op) : "Unknown";
}

const char *dr_state_name(int state)
{
    return state >= 0 && state < NG_OP_NSTATES ? ng_op_state_name(state) : "other";
}

void dr_free(struct dr_dump *d)
{
    if (!d) return;
    dr_mem_free(d->mem);
    free(d->mem);
    free(d);
}
