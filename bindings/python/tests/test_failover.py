"""Path failover at connect (issue 15) in Python: connect() over an address
list with failover="reconnect", the path events (on_path, ep.path_events,
the failed connect's exception), ep.path_stats(), the bad inputs; and
reconnect-and-replay (failover="replay", session_linger, ep._test_break)."""
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
    # one attempt after the failure: the FAILOVER_START of path 1
    assert st.attempts == 1
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


# ---------------------------------------------------------------------------
# Reconnect and replay (failover="replay"): a connection that fails once up
# is reconnected and what the peer did not receive is sent again.
# ---------------------------------------------------------------------------

N_REPLAY = 2000
BREAKS = (500, 1000, 1500)
WAIT = 60  # seconds: generous, only a bound on a hang


def replay_msg(i, max_size):
    """Message i: its index, then a pattern; mixed sizes up to max_size."""
    size = 4 + (i * 7919) % (max_size - 3)
    return i.to_bytes(4, "little") + pattern(size - 4, i)


async def until(cond, what):
    """Wait (no time bound but WAIT, against a hang) for cond()."""
    loop = asyncio.get_running_loop()
    end = loop.time() + WAIT
    while not cond():
        assert loop.time() < end, "waited %d s for %s" % (WAIT, what)
        await asyncio.sleep(0.005)


def count(events, kind):
    return sum(1 for e in events if e.event == kind)


def check_outages(events, n):
    """n outages, each PATH_DOWN, (FAILOVER_START, PATH_DOWN)* for attempts
    that did not make it, FAILOVER_START, FAILOVER_DONE; no FAILED."""
    ev = [e.event for e in events]
    assert count(events, FAILED) == 0, events
    assert count(events, DONE) == n, events
    i = 0
    for _ in range(n):
        assert ev[i] == DOWN, events
        i += 1
        while ev[i] == START and ev[i + 1] == DOWN:
            i += 2
        assert ev[i:i + 2] == [START, DONE], events
        i += 2
    assert i == len(ev), events
    assert all(e.status == 0 for e in events if e.event != DOWN)
    assert all(e.status < 0 for e in events if e.event == DOWN)


@pytest.mark.parametrize("breaker,srq", [("client", False),
                                         ("server", False),
                                         ("both", False), ("both", True)])
