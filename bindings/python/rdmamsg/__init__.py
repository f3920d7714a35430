"""rdmamsg -- messaging over RDMA (InfiniBand, RoCE, iWARP, or softrdma on
machines without a NIC), native to asyncio.

    import asyncio, rdmamsg

    async def main():
        async with rdmamsg.Context() as ctx:
            async with await rdmamsg.connect("127.0.0.1:18610", ctx=ctx) as ep:
                await ep.send(b"hello")
                print(bytes(await ep.recv()))

    asyncio.run(main())

See bindings/python/README.md for the guide.

Multicast groups: ``async with await ctx.join("239.1.2.3") as g`` gives a
``Group`` that publishes (``await g.publish(data)``) and subscribes
(``async for msg in g``: ``GroupMessage(publisher, seq, data)``).
"""
from . import _errors
from ._core import (ACCESS_REMOTE_ATOMIC, ACCESS_REMOTE_READ,
                    ACCESS_REMOTE_WRITE, IOV_MAX, KEEP_THRESHOLD, MAX_PATHS,
                    MR_EXPORT_SIZE, PRIVATE_DATA_MAX, Context, Endpoint,
                    Group, GroupLoss, GroupMessage, GroupStats, Listener,
                    MemoryRegion, Message, PathEvent, PathEventType,
                    PathStats, PoolBuffer, Protocols, DcStats, BusyPollStats,
                    RemoteRegion, Request, Server,
                    SharedReceiveQueue, SrqStats, connect, get_context, join,
                    listen, live_contexts, log_to_logging, set_log_level,
                    start_server)
from ._errors import *  # noqa: F401,F403
from ._errors import (ERRNO_CLASSES, EndOfStream, Error, make_error,
                      strerror)
from ._ffi import ffi as _ffi
from ._ffi import lib as _lib

__version__ = "0.1.0"


def version() -> str:
    """The C library's version ("MAJOR.MINOR.PATCH")."""
    return _ffi.string(_lib.rdmamsg_version()).decode()


#: Library reject reasons (ConnectionRefusedError.reason).
REJECT_VERSION: int = _lib.RDMAMSG_REJECT_VERSION
REJECT_HANDSHAKE: int = _lib.RDMAMSG_REJECT_HANDSHAKE
REJECT_RESOURCES: int = _lib.RDMAMSG_REJECT_RESOURCES
REJECT_CLOSED: int = _lib.RDMAMSG_REJECT_CLOSED
REJECT_NO_LISTENER: int = _lib.RDMAMSG_REJECT_NO_LISTENER
#: A reconnect of failover="replay" named a session the peer does not know
#: (it restarted): nothing is replayed into a new session.
REJECT_SESSION: int = _lib.RDMAMSG_REJECT_SESSION
#: Most private data bytes of a connect with failover="replay".
HS_SESSION_USER: int = _lib.RDMAMSG_HS_SESSION_USER

#: Path events of a connect with failover="reconnect" or "replay", and of
#: a replay session's outages on either side (PathEvent.event).
PATH_DOWN = PathEventType.PATH_DOWN
FAILOVER_START = PathEventType.FAILOVER_START
FAILOVER_DONE = PathEventType.FAILOVER_DONE
FAILOVER_FAILED = PathEventType.FAILOVER_FAILED
#: Path events of apm=True (automatic path migration, InfiniBand only).
PATH_MIGRATED = PathEventType.PATH_MIGRATED
PATH_MIG_FAILED = PathEventType.PATH_MIG_FAILED

__all__ = [
    "ACCESS_REMOTE_ATOMIC", "ACCESS_REMOTE_READ", "ACCESS_REMOTE_WRITE",
    "KEEP_THRESHOLD", "MR_EXPORT_SIZE", "PRIVATE_DATA_MAX", "Context",
    "Endpoint", "Group", "GroupLoss", "GroupMessage", "GroupStats",
    "join", "Listener", "MemoryRegion", "Message", "PoolBuffer",
    "RemoteRegion", "Request", "Server", "SharedReceiveQueue", "SrqStats",
    "connect", "get_context", "listen", "live_contexts", "log_to_logging",
    "set_log_level", "start_server", "ERRNO_CLASSES", "make_error",
    "strerror", "version", "REJECT_VERSION", "REJECT_HANDSHAKE",
    "REJECT_RESOURCES", "REJECT_CLOSED", "REJECT_NO_LISTENER",
    "REJECT_SESSION", "HS_SESSION_USER",
    "MAX_PATHS", "PathEvent", "PathEventType", "PathStats", "PATH_DOWN",
    "FAILOVER_START", "FAILOVER_DONE", "FAILOVER_FAILED", "PATH_MIGRATED",
    "PATH_MIG_FAILED", "Protocols", "DcStats", "IOV_MAX", "BusyPollStats",
] + list(_errors.__all__)
