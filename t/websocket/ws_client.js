'use strict';
// A WebSocket client for t/websocket/node_ws.t (Node's ws, Debian's node-ws):
// each command runs one scenario against URL and prints what it saw as one
// JSON object.  permessage-deflate is not offered: what these scenarios
// check must not depend on whether the server would accept it.
const http = require('http');
const WebSocket = require('ws');

const TIMEOUT = Number(process.env.WS_CLIENT_TIMEOUT || 60000);

// A connection open, with its messages awaited in order (ws.next()) and
// its end (ws.closed: the close code and reason the client saw).
function connect(url) {
    return new Promise((resolve, reject) => {
        const ws = new WebSocket(url, { perMessageDeflate: false });
        const queue = [];
        const waiting = [];
        ws.on('message', (data, isBinary) => {
            // ws 8 gives a Buffer and whether it was binary; ws 7 a string for text
            const message = { binary: isBinary === undefined ? typeof data !== 'string' : isBinary,
                data: Buffer.from(data) };
            if (waiting.length) waiting.shift()(message);
            else queue.push(message);
        });
        ws.next = () => queue.length ? Promise.resolve(queue.shift()) : new Promise((r) => waiting.push(r));
        ws.closed = new Promise((r) => ws.on('close', (code, reason) => r({ code, reason: String(reason) })));
        ws.once('open', () => {
            ws.removeListener('error', reject);
            // after the open, an error (a reset by a server that closed) ends in 'close'
            ws.on('error', (e) => { ws.lastError = e.message; });
            resolve(ws);
        });
        ws.once('error', reject);
    });
}

async function echo(url, seen) {
    const ws = await connect(url);
    ws.send('hello');
    seen.text = (await ws.next()).data.toString();
    ws.send(Buffer.from('0001ff62696e617279', 'hex'));
    const binary = await ws.next();
    seen.binary = binary.binary ? binary.data.toString('hex') : null;
    // one message in three frames, "é" split between the last two: bytes 11
    // and 12 are its two
    const fragmented = Buffer.from('fragmented \u00e9t\u00e9');
    ws.send(fragmented.subarray(0, 4), { binary: false, fin: false });
    ws.send(fragmented.subarray(4, 12), { binary: false, fin: false });
    ws.send(fragmented.subarray(12), { binary: false, fin: true });
    seen.fragmented = (await ws.next()).data.toString();
    const big = Buffer.alloc(1000000);
    for (let i = 0; i < big.length; i++) big[i] = (i * 7) & 0xff;
    ws.send(big);
    const back = await ws.next();
    seen.big = back.binary && back.data.equals(big);
    const pong = new Promise((r) => ws.once('pong', (data) => r(String(data))));
    ws.ping(Buffer.from('are you there'));
    seen.pong = await pong;
    // the app's ping: ws answers it by itself
    const ping = new Promise((r) => ws.once('ping', (data) => r(String(data))));
    ws.send('ping me');
    seen.app_ping = await ping;
    seen.after_ping = (await ws.next()).data.toString();
    ws.close(4000, 'client done');
    const closed = await ws.closed;
    seen.close_code = closed.code;
    seen.close_reason = closed.reason;
    return seen;
}

async function serverClose(url) {
    const ws = await connect(url);
    ws.send('close 4001');
    return await ws.closed;
}

// What a real client sends that the server must refuse: the close code the
// client sees.
async function hostile(url, kind) {
    const ws = await connect(url);
    if (kind === 'rsv') {
        // ws sets RSV1 only on a message compressed with permessage-deflate,
        // which it did not offer: its own framing, with the bit asked for,
        // written beside its sender
        const frame = WebSocket.Sender.frame(Buffer.from('compressed?'),
            { fin: true, rsv1: true, opcode: 1, mask: true, readOnly: false });
        ws._socket.write(Buffer.concat(frame));
    } else if (kind === 'bad_close_code') {
        // ws refuses to send 1005 (section 7.4.1: never in a close frame): its framing again
        const frame = WebSocket.Sender.frame(Buffer.from([0x03, 0xed]),
            { fin: true, opcode: 8, mask: true, readOnly: false });
        ws._socket.write(Buffer.concat(frame));
    } else if (kind === 'oversize') {
        ws.send(Buffer.alloc(2 * 1024 * 1024)); // over the server's 1 MiB
    } else if (kind === 'oversize_fragments') {
        // 1.5 MiB in three frames of 512 KiB: each under the limit, not all
        for (const fin of [false, false, true]) ws.send(Buffer.alloc(512 * 1024), { fin });
    } else if (kind === 'utf8') {
        // ws sends a Buffer as text as it is, unchecked
        ws.send(Buffer.from([0x68, 0x69, 0xc0, 0xaf]), { binary: false });
    } else {
        throw new Error('no hostile input ' + kind);
    }
    const closed = await ws.closed;
    return { code: closed.code, reason: closed.reason, error: ws.lastError || null };
}

function get(url) {
    return new Promise((resolve, reject) => {
        http.get(url, (res) => {
            res.resume();
            res.on('end', () => resolve(res.statusCode));
        }).on('error', reject);
    });
}

// n clients subscribed by the app at their OPEN, then one publish (an HTTP
// GET the app answers by publishing) that each must receive.
async function subscribers(url, n, publishUrl) {
    const clients = await Promise.all(Array.from({ length: n }, () => connect(url)));
    const status = await get(publishUrl);
    const got = await Promise.all(clients.map((c) => c.next()));
    for (const c of clients) c.close(1000);
    await Promise.all(clients.map((c) => c.closed));
    return { publish_status: status,
        received: got.filter((m) => !m.binary && m.data.toString() === 'to all').length };
}

// What a scenario saw so far: printed with the error when it fails
const seen = {};

async function main() {
    const [command, url, ...args] = process.argv.slice(2);
    const jobs = {
        echo: () => echo(url, seen),
        server_close: () => serverClose(url),
        hostile: () => hostile(url, args[0]),
        subscribers: () => subscribers(url, Number(args[0]), args[1]),
    };
    if (!jobs[command]) throw new Error('no command ' + command);
    let timer;
    const timeout = new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error('no end in ' + TIMEOUT / 1000 + ' s')), TIMEOUT);
    });
    const result = await Promise.race([jobs[command](), timeout]);
    clearTimeout(timer);
    return result;
}

main().then(
    (result) => { process.stdout.write(JSON.stringify(result) + '\n'); process.exit(0); },
    (e) => {
        seen.error = String(e && e.message || e);
        process.stdout.write(JSON.stringify(seen) + '\n');
        process.exit(1);
    });