async def test_replay_across_breaks(ctxs, breaker, srq):
    """N messages of mixed sizes each way with 3 breaks in the middle:
    every message arrives exactly once, in order, intact; the client's
    path events show each outage.  With srq both sides receive through
    an SRQ of their context."""
    a, b = ctxs
    sa = a.create_srq(max_bufs=256, buf_size=32768) if srq else None
    sb = b.create_srq(max_bufs=256, buf_size=32768) if srq else None
    got = []  # what the server received
    srv_eps = []
    srv_done = asyncio.get_running_loop().create_future()
    release = asyncio.Event()  # the handler's return closes its endpoint

    def breaks_by(side, k):
        return breaker == side or (breaker == "both" and
                                   (k % 2 == 0) == (side == "client"))

    async def handler(ep):
        srv_eps.append(ep)
        try:
            for i in range(N_REPLAY):
                m = await ep.recv_bytes()
                got.append(m)
                await ep.send(m)  # echoed: replay the other way too
                if i + 1 in BREAKS:
                    k = BREAKS.index(i + 1)
                    if breaks_by("server", k):
                        await until(lambda: ep.path_stats().failovers == k
                                    and ep.connected, "the server's "
                                    "reconnect %d" % k)
                        ep._test_break()
            # nothing more arrives: the end marker is next
            assert await ep.recv_bytes() == b"end"
            srv_done.set_result(None)
        except BaseException as exc:
            if not srv_done.done():
                srv_done.set_exception(exc)
            raise
        await release.wait()

    srv = await rdmamsg.start_server(handler, "127.0.0.1:0", ctx=a,
                                     session_linger=WAIT, srq=sa)
    events = []
    ep = await rdmamsg.connect(("127.0.0.1", srv.port), ctx=b,
                               failover="replay", on_path=events.append,
                               reconnect_timeout=WAIT, reconnect_tries=1000,
                               connect_timeout=WAIT, srq=sb)
    # messages of one to several fragments, some above KEEP_THRESHOLD and
    # above the rendezvous threshold (20 KiB on one host, 32 KiB between
    # hosts): both ends of a session send fragments up to the message
    # maximum, the accepting end too, since a rendezvous pull in flight
    # would not be replayed (the server echoes each message)
    mx = min(ep.max_msg_size, 48000)
    assert mx > rdmamsg.KEEP_THRESHOLD and mx > 32768
    echoed = []

    async def reader():
        for _ in range(N_REPLAY):
            echoed.append(await ep.recv_bytes())

    rd = asyncio.ensure_future(reader())
    for i in range(N_REPLAY):
        await ep.send(replay_msg(i, mx))
        if i + 1 in BREAKS:
            k = BREAKS.index(i + 1)
            if breaks_by("client", k):
                # the previous outage is over (the server may have made it)
                await until(lambda: count(events, DONE) == k,
                            "reconnect %d" % k)
                ep._test_break()
    await asyncio.wait_for(rd, WAIT)
    await ep.send(b"end")
    await asyncio.wait_for(srv_done, WAIT)
    want = [replay_msg(i, mx) for i in range(N_REPLAY)]
    assert len(got) == N_REPLAY and got == want
    assert len(echoed) == N_REPLAY and echoed == want
    assert max(len(m) for m in want) > mx - 100
    # each break was an outage, reconnected (events of both sides)
    await until(lambda: count(events, DONE) == len(BREAKS), "the last "
                "reconnect")
    check_outages(events, len(BREAKS))
    assert list(ep.path_events) == events
    st = ep.path_stats()
    assert (st.npaths, st.path, st.failovers, st.failover_fails) == \
        (1, 0, len(BREAKS), 0)
    assert st.path_downs >= len(BREAKS) and st.last_failover_ns > 0
    # every reconnect attempt was a FAILOVER_START event
    assert st.attempts == count(events, START) >= len(BREAKS)
    (sep,) = srv_eps
    await until(lambda: count(sep.path_events, DONE) == len(BREAKS),
                "the server's view")
    assert count(sep.path_events, FAILED) == 0
    assert count(sep.path_events, DOWN) >= len(BREAKS)
    assert ep.connected and sep.connected
    release.set()
    await ep.close()
    srv.close()
    await asyncio.wait_for(srv.wait_closed(), WAIT)
    for q in (sa, sb):
        if q is not None:
            await q.close()


@pytest.mark.parametrize("breaker", ["client", "server"])
async def test_replay_request_in_flight(ctxs, breaker):
    """A request whose answer is pending at the break is answered once:
    the handler runs once, the caller gets its response once."""
    a, b = ctxs
    calls = []
    gate = asyncio.Event()
    srv_eps = []

    async def answer(data):
        calls.append(bytes(data))
        await gate.wait()
        return bytes(data)[::-1]

    async def handler(ep):
        srv_eps.append(ep)
        async for m in ep:
            await ep.send(m)

    # keep-alives every 200 s: an answer queued during the outage must
    # go when the session resumes, not with the next keep-alive's credit
    srv = await rdmamsg.start_server(handler, "127.0.0.1:0", ctx=a,
                                     request_handler=answer,
                                     session_linger=WAIT, peer_timeout=600)
    events = []
    ep = await rdmamsg.connect(("127.0.0.1", srv.port), ctx=b,
                               failover="replay", on_path=events.append,
                               reconnect_timeout=WAIT, connect_timeout=WAIT,
                               peer_timeout=600)
    for round_ in range(2):
        q = b"question %d" % round_ + pattern(300, round_)
        fut = asyncio.ensure_future(ep.request(q))
        await until(lambda: len(calls) == round_ + 1, "the request")
        await until(lambda: srv_eps, "the server's endpoint")
        (srv_eps[0] if breaker == "server" else ep)._test_break()
        if round_ == 0:  # answered during the outage ...
            gate.set()
        else:  # ... or after it
            await until(lambda: count(events, DONE) == 2, "reconnect")
            gate.set()
        resp = await asyncio.wait_for(fut, WAIT)
        assert bytes(resp) == q[::-1]
        gate.clear()
        await until(lambda: count(events, DONE) == round_ + 1, "reconnect")
        # the connection carries messages on, and no second answer came
        await ep.send(b"after %d" % round_)
        assert await asyncio.wait_for(ep.recv_bytes(), WAIT) == \
            b"after %d" % round_
    assert len(calls) == 2
    assert ep.late_responses == 0
    check_outages(events, 2)
    await ep.close()
    srv.close()
    await asyncio.wait_for(srv.wait_closed(), WAIT)


