use strict;
use warnings;
use Test::More;
use File::Find ();
use lib 't/lib';
use Serow::Test qw(root);

# One seam for a connection's bytes (src/connection/transport.h): outside the transport,
# the C reads and writes no socket but those named here, none of them a
# client connection.  A call on a client connection anywhere else would
# bypass the transport (TLS would see its bytes unencrypted; the short test
# transport of t/transport/short_io.t would not shorten them): it goes
# through serow_transport_*, or, if it is no client connection's, here with
# what it reads or writes.

my $CALL = qr/\b(recv|recvfrom|recvmsg|read|readv|pread|write|writev|pwrite|send|sendto|sendmsg|sendfile|splice|shutdown)\s*\(/;

# file name => { call => what it is on }
my %NOT_A_CLIENT = (
    'access_log.c'        => { write => 'the access log file' },
    'log.c'               => { write => 'the error log (stderr)', sendmsg => 'the syslog socket' },
    'fd_passing.c'        => { sendmsg => "Serow's own channels", recvmsg => "Serow's own channels" },
    'shared_state.c'      => { write => "a worker's eventfd" },
    'worker_loop.c'       => { write => "the holder's eventfd", read => "the worker's own eventfd" },
    'connection_holder.c' => { read => "the holder's own eventfd" },
    'busy_worker.c'       => { read => "a worker's /proc files" },
    'connection_transfer.c' => { write => "a worker's eventfd" },
    'psgi_response.c'     => { pread => 'a file the app gave as its body' },
    'websocket_holds.c'   => { write => 'a socket pair to a worker', read => 'a socket pair to a worker' },
);
# (tls_transport.c is a transport: its calls are the seam's own)
my %TRANSPORT = map { $_ => 1 } qw(transport.c transport.h tls_transport.c);

my $root = root();
my @files;
File::Find::find(sub { push @files, $File::Find::name if /\.(?:c|h)\z/ }, "$root/src");
push @files, "$root/Serow.xs", glob("$root/xs/*.xsh");
ok scalar(grep { m{/transport\.h\z} } @files), 'the seam is there (src/connection/transport.h)';

my %seen;
for my $path (sort @files) {
    (my $name = $path) =~ s{.*/}{};
    next if $TRANSPORT{$name};
    open my $fh, '<', $path or die "$path: $!";
    my $text = do { local $/; <$fh> };
    $text =~ s{/\*.*?\*/}{ my $c = $&; $c =~ tr/\n//cd; $c }gse; # comments, keeping line numbers
    $text =~ s{//[^\n]*}{}g;
    $text =~ s{"(?:[^"\\\n]|\\.)*"}{""}g;                       # strings
    my $line = 0;
    for my $l (split /\n/, $text) {
        $line++;
        while ($l =~ /$CALL/g) {
            my $call = $1;
            $seen{$name}{$call} = 1;
            ok $NOT_A_CLIENT{$name}{$call}, "$name:$line: $call( is on $NOT_A_CLIENT{$name}{$call}"
                if $NOT_A_CLIENT{$name}{$call};
            ok 0, "$name:$line: $call( outside the transport: a client connection's bytes go "
                . 'through serow_transport_* (src/connection/transport.h)' unless $NOT_A_CLIENT{$name}{$call};
        }
    }
}
# The list above stays true: each exception is still there to be excused.
# (A file that moved to a folder keeps its name.)
for my $name (sort keys %NOT_A_CLIENT) {
    for my $call (sort keys %{ $NOT_A_CLIENT{$name} }) {
        ok $seen{$name}{$call}, "$name still calls $call( (else drop it from this list)";
    }
}
done_testing;
