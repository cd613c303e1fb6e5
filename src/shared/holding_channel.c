/*
 * holding_channel.c - a hold or a publish sent to the connection holder
 * (holding_channel.h).  Owns the layout of those datagrams; what they say is
 * holder_message.c's.
 */
#include <string.h>

#include "shared/holding_channel.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>

int serow_holding_send(int channel, const struct serow_holding_head *head, int fd,
                       const char *message, size_t len, const char *request_line, int wait_ms)
{
    size_t total = sizeof(*head) + len + head->request_line_len;
    if (total > SEROW_HOLDING_MAX_MESSAGE) {
        errno = EMSGSIZE;
        return -1;
    }
    char *buf = malloc(total);
    if (buf == NULL)
        return -1;
    memcpy(buf, head, sizeof(*head));
    memcpy(buf + sizeof(*head), message, len);
    if (head->request_line_len)
        memcpy(buf + sizeof(*head) + len, request_line, head->request_line_len);
    int r;
    for (;;) {
        r = serow_send_message(channel, buf, total, &fd, fd >= 0 ? 1 : 0);
        if (r == 0 || errno != EAGAIN || wait_ms <= 0)
            break;
        /* The holder reads as fast as it can; a full channel is a burst. */
        struct pollfd p = {.fd = channel, .events = POLLOUT};
        if (poll(&p, 1, wait_ms) <= 0) {
            errno = EAGAIN;
            r = -1;
            break;
        }
        wait_ms = 0; /* once: then give up */
    }
    int saved = errno;
    free(buf);
    errno = saved;
    return r;
}
