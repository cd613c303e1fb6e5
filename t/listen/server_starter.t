use strict;
use warnings;
use Test::More;
use Net::EmptyPort qw(empty_port wait_port);
use File::Temp ();
use lib 't/lib';
use Serow::Test qw(start_server http_get hammer find_command child_pids wait_until process_alive generation_pids);

# Under the real start_server (Server::Starter): Serow serves every socket
# it is handed, TCP and UNIX at once, and a HUP to start_server (a new
# Serow, then TERM to the old one) loses no request.

my $start_server = find_command('start_server') or plan skip_all => 'no start_server (libserver-starter-perl)';
my $ROOT = Serow::Test::root();

my $dir = File::Temp->newdir;
my $path = "$dir/starter.sock";
my $port = empty_port();

# The sample command of docs/operations.md, run as it is written there, on a
# free port, a socket in a temp dir and a test app.
my ($sample) = do {
    open(my $fh, '<', "$ROOT/docs/operations.md") or die "docs/operations.md: $!";
    local $/;
    <$fh> =~ /<!-- the command t\/listen\/server_starter\.t runs -->\n```sh\n(.*?)```/s;
};
ok $sample, 'docs/operations.md has the sample' or BAIL_OUT('no sample command in docs/operations.md');
(my $line = $sample) =~ s/\\\n//g;
my %replace = (
    start_server            => [$start_server],
    '127.0.0.1:5000'        => ["127.0.0.1:$port"],
    '/run/serow/serow.sock' => [$path],
    serow                   => [$^X, "-I$ROOT/blib/lib", "-I$ROOT/blib/arch", "$ROOT/script/serow"],
    '/srv/app/app.psgi'     => ["$ROOT/t/apps/pid.psgi"],
);
my @words = split ' ', $line;
my %in_sample = map { $_ => 1 } @words;
ok $in_sample{$_}, "the sample has $_" for sort keys %replace;
my ($workers) = $line =~ /--workers (\d+)/;
ok $workers, "it sets --workers ($workers)";

# start_server runs in the helper's process group: stopping it (or the
# helper killing the group) takes every Serow it started along.
my $starter = start_server(listen => 'none', command => [map { @{ $replace{$_} || [$_] } } @words]);

ok wait_port({ port => $port, max_wait => 30 }), 'start_server listens' or BAIL_OUT($starter->log);
my $banner = $starter->wait_for_log(qr/listening on .* \(master pid \d+\)/);
ok $banner, 'Serow started' or diag $starter->log;
like $banner, qr/listening on http:\/\/127\.0\.0\.1:$port, \Q$path\E with $workers workers/, 'on both sockets it was handed';
my ($first_master) = $banner =~ /master pid (\d+)/;
# (The app is loaded by the master's generation process, not the master.)
my ($first_loader) = generation_pids($first_master);

subtest 'both sockets are served' => sub {
    my $tcp = http_get({ port => $port }, '/');
    is $tcp->{status}, 200, 'TCP';
    like $tcp->{body}, qr/ loaded-in $first_loader server 127\.0\.0\.1:$port$/, 'by the Serow start_server started';
    my $unix = http_get({ path => $path }, '/');
    is $unix->{status}, 200, 'UNIX';
    like $unix->{body}, qr/ loaded-in $first_loader /;
};

subtest 'HUP to start_server: a new Serow takes over, no request fails' => sub {
    my $tcp_clients = hammer({ port => $port }, clients => 1, expect => qr/^pid \d+ /);
    my $unix_clients = hammer({ path => $path }, clients => 1, expect => qr/^pid \d+ /);
    ok $tcp_clients->wait_running && $unix_clients->wait_running, 'clients are sending requests';
    # start_server, the old and the new Serow log in no fixed order: each
    # line is waited for from this mark.
    my $mark = $starter->log_mark;
    $starter->signal('HUP');
    ok $starter->wait_for_log(qr/received HUP, spawning a new worker/, undef, $mark), 'start_server spawns a new Serow';
    my ($new_master) = $starter->wait_for_log_all(qr/\(master pid (\d+)\)/, 1, undef, $mark);
    ok $new_master && $new_master != $first_master, "the new Serow is up (master $new_master)";
    ok $starter->wait_for_log(qr/sending TERM to old workers:$first_master\n/, undef, $mark),
        'start_server stops the old one';
    ok $starter->wait_for_log(qr/\[pid $first_master\] stopped/, undef, $mark), 'which stops gracefully';
    ok $starter->wait_for_log(qr/old worker $first_master died, status:0/, undef, $mark), 'and exits 0';
    # Requests after the switch, on both sockets, meet the new Serow.
    my ($new_loader) = generation_pids($new_master);
    like http_get({ port => $port }, '/')->{body}, qr/ loaded-in $new_loader /, 'TCP is served by the new Serow';
    like http_get({ path => $path }, '/')->{body}, qr/ loaded-in $new_loader /, 'UNIX too';
    for my $clients ($tcp_clients, $unix_clients) {
        my $result = $clients->stop;
        cmp_ok $result->{ok}, '>', 0, "$result->{ok} requests answered";
        is $result->{failed}, 0, 'none failed' or diag explain $result->{errors};
    }
};

subtest 'TERM to start_server stops everything' => sub {
    my @serow = child_pids($starter->pid);
    my $status = $starter->stop;
    is $status >> 8, 0, 'start_server exits 0';
    ok wait_until(sub { !grep { process_alive($_) } @serow }), 'no Serow is left';
    ok !-e $path, 'the UNIX socket is removed';
};

done_testing;
