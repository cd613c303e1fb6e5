# Integers the app returns (a status of 200, Content-Length => length $body,
# other header values) are written in decimal by Serow itself
# (src/psgi/psgi_response.c), not stringified by perl: the bytes must be the
# same, negative and 64-bit numbers and more integer headers than the few
# it formats on its own included; and the app's values stay as they were.
use strict;
use warnings;
use Test::More;
use B ();
use lib 't/lib';
use Serow::Test qw(start_server raw_request parse_response);

my @headers = (
    'Content-Type' => 'text/plain',
    'X-Zero' => 0, 'X-Negative' => -12, 'X-Big' => 9_007_199_254_740_993,
    'X-Most-Negative' => -9_223_372_036_854_775_807 - 1,
    'X-Fifth' => 5, 'X-Sixth' => 6,
    'X-Float' => 1.5, 'X-Numeric-String' => '007',
);
my $status = 201;

# The response sent last, as the app returned it: its integers must still
# be integers only (no string made of them) once sent.
my $last;
my $app = sub {
    my ($env) = @_;
    my $body = 'integers: ' . ($last ? join ',', map {
        B::svref_2object(\$_)->FLAGS & B::SVp_POK() ? 'made a string' : 'kept'
    } $last->[0], @{ $last->[1] }[3, 5] : 'none yet');
    return $last = [$status, [@headers, 'Content-Length' => length $body], [$body]];
};

my $server = start_server(app => $app, options => ['--workers', 1]);
for my $try (1, 2) {
    my $res = parse_response(raw_request($server, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
    is $res->{status}, 201, "request $try: the status";
    my $h = $res->{headers};
    is $h->{'x-zero'}, '0', 'zero';
    is $h->{'x-negative'}, '-12', 'a negative number';
    is $h->{'x-big'}, '9007199254740993', 'a 64-bit number';
    is $h->{'x-most-negative'}, '-9223372036854775808', 'the most negative';
    is $h->{'x-fifth'}, '5', 'a fifth integer header';
    is $h->{'x-sixth'}, '6', 'a sixth';
    is $h->{'x-float'}, '1.5', 'a float';
    is $h->{'x-numeric-string'}, '007', 'a string of digits';
    is $h->{'content-length'}, length $res->{body}, 'Content-Length';
    is $res->{body}, $try == 1 ? 'integers: none yet' : 'integers: kept,kept,kept',
        'the integers of the response before were not made strings' if $try == 2;
}
$server->stop;
done_testing;
