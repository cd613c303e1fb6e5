# xs/shared.xsh - the Serow::Shared package's glue, included by Serow.xs: the
# shared memory of a server's processes (src/shared/shared_state.c), what the master
# asks of it and of its workers, and the connection holder's run
# (src/holder/connection_holder.c).  Glue only, as Serow.xs.

MODULE = Serow    PACKAGE = Serow::Shared    PREFIX = shared_

Serow::Shared
shared_new(const char *class, unsigned int max_workers)
  CODE:
    PERL_UNUSED_VAR(class);
    RETVAL = serow_shared_state_create(max_workers);
    if (RETVAL == NULL)
        croak("cannot map the shared state: %s", strerror(errno));
  OUTPUT:
    RETVAL

unsigned int
shared_max_workers(Serow::Shared shared)
  CODE:
    RETVAL = serow_shared_max_workers(shared);
  OUTPUT:
    RETVAL

void
shared_make_channel(Serow::Shared shared)
  PPCODE:
    /* (sending end, receiving end) of a SOCK_SEQPACKET channel */
    int fds[2];
    PERL_UNUSED_VAR(shared);
    if (serow_make_channel(fds) != 0)
        croak("cannot make a channel: %s", strerror(errno));
    EXTEND(SP, 2);
    mPUSHi(fds[0]);
    mPUSHi(fds[1]);

void
shared_set_server_stopping(Serow::Shared shared)
  CODE:
    /* From now on a stopping worker closes its connections after their
     * responses instead of handing them to the holder. */
    serow_shared_set_server_stopping(shared);

void
shared_reset_worker(Serow::Shared shared, unsigned int index)
  CODE:
    /* The worker in this slot is gone: whatever it published is void.
     * Its counters stay: the next worker in the slot counts on. */
    serow_shared_reset_worker(shared, index);

void
shared_ask_worker(Serow::Shared shared, unsigned int index, int wake_fd, const char *what)
  CODE:
    /* The master asks the worker in slot index, whose eventfd is wake_fd
     * (Serow::make_eventfd, made before the fork), to "stop" or to
     * "reopen_logs": in the slot, no signal (src/shared/shared_state.h). */
    enum shared_worker_request request;
    if (strEQ(what, "stop"))
        request = SHARED_ASK_STOP;
    else if (strEQ(what, "reopen_logs"))
        request = SHARED_ASK_REOPEN_LOGS;
    else
        croak("ask_worker: no request '%s'", what);
    if (serow_shared_ask_worker(shared, index, wake_fd, request) != 0)
        croak("cannot wake worker slot %u: %s", index, strerror(errno));

void
shared_count_worker_restart(Serow::Shared shared)
  CODE:
    /* The master replaced a worker that left while the server ran. */
    serow_shared_count_worker_restart(shared);

void
shared_set_generation_pids(Serow::Shared shared, ...)
  CODE:
    /* serow FILE: the generation processes running now, for the metrics. */
    int32_t pids[SHARED_GENERATIONS];
    size_t n = 0;
    for (I32 i = 1; i < items && n < SHARED_GENERATIONS; i++)
        pids[n++] = (int32_t)SvIV(ST(i));
    serow_shared_set_generation_pids(shared, pids, n);

void
shared_count_worker_recycled(Serow::Shared shared, const char *reason)
  CODE:
    /* The master asked a worker to leave for reason ("rss"). */
    if (serow_shared_count_worker_recycled(shared, reason) != 0)
        croak("count_worker_recycled: no reason '%s'", reason);

void
shared_app_running(Serow::Shared shared, unsigned int index)
  PPCODE:
    /* (milliseconds, request line, request id or undef) while the app of
     * the worker in slot index runs under --request-timeout; empty when it
     * does not. */
    char request[SHARED_REQUEST_TEXT];
    char id[REQUEST_ID_MAX];
    size_t id_len = 0;
    uint64_t ms = serow_shared_app_running_ms(shared, index, request, id, &id_len);
    if (ms > 0) {
        EXTEND(SP, 3);
        mPUSHn((double)ms);
        mPUSHp(request, strlen(request));
        if (id_len)
            mPUSHp(id, id_len);
        else
            PUSHs(&PL_sv_undef);
    }

void
shared_take_app_connection(Serow::Shared shared, unsigned int index)
  PPCODE:
    /* Before the master kills a stuck worker: (our copy of the connection
     * its app answers, and which request that is: the two values
     * answer_app_connection takes after it), or empty. */
    uint64_t since_ms = 0;
    int32_t app_fd = -1;
    int copy = serow_take_app_connection(shared, index, &since_ms, &app_fd);
    if (copy >= 0) {
        EXTEND(SP, 3);
        mPUSHi(copy);
        mPUSHu((UV)since_ms);
        mPUSHi(app_fd);
    }

