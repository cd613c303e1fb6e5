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
Serow::Test::CProgram::test_program(name => 'websocket_frame', includes => ['src', 'fuzz'],
    sources => [qw(t/http/websocket_frame.c src/http/websocket_frame.c fuzz/websocket_frame_target.c
                   fuzz/replay.c)],
    args => [grep { -d } map { "$root/fuzz/$_/websocket_frame" } qw(regression corpus)]);

done_testing;
