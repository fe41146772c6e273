/*
 * dump/stack.h: the threads of a dump (C frames) and its Python stacks; the
 * offline symbolization of the C frames as they are read.
 */
#ifndef NCCLGUARD_CLI_DUMP_STACK_H
#define NCCLGUARD_CLI_DUMP_STACK_H

#include "dump/dump.h"
#include "dump/scalar.h"
#include "json/json.h"

/* Offline symbolization: once a dump is read, the resolver is called on each
 * of its C frames (the caller's threads: the parsing threads of a directory),
 * exact 1 when the frame's pc is an interrupted instruction (the innermost
 * frame of a thread taken by a signal, from its registers, or in a crash or
 * SIGTERM dump), 0 for a return address. Its strings must outlive the dump.
 * None by default (frames as written); the command installs cli/dump/symres.h's.
 * Set before reading. */
typedef void (*dr_frame_resolver)(struct dr_frame *f, int exact);
void dr_set_resolver(dr_frame_resolver fn);

/* The members "threads" and "python" of the top level, into r->d. */
int dr_read_threads(struct dr_reader *r, ng_jv *v);
int dr_read_python(struct dr_reader *r, ng_jv *v);
/* Every C frame of a dump just read, through the resolver, if one is set. */
void dr_resolve_frames(struct dr_dump *d);

#endif
