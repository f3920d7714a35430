"""The pump's batch (rdmamsg_build.py): small messages, tracked sends'
completions and responses that a progress call produces are copied into the
context's arena and delivered by Python after that call, not one cffi
callback each.  What must hold: every message once, in order, intact,
whatever its size class (batched, too large for the batch, kept in the
pool, with an immediate value), also when the arena fills inside one
progress call (then the batch is drained from inside it); a disconnect
comes after the messages before it; a receiver's exception loses nothing
after it; completions and responses reach the right waiters."""
import asyncio

import pytest

import rdmamsg
import rdmamsg._core as core
from conftest import pattern

WAIT = 60


def msg(i: int) -> bytes:
    """1 .. 2048 bytes (all of them batched), numbered by content."""
    return pattern(1 + (i * 37) % rdmamsg._core.COPY_MAX, i)


async def _send_all(ep, msgs) -> None:
    for m in msgs:
        while True:
            try:
                ep.send_nowait(m)
                break
            except BlockingIOError:
                await ep.wait_writable()


@pytest.mark.parametrize("style", ["receiver", "queue"])
async def test_batch_fills_and_drains_in_order(ctxs, style):
    """3,000 messages of 1..2,048 bytes sent without waiting at a receive
    depth of 1,024: one progress call takes more than the 64 KiB arena
    holds (the batch is drained from inside it: _drains grows); every
    message arrives once, in order, intact."""
    a, b = ctxs
    n = 3000
    got = []
    done = asyncio.get_running_loop().create_future()

    async def handler(ep):
        if style == "receiver":
            def on(m, imm):
                assert imm is None
                got.append(bytes(m))
                if len(got) == n:
                    done.set_result(None)
            ep.set_receiver(on)
            await ep.wait_closed()
        else:
            async for m in ep:
                got.append(bytes(m))
                if len(got) == n:
                    done.set_result(None)

    drains = core._drains[0]
    async with await rdmamsg.start_server(handler, "127.0.0.1:0", ctx=a,
                                          recv_depth=1024) as srv:
        ep = await rdmamsg.connect(("127.0.0.1", srv.port), ctx=b,
                                   recv_depth=1024, track_sends=False,
                                   connect_timeout=60)
        want = [msg(i) for i in range(n)]
        await _send_all(ep, want)
        await asyncio.wait_for(done, WAIT)
        assert got == want
        assert core._drains[0] > drains
        await ep.close()


async def test_batch_every_size_class_in_order(ctxs):
    """Messages around the batch's limit (2,047..2,049 bytes), above it,
    kept in the pool (16 KiB and up), large (rendezvous), with immediate
    values, interleaved: one order for all of them, each intact, kept ones
    as views over pool buffers that go back when released."""
    a, b = ctxs
    cm = rdmamsg._core.COPY_MAX
    sizes = [1, cm - 1, cm, cm + 1, 100, 8000, 16384, 20000, 3, 200000,
             cm, 7, 65536, cm + 1]
    plan = [(pattern(sz, i), (i if i % 3 == 0 else None))
            for i, sz in enumerate(sizes * 20)]
    got = []
    done = asyncio.get_running_loop().create_future()

    async def handler(ep):
        while len(got) < len(plan):
            m = await ep.recv_msg()
            got.append((bytes(m.data), m.imm))
            m.release()
        done.set_result(None)
        await ep.wait_closed()

    async with await rdmamsg.start_server(handler, "127.0.0.1:0", ctx=a,
                                          max_msg_size=1 << 20) as srv:
        ep = await rdmamsg.connect(("127.0.0.1", srv.port), ctx=b,
                                   max_msg_size=1 << 20, connect_timeout=60)
        sends = [asyncio.ensure_future(ep.send(d, imm=imm))
                 for d, imm in plan]
        await asyncio.wait_for(asyncio.gather(*sends), WAIT)
        await asyncio.wait_for(done, WAIT)
        assert got == plan
        await ep.close()


