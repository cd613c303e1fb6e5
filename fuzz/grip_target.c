/*
 * grip_target.c - fuzz target for serow_grip_parse() (src/http/grip_instruct.c).
 *
 * The input is a header section, one "Name: value" a line (a line without
 * a colon is a name with an empty value), copied into a buffer of exactly
 * its size so that ASan sees a read past it.  Whatever the parser answers,
 * it must keep its contract: a refusal has a reason; an instruction has at
 * most its bounds of channels and filters, every piece it names lies within
 * the bytes it used, every channel name and prev-id passes the rules of
 * grip_instruct.h; and a hold survives the holder's message
 * (src/shared/holder_message.c): encoded, decoded, encoded again to the
 * same bytes.
 */
#include "targets.h"
#include "http/grip_instruct.h"
#include "shared/holder_message.h"

#include <stdlib.h>
#include <string.h>

#define CHECK(cond) do { if (!(cond)) abort(); } while (0)
#define MAX_LINES 64

static void check_str(const struct serow_grip_instruct *in, struct serow_grip_str s)
{
    CHECK((size_t)s.off + s.len <= in->bytes_used);
}

int fuzz_grip_input(const uint8_t *data, size_t size)
{
    char *copy = malloc(size ? size : 1);
    memcpy(copy, data, size);
    struct http_header headers[MAX_LINES];
    size_t n = 0;
    const char *p = copy, *end = copy + size;
    while (p < end && n < MAX_LINES) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        const char *line_end = eol ? eol : end;
        const char *colon = memchr(p, ':', (size_t)(line_end - p));
        headers[n].name = p;
        headers[n].name_len = (size_t)((colon ? colon : line_end) - p);
        headers[n].value = colon ? colon + 1 : line_end;
        headers[n].value_len = (size_t)(line_end - headers[n].value);
        n++;
        p = eol ? eol + 1 : end;
    }

    static struct serow_grip_instruct in, back;
    int r = serow_grip_parse(headers, n, &in);
    if (r == SEROW_GRIP_ERROR) {
        CHECK(in.error != NULL);
    } else if (r == SEROW_GRIP_OK) {
        CHECK(in.bytes_used <= SEROW_GRIP_BYTES);
        CHECK(in.num_channels <= SEROW_GRIP_MAX_CHANNELS);
        CHECK(in.hold == SEROW_GRIP_NO_HOLD || in.num_channels > 0);
        CHECK(in.timeout >= SEROW_GRIP_MIN_TIMEOUT);
        for (unsigned i = 0; i < in.num_channels; i++) {
            const struct serow_grip_channel *c = &in.channels[i];
            check_str(&in, c->name);
            check_str(&in, c->prev_id);
            CHECK(serow_grip_channel_name_ok(serow_grip_str_ptr(&in, c->name), c->name.len));
            CHECK(!c->has_prev_id || serow_grip_id_ok(serow_grip_str_ptr(&in, c->prev_id), c->prev_id.len));
            CHECK(c->num_filters <= SEROW_GRIP_MAX_FILTERS);
            for (unsigned f = 0; f < c->num_filters; f++)
                check_str(&in, c->filters[f]);
        }
        check_str(&in, in.keep_alive_data);
        CHECK(in.keep_alive_data.len <= SEROW_GRIP_MAX_KEEP_ALIVE);
        CHECK((in.keep_alive_mode == SEROW_GRIP_KEEP_ALIVE_NONE) == (in.keep_alive_data.len == 0));
        check_str(&in, in.reason);
        CHECK(in.status == 0 || (in.status >= 100 && in.status <= 999));

        if (in.hold != SEROW_GRIP_NO_HOLD) {
            static char msg[1 << 15], again[1 << 15];
            struct serow_hold_extra extra = { 0, { "", 0 } }, extra_back;
            size_t len = serow_hold_encode(&in, &extra, msg, sizeof msg);
            CHECK(len > 0);
            enum serow_holder_message_type type;
            const char *body, *error;
            size_t body_len;
            CHECK(serow_holder_frame(msg, len, &type, &body, &body_len) == (long)len);
            CHECK(serow_hold_decode(body, body_len, &back, &extra_back, &error) == 0);
            CHECK(serow_hold_encode(&back, &extra_back, again, sizeof again) == len);
            CHECK(memcmp(msg, again, len) == 0);
        }
    } else {
        CHECK(r == SEROW_GRIP_NONE);
    }
    free(copy);
    return 0;
}

#ifdef SEROW_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_grip_input(data, size);
}
#endif
