package Serow::Server;
use strict;
use warnings;

use Serow ();
use Serow::Options ();
use Serow::Listener ();
use Serow::Master ();
use Serow::Log ();
use Serow::PidFile ();
use Serow::Privileges ();
use Serow::Metrics ();
use Serow::Holding ();
use Serow::AddressList ();
use Serow::Publish::Redis ();
use Serow::Notify ();
use Serow::Version ();
use Scalar::Util ();
use overload ();

sub new {
    my ($class, %args) = @_;
    my $server_ready = delete $args{server_ready};
    my $sockets = delete $args{listen_sockets}; # already listening: used as they are
    my $ignored = delete $args{ignored_options}; # Plack::Handler::Serow's: warned of once the log is open
    # systemd's NOTIFY_SOCKET: serow takes it before it loads the app
    # (Serow::Notify->from_env), plackup -s Serow only here.
    my $notify = exists $args{notify} ? delete $args{notify} : Serow::Notify->from_env;
    my $options = Serow::Options->from_hash(%args);
    $options->{max_keepalive_connections} ||= default_max_keepalive_connections();
    Serow::Log->syslog_facility($options->{error_log}); # a facility syslog has no name for: an error now
    # Names checked now: a wrong --user is an error before anything is bound.
    my $privileges = Serow::Privileges->resolve(user => $options->{user}, group => $options->{group});
    # Now, before the master has a SIGCHLD handler: in a checkout it runs git.
    my $version = Serow::Version->describe;
    return bless { options => $options, server_ready => $server_ready, listen_sockets => $sockets,
                   privileges => $privileges, notify => $notify, version => $version,
                   ignored_options => $ignored || [] }, $class;
}

# Idle connections all end up in one process, the connection holder, so the
# cap is that process's open-file limit, less a reserve: the holder's own
# descriptors (epoll, channels, one pidfd per worker) and, since workers have
# the same limit, room in a worker for the app's files and database
# connections next to the connections it serves.  (Half the limit, as
# Monoceros does, refused keep-alive to the 10,001st of 10,000 idle + 32
# active connections under a 20,000 limit: every active request then paid a
# new connection.)
use constant RESERVED_DESCRIPTORS_MIN => 64;
use constant RESERVED_DESCRIPTORS_SHARE => 0.1;

sub default_max_keepalive_connections {
    my $limit = _open_file_limit();
    my $reserve = int($limit * RESERVED_DESCRIPTORS_SHARE);
    $reserve = RESERVED_DESCRIPTORS_MIN if $reserve < RESERVED_DESCRIPTORS_MIN;
    return $limit > 2 * $reserve ? $limit - $reserve : int($limit / 2);
}

sub options { $_[0]{options} }

sub _open_file_limit {
    my $limit = Serow::open_file_limit();
    return $limit > 0 ? $limit : 1024;
}

# Sockets given to new (listen_sockets), else the ones Server::Starter or
# systemd hand over, else the ones --listen names.
sub open_listeners {
    my ($self) = @_;
    my @listeners = $self->_open_listeners;
    if ($self->{options}{enable_ssl}) {
        $_->{is_unix} and die "--enable-ssl: TLS on a UNIX socket is not served ($_->{name})\n"
            for @listeners;
        $_->{tls} = 1 for @listeners;
    }
    return @listeners;
}

