# The holder's channel store (src/holder/channels.c): t/holding/channels.c,
# built with the system C compiler and ASan + UBSan when they work here.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test::CProgram ();

Serow::Test::CProgram::test_program(name => 'channels',
    sources => [qw(t/holding/channels.c src/holder/channels.c src/shared/holder_message.c src/http/grip_instruct.c)]);

done_testing;
