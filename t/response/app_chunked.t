# A body the app frames itself (Transfer-Encoding: chunked in its own
# headers, as Plack::Middleware::Chunked sends it): an HTTP/1.1 client gets
# the app's chunks as they are when they are valid framing, and the
# connection stays usable; framing that breaks, stops before its last chunk
# or goes on after it is cut there, logged, and the connection closed, so
# that the client never reads what follows as the next response.  An HTTP/1.0
# client never gets Transfer-Encoding (RFC 9112 6.1): the chunks are decoded
# and the body ends with the connection.  Array bodies, file and other
# handles, and streaming writers alike.
use strict;
use warnings;
use Test::More;
use File::Temp ();
use lib 't/lib';
use Serow::Test qw(start_server raw_connect read_response raw_request);

# The app gives its own Date, so that each response is known to the byte.
my $DATE = 'Tue, 24 Nov 2026 12:00:00 GMT';
my @HEAD = ('Date' => $DATE, 'Transfer-Encoding' => 'chunked');
my $VALID = "5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n";

my %parts = (
    valid      => ["5\r\nhello\r\n", "6;ext=1\r\n world\r\n", "0\r\nX-Trailer: t\r\n\r\n"],
    broken     => ["5\r\nhello\r\n", "3\r\nabcXY\r\n", "0\r\n\r\n"],
    unfinished => ["5\r\nhello\r\n"],
    excess     => ["5\r\nhello\r\n0\r\n\r\n", "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nforged"],
);

my %files;
for my $kind (keys %parts) {
    my $file = File::Temp->new;
    print {$file} join '', @{ $parts{$kind} };
    close $file;
    $files{$kind} = $file;
}

my $app = sub {
    my ($env) = @_;
    my ($body, $kind) = $env->{PATH_INFO} =~ m{\A/(\w+)/(\w+)\z} or return [404, [], []];
    my @parts = @{ $parts{$kind} };
    if ($body eq 'array') {
        return [200, [@HEAD], \@parts];
    } elsif ($body eq 'file') {
        open(my $fh, '<', "$files{$kind}") or die $!;
        return [200, [@HEAD], $fh];
    } elsif ($body eq 'handle') {
        my $all = join '', @parts;
        open(my $fh, '<', \$all) or die $!;
        return [200, [@HEAD], $fh];
    } elsif ($body eq 'writer') {
        return sub {
            my $w = $_[0]->([200, [@HEAD]]);
            $w->write($_) for @parts;
            $w->close;
        };
    }
    return [404, [], []];
};

my $server = start_server(app => $app, options => ['--workers', 1]);

my $NEXT = "GET /array/valid HTTP/1.1\r\nHost: x\r\n\r\n";
my $VALID_RESPONSE = "HTTP/1.1 200 OK\r\nDate: $DATE\r\nTransfer-Encoding: chunked\r\n\r\n$VALID";

for my $body (qw(array file handle writer)) {
    subtest "$body: valid framing goes out as the app wrote it, kept alive" => sub {
        my $raw = raw_request($server,
            "GET /$body/valid HTTP/1.1\r\nHost: x\r\n\r\n" . $NEXT . "GET /$body/valid HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        is $raw, $VALID_RESPONSE x 2
            . "HTTP/1.1 200 OK\r\nDate: $DATE\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n$VALID",
            'three whole responses on one connection';
    };

    # The head of an array body is sent once its body is known: it says
    # the connection closes.  The others' heads have gone before.
    my $close = $body eq 'array' ? "Connection: close\r\n" : '';
    for my $case (['broken', "5\r\nhello\r\n3\r\nabc", 'is not valid chunked framing'],
                  ['unfinished', "5\r\nhello\r\n", 'ends before its last chunk'],
                  ['excess', "5\r\nhello\r\n0\r\n\r\n", 'has bytes after its last chunk']) {
        my ($kind, $sent, $why) = @$case;
        subtest "$body: framing that $why is cut there and the connection closed" => sub {
            my $closed;
            my $raw = raw_request($server, "GET /$body/$kind HTTP/1.1\r\nHost: x\r\n\r\n" . $NEXT,
                eof => \$closed);
            is $raw, "HTTP/1.1 200 OK\r\nDate: $DATE\r\nTransfer-Encoding: chunked\r\n$close\r\n$sent",
                'the valid framing, nothing after it, no answer to the next request';
            ok $closed, 'the connection is closed';
            ok $server->wait_for_log(qr{GET /$body/$kind: the body the app chunked itself \Q$why\E}),
                'logged';
        };
    }

    subtest "$body: HTTP/1.0 gets the body decoded, no Transfer-Encoding, ended by the close" => sub {
        my $closed;
        my $raw = raw_request($server,
            "GET /$body/valid HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", eof => \$closed);
        is $raw, "HTTP/1.1 200 OK\r\nDate: $DATE\r\nConnection: close\r\n\r\nhello world",
            'decoded, close-delimited';
        ok $closed, 'the connection is closed';

        $raw = raw_request($server, "GET /$body/broken HTTP/1.0\r\n\r\n", eof => \$closed);
        is $raw, "HTTP/1.1 200 OK\r\nDate: $DATE\r\nConnection: close\r\n\r\nhelloabc",
            'broken framing: what decoded before the error, then the close';
        ok $closed, 'the connection is closed';
    };
}

subtest 'HEAD over HTTP/1.0: no Transfer-Encoding either' => sub {
    my $raw = raw_request($server, "HEAD /array/valid HTTP/1.0\r\n\r\n");
    is $raw, "HTTP/1.1 200 OK\r\nDate: $DATE\r\nConnection: close\r\n\r\n", 'the head alone';
};

is $server->stop, 0, 'the server stops cleanly';
done_testing;
