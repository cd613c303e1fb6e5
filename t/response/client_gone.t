# A client that leaves mid-response: the writer's writes are dropped
# without a word (no die for the app or its framework to log), the access
# log says 499 (nginx's "client closed request"), /metrics counts it as
# serow_requests_total{code="499"}, the error log has no error, and the
# app can ask $writer->gone.  The frameworks' side: t/frameworks/client_gone.t.
use strict;
use warnings;
use Test::More;
use File::Temp ();
use lib 't/lib';
use Serow::Test qw(start_server raw_connect read_response wait_until);
use Serow::Test::Client qw(read_until_match);
use Serow::Test::Prometheus qw(parse value);

my $dir = File::Temp->newdir;
my $access = "$dir/access.log";
my %result; # what the app saw, by path, for /result
my $PART = 'x' x 65536;

my $app = sub {
    my ($env) = @_;
    my $path = $env->{PATH_INFO};
    my @type = ('Content-Type' => 'text/plain');
    if ($path eq '/result') {
        my ($of) = $env->{QUERY_STRING} =~ /of=(\S+)/;
        return [200, [@type], [$result{$of} // 'none']];
    }
    if ($path eq '/endless') {
        # Bounded all the same (100 MB): every write after the client left
        # is dropped, and none dies.
        my ($n) = ($env->{QUERY_STRING} =~ /n=(\d+)/, 1600);
        return sub {
            my $w = $_[0]->([200, [@type]]);
            my ($writes, $gone_at) = (0);
            my $ok = eval {
                for (1 .. $n) {
                    $w->write($PART);
                    $writes++;
                    $gone_at //= $writes if $w->gone;
                }
                1;
            };
            my $sent = $w->send('more');
            $w->close;
            $result{endless} = $ok ? "writes $writes gone " . ($gone_at ? 'seen' : 'never') . ' send ' . ($sent ? 1 : 0)
                                   : "died: $@";
        };
    }
    if ($path eq '/ask') {
        # Nothing written after the first part: the app asks until the
        # client has hung up (at most 60 s).
        return sub {
            my $w = $_[0]->([200, [@type]]);
            $w->write("first\n");
            my $deadline = time + 60;
            select undef, undef, undef, 0.01 until $w->gone || time > $deadline;
            $result{ask} = $w->gone ? 'gone' : 'still there';
            $w->write("dropped\n");
            $w->close;
        };
    }
    if ($path eq '/dies-after') {
        # A framework that dies once its client has gone (as one whose own
        # check says so might): no error of the app's either.
        return sub {
            my $w = $_[0]->([200, [@type]]);
            for (1 .. 1600) { $w->write($PART); last if $w->gone }
            die "the app's own die after its client left\n" if $w->gone;
            $w->close;
        };
    }
    if ($path eq '/poll') {
        return sub {
            my $w = $_[0]->([200, [@type]]);
            my $ok = eval { $w->poll_cb(sub { $_[0]->write($PART) }); 1 };
            $result{poll} = $ok ? 'returned' : "died: $@";
        };
    }
    if ($path eq '/lines') {
        # A body handle (what Mojolicious's PSGI adapter returns): its lines
        # stop at the first that finds the client gone, its close is called.
        my $n = 0;
        my $body = Plack::Util::inline_object(
            getline => sub { $n < 1600 ? ($n++, $PART)[1] : undef },
            close => sub { $result{lines} = $n < 1600 ? 'stopped early' : 'read whole' });
        return [200, [@type], $body];
    }
    return [200, [@type], ['ok']];
};

require Plack::Util;
my $server = start_server(app => $app,
    options => ['--workers', 1, '--access-log', $access, '--access-log-format', '%r|%>s',
                '--metrics-path', '/metrics', '--metrics-allow', '127.0.0.0/8']);

sub get {
    my ($path) = @_;
    my $sock = raw_connect($server);
    syswrite $sock, "GET $path HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    return read_response($sock);
}

# The client reads the head and a first body byte, then closes with the
# rest unread (so the kernel resets the connection).
sub leave_after_first_bytes {
    my ($path) = @_;
    my $sock = raw_connect($server);
    syswrite $sock, "GET $path HTTP/1.1\r\nHost: x\r\n\r\n";
    my $got = read_until_match($sock, qr/\r\n\r\n.+/s);
    like $got, qr{\AHTTP/1.1 200 OK}, "$path: the response started";
    close $sock;
}

sub access_lines {
    open(my $fh, '<', $access) or return ();
    return map { chomp; $_ } <$fh>;
}

sub access_status {
    my ($path) = @_;
    my $status;
    wait_until(sub {
        ($status) = map { /\|(\d+)\z/ } grep { m{\AGET \Q$path\E HTTP/1.1\|} } access_lines();
        defined $status;
    });
    return $status // 'no line';
}

subtest 'writes after the client left are dropped, none dies' => sub {
    leave_after_first_bytes('/endless');
    is get('/result?of=endless')->{body}, 'writes 1600 gone seen send 0',
        'every write returned; gone became true; send returns false';
    is access_status('/endless'), 499, 'the access log says 499';
};

subtest 'the app asks gone, writing nothing' => sub {
    leave_after_first_bytes('/ask');
    is get('/result?of=ask')->{body}, 'gone', 'gone became true once the client closed';
    is access_status('/ask'), 499, 'the access log says 499';
};

subtest 'poll_cb returns when its client has gone' => sub {
    leave_after_first_bytes('/poll');
    is get('/result?of=poll')->{body}, 'returned', 'poll_cb returned, without dying';
    is access_status('/poll'), 499, 'the access log says 499';
};

subtest 'a body handle stops at its client' => sub {
    leave_after_first_bytes('/lines');
    is get('/result?of=lines')->{body}, 'stopped early', 'the lines stopped, the close was called';
    is access_status('/lines'), 499, 'the access log says 499';
};

subtest 'an app that dies once its client has gone' => sub {
    leave_after_first_bytes('/dies-after');
    is access_status('/dies-after'), 499, 'the access log says 499';
    is get('/result?of=none')->{body}, 'none', 'the worker serves on';
};

subtest 'a client there to the end is no 499' => sub {
    my $res = get('/endless?n=16');
    is length($res->{body}), 16 * 65536 + 4, 'the whole body';
    is get('/result?of=endless')->{body}, 'writes 16 gone never send 1', 'gone stayed false';
    is access_status('/endless?n=16'), 200, 'logged 200';
};

subtest '/metrics counts them' => sub {
    my $metrics;
    wait_until(sub {
        my $res = get('/metrics');
        $metrics = eval { parse($res->{body}) } or return 0;
        return (value($metrics, 'serow_requests_total', code => 499) // 0) >= 5;
    });
    is value($metrics, 'serow_requests_total', code => 499), 5, 'serow_requests_total{code="499"} is 5';
};

is $server->stop, 0, 'the server stops cleanly';
unlike $server->log, qr/\[error\]/, 'nothing in the error log as an error' or diag $server->log;
unlike $server->log, qr/gone away|Broken pipe|Connection reset|own die/i, 'nor a word of it at all';
done_testing;
