use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Test qw(start_server raw_connect send_all read_response);

# The test transport (SEROW_TEST_TRANSPORT=short, src/connection/transport.c) really
# reads and writes short: each process that used it logs its counts at debug
# level when it exits.  Without this, t/transport/short_io.t could pass with
# every byte on the plain path.

# An app that echoes its body and adds to it: the server reads the body, and
# writes a response of many bytes.
my $app = sub {
    my ($env) = @_;
    my $in = '';
    while ($env->{'psgi.input'}->read(my $buf, 16384)) { $in .= $buf }
    return [200, ['Content-Type' => 'text/plain'], [$in, 'z' x 50000]];
};

sub exchange {
    my ($server) = @_;
    my $sock = raw_connect($server);
    my $body = join '', map { chr(65 + $_ % 26) x 100 } 0 .. 999;
    my $buffer = '';
    for my $i (1 .. 3) {
        send_all($sock, "POST /$i HTTP/1.1\r\nHost: x\r\nContent-Length: " . length($body)
            . "\r\n\r\n$body", buffer => \$buffer);
        my $res = read_response($sock, buffer => \$buffer);
        ok $res && $res->{status} == 200 && $res->{body} eq $body . ('z' x 50000),
            "request $i: its body echoed whole";
    }
}

# The counts the processes logged, summed.
sub short_counts {
    my ($log) = @_;
    my %sum = map { $_ => 0 } qw(reads_short reads writes_short writes eagain processes);
    while ($log =~ /short transport: (\d+) of (\d+) reads and (\d+) of (\d+) writes shortened, (\d+) EAGAIN made up/g) {
        $sum{reads_short} += $1;
        $sum{reads} += $2;
        $sum{writes_short} += $3;
        $sum{writes} += $4;
        $sum{eagain} += $5;
        $sum{processes}++;
    }
    return \%sum;
}

subtest 'SEROW_TEST_TRANSPORT=short: reads and writes are short, EAGAIN made up' => sub {
    my $server = start_server(app => $app, options => ['--workers', 1, '--log-level', 'debug'],
        env => { SEROW_TEST_TRANSPORT => 'short:12345' });
    exchange($server);
    is $server->stop, 0, 'the server stops cleanly';
    my $log = $server->log;
    like $log, qr/short transport in process \d+, seed 12345/, 'the worker says it uses it, with the seed';
    my $counts = short_counts($log);
    ok $counts->{processes} >= 1, 'its counts are logged at the exit' or diag $log;
    cmp_ok $counts->{reads_short}, '>', 0, 'reads were shortened';
    cmp_ok $counts->{writes_short}, '>', 0, 'writes were shortened';
    cmp_ok $counts->{eagain}, '>', 0, 'EAGAIN was made up';
    note explain $counts;
};

subtest 'without it (or with a name it does not know) the plain transport serves' => sub {
    for my $value ('', 'bogus') {
        my $server = start_server(app => $app, options => ['--workers', 1, '--log-level', 'debug'],
            env => { SEROW_TEST_TRANSPORT => $value });
        exchange($server);
        is $server->stop, 0, 'the server stops cleanly';
        my $log = $server->log;
        unlike $log, qr/short transport/, "SEROW_TEST_TRANSPORT='$value': no short transport";
        if (length $value) {
            like $log, qr/SEROW_TEST_TRANSPORT=bogus names no test transport/, 'an unknown name is said';
        }
    }
};

done_testing;
