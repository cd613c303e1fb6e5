package Plack::Middleware::SerowStatus;
use strict;
use warnings;
use parent 'Plack::Middleware';

use Plack::Util::Accessor qw(path allow trusted_proxy);
use JSON::PP ();
use Time::HiRes ();
use Plack::Middleware::SerowStatus::HTML ();
use Serow::AddressList ();

# Who may see the status page when the app says nothing: this machine only.
use constant DEFAULT_ALLOW => ['127.0.0.1/32', '::1/128'];

sub prepare_app {
    my ($self) = @_;
    $self->path('/server-status') unless defined $self->path;
    my $allow = $self->allow // DEFAULT_ALLOW;
    $self->{allow_list} = Serow::AddressList->new('SerowStatus: allow', ref $allow ? @$allow : $allow);
    # None by default: a request through a proxy (X-Forwarded-For...) is refused.
    if (defined(my $proxies = $self->trusted_proxy)) {
        $self->{trusted_proxies} = Serow::AddressList->new('SerowStatus: trusted_proxy',
            ref $proxies ? @$proxies : $proxies);
    }
}

sub call {
    my ($self, $env) = @_;
    return $self->app->($env) unless $env->{PATH_INFO} eq $self->path;
    return [403, ['Content-Type' => 'text/plain'], ["Forbidden\n"]]
        unless $self->{allow_list}->allows_request($env, $self->{trusted_proxies});
    my $status_of = $env->{'serow.status'}
        or return [500, ['Content-Type' => 'text/plain'], ["SerowStatus: the server is not Serow\n"]];
    my $status = $status_of->();
    my $now = Time::HiRes::time(); # busy_since is now - busy_for_ms: to the millisecond
    $status->{uptime} = int($now - $status->{started});
    for my $w (@{ $status->{workers} }) {
        $w->{busy_since} = $now - $w->{busy_for_ms} / 1000 if $w->{busy};
    }
    my @headers = ('Cache-Control' => 'no-store', 'Vary' => 'Accept', 'X-Content-Type-Options' => 'nosniff');
    my $view = _view($env);
    if ($view eq 'json') {
        return [200, ['Content-Type' => 'application/json', @headers],
                [JSON::PP->new->canonical->encode($status)]];
    }
    if ($view eq 'html') {
        my $host = $env->{HTTP_HOST} // $env->{SERVER_NAME};
        return [200, ['Content-Type' => 'text/html; charset=utf-8', @headers, 'Content-Security-Policy' =>
                      Plack::Middleware::SerowStatus::HTML::content_security_policy()],
                [Plack::Middleware::SerowStatus::HTML::render(status => $status,
                    text => _as_text($status), title => "Serow status: $host")]];
    }
    return [200, ['Content-Type' => 'text/plain; charset=utf-8', @headers], [_as_text($status)]];
}

# Which view a request asks for: ?json or ?html first (a link or a script
# can choose), then its Accept header (a browser sends text/html, a monitor
# application/json), else plain text (curl sends */*).
sub _view {
    my ($env) = @_;
    my $query = $env->{QUERY_STRING} // '';
    for my $view (qw(json html)) {
        return $view if $query =~ /(?:^|&)$view(?:[=&]|$)/;
    }
    my $accept = $env->{HTTP_ACCEPT} // '';
    return 'json' if $accept =~ m{application/json};
    return 'html' if $accept =~ m{text/html};
    return 'text';
}

