package Serow::Test::Apps;
use strict;
use warnings;

# PSGI apps that tests run in a server: one that answers with what it saw,
# one whose requests wait on a gate (Serow::Test::Gate) as long as the test
# wants.

use Exporter 'import';

our @EXPORT_OK = qw(echo_app gated_app);

# An app that answers with what it saw, as JSON: method, path, query, uri,
# host, protocol, content_length, transfer_encoding and the body it read.
sub echo_app {
    require JSON::PP;
    return sub {
        my ($env) = @_;
        my $body = '';
        my $in = $env->{'psgi.input'};
        while ($in->read(my $part, 65536)) { $body .= $part }
        my %seen = (
            method => $env->{REQUEST_METHOD}, path => $env->{PATH_INFO},
            query => $env->{QUERY_STRING}, uri => $env->{REQUEST_URI},
            host => $env->{HTTP_HOST}, protocol => $env->{SERVER_PROTOCOL},
            content_length => $env->{CONTENT_LENGTH},
            transfer_encoding => $env->{HTTP_TRANSFER_ENCODING}, body => $body,
        );
        return [200, ['Content-Type' => 'application/json'],
                [JSON::PP->new->canonical->encode(\%seen)]];
    };
}

# gated_app($gate): an app whose /slow requests log "slow request in worker
# PID" and stay in the app until the gate lets them through; any other path
# answers "pid PID" at once.
sub gated_app {
    my ($gate) = @_;
    return sub {
        my ($env) = @_;
        if ($env->{PATH_INFO} eq '/slow') {
            print STDERR "slow request in worker $$\n";
            $gate->wait;
            return [200, ['Content-Type' => 'text/plain'], ["slow request done by $$"]];
        }
        return [200, ['Content-Type' => 'text/plain'], ["pid $$"]];
    };
}

1;
