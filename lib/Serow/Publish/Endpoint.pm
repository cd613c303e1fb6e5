package Serow::Publish::Endpoint;
use strict;
use warnings;

use Serow::AddressList ();
use Serow::Options ();
use Serow::Publish::Items ();

# Pushpin's HTTP publish endpoint as a PSGI app (docs/holding.md): POST
# /publish/ with {"items": [...]}, each item checked (Serow::Publish::Items)
# and, once all are good, given to the publish function, which delivers it
# (Serow::Holding::publish in a server; a recorder in a test).  A worker
# answers it for the requests that come on --publish-listen, never the app.
#
#   Serow::Publish::Endpoint->new(publish => sub { my ($item) = @_; ... },
#       allow => [CIDR...] (default: Serow::Options's), max_body => BYTES, max_item => BYTES)->to_app
#
# Answers: 200 "Published"; 400 (malformed, with the reason) and 413 (too
# large), delivering nothing; 403 for a client outside the allow list; 404
# for another path; 405 for another method; 500 when the publish function
# dies (the items before the one that failed were delivered).

# Pushpin answers both.
my %PATH = map { ($_ => 1) } '/publish/', '/publish';

sub new {
    my ($class, %args) = @_;
    my $publish = $args{publish};
    die "Serow::Publish::Endpoint: publish is not a code reference\n" unless ref $publish eq 'CODE';
    for my $limit (qw(max_body max_item)) {
        die "Serow::Publish::Endpoint: no $limit\n" unless defined $args{$limit};
    }
    # (an empty list: the default, this machine)
    my @allow = @{ $args{allow} || [] };
    @allow = @{ Serow::Options->defaults->{publish_allow} } unless @allow;
    return bless {
        publish  => $publish,
        allow    => Serow::AddressList->new('--publish-allow', @allow),
        max_body => $args{max_body},
        max_item => $args{max_item},
    }, $class;
}

sub to_app {
    my ($self) = @_;
    return sub { $self->call($_[0]) };
}

sub call {
    my ($self, $env) = @_;
    # A request forwarded by a proxy is refused, as on /metrics: the proxy's
    # address says nothing of its client.
    return _answer(403, "Forbidden\n") unless $self->{allow}->allows_request($env, undef);
    return _answer(404, "Not Found\n") unless $PATH{ $env->{PATH_INFO} };
    return _answer(405, "Method Not Allowed\n", Allow => 'POST') unless $env->{REQUEST_METHOD} eq 'POST';
    my ($body, $status, $why) = $self->read_body($env);
    return _answer($status, "$why\n") unless defined $body;
    (my $items, $status, $why) = Serow::Publish::Items::parse($body, max_item => $self->{max_item});
    return _answer($status, "$why\n") unless $items;
    for my $n (0 .. $#$items) {
        my $item = $items->[$n];
        next unless Serow::Publish::Items::has_format($item); # reaches nobody
        next if eval { $self->{publish}->($item); 1 };
        (my $reason = $@ || 'unknown error') =~ s/\s+\z//;
        return _answer(500, "items[$n]: not published: $reason\n");
    }
    return _answer(200, "Published\n");
}

# The request body, at most max_body bytes -> ($bytes) or (undef, 413, $why).
sub read_body {
    my ($self, $env) = @_;
    my $max = $self->{max_body};
    my $too_large = "the body is larger than the limit of $max bytes (--publish-max-body)";
    return (undef, 413, $too_large) if ($env->{CONTENT_LENGTH} // 0) > $max;
    my $input = $env->{'psgi.input'};
    my $body = '';
    while (1) {
        my $got = $input->read($body, 65536, length $body);
        return (undef, 400, "cannot read the body: $!") unless defined $got;
        last if $got == 0;
        return (undef, 413, $too_large) if length $body > $max;
    }
    return ($body);
}

sub _answer {
    my ($status, $text, @headers) = @_;
    return [$status, ['Content-Type' => 'text/plain', @headers], [$text]];
}

1;
