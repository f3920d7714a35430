"""C API the binding exposes beyond the basics: the rendezvous threshold
and ep.protocols (rdmamsg_ep_attr_set_rndv_threshold,
rdmamsg_ep_get_protocols, rdmamsg_ep_get_pack_limit), gather sends (rdmamsg_sendv), the DC transport
and its counters (rdmamsg_ep_attr_set_transport, rdmamsg_ctx_dc_stats),
the ACK timeout (rdmamsg_ep_attr_set_ack_timeout); each with its bad
input."""
import asyncio

import pytest

import rdmamsg
from conftest import echo_handler, pattern

WAIT = 60


async def test_protocols_and_rndv_threshold(ctxs):
    """rndv_threshold=4096 on both sides shows in ep.protocols; messages
    on each side of it (and of eager and inline) echo intact."""
    a, b = ctxs
    async with await rdmamsg.start_server(echo_handler, "127.0.0.1:0",
                                          ctx=a, rndv_threshold=4096) as srv:
        ep = await rdmamsg.connect(("127.0.0.1", srv.port), ctx=b,
                                   rndv_threshold=4096, connect_timeout=60)
        pr = ep.protocols
        assert isinstance(pr, rdmamsg.Protocols)
        assert pr.rndv_threshold == 4096
        assert 0 <= pr.max_inline <= pr.eager <= pr.max_msg <= pr.max_large
        assert isinstance(pr.rndv_window, bool)
        sizes = [1, pr.max_inline, pr.max_inline + 1, 4095, 4096, 4097,
                 pr.eager, pr.eager + 1, 100000]
        for i, sz in enumerate(sizes):
            await ep.send(pattern(sz, i))
            assert await ep.recv_bytes() == pattern(sz, i)
        # packing (rdmamsg_ep_get_pack_limit): peers of this version pack
        # messages up to RDMAMSG_PACK_MAX (1024) with an eager size of
        # 4 KiB or more
        assert ep.pack_limit == 1024
        await ep.close()
        with pytest.raises(rdmamsg.NotConnected):
            ep.protocols
        with pytest.raises(rdmamsg.NotConnected):
            ep.pack_limit
        # the default threshold
        ep = await rdmamsg.connect(("127.0.0.1", srv.port), ctx=b,
                                   connect_timeout=60)
        assert ep.protocols.rndv_threshold >= 64
        await ep.close()
        # below the library's minimum; negative; not a number
        with pytest.raises(rdmamsg.InvalidArgument):
            await rdmamsg.connect(("127.0.0.1", srv.port), ctx=b,
                                  rndv_threshold=10)
        with pytest.raises(ValueError):
            await rdmamsg.connect(("127.0.0.1", srv.port), ctx=b,
                                  rndv_threshold=-1)
        with pytest.raises(ValueError):
            await rdmamsg.connect(("127.0.0.1", srv.port), ctx=b,
                                  rndv_threshold="4k")
        with pytest.raises(TypeError):
            await rdmamsg.connect(("127.0.0.1", srv.port), ctx=b,
                                  rndv_threshold=[4096])


async def test_ack_timeout(ctxs):
    """ack_timeout (rdmamsg_ep_attr_set_ack_timeout) on both sides: the
    connection works; above 31 is refused, negative and non-numbers too
    (tests/core/acktimeout checks the QP's value)."""
    a, b = ctxs
    async with await rdmamsg.start_server(echo_handler, "127.0.0.1:0",
                                          ctx=a, ack_timeout=15) as srv:
        ep = await rdmamsg.connect(("127.0.0.1", srv.port), ctx=b,
                                   ack_timeout=14, connect_timeout=60)
        await ep.send(pattern(100, 7))
        assert await ep.recv_bytes() == pattern(100, 7)
        await ep.close()
        with pytest.raises(rdmamsg.InvalidArgument):
            await rdmamsg.connect(("127.0.0.1", srv.port), ctx=b,
                                  ack_timeout=32)
        with pytest.raises(ValueError):
            await rdmamsg.connect(("127.0.0.1", srv.port), ctx=b,
                                  ack_timeout=-1)
        with pytest.raises(TypeError):
            await rdmamsg.connect(("127.0.0.1", srv.port), ctx=b,
                                  ack_timeout=[14])


