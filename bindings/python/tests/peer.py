"""peer.py PORT [BUSY_POLL] -- an echo server in its own process (tests kill
it); requests are answered with the reversed bytes.

Prints "listening" once it listens, then echoes until killed.  BUSY_POLL
(seconds) is its context's busy_poll."""
import asyncio
import sys

import rdmamsg


async def main(port: int, busy_poll: float) -> None:
    async with rdmamsg.Context(busy_poll=busy_poll) as ctx:
        async def echo(ep):
            async for msg in ep:
                await ep.send(msg)

        async with await rdmamsg.start_server(
                echo, "127.0.0.1:%d" % port, ctx=ctx,
                request_handler=lambda d: d[::-1]):
            print("listening", flush=True)
            await asyncio.Event().wait()


asyncio.run(main(int(sys.argv[1]),
                 float(sys.argv[2]) if len(sys.argv) > 2 else 0.0))
