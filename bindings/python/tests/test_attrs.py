"""The newer C API in Python: context attributes (listen backlog, pending
handshakes), linger, shared receive queues, recv_alloc (rendezvous
receives into the caller's memory), the library's log in ``logging``."""
import asyncio
import errno
import logging
import threading

import pytest

import rdmamsg
from conftest import echo_handler, pattern


async def _collector(a, got, **opts):
    """A server whose handler appends every message (bytes) to got."""
    done = asyncio.Event()

    async def handler(ep):
        try:
            async for m in ep:
                got.append(bytes(m))
        finally:
            done.set()

    srv = await rdmamsg.start_server(handler, "127.0.0.1:0", ctx=a, **opts)
    return srv, done


# -- context attributes --------------------------------------------------------

async def test_context_listen_backlog_and_max_pending():
    async with rdmamsg.Context(listen_backlog=1, max_pending=1) as a, \
            rdmamsg.Context() as b:
        srv = await rdmamsg.start_server(echo_handler, "127.0.0.1:0", ctx=a)
        # one handshake at a time is enough for connections made in turn
        for i in range(3):
            async with await rdmamsg.connect(("127.0.0.1", srv.port),
                                             ctx=b) as ep:
                await ep.send(pattern(100, i))
                assert await ep.recv_bytes() == pattern(100, i)
        srv.close()
        await srv.wait_closed()


@pytest.mark.parametrize("kw,exc", [
    ({"listen_backlog": 0}, rdmamsg.InvalidArgument),
    ({"listen_backlog": 65537}, rdmamsg.InvalidArgument),
    ({"max_pending": 0}, rdmamsg.InvalidArgument),
    ({"max_pending": 1 << 20}, rdmamsg.InvalidArgument),
    ({"listen_backlog": -1}, ValueError),
    ({"max_pending": 1 << 40}, ValueError),
    ({"listen_backlog": "8"}, TypeError),
    ({"max_pending": 2.5}, TypeError),
])
async def test_context_attributes_bad_input(kw, exc):
    before = rdmamsg.live_contexts()
    with pytest.raises(exc):
        rdmamsg.Context(**kw)
    assert rdmamsg.live_contexts() == before  # nothing half made


# -- the receive window -------------------------------------------------------

async def test_receive_window_grows_while_the_peer_uses_it_whole(ctxs):
    """A stream of 4 KiB messages past the peer's credits: the receiving
    side's window (default: 32, may grow to 128) grows, every message
    arrives intact and in order; the sending side, whose depth was set,
    keeps its fixed window."""
    a, b = ctxs
    windows = []
    got = []

    async def handler(ep):
        windows.append(ep.window)
        async for m in ep:
            got.append(bytes(m))
            if len(got) == 600:
                windows.append(ep.window)

    srv = await rdmamsg.start_server(handler, "127.0.0.1:0", ctx=a)
    ep = await rdmamsg.connect(("127.0.0.1", srv.port), ctx=b, recv_depth=16)
    msgs = [pattern(4096, i) for i in range(600)]
    for m in msgs:
        await ep.send(m)
    await asyncio.wait_for(_until(lambda: len(got) == 600), 30)
    assert got == msgs
    assert windows[0] == (32, 128)
    assert windows[-1][0] > 32 and windows[-1][1] == 128
    assert ep.window == (16, 16)
    await ep.close()
    srv.close()
    await srv.wait_closed()


async def _until(cond):
    while not cond():
        await asyncio.sleep(0.001)


@pytest.mark.parametrize("v,exc", [(1, rdmamsg.InvalidArgument),
                                   (4097, rdmamsg.InvalidArgument),
                                   (-1, ValueError), ("x", ValueError)])
async def test_recv_depth_max_bad_input(ctxs, v, exc):
    a, b = ctxs
    before = rdmamsg.live_contexts()
    with pytest.raises(exc):
        await rdmamsg.connect(("127.0.0.1", 1), ctx=b, recv_depth_max=v)
    assert rdmamsg.live_contexts() == before


# -- linger -----------------------------------------------------------------

