use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Serow::Listener ();
use Serow::Options ();
use Serow::Test qw(start_server http_get);

# The sample units in eg/systemd: serow.service's ExecStart is a serow
# command line that Serow accepts, and starts (as root, where it may switch
# to its --user); serow.socket's addresses are ones --listen takes; the
# template serow@.service (the Debian package's) with the settings of
# serow-instance.default is such a command line too.  No systemd is needed:
# t/listen/systemd.t tests LISTEN_FDS itself.

my $ROOT = Serow::Test::root();

# { key => [values] } of a unit file, comments and sections left out.
sub unit {
    my ($file) = @_;
    open(my $fh, '<', "$ROOT/eg/systemd/$file") or die "$file: $!";
    my %unit;
    while (my $line = <$fh>) {
        next if $line =~ /^\s*(?:[#;]|\[|$)/;
        my ($key, $value) = $line =~ /^(\w+)=(.*?)\s*$/ or die "$file: cannot read: $line";
        push @{ $unit{$key} }, $value;
    }
    return \%unit;
}

my $service = unit('serow.service');
my $socket = unit('serow.socket');

is scalar(@{ $service->{ExecStart} }), 1, 'one ExecStart';
my ($command, @argv) = split ' ', $service->{ExecStart}[0];
like $command, qr{/serow$}, 'it runs serow';
my ($options, @rest) = eval { Serow::Options->from_argv(@argv) };
ok $options, 'its options parse' or diag $@;
is scalar(@rest), 1, 'one argument after them';
like $rest[0], qr/\.psgi$/, 'the app';
cmp_ok $service->{TimeoutStopSec}[0], '>', $options->{graceful_timeout},
    'systemd waits longer than --graceful-timeout before it kills';
is_deeply $service->{KillMode}, ['mixed'], 'TERM goes to the master alone';
# Serow::Notify speaks from the master only.
is_deeply $service->{Type}, ['notify'], 'Type=notify';
is_deeply $service->{NotifyAccess}, ['main'], "the master's messages alone";
is_deeply $service->{Requires}, ['serow.socket'];

for my $address (@{ $socket->{ListenStream} }) {
    ok eval { Serow::Listener->parse_address($address) }, "ListenStream=$address is a --listen address" or diag $@;
}

# The settings file a template's EnvironmentFile names: NAME=value lines.
sub environment_file {
    my ($file) = @_;
    open(my $fh, '<', "$ROOT/eg/systemd/$file") or die "$file: $!";
    return { map { /^(\w+)=(.*?)\s*$/ ? ($1 => $2) : () } grep { !/^\s*(?:#|$)/ } <$fh> };
}

# ExecStart's words as systemd makes them: $VAR is split at white space,
# ${VAR} stays one word.
sub expand_exec_start {
    my ($line, $environment) = @_;
    return map {
        /^\$\{(\w+)\}$/ ? ($environment->{$1} // die "no $1")
            : /^\$(\w+)$/ ? split(' ', $environment->{$1} // die "no $1") : $_
    } split ' ', $line;
}

subtest 'serow@.service: one server per app, its settings in /etc/default/serow-NAME' => sub {
    my $template = unit('serow@.service');
    is_deeply $template->{EnvironmentFile}, ['/etc/default/serow-%i'], 'EnvironmentFile is the instance\'s';
    is scalar(@{ $template->{ExecStart} }), 1, 'one ExecStart';
    my ($command, @argv) = expand_exec_start($template->{ExecStart}[0], environment_file('serow-instance.default'));
    is $command, '/usr/bin/serow', 'the packaged serow';
    my ($options, @rest) = eval { Serow::Options->from_argv(@argv) };
    ok $options, 'the example settings give options that parse' or return diag $@;
    is_deeply \@rest, ['/srv/myapp/app.psgi'], 'and the app file, one word';
    cmp_ok $template->{TimeoutStopSec}[0], '>', $options->{graceful_timeout},
        'systemd waits longer than the example --graceful-timeout';
    for my $key (qw(Type NotifyAccess KillMode WatchdogSec ExecReload)) {
        is_deeply $template->{$key}, $service->{$key}, "$key as in serow.service";
    }
    is_deeply $template->{WantedBy}, ['multi-user.target'], 'systemctl enable serow@NAME starts it at boot';
};

subtest 'the ExecStart options start a server' => sub {
    plan skip_all => '--user needs root' if $> != 0;
    plan skip_all => "no user $options->{user}" unless getpwnam($options->{user});
    my $server = start_server(app_file => 't/apps/pid.psgi', options => [ @argv[0 .. $#argv - 1] ]);
    ok $server->wait_for_log(qr/with $options->{workers} workers .*workers run as $options->{user}:$options->{group}/),
        'with its workers and user' or diag $server->log;
    is http_get($server, '/')->{status}, 200, 'and serves';
    is $server->stop, 0;
};

done_testing;
