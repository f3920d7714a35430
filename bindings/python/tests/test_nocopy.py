"""ep.send_nocopy(): rdmamsg_send_nocopy from registered memory.

Above the rendezvous threshold, bytes inside a region registered with
ACCESS_REMOTE_READ are read by the peer where they are; anything else is
copied as send() copies it.  The peer runs on another context of the same
loop, so it cannot read before the test yields: changing the bytes right
after the post (the caller's error, done here on purpose) shows which
path a send took, since a copy keeps the old bytes and a read in place
finds the new ones.
"""
import asyncio
import gc
import weakref

import pytest

import rdmamsg
from conftest import pattern

THRESH = 8192  # rndv_threshold of the sending side


async def _pair(a, b, **options):
    async with await rdmamsg.listen("127.0.0.1:0", ctx=a) as lst:
        cli = asyncio.ensure_future(rdmamsg.connect(
            ("127.0.0.1", lst.port), ctx=b, rndv_threshold=THRESH,
            **options))
        srv = await lst.accept()
        ep = await cli
    assert ep.protocols.rndv_threshold == THRESH
    return srv, ep


async def _posted(coro):
    """A task of coro that has run to its first wait (the send is
    posted); the peer has not run since."""
    task = asyncio.ensure_future(coro)
    await asyncio.sleep(0)
    assert not task.done()
    return task


async def _wait_for(cond, what, timeout=30.0):
    end = asyncio.get_running_loop().time() + timeout
    while not cond():
        assert asyncio.get_running_loop().time() < end, what
        await asyncio.sleep(0.005)


@pytest.mark.parametrize("size", [THRESH - 1, THRESH, THRESH + 1,
                                  (1 << 20) + 1])
async def test_sizes_around_threshold(ctxs, size):
    """Data intact at the threshold +-1 and past the eager maximum; above
    the threshold the peer reads the region in place, at or below it the
    bytes were copied at the post."""
    a, b = ctxs
    srv, ep = await _pair(a, b)
    region = bytearray(size + 4096)
    with b.register(region, rdmamsg.ACCESS_REMOTE_READ) as mr:
        off = 100
        view = mr.view[off:off + size]
        for round_ in range(2):  # the region is reused: no stale state
            view[:] = pattern(size, round_)
            await ep.send_nocopy(view)
            got = await srv.recv_msg()
            assert len(got) == size and got.data == pattern(size, round_)
            got.release()
        view[:] = pattern(size, 7)
        task = await _posted(ep.send_nocopy(view))
        view[:] = pattern(size, 8)  # the caller's error: before on_send
        got = await srv.recv_msg()
        await task
        in_place = size > THRESH
        assert got.data == pattern(size, 8 if in_place else 7)
        got.release()
        assert mr._inflight == 0
    await ep.close()
    await srv.close()


async def test_unregistered_and_unreadable_buffers_are_copied(ctxs):
    """A buffer outside every region, or in one the peer may not read,
    falls back to the copy: the peer gets the bytes of the post."""
    a, b = ctxs
    srv, ep = await _pair(a, b)
    size = 4 * THRESH
    plain = bytearray(pattern(size, 1))
    local = bytearray(size)
    with b.register(local) as mr:  # no ACCESS_REMOTE_READ
        for buf in (plain, mr.view, memoryview(plain)[10:]):
            buf[:] = pattern(len(buf), 2)
            task = await _posted(ep.send_nocopy(buf))
            buf[:] = pattern(len(buf), 3)
            got = await srv.recv_bytes()
            await task
            assert got == pattern(len(buf), 2)
        assert mr._inflight == 0
    # bytes (read-only) and immediate values
    await ep.send_nocopy(pattern(size, 4), imm=0xDEADBEEF)
    got = await srv.recv_msg()
    assert got.data == pattern(size, 4) and got.imm == 0xDEADBEEF
    await ep.close()
    await srv.close()


async def test_imm_and_pool_buffer(ctxs):
    """An immediate value with a read in place; a PoolBuffer goes as
    send() sends it (without a copy, and the library's afterwards)."""
    a, b = ctxs
    srv, ep = await _pair(a, b)
    region = bytearray(3 * THRESH)
    with b.register(region, rdmamsg.ACCESS_REMOTE_READ) as mr:
        mr.view[:] = pattern(len(region), 5)
        await ep.send_nocopy(mr.view, imm=42)
        got = await srv.recv_msg()
        assert got.data == pattern(len(region), 5) and got.imm == 42
        got.release()
    buf = b.alloc(1000)
    buf.view[:1000] = pattern(1000, 6)
    buf.nbytes = 1000
    await ep.send_nocopy(buf)
    assert await srv.recv_bytes() == pattern(1000, 6)
    with pytest.raises(ValueError):  # sent: it is the library's
        await ep.send_nocopy(buf)
    await ep.close()
    await srv.close()


async def test_cancel_in_flight(ctxs):
    """Cancelling the await ends the task once with CancelledError; the
    message still arrives whole, the binding holds the bytes and keeps the
    region registered (close() waits) until the library's on_send, and
    the endpoint stays usable."""
    a, b = ctxs
    srv, ep = await _pair(a, b)
    size = 16 * THRESH
    region = bytearray(size)
    mr = b.register(region, rdmamsg.ACCESS_REMOTE_READ)
    view = mr.view[:]
    view[:] = pattern(size, 9)
    ends = []

    async def sender(v):
        try:
            await ep.send_nocopy(v)
        finally:
            ends.append(1)

    task = await _posted(sender(view))
    held = weakref.ref(view)
    del view
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert ends == [1]
    gc.collect()
    assert held() is not None  # the library may still read it
    assert mr._inflight == 1
    mr.close()  # waits for the transfer
    assert mr._mrp[0] != rdmamsg._core.ffi.NULL
    got = await srv.recv_msg()
    assert got.data == pattern(size, 9)
    got.release()
    await _wait_for(lambda: mr._inflight == 0, "on_send of the transfer")
    gc.collect()
    assert held() is None
    assert mr._mrp[0] == rdmamsg._core.ffi.NULL and mr not in b._mrs
    assert ends == [1]  # finished exactly once
    await ep.send(b"after")  # still usable
    assert await srv.recv_bytes() == b"after"
    await ep.close()
    await srv.close()


