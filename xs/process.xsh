# xs/process.xsh - the Serow package's glue, included by Serow.xs: the
# numbers Perl compares with, made from their C names once (BOOT), and the
# few process calls the master and the workers make (signals, descriptors,
# prctl), here so that they do not load POSIX.pm: what the master loads is
# in every worker's memory.  Glue only, as Serow.xs.

MODULE = Serow    PACKAGE = Serow

BOOT:
    /* The numbers the Perl side compares with, from their C names, once:
     * Perl never copies them.  Constant subs, which Perl folds where it
     * compiles them (Serow::BODY_CHUNKED costs a request nothing). */
    {
        HV *stash = gv_stashpvs("Serow", GV_ADD);
        /* enum http_body_framing (src/http/http_parser.h): request_body_framing */
        SEROW_CONSTANT(stash, "BODY_NONE", HTTP_BODY_NONE);
        SEROW_CONSTANT(stash, "BODY_LENGTH", HTTP_BODY_LENGTH);
        SEROW_CONSTANT(stash, "BODY_CHUNKED", HTTP_BODY_CHUNKED);
        /* read_body */
        SEROW_CONSTANT(stash, "READ_BODY_CLIENT_GONE", READ_BODY_CLIENT_GONE);
        /* waitpid's flag, for the master (which loads no POSIX) */
        SEROW_CONSTANT(stash, "WNOHANG", WNOHANG);
        /* the units of /proc/PID/stat's times and of its rss, for the
         * process metrics (Serow::ProcessStats) */
        SEROW_CONSTANT(stash, "CLOCK_TICKS", sysconf(_SC_CLK_TCK));
        SEROW_CONSTANT(stash, "PAGE_SIZE", sysconf(_SC_PAGESIZE));
        /* enum serow_log_level (src/log/log.h): syslog's priorities */
        SEROW_CONSTANT(stash, "LOG_ERROR", SEROW_LOG_ERROR);
        SEROW_CONSTANT(stash, "LOG_WARN", SEROW_LOG_WARN);
        SEROW_CONSTANT(stash, "LOG_INFO", SEROW_LOG_INFO);
        SEROW_CONSTANT(stash, "LOG_DEBUG", SEROW_LOG_DEBUG);
    }


int
signal_number(const char *name)
  CODE:
    /* "TERM" -> 15; -1 for a name this system does not have */
    RETVAL = whichsig_pv(name);
  OUTPUT:
    RETVAL

SV *
block_signals(...)
  CODE:
    /* Blocks the signals named; returns the mask before (for set_signal_mask). */
    sigset_t block, old;
    sigemptyset(&block);
    for (I32 i = 0; i < items; i++) {
        int n = whichsig_pv(SvPV_nolen(ST(i)));
        if (n <= 0)
            croak("block_signals: no signal '%s'", SvPV_nolen(ST(i)));
        sigaddset(&block, n);
    }
    if (sigprocmask(SIG_BLOCK, &block, &old) != 0)
        croak("sigprocmask: %s", strerror(errno));
    RETVAL = newSVpvn((const char *)&old, sizeof(old));
  OUTPUT:
    RETVAL

void
set_signal_mask(SV *mask)
  CODE:
    sigset_t set;
    signal_mask_from_sv(aTHX_ mask, &set);
    if (sigprocmask(SIG_SETMASK, &set, NULL) != 0)
        croak("sigprocmask: %s", strerror(errno));

void
exit_now(int status)
  CODE:
    /* _exit(2): no END blocks, no destructors, no buffers flushed (a child
     * must not flush what its parent had buffered). */
    _exit(status);

void
tls_configure(SV *cert_files, SV *key_files, SV *priorities, int tickets)
  CODE:
    /* --ssl-cert, --ssl-key (array references, paired in order),
     * --ssl-priorities, --ssl-session-tickets: read in the master, at start
     * and on HUP; every process it forks after inherits them.  Dies with
     * what is wrong, naming the option (what was read before stays). */
    char err[1024];
    AV *certs, *keys;
    if (!SvROK(cert_files) || SvTYPE(SvRV(cert_files)) != SVt_PVAV || !SvROK(key_files) ||
        SvTYPE(SvRV(key_files)) != SVt_PVAV)
        croak("tls_configure: the files must be array references");
    certs = (AV *)SvRV(cert_files);
    keys = (AV *)SvRV(key_files);
    SSize_t pairs = av_len(certs) + 1;
    if (pairs < 1 || av_len(keys) + 1 != pairs)
        croak("tls_configure: one key for each certificate");
    const char **c = NULL, **k = NULL;
    Newx(c, pairs, const char *);
    SAVEFREEPV(c);
    Newx(k, pairs, const char *);
    SAVEFREEPV(k);
    for (SSize_t i = 0; i < pairs; i++) {
        SV **cs = av_fetch(certs, i, 0), **ks = av_fetch(keys, i, 0);
        if (cs == NULL || ks == NULL || !SvOK(*cs) || !SvOK(*ks))
            croak("tls_configure: a file name is missing");
        c[i] = SvPV_nolen(*cs);
        k[i] = SvPV_nolen(*ks);
    }
    if (serow_tls_configure(c, k, (size_t)pairs, SvOK(priorities) ? SvPV_nolen(priorities) : NULL,
                            tickets, err, sizeof err) != 0)
        croak("%s\n", err);

