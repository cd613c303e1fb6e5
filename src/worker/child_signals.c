/*
 * child_signals.c - the signals a worker ignores are not ignored by the
 * processes it forks (see child_signals.h).
 *
 * Owns: the set of those signals and the pthread_atfork child handler that
 * sets them back to SIG_DFL.  Process-wide state, set once in a worker
 * before it serves; no Perl, no loop.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "worker/child_signals.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>

static sigset_t defaults_in_children;
static int registered;

/* In the child of a fork: only sigaction, which is async-signal-safe. */
static void set_defaults_in_child(void)
{
    for (int sig = 1; sig < NSIG; sig++) {
        struct sigaction sa;
        if (sigismember(&defaults_in_children, sig) != 1 || sigaction(sig, NULL, &sa) != 0 ||
            sa.sa_handler != SIG_IGN)
            continue;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = SIG_DFL;
        sigemptyset(&sa.sa_mask);
        sigaction(sig, &sa, NULL);
    }
}

int serow_default_signal_in_children(int sig)
{
    if (!registered) {
        sigemptyset(&defaults_in_children);
        int err = pthread_atfork(NULL, NULL, set_defaults_in_child);
        if (err != 0)
            return err;
        registered = 1;
    }
    return sigaddset(&defaults_in_children, sig) == 0 ? 0 : EINVAL;
}
