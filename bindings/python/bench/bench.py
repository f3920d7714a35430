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
"""
import argparse
import asyncio
import os
import re
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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- servers ---------------------------------------------------------------

async def serve_rdmamsg(port: int) -> None:
    async with rdmamsg.Context() as ctx:
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
    async with rdmamsg.Context() as ctx:
        async def echo(ep):
            def on_msg(m, imm):
                if m.nbytes != 1:
                    ep.send_nowait(m)
            ep.set_receiver(on_msg)
            await ep.wait_closed()

        async with await rdmamsg.start_server(echo, "127.0.0.1:%d" % port,
                                              ctx=ctx, recv_depth=256,
                                              track_sends=TRACK):
            print("ready", flush=True)
            await asyncio.get_running_loop().run_in_executor(
                None, sys.stdin.read)


class EchoProtocol(asyncio.Protocol):
    """The TCP server of the callbacks style (the streams server's wire
    protocol: b"p" + SIZE bytes -> echo; b"r" + SIZE - 1 bytes, then
    messages of SIZE bytes up to END -> END)."""

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
    async with rdmamsg.Context() as ctx:
        ep = await rdmamsg.connect(("127.0.0.1", port), ctx=ctx,
                                   recv_depth=256, track_sends=TRACK)
        msg = b"\x01" * SIZE
        for _ in range(n // 10):  # warm-up
            ep.send_nowait(msg)
            await ep.recv()
        times = []
        clock = time.perf_counter_ns
        for _ in range(n):
            t = clock()
            ep.send_nowait(msg)
            await ep.recv()
            times.append(clock() - t)
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
    async with rdmamsg.Context() as ctx:
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
                done.set_result(None)
                return
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
                self.done.set_result(None)
                return
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
    for _ in range(n):
        t = clock()
        writer.write(ping)
        await writer.drain()
        await reader.readexactly(SIZE)
        times.append(clock() - t)
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


def with_server(kind: str, fn, *args, path=None):
    """Run client fn against a server of kind; with path (a PYTHONPATH),
    the client too is a process of its own, both importing rdmamsg from
    path."""
    port = free_port()
    env = None
    if path is not None:
        env = dict(os.environ, PYTHONPATH=path)
    track = ["--track-sends"] if TRACK else []
    srv = subprocess.Popen([sys.executable, __file__, "--serve", kind,
                            str(port)] + track, stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, env=env)
    try:
        assert srv.stdout.readline() == b"ready\n"
        if path is None:
            return asyncio.run(fn(port, *args))
        out = subprocess.run([sys.executable, __file__, "--client",
                              fn.__name__, str(port)] +
                             [str(a) for a in args] + track, env=env,
                             check=True, capture_output=True, text=True,
                             timeout=300).stdout
        lat, rate = out.split()
        return float(lat), float(rate)
    finally:
        srv.stdin.close()
        srv.wait(30)


def c_perf(perf: str, n: int, rate_n: int):
    res = []
    for test, iters in (("lat", n), ("rate", rate_n)):
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
        row = [ln.split() for ln in out.splitlines()
               if re.match(r"\s*%d\s" % SIZE, ln)][0]
        # lat: size iters median avg p99; rate: size iters msgs/s Mmsgs/s
        res.append(float(row[2]))
    return res[0], res[1]


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
    ap.add_argument("--client", nargs=4, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.client:
        name, port, n, rate_n = a.client
        fn = {"client_rdmamsg": client_rdmamsg,
              "client_rdmamsg_cb": client_rdmamsg_cb}[name]
        print("%r %r" % asyncio.run(fn(int(port), int(n), int(rate_n))))
        return
    if a.serve:
        kind, port = a.serve
        if kind == "rdmamsg-late":
            rdmamsg._core.DIRECT_WAKE = False
            kind = "rdmamsg"
        asyncio.run({"rdmamsg": serve_rdmamsg, "rdmamsg-cb": serve_rdmamsg_cb,
                     "tcp": serve_tcp, "tcp-proto": serve_tcp_proto}[kind](
            int(port)))
        return
    peers = [("python rdmamsg streams", "rdmamsg", client_rdmamsg, None),
             ("  same, wake via call_soon", "rdmamsg-late",
              client_rdmamsg_late, None),
             ("asyncio TCP streams", "tcp", client_tcp, None),
             ("python rdmamsg callbacks", "rdmamsg-cb", client_rdmamsg_cb,
              None),
             ("asyncio TCP protocol", "tcp-proto", client_tcp_proto, None)]
    if a.compare:
        path = os.path.abspath(a.compare)
        peers[1:1] = [("  streams, " + a.compare_name, "rdmamsg",
                       client_rdmamsg, path)]
        peers.append(("  callbacks, " + a.compare_name, "rdmamsg-cb",
                      client_rdmamsg_cb, path))
    rows = {name: [] for name, _, _, _ in peers}
    rows["C rdmamsg_perf --fd"] = []
    load = os.getloadavg()
    for _ in range(a.rounds):
        for name, kind, fn, path in peers:
            rows[name].append(with_server(kind, fn, a.n, a.rate_n,
                                          path=path))
        if a.perf:
            rows["C rdmamsg_perf --fd"].append(c_perf(a.perf, a.n, a.rate_n))
    med = {k: (statistics.median(r[0] for r in v),
               statistics.median(r[1] for r in v)) for k, v in rows.items()
           if v}
    load2 = os.getloadavg()
    print("# %d-byte messages, median of %d rounds, one host, loopback; "
          "load average %.2f at the start, %.2f at the end (%d CPUs)"
          % (SIZE, a.rounds, load[0], load2[0], os.cpu_count()))
    print("%-26s %12s %12s %12s" % ("peer", "one-way us", "rtt/s",
                                     "msgs/s"))
    # rtt/s: round trips per second at the median latency
    for k, (lat, rate) in med.items():
        print("%-26s %12.2f %12.0f %12.0f" % (k, lat, 1e6 / (2 * lat), rate))
    c = med.get("C rdmamsg_perf --fd")
    for style, tcp_name in (("streams", "asyncio TCP streams"),
                            ("callbacks", "asyncio TCP protocol")):
        py = med["python rdmamsg " + style]
        tcp = med[tcp_name]
        print("%-9s python/asyncio-TCP round-trip rate: %.2fx (goal >= 3x)"
              % (style, tcp[0] / py[0]))
        print("%-9s python/asyncio-TCP message rate:    %.2fx"
              % (style, py[1] / tcp[1]))
        old = med.get("  %s, %s" % (style, a.compare_name))
        if old is not None:
            print("%-9s %s: round-trip rate %.2fx, message rate %.2fx of "
                  "asyncio TCP" % (style, a.compare_name, tcp[0] / old[0],
                                   old[1] / tcp[1]))
        if c is not None:
            print("%-9s python/C latency:                   %.2fx "
                  "(goal <= 2x)" % (style, py[0] / c[0]))
            print("%-9s python/C message rate:              %.2fx"
                  % (style, py[1] / c[1]))
    if c is not None:
        tcp = med["asyncio TCP protocol"]
        print("C rdmamsg --fd / asyncio TCP protocol round-trip rate: "
              "%.2fx (the ceiling of any binding over the fd)"
              % (tcp[0] / c[0]))


if __name__ == "__main__":
    main()
