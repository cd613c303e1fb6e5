# permessage-deflate (src/http/websocket_deflate.c): t/http/websocket_deflate.c,
# built with the system C compiler (and ASan + UBSan when they work here),
# checks the offers read (RFC 7692 sections 5 and 7), the response, and
# messages both ways: round trips at every window, the window kept, the
# limit on what a message inflates to; then runs the fuzz target
# (fuzz/websocket_deflate_target.c) on its seeds and regression inputs.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test ();
use Serow::Test::CProgram ();

my $root = Serow::Test::root();
my $build = Serow::Test::CProgram::build(name => 'websocket_deflate', includes => ['src', 'fuzz'],
    sources => [qw(t/http/websocket_deflate.c src/http/websocket_deflate.c fuzz/websocket_deflate_target.c)],
    libs => ['-lz']);
plan skip_all => 'no C compiler (build-essential)' unless $build->{compiler};
is $build->{status}, 0, "compiled with $build->{compiler}" . ($build->{sanitized} ? ' and ASan + UBSan' : '')
    or diag $build->{output};
SKIP: {
    skip 'not compiled', 1 unless $build->{binary};
    my @dirs = grep { -d } map { "$root/fuzz/$_/websocket_deflate" } qw(regression corpus);
    Serow::Test::CProgram::report(Serow::Test::CProgram::run($build->{binary}, @dirs), 'the checks');
}

done_testing;
