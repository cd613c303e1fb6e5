/*
 * log.c - the error log, for every process and both languages: the holder's
 * and the worker's C call serow_log(), and lib/Serow/Log.pm hands its lines
 * here too (Serow::log_line), so that a line looks the same, is filtered by
 * the same --log-level and goes to the same place whoever wrote it.
 *
 * Owns: the line's format, the level filter, and where lines go: standard
 * error (which the master points at --error-log FILE), with a syslog
 * priority prefix "<N>" when standard error is the journal (journald reads
 * it as the line's level), or a syslog socket (--error-log syslog).  The
 * master sets it once (serow_log_configure) before it forks: every process
 * inherits it.  No buffering: one write(2) or send(2) a line.
 */
#include "log/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

/* Until the master configures it (an option error at start-up), every line
 * is written to standard error: there is no level to filter by yet. */
static int max_level = SEROW_LOG_DEBUG;
/* Standard error is the journal: 1, 0, or -1 not looked at yet. */
static int to_journal = -1;
/* --error-log syslog: the facility (LOG_DAEMON...), or -1 for standard error. */
static int facility = -1;
static struct sockaddr_un syslog_address;
static int syslog_fd = -1;

static const struct {
    const char *name;
    int facility;
} facilities[] = {
    {"user", LOG_USER},     {"daemon", LOG_DAEMON}, {"local0", LOG_LOCAL0}, {"local1", LOG_LOCAL1},
    {"local2", LOG_LOCAL2}, {"local3", LOG_LOCAL3}, {"local4", LOG_LOCAL4}, {"local5", LOG_LOCAL5},
    {"local6", LOG_LOCAL6}, {"local7", LOG_LOCAL7},
};

int serow_log_facility(const char *name)
{
    for (size_t i = 0; i < sizeof(facilities) / sizeof(facilities[0]); i++) {
        if (strcmp(facilities[i].name, name) == 0)
            return facilities[i].facility;
    }
    return -1;
}

static const char *level_name(int level)
{
    switch (level) {
    case SEROW_LOG_ERROR: return "error";
    case SEROW_LOG_WARN: return "warn";
    case SEROW_LOG_INFO: return "info";
    default: return "debug";
    }
}

/* systemd sets JOURNAL_STREAM to "DEVICE:INODE" of the stream it connected
 * to the journal (systemd.exec(5)); standard error is that stream only when
 * its own device and inode match: a service that sends it to a file (or a
 * child whose stderr was redirected) inherits the variable all the same. */
