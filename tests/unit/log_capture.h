/*
 * log_capture.h: a stand-in for shim/base/log.c in the policy unit tests. It keeps
 * every message (whatever its level) in memory, so tests can assert on what
 * the code said, at which level, and how many times.
 */
#ifndef NCCLGUARD_TEST_LOG_CAPTURE_H
#define NCCLGUARD_TEST_LOG_CAPTURE_H

/* Forgets the captured messages. */
void capture_reset(void);

/* Number of messages at level lvl (-1: any level) that contain needle ("" = all). */
int capture_count(int lvl, const char *needle);

/* All captured messages, one per line, "<level>: <message>". */
const char *capture_text(void);

#endif
