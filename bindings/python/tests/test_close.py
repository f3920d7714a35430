"""Closing with operations in flight, peers closing and dying."""
import asyncio
import os
import signal
import subprocess
import sys

import pytest

import rdmamsg
from conftest import free_port, pattern


async def _silent_server(a, **opts):
    """A server that accepts and never reads or answers."""
    hold = asyncio.Event()

    async def handler(ep):
        await hold.wait()

    srv = await rdmamsg.start_server(handler, "127.0.0.1:0", ctx=a, **opts)
    return srv, hold


async def test_close_with_sends_in_flight(ctxs):
    a, b = ctxs
    srv, hold = await _silent_server(a, recv_depth=2)
    ep = await rdmamsg.connect(("127.0.0.1", srv.port), ctx=b, recv_depth=2,
                               send_backlog=16)
    done = []

    async def one(i):
        try:
            await ep.send(pattern(100 + i, i))
            done.append("ok")
        except (rdmamsg.OperationCanceled, rdmamsg.NotConnected):
            done.append("cancelled")

    tasks = [asyncio.ensure_future(one(i)) for i in range(200)]
    await asyncio.sleep(0)
    await ep.close()
    await asyncio.wait_for(asyncio.gather(*tasks), 30)
    assert len(done) == 200  # every task finished exactly once
    assert "cancelled" in done
    srv.close()
    hold.set()
    await srv.wait_closed()


async def test_close_with_requests_and_recvs_in_flight(ctxs):
    a, b = ctxs
    srv, hold = await _silent_server(a)
    ep = await rdmamsg.connect(("127.0.0.1", srv.port), ctx=b)
    reqs = [asyncio.ensure_future(ep.request(b"?")) for _ in range(50)]
    recvs = [asyncio.ensure_future(ep.recv()) for _ in range(3)]

    async def iterate():
        return [m async for m in ep]

    it = asyncio.ensure_future(iterate())
    await asyncio.sleep(0.05)
    await ep.close()
    res = await asyncio.wait_for(asyncio.gather(*reqs, *recvs,
                                                return_exceptions=True), 30)
    assert all(isinstance(r, rdmamsg.OperationCanceled) for r in res), res
    assert await asyncio.wait_for(it, 30) == []  # iteration just ends
    await ep.close()  # closing twice is harmless
    srv.close()
    hold.set()
    await srv.wait_closed()


async def test_peer_closes(ctxs):
    a, b = ctxs

    async def two_then_close(ep):
        await ep.send(b"1")
        await ep.send(b"2")

    srv = await rdmamsg.start_server(two_then_close, "127.0.0.1:0", ctx=a)
    ep = await rdmamsg.connect(("127.0.0.1", srv.port), ctx=b)
    assert [bytes(m) async for m in ep] == [b"1", b"2"]
    with pytest.raises(rdmamsg.EndOfStream):
        await ep.recv()
    with pytest.raises(rdmamsg.NotConnected):
        await ep.send(b"x")
    await ep.close()
    srv.close()
    await srv.wait_closed()


async def test_peer_killed_mid_stream(ctxs):
    _, b = ctxs
    port = free_port()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    proc = subprocess.Popen([sys.executable, os.path.join(
        os.path.dirname(__file__), "peer.py"), str(port)],
        stdout=subprocess.PIPE, env=env)
    try:
        line = await asyncio.get_running_loop().run_in_executor(
            None, proc.stdout.readline)
        assert line == b"listening\n"
        ep = await rdmamsg.connect(("127.0.0.1", port), ctx=b,
                                   peer_timeout=2)
        data = pattern(3000)
        for _ in range(50):
            await ep.send(data)
            assert await ep.recv() == data
        streaming = [asyncio.ensure_future(ep.send(data)) for _ in range(20)]
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        got = 0
        # The end of the stream: a reset or silence past the peer timeout,
        # or, where the fabric tears the dead process's connection down
        # with a disconnect (rdma_cm does, as the kernel does on hardware),
        # the end of the stream.  Messages that came are whole.
        with pytest.raises((ConnectionError, TimeoutError, EOFError)):
            while True:
                m = await asyncio.wait_for(ep.recv(), 60)
                assert m == data
                got += 1
        assert got <= 20
        res = await asyncio.wait_for(
            asyncio.gather(*streaming, return_exceptions=True), 60)
        assert all(r is None or isinstance(r, rdmamsg.Error) for r in res)
        assert not ep.connected
        with pytest.raises(rdmamsg.NotConnected):
            await ep.send(b"to nobody")
        await ep.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()


async def test_cancel_connect(ctxs):
    """A cancelled connect closes its endpoint: nothing is left behind."""
    _, b = ctxs
    for _ in range(5):
        t = asyncio.ensure_future(rdmamsg.connect(
            ("127.0.0.1", free_port()), ctx=b))
        await asyncio.sleep(0)
        t.cancel()
        with pytest.raises((asyncio.CancelledError, ConnectionRefusedError)):
            await t
    for _ in range(500):
        if not b._eps:
            break
        await asyncio.sleep(0.01)
    assert not b._eps


async def test_concurrent_receivers_share_messages(echo):
    """Several tasks awaiting recv() get each message exactly once."""
    _, ep = echo
    got = []

    async def reader():
        while True:
            m = await ep.recv_bytes()
            if m == b"stop":
                return
            got.append(m)

    readers = [asyncio.ensure_future(reader()) for _ in range(4)]
    await asyncio.sleep(0)
    for i in range(400):
        ep.send_nowait(b"%d" % i) if i % 50 else await ep.send(b"%d" % i)
    for _ in readers:
        await ep.send(b"stop")
    await asyncio.wait_for(asyncio.gather(*readers), 30)
    assert sorted(got, key=int) == [b"%d" % i for i in range(400)]
