"""peer.py PORT -- an echo server in its own process (tests kill it).

Prints "listening" once it listens, then echoes until killed."""
import asyncio
import sys

import rdmamsg


async def main(port: int) -> None:
    async with rdmamsg.Context() as ctx:
        async def echo(ep):
            async for msg in ep:
                await ep.send(msg)

        async with await rdmamsg.start_server(echo, "127.0.0.1:%d" % port,
                                              ctx=ctx):
            print("listening", flush=True)
            await asyncio.Event().wait()


asyncio.run(main(int(sys.argv[1])))
