package Plack::Middleware::SerowStatus::HTML;
use strict;
use warnings;

# The status page as a dashboard for a browser: one self-contained HTML page
# (inline CSS and script, no external assets, works offline) that renders the
# snapshot it was served with and then fetches the JSON view every
# REFRESH_MS.  Everything that comes from requests (the request lines of
# busy workers, the Host header) is data: the script puts it in the page with
# textContent only, and the snapshot is embedded with <, > and & escaped so
# that no "</script>" in a request target can end the script element.

use Digest::SHA ();
use JSON::PP ();

# Often enough to watch a request stay busy, rarely enough that the
# dashboard's own requests are a small part of a quiet server's total.
use constant REFRESH_MS => 1000;
# Without JavaScript the page reloads itself (meta refresh) this often.
use constant NO_SCRIPT_REFRESH_SECONDS => 2;

my %ENTITY = ('&' => '&amp;', '<' => '&lt;', '>' => '&gt;', '"' => '&quot;', "'" => '&#39;');

sub escape_html {
    my ($text) = @_;
    $text =~ s/([&<>"'])/$ENTITY{$1}/g;
    return $text;
}

# JSON that may sit inside a <script> element: the only places <, > and &
# can appear in JSON are strings, where \u escapes mean the same.
sub embeddable_json {
    my ($data) = @_;
    my $json = JSON::PP->new->canonical->ascii->encode($data);
    $json =~ s/([<>&])/sprintf '\\u%04x', ord $1/ge;
    return $json;
}

# The page's own style and script, the same for every page: a Content
# Security Policy allows them by their hashes and nothing else, so that
# even markup that slipped into the page could neither run script (an
# inline handler, a script element) nor load anything.  The page fetches
# only its own path (connect-src 'self').
# (The constants are defined at the end of the file: called, not inlined.)
my $SCRIPT = __PACKAGE__->SCRIPT =~ s/\{\{refresh_ms\}\}/REFRESH_MS/ger;
my $STYLE = __PACKAGE__->STYLE;
my $CONTENT_SECURITY_POLICY = join '; ', "default-src 'none'",
    "script-src 'sha256-" . _sha256_base64($SCRIPT) . "'",
    "style-src 'sha256-" . _sha256_base64($STYLE) . "'",
    "connect-src 'self'", "base-uri 'none'", "form-action 'none'", "frame-ancestors 'none'";

sub _sha256_base64 {
    my ($text) = @_;
    my $digest = Digest::SHA::sha256_base64($text);
    return $digest . '=' x (-length($digest) % 4); # CSP wants base64 with its padding
}

sub content_security_policy { $CONTENT_SECURITY_POLICY }

# render(status => {...}, text => 'the plain-text view', title => '...')
sub render {
    my (%args) = @_;
    my %value = (
        title => escape_html($args{title} // 'Serow status'),
        data => embeddable_json($args{status}),
        text => escape_html($args{text} // ''),
        style => $STYLE,
        script => $SCRIPT,
        refresh_ms => REFRESH_MS,
        no_script_refresh => NO_SCRIPT_REFRESH_SECONDS,
    );
    return __PACKAGE__->PAGE =~ s/\{\{(\w+)\}\}/$value{$1} \/\/ die "unknown placeholder $1"/ger;
}

use constant PAGE => <<'HTML';
<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{title}}</title>
<noscript><meta http-equiv="refresh" content="{{no_script_refresh}}"></noscript>
<style>{{style}}</style>
</head>
<body data-refreshes="0">
<header>
  <h1>{{title}}</h1>
  <span class="muted">up <span data-key="uptime">-</span>, since <span data-key="started">-</span></span>
  <span id="live">loading</span>
</header>
<noscript><pre>{{text}}</pre></noscript>
<section class="cards">
  <div class="card main"><div class="label">Processing</div><div class="value" data-key="processing">-</div></div>
  <div class="card main"><div class="label">Waiting (idle keep-alive)</div><div class="value" data-key="waiting">-</div></div>
  <div class="card main"><div class="label">Queued</div><div class="value" data-key="queued">-</div></div>
  <div class="card"><div class="label">Requests</div><div class="value" data-key="requests_total">-</div></div>
  <div class="card"><div class="label">Requests / s</div><div class="value" data-key="rate">-</div></div>
  <div class="card"><div class="label">Open connections</div><div class="value" data-key="open_connections">-</div></div>
  <div class="card"><div class="label">Held by the holder</div><div class="value" data-key="held_by_holder">-</div></div>
  <div class="card"><div class="label">Held streams and long polls</div><div class="value" data-key="grip_held">-</div></div>
  <div class="card"><div class="label">Published</div><div class="value" data-key="grip_publishes">-</div></div>
  <div class="card"><div class="label">Redis (--publish-redis)</div><div class="value" data-key="redis">-</div></div>
  <div class="card"><div class="label">Taken from workers</div><div class="value" data-key="connections_stolen">-</div></div>
  <div class="card"><div class="label">Gathered where the CPU is</div><div class="value" data-key="connections_gathered">-</div></div>
</section>
<h2>Workers (<span data-key="worker_count">-</span>)</h2>
<table>
  <thead><tr><th class="num">PID</th><th>State</th><th class="num">Requests</th>
    <th class="num">Connections</th><th>Current request</th><th>Since</th><th class="num">Busy for</th></tr></thead>
  <tbody id="workers"></tbody>
</table>
<h2>Busiest channels (held connections)</h2>
<table>
  <thead><tr><th>Channel</th><th class="num">Subscribers</th><th class="num">Publishes</th>
    <th class="num">Deliveries</th><th class="num">Drops</th></tr></thead>
  <tbody id="channels"></tbody>
</table>
<footer>Connection holder pid <span data-key="holder_pid">-</span>.
  Refreshes every {{refresh_ms}} ms; the page's own requests are counted too.</footer>
<script type="application/json" id="serow-status-data">{{data}}</script>
<script>{{script}}</script>
</body>
</html>
HTML


use constant STYLE => <<'CSS';
  :root { --fg: #1d2430; --muted: #677084; --line: #dfe3ea; --card: #f5f7fa;
          --busy: #c2410c; --busy-bg: #fff4ec; --idle: #15803d; --bad: #b91c1c; }
  * { box-sizing: border-box; }
  body { margin: 0; padding: 20px 28px; font: 15px/1.4 system-ui, -apple-system, "Segoe UI",
         Roboto, "DejaVu Sans", sans-serif; color: var(--fg); background: #fff; }
  header { display: flex; align-items: baseline; gap: 16px; flex-wrap: wrap;
           border-bottom: 2px solid var(--line); padding-bottom: 10px; }
  h1 { font-size: 22px; margin: 0; }
  h2 { font-size: 17px; margin: 22px 0 8px; }
  .muted { color: var(--muted); }
  #live { margin-left: auto; font-size: 13px; padding: 2px 10px; border-radius: 10px;
          background: #e7f6ec; color: var(--idle); }
  #live.stale { background: #fde8e8; color: var(--bad); }
  .cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(230px, 1fr));
           gap: 10px; margin-top: 16px; }
  .card { background: var(--card); border: 1px solid var(--line); border-radius: 8px;
          padding: 10px 14px; }
  .card .label { font-size: 12px; text-transform: uppercase; letter-spacing: .04em;
                 color: var(--muted); }
  .card .value { font-size: 26px; font-weight: 600; font-variant-numeric: tabular-nums; }
  .card .value.small { font-size: 18px; padding-top: 6px; }
  .card.main { border-top: 4px solid #2563eb; }
  table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
  th, td { text-align: left; padding: 6px 10px; border-bottom: 1px solid var(--line);
           vertical-align: top; }
  th { font-size: 12px; text-transform: uppercase; letter-spacing: .04em; color: var(--muted); }
  td.num, th.num { text-align: right; }
  td.request { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 13px;
               word-break: break-all; }
  tr.busy { background: var(--busy-bg); }
  .state { font-size: 12px; font-weight: 600; padding: 1px 8px; border-radius: 8px; }
  tr.busy .state { color: #fff; background: var(--busy); }
  tr.idle .state { color: var(--idle); background: #e7f6ec; }
  footer { margin-top: 18px; font-size: 12px; color: var(--muted); }
CSS

use constant SCRIPT => <<'JS';
(function () {
  'use strict';
  var REFRESH_MS = {{refresh_ms}};
  var previous = null; // { at: ms, total: requests } of the snapshot before

  function pad(n) { return (n < 10 ? '0' : '') + n; }
  function clock(epochSeconds) {
    var d = new Date(epochSeconds * 1000);
    return pad(d.getHours()) + ':' + pad(d.getMinutes()) + ':' + pad(d.getSeconds());
  }
  function duration(seconds) {
    seconds = Math.floor(seconds);
    var d = Math.floor(seconds / 86400), h = Math.floor(seconds / 3600) % 24,
        m = Math.floor(seconds / 60) % 60, s = seconds % 60;
    if (d) return d + ' d ' + h + ' h';
    if (h) return h + ' h ' + pad(m) + ' min';
    if (m) return m + ' min ' + pad(s) + ' s';
    return s + ' s';
  }
  function busyFor(ms) {
    if (ms < 1000) return Math.round(ms) + ' ms';
    if (ms < 60000) return (ms / 1000).toFixed(1) + ' s';
    return duration(ms / 1000);
  }
  function set(key, value) {
    var nodes = document.querySelectorAll('[data-key="' + key + '"]');
    for (var i = 0; i < nodes.length; i++) nodes[i].textContent = String(value);
  }
  function cell(row, text, className) {
    var td = document.createElement('td');
    if (className) td.className = className;
    td.textContent = text == null ? '' : String(text);
    row.appendChild(td);
    return td;
  }

  function render(s, now) {
    ['processing', 'waiting', 'queued', 'requests_total', 'open_connections',
     'held_by_holder', 'grip_held', 'grip_publishes', 'connections_stolen', 'connections_gathered',
     'holder_pid'].forEach(function (k) { set(k, s[k]); });
    set('redis', s.redis_up == null ? 'off' : s.redis_up ? 'up' : 'down');
    set('uptime', duration(s.uptime));
    set('started', clock(s.started));
    if (previous && now > previous.at) {
      set('rate', ((s.requests_total - previous.total) * 1000 / (now - previous.at)).toFixed(1));
    }
    previous = { at: now, total: s.requests_total };

    var workers = (s.workers || []).slice().sort(function (a, b) { return a.pid - b.pid; });
    set('worker_count', workers.length);
    var tbody = document.getElementById('workers');
    var rows = document.createDocumentFragment();
    workers.forEach(function (w) {
      var tr = document.createElement('tr');
      tr.className = w.busy ? 'busy' : 'idle';
      tr.setAttribute('data-pid', String(w.pid));
      cell(tr, w.pid, 'num');
      var state = document.createElement('span');
      state.className = 'state';
      state.textContent = w.busy ? 'busy' : 'idle';
      cell(tr, '').appendChild(state);
      cell(tr, w.requests, 'num');
      cell(tr, w.connections, 'num');
      cell(tr, w.busy ? w.request : '', 'request');
      cell(tr, w.busy ? clock(w.busy_since) : '', 'since');
      cell(tr, w.busy ? busyFor(w.busy_for_ms) : '', 'num busy-for');
      rows.appendChild(tr);
    });
    tbody.replaceChildren(rows);

    var channels = document.createDocumentFragment();
    (s.channels || []).forEach(function (c) {
      var tr = document.createElement('tr');
      cell(tr, c.channel);
      ['subscribers', 'publishes', 'deliveries', 'drops'].forEach(function (k) { cell(tr, c[k], 'num'); });
      channels.appendChild(tr);
    });
    document.getElementById('channels').replaceChildren(channels);
  }

  function live(ok, why) {
    var badge = document.getElementById('live');
    badge.className = ok ? '' : 'stale';
    badge.textContent = ok ? 'live, updated ' + clock(Date.now() / 1000)
                           : 'not updated since ' + badge.getAttribute('data-last') + ': ' + why;
    if (ok) badge.setAttribute('data-last', clock(Date.now() / 1000));
  }

  var refreshes = 0;
  function refresh() {
    fetch('?json', { cache: 'no-store', headers: { Accept: 'application/json' } })
      .then(function (r) {
        if (!r.ok) throw new Error('HTTP ' + r.status);
        return r.json();
      })
      .then(function (s) {
        render(s, Date.now());
        document.body.setAttribute('data-refreshes', String(++refreshes));
        live(true);
      })
      .catch(function (e) { live(false, e.message); })
      .then(function () { setTimeout(refresh, REFRESH_MS); });
  }

  render(JSON.parse(document.getElementById('serow-status-data').textContent), Date.now());
  live(true);
  setTimeout(refresh, REFRESH_MS);
})();
JS

1;
__END__

=head1 NAME

Plack::Middleware::SerowStatus::HTML - the status page as a self-refreshing dashboard

=head1 DESCRIPTION

Used by L<Plack::Middleware::SerowStatus> for C<?html> and for browsers
(C<Accept: text/html>). C<render(status =E<gt> $snapshot, text =E<gt> $plain,
title =E<gt> $title)> returns the page: the snapshot embedded as JSON (with
C<E<lt>>, C<E<gt>> and C<&> escaped), rendered and then refreshed every
second by an inline script that fetches C<?json> from the same path; the
plain-text view in a C<noscript> element with a meta refresh for browsers
without JavaScript. The script writes values with C<textContent> only.

=cut
