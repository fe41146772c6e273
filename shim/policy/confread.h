/*
 * confread.h: safe, bounded reading of configuration files.
 *
 * Owns: the checks that decide whether a file may be read at all (a regular
 * file, owned by root or by the user, not world-writable, not too large) and a
 * line splitter with fixed limits on line length, line count and total bytes.
 * The splitter reads from a file descriptor or from memory (the fuzzer's input)
 * through the same code, into a fixed buffer that lives in the caller's struct:
 * no allocation, and a FIFO, a device or a huge file never blocks or exhausts us.
 *
 * Threads: any thread; no shared state. Used by the constructor (before main).
 */
#ifndef NCCLGUARD_CONFREAD_H
#define NCCLGUARD_CONFREAD_H

#include <stddef.h>

#define NG_CONF_MAX_BYTES (1024 * 1024) /* a larger file is refused whole */
#define NG_CONF_MAX_LINES 5000          /* lines after this one are not read */
#define NG_CONF_LINE_MAX 4096           /* a longer line is reported and skipped */
#define NG_CONF_SNIFF 1024              /* bytes inspected to tell text from binary */

enum ng_conf_open {
    NG_CONF_OPENED = 0,  /* *fd is open; the caller closes it */
    NG_CONF_ABSENT = 1,  /* no such file: not an error, nothing to say */
    NG_CONF_REFUSED = 2, /* present but unusable; `why` says why in a few words */
};

/*
 * Opens `path` read-only after checking that it is a regular file (a symlink is
 * followed, as Kubernetes ConfigMaps need; the target is checked), at most
 * NG_CONF_MAX_BYTES long, owned by root or the effective user and not
 * world-writable. stat() comes first, so a FIFO or device is never opened; the
 * open uses O_NONBLOCK and fstat() confirms that it is the file that was checked.
 */
int ncclguard_conf_open(const char *path, int *fd, char *why, size_t whylen);

enum ng_line_flag {
    NG_LINE_OK = 0,
    NG_LINE_TOO_LONG, /* longer than NG_CONF_LINE_MAX; content not returned */
    NG_LINE_NUL,      /* contains a NUL byte */
};

enum ng_lines_stop {
    NG_STOP_NONE = 0, /* still reading, or reached the end normally */
    NG_STOP_LINES,    /* more than NG_CONF_MAX_LINES lines */
    NG_STOP_BYTES,    /* more than NG_CONF_MAX_BYTES bytes (the file grew) */
    NG_STOP_ERROR,    /* read(2) failed; err holds errno */
};

struct ng_lines {
    int fd; /* -1 when reading from mem */
    const char *mem;
    size_t mem_len, mem_pos;
    size_t start, end; /* unread bytes are buf[start, end) */
    size_t total;      /* bytes taken from the source so far */
    unsigned lineno;   /* number of the line last returned, 1-based */
    int eof, skipping, stop, err;
    char buf[2 * NG_CONF_LINE_MAX];
};

/* Starts reading from an open descriptor (not closed by the reader). */
void ncclguard_lines_fd(struct ng_lines *r, int fd);

/* Starts reading from memory (the fuzzer, tests, in-memory sources). */
void ncclguard_lines_mem(struct ng_lines *r, const char *data, size_t len);

/*
 * Returns 1 when the first NG_CONF_SNIFF bytes look binary (a NUL byte, or a
 * control character other than tab, CR, LF, VT and FF) and sets *offset to the
 * first such byte; 0 for text. Call it before the first ncclguard_lines_next.
 */
int ncclguard_lines_binary(struct ng_lines *r, size_t *offset);

/*
 * Next line, without its '\n' (nor a '\r' before it): returns 1 and sets *line,
 * *len and *flag, or 0 at the end (r->stop says whether a limit ended it).
 * The line points into r->buf and stays valid until the next call.
 */
int ncclguard_lines_next(struct ng_lines *r, const char **line, size_t *len, int *flag);

#endif
