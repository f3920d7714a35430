"""Busy polling (Context.busy_poll): bad input; the backoff of fruitless
spins, counted exactly; no spin while the loop has other callbacks ready;
messages, awaited sends, receiver callbacks and concurrent requests
answered through spins with a peer in its own process."""
import asyncio
import math
import os
import subprocess
import sys

import pytest

import rdmamsg
from conftest import free_port, pattern


async def test_busy_poll_option():
    for bad in (-1e-6, 1.5, math.nan, math.inf):
        with pytest.raises(ValueError):
            rdmamsg.Context(busy_poll=bad)
    for bad in ("0.001", True, [1e-5]):
        with pytest.raises(TypeError):
            rdmamsg.Context(busy_poll=bad)
    async with rdmamsg.Context() as c:
        assert c.busy_poll == 0.0  # off unless asked for
        assert c.busy_poll_stats() == (0, 0, 0, 0)
        c.busy_poll = 25e-6
        assert c.busy_poll == pytest.approx(25e-6)
        with pytest.raises(ValueError):
            c.busy_poll = -1
        with pytest.raises(TypeError):
            c.busy_poll = None
        assert c.busy_poll == pytest.approx(25e-6)  # unchanged
        c.busy_poll = 0
        assert c.busy_poll == 0.0
    async with rdmamsg.Context(busy_poll=1) as c:
        assert c.busy_poll == 1.0


async def _pair(a, b):
    """A sender endpoint on a, the receiving endpoint's messages (b, a
    receiver callback) in a list."""
    got = []
    accepted = asyncio.get_running_loop().create_future()

    async def handler(ep):
        accepted.set_result(ep)
        await ep.wait_closed()

    srv = await rdmamsg.start_server(handler, "127.0.0.1:0", ctx=b)
    ep = await rdmamsg.connect(("127.0.0.1", srv.port), ctx=a)
    rx = await accepted
    rx.set_receiver(lambda m, imm: got.append(bytes(m)))
    return srv, ep, got


async def test_busy_poll_backs_off(ctxs):
    """The receiving context spins after each message; its peer (the same
    thread) cannot answer meanwhile, so every spin is fruitless: after
    the k-th in a row the next 2**k - 1 chances are skipped -- spins at
    the chances 1, 3, 7, 15, 31, 63 of 100."""
    a, b = ctxs
    srv, ep, got = await _pair(a, b)
    # the connection's control messages (credits, the clocks the two
    # sides name for their keep-alives) settle first: each would be a
    # chance of its own
    await asyncio.sleep(0.05)
    b.busy_poll = 1e-3
    for i in range(100):
        ep.send_nowait(b"%d" % i)
        # a timer, not a ready callback: b's pass finds the loop idle
        await asyncio.sleep(0.002)
        while len(got) <= i:
            await asyncio.sleep(0.002)
    assert got == [b"%d" % i for i in range(100)]
    st = b.busy_poll_stats()
    assert (st.spins, st.hits, st.skips) == (6, 0, 94), st
    assert st.polls >= st.spins
    assert a.busy_poll_stats() == (0, 0, 0, 0)  # a does not poll
    b.busy_poll = 0
    await ep.close()
    srv.close()
    await srv.wait_closed()


async def test_busy_poll_yields_to_ready_callbacks(ctxs):
    """A pass does not spin while the loop has other callbacks ready (a
    task that keeps yielding): nothing else is delayed by a spin."""
    a, b = ctxs
    srv, ep, got = await _pair(a, b)
    b.busy_poll = 1.0  # a spin would stall the test for a second
    stop = False
    turns = 0

    async def busy_task():
        nonlocal turns
        while not stop:
            turns += 1
            await asyncio.sleep(0)

    task = asyncio.ensure_future(busy_task())
    for i in range(50):
        ep.send_nowait(b"%d" % i)
        while len(got) <= i:
            await asyncio.sleep(0)
    stop = True
    await task
    assert got == [b"%d" % i for i in range(50)]
    assert b.busy_poll_stats().spins == 0
    assert turns >= 50
    b.busy_poll = 0
    await ep.close()
    srv.close()
    await srv.wait_closed()


async def test_busy_poll_with_peer_process():
    """Both sides busy-poll (the peer in its own process, so that answers
    can come while a side spins): every message, answer and response
    arrives whole and in order, and spins end with work (hits)."""
    port = free_port()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    proc = subprocess.Popen([sys.executable, os.path.join(
        os.path.dirname(__file__), "peer.py"), str(port), "0.2"],
        stdout=subprocess.PIPE, env=env)
    try:
        line = await asyncio.get_running_loop().run_in_executor(
            None, proc.stdout.readline)
        assert line == b"listening\n"
        async with rdmamsg.Context(busy_poll=0.2) as ctx:
            ep = await rdmamsg.connect(("127.0.0.1", port), ctx=ctx)
            # awaited sends and recv(), every size class
            for i, size in enumerate([0, 1, 8, 100, 3000, 20000, 70000] * 15):
                data = pattern(size, i)
                await ep.send(data)
                assert await ep.recv() == data
            # send_nowait and recv() back to back (the benchmark's loop)
            for i in range(100):
                ep.send_nowait(b"%d" % i)
                assert await ep.recv() == b"%d" % i
            # receiver callbacks: each answer sends the next message
            loop = asyncio.get_running_loop()
            done = loop.create_future()
            got = []

            def on_msg(m, imm):
                got.append(bytes(m))
                if len(got) == 100:
                    done.set_result(None)
                else:
                    ep.send_nowait(b"%d" % len(got))

            ep.set_receiver(on_msg)
            ep.send_nowait(b"0")
            await done
            assert got == [b"%d" % i for i in range(100)]
            ep.set_receiver(None)
            # 100 concurrent requests
            res = await asyncio.gather(*(ep.request(b"req%d" % i, timeout=60)
                                         for i in range(100)))
            assert res == [(b"req%d" % i)[::-1] for i in range(100)]
            st = ctx.busy_poll_stats()
            assert 1 <= st.hits <= st.spins <= st.polls, st
            await ep.close()
    finally:
        proc.kill()
        proc.wait()
