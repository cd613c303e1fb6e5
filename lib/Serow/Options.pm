package Serow::Options;
use strict;
use warnings;

# No Getopt::Long and no B at load time: the master loads this module, and
# what the master loads is in every worker's memory (B is loaded when a mode
# given as a Perl number has to be told from a string).

# Every option of the server, in one table: the command line, --help,
# Plack::Handler::Serow and the defaults all come from here.
#   name => [type, default, help, value name in --help (default N, or ... for lists),
#            the values a choice takes]
# Types: int (whole number >= 0), count (whole number >= 1), size (bytes, K/M/G suffixes), seconds
# (a positive number), string, list (repeatable; a value may also list several,
# separated by commas), repeat (repeatable; each value is one whole string, a
# file or path that may hold a comma), mode (octal, kept as
# a string such as "0660"), switch (on or off: 1 or 0; on the command line
# the bare --name turns it on, and takes no value), choice (one of the words
# listed).
my @OPTIONS = (
    listen => ['list', [], 'HOST:PORT, [IPv6]:PORT, :PORT or /path/to.sock to listen on, with :ssl after it to serve TLS there (repeatable; default 0.0.0.0:5000)'],
    enable_ssl => ['switch', 0, 'serve TLS on every --listen address (as Starman\'s --enable-ssl); needs --ssl-cert and --ssl-key (docs/tls.md)'],
    ssl_cert => ['repeat', [], 'the server\'s certificate chain (PEM), read by the master at start (before privileges drop) and again on HUP; repeat --ssl-cert and --ssl-key for several certificates, chosen by the name the client asks for (SNI), the first for the others', 'FILE'],
    ssl_key => ['repeat', [], 'the private key (PEM, no passphrase) of an --ssl-cert: the first --ssl-key is the first certificate\'s, the second the second\'s', 'FILE'],
    ssl_session_tickets => ['choice', 'on', 'session tickets, whose key every worker shares, so that a client resumes its TLS session on any worker (off: every connection makes a full handshake)', 'on|off', [qw(on off)]],
    ssl_priorities => ['string', undef, 'the TLS versions, ciphers and key exchanges, as a GnuTLS priority string (default: Mozilla\'s intermediate profile: TLS 1.2 and 1.3, ECDHE, AES-GCM and ChaCha20-Poly1305; a cipher other than those three, or a version below TLS 1.2, is refused)', 'STRING'],
    ssl_verify_client => ['choice', 'off', 'ask TLS clients for a certificate (mutual TLS), as nginx\'s ssl_verify_client: on (a client without a valid one has no handshake), optional (none, or a valid one), optional_no_ca (none, or any one: the app sees its check in SSL_CLIENT_VERIFY), or off; the app gets SSL_CLIENT_* (docs/tls.md)', 'MODE',
        [qw(off on optional optional_no_ca)]],
    ssl_client_ca => ['string', undef, 'the CA certificates (PEM) that client certificates are checked against, read at start before privileges drop; needed by --ssl-verify-client on and optional', 'FILE'],
    ssl_crl => ['string', undef, 'revoked client certificates: a CRL (PEM) of a CA of --ssl-client-ca, read at start; a certificate it lists fails its check', 'FILE'],
    socket_mode => ['mode', undef, 'permissions of UNIX sockets Serow creates, in octal (e.g. 0660)'],
    backlog => ['int', 1024, 'listen queue length'],
    workers => ['count', 4, 'worker processes'],
    max_requests => ['int', 0, 'requests a worker serves before it is replaced (0: never); each worker draws its own limit between --min-requests and this, so they do not all restart at once'],
    max_worker_rss => ['int', 0, 'resident memory, in MiB, above which a worker is replaced once its request is answered (0: no limit); the master looks once a second', 'MIB'],
    min_requests => ['count', undef, 'the lowest limit a worker draws under --max-requests (default: 75% of --max-requests)'],
    max_request_line => ['size', 8192, 'longest request line; longer gets 414'],
    max_header_size => ['size', 65536, 'largest header section; larger gets 431'],
    max_headers => ['int', 100, 'most header fields in a request; more gets 431'],
    max_body_size => ['size', 1024 ** 3, 'largest request body; larger gets 413 (0: no limit)'],
    max_chunk_extensions => ['size', 16384, 'bytes of chunk extensions (the ";name=value" after a chunk\'s size) a chunked request body may carry in all; more gets 400 (0: no limit). They carry no data, so without a bound a body of tiny chunks keeps a worker reading (RFC 9112 7.1.1)'],
    body_memory_limit => ['size', 1024 * 1024, 'request bodies larger than this are buffered in an unlinked temp file instead of memory'],
    header_timeout => ['seconds', 10, 'time a client has to send a whole request head; then 408'],
    read_timeout => ['seconds', 60, 'time without progress while reading a request body; then 408'],
    min_body_rate => ['size', 1024, 'bytes per second a request body over 64 KiB must average while a worker reads it, after --read-timeout of grace; slower gets 408 (0: no minimum)'],
    write_timeout => ['seconds', 60, 'time without progress while writing a response; then the connection is closed'],
    keepalive_timeout => ['seconds', 75, 'time an idle keep-alive connection is kept open (above the idle timeouts of proxies and load balancers, which must close first)'],
    max_keepalive_requests => ['int', 0, 'requests on one connection before it is closed (0: no limit)'],
    max_keepalive_connections => ['int', 0, 'connections kept open at once, idle or busy; above it new connections are answered and closed, and the oldest idle ones closed (0: the open-file limit less a tenth, at least 64, kept for the app)'],
    request_timeout => ['int', 0, 'whole seconds the app may run for one request (0: no limit); then a die is raised inside it (its stack trace logged) and the client gets 503 with Connection: close; an app still running --request-timeout-grace later has its worker killed and replaced'],
    request_timeout_grace => ['seconds', 5, 'with --request-timeout: time the app gets after the die to return before the master kills its worker'],
    lazy_app => ['switch', 0, 'load the app in each worker after the fork instead of once per generation: for an app that opens database handles or sockets when it loads; costs each worker its own compiled copy of the app'],
    max_queue_wait => ['int', 0, 'milliseconds a request may wait for a free worker, in the connection holder or in the listen backlog; then it is answered 503 with Retry-After: 1 and Connection: close and its connection closed (0: no limit)', 'MS'],
    grip => ['switch', 0, 'hold connections for responses with Grip-Hold (GRIP, as Pushpin): the worker is freed at once and the connection holder keeps the connection, delivering what is published to its channels (Serow::Holding::publish); off: Grip-* headers pass as any other (docs/holding.md)'],
    hold_max_pending => ['size', 1024 * 1024, 'with --grip: bytes queued for one held connection whose client does not read; past it the connection is closed and counted, so that it never slows the others'],
    hold_max_channels => ['int', 20, 'with --grip: channels one held connection may subscribe to (Grip-Channel); a hold naming more is answered 500 and logged, as any broken instruction (1 to 64)'],
    websocket_max_message => ['size', 1024 * 1024, 'with --grip: the largest message a WebSocket client may send, all its frames together; a larger one closes the connection with 1009 (Message Too Big), before its payload is read (1 to 1G)'],
    websocket_max_gathered => ['size', 64 * 1024, 'with --grip: bytes of a WebSocket client\'s messages gathered while the app serves the last ones; past it (one message more at most) the client is not read until the app answers, so a fast client waits for a slow app rather than filling memory (1 to 1G)'],
    websocket_ping_interval => ['seconds', 30, 'with --grip: a WebSocket client quiet this long is pinged, so that a connection whose client is gone (a laptop asleep, a NAT that forgot it) does not stay open forever, and the proxies on the way see traffic'],
    websocket_ping_timeout => ['seconds', 30, 'with --grip: a pinged WebSocket client that sends nothing for this long is closed (without a close frame, which it would not read: it sees 1006) and the app hears DISCONNECT'],
    websocket_psgix_io => ['repeat', [], 'with --grip: WebSocket upgrades to paths starting with this prefix are left to the app\'s psgix.io (a worker kept per connection, as without --grip); every other upgrade is served by the connection holder, each message by any free worker (repeatable; docs/websocket.md)', 'PATH-PREFIX'],
    websocket_deflate => ['choice', 'on', 'with --grip: permessage-deflate (RFC 7692) for the WebSockets the connection holder serves, when the client offers it (browsers do): messages of 64 bytes and more are compressed, without context takeover, so that no compression state is kept per connection (docs/websocket.md); off: declined', 'on|off', [qw(on off)]],
    max_held_connections => ['int', 0, 'with --grip: connections held at once for streams and long polls; more are closed (0: no limit but the open-file limit)'],
    graceful_timeout => ['seconds', 30, 'on stop or HUP, time workers get to finish before they are killed'],
    pid_file => ['string', undef, 'write the master\'s pid to this file once the sockets are open; removed on a clean stop', 'FILE'],
    user => ['string', undef, 'user (name or number) the workers and the connection holder run as; the sockets are opened first, so ports below 1024 work', 'USER'],
    group => ['string', undef, 'group (name or number) they run as (default: the --user\'s group)', 'GROUP'],
    error_log => ['string', undef, 'append the log to this file instead of standard error (reopened on USR1), or send it to syslog with "syslog" or "syslog:FACILITY" (user, daemon, local0 to local7; default daemon)', 'FILE'],
    log_level => ['choice', 'info', 'the least important lines the error log gets: error, warn, info or debug', 'LEVEL',
        [qw(error warn info debug)]],
    syslog_socket => ['string', '/dev/log', 'with --error-log syslog: the syslog daemon\'s datagram socket', 'PATH'],
    access_log => ['string', undef, 'write an access log line per request (Apache combined format) to FILE, or to standard error with "-" or "stderr"; reopened on USR1. Off by default: a line costs every request a format and a write', 'FILE'],
    access_log_format => ['string', 'combined', 'the --access-log line: an Apache LogFormat string (%h %l %u %t %r %>s %b %B %D %T %{ms}T %m %U %q %H %v %p %P %k %{NAME}i %{NAME}o %{NAME}e, and %{queue_us}x %{app_us}x %{write_us}x %{request_id}x), or combined, common or json (an object per line); compiled once at start-up, a bad directive refused', 'FORMAT'],
    request_id_header => ['string', undef, 'the request id\'s header (e.g. X-Request-Id): taken from the request when it carries a sane one (1 to 127 visible ASCII bytes), else made (32 hex digits, unique across workers and restarts); given to the app in that header\'s env key and psgix.request_id, sent back in the response (unless the app set it) and in the server\'s own error responses (400, 408, 413, 414, 431, 500, 503), and in the access log. Off by default', 'NAME'],
    slow_request_log => ['int', 0, 'log a request that took this many milliseconds or more (from the arrival of its head to its last byte written) to the error log (a warning), with where its time went, its worker, status and request line, whether or not there is an access log (0: off)', 'MS'],
    metrics_path => ['string', undef, 'answer Prometheus metrics at this path (e.g. /metrics) before the app; off by default', 'PATH'],
    metrics_allow => ['list', ['127.0.0.1/32', '::1/128'], 'addresses or CIDR networks that may read --metrics-path (repeatable; default 127.0.0.1 and ::1); others get 403, and so does a request with X-Forwarded-For, Forwarded or X-Real-IP unless it comes from a --metrics-trusted-proxy', 'CIDR...'],
    metrics_trusted_proxy => ['list', [], 'proxies (addresses or CIDR networks) whose forwarded client address (the last in X-Forwarded-For, Forwarded, X-Real-IP) --metrics-allow judges; none by default: forwarded requests get 403', 'CIDR...'],
    publish_listen => ['string', undef, 'answer Pushpin\'s publish endpoint (POST /publish/ with {"items": [...]}) on this HOST:PORT, a listen socket of its own that never reaches the app; turns holding on. Off by default', 'HOST:PORT'],
    publish_redis => ['string', undef, 'publish through the Redis at this URL, redis://HOST:PORT[/PREFIX] (port 6379 and prefix serow when left out): every publish goes to Redis (PUBLISH PREFIX:CHANNEL), and each Serow sharing it delivers it to its own held connections; turns holding on. Off by default', 'URL'],
    publish_allow => ['list', ['127.0.0.1/32', '::1/128'], 'addresses or CIDR networks that may publish on --publish-listen (repeatable; default 127.0.0.1 and ::1); others get 403, and so does a request with X-Forwarded-For, Forwarded or X-Real-IP', 'CIDR...'],
    publish_max_body => ['size', 1024 * 1024, 'largest publish request body on --publish-listen; larger gets 413'],
    publish_max_item => ['size', 64 * 1024, 'largest published item (its channel, ids, contents, reason, header names and values, bodies; at most 128K), over HTTP (a request with a larger one gets 413 and delivers nothing) or from Perl (Serow::Holding::publish dies)'],
);

