# (b) Every request blocks its worker for 10 ms, as a call to a slow backend would.
use Time::HiRes ();
my $body = "slept 10ms\n";
sub {
    Time::HiRes::sleep(0.010);
    return [200, ['Content-Type' => 'text/plain', 'Content-Length' => length $body], [$body]];
};
