# (c) /slow blocks its worker for 50 ms; anything else answers at once.  The
# load generator sends every 50th request to /slow: 2% of the requests.
use Time::HiRes ();
my $body = "Hello World";
sub {
    my ($env) = @_;
    Time::HiRes::sleep(0.050) if $env->{PATH_INFO} eq '/slow';
    return [200, ['Content-Type' => 'text/plain', 'Content-Length' => length $body], [$body]];
};
