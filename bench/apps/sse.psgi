# bench/holding's subscriber: a server-sent-event stream held by GRIP, on the
# channel named by ?channel= ("bench" by default).  Serow with --grip holds it
# in its connection holder; without --grip the Grip-* headers pass, for
# Pushpin in front to hold it.  No Grip-Keep-Alive: nothing but the publishes
# is written to a held stream.
sub {
    my ($env) = @_;
    my ($channel) = ($env->{QUERY_STRING} // '') =~ /(?:^|&)channel=([\w-]+)/;
    return [200, [
        'Content-Type'  => 'text/event-stream',
        'Cache-Control' => 'no-cache',
        'Grip-Hold'     => 'stream',
        'Grip-Channel'  => $channel // 'bench',
    ], [":held\n\n"]];
};
