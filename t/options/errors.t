use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Options ();
use Net::EmptyPort ();
use Serow::Test ();

# Option mistakes are errors that say what is wrong, whichever way the
# options come in: the serow command line, Serow::Server->new (and so
# plackup -s Serow), or Serow::Options itself.

my $ROOT = Serow::Test::root();

*serow = \&Serow::Test::run_serow;

subtest 'an unknown option is an error with a hint' => sub {
    my ($status, $text) = serow('--max-request', 5, "$ROOT/eg/hello.psgi");
    is $status, 2, 'exit status 2';
    like $text, qr/unknown option --max-request\b.*did you mean --max-requests\?/, 'names it and suggests the right one';

    ($status, $text) = serow('--wrokers', 5, "$ROOT/eg/hello.psgi");
    is $status, 2;
    like $text, qr/unknown option --wrokers.*did you mean --workers\?/;

    ($status, $text) = serow('--frobnicate-everything', "$ROOT/eg/hello.psgi");
    is $status, 2;
    like $text, qr/unknown option --frobnicate-everything \(see --help\)/, 'far from any option: only the pointer to --help';

    # What plackup -s Serow only warns of (a launcher's own option, as RT's
    # rt-server passes it: t/listen/plackup.t), the serow command refuses.
    ($status, $text) = serow('--webpath', '/rt', "$ROOT/eg/hello.psgi");
    is $status, 2, 'serow --webpath: exit status 2';
    like $text, qr/unknown option --webpath \(see --help\)/, 'serow --webpath is refused';
};

subtest 'a bad value names the option' => sub {
    for my $case (
        [['--workers', 'many'], qr/--workers: 'many' is not a whole number/],
        [['--workers', '-1'], qr/--workers: '-1' is not a whole number/],
        [['--workers', '0'], qr/--workers: '0' is not a whole number of at least 1/],
        [['--max-requests', '1.5'], qr/--max-requests: '1\.5' is not a whole number/],
        [['--graceful-timeout', '0'], qr/--graceful-timeout: '0' is not a positive number of seconds/],
        [['--keepalive-timeout', 'soon'], qr/--keepalive-timeout: 'soon' is not a positive number/],
        [['--max-body-size', '12Q'], qr/--max-body-size: '12Q' is not a size/],
        [['--socket-mode', '0999'], qr/--socket-mode: '0999' is not an octal mode/],
        [['--socket-mode', 'rw'], qr/--socket-mode: 'rw' is not an octal mode/],
        [['--listen', 'localhost'], qr/--listen: 'localhost' is not HOST:PORT/],
        [['--listen', '127.0.0.1:99999'], qr/--listen: port '99999' is out of range/],
    ) {
        my ($argv, $message) = @$case;
        my ($status, $text) = serow(@$argv, "$ROOT/eg/hello.psgi");
        is $status, 2, "@$argv: exit status 2";
        like $text, $message, "@$argv: says what is wrong";
    }
};

subtest 'access log and metrics options' => sub {
    my ($status, $text) = serow('--metrics-path', 'metrics', "$ROOT/eg/hello.psgi");
    is $status, 2, '--metrics-path without a leading /: exit status 2';
    like $text, qr{--metrics-path: 'metrics' is not a path}, 'names it';
    ($status, $text) = serow('--metrics-path', '/m', '--metrics-allow', '10.0.0.0/33', "$ROOT/eg/hello.psgi");
    is $status, 2, 'a prefix length out of range';
    like $text, qr{--metrics-allow: '10\.0\.0\.0/33' has a prefix length outside 0\.\.32};
    ($status, $text) = serow('--metrics-path', '/m', '--metrics-allow', 'localhost', "$ROOT/eg/hello.psgi");
    is $status, 2, 'a name instead of an address';
    like $text, qr{--metrics-allow: 'localhost' is not an IPv4 or IPv6 address or network};
    ($status, $text) = serow('--help');
    like $text, qr{--access-log=FILE\s.*Off by default}, '--help: the access log is off by default, and why';
};

subtest 'a missing value is an error too' => sub {
    my ($status, $text) = serow('--workers');
    is $status, 2;
    like $text, qr/workers/, 'names the option';
};

subtest 'arguments after the app are refused' => sub {
    my ($status, $text) = serow("$ROOT/eg/hello.psgi", '--workers', 2);
    is $status, 2;
    like $text, qr/unexpected arguments after the app: --workers 2 \(options go before it\)/;
};

subtest 'an app that does not load is an error' => sub {
    # (bound first, on a free port: the default 5000 may be anyone's)
    my ($status, $text) = serow('--listen', '127.0.0.1:' . Net::EmptyPort::empty_port(), "$ROOT/t/no-such-app.psgi");
    is $status, 2;
    like $text, qr/cannot load .*no-such-app\.psgi/;
};

subtest '--help lists every option with its default' => sub {
    my ($status, $text) = serow('--help');
    is $status, 0;
    for my $name (Serow::Options->names) {
        (my $flag = $name) =~ tr/_/-/;
        like $text, qr/^  --\Q$flag\E\b/m, "--$flag";
    }
    like $text, qr/--workers=N\s+worker processes \(default: 4\)/;
    like $text, qr/^  --lazy-app {2,}load the app in each worker/m, 'a switch without a value or default';
    like $text, qr/^  --lazy-apps {2,}same as --lazy-app \(uWSGI\)/m, 'and an alias that sets it';
};

