# The holder's link to Redis (src/holder/redis_link.c) against a real
# redis-server: t/holding/redis_link.c, built with the system C compiler
# (and ASan + UBSan when they work here), starts it on a port picked here
# from the OS, stops it and starts it again (a reconnect).
use strict;
use warnings;
use Test::More;
use File::Temp ();
use Net::EmptyPort ();
use lib 't/lib';
use Serow::Test::Components qw(need_debian_packages);
use Serow::Test::CProgram ();

need_debian_packages('redis-server');
my $redis_server = (grep { -x } map { "$_/redis-server" } split /:/, "$ENV{PATH}:/usr/bin:/usr/sbin")[0]
    or plan skip_all => 'redis-server is installed but not found in PATH';

my $dir = File::Temp->newdir;
Serow::Test::CProgram::test_program(name => 'redis_link',
    sources => [qw(t/holding/redis_link.c src/holder/redis_link.c src/shared/holder_message.c
                   src/http/grip_instruct.c src/log/log.c)],
    libs => ['-lhiredis'],
    # A free port once built; redis-server binds it a moment later (and again
    # after its restart), which another process could take first: then its
    # start fails and says so.
    args => sub { ($redis_server, Net::EmptyPort::empty_port(), "$dir") });

done_testing;
