use strict;
use warnings;
use Test::More;
use TAP::Harness ();
use lib 't/lib';
use Serow::Test qw(root);

# The seam for a connection's bytes (src/connection/transport.h) proven the only path:
# the HTTP conformance, keep-alive, pipelining, request body, streaming and
# file tests again, with every read and write of the servers they start
# moving a few bytes at a time, and EAGAIN made up where the caller waits
# and tries again (SEROW_TEST_TRANSPORT=short: t/transport/short_transport.t
# shows that it does shorten).  Each run has a seed of its own, which a
# failure names: SEROW_SHORT_IO_SEED=N repeats it (as far as timing allows).
# SEROW_SHORT_IO_FILES='t/http/basic.t ...' runs only those.
#
# Not here: the tests that count system calls (t/response/writev.t: a short
# write is one more); the holder's 503 lines of --max-queue-wait
# (t/keepalive/max_queue_wait.t), whose request line is what a peek found;
# the bound of t/keepalive/pipelining_fairness.t, which counts the turns
# another client waits in requests read whole (a head read in pieces takes
# a turn of the loop per piece); and t/keepalive/steal_from_busy_worker.t,
# whose new connections may wait in the listen backlog while a worker serves
# a long request with the listen socket's wake-up still unhandled (a head
# read in pieces makes that likely: a worker's wait then returns the new
# connection with the rest of the head, and EPOLLEXCLUSIVE wakes no other
# worker for it).
my @FILES = (
    glob('t/http/*.t'),
    glob('t/framing/*.t'),
    qw(t/psgi/input.t t/psgi/body_input.t t/hardening/uploads.t),
    qw(t/response/streaming.t t/response/app_chunked.t t/response/compressed_stream.t
       t/response/transfer_coding_http10.t t/response/handle_body.t t/response/content_length.t),
    qw(t/keepalive/idle_connections.t t/keepalive/reload.t t/keepalive/steal_from_computing_worker.t
       t/keepalive/steal_when_a_worker_frees.t),
);
@FILES = split ' ', $ENV{SEROW_SHORT_IO_FILES} if $ENV{SEROW_SHORT_IO_FILES};

my $seed = $ENV{SEROW_SHORT_IO_SEED} // 1 + int rand 2**31;
note "SEROW_TEST_TRANSPORT=short:$seed";
local $ENV{SEROW_TEST_TRANSPORT} = "short:$seed";

my $root = root();
my $harness = TAP::Harness->new({
    lib => ["$root/blib/lib", "$root/blib/arch"],
    verbosity => -3,
    jobs => 2,
    merge => 1,
});
# What each file said, for the diagnostics of one that fails.
my %said;
$harness->callback(made_parser => sub {
    my ($parser, $job) = @_;
    my $file = $job->[0]; # [file, description]
    $parser->callback(ALL => sub { push @{ $said{$file} }, $_[0]->as_string });
});
my $aggregate = $harness->runtests(@FILES);
for my $file (@FILES) {
    my ($parser) = $aggregate->parsers($file);
    my @failed = $parser ? $parser->failed : ('not run');
    ok $parser && !$parser->has_problems, "$file with short reads and writes"
        or diag join("\n", grep { !/^\s*ok / } @{ $said{$file} || [] }),
            "\nfailed: @failed; seed $seed (SEROW_SHORT_IO_SEED=$seed SEROW_SHORT_IO_FILES=$file "
            . "prove -b $0)";
}
done_testing;
