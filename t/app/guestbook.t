use strict;
use warnings;
use Test::More;
use File::Temp ();
use Net::EmptyPort qw(empty_port wait_port);
use lib 't/lib';
use Serow::Test qw(start_server raw_request parse_response find_command);

# eg/guestbook/guestbook.psgi, one file run four ways: under serow, under
# plackup (Plack's own server), as its own Serow server (->start) and as a
# CGI script (CGI environment in, response on stdout).  Each signs the book
# and reads it back.

my $APP = 'eg/guestbook/guestbook.psgi';
my $ROOT = Serow::Test::root();
my @PERL = ($^X, "-I$ROOT/blib/lib", "-I$ROOT/blib/arch");

sub request {
    my ($target, $method, $path, $body) = @_;
    my $head = "$method $path HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n";
    $head .= "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: " . length($body) . "\r\n"
        if defined $body;
    return scalar parse_response(raw_request($target, $head . "\r\n" . ($body // '')));
}

# Signs the guestbook through $send->(METHOD, PATH, BODY) -> { status, headers, body }.
sub sign_and_read {
    my ($send, $prefix) = @_;
    $prefix //= '';
    my $empty = $send->('GET', '/');
    is $empty->{status}, 200, 'the page';
    like $empty->{body}, qr/No entries yet\./, 'an empty book';
    like $empty->{body}, qr{<form method="post" action="\Q$prefix\E/sign">}, 'the form posts to /sign';
    my $signed = $send->('POST', '/sign', 'name=Ann+%C3%A9&message=%3Cb%3Ehello%3C%2Fb%3E');
    is $signed->{status}, 303, 'signing redirects';
    is $signed->{headers}{location}, "$prefix/", 'to the page';
    $send->('POST', '/sign', 'name=Bob&message=second');
    my $page = $send->('GET', '/');
    like $page->{body}, qr{<li><b>Bob</b>: second</li>\n<li><b>Ann \xC3\xA9</b>: &#60;b&#62;hello&#60;/b&#62;</li>},
        'the entries, newest first, escaped, UTF-8';
    is $send->('POST', '/sign', 'name=&message=x')->{status}, 400, 'a name is needed';
    is $send->('GET', '/nowhere')->{status}, 404, 'an unknown path: 404';
}

sub server_sender {
    my ($target) = @_;
    return sub { request($target, @_) };
}

subtest 'serow guestbook.psgi (two workers, templates compiled in the master)' => sub {
    my $dir = File::Temp->newdir;
    my $server = start_server(app_file => $APP, options => ['--workers', 2],
        env => { GUESTBOOK_FILE => "$dir/book.txt" });
    sign_and_read(server_sender($server));
    is $server->stop, 0, 'stops cleanly';
};

subtest 'plackup guestbook.psgi (HTTP::Server::PSGI)' => sub {
    my $plackup = find_command('plackup') or plan skip_all => 'no plackup';
    my $dir = File::Temp->newdir;
    my $port = empty_port();
    my $server = start_server(listen => 'none', env => { GUESTBOOK_FILE => "$dir/book.txt" },
        command => [@PERL, $plackup, '-E', 'deployment', '-o', '127.0.0.1', '-p', $port, $APP]);
    ok wait_port({ port => $port, max_wait => 30 }), 'it listens' or return diag $server->log;
    sign_and_read(server_sender({ port => $port }));
    $server->stop;
};

subtest 'perl guestbook.psgi: its own Serow server (->start)' => sub {
    my $dir = File::Temp->newdir;
    # start_server hands it a bound socket (SERVER_STARTER_PORT), which Serow takes.
    my $server = start_server(command => [@PERL, $APP], env => { GUESTBOOK_FILE => "$dir/book.txt" });
    ok $server->wait_for_log(qr/listening on .* with 2 workers/), 'serves with Serow' or diag $server->log;
    sign_and_read(server_sender($server));
    is $server->stop, 0, 'stops cleanly';
};

# Runs the script once as a CGI script would be: CGI variables, the body on stdin.
sub cgi {
    my ($env, $method, $path, $body) = @_;
    my $in = File::Temp->new;
    print {$in} $body // '';
    close $in;
    my $pid = open(my $out, '-|') // die "fork: $!";
    if (!$pid) {
        open(STDIN, '<', $in->filename) or die;
        delete @ENV{grep { /^(?:HTTP_|SERVER_STARTER|CONTENT_|PATH_INFO|QUERY_STRING)/ } keys %ENV};
        my ($path_info, $query) = split /\?/, $path, 2;
        %ENV = (%ENV, %$env, GATEWAY_INTERFACE => 'CGI/1.1', REQUEST_METHOD => $method,
            SCRIPT_NAME => '/cgi-bin/guestbook.cgi', PATH_INFO => $path_info, QUERY_STRING => $query // '',
            SERVER_NAME => 'localhost', SERVER_PORT => 80, SERVER_PROTOCOL => 'HTTP/1.1',
            REMOTE_ADDR => '127.0.0.1', HTTP_HOST => 'localhost',
            defined $body ? (CONTENT_LENGTH => length $body,
                CONTENT_TYPE => 'application/x-www-form-urlencoded') : ());
        exec @PERL, $APP or die "exec: $!";
    }
    my $raw = do { local $/; <$out> };
    close $out;
    is $?, 0, "the script exits 0 ($method $path)";
    my ($head, $content) = split /\r?\n\r?\n/, $raw, 2;
    my %headers = map { /\A([^:]+):\s*(.*?)\s*\z/ ? (lc $1 => $2) : () } split /\r?\n/, $head;
    my ($status) = ($headers{status} // '') =~ /\A(\d{3})/;
    return { status => $status, headers => \%headers, body => $content };
}

subtest 'guestbook.psgi as a CGI script' => sub {
    my $dir = File::Temp->newdir;
    my $env = { GUESTBOOK_FILE => "$dir/book.txt" };
    sign_and_read(sub { cgi($env, @_) }, '/cgi-bin/guestbook.cgi');
    my $query = cgi($env, 'GET', '/?unused=1');
    is $query->{status}, 200, 'QUERY_STRING is read';
    like $query->{headers}{'content-type'}, qr{^text/html; charset=utf-8}, 'with its content type';
};

done_testing;
