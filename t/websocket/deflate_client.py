# A WebSocket client for t/websocket/deflate.t (Python's websockets, Debian's
# python3-websockets, which offers permessage-deflate by default): each
# command runs one scenario against URL and prints what it saw as one JSON
# object, with whether the server's messages came compressed (RSV1).
import asyncio
import json
import sys

import websockets
from websockets.extensions import permessage_deflate
from websockets.frames import Opcode

TIMEOUT = 60

# The server's data frames as the client reads them: RSV1 set or not.
received_rsv1 = []
_decode = permessage_deflate.PerMessageDeflate.decode


def _recording_decode(self, frame, *, max_size=None):
    if frame.opcode in (Opcode.TEXT, Opcode.BINARY):
        received_rsv1.append(frame.rsv1)
    return _decode(self, frame, max_size=max_size)


permessage_deflate.PerMessageDeflate.decode = _recording_decode


def negotiated(ws):
    return ws.response_headers.get("Sec-WebSocket-Extensions")


async def echo(url, compression):
    seen = {}
    async with websockets.connect(url, max_size=None, compression=compression) as ws:
        seen["extensions"] = negotiated(ws)
        chat = json.dumps({"user": "ana", "room": "general", "text": "hello everyone, how are you today?",
                           "ts": 1764262800})
        await ws.send(chat)
        seen["chat"] = (await ws.recv()) == chat
        small = "hi"
        await ws.send(small)
        seen["small"] = (await ws.recv()) == small
        doc = json.dumps([{"id": i, "name": "item %d" % i, "tags": ["a", "b"]} for i in range(100)])
        await ws.send(doc)
        seen["doc"] = (await ws.recv()) == doc
        binary = bytes(range(256)) * 400  # 100 KiB
        await ws.send(binary)
        seen["binary"] = (await ws.recv()) == binary
        large = ("x" * 1000 + "\u00e9t\u00e9") * 800  # 800 KB, under the 1 MiB limit once inflated
        await ws.send(large)
        seen["large"] = (await ws.recv()) == large
        await ws.send(["frag", "mented ", "\u00e9t\u00e9" * 40])  # one compressed message in three frames
        seen["fragmented"] = (await ws.recv()) == "fragmented " + "\u00e9t\u00e9" * 40
        await ws.close(4000, "client done")
        seen["close_code"] = ws.close_code
    seen["rsv1"] = received_rsv1
    return seen


async def closed_by_server(ws):
    try:
        await asyncio.wait_for(ws.recv(), TIMEOUT)
    except websockets.ConnectionClosed as e:
        return {"code": e.rcvd.code if e.rcvd else None}
    return {"code": None}


async def over_limit(url):
    """2 MiB of zeros, a few KiB once compressed: the server closes with 1009."""
    async with websockets.connect(url, max_size=None) as ws:
        await ws.send(b"\x00" * (2 << 20))
        return await closed_by_server(ws)


async def bad_utf8(url):
    """A compressed text message that inflates to bytes that are not UTF-8."""
    async with websockets.connect(url) as ws:
        await ws.write_frame(True, Opcode.TEXT, b"caf\xc3(" * 20)
        return await closed_by_server(ws)


async def subscribers(url, n, publish_url):
    """n clients with permessage-deflate and n without, subscribed by the app;
    one publish that each must receive."""
    import urllib.request
    with_ext = [await websockets.connect(url) for _ in range(n)]
    without = [await websockets.connect(url, compression=None) for _ in range(n)]
    request = urllib.request.Request(publish_url)
    await asyncio.get_running_loop().run_in_executor(
        None, lambda: urllib.request.urlopen(request, timeout=TIMEOUT).read())
    got = await asyncio.gather(*(c.recv() for c in with_ext + without))
    for c in with_ext + without:
        await c.close()
    want = "to all: " + "the same words again and again " * 8
    return {"received": sum(1 for m in got if m == want), "rsv1": received_rsv1,
            "negotiated": sum(1 for c in with_ext if negotiated(c)),
            "declined": sum(1 for c in without if negotiated(c) is None)}


def main():
    command, url, *args = sys.argv[1:]
    if command == "echo":
        job = echo(url, "deflate")
    elif command == "echo_plain":
        job = echo(url, None)
    elif command == "over_limit":
        job = over_limit(url)
    elif command == "bad_utf8":
        job = bad_utf8(url)
    else:
        job = subscribers(url, int(args[0]), args[1])
    print(json.dumps(asyncio.run(asyncio.wait_for(job, TIMEOUT))))


main()
