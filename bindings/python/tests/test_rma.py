"""One-sided write/read/atomics on registered memoryviews."""
import asyncio
import errno
import struct

import pytest

import rdmamsg
from conftest import pattern


async def _pair(a, b):
    async with await rdmamsg.listen("127.0.0.1:0", ctx=a) as lst:
        cli = asyncio.ensure_future(rdmamsg.connect(("127.0.0.1", lst.port),
                                                    ctx=b))
        srv = await lst.accept()
        return srv, await cli


async def test_write_read_atomics(ctxs):
    a, b = ctxs
    srv, ep = await _pair(a, b)
    target = bytearray(1 << 16)
    acc = (rdmamsg.ACCESS_REMOTE_READ | rdmamsg.ACCESS_REMOTE_WRITE |
           rdmamsg.ACCESS_REMOTE_ATOMIC)
    with a.register(target, acc) as tmr:
        # the export travels as an ordinary message
        await srv.send(tmr.export())
        export = await ep.recv_bytes()
        assert len(export) == rdmamsg.MR_EXPORT_SIZE
        rmr = rdmamsg.RemoteRegion(export)
        assert rmr.size == len(target)
        src = bytearray(pattern(1 << 16, 1))
        with b.register(src) as lmr:
            await ep.write(lmr, rmr, offset=100, remote_offset=200,
                           length=5000)
            assert target[200:5200] == src[100:5100]
            await ep.write(lmr, rmr, length=64, imm=77)
            assert await srv.wait_write_imm() == (77, 64)
            target[0:8] = b"remote!!"
            await ep.read(lmr, rmr, offset=1000, length=8)
            assert src[1000:1008] == b"remote!!"
            # out of bounds is refused locally, nothing posted
            with pytest.raises(rdmamsg.OutOfRange):
                await ep.write(lmr, rmr, remote_offset=len(target) - 10,
                               length=100)
            with pytest.raises(ValueError):
                await ep.read(lmr, rmr, offset=-1, length=1)
        struct.pack_into("<Q", target, 64, 40)
        assert await ep.atomic_fadd(rmr, 64, 2) == 40
        assert struct.unpack_from("<Q", target, 64)[0] == 42
        assert await ep.atomic_cas(rmr, 64, 42, 7) == 42
        assert await ep.atomic_cas(rmr, 64, 42, 9) == 7  # no swap
        assert struct.unpack_from("<Q", target, 64)[0] == 7
        with pytest.raises(rdmamsg.InvalidArgument):
            await ep.atomic_fadd(rmr, 3, 1)  # misaligned
        rmr.close()
    # read-only registrations: no RDMA read into them; exports say no write
    ro = b.register(bytes(64), rdmamsg.ACCESS_REMOTE_READ)
    with pytest.raises(TypeError):
        await ep.read(ro, rdmamsg.RemoteRegion(ro.export()))
    wr = a.register(bytearray(64), rdmamsg.ACCESS_REMOTE_READ)
    await srv.send(wr.export())
    rmr = rdmamsg.RemoteRegion(await ep.recv_bytes())
    with pytest.raises(PermissionError):
        await ep.write(ro, rmr)
    ro.close()
    wr.close()
    await ep.close()
    await srv.close()


@pytest.mark.parametrize("umr", [True, False])
async def test_regions_of_pieces(umr, monkeypatch):
    """ctx.register_iov / register_strided (rdmamsg_mr_reg_iov/_strided):
    with UMR a peer writes and reads all the pieces in one operation
    through the export; without (RDMAMSG_NO_UMR=1) there is no export,
    and locally a range of at most 2 pieces is the source of a write."""
    if umr:
        monkeypatch.delenv("RDMAMSG_NO_UMR", raising=False)
    else:
        monkeypatch.setenv("RDMAMSG_NO_UMR", "1")
    acc = rdmamsg.ACCESS_REMOTE_READ | rdmamsg.ACCESS_REMOTE_WRITE
    async with rdmamsg.Context() as a, rdmamsg.Context() as b:
        if umr and a.query_cap("umr") is None:
            pytest.skip("the device has no UMR")
        srv, ep = await _pair(a, b)
        pieces = [bytearray(100), bytearray(300), bytearray(57)]
        mr = a.register_iov(pieces, acc)
        assert mr.size == 457 and mr.view is None
        assert mr.layout == ("umr" if umr else "sge")
        spread = bytearray(64 * 10)
        smr = a.register_strided(spread, 16, 64, 10, acc)
        assert smr.size == 160 and smr.layout == mr.layout
        src = bytearray(pattern(1000, 3))
        lmr = b.register(src, acc)
        assert lmr.layout == "contig"
        if umr:
            rmr = rdmamsg.RemoteRegion(mr.export())
            assert rmr.size == 457
            await ep.write(lmr, rmr, length=457)
            assert b"".join(pieces) == src[:457]
            rs = rdmamsg.RemoteRegion(smr.export())
            await ep.write(lmr, rs, offset=500, length=160)
            for i in range(10):
                assert spread[i * 64:i * 64 + 16] == \
                    src[500 + i * 16:516 + i * 16]
                assert spread[i * 64 + 16:(i + 1) * 64] == bytes(48)
            dst = bytearray(457)
            with b.register(dst) as dmr:
                await ep.read(dmr, rmr)
            assert dst == b"".join(pieces)
            rmr.close()
            rs.close()
        else:
            for r in (mr, smr):
                with pytest.raises(OSError) as ei:
                    r.export()
                assert ei.value.errno == errno.ENOTSUP
        # locally, both layouts: 2 pieces (50 bytes of the first, 150 of
        # the second) as the source of a write
        for i, p in enumerate(pieces):
            p[:] = pattern(len(p), 10 + i)
        target = bytearray(1000)
        tmr = b.register(target, acc)
        trmr = rdmamsg.RemoteRegion(tmr.export())
        await srv.write(mr, trmr, offset=50, length=200, remote_offset=8)
        assert target[8:208] == pieces[0][50:] + pieces[1][:150]
        if not umr:  # 3 pieces: not as an SGE list of 2
            with pytest.raises(OSError) as ei:
                await srv.write(mr, trmr, length=457)
            assert ei.value.errno == errno.ENOTSUP
        for r in (mr, smr, lmr, tmr):
            r.close()
        trmr.close()
        await ep.close()
        await srv.close()
        assert not a._mrs and not b._mrs


