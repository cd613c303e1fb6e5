# psgi.streaming: a delayed response (the responder gets [status, headers,
# body]) and a writer (write/close): chunked on HTTP/1.1, delimited by the
# end of the connection on HTTP/1.0.
use strict;
use warnings;
use Test::More;
use POSIX ();
use Scalar::Util ();
use lib 't/lib';
use Serow::Test qw(start_server raw_connect read_response parse_response raw_request);

my ($weak_writer, $weak_responder, $kept_writer, $kept_responder, $last_stream_error, @twice, $old_responder_error);
# Given by the app, so that a response is known to the byte.
my $DATE = 'Tue, 24 Nov 2026 12:00:00 GMT';

my $app = sub {
    my ($env) = @_;
    my $path = $env->{PATH_INFO};
    my @type = ('Content-Type' => 'text/plain');
    return sub { $_[0]->([200, [@type], ['delayed ', 'body']]) } if $path eq '/delayed';
    if ($path eq '/writer') {
        return sub {
            my $w = $_[0]->([200, [@type]]);
            $w->write($_) for 'hello', '', ' ', 'world';
            $w->close;
        };
    }
    if ($path eq '/writer-length') {
        return sub {
            my $w = $_[0]->([200, [@type, 'Content-Length' => 11]]);
            $w->write($_) for 'hello', ' ', 'world';
            $w->close;
        };
    }
    if ($path eq '/forgets-close') {
        return sub { $_[0]->([200, [@type]])->write('unclosed') };
    }
    if ($path eq '/poll-cb') {
        return sub {
            my $w = $_[0]->([200, [@type]]);
            $w->poll_cb(sub { $_[0]->write('polled'); $_[0]->close });
        };
    }
    if ($path =~ m{\A/poll-parts(-length)?\z}) {
        # A body written entirely from poll_cb, a part per call, with a call
        # that sends nothing before each part.
        my @length = $1 ? ('Content-Length' => 11) : ();
        return sub {
            my $w = $_[0]->([200, ['Date' => $DATE, @length]]);
            my @parts = ('one', 'two', 'three');
            my $calls = 0;
            $w->poll_cb(sub {
                my ($writer) = @_;
                return if $calls++ % 2;
                $writer->write(shift @parts);
                $writer->close unless @parts;
            });
        };
    }
    if ($path eq '/poll-drops-writer') {
        # The app's only reference to its writer goes inside the callback.
        return sub {
            my $w = $_[0]->([200, [@type]]);
            $w->poll_cb(sub { undef $w; $_[0]->write('still here'); $_[0]->close });
        };
    }
    if ($path eq '/poll-dies') {
        return sub { $_[0]->([200, [@type]])->poll_cb(sub { die "poll failed\n" }) };
    }
    if ($path eq '/poll-idle') {
        # Never closes, and sends nothing after its first call.
        return sub {
            my $w = $_[0]->([200, [@type]]);
            my $first = 1;
            $w->poll_cb(sub { $_[0]->write('tick') if $first; $first = 0 });
        };
    }
    if ($path eq '/poll-endless') {
        return sub { $_[0]->([200, [@type]])->poll_cb(sub { $_[0]->write('x' x 65536) }) };
    }
    if ($path eq '/no-content') {
        return sub { my $w = $_[0]->([204, []]); $w->write('dropped'); $w->close };
    }
    if ($path eq '/twice') {
        return sub {
            my $responder = shift;
            $responder->([200, [@type], ['first']]);
            @twice = ();
            eval { $responder->([200, [@type], ['second']]); 1 } or push @twice, $@;
        };
    }
    if ($path eq '/keep-responder') {
        return sub { $kept_responder = $_[0]; $_[0]->([200, [@type], ['responded']]) };
    }
    if ($path eq '/use-old-responder') {
        return sub {
            my $responder = shift;
            $old_responder_error = eval { $kept_responder->([200, [@type], ['LEAKED']]); 1 }
                ? 'no error' : $@;
            $responder->([200, [@type], [$responder == $kept_responder ? 'same' : 'a new one']]);
        };
    }
    if ($path eq '/old-responder-error') {
        return [200, [@type], [$old_responder_error // 'none']];
    }
    if ($path eq '/delayed-handle') {
        open my $fh, '<', \"from a handle\n" or die;
        return sub { $_[0]->([200, [@type], $fh]) };
    }
    if ($path eq '/never-responds') {
        return sub { 1 };
    }
    if ($path eq '/dies-before-responding') {
        return sub { die "no answer today\n" };
    }
    if ($path eq '/weak-keep') {
        return sub {
            Scalar::Util::weaken($weak_responder = $_[0]);
            my $w = $_[0]->([200, [@type]]);
            Scalar::Util::weaken($weak_writer = $w);
            $w->write('weakly kept');
            $w->close;
        };
    }
    if ($path eq '/use-weak') {
        return sub {
            my $responder = shift;
            eval { $weak_responder->([200, [@type], ['LEAKED']]); 1 };
            my $w = $responder->([200, [@type]]);
            $w->write('mine ');
            eval { $weak_writer->write('LEAKED'); 1 };
            $w->write('only');
            $w->close;
        };
    }
    if ($path eq '/keep-writer') {
        return sub { $kept_writer = $_[0]->([200, [@type]]); $kept_writer->write('kept') };
    }
    if ($path eq '/use-old-writer') {
        return sub {
            my $w = $_[0]->([200, [@type]]);
            $w->write('mine ');
            eval { $kept_writer->write('LEAKED'); $kept_writer->close };
            $w->write('only');
            $w->close;
        };
    }
    if ($path eq '/endless') {
        return sub {
            my $w = $_[0]->([200, [@type]]);
            # Bounded all the same: 100 MB (writes after the client left are dropped).
            my $ok = eval { $w->write('x' x 65536) for 1 .. 1600; 1 };
            $last_stream_error = $ok ? 'no error' : $@;
            die $@ unless $ok;
        };
    }
    if ($path eq '/last-stream-error') {
        return [200, [@type], [$last_stream_error // 'none']];
    }
    if ($path eq '/twice-result') {
        return [200, [@type], [join '|', @twice]];
    }
    if ($path eq '/wide') {
        return sub { my $w = $_[0]->([200, [@type]]); $w->write('ok '); $w->write("\x{263a}"); $w->close };
    }
    if ($path eq '/forged-copy') {
        # A copy of a writer's own scalar, blessed: no writer either.
        return sub {
            my $w = $_[0]->([200, [@type]]);
            my $copy = ${$w};
            my $forged = bless \$copy, 'Serow::Writer';
            my $error = eval { $forged->write('FORGED'); 1 } ? 'written' : $@;
            $w->write($error =~ /\A(not a Serow::Writer)/ ? $1 : "not refused: $error");
            $w->close;
        };
    }
    if ($path eq '/bad-head') {
        return sub {
            my $responder = shift;
            eval { $responder->([200, ['Bad Name' => 'x']]); 1 } and return;
            $responder->([500, [@type], ["the app saw: $@"]]);
        };
    }
    return [404, [@type], ['not found']];
};

my $server = start_server(app => $app, options => ['--workers', 1]);

sub get11 {
    my ($path, %opts) = @_;
    my $sock = raw_connect($server);
    syswrite $sock, "GET $path HTTP/1.1\r\nHost: x\r\n\r\n";
    return read_response($sock, %opts);
}

subtest 'a delayed response' => sub {
    my $res = get11('/delayed');
    is $res->{body}, 'delayed body';
    is $res->{headers}{'content-length'}, 12, 'an array body gets its Content-Length';
};

subtest 'a writer on HTTP/1.1: chunked, one chunk per write, kept alive' => sub {
    my $sock = raw_connect($server);
    syswrite $sock, "GET /writer HTTP/1.1\r\nHost: x\r\n\r\n";
    my $buffer = '';
    my $res = read_response($sock, buffer => \$buffer);
    is $res->{headers}{'transfer-encoding'}, 'chunked';
    ok !defined $res->{headers}{'content-length'}, 'no Content-Length';
    is $res->{body}, 'hello world';
    is_deeply $res->{chunks}, [5, 1, 5, 0], 'an empty write sends no chunk (it would end the body)';
    is $buffer, '', 'nothing after the last chunk';
    syswrite $sock, "GET /delayed HTTP/1.1\r\nHost: x\r\n\r\n";
    is read_response($sock)->{body}, 'delayed body', 'the connection serves the next request';
};

subtest 'a writer on HTTP/1.0: the body ends with the connection' => sub {
    for my $request ("GET /writer HTTP/1.0\r\n\r\n",
                     "GET /writer HTTP/1.0\r\nConnection: keep-alive\r\n\r\n") {
        my $raw = raw_request($server, $request);
        my $res = Serow::Test::parse_response_head($raw);
        is $res->{status}, 200;
        ok !defined $res->{headers}{'transfer-encoding'}, 'not chunked';
        ok !defined $res->{headers}{'content-length'}, 'no Content-Length';
        is lc $res->{headers}{connection}, 'close', 'Connection: close';
        is substr($raw, $res->{head_length}), 'hello world', 'the body, then the close';
    }
};

subtest 'a writer with the app\'s Content-Length is not chunked' => sub {
    for my $version ('1.1', '1.0') {
        my $sock = raw_connect($server);
        syswrite $sock, "GET /writer-length HTTP/$version\r\nConnection: keep-alive\r\nHost: x\r\n\r\n";
        my $res = read_response($sock);
        ok !defined $res->{headers}{'transfer-encoding'}, "HTTP/$version: not chunked";
        is $res->{body}, 'hello world';
        syswrite $sock, "GET /delayed HTTP/$version\r\nConnection: keep-alive\r\nHost: x\r\n\r\n";
        is read_response($sock)->{body}, 'delayed body', "HTTP/$version: kept alive";
    }
};

subtest 'an app that forgets close: the body is ended for it' => sub {
    my $res = get11('/forgets-close');
    is $res->{body}, 'unclosed';
};

subtest 'poll_cb' => sub {
    is get11('/poll-cb')->{body}, 'polled';
};

subtest 'poll_cb: the callback is called until it closes the writer' => sub {
    is raw_request($server, "GET /poll-parts HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
        "HTTP/1.1 200 OK\r\nDate: $DATE\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        . "3\r\none\r\n3\r\ntwo\r\n5\r\nthree\r\n0\r\n\r\n",
        'HTTP/1.1: a chunk per write, then the last chunk';
    is raw_request($server, "GET /poll-parts-length HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
        "HTTP/1.1 200 OK\r\nDate: $DATE\r\nContent-Length: 11\r\nConnection: close\r\n\r\nonetwothree",
        'the app\'s Content-Length: the whole body';
    is raw_request($server, "GET /poll-parts HTTP/1.0\r\n\r\n"),
        "HTTP/1.1 200 OK\r\nDate: $DATE\r\nConnection: close\r\n\r\nonetwothree",
        'HTTP/1.0: the whole body, then the close';
};

subtest 'poll_cb: the writer outlives the app\'s references to it; a callback that dies' => sub {
    is get11('/poll-drops-writer')->{body}, 'still here';
    my $res = get11('/poll-dies');
    is $res->{status}, 500, 'nothing was written: a clean 500';
    like $server->log, qr{GET /poll-dies: the app died while streaming: poll failed};
};

subtest 'poll_cb: a callback that never closes ends when its client leaves' => sub {
    for my $path ('/poll-idle', '/poll-endless') {
        my $sock = raw_connect($server);
        syswrite $sock, "GET $path HTTP/1.1\r\nHost: x\r\n\r\n";
        like Serow::Test::read_until_match($sock, qr/\r\n\r\n.*(?:tick|x)/s), qr{\AHTTP/1.1 200 OK},
            "$path: the stream started";
        close $sock;
        # (one worker: it answers only once the callback has stopped)
        is get11('/delayed')->{body}, 'delayed body', "$path: the worker serves on";
    }
};

subtest 'HEAD and 204: writes are dropped, the connection is kept' => sub {
    my $sock = raw_connect($server);
    syswrite $sock, "HEAD /writer HTTP/1.1\r\nHost: x\r\n\r\n";
    my $buffer = '';
    my $res = read_response($sock, head_request => 1, buffer => \$buffer);
    is $res->{status}, 200;
    syswrite $sock, "GET /no-content HTTP/1.1\r\nHost: x\r\n\r\n";
    $res = read_response($sock, buffer => \$buffer);
    is $res->{status}, 204;
    ok !defined $res->{headers}{'transfer-encoding'}, 'no Transfer-Encoding on a 204';
    syswrite $sock, "GET /delayed HTTP/1.1\r\nHost: x\r\n\r\n";
    is read_response($sock, buffer => \$buffer)->{body}, 'delayed body',
        'the next response is not disturbed by a stray body';
};

subtest 'the responder called twice: the second call dies' => sub {
    is get11('/twice')->{body}, 'first';
    like get11('/twice-result')->{body}, qr/called twice/;
};

subtest 'a bad head from the responder dies in the app, which can answer otherwise' => sub {
    my $res = get11('/bad-head');
    is $res->{status}, 500;
    like $res->{body}, qr/the app saw: invalid response header 'Bad Name'/;
};

subtest 'a responder kept from an earlier request dies; the next request gets a new one' => sub {
    is get11('/keep-responder')->{body}, 'responded';
    is get11('/use-old-responder')->{body}, 'a new one';
    like get11('/old-responder-error')->{body}, qr/the PSGI responder was called after its request ended/;
    # Dropped, it is no longer the app's: the streams go on as before.
    undef $kept_responder;
    is get11('/writer')->{body}, 'hello world';
    is get11('/delayed')->{body}, 'delayed body';
};

subtest 'a whole response with a handle body, given to the responder' => sub {
    my $res = get11('/delayed-handle');
    is $res->{status}, 200;
    is $res->{body}, "from a handle\n";
};

subtest 'a streaming app that never responds, or dies first: 500, logged' => sub {
    my $res = get11('/never-responds');
    is $res->{status}, 500;
    like $server->log, qr{GET /never-responds: the streaming app never called the responder};
    $res = get11('/dies-before-responding');
    is $res->{status}, 500;
    like $server->log, qr{GET /dies-before-responding: the app died while streaming: no answer today};
    is get11('/delayed')->{body}, 'delayed body', 'the worker goes on';
};

subtest 'a writer or responder weakly kept from an earlier request is not the next one\'s' => sub {
    is get11('/weak-keep')->{body}, 'weakly kept';
    is get11('/use-weak')->{body}, 'mine only';
};

subtest 'a writer kept from an earlier request writes nothing into a later one' => sub {
    is get11('/keep-writer')->{body}, 'kept';
    is get11('/use-old-writer')->{body}, 'mine only';
};

# Serow::Writer's methods are C, on the state of a writer the server made:
# a scalar of Perl's blessed into the class is refused, not read as one
# (its bytes taken for pointers would crash the process).
subtest 'a scalar blessed into Serow::Writer is not a writer: its methods die, nothing crashes' => sub {
    pipe(my $from_child, my $to_parent) or die "pipe: $!";
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        close $from_child;
        require Serow;
        { no warnings 'once'; @Forged::Writer::ISA = ('Serow::Writer'); }
        my @args = (write => ['data'], send => ['data'], poll_cb => [sub { }], close => [],
            closed => [], gone => [], abandon => [], given => []);
        my @results;
        while (my ($method, $args) = splice @args, 0, 2) {
            for my $class ('Serow::Writer', 'Forged::Writer') {
                my $forged = bless \(my $bytes = 'A' x 64), $class;
                my $ok = eval { $forged->$method(@$args); 1 };
                push @results, "$class/$method: " . ($ok ? 'accepted' : $@ =~ s/ at \S+ line \d+.*//sr);
            }
        }
        print {$to_parent} map { "$_\n" } @results;
        close $to_parent;
        POSIX::_exit(0);
    }
    close $to_parent;
    my @results = map { chomp; $_ } <$from_child>;
    waitpid $pid, 0;
    is $? & 127, 0, 'the process is not killed by a signal';
    is $? >> 8, 0, '... and runs to its end';
    is scalar @results, 16, 'every method tried, on Serow::Writer and a subclass';
    like $_, qr{\A[\w:]+/\w+: not a Serow::Writer: a writer is made by the server}, $_ for @results;
    is get11('/forged-copy')->{body}, 'not a Serow::Writer',
        "a copy of a real writer's scalar, blessed, is refused too";
};

subtest 'a wide character in a write: the response is cut and logged' => sub {
    my $res = get11('/wide');
    ok !$res, 'no complete response';
    like $server->log, qr/the app died while streaming: .*wide character/;
    is get11('/delayed')->{body}, 'delayed body', 'the worker goes on';
};

subtest 'the client leaves while the app streams: writes are dropped, the worker goes on' => sub {
    my $sock = raw_connect($server);
    syswrite $sock, "GET /endless HTTP/1.1\r\nHost: x\r\n\r\n";
    my $got = '';
    # (its status line may come in pieces: the suite runs under short writes too)
    while ($got !~ /\r\n/) { sysread($sock, $got, 1024, length $got) or last }
    like $got, qr{\AHTTP/1.1 200 OK}, 'the stream started';
    close $sock;
    is get11('/last-stream-error')->{body}, 'no error',
        'the app\'s writes returned (t/response/client_gone.t has the rest)';
    is get11('/delayed')->{body}, 'delayed body', 'the worker serves on';
};

is $server->stop, 0, 'the server stops cleanly';
unlike $server->log, qr/client has gone away/, 'a client that left is no error to log';
done_testing;
