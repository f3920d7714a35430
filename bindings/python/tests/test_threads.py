"""A context and its objects belong to the event loop (and its thread) that
made the context, as the C objects belong to the thread that drives it:
calls from another thread or another loop are refused with RuntimeError
before anything reaches the library (nothing sent, nothing closed), and
objects collected in another thread are closed from their own."""
import asyncio
import gc
import threading

import pytest

import rdmamsg


async def _pair(a, b):
    async with await rdmamsg.listen("127.0.0.1:0", ctx=a) as lst:
        cli = asyncio.ensure_future(rdmamsg.connect(("127.0.0.1", lst.port),
                                                    ctx=b))
        srv = await lst.accept()
        return srv, await cli


async def _in_thread(fn):
    """fn() in a thread of its own, the loop running meanwhile."""
    out = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    while t.is_alive():
        await asyncio.sleep(0.01)
    t.join()
    return out[0]


def _outcome(call):
    try:
        call()
    except RuntimeError as exc:
        return str(exc)
    except BaseException as exc:  # another error: not refused as asked
        return repr(exc)
    return "done"


async def test_endpoint_refuses_other_loops_and_threads(ctxs):
    a, b = ctxs
    srv, ep = await _pair(a, b)
    lmr = b.register(bytearray(64))
    tmr = a.register(bytearray(64), rdmamsg.ACCESS_REMOTE_WRITE |
                     rdmamsg.ACCESS_REMOTE_READ)
    rmr = rdmamsg.RemoteRegion(tmr.export())

    def other_loop():
        async def calls():
            out = {}
            for name, call in (
                    ("send", lambda: ep.send(b"send")),
                    ("send big", lambda: ep.send(bytes(3 << 20))),
                    ("send_nocopy", lambda: ep.send_nocopy(b"nocopy")),
                    ("sendv", lambda: ep.sendv([b"a", b"b"])),
                    ("request", lambda: ep.request(b"req", timeout=5)),
                    ("write", lambda: ep.write(lmr, rmr)),
                    ("read", lambda: ep.read(lmr, rmr)),
                    ("close", ep.close),
                    ("context close", b.close)):
                try:
                    await call()
                    out[name] = "done"
                except RuntimeError as exc:
                    out[name] = str(exc)
                except BaseException as exc:
                    out[name] = repr(exc)
            out["send_nowait"] = _outcome(lambda: ep.send_nowait(b"x"))
            out["sendv_nowait"] = _outcome(lambda: ep.sendv_nowait([b"x"]))
            out["close_nowait"] = _outcome(ep.close_nowait)
            return out
        return asyncio.run(calls())

    def no_loop():  # another thread, no loop running there
        return {"send_nowait": _outcome(lambda: ep.send_nowait(b"y")),
                "close_nowait": _outcome(ep.close_nowait),
                "alloc": _outcome(lambda: b.alloc(64)),
                "register": _outcome(lambda: b.register(bytearray(8))),
                "create_srq": _outcome(lambda: b.create_srq(64)),
                "query_pool": _outcome(b.query_pool),
                "context close_nowait": _outcome(b.close_nowait)}

    for fn in (other_loop, no_loop):
        out = await _in_thread(fn)
        bad = {k: v for k, v in out.items() if "another" not in v}
        assert not bad, bad
    # nothing of it reached the library: the endpoint is up, and the
    # first message the peer gets is this one
    assert ep.connected and not b.closed
    await ep.send(b"here")
    assert await asyncio.wait_for(srv.recv_bytes(), 30) == b"here"
    assert tmr.view == bytes(64)
    rmr.close()
    tmr.close()
    lmr.close()
    await ep.close()
    await srv.close()


async def test_receiving_refuses_other_loops(ctxs):
    """Receiving from another loop is refused too, also when a message is
    queued already (it would be taken from under the endpoint's own
    loop): the message stays for the loop the endpoint belongs to."""
    a, b = ctxs
    srv, ep = await _pair(a, b)
    await srv.send(b"queued")
    t = asyncio.ensure_future(srv.request(b"q", timeout=30))
    while not ep._core.queue or not ep._core.pending_requests:
        await asyncio.sleep(0.01)

    def other_loop():
        async def calls():
            out = {}
            for name, call in (("recv", ep.recv),
                               ("recv_bytes", ep.recv_bytes),
                               ("recv_msg", ep.recv_msg),
                               ("async for", lambda: ep.__anext__()),
                               ("recv_request", ep.recv_request),
                               ("wait_write_imm", ep.wait_write_imm),
                               ("wait_writable", ep.wait_writable)):
                try:
                    await asyncio.wait_for(call(), 5)
                    out[name] = "done"
                except RuntimeError as exc:
                    out[name] = str(exc)
                except BaseException as exc:
                    out[name] = repr(exc)
            return out
        return asyncio.run(calls())

    out = await _in_thread(other_loop)
    bad = {k: v for k, v in out.items() if "another" not in v}
    assert not bad, bad
    assert await asyncio.wait_for(ep.recv_bytes(), 30) == b"queued"
    req = await asyncio.wait_for(ep.recv_request(), 30)
    req.respond(b"a")
    assert await t == b"a"
    await ep.close()
    await srv.close()


async def test_group_refuses_other_loops_and_threads():
    async with rdmamsg.Context() as a, rdmamsg.Context() as b:
        sub = await b.join("239.1.9.12", role="subscriber")
        pub = await a.join("239.1.9.12", role="publisher")

        def other_loop():
            async def calls():
                out = {}
                for name, call in (("publish", lambda: pub.publish(b"p")),
                                   ("wait_writable", pub.wait_writable),
                                   ("recv", sub.recv),
                                   ("close", pub.close)):
                    try:
                        await call()
                        out[name] = "done"
                    except RuntimeError as exc:
                        out[name] = str(exc)
                    except BaseException as exc:
                        out[name] = repr(exc)
                out["publish_nowait"] = _outcome(
                    lambda: pub.publish_nowait(b"n"))
                return out
            return asyncio.run(calls())

        out = await _in_thread(other_loop)
        bad = {k: v for k, v in out.items() if "another" not in v}
        assert not bad, bad
        assert not pub.closed
        await pub.publish(b"here")
        m = await asyncio.wait_for(sub.recv(), 30)
        assert (m.seq, m.data) == (0, b"here")
        await pub.close()
        await sub.close()


async def test_endpoint_collected_in_another_thread(ctxs):
    """The last reference to an open endpoint dropped in another thread:
    its close (and the ResourceWarning) happen, and the C call is made
    from the loop's thread."""
    a, b = ctxs
    srv, ep = await _pair(a, b)
    core = ep._core
    threads = []
    real = type(core).close_nowait

    def spy(self, user):
        threads.append(threading.get_ident())
        real(self, user)

    core.close_nowait = spy.__get__(core)
    holder = [ep]
    del ep
    with pytest.warns(ResourceWarning, match="unclosed rdmamsg endpoint"):
        await _in_thread(lambda: (holder.clear(), gc.collect()))
        for _ in range(1000):
            if threads:
                break
            await asyncio.sleep(0.01)
    assert threads == [threading.get_ident()]
    await asyncio.wait_for(asyncio.shield(core.closed_fut), 30)
    await srv.close()
