/*
 * dump/fr.h: a PyTorch Flight Recorder dump (the pickle torch writes per rank,
 * `<prefix><global rank>`, version 2.x) read into the struct dr_dump of
 * dump/dump.h, so that every subcommand that reads dumps reads these too.
 * docs/analysis.md says what is mapped, and what FR does not record.
 *
 * Called from the reader's threads; nothing shared.
 */
#ifndef NCCLGUARD_CLI_DUMP_FR_H
#define NCCLGUARD_CLI_DUMP_FR_H

#include <stddef.h>

#include "dump/dump.h"

/* 1 when buf[0..len) starts as a pickle does (the PROTO opcode, 0x80): such a
 * file is read as a Flight Recorder dump, by content, whatever its name. */
int dr_fr_is(const char *buf, size_t len);

/* Reads the dump in buf[0..len), of the file path (its name gives the rank, its
 * modification time the dump's time). NULL with a one-line reason in err. */
struct dr_dump *dr_fr_parse(const char *buf, size_t len, const char *path, char *err,
                            size_t errlen);

#endif