void
tls_configure_clients(const char *mode, SV *ca_file, SV *crl_file, double max_connections)
  CODE:
    /* --ssl-verify-client, --ssl-client-ca, --ssl-crl: in the master, after
     * tls_configure, before the forks (the table of client certificates is
     * shared by every process it forks).  Dies naming the option. */
    char err[1024];
    if (serow_tls_configure_clients(mode, SvOK(ca_file) ? SvPV_nolen(ca_file) : NULL,
                                    SvOK(crl_file) ? SvPV_nolen(crl_file) : NULL,
                                    (unsigned long)max_connections, err, sizeof err) != 0)
        croak("%s\n", err);

double
open_file_limit()
  CODE:
    /* The soft limit on open descriptors, or -1 when there is none. */
    struct rlimit rl;
    RETVAL = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY ? (double)rl.rlim_cur : -1;
  OUTPUT:
    RETVAL

void
log_line(int level, SV *message)
  CODE:
    /* Serow::Log's lines: written (or not) by src/log/log.c, as C's are. */
    STRLEN length;
    const char *text = SvPV(message, length);
    serow_log_line(level, text, length);

int
log_facility(const char *name)
  CODE:
    /* -1 for a name that is no facility Serow logs to */
    RETVAL = serow_log_facility(name);
  OUTPUT:
    RETVAL

int
log_configure(int level, SV *facility, SV *socket)
  CODE:
    /* False (with $!) when the facility or the socket path will not do. */
    RETVAL = serow_log_configure(level, SvOK(facility) ? SvPV_nolen(facility) : NULL,
                                 SvOK(socket) ? SvPV_nolen(socket) : NULL) == 0;
  OUTPUT:
    RETVAL

int
make_eventfd()
  CODE:
    RETVAL = serow_make_wake_fd();
  OUTPUT:
    RETVAL

void
close_fd(int fd)
  CODE:
    close(fd);

void
default_signals_in_children(...)
  CODE:
    /* The signals named, which this process ignores, are set back to their
     * default action in every process it forks from now on: see
     * src/worker/child_signals.h. */
    for (I32 i = 0; i < items; i++) {
        int n = whichsig_pv(SvPV_nolen(ST(i)));
        if (n <= 0)
            croak("default_signals_in_children: no signal '%s'", SvPV_nolen(ST(i)));
        int err = serow_default_signal_in_children(n);
        if (err != 0)
            croak("default_signals_in_children: %s", strerror(err));
    }

int
set_parent_death_signal(int signal)
  CODE:
    /* The kernel sends signal to this process when its parent exits. */
    RETVAL = prctl(PR_SET_PDEATHSIG, (unsigned long)signal) == 0;
  OUTPUT:
    RETVAL

int
set_dumpable(int dumpable)
  CODE:
    /* Changing a process's uid clears its dumpable flag; the connection
     * holder needs it set to take a worker's connections with
     * pidfd_getfd (which asks for ptrace access to the worker). */
    RETVAL = prctl(PR_SET_DUMPABLE, (unsigned long)dumpable) == 0;
  OUTPUT:
    RETVAL

int
set_ptracer(int pid)
  CODE:
    /* Yama (ptrace_scope 1) lets only a declared ptracer and its
     * descendants take a process's descriptors: a worker names the master,
     * so that the connection holder, the master's child, may.  Without
     * Yama the call fails with EINVAL and nothing is needed. */
#ifdef PR_SET_PTRACER
    RETVAL = prctl(PR_SET_PTRACER, (unsigned long)pid) == 0;
#else
    RETVAL = 0;
#endif
  OUTPUT:
    RETVAL

int
set_child_subreaper()
  CODE:
    /* Orphaned descendants are re-parented to this process (not to init):
     * the master, so that the workers a generation process forks through
     * an intermediate process are the master's children (waitpid). */
    RETVAL = prctl(PR_SET_CHILD_SUBREAPER, 1UL) == 0;
  OUTPUT:
    RETVAL

void
make_message_channel()
  PPCODE:
    /* A pair of connected SOCK_SEQPACKET sockets (non-blocking, close-on-exec). */
    int fds[2];
    if (serow_make_channel(fds) != 0)
        croak("cannot make a channel: %s", strerror(errno));
    mXPUSHi(fds[0]);
    mXPUSHi(fds[1]);

int
send_message(int channel, SV *data, ...)
  CODE:
    /* Sends data with the descriptors that follow it; false with $! set. */
    int fds[FD_PASSING_BATCH];
    size_t n = items - 2;
    if (n > FD_PASSING_BATCH)
        croak("send_message: too many descriptors");
    for (size_t i = 0; i < n; i++)
        fds[i] = (int)SvIV(ST(2 + i));
    STRLEN len;
    const char *p = SvPV(data, len);
    RETVAL = serow_send_message(channel, p, len, fds, n) == 0;
  OUTPUT:
    RETVAL

void
receive_message(int channel)
  PPCODE:
    /* (data, descriptors...); ('') at the end of the stream; () when there
     * is nothing yet or on an error ($! says which). */
    char buf[4096];
    int fds[FD_PASSING_BATCH];
    size_t n = FD_PASSING_BATCH;
    ssize_t r = serow_receive_message(channel, buf, sizeof(buf), fds, &n);
    if (r < 0)
        XSRETURN_EMPTY;
    mXPUSHp(buf, (STRLEN)r);
    for (size_t i = 0; i < n; i++)
        mXPUSHi(fds[i]);
