package Serow::Publish::Items;
use strict;
use warnings;

use B ();
use JSON::PP ();
use MIME::Base64 ();
use Serow (); # the XS: channel_name_ok and id_ok, the rule of src/http/grip_instruct.h

# Pushpin's publish JSON ({"items": [...]}, docs/holding.md) read and checked
# into the items Serow::Holding::publish takes:
#   { channel => NAME, id => ID, prev_id => ID,
#     http_stream   => { content => BYTES } or { close => 1 },
#     http_response => { code, reason, headers => [[name, value], ...], body => BYTES },
#     ws_message    => { content => BYTES, type => 'text' | 'binary' } }
# (id, prev_id and each format only when given).  One bad item refuses the
# whole request, so that a publish is delivered whole or not at all.
#
# JSON::PP (perl's core) rather than an XS decoder: a publish is one small
# request per event, bounded by --publish-max-body, and the package needs no
# new dependency.

# The formats GRIP defines and Serow delivers; any other name is ignored, as
# GRIP says, so that a publisher may send formats for other receivers.
my %KNOWN_FORMAT = ('http-stream' => \&_http_stream, 'http-response' => \&_http_response,
    'ws-message' => \&_ws_message);

# The keys of an item that are not formats when the formats stand beside
# "channel" (Pushpin's short form, with no "formats" object).
my %ITEM_KEY = map { ($_ => 1) } qw(channel id prev-id meta formats);

# Most headers of a published http-response (SEROW_PUBLISH_MAX_HEADERS,
# src/shared/holder_message.h, which the holder's decoder applies).
my $MAX_HEADERS = 32;

# A JSON decoder of bytes (the request body): strings come out as characters,
# and content given as a JSON string is sent as its UTF-8.
my $JSON = JSON::PP->new->utf8(1)->allow_nonref(0);

# parse($body_bytes, max_item => BYTES)
#   -> (\@items) when the request is good (an item may carry no known
#      format: see has_format)
#   -> (undef, $status, $reason): 400 (malformed) or 413 (an item too large)
sub parse {
    my ($body, %limits) = @_;
    my $max_item = $limits{max_item} // die "Serow::Publish::Items::parse: no max_item\n";
    my $doc = eval { $JSON->decode($body) };
    if (!defined $doc) {
        (my $why = $@ || 'no JSON value') =~ s/ at \S+ line \d+\.?\n?\z//;
        return (undef, 400, "malformed JSON: $why");
    }
    return (undef, 400, 'the body is not a JSON object') unless ref $doc eq 'HASH';
    my $items = $doc->{items};
    return (undef, 400, 'no "items" array') unless ref $items eq 'ARRAY';
    my @out;
    for my $n (0 .. $#$items) {
        my ($item, $status, $why) = _item($items->[$n], $max_item);
        return (undef, $status, "items[$n]: $why") unless $item;
        push @out, $item;
    }
    return (\@out);
}

# One item -> ($item) or (undef, $status, $why).
sub _item {
    my ($in, $max_item) = @_;
    return (undef, 400, 'not a JSON object') unless ref $in eq 'HASH';
    my %item;
    my $channel = $in->{channel};
    return (undef, 400, 'no "channel"') unless defined $channel;
    return (undef, 400, 'the channel is not a valid channel name') unless _name_ok($channel);
    $item{channel} = $channel;
    for my $key (qw(id prev-id)) {
        next unless exists $in->{$key};
        my $id = $in->{$key};
        return (undef, 400, "\"$key\" is not a valid item id") unless _id_ok($id);
        $item{ $key =~ tr/-/_/r } = $id;
    }
    my $formats;
    if (exists $in->{formats}) {
        $formats = $in->{formats};
        return (undef, 400, '"formats" is not a JSON object') unless ref $formats eq 'HASH';
    } else {
        $formats = { map { ($_ => $in->{$_}) } grep { !$ITEM_KEY{$_} } keys %$in };
    }
    return (undef, 400, 'no formats') unless %$formats;
    for my $name (sort keys %$formats) {
        my $reader = $KNOWN_FORMAT{$name} or next;
        my $format = $formats->{$name};
        return (undef, 400, "\"$name\" is not a JSON object") unless ref $format eq 'HASH';
        my ($value, $why) = $reader->($format);
        return (undef, 400, "$name: $why") unless $value;
        $item{ $name =~ tr/-/_/r } = $value;
    }
    my $size = _size(\%item);
    return (undef, 413, "$size bytes, more than the limit of $max_item (--publish-max-item)")
        if $size > $max_item;
    return (\%item);
}

# Whether an item carries a format Serow delivers: one with only unknown
# formats is accepted and reaches nobody, so it need not be published.
sub has_format {
    my ($item) = @_;
    return grep({ exists $item->{$_} } qw(http_stream http_response ws_message)) ? 1 : 0;
}

# The bytes an item carries, counted by the rule the holder's channel store
# and Serow::Holding::publish apply (serow_publish_item_bytes,
# src/shared/holder_message.h): an item the endpoint takes is never refused
# further on for its size.
sub _size {
    my ($item) = @_;
    return Serow::Holding::item_bytes($item);
}

sub _name_ok { my ($v) = @_; return _is_string($v) && channel_name_ok(_bytes($v)) }
sub _id_ok   { my ($v) = @_; return _is_string($v) && id_ok(_bytes($v)) }