async def test_batch_messages_then_close(ctxs):
    """The peer sends 2,000 small messages and closes at once: all 2,000
    come, in order, before the end of the stream."""
    a, b = ctxs
    n = 2000
    got = []
    ended = asyncio.get_running_loop().create_future()

    async def handler(ep):
        async for m in ep:
            got.append(bytes(m))
        ended.set_result(None)

    async with await rdmamsg.start_server(handler, "127.0.0.1:0", ctx=a,
                                          recv_depth=512) as srv:
        ep = await rdmamsg.connect(("127.0.0.1", srv.port), ctx=b,
                                   recv_depth=512, connect_timeout=60)
        want = [msg(i) for i in range(n)]
        sends = [asyncio.ensure_future(ep.send(m)) for m in want]
        await asyncio.wait_for(asyncio.gather(*sends), WAIT)
        await ep.close()
        await asyncio.wait_for(ended, WAIT)
        assert got == want


async def test_batch_receiver_exception_loses_nothing(ctxs):
    """A receiver that raises on every 10th message: the exception goes to
    the loop's exception handler (once per raise), every later message of
    the same batch still reaches the receiver, in order."""
    a, b = ctxs
    loop = asyncio.get_running_loop()
    reported = []
    loop.set_exception_handler(lambda lp, c: reported.append(c))
    n = 1000
    got = []
    done = loop.create_future()

    async def handler(ep):
        def on(m, imm):
            got.append(bytes(m))
            if len(got) == n:
                done.set_result(None)
            if len(got) % 10 == 0:
                raise ValueError("receiver %d" % len(got))
        ep.set_receiver(on)
        await ep.wait_closed()

    try:
        async with await rdmamsg.start_server(handler, "127.0.0.1:0",
                                              ctx=a, recv_depth=256) as srv:
            ep = await rdmamsg.connect(("127.0.0.1", srv.port), ctx=b,
                                       recv_depth=256, track_sends=False,
                                       connect_timeout=60)
            want = [msg(i) for i in range(n)]
            await _send_all(ep, want)
            await asyncio.wait_for(done, WAIT)
            assert got == want
            errs = [c["exception"] for c in reported]
            assert len(errs) == n // 10
            assert all(isinstance(e, ValueError) for e in errs)
            assert [str(e) for e in errs] == \
                ["receiver %d" % k for k in range(10, n + 1, 10)]
            await ep.close()
    finally:
        loop.set_exception_handler(None)


async def test_batch_completions_and_responses(ctxs):
    """1,000 tracked sends and 1,000 requests in flight at once, responses
    of 0 bytes to 5,000 (batched and not): every send completes, every
    request gets its own response, once."""
    a, b = ctxs

    def answer(data):
        i = int.from_bytes(data[:4], "little")
        return pattern((i * 5) % 5001, i)

    async def handler(ep):
        async for m in ep:
            pass

    async with await rdmamsg.start_server(handler, "127.0.0.1:0", ctx=a,
                                          request_handler=answer) as srv:
        ep = await rdmamsg.connect(("127.0.0.1", srv.port), ctx=b,
                                   connect_timeout=60)
        n = 1000
        sends = [asyncio.ensure_future(ep.send(msg(i))) for i in range(n)]
        reqs = [asyncio.ensure_future(ep.request(i.to_bytes(4, "little"),
                                                 timeout=WAIT))
                for i in range(n)]
        assert await asyncio.wait_for(asyncio.gather(*sends), WAIT) == \
            [None] * n
        res = await asyncio.wait_for(asyncio.gather(*reqs), WAIT)
        assert res == [pattern((i * 5) % 5001, i) for i in range(n)]
        assert not core._ops  # nothing left waiting
        await ep.close()



