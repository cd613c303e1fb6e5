# The Grip-* headers of an app's response read into one struct
# (src/http/grip_instruct.c): t/holding/grip_instruct.c, built with the
# system C compiler and ASan + UBSan when they work here.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test::CProgram ();

Serow::Test::CProgram::test_program(name => 'grip_instruct',
    sources => [qw(t/holding/grip_instruct.c src/http/grip_instruct.c)]);

done_testing;