# A JSON string (not a number, a boolean, null, an array or an object).
sub _is_string {
    my ($v) = @_;
    return defined $v && !ref $v && (B::svref_2object(\$v)->FLAGS & B::SVf_POK());
}

# A decoded string as the UTF-8 bytes it came as.
sub _bytes {
    my ($s) = @_;
    utf8::encode($s);
    return $s;
}

# {content: STRING} or {content-bin: BASE64} -> (BYTES), or (undef, $why).
# Both at once is refused: which one Pushpin takes is not a publisher's
# contract, and a publish that says two things is a bug.
sub _content {
    my ($in, $text, $bin) = @_;
    my $has_text = exists $in->{$text};
    my $has_bin = exists $in->{$bin};
    return (undef, "both \"$text\" and \"$bin\"") if $has_text && $has_bin;
    return (undef, "no \"$text\" or \"$bin\"") unless $has_text || $has_bin;
    my $v = $in->{ $has_text ? $text : $bin };
    return (undef, '"' . ($has_text ? $text : $bin) . '" is not a string') unless _is_string($v);
    return (_bytes($v)) if $has_text;
    # Strict base64: a byte outside it is a mistake to say, not to skip
    # (MIME::Base64 would skip it).
    return (undef, "\"$bin\" is not base64")
        unless $v =~ m{\A(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?\z};
    return (MIME::Base64::decode_base64($v));
}

# action: GRIP's "send" (the default), or "close" where the format has it.
sub _action {
    my ($in, @allowed) = @_;
    my $action = $in->{action} // 'send';
    return (undef, '"action" is not a string') unless _is_string($action);
    return ($action) if grep { $_ eq $action } 'send', @allowed;
    return (undef, "action \"$action\" is not supported");
}

sub _http_stream {
    my ($in) = @_;
    my ($action, $why) = _action($in, 'close');
    return (undef, $why) unless $action;
    return ({ close => 1 }) if $action eq 'close';
    my ($content, $cwhy) = _content($in, 'content', 'content-bin');
    return (undef, $cwhy) unless defined $content;
    return ({ content => $content });
}

sub _http_response {
    my ($in) = @_;
    my ($action, $why) = _action($in);
    return (undef, $why) unless $action;
    my %out = (code => 200, reason => '', headers => [], body => '');
    if (exists $in->{code}) {
        my $code = $in->{code};
        return (undef, '"code" is not a status code (100 to 999)')
            unless defined $code && !ref $code && $code =~ /\A[1-9][0-9]{2}\z/;
        $out{code} = 0 + $code;
    }
    if (exists $in->{reason}) {
        my $reason = $in->{reason};
        return (undef, '"reason" is not a string without control characters')
            unless _is_string($reason) && $reason !~ /[\x00-\x08\x0a-\x1f\x7f]/;
        $out{reason} = _bytes($reason);
    }
    if (exists $in->{headers}) {
        my ($headers, $hwhy) = _headers($in->{headers});
        return (undef, $hwhy) unless $headers;
        $out{headers} = $headers;
    }
    if (exists $in->{body} || exists $in->{'body-bin'}) {
        my ($body, $bwhy) = _content($in, 'body', 'body-bin');
        return (undef, $bwhy) unless defined $body;
        $out{body} = $body;
    }
    return (\%out);
}

# headers: an object (its names in sorted order: JSON gives an object no
# order) or an array of [name, value] pairs -> ([[name, value], ...]).
sub _headers {
    my ($in) = @_;
    my @pairs;
    if (ref $in eq 'HASH') {
        @pairs = map { [$_, $in->{$_}] } sort keys %$in;
    } elsif (ref $in eq 'ARRAY') {
        for my $pair (@$in) {
            return (undef, '"headers" has an element that is not a [name, value] pair')
                unless ref $pair eq 'ARRAY' && @$pair == 2;
            push @pairs, [@$pair];
        }
    } else {
        return (undef, '"headers" is neither an object nor an array of pairs');
    }
    return (undef, "more than $MAX_HEADERS headers") if @pairs > $MAX_HEADERS;
    for my $pair (@pairs) {
        my ($name, $value) = @$pair;
        # A token (RFC 9110 5.1), and a value with no CR, LF or NUL: nothing
        # published may split the response the holder writes.
        return (undef, 'a header name is not a token')
            unless _is_string($name) && $name =~ /\A[!#\$%&'*+\-.^_`|~0-9A-Za-z]+\z/;
        return (undef, "header $name: the value is not a string without CR, LF or NUL")
            unless _is_string($value) && $value !~ /[\r\n\0]/;
        $pair->[1] = _bytes($value);
    }
    return (\@pairs);
}

sub _ws_message {
    my ($in) = @_;
    my ($action, $why) = _action($in);
    return (undef, $why) unless $action;
    my ($content, $cwhy) = _content($in, 'content', 'content-bin');
    return (undef, $cwhy) unless defined $content;
    my $type = $in->{type} // (exists $in->{content} ? 'text' : 'binary');
    return (undef, '"type" is neither "text" nor "binary"')
        unless _is_string($type) && ($type eq 'text' || $type eq 'binary');
    return ({ content => $content, type => $type });
}

1;
