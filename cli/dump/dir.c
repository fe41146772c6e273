/*
 * dump/dir.c: dr_dir_read (dump/dump.h). The *.json entries of a directory (and
 * the files that start as a pickle, Flight Recorder dumps) are
 * parsed by worker threads, at most WINDOW ahead of the caller, and handed over
 * in file-name order: memory holds a few parsed dumps whatever their number.
 */
#include "dump/dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dump/dump.h"
#include "dump/fr.h"
#include "dump/read.h"
#include "json/json.h"
#include "json/parser.h"

#define MAX_THREADS 8

struct slot {
    struct dr_dump *d;
    size_t bytes;
    int ready;
    char err[512];
};

struct job {
    const char *dir;
    char **names;
    size_t n, next, delivered, window;
    struct slot *slots; /* window entries, file i in slots[i % window] */
    enum ng_json_backend backend;
    int flags, stop;
    pthread_mutex_t lock;
    pthread_cond_t ready, space;
};

static int by_name(const void *a, const void *b)
{
    return strverscmp(*(char *const *)a, *(char *const *)b);
}

/* A file not named *.json is a dump when it starts as a pickle: a Flight Recorder
 * dump, named by torch <prefix><rank> (dump/fr.h). */
static int is_pickle(const struct job *j, const struct dirent *e)
{
    if (e->d_type != DT_REG && e->d_type != DT_LNK && e->d_type != DT_UNKNOWN) return 0;
    char path[4096], head[2];
    snprintf(path, sizeof path, "%s/%s", j->dir, e->d_name);
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) return 0;
    struct stat st;
    int ok = !fstat(fd, &st) && S_ISREG(st.st_mode) && read(fd, head, 2) == 2 && dr_fr_is(head, 2);
    close(fd);
    return ok;
}

static int list(struct job *j, char *err, size_t errlen)
{
    DIR *dp = opendir(j->dir);
    if (!dp) {
        snprintf(err, errlen, "%s: %s", j->dir, strerror(errno));
        return -1;
    }
    size_t cap = 0;
    struct dirent *e;
    while ((e = readdir(dp))) {
        size_t len = strlen(e->d_name);
        if (e->d_name[0] == '.') continue;
        if ((len < 6 || strcmp(e->d_name + len - 5, ".json")) && !is_pickle(j, e)) continue;
        if (j->n == cap) {
            cap = cap ? cap * 2 : 256;
            char **nn = realloc(j->names, cap * sizeof *nn);
            if (!nn) break;
            j->names = nn;
        }
        if (!(j->names[j->n] = strdup(e->d_name))) break;
        j->n++;
    }
    closedir(dp);
    if (j->n > 1) qsort(j->names, j->n, sizeof *j->names, by_name);
    return 0;
}

/* The rank in a writer's file name, ncclguard-r<rank>-<host>-<pid>.json; -1 if none. */
static long name_rank(const char *name)
{
    if (strncmp(name, "ncclguard-r", 11) || name[11] < '0' || name[11] > '9') return -1;
    char *end;
    long r = strtol(name + 11, &end, 10);
    return *end == '-' ? r : -1;
}

static int by_rank(const void *a, const void *b)
{
    long ra = name_rank(*(char *const *)a), rb = name_rank(*(char *const *)b);
    return ra < rb ? -1 : ra > rb ? 1 : strverscmp(*(char *const *)a, *(char *const *)b);
}

/* Two files named for one rank (a rank restarted, or a leftover): the newer one
 * (by modification time) is read, the other reported. Removes the others from
 * j->names; their lines go to on_bad. */
static void one_per_rank(struct job *j, const struct dr_dir_cb *cb, struct dr_dir_stats *st)
{
    if (j->n < 2) return;
    char **v = malloc(j->n * sizeof *v);
    if (!v) return;
    memcpy(v, j->names, j->n * sizeof *v);
    if (j->n > 1) qsort(v, j->n, sizeof *v, by_rank);
    for (size_t i = 0; i + 1 < j->n; i++) {
        long r = name_rank(v[i]);
        size_t k = i, best = i;
        struct timespec tb = {0, 0};
        while (k < j->n && r >= 0 && name_rank(v[k]) == r) {
            char path[4096];
            struct stat sb;
            snprintf(path, sizeof path, "%s/%s", j->dir, v[k]);
            if (!stat(path, &sb) &&
                (sb.st_mtim.tv_sec > tb.tv_sec ||
                 (sb.st_mtim.tv_sec == tb.tv_sec && sb.st_mtim.tv_nsec >= tb.tv_nsec))) {
                tb = sb.st_mtim;
                best = k;
            }
            k++;
        }
        for (size_t x = i; x < k && k > i + 1; x++) {
            if (x == best) continue;
            char path[4096], why[4200];
            snprintf(path, sizeof path, "%s/%s", j->dir, v[x]);
            snprintf(why, sizeof why,
                     "a second dump of rank %ld (the newer one, %s, is read): ignored", r, v[best]);
            if (cb->on_bad) cb->on_bad(cb->ctx, path, why);
            st->bad++;
            v[x][0] = '\0'; /* dropped below */
        }
        if (k > i + 1) i = k - 1;
    }
    free(v);
    size_t n = 0;
    for (size_t i = 0; i < j->n; i++) {
        if (j->names[i][0])
            j->names[n++] = j->names[i];
        else
            free(j->names[i]);
    }
    j->n = n;
}

