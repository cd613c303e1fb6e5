use strict;
use warnings;
use Test::More;
use Net::EmptyPort qw(empty_port wait_port);
use lib 't/lib';
use Serow::Options ();
use Serow::Test qw(start_server http_get find_command run_serow);

# The option names of Starman, Starlet and Gazelle work, so that switching
# to Serow is a one-word change; each is one Serow option, and those whose
# meaning Serow does not have are errors that say what to do instead.

my $ROOT = Serow::Test::root();

sub parse {
    my ($opts) = Serow::Options->from_argv(@_);
    return $opts;
}

subtest 'each alias sets its Serow option' => sub {
    for my $case (
        [[qw(--max-workers 7)], workers => 7],
        [[qw(--max-reqs-per-child 500)], max_requests => 500],
        [[qw(--max-reqs-per-child 500 --min-reqs-per-child 300)], min_requests => 300],
        [[qw(--max-keepalive-reqs 20)], max_keepalive_requests => 20],
        [[qw(--timeout 120)], read_timeout => 120],
        [[qw(--pid /run/x.pid)], pid_file => '/run/x.pid'],
        [[qw(--disable-keepalive)], max_keepalive_requests => 1],
        [[qw(-l 127.0.0.1:81)], listen => ['127.0.0.1:81']],
        [[qw(-S /tmp/a.sock)], listen => ['/tmp/a.sock']],
        [[qw(--socket a.sock)], listen => ['./a.sock']],
        [[qw(--port 8080)], listen => ['0.0.0.0:8080']],
        [[qw(--host 127.0.0.1)], listen => ['127.0.0.1:5000']],
        [[qw(--host ::1 --port 8080)], listen => ['[::1]:8080']],
        [[qw(--listen 127.0.0.1:1 --socket /tmp/b.sock --host 127.0.0.1 --port 2)],
            listen => ['127.0.0.1:1', '/tmp/b.sock', '127.0.0.1:2']],
        [[qw(--preload-app --workers 2)], workers => 2],
        [[qw(--lazy-apps)], lazy_app => 1],
        [[qw(--log-syslog)], error_log => 'syslog'],
        [[qw(--harakiri 30)], request_timeout => 30],
        [[qw(--harakiri 30 --harakiri-graceful-timeout 2)], request_timeout_grace => 2],
        [[qw(--reload-on-rss 300)], max_worker_rss => 300],
    ) {
        my ($argv, $name, $want) = @$case;
        is_deeply parse(@$argv)->{$name}, $want, "@$argv: $name";
    }
};