subtest 'a switch: on when given, off by default, 1 or 0 as a hash key' => sub {
    my ($o, @rest) = Serow::Options->from_argv(qw(--lazy-app app.psgi));
    is $o->{lazy_app}, 1, '--lazy-app turns it on';
    is_deeply \@rest, ['app.psgi'], 'and takes no value: the next argument is the app';
    is +(Serow::Options->from_argv('app.psgi'))[0]{lazy_app}, 0, 'off by default';
    ok !eval { Serow::Options->from_argv('--lazy-app=1'); 1 }, '--lazy-app=1 dies';
    like $@, qr/\A--lazy-app takes no value/;
    my $switch = sub { Serow::Options->from_hash(@_)->{lazy_app} };
    is $switch->(lazy_app => 1), 1, 'lazy_app => 1';
    is $switch->('lazy-app' => 0), 0, 'lazy-app => 0';
    is $switch->(lazy_app => !!1), 1, 'Perl\'s true';
    is $switch->(lazy_app => !!0), 0, 'Perl\'s false';
    is $switch->(lazy_apps => 1), 1, 'uWSGI\'s name as a key';
    for my $bad ('yes', 2, [1]) {
        ok !eval { Serow::Options->from_hash(lazy_app => $bad); 1 }, "lazy_app => $bad dies";
        like $@, qr/\A--lazy-app: '\Q$bad\E' is not 1 or 0 \(a switch: give --lazy-app alone to turn it on\)/;
    }
};

subtest 'options as a hash: unknown keys and bad values die' => sub {
    ok !eval { Serow::Options->from_hash(max_request => 5); 1 }, 'an unknown key dies';
    like $@, qr/unknown option 'max_request' \(did you mean --max-requests\?/;
    ok !eval { Serow::Options->from_hash('max-requests' => 'x'); 1 }, 'a bad value dies';
    like $@, qr/--max-requests: 'x' is not a whole number/;
    my $o = Serow::Options->from_hash('max-requests' => 7, keepalive_timeout => '2.5', max_body_size => '2M');
    is $o->{max_requests}, 7, 'dashes or underscores';
    is $o->{keepalive_timeout}, 2.5;
    is $o->{max_body_size}, 2 * 1024 * 1024, 'sizes take suffixes';
    is $o->{workers}, 4, 'defaults are filled in';
};

subtest 'the command line: --name VALUE, --name=VALUE, repeats, -h -v, --' => sub {
    my ($o, @rest) = Serow::Options->from_argv('--workers=3', '--listen', 'a:1',
        '--listen=b:2,c:3', '--max-body-size', '2K', 'app.psgi', '--workers', 5);
    is $o->{workers}, 3, '--name=value';
    is_deeply $o->{listen}, ['a:1', 'b:2', 'c:3'], 'a list option repeats and splits on commas';
    is $o->{max_body_size}, 2048, '--name value';
    is_deeply \@rest, ['app.psgi', '--workers', 5], 'the first argument that is no option ends them';
    ($o, @rest) = Serow::Options->from_argv(qw(-hv -- --workers));
    ok $o->{help} && $o->{version}, '-hv is -h -v';
    is_deeply \@rest, ['--workers'], '-- ends the options';
    ok !eval { Serow::Options->from_argv(qw(--workers -1)); 1 }, '--workers -1 dies';
    like $@, qr/--workers: '-1' is not a whole number/, 'a value may start with a dash';
    ok !eval { Serow::Options->from_argv('-x'); 1 }, 'an unknown short option dies';
    like $@, qr/unknown option -x/;
    ok !eval { Serow::Options->from_argv('--help=yes'); 1 }, '--help takes no value';
    like $@, qr/--help takes no value/;
    ok !eval { Serow::Options->from_argv('--Workers', 2); 1 }, 'names are case-sensitive';
    like $@, qr/unknown option --Workers/;
};

subtest 'checking checked options again changes nothing' => sub {
    # script/serow checks the command line, then Serow::Server->new checks
    # the result again: every value must come out the same.
    my ($once) = Serow::Options->from_argv(qw(--socket-mode 0660 --workers 3 --max-body-size 1K
        --graceful-timeout 1.5 --listen 127.0.0.1:1 --listen /tmp/x.sock));
    delete @$once{qw(help version)};
    my $twice = Serow::Options->from_hash(%$once);
    is_deeply $twice, $once, 'from_hash(from_argv(...)) is from_argv(...)';
    is $twice->{socket_mode}, '0660', 'the mode stays 0660';
    is oct $twice->{socket_mode}, 0660;
    is(Serow::Options->from_hash(socket_mode => 0660)->{socket_mode}, '0660',
        'a Perl octal literal is the mode it says');
    is(Serow::Options->from_hash(socket_mode => '600')->{socket_mode}, '0600');
};

done_testing;
