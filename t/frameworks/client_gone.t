# A client that leaves mid-stream, with real frameworks streaming through
# the server's writer: HTML::Mason's streaming PSGI handler (what Request
# Tracker runs on), Dancer2's delayed response and Mojolicious's PSGI
# adapter (a body read with getline).  Each must leave no error in the
# server's error log (the framework's own logging goes there too: a dying
# write would be logged by Mason's caller and by Dancer2) and a 499 line in
# the access log.  The server's side alone: t/response/client_gone.t.
use strict;
use warnings;
use Test::More;
use File::Temp ();
use lib 't/lib';
use Serow::Test qw(need_debian_packages start_server raw_connect read_until_match wait_until root http_get);

need_debian_packages(qw(libhtml-mason-psgihandler-perl libdancer2-perl libmojolicious-perl));

sub access_lines {
    my ($file) = @_;
    open(my $fh, '<', $file) or return ();
    return map { chomp; $_ } <$fh>;
}

for my $case (['Mason', 'mason.psgi', '/big.html', '/hello.html'], ['Dancer2', 'dancer2.psgi', '/big', '/hello/x'],
              ['Mojolicious', 'mojolicious.psgi', '/big', '/hello/x']) {
    my ($name, $file, $path, $next) = @$case;
    subtest "$name: the client leaves mid-stream" => sub {
        my $dir = File::Temp->newdir;
        my $access = "$dir/access.log";
        my $lib = root() . '/t/lib';
        my $server = start_server(app_file => "t/frameworks/apps/$file",
            options => ['--workers', 1, '--access-log', $access, '--access-log-format', '%r|%>s'],
            env => { PERL5LIB => join(':', $lib, grep { defined && length } $ENV{PERL5LIB}) });
        ok $server->wait_for_log(qr/worker \d+ started/, 120), 'started' or return diag $server->log;

        my $sock = raw_connect($server);
        syswrite $sock, "GET $path HTTP/1.1\r\nHost: x\r\n\r\n";
        like read_until_match($sock, qr/\r\n\r\n.+/s), qr{\AHTTP/1.1 200 OK}, 'the stream started'
            or diag $server->log;
        close $sock; # the rest unread: the kernel resets the connection

        my $status;
        ok wait_until(sub {
            ($status) = map { /\|(\d+)\z/ } grep { m{\AGET \Q$path\E } } access_lines($access);
            defined $status;
        }), 'the request is in the access log';
        is $status, 499, 'with status 499';
        is http_get($server, $next)->{status}, 200, 'the worker serves on';
        is $server->stop, 0, 'the server stops cleanly';
        unlike $server->log, qr/\[error\]|error/i, 'no error in the error log' or diag $server->log;
    };
}

done_testing;