static void path_of(const struct job *j, size_t i, char *buf, size_t size)
{
    snprintf(buf, size, "%s/%s", j->dir, j->names[i]);
}

static void parse_one(struct job *j, ng_jparser *p, size_t i, struct slot *s, struct dr_bytes *b)
{
    char path[4096];
    path_of(j, i, path, sizeof path);
    if (dr_slurp(path, b, s->err, sizeof s->err)) return;
    s->d = dr_parse(p, b->buf, b->len, path, j->flags, s->err, sizeof s->err);
    s->bytes = b->len;
}

static void *worker(void *arg)
{
    struct job *j = arg;
    ng_jparser *p = ng_jparser_new(j->backend);
    struct dr_bytes b = {0};
    pthread_mutex_lock(&j->lock);
    for (;;) {
        while (!j->stop && j->next < j->n && j->next >= j->delivered + j->window)
            pthread_cond_wait(&j->space, &j->lock);
        if (j->stop || j->next >= j->n) break;
        size_t i = j->next++;
        pthread_mutex_unlock(&j->lock);
        struct slot s = {0};
        if (p)
            parse_one(j, p, i, &s, &b);
        else
            snprintf(s.err, sizeof s.err, "out of memory");
        pthread_mutex_lock(&j->lock);
        s.ready = 1;
        j->slots[i % j->window] = s;
        pthread_cond_broadcast(&j->ready);
    }
    pthread_mutex_unlock(&j->lock);
    ng_jparser_free(p);
    dr_unslurp(&b);
    return NULL;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* A bar on stderr once the read has taken a second, at most ten times a second. */
static void progress(size_t done, size_t n, double t0, double *last, int *shown)
{
    double t = now_s();
    if (t - t0 < 1.0 || t - *last < 0.1 || done == n) return;
    *last = t;
    *shown = 1;
    int w = 40, fill = (int)((double)w * (double)done / (double)n);
    fprintf(stderr, "\rncclguard: reading dumps [%.*s%*s] %zu/%zu", fill,
            "========================================", w - fill, "", done, n);
}

static int nthreads(const struct dr_dir_opts *o)
{
    long n = o->threads > 0 ? o->threads : sysconf(_SC_NPROCESSORS_ONLN);
    return (int)(n < 1 ? 1 : n > MAX_THREADS ? MAX_THREADS : n);
}

int dr_dir_read(const char *dir, const struct dr_dir_opts *o, const struct dr_dir_cb *cb,
                struct dr_dir_stats *st, char *err, size_t errlen)
{
    struct job j = {.dir = dir, .backend = o->backend, .flags = o->flags};
    memset(st, 0, sizeof *st);
    if (list(&j, err, errlen)) return -1;
    st->files = j.n;
    one_per_rank(&j, cb, st);
    int nt = nthreads(o);
    j.window = (size_t)nt * 2;
    j.slots = calloc(j.window, sizeof *j.slots);
    pthread_t th[MAX_THREADS];
    int started = 0;
    pthread_mutex_init(&j.lock, NULL);
    pthread_cond_init(&j.ready, NULL);
    pthread_cond_init(&j.space, NULL);
    for (int t = 0; j.slots && t < nt && (size_t)t < j.n; t++)
        if (pthread_create(&th[t], NULL, worker, &j) == 0) started++;
    int show = o->progress && isatty(2), shown = 0, rc = 0;
    double t0 = now_s(), last = 0;
    for (size_t i = 0; i < j.n && started && !rc; i++) {
        pthread_mutex_lock(&j.lock);
        struct slot *s = &j.slots[i % j.window];
        while (!s->ready) pthread_cond_wait(&j.ready, &j.lock);
        struct slot got = *s;
        memset(s, 0, sizeof *s);
        j.delivered = i + 1;
        pthread_cond_broadcast(&j.space);
        pthread_mutex_unlock(&j.lock);
        char path[4096];
        path_of(&j, i, path, sizeof path);
        if (got.d) {
            st->dumps++;
            st->bytes += got.bytes;
            rc = cb->on_dump(cb->ctx, got.d);
            dr_free(got.d);
        } else {
            st->bad++;
            if (cb->on_bad) cb->on_bad(cb->ctx, path, got.err);
        }
        if (show) progress(i + 1, j.n, t0, &last, &shown);
    }
    if (j.n && !started) {
        snprintf(err, errlen, "cannot start a thread");
        rc = -1;
    }
    pthread_mutex_lock(&j.lock);
    j.stop = 1;
    pthread_cond_broadcast(&j.space);
    pthread_mutex_unlock(&j.lock);
    for (int t = 0; t < started; t++) pthread_join(th[t], NULL);
    for (size_t i = 0; j.slots && i < j.window; i++) dr_free(j.slots[i].d);
    if (shown) fprintf(stderr, "\r\033[K");
    for (size_t i = 0; i < j.n; i++) free(j.names[i]);
    free(j.names);
    free(j.slots);
    pthread_mutex_destroy(&j.lock);
    pthread_cond_destroy(&j.ready);
    pthread_cond_destroy(&j.space);
    return rc > 0 ? 0 : rc;
}
