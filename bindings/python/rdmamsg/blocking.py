"""A small blocking layer for scripts: one private event loop per object.

    from rdmamsg import blocking
    with blocking.connect("127.0.0.1:18610") as ep:
        ep.send(b"hello")
        print(ep.recv_bytes())
        print(ep.request(b"get k", timeout=1.0))

Each call runs the asyncio API on the connection's own loop until it is
done; use the asyncio API for anything concurrent.
"""
from __future__ import annotations

import asyncio
from typing import Any, Optional, Tuple, Union

from . import _core

__all__ = ["BlockingEndpoint", "connect"]


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
        return self._loop.run_until_complete(coro)

    def _e(self) -> _core.Endpoint:
        if self._ep is None:
            raise _core.NotConnected(107, "the endpoint is closed")
        return self._ep

    def send(self, data: Any, *, imm: Optional[int] = None) -> None:
        """Send and wait until the peer has the message."""
        self._run(self._e().send(data, imm=imm))

    def recv(self) -> memoryview:
        """The next message (see Endpoint.recv)."""
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
