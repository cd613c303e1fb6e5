/*
 * log.c - error log lines from C (the holder's, the worker's), in the same
 * format as lib/Serow/Log.pm's: a timestamp, a level, the message.
 *
 * Owns: that format.  Writes to standard error, which the master points at
 * --error-log; no buffering, one write(2) a line.
 */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static void log_line(const char *level, const char *format, va_list args)
{
    char stamp[32] = "";
    time_t now = time(NULL);
    struct tm local;
    if (localtime_r(&now, &local))
        strftime(stamp, sizeof(stamp), "%Y-%m-%d %H:%M:%S", &local);

    /* One write for the whole line, so that lines of processes sharing the
     * log do not interleave. */
    char line[1024];
    int used = snprintf(line, sizeof(line), "[%s] [%s] [pid %d] ", stamp, level, (int)getpid());
    if (used >= 0 && (size_t)used < sizeof(line))
        used += vsnprintf(line + used, sizeof(line) - used, format, args);
    if (used < 0)
        return;
    if ((size_t)used >= sizeof(line) - 1)
        used = sizeof(line) - 2; /* cut: the newline still ends it */
    line[used++] = '\n';
    ssize_t ignored = write(STDERR_FILENO, line, (size_t)used);
    (void)ignored;
}

void serow_log_error(const char *format, ...)
{
    va_list args;
    va_start(args, format);
    log_line("error", format, args);
    va_end(args);
}

void serow_log_info(const char *format, ...)
{
    va_list args;
    va_start(args, format);
    log_line("info", format, args);
    va_end(args);
}