async def test_replay_peer_restarted(ctxs):
    """A peer that restarted does not know the session: the reconnect is
    refused (REJECT_SESSION), the client's endpoint ends with
    ConnectionResetError, and the old accepted endpoint ends when its
    session linger runs out."""
    a, b = ctxs
    seen_reqs = []
    old = await rdmamsg.listen("127.0.0.1:0", ctx=a, session_linger=0.5)
    port = old.port
    events = []
    ep = await rdmamsg.connect(("127.0.0.1", port), ctx=b, failover="replay",
                               on_path=events.append, reconnect_tries=1000,
                               reconnect_timeout=WAIT, connect_timeout=WAIT)
    sep = await asyncio.wait_for(old.accept(), WAIT)
    await ep.send(b"hello")
    assert await sep.recv_bytes() == b"hello"
    # "restart" the server: its listener goes (the accepted endpoint
    # stays), a new one (another context: another process) takes the port
    await asyncio.wait_for(old.close(), WAIT)
    c = rdmamsg.Context()
    try:
        new = await rdmamsg.listen(("127.0.0.1", port), ctx=c,
                                   accept=seen_reqs.append)
        ep._test_break()
        with pytest.raises(ConnectionResetError):
            await asyncio.wait_for(ep.recv_bytes(), WAIT)
        assert seen_reqs == []  # the library refused it, not the filter
        assert events[0].event == DOWN and events[-1].event == FAILED
        assert events[-1].status == -errno.ECONNRESET
        assert not ep.connected
        await asyncio.wait_for(new.close(), WAIT)
    finally:
        await asyncio.wait_for(c.close(), WAIT)
    # the old server endpoint waited its linger, then ended
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(sep.recv_bytes(), WAIT)
    assert sep.path_events[0].event == DOWN
    assert sep.path_events[-1].event == FAILED
    assert sep.path_events[-1].status == -errno.ETIMEDOUT
    await sep.close()
    await ep.close()


