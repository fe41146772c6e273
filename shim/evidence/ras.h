/*
 * ras.h: NCCL's own view of an incident, from its RAS service (NCCL 2.24 and
 * later; JSON output from 2.28.7), embedded in the dump.
 *
 * Opt-in (NCCLGUARD_RAS=1): queries of the RAS port have crashed jobs (NVIDIA
 * nccl issues 1669, 1718, 1762, 1996, 2346), so it is asked once per incident,
 * by the rank that reports the incident (trigger.h), after that rank's dump is
 * durable, and never polled. The query: a connection to NCCL_RAS_ADDR
 * (host:port, default localhost:28028), "CLIENT PROTOCOL 2", "SET FORMAT json"
 * (text when the NCCL is older than 2.28.7 and refuses it), "VERBOSE STATUS",
 * then the answer until NCCL closes the connection, at most RAS_MAX bytes and
 * RAS_TIMEOUT_S seconds (NCCL's own collection takes up to 10 s). The answer
 * goes into the next dump ("ras" in docs/dump-format.md), which the query
 * asks for (reason "ras").
 *
 * Threads: init under the start lock; ncclguard_ras_after_dump on the thread
 * that writes the dumps; the query on a detached thread of its own; the
 * dump reads the answer from any thread, signal handlers included.
 */
#ifndef NCCLGUARD_RAS_H
#define NCCLGUARD_RAS_H

/* enabled: NCCLGUARD_RAS. dump_again asks for the dump that carries the
 * answer (the watchdog's). */
void ncclguard_ras_init(int enabled, void (*dump_again)(void));

/* A dump of incident `id` was written, and this rank reports it
 * (trigger.h): starts the query unless it has queried for it. */
void ncclguard_ras_after_dump(const char *id);

/* The last answer, for the dump's "ras" member (dump_format.h). */
struct ng_ras_view {
    const char *incident; /* the incident it was asked for */
    const char *format;   /* "json", "text", or "none" when there is no answer */
    const char *error;    /* why the answer is missing or cut, NULL when none */
    int truncated;        /* the answer was longer than it could keep */
    const char *status;   /* NCCL's answer to VERBOSE STATUS, as it came */
};

/* 0 and *out when an answer is there, -1 before any (or while the next query
 * runs). Async-signal-safe. */
int ncclguard_ras_view(struct ng_ras_view *out);

#endif
