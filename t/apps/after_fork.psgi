# Registers a hook to run in each worker after the fork (push
# @Serow::AFTER_FORK): it records the pid it ran in.  /slow waits on the
# test's gate (SEROW_TEST_GATE), so that the next request goes to another
# worker.  With SEROW_TEST_HOOK_DIES, the hook dies instead.
use strict;
use warnings;
use Serow::Test ();

my @hook_ran_in;
push @Serow::AFTER_FORK, sub {
    die "cannot reconnect to the database\n" if $ENV{SEROW_TEST_HOOK_DIES};
    push @hook_ran_in, $$;
};
my $gate = Serow::Test::Gate->from_fd($ENV{SEROW_TEST_GATE});
sub {
    my ($env) = @_;
    if ($env->{PATH_INFO} eq '/slow') {
        print STDERR "slow request in worker $$\n";
        $gate->wait;
    }
    return [200, ['Content-Type' => 'text/plain'], ["pid $$ hook ran in @hook_ran_in"]];
};
