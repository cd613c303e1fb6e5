use strict;
use warnings;
use Test::More;
use lib 't/lib';
use File::Temp ();
use JSON::PP ();
use Time::HiRes ();
use Serow::Test qw(start_server raw_request raw_connect send_all read_response wait_until gate);

# --access-log-format json: one object per line, every line through a JSON
# parser, whatever bytes the client sent; the timing fields say where the
# time went (queue, app, write) and add up to duration_us.

my $dir = File::Temp->newdir;
my $file = "$dir/access.log";
my $gate = gate();
my $app = sub {
    my ($env) = @_;
    my $path = $env->{PATH_INFO};
    if ($path eq '/hold') {
        open(my $fh, '>', "$dir/held") or die $!;
        close $fh;
        $gate->wait;
    }
    select(undef, undef, undef, 0.3) if $path eq '/sleep';
    return [200, ['Content-Type' => 'text/plain'], ["ok\n"]];
};
my $server = start_server(app => $app,
    options => ['--workers', 1, '--access-log', $file, '--access-log-format', 'json']);

sub lines {
    open(my $fh, '<', $file) or return ();
    my @lines = <$fh>;
    return @lines; # (a count in scalar context)
}

my $json = JSON::PP->new->utf8;
my $taken = 0;
sub next_entry {
    my $want = ++$taken;
    wait_until(sub { lines() >= $want });
    my $line = (lines())[$want - 1] // '';
    my $entry = eval { $json->decode($line) };
    ok $entry, 'the line is JSON' or diag "$@: $line";
    like $line, qr/\A\{[^\n]*\}\n\z/, 'one object on one line';
    return ($entry // {}, $line);
}

my @FIELDS = qw(time remote_addr remote_user request method path query protocol status bytes
    referer user_agent duration_us queue_us app_us write_us request_id pid);

subtest 'fields' => sub {
    raw_request($server, "GET /p/q?a=1 HTTP/1.1\r\nHost: h\r\nReferer: http://r/\r\nUser-Agent: ua/1\r\nConnection: close\r\n\r\n");
    my ($e, $line) = next_entry();
    is_deeply [grep { !exists $e->{$_} } @FIELDS], [], 'every field is there';
    is_deeply [sort grep { my $k = $_; !grep { $_ eq $k } @FIELDS } keys %$e], [], 'and no other';
    like $e->{time}, qr/\A\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d\z/, 'time: ISO 8601';
    is $e->{remote_addr}, '127.0.0.1';
    is $e->{remote_user}, undef, 'no user: null';
    is $e->{request}, 'GET /p/q?a=1 HTTP/1.1';
    is $e->{method}, 'GET';
    is $e->{path}, '/p/q';
    is $e->{query}, '?a=1';
    is $e->{protocol}, 'HTTP/1.1';
    is $e->{status}, 200;
    like $line, qr/"status":200,/, 'numbers are JSON numbers';
    is $e->{bytes}, 3;
    is $e->{referer}, 'http://r/';
    is $e->{user_agent}, 'ua/1';
    is $e->{request_id}, undef, 'no --request-id-header: null';
    is $e->{pid}, ($server->worker_pids)[0], 'pid: the worker';
    my $parts = $e->{queue_us} + $e->{app_us} + $e->{write_us};
    ok $parts <= $e->{duration_us} && $e->{duration_us} - $parts <= 3,
        'queue + app + write = duration (each rounded down)' or diag $line;
};

subtest 'escaping: quotes, backslashes, control bytes, UTF-8 and bytes that are not' => sub {
    my $agent = "a\"b\\c\td \xc3\xa9 \xff\xfe \xe2\x82\xac";
    raw_request($server, "GET / HTTP/1.1\r\nHost: h\r\nUser-Agent: $agent\r\nConnection: close\r\n\r\n");
    my ($e, $line) = next_entry();
    like $line, qr/"user_agent":"a\\"b\\\\c\\u0009d \xc3\xa9 \\u00FF\\u00FE \xe2\x82\xac"/,
        'quote and backslash escaped, tab as \u0009, valid UTF-8 kept, other bytes as \u00HH';
    is $e->{user_agent}, "a\"b\\c\td \x{e9} \x{ff}\x{fe} \x{20ac}", 'and it reads back';

    # A request the server rejects (a control byte in its line): still one
    # object, its request line escaped.
    raw_request($server, "GET /\x01\x7f\" HTTP/1.1\r\n\r\n");
    ($e, $line) = next_entry();
    is $e->{status}, 400, 'rejected: 400';
    is $e->{request}, "GET /\x01\x7f\" HTTP/1.1", 'control bytes and DEL come back';
    is $e->{app_us}, 0, 'no app time';
};

subtest 'garbage requests: every line parses' => sub {
    srand(20261125);
    for my $i (1 .. 30) {
        my $garbage = join '', map { chr int rand 256 } 1 .. 1 + int rand 100;
        $garbage =~ tr/\n/?/;
        $garbage =~ s/\A[\r ]/x/;
        raw_request($server, "$garbage\r\n\r\n");
        my ($e) = next_entry();
    }
};

subtest 'a long field is cut, and the line stays JSON' => sub {
    my $long = 'x' x 5000;
    raw_request($server, "GET /$long HTTP/1.1\r\nHost: h\r\nUser-Agent: $long\r\nReferer: $long\r\nConnection: close\r\n\r\n");
    my ($e, $line) = next_entry();
    ok length($line) <= 4096, 'at most 4096 bytes';
    like $e->{request}, qr/\.\.\.\z/, 'a cut field ends in ...';
    like $e->{user_agent}, qr/\A x+\.\.\.\z/x, 'so does the agent';
};

subtest 'where the time went' => sub {
    raw_request($server, "GET /sleep HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
    my ($e) = next_entry();
    cmp_ok $e->{app_us}, '>=', 300_000, 'an app that sleeps 0.3 s: its time is the app\'s';

    # With the one worker held in the app, a second request waits: from the
    # moment the kernel had its bytes (before send returned) to the app's
    # call (after the gate opened) at least.
    unlink "$dir/held";
    my $held = raw_connect($server);
    send_all($held, "GET /hold HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
    ok wait_until(sub { -e "$dir/held" }), 'the worker is in the app';
    my $waiting = raw_connect($server);
    send_all($waiting, "GET /queued HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
    my $sent = Time::HiRes::time();
    select(undef, undef, undef, 0.2); # a wait worth measuring (nothing waits on it)
    my $opened = Time::HiRes::time();
    $gate->open;
    ok read_response($held), 'the held request is answered';
    ok read_response($waiting), 'and the waiting one';
    my ($first) = next_entry();
    my ($second) = next_entry();
    my ($queued) = grep { $_->{path} eq '/queued' } $first, $second;
    cmp_ok $queued->{queue_us}, '>=', int(($opened - $sent) * 1e6) - 1000,
        'the waiting request\'s queue time covers its wait for the worker';
};

$server->stop;
done_testing;
