/*
 * child_signals.h - what the processes a worker forks inherit of its signals.
 *
 * A worker ignores the signals meant for the master (TERM, INT, QUIT, HUP,
 * TTIN, TTOU, USR1: sent to the whole process group, they must not stop it,
 * nor cut short what the app is doing; the master tells it through shared
 * memory instead), and PIPE (a client gone is a failed write, not the
 * worker's end).  An ignored disposition survives fork and exec: without
 * more, a program the app starts (system, backticks, a piped open, fork)
 * could not be stopped with TERM, and `yes | head -1` would print "Broken
 * pipe" (yes gets EPIPE instead of dying quietly).  So each such signal is set back to its
 * default action in the child of every fork the worker makes, by a
 * pthread_atfork child handler (Perl's fork restores the parent's signal
 * mask in the child, but does nothing to the dispositions).  A forked Perl
 * child's %SIG still says IGNORE for them: only the kernel's disposition
 * changes.
 */
#ifndef SEROW_CHILD_SIGNALS_H
#define SEROW_CHILD_SIGNALS_H

/* From now on, the child of every fork of this process has sig set back to
 * SIG_DFL if it is ignored then (a handler of the app's is left alone).  The
 * handler is registered on the first call.  0, or an errno value. */
int serow_default_signal_in_children(int sig);

#endif
