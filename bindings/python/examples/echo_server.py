#!/usr/bin/env python3
"""echo_server.py [ADDR] -- an asyncio echo server over rdmamsg.

Echoes every message back to its sender and answers requests with the
request's bytes reversed; runs until interrupted.  ADDR defaults to
0.0.0.0:18610 (samples/hello and samples/pingpong can be its clients, and
echo_client.py).
"""
import asyncio
import signal
import sys

import rdmamsg


async def echo(ep: rdmamsg.Endpoint) -> None:
    # one task per connection, like asyncio.start_server's handler
    async for msg in ep:
        await ep.send(msg)  # msg: a memoryview, sent without a copy by us


async def main(addr: str) -> None:
    async with rdmamsg.Context() as ctx:
        server = await rdmamsg.start_server(
            echo, addr, ctx=ctx, request_handler=lambda data: data[::-1])
        print("echo_server: %s on port %d" % (ctx.device_name, server.port),
              flush=True)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, server.close)
        async with server:
            await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "0.0.0.0:18610"))
