# Date (RFC 9110 6.6.1): an origin server with a clock sends Date in its 2xx,
# 3xx and 4xx responses (Serow in all of them, its own errors included), as an
# IMF-fixdate, once; an app's own Date is kept instead of added to.
use strict;
use warnings;
use Test::More;
use HTTP::Date ();
use lib 't/lib';
use Serow::Test qw(start_server raw_request parse_response);

my $server = start_server(app => sub {
    my ($env) = @_;
    return [200, ['Date' => 'Thu, 01 Jan 1970 00:00:00 GMT'], ['old']] if $env->{PATH_INFO} eq '/own-date';
    return sub { my $w = $_[0]->([200, []]); $w->write('x'); $w->close } if $env->{PATH_INFO} eq '/stream';
    return [404, [], ['not here']] if $env->{PATH_INFO} eq '/missing';
    return [200, [], ['ok']];
}, options => ['--workers', 1]);

my $imf_fixdate = qr/\A(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} \d\d:\d\d:\d\d GMT\z/;

for my $case (['/ok', 'an array response'], ['/stream', 'a streamed response'],
              ['/missing', "the app's 404"]) {
    my ($path, $name) = @$case;
    subtest $name => sub {
        my $res = parse_response(raw_request($server, "GET $path HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
        my @dates = grep { lc $_->[0] eq 'date' } @{ $res->{header_list} };
        is scalar @dates, 1, 'one Date';
        like $dates[0][1], $imf_fixdate, 'an IMF-fixdate';
        my $t = HTTP::Date::str2time($dates[0][1]);
        ok $t && abs($t - time) < 3600, 'that is about now';
    };
}

subtest "the server's own error responses" => sub {
    for my $bad ("GET / HTTP/1.1\r\n\r\n", "GET / HTTP/2.0\r\nHost: x\r\n\r\n") {
        my $res = parse_response(raw_request($server, $bad));
        like $res->{headers}{date} // '', $imf_fixdate, "$res->{status}: Date";
    }
};

subtest "an app's own Date is kept, not doubled" => sub {
    my $res = parse_response(raw_request($server, "GET /own-date HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
    my @dates = grep { lc $_->[0] eq 'date' } @{ $res->{header_list} };
    is_deeply [map { $_->[1] } @dates], ['Thu, 01 Jan 1970 00:00:00 GMT'];
};

is $server->stop, 0, 'the server stops cleanly';
done_testing;
