/*
 * dump/map.h: the members "ops" and "comms" of a dump, by tables of members.
 */
#ifndef NCCLGUARD_CLI_DUMP_MAP_H
#define NCCLGUARD_CLI_DUMP_MAP_H

#include "dump/scalar.h"
#include "json/json.h"

int dr_read_ops(struct dr_reader *r, ng_jv *v);
int dr_read_comms(struct dr_reader *r, ng_jv *v);

#endif