async def test_sendv(ctxs):
    """sendv() sends the concatenation of its pieces as one message
    (bytes, bytearray, memoryview; empty pieces; a total that goes by
    rendezvous); sendv_nowait() too; bad pieces are refused and nothing
    is sent."""
    a, b = ctxs
    async with await rdmamsg.start_server(echo_handler, "127.0.0.1:0",
                                          ctx=a) as srv:
        ep = await rdmamsg.connect(("127.0.0.1", srv.port), ctx=b,
                                   connect_timeout=60)
        cases = [
            [b"ab", bytearray(b"cd"), memoryview(b"ef")],
            [b"x"],
            [b"", b"y", b""],
            [pattern(3000, 1), pattern(5000, 2)],
            [pattern(40000, 3), b"-", pattern(70000, 4)],
            [bytes([i]) for i in range(256)] * 4,  # 1,024 pieces
        ]
        for pieces in cases:
            await ep.sendv(pieces)
            assert await ep.recv_bytes() == b"".join(pieces)
        ep.sendv_nowait((b"tu", b"ple"))
        assert await ep.recv_bytes() == b"tuple"
        with pytest.raises(rdmamsg.InvalidArgument):
            await ep.sendv([])
        with pytest.raises(rdmamsg.InvalidArgument):
            await ep.sendv([b"z"] * (rdmamsg.IOV_MAX + 1))
        for bad in (b"abc", "abc", 5, None):
            with pytest.raises(TypeError):
                await ep.sendv(bad)
        with pytest.raises(TypeError):
            await ep.sendv([b"ok", None])
        with pytest.raises(TypeError):
            ep.sendv_nowait([b"ok", 3])
        # none of the refused ones went out: the next message is next
        await ep.send(b"after")
        assert await ep.recv_bytes() == b"after"
        await ep.close()
        with pytest.raises(rdmamsg.NotConnected):
            await ep.sendv([b"closed"])


async def test_transport_dc(ctxs):
    """transport="dc" with an SRQ: messages and requests as over RC;
    dc_stats() counts the endpoint; bad transports are refused, DC
    without an SRQ is InvalidArgument."""
    a, b = ctxs
    if b.query_cap("dc") is None:
        with pytest.raises(rdmamsg.NotSupported):
            b.dc_stats()
        pytest.skip("the device has no DC")
    srq_a = a.create_srq(256)
    srq_b = b.create_srq(256)
    async with await rdmamsg.start_server(
            echo_handler, "127.0.0.1:0", ctx=a, srq=srq_a,
            request_handler=lambda d: bytes(d)[::-1]) as srv:
        with pytest.raises(rdmamsg.InvalidArgument):
            await rdmamsg.connect(("127.0.0.1", srv.port), ctx=b,
                                  transport="dc")
        ep = await rdmamsg.connect(("127.0.0.1", srv.port), ctx=b,
                                   transport="dc", srq=srq_b,
                                   connect_timeout=60)
        st = b.dc_stats()
        assert isinstance(st, rdmamsg.DcStats)
        assert st.endpoints >= 1 and st.dcis >= 1
        for i in range(50):
            m = pattern(1 + (i * 331) % 20000, i)
            await ep.send(m)
            assert await ep.recv_bytes() == m
        assert await ep.request(b"abc", timeout=WAIT) == b"cba"
        await ep.close()
        for bad, exc in (("xx", ValueError), (1, TypeError),
                         (None, None)):
            if exc is None:  # None: the default (RC)
                ep = await rdmamsg.connect(("127.0.0.1", srv.port), ctx=b,
                                           transport=bad, connect_timeout=60)
                await ep.send(b"rc")
                assert await ep.recv_bytes() == b"rc"
                await ep.close()
                continue
            with pytest.raises(exc):
                await rdmamsg.connect(("127.0.0.1", srv.port), ctx=b,
                                      transport=bad)
    await srq_b.close()
    await srq_a.close()
