use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test qw(need_debian_packages start_server raw_connect send_all read_response hammer);
use Serow::Test::Nginx;

# HUP of Serow under nginx: Serow replaces its workers and closes none of
# the connections nginx keeps alive, so no request through nginx fails (a
# POST nginx sent on a connection being closed would come back as a 502:
# nginx does not retry what is not idempotent), and nginx sends no request
# twice (each POST carries an id; the app logs each id it handles).

need_debian_packages('nginx');

use constant POSTS_BETWEEN => 10; # POSTs before, between and after two HUPs

my $app = sub {
    my ($env) = @_;
    if ($env->{REQUEST_METHOD} eq 'POST') {
        my ($id) = $env->{QUERY_STRING} =~ /id=(\d+)/;
        print STDERR "handled id=$id\n";
        return [200, ['Content-Type' => 'text/plain'], ["id $id"]];
    }
    return [200, ['Content-Type' => 'text/plain'], ["pid $$"]];
};

for my $listen (qw(tcp unix)) {
    subtest "over $listen" => sub {
        my $serow = start_server(app => $app, listen => $listen, options => ['--workers', 2]);
        my @old = $serow->wait_for_log_all(qr/worker (\d+) started/, 2);
        is scalar(@old), 2, 'two workers' or return diag $serow->log;
        my $nginx = Serow::Test::Nginx->start(upstream => $serow, keepalive => 8);
        my $hammer = hammer($nginx, clients => 2, expect => qr/^pid \d+$/);
        ok $hammer->wait_running, 'clients send GETs through nginx' or diag $nginx->error_log;

        my $sock = raw_connect($nginx);
        my @answered;
        my $post = sub {
            my ($id) = @_;
            my $buffer = '';
            send_all($sock, "POST /?id=$id HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nbody",
                buffer => \$buffer);
            my $res = read_response($sock, buffer => \$buffer);
            push @answered, $id if $res && $res->{status} == 200 && $res->{body} eq "id $id";
        };
        my $id = 0;
        for my $reload (1, 2) {
            $post->(++$id) for 1 .. POSTS_BETWEEN;
            my $mark = $serow->log_mark;
            $serow->signal('HUP');
            my @new = $serow->wait_for_log_all(qr/worker (\d+) started/, 2, undef, $mark);
            is scalar(@new), 2, "HUP $reload: two new workers";
        }
        $post->(++$id) for 1 .. POSTS_BETWEEN;

        my $result = $hammer->stop;
        cmp_ok $result->{ok}, '>', 0, "GETs through nginx during the reloads: $result->{ok} answered";
        is $result->{failed}, 0, 'none failed' or diag explain $result->{errors};
        is_deeply \@answered, [1 .. $id], 'every POST answered with 200' or diag $nginx->error_log;
        $serow->log_mark; # reads all the server has logged
        my $log = $serow->log;
        my %handled;
        $handled{$1}++ while $log =~ /handled id=(\d+)/g;
        is_deeply [grep { $handled{$_} != 1 } 1 .. $id], [], 'the app handled each POST exactly once';
        unlike $nginx->error_log, qr/upstream prematurely closed|\[error\]/, 'nginx logged no upstream error'
            or diag $nginx->error_log;
        is $nginx->stop, 0, 'nginx stops cleanly';
        is $serow->stop, 0, 'serow stops cleanly';
    };
}

done_testing;
