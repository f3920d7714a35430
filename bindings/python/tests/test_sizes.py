"""Messages of every size class arrive whole and intact; zero-copy paths."""
import asyncio
import gc

import pytest

import rdmamsg
from conftest import echo_handler, pattern

# 0 B, small, around 256 B (an inline limit the library's probe may settle
# on with a device; softrdma grants up to 16 KiB, and the probe asks for
# 8 KiB and the 16-byte header: up to 8192 B goes inline there), send ring,
# eager 8 KiB, fragmented (64 KiB, 1 MiB = the eager maximum), and
# rendezvous above it (sent from a temporary registration from 4 MiB).
SIZES = [0, 1, 8, 200, 256, 257, 4096, 8191, 8192, 8193, 65536, 1 << 20,
         (1 << 20) + 1, 3 << 20, 5 << 20]


@pytest.mark.parametrize("size", SIZES)
async def test_echo_size(echo, size):
    _, ep = echo
    data = pattern(size, size & 0xFF)
    await ep.send(data)
    got = await ep.recv_msg()
    assert len(got) == size
    assert got.data == data
    assert got.large == (size > ep.max_msg_size)
    got.release()


async def test_sizes_from_any_buffer(echo):
    _, ep = echo
    import array
    for obj in (bytearray(pattern(5000)), memoryview(pattern(70000))[100:],
                array.array("i", range(1000))):
        await ep.send(obj)
        assert (await ep.recv_bytes()) == bytes(obj)
    # a non-contiguous view cannot be sent without a copy: refused
    with pytest.raises((ValueError, TypeError, BufferError)):
        await ep.send(memoryview(pattern(100))[::2])


async def test_zero_copy_receive_and_release(ctxs):
    """keep_threshold=0: every message stays in its pool buffer until the
    view goes; the pool gets each buffer back."""
    a, b = ctxs
    srv = await rdmamsg.start_server(echo_handler, "127.0.0.1:0", ctx=a)
    ep = await rdmamsg.connect(("127.0.0.1", srv.port), ctx=b,
                               keep_threshold=0)
    # warm-up at every size: the endpoint takes its copy and reassembly
    # buffers on first use and keeps them, so the baseline includes them;
    # a copy buffer belongs to a send slot, and which slots a send uses
    # depends on what went before (rendezvous control messages take
    # some), so every one of the 128 slots gets its buffer first
    for size in (7, 100, 4096, 8192, 65536, 1 << 20):
        await ep.send(pattern(size, 2))
        assert await ep.recv_bytes() == pattern(size, 2)
    for i in range(2 * 128):
        await ep.send(pattern(8192, i))
        assert await ep.recv_bytes() == pattern(8192, i)
    gc.collect()
    # measured outside the library's pass: a task woken inside it (where
    # the message being delivered still holds its buffer) goes on from here
    await asyncio.sleep(0)
    base = b.query_pool()[1]
    views = []
    for size in (1, 100, 4096, 8192, 65536, 1 << 20):
        data = pattern(size, 3)
        await ep.send(data)
        v = await ep.recv()
        assert v == data
        assert not isinstance(v.obj, bytes)  # over the pool, not a copy
        views.append(v)
    assert b.query_pool()[1] > base
    held = views[-1]
    for v in views[:-1]:
        v.release()  # released explicitly
    views.clear()
    del v
    assert held == pattern(1 << 20, 3)  # still valid while referenced
    del held  # released by collection
    gc.collect()
    await asyncio.sleep(0)
    assert b.query_pool()[1] == base
    await ep.close()
    srv.close()
    await srv.wait_closed()


async def test_pool_buffer_send(echo, ctxs):
    _, ep = echo
    _, b = ctxs
    buf = b.alloc(10000)
    assert buf.size >= 10000
    data = pattern(10000, 9)
    buf.view[:10000] = data
    buf.nbytes = 10000
    await ep.send(buf)
    assert await ep.recv() == data
    with pytest.raises(ValueError):  # it belongs to the library now
        await ep.send(buf)
    unused = b.alloc(100)
    unused.close()
    unused.close()



