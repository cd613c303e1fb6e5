package Serow::Metrics;
use strict;
use warnings;

use Serow::AddressList ();
use Serow::Options ();
use Serow::ProcessStats ();

# Prometheus metrics of a Serow server (--metrics-path), in the text
# exposition format 0.0.4, from the counters the workers keep in shared
# memory (src/shared/request_metrics.h).

use constant CONTENT_TYPE => 'text/plain; version=0.0.4; charset=utf-8';

# Checks the options (dies with a message naming the one at fault).
sub check_options {
    my ($class, $options) = @_;
    my $path = $options->{metrics_path} // return;
    die "--metrics-path: '$path' is not a path (it starts with /)\n" unless $path =~ m{\A/};
    $class->allow_list($options);
    $class->trusted_proxies($options);
    return;
}

sub allow_list {
    my ($class, $options) = @_;
    # (an empty list given in a hash: the default, this machine)
    my @allow = @{ $options->{metrics_allow} || [] };
    @allow = @{ Serow::Options->defaults->{metrics_allow} } unless @allow;
    return Serow::AddressList->new('--metrics-allow', @allow);
}

# --metrics-trusted-proxy: the proxies whose forwarded client address is
# judged by --metrics-allow (Serow::AddressList::allows_request); undef
# when there are none, and a forwarded request is refused.
sub trusted_proxies {
    my ($class, $options) = @_;
    my @proxies = @{ $options->{metrics_trusted_proxy} || [] } or return undef;
    return Serow::AddressList->new('--metrics-trusted-proxy', @proxies);
}

# The app, with the metrics answered before it at --metrics-path: the
# server's own page, which no app has to mount and no app can shadow.
sub wrap {
    my ($class, $app, %args) = @_;
    my ($shared, $path, $master_pid) = @args{qw(shared path master_pid)};
    my ($allow, $trusted_proxies) = @args{qw(allow trusted_proxies)};
    return sub {
        my ($env) = @_;
        return $app->($env) unless $env->{PATH_INFO} eq $path;
        return [403, ['Content-Type' => 'text/plain'], ["Forbidden\n"]]
            unless $allow->allows_request($env, $trusted_proxies);
        return [200, ['Content-Type' => CONTENT_TYPE, 'Cache-Control' => 'no-store'],
                [$class->render($shared->metrics, $master_pid)]];
    };
}

