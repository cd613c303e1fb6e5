# The app of the soak (bench/soak, t/hardening/soak.t):
#   /hello               a short answer
#   /upload              reads the body; answers "length N md5 HEX"
#   /stream?n=N&size=S   N writes of S bytes through the streaming writer
use Digest::MD5 ();
sub {
    my ($env) = @_;
    my $path = $env->{PATH_INFO};
    if ($path eq '/upload') {
        my $md5 = Digest::MD5->new;
        my $length = 0;
        while (my $n = $env->{'psgi.input'}->read(my $part, 65536)) {
            $md5->add($part);
            $length += $n;
        }
        return [200, ['Content-Type' => 'text/plain'], ["length $length md5 " . $md5->hexdigest]];
    }
    if ($path eq '/stream') {
        my %q = map { split /=/, $_, 2 } split /&/, $env->{QUERY_STRING} // '';
        my $n = $q{n} // 8;
        my $piece = 'x' x ($q{size} // 100);
        return sub {
            my ($respond) = @_;
            my $writer = $respond->([200, ['Content-Type' => 'text/plain']]);
            $writer->write($piece) for 1 .. $n;
            $writer->close;
        };
    }
    return [200, ['Content-Type' => 'text/plain'], ['hello']];
};
