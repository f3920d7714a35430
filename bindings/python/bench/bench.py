"""bench.py -- the Python binding against rdmamsg_perf (C) and asyncio TCP.

usage: bench.py [--perf PATH] [-n ITERS] [--rate-n N] [--rounds R]

One run, peers side by side on loopback (softrdma for rdmamsg): 8-byte
round trips (ping-pong; one-way latency = half the median round trip, as
rdmamsg_perf reports it) and a one-way message rate (8-byte messages
streamed, the last one acknowledged), each the median of R rounds.  The servers are separate
processes (this script with --serve), stock asyncio, no uvloop.
"""
import argparse
import asyncio
import re
import socket
import statistics
import subprocess
import sys
import time

import rdmamsg

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
                await ep.wait_writable()
                ep.send_nowait(one)
        ep.send_nowait(END)
        await ep.recv()
        rate = rate_n / (time.perf_counter() - t)
        await ep.close()
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


def with_server(kind: str, fn, *args):
    port = free_port()
    srv = subprocess.Popen([sys.executable, __file__, "--serve", kind,
                            str(port)] + (["--track-sends"] if TRACK else []),
                           stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE)
    try:
        assert srv.stdout.readline() == b"ready\n"
        return asyncio.run(fn(port, *args))
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
    a = ap.parse_args()
    if a.serve:
        kind, port = a.serve
        asyncio.run({"rdmamsg": serve_rdmamsg, "tcp": serve_tcp}[kind](
            int(port)))
        return
    rows = {"python rdmamsg": [], "asyncio TCP": [], "C rdmamsg_perf --fd": []}
    for _ in range(a.rounds):
        rows["python rdmamsg"].append(with_server(
            "rdmamsg", client_rdmamsg, a.n, a.rate_n))
        rows["asyncio TCP"].append(with_server("tcp", client_tcp, a.n,
                                               a.rate_n))
        if a.perf:
            rows["C rdmamsg_perf --fd"].append(c_perf(a.perf, a.n, a.rate_n))
    med = {k: (statistics.median(r[0] for r in v),
               statistics.median(r[1] for r in v)) for k, v in rows.items()
           if v}
    print("# %d-byte messages, median of %d rounds, one host, loopback"
          % (SIZE, a.rounds))
    print("%-22s %14s %14s %12s" % ("peer", "one-way us", "rtt/s",
                                     "msgs/s"))
    # rtt/s: round trips per second at the median latency
    for k, (lat, rate) in med.items():
        print("%-22s %14.2f %14.0f %12.0f" % (k, lat, 1e6 / (2 * lat), rate))
    py = med["python rdmamsg"]
    tcp = med["asyncio TCP"]
    print("python/asyncio-TCP round-trip rate: %.2fx (goal >= 3x)"
          % (tcp[0] / py[0]))
    print("python/asyncio-TCP message rate:    %.2fx" % (py[1] / tcp[1]))
    if "C rdmamsg_perf --fd" in med:
        c = med["C rdmamsg_perf --fd"]
        print("python/C latency:                   %.2fx (goal <= 2x)"
              % (py[0] / c[0]))
        print("python/C message rate:              %.2fx" % (py[1] / c[1]))


if __name__ == "__main__":
    main()
