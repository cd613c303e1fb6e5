# Answers with the pid of the worker that ran it; logs where it was loaded.
my $loaded_in = $$;
print STDERR "test app loaded in pid $loaded_in\n";
sub {
    my ($env) = @_;
    return [200, ['Content-Type' => 'text/plain'],
        ["pid $$ loaded-in $loaded_in server $env->{SERVER_NAME}:$env->{SERVER_PORT}\n"]];
};