async def test_dereg_refused_while_read(ctxs):
    """mr.dereg() while the peer reads the region: Busy (BlockingIOError,
    EBUSY) and the region stays registered and intact; after the send
    completed it deregisters."""
    a, b = ctxs
    srv, ep = await _pair(a, b)
    size = 4 * THRESH
    region = bytearray(pattern(size, 11))
    mr = b.register(region, rdmamsg.ACCESS_REMOTE_READ)
    task = await _posted(ep.send_nocopy(mr.view))
    with pytest.raises(rdmamsg.Busy) as ei:
        mr.dereg()
    assert isinstance(ei.value, BlockingIOError)
    assert mr._mrp[0] != rdmamsg._core.ffi.NULL and mr in b._mrs
    got = await srv.recv_msg()
    await task
    assert got.data == pattern(size, 11)
    got.release()
    mr.dereg()
    assert mr._mrp[0] == rdmamsg._core.ffi.NULL and mr not in b._mrs
    mr.dereg()  # again: nothing
    mr.close()
    await ep.close()
    await srv.close()


async def test_close_with_nocopy_in_flight(ctxs):
    """Closing the endpoint with transfers in flight: each awaiting task
    ends once, with the message delivered or OperationCanceled, and the
    region is free afterwards."""
    a, b = ctxs
    srv, ep = await _pair(a, b)
    size = 4 * THRESH
    region = bytearray(8 * size)
    mr = b.register(region, rdmamsg.ACCESS_REMOTE_READ)
    tasks = [asyncio.ensure_future(ep.send_nocopy(mr.view[i * size:
                                                          (i + 1) * size]))
             for i in range(8)]
    await asyncio.sleep(0)
    await ep.close()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    for r in results:
        assert r is None or isinstance(r, rdmamsg.OperationCanceled), r
    assert mr._inflight == 0
    mr.dereg()
    await srv.close()


async def test_track_sends_off_is_send(ctxs):
    """Without completions (track_sends=False) it is send()."""
    a, b = ctxs
    srv, ep = await _pair(a, b, track_sends=False)
    size = 2 * THRESH
    region = bytearray(pattern(size, 12))
    with b.register(region, rdmamsg.ACCESS_REMOTE_READ) as mr:
        await ep.send_nocopy(mr.view)
        assert await srv.recv_bytes() == pattern(size, 12)
        assert mr._inflight == 0
    await ep.close()
    await srv.close()


async def test_bad_input(ctxs):
    a, b = ctxs
    srv, ep = await _pair(a, b, max_msg_size=1 << 16,
                          max_large_size=1 << 20)
    assert ep.protocols.max_large == 1 << 20
    with pytest.raises(TypeError):
        await ep.send_nocopy(None)
    with pytest.raises(TypeError):
        await ep.send_nocopy("text")
    with pytest.raises((ValueError, TypeError, BufferError)):
        await ep.send_nocopy(memoryview(pattern(100))[::2])
    with pytest.raises(OverflowError):
        await ep.send_nocopy(b"x", imm=1 << 32)
    big = bytearray(ep.protocols.max_large + 1)
    with b.register(big, rdmamsg.ACCESS_REMOTE_READ) as mr:
        with pytest.raises(rdmamsg.MessageTooLarge):
            await ep.send_nocopy(mr.view)
        assert mr._inflight == 0
    await ep.send_nocopy(b"ok")  # nothing went wrong before
    assert await srv.recv_bytes() == b"ok"
    await ep.close()
    with pytest.raises(rdmamsg.NotConnected):
        await ep.send_nocopy(b"late")
    await srv.close()


def _memfd_maps():
    with open("/proc/self/maps") as f:
        return sum("/memfd:rdmamsg-mr" in line for line in f)


async def test_alloc_region(ctxs):
    """ctx.alloc_region(): zeroed memory of the size asked, in a memfd
    mapping of its own, registered: send_nocopy() from it is read in
    place above the threshold; its view outlives close(); a size below 1
    or an unknown access flag is refused, leaving no region."""
    a, b = ctxs
    for bad in (0, -1):
        with pytest.raises(rdmamsg.InvalidArgument):
            b.alloc_region(bad)
    with pytest.raises(rdmamsg.InvalidArgument):  # an unknown access flag
        b.alloc_region(8, 0x100)
    assert not b._mrs
    srv, ep = await _pair(a, b)
    size = 3 * THRESH + 5
    before = _memfd_maps()
    mr = b.alloc_region(size, rdmamsg.ACCESS_REMOTE_READ)
    assert len(mr.view) == size and not mr.view.readonly
    assert bytes(mr.view) == bytes(size)
    assert _memfd_maps() == before + 1
    mr.view[:] = pattern(size, 12)
    task = await _posted(ep.send_nocopy(mr.view))
    mr.view[:] = pattern(size, 13)  # the caller's error: read in place
    got = await srv.recv_msg()
    await task
    assert got.data == pattern(size, 13)
    got.release()
    view = mr.view
    mr.close()
    assert mr._mrp[0] == rdmamsg._core.ffi.NULL and mr not in b._mrs
    view[:4] = b"live"  # the memory is Python's: still there
    assert bytes(view[:4]) == b"live"
    await ep.close()
    await srv.close()
