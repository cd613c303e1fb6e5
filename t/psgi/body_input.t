# psgi.input of a small body that came whole with its head is one
# in-memory handle per worker, filled and rewound for each such request
# (src/psgi/psgi_env.c); a body of 1 KiB or more is not copied into its scalar but
# read where it lies, in the connection's buffer, lent until the next body
# (src/psgi/psgi_input.c).  Each request must read its own body whatever an app did
# to the handle before: kept it (or an env with it), closed it, pushed a
# layer on it, opened it again on a scalar of its own, left it half read.
use strict;
use warnings;
use Test::More;
use JSON::PP ();
use lib 't/lib';
use Serow::Test qw(start_server raw_connect read_response);

my $json = JSON::PP->new->canonical;
my $limit = 64 * 1024;
my ($kept_handle, $kept_env, $own_scalar);

my $app = sub {
    my ($env) = @_;
    my $in = $env->{'psgi.input'};
    my $how = $env->{QUERY_STRING};
    # How many requests this very handle has served: a mark in its glob.
    my $uses = ++${*$in}{serow_test_uses};
    if ($how eq 'keep-handle') { $kept_handle = $in }
    elsif ($how eq 'keep-env') { $kept_env = $env }
    elsif ($how eq 'read-kept') {
        my $handle = $kept_handle // $kept_env->{'psgi.input'};
        undef $kept_handle;
        undef $kept_env;
        seek($handle, 0, 0);
        local $/;
        my $body = <$handle>;
        return [200, ['Content-Type' => 'text/plain'], [$body // '']];
    }
    elsif ($how eq 'own-scalar') {
        return [200, ['Content-Type' => 'text/plain'], [$own_scalar // '(none)']];
    }
    my $body = '';
    if ($how eq 'partial') { read($in, $body, 3) }
    else { 1 while read($in, $body, 8192, length $body) }
    my $answer = $json->encode({ body => $body, length => length $body, uses => $uses,
        layers => join(',', PerlIO::get_layers($in)) });
    if ($how eq 'close') { close $in }
    elsif ($how eq 'utf8') { binmode($in, ':utf8') }
    elsif ($how eq 'encoding') { binmode($in, ':encoding(UTF-16LE)') }
    elsif ($how eq 'reopen') {
        $own_scalar = 'the app\'s own';
        open($in, '<', \$own_scalar) or die "reopen: $!";
    }
    return [200, ['Content-Type' => 'application/json'], [$answer]];
};

my $server = start_server(app => $app,
    options => ['--workers', 1, '--body-memory-limit', $limit]);
my $sock = raw_connect($server);

sub post {
    my ($query, $body) = @_;
    syswrite $sock, "POST /?$query HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\n"
        . "Content-Length: " . length($body) . "\r\n\r\n$body";
    my $res = read_response($sock) or BAIL_OUT('no response: ' . $server->log);
    return $res->{headers}{'content-type'} eq 'application/json' ? $json->decode($res->{body})
        : $res->{body};
}

# A body no earlier request had: a stale handle would show another.
my $serial = 0;
sub fresh_body {
    my ($size) = @_;
    my $body = 'body' . ++$serial . ':';
    return $body . ('x' x ($size - length $body)) if $size > length $body;
    return substr($body, 0, $size);
}

subtest 'one handle, filled for each request' => sub {
    # (the first body is read by the Perl worker, which makes the handle)
    post('', fresh_body(20));
    my @uses;
    for my $size (20, 500, 100, 20) {
        my $body = fresh_body($size);
        my $got = post('', $body);
        is $got->{body}, $body, "a $size-byte body read whole";
        push @uses, $got->{uses};
    }
    is_deeply \@uses, [map { $uses[0] + $_ } 0 .. 3], 'by the same handle each time';
    is post('', '')->{body}, '', 'an empty body reads empty';
    is post('', fresh_body(10))->{layers}, 'scalar', 'bytes, the in-memory layer alone';
};

subtest 'the largest bodies it takes, and one more byte' => sub {
    for my $size ($limit - 1, $limit, $limit + 1) {
        my $body = fresh_body($size);
        my $got = post('', $body);
        is $got->{length}, $size, "$size bytes: all";
        ok $got->{body} eq $body, "$size bytes: its own";
    }
    my $body = fresh_body(50);
    is post('', $body)->{body}, $body, 'a small body again after them';
};

# Bodies copied into the handle's scalar, and bodies lent (1 KiB and more).
for my $size (40, 5000) {
    for my $keep (qw(keep-handle keep-env)) {
        subtest "an app that keeps the handle ($keep) reads its $size-byte body later" => sub {
            my $first = fresh_body($size);
            is post($keep, $first)->{body}, $first, 'the first body';
            my $second = fresh_body($size);
            my $got = post('', $second);
            is $got->{body}, $second, 'the next request reads its own body';
            is $got->{uses}, 1, '... from another handle: the kept one is not refilled';
            is post('read-kept', fresh_body($size)), $first,
                'the kept handle still reads the first body';
            my $after = fresh_body($size);
            is post('', $after)->{body}, $after, 'once it is let go ...';
            my $again = post('', fresh_body($size));
            cmp_ok $again->{uses}, '>', 1, '... one handle serves again';
        };
    }

    for my $abuse (qw(close utf8 encoding partial)) {
        subtest "after an app did $abuse to it ($size bytes)" => sub {
            post($abuse, fresh_body($size));
            for (1, 2) {
                my $body = fresh_body($size + 20) . "\xC3\xA9\xFF";
                my $got = post('', $body);
                is $got->{body}, $body, "request $_ after it reads its own bytes";
                is $got->{layers}, 'scalar', '... as bytes';
            }
        };
    }
}

subtest 'an app that opened the handle again on its own scalar' => sub {
    post('reopen', fresh_body(40));
    my $body = fresh_body(45);
    my $got = post('', $body);
    is $got->{body}, $body, 'the next request reads its own body';
    is post('own-scalar', fresh_body(5)), q{the app's own}, "the app's scalar is left alone";
};

subtest 'pipelined requests with bodies, each its own' => sub {
    my @bodies = map { fresh_body(30 + $_) } 1 .. 20;
    syswrite $sock, join '', map {
        "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: " . length($_) . "\r\n\r\n$_"
    } @bodies;
    my $buffer = '';
    my @read = map { $json->decode(read_response($sock, buffer => \$buffer)->{body})->{body} } @bodies;
    is_deeply \@read, \@bodies, 'all read, in order';
};

subtest 'pipelined requests with bodies of 1 KiB and more, each its own' => sub {
    my @bodies = map { fresh_body(1000 + 397 * $_) } 0 .. 9;
    syswrite $sock, join '', map {
        "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: " . length($_) . "\r\n\r\n$_"
    } @bodies;
    my $buffer = '';
    my @read = map { $json->decode(read_response($sock, buffer => \$buffer)->{body})->{body} } @bodies;
    ok +(!grep { $read[$_] ne $bodies[$_] } 0 .. $#bodies), 'all read, in order';
    my $after = fresh_body(3000);
    is post('', $after)->{body}, $after, 'and the next request';
};

is $server->stop, 0, 'clean stop';
unlike $server->log, qr/\[error\]/, 'no errors logged';
done_testing;
