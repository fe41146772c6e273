/*
 * symbolize.h: return addresses turned into module, offset, function and
 * build-id, when a dump is written (never on the hot path, never in a signal
 * handler).
 *
 * Owns: a per-dump cache of the modules met (the module's file mapped
 * read-only to read its .symtab, else its .dynsym; its build-id from the
 * loaded PT_NOTE) and of the addresses already resolved.
 *
 * Threads: any thread but a signal handler, between ncclguard_symbolize_begin
 * and ncclguard_symbolize_end, which hold a lock: a dump and the watchdog's
 * log lines take turns. Not async-signal-safe (a lock, dl_iterate_phdr, open,
 * mmap).
 */
#ifndef NCCLGUARD_SYMBOLIZE_H
#define NCCLGUARD_SYMBOLIZE_H

#include <stddef.h>
#include <stdint.h>

struct ng_symbol {
    const char *module;   /* path of the object, "" when no object holds pc */
    uint64_t offset;      /* pc minus the object's load address */
    const char *function; /* NULL when the object's symbols do not say */
    uint64_t function_offset;
    const char *build_id; /* lowercase hex, NULL when the object has none */
};

void ncclguard_symbolize_begin(void);

/* The same without waiting: -1 when another thread is symbolizing. */
int ncclguard_symbolize_try_begin(void);

/* Resolves a return address (looked up at pc - 1, inside the call). The
 * strings stay valid until ncclguard_symbolize_end. A function is named only
 * when the address lies inside its symbol (st_size); otherwise the frame is
 * module + offset + build-id. */
void ncclguard_symbolize(uintptr_t pc, struct ng_symbol *out);

/* The same, looked up at pc itself when exact: the innermost frame of a thread
 * stopped by a signal or read from its registers is the interrupted
 * instruction, not a return address. */
void ncclguard_symbolize_at(uintptr_t pc, int exact, struct ng_symbol *out);

/* Unmaps the files, forgets the cache and lets the next thread in. */
void ncclguard_symbolize_end(void);

/* fork(): the child may symbolize even if another thread of the parent was. */
void ncclguard_symbolize_atfork_child(void);

/* The GNU build-id among the ELF notes of buf[0..len), as lowercase hex into
 * out; out is left alone when there is none. Every length is checked against
 * len. Async-signal-safe (the crash path's modmap.c uses it too). */
void ncclguard_build_id_note(const unsigned char *buf, size_t len, char out[41]);

#endif
