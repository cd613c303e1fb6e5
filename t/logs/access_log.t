use strict;
use warnings;
use Test::More;
use lib 't/lib';
use File::Temp ();
use Serow::Test qw(start_server raw_connect raw_request read_response wait_until);

# --access-log FILE: one line per request in Apache's combined format, for
# requests the app answered and for those the server rejected itself, with
# the client's bytes escaped so that no request can forge a line.

my $dir = File::Temp->newdir;
my $file = "$dir/access.log";
my $app = sub {
    my ($env) = @_;
    my $path = $env->{PATH_INFO};
    $env->{REMOTE_USER} = 'bob' if $path eq '/user';
    $env->{REMOTE_USER} = "b b\n" if $path eq '/odd-user';
    die "on purpose\n" if $path eq '/die';
    if ($path eq '/own') {
        # the app answers on the socket itself: the server saw no status
        syswrite $env->{'psgix.io'}, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nown";
        return sub { };
    }
    if ($path eq '/stream') {
        return sub {
            my $writer = shift->([200, ['Content-Type' => 'text/plain']]);
            $writer->write('ab');
            $writer->write('cde');
            $writer->close;
        };
    }
    1 while $env->{'psgi.input'}->read(my $part, 65536);
    return [$path eq '/missing' ? 404 : 200, ['Content-Type' => 'text/plain'], ["hello\n"]];
};
# One worker: lines in the order of the requests.  A zone with a half-hour
# offset shows that the zone is the server's, formatted as Apache does.
my $zone = -e '/usr/share/zoneinfo/Asia/Kolkata' ? 'Asia/Kolkata' : undef;
my $server = start_server(app => $app, env => { $zone ? (TZ => $zone) : () },
    options => ['--workers', 1, '--access-log', $file, '--max-body-size', 100,
                '--max-request-line', 200, '--header-timeout', 1]);

my (@lines, $taken);
sub lines {
    open(my $fh, '<', $file) or return ();
    local $/;
    my $text = <$fh>;
    return split /(?<=\n)/, $text;
}

# The line of the next request: written once its response is out, which
# the client may see first.
sub next_line {
    my $want = ++$taken;
    wait_until(sub { lines() >= $want });
    @lines = lines();
    return $lines[$want - 1] // '';
}

my $TIME = qr{\[\d\d/(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)/\d{4}:\d\d:\d\d:\d\d [+-]\d{4}\]};

sub logged {
    my ($request, $expected, $name) = @_;
    raw_request($server, $request);
    my $line = next_line();
    my ($before, $time, $after) = $line =~ /\A(.*?) ($TIME) (.*)\z/s;
    ok defined $time, "$name: a time field" or diag $line;
    is "$before [T] $after", $expected, $name;
    return $time;
}

my $time = logged("GET /path?q=1 HTTP/1.1\r\nHost: x\r\nReferer: http://ref/\r\nUser-Agent: t/1\r\nConnection: close\r\n\r\n",
    qq{127.0.0.1 - - [T] "GET /path?q=1 HTTP/1.1" 200 6 "http://ref/" "t/1"\n}, 'GET');
like $time, qr/ \+0530\]\z/, 'the server\'s time zone' if $zone;
logged("POST /form HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc",
    qq{127.0.0.1 - - [T] "POST /form HTTP/1.1" 200 6 "-" "-"\n}, 'POST');
