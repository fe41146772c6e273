/*
 * dump/symres.h: the C frames of a dump named offline, from the module's file: its
 * path and build-id and the frame's offset, through the file's ELF symbol
 * tables (.symtab, else .dynsym) and its DWARF line table, with elfutils'
 * libdwfl (docs/analysis.md, "Frames").
 *
 * A file is used only when its GNU build-id equals the frame's: the module's
 * own path first, then <dir>/.build-id/xx/rest.debug for each debug directory
 * (NCCLGUARD_DEBUG_DIRS, colon-separated; /usr/lib/debug when unset), which
 * also gives the DWARF of a stripped module. A frame gets a function only when
 * its address lies inside the symbol (st_size); it then replaces the dump's
 * name, and file and line come with it when the DWARF says. A frame whose
 * file is missing, rebuilt since the dump or without its symbol keeps what the
 * dump says.
 *
 * Owns: one cache for the process, never freed: per (module path, build-id)
 * the opened file or the fact that none matches, and per address the answer.
 * Each file is opened once, whatever the number of dumps and frames.
 *
 * Threads: any (the dump reader's parsing threads): one lock, held for one
 * frame at a time.
 */
#ifndef NCCLGUARD_CLI_DUMP_SYMRES_H
#define NCCLGUARD_CLI_DUMP_SYMRES_H

#include "dump/dump.h"

/* Names f from its module, when it has one with a build-id. exact: f->offset
 * is the interrupted instruction; else it is a return address, looked up at
 * offset - 1 (inside the call), as the shim does (ncclguard_symbolize). */
void dr_symres_frame(struct dr_frame *f, int exact);

/* Makes the dump reader name every frame it reads (dr_set_resolver). */
void dr_symres_install(void);

#endif
