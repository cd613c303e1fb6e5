use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Digest::MD5 qw(md5_hex);
use JSON::PP ();
use Serow::Test qw(read_until_match need_debian_packages start_server raw_connect send_all read_response gate);
use Serow::Test::Nginx;

# Serow behind a real nginx with upstream keep-alive, over TCP and over a
# UNIX socket, with nginx buffering request bodies and streaming them
# (proxy_request_buffering on and off): bodies of every framing arrive
# whole, Expect: 100-continue works, big bodies keep their bytes, and a
# streamed response reaches the client while the app is still writing it.

need_debian_packages('nginx');

# Big bodies: over nginx's buffers (a temp file in nginx) and over Serow's
# --body-memory-limit (a temp file in Serow).  SEROW_LONG_TESTS=1: 64 MiB.
use constant BIG => ($ENV{SEROW_LONG_TESTS} ? 64 : 3) * 1024 * 1024;

my $gate = gate();
my $app = sub {
    my ($env) = @_;
    my $path = $env->{PATH_INFO};
    if ($path eq '/echo') {
        my $body = '';
        while ($env->{'psgi.input'}->read(my $part, 65536)) { $body .= $part }
        return [200, ['Content-Type' => 'application/json'], [JSON::PP->new->canonical->encode({
            method => $env->{REQUEST_METHOD}, query => $env->{QUERY_STRING},
            length => length $body, md5 => md5_hex($body),
            body => length $body <= 100 ? $body : '',
            content_length => $env->{CONTENT_LENGTH},
            transfer_encoding => $env->{HTTP_TRANSFER_ENCODING},
        })]];
    }
    if ($path eq '/big') {
        my ($size) = $env->{QUERY_STRING} =~ /size=(\d+)/;
        return [200, ['Content-Type' => 'application/octet-stream'], [big_body($size)]];
    }
    if ($path eq '/stream') {
        return sub {
            my $writer = $_[0]->([200, ['Content-Type' => 'text/plain', 'X-Accel-Buffering' => 'no']]);
            $writer->write("first part\n");
            $gate->wait;
            $writer->write("second part\n");
            $writer->close;
        };
    }
    return [404, ['Content-Type' => 'text/plain'], ['not found']];
};

# Bytes that differ along their length, so a lost or moved block shows.
sub big_body {
    my ($size) = @_;
    my $body = join '', map { sprintf "%08d\n", $_ } 0 .. int($size / 9);
    return substr($body, 0, $size);
}

# One request on a kept-alive connection to nginx; the parsed response.
sub request {
    my ($sock, $head, $body) = @_;
    my $buffer = '';
    send_all($sock, $head . ($body // ''), buffer => \$buffer) or return undef;
    return read_response($sock, buffer => \$buffer);
}

sub json { my ($res) = @_; $res && eval { JSON::PP::decode_json($res->{body}) } || {} }

for my $listen (qw(tcp unix)) {
    my $serow = start_server(app => $app, listen => $listen, options => ['--workers', 2]);
    for my $buffering (1, 0) {
        my $nginx = Serow::Test::Nginx->start(upstream => $serow, keepalive => 8,
            request_buffering => $buffering);
        my $what = "over $listen, proxy_request_buffering " . ($buffering ? 'on' : 'off');
        subtest $what => sub {
            my $sock = raw_connect($nginx);

            my $res = request($sock, "GET /echo?a=1&b=%20x HTTP/1.1\r\nHost: localhost\r\n\r\n");
            is $res && $res->{status}, 200, 'GET' or diag $nginx->error_log;
            is json($res)->{query}, 'a=1&b=%20x', 'the query string arrives as sent';

            my $form = 'name=serow&text=' . ('x' x 1000);
            $res = request($sock, "POST /echo HTTP/1.1\r\nHost: localhost\r\nContent-Type: "
                . "application/x-www-form-urlencoded\r\nContent-Length: " . length($form) . "\r\n\r\n", $form);
            is json($res)->{md5}, md5_hex($form), 'a POST body with Content-Length arrives whole';

            # Bigger than nginx's client_body_buffer_size: a body nginx has whole
            # before it passes the request on goes with a Content-Length.
            my @chunks = ('hello ', 'chunked ' x 40000, 'world');
            my $chunked = join('', map { sprintf("%x\r\n%s\r\n", length, $_) } @chunks) . "0\r\n\r\n";
            $res = request($sock, "POST /echo HTTP/1.1\r\nHost: localhost\r\n"
                . "Transfer-Encoding: chunked\r\n\r\n", $chunked);
            my $seen = json($res);
            is $seen->{md5}, md5_hex(join '', @chunks), 'a chunked body arrives whole';
            # (nginx sends it on with a Content-Length when it buffers, chunked when
            # it streams; Serow gives the app the decoded length either way.)
            is $seen->{content_length}, length(join '', @chunks), 'the app gets its decoded length';

            # Expect: 100-continue: the body goes only after the 100.
            my $body = 'y' x 5000;
            syswrite $sock, "POST /echo HTTP/1.1\r\nHost: localhost\r\nExpect: 100-continue\r\n"
                . "Content-Length: " . length($body) . "\r\n\r\n";
            my $continue = read_response($sock);
            is $continue && $continue->{status}, 100, 'Expect: 100-continue gets a 100 first';
            $res = request($sock, '', $body);
            is $res && $res->{status}, 200, 'then the response';
            is json($res)->{md5}, md5_hex($body), 'to the whole body';

            my $big = big_body(BIG + 7);
            $res = request($sock, "PUT /echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: "
                . length($big) . "\r\n\r\n", $big);
            $seen = json($res);
            is $seen->{length}, length $big, 'a big request body: its length';
            is $seen->{md5}, md5_hex($big), 'and its bytes (md5)';

            my $size = BIG + 3;
            $res = request($sock, "GET /big?size=$size HTTP/1.1\r\nHost: localhost\r\n\r\n");
            is length($res ? $res->{body} : ''), $size, 'a big response body: its length';
            is md5_hex($res ? $res->{body} : ''), md5_hex(big_body($size)), 'and its bytes (md5)';

            # Streaming: the first part is through nginx while the app waits.
            syswrite $sock, "GET /stream HTTP/1.1\r\nHost: localhost\r\n\r\n";
            my $buffer = read_until_match($sock, qr/first part/);
            like $buffer, qr/first part\n/, 'a streamed response: the first part arrives while the app waits';
            unlike $buffer, qr/second part/, 'before the second is written';
            $gate->open;
            $res = read_response($sock, buffer => \$buffer);
            is $res && $res->{body}, "first part\nsecond part\n", 'then the rest, on the same connection';

            $res = request($sock, "GET /nothing HTTP/1.1\r\nHost: localhost\r\n\r\n");
            is $res && $res->{status}, 404, "the app's 404 comes through";
            like $nginx->error_log, qr/\A(?!.*\[(?:error|crit|alert|emerg)\])/s, 'nginx logged no error'
                or diag $nginx->error_log;
        };
        is $nginx->stop, 0, 'nginx stops cleanly';
    }
    is $serow->stop, 0, "serow over $listen stops cleanly";
}

done_testing;
