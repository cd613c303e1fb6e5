/*
 * Two requests served by one worker at once, interleaved: the shape a
 * WebSocket message or an HTTP/2 stream will have.  Each is a struct
 * serow_request (src/request/request.h) of its own, made, started, advanced and
 * ended through the worker's public face (src/worker/worker_loop.h) alone, on a
 * real worker loop with two clients; each one's head, body, response and
 * accounting must stay its own while the other moves.
 * Prints "ok - NAME" / "not ok - NAME" per check (t/request/interleaved.t).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log/access_log.h"
#include "connection/connection.h"
#include "request/request.h"
#include "request/request_accounting.h"
#include "worker/worker_loop.h"
#include "serow_unit.h"

/* Whether a parsed head's target, or one of its fields, is text. */
static int target_is(const struct serow_request *r, const char *text)
{
    return r->head.target_len == strlen(text) && memcmp(r->head.target, text, r->head.target_len) == 0;
}

static int field_is(const struct serow_request *r, const char *name, const char *value)
{
    const struct http_header *h = serow_find_header(&r->head, name, strlen(name));
    return h != NULL && h->value_len == strlen(value) && memcmp(h->value, value, h->value_len) == 0;
}

static int write_text(struct serow_request *r, const char *text)
{
    struct iovec iov = {(void *)text, strlen(text)};
    return serow_worker_loop_write(r, &iov, 1);
}

/* Reads what the server sent a client until want bytes came (or 5 s of
 * nothing); returns them, NUL-terminated. */
static const char *received(int fd, char *out, size_t size, size_t want)
{
    size_t got = 0;
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    while (got < want && got < size - 1 && poll(&pfd, 1, 5000) > 0) {
        ssize_t n = read(fd, out + got, size - 1 - got);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    out[got] = '\0';
    return out;
}

static int connect_to(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0)
        return -1;
    return fd;
}

