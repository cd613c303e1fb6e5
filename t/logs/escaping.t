use strict;
use warnings;
use Test::More;
use lib 't/lib';
use File::Temp ();
use Serow::Test qw(start_server raw_request wait_until);

# No request can forge an access log line: whatever bytes a client sends,
# each request gives exactly one line of printable ASCII, whose quoted
# request line gives back the bytes sent once its escapes are undone: Apache's,
# \" \\ \b \n \r \t \v and \xHH.
# Long fields are cut so that a line stays under 4,096 bytes (PIPE_BUF).

my $dir = File::Temp->newdir;
my $file = "$dir/access.log";
my $app = sub { [200, ['Content-Type' => 'text/plain'], ["ok\n"]] };
my $server = start_server(app => $app, options => ['--workers', 2, '--access-log', $file]);

sub lines {
    open(my $fh, '<', $file) or return ();
    my @lines = <$fh>;
    return @lines; # (a count in scalar context)
}

my $TIME = qr{\[\d\d/[A-Z][a-z]{2}/\d{4}:\d\d:\d\d:\d\d [+-]\d{4}\]};
my $FIELD = qr{"((?:[\x20-\x21\x23-\x5b\x5d-\x7e]|\\x[0-9A-F]{2}|\\["\\bnrtv])*)"};
my $LINE = qr{\A127\.0\.0\.1 - - $TIME $FIELD ([1-5]\d\d) (\d+|-) $FIELD $FIELD\n\z};

sub unescape {
    my ($field) = @_;
    my %letter = ('"' => '"', '\\' => '\\', b => "\b", n => "\n", r => "\r", t => "\t", v => "\013");
    (my $bytes = $field) =~ s/\\(?:x([0-9A-F]{2})|(["\\bnrtv]))/defined $1 ? chr hex $1 : $letter{$2}/ge;
    return $bytes;
}

# Garbage request lines: any byte but LF, none of them a valid request.
srand(20261122);
my @sent;
for my $i (1 .. 60) {
    my $garbage = join '', map { chr int rand 256 } 1 .. 1 + int rand 200;
    $garbage =~ tr/\n/?/;
    $garbage =~ s/\A[\r ]/x/; # a leading CR would be an empty line before the request
    push @sent, $garbage;
    raw_request($server, "$garbage\r\n\r\n");
}
ok wait_until(sub { lines() >= @sent }), 'a line for each garbage request';
my @lines = lines();
is scalar @lines, scalar @sent, 'and one only';
my (%logged, @bad);
for my $line (@lines) {
    if (my ($request) = $line =~ $LINE) {
        $logged{ unescape($request) }++;
    } else {
        push @bad, $line;
    }
}
is scalar @bad, 0, 'every line is printable ASCII in the combined format' or diag explain \@bad;
my @missing = grep { !$logged{$_}-- } @sent;
is scalar @missing, 0, 'each request line comes back from its escapes' or diag explain \@missing;

# Long fields are cut, escapes never split.
my $target = '/' . ('t' x 5000);
raw_request($server, "GET $target HTTP/1.1\r\nHost: x\r\nUser-Agent: " . ('A' x 10_000)
    . "\r\nReferer: " . ("\xe9" x 1000) . "\r\nConnection: close\r\n\r\n");
ok wait_until(sub { lines() > @sent }), 'the long request is logged';
my $long = (lines())[-1];
cmp_ok length $long, '<', 4096, 'its line stays under 4,096 bytes';
like $long, $LINE, 'and is a whole line';
my ($request, $status, $bytes, $referer, $agent) = $long =~ $LINE;
is $request, substr("GET $target", 0, 2045) . '...', 'request line cut at 2,048 bytes';
is $agent, ('A' x 765) . '...', 'User-Agent cut at 768';
is $referer, ('\xE9' x 191) . '...', 'escapes are never split';

is $server->stop, 0;

# %U is the path percent-decoded, then escaped as any field (Apache's r->uri
# through ap_escape_logitem): "/a%20b%2Fc%00" is "/a b/c\x00".  %r keeps the
# line as sent.
subtest '%U: the path percent-decoded, then escaped' => sub {
    my $ufile = "$dir/path.log";
    my $s = start_server(app => $app, options => ['--workers', 1, '--access-log', $ufile,
        '--access-log-format', '%U|%q|%r']);
    my @cases = (
        ['/a%20b%2Fc%00', '/a b/c\x00', 'space, slash, NUL'],
        ['/caf%C3%A9?q=%20', '/caf\xC3\xA9', 'bytes above ASCII; the query is not part of it'],
        ['/%22q%22%5C%0A', '/\"q\"\\\\\n', 'a quote, a backslash, a line end: escaped'],
        ['/100%25/%zz/%4', '/100%/%zz/%4', 'an escape that is none stays as it is'],
        ['http://example.com/x%41y', '/xAy', 'absolute-form: the path alone'],
        ['/plain', '/plain', 'nothing to decode'],
    );
    for my $case (@cases) {
        raw_request($s, "GET $case->[0] HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
    }
    my @ulines;
    ok wait_until(sub {
        open(my $fh, '<', $ufile) or return 0;
        @ulines = <$fh>;
        @ulines >= @cases;
    }), 'a line for each request';
    for my $i (0 .. $#cases) {
        my ($target, $want, $what) = @{ $cases[$i] };
        my ($u, $q, $r) = split /\|/, $ulines[$i] // '', 3;
        is $u, $want, "$target: $what";
        (my $path = $target) =~ s/\?.*//s;
        like $r, qr/\AGET \Q$path\E/, '%r as sent';
    }
    is $s->stop, 0;
};

done_testing;
