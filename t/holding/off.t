use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Holding ();
use Serow::Test qw(start_server http_get);

# Without --grip, Grip-* headers are the app's like any other: they pass to
# the client and nothing is held (the response is answered and ends).

my $app = sub {
    return [200, ['Content-Type' => 'text/event-stream', 'Grip-Hold' => 'stream',
        'Grip-Channel' => 'news'], [":ok\n\n"]];
};
my $server = start_server(app => $app, options => ['--workers', 1]);
my $res = http_get($server, '/');
is $res && $res->{status}, 200, 'answered';
is $res && $res->{headers}{'grip-hold'}, 'stream', 'Grip-Hold passes';
is $res && $res->{headers}{'grip-channel'}, 'news', 'Grip-Channel passes';
is $res && $res->{body}, ":ok\n\n", 'the body, whole: nothing held';
my $publish = eval { Serow::Holding::publish({ channel => 'x', http_stream => { content => 'y' } }) };
like $@, qr/Serow::Holding::publish: no connection holder/, 'publish outside a worker of a --grip server dies';
is $server->stop, 0, 'clean stop';
done_testing;
