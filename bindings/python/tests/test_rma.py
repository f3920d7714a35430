"""One-sided write/read/atomics on registered memoryviews."""
import asyncio
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
