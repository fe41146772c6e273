/*
 * verdict.h: the verdict in the job's own log. After an incident, the rank
 * that reports it (trigger.h: the one that raised it, or global rank 0 for a
 * manual trigger) waits until the incident's dumps of every rank are in the
 * dump directory, or NCCLGUARD_VERDICT_WAIT_S has passed, then runs
 * `ncclguard analyze DIR --incident ID` and logs the verdict it prints (its
 * first lines, up to the first empty one), each as an `ncclguard:` line.
 *
 * The analyzer is a program of its own, found next to the library
 * (`<dir of libncclguard.so>/ncclguard`, else `<dir>/../bin/ncclguard`), and
 * started without LD_PRELOAD (vfork and execve, as posix_spawn does, so that
 * the child can set RLIMIT_AS first: 4 GiB, docs/analysis.md "Memory"): nothing
 * of it runs inside the job's process. Its run is bounded (VERDICT_RUN_S); one that takes longer is
 * killed, and the job never waits for any of it.
 *
 * Threads: init under the start lock; ncclguard_verdict_after_dump on the
 * thread that writes the dumps, after a dump of an incident is durable; the
 * waiting and the analysis run on a detached thread of their own, once per
 * incident.
 */
#ifndef NCCLGUARD_VERDICT_H
#define NCCLGUARD_VERDICT_H

/* Finds the analyzer and reads the world size (WORLD_SIZE, OMPI_COMM_WORLD_SIZE,
 * PMI_SIZE, SLURM_NTASKS). wait_s 0 turns the verdict off. */
void ncclguard_verdict_init(double wait_s);

/* A dump of incident `id` was written, and this rank reports it
 * (trigger.h): starts the verdict unless it has for this one. */
void ncclguard_verdict_after_dump(const char *id);

#endif
