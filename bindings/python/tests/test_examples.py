"""The programs of bindings/python/examples run as documented: the echo
client against the echo server (every size checked, 100 concurrent
requests answered, the server ended by SIGTERM), and a multicast
subscriber that accounts for every message of a publisher (reliable mode:
all received).  Each is its own process, as a user would start it."""
import asyncio
import os
import signal
import sys

from conftest import free_port

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                        "examples")
WAIT = 60


async def _start(*args):
    return await asyncio.create_subprocess_exec(
        sys.executable, os.path.join(EXAMPLES, args[0]), *args[1:],
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)


async def _kill(proc):
    if proc.returncode is None:
        proc.kill()
        await proc.wait()


async def test_echo_client_against_echo_server():
    port = free_port()
    server = await _start("echo_server.py", "127.0.0.1:%d" % port)
    try:
        line = await asyncio.wait_for(server.stdout.readline(), WAIT)
        assert line.startswith(b"echo_server: ") and \
            line.rstrip().endswith(b"port %d" % port), line
        client = await _start("echo_client.py", "127.0.0.1:%d" % port)
        try:
            out, _ = await asyncio.wait_for(client.communicate(), WAIT)
        finally:
            await _kill(client)
        assert client.returncode == 0, out
        lines = out.decode().splitlines()
        assert [ln.split()[0] for ln in lines[:5]] == \
            ["0", "5", "4096", "100000", str(3 << 20)], out
        assert all(ln.endswith(": ok") for ln in lines[:5]), out
        assert lines[5] == "100 concurrent requests answered", out
        server.send_signal(signal.SIGTERM)
        rest, _ = await asyncio.wait_for(server.communicate(), WAIT)
        assert server.returncode == 0, rest
    finally:
        await _kill(server)


async def test_mcast_subscriber_and_publisher():
    n = 500
    sub = await _start("mcast.py", "-s", "-g", "239.1.9.21", "-n", str(n),
                       "--reliable", "64")
    try:
        line = await asyncio.wait_for(sub.stdout.readline(), WAIT)
        assert line == b"subscribed to 239.1.9.21\n", line
        pub = await _start("mcast.py", "-p", "-g", "239.1.9.21", "-n",
                           str(n), "--reliable", "64")
        try:
            pout, _ = await asyncio.wait_for(pub.communicate(), WAIT)
        finally:
            await _kill(pub)
        assert pub.returncode == 0, pout
        assert b"published %d messages" % n in pout, pout
        sout, _ = await asyncio.wait_for(sub.communicate(), WAIT)
        assert sub.returncode == 0, sout
        assert sout.decode().splitlines()[-1] == \
            "received %d, lost 0 in 0 gaps, 0 bad" % n, sout
    finally:
        await _kill(sub)