async def test_pool_buffer_slice_outlives_close():
    """A slice of a PoolBuffer's view taken before close() (or before the
    buffer is collected) keeps the memory: the pool buffer goes back only
    when the last view over it goes, so writing through the slice never
    lands in another buffer, and the context's close() waits for it."""
    b = rdmamsg.Context()
    buf = b.alloc(100)
    s = buf.view[:8]
    buf.close()
    with pytest.raises(ValueError):  # the buffer's own view is released
        buf.view[0]
    other = b.alloc(100)
    other.view[:8] = b"BBBBBBBB"
    s[:] = b"AAAAAAAA"
    assert bytes(other.view[:8]) == b"BBBBBBBB"
    other.close()
    gone = b.alloc(100)
    s2 = gone.view[2:6]
    del gone  # collected unsent: the same
    s2[:] = b"CCCC"
    closing = asyncio.ensure_future(b.close())
    await asyncio.sleep(0.2)
    assert not closing.done()  # the slices still hold pool memory
    del s, s2
    await asyncio.wait_for(closing, 30)


async def test_pool_buffer_send_refused_while_viewed(echo, ctxs):
    """A sent PoolBuffer is the library's, which gives it back to the pool
    once the send completed and hands it out again: a slice of buf.view
    (or another view or export of it) still referenced would then read
    and write another buffer's bytes.  A send while one is referenced
    raises ValueError, sends nothing and leaves the buffer the caller's
    (buf.view usable); without them it goes."""
    _, ep = echo
    _, b = ctxs
    buf = b.alloc(100)
    s = buf.view[:5]
    s[:] = b"hello"
    buf.nbytes = 5
    m = memoryview(buf.view)
    for holder in ("slice", "view of the view", "export"):
        if holder == "view of the view":
            del s
        elif holder == "export":
            del m
            x = b.register(buf.view)  # holds an export of buf.view
        with pytest.raises(ValueError, match="view"):
            await ep.send(buf)
        with pytest.raises(ValueError, match="view"):
            ep.send_nowait(buf)
        with pytest.raises(ValueError, match="view"):
            await ep.send_nocopy(buf)
        assert bytes(buf.view[:5]) == b"hello"  # still the caller's
    x.close()
    del x
    await ep.send(buf)
    assert await ep.recv_bytes() == b"hello"
    # nothing went before it
    await ep.send(b"next")
    assert await ep.recv_bytes() == b"next"


async def test_send_nowait_large_buffer_reusable_at_once(echo):
    """send_nowait() returns with nothing to wait for: the caller may
    reuse its buffer at once, as after rdmamsg_send(), whatever the size:
    from SEND_MR_THRESHOLD (4 MiB) up a mutable buffer is not read in
    place by the peer later (send() does that, and returns once the peer
    has it), so what the peer gets is what was there at the call.  bytes,
    which cannot change, still go without a copy."""
    _, ep = echo
    size = rdmamsg._core.SEND_MR_THRESHOLD + 1000
    for make in (bytearray, lambda b: memoryview(bytearray(b))):
        buf = make(pattern(size, 1))
        ep.send_nowait(buf)
        buf[:] = pattern(size, 2)  # reused at once
        assert await ep.recv_bytes() == pattern(size, 1)
    frozen = pattern(size, 3)
    ep.send_nowait(frozen)
    assert await ep.recv_bytes() == frozen


async def test_untracked_sends(ctxs):
    """track_sends=False (selectively signalled sends): every size class
    still arrives whole, in order; back-pressure still applies."""
    a, b = ctxs
    srv = await rdmamsg.start_server(echo_handler, "127.0.0.1:0", ctx=a,
                                     track_sends=False)
    ep = await rdmamsg.connect(("127.0.0.1", srv.port), ctx=b,
                               track_sends=False, send_backlog=4)
    for size in SIZES:
        data = pattern(size, 11)
        await ep.send(data)
        assert await ep.recv() == data
    n = 2000
    for i in range(n):
        try:
            ep.send_nowait(b"%d" % i)
        except BlockingIOError:
            await ep.wait_writable()
            ep.send_nowait(b"%d" % i)
    assert [await ep.recv_bytes() for _ in range(n)] == \
        [b"%d" % i for i in range(n)]
    await ep.close()
    srv.close()
    await srv.wait_closed()
