"""insns.py -- instructions per round trip of the Python binding, both peers
in one process, counted by callgrind (independent of the machine's load).

usage: insns.py [-n N] [--inflight K] [--syscalls] [MODE ...]
       insns.py --run MODE N K        (one measured process; used by the above)

Each MODE runs twice under ``valgrind --tool=callgrind``, with N and 2N
8-byte round trips after a warm-up; the difference of the two totals over
N is the cost of one round trip (both peers: client and server, the
binding, the library, softrdma, the interpreter and asyncio's loop; not
the kernel).  With --inflight K, K round trips are outstanding at a time
(K pings in flight, each answer sending the next; K request() tasks) and
the figure is still per round trip.  --syscalls counts the system calls
per round trip the same way, under ``strace -f -c`` (on a virtual machine
each can cost more than a thousand instructions' worth of time).

Modes: cb (set_receiver on both sides), streams (``await ep.recv()`` +
``send_nowait``, as bench.py), req (``await ep.request()`` against a
request_handler), tcp-proto and tcp-streams (asyncio's TCP, Protocol and
streams: the kernel's share is not counted), tcp-req (K tasks awaiting
requests over asyncio's TCP: a frame with an id, a future per request, as
bench.py's "asyncio TCP requests"), pipes (asyncio's loop alone:
two add_reader callbacks ping-ponging a byte over two pipes).
Environment as tools/bench-python.sh sets it (PYTHONPATH,
RDMAMSG_SOFTRDMA_PATH).
"""
import argparse
import asyncio
import os
import re
import socket
import subprocess
import sys
import tempfile

SIZE = 8
MODES = ("cb", "streams", "req", "tcp-proto", "tcp-streams", "tcp-req",
         "pipes")


async def rdmamsg_pair(server_kw, handler=None):
    import rdmamsg
    a = rdmamsg.Context()
    b = rdmamsg.Context()

    async def idle(ep):
        await ep.wait_closed()

    srv = await rdmamsg.start_server(handler or idle, "127.0.0.1:0", ctx=a,
                                     track_sends=False, **server_kw)
    ep = await rdmamsg.connect(("127.0.0.1", srv.port), ctx=b,
                               track_sends=False)
    return a, b, srv, ep


async def close_pair(a, b, srv, ep):
    await ep.close()
    srv.close()
    await srv.wait_closed()
    await b.close()
    await a.close()


async def run_cb(n, k):
    loop = asyncio.get_running_loop()

    async def echo(ep):
        ep.set_receiver(lambda m, imm: ep.send_nowait(m))
        await ep.wait_closed()

    pair = await rdmamsg_pair({}, echo)
    ep = pair[3]
    msg = b"\x01" * SIZE
    left = [n]
    done = loop.create_future()

    def on_pong(m, imm):
        left[0] -= 1
        if left[0] >= k:
            ep.send_nowait(msg)
        elif left[0] == 0:
            done.set_result(None)

    ep.set_receiver(on_pong)
    for _ in range(k):
        ep.send_nowait(msg)
    await done
    await close_pair(*pair)


async def run_streams(n, k):
    async def echo(ep):
        async for m in ep:
            ep.send_nowait(m)

    pair = await rdmamsg_pair({}, echo)
    ep = pair[3]
    msg = b"\x01" * SIZE
    for _ in range(k):
        ep.send_nowait(msg)
    for i in range(n):
        await ep.recv()
        if i < n - k:
            ep.send_nowait(msg)
    await close_pair(*pair)


async def spread_requests(request, n, k):
    """n requests of SIZE bytes from k tasks, each awaiting its own in
    turn (k in flight)."""
    msg = b"\x01" * SIZE

    async def requester(count):
        for _ in range(count):
            await request(msg)

    await asyncio.gather(*(requester(n // k + (i < n % k))
                           for i in range(k)))


async def run_req(n, k):
    pair = await rdmamsg_pair({"request_handler": lambda d: d})
    ep = pair[3]
    await spread_requests(ep.request, n, k)
    await close_pair(*pair)


class _Echo(asyncio.Protocol):
    def connection_made(self, t):
        t.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP,
                                              socket.TCP_NODELAY, 1)
        self.t = t

    def data_received(self, data):
        self.t.write(data)


class _Ping(asyncio.Protocol):
    def __init__(self, n, k, done):
        self.left = n
        self.k = k
        self.done = done
        self.buf = bytearray()
        self.msg = b"\x01" * SIZE

    def connection_made(self, t):
        t.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP,
                                              socket.TCP_NODELAY, 1)
        self.t = t

    def data_received(self, data):
        buf = self.buf
        buf += data
        while len(buf) >= SIZE:
            del buf[:SIZE]
            self.left -= 1
            if self.left >= self.k:
                self.t.write(self.msg)
            elif self.left == 0:
                self.done.set_result(None)