# One metric: its HELP and TYPE lines, then its samples ([suffix, labels, value]).
sub _metric {
    my ($name, $type, $help, @samples) = @_;
    my $text = "# HELP $name $help\n# TYPE $name $type\n";
    for my $s (@samples) {
        my ($suffix, $labels, $value) = @$s;
        my $l = @$labels ? '{' . join(',', map { qq{$labels->[$_ * 2]="} . _label_value($labels->[$_ * 2 + 1]) . '"' }
            0 .. $#$labels / 2) . '}' : '';
        $text .= "$name$suffix$l " . _number($value) . "\n";
    }
    return $text;
}

# A label's value as the text format writes it: backslash, double quote and
# line feed escaped (a channel's name may not have them, docs/holding.md,
# but the format must never be broken by a value).
sub _label_value {
    my ($v) = @_;
    $v =~ s/([\\"])/\\$1/g;
    $v =~ s/\n/\\n/g;
    return $v;
}

# Counters held as doubles print as whole numbers, however large; other
# numbers with the 15 significant digits a double holds.
sub _number {
    my ($v) = @_;
    return $v if $v =~ /\A[+-]?Inf\z/;
    return sprintf('%.0f', $v) if $v == int $v;
    return sprintf '%.15g', $v; # a start time keeps its hundredths
}

# The metrics with one sample each: [name, type, help, key in the snapshot].
my @SINGLE = (
    [serow_workers_busy => gauge => 'Workers answering a request now.', 'busy_workers'],
    [serow_workers_idle => gauge => 'Workers waiting for a request.', 'idle_workers'],
    [serow_connections_idle => gauge =>
        'Idle keep-alive connections, in the connection holder or in workers.', 'idle_connections'],
    [serow_connections_queued => gauge =>
        'Connections with a request that the holder passed on and no worker has taken yet.',
        'queued_connections'],
    [serow_connections_open => gauge => 'Client connections open now.', 'open_connections'],
    [serow_connections_accepted_total => counter => 'Connections accepted.', 'connections_accepted'],
    [serow_connections_stolen_total => counter =>
        'Idle connections the holder took from workers (idle long, or their worker stuck in a request).',
        'connections_stolen'],
    [serow_connections_gathered_total => counter =>
        'Idle connections a worker that had a CPU took from workers waiting for one (docs/keepalive.md).',
        'connections_gathered'],
    [serow_worker_restarts_total => counter =>
        'Workers replaced while the server ran (--max-requests, psgix.harakiri, HUP, crashes).',
        'worker_restarts'],
    [serow_request_timeouts_total => counter =>
        'Requests whose app ran longer than --request-timeout (answered 503, or their worker killed).',
        'request_timeouts'],
    [serow_requests_shed_total => counter =>
        'Requests answered 503 after waiting longer than --max-queue-wait for a free worker (in the connection holder or the listen backlog).',
        'requests_shed'],
    [serow_held_connections => gauge =>
        'Connections held for a stream or a long poll (GRIP, --grip), with no worker.',
        'grip_held'],
    [serow_held_subscriptions => gauge =>
        'Subscriptions of held connections to channels.',
        'grip_subscriptions'],
    [serow_publishes_total => counter =>
        'Items published to the channels of held connections.',
        'grip_publishes'],
    [serow_deliveries_total => counter =>
        'Published items delivered to held connections (replays included).',
        'grip_deliveries'],
    [serow_held_drops_total => counter =>
        'Held connections closed because their client did not read (--hold-max-pending).',
        'grip_drops'],
    [serow_replay_gaps_total => counter =>
        'Subscriptions whose prev-id was not among the kept items (every kept item replayed).',
        'grip_replay_gaps'],
    [serow_holds_refused_total => counter =>
        'Holds refused by the holder (--max-held-connections, subscriptions per connection).',
        'grip_refused'],
    [serow_websocket_connections => gauge =>
        'WebSocket connections held by the connection holder (--grip), with no worker.',
        'websockets'],
    [serow_websocket_protocol_errors_total => counter =>
        'WebSocket clients closed for breaking RFC 6455 (1002, 1007, 1009).',
        'websocket_protocol_errors'],
    [serow_uptime_seconds => gauge => 'Seconds since the server started.', 'uptime'],
);

# --publish-redis: the holder's link to Redis (src/holder/redis_link.h),
# shown only with the option.  [name, type, help, key in the snapshot].
my @REDIS = (
    [serow_redis_up => gauge =>
        'Whether the link to Redis (--publish-redis) is up: subscribed, and publishing through it.',
        'redis_up'],
    [serow_redis_received_total => counter =>
        'Publish messages received from Redis (every host\'s, this one\'s included).', 'redis_received'],
    [serow_redis_rejected_total => counter =>
        'Messages from Redis refused: not a publish message for the channel they came on.', 'redis_rejected'],
    [serow_redis_published_total => counter => 'Publishes sent to Redis.', 'redis_published'],
    [serow_redis_lost_total => counter =>
        'Publishes not shared through Redis (the link down or too far behind, or refused by Redis): '
        . 'delivered on this host only.', 'redis_lost'],
    [serow_redis_gaps_total => counter =>
        'Subscriptions to Redis lost: what other hosts published meanwhile never reached this one.',
        'redis_gaps'],
    [serow_redis_reconnects_total => counter => 'Links to Redis made again after a loss.',
        'redis_reconnects'],
);

# The busiest channels of held connections (--grip), each labelled with its
# name: [name, type, help, key in each of the snapshot's channels].
my @CHANNEL = (
    [serow_channel_subscribers => gauge =>
        'Held connections subscribed to the channel, for the busiest channels (the most subscribers).',
        'subscribers'],
    [serow_channel_publishes_total => counter =>
        'Items published to the channel since the holder made it (of the busiest channels).', 'publishes'],
    [serow_channel_deliveries_total => counter =>
        'Items of the channel delivered to held connections, replays included (of the busiest channels).',
        'deliveries'],
    [serow_channel_drops_total => counter =>
        'Held connections on the channel closed because their client did not read (of the busiest channels).',
        'drops'],
);

sub _channel_metrics {
    my ($channels) = @_;
    return '' unless $channels && @$channels;
    return join '', map { my ($name, $type, $help, $key) = @$_;
        _metric($name, $type, $help, map { ['', [channel => $_->{channel}], $_->{$key}] } @$channels) } @CHANNEL;
}

# The processes of the server, [role, pid, labels], the master first.
sub _processes {
    my ($m, $master_pid) = @_;
    my @processes;
    push @processes, [master => $master_pid, []] if $master_pid;
    push @processes, [holder => $m->{holder_pid}, []] if $m->{holder_pid};
    push @processes, map { [generation => $_, []] } @{ $m->{generation_pids} || [] };
    push @processes, map { [worker => $_->[1], [slot => $_->[0]]] }
        sort { $a->[0] <=> $b->[0] } @{ $m->{workers} || [] };
    return @processes;
}

# The per-process metrics: [name, type, help, key in Serow::ProcessStats,
# what the server-wide process_* series is of the processes].
my @PROCESS = (
    [resident_memory_bytes => gauge => 'Resident memory size in bytes', 'resident_bytes', 'summed'],
    [virtual_memory_bytes => gauge => 'Virtual memory size in bytes', 'virtual_bytes', 'summed'],
    [cpu_seconds_total => counter => 'User and system CPU time spent in seconds', 'cpu_seconds',
        'summed, with the processes that exited'],
    [open_fds => gauge => 'Number of open file descriptors', 'open_fds', 'summed'],
    [max_fds => gauge => 'Maximum number of open file descriptors (the soft limit)', 'max_fds',
        "the master's, which every process inherits"],
    [start_time_seconds => gauge => 'Start time of the process since unix epoch in seconds', 'start_time',
        "the master's"],
);

# The numbers of the whole server, from the stats of its processes
# ([role, pid, labels, stats]), keyed as Serow::ProcessStats's.
sub _whole_server {
    my (@read) = @_;
    my $sum = sub { my ($key) = @_; my $t = 0; $t += $_->[3]{$key} // 0 for @read; $t };
    my ($master) = map { $_->[3] } grep { $_->[0] eq 'master' } @read;
    return (
        resident_bytes => $sum->('resident_bytes'),
        virtual_bytes  => $sum->('virtual_bytes'),
        # The CPU of every process the server ever had: those running, and
        # those that exited and were waited for (their parents' cutime and
        # cstime: the master's for workers and holders gone), so the
        # counter does not go down when a worker is replaced.
        cpu_seconds    => $sum->('cpu_seconds') + $sum->('children_cpu_seconds'),
        open_fds       => $sum->('open_fds'),
        # The limit every process inherits from the master, and its start.
        max_fds        => $master && $master->{max_fds},
        start_time     => $master && $master->{start_time},
    );
}

# The standard process_* series for the server as a whole (what a
# dashboard made for any exporter reads), then serow_process_* for each of
# its processes, labelled (docs/logs-and-metrics.md says why two names).
sub _process_metrics {
    my (@processes) = @_;
    my @read = grep { $_->[3] } map { [@$_, Serow::ProcessStats->of_pid($_->[1])] } @processes;
    return '' unless @read;
    my %whole = _whole_server(@read);
    my $text = '';
    for my $p (@PROCESS) {
        my ($name, $type, $help, $key, $whole) = @$p;
        $text .= _metric("process_$name", $type, "$help, of the whole server ($whole)", ['', [], $whole{$key}])
            if defined $whole{$key};
    }
    for my $p (@PROCESS) {
        my ($name, $type, $help, $key) = @$p;
        my @samples = map { ['', [role => $_->[0], pid => $_->[1], @{ $_->[2] }], $_->[3]{$key}] }
            grep { defined $_->[3]{$key} } @read;
        $text .= _metric("serow_process_$name", $type, "$help, of each process of the server", @samples)
            if @samples;
    }
    return $text;
}

# The exposition text for a snapshot of Serow::Shared->metrics, with the
# process metrics of the server whose master is $master_pid.
sub render {
    my ($class, $m, $master_pid) = @_;
    my $by_status = $m->{requests_by_status};
    my @codes = sort { $a <=> $b } keys %$by_status;
    my %values = (%$m, uptime => int(time - $m->{started}));
    return join '',
        _metric('serow_requests_total', 'counter',
            'Requests answered, by status code (0: the app answered on psgix.io).',
            map { ['', [code => $_], $by_status->{$_}] } @codes),
        _metric('serow_request_duration_seconds', 'histogram',
            'Time from a complete request head to the end of its response; '
            . 'requests rejected while their head arrived count as 0.',
            (map { ['_bucket', [le => $_->[0] eq '+Inf' ? '+Inf' : _number($_->[0])], $_->[1]] }
                @{ $m->{duration_buckets} }),
            ['_sum', [], $m->{duration_sum}],
            ['_count', [], $m->{duration_count}]),
        _metric('serow_request_phase_seconds', 'histogram',
            'Where the time of served requests went, by phase: queue (from the arrival of the '
            . 'request head to the app being called), app (until the app gave the response head), '
            . 'write (until the last byte of the response was written).',
            map { my $phase = $_; my $p = $m->{phases}{$phase};
                  ((map { ['_bucket', [phase => $phase, le => $_->[0] eq '+Inf' ? '+Inf' : _number($_->[0])], $_->[1]] }
                      @{ $p->{buckets} }),
                   ['_sum', [phase => $phase], $p->{sum}],
                   ['_count', [phase => $phase], $p->{count}]) } qw(queue app write)),
        _metric('serow_worker_recycled_total', 'counter',
            'Workers the master replaced for going over a limit, by reason (rss: --max-worker-rss).',
            map { ['', [reason => $_], $m->{workers_recycled}{$_}] } sort keys %{ $m->{workers_recycled} }),
        (map { my ($name, $type, $help, $key) = @$_; _metric($name, $type, $help, ['', [], $values{$key}]) }
            @SINGLE, (exists $m->{redis_up} ? @REDIS : ())),
        _channel_metrics($m->{channels}),
        _process_metrics(_processes($m, $master_pid));
}

1;
__END__

=head1 NAME

Serow::Metrics - Prometheus metrics of a Serow server (C<--metrics-path>)

=head1 SYNOPSIS

    serow --metrics-path /metrics --metrics-allow 10.0.0.0/8 app.psgi
    curl http://127.0.0.1:5000/metrics

=head1 DESCRIPTION

With C<--metrics-path>, each worker answers requests for that path itself,
before the app, in the Prometheus text exposition format 0.0.4. Only the
addresses in C<--metrics-allow> (default: C<127.0.0.1> and C<::1>) may read
it; others get 403, and so do requests that came through a proxy
(C<X-Forwarded-For>, C<Forwarded>, C<X-Real-IP>) unless it is one of
C<--metrics-trusted-proxy> (L<Serow::AddressList/allows_request>).

It is a server option rather than a middleware such as
L<Plack::Middleware::SerowStatus> because the numbers are the server's, not
the app's: an operator turns it on without editing the app, an app's
routes cannot shadow it, and it answers the same whatever framework the app
uses. It still passes through the worker's ordinary request handling, so a
scrape is a request like any other: counted, and in the access log.

=head2 Metrics

=over

=item serow_requests_total{code="200"}

Requests answered, by status, including the ones the server rejected
itself (400, 408, 413, 414, 431...). C<code="0"> counts requests whose
app took the connection with C<psgix.io> and answered on it; C<code="499">
(nginx's "client closed request", as in the access log) the responses a
client did not take whole: it closed the connection, or read nothing for
C<--write-timeout>.

=item serow_request_duration_seconds

A histogram (buckets 5 ms to 10 s, the Prometheus defaults) of the time
from a complete request head to the end of its response. Requests rejected
while their head was arriving count with a duration of 0, so that
C<_count> equals the sum of C<serow_requests_total>.

=item serow_request_phase_seconds{phase="queue|app|write"}

Where the time of each request that reached a worker went (buckets 0.5 ms
to 10 s): C<queue>, from the arrival of its head (the kernel's receive
stamp given with the first read of it: on TCP, the arrival of the last
segment that read took) to the app being called: the time it waited in the
listen backlog, in the connection holder, or on a connection of a busy
worker; C<app>, from then until the app gave the final response's head (a
1xx before it is the app's time); C<write>,
from then until the last byte of the response was written. A growing
C<queue> asks for more workers; a growing C<app>, for a faster app; a
growing C<write>, for a look at slow clients or large responses. The
C<app> and C<write> phases are not counted for a response the app wrote
itself on C<psgix.io>.

=item serow_workers_busy, serow_workers_idle

=item serow_connections_idle, serow_connections_queued, serow_connections_open

Idle keep-alive connections (in the connection holder or in workers),
connections with a request waiting for a free worker, and all open ones.

=item serow_connections_stolen_total, serow_connections_gathered_total

Idle connections moved between processes: taken by the connection holder
(idle for long, or their worker stuck in a request), and taken by a worker
that had a CPU from workers waiting for one (F<docs/keepalive.md>,
"Gathering").

=item serow_request_timeouts_total

Requests whose app ran longer than C<--request-timeout>: answered 503, or,
when the app did not return within C<--request-timeout-grace>, their
worker killed by the master.

=item serow_requests_shed_total

Requests that waited longer than C<--max-queue-wait> for a free worker,
in the connection holder or in the listen backlog: answered 503 with
C<Retry-After> and their connections closed (F<docs/operations.md>).

=item serow_held_connections, serow_held_subscriptions, serow_publishes_total, serow_deliveries_total, serow_held_drops_total, serow_replay_gaps_total, serow_holds_refused_total

With C<--grip> (F<docs/holding.md>): the connections the holder holds for
streams and long polls and their subscriptions to channels; the items
published and delivered (replays included); the held connections closed
because their client did not read (C<--hold-max-pending>); the
subscriptions whose C<prev-id> was not among the kept items; the holds
refused (C<--max-held-connections>, a bad hold).

=item serow_websocket_connections, serow_websocket_protocol_errors_total

With C<--grip> (F<docs/websocket.md>): the WebSocket connections the holder
holds, and the clients it closed for breaking RFC 6455 (with 1002, 1007 or
1009; a compressed message counts when it inflates past the limit, is not
DEFLATE data, or is text that is not UTF-8 once inflated).

=item serow_redis_up, serow_redis_received_total, serow_redis_rejected_total, serow_redis_published_total, serow_redis_lost_total, serow_redis_gaps_total, serow_redis_reconnects_total

With C<--publish-redis> only (F<docs/holding.md>): whether the holder's link
to Redis is up (1) or not (0); the publish messages received from Redis
(every host's, this one's own included) and those refused (not a publish
message for their channel); the publishes sent to Redis; those delivered on
this host only (C<lost>: the link down or too far behind, or Redis refused
them); the subscriptions lost (C<gaps>: what other hosts published then never
came); and the reconnects.

=item serow_channel_subscribers{channel="news"}, serow_channel_publishes_total, serow_channel_deliveries_total, serow_channel_drops_total

With C<--grip>, for the busiest channels only (the 10 with the most
subscribers, the most published to first among equals), as the connection
holder last wrote them: when they change, at most once a second. A channel
appears while it is among them; its counters count from when the holder
made it (a channel forgotten, with no subscriber and no kept item, starts
again from 0, which Prometheus reads as a counter reset).

=item serow_connections_accepted_total, serow_worker_restarts_total, serow_uptime_seconds

=item serow_worker_recycled_total{reason="rss"}

Workers the master asked to leave for going over a limit: C<rss>, resident
memory over C<--max-worker-rss>. Each is also counted, once it has left, in
C<serow_worker_restarts_total>.

=item process_resident_memory_bytes, process_virtual_memory_bytes, process_cpu_seconds_total, process_open_fds, process_max_fds, process_start_time_seconds

The series Prometheus client libraries export of their process, for the
whole server: memory and descriptors summed over the master, the holder and
the workers; the CPU of every process it has had (those that exited count
through the master's C<cutime> and C<cstime>, so the counter does not go
down when a worker is replaced); the master's open-file limit and start
time.

=item serow_process_resident_memory_bytes{role="worker",pid="4245",slot="0"} ...

The same six for each process, labelled with its C<role> (C<master>,
C<holder>, C<worker>), its C<pid> and, for a worker, its C<slot> (which its
replacement takes). Read by the worker that answers the scrape from
F</proc/PID/stat>, F</proc/PID/fd> and F</proc/PID/limits>
(L<Serow::ProcessStats>), when scraped only. With C<--user>, the root
master's descriptors cannot be counted and its C<open_fds> sample is left
out.

=back

Counters are kept per worker slot in shared memory and summed when
scraped. A slot's counters are never reset: the worker that replaces one
that exited counts on from there, so counters never go backwards while the
server runs (they start from 0 when the server does).

=cut
