"""Connect, accept, reject; requests; cancellation; back-pressure; errors."""
import asyncio
import errno
import math
import socket

import pytest

import rdmamsg
from conftest import echo_handler, pattern


async def test_version_and_context(ctxs):
    a, _ = ctxs
    assert rdmamsg.version().count(".") == 2
    assert a.device_name == "softrdma0"
    assert a.fabric == "soft"
    assert a.query_cap("max_msg_size") >= 1 << 20
    # softrdma emulates mlx5's DC transport and UMR (mlx5dv)
    assert a.query_cap("dc") == 1
    assert a.query_cap("umr") == 1
    assert a.query_cap("apm") is None  # -ENOTSUP: no APM on softrdma yet
    registered, in_use = a.query_pool()
    assert 0 <= in_use <= registered


async def test_connect_accept_private_data(ctxs):
    a, b = ctxs
    seen = []

    def decide(pdata):
        seen.append(pdata)
        return True

    async with await rdmamsg.listen("127.0.0.1:0", ctx=a, accept=decide,
                                    accept_private_data=b"welcome") as lst:
        assert lst.port > 0
        cli = asyncio.ensure_future(rdmamsg.connect(
            "127.0.0.1:%d" % lst.port, ctx=b, private_data=b"hi there"))
        srv_ep = await lst.accept()
        cli_ep = await cli
        assert seen == [b"hi there"]
        assert cli_ep.peer_private_data[:7] == b"welcome"
        assert cli_ep.connected and srv_ep.connected
        await cli_ep.send(b"ping")
        assert await srv_ep.recv_bytes() == b"ping"
        await srv_ep.send(b"pong", imm=0xDEADBEEF)
        msg = await cli_ep.recv_msg()
        assert msg.tobytes() == b"pong" and msg.imm == 0xDEADBEEF
        await cli_ep.close()
        # the server side sees the peer's close as the end of the stream
        with pytest.raises(rdmamsg.EndOfStream):
            await srv_ep.recv()
        await srv_ep.close()


async def test_reject_with_reason(ctxs):
    a, b = ctxs
    async with await rdmamsg.listen(
            "127.0.0.1:0", ctx=a, accept=lambda p: (7, b"go away")) as lst:
        with pytest.raises(ConnectionRefusedError) as ei:
            await rdmamsg.connect(("127.0.0.1", lst.port), ctx=b)
        assert isinstance(ei.value, rdmamsg.Error)
        assert ei.value.errno == errno.ECONNREFUSED
        assert ei.value.reason == 7
        assert ei.value.private_data[:7] == b"go away"
        assert rdmamsg.strerror(-errno.ECONNREFUSED) in str(ei.value)
        with pytest.raises(ConnectionRefusedError) as ei:
            await rdmamsg.connect(("127.0.0.1", lst.port), ctx=b)



@pytest.mark.parametrize("decision", ["yes", 1.5, (1, 2, 3), (5, "text"),
                                      -1, 70000, (3, b"x" * 64)])
async def test_accept_filter_bad_result_rejects(ctxs, decision):
    """An accept filter's result that is none of None/True/False/int/
    (int, bytes), or that the library refuses, rejects the request with
    reason 0 at once (the client does not wait for its connect timeout)
    and goes to the loop's exception handler."""
    a, b = ctxs
    loop = asyncio.get_running_loop()
    reported = []
    loop.set_exception_handler(lambda lp, c: reported.append(c))
    try:
        async with await rdmamsg.listen("127.0.0.1:0", ctx=a,
                                        accept=lambda p: decision) as lst:
            with pytest.raises(ConnectionRefusedError) as ei:
                await asyncio.wait_for(rdmamsg.connect(
                    ("127.0.0.1", lst.port), ctx=b, connect_timeout=20), 10)
            assert ei.value.reason == 0
    finally:
        loop.set_exception_handler(None)
    assert len(reported) == 1
    assert isinstance(reported[0]["exception"], (TypeError, ValueError))

async def test_nobody_listens(ctxs):
    _, b = ctxs
    # a socket bound to the port, not listening, held for the test: no
    # other test running beside this one can listen there
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        with pytest.raises(ConnectionRefusedError):
            await rdmamsg.connect(("127.0.0.1", s.getsockname()[1]), ctx=b,
                                  connect_timeout=30)


