/*
 * dump_body.h: the content of a dump, written through a json.h writer.
 *
 * Owns: the expansion of the lists of dump_format.h into JSON (identity,
 * communicators, ring statistics, op records in dump order) and the optional
 * config writer. dump.c owns the file around it.
 *
 * Threads: one dump at a time (dump.c guarantees it); async-signal-safe when
 * told it runs in a signal handler.
 */
#ifndef NCCLGUARD_DUMP_BODY_H
#define NCCLGUARD_DUMP_BODY_H

#include "base/json.h"

/* Writer of the optional top-level "config" member: when set, a dump
 * writes the key "config" and calls fn, which writes exactly one value (an
 * object) with the json.h functions. fn runs inside the dump, so it must be
 * async-signal-safe too and must not start another dump. NULL removes it. */
typedef void (*ng_dump_config_fn)(struct ng_json *j);
void ncclguard_dump_set_config_writer(ng_dump_config_fn fn);

/* The incident the next dumps belong to ("incident"; null before any, or after
 * NULL). Set on
 * the thread that writes the dumps (trigger.c), between dumps. */
void ncclguard_dump_set_incident(const char *id);

/* Writes the whole top-level object of a dump; from a signal handler, frames
 * are written as bare addresses (symbolize.h is not async-signal-safe). */
void ncclguard_dump_body(struct ng_json *j, const char *reason, int from_signal);

#endif
