# The holder's ordered deadlines (src/holder/deadline_list.h), behind the
# WebSockets' idle pings and keep-alives: t/websocket/deadline_list.c, built
# with the system C compiler and ASan + UBSan when they work here.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test::CProgram ();

Serow::Test::CProgram::test_program(name => 'deadline_list', sources => [qw(t/websocket/deadline_list.c)]);

done_testing;
