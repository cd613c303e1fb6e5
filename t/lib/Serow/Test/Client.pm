package Serow::Test::Client;
use strict;
use warnings;

# A raw HTTP client for Serow's tests: connect to a server (or to any
# { host, port } or { path }), send bytes as they are, read what comes back
# with a bound on every wait, and parse responses without trusting them.  And
# the checks built on it that several tests share: a rejection with nothing
# smuggled behind it, an answer to a head left unfinished.

use Exporter 'import';
use IO::Select ();
use IO::Socket::IP ();
use Time::HiRes ();
use Test::More ();
use Serow::Test::Common qw(READ_TIMEOUT);

our @EXPORT_OK = qw(raw_connect raw_request get_on read_until_close read_until_match send_all
                    read_response parse_response_head parse_response http_get
                    answer_to_unfinished_head rejects answered_and_closed SMUGGLED);

# A connected socket to the server, or to any { host, port } or { path }
# (host defaults to 127.0.0.1).
sub raw_connect {
    my ($server) = @_;
    if ($server->{path}) {
        require IO::Socket::UNIX;
        return IO::Socket::UNIX->new(Peer => $server->{path}) || die "connect: $!";
    }
    return IO::Socket::IP->new(PeerHost => $server->{host} // '127.0.0.1', PeerPort => $server->{port})
        || die "connect: $@";
}

# Sends $bytes on a new connection and returns everything the server sends
# until it closes the connection (or READ_TIMEOUT passes).  Options:
#   half_close => 1     shut down our sending side after the bytes
#   timeout => SECONDS  bound of the wait (default READ_TIMEOUT)
#   eof => \$closed     set to 1 when the server ended the connection (EOF or
#                       reset), 0 when the wait ran out with it still open
sub raw_request {
    my ($server, $bytes, %opts) = @_;
    my $sock = raw_connect($server);
    syswrite($sock, $bytes) if length $bytes;
    shutdown($sock, 1) if $opts{half_close};
    my ($out, $closed) = read_until_close($sock, timeout => $opts{timeout});
    ${ $opts{eof} } = $closed if ref $opts{eof};
    return $out;
}

# Reads from $sock until the server ends the connection or timeout seconds
# (default READ_TIMEOUT) pass.  Returns the bytes, and in list context also
# whether the connection ended (1: EOF or reset; 0: still open at the timeout).
# buffer => \$bytes: bytes already read, put first.
sub read_until_close {
    my ($sock, %opts) = @_;
    my $out = ref $opts{buffer} ? ${ $opts{buffer} } : '';
    my $sel = IO::Select->new($sock);
    my $deadline = Time::HiRes::time + ($opts{timeout} // READ_TIMEOUT);
    my $closed = 0;
    while ((my $left = $deadline - Time::HiRes::time) > 0) {
        last unless $sel->can_read($left);
        my $n = sysread($sock, $out, 65536, length $out);
        if (!$n) {
            $closed = 1;
            last;
        }
    }
    return wantarray ? ($out, $closed) : $out;
}

# Reads from $sock (a socket or a pipe) until what came matches $re (the
# first part of a streamed response), the connection ends, or $timeout
# (READ_TIMEOUT) seconds pass.  Returns the bytes read, to hand on to
# read_response as its buffer.
sub read_until_match {
    my ($sock, $re, $timeout) = @_;
    my $buffer = '';
    my $sel = IO::Select->new($sock);
    my $deadline = Time::HiRes::time + ($timeout // READ_TIMEOUT);
    while ($buffer !~ $re) {
        my $left = $deadline - Time::HiRes::time;
        last if $left <= 0 || !$sel->can_read($left);
        sysread($sock, $buffer, 65536, length $buffer) or last;
    }
    return $buffer;
}

# Writes all of $bytes to $sock, reading what the server sends meanwhile into
# ${ $opts{buffer} } (for read_response's buffer option): a server answering
# while the client still writes can then never block both sides.  Returns the
# number of bytes written (less when the server closed or READ_TIMEOUT passed
# without progress).
sub send_all {
    my ($sock, $bytes, %opts) = @_;
    my $own = '';
    my $buf = ref $opts{buffer} ? $opts{buffer} : \$own;
    my $written = 0;
    local $SIG{PIPE} = 'IGNORE';
    while ($written < length $bytes) {
        my ($r, $w) = ('', '');
        vec($r, fileno $sock, 1) = 1;
        vec($w, fileno $sock, 1) = 1;
        my $n = select(my $readable = $r, my $writable = $w, undef, READ_TIMEOUT);
        last if $n <= 0;
        if (vec($readable, fileno $sock, 1)) {
            sysread($sock, $$buf, 65536, length $$buf) or last;
        }
        if (vec($writable, fileno $sock, 1)) {
            my $chunk = length($bytes) - $written;
            $chunk = 65536 if $chunk > 65536;
            my $n = syswrite($sock, $bytes, $chunk, $written);
            last unless $n;
            $written += $n;
        }
    }
    return $written;
}

# Reads one response from a socket (Content-Length, chunked, or until EOF).
# Returns { status, headers => { lc name => value }, body, raw } or undef.
sub read_response {
    my ($sock, %opts) = @_;
    my $own = '';
    # buffer => \$bytes carries what was read past this response (pipelining)
    my $buf = ref $opts{buffer} ? $opts{buffer} : \$own;
    my $sel = IO::Select->new($sock);
    my $deadline = Time::HiRes::time + ($opts{timeout} // READ_TIMEOUT);
    my $fill = sub {
        my $left = $deadline - Time::HiRes::time;
        return 0 if $left <= 0 || !$sel->can_read($left);
        return sysread($sock, $$buf, 65536, length $$buf) || 0;
    };
    while ($$buf !~ /\r\n\r\n/) { $fill->() or return undef }
    my $res = parse_response_head($$buf) or return undef;
    substr($$buf, 0, $res->{head_length}, '');
    if ($opts{head_request} || $res->{status} =~ /^(?:1\d\d|204|304)$/) {
        $res->{body} = '';
    } elsif (($res->{headers}{'transfer-encoding'} // '') =~ /chunked/i) {
        my $body = '';
        for (;;) {
            while ($$buf !~ /\r\n/) { $fill->() or return undef }
            $$buf =~ s/\A([0-9a-fA-F]+)[^\r\n]*\r\n// or return undef;
            my $size = hex $1;
            push @{ $res->{chunks} }, $size;
            if ($size == 0) {
                while ($$buf !~ /\A(?:[^\r\n]+\r\n)*\r\n/) { $fill->() or return undef }
                $$buf =~ s/\A(?:[^\r\n]+\r\n)*\r\n//;
                last;
            }
            while (length $$buf < $size + 2) { $fill->() or return undef }
            $body .= substr($$buf, 0, $size);
            substr($$buf, 0, $size + 2, '');
        }
        $res->{body} = $body;
    } elsif (defined $res->{headers}{'content-length'}) {
        my $len = $res->{headers}{'content-length'};
        while (length $$buf < $len) { $fill->() or return undef }
        $res->{body} = substr($$buf, 0, $len, '');
    } else {
        1 while $fill->();
        $res->{body} = $$buf;
        $$buf = '';
    }
    return $res;
}

sub parse_response_head {
    my ($text) = @_;
    my $end = index($text, "\r\n\r\n");
    return undef if $end < 0;
    my ($status_line, @lines) = split /\r\n/, substr($text, 0, $end);
    my ($version, $status, $reason) = $status_line =~ m{\A(HTTP/\d\.\d) (\d{3}) ?(.*)\z} or return undef;
    my (%headers, @header_list);
    for (@lines) {
        my ($name, $value) = /\A([^:]+):\s*(.*?)\s*\z/ or return undef;
        push @header_list, [$name, $value];
        $headers{ lc $name } = exists $headers{ lc $name } ? "$headers{lc $name}, $value" : $value;
    }
    return { version => $version, status => $status, reason => $reason, headers => \%headers,
             header_list => \@header_list, head_length => $end + 4 };
}

# All responses in a byte string (as raw_request returns): a list of
# { status, headers, body }.
sub parse_response {
    my ($text, %opts) = @_;
    my @responses;
    while (length $text) {
        my $res = parse_response_head($text) or last;
        substr($text, 0, $res->{head_length}, '');
        my $len = $res->{headers}{'content-length'};
        if ($res->{status} =~ /^(?:1\d\d|204|304)$/ || $opts{head_request}) {
            $res->{body} = '';
        } elsif (($res->{headers}{'transfer-encoding'} // '') =~ /chunked/i) {
            my $body = '';
            while ($text =~ s/\A([0-9a-fA-F]+)[^\r\n]*\r\n//) {
                my $size = hex $1;
                if ($size == 0) { $text =~ s/\A(?:[^\r\n]+\r\n)*\r\n//; last }
                $body .= substr($text, 0, $size);
                substr($text, 0, $size + 2, '');
            }
            $res->{body} = $body;
        } elsif (defined $len) {
            $res->{body} = substr($text, 0, $len, '');
        } else {
            $res->{body} = $text;
            $text = '';
        }
        push @responses, $res;
    }
    return wantarray ? @responses : $responses[0];
}

# ---- requests ----------------------------------------------------------------

# One GET on the open connection $sock (kept alive); returns the response
# (read_response), or undef.
sub get_on {
    my ($sock, $path) = @_;
    syswrite $sock, "GET $path HTTP/1.1\r\nHost: x\r\n\r\n";
    return read_response($sock);
}

# One GET on a new connection; returns the parsed response (or undef).
sub http_get {
    my ($target, $path, %opts) = @_;
    my $raw = raw_request($target, "GET " . ($path // '/') . " HTTP/1.1\r\nHost: localhost\r\n"
        . "Connection: close\r\n\r\n", %opts);
    return scalar parse_response($raw);
}

# answer_to_unfinished_head($target, $start, $rest): sends a first request with
# $start of a second one behind it, waits for the first response (so the
# server has read $start), then sends $rest without ending the head.  Returns
# the response to the unfinished head; tests that the first was answered and
# that the server closed the connection after the second.
sub answer_to_unfinished_head {
    my ($target, $start, $rest) = @_;
    my $sock = raw_connect($target);
    my $buf = '';
    syswrite $sock, "GET /first HTTP/1.1\r\nHost: x\r\n\r\n$start";
    my $first = read_response($sock, buffer => \$buf);
    Test::More::is($first && $first->{status}, 200, 'the first request is answered');
    syswrite $sock, $rest;
    my $res = read_response($sock, buffer => \$buf);
    my (undef, $closed) = read_until_close($sock, buffer => \$buf);
    Test::More::ok($closed, 'the server closed the connection');
    return $res;
}

# The request a rejection test appends to its bytes: a server that answered
# it would have been fooled into reading it as a request of its own.
use constant SMUGGLED => "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n";

# Sends $bytes (and, unless smuggle => 0, SMUGGLED right behind them in the
# same write) and checks that the server answers with exactly one response,
# with $status and "Connection: close", then closes the connection.  Returns
# the response.  A Test::More subtest named $name.
sub rejects {
    my ($server, $bytes, $status, $name, %opts) = @_;
    my $res;
    Test::More::subtest($name => sub {
        my $smuggle = $opts{smuggle} // 1;
        my $sock = raw_connect($server);
        syswrite($sock, $bytes . ($smuggle ? SMUGGLED : ''));
        shutdown($sock, 1) if $opts{half_close};
        ($res, my $raw) = answered_and_closed($sock, $status);
        Test::More::unlike($raw, qr/smuggled/, 'the bytes after it were not answered')
            if $smuggle;
    });
    return $res;
}

# Reads $sock until the server closes it (or READ_TIMEOUT passes) and checks
# that it sent exactly one response, with $status and "Connection: close".
# Returns that response and the bytes read.
sub answered_and_closed {
    my ($sock, $status) = @_;
    my ($raw, $closed) = read_until_close($sock);
    my @responses = parse_response($raw);
    Test::More::is(scalar @responses, 1, 'exactly one response')
        or Test::More::diag("got: $raw");
    my $res = $responses[0];
    Test::More::is($res && $res->{status}, $status, "status $status");
    Test::More::is(lc(($res && $res->{headers}{connection}) // ''), 'close',
        'it says Connection: close');
    Test::More::ok($closed, 'the server closed the connection');
    return ($res, $raw);
}

1;
