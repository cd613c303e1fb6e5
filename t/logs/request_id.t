use strict;
use warnings;
use Test::More;
use lib 't/lib';
use File::Temp ();
use JSON::PP ();
use Serow::Test qw(start_server raw_request http_get wait_until parse_response run_serow root);

# --request-id-header X-Request-Id: one id per request, taken from the
# request when it carries a sane one, else made; the same id in the app's
# env (the header's key and psgix.request_id), in the response, and in the
# access log.

my $dir = File::Temp->newdir;
my $file = "$dir/access.log";
my $app = sub {
    my ($env) = @_;
    my @own = $env->{PATH_INFO} eq '/own' ? ('X-Request-Id' => 'the-app-s') : ();
    return [200, ['Content-Type' => 'application/json', @own],
        [JSON::PP->new->canonical->encode({ header => $env->{HTTP_X_REQUEST_ID},
            psgix => $env->{'psgix.request_id'} })]];
};
my @options = ('--workers', 2, '--request-id-header', 'X-Request-Id', '--access-log', $file,
    '--access-log-format', '%{X-Request-Id}i %{request_id}x "%r"');
my $server = start_server(app => $app, options => \@options);

sub lines {
    open(my $fh, '<', $file) or return ();
    my @lines = <$fh>;
    return @lines; # (a count in scalar context)
}

# One request: (the id in the response, the env's two, the log's two).
my $taken = 0;
sub ids_of {
    my ($path, @headers) = @_;
    my $res = parse_response(raw_request($server,
        "GET $path HTTP/1.1\r\nHost: h\r\n" . join('', map { "$_\r\n" } @headers) . "Connection: close\r\n\r\n"));
    my $env = JSON::PP->new->decode($res->{body});
    my $want = ++$taken;
    wait_until(sub { lines() >= $want });
    my $line = (lines())[$want - 1] // '';
    my ($in, $x) = $line =~ /\A(\S+) (\S+) "/ or diag "line: $line";
    my @sent = grep { lc $_->[0] eq 'x-request-id' } @{ $res->{header_list} || [] };
    return { response => $res->{headers}{'x-request-id'}, responses => scalar(@sent),
             header => $env->{header}, psgix => $env->{psgix}, log_i => $in, log_x => $x };
}

sub all_same {
    my ($ids, $name) = @_;
    my @values = @$ids{qw(response header psgix log_i log_x)};
    is_deeply \@values, [($values[0]) x 5], "$name: one id in the response, the env and the log"
        or diag explain $ids;
    return $values[0];
}

my $made = all_same(ids_of('/'), 'no id sent');
like $made, qr/\A[0-9a-f]{32}\z/, 'a made id: 32 hex digits';

is all_same(ids_of('/', 'X-Request-Id: nginx-abc.123'), 'an id sent'), 'nginx-abc.123', 'the client\'s is taken';
is all_same(ids_of('/', 'x-request-id: lower'), 'any case of the name'), 'lower';

for my $bad (['with a space', 'X-Request-Id: a b'], ['too long', 'X-Request-Id: ' . ('a' x 128)],
             ['a byte above ASCII', "X-Request-Id: caf\xc3\xa9"], ['empty', 'X-Request-Id: ']) {
    my ($what, $header) = @$bad;
    like all_same(ids_of('/', $header), $what), qr/\A[0-9a-f]{32}\z/, "$what: replaced by a made one";
}
is all_same(ids_of('/', 'X-Request-Id: ' . ('a' x 127)), '127 bytes'), 'a' x 127, 'the longest taken';

my $own = ids_of('/own');
is $own->{response}, 'the-app-s', 'the app set the header: its own goes out';
is $own->{responses}, 1, 'once';
like $own->{psgix}, qr/\A[0-9a-f]{32}\z/, 'the env still has the request\'s';

# Unique: made ids never repeat, across workers and across a restart.
my %seen;
for (1 .. 100) {
    my $res = http_get($server, '/');
    $seen{ $res->{headers}{'x-request-id'} // '' }++;
}
is scalar(grep { $_ ne '' && $seen{$_} == 1 } keys %seen), 100, '100 requests, 100 ids';
my %prefix = map { substr($_, 0, 16) => 1 } keys %seen;
$server->stop;

$server = start_server(app => $app, options => ['--workers', 2, '--request-id-header', 'X-Request-Id']);
my $after = http_get($server, '/')->{headers}{'x-request-id'};
like $after, qr/\A[0-9a-f]{32}\z/, 'without an access log too';
ok !$prefix{ substr($after, 0, 16) }, 'a restarted server\'s workers make other ids';
$server->stop;

subtest 'a name that is not a header name is refused' => sub {
    for my $name ('X_Request_Id', 'X Request', 'X-' . ('a' x 70)) {
        my ($status, $text) = run_serow('--request-id-header', $name, root() . '/eg/hello.psgi');
        is $status, 2, "'$name': exit status 2";
        like $text, qr/--request-id-header: '\Q$name\E' is not a header name/, 'says so';
    }
};

done_testing;
