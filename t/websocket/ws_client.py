# A WebSocket client for t/websocket/holder.t (Python's websockets, Debian's
# python3-websockets): each command runs one scenario against URL and prints
# what it saw as one JSON object.
import asyncio
import json
import os
import sys

import websockets

TIMEOUT = 60


async def echo(url):
    seen = {}
    async with websockets.connect(url, max_size=None, compression=None) as ws:
        await ws.send("hello")
        seen["text"] = await ws.recv()
        await ws.send(b"\x00\x01\xffbinary")
        seen["binary"] = (await ws.recv()).hex()
        await ws.send(["frag", "mented ", "\u00e9t\u00e9"])  # one message in three frames
        seen["fragmented"] = await ws.recv()
        big = bytes(range(256)) * 400  # 100 KiB
        await ws.send(big)
        seen["big"] = (await ws.recv()) == big
        pong = await ws.ping(b"are you there")
        await asyncio.wait_for(pong, TIMEOUT)
        seen["pong"] = True
        await ws.close(4000, "client done")
        seen["close_code"] = ws.close_code
        seen["close_reason"] = ws.close_reason
    return seen


async def burst(url, n):
    """n messages sent at once, more than the holder gathers while a request
    is in flight: all echoed, in order."""
    async with websockets.connect(url) as ws:
        sent = ["%04d " % i + "x" * 1000 for i in range(n)]
        for m in sent:
            await ws.send(m)
        got = [await ws.recv() for _ in range(n)]
    return {"in_order": got == sent, "count": len(got)}


async def server_close(url):
    async with websockets.connect(url) as ws:
        await ws.send("close 4001")
        try:
            await ws.recv()
        except websockets.ConnectionClosed as e:
            return {"code": e.rcvd.code if e.rcvd else None, "reason": e.rcvd.reason if e.rcvd else None}
    return {}


async def two(url, gate):
    a = await websockets.connect(url)
    b = await websockets.connect(url)
    await a.send("wait " + gate)  # keeps one worker in the app until the gate opens
    await b.send("pid")
    pid_b = await b.recv()  # served by the other worker meanwhile
    open(gate, "w").close()
    pid_a = await a.recv()
    await a.close()
    await b.close()
    return {"a": pid_a, "b": pid_b}


async def many(url, n):
    async def one(i):
        async with websockets.connect(url) as ws:
            await ws.send("client %d" % i)
            return await ws.recv() == "client %d" % i
    results = await asyncio.gather(*(one(i) for i in range(n)))
    return {"echoed": sum(results)}


async def subscribers(url, n, publish_url):
    """n clients subscribed by the app, then one publish (an HTTP GET that
    publishes) that each must receive."""
    import urllib.request
    clients = [await websockets.connect(url) for _ in range(n)]
    body = None
    if publish_url.endswith("/publish/"):  # the publish endpoint (--publish-listen)
        body = json.dumps({"items": [{"channel": "room", "ws-message": {"content": "to all"}}]}).encode()
    request = urllib.request.Request(publish_url, data=body, headers={"Content-Type": "application/json"})
    await asyncio.get_running_loop().run_in_executor(
        None, lambda: urllib.request.urlopen(request, timeout=TIMEOUT).read())
    got = await asyncio.gather(*(c.recv() for c in clients))
    for c in clients:
        await c.close()
    return {"received": sum(1 for m in got if m == "to all"), "first": got[0] if got else None}


async def idle(url):
    """A client whose own pings are off, on a connection kept idle: its
    library answers the server's pings, so it stays open through many of
    them (the app's keep-alive messages count the time passed)."""
    async with websockets.connect(url, ping_interval=None) as ws:
        await ws.send("keep-alive interval text")
        seen = {"kept": await ws.recv()}
        seen["keep_alives"] = sum([1 for _ in range(3) if await ws.recv() == "still here"])
        await ws.send("hello")
        seen["echo"] = await ws.recv()
    return seen


def main():
    command, url, *args = sys.argv[1:]
    if command == "echo":
        job = echo(url)
    elif command == "server_close":
        job = server_close(url)
    elif command == "two":
        job = two(url, args[0])
    elif command == "burst":
        job = burst(url, int(args[0]))
    elif command == "idle":
        job = idle(url)
    elif command == "subscribers":
        job = subscribers(url, int(args[0]), args[1])
    else:
        job = many(url, int(args[0]))
    print(json.dumps(asyncio.run(asyncio.wait_for(job, TIMEOUT))))


main()
