"""bench_mcast.py -- multicast publish rate of the Python binding next to
the C library's (rdmamsg_perf -P/-L), in one run.

usage: bench_mcast.py [--perf PATH] [-n N] [--rounds R]

One publisher and one subscriber, separate processes on this host
(softrdma; give them the same SOFTRDMA_SHM_PREFIX, which this script
sets), unpaced, messages of 64 B and 4 KiB, default mode and reliable
mode (window 1024).  The publisher's rate is N messages over the time
from the first publish to the last completion; the subscriber reports
what it received (in the default mode a publisher faster than its
subscriber overruns it: the rest is reported lost, honestly).  Python
publishers in two styles: ``await g.publish()`` per message (waits for
each completion) and ``publish_nowait()`` with ``await
g.wait_writable()`` when the send queue is full.  Medians of R rounds.
"""
import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time

import rdmamsg

GROUP = "239.1.78.1"


async def subscriber(n: int, size: int, reliable: int) -> None:
    async with rdmamsg.Context() as ctx:
        async with await ctx.join(GROUP, role="subscriber", reliable=reliable,
                                  recv_depth=4096) as g:
            print("ready", flush=True)
            g.set_receiver(lambda m: None)  # counted in g.received
            deadline = time.monotonic() + 60
            while g.received + g.lost < n and time.monotonic() < deadline:
                await asyncio.sleep(0.005)
            print("received %d lost %d" % (g.received, g.lost), flush=True)


async def publisher(n: int, size: int, reliable: int, style: str) -> float:
    data = bytes(size)
    async with rdmamsg.Context() as ctx:
        async with await ctx.join(GROUP, role="publisher",
                                  reliable=reliable) as g:
            if reliable:  # wait until it hears its subscriber
                for _ in range(2000):
                    if g.query().receivers:
                        break
                    await asyncio.sleep(0.005)
            t0 = time.perf_counter()
            if style == "await":
                for _ in range(n):
                    await g.publish(data)
            else:
                i = 0
                while i < n - 1:
                    try:
                        g.publish_nowait(data)
                        i += 1
                    except BlockingIOError:
                        await g.wait_writable()
                await g.publish(data)  # the last one: its completion
            return n / (time.perf_counter() - t0)


def spawn(args):
    return subprocess.Popen(args, stdout=subprocess.PIPE, text=True)


def wait_line(proc, prefix):
    while True:
        line = proc.stdout.readline()
        if not line or line.startswith(prefix):
            return line


def py_round(n, size, reliable, style):
    sub = spawn([sys.executable, __file__, "--sub", str(n), str(size),
                 str(reliable)])
    try:
        wait_line(sub, "ready")
        rate = asyncio.run(publisher(n, size, reliable, style))
        res = wait_line(sub, "received").split()
        sub.wait(60)
        return rate, int(res[1]) / n
    finally:
        if sub.poll() is None:
            sub.kill()
            sub.wait()


def c_round(perf, n, size, reliable):
    opts = ["-n", str(n), "--size", str(size)]
    if reliable:
        opts += ["--reliable", str(reliable)]
    sub = spawn([perf, "-L", GROUP] + opts)
    try:
        wait_line(sub, "# subscribed")
        out = subprocess.run([perf, "-P", GROUP] + opts, capture_output=True,
                             text=True, timeout=120).stdout
        sub.wait(120)
        for line in out.splitlines():
            f = line.split()
            if len(f) == 5 and f[0] == str(size):
                return float(f[2]), None
    finally:
        if sub.poll() is None:
            sub.kill()
            sub.wait()
    return None, None


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--sub":
        asyncio.run(subscriber(*map(int, sys.argv[2:5])))
        return 0
    ap = argparse.ArgumentParser()
    ap.add_argument("--perf", help="tools/rdmamsg_perf (the C column)")
    ap.add_argument("-n", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    os.environ.setdefault("SOFTRDMA_SHM_PREFIX", "bench-mcast-%d" % os.getpid())
    print("# multicast publish rate, 1 publisher, 1 subscriber, %d msgs, "
          "medians of %d; load %s" % (a.n, a.rounds,
                                      os.getloadavg()[0]))
    print("%-8s %-9s %-26s %12s %9s" % ("size", "mode", "publisher", "msgs/s",
                                        "received"))
    for size in (64, 4096):
        for reliable in (0, 1024):
            rows = [("python, await publish()", lambda: py_round(
                        a.n, size, reliable, "await")),
                    ("python, publish_nowait()", lambda: py_round(
                        a.n, size, reliable, "nowait"))]
            if a.perf:
                rows.append(("C rdmamsg_perf -P", lambda: c_round(
                    a.perf, a.n, size, reliable)))
            for name, fn in rows:
                res = [fn() for _ in range(a.rounds)]
                rates = [r for r, _ in res if r]
                got = [g for _, g in res if g is not None]
                print("%-8d %-9s %-26s %12s %9s" % (
                    size, "reliable" if reliable else "default", name,
                    "%.0f" % statistics.median(rates) if rates else "n/a",
                    "%.1f%%" % (100 * statistics.median(got)) if got
                    else "-"), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
