# The WebSocket frame codec (src/http/websocket_frame.c): t/http/websocket_frame.c,
# built with the system C compiler (and ASan + UBSan when they work here),
# checks frame heads, unmasking, UTF-8, close codes, the reader on streams
# however they arrive and the server's frames; then runs the fuzz target
# (fuzz/websocket_frame_target.c) on its seeds and regression inputs.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test ();
use Serow::Test::CProgram ();

my $root = Serow::Test::root();
my $build = Serow::Test::CProgram::build(name => 'websocket_frame', includes => ['src', 'fuzz'],
    sources => [qw(t/http/websocket_frame.c src/http/websocket_frame.c fuzz/websocket_frame_target.c)]);
plan skip_all => 'no C compiler (build-essential)' unless $build->{compiler};
is $build->{status}, 0, "compiled with $build->{compiler}" . ($build->{sanitized} ? ' and ASan + UBSan' : '')
    or diag $build->{output};
SKIP: {
    skip 'not compiled', 1 unless $build->{binary};
    my @dirs = grep { -d } map { "$root/fuzz/$_/websocket_frame" } qw(regression corpus);
    Serow::Test::CProgram::report(Serow::Test::CProgram::run($build->{binary}, @dirs), 'the checks');
}

done_testing;
