"""Path failover at connect (issue 15) in Python: connect() over an address
list with failover="reconnect", the path events (on_path, ep.path_events,
the failed connect's exception), ep.path_stats(), and the bad inputs."""
import asyncio
import errno
import socket

import pytest

import rdmamsg
from conftest import echo_handler, pattern

DOWN = rdmamsg.PATH_DOWN
START = rdmamsg.FAILOVER_START
DONE = rdmamsg.FAILOVER_DONE
FAILED = rdmamsg.FAILOVER_FAILED


_held = []


@pytest.fixture(autouse=True)
def _release_held_ports():
    yield
    while _held:
        _held.pop().close()


async def dead_port(ctx):
    """A port of 127.0.0.1 nobody listens on: a socket bound to it and not
    listening, held until the test ends, so that a connect there is refused
    and no test running beside this one can listen there (a closed
    listener's port could be taken by another's listener).  ctx: unused,
    the call's shape."""
    del ctx
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    _held.append(s)
    return s.getsockname()[1]


# How a connect to a port nobody listens on fails: refused (softrdma's CM
# once timed out now and then, its TCP connect having reached its own
# socket; fixed).
DEAD = (-errno.ECONNREFUSED,)
DEAD_EXC = (ConnectionRefusedError,)


def kinds(events):
    return [(e.event, e.path) for e in events]


async def _sync_cb(events):
    return events.append


async def _async_cb(events):
    async def cb(ev):
        await asyncio.sleep(0)
        events.append(ev)
    return cb


@pytest.mark.parametrize("form", ["string", "list"])
@pytest.mark.parametrize("cb_kind", ["sync", "coroutine"])
async def test_failover_to_second_path(ctxs, form, cb_kind):
    a, b = ctxs
    # the live listener first: the dead port cannot be its port
    srv = await rdmamsg.start_server(echo_handler, "127.0.0.1:0", ctx=a)
    dead = await dead_port(a)
    addr = ("127.0.0.1:%d,127.0.0.1:%d" % (dead, srv.port)
            if form == "string"
            else [("127.0.0.1", dead), "127.0.0.1:%d" % srv.port])
    events = []
    cb = await (_sync_cb if cb_kind == "sync" else _async_cb)(events)
    ep = await rdmamsg.connect(addr, ctx=b, failover="reconnect",
                               on_path=cb, connect_timeout=30)
    # what the library reported, in order, is kept on the endpoint
    assert kinds(ep.path_events) == [(DOWN, 0), (START, 1), (DONE, 1)]
    first = ep.path_events[0]
    assert first.status in DEAD  # nobody listens there
    assert isinstance(first.error, DEAD_EXC)
    assert first.error.errno == -first.status
    assert [e.status for e in ep.path_events[1:]] == [0, 0]
    assert ep.path_events[2].error is None
    assert all(isinstance(e.event, rdmamsg.PathEventType)
               for e in ep.path_events)
    # the callback saw the same (a coroutine callback runs as a task)
    for _ in range(1000):
        if len(events) == 3:
            break
        await asyncio.sleep(0)
    assert events == list(ep.path_events)
    st = ep.path_stats()
    assert isinstance(st, rdmamsg.PathStats)
    assert (st.npaths, st.path, st.path_downs, st.failovers,
            st.failover_fails) == (2, 1, 1, 1, 0)
    assert st.last_failover_ns > 0
    # the connection carries messages: 100 echoed intact, in order
    for i in range(100):
        await ep.send(pattern(1 + (i * 97) % 3000, i))
    for i in range(100):
        assert await ep.recv_bytes() == pattern(1 + (i * 97) % 3000, i)
    assert ep.path_stats().failovers == 1  # no more events
    await ep.close()
    with pytest.raises(rdmamsg.NotConnected):
        ep.path_stats()
    srv.close()
    await asyncio.wait_for(srv.wait_closed(), 30)


async def test_every_path_dead(ctxs):
    """MAX_PATHS addresses, none listening: each path is reported down,
    then FAILOVER_FAILED, and connect raises the last path's error."""
    a, b = ctxs
    ports = [await dead_port(a) for _ in range(rdmamsg.MAX_PATHS)]
    events = []
    with pytest.raises(DEAD_EXC) as ei:
        await rdmamsg.connect([("127.0.0.1", p) for p in ports], ctx=b,
                              failover="reconnect", on_path=events.append,
                              connect_timeout=10)
    n = rdmamsg.MAX_PATHS
    want = [(DOWN, 0)]
    for i in range(1, n):
        want += [(START, i), (DOWN, i)]
    want.append((FAILED, n - 1))
    assert kinds(events) == want
    downs = [e.status for e in events if e.event == DOWN]
    assert all(st in DEAD for st in downs), events
    # the connect fails with the last path's error, as FAILOVER_FAILED says
    assert events[-1].status == downs[-1]
    assert ei.value.errno == -downs[-1]
    if downs[-1] == -errno.ECONNREFUSED:
        assert isinstance(ei.value, ConnectionRefusedError)
        assert ei.value.reason == rdmamsg.REJECT_NO_LISTENER
    assert ei.value.path_events == tuple(events)
    # the context stays usable: a good single address connects
    async with await rdmamsg.start_server(echo_handler, "127.0.0.1:0",
                                          ctx=a) as srv:
        async with await rdmamsg.connect(("127.0.0.1", srv.port), ctx=b,
                                         failover="off") as ep:
            await ep.send(b"still fine")
            assert await ep.recv_bytes() == b"still fine"
            assert ep.path_events == ()
            st = ep.path_stats()
            assert (st.npaths, st.path, st.path_downs, st.failovers) == \
                (1, 0, 0, 0)


