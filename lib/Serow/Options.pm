package Serow::Options;
use strict;
use warnings;

# No Getopt::Long and no B at load time: the master loads this module, and
# what the master loads is in every worker's memory (B is loaded when a mode
# given as a Perl number has to be told from a string).

# Every option of the server, in one table: the command line, --help,
# Plack::Handler::Serow and the defaults all come from here.
#   name => [type, default, help]
# Types: int (whole number >= 0), count (whole number >= 1), size (bytes, K/M/G suffixes), seconds
# (a positive number), string, list (repeatable string), mode (octal, kept as
# a string such as "0660").
my @OPTIONS = (
    listen => ['list', [], 'HOST:PORT, [IPv6]:PORT, :PORT or /path/to.sock to listen on (repeatable; default 0.0.0.0:5000)'],
    socket_mode => ['mode', undef, 'permissions of UNIX sockets Serow creates, in octal (e.g. 0660)'],
    backlog => ['int', 1024, 'listen queue length'],
    workers => ['count', 4, 'worker processes'],
    max_requests => ['int', 0, 'requests a worker serves before it is replaced (0: never); each worker draws its own limit between 75% and 100% of it, so they do not all restart at once'],
    max_request_line => ['size', 8192, 'longest request line; longer gets 414'],
    max_header_size => ['size', 65536, 'largest header section; larger gets 431'],
    max_headers => ['int', 100, 'most header fields in a request; more gets 431'],
    max_body_size => ['size', 1024 ** 3, 'largest request body; larger gets 413 (0: no limit)'],
    body_memory_limit => ['size', 1024 * 1024, 'request bodies larger than this are buffered in an unlinked temp file instead of memory'],
    header_timeout => ['seconds', 10, 'time a client has to send a whole request head; then 408'],
    read_timeout => ['seconds', 60, 'time without progress while reading a request body; then 408'],
    write_timeout => ['seconds', 60, 'time without progress while writing a response; then the connection is closed'],
    keepalive_timeout => ['seconds', 5, 'time an idle keep-alive connection is kept open'],
    max_keepalive_requests => ['int', 0, 'requests on one connection before it is closed (0: no limit)'],
    max_keepalive_connections => ['int', 0, 'connections kept open at once, idle or busy; above it new connections are answered and closed, and the oldest idle ones closed (0: half the open-file limit)'],
    graceful_timeout => ['seconds', 30, 'on stop or HUP, time workers get to finish before they are killed'],
);

