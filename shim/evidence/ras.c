/* ras.c: see ras.h. */
#include "evidence/ras.h"

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "base/atomic.h"
#include "base/log.h"
#include "base/thread.h"

#define ID_MAX 128
#define RAS_MAX (1 << 20)
#define RAS_TIMEOUT_S 30
#define RAS_DEFAULT_HOST "localhost"
#define RAS_DEFAULT_PORT "28028"

static int enabled;
static void (*dump_again)(void);
static char queried[ID_MAX]; /* the incident last queried (the dumping thread's) */

/* The answer. The query thread fills it while `ready` is 0 and publishes it
 * with a release store; a new query starts only once a dump has carried the
 * last answer (the query asks for that dump itself). */
static ng_atomic(int) ready;
static ng_atomic(int) busy; /* a query is running */
static char incident[ID_MAX];
static char format[8];
static char error[160];
static int truncated;
static char answer[RAS_MAX + 1];

void ncclguard_ras_init(int on, void (*again)(void))
{
    enabled = on;
    dump_again = again;
}

/* Connects to NCCL_RAS_ADDR with send and receive timeouts; -1 with error set. */
static int connect_ras(void)
{
    char host[256] = RAS_DEFAULT_HOST, port[16] = RAS_DEFAULT_PORT;
    const char *addr = getenv("NCCL_RAS_ADDR");
    if (addr && *addr) {
        const char *colon = strrchr(addr, ':');
        size_t n = colon ? (size_t)(colon - addr) : strlen(addr);
        if (n && n < sizeof host) snprintf(host, sizeof host, "%.*s", (int)n, addr);
        if (colon && colon[1] && strlen(colon + 1) < sizeof port)
            snprintf(port, sizeof port, "%s", colon + 1);
        if (host[0] == '[' && host[strlen(host) - 1] == ']') { /* [v6 address]:port */
            memmove(host, host + 1, strlen(host));
            host[strlen(host) - 1] = '\0';
        }
    }
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
    int rc = getaddrinfo(host, port, &hints, &ai);
    if (rc) {
        snprintf(error, sizeof error, "cannot resolve %s:%s: %s", host, port, gai_strerror(rc));
        return -1;
    }
    int fd = -1;
    for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) continue;
        struct timeval tv = {RAS_TIMEOUT_S, 0};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        if (connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
            snprintf(error, sizeof error, "cannot connect to %s:%s: %s", host, port,
                     strerror(errno));
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(ai);
    return fd;
}

/* Sends one command line; reads the one-line reply into buf (NUL-terminated, also
 * when the reply never came: the caller may quote it). */
static int command(int fd, const char *cmd, char *buf, size_t len)
{
    size_t n = strlen(cmd), got = 0;
    if (buf) buf[0] = '\0';
    if (send(fd, cmd, n, MSG_NOSIGNAL) != (ssize_t)n) return -1;
    if (!buf) return 0;
    while (got + 1 < len) {
        ssize_t r = recv(fd, buf + got, len - 1 - got, 0);
        if (r <= 0) return -1;
        got += (size_t)r;
        if (buf[got - 1] == '\n') break;
    }
    buf[got] = '\0';
    return 0;
}

/* The whole query; 0, or -1 with error set. */
static int query(void)
{
    char line[256];
    int fd = connect_ras();
    if (fd < 0) return -1;
    int rc = -1;
    if (command(fd, "CLIENT PROTOCOL 2\n", line, sizeof line) != 0 ||
        strncasecmp(line, "SERVER PROTOCOL ", 16) != 0) {
        snprintf(error, sizeof error, "no RAS handshake (%.60s)", line);
    } else {
        snprintf(format, sizeof format, "%s",
                 command(fd, "SET FORMAT json\n", line, sizeof line) == 0 &&
                         !strcasecmp(line, "OK\n")
                     ? "json"
                     : "text");
        size_t got = 0;
        ssize_t r = 0;
        if (command(fd, "VERBOSE STATUS\n", NULL, 0) == 0) {
            while (got < RAS_MAX && (r = recv(fd, answer + got, RAS_MAX - got, 0)) > 0)
                got += (size_t)r;
            answer[got] = '\0';
            truncated = got == RAS_MAX;
            if (r < 0 && !truncated)
                snprintf(error, sizeof error, "the answer stopped after %zu bytes: %s", got,
                         strerror(errno));
            rc = 0;
        } else {
            snprintf(error, sizeof error, "cannot send VERBOSE STATUS: %s", strerror(errno));
        }
    }
    close(fd);
    return rc;
}

static void *run(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "ncclguard-ras");
    error[0] = answer[0] = '\0';
    truncated = 0;
    snprintf(format, sizeof format, "none");
    if (query() != 0) NG_WARN("NCCL RAS query: %s", error);
    ng_atomic_store_release(&ready, 1);
    ng_atomic_store_release(&busy, 0);
    dump_again();
    return NULL;
}

void ncclguard_ras_after_dump(const char *id)
{
    if (!enabled || !id || !strcmp(queried, id)) return;
    int idle = 0;
    if (!ng_atomic_cas_acq_rel(&busy, &idle, 1)) return; /* the last query still runs */
    snprintf(queried, sizeof queried, "%s", id);
    ng_atomic_store_release(&ready, 0);
    snprintf(incident, sizeof incident, "%s", id);
    if (ncclguard_thread_start(NULL, run, NULL) != 0) ng_atomic_store_release(&busy, 0);
}

int ncclguard_ras_view(struct ng_ras_view *out)
{
    if (!ng_atomic_load_acquire(&ready)) return -1;
    *out = (struct ng_ras_view){incident, format, error[0] ? error : NULL, truncated, answer};
    return 0;
}
