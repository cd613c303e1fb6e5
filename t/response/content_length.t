# A Content-Length from the app that does not match the body it gives: the
# server never sends more bytes than announced and closes the connection
# after the response, so that the client never reads one response's bytes
# as the next one's.  The mismatch is logged.
use strict;
use warnings;
use Test::More;
use File::Temp ();
use lib 't/lib';
use Serow::Test qw(start_server raw_connect read_response parse_response raw_request);

my $file = File::Temp->new;
print {$file} 'f' x 1000;
close $file;

my $app = sub {
    my ($env) = @_;
    my $path = $env->{PATH_INFO};
    my @type = ('Content-Type' => 'text/plain');
    return [200, [@type, 'Content-Length' => 10], ['short']] if $path eq '/array-short';
    return [200, [@type, 'Content-Length' => 5], ['0123456789', 'abc']] if $path eq '/array-long';
    return [200, [@type, 'Content-Length' => 5], ['hello']] if $path eq '/array-right';
    if ($path eq '/file-long') {
        open(my $fh, '<', "$file") or die;
        return [200, [@type, 'Content-Length' => 100], $fh];
    }
    if ($path eq '/file-short') {
        open(my $fh, '<', "$file") or die;
        return [200, [@type, 'Content-Length' => 2000], $fh];
    }
    if ($path =~ m{\A/stream-(\w+)\z}) {
        my $which = $1;
        return sub {
            my $w = $_[0]->([200, [@type, 'Content-Length' => 6]]);
            $w->write('abc');
            $w->write('def') unless $which eq 'short';
            $w->write('ghi') if $which eq 'long';
            $w->close;
        };
    }
    if ($path eq '/handle-long') {
        open(my $fh, '<', \'0123456789') or die;
        return [200, [@type, 'Content-Length' => 4], $fh];
    }
    return [404, [@type], ['not found']];
};

my $server = start_server(app => $app, options => ['--workers', 1]);

# Two pipelined requests: the first with the mismatch, the second a good one.
# Returns everything the server sent before it closed the connection.
sub pipelined {
    my ($method, $path) = @_;
    return raw_request($server, "$method $path HTTP/1.1\r\nHost: x\r\n\r\n"
        . "GET /array-right HTTP/1.1\r\nHost: x\r\n\r\n");
}

for my $case (['/array-short', 10, 'short', 1], ['/array-long', 5, '01234', 1],
              ['/file-long', 100, 'f' x 100, 0], ['/file-short', 2000, 'f' x 1000, 0],
              ['/stream-long', 6, 'abcdef', 0], ['/stream-short', 6, 'abc', 0],
              ['/handle-long', 4, '0123', 0]) {
    my ($path, $announced, $sent, $says_close) = @$case;
    subtest $path => sub {
        my $raw = pipelined(GET => $path);
        my $res = Serow::Test::parse_response_head($raw);
        is $res->{status}, 200, 'status 200';
        is $res->{headers}{'content-length'}, $announced, 'the app\'s Content-Length';
        is substr($raw, $res->{head_length}), $sent,
            'no more bytes than announced, nothing after them: the connection closed';
        if ($says_close) {
            is lc($res->{headers}{connection} // ''), 'close',
                'known before it was sent: the head says Connection: close';
        }
    };
}
like $server->log, qr{GET /array-long: the app's Content-Length is 5 but its body has 13 bytes},
    'the mismatch is logged';
like $server->log, qr{GET /stream-short: the app's Content-Length is 6 but its body has 3 bytes},
    'the mismatch of a stream is logged';

subtest 'a body that matches keeps the connection' => sub {
    my $sock = raw_connect($server);
    for (1 .. 2) {
        syswrite $sock, "GET /array-right HTTP/1.1\r\nHost: x\r\n\r\n";
        is read_response($sock)->{body}, 'hello';
    }
    syswrite $sock, "GET /stream-right HTTP/1.1\r\nHost: x\r\n\r\n";
    is read_response($sock)->{body}, 'abcdef';
};

subtest 'HEAD: a Content-Length with no body is no mismatch' => sub {
    my $sock = raw_connect($server);
    for (1 .. 2) {
        syswrite $sock, "HEAD /array-short HTTP/1.1\r\nHost: x\r\n\r\n";
        my $res = read_response($sock, head_request => 1);
        is $res->{headers}{'content-length'}, 10;
        ok !$res->{headers}{connection}, 'kept alive';
    }
};

is $server->stop, 0, 'the server stops cleanly';
done_testing;