my %SPEC = @OPTIONS;
my @ORDER = @OPTIONS[grep { $_ % 2 == 0 } 0 .. $#OPTIONS];

sub names { @ORDER }
sub spec { $SPEC{ $_[1] } }

sub defaults {
    my %d;
    for my $name (@ORDER) {
        my $default = $SPEC{$name}[1];
        $d{$name} = ref $default eq 'ARRAY' ? [@$default] : $default;
    }
    return \%d;
}

sub _parse_size {
    my ($name, $v) = @_;
    $v =~ /\A\s*(\d+)\s*([kmg]?)i?b?\s*\z/i
        or die "--" . _dashed($name) . ": '$v' is not a size (a whole number of bytes, optionally with K, M or G)\n";
    return $1 * { '' => 1, k => 1024, m => 1024**2, g => 1024**3 }->{ lc $2 };
}

sub _dashed { (my $n = shift) =~ tr/_/-/; $n }

# A value Perl holds as a number and never held as a string.
sub _is_number {
    my ($value) = @_;
    return 0 unless defined $value && !ref $value;
    require B;
    my $flags = B::svref_2object(\$value)->FLAGS;
    return ($flags & (B::SVf_IOK() | B::SVf_NOK())) && !($flags & B::SVf_POK());
}

# Checks and converts one value; dies with a message naming the option.
sub normalize {
    my ($class, $name, $value) = @_;
    my $spec = $SPEC{$name} or die "unknown option '$name'\n";
    my $type = $spec->[0];
    my $flag = '--' . _dashed($name);
    if ($type eq 'int') {
        defined $value && $value =~ /\A\d+\z/ or die "$flag: '" . ($value // '') . "' is not a whole number\n";
        return $value + 0;
    }
    if ($type eq 'count') {
        defined $value && $value =~ /\A0*[1-9]\d*\z/
            or die "$flag: '" . ($value // '') . "' is not a whole number of at least 1\n";
        return $value + 0;
    }
    if ($type eq 'size') {
        return _parse_size($name, $value // '');
    }
    if ($type eq 'seconds') {
        defined $value && $value =~ /\A(?:\d+(?:\.\d*)?|\.\d+)\z/ && $value > 0
            or die "$flag: '" . ($value // '') . "' is not a positive number of seconds\n";
        return $value + 0;
    }
    if ($type eq 'mode') {
        # Kept as an octal string ("0660"), so that checking a checked value
        # again changes nothing; a Perl number (the literal 0660) is the mode.
        return sprintf '%04o', $value if _is_number($value) && $value >= 0 && $value <= 07777;
        defined $value && $value =~ /\A0?[0-7]{3,4}\z/ or die "$flag: '" . ($value // '') . "' is not an octal mode such as 0660\n";
        return sprintf '%04o', oct $value;
    }
    if ($type eq 'list') {
        return [ map { split /,/ } ref $value eq 'ARRAY' ? @$value : ($value) ];
    }
    return $value;
}

# Options given as a hash (Plack::Handler, Serow::Server->new): validated,
# defaults filled in.  Unknown keys are an error: a typo must not be ignored.
sub from_hash {
    my ($class, %given) = @_;
    my $opts = $class->defaults;
    for my $key (sort keys %given) {
        (my $name = $key) =~ tr/-/_/;
        next unless defined $given{$key};
        die "unknown option '$key'" . _hint($name) . "\n" unless $SPEC{$name};
        $opts->{$name} = $class->normalize($name, $given{$key});
    }
    return $opts;
}

# Parses a command line; returns (options, remaining arguments).  Every
# option is --name VALUE or --name=VALUE (a list option may be repeated);
# -h/--help and -v/--version take no value and may be bundled (-hv).  The
# options end at "--" or at the first argument that is not one (the app).
sub from_argv {
    my ($class, @argv) = @_;
    my %given;
    my ($help, $version) = (0, undef);
    while (@argv && $argv[0] =~ /\A-./) {
        my $arg = shift @argv;
        last if $arg eq '--';
        if ($arg =~ /\A-([^-].*)\z/s) {
            for my $letter (split //, $1) {
                if ($letter eq 'h') { $help = 1 }
                elsif ($letter eq 'v') { $version = 1 }
                else { die "unknown option -$letter (see --help)\n" }
            }
            next;
        }
        my ($flag, $value) = $arg =~ /\A--([^=]*)(?:=(.*))?\z/s;
        if ($flag eq 'help' || $flag eq 'h' || $flag eq 'version' || $flag eq 'v') {
            die "--$flag takes no value\n" if defined $value;
            if ($flag =~ /\Ah/) { $help = 1 } else { $version = 1 }
            next;
        }
        (my $name = $flag) =~ tr/-/_/;
        die "unknown option --$flag" . _hint($flag) . "\n" unless $SPEC{$name} && _dashed($name) eq $flag;
        if (!defined $value) {
            @argv or die "--$flag: a value is missing\n";
            $value = shift @argv;
        }
        if ($SPEC{$name}[0] eq 'list') {
            push @{ $given{$name} }, $value;
        } else {
            $given{$name} = $value;
        }
    }
    my $opts = $class->from_hash(%given);
    $opts->{help} = $help;
    $opts->{version} = $version;
    return ($opts, @argv);
}

# "did you mean --max-requests?" for a mistyped option.
sub _hint {
    my ($typed) = @_;
    $typed =~ tr/-/_/;
    my ($best, $best_distance);
    for my $name (@ORDER) {
        my $d = _distance(lc $typed, $name);
        ($best, $best_distance) = ($name, $d) if !defined $best_distance || $d < $best_distance;
    }
    return defined $best && $best_distance <= 3
        ? " (did you mean --" . _dashed($best) . "? see --help)"
        : " (see --help)";
}

sub _distance {
    my ($s, $t) = @_;
    my @prev = (0 .. length $t);
    for my $i (1 .. length $s) {
        my @cur = ($i);
        for my $j (1 .. length $t) {
            my $cost = substr($s, $i - 1, 1) eq substr($t, $j - 1, 1) ? 0 : 1;
            my $m = $prev[$j] + 1;
            $m = $cur[$j - 1] + 1 if $cur[$j - 1] + 1 < $m;
            $m = $prev[$j - 1] + $cost if $prev[$j - 1] + $cost < $m;
            push @cur, $m;
        }
        @prev = @cur;
    }
    return $prev[-1];
}

sub help_text {
    my $text = '';
    for my $name (@ORDER) {
        my ($type, $default, $help) = @{ $SPEC{$name} };
        my $d = ref $default eq 'ARRAY' ? '' : defined $default ? " (default: $default)" : '';
        $text .= sprintf "  --%-24s %s%s\n", _dashed($name) . ($type eq 'list' ? '=...' : '=N'),
            $help, $d;
    }
    return $text;
}

1;
__END__

=head1 NAME

Serow::Options - the options of the Serow server: names, types, defaults, checks

=head1 SYNOPSIS

    my ($options, @rest) = Serow::Options->from_argv(@ARGV);
    my $options = Serow::Options->from_hash(workers => 8, listen => ['127.0.0.1:8080']);

=head1 DESCRIPTION

One table holds every option with its type, default and help line. Values are
checked when they are given: a bad value dies with a message that names the
option and the problem, and an unknown option is an error with a hint, never
silently ignored. Sizes accept C<K>, C<M> and C<G> suffixes.

See L<serow> for the list of options.

=cut
