/*
 * psgi_hold.h - a PSGI response that asks to be held (GRIP's Grip-Hold,
 * docs/holding.md), and publishing from the app (Serow::Holding::publish).
 * With --grip on, psgi_response.c gives each array response here first.
 */
#ifndef SEROW_PSGI_HOLD_H
#define SEROW_PSGI_HOLD_H

#include "EXTERN.h"
#include "perl.h"

struct serow_request;

/* --grip: set once in the worker (serow_psgi_hold_setup). */
extern int serow_grip_on;

/* on: --grip; channel: the worker's channel to the holder (-1: none);
 * max_channels: --hold-max-channels; max_item: --publish-max-item. */
void serow_psgi_hold_setup(int on, int channel, unsigned max_channels, size_t max_item);

/*
 * An array response with Grip-* headers: a stream hold writes its head
 * (every Grip-* header stripped, the body open-ended) and first body; a
 * response hold writes nothing; either leaves the request to be handed to
 * the holder at its end (serow_psgi_hold_hand_over).  Grip-* headers
 * without Grip-Hold are stripped and the response sent as any other.
 * RESPONSE_NOT_HELD when the response has no Grip-* header; else as
 * serow_send_psgi_response (RESPONSE_BAD_GRIP with *bad_header the reason).
 */
int serow_psgi_hold_response(pTHX_ struct serow_request *req, SV *status, SV *headers, AV *body,
                             SV **bad_header);

/* The same for a streamed response's head ([status, headers] to the
 * responder): a stream hold's head goes out, the writer's bytes follow as
 * they come, and its close leaves the body open for the holder; a response
 * hold is refused (its answer at the timeout must be whole). */
int serow_psgi_hold_start(pTHX_ struct serow_request *req, SV *status, SV *headers, SV **bad_header);

/* The end of a request whose response holds: its connection to the holder. */
void serow_psgi_hold_hand_over(struct serow_request *req);

/* Serow::Holding::publish(\%item): encoded and sent to the holder.  NULL,
 * or why not (a constant or mortal string's bytes). */
const char *serow_psgi_publish(pTHX_ HV *item);

/* An item's size as --publish-max-item counts it (serow_publish_item_bytes),
 * for the publish endpoint's check: 0 with *size, or why it is no item. */
const char *serow_psgi_item_bytes(pTHX_ HV *item, size_t *size);

#endif
