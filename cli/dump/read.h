/*
 * dump/read.h: reading one dump, from a buffer or a file: the top level, the
 * schema check (the arrays are read by dump/map.c and dump/stack.c); a Flight
 * Recorder pickle by dump/fr.c.
 */
#ifndef NCCLGUARD_CLI_DUMP_READ_H
#define NCCLGUARD_CLI_DUMP_READ_H

#include "dump/dump.h"
#include "json/json.h"

/* Flags of a read: DR_BRIEF skips, unparsed, the members of ops[] that the
 * analysis does not use (comm_rank, comm_nranks, bytes, group, enqueue_mono_ns,
 * seen_start_ns, seen_end_ns, marker: they read as 0 or none), and in the ops past
 * the first one not in flight (the writer puts those in flight first) also index,
 * p2p_seq, peer and stream, which it uses only of an op in flight. A dump that puts
 * an op in flight later is read again without the second skip. */
#define DR_BRIEF 1

/* Reads one dump from buf[0..len) (NG_JSON_PADDING readable bytes after it): JSON,
 * or a Flight Recorder pickle when it starts as one (dump/fr.h). Returns the dump, or NULL with a one-line reason in err. */
struct dr_dump *dr_parse(ng_jparser *p, const char *buf, size_t len, const char *path, int flags,
                         char *err, size_t errlen);
/* Reads the file at path (a regular file, at most 1 GiB). */
struct dr_dump *dr_read_file(ng_jparser *p, const char *path, int flags, char *err, size_t errlen);

/* The bytes of the regular file at path, with NG_JSON_PADDING zero bytes after them,
 * read into b->buf, which is kept (and grown) from one file to the next: a reader
 * thread reuses one buffer. (Mapping the files instead costs more: each unmap
 * interrupts the other CPUs to flush their TLBs.) 0, or -1 with the reason in err. */
struct dr_bytes {
    char *buf;
    size_t len, cap;
};
int dr_slurp(const char *path, struct dr_bytes *b, char *err, size_t errlen);
void dr_unslurp(struct dr_bytes *b); /* frees the buffer */

#endif
