# The input buffers of connections, kept for reuse between requests
# (src/connection.c): t/connection/buffers.c, built with the system C compiler
# and ASan + UBSan when they work here (Serow::Test::CProgram).
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test::CProgram ();

my $build = Serow::Test::CProgram::build(name => 'buffers',
    sources => [qw(t/connection/buffers.c src/connection.c)]);
plan skip_all => 'no C compiler (build-essential)' unless $build->{compiler};
is $build->{status}, 0, "compiled with $build->{compiler}" . ($build->{sanitized} ? ' and ASan + UBSan' : '')
    or diag $build->{output};
SKIP: {
    skip 'not compiled', 1 unless $build->{binary};
    Serow::Test::CProgram::report(Serow::Test::CProgram::run($build->{binary}), 'the checks');
}

done_testing;
