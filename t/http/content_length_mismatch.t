# An app's Content-Length is what frames its response: the server never
# sends more content than it declares (RFC 9110 8.6), since the client would
# read the excess as the start of the next response, and when the body is
# shorter or longer than declared the connection is closed after it, so that
# nothing is misread.
use strict;
use warnings;
use Test::More;
use File::Temp ();
use lib 't/lib';
use Serow::Test qw(start_server raw_connect read_until_close);

my $file = File::Temp->new;
print $file 'hello';
close $file;
my $file_name = $file->filename;

my $server = start_server(app => sub {
    my ($env) = @_;
    my ($kind, $length) = $env->{PATH_INFO} =~ m{^/(\w+)/(\d+)};
    my @headers = ('Content-Length' => $length);
    if ($kind eq 'array') {
        return [200, \@headers, ['hel', 'lo']];
    } elsif ($kind eq 'handle') {
        open my $fh, '<', \'hello' or die;
        return [200, \@headers, $fh];
    } elsif ($kind eq 'file') {
        open my $fh, '<', $file_name or die;
        return [200, \@headers, $fh];
    } elsif ($kind eq 'writer') {
        return sub { my $w = $_[0]->([200, \@headers]); $w->write('hel'); $w->write('lo'); $w->close };
    }
}, options => ['--workers', 1, '--keepalive-timeout', 30]);

for my $kind (qw(array handle file writer)) {
    subtest "$kind: a body longer than its Content-Length is cut to it" => sub {
        my $sock = raw_connect($server);
        syswrite $sock, "GET /$kind/3 HTTP/1.1\r\nHost: x\r\n\r\nGET /$kind/5 HTTP/1.1\r\nHost: x\r\n\r\n";
        my ($raw, $closed) = read_until_close($sock);
        like $raw, qr{\r\nContent-Length: 3\r\n}, 'the declared length';
        like $raw, qr{\r\n\r\nhel\z}, 'exactly that much content, nothing after it';
        ok $closed, 'then the connection is closed';
    };
    subtest "$kind: a body shorter than its Content-Length ends the connection" => sub {
        my $sock = raw_connect($server);
        syswrite $sock, "GET /$kind/9 HTTP/1.1\r\nHost: x\r\n\r\nGET /$kind/5 HTTP/1.1\r\nHost: x\r\n\r\n";
        my ($raw, $closed) = read_until_close($sock);
        like $raw, qr{\r\n\r\nhello\z}, 'the content, then nothing';
        ok $closed, 'the connection is closed, so the client knows the response is cut';
    };
    subtest "$kind: a body of its Content-Length keeps the connection" => sub {
        my $sock = raw_connect($server);
        syswrite $sock, "GET /$kind/5 HTTP/1.1\r\nHost: x\r\n\r\nGET /$kind/5 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
        my ($raw) = read_until_close($sock);
        my @bodies = $raw =~ /\r\n\r\n(hello)/g;
        is scalar @bodies, 2, 'both answered';
    };
}

is $server->stop, 0, 'the server stops cleanly';
done_testing;
