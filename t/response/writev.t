# An array body leaves with its status line and headers in one writev,
# whatever the number of parts: strace counts the worker's writes for one
# response.
use strict;
use warnings;
use Test::More;
use Digest::MD5 qw(md5_hex);
use lib 't/lib';
use Serow::Test qw(start_server raw_connect read_response);
use Serow::Test::Trace qw(have_strace worker_pids trace_syscalls mark client_writes);

plan skip_all => 'strace is not installed (tools/setup installs it)' unless have_strace();

# /PARTS/SIZE: PARTS parts of SIZE bytes each
sub body_parts {
    my ($parts, $size) = @_;
    return [map { chr(65 + $_ % 26) x $size } 0 .. $parts - 1];
}

my $app = sub {
    my ($env) = @_;
    if ($env->{PATH_INFO} eq '/mark') {
        mark();
        return [204, [], []];
    }
    my ($parts, $size) = $env->{PATH_INFO} =~ m{\A/(\d+)/(\d+)\z}
        or return [404, ['Content-Type' => 'text/plain'], ['not found']];
    return [200, ['Content-Type' => 'application/octet-stream'], body_parts($parts, $size)];
};

for my $listen (qw(tcp unix)) {
    my $server = start_server(app => $app, options => ['--workers', 1], listen => $listen);
    my $sock = raw_connect($server);
    # The first request makes sure the worker is up and has this connection.
    syswrite $sock, "GET /1/1 HTTP/1.1\r\nHost: x\r\n\r\n";
    is read_response($sock)->{status}, 200, "$listen: warm-up request";
    my ($worker) = worker_pids($server->pid);
    ok $worker, "$listen: the worker's pid";

    # Bodies are kept under 100 KB: the socket buffers take them whole, so
    # the kernel has no reason to accept less than all in one call.
    for my $case ([1, 100], [300, 100], [1023, 50], [3000, 20], [1, 100_000]) {
        my ($parts, $size) = @$case;
        for my $method (qw(GET HEAD)) {
            my $res;
            my @calls = trace_syscalls($worker, sub {
                syswrite $sock, "$method /$parts/$size HTTP/1.1\r\nHost: x\r\n\r\n";
                $res = read_response($sock, head_request => $method eq 'HEAD');
                syswrite $sock, "GET /mark HTTP/1.1\r\nHost: x\r\n\r\n";
                read_response($sock);
            });
            my $name = "$listen: $method, $parts parts of $size bytes";
            my $length = $parts * $size;
            is $res->{status}, 200, "$name: 200";
            is $res->{headers}{'content-length'}, $length, "$name: Content-Length";
            if ($method eq 'GET') {
                is md5_hex($res->{body}), md5_hex(join '', @{ body_parts($parts, $size) }),
                    "$name: the body is intact";
            }
            my @out = client_writes(@calls);
            is scalar(@out), 1, "$name: one write system call"
                or diag explain \@out;
            is $out[0]{name}, 'writev', "$name: a writev";
            my $expected = $res->{head_length} + ($method eq 'GET' ? $length : 0);
            is $out[0]{result}, $expected, "$name: it sent the whole response ($expected bytes)";
            if ($method eq 'GET') {
                my ($iovecs) = $out[0]{args} =~ /,\s*(\d+)\z/;
                my $want = $parts + 1 <= 1024 ? $parts + 1 : 1024;
                is $iovecs, $want, "$name: $want iovecs";
            }
        }
    }
    is $server->stop, 0, "$listen: the server stops cleanly";
}

done_testing;
