# A streamed response (psgi.streaming): eight writes, no Content-Length, so an
# HTTP/1.1 server sends it chunked.
sub {
    return sub {
        my ($respond) = @_;
        my $writer = $respond->([200, ['Content-Type' => 'text/plain']]);
        $writer->write("line $_ of a response written in eight pieces\n") for 1 .. 8;
        $writer->close;
    };
};
