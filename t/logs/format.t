use strict;
use warnings;
use Test::More;
use lib 't/lib';
use File::Temp ();
use Time::HiRes ();
use Serow::Test qw(start_server raw_request wait_until run_serow root);

# --access-log-format: each Apache directive Serow knows, in one line whose
# fields are parsed back; the named formats; a bad directive refused at
# start-up with the directive named.

my $dir = File::Temp->newdir;
my $app = sub {
    my ($env) = @_;
    $env->{REMOTE_USER} = 'bob';
    $env->{'app.note'} = "a \"note\"";
    $env->{'app.number'} = 42;
    $env->{'app.ref'} = [];
    1 while $env->{'psgi.input'}->read(my $part, 65536);
    return [201, ['Content-Type' => 'text/plain', 'X-Out' => 'out value'], ["hello\n"]];
};

sub lines_of {
    my ($file) = @_;
    open(my $fh, '<', $file) or return ();
    my @lines = <$fh>;
    return @lines; # (a count in scalar context)
}

sub one_line {
    my ($server, $file, $request) = @_;
    my $before = () = lines_of($file);
    raw_request($server, $request);
    wait_until(sub { lines_of($file) > $before });
    return (lines_of($file))[$before] // '';
}

subtest 'every directive, parsed back' => sub {
    my $file = "$dir/all.log";
    my @directives = qw(%h %a %l %u %t %r %s %>s %b %B %D %{us}T %{ms}T %T %{s}T %m %U %q %H %v %p %P %k
        %{X-In}i %{Missing}i %{X-Out}o %{Content-Type}o %{app.note}e %{app.number}e %{app.ref}e
        %{REMOTE_USER}e %{queue_us}x %{app_us}x %{write_us}x %%);
    my $server = start_server(app => $app, options => ['--workers', 1, '--access-log', $file,
        '--access-log-format', join('|', @directives)]);
    my $line = one_line($server, $file,
        "POST /a/b?x=1&y=2 HTTP/1.1\r\nHost: h\r\nX-In: in value\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc");
    chomp $line;
    my @fields = split /\|/, $line, -1;
    is scalar @fields, scalar @directives, 'a field per directive' or diag $line;
    my %f;
    @f{@directives} = @fields;
    is $f{'%h'}, '127.0.0.1', '%h';
    is $f{'%a'}, '127.0.0.1', '%a';
    is $f{'%l'}, '-', '%l';
    is $f{'%u'}, 'bob', '%u: REMOTE_USER the app set';
    like $f{'%t'}, qr{\A\[\d\d/[A-Z][a-z]{2}/\d{4}:\d\d:\d\d:\d\d [+-]\d{4}\]\z}, '%t';
    is $f{'%r'}, 'POST /a/b?x=1&y=2 HTTP/1.1', '%r';
    is $f{'%s'}, '201', '%s';
    is $f{'%>s'}, '201', '%>s';
    is $f{'%b'}, '6', '%b';
    is $f{'%B'}, '6', '%B';
    like $f{'%D'}, qr/\A\d+\z/, '%D: microseconds';
    is $f{'%{us}T'}, $f{'%D'}, '%{us}T is %D';
    is $f{'%T'}, int($f{'%D'} / 1e6), '%T: whole seconds of the same';
    is $f{'%{ms}T'}, int($f{'%D'} / 1e3), '%{ms}T: milliseconds';
    is $f{'%k'}, '0', '%k: the first request on its connection';
    is $f{'%{s}T'}, $f{'%T'}, '%{s}T is %T';
    is $f{'%m'}, 'POST', '%m';
    is $f{'%U'}, '/a/b', '%U';
    is $f{'%q'}, '?x=1&y=2', '%q';
    is $f{'%H'}, 'HTTP/1.1', '%H';
    is $f{'%v'}, '127.0.0.1', '%v: SERVER_NAME';
    is $f{'%p'}, $server->port, '%p: SERVER_PORT';
    my @workers = $server->worker_pids;
    is $f{'%P'}, $workers[0], '%P: the worker';
    is $f{'%{X-In}i'}, 'in value', '%{NAME}i';
    is $f{'%{Missing}i'}, '-', '%{NAME}i absent: -';
    is $f{'%{X-Out}o'}, 'out value', '%{NAME}o';
    is $f{'%{Content-Type}o'}, 'text/plain', '%{NAME}o, any case';
    is $f{'%{app.note}e'}, 'a \\"note\\"', '%{NAME}e: a value the app left, escaped';
    is $f{'%{app.number}e'}, '42', '%{NAME}e: a number';
    is $f{'%{app.ref}e'}, '-', '%{NAME}e: a reference is not logged';
    is $f{'%{REMOTE_USER}e'}, 'bob', '%{REMOTE_USER}e';
    like $f{$_}, qr/\A\d+\z/, "$_: microseconds" for qw(%{queue_us}x %{app_us}x %{write_us}x);
    my $parts = $f{'%{queue_us}x'} + $f{'%{app_us}x'} + $f{'%{write_us}x'};
    ok $parts <= $f{'%D'} && $f{'%D'} - $parts <= 3, 'the three parts add up to %D (each rounded down)'
        or diag "$parts vs $f{'%D'}";
    is $f{'%%'}, '%', '%%';

    # A request with no query, no body, and none of the logged headers.
    $line = one_line($server, $file, "GET /plain HTTP/1.0\r\n\r\n");
    chomp $line;
    @f{@directives} = split /\|/, $line, -1;
    is $f{'%q'}, '', '%q with no query: empty, as Apache';
    is $f{'%H'}, 'HTTP/1.0', '%H';
    is $f{'%{X-In}i'}, '-', 'a header the request lacks: -';

    # A request the server rejects itself: what is known is logged.
    $line = one_line($server, $file, "GET /x HTTP/1.1\r\nBad Header\r\n\r\n");
    chomp $line;
    @f{@directives} = split /\|/, $line, -1;
    is $f{'%s'}, '400', 'a rejected request: its status';
    is $f{'%u'}, '-', 'no user';
    is $f{'%{X-Out}o'}, '-', 'no response header of the app';
    is $f{'%{app_us}x'}, '0', 'no time in an app';
    $server->stop;
};