# Other servers' option names, so that moving from Starman, Starlet or
# Gazelle is a one-word change.  Each alias is one of:
#   to => OPTION            the Serow option it is (same value)
#   to => OPTION, set => V  a switch: it sets OPTION to V
#   listen => 'host'/'port' a part of one --listen address (command line only)
#   same => WHY             a switch asking for what Serow always does
#   refuse => WHAT TO DO    Serow does not do it: an error that says so
# plackup passes options as hash keys and turns --disable-foo into foo => 0
# (and --enable-foo into foo => 1): those forms are hash_only.
my @ALIASES = (
    'max-workers'        => { to => 'workers', from => 'Starlet, Gazelle' },
    'max-reqs-per-child' => { to => 'max_requests', from => 'Starlet, Gazelle' },
    'min-reqs-per-child' => { to => 'min_requests', from => 'Starlet, Gazelle' },
    'reload-on-rss'      => { to => 'max_worker_rss', from => 'uWSGI' },
    'max-keepalive-reqs' => { to => 'max_keepalive_requests', from => 'Starlet' },
    'timeout'            => { to => 'read_timeout', from => 'Starlet, Gazelle' },
    'pid'                => { to => 'pid_file', from => 'Starman' },
    'harakiri'           => { to => 'request_timeout', from => 'uWSGI' },
    'harakiri-graceful-timeout' => { to => 'request_timeout_grace', from => 'uWSGI' },
    'l'                  => { to => 'listen', from => 'Starman, plackup' },
    'socket'             => { to => 'listen', from => 'Starman, plackup' },
    'S'                  => { to => 'listen', from => 'Starman, plackup' },
    'host'               => { listen => 'host', from => 'Starman, plackup' },
    'port'               => { listen => 'port', from => 'Starman, plackup' },
    'disable-keepalive'  => { to => 'max_keepalive_requests', set => 1, from => 'Starman' },
    'keepalive'          => { to => 'max_keepalive_requests', set => 1, hash_only => 1,
                              from => 'plackup --disable-keepalive' },
    'lazy-apps'          => { to => 'lazy_app', set => 1, from => 'uWSGI' },
    'log-syslog'         => { to => 'error_log', set => 'syslog', from => 'uWSGI' },
    'preload-app'        => { same => 'it loads the app once before it forks workers',
                              from => 'Starman' },
    'daemonize'          => { switch => 1, from => 'Starman, plackup',
                              refuse => 'Serow stays in the foreground: run it under systemd (eg/systemd/serow.service), start_server or another supervisor, and use --pid-file and --error-log' },
    'D'                  => { switch => 1, from => 'Starman, plackup', refuse_as => 'daemonize' },
    'env'                => { from => 'Starman, plackup',
                              refuse => 'serow does not set PLACK_ENV: set it in the environment (PLACK_ENV=deployment serow ...), or keep -E with plackup -s Serow' },
    'E'                  => { from => 'Starman, plackup', refuse_as => 'env' },
    'spawn-interval'     => { from => 'Starlet, Gazelle',
                              refuse => 'Serow starts the new workers before the old ones leave on HUP, so no request waits; drop the option' },
    'child-exit'         => { from => 'Starlet, Gazelle',
                              refuse => 'put the code in an END block in the app: a worker runs it when it exits' },
    'ssl'                => { to => 'enable_ssl', hash_only => 1, from => 'plackup --enable-ssl' },
    'disable-proctitle'  => { switch => 1, from => 'Starman',
                              refuse => 'Serow always names its processes (serow master, serow worker, serow connection holder); drop the option' },
    'proctitle'          => { hash_only => 1, from => 'plackup --disable-proctitle', refuse_as => 'disable-proctitle' },
    'logformat'          => { from => 'uWSGI',
                              refuse => 'uWSGI\'s %(var) variables are not Apache\'s: write the format with --access-log-format (Apache LogFormat directives, or json; see man serow)' },
);

