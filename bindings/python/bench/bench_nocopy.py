"""bench_nocopy.py -- ep.send() against ep.send_nocopy() from a region.

usage: bench_nocopy.py [-n MSGS] [--sizes S,S,...] [--inflight K]
                       [--rounds R]

One process, two contexts on one loop (both sides' CPU is counted):
MSGS messages of each size go from one endpoint to the other with K sends
in flight (K tasks, each awaiting its send), once with ``await
ep.send(bytes)`` and once with ``await ep.send_nocopy(view)`` of a slot
of a region registered with ACCESS_REMOTE_READ, alternating, R rounds
each.  The receiver (a set_receiver callback) counts bytes and drops the
views.  Prints, per size and way, the median messages/s, MiB/s and CPU
microseconds a message (process time), and the load average before and
after.  A benchmark, not a test: the figures depend on the machine.
"""
import argparse
import asyncio
import os
import statistics
import time

import rdmamsg


async def one_way(ep, srv, data, mr, size, n, k, nocopy):
    """n messages of size, k in flight; (seconds, CPU seconds)."""
    got = [0, 0]
    done = asyncio.get_running_loop().create_future()

    def on_msg(view, imm):
        got[0] += 1
        got[1] += len(view)
        view.release()
        if got[0] == n and not done.done():
            done.set_result(None)

    srv.set_receiver(on_msg)
    left = [n]

    async def sender(slot):
        view = mr.view[slot * size:(slot + 1) * size]
        while left[0] > 0:
            left[0] -= 1
            if nocopy:
                await ep.send_nocopy(view)
            else:
                await ep.send(data)

    t0, c0 = time.perf_counter(), time.process_time()
    await asyncio.gather(*(sender(i) for i in range(k)))
    await asyncio.wait_for(done, 120)
    t, c = time.perf_counter() - t0, time.process_time() - c0
    assert got == [n, n * size], got
    return t, c


async def main(args):
    sizes = [int(s) for s in args.sizes.split(",")]
    print("load average %.2f %.2f %.2f" % os.getloadavg())
    print("%-10s %-12s %12s %10s %12s" % ("size", "way", "msgs/s", "MiB/s",
                                          "CPU us/msg"))
    async with rdmamsg.Context() as a, rdmamsg.Context() as b:
        async with await rdmamsg.listen("127.0.0.1:0", ctx=a) as lst:
            cli = asyncio.ensure_future(rdmamsg.connect(
                ("127.0.0.1", lst.port), ctx=b))
            srv = await lst.accept()
            ep = await cli
        thr = ep.protocols.rndv_threshold
        for size in sizes:
            data = os.urandom(size)
            region = bytearray(data * args.inflight)
            mr = b.register(region, rdmamsg.ACCESS_REMOTE_READ)
            res = {False: [], True: []}
            await one_way(ep, srv, data, mr, size, args.inflight * 2,
                          args.inflight, True)  # warm-up
            await one_way(ep, srv, data, mr, size, args.inflight * 2,
                          args.inflight, False)
            for _ in range(args.rounds):
                for nocopy in (False, True):
                    res[nocopy].append(await one_way(
                        ep, srv, data, mr, size, args.n, args.inflight,
                        nocopy))
            for nocopy in (False, True):
                t = statistics.median(r[0] for r in res[nocopy])
                c = statistics.median(r[1] for r in res[nocopy])
                way = "send_nocopy" if nocopy else "send"
                print("%-10d %-12s %12.0f %10.1f %12.2f%s" % (
                    size, way, args.n / t, args.n * size / t / (1 << 20),
                    c / args.n * 1e6,
                    "" if size > thr else "  (<= rndv_threshold %d)" % thr))
            mr.close()
        await ep.close()
        await srv.close()
    print("load average %.2f %.2f %.2f" % os.getloadavg())


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-n", type=int, default=2000)
    ap.add_argument("--sizes", default="65536,1048576,4194304")
    ap.add_argument("--inflight", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    asyncio.run(main(ap.parse_args()))
