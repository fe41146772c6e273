/* confread.c: see confread.h. */
#include "policy/confread.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/outfile.h"

/* The checks shared by the stat() before opening and the fstat() after it. */
static int check_stat(const struct stat *st, char *why, size_t whylen)
{
    if (!S_ISREG(st->st_mode)) {
        snprintf(why, whylen, "%s, not a regular file", ncclguard_file_kind(st->st_mode));
        return -1;
    }
    if (st->st_uid != 0 && st->st_uid != geteuid()) {
        snprintf(why, whylen, "owned by uid %u, which is neither root nor you (uid %u)",
                 (unsigned)st->st_uid, (unsigned)geteuid());
        return -1;
    }
    if (st->st_mode & S_IWOTH) {
        snprintf(why, whylen, "world-writable (mode %04o), so anyone could change the policy",
                 (unsigned)(st->st_mode & 07777));
        return -1;
    }
    if (st->st_size > NG_CONF_MAX_BYTES) {
        snprintf(why, whylen, "too large (%lld bytes; the limit is %d)", (long long)st->st_size,
                 NG_CONF_MAX_BYTES);
        return -1;
    }
    return 0;
}

int ncclguard_conf_open(const char *path, int *fd, char *why, size_t whylen)
{
    struct stat st, st2;
    *fd = -1;
    if (stat(path, &st) != 0) {
        if (errno == ENOENT || errno == ENOTDIR) return NG_CONF_ABSENT;
        snprintf(why, whylen, "cannot read it (%s)", strerror(errno));
        return NG_CONF_REFUSED;
    }
    if (check_stat(&st, why, whylen) != 0) return NG_CONF_REFUSED;
    int f = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (f < 0) {
        snprintf(why, whylen, "cannot open it (%s)", strerror(errno));
        return NG_CONF_REFUSED;
    }
    if (fstat(f, &st2) != 0 || st2.st_dev != st.st_dev || st2.st_ino != st.st_ino) {
        snprintf(why, whylen, "it changed while being opened");
        close(f);
        return NG_CONF_REFUSED;
    }
    if (check_stat(&st2, why, whylen) != 0) {
        close(f);
        return NG_CONF_REFUSED;
    }
    *fd = f;
    return NG_CONF_OPENED;
}

void ncclguard_lines_fd(struct ng_lines *r, int fd)
{
    memset(r, 0, offsetof(struct ng_lines, buf));
    r->fd = fd;
}

void ncclguard_lines_mem(struct ng_lines *r, const char *data, size_t len)
{
    memset(r, 0, offsetof(struct ng_lines, buf));
    r->fd = -1;
    r->mem = data;
    r->mem_len = len;
}

/* Moves unread bytes to the front and reads more; sets eof or stop at the end. */
static void fill(struct ng_lines *r)
{
    if (r->start > 0) {
        memmove(r->buf, r->buf + r->start, r->end - r->start);
        r->end -= r->start;
        r->start = 0;
    }
    size_t room = sizeof r->buf - r->end;
    size_t budget = NG_CONF_MAX_BYTES + 1 - r->total; /* one more byte detects growth */
    if (room > budget) room = budget;
    if (room == 0) {
        if (r->total > NG_CONF_MAX_BYTES) {
            r->stop = NG_STOP_BYTES;
            r->eof = 1;
        }
        return;
    }
    ssize_t n;
    if (r->fd < 0) {
        size_t left = r->mem_len - r->mem_pos;
        n = (ssize_t)(left < room ? left : room);
        memcpy(r->buf + r->end, r->mem + r->mem_pos, (size_t)n);
        r->mem_pos += (size_t)n;
    } else {
        do {
            n = read(r->fd, r->buf + r->end, room);
        } while (n < 0 && errno == EINTR);
        if (n < 0) {
            r->err = errno;
            r->stop = NG_STOP_ERROR;
            r->eof = 1;
            return;
        }
    }
    if (n == 0) r->eof = 1;
    r->end += (size_t)n;
    r->total += (size_t)n;
    if (r->total > NG_CONF_MAX_BYTES) {
        r->stop = NG_STOP_BYTES;
        r->eof = 1;
    }
}

int ncclguard_lines_binary(struct ng_lines *r, size_t *offset)
{
    while (!r->eof && r->end - r->start < NG_CONF_SNIFF) fill(r);
    size_t n = r->end - r->start;
    if (n > NG_CONF_SNIFF) n = NG_CONF_SNIFF;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)r->buf[r->start + i];
        if (c == 0 || (c < 0x20 && !strchr("\t\n\r\v\f", c)) || c == 0x7f) {
            *offset = i;
            return 1;
        }
    }
    return 0;
}

/* Hands out buf[start, start+len) as a line; `consumed` includes the '\n'. */
static int emit(struct ng_lines *r, size_t len, size_t consumed, const char **line, size_t *out_len,
                int *flag)
{
    char *s = r->buf + r->start;
    r->start += consumed;
    if (++r->lineno > NG_CONF_MAX_LINES) {
        r->stop = NG_STOP_LINES;
        r->eof = 1;
        r->start = r->end;
        return 0;
    }
    if (len > 0 && s[len - 1] == '\r') len--;
    *flag = memchr(s, '\0', len) ? NG_LINE_NUL : NG_LINE_OK;
    if (len > NG_CONF_LINE_MAX) {
        *flag = NG_LINE_TOO_LONG;
        len = 0;
    }
    *line = s;
    *out_len = len;
    return 1;
}

int ncclguard_lines_next(struct ng_lines *r, const char **line, size_t *len, int *flag)
{
    for (;;) {
        if (r->stop == NG_STOP_LINES) return 0;
        size_t avail = r->end - r->start;
        char *nl = memchr(r->buf + r->start, '\n', avail);
        if (nl) {
            size_t n = (size_t)(nl - (r->buf + r->start));
            if (r->skipping) {
                /* the tail of an overlong line: report the whole line once */
                r->skipping = 0;
                int got = emit(r, 0, n + 1, line, len, flag);
                if (got) *flag = NG_LINE_TOO_LONG;
                return got;
            }
            return emit(r, n, n + 1, line, len, flag);
        }
        if (avail >= NG_CONF_LINE_MAX + 2 || (r->skipping && avail > 0)) {
            /* no newline within the limit: drop what we have, keep skipping */
            r->skipping = 1;
            r->start = r->end = 0;
        }
        if (r->eof) {
            if (r->skipping) {
                r->skipping = 0;
                int got = emit(r, 0, 0, line, len, flag);
                if (got) *flag = NG_LINE_TOO_LONG;
                return got;
            }
            /* a last line without '\n' counts, unless a limit cut it short */
            if (avail > 0 && r->stop == NG_STOP_NONE) return emit(r, avail, avail, line, len, flag);
            return 0;
        }
        fill(r);
    }
}
