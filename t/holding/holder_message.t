# The messages the connection holder is sent about held connections, a
# publish and a hold (src/shared/holder_message.c): t/holding/holder_message.c,
# built with the system C compiler and ASan + UBSan when they work here.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test::CProgram ();

Serow::Test::CProgram::test_program(name => 'holder_message',
    sources => [qw(t/holding/holder_message.c src/shared/holder_message.c src/http/grip_instruct.c)]);

done_testing;