async def run_tcp_proto(n, k):
    loop = asyncio.get_running_loop()
    srv = await loop.create_server(_Echo, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    done = loop.create_future()
    tr, pr = await loop.create_connection(lambda: _Ping(n, k, done),
                                          "127.0.0.1", port)
    for _ in range(k):
        tr.write(pr.msg)
    await done
    tr.close()
    srv.close()
    await srv.wait_closed()


async def run_tcp_streams(n, k):
    async def echo(reader, writer):
        writer.transport.get_extra_info("socket").setsockopt(
            socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while True:
                writer.write(await reader.readexactly(SIZE))
                await writer.drain()
        except asyncio.IncompleteReadError:
            writer.close()

    srv = await asyncio.start_server(echo, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.transport.get_extra_info("socket").setsockopt(
        socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    msg = b"\x01" * SIZE
    for _ in range(k):
        writer.write(msg)
    await writer.drain()
    for i in range(n):
        await reader.readexactly(SIZE)
        if i < n - k:
            writer.write(msg)
            await writer.drain()
    writer.close()
    await writer.wait_closed()
    srv.close()
    await srv.wait_closed()


class _ReqEcho(asyncio.Protocol):
    """Answers frames of a 4-byte id + SIZE bytes with the same."""

    def connection_made(self, t):
        t.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP,
                                              socket.TCP_NODELAY, 1)
        self.t = t
        self.buf = bytearray()

    def data_received(self, data):
        buf = self.buf
        buf += data
        n = len(buf) - len(buf) % (SIZE + 4)
        if n:
            self.t.write(bytes(buf[:n]))
            del buf[:n]


class _Req(asyncio.Protocol):
    def __init__(self):
        self.buf = bytearray()
        self.futs = {}
        self.next_id = 0
        self.loop = asyncio.get_running_loop()

    def connection_made(self, t):
        t.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP,
                                              socket.TCP_NODELAY, 1)
        self.t = t

    def request(self, data):
        self.next_id = rid = (self.next_id + 1) & 0xFFFFFFFF
        fut = self.loop.create_future()
        self.futs[rid] = fut
        self.t.write(rid.to_bytes(4, "little") + data)
        return fut

    def data_received(self, data):
        buf = self.buf
        buf += data
        while len(buf) >= SIZE + 4:
            self.futs.pop(int.from_bytes(buf[:4], "little")).set_result(
                bytes(buf[4:SIZE + 4]))
            del buf[:SIZE + 4]


async def run_tcp_req(n, k):
    loop = asyncio.get_running_loop()
    srv = await loop.create_server(_ReqEcho, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    tr, pr = await loop.create_connection(_Req, "127.0.0.1", port)
    await spread_requests(pr.request, n, k)
    tr.close()
    srv.close()
    await srv.wait_closed()


async def run_pipes(n, k):
    loop = asyncio.get_running_loop()
    r1, w1 = os.pipe()
    r2, w2 = os.pipe()
    for fd in (r1, w1, r2, w2):
        os.set_blocking(fd, False)
    left = [n]
    done = loop.create_future()

    def serve():
        m = os.read(r1, 4096)
        os.write(w2, m)

    def client():
        m = os.read(r2, 4096)
        for _ in m:
            left[0] -= 1
            if left[0] >= k:
                os.write(w1, b"x")
            elif left[0] == 0:
                done.set_result(None)

    loop.add_reader(r1, serve)
    loop.add_reader(r2, client)
    os.write(w1, b"x" * k)
    await done
    loop.remove_reader(r1)
    loop.remove_reader(r2)
    for fd in (r1, w1, r2, w2):
        os.close(fd)


RUN = {"cb": run_cb, "streams": run_streams, "req": run_req,
       "tcp-proto": run_tcp_proto, "tcp-streams": run_tcp_streams,
       "tcp-req": run_tcp_req, "pipes": run_pipes}


def collected(mode, n, k):
    """Instructions of one process running mode for n round trips."""
    out = subprocess.run(["valgrind", "--tool=callgrind",
                          "--callgrind-out-file=/dev/null", sys.executable,
                          __file__, "--run", mode, str(n), str(k)],
                         capture_output=True, text=True, timeout=1800)
    m = re.search(r"Collected : (\d+)", out.stderr)
    if out.returncode or not m:
        sys.exit("insns: %s failed:\n%s" % (mode, out.stderr[-3000:]))
    return int(m.group(1))


def syscalls(mode, n, k):
    """System calls of one process running mode for n round trips."""
    with tempfile.NamedTemporaryFile("r") as f:
        subprocess.run(["strace", "-f", "-c", "-o", f.name, sys.executable,
                        __file__, "--run", mode, str(n), str(k)],
                       check=True, timeout=1800)
        total = [ln.split() for ln in f if ln.rstrip().endswith("total")]
    return int(total[0][3])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=2000)
    ap.add_argument("--inflight", type=int, default=1)
    ap.add_argument("--syscalls", action="store_true")
    ap.add_argument("--run", nargs=3, help=argparse.SUPPRESS)
    ap.add_argument("modes", nargs="*")
    a = ap.parse_args()
    if a.run:
        mode, n, k = a.run[0], int(a.run[1]), int(a.run[2])
        asyncio.run(RUN[mode](200 + n, k))  # 200: the warm-up
        return
    for mode in a.modes or MODES:
        if mode not in RUN:
            sys.exit("insns: unknown mode %r (%s)" % (mode, ", ".join(MODES)))
        one = collected(mode, a.n, a.inflight)
        two = collected(mode, 2 * a.n, a.inflight)
        sc = ""
        if a.syscalls:
            sc = ", %5.2f system calls" % (
                (syscalls(mode, 2 * a.n, a.inflight) -
                 syscalls(mode, a.n, a.inflight)) / a.n)
        print("%-12s inflight %3d: %8.0f instructions per round trip%s"
              % (mode, a.inflight, (two - one) / a.n, sc), flush=True)


if __name__ == "__main__":
    main()