#define RESPONSE_A "HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n"
#define RESPONSE_B_HEAD "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n"
#define RESPONSE_AGAIN "HTTP/1.1 204 No Content\r\n\r\n"

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    int listener = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (bind(listener, (struct sockaddr *)&addr, sizeof(addr)) != 0 || listen(listener, 16) != 0 ||
        getsockname(listener, (struct sockaddr *)&addr, &len) != 0) {
        perror("listen");
        return 1;
    }
    int port = ntohs(addr.sin_port);

    struct worker_settings s;
    memset(&s, 0, sizeof(s));
    s.limits.max_request_line = 8192;
    s.limits.max_header_size = 65536;
    s.limits.max_headers = 100;
    s.header_timeout = s.read_timeout = s.write_timeout = s.keepalive_timeout = 30;
    struct worker_loop *loop = serow_worker_loop_new(&s);
    check(loop != NULL, "a worker loop");
    if (loop == NULL || serow_worker_loop_add_listener(loop, listener, 0, "localhost", port, 0) != 0)
        return 1;

    /* Each request's line in the access log: its own line, status and bytes. */
    char log_path[] = "/tmp/serow-interleaved-XXXXXX";
    int log_fd = mkstemp(log_path);
    char error[256];
    struct access_log *log = serow_access_log_open(log_path, log_fd, "%r %>s %b %{Host}i", error,
                                                   sizeof(error));
    check(log != NULL, "an access log");
    serow_worker_loop_set_access_log(loop, log);

    int client_a = connect_to(port), client_b = connect_to(port);
    const char *request_a = "POST /a HTTP/1.1\r\nHost: a.example\r\nContent-Length: 5\r\n\r\nhello";
    const char *request_b = "GET /b?q=1 HTTP/1.1\r\nHost: b.example\r\n\r\n";
    check(write(client_a, request_a, strlen(request_a)) == (ssize_t)strlen(request_a) &&
          write(client_b, request_b, strlen(request_b)) == (ssize_t)strlen(request_b),
          "two clients sent a request each");

    /* Two requests of one worker, both started before either is answered. */
    struct serow_request *first = serow_worker_loop_request_new(loop);
    struct serow_request *second = serow_worker_loop_request_new(loop);
    int started = 0;
    while (started < 1 && serow_worker_loop_next_request(loop, first))
        started = 1;
    while (started < 2 && serow_worker_loop_next_request(loop, second))
        started = 2;
    check(started == 2, "the worker started both");
    if (started != 2)
        return 1;
    /* (whichever came first) */
    struct serow_request *a = target_is(first, "/a") ? first : second;
    struct serow_request *b = a == first ? second : first;
    check(target_is(a, "/a") && target_is(b, "/b?q=1"), "each has its own head");
    check(field_is(a, "Host", "a.example") && field_is(b, "Host", "b.example"),
          "each has its own header fields");
    check(serow_worker_loop_request_body_framing(a) == HTTP_BODY_LENGTH &&
          serow_worker_loop_request_content_length(a) == 5 &&
          serow_worker_loop_request_body_framing(b) == HTTP_BODY_NONE,
          "each has its own body");
    check(serow_worker_loop_request_fd(a) != serow_worker_loop_request_fd(b),
          "each has its own connection");

    /* Advanced in turns: a's body, b's head, the rest of a's body, a's
     * response, b's body. */
    char body[16];
    size_t got = 0;
    int r = serow_worker_loop_read_body(a, body, 2, &got);
    check(r == 0 && got == 2 && memcmp(body, "he", 2) == 0, "a reads the start of its body");
    check(write_text(b, RESPONSE_B_HEAD) == 0, "b writes its head");
    check(serow_worker_loop_request_response_started(b) &&
          !serow_worker_loop_request_response_started(a),
          "b's response has started, a's has not");
    r = serow_worker_loop_read_body(a, body + 2, sizeof(body) - 2, &got);
    check(r == 0 && got == 3 && memcmp(body, "hello", 5) == 0, "a reads the rest of its body");
    r = serow_worker_loop_read_body(a, body, sizeof(body), &got);
    check(r == 0 && got == 0, "and its end");
    check(write_text(a, RESPONSE_A) == 0, "a writes its response");
    serow_request_accounting_note_response(a, 201, 0);
    check(write_text(b, "bee") == 0, "b writes its body");
    serow_request_accounting_note_response(b, 200, 3);
    check(a->status == 201 && b->status == 200 && a->body_bytes == 0 && b->body_bytes == 3,
          "each notes its own response");
    check(serow_worker_loop_may_keep_alive(a) && serow_worker_loop_may_keep_alive(b),
          "both may keep their connection");

    /* b ends first: a is still served, as it was. */
    serow_worker_loop_finish_request(b, 1);
    check(serow_worker_loop_request_fd(b) == -1, "b has ended");
    check(serow_worker_loop_request_fd(a) >= 0 && target_is(a, "/a") &&
          field_is(a, "Host", "a.example"),
          "a is still served, its head as it was");
    serow_worker_loop_finish_request(a, 1);
    check(serow_worker_loop_request_fd(a) == -1, "a has ended");

    char out[512];
    check(strcmp(received(client_a, out, sizeof(out), strlen(RESPONSE_A)), RESPONSE_A) == 0,
          "a's client got a's response, whole");
    check(strcmp(received(client_b, out, sizeof(out), strlen(RESPONSE_B_HEAD) + 3),
                 RESPONSE_B_HEAD "bee") == 0,
          "b's client got b's response, whole");

    /* A request object serves again, on another connection: a's kept-alive
     * one, its next request started in what was b's. */
    const char *again = "GET /again HTTP/1.1\r\nHost: again.example\r\n\r\n";
    check(write(client_a, again, strlen(again)) == (ssize_t)strlen(again), "a's client asks again");
    check(serow_worker_loop_next_request(loop, b) == 1 && target_is(b, "/again") &&
          field_is(b, "Host", "again.example"),
          "the kept-alive connection's next request starts in the other request");
    check(write_text(b, RESPONSE_AGAIN) == 0, "and is answered");
    serow_request_accounting_note_response(b, 204, 0);
    serow_worker_loop_finish_request(b, 0);
    check(strcmp(received(client_a, out, sizeof(out), strlen(RESPONSE_AGAIN)), RESPONSE_AGAIN) == 0,
          "on that connection");

    char lines[1024];
    ssize_t n = pread(log_fd, lines, sizeof(lines) - 1, 0);
    lines[n > 0 ? n : 0] = '\0';
    check(strcmp(lines, "GET /b?q=1 HTTP/1.1 200 3 b.example\n"
                        "POST /a HTTP/1.1 201 - a.example\n"
                        "GET /again HTTP/1.1 204 - again.example\n") == 0,
          "each request's log line is its own");
    if (checks_failed())
        printf("# the log:\n%s", lines);
    unlink(log_path);
    close(log_fd);

    serow_worker_loop_request_free(first);
    serow_worker_loop_request_free(second);
    serow_worker_loop_free(loop);
    close(client_a);
    close(client_b);
    return checks_done();
}