@pytest.mark.parametrize("linger", [True, False])
async def test_linger_sends_queued_messages_on_close(ctxs, linger):
    """Out of credits (receive depth 2), 200 messages wait in the backlog
    when the endpoint closes: with linger they all go out, in order, before
    the goodbye; without it they are cancelled."""
    a, b = ctxs
    got = []
    srv, done = await _collector(a, got, recv_depth=2)
    ep = await rdmamsg.connect(("127.0.0.1", srv.port), ctx=b, recv_depth=2,
                               linger=linger, close_timeout=30)
    msgs = [b"%d" % i for i in range(200)]
    for m in msgs:
        ep.send_nowait(m)  # no await in between: all queued at close
    await ep.close()
    await asyncio.wait_for(done.wait(), 30)
    if linger:
        assert got == msgs
    else:
        assert got == msgs[:len(got)] and len(got) < len(msgs)
    srv.close()
    await srv.wait_closed()


# -- shared receive queues ---------------------------------------------------

async def test_srq_shared_by_accepted_and_connected_endpoints(ctxs):
    a, b = ctxs
    srv_srq = a.create_srq(max_bufs=64, buf_size=8192)
    cli_srq = b.create_srq(max_bufs=64, buf_size=8192)
    srv = await rdmamsg.start_server(echo_handler, "127.0.0.1:0", ctx=a,
                                     srq=srv_srq, recv_depth=8)
    eps = [await rdmamsg.connect(("127.0.0.1", srv.port), ctx=b,
                                 srq=cli_srq, recv_depth=8)
           for _ in range(3)]
    # 200 messages on each, interleaved, all through the two SRQs
    for k in range(200):
        for i, ep in enumerate(eps):
            ep.send_nowait(pattern(64 + k, i))
    for i, ep in enumerate(eps):
        for k in range(200):
            assert await ep.recv_bytes() == pattern(64 + k, i)
    # connecting side: each endpoint's whole window (receive depth + 2
    # control); accepting side: 1 data + 2 control guaranteed each, the
    # rest of the depth lent from at most a sixteenth of max_bufs
    for q, lo, hi in ((srv_srq, 3 * 3, 3 * 3 + 64 // 16),
                      (cli_srq, 3 * (8 + 2), 3 * (8 + 2))):
        st = q.query()
        assert st.endpoints == 3
        assert lo <= st.reserved <= hi
        assert st.reserved <= st.bufs <= 64
        assert st.registered >= st.bufs * 8192
    # a window beyond max_bufs: refused, nothing half made
    small = b.create_srq(max_bufs=16, buf_size=8192)
    ok = await rdmamsg.connect(("127.0.0.1", srv.port), ctx=b, srq=small,
                               recv_depth=8)
    with pytest.raises(rdmamsg.OutOfMemory) as ei:
        await rdmamsg.connect(("127.0.0.1", srv.port), ctx=b, srq=small,
                              recv_depth=8)
    assert ei.value.errno == errno.ENOBUFS
    assert small.query().endpoints == 1
    await ok.send(b"still fine")
    assert await ok.recv_bytes() == b"still fine"
    # async close: not freed while an endpoint uses it
    closing = asyncio.ensure_future(small.close())
    await asyncio.sleep(0.05)
    assert not closing.done() and small.closed
    with pytest.raises(ValueError):  # closed: no new endpoint on it
        await rdmamsg.connect(("127.0.0.1", srv.port), ctx=b, srq=small)
    await ok.close()
    await asyncio.wait_for(closing, 30)
    with pytest.raises(ValueError):
        small.query()
    for ep in eps:
        await ep.close()
    await asyncio.wait_for(cli_srq.close(), 30)
    srv.close()
    await srv.wait_closed()
    await asyncio.wait_for(srv_srq.close(), 30)


async def test_srq_full_is_enobufs(ctxs):
    a, b = ctxs
    srv = await rdmamsg.start_server(echo_handler, "127.0.0.1:0", ctx=a)
    small = b.create_srq(max_bufs=8)
    try:
        with pytest.raises(rdmamsg.OutOfMemory) as ei:
            await rdmamsg.connect(("127.0.0.1", srv.port), ctx=b, srq=small,
                                  recv_depth=8)
        assert ei.value.errno == errno.ENOBUFS
    finally:
        await small.close()
        srv.close()
        await srv.wait_closed()


async def test_srq_bad_input(ctxs):
    a, b = ctxs
    with pytest.raises(rdmamsg.InvalidArgument):
        b.create_srq(max_bufs=4)  # below 8
    with pytest.raises(rdmamsg.InvalidArgument):
        b.create_srq(max_bufs=64, buf_size=32)  # below 64
    with pytest.raises(TypeError):
        b.create_srq(max_bufs="64")
    with pytest.raises(ValueError):
        b.create_srq(max_bufs=-1)
    with pytest.raises(ValueError):
        b.create_srq(max_bufs=64, buf_size=-1)
    srv = await rdmamsg.start_server(echo_handler, "127.0.0.1:0", ctx=a)
    addr = ("127.0.0.1", srv.port)
    with pytest.raises(TypeError):
        await rdmamsg.connect(addr, ctx=b, srq="srq")
    with pytest.raises(TypeError):  # refused at listen time
        await rdmamsg.listen("127.0.0.1:0", ctx=a, srq=object())
    other = a.create_srq(max_bufs=64)
    with pytest.raises(rdmamsg.InvalidArgument):  # another context's
        await rdmamsg.connect(addr, ctx=b, srq=other)
    small = b.create_srq(max_bufs=64, buf_size=1024)
    with pytest.raises(rdmamsg.InvalidArgument):  # eager size 8192 > 1024
        await rdmamsg.connect(addr, ctx=b, srq=small)
    # the refusals left nothing behind: the SRQs are unused, the
    # endpoint that fits works
    assert other.query().endpoints == 0 and small.query().endpoints == 0
    async with await rdmamsg.connect(addr, ctx=b, srq=small,
                                     eager_size=1024) as ep:
        await ep.send(pattern(3000))  # 3 fragments of 1024
        assert await ep.recv_bytes() == pattern(3000)
    await other.close()
    await small.close()
    srv.close()
    await srv.wait_closed()


async def test_srq_closed_with_its_context():
    """A context closed with an SRQ in use closes it after the endpoints;
    an SRQ collected open is closed with a ResourceWarning."""
    a = rdmamsg.Context()
    b = rdmamsg.Context()
    q = b.create_srq(max_bufs=32)
    srv = await rdmamsg.start_server(echo_handler, "127.0.0.1:0", ctx=a)
    ep = await rdmamsg.connect(("127.0.0.1", srv.port), ctx=b, srq=q,
                               recv_depth=4)
    await ep.send(b"x")
    assert await ep.recv_bytes() == b"x"
    await asyncio.wait_for(b.close(), 30)  # endpoint, then SRQ, then ctx
    assert q.closed
    with pytest.raises(ValueError):
        q.query()
    q2 = a.create_srq(max_bufs=32)
    with pytest.warns(ResourceWarning, match="shared receive queue"):
        del q2
        import gc
        gc.collect()
    srv.close()
    await srv.wait_closed()
    await asyncio.wait_for(a.close(), 30)


async def test_listener_whose_srq_closed_rejects(ctxs):
    """A listener whose SRQ was closed cannot make endpoints any more: a
    connection request is rejected at once (ConnectionRefusedError; the
    error to the loop's exception handler), not left undecided for the
    client to time out."""
    a, b = ctxs
    loop = asyncio.get_running_loop()
    reported = []
    loop.set_exception_handler(lambda lp, c: reported.append(c))
    q = a.create_srq(max_bufs=64)
    try:
        async with await rdmamsg.listen("127.0.0.1:0", ctx=a,
                                        srq=q) as lst:
            q.close_nowait()
            with pytest.raises(ConnectionRefusedError):
                await rdmamsg.connect(("127.0.0.1", lst.port), ctx=b,
                                      connect_timeout=20)
    finally:
        loop.set_exception_handler(None)
    assert [type(c["exception"]) for c in reported] == [ValueError]
    await q.wait_closed()


# -- recv_alloc ---------------------------------------------------------------

RNDV = dict(eager_size=8192, max_msg_size=65536)  # above 64 KiB: rendezvous


async def test_recv_alloc_lands_in_callers_region(ctxs):
    a, b = ctxs
    srv = await rdmamsg.start_server(echo_handler, "127.0.0.1:0", ctx=a,
                                     **RNDV)
    region = bytearray(1 << 20)
    mr = b.register(region)
    asked = []

    def alloc(n):
        asked.append(n)
        return mr, 4096

    ep = await rdmamsg.connect(("127.0.0.1", srv.port), ctx=b,
                               recv_alloc=alloc, **RNDV)
    for size in (65537, 300000, (1 << 20) - 4096):
        data = pattern(size, size & 7)
        await ep.send(data)
        msg = await ep.recv_msg()
        assert msg.large
        assert msg.data.obj is region  # a view of the region: no copy
        assert msg.data == data
        assert region[4096:4096 + size] == data
        msg.release()
    assert asked == [65537, 300000, (1 << 20) - 4096]
    # eager messages never ask
    await ep.send(b"small")
    assert await ep.recv_bytes() == b"small"
    assert len(asked) == 3
    await ep.close()
    mr.close()


async def test_recv_alloc_none_refusal_and_bad_results(ctxs):
    """None: the library's memory (a copy, as without recv_alloc); OSError:
    the sender's send fails with its errno; a bad result: EINVAL for the
    sender and the error reported; the endpoint stays usable throughout."""
    a, b = ctxs
    loop = asyncio.get_running_loop()
    reported = []
    loop.set_exception_handler(lambda lp, c: reported.append(c))
    region = bytearray(128 * 1024)
    mr = a.register(region)
    ro = a.register(bytes(128 * 1024))
    answer = []

    def alloc(n):
        r = answer.pop(0)
        if isinstance(r, BaseException):
            raise r
        return r

    lst = await rdmamsg.listen("127.0.0.1:0", ctx=a, recv_alloc=alloc,
                               **RNDV)
    cli = await rdmamsg.connect(("127.0.0.1", lst.port), ctx=b, **RNDV)
    srv = await lst.accept()
    data = pattern(100000)

    answer.append(None)
    await cli.send(data)
    m = await srv.recv_msg()
    assert m.large and m.data == data and isinstance(m.data.obj, bytes)

    answer.append(OSError(errno.EMSGSIZE, "too large for us"))
    with pytest.raises(rdmamsg.MessageTooLarge):
        await cli.send(data)

    for bad, exc in (((mr, 64 * 1024), ValueError), ((mr, -1), ValueError),
                     (ro, TypeError), ("region", TypeError),
                     ((mr, "0"), TypeError)):
        reported.clear()
        answer.append(bad)
        with pytest.raises(rdmamsg.InvalidArgument):
            await cli.send(data)
        assert [type(c["exception"]) for c in reported] == [exc]

    answer.append(RuntimeError("bug in the callback"))
    reported.clear()
    with pytest.raises(rdmamsg.OutOfMemory):  # ENOBUFS
        await cli.send(data)
    assert isinstance(reported[0]["exception"], RuntimeError)

    answer.append((mr, 1000))  # and it still lands where asked
    await cli.send(data)
    v = await srv.recv()
    assert v.obj is region and v == data == region[1000:101000]
    assert not answer and mr._inflight == 0
    await cli.send(b"after all that")
    assert await srv.recv_bytes() == b"after all that"
    await cli.close()
    await srv.close()
    await lst.close()
    mr.close()
    ro.close()
    loop.set_exception_handler(None)


async def test_recv_alloc_bad_option(ctxs):
    a, b = ctxs
    with pytest.raises(TypeError):
        await rdmamsg.connect("127.0.0.1:1", ctx=b, recv_alloc=42)
    with pytest.raises(TypeError):
        await rdmamsg.listen("127.0.0.1:0", ctx=a, recv_alloc="no")


# -- logging ----------------------------------------------------------------

class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records = []

    def emit(self, record):
        self.records.append(record)


@pytest.fixture
def rdmamsg_log():
    h = _Records()
    lg = logging.getLogger("rdmamsg")
    lg.addHandler(h)
    yield h
    lg.removeHandler(h)
    rdmamsg.set_log_level(logging.NOTSET)  # back to the root's: WARNING
    rdmamsg.log_to_logging(True)


async def test_log_to_logging(rdmamsg_log):
    with pytest.raises(rdmamsg.NoDevice):
        rdmamsg.Context(device="nosuchdev0")
    msgs = [(r.levelno, r.getMessage()) for r in rdmamsg_log.records]
    assert (logging.ERROR, "pick_device: no device named nosuchdev0 or "
            "owning that address") in msgs
    assert all(r.name == "rdmamsg" for r in rdmamsg_log.records)

    # from a thread of its own (cffi takes the GIL there)
    rdmamsg_log.records.clear()
    loop = asyncio.get_running_loop()
    errs = []

    def other():
        try:
            rdmamsg.Context(device="nosuchdev1", loop=loop)
        except rdmamsg.NoDevice as exc:
            errs.append(exc)

    t = threading.Thread(target=other, name="logger-thread")
    t.start()
    t.join()
    assert len(errs) == 1
    recs = [r for r in rdmamsg_log.records if "nosuchdev1" in r.getMessage()]
    assert [r.threadName for r in recs] == ["logger-thread"]

    # off: nothing reaches logging
    rdmamsg_log.records.clear()
    rdmamsg.log_to_logging(False)
    with pytest.raises(rdmamsg.NoDevice):
        rdmamsg.Context(device="nosuchdev2")
    assert rdmamsg_log.records == []
    rdmamsg.log_to_logging(True)
    # above ERROR the library logs nothing at all
    rdmamsg.set_log_level(logging.CRITICAL)
    with pytest.raises(rdmamsg.NoDevice):
        rdmamsg.Context(device="nosuchdev3")
    assert rdmamsg_log.records == []
    rdmamsg.set_log_level("debug")
    assert logging.getLogger("rdmamsg").level == logging.DEBUG


async def test_log_handler_calling_the_library_is_not_reentered(
        rdmamsg_log):
    """A handler that calls into the library, which logs again from inside
    the log function: that message is dropped, not recursed into."""
    seen = []

    class Reentrant(logging.Handler):
        def emit(self, record):
            seen.append(record.getMessage())
            try:
                rdmamsg.Context(device="nested%d" % len(seen),
                                loop=asyncio.get_running_loop())
            except rdmamsg.NoDevice:
                pass

    h = Reentrant()
    logging.getLogger("rdmamsg").addHandler(h)
    try:
        with pytest.raises(rdmamsg.NoDevice):
            rdmamsg.Context(device="outer")
    finally:
        logging.getLogger("rdmamsg").removeHandler(h)
    assert [m for m in seen if "no device named" in m] == [
        "pick_device: no device named outer or owning that address"]
    # and the next message outside goes through again
    rdmamsg_log.records.clear()
    with pytest.raises(rdmamsg.NoDevice):
        rdmamsg.Context(device="after")
    assert any("after" in r.getMessage() for r in rdmamsg_log.records)


def test_set_log_level_bad_input():
    with pytest.raises(TypeError):
        rdmamsg.set_log_level(None)
    with pytest.raises(TypeError):
        rdmamsg.set_log_level(True)
    with pytest.raises(ValueError):
        rdmamsg.set_log_level("chatty")
    with pytest.raises(ValueError):
        rdmamsg.set_log_level(-5)


# -- wake-ups inside the pass ------------------------------------------------

async def _pair(a, b):
    lst = await rdmamsg.listen("127.0.0.1:0", ctx=a)
    cli = await rdmamsg.connect(("127.0.0.1", lst.port), ctx=b)
    srv = await lst.accept()
    await lst.close()
    return cli, srv


@pytest.mark.parametrize("direct", [True, False])
async def test_reader_resumes_inside_the_pass(ctxs, direct):
    """A task waiting in recv() runs its step inside the context's pass
    (before it arms; with DIRECT_WAKE off, a loop iteration later), once
    per message, and gets each message exactly once, in order."""
    a, b = ctxs
    cli, srv = await _pair(a, b)
    core = rdmamsg._core
    old = core.DIRECT_WAKE
    core.DIRECT_WAKE = direct
    try:
        for i in range(20):
            async def reader():
                m = await cli.recv()
                return bytes(m), b._in_pump, asyncio.current_task()

            t = asyncio.ensure_future(reader())
            while not cli._core.recv_waiters:  # it waits before we send
                await asyncio.sleep(0)
            await srv.send(b"m%d" % i)
            data, in_pass, task = await t
            assert data == b"m%d" % i
            assert in_pass is direct
            assert task is t  # its own task was the current one
        assert not cli._core.queue
    finally:
        core.DIRECT_WAKE = old
    await cli.close()
    await srv.close()


async def test_no_task_step_inside_another(ctxs):
    """A reader woken inside the pass closes a second endpoint whose reader
    waits too: that one is woken through call_soon (never stepped inside
    the first one's step) and sees the close; nothing reaches the loop's
    exception handler."""
    a, b = ctxs
    loop = asyncio.get_running_loop()
    reported = []
    loop.set_exception_handler(lambda lp, c: reported.append(c))
    c1, s1 = await _pair(a, b)
    c2, s2 = await _pair(a, b)

    async def first():
        m = bytes(await c1.recv())
        c2.close_nowait()
        return m, b._in_pump

    async def second():
        with pytest.raises(rdmamsg.OperationCanceled):
            await c2.recv()
        return b._in_pump, b._stepping

    t1 = asyncio.ensure_future(first())
    t2 = asyncio.ensure_future(second())
    while not (c1._core.recv_waiters and c2._core.recv_waiters):
        await asyncio.sleep(0)
    await s1.send(b"go")
    assert await t1 == (b"go", True)
    assert await t2 == (False, False)  # resumed later, outside the pass
    assert reported == []
    loop.set_exception_handler(None)
    for ep in (c1, s1, c2, s2):
        await ep.close()