async def test_replay_bad_input(ctxs):
    a, b = ctxs
    port = await dead_port(a)
    addr = ("127.0.0.1", port)
    bad_values = [
        ({"reconnect_timeout": 0}, rdmamsg.InvalidArgument),
        ({"reconnect_timeout": 3601}, rdmamsg.InvalidArgument),
        ({"reconnect_timeout": 1e300}, rdmamsg.InvalidArgument),
        ({"reconnect_timeout": float("nan")}, rdmamsg.InvalidArgument),
        ({"reconnect_timeout": float("inf")}, rdmamsg.InvalidArgument),
        ({"reconnect_timeout": -1}, ValueError),
        ({"reconnect_timeout": "10"}, TypeError),
        ({"reconnect_timeout": True}, TypeError),
        ({"reconnect_tries": 0}, rdmamsg.InvalidArgument),
        ({"reconnect_tries": 1001}, rdmamsg.InvalidArgument),
        ({"reconnect_tries": -1}, rdmamsg.InvalidArgument),
        ({"reconnect_tries": 2 ** 40}, rdmamsg.InvalidArgument),
        ({"reconnect_tries": 2.0}, TypeError),
        ({"reconnect_tries": "3"}, TypeError),
        ({"private_data": b"x" * (rdmamsg.HS_SESSION_USER + 1)},
         rdmamsg.InvalidArgument),
    ]
    for kw, exc in bad_values:
        with pytest.raises(exc):
            await rdmamsg.connect(addr, ctx=b, failover="replay", **kw)
    for kw, exc in bad_values:
        assert issubclass(exc, (ValueError, TypeError))
    # the pair needs the replay policy
    for policy in (None, "off", "reconnect"):
        for kw in ({"reconnect_timeout": 5}, {"reconnect_tries": 3}):
            with pytest.raises(rdmamsg.InvalidArgument):
                await rdmamsg.connect(addr, ctx=b, failover=policy, **kw)
    # session_linger is the accepting side's
    with pytest.raises(TypeError):
        await rdmamsg.connect(addr, ctx=b, failover="replay",
                              session_linger=5)
    for linger, exc in ((0, rdmamsg.InvalidArgument),
                        (3601, rdmamsg.InvalidArgument),
                        (1e300, rdmamsg.InvalidArgument),
                        (-1, ValueError)):
        with pytest.raises(exc):
            await rdmamsg.listen("127.0.0.1:0", ctx=a, session_linger=linger)
        with pytest.raises(exc):
            await rdmamsg.start_server(echo_handler, "127.0.0.1:0", ctx=a,
                                       session_linger=linger)
    # the connecting side's options are not a listener's
    with pytest.raises(rdmamsg.InvalidArgument):
        await rdmamsg.listen("127.0.0.1:0", ctx=a, failover="replay")
    for kw in ({"reconnect_timeout": 5}, {"reconnect_tries": 3}):
        with pytest.raises(TypeError):
            await rdmamsg.listen("127.0.0.1:0", ctx=a, **kw)
    # nothing was made
    assert not b._eps and not a._eps and not a._listeners
    assert rdmamsg.REJECT_SESSION not in (
        rdmamsg.REJECT_VERSION, rdmamsg.REJECT_HANDSHAKE,
        rdmamsg.REJECT_RESOURCES, rdmamsg.REJECT_CLOSED,
        rdmamsg.REJECT_NO_LISTENER)
    # good values work, and _test_break needs a connection
    async with await rdmamsg.start_server(echo_handler, "127.0.0.1:0", ctx=a,
                                          session_linger=0.001) as srv:
        pd = b"p" * rdmamsg.HS_SESSION_USER
        ep = await rdmamsg.connect(("127.0.0.1", srv.port), ctx=b,
                                   failover="replay", private_data=pd,
                                   reconnect_timeout=0.0001,
                                   reconnect_tries=1, connect_timeout=WAIT)
        await ep.send(b"ok")
        assert await ep.recv_bytes() == b"ok"
        await ep.close()
        with pytest.raises(rdmamsg.NotConnected):
            ep._test_break()


async def test_apm_where_the_device_has_none(ctxs):
    """apm=True on both sides: softrdma's default (RoCE) device has no path
    migration, so no alternate is loaded and the connection works as
    without; a value that is not a bool is refused."""
    a, b = ctxs
    srv = await rdmamsg.start_server(echo_handler, "127.0.0.1:0", ctx=a,
                                     apm=True)
    ep = await rdmamsg.connect(("127.0.0.1", srv.port), ctx=b, apm=True,
                               connect_timeout=30)
    st = ep.path_stats()
    assert (st.apm, st.migrations, st.mig_fails) == (False, 0, 0)
    for i in range(50):
        await ep.send(pattern(1 + i * 13, i))
    for i in range(50):
        assert await ep.recv_bytes() == pattern(1 + i * 13, i)
    await ep.close()
    for bad in ("yes", 1, 0.0):
        with pytest.raises(TypeError):
            await rdmamsg.connect(("127.0.0.1", srv.port), ctx=b, apm=bad)
    srv.close()
    await asyncio.wait_for(srv.wait_closed(), 30)
    assert rdmamsg.PATH_MIGRATED == 5 and rdmamsg.PATH_MIG_FAILED == 6