async def test_requests_1000_concurrent(echo):
    _, ep = echo
    payloads = [pattern(1 + i % 300, i) for i in range(1000)]
    answers = await asyncio.gather(*(ep.request(p, timeout=60)
                                     for p in payloads))
    assert answers == [p[::-1] for p in payloads]
    big = pattern(3 << 20)  # by rendezvous both ways
    assert await ep.request(big) == big[::-1]


async def test_request_queue_and_timeout(ctxs):
    a, b = ctxs
    async with await rdmamsg.listen("127.0.0.1:0", ctx=a) as lst:
        cli = asyncio.ensure_future(rdmamsg.connect(("127.0.0.1", lst.port),
                                                    ctx=b))
        srv = await lst.accept()
        ep = await cli
        t = asyncio.ensure_future(ep.request(b"question", timeout=30))
        req = await srv.recv_request()
        assert req.data == b"question"
        req.respond(b"answer")
        assert await t == b"answer"
        with pytest.raises(rdmamsg.NotConnected):
            req.respond(b"twice")
        # a dropped request times out with TimeoutError
        t = asyncio.ensure_future(ep.request(b"ignored", timeout=0.2))
        (await srv.recv_request()).drop()
        with pytest.raises(TimeoutError):
            await t
        await ep.close()
        await srv.close()


@pytest.mark.parametrize("later", [False, True])
async def test_response_waits_for_pool_room(later):
    """Responses of 1 MiB to 4 requests at once, from a context whose pool
    holds about one: rdmamsg_respond() says -EAGAIN while another of the
    endpoint's responses is in flight (the request stays valid and
    on_writable follows).  Each response goes once there is room, from a
    handler that answers at once or from a coroutine; none is dropped
    (the requesters would time out), nothing is reported."""
    big = 1 << 20
    loop = asyncio.get_running_loop()
    reported = []
    loop.set_exception_handler(lambda lp, c: reported.append(c))

    async def answer_later(data):
        return pattern(big, int(data))

    def answer(data):
        return answer_later(data) if later else pattern(big, int(data))

    async def idle(ep):
        async for _ in ep:
            pass

    try:
        async with rdmamsg.Context(pool_limit=4_000_000) as a, \
                rdmamsg.Context() as b:
            async with await rdmamsg.start_server(
                    idle, "127.0.0.1:0", ctx=a,
                    request_handler=answer) as srv:
                ep = await rdmamsg.connect(("127.0.0.1", srv.port), ctx=b)
                got = await asyncio.gather(*(ep.request(b"%d" % i,
                                                        timeout=30)
                                             for i in range(4)))
                assert [g == pattern(big, i) for i, g in enumerate(got)] \
                    == [True] * 4
                await ep.close()
    finally:
        loop.set_exception_handler(None)
    assert reported == []


async def test_cancel_request_endpoint_stays_usable(ctxs):
    a, b = ctxs
    gate = asyncio.Event()
    calls = []

    async def slow(data):
        calls.append(data)
        if data == b"slow":
            await gate.wait()
        return data.upper()

    srv = await rdmamsg.start_server(echo_handler, "127.0.0.1:0", ctx=a,
                                     request_handler=slow)
    ep = await rdmamsg.connect(("127.0.0.1", srv.port), ctx=b)
    t = asyncio.ensure_future(ep.request(b"slow"))
    while not calls:
        await asyncio.sleep(0.01)
    t.cancel()
    with pytest.raises(asyncio.CancelledError):
        await t
    assert await ep.request(b"fast", timeout=30) == b"FAST"
    gate.set()  # the late answer is dropped and counted
    for _ in range(500):
        if ep.late_responses == 1:
            break
        await asyncio.sleep(0.01)
    assert ep.late_responses == 1
    await ep.send(b"still")
    assert await ep.recv_bytes() == b"still"
    await ep.close()
    srv.close()
    await srv.wait_closed()


