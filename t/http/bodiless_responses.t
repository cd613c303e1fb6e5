# Responses without a body (RFC 9112 6.3, RFC 9110 9.3.2, 15.2, 15.3.5,
# 15.4.5): a response to HEAD, a 1xx, a 204 and a 304 end with their head.
# The server drops whatever body the app gave (array, handle or writer),
# sends no chunk framing, and the connection stays usable: the next response
# starts right after the head.  A 1xx or 204 carries no Content-Length or
# Transfer-Encoding either (RFC 9110 8.6, RFC 9112 6.1).
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test qw(start_server raw_connect read_until_close parse_response);

my $server = start_server(app => sub {
    my ($env) = @_;
    die "on purpose\n" if $env->{PATH_INFO} eq '/die';
    my ($status, $kind) = $env->{PATH_INFO} =~ m{^/(\d+)/(\w+)};
    my @headers = ('Content-Type' => 'text/plain');
    push @headers, 'Content-Length' => 4 if $env->{QUERY_STRING} =~ /length/;
    if ($kind eq 'array') {
        return [$status, \@headers, ['body']];
    } elsif ($kind eq 'handle') {
        open my $fh, '<', \'body' or die;
        return [$status, \@headers, $fh];
    } elsif ($kind eq 'writer') {
        return sub {
            my $w = $_[0]->([$status, \@headers]);
            $w->write('bo');
            $w->write('dy');
            $w->close;
        };
    } elsif ($kind eq 'hints') {
        $env->{'psgix.informational'}->(103, [Link => '</s.css>; rel=preload']);
        return [200, [], ['final']];
    }
    return [500, [], ['unknown route']];
}, options => ['--workers', 1, '--keepalive-timeout', 30]);

# Sends $method $path then a GET /200/array on one connection; returns the
# bytes before the second response's status line, and the second response.
sub head_then_next {
    my ($method, $path) = @_;
    my $sock = raw_connect($server);
    syswrite $sock, "$method $path HTTP/1.1\r\nHost: x\r\n\r\n"
        . "GET /200/array HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    my ($raw) = read_until_close($sock);
    my $second = rindex $raw, "HTTP/1.1 200 OK\r\n";
    return (substr($raw, 0, $second < 0 ? length $raw : $second),
            $second < 0 ? undef : parse_response(substr $raw, $second));
}

for my $kind (qw(array handle writer)) {
    for my $case (['HEAD', 200], ['HEAD', 404], ['GET', 204], ['GET', 304]) {
        my ($method, $status) = @$case;
        for my $query ('', '?length') {
            my $name = "$method $status from a$query $kind";
            subtest $name => sub {
                my ($first, $next) = head_then_next($method, "/$status/$kind$query");
                like $first, qr{\AHTTP/1\.1 $status [^\r\n]*\r\n(?:[^\r\n]+\r\n)*\r\n\z},
                    'a head and nothing else';
                unlike $first, qr/\r\nTransfer-Encoding:/i, 'no Transfer-Encoding';
                if ($status == 204) {
                    unlike $first, qr/\r\nContent-Length:/i, 'no Content-Length on a 204';
                }
                is $next && $next->{body}, 'body', 'the next response follows right after';
            };
        }
    }
}

subtest 'HEAD of an array body says the length GET would have' => sub {
    my ($first) = head_then_next('HEAD', '/200/array');
    like $first, qr/\r\nContent-Length: 4\r\n/;
};

subtest 'a 1xx before the final response has no body and no framing' => sub {
    my ($raw) = read_until_close(do {
        my $sock = raw_connect($server);
        syswrite $sock, "GET /200/hints HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
        $sock;
    });
    like $raw, qr{\AHTTP/1\.1 103 Early Hints\r\n(?:[^\r\n]+\r\n)*\r\nHTTP/1\.1 200 OK\r\n}, '103 then 200';
    my ($hints) = $raw =~ /\A(.*?\r\n\r\n)/s;
    like $hints, qr{\r\nLink: </s\.css>; rel=preload\r\n}, 'the 103 carries its fields';
    unlike $hints, qr/\r\n(?:Content-Length|Transfer-Encoding|Connection):/i, 'and no framing';
    is((parse_response($raw))[1]{body}, 'final');
};

subtest "the server's own error responses to HEAD have no body either" => sub {
    for my $case (["HEAD / HTTP/1.1\r\n\r\n", 400], ["HEAD / HTTP/2.0\r\nHost: x\r\n\r\n", 505],
                  ["HEAD /die HTTP/1.1\r\nHost: x\r\n\r\n", 500]) {
        my ($request, $status) = @$case;
        my $sock = raw_connect($server);
        syswrite $sock, $request;
        my ($raw, $closed) = read_until_close($sock);
        like $raw, qr{\AHTTP/1\.1 $status [^\r\n]*\r\n(?:[^\r\n]+\r\n)*\r\n\z}, "$status: a head and nothing else";
        ok $closed, "$status: closed";
    }
};

is $server->stop, 0, 'the server stops cleanly';
done_testing;