@pytest.mark.parametrize("call,exc", [
    (lambda c: c.register_iov([]), rdmamsg.InvalidArgument),
    (lambda c: c.register_iov([b"", b"x"]), rdmamsg.InvalidArgument),
    (lambda c: c.register_iov([bytearray(1)] * 1025),
     rdmamsg.InvalidArgument),
    (lambda c: c.register_iov(b"abc"), TypeError),
    (lambda c: c.register_iov([None]), TypeError),
    (lambda c: c.register_iov(5), TypeError),
    (lambda c: c.register_strided(bytearray(64), 16, 8, 2),
     rdmamsg.InvalidArgument),                      # stride < block
    (lambda c: c.register_strided(bytearray(64), 16, 64, 0),
     rdmamsg.InvalidArgument),
    (lambda c: c.register_strided(bytearray(64), 0, 64, 1),
     rdmamsg.InvalidArgument),
    (lambda c: c.register_strided(bytearray(64), 16, 64, 2), ValueError),
    (lambda c: c.register_strided(bytearray(64), 16, 1 << 62, 3),
     ValueError),                                   # past the buffer
    (lambda c: c.register_strided(bytearray(64), -1, 64, 1), ValueError),
    (lambda c: c.register_strided(bytearray(64), 16, 64, "1"), TypeError),
])
async def test_regions_of_pieces_bad_input(call, exc):
    async with rdmamsg.Context() as a:
        with pytest.raises(exc):
            call(a)
        assert not a._mrs  # nothing half registered


async def test_read_only_memory_refuses_remote_write(ctxs):
    """Read-only memory (bytes, a read-only view) registered with remote
    write or atomic access would let a peer change an immutable object:
    refused with TypeError, nothing registered; remote read is fine."""
    a, b = ctxs
    frozen = bytes(64)
    for acc in (rdmamsg.ACCESS_REMOTE_WRITE, rdmamsg.ACCESS_REMOTE_ATOMIC,
                rdmamsg.ACCESS_REMOTE_READ | rdmamsg.ACCESS_REMOTE_WRITE):
        with pytest.raises(TypeError, match="read-only"):
            a.register(frozen, acc)
        with pytest.raises(TypeError, match="read-only"):
            a.register(memoryview(bytearray(64)).toreadonly(), acc)
        with pytest.raises(TypeError, match="read-only"):
            a.register_iov([bytearray(64), frozen], acc)
        with pytest.raises(TypeError, match="read-only"):
            a.register_strided(frozen, 8, 16, 4, acc)
    assert not a._mrs  # nothing half registered
    srv, ep = await _pair(a, b)
    # what the peer could do with such an export: change the bytes object
    with a.register(frozen, rdmamsg.ACCESS_REMOTE_READ) as mr:
        await srv.send(mr.export())
        rmr = rdmamsg.RemoteRegion(await ep.recv_bytes())
        with b.register(bytearray(b"x" * 64)) as lmr:
            with pytest.raises(PermissionError):
                await ep.write(lmr, rmr)
            await ep.read(lmr, rmr)  # reading it is what it is for
            assert lmr.view == bytes(64)
    assert frozen == bytes(64)
    await ep.close()
    await srv.close()


async def test_closed_region_lets_its_buffer_go(ctxs):
    """A registered buffer is held (a bytearray cannot be resized, a
    memoryview not released) until the region is deregistered, not until
    the MemoryRegion object is collected: close() (or dereg()) gives it
    back to the caller.  (alloc_region()'s view, memory of the region's
    own, outlives close(): test_nocopy.py::test_alloc_region.)"""
    a, _ = ctxs
    ba = bytearray(64)
    mr = a.register(ba, rdmamsg.ACCESS_REMOTE_READ)
    with pytest.raises(BufferError):
        ba.extend(b"x")  # registered: the library may use it
    mr.close()
    ba.extend(b"x")  # deregistered: the caller's again
    mv = memoryview(bytearray(64))
    mr = a.register(mv)
    mr.dereg()
    mv.release()
    pieces = [bytearray(16), bytearray(16)]
    a.register_iov(pieces).close()
    for p in pieces:
        p.extend(b"x")
    strided = bytearray(64)
    a.register_strided(strided, 8, 16, 4).close()
    strided.extend(b"x")
    assert not a._mrs
