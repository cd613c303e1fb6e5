/*
 * holder_message_target.c - fuzz target for the holder's message decoders
 * (src/shared/holder_message.c).
 *
 * The input is read three ways, each from a buffer of exactly its size so
 * that ASan sees a read past it: as a framed message (serow_holder_frame,
 * then the decoder its type names), and as the body of a publish and of a
 * hold.  A refusal must have a reason; whatever a decoder accepts must pass
 * the rules it promises (names, ids, published headers) and encode back to
 * the very bytes it came from: one message, one meaning.
 */
#include "targets.h"
#include "shared/holder_message.h"

#include <stdlib.h>
#include <string.h>

#define CHECK(cond) do { if (!(cond)) abort(); } while (0)

static char again[SEROW_HOLDER_FRAME_HEAD + (1 << 16)];

static void publish_body(const char *body, size_t len)
{
    struct serow_publish_item item;
    const char *error = NULL;
    if (serow_publish_decode(body, len, &item, &error) < 0) {
        CHECK(error != NULL);
        return;
    }
    CHECK(serow_grip_channel_name_ok(item.channel.p, item.channel.len));
    CHECK(item.id.len == 0 || serow_grip_id_ok(item.id.p, item.id.len));
    for (unsigned i = 0; i < item.response.num_headers; i++) {
        CHECK(serow_publish_header_name_ok(item.response.header_names[i].p, item.response.header_names[i].len));
        CHECK(serow_publish_header_value_ok(item.response.header_values[i].p, item.response.header_values[i].len));
    }
    size_t n = serow_publish_encode(&item, again, sizeof again);
    CHECK(n == SEROW_HOLDER_FRAME_HEAD + len);
    CHECK(memcmp(again + SEROW_HOLDER_FRAME_HEAD, body, len) == 0);
}

static void hold_body(const char *body, size_t len)
{
    static struct serow_grip_instruct in;
    struct serow_hold_extra extra;
    const char *error = NULL;
    if (serow_hold_decode(body, len, &in, &extra, &error) < 0) {
        CHECK(error != NULL);
        return;
    }
    CHECK(in.num_channels > 0 && in.num_channels <= SEROW_GRIP_MAX_CHANNELS);
    CHECK(in.bytes_used <= SEROW_GRIP_BYTES);
    for (unsigned i = 0; i < in.num_channels; i++)
        CHECK(serow_grip_channel_name_ok(serow_grip_str_ptr(&in, in.channels[i].name), in.channels[i].name.len));
    size_t n = serow_hold_encode(&in, &extra, again, sizeof again);
    CHECK(n == SEROW_HOLDER_FRAME_HEAD + len);
    CHECK(memcmp(again + SEROW_HOLDER_FRAME_HEAD, body, len) == 0);
}

int fuzz_holder_message_input(const uint8_t *data, size_t size)
{
    if (size > (1 << 16))
        return 0;
    char *copy = malloc(size ? size : 1);
    memcpy(copy, data, size);

    enum serow_holder_message_type type;
    const char *body;
    size_t body_len;
    long n = serow_holder_frame(copy, size, &type, &body, &body_len);
    CHECK(n <= (long)size);
    if (n > 0) {
        CHECK(body == copy + SEROW_HOLDER_FRAME_HEAD && (size_t)n == SEROW_HOLDER_FRAME_HEAD + body_len);
        if (type == SEROW_HOLDER_PUBLISH)
            publish_body(body, body_len);
        else
            hold_body(body, body_len);
    }
    publish_body(copy, size);
    hold_body(copy, size);
    free(copy);
    return 0;
}

#ifdef SEROW_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_holder_message_input(data, size);
}
#endif
