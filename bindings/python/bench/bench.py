"""bench.py -- the Python binding against rdmamsg_perf (C) and asyncio TCP.

usage: bench.py [--perf PATH] [-n ITERS] [--rate-n N] [--rounds R]
                [--compare DIR [--compare-name NAME]]

One run, peers side by side on loopback (softrdma for rdmamsg): 8-byte
round trips (ping-pong; one-way latency = half the median round trip, as
rdmamsg_perf reports it) and a one-way message rate (8-byte messages
streamed, the last one acknowledged), each the median of R rounds.  The
servers are separate processes (this script with --serve), stock asyncio,
no uvloop, no thread in the loop.

Two styles per Python peer, both sides of a pair in the same style:
"streams" (``await ep.recv()`` / ``send_nowait``; asyncio's StreamReader and
StreamWriter) and "callbacks" (``ep.set_receiver``; asyncio's Protocol
``data_received``), where no future and no task step is paid per message.
The row "same, wake via call_soon" is the streams pair with the binding's
in-pass wake-up turned off (rdmamsg._core.DIRECT_WAKE): a task waiting in
recv() then resumes one loop iteration after the pass that got its
message, as before that change -- the before/after comparison in one run.

--compare DIR adds the two rdmamsg rows once more with the package found
in DIR (another build's bindings/python, e.g. a copy of it made before a
change): both peers of those rows are processes of their own with
PYTHONPATH=DIR, interleaved with the others in every round -- a
before/after comparison of the binding in one run.

--busy-poll US adds the two rdmamsg rows once more with both peers'
contexts made with busy_poll=US microseconds (Context.busy_poll: a pass
that handled traffic polls the library that long before the loop blocks).

--inflight K[,K...] adds a second table: round trips per second with K of
them outstanding on one connection (-n of them in all, after a warm-up),
for rdmamsg callbacks (K pings in flight, each answer sending the next),
rdmamsg ``await ep.request()`` from K tasks, asyncio TCP's Protocol (K
pings in flight) and an asyncio TCP request/response client (K tasks,
each request a frame with an id and a future that data_received
resolves); with --busy-poll the rdmamsg rows once more with it.
"""
import argparse
import asyncio
import math
import os
import re
import resource
import socket
import statistics
import subprocess
import sys
import time

import rdmamsg
import rdmamsg._core

SIZE = 8
END = b"\xff" * SIZE  # ask for an acknowledgement (rate test)
# --track-sends: a completion callback per send (the default of the API);
# without it the library signals sends selectively, as rdmamsg_perf does
TRACK = "--track-sends" in sys.argv
# --busy-poll: the contexts of the rows (and server processes) that ask
CTX_KW = {}