int
shared_answer_app_connection(Serow::Shared shared, unsigned int index, int fd, UV since_ms, int app_fd, HV *settings)
  CODE:
    /* Once it is dead: 503 on that copy (1), or only a close when bytes of
     * the response went out (0) or the app had returned from that request
     * (-1).  since_ms, app_fd: what take_app_connection said with the copy.
     * settings (Serow::Master::Limits): the id header, and the access log
     * the 503's line goes to. */
    const char *who = "Serow::Shared->answer_app_connection";
    char id_name[64];
    size_t id_name_len = id_header_setting(aTHX_ settings, who, id_name, sizeof(id_name));
    struct access_log *log = NULL;
    char error[256];
    if (access_log_setting(aTHX_ settings, who, &log, error, sizeof(error)) != 0)
        serow_log_warn("the master cannot write to the access log: %s; the 503 for the request "
                       "of the worker in slot %u has no line", error, index);
    RETVAL = serow_answer_app_connection(shared, index, fd, (uint64_t)since_ms, (int32_t)app_fd,
                                         id_name, id_name_len, log);
    serow_access_log_close(log);
  OUTPUT:
    RETVAL

void
shared_count_request_timeout(Serow::Shared shared)
  CODE:
    /* The master killed a worker whose app outlived --request-timeout. */
    serow_shared_count_request_timeout(shared);

SV *
shared_metrics(Serow::Shared shared)
  CODE:
    RETVAL = serow_shared_metrics_value(aTHX_ shared);
  OUTPUT:
    RETVAL

int
shared_run_holder(Serow::Shared shared, int ready_channel, int handback_channel, HV *settings)
  CODE:
    struct holder_settings s;
    const char *who = "Serow::Shared->run_holder";
    s.keepalive_timeout_ms = (uint64_t)(setting(aTHX_ settings, who, "keepalive_timeout") * 1000);
    s.idle_handoff_ms = (uint64_t)setting(aTHX_ settings, who, "idle_handoff_ms");
    s.max_keepalive_connections = (uint32_t)setting(aTHX_ settings, who, "max_keepalive_connections");
    s.max_queue_wait_ms = (uint64_t)setting(aTHX_ settings, who, "max_queue_wait");
    SV *error_log = given_setting(aTHX_ settings, who, "error_log"); /* undef: none */
    s.error_log = SvOK(error_log) ? SvPV_nolen(error_log) : NULL;
    char error[256];
    if (access_log_setting(aTHX_ settings, who, &s.access_log, error, sizeof(error)) != 0)
        croak("%s: cannot use the access log: %s", who, error);
    s.request_id_header_len = id_header_setting(aTHX_ settings, who, s.request_id_header,
                                                sizeof(s.request_id_header)); /* "": off */
    memset(&s.grip, 0, sizeof(s.grip));
    s.grip.max_pending = (size_t)setting(aTHX_ settings, who, "hold_max_pending"); /* 0: --grip off */
    s.grip.max_held = (uint32_t)setting(aTHX_ settings, who, "max_held_connections");
    /* --publish-redis: "" for none (Serow::Publish::Redis checked the rest) */
    string_setting(aTHX_ settings, who, "redis_host", s.redis_host, sizeof(s.redis_host));
    s.redis_port = (int)setting(aTHX_ settings, who, "redis_port");
    string_setting(aTHX_ settings, who, "redis_prefix", s.redis_prefix, sizeof(s.redis_prefix));
    s.grip.max_channels = (uint32_t)setting(aTHX_ settings, who, "hold_max_channels");
    s.grip.max_item = (uint32_t)setting(aTHX_ settings, who, "publish_max_item");
    memset(&s.websocket, 0, sizeof(s.websocket));
    s.websocket.max_message = (uint64_t)setting(aTHX_ settings, who, "websocket_max_message");
    s.websocket.max_gathered = (size_t)setting(aTHX_ settings, who, "websocket_max_gathered");
    s.websocket.ping_interval_ms = (uint64_t)(setting(aTHX_ settings, who, "websocket_ping_interval") * 1000);
    s.websocket.ping_timeout_ms = (uint64_t)(setting(aTHX_ settings, who, "websocket_ping_timeout") * 1000);
    s.websocket.deflate = setting(aTHX_ settings, who, "websocket_deflate") != 0;
    RETVAL = serow_run_connection_holder(shared, ready_channel, handback_channel, &s);
    if (s.access_log)
        serow_access_log_close(s.access_log);
  OUTPUT:
    RETVAL

SV *
shared_status(Serow::Shared shared)
  CODE:
    RETVAL = serow_shared_status_value(aTHX_ shared);
  OUTPUT:
    RETVAL
