# A WebSocket client for t/websocket/tls.t whose TLS records the test lays
# out: Python's ssl.SSLObject over memory buffers, so that each write makes
# one record and the test chooses which bytes of which records go to the
# socket in one send.  Each command prints what it saw as one JSON object.
#
#   upgrade_record PORT CA    the upgrade and a frame in one record
#   record_begun PORT CA      the upgrade's record, and in the same send the
#                             first bytes of the next record (a frame)
#   kept_plain PORT CA GATE [1.2]   plaintext the holder's transport opened
#                             past the room of its read, with nothing more
#                             to come from the socket (below)
#   slow_reader PORT CA       a client that does not read while the holder
#                             writes: its sealed writes cut short and refused
#   closes PORT CA            the close handshake, and the app's close left
#                             unanswered: how the connection ends
import fcntl
import json
import os
import socket
import ssl
import struct
import sys
import termios
import time

TIMEOUT = 60
UPGRADE = (b"GET /chat HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\n"
           b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
           b"Sec-WebSocket-Version: 13\r\n\r\n")


def frame(opcode, payload, fin=True):
    """A client's frame: masked."""
    n = len(payload)
    head = bytes([(0x80 if fin else 0) | opcode])
    if n < 126:
        head += bytes([0x80 | n])
    elif n < 65536:
        head += bytes([0x80 | 126]) + struct.pack(">H", n)
    else:
        head += bytes([0x80 | 127]) + struct.pack(">Q", n)
    key = os.urandom(4)
    mask = (key * (n // 4 + 1))[:n]
    masked = (int.from_bytes(payload, "big") ^ int.from_bytes(mask, "big")).to_bytes(n, "big") if n else b""
    return head + key + masked


class Client:
    def __init__(self, port, ca, tls12=False):
        context = ssl.create_default_context(cafile=ca)
        if tls12:
            context.maximum_version = ssl.TLSVersion.TLSv1_2
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        # (room for a send to go whole: one segment on loopback)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
        self.sock.settimeout(TIMEOUT)
        self.sock.connect(("127.0.0.1", port))
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = context.wrap_bio(self.incoming, self.outgoing, server_hostname="localhost")
        while True:
            try:
                self.tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                self.send(self.outgoing.read())
                self.fill()
        self.send(self.outgoing.read())
        self.plain = b""

    def send(self, data):
        if data:
            self.sock.sendall(data)

    def fill(self):
        data = self.sock.recv(1 << 20)
        if not data:
            raise EOFError("the server closed")
        self.incoming.write(data)

    def records(self, *pieces):
        """Each piece sealed into its own record(s): their bytes, one string each."""
        out = []
        for p in pieces:
            self.tls.write(p)
            out.append(self.outgoing.read())
        return out

    def write(self, data):
        self.send(b"".join(self.records(data)))

    def read_until(self, done):
        """Reads plaintext until done(self.plain) is true."""
        while not done(self.plain):
            try:
                got = self.tls.read(1 << 20)
                if not got:
                    raise EOFError("close_notify")
                self.plain += got
                continue
            except ssl.SSLWantReadError:
                pass
            except ssl.SSLZeroReturnError:
                raise EOFError("close_notify")
            self.fill()

    def head(self):
        self.read_until(lambda p: b"\r\n\r\n" in p)
        head, self.plain = self.plain.split(b"\r\n\r\n", 1)
        return head.decode("latin-1")

    def next_frame(self):
        """The server's next frame: (opcode, payload)."""
        def whole(p):
            if len(p) < 2:
                return False
            n, at = p[1] & 0x7F, 2
            if n == 126:
                if len(p) < 4:
                    return False
                n, at = struct.unpack(">H", p[2:4])[0], 4
            elif n == 127:
                if len(p) < 10:
                    return False
                n, at = struct.unpack(">Q", p[2:10])[0], 10
            return len(p) >= at + n
        self.read_until(whole)
        p = self.plain
        n, at = p[1] & 0x7F, 2
        if n == 126:
            n, at = struct.unpack(">H", p[2:4])[0], 4
        elif n == 127:
            n, at = struct.unpack(">Q", p[2:10])[0], 10
        self.plain = p[at + n:]
        return p[0] & 0x0F, p[at:at + n]

    def until_pong(self, payload):
        while True:
            opcode, got = self.next_frame()
            if opcode == 0xA and got == payload:
                return


def keep_alive_first(c):
    """A request answered first: the connection's handshake is over and its
    records are read by a worker from here on."""
    c.write(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
    head = c.head()
    length = int([l.split(":")[1] for l in head.split("\r\n") if l.lower().startswith("content-length:")][0])
    c.read_until(lambda p: len(p) >= length)
    c.plain = c.plain[length:]


def upgrade_record(port, ca):
    c = Client(port, ca)
    keep_alive_first(c)
    c.write(UPGRADE + frame(1, b"too soon"))
    return {"status": c.head().split("\r\n")[0]}


def record_begun(port, ca):
    c = Client(port, ca)
    keep_alive_first(c)
    upgrade, early = c.records(UPGRADE, frame(1, b"too soon" * 100))
    c.send(upgrade + early[:10])  # (one send: read in one go)
    status = c.head().split("\r\n")[0]
    return {"status": status}


def kept_plain(port, ca, gate, tls12=False):
    """While a request is in flight the holder gathers the client's events up
    to a bound, then stops reading; what came meanwhile waits.  Here it stops
    on a known byte, with the start of a record read and the rest of that
    record and four more waiting in the socket.  When it reads on, one read
    opens them all: more plaintext than the room of that read, the rest of
    it kept in the transport, and the events of the messages in the room
    reach the bound again before the last message is whole.  The end of
    that message is in the transport's keeping, not in the socket: epoll
    will not say it is there."""
    c = Client(port, ca, tls12)
    c.write(UPGRADE)
    status = c.head().split("\r\n")[0]
    if " 101 " not in status:
        return {"status": status}
    for _ in range(3):  # (the server's receive window grows: what waits below fits it)
        big = os.urandom(256 << 10)
        c.write(frame(2, big))
        opcode, got = c.next_frame()
        assert got == big
    c.write(frame(1, b"wait " + gate.encode()))  # a worker kept until the gate opens
    # A message B of 70000 bytes: all but its last byte, and a ping whose
    # pong says the holder has read all that (its events empty yet: B is
    # not whole).
    c.write(frame(2, b"B" * 69999, fin=False))
    c.write(frame(9, b"fence 1"))
    c.until_pong(b"fence 1")
    # 66 messages of 1000 bytes (frames of 1008 bytes), in records of 16384
    # bytes of plaintext but the last, of 992.
    stream = b"".join(frame(1, b"%04d " % i + b"x" * 995) for i in range(66))
    assert len(stream) == 4 * 16384 + 992
    ping, last_of_b, *parts = c.records(frame(9, b"fence 2"), frame(0, b"B"),
                                        *(stream[i:i + 16384] for i in range(0, len(stream), 16384)))
    # The ping, B's last byte (B whole: its event reaches the bound, and the
    # holder reads no more), the first 10000 bytes of the next record.
    c.send(ping + last_of_b + parts[0][:10000])
    c.until_pong(b"fence 2")
    c.send(parts[0][10000:] + b"".join(parts[1:]))
    # (all of it in the server's socket before the gate opens: nothing left
    # unacknowledged here)
    deadline = time.time() + TIMEOUT
    while time.time() < deadline:
        unacked = struct.unpack("i", fcntl.ioctl(c.sock, termios.TIOCOUTQ, b"\0\0\0\0"))[0]
        if unacked == 0:
            break
        time.sleep(0.001)
    open(gate, "w").close()
    seen = {"status": status, "texts": []}
    try:
        while len(seen["texts"]) < 66:
            opcode, got = c.next_frame()
            if opcode == 2:
                seen["big"] = got == b"B" * 70000
            elif opcode == 1 and got.startswith(b"pid "):
                seen["waited"] = True
            elif opcode == 1:
                seen["texts"].append(got[:4].decode())
    except (socket.timeout, EOFError) as e:
        seen["stopped"] = str(e) or type(e).__name__
    seen["in_order"] = seen["texts"] == ["%04d" % i for i in range(66)]
    seen["texts"] = len(seen["texts"])
    return seen


def opened(c):
    c.write(UPGRADE)
    status = c.head().split("\r\n")[0]
    assert " 101 " in status, status
    return c


def slow_reader(port, ca):
    """The echo of 900000 bytes to a client that reads none of it until its
    socket holds some: the rest does not fit there, so the holder's sends
    are cut short and refused (EAGAIN), and the records must still arrive
    whole and in order (OpenSSL checks each), followed by the next
    message's."""
    c = opened(Client(port, ca))
    big = os.urandom(900000)
    c.write(frame(2, big) + frame(1, b"after"))
    deadline = time.time() + TIMEOUT
    while time.time() < deadline:
        queued = struct.unpack("i", fcntl.ioctl(c.sock, termios.FIONREAD, b"\0\0\0\0"))[0]
        if queued >= 32768:
            break
        time.sleep(0.001)
    seen = {}
    opcode, got = c.next_frame()
    seen["big"] = opcode == 2 and got == big
    opcode, got = c.next_frame()
    seen["after"] = got.decode()
    return seen


def close_of(c):
    """The server's close frame (code, reason), then how the connection
    ended: "close_notify", or "cut" (the socket closed without it)."""
    while True:
        opcode, got = c.next_frame()
        if opcode == 8:
            break
    code = struct.unpack(">H", got[:2])[0] if len(got) >= 2 else None
    try:
        c.read_until(lambda p: False)
    except EOFError as e:
        end = "close_notify" if str(e) == "close_notify" else "cut"
    return [code, got[2:].decode(), end]


def closes(port, ca):
    c = opened(Client(port, ca))
    c.write(frame(8, struct.pack(">H", 4000) + b"bye"))
    seen = {"client_close": close_of(c)}
    c = opened(Client(port, ca))
    c.write(frame(1, b"close 4002"))  # the app closes; no answer from here
    seen["app_close"] = close_of(c)
    return seen


def main():
    command, port, ca, *args = sys.argv[1:]
    if command == "upgrade_record":
        seen = upgrade_record(int(port), ca)
    elif command == "slow_reader":
        seen = slow_reader(int(port), ca)
    elif command == "closes":
        seen = closes(int(port), ca)
    elif command == "record_begun":
        seen = record_begun(int(port), ca)
    else:
        seen = kept_plain(int(port), ca, args[0], len(args) > 1 and args[1] == "1.2")
    print(json.dumps(seen))


main()
