/* thread.c: see thread.h. */
#include "base/thread.h"

#include <signal.h>

int ncclguard_thread_start(pthread_t *t, void *(*fn)(void *), void *arg)
{
    pthread_t detached;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    if (!t) pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* the new thread inherits this mask */
    int rc = pthread_create(t ? t : &detached, &attr, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    return rc;
}
