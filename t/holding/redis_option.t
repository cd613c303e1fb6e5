use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test qw(run_serow);
use Serow::Options ();
use Serow::Publish::Redis ();
use Serow::ConnectionHolder ();

# --publish-redis redis://HOST:PORT[/PREFIX]: read into the parts the holder
# takes, a bad URL refused at start with a message naming the option and
# what is wrong (no Redis needed: nothing here connects).

is_deeply(Serow::Publish::Redis->parse('redis://10.0.0.5:6380/shop'),
    { host => '10.0.0.5', port => 6380, prefix => 'shop' }, 'host, port and prefix');
is_deeply(Serow::Publish::Redis->parse('redis://redis.internal'),
    { host => 'redis.internal', port => 6379, prefix => 'serow' }, 'the port 6379 and the prefix serow when left out');
is_deeply(Serow::Publish::Redis->parse('REDIS://[::1]:7000/'),
    { host => '::1', port => 7000, prefix => 'serow' }, 'an IPv6 address; an empty prefix is the default');

my %bad = (
    'http://127.0.0.1:6379'        => qr/not redis:\/\/HOST:PORT\[\/PREFIX\]/,
    'redis://127.0.0.1:6379/a?b=1' => qr/no query or fragment/,
    'rediss://127.0.0.1:6379'      => qr/TLS\) is not supported/,
    'unix:///run/redis.sock'       => qr/a socket path is not supported/,
    'redis://user:pw@127.0.0.1:1'  => qr/a user or password is not supported/,
    'redis://:6379'                => qr/no host/,
    'redis://a b:6379'             => qr/not a name, an IPv4 address or an \[IPv6\] address/,
    'redis://127.0.0.1:0'          => qr/the port 0 is not between 1 and 65535/,
    'redis://127.0.0.1:65536'      => qr/the port 65536 is not between 1 and 65535/,
    'redis://127.0.0.1:6379/a*'    => qr/the prefix 'a\*' is not 1 to 64 bytes/,
    'redis://127.0.0.1:6379/' . ('p' x 65) => qr/the prefix 'p+' is not 1 to 64 bytes/,
);
for my $url (sort keys %bad) {
    ok !eval { Serow::Publish::Redis->parse($url); 1 }, "'$url' refused";
    like $@, qr/\A--publish-redis: '\Q$url\E': /, 'naming the option and the URL';
    like $@, $bad{$url}, 'saying what is wrong';
}

# The holder's settings: none without the option, the parts with it.
my $off = Serow::ConnectionHolder->settings(Serow::Options->defaults);
is_deeply [@$off{qw(redis_host redis_port redis_prefix)}], ['', 0, ''], 'without the option: no Redis for the holder';
my $on = Serow::ConnectionHolder->settings({ %{ Serow::Options->defaults }, grip => 1,
    publish_redis => 'redis://127.0.0.1:6390/live' });
is_deeply [@$on{qw(redis_host redis_port redis_prefix)}], ['127.0.0.1', 6390, 'live'], 'with it: its parts';

# Refused by serow at start, before anything listens.
my ($status, $output) = run_serow('--publish-redis', 'redis://127.0.0.1:99999', 't/apps/pid.psgi');
isnt $status, 0, 'serow with a bad --publish-redis: refused';
like $output, qr/--publish-redis: 'redis:\/\/127\.0\.0\.1:99999': the port 99999 is not between 1 and 65535/, 'saying why';
unlike $output, qr/listening on/, 'before it listens';

like(Serow::Options->help_text, qr/--publish-redis=URL +.*redis:\/\/HOST:PORT\[\/PREFIX\]/, '--help names the URL form');

done_testing;