sub _as_text {
    my ($s) = @_;
    my $text = join '', map { "$_->[0]: $_->[1]\n" } (
        ['Uptime', "$s->{uptime} seconds"],
        ['Total Requests', $s->{requests_total}],
        ['Processing', $s->{processing}],
        ['Waiting', $s->{waiting}],
        ['Queued', $s->{queued}],
        ['Open Connections', $s->{open_connections}],
        ['Held by the connection holder', $s->{held_by_holder}],
        ['Held for streams and long polls (GRIP)', $s->{grip_held}],
        ['Channel subscriptions', $s->{grip_subscriptions}],
        ['Publishes, deliveries, drops', join(' ', map { $s->{$_} // 0 } qw(grip_publishes grip_deliveries grip_drops))],
        (exists $s->{redis_up} ? ['Redis (--publish-redis)', ($s->{redis_up} ? 'up' : 'down') . '; '
            . join(', ', map { "$_ " . ($s->{"redis_$_"} // 0) } qw(received rejected published lost gaps reconnects))] : ()),
        ['Taken from busy or idle workers', $s->{connections_stolen}],
        ['Gathered by workers with a CPU', $s->{connections_gathered}],
    );
    if (@{ $s->{channels} || [] }) {
        $text .= sprintf "\n%-32s %11s %11s %11s %8s\n", 'Busiest channels', 'Subscribers', 'Publishes',
            'Deliveries', 'Drops';
        $text .= sprintf "%-32s %11d %11d %11d %8d\n", @$_{qw(channel subscribers publishes deliveries drops)}
            for @{ $s->{channels} };
    }
    $text .= sprintf "\n%-8s %-5s %9s %6s  %-10s %s\n", 'PID', 'State', 'Requests', 'Conns', 'Busy for', 'Request';
    for my $w (sort { $a->{pid} <=> $b->{pid} } @{ $s->{workers} }) {
        $text .= sprintf "%-8d %-5s %9d %6d  %-10s %s\n", $w->{pid}, $w->{busy} ? 'busy' : 'idle',
            $w->{requests}, $w->{connections},
            $w->{busy} ? "$w->{busy_for_ms} ms" : '-', $w->{busy} ? $w->{request} : '';
    }
    return $text;
}

1;
__END__

=head1 NAME

Plack::Middleware::SerowStatus - what a Serow server is doing, for people and monitors

=head1 SYNOPSIS

    use Plack::Builder;
    builder {
        enable 'SerowStatus', path => '/server-status', allow => ['127.0.0.1', '10.0.0.0/8'];
        $app;
    };

    curl http://127.0.0.1:5000/server-status
    curl -H 'Accept: application/json' http://127.0.0.1:5000/server-status
    chromium http://127.0.0.1:5000/server-status     # the dashboard (or ?html)

=head1 DESCRIPTION

Answers requests for C<path> (default C</server-status>) from the addresses in
C<allow> (IPv4 and IPv6 addresses or CIDR networks; default this machine
only; others get 403) with the server's state, read from the memory Serow's
processes share.

A request with an C<X-Forwarded-For>, C<Forwarded> or C<X-Real-IP> header
came through a proxy, whose address (127.0.0.1 for nginx on the same host)
says nothing about the client: it gets 403, unless it comes from one of
C<trusted_proxy> (addresses or networks, none by default); then the client
address that proxy added (the last in each header) must be in C<allow>:

    enable 'SerowStatus', allow => ['10.0.0.0/8'], trusted_proxy => ['127.0.0.1'];

A proxy that sets none of these headers makes every request look local:
block the path at the proxy (F<docs/status.md>).

The state:

=over

=item Processing

requests being answered now (busy workers);

=item Waiting

idle keep-alive connections, in the connection holder or in workers;

=item Queued

connections with a request that the holder has passed on and no worker has
taken yet;

=item per worker

its pid, requests served, connections, and while busy the request and for
how long;

=item busiest channels

with C<--grip>, the channels of held connections with the most subscribers
(at most 10), each with its subscribers, publishes, deliveries and drops
(C<channels> in the JSON), as the connection holder last wrote them (at
most once a second).

=back

Three views of the same snapshot:

=over

=item JSON

when the query string has C<json> (C<?json>) or the request accepts
C<application/json>; each busy worker also has C<busy_since> (epoch
seconds);

=item HTML

when the query string has C<html> (C<?html>) or the request accepts
C<text/html>, as every browser's does: a dashboard that refreshes itself
every second (an inline script fetches C<?json> from the same path; no
external assets, so it works offline and behind a firewall). Without
JavaScript it shows the plain-text view and reloads every 2 seconds.
F<docs/status.md> in Serow's source has a screenshot;

=item plain text

otherwise (C<curl> sends C<Accept: */*>).

=back

Request lines come from clients: the HTML view escapes them, and its script
puts them in the page as text, never as markup. Its Content Security Policy
allows only its own inline style and script (by their hashes) and requests
to its own path, as a second line of defence.

=cut
