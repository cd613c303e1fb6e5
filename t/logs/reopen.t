use strict;
use warnings;
use Test::More;
use lib 't/lib';
use File::Temp ();
use Time::HiRes ();
use Serow::Test qw(start_server http_get wait_until is_connection_holder raw_connect read_response);

# logrotate: the access log is renamed, the master gets USR1, every worker
# opens the file again, and so does the connection holder (which logs the
# requests it sheds: --max-queue-wait).  No line is lost: the ones written before the
# reopen are in the renamed file, the ones after in the new one.

my $dir = File::Temp->newdir;
my $file = "$dir/access.log";
my $app = sub { [200, ['Content-Type' => 'text/plain'], ["ok\n"]] };
my $server = start_server(app => $app, options => ['--workers', 3, '--access-log', $file]);

sub count_lines {
    my ($path) = @_;
    open(my $fh, '<', $path) or return 0;
    my @lines = <$fh>;
    return scalar @lines;
}

sub paths_in {
    my ($path) = @_;
    open(my $fh, '<', $path) or return ();
    return map { m{"GET (/\S*) HTTP/1\.1" 200 } ? $1 : "unparsed: $_" } <$fh>;
}

my $n = 0;
sub requests {
    my ($count) = @_;
    for (1 .. $count) {
        $n++;
        my $res = http_get($server, "/r$n");
        is $res && $res->{status}, 200, "request $n" unless $res && $res->{status} == 200;
    }
}

requests(10);
ok wait_until(sub { count_lines($file) == 10 }), 'ten lines';
ok $server->wait_for_log(qr/worker \d+ started/) for 1 .. 3;

rename $file, "$file.1" or die "rename: $!";
requests(5); # still written to the renamed file: the workers have it open
my $mark = $server->log_mark;
$server->signal('USR1');
my @reopened = $server->wait_for_log_all(qr/worker (\d+) reopened the access log/, 3, undef, $mark);
is scalar @reopened, 3, 'each of the three workers reopened the log';
ok $server->wait_for_log(qr/connection holder \d+ reopened the access log/, undef, $mark),
    'and the connection holder';
requests(7);
ok wait_until(sub { count_lines($file) == 7 && count_lines("$file.1") == 15 }),
    'seven lines in the new file, fifteen in the renamed one';

# The signal sent to the whole process group (as some scripts do): the
# connection holder lives on, nothing dies, the log is reopened again.
my @children_before = Serow::Test::all_child_pids($server->pid);
my ($holder) = grep { is_connection_holder($_) } @children_before;
ok $holder, 'there is a connection holder';
$mark = $server->log_mark;
kill 'USR1', -$server->pid;
is scalar(() = $server->wait_for_log_all(qr/worker (\d+) reopened the access log/, 3, undef, $mark)), 3,
    'USR1 to the process group: the workers reopen';
requests(3);
ok wait_until(sub { count_lines($file) == 10 }), 'and write on';
ok Serow::Test::process_alive($holder), 'the connection holder is still there';

# Workers write on a copy of the master's descriptor, which the master too
# opened again on USR1: workers started after the rotation (here by a HUP)
# write to the new file.
$mark = $server->log_mark;
$server->signal('HUP');
is scalar(() = $server->wait_for_log_all(qr/worker (\d+) started/, 3, undef, $mark)), 3,
    'HUP: three new workers';
ok wait_until(sub { !grep { Serow::Test::process_alive($_) } @reopened }), 'the old ones are gone';
requests(4);
ok wait_until(sub { count_lines($file) == 14 }), 'the new workers write to the new file';
is count_lines("$file.1"), 15, 'not to the renamed one';

is $server->stop, 0, 'the server stopped';
my @all = (paths_in("$file.1"), paths_in($file));
is_deeply [sort @all], [sort map { "/r$_" } 1 .. $n], 'every request logged once, none lost';

# Without --access-log, USR1 must not kill the master (its default action).
my $plain = start_server(app => $app, options => ['--workers', 1]);
is http_get($plain, '/')->{status}, 200, 'a server without an access log';
$plain->signal('USR1');
is http_get($plain, '/')->{status}, 200, 'answers on after USR1';
is $plain->stop, 0, 'and stops normally';

# The master tells its workers to reopen without a signal: USR1, to the
# master or to the whole process group, does not cut short what the app is
# doing (a caught signal would end its sleep early, SA_RESTART or not).
{
    use constant SLEEP_SECONDS => 2;
    my $sleepy = sub {
        my $start = Time::HiRes::clock_gettime(Time::HiRes::CLOCK_MONOTONIC());
        print STDERR "sleeping in worker $$\n";
        Time::HiRes::sleep(SLEEP_SECONDS);
        my $slept = Time::HiRes::clock_gettime(Time::HiRes::CLOCK_MONOTONIC()) - $start;
        return [200, ['Content-Type' => 'text/plain'], ["slept $slept"]];
    };
    my $server = start_server(app => $sleepy,
        options => ['--workers', 1, '--access-log', "$dir/sleepy.log"]);
    my $sock = raw_connect($server);
    syswrite $sock, "GET /sleep HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    ok $server->wait_for_log(qr/sleeping in worker (\d+)/), 'the app sleeps' or diag $server->log;
    my $mark = $server->log_mark;
    $server->signal('USR1');
    kill 'USR1', -$server->pid;
    my $res = read_response($sock);
    is $res && $res->{status}, 200, 'the request is answered';
    my ($slept) = ($res && $res->{body} // '') =~ /slept ([\d.]+)/;
    cmp_ok $slept // 0, '>=', SLEEP_SECONDS, 'after sleeping for as long as it asked, USR1 or not';
    ok $server->wait_for_log(qr/worker \d+ reopened the access log/, undef, $mark),
        'and its worker reopened the log after it';
    is $server->stop, 0, 'the server stops';
}

done_testing;
