# Reads the whole request body (wrk POSTs 64 KiB) and says how much it read.
sub {
    my ($env) = @_;
    # Feersum gives a request without a body (bench/run's GET that waits
    # for the server to answer) no psgi.input at all.
    my $input = $env->{'psgi.input'};
    my $total = 0;
    while ($input && (my $n = $input->read(my $buffer, 65536))) {
        $total += $n;
    }
    my $body = "read $total bytes";
    return [200, ['Content-Type' => 'text/plain', 'Content-Length' => length $body], [$body]];
};
