"""Objects garbage-collected open are closed, with a ResourceWarning."""
import asyncio
import gc

import pytest

import rdmamsg
from conftest import echo_handler


async def _settle(pred):
    for _ in range(1000):
        if pred():
            return True
        await asyncio.sleep(0.01)
    return False


async def test_unclosed_endpoint_and_listener(ctxs):
    a, b = ctxs
    srv = await rdmamsg.start_server(echo_handler, "127.0.0.1:0", ctx=a)
    ep = await rdmamsg.connect(("127.0.0.1", srv.port), ctx=b)
    await ep.send(b"x")
    await ep.recv()
    assert len(b._eps) == 1
    with pytest.warns(ResourceWarning, match="unclosed rdmamsg endpoint"):
        del ep
        gc.collect()
    assert await _settle(lambda: not b._eps)  # closed by the collection
    assert await _settle(lambda: srv.connections == 0)
    lst = await rdmamsg.listen("127.0.0.1:0", ctx=a)
    with pytest.warns(ResourceWarning, match="unclosed rdmamsg listener"):
        del lst
        gc.collect()
    srv.close()
    await srv.wait_closed()
    assert await _settle(lambda: not a._listeners)


async def test_unclosed_context():
    before = rdmamsg.live_contexts()
    a = rdmamsg.Context()
    b = rdmamsg.Context()
    srv = await rdmamsg.start_server(echo_handler, "127.0.0.1:0", ctx=a)
    ep = await rdmamsg.connect(("127.0.0.1", srv.port), ctx=b)
    await ep.send(b"y")
    await ep.recv()
    assert rdmamsg.live_contexts() == before + 2
    # (the recorded warning holds the endpoint, hence the context: one
    # recorder per object)
    with pytest.warns(ResourceWarning, match="unclosed rdmamsg endpoint"):
        del ep
        gc.collect()
    eps = b._eps
    assert await _settle(lambda: not eps)
    with pytest.warns(ResourceWarning, match="unclosed rdmamsg context"):
        del b
        gc.collect()
    # closed by the collection: its endpoint, then the context itself
    assert await _settle(lambda: rdmamsg.live_contexts() == before + 1)
    srv.close()
    await srv.wait_closed()
    await a.close()
    assert rdmamsg.live_contexts() == before


async def test_close_waits_for_kept_buffers(ctxs):
    a, _ = ctxs
    b = rdmamsg.Context()
    srv = await rdmamsg.start_server(echo_handler, "127.0.0.1:0", ctx=a)
    ep = await rdmamsg.connect(("127.0.0.1", srv.port), ctx=b)
    await ep.send(b"z" * 40000)
    kept = await ep.recv()  # a pool buffer of b, held by the view
    closing = asyncio.ensure_future(b.close())
    await asyncio.sleep(0.2)
    assert not closing.done()  # the context waits for the view
    assert kept == b"z" * 40000  # which stays valid
    del kept
    gc.collect()
    await asyncio.wait_for(closing, 30)
    srv.close()
    await srv.wait_closed()


def test_context_of_a_closed_loop_makes_nothing():
    """Context(loop=) of a closed loop (or of no loop) raises before it
    makes the C context: none is left behind, nothing to collect."""
    before = rdmamsg.live_contexts()
    loop = asyncio.new_event_loop()
    loop.close()
    with pytest.raises(ValueError, match="closed"):
        rdmamsg.Context(loop=loop)
    with pytest.raises(TypeError, match="event loop"):
        rdmamsg.Context(loop="not a loop")
    gc.collect()
    assert rdmamsg.live_contexts() == before


async def test_failed_operations_leave_no_cycles(ctxs):
    """An awaited operation that fails (a request timing out, a send the
    receiver refuses, a write the peer's HCA refuses) leaves no reference
    cycle holding the caller's buffer and the binding's export of it
    (ffi.from_buffer): once the exception is dropped both go at once.
    Such a cycle, left to the collector, crashed the interpreter (a
    memoryview cleared with an export: its tp_clear raises BufferError,
    lets its buffer go all the same, and the export's release then
    touches freed memory)."""
    import errno
    import weakref
    a, b = ctxs

    def refuse(nbytes):
        raise OSError(errno.ENOSPC, "no room")

    lst = await rdmamsg.listen("127.0.0.1:0", ctx=a, max_msg_size=1 << 16,
                               recv_alloc=refuse)
    cli = asyncio.ensure_future(rdmamsg.connect(("127.0.0.1", lst.port),
                                                ctx=b))
    srv = await lst.accept()
    ep = await cli
    await lst.close()
    theirs = a.register(bytearray(64), rdmamsg.ACCESS_REMOTE_WRITE)
    rmr = rdmamsg.RemoteRegion(theirs.export())
    theirs.close()  # the export names a region that is gone

    async def failing(kind, view):
        if kind == "request":  # nobody answers
            await ep.request(view, timeout=0.05)
        elif kind == "send":  # by rendezvous, refused by recv_alloc
            await ep.send(view)
        else:  # the peer's HCA refuses it (the connection goes down)
            mr = b.register(view)
            try:
                await ep.write(mr, rmr)
            finally:
                mr.close()

    gc.collect()
    gc.disable()
    try:
        for kind, size, exc in (("request", 64, TimeoutError),
                                ("send", 100000, OSError),
                                ("write", 64, PermissionError)):
            view = memoryview(bytearray(size))
            ref = weakref.ref(view)
            with pytest.raises(exc):
                await failing(kind, view)
            del view
            # once the step that caught the exception is over (its C
            # code holds the exception until then): no cycle holds them
            await asyncio.sleep(0)
            assert ref() is None, kind
    finally:
        gc.enable()
    rmr.close()
    await ep.close()
    await srv.close()


def test_default_context_freed_after_asyncio_run():
    """The default context (get_context(), what connect/listen/join use
    without ctx=) of a loop that asyncio.run() ended: nobody can close it
    any more, and with everything of it closed it is freed once the loop
    is gone, instead of staying (its device, pools and fds) for the life
    of the process, one per asyncio.run()."""
    before = rdmamsg.live_contexts()

    async def once():
        async with await rdmamsg.start_server(echo_handler,
                                              "127.0.0.1:0") as srv:
            async with await rdmamsg.connect(("127.0.0.1", srv.port)) as ep:
                await ep.send(b"x")
                assert await ep.recv_bytes() == b"x"
        assert rdmamsg.live_contexts() == before + 1

    for _ in range(3):
        asyncio.run(once())
        gc.collect()
        assert rdmamsg.live_contexts() == before
