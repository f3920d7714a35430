"""Concurrent sending awaits of one endpoint leave in the order they were
started, also when some of them meet -EAGAIN (credits and backlog used up,
the copies ahead of the reader at RDMAMSG_COPY_AHEAD): a send that finds
room does not overtake one that waits for on_writable; a waiting send
that is cancelled is not sent and the others keep their order."""
import asyncio
import contextlib

import pytest

import rdmamsg
from conftest import pattern

WAIT = 60

#: the ways to run out of room: the copies of rendezvous sends ahead of
#: the reader (RDMAMSG_COPY_AHEAD), and a small receive window with no
#: backlog (small sends)
ROOM = {
    "copy_ahead": ({"RDMAMSG_COPY_AHEAD": "256k"}, {}),
    "backlog": ({}, {"recv_depth": 4, "send_backlog": 0}),
}

SIZES = [1, 300, 5000, 70000, 16, 200000, 2048, 9000, 131072, 40]


def plan_of(n: int):
    return [pattern(SIZES[i % len(SIZES)], i) for i in range(n)]


#: what a test sends last when it does not know how many messages go
MARKER = b"end of the stream"


async def _collect(a, opts, want_n, got, done):
    """A server that appends the messages of its one connection to got and
    completes done after want_n of them or the MARKER (not appended)."""
    async def handler(ep):
        while len(got) < want_n:
            m = await ep.recv_bytes()
            if m == MARKER:
                break
            got.append(m)
        done.set_result(None)
        await ep.wait_closed()
    return await rdmamsg.start_server(handler, "127.0.0.1:0", ctx=a,
                                      max_msg_size=1 << 20, **opts)


@contextlib.asynccontextmanager
async def _stream(ctxs, monkeypatch, room: str, n: int, extra: int = 0):
    """n planned messages (plan_of) and a connection with ROOM[room]'s
    limits to a _collect server that stops after n + extra: yields the
    client endpoint, the plan, the list the server fills and its done."""
    env, opts = ROOM[room]
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    a, b = ctxs
    got: list = []
    done = asyncio.get_running_loop().create_future()
    async with await _collect(a, opts, n + extra, got, done) as srv:
        ep = await rdmamsg.connect(("127.0.0.1", srv.port), ctx=b,
                                   max_msg_size=1 << 20, connect_timeout=60,
                                   **opts)
        yield ep, plan_of(n), got, done
        await ep.close()


def _send(ep, i: int, data: bytes):
    """One of the sending awaits, by i: send(), send() with an immediate
    value, sendv() and send_nocopy() (of unregistered bytes: copied)."""
    k = i % 4
    if k == 0:
        return ep.send(data)
    if k == 1:
        return ep.send(data, imm=i)
    if k == 2:
        return ep.sendv([data[:len(data) // 2], data[len(data) // 2:]])
    return ep.send_nocopy(data)


@pytest.mark.parametrize("room", sorted(ROOM))
async def test_concurrent_sends_keep_their_order(ctxs, monkeypatch, room):
    """200 send tasks of 1 B .. 195 KiB started at once, with so little
    room that most meet -EAGAIN: the peer gets all 200, whole, in the
    order the tasks were started, and every await returns."""
    async with _stream(ctxs, monkeypatch, room, 200) as (ep, plan, got,
                                                         done):
        sends = [asyncio.ensure_future(_send(ep, i, d))
                 for i, d in enumerate(plan)]
        await asyncio.wait_for(asyncio.gather(*sends), WAIT)
        await asyncio.wait_for(done, WAIT)
        assert [len(g) for g in got] == [len(p) for p in plan]
        assert got == plan


async def test_send_nowait_waits_behind_queued_sends(ctxs, monkeypatch):
    """While sends wait for room, send_nowait() raises BlockingIOError
    rather than overtake them, and wait_writable() returns once they went
    (or room came): what send_nowait() then sends follows them."""
    async with _stream(ctxs, monkeypatch, "copy_ahead", 60, 1) as (
            ep, plan, got, done):
        sends = [asyncio.ensure_future(ep.send(d)) for d in plan]
        await asyncio.sleep(0)  # each task posted or queued
        last = b"after the queued ones"
        refused = 0
        while True:
            try:
                ep.send_nowait(last)
                break
            except BlockingIOError:
                refused += 1
                await asyncio.wait_for(ep.wait_writable(), WAIT)
        assert refused > 0
        await asyncio.wait_for(asyncio.gather(*sends), WAIT)
        await asyncio.wait_for(done, WAIT)
        assert got == plan + [last]


def _indices_in_order(plan, got):
    """The indices in plan of got's messages when got is a subsequence of
    plan (each once, in plan's order), else None."""
    idx = []
    j = 0
    for g in got:
        while j < len(plan) and plan[j] != g:
            j += 1
        if j == len(plan):
            return None
        idx.append(j)
        j += 1
    return idx


@pytest.mark.parametrize("room", sorted(ROOM))
async def test_cancelled_waiting_sends_are_not_sent(ctxs, monkeypatch, room):
    """Every third of 150 send tasks is cancelled once all have started:
    those still waiting for room are not sent, those already posted are
    (cancelling does not unsend); the peer gets every other message, each
    once, in the order started, and nothing waits forever."""
    async with _stream(ctxs, monkeypatch, room, 150) as (ep, plan, got,
                                                         done):
        sends = [asyncio.ensure_future(_send(ep, i, d))
                 for i, d in enumerate(plan)]
        await asyncio.sleep(0)
        for t in sends[2::3]:
            t.cancel()
        res = await asyncio.wait_for(
            asyncio.gather(*sends, return_exceptions=True), WAIT)
        kept = [i for i in range(len(plan)) if i % 3 != 2]
        assert all(res[i] is None for i in kept)
        # a marker after them all: the stream is complete once it came
        await asyncio.wait_for(ep.send(MARKER), WAIT)
        await asyncio.wait_for(done, WAIT)
        # got is plan with some cancelled ones left out, in order, once each
        idx = _indices_in_order(plan, got)
        assert idx is not None, "a message out of order, twice or unknown"
        assert set(kept) <= set(idx)
        assert len(idx) < len(plan)  # some cancelled ones never went
