use strict;
use warnings;
use Test::More;
use lib 't/lib';
use File::Temp ();
use Serow::Test qw(need_debian_packages start_server raw_request parse_response wait_until);
use Serow::Test::Nginx qw(start_nginx);

# One request followed from a real nginx through Serow to the app: with
# --request-id-header X-Request-Id, the id nginx logs ($http_x_request_id,
# what the client sent; $request_id, what nginx made and passed on;
# $upstream_http_x_request_id, what Serow answered) is the one in Serow's
# access log and in the app's env.  Two ways an operator sets it up: nginx
# makes the id (proxy_set_header X-Request-Id $request_id) and Serow takes
# it, or nginx passes the client's header and Serow makes one when there is
# none.

need_debian_packages('nginx');

my $dir = File::Temp->newdir;
my ($serow_log, $nginx_log, $app_log) = map { "$dir/$_.log" } qw(serow nginx app);
my $app = sub {
    my ($env) = @_;
    open(my $fh, '>>', $app_log) or die "$app_log: $!";
    print {$fh} "$env->{PATH_INFO} $env->{HTTP_X_REQUEST_ID} $env->{'psgix.request_id'}\n";
    close $fh;
    return [200, ['Content-Type' => 'text/plain'], ["ok\n"]];
};
my $serow = start_server(app => $app, options => ['--workers', 2, '--request-id-header', 'X-Request-Id',
    '--access-log', $serow_log, '--access-log-format', '%U %{X-Request-Id}i']);
my $upstream = '127.0.0.1:' . $serow->port;
my $nginx = start_nginx(config => sub {
    my ($listen) = @_;
    return <<"CONFIG";
log_format ids '\$uri client=\$http_x_request_id nginx=\$request_id upstream=\$upstream_http_x_request_id';
upstream serow { server $upstream; keepalive 4; }
server {
    listen $listen;
    access_log $nginx_log ids;
    proxy_http_version 1.1;
    proxy_set_header Connection "";
    location /made-by-nginx { proxy_set_header X-Request-Id \$request_id; proxy_pass http://serow; }
    location / { proxy_pass http://serow; }
}
CONFIG
});

sub lines_of {
    my ($file) = @_;
    open(my $fh, '<', $file) or return ();
    my @lines = <$fh>;
    chomp @lines;
    return @lines; # (a count in scalar context)
}

# The request for $path through nginx; then what each log says of it.
sub follow {
    my ($path, @headers) = @_;
    my ($res) = parse_response(raw_request($nginx, "GET $path HTTP/1.1\r\nHost: h\r\n"
        . join('', map { "$_\r\n" } @headers) . "Connection: close\r\n\r\n"));
    is $res->{status}, 200, "$path: answered through nginx";
    my %found;
    wait_until(sub {
        ($found{nginx}) = grep { /\A\Q$path\E / } lines_of($nginx_log);
        ($found{serow}) = grep { /\A\Q$path\E / } lines_of($serow_log);
        ($found{app}) = grep { /\A\Q$path\E / } lines_of($app_log);
        3 == grep { defined } values %found;
    }) or diag explain \%found;
    my %nginx = ($found{nginx} // '') =~ /(\w+)=(\S*)/g;
    my ($serow_id) = ($found{serow} // '') =~ / (\S+)\z/;
    my (undef, $env_header, $env_psgix) = split / /, $found{app} // '';
    return { response => $res->{headers}{'x-request-id'}, nginx => \%nginx, serow => $serow_id,
             env_header => $env_header, env_psgix => $env_psgix };
}

my $r = follow('/made-by-nginx');
like $r->{nginx}{nginx}, qr/\A[0-9a-f]{32}\z/, 'nginx made an id ($request_id)';
is $r->{serow}, $r->{nginx}{nginx}, 'Serow\'s access log has nginx\'s id';
is $r->{env_header}, $r->{nginx}{nginx}, 'the app\'s env has it (HTTP_X_REQUEST_ID)';
is $r->{env_psgix}, $r->{nginx}{nginx}, 'and psgix.request_id';
is $r->{nginx}{upstream}, $r->{nginx}{nginx}, 'Serow sent it back ($upstream_http_x_request_id)';
is $r->{response}, $r->{nginx}{nginx}, 'and the client got it';

$r = follow('/passed', 'X-Request-Id: from-the-client-1');
is $r->{nginx}{client}, 'from-the-client-1', 'the client\'s id in nginx\'s log ($http_x_request_id)';
is $r->{serow}, 'from-the-client-1', 'in Serow\'s';
is $r->{env_header}, 'from-the-client-1', 'in the app\'s env';
is $r->{nginx}{upstream}, 'from-the-client-1', 'and back';

$r = follow('/none');
is $r->{nginx}{client}, '-', 'no id from the client';
like $r->{serow}, qr/\A[0-9a-f]{32}\z/, 'Serow made one';
is $r->{env_header}, $r->{serow}, 'the app has it';
is $r->{nginx}{upstream}, $r->{serow}, 'nginx logged the one Serow made ($upstream_http_x_request_id)';
is $r->{response}, $r->{serow}, 'and the client got it';

$nginx->stop;
$serow->stop;
done_testing;
