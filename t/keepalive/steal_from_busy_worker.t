use strict;
use warnings;
use Test::More;
use lib 't/lib';
use File::Temp ();
use POSIX ();
use Serow::Test qw(start_server raw_connect read_response wait_until);
use JSON::PP ();
use Plack::Middleware::SerowStatus ();

# A connection must not wait behind another connection's slow request just
# because the same worker served it before: the holder takes it from the
# busy worker and another worker answers.  The slow request blocks on a FIFO
# until the test lets it go, so nothing here depends on timing.
#
# Run twice: as the test's user, and (as root) with the workers and the
# holder switched to nobody by --user: the holder takes connections with
# pidfd_getfd, which a change of uid would forbid unless the worker is made
# dumpable again (Serow::Privileges).

sub steal_from_busy_worker {
    my (@options) = @_;
    my $dir = File::Temp->newdir;
    chmod 0755, "$dir"; # the app may run as another user
    my $fifo = "$dir/release";
    POSIX::mkfifo($fifo, 0666) or die "mkfifo: $!";
    chmod 0666, $fifo; # whatever the umask

    my $app = sub {
        my ($env) = @_;
        if ($env->{PATH_INFO} eq '/block') {
            open(my $fh, '<', $fifo) or die "open $fifo: $!";
            my $line = <$fh>;
        }
        return [200, ['Content-Type' => 'text/plain'], [$$]];
    };
    my $server = start_server(app => Plack::Middleware::SerowStatus->wrap($app),
        options => ['--workers', 2, @options]);

    my $status = sub {
        my $sock = raw_connect($server);
        syswrite $sock, "GET /server-status HTTP/1.1\r\nHost: x\r\nAccept: application/json\r\nConnection: close\r\n\r\n";
        my $res = read_response($sock) or return {};
        return JSON::PP::decode_json($res->{body});
    };

    # Connections until two of them were last served by the same worker.
    my (%by_worker, $pair);
    for (1 .. 50) {
        my $sock = raw_connect($server);
        ask($sock, '/');
        my $res = read_response($sock) or BAIL_OUT('no response: ' . $server->log);
        push @{ $by_worker{ $res->{body} } }, $sock;
        ($pair) = grep { @$_ >= 2 } values %by_worker and last;
    }
    ok $pair, 'two connections served by one worker' or BAIL_OUT('workers never shared connections');
    my ($blocked, $waiting) = @$pair;

    ask($blocked, '/block');
    # The status page says when the slow request is being answered.
    my $busy_pid = wait_until(sub {
        my ($w) = grep { ($_->{request} // '') eq 'GET /block' } @{ $status->()->{workers} || [] };
        return $w && $w->{pid};
    });
    ok $busy_pid, 'the slow request is being answered';
    ask($waiting, '/');
    my $res = read_response($waiting, timeout => 15);
    ok $res, 'the other connection is answered while its worker is still busy' or diag $server->log;
    isnt $res && $res->{body}, $busy_pid, '... by another worker';

    open(my $release, '>', $fifo) or die "open $fifo: $!";
    print {$release} "go\n";
    close $release;
    my $slow = read_response($blocked);
    is $slow && $slow->{status}, 200, 'the slow request completes once released';

    is $server->stop, 0, 'clean stop';
    unlike $server->log, qr/cannot take connections/, 'the holder never lost access to the workers';
}

sub ask {
    my ($sock, $path) = @_;
    syswrite $sock, "GET $path HTTP/1.1\r\nHost: x\r\n\r\n";
}

subtest 'workers run as the user that started Serow' => sub { steal_from_busy_worker() };

subtest 'workers and holder switched to another user (--user nobody)' => sub {
    plan skip_all => 'switching users needs root' if $> != 0;
    plan skip_all => 'no user nobody' unless getpwnam('nobody');
    steal_from_busy_worker('--user', 'nobody');
};

done_testing;