subtest 'common, and the same request in combined' => sub {
    my $request = "GET /c?q HTTP/1.1\r\nHost: h\r\nReferer: http://r/\r\nUser-Agent: ua\r\nConnection: close\r\n\r\n";
    my %line;
    for my $format (qw(common combined)) {
        my $file = "$dir/$format.log";
        my $server = start_server(app => $app, options => ['--workers', 1, '--access-log', $file,
            '--access-log-format', $format]);
        $line{$format} = one_line($server, $file, $request);
        $server->stop;
    }
    like $line{common}, qr{\A127\.0\.0\.1 - bob \[[^\]]+\] "GET /c\?q HTTP/1\.1" 201 6\n\z}, 'common';
    like $line{combined}, qr{\A127\.0\.0\.1 - bob \[[^\]]+\] "GET /c\?q HTTP/1\.1" 201 6 "http://r/" "ua"\n\z},
        'combined';
};

subtest 'Apache\'s escapes in literal text; %k on a kept-alive connection' => sub {
    my $file = "$dir/escapes.log";
    my $server = start_server(app => $app, options => ['--workers', 1, '--access-log', $file,
        '--access-log-format', '%m\t%U\\\\"%k\"' . "\t%>s"]);
    my $sock = Serow::Test::raw_connect($server);
    for my $path ('/one', '/two') {
        Serow::Test::send_all($sock, "GET $path HTTP/1.1\r\nHost: h\r\n\r\n");
        ok Serow::Test::read_response($sock), "$path answered on the same connection";
    }
    ok wait_until(sub { lines_of($file) >= 2 }), 'two lines';
    is_deeply [lines_of($file)], ["GET\t/one\\\"0\"\t201\n", "GET\t/two\\\"1\"\t201\n"],
        '\t a tab (and a tab as it is), \\\\ a backslash, \\" a quote; %k counts the requests before';
    $server->stop;
};

