/*
 * test_shim_ras.c: NCCL's RAS view is asked once per incident (shim/evidence/ras.c): after
 * the first query of an incident has ended, a later dump of that incident (the "ras" dump
 * that carries the answer, the dump signal) asks nothing more; a dump of another incident
 * asks again. The RAS service is a socket of the test: it closes the first connection at
 * once (the query ends without an answer) and leaves later ones waiting, so that a query
 * under way is a live thread, counted in /proc/self/task right after the call. The
 * first query's error quotes the reply it got: nothing (it quoted the stack's old bytes).
 */
#include <arpa/inet.h>
#include <check.h>
#include <dirent.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "check_main.h"
#include "evidence/ras.h"

#define S 1000000000LL

static volatile int agains; /* the query asked for the dump that carries its answer */

static void again(void)
{
    __atomic_add_fetch(&agains, 1, __ATOMIC_SEQ_CST);
}

static int tasks(void)
{
    DIR *d = opendir("/proc/self/task");
    ck_assert_ptr_nonnull(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* Waits (a generous bound for a broken run) until ok() holds. */
static void wait_until(int (*ok)(int), int arg, const char *what)
{
    int64_t give_up = ng_clock_ns(CLOCK_MONOTONIC) + 30 * S;
    while (!ok(arg)) {
        ck_assert_msg(ng_clock_ns(CLOCK_MONOTONIC) < give_up, "never: %s", what);
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
}

static int agains_are(int n)
{
    return __atomic_load_n(&agains, __ATOMIC_SEQ_CST) == n;
}

static int tasks_are(int n)
{
    return tasks() == n;
}

NG_TEST(one_query_per_incident)
{
    int srv = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(srv, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    ck_assert_int_eq(bind(srv, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(listen(srv, 8), 0);
    ck_assert_int_eq(getsockname(srv, (struct sockaddr *)&a, &len), 0);
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", ntohs(a.sin_port));
    setenv("NCCL_RAS_ADDR", addr, 1);
    ncclguard_ras_init(1, again);
    int base = tasks();
    ncclguard_ras_after_dump("X");
    int first = accept(srv, NULL, NULL); /* the first query: no answer */
    ck_assert_int_ge(first, 0);
    close(first);
    wait_until(agains_are, 1, "the first query ended");
    wait_until(tasks_are, base, "the first query's thread left");
    /* the view says why there is no answer, with the service's reply: none */
    struct ng_ras_view v;
    ck_assert_int_eq(ncclguard_ras_view(&v), 0);
    ck_assert_str_eq(v.incident, "X");
    ck_assert_str_eq(v.format, "none");
    ck_assert_ptr_nonnull(v.error);
    ck_assert_str_eq(v.error, "no RAS handshake ()");
    ncclguard_ras_after_dump("X"); /* a later dump of X: no query */
    ck_assert_int_eq(tasks(), base);
    ncclguard_ras_after_dump("Y"); /* another incident: a query, waiting on the service */
    ck_assert_int_eq(tasks(), base + 1);
    ck_assert_int_eq(agains, 1);
}
END_TEST

int main(void)
{
    return ng_check_run(ng_check_suite("ras", "ras", 60, ng_check_tests(), NULL));
}