class _Cpu:
    """CPU time (user + system) of this process and the server's over a
    client's timed loop, per round trip: less at the mercy of the machine's
    load than the wall clock (a busy-polling side's spins count)."""
    pid = 0  # the server's
    result = math.nan

    def _now(self) -> float:
        r = resource.getrusage(resource.RUSAGE_SELF)
        t = r.ru_utime + r.ru_stime
        if self.pid:
            with open("/proc/%d/stat" % self.pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            t += (int(fields[11]) + int(fields[12])) / os.sysconf(
                "SC_CLK_TCK")
        return t

    def start(self) -> None:
        self.t0 = self._now()

    def stop(self, rts: int) -> None:
        self.result = (self._now() - self.t0) / rts * 1e6


CPU = _Cpu()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- servers ---------------------------------------------------------------

async def serve_rdmamsg(port: int) -> None:
    async with rdmamsg.Context(**CTX_KW) as ctx:
        async def echo(ep):
            async for m in ep:
                if m.nbytes == SIZE and m == END or m.nbytes != 1:
                    ep.send_nowait(m)

        async with await rdmamsg.start_server(echo, "127.0.0.1:%d" % port,
                                              ctx=ctx, recv_depth=256,
                                              track_sends=TRACK):
            print("ready", flush=True)
            await asyncio.get_running_loop().run_in_executor(
                None, sys.stdin.read)


async def serve_rdmamsg_cb(port: int) -> None:
    async with rdmamsg.Context(**CTX_KW) as ctx:
        async def echo(ep):
            def on_msg(m, imm):
                if m.nbytes != 1:
                    ep.send_nowait(m)
            ep.set_receiver(on_msg)
            await ep.wait_closed()

        async with await rdmamsg.start_server(echo, "127.0.0.1:%d" % port,
                                              ctx=ctx, recv_depth=256,
                                              track_sends=TRACK,
                                              request_handler=bytes):
            print("ready", flush=True)
            await asyncio.get_running_loop().run_in_executor(
                None, sys.stdin.read)


class EchoProtocol(asyncio.Protocol):
    """The TCP server of the callbacks style (the streams server's wire
    protocol: b"p" + SIZE bytes -> echo; b"r" + SIZE - 1 bytes, then
    messages of SIZE bytes up to END -> END; b"q" + a 4-byte request id +
    SIZE bytes -> the id and the bytes, a response)."""

    def connection_made(self, transport):
        transport.get_extra_info("socket").setsockopt(
            socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.t = transport
        self.buf = bytearray()
        self.rate = False

    def data_received(self, data):
        buf = self.buf
        buf += data
        while True:
            if self.rate:
                if len(buf) < SIZE:
                    return
                m = bytes(buf[:SIZE])
                del buf[:SIZE]
                if m == END:
                    self.rate = False
                    self.t.write(END)
            elif buf[:1] == b"p" and len(buf) >= SIZE + 1:
                self.t.write(bytes(buf[1:SIZE + 1]))
                del buf[:SIZE + 1]
            elif buf[:1] == b"r" and len(buf) >= SIZE:
                del buf[:SIZE]
                self.rate = True
            elif buf[:1] == b"q" and len(buf) >= SIZE + 5:
                self.t.write(bytes(buf[1:SIZE + 5]))
                del buf[:SIZE + 5]
            else:
                return


async def serve_tcp_proto(port: int) -> None:
    loop = asyncio.get_running_loop()
    srv = await loop.create_server(EchoProtocol, "127.0.0.1", port)
    print("ready", flush=True)
    await loop.run_in_executor(None, sys.stdin.read)
    srv.close()


async def serve_tcp(port: int) -> None:
    async def echo(reader, writer):
        writer.transport.get_extra_info("socket").setsockopt(
            socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while True:
                hdr = await reader.readexactly(1)
                if hdr == b"p":  # ping: echo SIZE bytes
                    writer.write(await reader.readexactly(SIZE))
                    await writer.drain()
                else:  # rate: count messages up to END, acknowledge
                    await reader.readexactly(SIZE - 1)
                    while await reader.readexactly(SIZE) != END:
                        pass
                    writer.write(END)
                    await writer.drain()
        except asyncio.IncompleteReadError:
            writer.close()

    srv = await asyncio.start_server(echo, "127.0.0.1", port)
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    srv.close()


# -- clients ---------------------------------------------------------------

async def send_waiting(ep, m) -> None:
    """send_nowait, waiting for room when out of credits and backlog."""
    while True:
        try:
            ep.send_nowait(m)
            return
        except BlockingIOError:
            await ep.wait_writable()


async def client_rdmamsg(port: int, n: int, rate_n: int):
    async with rdmamsg.Context(**CTX_KW) as ctx:
        ep = await rdmamsg.connect(("127.0.0.1", port), ctx=ctx,
                                   recv_depth=256, track_sends=TRACK)
        msg = b"\x01" * SIZE
        for _ in range(n // 10):  # warm-up
            ep.send_nowait(msg)
            await ep.recv()
        times = []
        clock = time.perf_counter_ns
        CPU.start()
        for _ in range(n):
            t = clock()
            ep.send_nowait(msg)
            await ep.recv()
            times.append(clock() - t)
        CPU.stop(n)
        lat = statistics.median(times) / 2 / 1000
        one = b"\x02"  # one byte: the server does not echo it
        t = time.perf_counter()
        for _ in range(rate_n):
            try:
                ep.send_nowait(one)
            except BlockingIOError:
                await send_waiting(ep, one)
        await send_waiting(ep, END)
        await ep.recv()
        rate = rate_n / (time.perf_counter() - t)
        await ep.close()
    return lat, rate


async def client_rdmamsg_late(port: int, n: int, rate_n: int):
    """client_rdmamsg with the task woken through call_soon, one loop
    iteration after the pass that got its message (DIRECT_WAKE off, the
    binding's behaviour before in-pass wake-ups), against a server that
    does the same: the before/after comparison in one run."""
    rdmamsg._core.DIRECT_WAKE = False
    try:
        return await client_rdmamsg(port, n, rate_n)
    finally:
        rdmamsg._core.DIRECT_WAKE = True


async def client_rdmamsg_cb(port: int, n: int, rate_n: int):
    """Ping-pong driven by the receiver callback: each pong sends the next
    ping; the rate test streams as client_rdmamsg does."""
    loop = asyncio.get_running_loop()
    async with rdmamsg.Context(**CTX_KW) as ctx:
        ep = await rdmamsg.connect(("127.0.0.1", port), ctx=ctx,
                                   recv_depth=256, track_sends=TRACK)
        msg = b"\x01" * SIZE
        warm = n // 10
        times = []
        clock = time.perf_counter_ns
        done = loop.create_future()
        t0 = [0]

        def on_pong(m, imm):
            times.append(clock() - t0[0])
            if len(times) == warm + n:
                CPU.stop(n)
                done.set_result(None)
                return
            if len(times) == warm:
                CPU.start()
            t0[0] = clock()
            ep.send_nowait(msg)

        ep.set_receiver(on_pong)
        t0[0] = clock()
        ep.send_nowait(msg)
        await done
        lat = statistics.median(times[warm:]) / 2 / 1000
        acked = loop.create_future()
        ep.set_receiver(lambda m, imm: acked.set_result(None))
        one = b"\x02"  # one byte: the server does not echo it
        t = time.perf_counter()
        for _ in range(rate_n):
            try:
                ep.send_nowait(one)
            except BlockingIOError:
                await send_waiting(ep, one)
        await send_waiting(ep, END)
        await acked
        rate = rate_n / (time.perf_counter() - t)
        await ep.close()
    return lat, rate


class PingProtocol(asyncio.Protocol):
    def __init__(self, n: int) -> None:
        self.n = n
        self.times = []
        self.buf = bytearray()
        self.done = asyncio.get_running_loop().create_future()
        self.acked = asyncio.get_running_loop().create_future()
        self.clock = time.perf_counter_ns
        self.ping = b"p" + b"\x01" * SIZE
        self.rate = False

    def connection_made(self, transport):
        transport.get_extra_info("socket").setsockopt(
            socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.t = transport

    def start(self):
        self.t0 = self.clock()
        self.t.write(self.ping)

    def data_received(self, data):
        buf = self.buf
        buf += data
        while len(buf) >= SIZE:
            del buf[:SIZE]
            if self.rate:
                self.acked.set_result(None)
                return
            self.times.append(self.clock() - self.t0)
            if len(self.times) == self.n:
                CPU.stop(self.n - self.n // 11)
                self.done.set_result(None)
                return
            if len(self.times) == self.n // 11:
                CPU.start()
            self.t0 = self.clock()
            self.t.write(self.ping)


async def client_tcp_proto(port: int, n: int, rate_n: int):
    loop = asyncio.get_running_loop()
    warm = n // 10
    tr, pr = await loop.create_connection(lambda: PingProtocol(warm + n),
                                          "127.0.0.1", port)
    pr.start()
    await pr.done
    lat = statistics.median(pr.times[warm:]) / 2 / 1000
    pr.rate = True
    one = b"\x02" * SIZE
    t = time.perf_counter()
    tr.write(b"r" + b"\x00" * (SIZE - 1))
    for i in range(rate_n):
        tr.write(one)
        if i % 64 == 0 and tr.get_write_buffer_size() > 65536:
            await asyncio.sleep(0)
    tr.write(END)
    await pr.acked
    rate = rate_n / (time.perf_counter() - t)
    tr.close()
    return lat, rate


async def client_tcp(port: int, n: int, rate_n: int):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.transport.get_extra_info("socket").setsockopt(
        socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    ping = b"p" + b"\x01" * SIZE
    for _ in range(n // 10):
        writer.write(ping)
        await writer.drain()
        await reader.readexactly(SIZE)
    times = []
    clock = time.perf_counter_ns
    CPU.start()
    for _ in range(n):
        t = clock()
        writer.write(ping)
        await writer.drain()
        await reader.readexactly(SIZE)
        times.append(clock() - t)
    CPU.stop(n)
    lat = statistics.median(times) / 2 / 1000
    one = b"\x02" * SIZE
    t = time.perf_counter()
    writer.write(b"r" + b"\x00" * (SIZE - 1))
    for i in range(rate_n):
        writer.write(one)
        if i % 64 == 0:
            await writer.drain()
    writer.write(END)
    await writer.drain()
    await reader.readexactly(SIZE)
    rate = rate_n / (time.perf_counter() - t)
    writer.close()
    await writer.wait_closed()
    return lat, rate


# -- round trips with K outstanding (--inflight) ---------------------------

async def inflight_rdmamsg_cb(port: int, n: int, k: int) -> float:
    """K pings in flight, each pong (set_receiver) sending the next: round
    trips per second."""
    loop = asyncio.get_running_loop()
    async with rdmamsg.Context(**CTX_KW) as ctx:
        ep = await rdmamsg.connect(("127.0.0.1", port), ctx=ctx,
                                   recv_depth=256, track_sends=TRACK)
        msg = b"\x01" * SIZE
        warm = n // 10
        total = warm + n
        st = [0, 0, 0.0]  # sent, received, start
        done = loop.create_future()

        def on_pong(m, imm):
            st[1] += 1
            if st[1] == warm:
                CPU.start()
                st[2] = time.perf_counter()
            elif st[1] == total:
                done.set_result(time.perf_counter())
                CPU.stop(n)
                return
            if st[0] < total:
                st[0] += 1
                ep.send_nowait(msg)

        ep.set_receiver(on_pong)
        for _ in range(k):
            st[0] += 1
            ep.send_nowait(msg)
        end = await done
        await ep.close()
    return n / (end - st[2])


async def requests_in_flight(request, n: int, k: int) -> float:
    """K tasks, each awaiting request(msg) in turn, n // 10 round trips
    to warm up, then n measured (CPU too): round trips per second."""
    msg = b"\x01" * SIZE

    async def run(total):
        left = [total]

        async def task():
            while left[0] > 0:
                left[0] -= 1
                await request(msg)

        await asyncio.gather(*(task() for _ in range(k)))

    await run(n // 10)
    CPU.start()
    t = time.perf_counter()
    await run(n)
    rate = n / (time.perf_counter() - t)
    CPU.stop(n)
    return rate


async def inflight_rdmamsg_req(port: int, n: int, k: int) -> float:
    """K tasks, each awaiting ep.request() in turn: round trips per
    second."""
    async with rdmamsg.Context(**CTX_KW) as ctx:
        ep = await rdmamsg.connect(("127.0.0.1", port), ctx=ctx,
                                   recv_depth=256, track_sends=TRACK)
        rate = await requests_in_flight(ep.request, n, k)
        await ep.close()
    return rate


class PipeProtocol(asyncio.Protocol):
    """K pings in flight over TCP, each echo sending the next."""

    def __init__(self, n: int, k: int) -> None:
        self.k = k
        self.warm = n // 10
        self.total = self.warm + n
        self.sent = self.got = 0
        self.buf = bytearray()
        self.ping = b"p" + b"\x01" * SIZE
        self.done = asyncio.get_running_loop().create_future()

    def connection_made(self, transport):
        transport.get_extra_info("socket").setsockopt(
            socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.t = transport
        for _ in range(self.k):
            self.sent += 1
            transport.write(self.ping)

    def data_received(self, data):
        buf = self.buf
        buf += data
        while len(buf) >= SIZE:
            del buf[:SIZE]
            self.got += 1
            if self.got == self.warm:
                CPU.start()
                self.t0 = time.perf_counter()
            elif self.got == self.total:
                self.done.set_result(time.perf_counter())
                CPU.stop(self.total - self.warm)
                return
            if self.sent < self.total:
                self.sent += 1
                self.t.write(self.ping)


async def inflight_tcp_proto(port: int, n: int, k: int) -> float:
    loop = asyncio.get_running_loop()
    tr, pr = await loop.create_connection(lambda: PipeProtocol(n, k),
                                          "127.0.0.1", port)
    end = await pr.done
    tr.close()
    return n / (end - pr.t0)


class RpcProtocol(asyncio.Protocol):
    """asyncio's TCP as a request/response client: a request is b"q", a
    4-byte id and SIZE bytes; the response (the id and SIZE bytes)
    resolves the future of that id."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.futs = {}
        self.next_id = 0
        self.loop = asyncio.get_running_loop()

    def connection_made(self, transport):
        transport.get_extra_info("socket").setsockopt(
            socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.t = transport

    def request(self, data: bytes) -> asyncio.Future:
        self.next_id = rid = (self.next_id + 1) & 0xFFFFFFFF
        fut = self.loop.create_future()
        self.futs[rid] = fut
        self.t.write(b"q" + rid.to_bytes(4, "little") + data)
        return fut

    def data_received(self, data):
        buf = self.buf
        buf += data
        while len(buf) >= SIZE + 4:
            rid = int.from_bytes(buf[:4], "little")
            fut = self.futs.pop(rid)
            fut.set_result(bytes(buf[4:SIZE + 4]))
            del buf[:SIZE + 4]


async def inflight_tcp_rpc(port: int, n: int, k: int) -> float:
    loop = asyncio.get_running_loop()
    tr, pr = await loop.create_connection(RpcProtocol, "127.0.0.1", port)
    rate = await requests_in_flight(pr.request, n, k)
    tr.close()
    return rate


def with_server(kind: str, fn, *args, path=None, busy=None):
    """Run client fn against a server of kind; with path (a PYTHONPATH),
    the client too is a process of its own, both importing rdmamsg from
    path; with busy (microseconds), both sides' contexts busy-poll."""
    port = free_port()
    env = None
    if path is not None:
        env = dict(os.environ, PYTHONPATH=path)
    track = ["--track-sends"] if TRACK else []
    opts = track + (["--busy-poll", str(busy)] if busy else [])
    srv = subprocess.Popen([sys.executable, __file__, "--serve", kind,
                            str(port)] + opts, stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, env=env)
    try:
        assert srv.stdout.readline() == b"ready\n"
        if path is None:
            CTX_KW.clear()
            if busy:
                CTX_KW["busy_poll"] = busy / 1e6
            CPU.pid = srv.pid
            CPU.result = math.nan
            try:
                res = asyncio.run(fn(port, *args))
            finally:
                CTX_KW.clear()
                CPU.pid = 0
            return (res if type(res) is tuple else (res,)) + (CPU.result,)
        out = subprocess.run([sys.executable, __file__, "--client",
                              fn.__name__, str(port)] +
                             [str(a) for a in args] + track, env=env,
                             check=True, capture_output=True, text=True,
                             timeout=300).stdout
        lat, rate = out.split()
        return float(lat), float(rate), math.nan
    finally:
        srv.stdin.close()
        srv.wait(30)


def c_perf(perf: str, n: int, rate_n: int):
    """(one-way us, msgs/s, CPU us per round trip of both processes: that
    of a run of 2n round trips less that of a run of n, so that the
    set-up does not count)"""
    def run(test, iters):
        ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu0 = ru.ru_utime + ru.ru_stime
        port = free_port()
        srv = subprocess.Popen([perf, "-s", "-b", "127.0.0.1", "-p",
                                str(port), "--fd"], stdout=subprocess.DEVNULL)
        try:
            out = subprocess.run([perf, "-c", "127.0.0.1", "-p", str(port),
                                  "--fd", "-t", test, "-S", str(SIZE), "-n",
                                  str(iters)], check=True, text=True,
                                 capture_output=True, timeout=120).stdout
        finally:
            srv.wait(30)
        ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        row = [ln.split() for ln in out.splitlines()
               if re.match(r"\s*%d\s" % SIZE, ln)][0]
        # lat: size iters median avg p99; rate: size iters msgs/s Mmsgs/s
        return float(row[2]), ru.ru_utime + ru.ru_stime - cpu0

    lat, cpu1 = run("lat", n)
    cpu2 = run("lat", 2 * n)[1]
    return lat, run("rate", rate_n)[0], (cpu2 - cpu1) / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--serve", nargs=2)
    ap.add_argument("--perf", default=None)
    ap.add_argument("-n", type=int, default=10000)
    ap.add_argument("--rate-n", type=int, default=100000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--track-sends", action="store_true")
    ap.add_argument("--compare", metavar="DIR", default=None)
    ap.add_argument("--compare-name", default="before")
    ap.add_argument("--busy-poll", metavar="US", type=float, default=None)
    ap.add_argument("--inflight", metavar="K[,K...]", default=None)
    ap.add_argument("--no-latency", action="store_true",
                    help="only the --inflight table")
    ap.add_argument("--client", nargs=4, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.busy_poll is not None and a.busy_poll <= 0:
        ap.error("--busy-poll takes microseconds > 0")
    if a.client:
        name, port, n, rate_n = a.client
        fn = {"client_rdmamsg": client_rdmamsg,
              "client_rdmamsg_cb": client_rdmamsg_cb}[name]
        print("%r %r" % asyncio.run(fn(int(port), int(n), int(rate_n))))
        return
    if a.serve:
        kind, port = a.serve
        if a.busy_poll:
            CTX_KW["busy_poll"] = a.busy_poll / 1e6
        if kind == "rdmamsg-late":
            rdmamsg._core.DIRECT_WAKE = False
            kind = "rdmamsg"
        asyncio.run({"rdmamsg": serve_rdmamsg, "rdmamsg-cb": serve_rdmamsg_cb,
                     "tcp": serve_tcp, "tcp-proto": serve_tcp_proto}[kind](
            int(port)))
        return
    busy = a.busy_poll
    # (name, server kind, client, PYTHONPATH, busy_poll)
    peers = [("python rdmamsg streams", "rdmamsg", client_rdmamsg, None,
              None),
             ("  same, wake via call_soon", "rdmamsg-late",
              client_rdmamsg_late, None, None),
             ("asyncio TCP streams", "tcp", client_tcp, None, None),
             ("python rdmamsg callbacks", "rdmamsg-cb", client_rdmamsg_cb,
              None, None),
             ("asyncio TCP protocol", "tcp-proto", client_tcp_proto, None,
              None)]
    if a.compare:
        path = os.path.abspath(a.compare)
        peers[1:1] = [("  streams, " + a.compare_name, "rdmamsg",
                       client_rdmamsg, path, None)]
        peers.append(("  callbacks, " + a.compare_name, "rdmamsg-cb",
                      client_rdmamsg_cb, path, None))
    if busy:
        peers[1:1] = [("  streams, busy_poll", "rdmamsg", client_rdmamsg,
                       None, busy)]
        peers.append(("  callbacks, busy_poll", "rdmamsg-cb",
                      client_rdmamsg_cb, None, busy))
    if a.no_latency:
        peers = []
    ks = [int(k) for k in a.inflight.split(",")] if a.inflight else []
    flights = []
    for k in ks:
        flights += [("rdmamsg callbacks", k, "rdmamsg-cb",
                     inflight_rdmamsg_cb, None),
                    ("rdmamsg request()", k, "rdmamsg-cb",
                     inflight_rdmamsg_req, None)]
        if busy:
            flights += [("  callbacks, busy_poll", k, "rdmamsg-cb",
                         inflight_rdmamsg_cb, busy),
                        ("  request(), busy_poll", k, "rdmamsg-cb",
                         inflight_rdmamsg_req, busy)]
        flights += [("asyncio TCP protocol", k, "tcp-proto",
                     inflight_tcp_proto, None),
                    ("asyncio TCP requests", k, "tcp-proto",
                     inflight_tcp_rpc, None)]
    rows = {name: [] for name, _, _, _, _ in peers}
    rows["C rdmamsg_perf --fd"] = []
    frows = {(name, k): [] for name, k, _, _, _ in flights}
    load = os.getloadavg()
    for _ in range(a.rounds):
        for name, kind, fn, path, b in peers:
            rows[name].append(with_server(kind, fn, a.n, a.rate_n,
                                          path=path, busy=b))
        if a.perf and peers:
            rows["C rdmamsg_perf --fd"].append(c_perf(a.perf, a.n, a.rate_n))
        for name, k, kind, fn, b in flights:
            frows[(name, k)].append(with_server(kind, fn, a.n, k, busy=b))
    med = {k: tuple(statistics.median(r[i] for r in v) for i in range(3))
           for k, v in rows.items() if v}
    load2 = os.getloadavg()
    print("# %d-byte messages, median of %d rounds, one host, loopback; "
          "load average %.2f at the start, %.2f at the end (%d CPUs)%s"
          % (SIZE, a.rounds, load[0], load2[0], os.cpu_count(),
             "; busy_poll %g us" % busy if busy else ""))
    if med:
        print("%-26s %12s %12s %12s %10s" % ("peer", "one-way us", "rtt/s",
                                              "msgs/s", "CPU us/rt"))
    # rtt/s: round trips per second at the median latency; CPU us/rt: both
    # processes' CPU time per round trip over the latency test
    for k, (lat, rate, cpu) in med.items():
        print("%-26s %12.2f %12.0f %12.0f %10.1f" % (k, lat, 1e6 / (2 * lat),
                                                     rate, cpu))
    c = med.get("C rdmamsg_perf --fd")
    for style, tcp_name in (("streams", "asyncio TCP streams"),
                            ("callbacks", "asyncio TCP protocol")):
        if not med:
            break
        tcp = med[tcp_name]
        for pyname in ("python rdmamsg " + style, "  %s, busy_poll" % style):
            py = med.get(pyname)
            if py is None:
                continue
            tag = style + (" busy" if pyname.endswith("busy_poll") else "")
            print("%-14s python/asyncio-TCP round-trip rate: %.2fx "
                  "(goal >= 3x)" % (tag, tcp[0] / py[0]))
            print("%-14s python/asyncio-TCP message rate:    %.2fx"
                  % (tag, py[1] / tcp[1]))
            if c is not None:
                print("%-14s python/C latency:                   %.2fx "
                      "(goal <= 2x)" % (tag, py[0] / c[0]))
                print("%-14s python/C message rate:              %.2fx"
                      % (tag, py[1] / c[1]))
        old = med.get("  %s, %s" % (style, a.compare_name))
        if old is not None:
            print("%-14s %s: round-trip rate %.2fx, message rate %.2fx of "
                  "asyncio TCP" % (style, a.compare_name, tcp[0] / old[0],
                                   old[1] / tcp[1]))
    if c is not None and med:
        tcp = med["asyncio TCP protocol"]
        print("C rdmamsg --fd / asyncio TCP protocol round-trip rate: "
              "%.2fx (the ceiling of any binding over the fd)"
              % (tcp[0] / c[0]))
    if flights:
        fmed = {key: (statistics.median(r[0] for r in v),
                      statistics.median(r[1] for r in v))
                for key, v in frows.items()}
        print("%-26s %5s %12s %9s %10s %9s" % (
            "round trips in flight", "K", "rtt/s", "/ TCP", "CPU us/rt",
            "/ TCP"))
        # CPU us/rt: both processes' CPU time per round trip
        for (name, k), (rate, cpu) in fmed.items():
            ref = fmed[("asyncio TCP requests" if "request" in name
                        else "asyncio TCP protocol", k)]
            print("%-26s %5d %12.0f %8.2fx %10.1f %8.2fx" % (
                name, k, rate, rate / ref[0], cpu, cpu / ref[1]))


if __name__ == "__main__":
    main()
