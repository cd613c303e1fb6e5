package Serow::WebSocket::Events;
use strict;
use warnings;

use Exporter 'import';
use JSON::PP ();

# GRIP's WebSocket-over-HTTP, Pushpin's protocol, for apps: the events of a
# request's body, the events of the answer, control messages and the
# answer's headers.  The names are those of Pushpin's documentation and its
# client libraries.  The server's side of the same format is C
# (src/http/websocket_events.c); the two are tested against each other's
# output (t/websocket/events.t).

our @EXPORT_OK = qw(decode_websocket_events encode_websocket_events websocket_event
    websocket_close_event websocket_close_code websocket_control_message
    websocket_response_headers);

use constant CONTENT_TYPE => 'application/websocket-events';
use constant DEFAULT_PREFIX => 'm:';

my $JSON = JSON::PP->new->utf8(1)->canonical(1);

# An event: { type => 'TEXT', content => BYTES } (content undef when the
# event has none, as OPEN and DISCONNECT).
sub websocket_event {
    my ($type, $content) = @_;
    die "websocket_event: a type is 1 to 32 of A-Z, 0-9, - and _\n"
        unless defined $type && $type =~ /\A[A-Z0-9_-]{1,32}\z/;
    die "websocket_event: content must be bytes (encode characters first)\n"
        if defined $content && utf8::is_utf8($content) && $content =~ /[^\x00-\xFF]/;
    return { type => $type, content => $content };
}

# The events of a body, in order; dies with the byte where it stops making sense.
sub decode_websocket_events {
    my ($body) = @_;
    my @events;
    my $at = 0;
    my $len = length $body;
    while ($at < $len) {
        pos($body) = $at;
        $body =~ /\G([A-Z0-9_-]{1,32})(?: ([0-9A-Fa-f]{1,16}))?\r\n/gc
            or die "websocket events: no event at byte $at\n";
        my ($type, $hex) = ($1, $2);
        $at = pos $body;
        my $content;
        if (defined $hex) {
            my $n = do { no warnings 'portable'; hex $hex }; # 16 digits fit a 64-bit perl
            die "websocket events: $type at byte $at is longer than the body\n"
                if $n + 2 > $len - $at;
            $content = substr $body, $at, $n;
            die "websocket events: ${type}'s content not followed by CRLF at byte " . ($at + $n) . "\n"
                unless substr($body, $at + $n, 2) eq "\r\n";
            $at += $n + 2;
        }
        push @events, { type => $type, content => $content };
    }
    return @events;
}

# A body of events; each a hash as above, or [TYPE, CONTENT].
sub encode_websocket_events {
    my @events = map { ref $_ eq 'ARRAY' ? websocket_event(@$_) : websocket_event(@$_{qw(type content)}) } @_;
    return join '', map {
        defined $_->{content}
            ? sprintf("%s %x\r\n%s\r\n", $_->{type}, length $_->{content}, $_->{content})
            : "$_->{type}\r\n"
    } @events;
}

# A CLOSE event: the code in two bytes, then the reason (characters, sent
# as UTF-8); without a code, CLOSE alone.
sub websocket_close_event {
    my ($code, $reason) = @_;
    return websocket_event('CLOSE') unless defined $code;
    die "websocket_close_event: $code is not a code a WebSocket may send\n"
        unless close_code_allowed($code);
    $reason //= '';
    utf8::encode($reason);
    die "websocket_close_event: the reason is over 123 bytes\n" if length $reason > 123;
    return websocket_event('CLOSE', pack('n', $code) . $reason);
}

# A CLOSE event's code and reason (decoded), or () when it has none.
sub websocket_close_code {
    my ($event) = @_;
    my $content = $event->{content};
    return () unless defined $content && length $content >= 2;
    my $reason = substr $content, 2;
    utf8::decode($reason);
    return (unpack('n', $content), $reason);
}

# RFC 6455 section 7.4, as the server checks it (src/http/websocket_frame.c).
sub close_code_allowed {
    my ($code) = @_;
    return $code =~ /\A[0-9]+\z/
        && (($code >= 1000 && $code <= 1003) || ($code >= 1007 && $code <= 1014)
            || ($code >= 3000 && $code <= 4999));
}

# "c:" and the JSON of a control message: websocket_control_message(
# 'subscribe', channel => 'room').  Strings are characters.
sub websocket_control_message {
    my ($type, %args) = @_;
    die "websocket_control_message: a type is needed\n" unless defined $type && length $type;
    return 'c:' . $JSON->encode({ %args, type => $type });
}

