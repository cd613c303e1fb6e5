# The holder's channel store (src/holder/channel_store.c): t/holding/channel_store.c,
# built with the system C compiler and ASan + UBSan when they work here.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test::CProgram ();

Serow::Test::CProgram::test_program(name => 'channel_store',
    sources => [qw(t/holding/channel_store.c src/holder/channel_store.c src/shared/holder_message.c src/http/grip_instruct.c)]);

done_testing;
