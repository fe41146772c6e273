/*
 * render/page.h: `ncclguard report`'s page: one self-contained HTML file (no script,
 * no style sheet, font or image fetched: it opens from a mail attachment).
 */
#ifndef NCCLGUARD_CLI_RENDER_PAGE_H
#define NCCLGUARD_CLI_RENDER_PAGE_H

#include "analyze/model.h"

/* Writes the page to path; 0, or -1 after saying why on stderr. */
int rn_write_page(const struct an *a, const char *path);

#endif
