/*
 * render/escape.h: text into HTML.
 */
#ifndef NCCLGUARD_CLI_RENDER_ESCAPE_H
#define NCCLGUARD_CLI_RENDER_ESCAPE_H

#include <stdio.h>

/* Writes s to f, HTML-escaped. */
void rn_escape(FILE *f, const char *s);

#endif
