"""Shared fixtures: contexts on softrdma, an echo server, free ports.

Run by tests/python.sh (make check) with PYTHONPATH at the in-tree build;
by hand: RDMAMSG_TEST_BUILDDIR=_build PYTHONPATH=_build/bindings/python
/usr/bin/python3 -m pytest bindings/python/tests
"""
import asyncio
import gc
import os
import socket

import pytest

import rdmamsg

BUILDDIR = os.environ.get("RDMAMSG_TEST_BUILDDIR", "")
if BUILDDIR and "RDMAMSG_SOFTRDMA_PATH" not in os.environ:
    os.environ["RDMAMSG_SOFTRDMA_PATH"] = os.path.join(
        BUILDDIR, "soft", ".libs", "libsoftrdma.so")
os.environ.setdefault("SOFTRDMA_SHM_PREFIX", "pytest-%d" % os.getpid())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(autouse=True)
def no_leaked_contexts():
    """Every test ends with every context it made destroyed."""
    before = rdmamsg.live_contexts()
    yield
    gc.collect()
    assert rdmamsg.live_contexts() == before


@pytest.fixture
async def ctxs():
    """Two contexts: one for the server side, one for the client side (one
    context per side, as two processes would have)."""
    a = rdmamsg.Context()
    b = rdmamsg.Context()
    yield a, b
    await asyncio.wait_for(b.close(), 30)
    await asyncio.wait_for(a.close(), 30)


async def echo_handler(ep):
    async for msg in ep:
        await ep.send(msg)


@pytest.fixture
async def echo(ctxs):
    """(server, client endpoint) of an echo server that answers requests
    with the reversed bytes."""
    a, b = ctxs
    srv = await rdmamsg.start_server(echo_handler, "127.0.0.1:0", ctx=a,
                                     request_handler=lambda d: d[::-1])
    ep = await rdmamsg.connect(("127.0.0.1", srv.port), ctx=b)
    yield srv, ep
    await ep.close()
    srv.close()
    await asyncio.wait_for(srv.wait_closed(), 30)


def pattern(size: int, seed: int = 0) -> bytes:
    """size bytes that differ from any shifted or truncated copy."""
    block = bytes((i * 7 + seed) & 0xFF for i in range(251))
    return (block * (size // 251 + 1))[:size]
