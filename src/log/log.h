#ifndef SEROW_LOG_H
#define SEROW_LOG_H

#include <stddef.h>

/* The error log of every process, C's lines and Perl's (Serow::Log):
 * "[2026-11-22 02:20:11] [error] [pid 1234] message" on stderr, "<3>" before
 * it when stderr is the journal, or to a syslog socket.  The levels are
 * syslog's priorities, the numbers journald and syslog take. */
enum serow_log_level {
    SEROW_LOG_ERROR = 3,
    SEROW_LOG_WARN = 4,
    SEROW_LOG_INFO = 6,
    SEROW_LOG_DEBUG = 7,
};

/* Once, in the master, before it forks: lines above level are dropped;
 * with syslog_facility ("daemon", "local0"...) they go to the datagram
 * socket at syslog_socket instead of stderr.  Looks whether stderr is the
 * journal (JOURNAL_STREAM): call it once stderr is where it stays.  -1
 * (EINVAL) for an unknown facility or a path too long for a socket. */
int serow_log_configure(int level, const char *syslog_facility, const char *syslog_socket);

/* syslog's number of a facility name, or -1. */
int serow_log_facility(const char *name);

/* One line (a final newline is dropped; inner ones are kept). */
void serow_log_line(int level, const char *message, size_t length);
void serow_log(int level, const char *format, ...) __attribute__((format(printf, 2, 3)));

#define serow_log_error(...) serow_log(SEROW_LOG_ERROR, __VA_ARGS__)
#define serow_log_warn(...) serow_log(SEROW_LOG_WARN, __VA_ARGS__)
#define serow_log_info(...) serow_log(SEROW_LOG_INFO, __VA_ARGS__)
#define serow_log_debug(...) serow_log(SEROW_LOG_DEBUG, __VA_ARGS__)

#endif