@pytest.mark.parametrize("size", [10, 3000])
async def test_request_handler_bad_result_drops(ctxs, size):
    """A request handler whose result cannot be sent (not bytes-like,
    from the batch or not, at once or from a coroutine): reported, and
    the request dropped (the requester times out), not left pending on
    the answering endpoint."""
    a, b = ctxs
    loop = asyncio.get_running_loop()
    reported = []
    loop.set_exception_handler(lambda lp, c: reported.append(c))

    async def later(data):
        return 42

    def answer(data):
        return later(data) if data[0] else "a str"

    async def idle(ep):
        async for _ in ep:
            pass

    try:
        async with await rdmamsg.start_server(
                idle, "127.0.0.1:0", ctx=a, request_handler=answer) as srv:
            ep = await rdmamsg.connect(("127.0.0.1", srv.port), ctx=b)
            for first in (0, 1):
                with pytest.raises(TimeoutError):
                    await ep.request(bytes([first]) * size, timeout=0.3)
            (core,) = srv._eps
            assert not core._requests
            await ep.close()
    finally:
        loop.set_exception_handler(None)
    assert [type(c["exception"]) for c in reported] == [TypeError] * 2

async def test_batch_requests_every_answer(ctxs):
    """Requests of 0 B to 5,000 B (batched up to COPY_MAX, the rest one by
    one) answered by a handler that returns bytes (answered from the
    batch), a bytearray, a memoryview, a coroutine's bytes, None (dropped:
    the requester times out) or raises (dropped and reported); in order
    with messages on the same endpoint; then requests taken with
    recv_request() where no handler is set."""
    a, b = ctxs
    loop = asyncio.get_running_loop()
    reported = []
    loop.set_exception_handler(lambda lp, c: reported.append(c))

    async def later(data):
        await asyncio.sleep(0)
        return data + b"!"

    def answer(data):
        kind = data[0] % 6 if data else 0
        if kind == 0:
            return bytes(reversed(data))
        if kind == 1:
            return bytearray(data)
        if kind == 2:
            return memoryview(data)[1:]
        if kind == 3:
            return None
        if kind == 4:
            raise ValueError("no answer for %d bytes" % len(data))
        return later(data)

    def expect(data):
        kind = data[0] % 6 if data else 0
        return [bytes(reversed(data)), data, data[1:], None, None,
                data + b"!"][kind]

    got = []

    async def handler(ep):
        async for m in ep:
            got.append(bytes(m))

    sizes = [0, 1, 100, core.COPY_MAX, core.COPY_MAX + 1, 5000]
    try:
        async with await rdmamsg.start_server(handler, "127.0.0.1:0", ctx=a,
                                              request_handler=answer) as srv:
            ep = await rdmamsg.connect(("127.0.0.1", srv.port), ctx=b)
            reqs = []
            datas = []
            for i in range(60):
                size = sizes[i % len(sizes)]
                data = bytes([i % 6]) + pattern(size - 1, i) if size else b""
                datas.append(data)
                reqs.append(asyncio.ensure_future(ep.request(data,
                                                             timeout=1.0)))
                ep.send_nowait(b"m%d" % i)
            res = await asyncio.gather(*reqs, return_exceptions=True)
            for data, r in zip(datas, res):
                want = expect(data)
                if want is None:
                    assert isinstance(r, TimeoutError), (len(data), r)
                else:
                    assert r == want, len(data)
            raised = [c for c in reported if isinstance(c.get("exception"),
                                                        ValueError)]
            assert len(raised) == sum(1 for d in datas if d and d[0] == 4)
            while len(got) < 60:
                await asyncio.sleep(0.01)
            assert got == [b"m%d" % i for i in range(60)]
            await ep.close()

        async def taker(ep):
            while True:
                r = await ep.recv_request()
                r.respond(r.data[::-1])

        async with await rdmamsg.start_server(taker, "127.0.0.1:0",
                                              ctx=a) as srv:
            ep = await rdmamsg.connect(("127.0.0.1", srv.port), ctx=b)
            datas = [pattern(sizes[i % len(sizes)], i) for i in range(30)]
            res = await asyncio.wait_for(asyncio.gather(
                *(ep.request(d, timeout=WAIT) for d in datas)), WAIT)
            assert res == [d[::-1] for d in datas]
            await ep.close()
    finally:
        loop.set_exception_handler(None)
    assert not core._ops
