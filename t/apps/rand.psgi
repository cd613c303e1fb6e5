# Uses rand() at load time (in the master), then answers with the worker's
# first draw and leaves (psgix.harakiri), so each request meets a new worker.
my $at_load = rand();
sub {
    my ($env) = @_;
    $env->{'psgix.harakiri.commit'} = 1;
    return [200, ['Content-Type' => 'text/plain'], ["pid $$ rand " . rand() . "\n"]];
};
