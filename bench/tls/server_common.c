/*
 * bench/tls/server_common.c - see server_common.h.
 */
#include "server_common.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

const char bench_tls_answer[] = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n";
const size_t bench_tls_answer_len = sizeof bench_tls_answer - 1;

struct bench_tls_args bench_tls_args(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s CERT KEY 1.3|1.2\n", argv[0]);
        exit(2);
    }
    signal(SIGPIPE, SIG_IGN);
    return (struct bench_tls_args){ .cert = argv[1], .key = argv[2], .tls12 = strcmp(argv[3], "1.2") == 0 };
}

int bench_tls_listen(void)
{
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    if (bind(lfd, (struct sockaddr *)&a, sizeof a) < 0 || listen(lfd, 1024) < 0 ||
        getsockname(lfd, (struct sockaddr *)&a, &alen) < 0) {
        perror("listen");
        exit(1);
    }
    printf("%d\n", ntohs(a.sin_port));
    fflush(stdout);
    return lfd;
}

void bench_tls_serve(int listen_fd, void (*serve)(int fd))
{
    for (;;) {
        int fd = accept(listen_fd, NULL, NULL);
        if (fd < 0)
            continue;
        serve(fd);
        close(fd);
    }
}

void bench_tls_read_head(long (*read_some)(void *session, char *buf, size_t len), void *session)
{
    char buf[4096];
    size_t got = 0;
    while (got < sizeof buf - 1) {
        long n = read_some(session, buf + got, sizeof buf - 1 - got);
        if (n <= 0)
            break;
        got += (size_t)n;
        buf[got] = '\0';
        if (strstr(buf, "\r\n\r\n"))
            break;
    }
}