# A 1xx the app sends first (psgix.informational) is no part of the
# response: %{NAME}o logs the final response's headers, and the app's time
# runs on to the final head.  Nor is a head the server refused: the app may
# give another.  The app measures the time it spends after the 103 (or the
# refused head) and sends it in X-Waited: the app's part covers it.
subtest 'a 1xx or a refused head before the response: %{NAME}o and the app time are the final head\'s' => sub {
    my $wait = sub {
        my $from = Time::HiRes::time();
        select(undef, undef, undef, 0.1); # time in the app worth measuring (nothing waits on it)
        return int((Time::HiRes::time() - $from) * 1e6);
    };
    my $interim_app = sub {
        my ($env) = @_;
        my $path = $env->{PATH_INFO};
        if ($path eq '/hints' || $path eq '/hints-both') {
            $env->{'psgix.informational'}->(103, [Link => '</early.css>; rel=preload', 'X-Note' => '103']);
            my $waited = $wait->();
            return [200, ['Content-Type' => 'text/plain', 'X-Waited' => $waited,
                ($path eq '/hints-both' ? (Link => '</final.css>; rel=preload') : ())], ["final\n"]];
        }
        return sub {
            my ($responder) = @_;
            eval { $responder->([200, ['X-Note' => 'refused', 'Bad Name' => 'x']]) };
            my $refused = $@ ? 'yes' : 'no';
            my $waited = $wait->();
            my $w = $responder->([200, ['Content-Type' => 'text/plain', 'X-Waited' => $waited,
                'X-Refused' => $refused]]);
            $w->write("final\n");
            $w->close;
        };
    };
    my $file = "$dir/interim.log";
    my @directives = qw(%U %>s %{Link}o %{X-Note}o %{X-Refused}o %{X-Waited}o %{app_us}x %{write_us}x);
    my $server = start_server(app => $interim_app, options => ['--workers', 1, '--access-log', $file,
        '--access-log-format', join('|', @directives)]);
    my %f;
    for my $path ('/hints', '/hints-both', '/refused') {
        my $line = one_line($server, $file, "GET $path HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
        chomp $line;
        @{ $f{$path} }{@directives} = split /\|/, $line, -1;
        is $f{$path}{'%>s'}, 200, "$path: answered" or diag $line, $server->log;
        like $f{$path}{'%{X-Waited}o'}, qr/\A\d+\z/, "$path: the app measured its wait";
        # (+ 2: both are cut to the microsecond, the app's ends on either side)
        cmp_ok $f{$path}{'%{app_us}x'} + 2, '>=', $f{$path}{'%{X-Waited}o'},
            "$path: the app's part covers its time up to the final head" or diag $line;
    }
    is $f{'/hints'}{'%{Link}o'}, '-', "a header only the 103 had is not the response's";
    is $f{'/hints'}{'%{X-Note}o'}, '-', '... nor is another';
    is $f{'/hints-both'}{'%{Link}o'}, '</final.css>; rel=preload', "one both had: the final response's value";
    is $f{'/refused'}{'%{X-Refused}o'}, 'yes', 'the first head was refused';
    is $f{'/refused'}{'%{X-Note}o'}, '-', 'a header only the refused head had is not logged';
    $server->stop;
};

subtest 'a bad format is refused at start-up, naming the directive' => sub {
    my $hello = root() . '/eg/hello.psgi';
    for my $case (
        ['%h %Z', qr/--access-log-format: unknown directive '%Z'/],
        ['%{foo}x', qr/--access-log-format: unknown directive '%\{foo\}x'/],
        ['%{ms}t', qr/--access-log-format: unknown directive '%\{ms\}t'/],
        ['%h %{User-Agent', qr/--access-log-format: unterminated %\{/],
        ['%h %', qr/--access-log-format: directive '%' has no letter/],
        ['%{}i', qr/--access-log-format: directive '%\{\}i' has an empty name/],
        ["%h\x01%u", qr/--access-log-format: a control byte \(0x01\)/],
        ['%h\n%u', qr/--access-log-format: '\\n' in the format would break the line/],
        [join(' ', map { "%{H$_}i" } 1 .. 9), qr/more than 8 names of that kind/],
    ) {
        my ($format, $message) = @$case;
        my ($status, $text) = run_serow('--access-log', '-', '--access-log-format', $format, $hello);
        is $status, 2, "'$format': exit status 2";
        like $text, $message, "'$format': says which and why";
    }
    my ($status, $text) = run_serow('--access-log-format', '%Q', $hello);
    is $status, 2, 'refused without --access-log too (a mistake waiting to happen)';
    like $text, qr/unknown directive '%Q'/;
};

subtest 'any string compiles or is refused with a reason' => sub {
    require Serow;
    srand(20261125);
    my @alphabet = ('%', '%', '{', '}', '>', '<', ' ', '"', 'a' .. 'z', 'A' .. 'Z', 0 .. 9, "\x01", "\xff");
    my ($compiled, $refused) = (0, 0);
    for (1 .. 3000) {
        my $format = join '', map { $alphabet[rand @alphabet] } 1 .. 1 + int rand 40;
        my $error = Serow::Loop->access_log_format_error($format);
        if (defined $error) {
            $refused++ if length $error;
        } else {
            $compiled++;
        }
    }
    ok $compiled > 0, "some compiled ($compiled)";
    is $compiled + $refused, 3000, "the others were refused with a message ($refused)";
    ok !defined Serow::Loop->access_log_format_error($_), "'$_' compiles" for qw(combined common json);
    ok !defined Serow::Loop->access_log_format_error('%%' x 200), 'a long run of %% (one literal)';
    like Serow::Loop->access_log_format_error('%h ' x 65), qr/more than 128 directives/, 'more than 128 directives and literal runs: refused';
    like Serow::Loop->access_log_format_error('x' x 70000), qr/longer than a line may be/,
        'a format longer than a line: refused';
};

done_testing;