logged("HEAD / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    qq{127.0.0.1 - - [T] "HEAD / HTTP/1.1" 200 - "-" "-"\n}, 'HEAD: no body bytes');
logged("GET /missing HTTP/1.0\r\n\r\n",
    qq{127.0.0.1 - - [T] "GET /missing HTTP/1.0" 404 6 "-" "-"\n}, 'a 404 over HTTP/1.0');
logged("GET /user HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    qq{127.0.0.1 - bob [T] "GET /user HTTP/1.1" 200 6 "-" "-"\n}, 'REMOTE_USER set by the app');
logged("GET /odd-user HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    qq{127.0.0.1 - b\\x20b\\n [T] "GET /odd-user HTTP/1.1" 200 6 "-" "-"\n},
    'a REMOTE_USER with a space and a line feed cannot shift the fields');
logged("GET /stream HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    qq{127.0.0.1 - - [T] "GET /stream HTTP/1.1" 200 5 "-" "-"\n}, 'a streamed body: its bytes, not the chunk framing');
logged("GET /die HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    qq{127.0.0.1 - - [T] "GET /die HTTP/1.1" 500 22 "-" "-"\n}, 'an app that died: 500');
logged("GET /own HTTP/1.1\r\nHost: x\r\n\r\n",
    qq{127.0.0.1 - - [T] "GET /own HTTP/1.1" - - "-" "-"\n}, 'an app that answered on psgix.io: no status seen');

# Rejected by the server before the app: logged with the status they got.
logged("GET / HTTP/1.1 junk\r\nHost: x\r\n\r\n",
    qq{127.0.0.1 - - [T] "GET / HTTP/1.1 junk" 400 12 "-" "-"\n}, 'a malformed request line: 400');
logged("GET /a\"b\x01\x7f\xff\\ HTTP/1.1\r\nHost: x\r\n\r\n",
    qq{127.0.0.1 - - [T] "GET /a\\"b\\x01\\x7F\\xFF\\\\ HTTP/1.1" 400 12 "-" "-"\n},
    'a request line with a quote, control bytes and a backslash: escaped');
logged("GET / HTTP/1.1\r\nHost: x\r\nUser-Agent: a\"b\tc\xe9\" 200 0 \"-\r\nReferer: \"\r\nConnection: close\r\n\r\n",
    qq{127.0.0.1 - - [T] "GET / HTTP/1.1" 200 6 "\\"" "a\\"b\\tc\\xE9\\" 200 0 \\"-"\n},
    'a User-Agent that tries to close its field: escaped');
logged("POST /big HTTP/1.1\r\nHost: x\r\nContent-Length: 101\r\n\r\n",
    qq{127.0.0.1 - - [T] "POST /big HTTP/1.1" 413 18 "-" "-"\n}, 'a body above --max-body-size: 413');
my $long = '/' . ('x' x 300);
logged("GET $long HTTP/1.1\r\nHost: x\r\n\r\n",
    qq{127.0.0.1 - - [T] "GET $long HTTP/1.1" 414 13 "-" "-"\n}, 'a request line above the limit: 414');
logged("HEAD / HTTP/2.0\r\nHost: x\r\n\r\n",
    qq{127.0.0.1 - - [T] "HEAD / HTTP/2.0" 505 - "-" "-"\n}, 'a rejected HEAD: no body bytes');
# A head that never ends: 408 after --header-timeout.
logged("GET /slow HTTP/1.1\r\nHost: x\r\n",
    qq{127.0.0.1 - - [T] "GET /slow HTTP/1.1" 408 16 "-" "-"\n}, 'a head not sent in time: 408');

# Keep-alive and pipelining: one line per request.
my $sock = raw_connect($server);
syswrite $sock, "GET /k1 HTTP/1.1\r\nHost: x\r\n\r\nGET /k2 HTTP/1.1\r\nHost: x\r\n\r\n";
my $buffer = '';
read_response($sock, buffer => \$buffer) for 1 .. 2;
like next_line(), qr{"GET /k1 HTTP/1\.1" 200 6 }, 'the first of two pipelined requests';
like next_line(), qr{"GET /k2 HTTP/1\.1" 200 6 }, 'the second';
close $sock;

is $server->stop, 0, 'the server stopped';
@lines = lines();
is scalar @lines, 18, 'a line per request, and nothing else';

# "-" or "stderr": the lines go to standard error with the server's log.
my $stderr = start_server(app => $app, options => ['--workers', 1, '--access-log', '-']);
raw_request($stderr, "GET /on-stderr HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
ok $stderr->wait_for_log(qr{^127\.0\.0\.1 - - $TIME "GET /on-stderr HTTP/1\.1" 200 6 "-" "-"\n}m),
    '--access-log -: on standard error';
is $stderr->stop, 0;

# Off by default: no line anywhere.
my $off = start_server(app => $app, options => ['--workers', 1]);
raw_request($off, "GET /unlogged HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
is $off->stop, 0;
unlike $off->log, qr{/unlogged}, 'without --access-log, no access log';

# A file that cannot be opened is an error at start.
my $bad = start_server(app => $app, options => ['--access-log', "$dir/no/such/dir/access.log"]);
isnt $bad->wait_exit, 0, 'an access log that cannot be opened: the server does not start';
like $bad->log, qr{--access-log: cannot open '\Q$dir\E/no/such/dir/access\.log'}, 'and says why';

done_testing;
