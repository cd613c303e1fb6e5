use strict;
use warnings;
use Test::More;
use HTTP::Request::Common qw(POST);
use lib 't/lib';
use Serow::Test qw(start_server raw_request parse_response);
use Serow::App;

# Parameters and uploads through a real Serow server (its psgi.input):
# query, urlencoded, multipart with a file, a chunked multipart body.

my $app = Serow::App->new(sub {
    my ($c) = @_;
    my $u = $c->upload('file');
    my $content = '';
    if ($u) { open(my $fh, '<:raw', $u->path) or die; local $/; $content = <$fh> }
    return $c->text(join '|', map({ "$_=" . join(',', $c->param($_)) } sort $c->param),
        $u ? ($u->filename, $u->size, length $content, $content eq "\x00\xff" x 50_000 ? 'same' : 'differs') : ());
})->psgi_app;
my $server = start_server(app => $app, options => ['--workers', 1]);

sub send_request {
    my ($req, %opts) = @_;
    my $body = $req->content;
    my $head = $req->method . ' ' . $req->uri . " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
        . 'Content-Type: ' . $req->header('Content-Type') . "\r\n";
    if ($opts{chunked}) {
        $head .= "Transfer-Encoding: chunked\r\n";
        my $chunked = '';
        $chunked .= sprintf("%x\r\n%s\r\n", length $1, $1) while $body =~ /\G(.{1,7000})/gs;
        $body = $chunked . "0\r\n\r\n";
    } else {
        $head .= 'Content-Length: ' . length($body) . "\r\n";
    }
    return scalar parse_response(raw_request($server, "$head\r\n$body"));
}

my $res = send_request(POST '/?q=1&q=2', [name => 'Ann', text => 'a&b=c']);
is $res->{body}, 'name=Ann|q=1,2|text=a&b=c', 'query and urlencoded body';

my $file = "\x00\xff" x 50_000;
my $upload = POST '/?q=3', Content_Type => 'form-data',
    Content => [title => 'big', file => [undef, 'data.bin', 'Content-Type' => 'application/octet-stream', Content => $file]];
is send_request($upload)->{body}, 'q=3|title=big|data.bin|100000|100000|same', 'a 100 KB upload, byte for byte';
is send_request($upload, chunked => 1)->{body}, 'q=3|title=big|data.bin|100000|100000|same',
    'the same as a chunked body';
is $server->stop, 0;

done_testing;
