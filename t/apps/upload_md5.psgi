# Reads the whole request body from psgi.input and answers with its md5 and
# length, the worker's pid, and the worker's peak RSS (VmHWM) after reading.
use Digest::MD5 ();
sub {
    my ($env) = @_;
    my $md5 = Digest::MD5->new;
    my $length = 0;
    while (my $n = $env->{'psgi.input'}->read(my $part, 65536)) {
        $md5->add($part);
        $length += $n;
    }
    my $hwm_kb = -1;
    if (open(my $fh, '<', '/proc/self/status')) {
        ($hwm_kb) = join('', <$fh>) =~ /^VmHWM:\s+(\d+) kB/m;
    }
    return [200, ['Content-Type' => 'text/plain'],
        ["md5 " . $md5->hexdigest . " length $length pid $$ hwm_kb $hwm_kb\n"]];
};
