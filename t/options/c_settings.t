use strict;
use warnings;
use Test::More;
use POSIX ();
use lib 't/lib';
use Serow::Test ();
use Serow::Options ();
use Serow::Worker ();
use Serow::ConnectionHolder ();
use Serow::Master::Limits ();

# Serow::Options owns every default; the C side has none of its own.  The
# settings the worker's event loop and the connection holder take are all
# given by their Perl callers, and a missing one is an error naming it, not a
# number the C made up.

my $defaults = Serow::Options->defaults;

subtest 'Serow::Loop->new takes every setting from its caller' => sub {
    my $settings = Serow::Worker->loop_settings($defaults);
    ok scalar(keys %$settings) > 5, 'the worker passes its settings: ' . join(' ', sort keys %$settings);
    ok eval { Serow::Loop->new({%$settings}); 1 }, 'all of them: a loop' or diag $@;
    for my $name (sort keys %$settings) {
        my %less = %$settings;
        delete $less{$name};
        ok !eval { Serow::Loop->new(\%less); 1 }, "without $name: no loop";
        like $@, qr/\ASerow::Loop->new: no '\Q$name\E' setting/, "the error names $name";
        ok !eval { Serow::Loop->new({ %$settings, $name => undef }); 1 }, "$name undef: no loop";
        like $@, qr/no '\Q$name\E' setting/, "the error names $name";
    }
};

subtest 'Serow::Shared->run_holder takes every setting from its caller' => sub {
    my $settings = Serow::ConnectionHolder->settings($defaults);
    my $shared = Serow::Shared->new(1);
    my ($ready_send, $ready_receive) = $shared->make_channel;
    my ($handback_send, $handback_receive) = $shared->make_channel;
    # (with all of them it would run the holder in this process: only the
    # missing ones are tried)
    for my $name (sort keys %$settings) {
        my %less = %$settings;
        delete $less{$name};
        ok !eval { $shared->run_holder($ready_send, $handback_receive, \%less); 1 }, "without $name: no holder";
        like $@, qr/\ASerow::Shared->run_holder: no '\Q$name\E' setting/, "the error names $name";
    }
    POSIX::close($_) for $ready_send, $ready_receive, $handback_send, $handback_receive;
};

subtest 'Serow::Shared->answer_app_connection takes every setting from its caller' => sub {
    my $settings = Serow::Master::Limits->stuck_answer_settings($defaults);
    my $shared = Serow::Shared->new(1);
    # (a missing one is refused before anything is answered: no descriptor
    # is needed)
    for my $name (sort keys %$settings) {
        my %less = %$settings;
        delete $less{$name};
        ok !eval { $shared->answer_app_connection(0, -1, 0, -1, \%less); 1 }, "without $name: refused";
        like $@, qr/\ASerow::Shared->answer_app_connection: no '\Q$name\E' setting/, "the error names $name";
    }
};

# 75 s, above the idle timeouts of the proxies in front (nginx's upstream
# keepalive_timeout, 60 s; AWS ALB, 60 s), which must close first: the value
# the worker's loop and the holder get when no option is given.
subtest 'the default keep-alive timeout reaches the worker and the holder' => sub {
    is $defaults->{keepalive_timeout}, 75, 'the table says 75';
    is(Serow::Worker->loop_settings($defaults)->{keepalive_timeout}, 75, 'the worker loop gets 75');
    is(Serow::ConnectionHolder->settings($defaults)->{keepalive_timeout}, 75, 'the holder gets 75');
};

done_testing;
