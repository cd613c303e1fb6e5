use strict;
use warnings;
use Test::More;
use IO::Select ();
use lib 't/lib';
use Serow::Test qw(start_server raw_connect wait_until parse_response parse_response_head);

# A client that pipelines many requests must not keep the other connections
# of its worker waiting until all it sent is answered: one read takes up to
# 72 KiB, a thousand small requests.  Between two turns of a pipelining
# connection the worker looks at its other connections and the listen
# socket, so another client's request is answered after a few of the
# pipelined ones, not after all of them.
#
# One worker: the pipelined requests are read while the first of them waits
# on the test's gate; the other client connects and sends its request
# meanwhile (the worker has not accepted it yet), then the gate opens.  The
# app numbers the requests it answers: the other client's answer says how
# many went before it.  Nothing here depends on timing.

use constant PIPELINED => 1000;
# At most this many of the pipelined requests may go before the other
# client's: a turn of the pipelining connection, the look around, and room.
use constant ANSWERED_BEFORE_MAX => 40;

my $gate = Serow::Test::gate();
my $answered = 0;
my $app = sub {
    my ($env) = @_;
    $answered++;
    if ($env->{PATH_INFO} eq '/slow') {
        print STDERR "slow request in worker $$\n";
        $gate->wait;
    }
    return [200, ['Content-Type' => 'text/plain'], ["$answered $env->{PATH_INFO}"]];
};
my $server = start_server(app => $app, options => ['--workers', 1]);

my $pipelining = raw_connect($server);
my $requests = "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"
    . join('', map { "GET /p$_ HTTP/1.1\r\nHost: x\r\n\r\n" } 1 .. PIPELINED);
cmp_ok length $requests, '<', 65536, 'the pipelined requests fit in one read';
Serow::Test::send_all($pipelining, $requests);
ok wait_until(sub { $server->log =~ /slow request in worker/ }),
    'the first pipelined request is being answered' or BAIL_OUT($server->log);

my $other = raw_connect($server);
Serow::Test::send_all($other, "GET /other HTTP/1.1\r\nHost: x\r\n\r\n");
$gate->open(1);

# Both connections are read at once: the pipelined answers must not fill the
# socket buffers while the test waits for the other answer.
my %received = (pipelining => '', other => '');
my %socket_of = (pipelining => $pipelining, other => $other);
my $select = IO::Select->new($pipelining, $other);
my $deadline = time + 60;
my @pipelined_answers;
my $other_answer;
while ((@pipelined_answers < PIPELINED + 1 || !$other_answer) && time < $deadline) {
    for my $sock ($select->can_read(1)) {
        my ($name) = grep { $socket_of{$_} == $sock } keys %socket_of;
        my $n = sysread($sock, $received{$name}, 65536, length $received{$name});
        if (!$n) {
            $select->remove($sock);
            next;
        }
        while (my $res = take_response(\$received{$name})) {
            if ($name eq 'other') { $other_answer = $res } else { push @pipelined_answers, $res }
        }
    }
}

is scalar @pipelined_answers, PIPELINED + 1, 'every pipelined request is answered';
my @in_order = grep { $pipelined_answers[$_]{body} =~ m{ /p$_\z} } 1 .. PIPELINED;
is scalar @in_order, PIPELINED, '... in order';
ok $other_answer, 'the other client is answered' or diag $server->log;
my ($number) = ($other_answer->{body} // '') =~ /^(\d+) /;
ok defined $number, 'its answer says how many requests went before it';
# (1 is /slow, 2 onwards the pipelined ones)
my $before = defined $number ? $number - 2 : PIPELINED;
cmp_ok $before, '<=', ANSWERED_BEFORE_MAX,
    "it waited for $before pipelined requests, not for all " . PIPELINED;

is $server->stop, 0, 'clean stop';
done_testing;

# One whole response from the front of $$buffer (answers have Content-Length).
sub take_response {
    my ($buffer) = @_;
    my $head = parse_response_head($$buffer) or return undef;
    my $len = $head->{headers}{'content-length'} // die "an answer without Content-Length\n";
    return undef if length($$buffer) < $head->{head_length} + $len;
    return scalar parse_response(substr($$buffer, 0, $head->{head_length} + $len, ''));
}
