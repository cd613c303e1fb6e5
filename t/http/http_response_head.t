# A response's head (src/http/http_response_head.c), as the holder reads a
# worker's answer to a WebSocket's events: t/http/http_response_head.c, built
# with the system C compiler (and ASan + UBSan when they work here).
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test::CProgram ();

Serow::Test::CProgram::test_program(name => 'http_response_head',
    sources => [qw(t/http/http_response_head.c src/http/http_response_head.c)]);

done_testing;
