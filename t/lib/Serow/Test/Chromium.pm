package Serow::Test::Chromium;
use strict;
use warnings;

# A headless Chromium (Debian's package chromium) driven by the DevTools
# protocol over --remote-debugging-pipe: no port, no chromedriver.  Chromium
# reads commands on its descriptor 3 and writes answers and events on its
# descriptor 4, each message JSON ending in a NUL byte.
#
#   use Serow::Test::Chromium;
#   my $browser = Serow::Test::Chromium->start;       # dies without chromium
#   Serow::Test::Chromium->start(home => $dir);       # HOME: its NSS database
#                                                     # ($dir/.pki/nssdb), the CAs it trusts
#   my $page = $browser->new_page;                    # a tab, attached
#   $browser->send($page, 'Page.navigate', { url => $url });
#   my $value = $browser->evaluate($page, 'document.title');
#   my $event = $browser->wait_event('Fetch.requestPaused');
#   $browser->stop;
#
# Every wait has a generous timeout (Chromium starts slowly on a loaded
# machine) and dies when it passes, with what Chromium wrote on stderr.

use parent 'Serow::Test::Daemon';
use Fcntl ();
use IO::Handle ();
use IO::Select ();
use JSON::PP ();
use POSIX ();
use Time::HiRes ();
use Serow::Test::Components qw(find_command);
use Serow::Test::Process qw(fork_group);

# Components' bound for a whole headless run: a cold start takes 25 s on a
# loaded machine.
use constant TIMEOUT => Serow::Test::Components::CHROMIUM_TIMEOUT();

sub binary { find_command('chromium', '/usr/bin') }

sub start {
    my ($class, %o) = @_;
    my $binary = binary() or die "no chromium binary\n";
    my $self = $class->new('chromium');
    @$self{qw(next_id events in)} = (0, [], '');
    my $dir = "$self->{dir}";
    pipe(my $commands_r, my $commands_w) or die "pipe: $!";
    pipe(my $answers_r, my $answers_w) or die "pipe: $!";
    $self->{pid} = fork_group(sub {
        # Chromium's descriptors 3 and 4 (dup2 clears close-on-exec).  Each
        # end is first copied above them: either may be 3 or 4 itself.
        my @ends = map { fcntl($_, Fcntl::F_DUPFD(), 10) // POSIX::_exit(111) } $commands_r, $answers_w;
        POSIX::dup2($ends[0], 3) // POSIX::_exit(111);
        POSIX::dup2($ends[1], 4) // POSIX::_exit(111);
        open(STDIN, '<', '/dev/null');
        open(STDOUT, '>', '/dev/null');
        open(STDERR, '>', "$dir/stderr.log");
        delete $ENV{LD_PRELOAD}; # tools/test-sanitized's libasan is for perl
        $ENV{HOME} = $o{home} if defined $o{home};
        # --no-sandbox: as root Chromium refuses its sandbox, and a container
        # often cannot give it one (Components' headless_chromium does the
        # same); the pages are the test's own.
        { exec $binary, '--headless', '--remote-debugging-pipe', "--user-data-dir=$dir/profile",
            qw(--no-sandbox --no-first-run --no-default-browser-check --disable-gpu --disable-extensions
               --disable-background-networking --disable-sync --disable-dev-shm-usage
               --no-proxy-server --password-store=basic --use-mock-keychain about:blank) }
        POSIX::_exit(112);
    });
    close $commands_r;
    close $answers_w;
    $commands_w->autoflush(1);
    @$self{qw(to from)} = ($commands_w, $answers_r);
    $self->call(undef, 'Browser.getVersion');
    return $self;
}

sub stderr { $_[0]->_slurp('stderr.log') }

# send($session, $method, \%params): the command's id, not waiting.
sub send {
    my ($self, $session, $method, $params) = @_;
    my $id = ++$self->{next_id};
    my $message = JSON::PP->new->canonical->encode({ id => $id, method => $method,
        params => $params // {}, ($session ? (sessionId => $session) : ()) });
    print { $self->{to} } $message, "\0" or die "chromium: cannot send $method: $!\n";
    return $id;
}

# call($session, $method, \%params): its result, waiting for it; dies on an error.
sub call {
    my ($self, $session, $method, $params) = @_;
    my $id = $self->send($session, $method, $params);
    my $answer = $self->_wait(sub { ($_[0]{id} // 0) == $id }, "the answer to $method");
    die "chromium: $method: " . JSON::PP->new->encode($answer->{error}) . "\n" if $answer->{error};
    return $answer->{result};
}

# A new tab, attached in the "flat" mode: its session id.
sub new_page {
    my ($self) = @_;
    my $target = $self->call(undef, 'Target.createTarget', { url => 'about:blank' })->{targetId};
    return $self->call(undef, 'Target.attachToTarget', { targetId => $target, flatten => JSON::PP::true })
        ->{sessionId};
}

# The value of a JavaScript expression in the page (JSON-able).
sub evaluate {
    my ($self, $session, $expression) = @_;
    my $r = $self->call($session, 'Runtime.evaluate', { expression => $expression,
        returnByValue => JSON::PP::true });
    die "chromium: $expression: $r->{exceptionDetails}{text}\n" if $r->{exceptionDetails};
    return $r->{result}{value};
}

# The next event named $method (and for which $match->($params) is true,
# when given), waiting for it; the events before it that it skips are kept
# for later waits.
sub wait_event {
    my ($self, $method, $match, $timeout) = @_;
    my $wanted = sub { !defined $_[0]{id} && ($_[0]{method} // '') eq $method
        && (!$match || $match->($_[0]{params})) };
    return $self->_wait($wanted, "the event $method", $timeout)->{params};
}

# Until a message for which $wanted is true: taken from those kept, or read.
sub _wait {
    my ($self, $wanted, $what, $timeout) = @_;
    my $kept = $self->{events};
    for my $i (0 .. $#$kept) {
        return splice(@$kept, $i, 1) if $wanted->($kept->[$i]);
    }
    my $deadline = Time::HiRes::time + ($timeout // TIMEOUT);
    my $select = IO::Select->new($self->{from});
    while (1) {
        while ($self->{in} =~ s/\A([^\0]*)\0//) {
            my $message = JSON::PP::decode_json($1);
            return $message if $wanted->($message);
            push @$kept, $message if !defined $message->{id};
        }
        my $left = $deadline - Time::HiRes::time;
        die "chromium: no $what in " . ($timeout // TIMEOUT) . " s\n" . $self->stderr if $left <= 0;
        next unless $select->can_read($left);
        my $n = sysread $self->{from}, $self->{in}, 1 << 20, length $self->{in};
        die "chromium: it ended, waiting for $what\n" . $self->stderr unless $n;
    }
}

# Browser.close; the end of its commands too.
sub ask_to_stop {
    my ($self) = @_;
    eval { $self->send(undef, 'Browser.close') };
    close $self->{to};
}

1;