# The headers of an answer: Content-Type, and with grip => 1 the extension
# that lets it carry control messages (message_prefix: what starts every
# other message, "m:" unless given).  Extra headers (an array of pairs) go
# to the client with the first answer's 101, as Sec-WebSocket-Protocol does.
sub websocket_response_headers {
    my (%o) = @_;
    my @headers = ('Content-Type' => CONTENT_TYPE);
    if ($o{grip}) {
        my $prefix = $o{message_prefix};
        my $value = 'grip';
        if (defined $prefix && $prefix ne DEFAULT_PREFIX) {
            die "websocket_response_headers: message_prefix over 64 bytes\n" if length $prefix > 64;
            (my $quoted = $prefix) =~ s/(["\\])/\\$1/g;
            $value .= qq{; message-prefix="$quoted"};
        }
        push @headers, 'Sec-WebSocket-Extensions' => $value;
    }
    push @headers, @{ $o{headers} || [] };
    return \@headers;
}

1;
__END__

=head1 NAME

Serow::WebSocket::Events - GRIP's WebSocket-over-HTTP events for apps

=head1 SYNOPSIS

    use Serow::WebSocket::Events qw(decode_websocket_events encode_websocket_events
        websocket_control_message websocket_response_headers);

    # a PSGI app answering WebSocket-over-HTTP requests
    sub {
        my ($env) = @_;
        my $body = do { local $/; my $fh = $env->{'psgi.input'}; <$fh> } // '';
        my @out;
        for my $e (decode_websocket_events($body)) {
            if ($e->{type} eq 'OPEN') {
                push @out, ['OPEN'], ['TEXT', websocket_control_message(
                    subscribe => channel => 'room')];
            } elsif ($e->{type} eq 'TEXT') {
                push @out, ['TEXT', "m:you said: $e->{content}"];
            } elsif ($e->{type} eq 'CLOSE') {
                push @out, ['CLOSE', $e->{content}];   # acknowledge, same code
            }
        }
        return [200, websocket_response_headers(grip => 1), [encode_websocket_events(@out)]];
    };

=head1 DESCRIPTION

Pushpin's WebSocket-over-HTTP protocol lets a proxy keep a client's WebSocket
and pass its events to the app as ordinary HTTP requests: a C<POST> whose
body (C<Content-Type: application/websocket-events>) lists events, answered
with the events to send back, in the same format. Each event is a type and,
for some, content:

    OPEN                 the client connected (the first request); answer with
                         OPEN to accept
    TEXT, BINARY         a message
    PING, PONG           control frames
    CLOSE                the close handshake: content is the code in two bytes,
                         then the reason
    DISCONNECT           the connection went away without one

With C<Sec-WebSocket-Extensions: grip> in the request the proxy understands
control messages: the answer then carries the same header (see
C<websocket_response_headers>), a C<TEXT> starting with C<c:> is a control
message (C<websocket_control_message>), and every other message must start
with the message prefix, C<m:> unless the header's C<message-prefix> says
otherwise; a message without it is dropped. Control messages Pushpin defines:
C<subscribe> and C<unsubscribe> (with C<channel>), C<detach>, C<session>,
C<set-meta>, C<keep-alive>. A publish with the C<ws-message> format reaches
the connections subscribed to its channel.

Serow's connection holder serves them with holding on (F<docs/websocket.md>):
C<subscribe>, C<unsubscribe>, C<set-meta> (a C<Meta-*> header on every later
request; a C<Set-Meta-NAME> header on an answer does the same), C<keep-alive>
(C<content>, C<message-type> C<text>, C<binary>, C<ping> or C<pong>, C<timeout>
in seconds, C<mode> C<idle> or C<interval>) and C<detach>; C<session> and the delayed
sends are ignored there. The same app works behind Pushpin.

=head1 FUNCTIONS

Nothing is exported unless asked for. Contents are bytes; JSON and close
reasons are built from characters.

=over

=item decode_websocket_events($body)

The events, in order, as hashes C<< { type => 'TEXT', content => BYTES } >>,
C<content> undef for an event without it. Dies, naming the byte, on a body
that is not events.

=item encode_websocket_events(@events)

The body for events given as hashes as above or as C<[TYPE, CONTENT]> pairs.

=item websocket_event($type, $content)

One event, checked: a type of C<A-Z>, C<0-9>, C<-> and C<_>, content in bytes.

=item websocket_close_event($code, $reason)

A C<CLOSE> event with a code RFC 6455 lets a WebSocket send (1000-1003,
1007-1014, 3000-4999) and a reason of characters, at most 123 bytes in UTF-8;
without a code, C<CLOSE> alone.

=item websocket_close_code($event)

A C<CLOSE> event's code and reason (characters), or the empty list.

=item websocket_control_message($type, %fields)

C<c:> and the control message's JSON: C<websocket_control_message(subscribe
=E<gt> channel =E<gt> 'news')>, C<websocket_control_message('set-meta', name
=E<gt> 'user', value =E<gt> $user)>, C<websocket_control_message('keep-alive',
content =E<gt> '{}', timeout =E<gt> 20)>. A number (C<timeout>) must be a Perl
number, not a string, for the JSON to carry it as one.

=item websocket_response_headers(grip =E<gt> 1, message_prefix =E<gt> 'm:', headers =E<gt> [...])

An array of header pairs for the answer: C<Content-Type:
application/websocket-events>, with C<grip> the extension that enables control
messages (and its C<message-prefix> when it is not C<m:>), then C<headers>.

=back

=head1 SEE ALSO

L<Serow::Holding> (publishing), F<docs/websocket.md>.

=cut
