# bench/tls-run's app: the 11-byte hello at every path but /big.bin, which is
# the file named in SEROW_BENCH_FILE as a real file handle (the server may
# send it with its transport's sendfile path).
my $body = "Hello World";
my $file = $ENV{SEROW_BENCH_FILE} or die "SEROW_BENCH_FILE is not set\n";
sub {
    my ($env) = @_;
    if ($env->{PATH_INFO} eq '/big.bin') {
        open my $fh, '<', $file or die "$file: $!";
        return [200, ['Content-Type' => 'application/octet-stream', 'Content-Length' => -s $fh], $fh];
    }
    return [200, ['Content-Type' => 'text/plain', 'Content-Length' => length $body], [$body]];
};
