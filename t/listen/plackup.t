use strict;
use warnings;
use Test::More;
use Net::EmptyPort qw(empty_port wait_port);
use File::Temp ();
use lib 't/lib';
use Serow::Test qw(start_server http_get find_command);

# Serow under Plack: plackup -s Serow (its --listen, -o/-p and -S, and
# Serow's own options), Plack::Loader with host and port, Plack::Test.

my $plackup = find_command('plackup') or plan skip_all => 'no plackup (libplack-perl)';

sub plackup {
    my (@args) = @_;
    return start_server(listen => 'none', command => [$^X, '-Mblib', $plackup, '-s', 'Serow', @args]);
}

subtest 'plackup -s Serow --listen 127.0.0.1:PORT APP' => sub {
    my $port = empty_port();
    my $server = plackup('--listen', "127.0.0.1:$port", 't/apps/pid.psgi');
    ok wait_port({ port => $port, max_wait => 30 }), 'it listens' or return diag $server->log;
    ok $server->wait_for_log(qr{Serow: Accepting connections at http://127\.0\.0\.1:$port/}),
        "plackup's server_ready line comes";
    my $res = http_get({ port => $port }, '/');
    is $res->{status}, 200, 'a request is answered';
    like $res->{body}, qr/^pid \d+ loaded-in \d+ server 127\.0\.0\.1:$port$/;
    ok $server->wait_for_log(qr{"GET / HTTP/1\.1" 200 }), 'through the development middlewares (access log)';
    is $server->stop, 0, 'TERM stops it cleanly';
};

subtest "Serow's own options through plackup, with dashes or underscores" => sub {
    my $port = empty_port();
    my $server = plackup('-E', 'deployment', '--listen', "127.0.0.1:$port", '--workers', 3,
        '--max_requests', 100, '--graceful-timeout=5', 't/apps/pid.psgi');
    ok wait_port({ port => $port, max_wait => 30 }), 'it listens' or return diag $server->log;
    ok $server->wait_for_log(qr/worker \d+ started \(max requests \d+\)/), "worker $_ started with a request limit"
        for 1 .. 3;
    is scalar($server->worker_pids), 3, '--workers 3';
    is http_get({ port => $port }, '/')->{status}, 200;
    is $server->stop, 0;
};

subtest 'plackup -s Serow -o HOST -p PORT' => sub {
    my $port = empty_port();
    my $server = plackup('-E', 'deployment', '-o', '127.0.0.1', '-p', $port, '--workers', 1, 't/apps/pid.psgi');
    ok wait_port({ port => $port, max_wait => 30 }), 'it listens' or return diag $server->log;
    like http_get({ port => $port }, '/')->{body}, qr/ server 127\.0\.0\.1:$port$/, 'and serves';
    is $server->stop, 0;
};

subtest 'plackup -s Serow --listen /path.sock' => sub {
    my $dir = File::Temp->newdir;
    my $path = "$dir/plack.sock";
    my $server = plackup('-E', 'deployment', '--listen', $path, '--socket-mode', '0600', '--workers', 1,
        't/apps/pid.psgi');
    ok $server->wait_for_log(qr/listening on \Q$path\E/), 'it listens' or return diag $server->log;
    is sprintf('%04o', (stat $path)[2] & 07777), '0600', '--socket-mode applies';
    is http_get({ path => $path }, '/')->{status}, 200, 'and serves';
    is $server->stop, 0;
    ok !-e $path, 'the socket file is removed';
};

subtest 'an unknown option through plackup: a warning naming it, and Serow serves' => sub {
    my $port = empty_port();
    my $server = plackup('-E', 'deployment', '--listen', "127.0.0.1:$port", '--worker', 3, 't/apps/pid.psgi');
    ok $server->wait_for_log(qr/\[warn\] .*ignoring option 'worker', unknown to Serow \(did you mean --workers\?/),
        'the typo is named, with the option meant' or diag $server->log;
    ok wait_port({ port => $port, max_wait => 30 }), 'it listens' or return diag $server->log;
    is http_get({ port => $port }, '/')->{status}, 200, 'and serves';
    is $server->stop, 0;
};

subtest 'an option Serow refuses is still an error through plackup' => sub {
    my $server = plackup('--listen', '127.0.0.1:' . empty_port(), '--disable-proctitle', 't/apps/pid.psgi');
    isnt $server->wait_exit, 0, 'plackup fails';
    like $server->log, qr/--proctitle \(plackup --disable-proctitle\) is not supported: Serow always names its processes/, 'saying why';
};

# RT's rt-server: Plack::Runner with RT's own --webpath, which reaches the
# server as webpath => '/rt' (Starman ignores it).
subtest "Plack::Runner with a launcher's own option (rt-server --webpath /rt)" => sub {
    my $port = empty_port();
    my $server = start_server(listen => 'none', command => [$^X, '-Mblib', '-MPlack::Runner', '-e', q{
        my ($port) = @ARGV;
        my $runner = Plack::Runner->new;
        $runner->parse_options('--server', 'Serow', '--port', $port, '--host', '127.0.0.1',
            '-E', 'deployment', '--webpath', '/rt', '--workers', 1);
        $runner->run(sub { [200, ['Content-Type' => 'text/plain'], ["runner $$"]] });
    }, $port]);
    ok $server->wait_for_log(qr/\[warn\] .*ignoring option 'webpath', unknown to Serow/),
        'a warning names the option' or diag $server->log;
    ok wait_port({ port => $port, max_wait => 30 }), 'it listens' or return diag $server->log;
    like http_get({ port => $port }, '/')->{body}, qr/^runner \d+$/, 'and serves';
    is $server->stop, 0;
    unlike $server->log, qr/\[error\]/, 'no error';
};

subtest 'Plack::Loader->load(Serow, host, port)' => sub {
    my $port = empty_port();
    my $server = start_server(listen => 'none', command => [$^X, '-Mblib', '-MPlack::Loader', '-e', q{
        my ($port) = @ARGV;
        Plack::Loader->load('Serow', host => '127.0.0.1', port => $port, workers => 2)
            ->run(sub { [200, ['Content-Type' => 'text/plain'], ["loader $$"]] });
    }, $port]);
    ok wait_port({ port => $port, max_wait => 30 }), 'it listens' or return diag $server->log;
    like http_get({ port => $port }, '/')->{body}, qr/^loader \d+$/, 'and serves';
    is $server->stop, 0;
};

subtest 'Plack::Test with the Server implementation and PLACK_SERVER=Serow' => sub {
    require Plack::Test;
    require HTTP::Request::Common;
    no warnings 'once';
    local $Plack::Test::Impl = 'Server';
    local $ENV{PLACK_SERVER} = 'Serow';
    # Plack::Loader falls back to another server when Serow fails to load:
    # the answer says who answered.
    my $app = sub { [200, ['Content-Type' => 'text/plain'], ["$0"]] };
    for my $args ([], [listen => 1]) {
        # The server is forked from this process: its log goes to a file.
        my $log = File::Temp->new;
        open(my $stderr, '>&', \*STDERR) or die;
        open(STDERR, '>&', $log) or die;
        my $test = eval { Plack::Test->create($app, @$args) };
        open(STDERR, '>&', $stderr) or die;
        my $res = $test && $test->request(HTTP::Request::Common::GET('/'));
        is $res && $res->code, 200, "answered (@$args)";
        is $res && $res->content, 'serow worker', 'by a Serow worker'
            or diag $@, do { local $/; open(my $fh, '<', $log->filename); <$fh> };
        undef $test; # stops the server
    }
};

done_testing;