async def test_cancel_recv_loses_nothing(echo):
    _, ep = echo
    for _ in range(20):
        t = asyncio.ensure_future(ep.recv_bytes())
        await asyncio.sleep(0)
        t.cancel()
        with pytest.raises(asyncio.CancelledError):
            await t
    await ep.send(b"one")
    await ep.send(b"two")
    assert await ep.recv_bytes() == b"one"
    assert await ep.recv_bytes() == b"two"
    # a send whose await is cancelled still completes exactly once
    t = asyncio.ensure_future(ep.send(b"three"))
    await asyncio.sleep(0)
    t.cancel()
    assert await ep.recv_bytes() == b"three"


async def test_backpressure(ctxs):
    a, b = ctxs
    got = []

    async def collect(ep):
        async for m in ep:
            got.append(bytes(m))

    srv = await rdmamsg.start_server(collect, "127.0.0.1:0", ctx=a,
                                     recv_depth=2)
    ep = await rdmamsg.connect(("127.0.0.1", srv.port), ctx=b, recv_depth=2,
                               send_backlog=0)
    sent = 0
    with pytest.raises(BlockingIOError) as ei:
        for i in range(100):
            ep.send_nowait(b"%d" % i)
            sent += 1
    assert isinstance(ei.value, rdmamsg.WouldBlock)
    assert ei.value.errno == errno.EAGAIN
    await ep.wait_writable()
    # awaited sends wait for room instead of failing
    await asyncio.gather(*(ep.send(b"%d" % i) for i in range(sent, 300)))
    await ep.close()
    for _ in range(1000):
        if len(got) == 300:
            break
        await asyncio.sleep(0.01)
    assert sorted(got, key=int) == [b"%d" % i for i in range(300)]
    assert got[:sent] == [b"%d" % i for i in range(sent)]
    srv.close()
    await srv.wait_closed()


async def test_bad_input(ctxs, echo):
    a, b = ctxs
    _, ep = echo
    with pytest.raises(TypeError):
        await ep.send(None)
    with pytest.raises(TypeError):
        await ep.send("text is not bytes")
    with pytest.raises(rdmamsg.InvalidArgument) as ei:
        await rdmamsg.connect("no-port-here", ctx=b)
    assert isinstance(ei.value, ValueError)
    assert ei.value.errno == errno.EINVAL
    with pytest.raises(ValueError):
        await rdmamsg.connect("127.0.0.1:0", ctx=b)
    with pytest.raises(TypeError):
        await rdmamsg.connect("127.0.0.1:1", ctx=b, no_such_option=1)
    with pytest.raises(rdmamsg.InvalidArgument):
        await rdmamsg.connect("127.0.0.1:1", ctx=b, eager_size=1)
    with pytest.raises(ValueError):
        await rdmamsg.connect("127.0.0.1:1", ctx=b, private_data=b"x" * 33)
    with pytest.raises(ValueError):
        await rdmamsg.connect("127.0.0.1:1", ctx=b, connect_timeout=-1)
    with pytest.raises(ValueError):
        rdmamsg.Context(fabric="carrier-pigeon")
    # a NUL would end the C string early: not a shorter address
    with pytest.raises(ValueError, match="null"):
        await rdmamsg.connect("127.0.0.1:%d\0junk" % echo[0].port, ctx=b)
    with pytest.raises(ValueError, match="null"):
        await rdmamsg.listen("127.0.0.1:0\0junk", ctx=a)
    with pytest.raises(ValueError, match="null"):
        rdmamsg.Context(device="127.0.0.1\0junk")
    with pytest.raises(TypeError):
        rdmamsg.Context(device=1)
    with pytest.raises(ValueError):
        a.query_cap("teleport")
    with pytest.raises(rdmamsg.InvalidArgument):
        a.alloc(0)
    with pytest.raises(rdmamsg.MessageTooLarge):
        a.alloc(1 << 40)
    with pytest.raises(rdmamsg.AddressInUse):
        async with await rdmamsg.listen("127.0.0.1:0", ctx=a) as lst:
            await rdmamsg.listen(("127.0.0.1", lst.port), ctx=a)
    with pytest.raises(ValueError):
        rdmamsg.RemoteRegion(b"not an export")
    big = await rdmamsg.connect(("127.0.0.1", echo[0].port), ctx=b,
                                max_large_size=1 << 20)
    with pytest.raises(rdmamsg.MessageTooLarge):
        await big.send(bytes((1 << 20) + 1))
    for timeout, exc in ((math.inf, rdmamsg.InvalidArgument),
                         (1e12, rdmamsg.InvalidArgument),
                         (math.nan, ValueError), (-1, ValueError),
                         ("1", TypeError)):
        with pytest.raises(exc):  # not OverflowError, nothing sent
            await big.request(b"x", timeout=timeout)
    with pytest.raises(rdmamsg.InvalidArgument):
        await rdmamsg.connect("127.0.0.1:1", ctx=b, connect_timeout=math.nan)
    await big.close()
    with pytest.raises(rdmamsg.NotConnected) as ei:
        await big.send(b"after close")
    assert isinstance(ei.value, ConnectionError)
    with pytest.raises(rdmamsg.NotConnected):
        await big.request(b"after close")


