#!/usr/bin/env python3
"""mcast.py -p|-s [-g GROUP] [-n N] [--reliable WINDOW] -- a multicast
publisher or subscriber (the Python peer of samples/mcast).

The publisher publishes N messages ("tick SEQ") to GROUP (default
239.1.2.20) and leaves; a subscriber prints what it gets, reports losses
as they are told, and stops once N messages are accounted for (received +
lost).  Start the subscribers first (a late joiner starts with the next
message).  Over softrdma, give every process the same SOFTRDMA_SHM_PREFIX.
"""
import argparse
import asyncio
import sys

import rdmamsg


async def publisher(group: str, n: int, reliable: int) -> int:
    async with rdmamsg.Context() as ctx:
        async with await ctx.join(group, role="publisher",
                                  reliable=reliable) as g:
            print("publishing to %s as %#x" % (group, g.id), flush=True)
            for seq in range(n):
                await g.publish(b"tick %d" % seq)  # waits while full
            st = g.query()
            print("published %d messages, %d bytes" %
                  (st.msgs_published, st.bytes_published))
    return 0


async def subscriber(group: str, n: int, reliable: int) -> int:
    async with rdmamsg.Context() as ctx:
        async with await ctx.join(group, role="subscriber", reliable=reliable,
                                  loss_items=True) as g:
            print("subscribed to %s" % group, flush=True)
            bad = 0
            async for item in g:
                if isinstance(item, rdmamsg.GroupLoss):
                    print("lost %d from %#x (%d ..)" %
                          (item.count, item.publisher, item.first))
                elif item.data != b"tick %d" % item.seq:
                    bad += 1
                if g.received + g.lost >= n:
                    break
            print("received %d, lost %d in %d gaps, %d bad" %
                  (g.received, g.lost, g.gaps, bad))
            return 1 if bad else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    role = ap.add_mutually_exclusive_group(required=True)
    role.add_argument("-p", action="store_true", help="publish")
    role.add_argument("-s", action="store_true", help="subscribe")
    ap.add_argument("-g", default="239.1.2.20", help="the group's address")
    ap.add_argument("-n", type=int, default=1000, help="messages")
    ap.add_argument("--reliable", type=int, default=0, metavar="WINDOW")
    a = ap.parse_args()
    run = publisher if a.p else subscriber
    return asyncio.run(run(a.g, a.n, a.reliable))


if __name__ == "__main__":
    sys.exit(main())
