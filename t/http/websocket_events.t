# GRIP's WebSocket-over-HTTP events (src/http/websocket_events.c):
# t/http/websocket_events.c, built with the system C compiler (and ASan +
# UBSan when they work here), checks the events' encoding and parsing, what
# an app's messages mean with GRIP, control messages and the grip
# extension; then runs the fuzz target (fuzz/websocket_events_target.c) on
# its seeds and regression inputs.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test ();
use Serow::Test::CProgram ();

my $root = Serow::Test::root();
Serow::Test::CProgram::test_program(name => 'websocket_events', includes => ['src', 'fuzz'],
    sources => [qw(t/http/websocket_events.c src/http/websocket_events.c src/http/websocket_frame.c
                   src/http/grip_instruct.c fuzz/websocket_events_target.c fuzz/replay.c)],
    args => [grep { -d } map { "$root/fuzz/$_/websocket_events" } qw(regression corpus)]);

done_testing;
