/* version.h: the ncclguard version, written into dumps and printed by the CLI. */
#ifndef NCCLGUARD_VERSION_H
#define NCCLGUARD_VERSION_H
#define NCCLGUARD_VERSION "0.1.0"
#endif
