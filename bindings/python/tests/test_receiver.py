"""Endpoint.set_receiver: messages to a callback inside the progress pass
(no future, no task step), the fast path of the binding."""
import asyncio

import pytest

import rdmamsg
from conftest import pattern

# small (copied), kept in the pool (>= keep_threshold, 16 KiB by default;
# still in fragments: the same-host rendezvous threshold is 20 KiB) and
# rendezvous.  Sent back to back with send_nowait, on both sides: a third
# rendezvous copy not yet read would meet the copy-ahead bound (the two
# 1 MiB ones are what it always grants), and send_nowait would raise
# WouldBlock, inside the echo callback too
SIZES = [0, 8, 300, 4096, 16384, 1 << 20, (1 << 20) + 1]


async def test_receiver_echo_every_size(ctxs):
    """A callback echo server (send_nowait from inside the callback) returns
    every message intact and in order, immediates included."""
    a, b = ctxs
    seen = []

    async def handler(ep):
        def on_msg(data, imm):
            seen.append((data.nbytes, imm))
            if imm is None:
                ep.send_nowait(data)
            else:
                ep.send_nowait(data, imm=imm)
        ep.set_receiver(on_msg)
        await ep.wait_closed()

    srv = await rdmamsg.start_server(handler, "127.0.0.1:0", ctx=a)
    ep = await rdmamsg.connect(("127.0.0.1", srv.port), ctx=b)
    msgs = [pattern(n, seed=i) for i, n in enumerate(SIZES)]
    for m in msgs:
        ep.send_nowait(m)
    for i, m in enumerate(msgs):
        r = await ep.recv_bytes()
        assert (i, len(r), r) == (i, len(m), m)
    # (after the rendezvous message has arrived: the library delivers an
    # eager message sent after a rendezvous one before it)
    await ep.send(b"imm", imm=7)
    got = await ep.recv_msg()
    assert (got.tobytes(), got.imm) == (b"imm", 7)
    assert seen == [(n, None) for n in SIZES] + [(3, 7)]
    await ep.close()
    srv.close()
    await srv.wait_closed()


async def test_receiver_queue_handover_and_restore(echo, ctxs):
    """Messages queued before set_receiver go to the callback first, in
    order; recv() refuses while a callback is set; None restores the
    queue; an exception in the callback reaches the loop's handler and
    the message is not delivered twice."""
    _, ep = echo
    for i in range(3):
        await ep.send(b"q%d" % i)
    while len(ep._core.queue) < 3:
        await asyncio.sleep(0.001)
    got = []
    errors = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda lp, c: errors.append(c["exception"]))
    try:
        def on_msg(data, imm):
            got.append(bytes(data))
            if data == b"boom":
                raise ValueError("boom")

        ep.set_receiver(on_msg)
        assert got == [b"q0", b"q1", b"q2"]
        with pytest.raises(RuntimeError):
            await ep.recv()
        await ep.send(b"boom")
        await ep.send(b"after")
        while len(got) < 5:
            await asyncio.sleep(0.001)
        assert got[3:] == [b"boom", b"after"]
        assert len(errors) == 1 and isinstance(errors[0], ValueError)
    finally:
        loop.set_exception_handler(None)
    ep.set_receiver(None)
    await ep.send(b"queued again")
    assert await ep.recv_bytes() == b"queued again"
    assert got == [b"q0", b"q1", b"q2", b"boom", b"after"]
    with pytest.raises(TypeError):
        ep.set_receiver(42)


async def test_receiver_set_while_recv_waits(echo):
    """A recv() (or async for) already waiting when a receiver callback is
    set raises RuntimeError then, as a recv() after it does, instead of
    waiting for messages that all go to the callback; None restores the
    queue."""
    _, ep = echo
    got = []

    async def iterate():
        async for m in ep:
            return m

    waiting = [asyncio.ensure_future(ep.recv()),
               asyncio.ensure_future(ep.recv_bytes()),
               asyncio.ensure_future(iterate())]
    await asyncio.sleep(0.05)
    ep.set_receiver(lambda data, imm: got.append(bytes(data)))
    for t in waiting:
        with pytest.raises(RuntimeError, match="receiver"):
            await asyncio.wait_for(t, 10)
    await ep.send(b"to the callback")
    while not got:
        await asyncio.sleep(0.001)
    assert got == [b"to the callback"]
    ep.set_receiver(None)
    await ep.send(b"queued")
    assert await ep.recv_bytes() == b"queued"


async def test_receiver_ping_pong_callbacks_only(ctxs):
    """Both sides on callbacks: a ping-pong of 2,000 round trips driven by
    the receivers alone (the pattern of the benchmark's fast path), every
    message checked, the loop left idle afterwards."""
    a, b = ctxs
    n = 2000

    async def handler(ep):
        ep.set_receiver(lambda d, imm: ep.send_nowait(d))
        await ep.wait_closed()

    srv = await rdmamsg.start_server(handler, "127.0.0.1:0", ctx=a,
                                     track_sends=False)
    ep = await rdmamsg.connect(("127.0.0.1", srv.port), ctx=b,
                               track_sends=False)
    done = asyncio.get_running_loop().create_future()
    count = [0]

    def on_pong(data, imm):
        assert bytes(data) == b"%08d" % count[0]
        count[0] += 1
        if count[0] == n:
            done.set_result(None)
        else:
            ep.send_nowait(b"%08d" % count[0])

    ep.set_receiver(on_pong)
    ep.send_nowait(b"%08d" % 0)
    await asyncio.wait_for(done, 60)
    assert count[0] == n
    await ep.close()
    await ep.wait_closed()
    srv.close()
    await srv.wait_closed()


@pytest.mark.parametrize("size", [100, 5000, 40000])
def test_receiver_keyboard_interrupt_leaves_the_loop(size):
    """A receiver that raises KeyboardInterrupt (Ctrl-C inside it):
    whether its message came in the pump's batch (100 B) or on its own
    (5,000 B copied, 40,000 B kept in the pool), the exception leaves the
    loop's run once the pass is done, as one of asyncio's own callbacks
    would, instead of going to the exception handler; the endpoint stays
    usable and the next message comes."""
    loop = asyncio.new_event_loop()
    reported = []
    loop.set_exception_handler(lambda lp, c: reported.append(c))
    calls = []

    def receiver(view, imm):
        calls.append(bytes(view))
        if len(calls) == 1:
            raise KeyboardInterrupt

    async def setup():
        a = rdmamsg.Context()
        b = rdmamsg.Context()
        lst = await rdmamsg.listen("127.0.0.1:0", ctx=a)
        cli = asyncio.ensure_future(rdmamsg.connect(("127.0.0.1", lst.port),
                                                    ctx=b))
        srv = await lst.accept()
        await lst.close()
        srv.set_receiver(receiver)
        return a, b, srv, await cli

    async def first():
        ep.send_nowait(pattern(size))
        await asyncio.sleep(10)  # interrupted long before

    async def second():
        await ep.send(pattern(size, 1))
        for _ in range(3000):
            if len(calls) == 2:
                return
            await asyncio.sleep(0.01)

    async def cleanup():
        await ep.close()
        await srv.close()
        await b.close()
        await a.close()

    a, b, srv, ep = loop.run_until_complete(setup())
    try:
        task = loop.create_task(first())
        with pytest.raises(KeyboardInterrupt):
            loop.run_until_complete(task)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            loop.run_until_complete(task)
        loop.run_until_complete(second())
        assert calls == [pattern(size), pattern(size, 1)]
        assert reported == []
    finally:
        loop.run_until_complete(cleanup())
        loop.close()
