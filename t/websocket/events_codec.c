/*
 * t/websocket/events_codec.c - the server's side of WebSocket-over-HTTP
 * (src/http/websocket_events.c) on stdin, for t/websocket/events.t to hold
 * against Serow::WebSocket::Events:
 *
 *   events_codec parse     an app's answer in; one line per event out:
 *                          "TYPE HEXCONTENT" ("-" without content), or "FAIL why"
 *   events_codec encode    lines "TYPE HEXCONTENT|-" in; the body out
 *   events_codec control   a control message's JSON in; "TYPE-NUMBER CHANNEL" or "FAIL why"
 *   events_codec grip      a Sec-WebSocket-Extensions value in; "1 HEXPREFIX", "0" or "-1"
 */
#include "http/websocket_events.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint8_t in[1 << 20];

static void hex_out(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        printf("%02x", p[i]);
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    size_t len = fread(in, 1, sizeof in, stdin);
    if (strcmp(argv[1], "parse") == 0) {
        size_t at = 0;
        while (at < len) {
            struct serow_wse_event e;
            long r = serow_wse_parse(in + at, len - at, &e);
            if (r == SEROW_WSE_FAIL) {
                printf("FAIL %s\n", e.fail_why);
                return 0;
            }
            if (r == SEROW_WSE_MORE) {
                printf("FAIL incomplete\n");
                return 0;
            }
            const char *name = serow_wse_type_name(e.type);
            printf("%s ", name ? name : "OTHER");
            if (e.has_content)
                hex_out(e.content, e.content_len);
            else
                printf("-");
            printf("\n");
            at += (size_t)r;
        }
    } else if (strcmp(argv[1], "encode") == 0) {
        static uint8_t content[1 << 19], out[1 << 20];
        in[len] = 0;
        for (char *line = strtok((char *)in, "\n"); line; line = strtok(NULL, "\n")) {
            char type[40], hex[1 << 20];
            if (sscanf(line, "%39s %s", type, hex) != 2)
                return 2;
            unsigned t = 0;
            for (unsigned k = SEROW_WSE_OPEN; k <= SEROW_WSE_DISCONNECT; k++)
                if (strcmp(serow_wse_type_name(k), type) == 0)
                    t = k;
            if (t == 0)
                return 2;
            size_t n = 0;
            int with = strcmp(hex, "-") != 0;
            for (size_t i = 0; with && hex[i] && hex[i + 1]; i += 2) {
                unsigned v;
                sscanf(hex + i, "%2x", &v);
                content[n++] = (uint8_t)v;
            }
            size_t m = serow_wse_encode(out, t, content, n, with);
            fwrite(out, 1, m, stdout);
        }
    } else if (strcmp(argv[1], "control") == 0) {
        struct serow_wse_control c;
        if (serow_wse_parse_control(in, len, &c))
            printf("%u %.*s\n", c.type, (int)c.channel_len, c.channel);
        else
            printf("FAIL %s\n", c.fail_why);
    } else if (strcmp(argv[1], "grip") == 0) {
        char prefix[SEROW_WSE_MAX_PREFIX];
        size_t plen = 0;
        int r = serow_wse_grip_extension((const char *)in, len, prefix, &plen);
        printf("%d", r);
        if (r == 1) {
            printf(" ");
            hex_out((const uint8_t *)prefix, plen);
        }
        printf("\n");
    } else {
        return 2;
    }
    return 0;
}
