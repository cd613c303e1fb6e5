package Plack::Middleware::SerowStatus;
use strict;
use warnings;
use parent 'Plack::Middleware';

use Plack::Util::Accessor qw(path allow);
use JSON::PP ();
use Serow::AddressList ();

# Who may see the status page when the app says nothing: this machine only.
use constant DEFAULT_ALLOW => ['127.0.0.1/32', '::1/128'];

sub prepare_app {
    my ($self) = @_;
    $self->path('/server-status') unless defined $self->path;
    my $allow = $self->allow // DEFAULT_ALLOW;
    $self->{allow_list} = Serow::AddressList->new('SerowStatus: allow', ref $allow ? @$allow : $allow);
}

sub call {
    my ($self, $env) = @_;
    return $self->app->($env) unless $env->{PATH_INFO} eq $self->path;
    return [403, ['Content-Type' => 'text/plain'], ["Forbidden\n"]]
        unless $self->{allow_list}->allows($env->{REMOTE_ADDR});
    my $status_of = $env->{'serow.status'}
        or return [500, ['Content-Type' => 'text/plain'], ["SerowStatus: the server is not Serow\n"]];
    my $status = $status_of->();
    $status->{uptime} = int(time - $status->{started});
    if (($env->{HTTP_ACCEPT} // '') =~ m{application/json} || ($env->{QUERY_STRING} // '') =~ /(?:^|&)json(?:[=&]|$)/) {
        return [200, ['Content-Type' => 'application/json', 'Cache-Control' => 'no-store'],
                [JSON::PP->new->canonical->encode($status)]];
    }
    return [200, ['Content-Type' => 'text/plain; charset=utf-8', 'Cache-Control' => 'no-store'],
            [_as_text($status)]];
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
        ['Taken from busy or idle workers', $s->{connections_stolen}],
    );
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

=head1 DESCRIPTION

Answers requests for C<path> (default C</server-status>) from the addresses in
C<allow> (IPv4 and IPv6 addresses or CIDR networks; default this machine
only; others get 403) with the server's state, read from the memory Serow's
processes share:

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
how long.

=back

Plain text by default; JSON when the request accepts C<application/json> or
has C<json> in its query string.

=cut
