#ifndef SEROW_LOG_H
#define SEROW_LOG_H

/* Error log lines from C, in the format of lib/Serow/Log.pm:
 * "[2026-11-22 02:20:11] [error] [pid 1234] message", on stderr. */
void serow_log_error(const char *format, ...) __attribute__((format(printf, 1, 2)));
void serow_log_info(const char *format, ...) __attribute__((format(printf, 1, 2)));

#endif
