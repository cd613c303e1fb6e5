# The smallest PSGI app: serow eg/hello.psgi
sub {
    my ($env) = @_;
    return [200, ['Content-Type' => 'text/plain'], ["Hello, world!\n"]];
};
