/*
 * dump_body.h: the content of a dump, written through a json.h writer.
 *
 * Owns: the expansion of the lists of dump_format.h into JSON (identity,
 * communicators, ring statistics, op records in dump order) and the optional
 * config writer. dump.c owns the file around it.
 *
 * Threads: one dump at a time (dump.c guarantees it); async-signal-safe.
 */
#ifndef NCCLGUARD_DUMP_BODY_H
#define NCCLGUARD_DUMP_BODY_H

#include "evidence/dump.h"
#include "base/json.h"

/* Writes the whole top-level object of a dump. */
void ncclguard_dump_body(struct ng_json *j, const char *reason);

#endif