my %SPEC = @OPTIONS;
my @ORDER = @OPTIONS[grep { $_ % 2 == 0 } 0 .. $#OPTIONS];
my %ALIAS = @ALIASES;
my @ALIAS_ORDER = @ALIASES[grep { $_ % 2 == 0 } 0 .. $#ALIASES];

sub names { @ORDER }
sub spec { $SPEC{ $_[1] } }
# The aliases a user may type (the hash-only forms left out).
sub aliases { grep { !$ALIAS{$_}{hash_only} } @ALIAS_ORDER }
sub alias { $ALIAS{ $_[1] } }
# Whether a key of from_hash names an option or an alias (one Serow refuses
# included: it still dies there, with what to do instead).
sub knows {
    my ($class, $key) = @_;
    (my $name = $key) =~ tr/-/_/;
    return !!($SPEC{$name} || $ALIAS{ _dashed($name) } || $ALIAS{$key});
}
# " (did you mean --workers? see --help)" for a key no option has.
sub hint { _hint($_[1]) }

sub defaults {
    my %d;
    for my $name (@ORDER) {
        my $default = $SPEC{$name}[1];
        $d{$name} = ref $default eq 'ARRAY' ? [@$default] : $default;
    }
    return \%d;
}

sub _parse_size {
    my ($name, $v) = @_;
    $v =~ /\A\s*(\d+)\s*([kmg]?)i?b?\s*\z/i
        or die "--" . _dashed($name) . ": '$v' is not a size (a whole number of bytes, optionally with K, M or G)\n";
    return $1 * { '' => 1, k => 1024, m => 1024**2, g => 1024**3 }->{ lc $2 };
}

sub _dashed { (my $n = shift) =~ tr/_/-/; $n }

# A value Perl holds as a number and never held as a string.
sub _is_number {
    my ($value) = @_;
    return 0 unless defined $value && !ref $value;
    require B;
    my $flags = B::svref_2object(\$value)->FLAGS;
    return ($flags & (B::SVf_IOK() | B::SVf_NOK())) && !($flags & B::SVf_POK());
}

# Checks and converts one value; dies with a message naming the option.
sub normalize {
    my ($class, $name, $value) = @_;
    my $spec = $SPEC{$name} or die "unknown option '$name'\n";
    my $type = $spec->[0];
    my $flag = '--' . _dashed($name);
    if ($type eq 'int') {
        defined $value && $value =~ /\A\d+\z/ or die "$flag: '" . ($value // '') . "' is not a whole number\n";
        return $value + 0;
    }
    if ($type eq 'count') {
        defined $value && $value =~ /\A0*[1-9]\d*\z/
            or die "$flag: '" . ($value // '') . "' is not a whole number of at least 1\n";
        return $value + 0;
    }
    if ($type eq 'size') {
        return _parse_size($name, $value // '');
    }
    if ($type eq 'seconds') {
        defined $value && $value =~ /\A(?:\d+(?:\.\d*)?|\.\d+)\z/ && $value > 0
            or die "$flag: '" . ($value // '') . "' is not a positive number of seconds\n";
        return $value + 0;
    }
    if ($type eq 'mode') {
        # Kept as an octal string ("0660"), so that checking a checked value
        # again changes nothing; a Perl number (the literal 0660) is the mode.
        return sprintf '%04o', $value if _is_number($value) && $value >= 0 && $value <= 07777;
        defined $value && $value =~ /\A0?[0-7]{3,4}\z/ or die "$flag: '" . ($value // '') . "' is not an octal mode such as 0660\n";
        return sprintf '%04o', oct $value;
    }
    if ($type eq 'switch') {
        # 1 or 0, and Perl's own true and false (!!1, !!0 is '').
        defined $value && !ref $value && $value =~ /\A[01]?\z/
            or die "$flag: '" . ($value // '') . "' is not 1 or 0 (a switch: give $flag alone to turn it on)\n";
        return $value ? 1 : 0;
    }
    if ($type eq 'list') {
        return [ map { split /,/ } ref $value eq 'ARRAY' ? @$value : ($value) ];
    }
    if ($type eq 'repeat') {
        return [ ref $value eq 'ARRAY' ? @$value : ($value) ];
    }
    if ($type eq 'choice') {
        my @choices = @{ $spec->[4] };
        defined $value && grep { $_ eq $value } @choices
            or die "$flag: '" . ($value // '') . "' is not one of " . join(', ', @choices) . "\n";
        return $value;
    }
    return $value;
}

# Options given as a hash (Plack::Handler, Serow::Server->new): validated,
# defaults filled in.  Unknown keys are an error: a typo must not be ignored.
sub from_hash {
    my ($class, %given) = @_;
    my $opts = $class->defaults;
    my %set_by; # option => the key that set it
    for my $key (sort keys %given) {
        next unless defined $given{$key};
        (my $name = $key) =~ tr/-/_/;
        my $value = $given{$key};
        if (!$SPEC{$name}) {
            my $alias = $ALIAS{ _dashed($name) } || $ALIAS{$key}
                or die "unknown option '$key'" . _hint($name) . "\n";
            ($name, $value) = _resolve_alias($key, $alias, $value) or next;
        }
        die "--" . _dashed($set_by{$name}) . " and --" . _dashed($key) . " are the same option: give one of them\n"
            if defined $set_by{$name};
        $set_by{$name} = $key;
        $opts->{$name} = $class->normalize($name, $value);
    }
    _check_together($opts);
    return $opts;
}

# What an alias given with $value asks for: (option, value), or () for
# nothing to change.  Dies for an alias Serow does not support.
sub _resolve_alias {
    my ($key, $alias, $value) = @_;
    my $flag = alias_flag(_dashed($key));
    my $refusal = $alias->{refuse_as} ? $ALIAS{ $alias->{refuse_as} }{refuse} : $alias->{refuse};
    die "$flag ($alias->{from}) is not supported: $refusal\n" if $refusal;
    return () if $alias->{same};
    die "$flag: give the whole address as listen => ['HOST:PORT']\n" if $alias->{listen};
    if (exists $alias->{set}) {
        # plackup's --disable-keepalive arrives as keepalive => 0, and
        # --enable-keepalive (what Serow does anyway) as keepalive => 1.
        return () if $alias->{hash_only} ? $value : !$value;
        return ($alias->{to}, $alias->{set});
    }
    return ($alias->{to}, $value);
}

# Checks between options.
sub _check_together {
    my ($opts) = @_;
    my $tls = $opts->{enable_ssl} || grep { /:ssl\z/ } @{ $opts->{listen} };
    if ($tls) {
        @{ $opts->{$_} } or die "--" . ($opts->{enable_ssl} ? 'enable-ssl' : 'listen HOST:PORT:ssl')
            . ": needs --" . _dashed($_) . "\n" for qw(ssl_cert ssl_key);
        my ($certs, $keys) = (scalar @{ $opts->{ssl_cert} }, scalar @{ $opts->{ssl_key} });
        $certs == $keys or die "--ssl-key: $keys for $certs --ssl-cert: give one key for each certificate, in the same order\n";
    } else {
        (ref $opts->{$_} ? @{ $opts->{$_} } : defined $opts->{$_}) and die "--" . _dashed($_) . ": no address serves TLS (--enable-ssl, or :ssl after a --listen address)\n"
            for qw(ssl_cert ssl_key ssl_priorities ssl_client_ca ssl_crl);
        $opts->{ssl_verify_client} eq 'off'
            or die "--ssl-verify-client: no address serves TLS (--enable-ssl, or :ssl after a --listen address)\n";
    }
    _check_client_certificates($opts);
    for my $name (qw(websocket_max_message websocket_max_gathered)) {
        $opts->{$name} >= 1 && $opts->{$name} <= 1024**3
            or die "--" . _dashed($name) . ": $opts->{$name} is not between 1 and 1G\n";
    }
    # (the events of one request to the app: what was gathered and a message;
    # only with holding on, which serves WebSockets in the holder)
    my $holding = $opts->{grip} || defined $opts->{publish_listen} || defined $opts->{publish_redis};
    !$holding || !$opts->{max_body_size} || $opts->{websocket_max_message} + $opts->{websocket_max_gathered} <= $opts->{max_body_size}
        or die "--websocket-max-message: with --websocket-max-gathered, a WebSocket's request to the app could be over --max-body-size $opts->{max_body_size} (and refused with 413); lower them or raise it\n";
    if (defined $opts->{min_requests}) {
        $opts->{max_requests} or die "--min-requests: needs --max-requests (the highest limit a worker draws)\n";
        $opts->{min_requests} <= $opts->{max_requests}
            or die "--min-requests: $opts->{min_requests} is above --max-requests $opts->{max_requests}\n";
    }
}

# --ssl-verify-client and --ssl-client-ca: a mode that checks certificates
# needs the CA to check them against, and a CA is for a mode that asks.
sub _check_client_certificates {
    my ($opts) = @_;
    my $mode = $opts->{ssl_verify_client};
    die "--ssl-verify-client: $mode needs --ssl-client-ca (the CA that client certificates are checked against)\n"
        if ($mode eq 'on' || $mode eq 'optional') && !defined $opts->{ssl_client_ca};
    die "--ssl-client-ca: needs --ssl-verify-client on, optional or optional_no_ca\n"
        if $mode eq 'off' && defined $opts->{ssl_client_ca};
    die "--ssl-crl: needs --ssl-client-ca (the CA whose revoked certificates it lists)\n"
        if defined $opts->{ssl_crl} && !defined $opts->{ssl_client_ca};
}

# One --listen address from --host and --port (Starman's and plackup's way),
# each defaulting to where Serow listens when nothing says (--listen,
# Server::Starter, systemd): Serow::Options->listen_address is 0.0.0.0:5000.
use constant { DEFAULT_HOST => '0.0.0.0', DEFAULT_PORT => 5000 };

sub listen_address {
    my ($class, $host, $port) = @_;
    $port //= DEFAULT_PORT;
    $host = DEFAULT_HOST if !defined $host || $host eq '' || $host eq '*';
    return $host =~ /:/ ? "[$host]:$port" : "$host:$port";
}

# Parses a command line; returns (options, remaining arguments).  Written
# here rather than with Getopt::Long, which would stay loaded in the master
# and so in every worker.  Long options are --name VALUE or --name=VALUE (a
# list option, and every alias of --listen, may be repeated); switches (the
# aliases that take no value, the options of type switch, -h/--help,
# -v/--version) take none.  Single
# letters bundle (-hv) and take their value attached or next (-l:5000, -l :5000).
# The options end at "--" or at the first argument that is not one (the app).
sub from_argv {
    my ($class, @argv) = @_;
    my (%raw, $help, $version);
    my $take = sub { # one option; $value undef when none was attached
        my ($flag, $value, $attached) = @_;
        if ($flag eq 'help' || $flag eq 'h' || $flag eq 'version' || $flag eq 'v') {
            die alias_flag($flag) . " takes no value\n" if $attached;
            if ($flag =~ /\Ah/) { $help = 1 } else { $version = 1 }
            return 0;
        }
        (my $name = $flag) =~ tr/-/_/;
        my $alias = $ALIAS{$flag};
        my $known = ($SPEC{$name} && _dashed($name) eq $flag) || ($alias && !$alias->{hash_only});
        die "unknown option " . alias_flag($flag) . _hint($flag) . "\n" unless $known;
        if (($alias && ($alias->{switch} || exists $alias->{set} || $alias->{same}))
                || (!$alias && $SPEC{$name}[0] eq 'switch')) {
            die alias_flag($flag) . " takes no value\n" if $attached;
            $raw{$flag} = 1;
            return 0;
        }
        my $used_next = 0;
        if (!defined $value) {
            @argv or die alias_flag($flag) . ": a value is missing\n";
            $value = shift @argv;
            $used_next = 1;
        }
        my $repeatable = $alias ? ($alias->{to} // '') eq 'listen' : $SPEC{$name}[0] =~ /\A(?:list|repeat)\z/;
        if ($repeatable) { push @{ $raw{$flag} }, $value } else { $raw{$flag} = $value }
        return $used_next;
    };
    while (@argv && $argv[0] =~ /\A-./) {
        my $arg = shift @argv;
        last if $arg eq '--';
        if (my ($flag, $value) = $arg =~ /\A--([^=]+)(?:=(.*))?\z/s) {
            $take->($flag, $value, defined $value);
            next;
        }
        my @letters = split //, substr($arg, 1);
        while (defined(my $letter = shift @letters)) {
            my $alias = $ALIAS{$letter};
            my $switch = $letter =~ /\A[hv]\z/ || ($alias && ($alias->{switch} || exists $alias->{set} || $alias->{same}));
            if ($switch || !@letters) {
                $take->($letter, undef, 0);
            } else {
                $take->($letter, join('', @letters), 1);
                last;
            }
        }
    }
    # Every way of naming an address adds one to --listen.
    my @listen = map { @{ delete $raw{$_} // [] } } qw(listen l);
    push @listen, map { m{/} ? $_ : "./$_" } map { @{ delete $raw{$_} // [] } } qw(socket S);
    my ($host, $port) = delete @raw{qw(host port)};
    push @listen, $class->listen_address($host, $port) if defined $host || defined $port;
    my %given = (@listen ? (listen => \@listen) : ());
    for my $flag (keys %raw) {
        (my $name = $flag) =~ tr/-/_/;
        $given{ $SPEC{$name} ? $name : $flag } = $raw{$flag};
    }
    my $opts = $class->from_hash(%given);
    $opts->{help} = $help;
    $opts->{version} = $version;
    return ($opts, @argv);
}

# "did you mean --max-requests?" for a mistyped option.
sub _hint {
    my ($typed) = @_;
    $typed =~ tr/-/_/;
    my ($best, $best_distance);
    # Serow's own names first: at equal distance they win over an alias.
    for my $name (@ORDER, map { tr/-/_/r } grep { length > 1 } aliases()) {
        my $d = _distance(lc $typed, $name);
        ($best, $best_distance) = ($name, $d) if !defined $best_distance || $d < $best_distance;
    }
    return defined $best && $best_distance <= 3
        ? " (did you mean --" . _dashed($best) . "? see --help)"
        : " (see --help)";
}

sub _distance {
    my ($s, $t) = @_;
    my @prev = (0 .. length $t);
    for my $i (1 .. length $s) {
        my @cur = ($i);
        for my $j (1 .. length $t) {
            my $cost = substr($s, $i - 1, 1) eq substr($t, $j - 1, 1) ? 0 : 1;
            my $m = $prev[$j] + 1;
            $m = $cur[$j - 1] + 1 if $cur[$j - 1] + 1 < $m;
            $m = $prev[$j - 1] + $cost if $prev[$j - 1] + $cost < $m;
            push @cur, $m;
        }
        @prev = @cur;
    }
    return $prev[-1];
}

sub help_text {
    my $text = '';
    for my $name (@ORDER) {
        my ($type, $default, $help, $value_name) = @{ $SPEC{$name} };
        $value_name //= $type eq 'list' ? '...' : $type eq 'string' ? 'S' : 'N';
        # A switch is off unless given, and given alone.
        my $d = ref $default eq 'ARRAY' || !defined $default || $type eq 'switch' ? '' : " (default: $default)";
        my $flag = _dashed($name) . ($type eq 'switch' ? '' : "=$value_name");
        $text .= sprintf "  --%-26s %s%s\n", $flag, $help, $d;
    }
    $text .= "\nOptions of Starman, Starlet, Gazelle, plackup and uWSGI, so that switching is one word:\n";
    for my $alias (aliases()) {
        $text .= sprintf "  %-28s %s (%s)\n", alias_flag($alias), alias_meaning($alias), $ALIAS{$alias}{from};
    }
    return $text;
}

# "--max-workers", "-S".
sub alias_flag { length $_[-1] == 1 ? "-$_[-1]" : "--$_[-1]" }

# What an alias does, in words (for --help and the man page).
sub alias_meaning {
    my $a = $ALIAS{ $_[-1] };
    return 'same as --listen HOST:PORT (with --port)' if ($a->{listen} // '') eq 'host';
    return 'same as --listen :PORT (with --host: HOST:PORT)' if ($a->{listen} // '') eq 'port';
    return "what Serow always does: $a->{same}" if $a->{same};
    my $refusal = $a->{refuse_as} ? $ALIAS{ $a->{refuse_as} }{refuse} : $a->{refuse};
    return "not supported: $refusal" if $refusal;
    return "same as --" . _dashed($a->{to}) if exists $a->{set} && $SPEC{ $a->{to} }[0] eq 'switch';
    return "same as --" . _dashed($a->{to}) . " $a->{set}" if exists $a->{set};
    return "same as --" . _dashed($a->{to});
}

1;
__END__

=head1 NAME

Serow::Options - the options of the Serow server: names, types, defaults, checks

=head1 SYNOPSIS

    my ($options, @rest) = Serow::Options->from_argv(@ARGV);
    my $options = Serow::Options->from_hash(workers => 8, listen => ['127.0.0.1:8080']);

=head1 DESCRIPTION

One table holds every option with its type, default and help line. Values are
checked when they are given: a bad value dies with a message that names the
option and the problem, and an unknown option is an error with a hint, never
silently ignored. Sizes accept C<K>, C<M> and C<G> suffixes.

See L<serow> for the list of options.

=cut
