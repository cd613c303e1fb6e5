package Serow::Privileges;
use strict;
use warnings;

use Serow ();

# --user and --group.  The master resolves the names when it starts (so a
# wrong name is an error before anything is bound) and keeps its own ids:
# it runs no request, and as root it can still remove the pid file and the
# UNIX sockets it made when it stops.  Every child it forks -- the workers
# and the connection holder -- drops to the user before it touches a
# connection.  The holder must run as the same user as the workers: it
# takes their idle connections with pidfd_getfd, which the kernel allows
# only between processes of one user (or with CAP_SYS_PTRACE, which a
# process that handles clients' bytes must not keep).

# Returns undef when there is nothing to change; dies with a message naming
# the option when a name is wrong or the change is not allowed.
sub resolve {
    my ($class, %opts) = @_;
    my ($user, $group) = @opts{qw(user group)};
    return undef unless defined $user || defined $group;
    my ($uid, $gid, $user_name);
    if (defined $user) {
        my @pw = $user =~ /\A\d+\z/ ? getpwuid($user) : getpwnam($user);
        if (@pw) {
            ($user_name, $uid, $gid) = @pw[0, 2, 3];
        } elsif ($user =~ /\A\d+\z/) {
            $uid = $user + 0; # a uid with no passwd entry: its group must be given
            defined $group or die "--user: uid $user has no entry in the user database: give --group too\n";
        } else {
            die "--user: no such user '$user'\n";
        }
    }
    if (defined $group) {
        my @gr = $group =~ /\A\d+\z/ ? getgrgid($group) : getgrnam($group);
        @gr || $group =~ /\A\d+\z/ or die "--group: no such group '$group'\n";
        $gid = @gr ? $gr[2] : $group + 0;
    }
    $uid //= $>;
    my @groups = ($gid, defined $user_name ? _supplementary_groups($user_name, $gid) : ());
    if ($> != 0) {
        # Without root nothing can change; asking for what we already are is fine.
        return undef if $uid == $> && $gid == (split ' ', $))[0];
        die defined $user ? "--user: switching to '$user' needs root (serow runs as uid $>)\n"
                          : "--group: switching to '$group' needs root (serow runs as uid $>)\n";
    }
    return bless { uid => $uid, gid => $gid, groups => \@groups,
                   name => ($user_name // $uid) . ':' . (getgrgid($gid) // $gid) }, $class;
}

sub uid { $_[0]{uid} }
sub gid { $_[0]{gid} }
# "nobody:nogroup", for the log.
sub name { $_[0]{name} }

# The groups that list the user as a member, as initgroups(3) would set:
# read here, in the master, so that no child depends on the group database.
sub _supplementary_groups {
    my ($user_name, $gid) = @_;
    my %seen = ($gid => 1);
    my @groups;
    setgrent();
    while (my @gr = getgrent()) {
        push @groups, $gr[2] if !$seen{ $gr[2] }++ && grep { $_ eq $user_name } split ' ', $gr[3];
    }
    endgrent();
    return @groups;
}

# In a forked child, before it serves anything.  Dies if any id did not
# change, or if the process could become root again.
sub drop {
    # Only here, in a child that switches users: POSIX loaded in the master
    # would be in every worker's memory.
    require POSIX;
    my ($self) = @_;
    my ($uid, $gid) = @$self{qw(uid gid)};
    # Groups first: once the uid is not root they can no longer be changed.
    # Assigning $) calls setgroups(2) with the list after the first number.
    $) = join ' ', $gid, @{ $self->{groups} };
    POSIX::setgid($gid) or die "--group: cannot switch to gid $gid: $!\n";
    POSIX::setuid($uid) or die "--user: cannot switch to uid $uid: $!\n";
    my %ids = _ids_from_proc();
    my @wrong = grep { $_ ne "Uid $uid $uid $uid $uid" && $_ ne "Gid $gid $gid $gid $gid" }
        map { "$_ $ids{$_}" } qw(Uid Gid);
    die "after dropping privileges: real, effective, saved and file-system ids are not all the asked ones (@wrong)\n"
        if @wrong;
    my $groups = join ' ', sort { $a <=> $b } @{ $self->{groups} };
    $ids{Groups} eq $groups
        or die "after dropping privileges: supplementary groups are '$ids{Groups}', not '$groups'\n";
    if ($uid != 0 && POSIX::setuid(0)) {
        die "after dropping privileges: could become root again\n";
    }
    # Changing the uid made this process non-dumpable, and so out of the
    # connection holder's reach (see above).
    Serow::set_dumpable(1) or die "cannot set the process dumpable again: $!\n";
    return 1;
}

# What to add to an error of loading the app that says "Permission denied",
# in the process that loads it (switched to --user): the user, and the
# file perl or the app could not read (named in the error, or the app file
# itself), so that RT's "Can't locate RT_SiteConfig.pm: ... Permission
# denied" says why.  '' for any other error, or when this process is root.
sub load_denied_hint {
    my ($class, $error, $app_file) = @_;
    return '' if $> == 0 || $error !~ /Permission denied/;
    my $user = getpwuid($>) // "uid $>";
    my ($file) = grep { -e && !-r } $error =~ m{(/[^\s:'"]+)['"]?:? Permission denied}g;
    $file //= $app_file if defined $app_file && -e $app_file && !-r $app_file;
    my $what = defined $file ? "$file is not readable by $user" : "a file it needs is not readable by $user";
    return "serow loads the app as the --user it switched to, never as root: $what "
        . "(give its group read access, or see --user in man serow)\n";
}

# Uid and Gid lines of /proc/self/status ("real effective saved
# filesystem") and Groups (sorted).
sub _ids_from_proc {
    open(my $fh, '<', '/proc/self/status') or die "cannot read /proc/self/status: $!\n";
    my %ids;
    while (my $line = <$fh>) {
        $ids{$1} = join ' ', split ' ', $2 if $line =~ /\A(Uid|Gid):\s*(.*)/;
        $ids{Groups} = join ' ', sort { $a <=> $b } split ' ', $1 if $line =~ /\AGroups:\s*(.*)/;
    }
    return %ids;
}

1;
__END__

=head1 NAME

Serow::Privileges - --user and --group: which ids the workers and the holder run as

=head1 DESCRIPTION

C<< Serow::Privileges->resolve(user => ..., group => ...) >> turns names (or
numbers) into ids in the master, before any socket is opened: a wrong name,
or a switch without root, is an error that names the option.

C<< Serow::Privileges->load_denied_hint($error, $app_file) >>, in the
process that loads the app after the switch: when loading failed with
"Permission denied", a line naming the user and the file it could not read.

C<< ->drop >> runs in every forked child (workers and the connection
holder): supplementary groups (those of the user, as initgroups(3) sets
them), then the gid, then the uid, each real, effective and saved; then it
checks the ids in F</proc/self/status>, checks that it cannot become root
again, and sets the process dumpable again (changing the uid clears that
flag, and the connection holder needs it to take a busy worker's idle
connections with pidfd_getfd(2)).

The master keeps its ids: it runs no request, and it removes the pid
file and the UNIX sockets it created when it stops.

=cut