static int stderr_is_journal(void)
{
    const char *stream = getenv("JOURNAL_STREAM");
    unsigned long long dev, ino;
    char end;
    if (stream == NULL || sscanf(stream, "%llu:%llu%c", &dev, &ino, &end) != 2)
        return 0;
    struct stat st;
    if (fstat(STDERR_FILENO, &st) != 0)
        return 0;
    return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

static int syslog_connect(void)
{
    if (syslog_fd >= 0)
        close(syslog_fd);
    syslog_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (syslog_fd < 0)
        return -1;
    if (connect(syslog_fd, (struct sockaddr *)&syslog_address, sizeof(syslog_address)) != 0) {
        close(syslog_fd);
        syslog_fd = -1;
        return -1;
    }
    return 0;
}

int serow_log_configure(int level, const char *syslog_facility, const char *syslog_socket)
{
    max_level = level;
    to_journal = stderr_is_journal();
    if (syslog_fd >= 0)
        close(syslog_fd);
    syslog_fd = -1;
    facility = -1;
    if (syslog_facility == NULL)
        return 0;
    int f = serow_log_facility(syslog_facility);
    if (f < 0 || syslog_socket == NULL || strlen(syslog_socket) >= sizeof(syslog_address.sun_path)) {
        errno = EINVAL;
        return -1;
    }
    memset(&syslog_address, 0, sizeof(syslog_address));
    syslog_address.sun_family = AF_UNIX;
    strcpy(syslog_address.sun_path, syslog_socket);
    facility = f;
    /* Not connected yet: a syslog daemon that starts after Serow is found
     * at the first line. */
    return 0;
}

static void write_stderr(const char *line, size_t length)
{
    ssize_t ignored = write(STDERR_FILENO, line, length);
    (void)ignored;
}

/* RFC 3164 as syslog(3) sends it to the local socket: "<PRI>Mmm dd
 * hh:mm:ss serow[PID]: ", the time in the C locale's words; the daemon adds
 * the host.  A daemon that restarted has a new socket at the same path:
 * connect again once.  False when no daemon took the line. */
static int send_syslog(int level, const struct tm *local, const char *message, size_t length)
{
    static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                       "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    char head[96];
    int used = snprintf(head, sizeof(head), "<%d>%s %2d %02d:%02d:%02d serow[%d]: [%s] ", facility | level,
                        months[local->tm_mon % 12], local->tm_mday, local->tm_hour, local->tm_min,
                        local->tm_sec, (int)getpid(), level_name(level));
    if (used < 0 || (size_t)used >= sizeof(head))
        return 0;
    struct iovec parts[2] = {{head, (size_t)used}, {(void *)message, length}};
    struct msghdr datagram = {.msg_iov = parts, .msg_iovlen = 2};
    for (int attempt = 0; attempt < 2; attempt++) {
        if ((syslog_fd >= 0 || syslog_connect() == 0) && sendmsg(syslog_fd, &datagram, MSG_NOSIGNAL) >= 0)
            return 1;
        if (syslog_fd >= 0)
            close(syslog_fd);
        syslog_fd = -1;
    }
    return 0;
}

/* A line for standard error: "[time] [level] [pid N] message\n", each of
 * the message's lines after the first prefixed with "<N>" too when it goes
 * to the journal (journald takes every line for a record of its own, at
 * the level of its own prefix).  Returns its length; *line is malloc'ed
 * when the stack's buffer is too short. */
static size_t format_line(char *buffer, size_t size, char **line, int level, const struct tm *local,
                          const char *message, size_t length)
{
    char stamp[32] = "";
    if (local)
        strftime(stamp, sizeof(stamp), "%Y-%m-%d %H:%M:%S", local);
    char prefix[8] = "";
    if (to_journal)
        snprintf(prefix, sizeof(prefix), "<%d>", level);
    size_t prefixes = 0;
    for (size_t i = 0; to_journal && i < length; i++)
        prefixes += message[i] == '\n';
    size_t need = 96 + length + prefixes * strlen(prefix);
    *line = need <= size ? buffer : malloc(need);
    if (*line == NULL)
        return 0;
    char *out = *line;
    int used = snprintf(out, need, "%s[%s] [%s] [pid %d] ", prefix, stamp, level_name(level), (int)getpid());
    if (used < 0)
        return 0;
    size_t at = (size_t)used;
    for (size_t i = 0; i < length; i++) {
        out[at++] = message[i];
        if (message[i] == '\n' && to_journal) {
            memcpy(out + at, prefix, strlen(prefix));
            at += strlen(prefix);
        }
    }
    out[at++] = '\n';
    return at;
}

void serow_log_line(int level, const char *message, size_t length)
{
    if (level > max_level)
        return;
    while (length > 0 && message[length - 1] == '\n')
        length--;
    time_t now = time(NULL);
    struct tm local;
    int have_time = localtime_r(&now, &local) != NULL;
    /* A line no syslog daemon takes goes to standard error, not nowhere. */
    if (facility >= 0 && have_time && send_syslog(level, &local, message, length))
        return;
    if (to_journal < 0)
        to_journal = stderr_is_journal();
    /* One write for the whole line, so that lines of processes sharing the
     * log do not interleave. */
    char buffer[1024], *line;
    size_t used = format_line(buffer, sizeof(buffer), &line, level, have_time ? &local : NULL, message, length);
    if (used > 0)
        write_stderr(line, used);
    if (line != buffer)
        free(line);
}

void serow_log(int level, const char *format, ...)
{
    if (level > max_level)
        return;
    /* C's lines are short: one that is not is cut. */
    char message[1024];
    va_list args;
    va_start(args, format);
    int n = vsnprintf(message, sizeof(message), format, args);
    va_end(args);
    if (n < 0)
        return;
    serow_log_line(level, message, (size_t)n < sizeof(message) ? (size_t)n : sizeof(message) - 1);
}
