package Serow::Holding;
use strict;
use warnings;

use Serow ();

# publish() is C (xs/holding.xsh, src/psgi/psgi_hold.c): the item is encoded
# there and sent to the connection holder, with no HTTP round trip.

# --hold-max-channels and --publish-max-item within what the C holds room
# for (dies with a message naming the option at fault).
sub check_options {
    my ($class, $options) = @_;
    my $channels = $options->{hold_max_channels};
    die "--hold-max-channels: $channels is not between 1 and " . MAX_CHANNELS() . "\n"
        unless $channels >= 1 && $channels <= MAX_CHANNELS();
    my $item = $options->{publish_max_item};
    die "--publish-max-item: $item is not between 1 and " . MAX_ITEM() . " (128K)\n"
        unless $item >= 1 && $item <= MAX_ITEM();
    return;
}

1;
__END__

=head1 NAME

Serow::Holding - publish to the connections Serow holds for GRIP streams and long polls

=head1 SYNOPSIS

    use Serow::Holding;

    # in a request of an app served by serow --grip
    Serow::Holding::publish({
        channel     => 'news',
        id          => $id,                                # optional
        http_stream => { content => "id: $id\ndata: $text\n\n" },
    });

    # answer the long polls held on a channel
    Serow::Holding::publish({
        channel       => 'inbox-42',
        http_response => { code => 200, headers => [['Content-Type', 'application/json']],
                           body => '{"messages":[1]}' },
    });

=head1 DESCRIPTION

With C<--grip>, a response with a C<Grip-Hold> header (as behind Pushpin) is
held by the connection holder, with no worker; see F<docs/holding.md>.
C<publish> gives one item to the holder, which delivers it to every
connection subscribed to its channel, and keeps it for replay (C<prev-id>).

The item: C<channel> (required), C<id> and C<prev_id> (optional), and at least
one format: C<http_stream> (C<< { content => BYTES } >>, or C<< { close => 1 } >>
to end the streams), C<http_response> (C<code>, C<reason>, C<headers> as
C<[[name, value], ...]>, C<body>: the answer to a held long poll), C<ws_message>
(C<content>, C<type>: carried, not delivered yet). Strings are bytes.

Returns 1, or dies with the reason (a bad item, an item larger than
C<--publish-max-item> counting the bytes of its channel, ids, contents, reason,
header names and values and bodies, no holder: not a worker of a server with
C<--grip>, the holder's channel full for a second).

=cut
