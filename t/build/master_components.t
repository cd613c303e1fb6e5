# The master is made of components (docs/development.md, "The Perl side"):
# each an object of its own class under lib/Serow/Master/, owning its fields,
# used by the others only through its methods, given the components it uses
# when it is made, in one direction.  Nothing is mixed into the master's
# hash, no component reads another's fields, and neither the modules' use
# lines nor the components' references to each other go round in a circle.
# (What the master wires with callbacks, each a sub it owns, is not a
# reference this test follows.)
use strict;
use warnings;
use Test::More;
use Scalar::Util ();
use lib 't/lib';
use Serow::Test ();
use Serow::Options ();
use Serow::Master ();

my $ROOT = Serow::Test::root();
my @COMPONENT_FILES = sort glob "$ROOT/lib/Serow/Master/*.pm";
my @MASTER_FILES = ("$ROOT/lib/Serow/Master.pm", @COMPONENT_FILES);
# Beside the master: what runs in the processes it forks.
my @ALL_FILES = (@MASTER_FILES, map { "$ROOT/lib/Serow/$_.pm" } qw(Generation ConnectionHolder));

# Keys a component reads in data it is given, not in another component:
# a process's pid in Serow::Shared->status's entries.
my %DATA_KEYS = (pid => 1);

# A module's code: no POD, no comments, no strings' worth of prose.
sub code_of {
    my ($file) = @_;
    open(my $fh, '<', $file) or die "$file: $!";
    my $text = do { local $/; <$fh> };
    $text =~ s/^__END__\n.*//ms;
    $text =~ s/^\s*#.*$//mg;
    $text =~ s/\s#\s.*$//mg;
    return $text;
}

sub module_of {
    my ($file) = @_;
    my ($path) = $file =~ m{/lib/(.+)\.pm\z};
    return $path =~ s{/}{::}gr;
}

my %code = map { module_of($_) => code_of($_) } @ALL_FILES;
my @components = map { module_of($_) } @COMPONENT_FILES;

subtest 'nothing is mixed into the master' => sub {
    for my $module (map { module_of($_) } @MASTER_FILES) {
        ok $code{$module} !~ /\buse\s+(?:parent|base)\b/, "$module: no use parent or use base";
        ok $code{$module} !~ /\@ISA\b/, "$module: no \@ISA";
        ok $code{$module} !~ /\bSUPER::/, "$module: no SUPER::";
        no strict 'refs';
        is_deeply \@{"${module}::ISA"}, [], "$module inherits from nothing";
    }
};

subtest 'each component is a class with new; stateless helpers take no $self' => sub {
    for my $module (@components) {
        if ($code{$module} =~ /\$self\b/) {
            like $code{$module}, qr/^sub new \{/m, "$module has new";
            like $code{$module}, qr/\bbless\b.*\$class/s, "$module blesses its own object";
        } else {
            pass "$module keeps no state (class methods only)";
        }
    }
};

subtest 'no component reaches into the master or into another component' => sub {
    my $names = join '|', qw(master signals fork logs systemd holder generations workers limits);
    for my $module (sort keys %code) {
        my $code = $code{$module};
        ok $code !~ /\{\s*master\s*\}/, "$module holds no master";
        # $self->{workers}{...}, $self->{workers}->{...}, $workers->{...}
        my @reaches = $code =~ /(\$self->\{(?:$names)\}\s*(?:->\s*)?[\{\[]|\$(?:$names)\s*->\s*[\{\[]|\$\$(?:$names)\s*\{)/g;
        is_deeply \@reaches, [], "$module subscripts no component" or diag "@reaches";
    }
    # Each component's own fields ($self->{...}); a field one component
    # alone has is read by no other module.
    my %owners;
    for my $module ('Serow::Master', @components) {
        my %fields = map { $_ => 1 } $code{$module} =~ /\$(?:self->|_\[0\])\{(\w+)\}/g;
        push @{ $owners{$_} }, $module for keys %fields;
    }
    for my $module ('Serow::Master', @components) {
        my $code = $code{$module} =~ s/\$(?:self->|_\[0\])\{\w+\}//gr;
        my @reads = grep { my $o = $owners{$_}; $o && @$o == 1 && $o->[0] ne $module && !$DATA_KEYS{$_} }
            $code =~ /(?:->|\})\s*\{(\w+)\}/g;
        is_deeply \@reads, [], "$module reads no other component's field"
            or diag join ' ', map { "$_ (of $owners{$_}[0])" } @reads;
    }
};

# The modules each one uses (use or require), among those checked.
my %uses;
for my $module (sort keys %code) {
    my %used = map { $_ => 1 } grep { exists $code{$_} && $_ ne $module }
        $code{$module} =~ /^\s*(?:use|require)\s+([\w:]+)/mg;
    $uses{$module} = [sort keys %used];
}

# A path that comes back to where it started, or none.
sub find_cycle {
    my ($edges) = @_;
    my %state; # 1: on the path, 2: done
    my @path;
    my $visit;
    $visit = sub {
        my ($node) = @_;
        return if ($state{$node} // 0) == 2;
        if (($state{$node} // 0) == 1) {
            my ($from) = grep { $path[$_] eq $node } 0 .. $#path;
            return [@path[$from .. $#path], $node];
        }
        $state{$node} = 1;
        push @path, $node;
        for my $next (@{ $edges->{$node} // [] }) {
            my $cycle = $visit->($next);
            return $cycle if $cycle;
        }
        pop @path;
        $state{$node} = 2;
        return;
    };
    for my $node (sort keys %$edges) {
        my $cycle = $visit->($node);
        return $cycle if $cycle;
    }
    return;
}

subtest 'the use lines go one way' => sub {
    my $cycle = find_cycle(\%uses);
    ok !$cycle, 'no module uses one that uses it back' or diag join ' -> ', @$cycle;
    for my $module (@components) {
        ok !grep({ $_ eq 'Serow::Master' } @{ $uses{$module} }), "$module does not use Serow::Master";
    }
};

subtest 'the components of a master hold each other one way' => sub {
    my $options = Serow::Options->defaults;
    my $master = Serow::Master->new(app => sub { [200, [], []] }, options => $options, listeners => []);
    my %held; # component class => classes of the components it holds
    my @todo = ($master);
    my %seen;
    while (my $object = shift @todo) {
        next if $seen{ Scalar::Util::refaddr($object) }++;
        my $class = ref $object;
        for my $value (values %$object) {
            for my $item (ref $value eq 'ARRAY' ? @$value : ref $value eq 'HASH'
                    && !Scalar::Util::blessed($value) ? values %$value : $value) {
                next unless Scalar::Util::blessed($item) && ref($item) =~ /\ASerow::Master\b/;
                $held{$class}{ ref $item } = 1;
                push @todo, $item;
            }
        }
    }
    my %edges = map { $_ => [sort keys %{ $held{$_} }] } keys %held;
    is_deeply [sort @{ $edges{"Serow::Master"} }],
        [sort grep { $_ ne 'Serow::Master::Retry' && $_ ne 'Serow::Master::Fork' } @components],
        'the master holds its components (Fork through them)';
    for my $class (grep { $_ ne 'Serow::Master' } sort keys %edges) {
        ok !$held{$class}{'Serow::Master'}, "$class holds no master";
    }
    my $cycle = find_cycle(\%edges);
    ok !$cycle, 'no component holds one that holds it back' or diag join ' -> ', @$cycle;
};

done_testing;
