# A real file handle as the body: the server may sendfile(2) it.
# bench/run creates the file and names it in SEROW_BENCH_FILE.
my $file = $ENV{SEROW_BENCH_FILE} or die "SEROW_BENCH_FILE is not set\n";
my $size = -s $file or die "$file: $!\n";
sub {
    open my $fh, '<', $file or die "$file: $!";
    return [200, ['Content-Type' => 'application/octet-stream', 'Content-Length' => $size], $fh];
};
