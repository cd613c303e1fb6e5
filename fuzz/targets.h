/*
 * targets.h - the fuzz targets: src/http/http_parser.c's, those of the
 * held connections' Grip-* headers and holder messages, and the TLS record
 * layer's.
 *
 * Each target takes one input, runs the parser on it and abort()s when an
 * invariant breaks.  They are plain functions so that the same code runs
 * under libFuzzer (fuzz/run) and in the test suite, which replays the
 * regression corpus without libFuzzer (t/parser/guard_page.t).
 */
#ifndef SEROW_FUZZ_TARGETS_H
#define SEROW_FUZZ_TARGETS_H

#include <stddef.h>
#include <stdint.h>

/* parse_request_head() and find_header() on the input. */
int fuzz_request_input(const uint8_t *data, size_t size);

/* decode_chunked() on the input, whole and in many splits. */
int fuzz_chunked_input(const uint8_t *data, size_t size);

/* serow_grip_parse() on the input read as header lines (grip_target.c). */
int fuzz_grip_input(const uint8_t *data, size_t size);

/* The holder's message decoders on the input (holder_message_target.c). */
int fuzz_holder_message_input(const uint8_t *data, size_t size);

/* serow_tls_open() on records the input scripts (tls_record_target.c). */
int fuzz_tls_record_input(const uint8_t *data, size_t size);

/* serow_ws_read() on a client's frames (websocket_frame_target.c). */
int fuzz_websocket_frame_input(const uint8_t *data, size_t size);

/* serow_wse_parse(), serow_wse_parse_control() and serow_wse_grip_extension()
 * on the input (websocket_events_target.c). */
int fuzz_websocket_events_input(const uint8_t *data, size_t size);

/* serow_wsd_negotiate(), serow_wsd_inflate() and serow_wsd_deflate() on the
 * input (websocket_deflate_target.c). */
int fuzz_websocket_deflate_input(const uint8_t *data, size_t size);

#endif