subtest 'every alias in --help maps to an option of the table' => sub {
    for my $alias (Serow::Options->aliases) {
        my $a = Serow::Options->alias($alias);
        ok !defined $a->{to} || defined Serow::Options->spec($a->{to}), "$alias -> " . ($a->{to} // '-');
    }
    my ($status, $text) = run_serow('--help');
    is $status, 0;
    for my $alias (Serow::Options->aliases) {
        my $flag = Serow::Options->alias_flag($alias);
        like $text, qr/^  \Q$flag\E +\S/m, "--help lists $flag";
    }
    like $text, qr/^  --max-workers +same as --workers \(Starlet, Gazelle\)/m, 'with what it means and whose it is';
    like $text, qr/^  --daemonize +not supported: /m, 'and what is not supported';
};

subtest 'an alias and its option together are an error' => sub {
    my ($status, $text) = run_serow(qw(--workers 2 --max-workers 3), "$ROOT/eg/hello.psgi");
    is $status, 2;
    like $text, qr/--max-workers and --workers are the same option: give one of them/;
};

subtest 'what Serow does not do is refused with what to do instead' => sub {
    for my $case (
        [['--daemonize'], qr/--daemonize \(Starman, plackup\) is not supported: Serow stays in the foreground: run it under systemd/],
        [['-D'], qr/-D \(Starman, plackup\) is not supported: Serow stays in the foreground/],
        [['--spawn-interval', 1], qr/--spawn-interval \(Starlet, Gazelle\) is not supported: .*drop the option/],
        [['--child-exit', 'sub {}'], qr/--child-exit .* is not supported: put the code in an END block/],
        [['--disable-proctitle'], qr/--disable-proctitle .* is not supported/],
    ) {
        my ($argv, $message) = @$case;
        ok !eval { Serow::Options->from_argv(@$argv, "$ROOT/eg/hello.psgi"); 1 }, "@$argv: refused";
        like $@, $message, "@$argv: says so";
    }
    my ($status, $text) = run_serow('--daemonize', "$ROOT/eg/hello.psgi");
    is $status, 2, 'serow exits with status 2';
    like $text, qr/\[error\] .*--daemonize .* is not supported/, 'and logs why';
};

subtest 'aliases are checked like their options' => sub {
    for my $case (
        [[qw(--max-workers 0)], qr/--workers: '0' is not a whole number of at least 1/],
        [[qw(--min-reqs-per-child 10)], qr/--min-requests: needs --max-requests/],
        [[qw(--max-reqs-per-child 10 --min-reqs-per-child 20)], qr/--min-requests: 20 is above --max-requests 10/],
        [[qw(--max-worker 2)], qr/unknown option --max-worker \(did you mean --max-workers\?/],
    ) {
        my ($argv, $message) = @$case;
        ok !eval { Serow::Options->from_argv(@$argv); 1 }, "@$argv: refused";
        like $@, $message, "@$argv: says what is wrong";
    }
};

subtest 'a Starlet command line with one word changed' => sub {
    my $port = empty_port();
    my $server = start_server(listen => 'none', app_file => 't/apps/pid.psgi', options => [
        '--host', '127.0.0.1', '--port', $port, '--max-workers', 2, '--max-reqs-per-child', 1000,
        '--min-reqs-per-child', 900, '--timeout', 30, '--keepalive-timeout', 2]);
    ok wait_port({ port => $port, max_wait => 30 }), 'it listens' or return diag $server->log;
    ok $server->wait_for_log(qr{listening on http://127\.0\.0\.1:$port with 2 workers}), '2 workers'
        or diag $server->log;
    my @limits = $server->wait_for_log_all(qr/worker \d+ started \(max requests (\d+)\)/, 2);
    is scalar(grep { $_ >= 900 && $_ <= 1000 } @limits), 2, "limits drawn between 900 and 1000 (@limits)";
    is http_get({ port => $port }, '/')->{status}, 200, 'and serves';
    is $server->stop, 0;
};

subtest 'through plackup, as hash keys' => sub {
    my $plackup = find_command('plackup') or plan skip_all => 'no plackup (libplack-perl)';
    my $port = empty_port();
    my $server = start_server(listen => 'none', command => [$^X, '-Mblib', $plackup, '-s', 'Serow',
        '-E', 'deployment', '--port', $port, '--host', '127.0.0.1', '--max-workers', 3,
        '--max-reqs-per-child', 100, '--disable-keepalive', 't/apps/pid.psgi']);
    ok wait_port({ port => $port, max_wait => 30 }), 'it listens' or return diag $server->log;
    ok $server->wait_for_log(qr/with 3 workers .*keep-alive off/), '--max-workers 3, --disable-keepalive'
        or diag $server->log;
    my $res = http_get({ port => $port }, '/');
    is $res->{status}, 200;
    is $res->{headers}{connection}, 'close', 'no keep-alive';
    is $server->stop, 0;

    $server = start_server(listen => 'none', command => [$^X, '-Mblib', $plackup, '-s', 'Serow',
        '-D', '--port', empty_port(), 't/apps/pid.psgi']);
    isnt $server->wait_exit, 0, 'plackup -D fails';
    like $server->log, qr/--daemonize \(Starman, plackup\) is not supported/, 'saying why';
};

done_testing;