async def test_refusal_is_not_a_path_failure(ctxs):
    """The peer refusing is not the path's fault: no failover."""
    a, b = ctxs
    events = []
    async with await rdmamsg.listen("127.0.0.1:0", ctx=a,
                                    accept=lambda p: (42, b"no")) as lst:
        addr = "127.0.0.1:%d,127.0.0.1:%d" % (lst.port, lst.port)
        with pytest.raises(ConnectionRefusedError) as ei:
            await rdmamsg.connect(addr, ctx=b, failover="reconnect",
                                  on_path=events.append, connect_timeout=30)
    assert ei.value.reason == 42
    assert events == [] and ei.value.path_events == ()


async def test_path_callback_error_is_reported(ctxs):
    """An exception in on_path goes to the loop's exception handler; the
    connect goes on."""
    a, b = ctxs
    seen = []
    loop = asyncio.get_running_loop()
    old = loop.get_exception_handler()
    loop.set_exception_handler(lambda lp, c: seen.append(c.get("exception")))

    def cb(ev):
        raise RuntimeError("path callback failed on %s" % ev.event.name)
    try:
        async with await rdmamsg.start_server(echo_handler, "127.0.0.1:0",
                                              ctx=a) as srv:
            dead = await dead_port(a)
            addr = ["127.0.0.1:%d" % dead, "127.0.0.1:%d" % srv.port]
            async with await rdmamsg.connect(addr, ctx=b, on_path=cb,
                                             failover="reconnect",
                                             connect_timeout=30) as ep:
                await ep.send(b"x")
                assert await ep.recv_bytes() == b"x"
                assert kinds(ep.path_events) == [(DOWN, 0), (START, 1),
                                                 (DONE, 1)]
    finally:
        loop.set_exception_handler(old)
    assert [type(e) for e in seen] == [RuntimeError] * 3
    assert "PATH_DOWN" in str(seen[0])


async def test_failover_bad_input(ctxs):
    a, b = ctxs
    d1, d2 = await dead_port(a), await dead_port(a)
    two = "127.0.0.1:%d,127.0.0.1:%d" % (d1, d2)
    # a list without the reconnect policy: -EINVAL
    for kw in ({}, {"failover": "off"}):
        with pytest.raises(rdmamsg.InvalidArgument) as ei:
            await rdmamsg.connect(two, ctx=b, **kw)
        assert isinstance(ei.value, ValueError)
        assert ei.value.errno == errno.EINVAL
        with pytest.raises(rdmamsg.InvalidArgument):
            await rdmamsg.connect([("127.0.0.1", d1), ("127.0.0.1", d2)],
                                  ctx=b, **kw)
    # MAX_PATHS + 1 entries
    nine = ",".join(["127.0.0.1:%d" % d1] * (rdmamsg.MAX_PATHS + 1))
    with pytest.raises(rdmamsg.InvalidArgument):
        await rdmamsg.connect(nine, ctx=b, failover="reconnect")
    with pytest.raises(rdmamsg.InvalidArgument):
        await rdmamsg.connect(nine.split(","), ctx=b, failover="reconnect")
    # bad entries of a list
    for bad in ("127.0.0.1:%d,,127.0.0.1:%d" % (d1, d2),
                "127.0.0.1:%d,127.0.0.1" % d1,
                "127.0.0.1:%d,127.0.0.1:0" % d1,
                "127.0.0.1:%d;127.0.0.1:%d" % (d1, d2),
                "127.0.0.1:%d," % d1):
        with pytest.raises(rdmamsg.InvalidArgument):
            await rdmamsg.connect(bad, ctx=b, failover="reconnect")
    with pytest.raises(ValueError):
        await rdmamsg.connect([], ctx=b, failover="reconnect")
    with pytest.raises(ValueError):
        await rdmamsg.connect(["127.0.0.1:%d,127.0.0.1:%d" % (d1, d2)],
                              ctx=b, failover="reconnect")
    with pytest.raises(TypeError):
        await rdmamsg.connect([b"127.0.0.1:1"], ctx=b, failover="reconnect")
    # a policy that is not one
    for policy in ("sideways", "RECONNECT", ""):
        with pytest.raises(ValueError):
            await rdmamsg.connect(two, ctx=b, failover=policy)
    for policy in (1, True, 2.0):
        with pytest.raises(TypeError):
            await rdmamsg.connect(two, ctx=b, failover=policy)
    with pytest.raises(TypeError):
        await rdmamsg.connect(two, ctx=b, failover="reconnect", on_path=5)
    # only the connecting side fails over
    with pytest.raises(rdmamsg.InvalidArgument):
        await rdmamsg.listen("127.0.0.1:0", ctx=a, failover="reconnect")
    with pytest.raises(rdmamsg.InvalidArgument):
        await rdmamsg.start_server(echo_handler, "127.0.0.1:0", ctx=a,
                                   failover="reconnect")
    with pytest.raises(TypeError):
        await rdmamsg.listen("127.0.0.1:0", ctx=a, on_path=print)
    with pytest.raises(ValueError):
        await rdmamsg.listen("127.0.0.1:0", ctx=a, failover="sideways")
    # "off" on a listener is the default and works
    async with await rdmamsg.start_server(echo_handler, "127.0.0.1:0", ctx=a,
                                          failover="off") as srv:
        async with await rdmamsg.connect(("127.0.0.1", srv.port),
                                         ctx=b) as ep:
            await ep.send(b"off")
            assert await ep.recv_bytes() == b"off"
