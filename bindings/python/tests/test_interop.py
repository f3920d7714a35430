"""The binding against the C samples: a Python client of echo_server and a
C client (pingpong) of a Python server."""
import asyncio
import os

import pytest

import rdmamsg
from conftest import BUILDDIR, echo_handler, free_port, pattern

SAMPLES = os.path.join(BUILDDIR, "samples")
pytestmark = pytest.mark.skipif(
    not os.path.exists(os.path.join(SAMPLES, "pingpong", "pingpong")),
    reason="RDMAMSG_TEST_BUILDDIR has no samples")


async def test_python_client_c_echo_server(ctxs):
    _, b = ctxs
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        os.path.join(SAMPLES, "echo_server", "echo_server"), "-b",
        "127.0.0.1", "-p", str(port), "-i", "0",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
    try:
        for _ in range(500):
            try:
                ep = await rdmamsg.connect(("127.0.0.1", port), ctx=b)
                break
            except ConnectionRefusedError:
                await asyncio.sleep(0.02)
        for size in (0, 5, 4096, 20000, 65536, 1 << 20):
            data = pattern(size, 5)
            await ep.send(data)
            assert await ep.recv_bytes() == data
        n = 1000
        await asyncio.gather(*(ep.send(b"%06d" % i) for i in range(n)))
        got = [await ep.recv_bytes() for _ in range(n)]
        assert got == [b"%06d" % i for i in range(n)]
        await ep.close()
        proc.stdin.write(b"quit\n")
        await proc.stdin.drain()
        assert await asyncio.wait_for(proc.wait(), 30) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


@pytest.mark.parametrize("size", [0, 64, 20000])
async def test_c_pingpong_client_python_server(ctxs, size):
    a, _ = ctxs
    async with await rdmamsg.start_server(echo_handler, "127.0.0.1:0",
                                          ctx=a) as srv:
        proc = await asyncio.create_subprocess_exec(
            os.path.join(SAMPLES, "pingpong", "pingpong"), "-c", "127.0.0.1",
            "-p", str(srv.port), "-n", "300", "--size", str(size),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        out, _ = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 0, out


async def test_c_hello_client_python_server(ctxs):
    a, _ = ctxs
    async with await rdmamsg.start_server(echo_handler, "127.0.0.1:0",
                                          ctx=a) as srv:
        proc = await asyncio.create_subprocess_exec(
            os.path.join(SAMPLES, "hello", "hello"),
            "127.0.0.1:%d" % srv.port, stdout=asyncio.subprocess.PIPE)
        out, _ = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 0
        assert out == b"echo: hello\n"
