# The 11-byte hello app of the throughput scenarios.
my $body = "Hello World";
sub { [200, ['Content-Type' => 'text/plain', 'Content-Length' => length $body], [$body]] };
