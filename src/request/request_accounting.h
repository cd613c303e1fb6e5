/*
 * request_accounting.h - the end of each request, as the access log
 * (access_log.h) and the metrics (request_metrics.h) record it.
 *
 * The worker loop calls serow_request_accounting_start() when a request's
 * head is complete and it goes to the app, and serow_request_accounting_end()
 * once its response is done, or serow_request_accounting_rejected() when the
 * loop rejects a request itself (400, 408, 413, 414, 431, 505...) without it
 * ever starting.  The code that serves the request notes the status and body
 * bytes of the app's response in between
 * (serow_request_accounting_note_response).  Kept out of the worker's files
 * so that they show only where a request ends, not what is done about it;
 * what it needs of the worker it asks through request_worker.h.
 */
#ifndef SEROW_REQUEST_ACCOUNTING_H
#define SEROW_REQUEST_ACCOUNTING_H

#include <stddef.h>
#include <stdint.h>

#include "log/access_log.h" /* serow_request_clock_ns, the clock of a request's times */

struct worker_loop;
struct serow_request;
struct connection;
struct response_header;
struct access_log_name;
struct http_request_head;

void serow_request_accounting_start(struct serow_request *r);

/*
 * Records a request that has been answered.  _end: one that reached a
 * worker's request handling (serow_request_accounting_start), so its request
 * line, fields and id were noted and its duration runs from then.
 * _rejected: one rejected while its head arrived (or before it went to the
 * app), whose log shows its first line as sent, with a duration of 0, and
 * the id it was answered with (id_len 0: none; see
 * serow_request_accounting_rejected_id).  Call either before the
 * connection's buffer is consumed.
 */
void serow_request_accounting_end(const struct serow_request *r);
void serow_request_accounting_rejected(struct worker_loop *loop, struct connection *conn,
                                       int status, uint64_t body_bytes, const char *id,
                                       size_t id_len);

/* --request-id-header: the id of a request answered before it went to the
 * app (400, 408, 413, 414, 431, 503...): the client's if a field line the
 * parser accepted in what it parsed of the head (head, as parsed for the
 * answer; NULL: nothing) carries a sane one, else made.  Into id
 * (REQUEST_ID_MAX bytes); returns its length, 0 when the option is off. */
size_t serow_request_accounting_rejected_id(struct worker_loop *loop,
                                            const struct http_request_head *head, char *id);

/* The id header for a response the server writes itself: h filled with the
 * --request-id-header name and id[0..id_len), and returned; NULL when
 * id_len is 0 (the option is off). */
const struct response_header *serow_request_accounting_id_header(const struct worker_loop *loop,
                                                                 const char *id, size_t id_len,
                                                                 struct response_header *h);

/* --request-timeout with --access-log, as the app starts for the current
 * request: what the access log line of the master's 503 needs, copied into
 * the worker's shared slot (shared_state.h, struct shared_logged_request)
 * should the master have to kill this worker.  Once a request. */
void serow_request_accounting_publish_for_master(struct serow_request *r);

/* The status and body bytes of the response sent for r (0: none sent
 * through the server). */
void serow_request_accounting_note_response(struct serow_request *r, int status,
                                            uint64_t body_bytes);

/* The same for an error page the server sent instead of the app's
 * response (the 500 of an app that died, the 503 of --request-timeout):
 * the response headers logged are the page's (the request id), not those
 * of a head the app gave that did not go out. */
void serow_request_accounting_note_error_page(struct serow_request *r, int status,
                                             uint64_t body_bytes);

/* REMOTE_USER as the app set it, for r's log line. */
void serow_request_accounting_note_remote_user(struct serow_request *r, const char *user,
                                               size_t len);

/* A head of the app's is about to go out (the final response's, or a
 * 1xx's), with headers[0..count): adds the request id header
 * (--request-id-header) unless the app set it.  headers has room for one
 * more.  Returns the new count. */
size_t serow_request_accounting_add_id_header(struct serow_request *r,
                                              struct response_header *headers, size_t count);

/* The final response's head, whose headers are headers[0..count) (the id
 * header added), was accepted (planned): notes the time, the end of the
 * app's part, and keeps the header values the log format names.  Not for a
 * 1xx, which is no part of the response (the app's part goes on after it,
 * and %{NAME}o is the final response's header), nor for a head refused
 * (the app may give another). */
void serow_request_accounting_response_head(struct serow_request *r,
                                            const struct response_header *headers, size_t count);

/* The env keys the log format names (%{NAME}e): their count, *names set;
 * and one's value, noted for r's line (psgi_request.c reads them from the
 * env once the response is out). */
int serow_request_accounting_env_names(const struct serow_request *r,
                                       const struct access_log_name **names);
void serow_request_accounting_note_env(struct serow_request *r, int index, const char *value,
                                       size_t len);

#endif
