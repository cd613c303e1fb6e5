# A WebSocket client for t/websocket/holder.t and tls.t (Python's websockets,
# Debian's python3-websockets): each command runs one scenario against URL
# and prints what it saw as one JSON object.  "--ca FILE" first: a wss://
# URL's server is checked against that CA.
import asyncio
import json
import os
import ssl
import sys

import websockets

TIMEOUT = 60
CA = None


def connect(url, **options):
    """websockets.connect, with the test CA for wss://."""
    if url.startswith("wss:"):
        options["ssl"] = ssl.create_default_context(cafile=CA)
    return websockets.connect(url, **options)


async def echo(url):
    seen = {}
    async with connect(url, max_size=None, compression=None) as ws:
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
    async with connect(url) as ws:
        sent = ["%04d " % i + "x" * 1000 for i in range(n)]
        for m in sent:
            await ws.send(m)
        got = [await ws.recv() for _ in range(n)]
    return {"in_order": got == sent, "count": len(got)}


async def server_close(url):
    async with connect(url) as ws:
        await ws.send("close 4001")
        try:
            await ws.recv()
        except websockets.ConnectionClosed as e:
            return {"code": e.rcvd.code if e.rcvd else None, "reason": e.rcvd.reason if e.rcvd else None}
    return {}


async def two(url, gate):
    a = await connect(url)
    b = await connect(url)
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
        async with connect(url) as ws:
            await ws.send("client %d" % i)
            return await ws.recv() == "client %d" % i
    results = await asyncio.gather(*(one(i) for i in range(n)))
    return {"echoed": sum(results)}


async def subscribers(url, n, publish_url):
    """n clients subscribed by the app, then one publish (an HTTP GET that
    publishes) that each must receive."""
    import urllib.request
    clients = [await connect(url) for _ in range(n)]
    body = None
    if publish_url.endswith("/publish/"):  # the publish endpoint (--publish-listen)
        body = json.dumps({"items": [{"channel": "room", "ws-message": {"content": "to all"}}]}).encode()
    request = urllib.request.Request(publish_url, data=body, headers={"Content-Type": "application/json"})
    context = ssl.create_default_context(cafile=CA) if publish_url.startswith("https:") else None
    await asyncio.get_running_loop().run_in_executor(
        None, lambda: urllib.request.urlopen(request, timeout=TIMEOUT, context=context).read())
    got = await asyncio.gather(*(c.recv() for c in clients))
    for c in clients:
        await c.close()
    return {"received": sum(1 for m in got if m == "to all"), "first": got[0] if got else None}


async def once(url):
    """One message echoed, then the client's close."""
    async with connect(url) as ws:
        await ws.send("once")
        got = await ws.recv()
        await ws.close(1000)
        return {"echo": got, "close_code": ws.close_code}


async def gone(url):
    """A message echoed, then the connection cut: no close frame."""
    ws = await connect(url)
    await ws.send("before going")
    got = await ws.recv()
    ws.transport.abort()
    return {"echo": got}


async def held(url, n):
    """n clients that stay open, told what to do by lines on the standard
    input, each answered by a line of JSON: "pid" (each asks the app for
    the pid of the worker that answers it), "closed" (each waits for the
    server's close: its codes and reasons), "end" (each closes)."""
    clients = [await connect(url) for _ in range(n)]
    loop = asyncio.get_running_loop()

    async def pids():
        out = []
        for c in clients:
            await c.send("pid")
            out.append(await c.recv())
        return {"pids": out}

    async def closed():
        out = []
        for c in clients:
            try:
                await asyncio.wait_for(c.recv(), TIMEOUT)
            except websockets.ConnectionClosed as e:
                out.append([e.rcvd.code, e.rcvd.reason] if e.rcvd else None)
        return {"closed": out}

    print(json.dumps(await pids()), flush=True)
    while True:
        line = (await loop.run_in_executor(None, sys.stdin.readline)).strip()
        if line == "pid":
            print(json.dumps(await pids()), flush=True)
        elif line == "closed":
            print(json.dumps(await closed()), flush=True)
        else:
            break
    for c in clients:
        await c.close()
    return {"end": True}


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
    global CA
    if sys.argv[1] == "--ca":
        CA = sys.argv[2]
        del sys.argv[1:3]
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
    elif command == "once":
        job = once(url)
    elif command == "gone":
        job = gone(url)
    elif command == "held":
        print(json.dumps(asyncio.run(held(url, int(args[0])))))
        return
    else:
        job = many(url, int(args[0]))
    print(json.dumps(asyncio.run(asyncio.wait_for(job, TIMEOUT))))


main()
