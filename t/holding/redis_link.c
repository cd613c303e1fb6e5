/*
 * The holder's link to Redis (src/holder/redis_link.c) against a real
 * redis-server, which this program starts, stops and starts again on the
 * port it is given (t/holding/redis_link.t picks a free one):
 *   redis_link REDIS_SERVER PORT DIR
 * Two links on one Redis both receive every publish, their own included;
 * a payload that is no publish message, or one for another channel, is
 * refused; another prefix hears nothing of this one; a restarted Redis is
 * reconnected to, the loss counted as a gap and a publish meanwhile as lost.
 * Every wait is for an event, with a generous deadline.
 * Prints "ok - NAME" / "not ok - NAME" per check.
 */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "holder/redis_link.h"
#include "shared/holder_message.h"

#define DEADLINE_MS 60000
#include "serow_unit.h"

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- redis-server ------------------------------------------------------ */

static const char *redis_server, *dir;
static int port;
static pid_t redis_pid = -1;

static int port_answers(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    int ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

static int start_redis(void)
{
    char port_s[16];
    snprintf(port_s, sizeof port_s, "%d", port);
    redis_pid = fork();
    if (redis_pid == 0) {
        execl(redis_server, redis_server, "--port", port_s, "--bind", "127.0.0.1", "--save", "",
              "--appendonly", "no", "--dir", dir, "--daemonize", "no", "--loglevel", "warning", (char *)NULL);
        _exit(127);
    }
    /* Ready once it accepts: polled, with a deadline. */
    uint64_t deadline = now_ms() + DEADLINE_MS;
    while (now_ms() < deadline) {
        if (port_answers())
            return 1;
        if (waitpid(redis_pid, NULL, WNOHANG) == redis_pid)
            return 0;
        poll(NULL, 0, 10);
    }
    return 0;
}

static void stop_redis(void)
{
    if (redis_pid > 0) {
        kill(redis_pid, SIGTERM);
        waitpid(redis_pid, NULL, 0);
    }
    redis_pid = -1;
}

/* ---- the loop ---------------------------------------------------------- */

#define MAX_LINKS 3
#define MAX_GOT 16

struct receiver {
    struct serow_redis_link *link;
    size_t got;
    char *messages[MAX_GOT];
    size_t lens[MAX_GOT];
};

static struct receiver receivers[MAX_LINKS];
static int num_receivers;

static void on_publish(void *ctx, const char *message, size_t len)
{
    struct receiver *r = ctx;
    if (r->got < MAX_GOT) {
        r->messages[r->got] = malloc(len);
        memcpy(r->messages[r->got], message, len);
        r->lens[r->got] = len;
    }
    r->got++;
}

/* One turn of the holder's loop, as it will be: every side's descriptor
 * watched, the reconnects due run. */
static void turn(void)
{
    struct pollfd fds[MAX_LINKS * 2];
    int who[MAX_LINKS * 2], side_of[MAX_LINKS * 2], n = 0;
    uint64_t now = now_ms(), due = 0;
    for (int i = 0; i < num_receivers; i++) {
        struct serow_redis_link *l = receivers[i].link;
        uint64_t d = serow_redis_link_due(l);
        if (d != 0 && (due == 0 || d < due))
            due = d;
        for (int s = 0; s < 2; s++) {
            int fd = serow_redis_link_fd(l, (enum serow_redis_side)s);
            if (fd < 0)
                continue;
            fds[n] = (struct pollfd){ .fd = fd, .events = POLLIN
                | (serow_redis_link_wants_write(l, (enum serow_redis_side)s) ? POLLOUT : 0) };
            who[n] = i;
            side_of[n] = s;
            n++;
        }
    }
    int timeout = 100;
    if (due != 0)
        timeout = due > now ? (int)(due - now < 100 ? due - now : 100) : 0;
    poll(fds, (nfds_t)n, timeout);
    now = now_ms();
    for (int k = 0; k < n; k++)
        if (fds[k].revents)
            serow_redis_link_handle(receivers[who[k]].link, (enum serow_redis_side)side_of[k], now);
    for (int i = 0; i < num_receivers; i++)
        serow_redis_link_tick(receivers[i].link, now);
}

typedef int (*condition)(void);

static int run_until(condition cond)
{
    uint64_t deadline = now_ms() + DEADLINE_MS;
    while (!cond()) {
        if (now_ms() > deadline)
            return 0;
        turn();
    }
    return 1;
}

static int all_ready(void)
{
    for (int i = 0; i < num_receivers; i++)
        if (!serow_redis_link_ready(receivers[i].link))
            return 0;
    return 1;
}

static int none_ready(void)
{
    for (int i = 0; i < num_receivers; i++)
        if (serow_redis_link_ready(receivers[i].link))
            return 0;
    return 1;
}

static size_t want_a, want_b, want_c;
static int a_b_got(void) { return receivers[0].got >= want_a && receivers[1].got >= want_b; }
static int c_got(void) { return receivers[2].got >= want_c; }

/* An encoded publish message: one http-stream item. */
static size_t message(char *out, size_t cap, const char *channel, const char *content)
{
    struct serow_publish_item p;
    memset(&p, 0, sizeof p);
    p.channel = (struct serow_bytes){ channel, (uint32_t)strlen(channel) };
    p.formats = SEROW_FORMAT_HTTP_STREAM;
    p.stream.content = (struct serow_bytes){ content, (uint32_t)strlen(content) };
    return serow_publish_encode(&p, out, cap);
}

static int got_message(const struct receiver *r, size_t i, const char *m, size_t len)
{
    return r->got > i && r->lens[i] == len && memcmp(r->messages[i], m, len) == 0;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s REDIS_SERVER PORT DIR\n", argv[0]);
        return 2;
    }
    redis_server = argv[1];
    port = atoi(argv[2]);
    dir = argv[3];
    signal(SIGPIPE, SIG_IGN);

    check(serow_redis_link_open("127.0.0.1", port, "a b", on_publish, NULL, now_ms()) == NULL,
          "a prefix that is no channel name is refused");
    check(serow_redis_link_open("127.0.0.1", port, "a*", on_publish, NULL, now_ms()) == NULL,
          "a prefix with a pattern's byte is refused");

    check(start_redis(), "redis-server started");

    struct receiver *A = &receivers[0], *B = &receivers[1], *C = &receivers[2];
    A->link = serow_redis_link_open("127.0.0.1", port, "t", on_publish, A, now_ms());
    B->link = serow_redis_link_open("127.0.0.1", port, "t", on_publish, B, now_ms());
    C->link = serow_redis_link_open("127.0.0.1", port, "u", on_publish, C, now_ms());
    num_receivers = 3;
    check(A->link && B->link && C->link, "three links opened");
    check(run_until(all_ready), "connected and subscribed");

    char m1[256], m2[256], m3[256], m4[256];
    size_t n1 = message(m1, sizeof m1, "news", "data: one\n\n");
    check(serow_redis_link_publish(A->link, "news", 4, m1, n1) == 0, "a publish is sent");
    want_a = want_b = 1;
    check(run_until(a_b_got), "both links on the prefix receive it");
    check(got_message(A, 0, m1, n1), "the publisher itself, the same bytes");
    check(got_message(B, 0, m1, n1), "the other link, the same bytes");

    /* Garbage, then an item for another channel, then a good one: only the
     * good one arrives, the others are counted. */
    check(serow_redis_link_publish(B->link, "news", 4, "junk", 4) == 0, "junk is sent");
    size_t n2 = message(m2, sizeof m2, "other", "x");
    check(serow_redis_link_publish(B->link, "news", 4, m2, n2) == 0, "a message for another channel is sent");
    size_t n3 = message(m3, sizeof m3, "news", "data: two\n\n");
    check(serow_redis_link_publish(B->link, "news", 4, m3, n3) == 0, "a second publish is sent");
    want_a = want_b = 2;
    check(run_until(a_b_got), "the second publish arrives");
    check(got_message(A, 1, m3, n3) && got_message(B, 1, m3, n3), "after nothing else: junk and the stray item refused");
    check(serow_redis_link_stats(A->link)->rejected == 2 && serow_redis_link_stats(B->link)->rejected == 2,
          "both counted as rejected on each link");
    check(serow_redis_link_stats(A->link)->received == 2, "received counted");

    /* Another prefix: C's own publish is the first thing it gets. */
    size_t n4 = message(m4, sizeof m4, "news", "data: u\n\n");
    check(serow_redis_link_publish(C->link, "news", 4, m4, n4) == 0, "a publish on another prefix");
    want_c = 1;
    check(run_until(c_got), "received on that prefix");
    check(got_message(C, 0, m4, n4), "and nothing of the first prefix's");

    /* Redis restarts. */
    stop_redis();
    check(run_until(none_ready), "every link sees Redis gone");
    check(serow_redis_link_publish(A->link, "news", 4, m1, n1) == -1, "a publish while it is gone is refused");
    check(serow_redis_link_stats(A->link)->lost == 1, "and counted as lost");
    check(start_redis(), "redis-server started again");
    check(run_until(all_ready), "every link connected and subscribed again");
    for (int i = 0; i < 3; i++) {
        const struct serow_redis_stats *st = serow_redis_link_stats(receivers[i].link);
        check(st->gaps == 1 && st->reconnects == 1, "link %d: one gap, one reconnect", i);
    }
    check(serow_redis_link_publish(B->link, "news", 4, m1, n1) == 0, "a publish after the restart");
    want_a = want_b = 3;
    check(run_until(a_b_got), "arrives at both");
    check(got_message(A, 2, m1, n1) && got_message(B, 2, m1, n1), "the same bytes");

    for (int i = 0; i < num_receivers; i++) {
        serow_redis_link_close(receivers[i].link);
        for (size_t k = 0; k < receivers[i].got && k < MAX_GOT; k++)
            free(receivers[i].messages[k]);
    }
    stop_redis();
    return checks_done();
}