sub _open_listeners {
    my ($self) = @_;
    my $options = $self->{options};
    if ($self->{listen_sockets}) {
        return map { Serow::Listener->from_socket($_) } @{ $self->{listen_sockets} };
    }
    if (defined $ENV{SERVER_STARTER_PORT}) {
        return Serow::Listener->from_server_starter($ENV{SERVER_STARTER_PORT});
    }
    if ($ENV{LISTEN_FDS} && ($ENV{LISTEN_PID} // $$) == $$) {
        return Serow::Listener->from_systemd($ENV{LISTEN_FDS});
    }
    my @addresses = @{ $options->{listen} };
    @addresses = (Serow::Options->listen_address) unless @addresses;
    my $privileges = $self->{privileges};
    return map {
        my $l = Serow::Listener->open_address($_, backlog => $options->{backlog},
            socket_mode => $options->{socket_mode});
        $l->{owned} = 1;
        # A UNIX socket we made belongs to the --user, like the files the
        # workers make, so that --socket-mode 0660 lets its group in.
        if ($privileges && defined $l->{path}) {
            chown $privileges->uid, $privileges->gid, $l->{path}
                or die "--user: cannot give $l->{path} to " . $privileges->name . ": $!\n";
        }
        $l;
    } @addresses;
}

# --publish-listen: a listen socket of its own, whose requests the workers
# answer with the publish endpoint (Serow::Worker, route_publish), never the
# app; none without the option.
sub open_publish_listener {
    my ($self) = @_;
    my $options = $self->{options};
    my $address = $options->{publish_listen} // return;
    # (Serow::Listener names --listen in its errors.)
    my $l = eval { Serow::Listener->open_address($address, backlog => $options->{backlog}) }
        or die $@ =~ s/\A--listen:/--publish-listen:/r;
    @$l{qw(owned publish)} = (1, 1); # ours to shut on a stop, as --listen's
    return $l;
}

# --publish-listen's address checked before any address is bound: a TCP
# address (the endpoint's --publish-allow reads the peer's IP).
sub check_publish_listen {
    my ($self, $options) = @_;
    my $address = $options->{publish_listen} // return;
    my $parsed = eval { Serow::Listener->parse_address($address) } or die $@ =~ s/\A--listen:/--publish-listen:/r;
    die "--publish-listen: '$address' is a socket path, not HOST:PORT\n" if defined $parsed->{path};
}

# What $app is when it is no PSGI app ("'42'", "undef", "a HASH reference"),
# or undef when it is one: a code reference, or an object that can be called
# as one (Plack::Component overloads &{}).  Anything else would be accepted
# and then answer every request with a 500.
sub not_an_app {
    my ($app) = @_;
    return undef if ref $app eq 'CODE' || (Scalar::Util::blessed($app) && overload::Method($app, '&{}'));
    return 'undef' unless defined $app;
    return "'$app'" unless ref $app;
    return Scalar::Util::blessed($app) ? 'a ' . ref($app) . ' object' : 'a ' . ref($app) . ' reference';
}

# Loads and checks the app file: the app, or a die "cannot load FILE: ..."
# with perl's error (its file and line) or what the file returned instead.
# A generation process calls it (Serow::Generation); with --lazy-app, each
# worker (Serow::Master::Workers, run_worker).
sub load_app_file {
    my ($file) = @_;
    require Plack::Util;
    my $app = eval { Plack::Util::load_psgi($file) };
    die "cannot load $file: $@" . Serow::Privileges->load_denied_hint($@, $file) if $@;
    # A file that ends with anything but the app (42, a hash, nothing at all)
    # is refused here, not answered with a 500 for every request.
    if (defined(my $what = not_an_app($app))) {
        die "cannot load $file: it returned $what, not a PSGI app (a code reference)"
            . (defined $app ? '' : ': is the file empty, or does it not end with the app?') . "\n";
    }
    return $app;
}

# Serves the app file $file (serow): loaded afresh by a generation process
# at the start and on every HUP (Serow::Generation), never by the master;
# with --lazy-app, by each worker.
sub run_file {
    my ($self, $file) = @_;
    return $self->run($file) if $self->{options}{lazy_app};
    require Plack::Util; # once, here: the generations share it
    return $self->start_master(preload_app => sub { load_app_file($file) }, app_file => $file);
}

# $app is the loaded app (a HUP replaces the workers, with the same app);
# with --lazy-app, the file each worker loads.
sub run {
    my ($self, $app) = @_;
    my $options = $self->{options};
    my @app;
    if ($options->{lazy_app}) {
        die "--lazy-app: give run the app's file name, which each worker loads, not a loaded app\n"
            if !defined $app || ref $app;
        require Plack::Util; # once, here: the workers share it
        @app = (load_app => sub { load_app_file($app) }, app_file => $app);
    } elsif (defined(my $what = not_an_app($app))) {
        # (serow checks the app it loads itself, naming the file: this is for
        # plackup -s Serow and Serow::Server->run called from Perl.)
        die "the app is $what, not a PSGI app (a code reference)\n";
    } else {
        @app = (app => $app);
    }
    return $self->start_master(@app);
}

# Opens the logs, the listen sockets and the pid file, and runs the master
# with @app (how it gets the app: Serow::Master->new); its exit status.
sub start_master {
    my ($self, @app) = @_;
    my $options = $self->{options};
    # Until the master sets its own handlers, signals wait for it (a stop
    # then stops it before it starts any process) instead of killing this
    # process with the pid file and sockets left behind.
    my %early = Serow::Master->early_signal_handlers;
    local @SIG{keys %early} = values %early;
    my $error_log_file = Serow::Log->file($options->{error_log});
    $self->open_error_log($error_log_file) if defined $error_log_file;
    Serow::Log->configure($options);
    Serow::Log->warn("ignoring option '$_', unknown to Serow" . Serow::Options->hint($_)
                     . ": a launcher (plackup, Plack::Runner, rt-server) passed it")
        for @{ $self->{ignored_options} };
    # Refused before binding: the address of a running Serow would be busy,
    # and "address in use" says less than this.
    Serow::PidFile->check($options->{pid_file}) if defined $options->{pid_file};
    Serow::Metrics->check_options($options);
    Serow::Holding->check_options($options);
    $self->check_log_options($options);
    $self->check_publish_listen($options);
    Serow::AddressList->new('--publish-allow', @{ $options->{publish_allow} || [] }); # refused here, not by each worker
    Serow::Publish::Redis->parse($options->{publish_redis}) if defined $options->{publish_redis}; # (as well)
    # What is published must have connections held to reach: --publish-listen
    # and --publish-redis turn holding on.
    $options->{grip} = 1 if defined $options->{publish_listen} || defined $options->{publish_redis};
    my $tls = @{ $options->{ssl_cert} };
    $self->configure_tls($options) if $tls;
    my @listeners = $self->open_listeners;
    # Last, so that the app's listeners keep their indexes and the first is
    # still the one announced to plackup.
    my @all = (@listeners, $self->open_publish_listener);
    my $pid_file = defined $options->{pid_file} ? Serow::PidFile->write($options->{pid_file}) : undef;
    my $master = Serow::Master->new(@app, options => $options, listeners => \@all,
        privileges => $self->{privileges}, notify => $self->{notify},
        ($tls ? (on_hup => sub { $self->reload_tls }) : ()),
        on_ready => sub { $self->announce(@listeners) });
    my $status = $master->run;
    $_->close_and_unlink for @all;
    $pid_file->remove if $pid_file;
    return $status;
}

# --access-log-format is compiled here once, so that a bad directive stops
# the start (named) rather than every worker; --request-id-header must be a
# header name a request can carry and the env can name.
sub check_log_options {
    my ($self, $options) = @_;
    my $error = Serow::Loop->access_log_format_error($options->{access_log_format});
    die "--access-log-format: $error\n" if defined $error;
    my $name = $options->{request_id_header} // return;
    $name =~ /\A[A-Za-z0-9!#\$%&'*+.^`|~-]{1,63}\z/
        or die "--request-id-header: '$name' is not a header name (1 to 63 letters, digits and "
            . "!#\$%&'*+.^`|~-; no underscore, which the env could not tell from a dash)\n";
    return;
}

# --error-log FILE: the log (and whatever the app prints on STDERR) goes there.
sub open_error_log {
    my ($self, $path) = @_;
    Serow::Log->open_file($path) or die "--error-log: cannot open $path: $!\n";
}

# --ssl-cert, --ssl-key (pairs, the first the default), --ssl-priorities,
# --ssl-session-tickets, --ssl-verify-client, --ssl-client-ca, --ssl-crl:
# read here, in the master before any process is forked (so before
# privileges drop: a key only root may read works), and kept for every
# process; a file that cannot be used stops the start with the option and
# the problem.  (Options.pm made sure that an address serves TLS and that
# each certificate has its key.)
sub configure_tls {
    my ($self, $options) = @_;
    for my $name (qw(ssl_cert ssl_key ssl_client_ca ssl_crl)) {
        for my $file (ref $options->{$name} ? @{ $options->{$name} } : $options->{$name} // ()) {
            open(my $fh, '<', $file) or die '--' . ($name =~ tr/_/-/r) . ": cannot read $file: $!\n";
        }
    }
    # --ssl-verify-client: the files whose CA and CRL tls_configure reads
    # into every set of credentials, and (once) a table of the clients'
    # certificates that every process shares, sized by the connections
    # open at once.
    Serow::tls_configure_clients($options->{ssl_verify_client}, $options->{ssl_client_ca},
        $options->{ssl_crl}, $options->{max_keepalive_connections})
        if $options->{ssl_verify_client} ne 'off';
    Serow::tls_configure($options->{ssl_cert}, $options->{ssl_key}, $options->{ssl_priorities},
        $options->{ssl_session_tickets} eq 'on' ? 1 : 0);
}

# HUP: the files are read again by the master (which keeps its privileges
# under --user: Serow::Privileges), before it forks the new workers, which
# serve what it read; connections already open keep their sessions.  A
# file that cannot be used now is logged, and the certificates read before
# serve on, as nginx -s reload keeps its old configuration.  The session
# tickets' key stays (docs/tls.md).
sub reload_tls {
    my ($self) = @_;
    my $options = $self->{options};
    if (eval { $self->configure_tls($options); 1 }) {
        return Serow::Log->info("TLS: read " . join(', ', @{ $options->{ssl_cert} }) . " again for the new workers");
    }
    chomp(my $error = $@);
    Serow::Log->error("TLS: $error; the new workers serve the certificates read before");
}

# Where a listener is, as a URL (or the path of a UNIX socket).
sub listener_url {
    my ($listener) = @_;
    return $listener->{name} if $listener->{is_unix};
    my $host = $listener->{server_name};
    return ($listener->{tls} ? 'https' : 'http') . '://' . ($host =~ /:/ ? "[$host]" : $host)
        . ":$listener->{server_port}";
}

# Says the server is up: only once the master's signal handlers are in
# place, so that whoever waits for this line may signal it at once.
sub announce {
    my ($self, @listeners) = @_;
    my $options = $self->{options};
    my @about = $options->{max_keepalive_requests} == 1
        ? 'keep-alive off (--max-keepalive-requests 1)'
        : "keep-alive on (idle connections held by the connection holder, closed after $options->{keepalive_timeout}s)";
    push @about, 'each worker loads the app (--lazy-app)' if $options->{lazy_app};
    push @about, 'workers run as ' . $self->{privileges}->name if $self->{privileges};
    push @about, "pid file $options->{pid_file}" if defined $options->{pid_file};
    push @about, "publishing on $options->{publish_listen} (--publish-listen)" if defined $options->{publish_listen};
    push @about, "publishing through $options->{publish_redis} (--publish-redis)" if defined $options->{publish_redis};
    Serow::Log->info(sprintf "Serow %s listening on %s with %d workers (master pid %d); %s",
        $self->{version}, join(', ', map { listener_url($_) } @listeners), $options->{workers}, $$,
        join('; ', @about));
    if ($self->{server_ready}) {
        my $first = $listeners[0];
        $self->{server_ready}->({ host => $first->{server_name}, port => $first->{server_port},
            server_software => 'Serow', proto => $first->{tls} ? 'https' : 'http' });
    }
}

1;
__END__

=head1 NAME

Serow::Server - a Serow server: options, listen sockets, master

=head1 SYNOPSIS

    use Serow::Server;
    Serow::Server->new(listen => ['127.0.0.1:5000'], workers => 4)->run($app);
    Serow::Server->new(listen => ['127.0.0.1:5000'], workers => 4)->run_file('app.psgi');

=head1 DESCRIPTION

Checks the options (L<Serow::Options>) and the C<--user> and C<--group>
names (L<Serow::Privileges>), opens C<--error-log>, refuses a C<--pid-file>
of a running Serow, opens the listen sockets (L<Serow::Listener>), writes
the pid file (L<Serow::PidFile>) and hands the sockets with the app to the
master (L<Serow::Master>), which forks the workers (L<Serow::Worker>) and
logs the start-up line: version (and commit, from a git checkout:
L<Serow::Version>), listen URLs and UNIX paths, workers,
master pid, keep-alive, user and pid file. The pid file is removed when the
master stops cleanly.

C<run($app)> takes a loaded app (a code reference): a HUP then replaces the
workers with the same code. C<run_file($file)> (what C<serow> calls) has a
generation process load the file (L<Serow::Generation>), at the start and
afresh on each HUP; with C<lazy_app>, each worker loads it.

=cut
