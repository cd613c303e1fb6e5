# An 8 KiB body (8192 bytes), as one string.
my $body = 'x' x 8192;
sub { [200, ['Content-Type' => 'text/plain', 'Content-Length' => length $body], [$body]] };
