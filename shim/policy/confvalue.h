/*
 * confvalue.h: the typed values of configuration settings, as text.
 *
 * Owns: parsing of booleans, integers, decimals, durations ("90s", "10m"),
 * multiples ("1.5x"), bandwidths ("1GB/s"), signals ("SIGUSR2") and word
 * choices, and the case-insensitive glob match of conditions. Every parser
 * takes the whole string (no trailing junk, no blank at either end; one blank
 * may separate a number from its unit), never allocates, ignores the locale,
 * and returns 0 on success or -1.
 *
 * Threads: any thread; pure functions.
 */
#ifndef NCCLGUARD_CONFVALUE_H
#define NCCLGUARD_CONFVALUE_H

#include <stddef.h>

/* 1/0, yes/no, true/false, on/off (any case). */
int ncclguard_parse_bool(const char *s, int *out);

/* A decimal integer with an optional sign, at most 2^62 in magnitude (larger
 * values, however many digits, are refused rather than wrapped). */
int ncclguard_parse_int(const char *s, long long *out);

/* A plain decimal number: digits, optionally a '.' and more digits. */
int ncclguard_parse_decimal(const char *s, double *out);

/* Seconds: a decimal with an optional unit ms, s, m/min, h or d; "off" is 0. */
int ncclguard_parse_duration(const char *s, double *out);

/* A multiple: a decimal with an optional trailing 'x'; "off" is 0. */
int ncclguard_parse_factor(const char *s, double *out);

/*
 * Bytes per second: a decimal with an optional K/M/G/T (powers of 1000) or
 * Ki/Mi/Gi/Ti (powers of 1024), an optional 'B' and an optional "/s"; "off" is 0.
 */
int ncclguard_parse_bandwidth(const char *s, double *out);

/*
 * A signal that a dump may be requested with: a name with or without "SIG"
 * (HUP, INT, QUIT, USR1, USR2, ALRM, TERM, URG, WINCH, PWR, RTMIN+n) or a
 * number; "off", "none" and "0" give 0. Signals that cannot be caught or that
 * report faults (KILL, STOP, SEGV, BUS, FPE, ILL, ABRT, TRAP, SYS) are refused.
 */
int ncclguard_parse_signal(const char *s, int *out);

/* "SIGUSR2", "SIGRTMIN+3" or "off" for 0; "SIG<n>" for anything else. */
const char *ncclguard_signal_name(int sig, char *buf, size_t len);

/* Index of s in choices ("off|end|full"), case-insensitive; -1 when absent. */
int ncclguard_parse_choice(const char *s, const char *choices);

/* The n-th word of choices, copied into buf. */
const char *ncclguard_choice_name(const char *choices, int n, char *buf, size_t len);

/* fnmatch-style glob ('*', '?', '[...]') ignoring case; 1 when it matches. */
int ncclguard_glob_match(const char *pattern, const char *text);

#endif