async def test_bad_arguments_refused_up_front(ctxs):
    """Arguments of the wrong type or value are refused by the call that
    takes them (TypeError, ValueError), with a message that names them,
    not later at each request, nor as AttributeError, nor as the C
    library's bare EINVAL."""
    a, b = ctxs
    for kw, exc in (({"keep_threshold": "16k"}, TypeError),
                    ({"keep_threshold": True}, TypeError),
                    ({"keep_threshold": -1}, ValueError),
                    ({"request_handler": 42}, TypeError),
                    ({"accept": b"yes"}, TypeError)):
        with pytest.raises(exc, match=list(kw)[0]):
            await rdmamsg.listen("127.0.0.1:0", ctx=a, **kw)
        if "accept" not in kw:
            with pytest.raises(exc, match=list(kw)[0]):
                await rdmamsg.connect("127.0.0.1:1", ctx=b, **kw)
    with pytest.raises(TypeError, match="handler"):
        await rdmamsg.start_server(None, "127.0.0.1:0", ctx=a)
    assert not a._listeners and not b._eps
    async with await rdmamsg.listen("127.0.0.1:0", ctx=a) as lst:
        cli = asyncio.ensure_future(rdmamsg.connect(("127.0.0.1", lst.port),
                                                    ctx=b))
        srv = await lst.accept()
        ep = await cli
    with pytest.raises(TypeError, match="request_handler"):
        srv.set_request_handler("not callable")
    theirs = a.register(bytearray(64), rdmamsg.ACCESS_REMOTE_WRITE)
    rmr = rdmamsg.RemoteRegion(theirs.export())
    mine = b.register(bytearray(64))
    for call in (lambda: ep.write(bytearray(64), rmr),
                 lambda: ep.write(mine, theirs.export()),
                 lambda: ep.read(b"x" * 64, rmr),
                 lambda: ep.read(mine, None),
                 lambda: ep.atomic_cas(theirs, 0, 1, 2),
                 lambda: ep.atomic_fadd(b"x", 0, 1)):
        with pytest.raises(TypeError, match="Region"):
            await call()
    with pytest.raises(ValueError, match="another context"):
        await ep.write(theirs, rmr)  # a region of the peer's context
    buf = a.alloc(100)
    for call in (lambda: ep.send(buf), lambda: ep.send_nocopy(buf),
                 lambda: _now(ep.send_nowait, buf)):
        with pytest.raises(ValueError, match="another context"):
            await call()
    buf.close()
    # nothing of it went: the endpoint works, its first message is this
    await ep.send(b"after")
    assert await srv.recv_bytes() == b"after"
    rmr.close()
    theirs.close()
    mine.close()
    await ep.close()
    await srv.close()


async def _now(fn, *args):
    fn(*args)


def test_errno_mapping():
    cases = {errno.ECONNREFUSED: ConnectionRefusedError,
             errno.ETIMEDOUT: TimeoutError, errno.EAGAIN: BlockingIOError,
             errno.ECONNRESET: ConnectionResetError,
             errno.EACCES: PermissionError, errno.EINVAL: ValueError,
             errno.ENOMEM: MemoryError, errno.ENOTCONN: ConnectionError,
             # a port that went down (connect, failover, disconnect)
             errno.ENETDOWN: ConnectionError}
    for err, cls in cases.items():
        exc = rdmamsg.make_error(-err)
        assert isinstance(exc, cls) and isinstance(exc, rdmamsg.Error)
        assert exc.errno == err
        assert exc.strerror == rdmamsg.strerror(-err)
    assert type(rdmamsg.make_error(-errno.EXDEV)) is rdmamsg.Error


