#!/usr/bin/env python3
"""echo_client.py [ADDR] -- send messages to an echo server, check them.

Against echo_server.py (or samples/echo_server): sends a few messages of
different sizes, checks each echo, and with echo_server.py also asks 100
concurrent requests.  ADDR defaults to 127.0.0.1:18610.
"""
import asyncio
import sys

import rdmamsg


async def main(addr: str) -> int:
    async with rdmamsg.Context() as ctx:
        async with await rdmamsg.connect(addr, ctx=ctx) as ep:
            for size in (0, 5, 4096, 100000, 3 << 20):
                data = bytes(i & 0xFF for i in range(size))
                await ep.send(data)
                echo = await ep.recv()
                print("%8d bytes: %s" % (size, "ok" if echo == data else
                                         "MISMATCH"))
                if echo != data:
                    return 1
            try:
                answers = await asyncio.gather(*(
                    ep.request(b"request %d" % i, timeout=2.0)
                    for i in range(100)))
                assert answers == [(b"request %d" % i)[::-1]
                                   for i in range(100)]
                print("100 concurrent requests answered")
            except TimeoutError:
                print("requests: no answer (a server without a handler)")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1] if len(sys.argv) > 1
                              else "127.0.0.1:18610")))
