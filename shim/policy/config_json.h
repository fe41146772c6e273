/*
 * config_json.h: the dump's "config" object (docs/dump-format.md): the sources
 * read, every effective setting with its origin and lock, and the environment
 * changes of the policy.
 *
 * Threads: any, and signal handlers: it reads data that is immutable after the
 * constructor and writes through base/json only (no allocation, no stdio, no
 * locale), because a dump may be written from a fatal-signal handler.
 */
#ifndef NCCLGUARD_CONFIG_JSON_H
#define NCCLGUARD_CONFIG_JSON_H

#include <stddef.h>

#include "base/json.h"

/* Writes the object as the next value of j. */
void ncclguard_config_write_json(struct ng_json *j);

/* The same object into buf, NUL-terminated: its length, or -1 when buf is too
 * small (buf then holds "{}"). With buf NULL, the length it would write (it does
 * not change after the constructor). For the CLI and tests. */
long ncclguard_config_json(char *buf, size_t len);

#endif