def test_blocking_layer():
    async def serve(ready, stop):
        async with rdmamsg.Context() as ctx:
            async with await rdmamsg.start_server(
                    echo_handler, "127.0.0.1:0", ctx=ctx,
                    request_handler=lambda d: d + b"!") as srv:
                ready.append(srv.port)
                await stop.wait()

    import threading
    ready = []
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    th = threading.Thread(target=loop.run_until_complete,
                          args=(serve(ready, stop),))
    th.start()
    try:
        while not ready:
            th.join(0.01)
        from rdmamsg import blocking
        with blocking.connect(("127.0.0.1", ready[0])) as ep:
            ep.send(b"sync")
            assert ep.recv_bytes() == b"sync"
            assert ep.request(b"q", timeout=30) == b"q!"
            # a call interrupted (Ctrl-C while it waits) leaves nothing
            # behind on the private loop to take the next message
            ep._loop.call_later(0.2, _interrupt)
            with pytest.raises(KeyboardInterrupt):
                ep.recv_bytes()  # nothing comes
            assert not ep._e()._core.recv_waiters
            ep.send(b"after")
            assert ep._run(asyncio.wait_for(ep._e().recv_bytes(), 10)) \
                == b"after"
    finally:
        loop.call_soon_threadsafe(stop.set)
        th.join()
        loop.close()


def _interrupt():
    raise KeyboardInterrupt


async def test_idle_loop_sleeps(echo, ctxs):
    """No busy loop: an idle connection costs (almost) no passes of the
    pump, and a message that comes while the loop blocks wakes it."""
    _, ep = echo
    _, b = ctxs
    passes = []
    orig = rdmamsg._core._c_pump

    def counting_pump(ctx, rounds, batch, spin_ok):
        if ctx == b._ctx and rounds:  # the start of one of b's passes
            passes.append(1)
        return orig(ctx, rounds, batch, spin_ok)

    rdmamsg._core._c_pump = counting_pump
    try:
        await asyncio.sleep(0.3)
        assert len(passes) <= 5  # keep-alives at most, not a spin
        t = asyncio.ensure_future(ep.recv_bytes())
        await asyncio.sleep(0.05)  # the loop is blocked in select now
        await asyncio.gather(ep.send(b"wake"), t)
        assert t.result() == b"wake"
        assert passes  # the fd's reader ran the pump for the answer
    finally:
        rdmamsg._core._c_pump = orig


async def test_recv_and_recv_request_wait_apart(ctxs):
    """recv() and recv_request() waiting at once on one endpoint: a
    message wakes the recv(), a request the recv_request(), whichever
    began to wait first; and a receiver callback for the messages
    (set_receiver) leaves recv_request() working."""
    a, b = ctxs
    async with await rdmamsg.listen("127.0.0.1:0", ctx=a) as lst:
        cli = asyncio.ensure_future(rdmamsg.connect(("127.0.0.1", lst.port),
                                                    ctx=b))
        srv = await lst.accept()
        ep = await cli
    for first in ("request", "message"):
        treq = asyncio.ensure_future(srv.recv_request())
        tmsg = asyncio.ensure_future(srv.recv_bytes())
        if first == "request":
            await asyncio.sleep(0.05)
            await ep.send(b"message")
            assert await asyncio.wait_for(tmsg, 10) == b"message"
        r = asyncio.ensure_future(ep.request(b"question", timeout=30))
        req = await asyncio.wait_for(treq, 10)
        assert req.data == b"question"
        req.respond(b"answer")
        assert await r == b"answer"
        if first == "message":
            await ep.send(b"message")
            assert await asyncio.wait_for(tmsg, 10) == b"message"
    got = []
    srv.set_receiver(lambda view, imm: got.append(bytes(view)))
    treq = asyncio.ensure_future(srv.recv_request())
    await ep.send(b"to the receiver")
    r = asyncio.ensure_future(ep.request(b"again", timeout=30))
    req = await asyncio.wait_for(treq, 10)
    req.respond(b"ok")
    assert await r == b"ok"
    assert got == [b"to the receiver"]
    await ep.close()
    await srv.close()
