"""A small blocking layer for scripts: one private event loop per object.

    from rdmamsg import blocking
    with blocking.connect("127.0.0.1:18610") as ep:
        ep.send(b"hello")
        print(ep.recv_bytes())
        print(ep.request(b"get k", timeout=1.0))

    with blocking.join("239.1.2.3", role="subscriber") as g:
        msg = g.recv(timeout=5.0)      # GroupMessage(publisher, seq, data)

Each call runs the asyncio API on the connection's own loop until it is
done; use the asyncio API for anything concurrent.  A call interrupted
(KeyboardInterrupt, SystemExit) is cancelled before the exception goes on,
as an asyncio task would be: an interrupted recv() leaves nothing behind
to take the next message, an interrupted request() is cancelled
(rdmamsg_request_cancel); a send that went is not unsent.
"""
from __future__ import annotations

import asyncio
from typing import Any, Optional, Tuple, Union

from . import _core

__all__ = ["BlockingEndpoint", "BlockingGroup", "connect", "join"]


def _run(loop: asyncio.AbstractEventLoop, coro: Any) -> Any:
    """coro run on loop until it is done.  Interrupted (an exception out of
    the loop, not of coro: a KeyboardInterrupt while it waits), its task
    is cancelled and unwound before the exception goes on: left pending,
    it would run at the next call and take what that call waits for (a
    recv() interrupted would swallow the next message)."""
    task = loop.create_task(coro)
    try:
        return loop.run_until_complete(task)
    except BaseException:
        if not task.done():
            task.cancel()
            try:
                loop.run_until_complete(task)
            except BaseException:  # its CancelledError, or what it raised
                pass
        raise


class BlockingEndpoint:
    """An Endpoint driven by a private event loop (see module doc)."""

    def __init__(self, addr: Union[str, Tuple[str, int]],
                 **kwargs: Any) -> None:
        self._loop = asyncio.new_event_loop()
        self._ctx: Optional[_core.Context] = None
        self._ep: Optional[_core.Endpoint] = None
        try:
            self._ctx = self._run(self._make_ctx())
            self._ep = self._run(_core.connect(addr, ctx=self._ctx, **kwargs))
        except BaseException:
            self.close()
            raise

    async def _make_ctx(self) -> _core.Context:
        return _core.Context()

    def _run(self, coro: Any) -> Any:
        return _run(self._loop, coro)

    def _e(self) -> _core.Endpoint:
        if self._ep is None:
            raise _core.NotConnected(107, "the endpoint is closed")
        return self._ep

    def send(self, data: Any, *, imm: Optional[int] = None) -> None:
        """Send and wait until the peer has the message."""
        self._run(self._e().send(data, imm=imm))

    def recv(self) -> memoryview:
        """The next message (see Endpoint.recv).  A view of one of at
        least keep_threshold bytes holds a pool buffer until it is
        released (view.release(), or its last reference dropped):
        close() waits for that, as Context.close() does."""
        return self._run(self._e().recv())

    def recv_bytes(self) -> bytes:
        return self._run(self._e().recv_bytes())

    def request(self, data: Any, *, timeout: Optional[float] = None) -> bytes:
        return self._run(self._e().request(data, timeout=timeout))

    def close(self) -> None:
        """Close endpoint and context, then the private loop."""
        if self._loop.is_closed():
            return
        if self._ep is not None:
            self._run(self._ep.close())
            self._ep = None
        if self._ctx is not None:
            self._run(self._ctx.close())
            self._ctx = None
        self._loop.close()

    def __enter__(self) -> "BlockingEndpoint":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def connect(addr: Union[str, Tuple[str, int]],
            **kwargs: Any) -> BlockingEndpoint:
    """Connect (blocking); keyword arguments as for rdmamsg.connect()."""
    return BlockingEndpoint(addr, **kwargs)


class BlockingGroup:
    """A multicast Group driven by a private event loop (see module doc).
    The library only makes progress inside these calls: a subscriber that
    does not call recv() for long may be overrun (and told of the loss)."""

    def __init__(self, addr: str, **kwargs: Any) -> None:
        self._loop = asyncio.new_event_loop()
        self._ctx: Optional[_core.Context] = None
        self._g: Optional[_core.Group] = None
        try:
            self._ctx = self._run(self._make_ctx())
            self._g = self._run(_core.join(addr, ctx=self._ctx, **kwargs))
        except BaseException:
            self.close()
            raise

    async def _make_ctx(self) -> _core.Context:
        return _core.Context()

    def _run(self, coro: Any) -> Any:
        return _run(self._loop, coro)

    @property
    def group(self) -> _core.Group:
        """The asyncio Group (its counters, id, query())."""
        if self._g is None:
            raise _core.make_error(-32, "the group is closed")  # EPIPE
        return self._g

    def publish(self, data: Any) -> None:
        """Publish and wait until the message is sent (see Group.publish)."""
        self._run(self.group.publish(data))

    def recv(self, timeout: Optional[float] = None) -> Any:
        """The next GroupMessage (or GroupLoss with loss_items=True);
        TimeoutError after timeout seconds (None: no limit)."""
        return self._run(asyncio.wait_for(self.group.recv(), timeout))

    def close(self) -> None:
        """Leave the group, close the context, then the private loop."""
        if self._loop.is_closed():
            return
        if self._g is not None:
            self._run(self._g.close())
            self._g = None
        if self._ctx is not None:
            self._run(self._ctx.close())
            self._ctx = None
        self._loop.close()

    def __enter__(self) -> "BlockingGroup":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def join(addr: str, **kwargs: Any) -> BlockingGroup:
    """Join a multicast group (blocking); keyword arguments as for
    rdmamsg.join()."""
    return BlockingGroup(addr, **kwargs)
