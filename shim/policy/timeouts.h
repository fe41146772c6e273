/*
 * timeouts.h: the timeout of an op and the thresholds of the escalation ladder,
 * computed from the settings. Pure functions of the settings, cheap enough for
 * every watchdog poll.
 *
 * Threads: any (the watchdog; the CLI and tests).
 */
#ifndef NCCLGUARD_TIMEOUTS_H
#define NCCLGUARD_TIMEOUTS_H

#include <stdint.h>

#include "policy/config.h"

enum ng_timeout_kind { NG_TIMEOUT_OP, NG_TIMEOUT_FIRST_OP, NG_TIMEOUT_INIT };
enum ng_action { NG_ACTION_WARN, NG_ACTION_DUMP, NG_ACTION_ABORT, NG_ACTION_KILL };

/*
 * The timeout of an op of type `op` (enum ng_op_type; -1 for none), in seconds,
 * 0 when off:
 *   OP:       (its timeout_<op> if set, else timeout) + bytes / floor_bandwidth
 *   FIRST_OP: the larger of first_timeout and OP's base, + bytes / floor_bandwidth
 *   INIT:     init_timeout (op and bytes unused)
 * floor_bandwidth = off adds nothing.
 */
double ncclguard_timeout_s(const struct ng_settings *s, enum ng_timeout_kind kind, int op,
                           uint64_t bytes);

/* When an action fires for an op with this timeout: its multiple (warn_at,
 * dump_at, abort_at, kill_at) times timeout_s; 0 when the action is off. */
double ncclguard_action_after_s(const struct ng_settings *s, enum ng_action a, double timeout_s);

#endif
